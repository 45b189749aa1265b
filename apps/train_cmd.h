/* `edgert train`: train a classifier on an IDX dataset (apps/train_cmd.c). */
#ifndef ERT_APPS_TRAIN_CMD_H
#define ERT_APPS_TRAIN_CMD_H

/* argv[1] is "train". Returns the exit status (0 ok, 1 error, 2 usage). */
int edgert_cmd_train(int argc, char **argv);
/* Usage lines for the CLI's help text (a literal, concatenated into it). */
#define EDGERT_TRAIN_USAGE                                                                  \
    "  train MODEL|small-cnn --data DIR [--epochs N] [--batch N] [--lr F]\n"                 \
    "        [--optim sgd|adam|adamw] [--momentum F] [--weight-decay F]\n"                   \
    "        [--schedule constant|cosine] [--warmup N] [--val-split F] [--limit N]\n"        \
    "        [--last-n N] [--classes LIST] [--checkpoint FILE] [--resume FILE]\n"            \
    "        [--export OUT.ert] [--threads N] [--seed N] [--max-steps N]\n"                  \
    "        [--device cpu|cuda|auto] [--json]\n"                                            \
    "      train on an IDX dataset (MNIST/Fashion-MNIST layout) or an ImageFolder\n"        \
    "      (DIR/<class>/*.jpg|pgm|ppm, or DIR/train + DIR/test); progress on\n"             \
    "      stderr (or JSON lines on stdout), validation accuracy per epoch, test\n"          \
    "      accuracy at the end. MODEL (.ert/.onnx) is fine-tuned: --last-n N\n"             \
    "      trains only the last N layers with parameters. --classes 0-7 keeps\n"            \
    "      only those labels of IDX data (the head keeps all classes).\n"                   \
    "      --device (default cpu): cuda trains on the GPU (no checkpoints there\n"           \
    "      yet), auto picks cuda when it can"

#endif

/* `edgert train`: train a classifier on an IDX dataset (apps/train_cmd.c). */
#ifndef ERT_APPS_TRAIN_CMD_H
#define ERT_APPS_TRAIN_CMD_H

/* argv[1] is "train". Returns the exit status (0 ok, 1 error, 2 usage). */
int edgert_cmd_train(int argc, char **argv);
/* Synopsis for `edgert --help` (a literal, concatenated into it); the full
 * text is `edgert train --help`. */
#define EDGERT_TRAIN_SYNOPSIS                                                                \
    "  train MODEL|small-cnn --data DIR [--epochs N] [--batch N] [--lr F] [--optim O]\n"    \
    "              [--shape NAME=DIMS]... [--device cpu|cuda|auto] [--checkpoint FILE]\n"    \
    "              [--resume FILE] [--export OUT.ert] [--json] ...\n"                       \
    "      train a classifier on an IDX dataset or an ImageFolder, on the CPU or\n"         \
    "      the GPU (checkpoints and resume work on both)\n"

#endif

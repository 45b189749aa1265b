/* `edgert quantize`: post-training int8 quantization (apps/quantize_cmd.c). */
#ifndef ERT_APPS_QUANTIZE_CMD_H
#define ERT_APPS_QUANTIZE_CMD_H

/* argv[1] is "quantize". Returns the exit status (0 ok, 1 error, 2 usage). */
int edgert_cmd_quantize(int argc, char **argv);
/* Synopsis for `edgert --help`; the full text is `edgert quantize --help`. */
#define EDGERT_QUANTIZE_SYNOPSIS                                                                   \
    "  quantize MODEL --calib DIR|IDX|NPY... --out OUT.ert|OUT.onnx [--method minmax|percentile|\n" \
    "              entropy] [--per-channel|--per-tensor] [--keep-float PATTERN] [--max-drop X]\n"  \
    "              [--calib-labels FILE] [--eval DIR|IDX|NPY --eval-labels FILE] [--json] ...\n"    \
    "      int8 post-training quantization (QDQ form) from a calibration set\n"

#endif

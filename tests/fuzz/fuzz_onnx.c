/* libFuzzer target: ONNX protobuf bytes -> ert_model_load_memory (the ONNX
 * loader; inputs that happen to carry the .ert magic go to the .ert reader,
 * which is fine). External data is refused from memory, so no file access. */
#include "edgert.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ert_context *ctx;
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 0;
    ert_model *m = NULL;
    if (ert_model_load_memory(ctx, data, size, 0, &m) == ERT_OK) {
        ert_tensor_info ti;
        for (int i = 0; i < ert_model_n_inputs(m); i++) ert_model_input_info(m, i, &ti);
        for (int i = 0; i < ert_model_n_outputs(m); i++) ert_model_output_info(m, i, &ti);
        ert_model_free(m);
    } else if (ert_last_error(ctx)[0] == 0) {
        __builtin_trap(); /* every failure must say why */
    }
    ert_context_free(ctx);
    return 0;
}

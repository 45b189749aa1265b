/* libFuzzer target: .ert bytes -> ert_model_load_memory, both the copying path
 * and the in-place (ERT_LOAD_NO_COPY) path, then the public queries on a
 * model that loaded. Any crash, sanitizer report or leak is a bug; a status is
 * the expected outcome for garbage. Also linked into fuzz_regress. */
#include "edgert.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void poke(ert_model *m) {
    ert_tensor_info ti;
    for (int i = 0; i < ert_model_n_inputs(m); i++) ert_model_input_info(m, i, &ti);
    for (int i = 0; i < ert_model_n_outputs(m); i++) ert_model_output_info(m, i, &ti);
    for (int i = 0; i < ert_model_n_nodes(m); i++) {
        (void)ert_model_node_op(m, i);
        (void)ert_model_node_name(m, i);
    }
    (void)ert_model_n_params(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ert_context *ctx;
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 0;
    ert_model *m = NULL;
    if (ert_model_load_memory(ctx, data, size, 0, &m) == ERT_OK) {
        poke(m);
        ert_model_free(m);
    } else if (ert_last_error(ctx)[0] == 0) {
        __builtin_trap(); /* every failure must say why */
    }
    /* In place: the buffer must be 64-byte aligned and outlive the model. */
    void *al = aligned_alloc(64, (size + 63) / 64 * 64 + 64);
    if (al) {
        memcpy(al, data, size);
        m = NULL;
        if (ert_model_load_memory(ctx, al, size, ERT_LOAD_NO_COPY, &m) == ERT_OK) {
            poke(m);
            ert_model_free(m);
        }
        free(al);
    }
    ert_context_free(ctx);
    return 0;
}

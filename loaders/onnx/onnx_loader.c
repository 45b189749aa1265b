/* STUB: ONNX loader to be implemented (issue #3). */
#include "ert_internal.h"

ert_status ert_onnx_read(ert_context *ctx, const void *data, size_t size, const char *dir, ert_model **out) {
    (void)data; (void)size; (void)dir; (void)out;
    return ert_set_error(ctx, ERT_E_UNSUPPORTED, "ONNX loading is not implemented yet: convert the model to .ert");
}

ert_status ert_tensor_load_pb(ert_context *ctx, const char *path, ert_tensor_info *info,
                              void **data, size_t *bytes) {
    (void)path; (void)info; (void)data; (void)bytes;
    return ert_set_error(ctx, ERT_E_UNSUPPORTED, "TensorProto reading is not implemented yet");
}

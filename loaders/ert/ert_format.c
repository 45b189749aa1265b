/* STUB: .ert reader/writer to be implemented. */
#include "ert_internal.h"

ert_status ert_format_write(const ert_model *m, const char *path) {
    (void)path;
    return ert_set_error(m->ctx, ERT_E_UNSUPPORTED, ".ert writer not implemented yet");
}

ert_status ert_format_read(ert_context *ctx, const void *data, size_t size, bool borrow, ert_model **out) {
    (void)data; (void)size; (void)borrow; (void)out;
    return ert_set_error(ctx, ERT_E_UNSUPPORTED, ".ert reader not implemented yet");
}

bool ert_format_sniff(const void *data, size_t size) {
    (void)data; (void)size;
    return false;
}

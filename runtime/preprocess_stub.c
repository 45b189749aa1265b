/* GPU preprocessing entry points in a build without CUDA (the real ones are
 * in kernels/cuda/preprocess.cu): every call reports ERT_E_UNSUPPORTED. */
#include "ert_internal.h"

#ifndef ERT_HAVE_CUDA
ert_status ert_preprocessor_create(ert_context *ctx, int max_w, int max_h, const ert_preprocessor_options *o,
                                   ert_preprocessor **out) {
    (void)max_w;
    (void)max_h;
    (void)o;
    if (out) *out = NULL;
    return ert_set_error(ctx, ERT_E_UNSUPPORTED, "GPU preprocessing needs an edgert built with CUDA");
}

size_t ert_preprocessor_output_bytes(const ert_preprocessor *p) {
    (void)p;
    return 0;
}

ert_status ert_preprocessor_run(ert_preprocessor *p, const uint8_t *frame, int w, int h, size_t stride,
                                ert_pixel_format fmt, void *dst) {
    (void)p, (void)frame, (void)w, (void)h, (void)stride, (void)fmt, (void)dst;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_preprocessor_run_device(ert_preprocessor *p, const uint8_t *frame, int w, int h, size_t stride,
                                       ert_pixel_format fmt, void *dst_dev) {
    (void)p, (void)frame, (void)w, (void)h, (void)stride, (void)fmt, (void)dst_dev;
    return ERT_E_UNSUPPORTED;
}

void ert_preprocessor_free(ert_preprocessor *p) { (void)p; }
#else
typedef int ert_preprocess_stub_unused; /* ISO C: no empty translation unit */
#endif

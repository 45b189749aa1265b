/* ctest `cuda_libs` (CUDA builds, tests/cuda/CMakeLists.txt): the lazily loaded
 * CUDA libraries (kernels/cuda/cuda_libs.h) resolve, without a GPU. The
 * `edgert` binary links none of cuBLAS/cuDNN (test cuda_deps); this proves the
 * other half: at the first CUDA session every function the backend calls is
 * found in them, and a call through the table reaches the real library.
 * Needs the libraries on this machine (they were found at configure time),
 * not a driver or a GPU; where they cannot be loaded (the aarch64 build under
 * qemu: Debian's cross root has no aarch64 libz, which cuDNN's parts need) it
 * checks the error instead and reports SKIPPED with the reason. */
#define ERT_CUDA_LIBS_IMPL /* the table's fields by name, not the call-site macros */
#include "cuda_libs.h"
#include "testutil.h"

#include <string.h>

int main(void) {
    ert_context *ctx = NULL;
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    printf("cuda_libs: this build: %s\n", ert_cuda_libs_describe());
    ert_status st = ert_cuda_libs_load(ctx);
    if (st != ERT_OK) {
        /* Not a crash, and a message naming what is missing: all a machine
         * without the libraries (or their dependencies) can show. */
        const char *msg = ert_last_error(ctx);
        printf("cuda_libs: load: %s: %s\n", ert_status_str(st), msg);
        CHECK(st == ERT_E_CUDA, "status %s", ert_status_str(st));
        CHECK(strstr(msg, "could not be loaded") != NULL, "the message names no library: %s", msg);
        CHECK(ert_cuda_libs_load(ctx) == st, "a second load answers differently");
        int rc = ert_test_fail ? ert_test_finish("cuda_libs")
                               : ert_test_skip("cuda_libs", "the CUDA libraries cannot be loaded on this machine");
        ert_context_free(ctx);
        return rc;
    }
    CHECK_OK(ert_cuda_libs_load(ctx), ctx); /* a second call is a check, not a reload */
    const ert_cuda_libs *t = ert_cuda_libs_get();
    int n_lazy = 0;
#define ERT_T_CHECK(f, lib)                                        \
    CHECK(t->f != NULL, "%s (%s) not resolved", #f, #lib); \
    n_lazy++;
#ifdef ERT_CUBLAS_LAZY
    ERT_CUBLAS_FUNCS(ERT_T_CHECK)
#endif
#if defined(ERT_CUDNN_LAZY) && defined(ERT_HAVE_CUDNN)
    ERT_CUDNN_FUNCS(ERT_T_CHECK)
    /* through the table: the real cuDNN's text, not ours */
    const char *msg = t->cudnnGetErrorString ? t->cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM) : NULL;
    CHECK(msg && strstr(msg, "BAD_PARAM"), "cudnnGetErrorString(BAD_PARAM) = %s", msg ? msg : "(null)");
#endif
    printf("cuda_libs: %d functions resolved\n", n_lazy);
    if (n_lazy == 0) {
        ert_context_free(ctx);
        return ert_test_skip("cuda_libs", "nothing is loaded lazily in this build (all linked statically)");
    }
    ert_context_free(ctx);
    return ert_test_finish("cuda_libs");
}

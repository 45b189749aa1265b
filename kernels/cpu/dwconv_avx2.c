/* The AVX2+FMA copy of the direct depthwise kernel (dwconv_isa.h says why
 * each copy is a file of its own). */
#if defined(__x86_64__) && defined(__GNUC__)
#include "dwconv_isa.h"

__attribute__((target("avx2,fma"))) void ert_cpu_dw_run_avx2(void *arg, int64_t t0, int64_t t1) {
    dw_body_v(arg, t0, t1);
}
__attribute__((target("avx2,fma"))) void ert_cpu_dwcb_run_avx2(void *arg, int64_t t0, int64_t t1) {
    dwcb_blocks(arg, t0, t1, ert_cpu_dw_run_avx2, NULL, 1);
}
#else
typedef int ert_dwconv_x86_only; /* ISO C wants a declaration in every file */
#endif

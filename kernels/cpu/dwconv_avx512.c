/* The AVX-512F copy of the direct depthwise kernel: the same body with
 * 16-float vectors (dwconv_isa.h says why each copy is a file of its own). */
#if defined(__x86_64__) && defined(__GNUC__)
#define DW_WIDE16 1
#include "dwconv_isa.h"

__attribute__((target("avx512f,avx2,fma"))) void ert_cpu_dw_run_avx512(void *arg, int64_t t0, int64_t t1) {
    dw_body_v(arg, t0, t1);
}
__attribute__((target("avx512f,avx2,fma"))) void ert_cpu_dwcb_run_avx512(void *arg, int64_t t0, int64_t t1) {
    dwcb_blocks(arg, t0, t1, ert_cpu_dw_run_avx512, ert_cpu_act_row_avx512, 2);
}
#else
typedef int ert_dwconv_x86_only; /* ISO C wants a declaration in every file */
#endif

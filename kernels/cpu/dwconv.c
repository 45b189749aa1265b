/* Direct 2-D depthwise convolution, the fast twin of conv.c's dw_run (which
 * stays as the plain oracle and handles every case this file declines).
 *
 * x is (N, C, H, W), y is (N, M, OH, OW), M = C * mult, NCHW as everywhere in
 * the CPU backend; w is (M, 1, KH, KW). Claims: KH, KW <= 7, stride 1 or 2 on
 * each axis, any dilation and padding.
 *
 * Per output row the whole KH x KW window is accumulated in registers,
 * VL = 8 or 16 (x86) or 4 (NEON) output columns at a time (vectorised along the row: in NCHW the
 * channels of one pixel are a plane apart), then bias, residual and the
 * activation are applied before the single store. The plain kernel instead
 * makes one load-FMA-store pass over the row per tap (3 memory operations
 * per FMA; here about one). Stride 2 loads 2*VL consecutive inputs and
 * keeps the even lanes, except in a zero-padded plane copy (dw_plane_padded,
 * planes up to ~64x64), whose rows are split into their even
 * and odd columns as they are copied: each tap is then one plain load.
 * Columns whose window leaves the image (the padding border)
 * take a scalar path with bounds checks.
 *
 * The body is dwconv_impl.h, compiled three times on x86-64 (8-wide for
 * baseline SSE2 here, for AVX2+FMA in dwconv_avx2.c, 16-wide for AVX-512F in
 * dwconv_avx512.c: one file each, dwconv_isa.h; picked at run time);
 * on aarch64 the GNU vectors are NEON q-registers (FMLA, UZP1 for stride 2).
 * Parallel over (image, output channel) planes, like the oracle.
 *
 * Small planes (rows under 32 wide: the 28x28 to 7x7 maps) with multiplier 1
 * and dilation 1 take dwconv_cb.h instead: 8 (x86; 16 in the AVX-512 copy) or
 * 4 (NEON) channels at a time, transposed into a padded channels-innermost
 * buffer, vectorised across channels, parallel over (image, channel block). */
#include "dwconv_isa.h"

bool ert_cpu_dw2d_fits(const ert_dw2d *p) {
    return !ert_kernel_choice_of(p->choice).dw_plain && p->KH >= 1 && p->KH <= DW_KMAX &&
           p->KW >= 1 && p->KW <= DW_KMAX && (p->sh == 1 || p->sh == 2) && (p->sw == 1 || p->sw == 2) &&
           p->dh >= 1 && p->dw >= 1 && p->OW >= 1 && p->OH >= 1;
}

static void dw_run_base(void *arg, int64_t t0, int64_t t1) { dw_body_v(arg, t0, t1); }
/* the channel-blocked path (dwconv_cb.h): tasks are (image, CB channels) */
static void dwcb_run_base(void *arg, int64_t t0, int64_t t1) { dwcb_blocks(arg, t0, t1, dw_run_base, NULL, 1); }

/* The widest copy the CPU runs and p->choice's kernel cap allows (the
 * SGEMM's cap, cpu_gemm.h, caps both). __builtin_cpu_supports reads cpuid and, for
 * AVX and AVX-512, whether the OS saves those registers (XGETBV), once per
 * process in the compiler's runtime. */
bool ert_cpu_dw2d_cblocked(const ert_dw2d *p) { return ert_cpu_dw2d_fits(p) && dwcb_fits(p); }

void ert_cpu_dw2d(const ert_dw2d *p, struct ert_threadpool *pool) {
    const bool cb = dwcb_fits(p);
    ert_par_fn fn = cb ? dwcb_run_base : dw_run_base;
    int64_t ch = DWCB; /* channels per channel-blocked task */
#if defined(__x86_64__) && defined(__GNUC__)
    ert_cpu_gemm_kernel cap = ert_cpu_kernel_cap(p->choice);
    if (cap >= ERT_CPU_GEMM_AVX512 && __builtin_cpu_supports("avx512f"))
        fn = cb ? ert_cpu_dwcb_run_avx512 : ert_cpu_dw_run_avx512, ch = 2 * DWCB;
    else if (cap >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        fn = cb ? ert_cpu_dwcb_run_avx2 : ert_cpu_dw_run_avx2;
#endif
    if (cb) ert_parallel_for(pool, p->N * ((p->M + ch - 1) / ch), 1, fn, (void *)p);
    else ert_parallel_for(pool, p->N * p->M, 1, fn, (void *)p);
}

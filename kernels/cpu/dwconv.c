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
 * keeps the even lanes. Columns whose window leaves the image (the padding border)
 * take a scalar path with bounds checks.
 *
 * The body is dwconv_impl.h, compiled three times on x86-64 (8-wide for
 * baseline SSE2 and for AVX2+FMA, 16-wide for AVX-512F; picked at run time);
 * on aarch64 the GNU vectors are NEON q-registers (FMLA, UZP1 for stride 2).
 * Parallel over (image, output channel) planes, like the oracle.
 *
 * Small planes (rows under 32 wide: the 28x28 to 7x7 maps) with multiplier 1
 * and dilation 1 take dwconv_cb.h instead: 8 (x86; 16 in the AVX-512 copy) or
 * 4 (NEON) channels at a time, transposed into a padded channels-innermost
 * buffer, vectorised across channels, parallel over (image, channel block). */
#include "act_vec.h"
#include "cpu_gemm.h"
#include "dwconv_cb.h"
#include "cpu_kernels.h"

#include <string.h>

#define DW_KMAX 7
/* vector length: one AVX register on x86; one NEON q-register on aarch64
 * (gcc scalarises parts of 8-wide generic vectors there) */
#if defined(__aarch64__)
#define VL 4
#define DW_EVEN {0, 2, 4, 6}
#define DW_EVEN_LIST 0, 2, 4, 6
#else
#define VL 8
#define DW_EVEN {0, 2, 4, 6, 8, 10, 12, 14}
#define DW_EVEN_LIST 0, 2, 4, 6, 8, 10, 12, 14
#endif
/* the even lanes of (lo, hi): gcc's __builtin_shuffle; clang (the fuzz and
 * sanitizer builds) spells it __builtin_shufflevector with constant lanes */
#if defined(__clang__)
#define DW_SHUFFLE_EVEN(lo, hi) __builtin_shufflevector((lo), (hi), DW_EVEN_LIST)
#else
#define DW_SHUFFLE_EVEN(lo, hi) __builtin_shuffle((lo), (hi), (dw_v8i)DW_EVEN)
#endif

typedef float dw_v8 __attribute__((vector_size(VL * sizeof(float))));
typedef int dw_v8i __attribute__((vector_size(VL * sizeof(int))));
#define DW_V dw_v8

bool ert_cpu_dw2d_fits(const ert_dw2d *p) {
    return !ert_kernel_choice_of(p->choice).dw_plain && p->KH >= 1 && p->KH <= DW_KMAX &&
           p->KW >= 1 && p->KW <= DW_KMAX && (p->sh == 1 || p->sh == 2) && (p->sw == 1 || p->sw == 2) &&
           p->dh >= 1 && p->dw >= 1 && p->OW >= 1 && p->OH >= 1;
}

#define DW_PADW 160 /* the padded row buffers of dw_row_padded */
/* rows narrower than this take dw_row_padded (when the whole padded plane,
 * dw_plane_padded, tried first, does not fit): the 14- and 7-wide maps, where
 * the border is most of the row; from 32 up a copy per row cost more than the
 * scalar border saves (also with 16-wide vectors) */
#define DW_PAD_BELOW 32
/* kernels this wide take the padded copies at every row width: a 7x7 window
 * leaves 3 border columns per side, which the scalar path took at 49 taps
 * each (as many FMAs as the vector interior of a 56-wide row: ConvNeXt's
 * first stage) */
#define DW_PAD_KW 7
/* floats of dw_plane_padded's buffer (32 KiB of stack): ConvNeXt's 56x56 plane with its 7x7 window
 * (4340 floats with 16-lane rows) fits; at 4096 its rows took dw_row_padded, which copies 7 padded
 * input rows per output row (0.31 ms a layer) */
#define DW_PLANE_MAX 8192
#define DW_FN(name) name##_v
/* the activation pass over a finished row (still in L1) */
#define DW_ACT_ROW(x, n, a) ert_cpu_act_row((x), (n), (a))
#include "dwconv_impl.h"

static void dw_run_base(void *arg, int64_t t0, int64_t t1) { dw_body_v(arg, t0, t1); }
/* the channel-blocked path (dwconv_cb.h): tasks are (image, CB channels) */
static void dwcb_run_base(void *arg, int64_t t0, int64_t t1) { dwcb_blocks(arg, t0, t1, dw_run_base, NULL, 1); }

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void dw_run_avx2(void *arg, int64_t t0, int64_t t1) {
    dw_body_v(arg, t0, t1);
}
__attribute__((target("avx2,fma"))) static void dwcb_run_avx2(void *arg, int64_t t0, int64_t t1) {
    dwcb_blocks(arg, t0, t1, dw_run_avx2, NULL, 1);
}

/* The same body with 16-float vectors, for AVX-512F: half the blocks on the
 * 112- and 56-wide rows of a classifier's first stages, and a 14- or 7-wide
 * row in one block. */
#undef VL
#undef DW_V
#undef DW_FN
#undef DW_SHUFFLE_EVEN
#define VL 16
typedef float dw_v16 __attribute__((vector_size(VL * sizeof(float))));
typedef int dw_v16i __attribute__((vector_size(VL * sizeof(int))));
#define DW_V dw_v16
#define DW_FN(name) name##_z
#undef DW_ACT_ROW
/* 16 lanes in 512-bit instructions: SiLU after EfficientNet's depthwise
 * convs as two 8-lane halves with a division each was about a third of
 * their time */
#define DW_ACT_ROW(x, n, a) ert_cpu_act_row_avx512((x), (n), (a))
#if defined(__clang__)
#define DW_SHUFFLE_EVEN(lo, hi) __builtin_shufflevector((lo), (hi), 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#else
#define DW_SHUFFLE_EVEN(lo, hi) __builtin_shuffle((lo), (hi), (dw_v16i){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#endif
#include "dwconv_impl.h"

__attribute__((target("avx512f,avx2,fma"))) static void dw_run_avx512(void *arg, int64_t t0, int64_t t1) {
    dw_body_z(arg, t0, t1);
}
__attribute__((target("avx512f,avx2,fma"))) static void dwcb_run_avx512(void *arg, int64_t t0, int64_t t1) {
    dwcb_blocks(arg, t0, t1, dw_run_avx512, ert_cpu_act_row_avx512, 2);
}
#endif

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
        fn = cb ? dwcb_run_avx512 : dw_run_avx512, ch = 2 * DWCB;
    else if (cap >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        fn = cb ? dwcb_run_avx2 : dw_run_avx2;
#endif
    if (cb) ert_parallel_for(pool, p->N * ((p->M + ch - 1) / ch), 1, fn, (void *)p);
    else ert_parallel_for(pool, p->N * p->M, 1, fn, (void *)p);
}

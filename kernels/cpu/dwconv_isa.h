/* One vector width's copy of the direct depthwise kernel (dwconv_impl.h,
 * dwconv_cb.h): included once per translation unit, so that the copies,
 * each with every window size, stride and padding case unrolled, compile in
 * parallel (in one file they were the library's slowest compile: 82 s of a
 * 2-core Release build, 5 minutes under ASan, on the critical path of every
 * build).
 *   dwconv.c         baseline: SSE2 8-wide on x86-64, NEON 4-wide on aarch64
 *   dwconv_avx2.c    AVX2+FMA, 8-wide           (x86-64 only)
 *   dwconv_avx512.c  AVX-512F, 16-wide          (x86-64 only; DW_WIDE16)
 * The including file defines the copy's task entry points (target
 * attributes on x86); dwconv.c picks one at run time. */
#ifndef ERT_CPU_DWCONV_ISA_H
#define ERT_CPU_DWCONV_ISA_H
#include "act_vec.h"
#include "cpu_gemm.h"
#include "dwconv_cb.h"
#include "cpu_kernels.h"

#include <string.h>

#define DW_KMAX 7
#if defined(DW_WIDE16)
/* 16 floats, for AVX-512F: half the blocks on the 112- and 56-wide rows of a
 * classifier's first stages, and a 14- or 7-wide row in one block */
#define VL 16
#if defined(__clang__)
#define DW_SHUFFLE_EVEN(lo, hi) __builtin_shufflevector((lo), (hi), 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#else
#define DW_SHUFFLE_EVEN(lo, hi) __builtin_shuffle((lo), (hi), (dw_vi){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#endif
#if defined(__clang__)
#define DW_SHUFFLE_ODD(lo, hi) __builtin_shufflevector((lo), (hi), 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)
#else
#define DW_SHUFFLE_ODD(lo, hi) __builtin_shuffle((lo), (hi), (dw_vi){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31})
#endif
#else
/* vector length: one AVX register on x86; one NEON q-register on aarch64
 * (gcc scalarises parts of 8-wide generic vectors there) */
#if defined(__aarch64__)
#define VL 4
#define DW_EVEN {0, 2, 4, 6}
#define DW_EVEN_LIST 0, 2, 4, 6
#define DW_ODD {1, 3, 5, 7}
#define DW_ODD_LIST 1, 3, 5, 7
#else
#define VL 8
#define DW_EVEN {0, 2, 4, 6, 8, 10, 12, 14}
#define DW_EVEN_LIST 0, 2, 4, 6, 8, 10, 12, 14
#define DW_ODD {1, 3, 5, 7, 9, 11, 13, 15}
#define DW_ODD_LIST 1, 3, 5, 7, 9, 11, 13, 15
#endif
/* the even lanes of (lo, hi): gcc's __builtin_shuffle; clang (the fuzz and
 * sanitizer builds) spells it __builtin_shufflevector with constant lanes */
#if defined(__clang__)
#define DW_SHUFFLE_EVEN(lo, hi) __builtin_shufflevector((lo), (hi), DW_EVEN_LIST)
#define DW_SHUFFLE_ODD(lo, hi) __builtin_shufflevector((lo), (hi), DW_ODD_LIST)
#else
#define DW_SHUFFLE_EVEN(lo, hi) __builtin_shuffle((lo), (hi), (dw_vi)DW_EVEN)
#define DW_SHUFFLE_ODD(lo, hi) __builtin_shuffle((lo), (hi), (dw_vi)DW_ODD)
#endif
#endif

typedef float dw_vf __attribute__((vector_size(VL * sizeof(float))));
typedef int dw_vi __attribute__((vector_size(VL * sizeof(int))));
#define DW_V dw_vf

#define DW_PADW 160 /* the padded row buffers of dw_row_padded */
#define DW_RING_W 336 /* floats of a phase-split ring row (dw_plane_rows_s2): input rows up to ~320 wide */
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
#if defined(DW_WIDE16)
/* 16 lanes in 512-bit instructions: SiLU after EfficientNet's depthwise
 * convs as two 8-lane halves with a division each was about a third of
 * their time */
#define DW_ACT_ROW(x, n, a) ert_cpu_act_row_avx512((x), (n), (a))
#else
/* the activation pass over a finished row (still in L1) */
#define DW_ACT_ROW(x, n, a) ert_cpu_act_row((x), (n), (a))
#endif
#include "dwconv_impl.h"

/* the x86 copies' tasks (ert_parallel_for), in dwconv_avx2.c and dwconv_avx512.c */
#if defined(__x86_64__) && defined(__GNUC__)
void ert_cpu_dw_run_avx2(void *arg, int64_t t0, int64_t t1);
void ert_cpu_dwcb_run_avx2(void *arg, int64_t t0, int64_t t1);
void ert_cpu_dw_run_avx512(void *arg, int64_t t0, int64_t t1);
void ert_cpu_dwcb_run_avx512(void *arg, int64_t t0, int64_t t1);
#endif
#endif

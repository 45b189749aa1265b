/* aarch64 ASIMD SGEMM micro-kernel (picked at run time by matmul.c's
 * pick_ukr when HWCAP_ASIMD is set; the portable 6x16 kernel stays beside it).
 *
 * out (6 x 16, row stride ldo) = sum_k a[k*6+i] * b[k*16+j] over one packed
 * A panel (kc x 6) and one packed B panel (kc x 16), the panel layout of
 * matmul.c's pack_a_block / pack_b_*; then, with e, bias, residual and the
 * activation in registers before the store.
 *
 * Registers: 24 accumulators (6 rows x 4 q-registers) + 4 B vectors + 2 A
 * vectors = 30 of the 32 v-registers, so nothing spills. Each k step is
 * 3 loads (A as one q + one d register, B as two ldp q-pairs) and 24 FMLA by
 * element (`fmla v.4s, v.4s, v.s[lane]`): the A values are used straight from
 * their lanes, where the portable GNU-vector kernel needs 6 broadcasts (ld1r
 * or dup) per k. 8x12 would load even less per FMLA but 12 does not divide
 * the 256-column NC block the packing is sized for.
 *
 * SVE: the Jetson cores (Cortex-A78AE on Orin, Carmel on Xavier) have no SVE
 * and Thor's Neoverse V3AE has 128-bit SVE2, the same width as ASIMD, so an
 * SVE kernel would not do more FMAs per instruction anywhere we ship: not
 * written. */
#include "act_vec.h"
#include "cpu_gemm.h"

#if defined(__aarch64__) && defined(__GNUC__)
#include <arm_neon.h>

void ert_cpu_ukr_neon_6x16(int64_t kc, const float *restrict a, const float *restrict b, float *restrict out,
                           int64_t ldo, bool add, const ert_ukr_epi *e);

/* The store epilogue (cpu_gemm.h) on one q-register: act_vec.h's vectors are
 * NEON q-registers here (ERT_AV_N 4), so the copies are register moves. */
static inline __attribute__((always_inline)) float32x4_t n_epi(float32x4_t v, const ert_ukr_epi *e, int64_t i,
                                                              int64_t j0) {
    ert_av8 t;
    memcpy(&t, &v, sizeof t);
    ert_av_ukr_epi(&t, e, i, j0);
    memcpy(&v, &t, sizeof v);
    return v;
}

#define N_ROW(i) float32x4_t c##i##0 = vdupq_n_f32(0), c##i##1 = c##i##0, c##i##2 = c##i##0, c##i##3 = c##i##0
#define N_FMA(i, av, lane)                                                                                          \
    do {                                                                                                            \
        c##i##0 = vfmaq_laneq_f32(c##i##0, b0, av, lane);                                                           \
        c##i##1 = vfmaq_laneq_f32(c##i##1, b1, av, lane);                                                           \
        c##i##2 = vfmaq_laneq_f32(c##i##2, b2, av, lane);                                                           \
        c##i##3 = vfmaq_laneq_f32(c##i##3, b3, av, lane);                                                           \
    } while (0)
#define N_FMA2(i, av, lane)                                                                                         \
    do {                                                                                                            \
        c##i##0 = vfmaq_lane_f32(c##i##0, b0, av, lane);                                                            \
        c##i##1 = vfmaq_lane_f32(c##i##1, b1, av, lane);                                                            \
        c##i##2 = vfmaq_lane_f32(c##i##2, b2, av, lane);                                                            \
        c##i##3 = vfmaq_lane_f32(c##i##3, b3, av, lane);                                                            \
    } while (0)
#define N_ST(i)                                                                                                     \
    do {                                                                                                            \
        float *o_ = out + (i) * ldo;                                                                                \
        if (add) {                                                                                                  \
            c##i##0 = vaddq_f32(c##i##0, vld1q_f32(o_));                                                            \
            c##i##1 = vaddq_f32(c##i##1, vld1q_f32(o_ + 4));                                                        \
            c##i##2 = vaddq_f32(c##i##2, vld1q_f32(o_ + 8));                                                        \
            c##i##3 = vaddq_f32(c##i##3, vld1q_f32(o_ + 12));                                                       \
        }                                                                                                           \
        if (e) {                                                                                                    \
            c##i##0 = n_epi(c##i##0, e, i, 0);                                                                      \
            c##i##1 = n_epi(c##i##1, e, i, 4);                                                                      \
            c##i##2 = n_epi(c##i##2, e, i, 8);                                                                      \
            c##i##3 = n_epi(c##i##3, e, i, 12);                                                                     \
        }                                                                                                           \
        vst1q_f32(o_, c##i##0);                                                                                     \
        vst1q_f32(o_ + 4, c##i##1);                                                                                 \
        vst1q_f32(o_ + 8, c##i##2);                                                                                 \
        vst1q_f32(o_ + 12, c##i##3);                                                                                \
    } while (0)

void ert_cpu_ukr_neon_6x16(int64_t kc, const float *restrict a, const float *restrict b, float *restrict out,
                           int64_t ldo, bool add, const ert_ukr_epi *e) {
    N_ROW(0); N_ROW(1); N_ROW(2); N_ROW(3); N_ROW(4); N_ROW(5);
    for (int64_t k = 0; k < kc; k++, a += 6, b += 16) {
        /* a[0..3] and a[4..5]: the d-register load never reads past the panel */
        const float32x4_t a03 = vld1q_f32(a);
        const float32x2_t a45 = vld1_f32(a + 4);
        const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
        N_FMA(0, a03, 0); N_FMA(1, a03, 1); N_FMA(2, a03, 2); N_FMA(3, a03, 3);
        N_FMA2(4, a45, 0); N_FMA2(5, a45, 1);
    }
    N_ST(0); N_ST(1); N_ST(2); N_ST(3); N_ST(4); N_ST(5);
}
#else
/* ISO C wants at least one declaration in a translation unit */
typedef int ert_gemm_neon_unused;
#endif

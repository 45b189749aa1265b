/* Vectorised activations for the conv/GEMM stores (matmul.c's epilogue,
 * dwconv.c), applied to a row while it is still in L1.
 *
 * ReLU, Clip (ReLU6), LeakyReLU, HardSigmoid and HardSwish run 8 (x86) or 4
 * (NEON) floats at a time with compare masks (GNU vector types, compiled for
 * whatever target the including function has: the always_inline bodies take
 * the target of the AVX2/AVX-512 driver copies); the other kinds go to act.c.
 * NaN stays NaN: every clamp is written `x < lo ? lo : x`, which is false for
 * NaN (`x > 0 ? x : 0` would turn NaN into 0). The scalar tail uses the same
 * formulas as the vector body, so a value's result does not depend on its
 * position in the row. */
#ifndef ERT_CPU_ACT_VEC_H
#define ERT_CPU_ACT_VEC_H
#include "cpu_kernels.h"

#include <string.h>

#if defined(__GNUC__)
/* 8 lanes on x86 (AVX), 4 on aarch64 (a NEON q-register: gcc scalarises
 * compares of wider generic vectors there) */
#if defined(__aarch64__)
#define ERT_AV_N 4
#else
#define ERT_AV_N 8
#endif
typedef float ert_av8 __attribute__((vector_size(ERT_AV_N * 4)));
typedef int ert_av8i __attribute__((vector_size(ERT_AV_N * 4)));

/* m ? a : b per lane (m is all-ones or zero) */
#define ERT_AV_SEL(m, a, b) ((ert_av8)(((ert_av8i)(a) & (m)) | ((ert_av8i)(b) & ~(m))))

static inline __attribute__((always_inline)) float ert_act_clamp1(float x, float lo, float hi) {
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

static inline __attribute__((always_inline)) void ert_cpu_act_row(float *restrict x, int64_t n,
                                                                 const ert_act_params *a) {
    const int kind = a->kind;
    if (kind != ERT_ACT_RELU && kind != ERT_ACT_CLIP && kind != ERT_ACT_LEAKY_RELU &&
        kind != ERT_ACT_HARD_SIGMOID && kind != ERT_ACT_HARD_SWISH) {
        ert_cpu_act_inplace(x, n, a);
        return;
    }
    const float al = a->alpha, be = a->beta;
    const float lo = kind == ERT_ACT_CLIP ? al : 0.0f, hi = kind == ERT_ACT_CLIP ? be : 1.0f;
    const ert_av8 z = {0}, vlo = lo - z, vhi = hi - z; /* broadcasts */
    int64_t i = 0;
    for (; i + ERT_AV_N <= n; i += ERT_AV_N) {
        ert_av8 v, r;
        memcpy(&v, x + i, sizeof v);
        switch (kind) {
        case ERT_ACT_RELU: r = ERT_AV_SEL(v < z, z, v); break;
        case ERT_ACT_CLIP: r = ERT_AV_SEL(v < vlo, vlo, v), r = ERT_AV_SEL(r > vhi, vhi, r); break;
        case ERT_ACT_LEAKY_RELU: r = ERT_AV_SEL(v < z, al * v, v); break;
        case ERT_ACT_HARD_SIGMOID:
            r = al * v + be;
            r = ERT_AV_SEL(r < z, z, r), r = ERT_AV_SEL(r > vhi, vhi, r);
            break;
        default: /* HARD_SWISH */
            r = v / 6.0f + 0.5f;
            r = ERT_AV_SEL(r < z, z, r), r = ERT_AV_SEL(r > vhi, vhi, r);
            r = v * r;
            break;
        }
        memcpy(x + i, &r, sizeof r);
    }
    for (; i < n; i++) {
        float v = x[i];
        switch (kind) {
        case ERT_ACT_RELU: x[i] = v < 0.0f ? 0.0f : v; break;
        case ERT_ACT_CLIP: x[i] = ert_act_clamp1(v, lo, hi); break;
        case ERT_ACT_LEAKY_RELU: x[i] = v < 0.0f ? al * v : v; break;
        case ERT_ACT_HARD_SIGMOID: x[i] = ert_act_clamp1(al * v + be, 0.0f, 1.0f); break;
        default: x[i] = v * ert_act_clamp1(v / 6.0f + 0.5f, 0.0f, 1.0f); break;
        }
    }
}
#else
static inline void ert_cpu_act_row(float *x, int64_t n, const ert_act_params *a) { ert_cpu_act_inplace(x, n, a); }
#endif

#endif

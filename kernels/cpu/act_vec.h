/* Vectorised activations for the conv/GEMM stores (matmul.c's epilogue,
 * dwconv.c), applied to a row while it is still in L1.
 *
 * ReLU, Clip (ReLU6), LeakyReLU, HardSigmoid, HardSwish, Sigmoid, SiLU
 * (exp by a polynomial, about 2 ulp: libm's expf was a fifth of EfficientNet's
 * instructions, one call per element) and GELU's erf form (erfc by exp and
 * a polynomial: libm's erff was a fifth of DeiT-Tiny's time) run 8 (x86) or 4
 * (NEON) floats at a time with compare masks (GNU vector types, compiled for
 * whatever target the including function has: the always_inline bodies take
 * the target of the AVX2/AVX-512 driver copies); the other kinds go to act.c.
 * NaN stays NaN: every clamp is written `x < lo ? lo : x`, which is false for
 * NaN (`x > 0 ? x : 0` would turn NaN into 0). */
#ifndef ERT_CPU_ACT_VEC_H
#define ERT_CPU_ACT_VEC_H
#include "cpu_gemm.h"
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

/* exp(x) per lane, relative error about 2 ulp (Cephes expf's polynomial):
 * x = n ln2 + r, |r| <= ln2/2, exp(r) by a degree-6 polynomial, 2^n by the
 * exponent field. x is clamped to [-87.3, 88.3] (no overflow to inf or
 * underflow past the smallest normal), NaN stays NaN. */
static inline __attribute__((always_inline)) void ert_av_exp(ert_av8 *io) {
    const ert_av8 z = {0};
    ert_av8 x = *io;
    x = ERT_AV_SEL(x < -87.3f + z, -87.3f + z, x);
    x = ERT_AV_SEL(x > 88.3f + z, 88.3f + z, x);
    /* round(x / ln2) with the 1.5 * 2^23 trick: t's low mantissa bits hold n */
    const ert_av8 t = x * 1.44269504088896341f + 12582912.0f;
    const ert_av8 n = t - 12582912.0f;
    ert_av8 r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    ert_av8 p = 1.9875691500e-4f + z;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n as a float (n in [-126, 127] after the clamp); a product, not an
     * exponent-field add, so a NaN stays NaN */
    const ert_av8 pow2n = (ert_av8)(((ert_av8i)t - 0x4b400000 + 127) << 23);
    *io = p * pow2n;
}

/* one vector of the activation, in place */
static inline __attribute__((always_inline)) void ert_av_act(ert_av8 *io, int kind, float al, float be) {
    const ert_av8 z = {0}, one = 1.0f + z;
    ert_av8 v = *io, r;
    switch (kind) {
    case ERT_ACT_RELU: r = ERT_AV_SEL(v < z, z, v); break;
    case ERT_ACT_CLIP: r = ERT_AV_SEL(v < al + z, al + z, v), r = ERT_AV_SEL(r > be + z, be + z, r); break;
    case ERT_ACT_LEAKY_RELU: r = ERT_AV_SEL(v < z, al * v, v); break;
    case ERT_ACT_HARD_SIGMOID:
        r = al * v + be;
        r = ERT_AV_SEL(r < z, z, r), r = ERT_AV_SEL(r > one, one, r);
        break;
    case ERT_ACT_HARD_SWISH:
        r = v / 6.0f + 0.5f;
        r = ERT_AV_SEL(r < z, z, r), r = ERT_AV_SEL(r > one, one, r);
        r = v * r;
        break;
    case ERT_ACT_GELU: {
        /* 0.5 x (1 + erf(x / sqrt 2)) with 1 + erf(-z) = erfc(z): erfc(z) =
         * t exp(-z^2 - 1.26551223 + t P(t)), t = 1 / (1 + z/2) (Numerical
         * Recipes' erfcc, relative error < 1.2e-7 for every z >= 0), so the
         * negative side keeps its relative accuracy (1 + erff(x) cancels there) */
        const ert_av8 zz = ERT_AV_SEL(v < z, -v, v) * 0.70710678118654752f;
        const ert_av8 t = one / (one + 0.5f * zz);
        ert_av8 p = 0.17087277f + z;
        p = p * t - 0.82215223f;
        p = p * t + 1.48851587f;
        p = p * t - 1.13520398f;
        p = p * t + 0.27886807f;
        p = p * t - 0.18628806f;
        p = p * t + 0.09678418f;
        p = p * t + 0.37409196f;
        p = p * t + 1.00002368f;
        ert_av8 ex = p * t - 1.26551223f - zz * zz;
        ert_av_exp(&ex);
        const ert_av8 erfc = t * ex;
        r = 0.5f * v * ERT_AV_SEL(v < z, erfc, 2.0f - erfc);
        break;
    }
    default: /* SIGMOID, SILU: x / (1 + exp(-x)) is SiLU, 1 / (1 + exp(-x)) sigmoid */
        r = -v;
        ert_av_exp(&r);
        r = (kind == ERT_ACT_SILU ? v : one) / (one + r);
        break;
    }
    *io = r;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* exp(x) on one zmm: ert_av_exp's reduction and polynomial, with n by
 * VRNDSCALE and 2^n applied by VSCALEF (the same p * 2^n, exact for the
 * clamped n; fewer instructions than the exponent-field trick). */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512 ert_z_exp(__m512 x) {
    /* MAXPS/MINPS return the second operand when either is NaN: NaN stays NaN */
    x = _mm512_max_ps(_mm512_set1_ps(-87.3f), x);
    x = _mm512_min_ps(_mm512_set1_ps(88.3f), x);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* 1 / d: VRCP14 (relative error < 2^-14) and one Newton step (< 2^-27) in
 * place of a VDIVPS. Every d here is finite and >= 1 (1 + exp of a clamped
 * argument, 1 + z/2 capped), so no zero, infinity or sign case arises. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512 ert_z_rcp(__m512 d) {
    const __m512 r = _mm512_rcp14_ps(d);
    return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}

/* The activation on one zmm (16 lanes: the AVX-512 SGEMM tile's rows,
 * pwconv.c's transposed channel rows), the formulas of ert_av_act in
 * 512-bit instructions (two 8-lane halves of those cost twice the
 * instructions: GELU after ConvNeXt's expanding 1x1 convs was a quarter of
 * its time). Bounds as MAXPS/MINPS with the data second (`x < lo ? lo : x`:
 * NaN stays NaN; lo = al + 0, as below). KIND a constant where the caller
 * specialises, so the switch folds. Results agree with ert_av_act within
 * two ulp (1/d by Newton, not a division), not bit for bit. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512
ert_av_act_z(__m512 v, const int KIND, float al, float be) {
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    switch (KIND) {
    case ERT_ACT_NONE: return v;
    case ERT_ACT_RELU: return _mm512_max_ps(zero, v);
    case ERT_ACT_CLIP: return _mm512_min_ps(_mm512_set1_ps(be + 0.0f), _mm512_max_ps(_mm512_set1_ps(al + 0.0f), v));
    case ERT_ACT_LEAKY_RELU:
        return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, _mm512_set1_ps(al));
    case ERT_ACT_HARD_SIGMOID:
        return _mm512_min_ps(one, _mm512_max_ps(zero, _mm512_fmadd_ps(_mm512_set1_ps(al), v, _mm512_set1_ps(be))));
    case ERT_ACT_HARD_SWISH: {
        /* v / 6 + 0.5 as one multiply-add by 1/6 (within an ulp of the division) */
        const __m512 r = _mm512_fmadd_ps(v, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
        return _mm512_mul_ps(v, _mm512_min_ps(one, _mm512_max_ps(zero, r)));
    }
    case ERT_ACT_GELU: {
        /* ert_av_act's erfc form: 0.5 x erfc(-x / sqrt 2) */
        const __m512 zz = _mm512_mul_ps(_mm512_abs_ps(v), _mm512_set1_ps(0.70710678118654752f));
        /* 1 + z/2 capped at 1e30, so x = +-inf gives t = 1e-30, not rcp(inf) * (2 - inf * 0) = NaN: +inf
         * stays inf, -inf gives inf * 0 = NaN as 0.5 x (1 + erff) does */
        const __m512 t = ert_z_rcp(_mm512_min_ps(_mm512_set1_ps(1e30f), _mm512_fmadd_ps(zz, _mm512_set1_ps(0.5f), one)));
        __m512 p = _mm512_set1_ps(0.17087277f);
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.82215223f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.48851587f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.13520398f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.27886807f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.18628806f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.09678418f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.37409196f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.00002368f));
        const __m512 ex = ert_z_exp(_mm512_fnmadd_ps(zz, zz, _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.26551223f))));
        const __m512 erfc = _mm512_mul_ps(t, ex);
        const __m512 hv = _mm512_mul_ps(v, _mm512_set1_ps(0.5f));
        const __mmask16 neg = _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ);
        return _mm512_mul_ps(hv, _mm512_mask_blend_ps(neg, _mm512_sub_ps(_mm512_set1_ps(2.0f), erfc), erfc));
    }
    case ERT_ACT_SIGMOID: return ert_z_rcp(_mm512_add_ps(one, ert_z_exp(_mm512_sub_ps(zero, v))));
    case ERT_ACT_SILU: return _mm512_mul_ps(v, ert_z_rcp(_mm512_add_ps(one, ert_z_exp(_mm512_sub_ps(zero, v)))));
    default: { /* act_vec.h's kinds are all above; any other is the caller's (ert_act_row_vectorised) */
        union {
            __m512 z;
            ert_av8 h[2];
        } u = {.z = v};
        ert_av_act(&u.h[0], KIND, al, be);
        ert_av_act(&u.h[1], KIND, al, be);
        return u.z;
    }
    }
}
#endif

/* The kinds done here; the others go to act.c one element at a time. */
static inline bool ert_act_row_vectorised(int kind) {
    return kind == ERT_ACT_RELU || kind == ERT_ACT_CLIP || kind == ERT_ACT_LEAKY_RELU ||
           kind == ERT_ACT_HARD_SIGMOID || kind == ERT_ACT_HARD_SWISH || kind == ERT_ACT_SIGMOID ||
           kind == ERT_ACT_SILU || kind == ERT_ACT_GELU;
}

/* One vector of the store epilogue: + bias, + residual, activation (each
 * optional; the kinds act_vec.h lacks are applied by the caller afterwards). */
static inline __attribute__((always_inline)) void ert_av_epi(ert_av8 *v, const float *bias, const float *res,
                                                            const ert_act_params *a, bool vec_act) {
    if (bias) *v += *bias;
    if (res) {
        ert_av8 r;
        memcpy(&r, res, sizeof r);
        *v += r;
    }
    if (vec_act) ert_av_act(v, a->kind, a->alpha, a->beta);
}

/* One ERT_AV_N-lane piece of a micro-kernel tile's row i, columns j0..:
 * the epilogue of cpu_gemm.h's ert_ukr_epi, in the order of the row
 * epilogue below (bias, residual, column bias, activation). */
static inline __attribute__((always_inline)) void ert_av_ukr_epi_k(ert_av8 *v, const ert_ukr_epi *e, int64_t i,
                                                                  int64_t j0, int kind) {
    if (e->bias_row) *v += e->bias_row[i];
    if (e->res) {
        ert_av8 r;
        memcpy(&r, e->res + i * e->ldr + j0, sizeof r);
        *v += r;
    }
    if (e->bias_col) {
        ert_av8 b;
        memcpy(&b, e->bias_col + j0, sizeof b);
        *v += b;
    }
    if (kind != ERT_ACT_NONE) ert_av_act(v, kind, e->alpha, e->beta);
}
/* the same with e's kind (the caller that specialises passes a constant:
 * then ert_av_act's switch folds and its constants stay in registers) */
static inline __attribute__((always_inline)) void ert_av_ukr_epi(ert_av8 *v, const ert_ukr_epi *e, int64_t i,
                                                                int64_t j0) {
    ert_av_ukr_epi_k(v, e, i, j0, e->kind);
}

/* The main loop of ert_cpu_epilogue_row for one activation kind: with KIND
 * a constant, ert_av_act's switch folds away (a switch per 8 floats was
 * about half of a ReLU6 row pass: MobileNetV2's depthwise layers, callgrind). */
#define ERT_EPI_ROW_LOOP(KIND)                                                                                      \
    for (; i + ERT_AV_N <= n; i += ERT_AV_N) {                                                                      \
        ert_av8 v;                                                                                                  \
        memcpy(&v, x + i, sizeof v);                                                                                \
        if (bias) v += *bias;                                                                                       \
        if (res) {                                                                                                  \
            ert_av8 r;                                                                                              \
            memcpy(&r, res + i, sizeof r);                                                                          \
            v += r;                                                                                                 \
        }                                                                                                           \
        if ((KIND) != ERT_ACT_NONE) ert_av_act(&v, (KIND), al, be);                                                 \
        memcpy(x + i, &v, sizeof v);                                                                                \
    }

/* x[0..n) = act(x + *bias + res) in one pass (bias: one value or NULL; res:
 * n values or NULL, may be x itself; a: NULL for none), the order of the
 * scalar epilogue it replaces, so results are unchanged. */
static inline __attribute__((always_inline)) void ert_cpu_epilogue_row(float *x, int64_t n, const float *bias,
                                                                      const float *res, const ert_act_params *a) {
    const bool vec_act = a && ert_act_row_vectorised(a->kind);
    const int kind = vec_act ? (int)a->kind : ERT_ACT_NONE;
    const float al = a ? a->alpha : 0.0f, be = a ? a->beta : 0.0f;
    int64_t i = 0;
    switch (kind) {
    case ERT_ACT_NONE: ERT_EPI_ROW_LOOP(ERT_ACT_NONE) break;
    case ERT_ACT_RELU: ERT_EPI_ROW_LOOP(ERT_ACT_RELU) break;
    case ERT_ACT_CLIP: ERT_EPI_ROW_LOOP(ERT_ACT_CLIP) break;
    /* the transcendental kinds too: with the kind a run-time value the
     * switch stayed inside the loop and every polynomial constant was
     * broadcast again per 8 floats (~50 instructions a vector for SiLU
     * after EfficientNet's depthwise convs, ~25 with it constant: callgrind) */
    case ERT_ACT_SILU: ERT_EPI_ROW_LOOP(ERT_ACT_SILU) break;
    case ERT_ACT_SIGMOID: ERT_EPI_ROW_LOOP(ERT_ACT_SIGMOID) break;
    case ERT_ACT_GELU: ERT_EPI_ROW_LOOP(ERT_ACT_GELU) break;
    case ERT_ACT_HARD_SWISH: ERT_EPI_ROW_LOOP(ERT_ACT_HARD_SWISH) break;
    case ERT_ACT_HARD_SIGMOID: ERT_EPI_ROW_LOOP(ERT_ACT_HARD_SIGMOID) break;
    default: ERT_EPI_ROW_LOOP(kind) break;
    }
    if (i < n) { /* the tail through the same vector code, so no value depends on its position */
        float t[ERT_AV_N] = {0}, rt[ERT_AV_N] = {0};
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        if (res) memcpy(rt, res + i, (size_t)(n - i) * sizeof(float));
        ert_av8 v;
        memcpy(&v, t, sizeof v);
        ert_av_epi(&v, bias, res ? rt : NULL, a, vec_act);
        memcpy(x + i, &v, (size_t)(n - i) * sizeof(float));
    }
    if (a && !vec_act) ert_cpu_act_inplace(x, n, a);
}
#undef ERT_EPI_ROW_LOOP

static inline __attribute__((always_inline)) void ert_cpu_act_row(float *x, int64_t n, const ert_act_params *a) {
    ert_cpu_epilogue_row(x, n, NULL, NULL, a);
}
#else
static inline void ert_cpu_epilogue_row(float *x, int64_t n, const float *bias, const float *res,
                                        const ert_act_params *a) {
    for (int64_t i = 0; i < n; i++) {
        if (bias) x[i] += *bias;
        if (res) x[i] += res[i];
    }
    if (a) ert_cpu_act_inplace(x, n, a);
}
static inline void ert_cpu_act_row(float *x, int64_t n, const ert_act_params *a) { ert_cpu_epilogue_row(x, n, NULL, NULL, a); }
#endif

#endif

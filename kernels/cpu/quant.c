/* QuantizeLinear / DequantizeLinear: the plain reference (the oracle of the
 * integer paths). Arithmetic as onnxruntime's CPU kernels do it, so the
 * results agree bit for bit:
 *   Q:  y = clamp(round_half_even(x / scale) + zp, qmin, qmax), the quotient
 *       in f32; NaN gives the zero point.
 *   DQ: y = (float)((int32)x - zp) * scale, in f32.
 * x is (outer, D, inner) around the per-axis dim D (D = 1, inner = n per
 * tensor); scale[D], zp[D] (zp NULL: 0). */
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <math.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

/* outer/D/inner split of x around params axis (-1: per tensor) */
static void split_axis(const ert_tview *x, int64_t axis, int64_t *d, int64_t *inner) {
    *d = 1;
    *inner = x->n_elems;
    if (axis < 0) return;
    *d = x->dims[axis];
    *inner = 1;
    for (int k = (int)axis + 1; k < x->ndim; k++) *inner *= x->dims[k];
}

static int32_t zp_at(const ert_tview *z, int64_t i) {
    if (!z || !z->data) return 0;
    switch (z->dtype) {
    case ERT_DTYPE_I8: return ((const int8_t *)z->data)[i];
    case ERT_DTYPE_U8: return ((const uint8_t *)z->data)[i];
    case ERT_DTYPE_I32: return ((const int32_t *)z->data)[i];
    default: return 0;
    }
}

int32_t ert_cpu_quantize1(float x, float scale, int32_t zp, int32_t qmin, int32_t qmax) {
    float q = x / scale;
    if (isnan(q)) q = 0.0f;
    /* clamp in float first so the conversion below is always defined */
    float lo = (float)(qmin - zp), hi = (float)(qmax - zp);
    q = q < lo ? lo : q > hi ? hi : q;
    return (int32_t)nearbyintf(q) + zp;
}

/* One run of n elements sharing a scale and zero point, one loop per
 * integer type (no dtype test per element); compiled for the baseline and,
 * on x86-64, for AVX2 (rounding inlined, no libm call), picked under the
 * kernel cap. The same float operations in the same order: the same bits. */
static inline __attribute__((always_inline)) void q_run_body(const float *restrict x, int64_t n, float sc, int32_t zp,
                                                             void *restrict y, bool u8) {
    const float lo = (float)((u8 ? 0 : -128) - zp), hi = (float)((u8 ? 255 : 127) - zp);
    for (int64_t k = 0; k < n; k++) {
        float q = x[k] / sc;
        q = q != q ? 0.0f : q; /* NaN gives the zero point */
        q = q < lo ? lo : q > hi ? hi : q;
        const int32_t v = (int32_t)nearbyintf(q) + zp;
        if (u8) ((uint8_t *)y)[k] = (uint8_t)v;
        else ((int8_t *)y)[k] = (int8_t)v;
    }
}

static inline __attribute__((always_inline)) void dq_run_body(const void *restrict x, ert_dtype dt, int64_t n, float sc,
                                                              int32_t zp, float *restrict y) {
    switch (dt) {
    case ERT_DTYPE_U8:
        for (int64_t k = 0; k < n; k++) y[k] = (float)((int32_t)((const uint8_t *)x)[k] - zp) * sc;
        break;
    case ERT_DTYPE_I8:
        for (int64_t k = 0; k < n; k++) y[k] = (float)((int32_t)((const int8_t *)x)[k] - zp) * sc;
        break;
    default: /* int32 (a bias) */
        for (int64_t k = 0; k < n; k++) y[k] = (float)(((const int32_t *)x)[k] - zp) * sc;
        break;
    }
}

typedef void (*q_run_fn)(const float *, int64_t, float, int32_t, void *, bool);
typedef void (*dq_run_fn)(const void *, ert_dtype, int64_t, float, int32_t, float *);
static void q_run(const float *x, int64_t n, float sc, int32_t zp, void *y, bool u8) { q_run_body(x, n, sc, zp, y, u8); }
static void dq_run(const void *x, ert_dtype dt, int64_t n, float sc, int32_t zp, float *y) {
    dq_run_body(x, dt, n, sc, zp, y);
}
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void q_run_avx2(const float *x, int64_t n, float sc, int32_t zp, void *y,
                                                      bool u8) {
    q_run_body(x, n, sc, zp, y, u8);
}
__attribute__((target("avx2"))) static void dq_run_avx2(const void *x, ert_dtype dt, int64_t n, float sc, int32_t zp,
                                                       float *y) {
    dq_run_body(x, dt, n, sc, zp, y);
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
static bool use_avx2(const ert_kargs *a) {
    return ert_cpu_kernel_cap(a->choice) >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2");
}
#endif

ert_status ert_cpu_quantize(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *s = &a->in[1], *z = a->n_in > 2 ? &a->in[2] : NULL;
    ert_tview *y = &a->out[0];
    int64_t d, inner;
    split_axis(x, a->params->quant.axis, &d, &inner);
    const float *xp = x->data, *sp = s->data;
    const bool u8 = y->dtype == ERT_DTYPE_U8;
    q_run_fn run = q_run;
#if defined(__x86_64__) && defined(__GNUC__)
    if (use_avx2(a)) run = q_run_avx2;
#endif
    const size_t ysz = u8 ? sizeof(uint8_t) : sizeof(int8_t);
    for (int64_t i = 0; i < x->n_elems;)
        for (int64_t c = 0; c < d; c++, i += inner) run(xp + i, inner, sp[c], zp_at(z, c), (char *)y->data + (size_t)i * ysz, u8);
    return ERT_OK;
}

ert_status ert_cpu_dequantize(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *s = &a->in[1], *z = a->n_in > 2 ? &a->in[2] : NULL;
    float *yp = a->out[0].data;
    int64_t d, inner;
    split_axis(x, a->params->quant.axis, &d, &inner);
    const float *sp = s->data;
    dq_run_fn run = dq_run;
#if defined(__x86_64__) && defined(__GNUC__)
    if (use_avx2(a)) run = dq_run_avx2;
#endif
    const size_t xsz = ert_dtype_size(x->dtype);
    if (x->dtype != ERT_DTYPE_U8 && x->dtype != ERT_DTYPE_I8 && x->dtype != ERT_DTYPE_I32) {
        for (int64_t i = 0; i < x->n_elems;) /* any other integer type: the element reader */
            for (int64_t c = 0; c < d; c++) {
                float sc = sp[c];
                int32_t zp = zp_at(z, c);
                for (int64_t k = 0; k < inner; k++, i++) yp[i] = (float)(zp_at(x, i) - zp) * sc;
            }
        return ERT_OK;
    }
    for (int64_t i = 0; i < x->n_elems;)
        for (int64_t c = 0; c < d; c++, i += inner)
            run((const char *)x->data + (size_t)i * xsz, x->dtype, inner, sp[c], zp_at(z, c), yp + i);
    return ERT_OK;
}

/* ert.QLinearAdd (a, as, [azp], b, bs, [bzp], ys, [yzp]): the Q/DQ pass's
 * DQ(a) + DQ(b) -> [Relu] -> Q as the very f32 operations of those nodes
 * (each DQ product rounded to f32, the sum rounded, then Q), so the fold
 * changes no bit; a, b and y of one shape, everything per tensor. */
ert_status ert_cpu_qlinear_add(const ert_kargs *a) {
    const ert_tview *A = &a->in[0], *B = &a->in[3], *Y = &a->out[0];
    const float as = *(const float *)a->in[1].data, bs = *(const float *)a->in[4].data;
    const float ys = *(const float *)a->in[6].data;
    const int32_t az = zp_at(&a->in[2], 0), bz = zp_at(&a->in[5], 0), yz = zp_at(&a->in[7], 0);
    const bool u8 = Y->dtype == ERT_DTYPE_U8, relu = a->params->quant.conv.act.kind == ERT_ACT_RELU;
    const int32_t qmin = u8 ? 0 : -128, qmax = u8 ? 255 : 127;
    for (int64_t i = 0; i < Y->n_elems; i++) {
        const float fa = (float)(zp_at(A, i) - az) * as, fb = (float)(zp_at(B, i) - bz) * bs;
        float v = fa + fb;
        if (relu) v = v > 0.0f ? v : 0.0f;
        const int32_t q = ert_cpu_quantize1(v, ys, yz, qmin, qmax);
        if (u8) ((uint8_t *)Y->data)[i] = (uint8_t)q;
        else ((int8_t *)Y->data)[i] = (int8_t)q;
    }
    return ERT_OK;
}

/* ert.QLut (x, table): y[i] = table[(uint8_t)x[i]]. The Q/DQ pass filled the
 * table by running the float nodes it replaces on all 256 values of x, so
 * this is their result bit for bit; x and y int8/uint8 of one shape. Split
 * across the pool in chunks of 64 KiB. The plain loop is the oracle; with
 * AVX-512 VBMI (Ice Lake, Zen 4 on) under the kernel cap, 64 bytes a step:
 * the table in four registers, vpermi2b looks each byte's low 7 bits up in
 * both halves and its top bit picks one, the tail masked through the same
 * code (test_cpu_fast checks it against the plain loop). */
typedef void (*qlut_fn)(const uint8_t *x, const uint8_t *t, uint8_t *y, int64_t n);
typedef struct qlut_job {
    const ert_kargs *a;
    qlut_fn run;
} qlut_job;

static void qlut_plain(const uint8_t *x, const uint8_t *t, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = t[x[i]];
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void qlut_vbmi(const uint8_t *x, const uint8_t *t,
                                                                              uint8_t *y, int64_t n) {
    const __m512i t0 = _mm512_loadu_si512(t), t1 = _mm512_loadu_si512(t + 64), t2 = _mm512_loadu_si512(t + 128),
                  t3 = _mm512_loadu_si512(t + 192);
    for (int64_t i = 0; i < n; i += 64) {
        const __mmask64 m = n - i >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (n - i)) - 1;
        const __m512i v = _mm512_maskz_loadu_epi8(m, x + i);
        const __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
        _mm512_mask_storeu_epi8(y + i, m, _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi));
    }
}
#endif

static void qlut_range(void *arg, int64_t b, int64_t e) {
    const qlut_job *j = arg;
    j->run((const uint8_t *)j->a->in[0].data + b, j->a->in[1].data, (uint8_t *)j->a->out[0].data + b, e - b);
}

ert_status ert_cpu_qlut(const ert_kargs *a) {
    qlut_job j = {a, qlut_plain};
#if defined(__x86_64__) && defined(__GNUC__)
    if (ert_cpu_kernel_cap(a->choice) >= ERT_CPU_GEMM_AVX512 && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vbmi"))
        j.run = qlut_vbmi;
#endif
    ert_parallel_for(a->pool, a->out[0].n_elems, 65536, qlut_range, &j);
    return ERT_OK;
}

/* MaxPool / AveragePool (1-D/2-D/3-D, dilations, pads, ceil_mode) and
 * GlobalAveragePool / GlobalMaxPool. x is (N, C, spatial...), f32.
 * Every rank is handled as 3-D (leading spatial dims of size 1, kernel 1).
 * Parallel over (image, channel) planes.
 * AveragePool divisor: count_include_pad counts the taps inside the padded
 * input [-pad_begin, in + pad_end) (a ceil_mode window hanging past that is
 * clipped, as onnxruntime and PyTorch do); otherwise only taps inside the
 * input. A MaxPool window with no tap inside the input yields -inf. */
#include "cpu_gemm.h"
#include "cpu_kernels.h"
#include "nan_rules.h"

#include <math.h>
#include <string.h>

typedef struct pool_job {
    const ert_pool_params *p;
    bool is_max;
    const float *x;
    float *y;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int64_t in_sz, out_sz;
} pool_job;

/* Taps k in [0, K) of one dim whose position start + k*d lies in [0, in)
 * -> [*lo, *hi); *n_pad counts the taps before in + pad_end (the window
 * never reaches left of -pad_begin). */
static void tap_range(int64_t start, int64_t K, int64_t d, int64_t in, int64_t pe, int64_t *lo, int64_t *hi,
                      int64_t *n_pad) {
    *lo = start >= 0 ? 0 : (-start + d - 1) / d;
    *hi = in - start <= 0 ? 0 : (in - start + d - 1) / d;
    if (*hi > K) *hi = K;
    if (*lo > *hi) *lo = *hi;
    int64_t np = in + pe - start <= 0 ? 0 : (in + pe - start + d - 1) / d;
    *n_pad = np > K ? K : np;
}

/* One output of the general path (any rank, dilation, padding). */
static float pool_one(const pool_job *j, const float *xp, int64_t od, int64_t oh, int64_t ow) {
    int64_t o[3] = {od, oh, ow}, st[3], lo[3], hi[3], np[3];
    for (int q = 0; q < 3; q++) {
        st[q] = o[q] * j->s[q] - j->pb[q];
        if (st[q] >= 0 && st[q] + (j->k[q] - 1) * j->d[q] < j->in[q]) {
            lo[q] = 0, hi[q] = np[q] = j->k[q]; /* window inside: no divisions */
            continue;
        }
        tap_range(st[q], j->k[q], j->d[q], j->in[q], j->pe[q], &lo[q], &hi[q], &np[q]);
    }
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t kd = lo[0]; kd < hi[0]; kd++) {
        int64_t id = st[0] + kd * j->d[0];
        for (int64_t kh = lo[1]; kh < hi[1]; kh++) {
            /* index math in int64: st[2] may be negative */
            int64_t base = (id * j->in[1] + st[1] + kh * j->d[1]) * j->in[2] + st[2];
            for (int64_t kw = lo[2]; kw < hi[2]; kw++) {
                float v = xp[base + kw * j->d[2]];
                mx = ert_max_nan(v, mx);
                sum += v;
            }
        }
    }
    if (j->is_max) return mx;
    int64_t cnt = j->p->count_include_pad ? np[0] * np[1] * np[2]
                                          : (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
    return cnt > 0 ? sum / (float)cnt : 0.0f;
}

/* 2-D MaxPool, dilation 1: per output row the vertical tap range is found
 * once; outputs whose window lies inside the row [0, W) (all but one or two
 * at each edge) take their KW taps with no bounds checks. KW and S are
 * constants at the call sites for 3x3/2, 2x2/2, 5x5/1 and 3x3/1 so the taps
 * unroll (and stride 1 loads whole vectors). NaN
 * propagates exactly as in pool_one. */
static inline __attribute__((always_inline)) void max2d_plane(const pool_job *j, const float *xp, float *yp,
                                                            const int64_t KW, const int64_t S) {
    const int64_t H = j->in[1], W = j->in[2], OH = j->out[1], OW = j->out[2], pw = j->pb[2];
    /* interior: ow*S - pw >= 0 and ow*S - pw + KW <= W */
    int64_t ow_lo = (pw + S - 1) / S, ow_hi = W - KW + pw < 0 ? 0 : (W - KW + pw) / S + 1;
    if (ow_hi > OW) ow_hi = OW;
    if (ow_lo > ow_hi) ow_lo = ow_hi;
    for (int64_t oh = 0; oh < OH; oh++) {
        int64_t st = oh * j->s[1] - j->pb[1], lo, hi, np;
        tap_range(st, j->k[1], 1, H, j->pe[1], &lo, &hi, &np);
        float *yr = yp + oh * OW;
        for (int64_t ow = 0; ow < ow_lo; ow++) yr[ow] = pool_one(j, xp, 0, oh, ow);
        /* tap-major over the whole interior span: a branchless select per
         * element, so gcc vectorises across ow (the branchy per-output form
         * cost 9% of ResNet-18) */
        for (int64_t ow = ow_lo; ow < ow_hi; ow++) yr[ow] = -INFINITY;
        for (int64_t kh = lo; kh < hi; kh++) {
            const float *xr = xp + (st + kh) * W - pw;
            for (int64_t kw = 0; kw < KW; kw++)
                for (int64_t ow = ow_lo; ow < ow_hi; ow++) {
                    yr[ow] = ert_max_nan(xr[ow * S + kw], yr[ow]);
                }
        }
        for (int64_t ow = ow_hi; ow < OW; ow++) yr[ow] = pool_one(j, xp, 0, oh, ow);
    }
}

/* 2-D MaxPool, dilation 1, separably: the horizontal maxima of the input
 * rows a strip of output rows reads go to a buffer on the stack, then each
 * output row is the maximum of its KH buffer rows: KH + KW comparisons an
 * output, not KH * KW (YOLO's SPPF, three 5x5/1 pools over 20x20 planes:
 * 0.7 ms each with the taps one by one). Max is exact and a NaN anywhere in
 * the window wins from either side (ert_max_nan), so this is max2d_plane's
 * result; a window with no tap inside the input gives -inf, as pool_one.
 * Returns false (nothing written) when one output row's rows do not fit. */
#define SEP_FLOATS 2048
static bool max2d_sep(const pool_job *j, const float *xp, float *yp) {
    const int64_t H = j->in[1], W = j->in[2], OH = j->out[1], OW = j->out[2];
    const int64_t KH = j->k[1], KW = j->k[2], SH = j->s[1], SW = j->s[2], ph = j->pb[1], pw = j->pb[2];
    if (OW <= 0 || KH * OW > SEP_FLOATS) return false;
    const int64_t R = (SEP_FLOATS / OW - KH) / SH + 1; /* output rows a strip: ((R-1)*SH + KH) * OW fit */
    float hb[SEP_FLOATS];
    /* columns whose window lies inside [0, W) */
    int64_t ow_lo = (pw + SW - 1) / SW, ow_hi = W - KW + pw < 0 ? 0 : (W - KW + pw) / SW + 1;
    if (ow_hi > OW) ow_hi = OW;
    if (ow_lo > ow_hi) ow_lo = ow_hi;
    for (int64_t oh0 = 0; oh0 < OH; oh0 += R) {
        const int64_t oh1 = oh0 + R < OH ? oh0 + R : OH;
        int64_t ih0 = oh0 * SH - ph, ih1 = (oh1 - 1) * SH - ph + KH;
        if (ih0 < 0) ih0 = 0;
        if (ih1 > H) ih1 = H;
        for (int64_t ih = ih0; ih < ih1; ih++) {
            const float *xr = xp + ih * W;
            float *h = hb + (ih - ih0) * OW;
            for (int64_t ow = 0; ow < OW; ow++) {
                if (ow == ow_lo && ow_lo < ow_hi) { /* the interior, tap-major (vectorises across ow) */
                    const float *xs = xr + ow_lo * SW - pw;
                    for (int64_t o = ow_lo; o < ow_hi; o++) h[o] = xs[(o - ow_lo) * SW];
                    for (int64_t kw = 1; kw < KW; kw++)
                        for (int64_t o = ow_lo; o < ow_hi; o++) h[o] = ert_max_nan(xs[(o - ow_lo) * SW + kw], h[o]);
                    ow = ow_hi - 1;
                    continue;
                }
                int64_t a0 = ow * SW - pw, a1 = a0 + KW;
                if (a0 < 0) a0 = 0;
                if (a1 > W) a1 = W;
                float m = -INFINITY;
                for (int64_t c = a0; c < a1; c++) m = ert_max_nan(xr[c], m);
                h[ow] = m;
            }
        }
        for (int64_t oh = oh0; oh < oh1; oh++) {
            float *yr = yp + oh * OW;
            int64_t r0 = oh * SH - ph, r1 = r0 + KH;
            if (r0 < 0) r0 = 0;
            if (r1 > H) r1 = H;
            if (r0 >= r1) {
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = -INFINITY;
                continue;
            }
            memcpy(yr, hb + (r0 - ih0) * OW, (size_t)OW * sizeof(float));
            for (int64_t r = r0 + 1; r < r1; r++) {
                const float *h = hb + (r - ih0) * OW;
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = ert_max_nan(h[ow], yr[ow]);
            }
        }
    }
    return true;
}

static void pool_run(void *arg, int64_t t0, int64_t t1) {
    const pool_job *j = arg;
    bool fast2d = j->is_max && j->in[0] == 1 && j->k[0] == 1 && j->d[1] == 1 && j->d[2] == 1 && j->out[0] == 1;
    for (int64_t t = t0; t < t1; t++) {
        const float *xp = j->x + t * j->in_sz;
        float *yp = j->y + t * j->out_sz;
        if (fast2d && j->k[2] == 3 && j->s[2] == 2) {
            max2d_plane(j, xp, yp, 3, 2);
            continue;
        }
        if (fast2d && j->k[2] == 2 && j->s[2] == 2) {
            max2d_plane(j, xp, yp, 2, 2);
            continue;
        }
        if (fast2d && j->k[1] * j->k[2] >= 16 && max2d_sep(j, xp, yp)) continue; /* YOLO's SPPF: 5x5/1 p2 */
        if (fast2d && j->k[2] == 3 && j->s[2] == 1) {
            max2d_plane(j, xp, yp, 3, 1);
            continue;
        }
        if (fast2d) {
            max2d_plane(j, xp, yp, j->k[2], j->s[2]);
            continue;
        }
        for (int64_t od = 0; od < j->out[0]; od++)
            for (int64_t oh = 0; oh < j->out[1]; oh++)
                for (int64_t ow = 0; ow < j->out[2]; ow++)
                    yp[(od * j->out[1] + oh) * j->out[2] + ow] = pool_one(j, xp, od, oh, ow);
    }
}

ert_status ert_cpu_pool(const ert_kargs *a) {
    const ert_pool_params *p = &a->params->pool;
    const ert_tview *X = &a->in[0];
    ert_tview *Y = &a->out[0];
    if (a->op == ERT_OP_MAXPOOL && (X->dtype == ERT_DTYPE_I8 || X->dtype == ERT_DTYPE_U8))
        return ert_cpu_maxpool_q8(a); /* quant_int.c: made by the Q/DQ pass */
    if (X->dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    pool_job j = {.p = p, .is_max = a->op == ERT_OP_MAXPOOL, .x = X->data, .y = Y->data};
    int off = 3 - p->nsp;
    j.in_sz = j.out_sz = 1;
    for (int i = 0; i < 3; i++) {
        int s = i - off;
        bool real = s >= 0;
        j.in[i] = real ? X->dims[2 + s] : 1;
        j.out[i] = real ? Y->dims[2 + s] : 1;
        j.k[i] = real ? p->kernel[s] : 1;
        j.s[i] = real ? p->stride[s] : 1;
        j.d[i] = real ? p->dilation[s] : 1;
        j.pb[i] = real ? p->pad_begin[s] : 0;
        j.pe[i] = real ? p->pad_end[s] : 0;
        j.in_sz *= j.in[i];
        j.out_sz *= j.out[i];
    }
    ert_parallel_for(a->pool, X->dims[0] * X->dims[1], 1, pool_run, &j);
    return ERT_OK;
}

typedef double (*plane_sum_fn)(const float *x, int64_t n);

/* sum of a plane in double: 8 partial sums, so the adds are not one
 * latency-bound chain (it was 2 ms of EfficientNet-B0's SE blocks) and the
 * lanes vectorise; the plain copy (and the oracle's order) */
static double plane_sum(const float *x, int64_t n) {
    double acc[8] = {0}, s = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += x[i + l];
    for (; i < n; i++) s += x[i];
    return s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The same sums on AVX2 / AVX-512 (floats widened 4 or 8 at a time, four
 * accumulators): baseline SSE2 widened two at a time, so the 1x1 squeeze of
 * EfficientNet-B0's 17 SE blocks took 0.3 ms against onnxruntime's 0.13. */
__attribute__((target("avx2"))) static double plane_sum_avx2(const float *x, int64_t n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(x + i)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4)));
        a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 8)));
        a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 12)));
    }
    double t[4], s = 0;
    _mm256_storeu_pd(t, _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    for (; i < n; i++) s += x[i];
    return s + ((t[0] + t[1]) + (t[2] + t[3]));
}
__attribute__((target("avx512f"))) static double plane_sum_avx512(const float *x, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)));
        a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 16)));
        a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 24)));
    }
    double s = 0;
    for (; i < n; i++) s += x[i];
    return s + _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
}
#endif

typedef struct gpool_job {
    bool is_max;
    const float *x;
    float *y;
    int64_t sz;
    plane_sum_fn sum;
} gpool_job;

static void gpool_run(void *arg, int64_t t0, int64_t t1) {
    const gpool_job *j = arg;
    for (int64_t t = t0; t < t1; t++) {
        const float *xp = j->x + t * j->sz;
        if (j->is_max) {
            float m = -INFINITY;
            for (int64_t i = 0; i < j->sz; i++) m = ert_max_nan(xp[i], m);
            j->y[t] = m;
        } else { /* large planes: keep the sum exact enough in double */
            j->y[t] = j->sz ? (float)(j->sum(xp, j->sz) / (double)j->sz) : 0.0f;
        }
    }
}

ert_status ert_cpu_global_pool(const ert_kargs *a) {
    const ert_tview *X = &a->in[0];
    if (X->dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    int64_t sz = 1;
    for (int i = 2; i < X->ndim; i++) sz *= X->dims[i];
    gpool_job j = {a->op == ERT_OP_GLOBAL_MAXPOOL, X->data, a->out[0].data, sz, plane_sum};
#if defined(__x86_64__) && defined(__GNUC__)
    const ert_cpu_gemm_kernel cap = ert_cpu_kernel_cap(a->choice);
    if (cap >= ERT_CPU_GEMM_AVX512 && __builtin_cpu_supports("avx512f")) j.sum = plane_sum_avx512;
    else if (cap >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2")) j.sum = plane_sum_avx2;
#endif
    ert_parallel_for(a->pool, X->dims[0] * X->dims[1], 1, gpool_run, &j);
    return ERT_OK;
}

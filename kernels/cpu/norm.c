/* BatchNormalization, LayerNormalization and InstanceNormalization, f32.
 * BatchNorm: x is (N, C, ...); per channel y = (x - mean) * scale / sqrt(var + eps) + B,
 * folded into one multiply-add per element; parallel over (image, channel).
 * BatchNorm training_mode=1 (ONNX 14+): mean and biased variance of channel c
 * over (N, spatial), accumulated in double, replace the mean/var inputs; the
 * optional outputs 1, 2 are input_mean * momentum + mean * (1 - momentum) and
 * the same for var (biased, as the ONNX reference and its test data).
 * Parallel over channels.
 * LayerNorm: x viewed as (outer, inner) with inner = prod(dims[axis:]); each
 * row is normalised with its own mean and variance (two passes, accumulated
 * in double so long rows keep precision; x - mean subtracts the float mean
 * and then its rounding error, so rows far from zero with a small spread
 * keep their precision too), then scale/bias (inner elements,
 * or one broadcast element). The optional outputs Mean and InvStdDev hold
 * one value per row (shape (outer dims, 1, ...)). Parallel over rows;
 * 8 floats at a time (ln_body) unless norm_plain (ert_internal.h) asks for
 * the plain rows, which stay as its oracle.
 * InstanceNorm: x is (N, C, spatial...); each (n, c) plane is a LayerNorm
 * row (same two double passes) with the per-channel scale[c], B[c]; y =
 * (x - float mean) * k + a bias that holds the mean's rounding error (as
 * BatchNorm training), never x * k - mean * k, which cancel for planes far
 * from 0 with a small spread.
 * Parallel over planes. */
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

typedef struct bn_job {
    const float *x, *scale, *bias, *mean, *var;
    float *y;
    float eps;
    int64_t C, sz;
} bn_job;

static void bn_run(void *arg, int64_t t0, int64_t t1) {
    const bn_job *j = arg;
    for (int64_t t = t0; t < t1; t++) {
        int64_t c = t % j->C;
        float k = j->scale[c] / sqrtf(j->var[c] + j->eps);
        float b = j->bias[c] - j->mean[c] * k;
        const float *xp = j->x + t * j->sz;
        float *yp = j->y + t * j->sz;
        for (int64_t i = 0; i < j->sz; i++) yp[i] = xp[i] * k + b;
    }
}

typedef struct bnt_job {
    const float *x, *scale, *bias, *mean, *var;
    float *y, *rmean, *rvar; /* rmean/rvar may be NULL (outputs not used) */
    float eps, momentum;
    int64_t N, C, sz;
} bnt_job;

static void bnt_run(void *arg, int64_t c0, int64_t c1) {
    const bnt_job *j = arg;
    const int64_t N = j->N, C = j->C, sz = j->sz, m = N * sz;
    for (int64_t c = c0; c < c1; c++) {
        double s = 0, s2 = 0;
        for (int64_t n = 0; n < N; n++) {
            const float *xp = j->x + (n * C + c) * sz;
            for (int64_t i = 0; i < sz; i++) s += xp[i];
        }
        double mu = m ? s / (double)m : 0.0;
        for (int64_t n = 0; n < N; n++) {
            const float *xp = j->x + (n * C + c) * sz;
            for (int64_t i = 0; i < sz; i++) s2 += (xp[i] - mu) * (xp[i] - mu);
        }
        double var = m ? s2 / (double)m : 0.0, mom = j->momentum;
        if (j->rmean) j->rmean[c] = (float)(j->mean[c] * mom + mu * (1.0 - mom));
        if (j->rvar) j->rvar[c] = (float)(j->var[c] * mom + var * (1.0 - mom));
        double k = j->scale[c] / sqrt(var + (double)j->eps);
        /* x - mean first (as InstanceNorm): x * k and mean * k cancel when k is large */
        float mf = (float)mu, kf = (float)k, bf = (float)(j->bias[c] - (mu - mf) * k);
        for (int64_t n = 0; n < N; n++) {
            const float *xp = j->x + (n * C + c) * sz;
            float *yp = j->y + (n * C + c) * sz;
            for (int64_t i = 0; i < sz; i++) yp[i] = (xp[i] - mf) * kf + bf;
        }
    }
}

ert_status ert_cpu_batchnorm(const ert_kargs *a) {
    const ert_tview *X = &a->in[0];
    for (int i = 0; i < 5; i++)
        if (a->in[i].dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    int64_t sz = 1;
    for (int i = 2; i < X->ndim; i++) sz *= X->dims[i];
    int64_t N = X->dims[0], C = X->ndim > 1 ? X->dims[1] : 1;
    if (a->params->norm.training) {
        bnt_job t = {X->data, a->in[1].data, a->in[2].data, a->in[3].data, a->in[4].data, a->out[0].data,
                     a->n_out > 1 ? a->out[1].data : NULL, a->n_out > 2 ? a->out[2].data : NULL,
                     a->params->norm.epsilon, a->params->norm.momentum, N, C, sz};
        ert_parallel_for(a->pool, C, 1, bnt_run, &t);
        return ERT_OK;
    }
    bn_job j = {X->data, a->in[1].data, a->in[2].data, a->in[3].data, a->in[4].data,
                a->out[0].data, a->params->norm.epsilon, C, sz};
    ert_parallel_for(a->pool, N * C, 1, bn_run, &j);
    return ERT_OK;
}

/* Mean and biased variance (*var) of x[0..n), n > 0: two passes in double,
 * so long rows and large offsets keep their precision. */
static double row_moments(const float *x, int64_t n, double *var) {
    double s = 0, v = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) {
        double dlt = x[i] - mean;
        v += dlt * dlt;
    }
    *var = v / (double)n;
    return mean;
}

typedef struct ln_job {
    const float *x, *scale, *bias;
    float *y, *mean, *invstd; /* mean/invstd: one per row, may be NULL */
    float eps;
    int64_t inner;
    bool scale_bcast, bias_bcast;
} ln_job;

/* The plain rows: the oracle of the vector rows below (norm_plain:
 * ert_internal.h), and the path for scale/bias broadcast from one value. */
static void ln_run(void *arg, int64_t r0, int64_t r1) {
    const ln_job *j = arg;
    const int64_t n = j->inner;
    for (int64_t r = r0; r < r1; r++) {
        const float *xp = j->x + r * n;
        float *yp = j->y + r * n;
        double v, mean = row_moments(xp, n, &v);
        float inv = (float)(1.0 / sqrt(v + (double)j->eps));
        float mf = (float)mean, mlo = (float)(mean - mf);
        if (j->mean) j->mean[r] = mf;
        if (j->invstd) j->invstd[r] = inv;
        for (int64_t i = 0; i < n; i++) {
            float sc = j->scale[j->scale_bcast ? 0 : i];
            float bi = j->bias ? j->bias[j->bias_bcast ? 0 : i] : 0.0f;
            yp[i] = ((xp[i] - mf) - mlo) * inv * sc + bi;
        }
    }
}

#if defined(__GNUC__)
/* The same rows 8 floats at a time (scale and bias per element: every
 * exporter's LayerNorm): both moments still two passes in double, in four
 * double lanes per half vector, so they agree with the plain rows to the
 * last float bit but for the order of the double sums; the scalar rows were
 * ~26 instructions an element, a tenth of ConvNeXt-atto's and DeiT-Tiny's
 * (callgrind). Compiled for the baseline and for AVX2 (norm.c's caller
 * picks at run time, like dwconv.c). */
typedef float ln_v8f __attribute__((vector_size(32)));
typedef float ln_v4f __attribute__((vector_size(16)));
typedef double ln_v4d __attribute__((vector_size(32)));

static inline __attribute__((always_inline)) double ln_hsum(ln_v4d v) { return (v[0] + v[1]) + (v[2] + v[3]); }

static inline __attribute__((always_inline)) void ln_body(const ln_job *j, int64_t r0, int64_t r1) {
    const int64_t n = j->inner, n8 = n / 8 * 8;
    for (int64_t r = r0; r < r1; r++) {
        const float *xp = j->x + r * n;
        float *yp = j->y + r * n;
        ln_v4d s0 = {0}, s1 = {0};
        int64_t i = 0;
        for (; i < n8; i += 8) {
            ln_v4f a, b;
            memcpy(&a, xp + i, sizeof a);
            memcpy(&b, xp + i + 4, sizeof b);
            s0 += __builtin_convertvector(a, ln_v4d);
            s1 += __builtin_convertvector(b, ln_v4d);
        }
        double s = ln_hsum(s0 + s1);
        for (; i < n; i++) s += xp[i];
        const double mean = s / (double)n;
        const ln_v4d mv = mean - (ln_v4d){0};
        ln_v4d v0 = {0}, v1 = {0};
        for (i = 0; i < n8; i += 8) {
            ln_v4f a, b;
            memcpy(&a, xp + i, sizeof a);
            memcpy(&b, xp + i + 4, sizeof b);
            const ln_v4d da = __builtin_convertvector(a, ln_v4d) - mv, db = __builtin_convertvector(b, ln_v4d) - mv;
            v0 += da * da;
            v1 += db * db;
        }
        double var = ln_hsum(v0 + v1);
        for (; i < n; i++) {
            const double d = xp[i] - mean;
            var += d * d;
        }
        var /= (double)n;
        const float inv = (float)(1.0 / sqrt(var + (double)j->eps)), mf = (float)mean, mlo = (float)(mean - mf);
        if (j->mean) j->mean[r] = mf;
        if (j->invstd) j->invstd[r] = inv;
        const ln_v8f z = {0}, mfv = mf + z, mlov = mlo + z, invv = inv + z;
        for (i = 0; i < n8; i += 8) {
            ln_v8f xv, sc, bi = z;
            memcpy(&xv, xp + i, sizeof xv);
            memcpy(&sc, j->scale + i, sizeof sc);
            if (j->bias) memcpy(&bi, j->bias + i, sizeof bi);
            xv = ((xv - mfv) - mlov) * invv * sc + bi;
            memcpy(yp + i, &xv, sizeof xv);
        }
        for (; i < n; i++) yp[i] = ((xp[i] - mf) - mlo) * inv * j->scale[i] + (j->bias ? j->bias[i] : 0.0f);
    }
}

static void ln_run_vec(void *arg, int64_t r0, int64_t r1) { ln_body(arg, r0, r1); }
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void ln_run_avx2(void *arg, int64_t r0, int64_t r1) {
    ln_body(arg, r0, r1);
}
#endif
#endif

/* The row function for j under kc: the plain rows when asked (norm_plain) or
 * when scale or bias is one broadcast value, else the widest vector copy the
 * CPU runs and kc's cap allows (cpu_gemm.h). */
static ert_par_fn ln_pick(const ln_job *j, const ert_kernel_choice *kc) {
    const ert_kernel_choice c = ert_kernel_choice_of(kc);
    if (c.norm_plain || j->scale_bcast || j->bias_bcast) return ln_run;
#if defined(__GNUC__)
#if defined(__x86_64__)
    if (ert_cpu_kernel_cap(kc) >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        return ln_run_avx2;
#endif
    return ln_run_vec;
#else
    return ln_run;
#endif
}

ert_status ert_cpu_layernorm(const ert_kargs *a) {
    const ert_tview *X = &a->in[0], *S = &a->in[1];
    const ert_tview *B = a->n_in > 2 && a->in[2].data ? &a->in[2] : NULL;
    if (X->dtype != ERT_DTYPE_F32 || S->dtype != ERT_DTYPE_F32 || (B && B->dtype != ERT_DTYPE_F32))
        return ERT_E_UNSUPPORTED;
    int64_t axis = a->params->norm.axis, inner = 1, outer = 1;
    for (int i = 0; i < X->ndim; i++) {
        if (i < axis) outer *= X->dims[i];
        else inner *= X->dims[i];
    }
    if (inner == 0 || outer == 0) return ERT_OK;
    ln_job j = {X->data, S->data, B ? B->data : NULL, a->out[0].data, a->n_out > 1 ? a->out[1].data : NULL,
                a->n_out > 2 ? a->out[2].data : NULL, a->params->norm.epsilon, inner,
                S->n_elems == 1, B && B->n_elems == 1};
    ert_parallel_for(a->pool, outer, 1 + 4096 / inner, ln_pick(&j, a->choice), &j);
    return ERT_OK;
}

typedef struct in_job {
    const float *x, *scale, *bias;
    float *y;
    float eps;
    int64_t C, sz;
} in_job;

static void in_run(void *arg, int64_t t0, int64_t t1) {
    const in_job *j = arg;
    const int64_t n = j->sz;
    for (int64_t t = t0; t < t1; t++) {
        const float *xp = j->x + t * n;
        float *yp = j->y + t * n;
        double v, mean = row_moments(xp, n, &v);
        int64_t c = t % j->C;
        double k = j->scale[c] / sqrt(v + (double)j->eps);
        /* (x - mf) * k + (B - (mean - mf) * k), not x * k + (B - mean * k):
         * with a small variance k is large and x * k, mean * k cancel */
        float mf = (float)mean, kf = (float)k, bf = (float)(j->bias[c] - (mean - mf) * k);
        for (int64_t i = 0; i < n; i++) yp[i] = (xp[i] - mf) * kf + bf;
    }
}

ert_status ert_cpu_instancenorm(const ert_kargs *a) {
    const ert_tview *X = &a->in[0];
    for (int i = 0; i < 3; i++)
        if (a->in[i].dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    if (X->ndim < 3) return ERT_E_UNSUPPORTED;
    int64_t sz = 1;
    for (int i = 2; i < X->ndim; i++) sz *= X->dims[i];
    if (X->n_elems == 0) return ERT_OK;
    in_job j = {X->data, a->in[1].data, a->in[2].data, a->out[0].data, a->params->norm.epsilon, X->dims[1], sz};
    ert_parallel_for(a->pool, X->dims[0] * X->dims[1], 1 + 4096 / sz, in_run, &j);
    return ERT_OK;
}

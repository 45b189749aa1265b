/* Normalisation in training mode and its backward, and Dropout in training
 * mode (f32).
 *
 * BATCHNORM_TRAIN (training): per channel c over (N, spatial): mean, biased
 *   variance; y = (x - mean) * invstd * scale + B; saves mean and invstd for
 *   the backward; running stats follow ONNX: r = r * momentum + batch * (1 -
 *   momentum), with the unbiased variance for running_var (as PyTorch).
 *   (eval): y from the running statistics, nothing updated.
 * BATCHNORM_GRAD: with xh = (x - mean) * invstd, g = dy * scale, m = N*spatial:
 *   dx = invstd * (g - mean(g) - xh * mean(g * xh)); dscale = sum dy*xh;
 *   dB = sum dy. Frozen statistics (running mean/var are constants):
 *   dx = g * invstd.
 * grad.relu (a Relu fused): BATCHNORM_TRAIN stores max(y, 0); BATCHNORM_GRAD
 *   uses dy where y > 0, else 0 (the Relu's gradient, folded into the sums
 *   and dx), with y recomputed from x exactly as the forward made it (k =
 *   invstd * scale, b = B - mean * k, y = x * k + b; B is in[5]), so the
 *   output need not be kept for the backward.
 * grad.replay: BATCHNORM_TRAIN with in[3], in[4] = the step's mean and invstd:
 *   y again, bit for bit, nothing updated (the trainer recomputes outputs in
 *   the backward instead of keeping them).
 * LAYERNORM_GRAD: the same formula per row (stats recomputed from x, in
 *   double); dscale and dB summed over rows.
 * DROPOUT_TRAIN: mask = (u >= ratio) / (1 - ratio) with u from a
 *   splitmix64 stream whose state lives in a u64 tensor (so checkpoints and
 *   resumes reproduce it); y = x * mask. The backward is Mul(dy, mask). */
#include "cpu_kernels.h"
#include "nan_rules.h"

#include <math.h>
#include <string.h>

static void bn_dims(const ert_tview *X, int64_t *N, int64_t *C, int64_t *sz) {
    *N = X->dims[0];
    *C = X->dims[1];
    *sz = 1;
    for (int i = 2; i < X->ndim; i++) *sz *= X->dims[i];
}

typedef struct bnt_job {
    const ert_grad_params *p;
    const float *x, *scale, *bias;
    float *rmean, *rvar, *y, *mean, *invstd;
    int64_t N, C, sz;
} bnt_job;

static void bnt_run(void *arg, int64_t c0, int64_t c1) {
    const bnt_job *j = arg;
    const int64_t N = j->N, C = j->C, sz = j->sz, m = N * sz;
    for (int64_t c = c0; c < c1; c++) {
        double mu, var;
        if (j->p->training) {
            double s = 0, s2 = 0;
            for (int64_t n = 0; n < N; n++) {
                const float *xp = j->x + (n * C + c) * sz;
                for (int64_t i = 0; i < sz; i++) s += xp[i];
            }
            mu = m ? s / (double)m : 0.0;
            for (int64_t n = 0; n < N; n++) {
                const float *xp = j->x + (n * C + c) * sz;
                for (int64_t i = 0; i < sz; i++) s2 += (xp[i] - mu) * (xp[i] - mu);
            }
            var = m ? s2 / (double)m : 0.0;
            double mom = j->p->momentum, unb = m > 1 ? s2 / (double)(m - 1) : var;
            j->rmean[c] = (float)(j->rmean[c] * mom + mu * (1.0 - mom));
            j->rvar[c] = (float)(j->rvar[c] * mom + unb * (1.0 - mom));
        } else if (j->p->replay) {
            mu = j->rmean[c];
            var = 0;
        } else {
            mu = j->rmean[c];
            var = j->rvar[c];
        }
        float inv = j->p->replay ? j->rvar[c] : (float)(1.0 / sqrt(var + j->p->eps));
        if (j->mean && j->p->training && !j->p->replay) {
            j->mean[c] = (float)mu;
            j->invstd[c] = inv;
        }
        float k = inv * j->scale[c], b = j->bias[c] - (float)mu * k;
        for (int64_t n = 0; n < N; n++) {
            const float *xp = j->x + (n * C + c) * sz;
            float *yp = j->y + (n * C + c) * sz;
            if (j->p->relu)
                for (int64_t i = 0; i < sz; i++) yp[i] = ert_relu_nan(xp[i] * k + b);
            else
                for (int64_t i = 0; i < sz; i++) yp[i] = xp[i] * k + b;
        }
    }
}

ert_status ert_cpu_batchnorm_train(const ert_kargs *a) {
    int64_t N, C, sz;
    bn_dims(&a->in[0], &N, &C, &sz);
    bnt_job j = {&a->params->grad, a->in[0].data, a->in[1].data, a->in[2].data, a->in[3].data, a->in[4].data,
                 a->out[0].data, a->n_out > 1 ? a->out[1].data : NULL, a->n_out > 2 ? a->out[2].data : NULL, N, C, sz};
    ert_parallel_for(a->pool, C, 1, bnt_run, &j);
    return ERT_OK;
}

typedef struct bng_job {
    const ert_grad_params *p;
    const float *dy, *x, *scale, *mean, *istd;  /* frozen: mean/istd hold running mean/var */
    const float *bias;                          /* relu: B (dy counts where the recomputed y > 0) */
    float *dx, *dscale, *dbias;
    int64_t N, C, sz;
} bng_job;

static void bng_run(void *arg, int64_t c0, int64_t c1) {
    const bng_job *j = arg;
    const int64_t N = j->N, C = j->C, sz = j->sz, m = N * sz;
    for (int64_t c = c0; c < c1; c++) {
        float mu = j->mean[c];
        float inv = j->p->frozen ? (float)(1.0 / sqrt((double)j->istd[c] + j->p->eps)) : j->istd[c];
        double sg = 0, sgx = 0;
        const bool relu = j->bias && !j->p->frozen;
        const float rk = inv * j->scale[c], rb = relu ? j->bias[c] - mu * rk : 0.0f; /* the forward's y = x*rk + rb */
        for (int64_t n = 0; n < N; n++) {
            const float *dp = j->dy + (n * C + c) * sz, *xp = j->x + (n * C + c) * sz;
            for (int64_t i = 0; i < sz; i++) {
                float d = relu && !(xp[i] * rk + rb > 0) ? 0.0f : dp[i];
                sg += d;
                sgx += d * (xp[i] - mu) * inv;
            }
        }
        if (j->dscale) j->dscale[c] = (float)sgx;
        if (j->dbias) j->dbias[c] = (float)sg;
        if (!j->dx) continue;
        float sc = j->scale[c];
        float mg = m ? (float)(sg / (double)m) : 0.0f, mgx = m ? (float)(sgx / (double)m) : 0.0f;
        for (int64_t n = 0; n < N; n++) {
            const float *dp = j->dy + (n * C + c) * sz, *xp = j->x + (n * C + c) * sz;
            float *o = j->dx + (n * C + c) * sz;
            if (j->p->frozen) {
                for (int64_t i = 0; i < sz; i++) o[i] = dp[i] * sc * inv;
            } else {
                for (int64_t i = 0; i < sz; i++) {
                    float xh = (xp[i] - mu) * inv, d = relu && !(xp[i] * rk + rb > 0) ? 0.0f : dp[i];
                    o[i] = sc * inv * (d - mg - xh * mgx);
                }
            }
        }
    }
}

ert_status ert_cpu_batchnorm_grad(const ert_kargs *a) {
    int64_t N, C, sz;
    bn_dims(&a->in[1], &N, &C, &sz);
    bng_job j = {&a->params->grad, a->in[0].data, a->in[1].data, a->in[2].data, a->in[3].data, a->in[4].data,
                 a->params->grad.relu && a->n_in > 5 ? a->in[5].data : NULL, a->out[0].data, a->out[1].data,
                 a->out[2].data, N, C, sz};
    ert_parallel_for(a->pool, C, 1, bng_run, &j);
    return ERT_OK;
}

ert_status ert_cpu_layernorm_grad(const ert_kargs *a) {
    const ert_tview *DY = &a->in[0], *X = &a->in[1], *S = &a->in[2];
    float *dx = a->out[0].data, *ds = a->out[1].data, *db = a->n_out > 2 ? a->out[2].data : NULL;
    int64_t axis = a->params->norm.axis, inner = 1, outer = 1;
    for (int i = 0; i < X->ndim; i++) {
        if (i < axis) outer *= X->dims[i];
        else inner *= X->dims[i];
    }
    bool sb = S->n_elems == 1;
    if (ds) memset(ds, 0, (size_t)a->out[1].n_elems * sizeof(float));
    if (db) memset(db, 0, (size_t)a->out[2].n_elems * sizeof(float));
    const float *dy = DY->data, *x = X->data, *sc = S->data;
    const double eps = a->params->norm.epsilon;
    for (int64_t r = 0; r < outer; r++) {
        const float *xp = x + r * inner, *gp = dy + r * inner;
        double s = 0, v = 0;
        for (int64_t i = 0; i < inner; i++) s += xp[i];
        double mu = s / (double)inner;
        for (int64_t i = 0; i < inner; i++) v += (xp[i] - mu) * (xp[i] - mu);
        double inv = 1.0 / sqrt(v / (double)inner + eps);
        double sg = 0, sgx = 0;
        for (int64_t i = 0; i < inner; i++) {
            double xh = (xp[i] - mu) * inv, g = gp[i] * (double)sc[sb ? 0 : i];
            sg += g;
            sgx += g * xh;
            if (ds) ds[sb ? 0 : i] += (float)(gp[i] * xh);
            if (db) db[a->out[2].n_elems == 1 ? 0 : i] += gp[i];
        }
        if (!dx) continue;
        double mg = sg / (double)inner, mgx = sgx / (double)inner;
        for (int64_t i = 0; i < inner; i++) {
            double xh = (xp[i] - mu) * inv, g = gp[i] * (double)sc[sb ? 0 : i];
            dx[r * inner + i] = (float)(inv * (g - mg - xh * mgx));
        }
    }
    return ERT_OK;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

ert_status ert_cpu_dropout_train(const ert_kargs *a) {
    const ert_grad_params *p = &a->params->grad;
    const float *x = a->in[0].data;
    uint64_t *rng = a->in[1].data;
    float *y = a->out[0].data, *mask = a->out[1].data;
    int64_t n = a->in[0].n_elems;
    if (!p->training || p->ratio <= 0.0f) {
        for (int64_t i = 0; i < n; i++) {
            y[i] = x[i];
            mask[i] = 1.0f;
        }
        return ERT_OK;
    }
    float keep = 1.0f / (1.0f - p->ratio);
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(rng) >> 11) * 0x1.0p-53;
        mask[i] = u >= p->ratio ? keep : 0.0f;
        y[i] = x[i] * mask[i];
    }
    return ERT_OK;
}

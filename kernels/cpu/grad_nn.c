/* Backward of MatMul, pooling, Softmax/LogSoftmax and Slice (f32).
 *
 * MATMUL_GRAD: a (..., M, K), b (..., K, N), dy (batch..., M, N) with numpy
 *   batch broadcasting. dA[ia] += dY[i] B[ib]^T, dB[ib] += A[ia]^T dY[i]: one
 *   SGEMM per output batch entry, accumulating where a batch dim was
 *   broadcast (that is the sum over it). Rank-1 operands are refused by the
 *   trainer.
 * MAXPOOL_GRAD: the window's maximum is searched again in x (first one on
 *   ties, like the forward's strict >) and receives dy. AVGPOOL_GRAD spreads
 *   dy / count over the window with the forward's count rule.
 * SOFTMAX_GRAD: dx = y * (dy - sum(dy * y)); LOGSOFTMAX_GRAD:
 *   dx = dy - exp(y) * sum(dy), sums along the axis.
 * SLICE_GRAD: zeros, then dy scattered to the sliced positions.
 * GATHER_GRAD: zeros, then each gathered row of dy added at its index (a
 *   repeated index accumulates); indices are checked before anything is
 *   written (they may come from the graph at run time). */
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ MatMul */

ert_status ert_cpu_matmul_grad(const ert_kargs *a) {
    const ert_grad_params *p = &a->params->grad;
    const ert_tview *DY = &a->in[0], *A = &a->in[1], *B = &a->in[2];
    ert_tview *O = &a->out[0];
    if (!O->data) return ERT_OK;
    if (A->ndim < 2 || B->ndim < 2) return ERT_E_UNSUPPORTED;
    int64_t M = A->dims[A->ndim - 2], K = A->dims[A->ndim - 1], N = B->dims[B->ndim - 1];
    int na = A->ndim - 2, nb = B->ndim - 2, nbd = DY->ndim - 2;
    int64_t n_batch = 1;
    for (int i = 0; i < nbd; i++) n_batch *= DY->dims[i];
    memset(O->data, 0, (size_t)O->n_elems * sizeof(float));
    for (int64_t bi = 0; bi < n_batch; bi++) {
        int64_t rem = bi, oa = 0, ob = 0, sa = M * K, sb = K * N;
        for (int d = nbd - 1; d >= 0; d--) {
            int64_t idx = rem % DY->dims[d];
            rem /= DY->dims[d];
            int da = d - (nbd - na), db = d - (nbd - nb);
            if (da >= 0) {
                if (A->dims[da] != 1) oa += idx * sa;
                sa *= A->dims[da];
            }
            if (db >= 0) {
                if (B->dims[db] != 1) ob += idx * sb;
                sb *= B->dims[db];
            }
        }
        const float *dy = (const float *)DY->data + bi * M * N;
        ert_sgemm_args g;
        if (p->which == 0) { /* dA (M,K) += dY (M,N) B^T (N,K) */
            g = (ert_sgemm_args){.M = M, .N = K, .K = N, .a = dy, .a_rs = N, .a_cs = 1, .alpha = 1.0f,
                                 .b = (const float *)B->data + ob, .b_rs = 1, .b_cs = N,
                                 .c = (float *)O->data + oa, .ldc = K, .accumulate = true,
                                 .choice = a->choice};
        } else { /* dB (K,N) += A^T (K,M) dY (M,N) */
            g = (ert_sgemm_args){.M = K, .N = N, .K = M, .a = (const float *)A->data + oa, .a_rs = 1, .a_cs = K,
                                 .alpha = 1.0f, .b = dy, .b_rs = N, .b_cs = 1,
                                 .c = (float *)O->data + ob, .ldc = N, .accumulate = true,
                                 .choice = a->choice};
        }
        ert_status st = ert_cpu_sgemm(&g, a->workspace, a->workspace_bytes, a->pool);
        if (st) return st;
    }
    return ERT_OK;
}

/* ------------------------------------------------------------ pooling */

typedef struct pg_job {
    const ert_pool_params *p;
    bool is_max;
    const float *x, *dy;
    float *dx;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int64_t in_sz, out_sz;
} pg_job;

static void taps(int64_t start, int64_t K, int64_t d, int64_t in, int64_t pe, int64_t *lo, int64_t *hi, int64_t *np) {
    *lo = start >= 0 ? 0 : (-start + d - 1) / d;
    *hi = in - start <= 0 ? 0 : (in - start + d - 1) / d;
    if (*hi > K) *hi = K;
    if (*lo > *hi) *lo = *hi;
    int64_t n = in + pe - start <= 0 ? 0 : (in + pe - start + d - 1) / d;
    *np = n > K ? K : n;
}

/* MaxPool 2x2 stride 2, no padding or dilation (most CNNs): windows do not
 * overlap, so each one writes its own 4 elements of dx. */
static bool is_max22(const pg_job *j) {
    return j->is_max && j->k[0] == 1 && j->k[1] == 2 && j->k[2] == 2 && j->s[1] == 2 && j->s[2] == 2 && j->d[1] == 1 &&
           j->d[2] == 1 && j->pb[1] == 0 && j->pb[2] == 0 && j->in[0] == 1 && j->out[1] * 2 <= j->in[1] &&
           j->out[2] * 2 <= j->in[2];
}

static void pg_max22(const pg_job *j, int64_t t) {
    const int64_t W = j->in[2], OH = j->out[1], OW = j->out[2];
    const float *xp = j->x + t * j->in_sz, *gp = j->dy + t * j->out_sz;
    float *dp = j->dx + t * j->in_sz;
    memset(dp, 0, (size_t)j->in_sz * sizeof(float));
    for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t i0 = 2 * oh * W + 2 * ow, c[4] = {i0, i0 + 1, i0 + W, i0 + W + 1}, b = c[0];
            float mx = xp[b];
            bool nan_seen = isnan(mx);
            for (int q = 1; q < 4; q++) /* first maximum, like the forward's strict > */
                if (!nan_seen && (xp[c[q]] > mx || isnan(xp[c[q]]))) mx = xp[c[q]], b = c[q], nan_seen = isnan(mx);
            dp[b] += gp[oh * OW + ow];
        }
}

static void pg_run(void *arg, int64_t t0, int64_t t1) {
    const pg_job *j = arg;
    if (is_max22(j)) {
        for (int64_t t = t0; t < t1; t++) pg_max22(j, t);
        return;
    }
    for (int64_t t = t0; t < t1; t++) {
        const float *xp = j->x + t * j->in_sz, *gp = j->dy + t * j->out_sz;
        float *dp = j->dx + t * j->in_sz;
        memset(dp, 0, (size_t)j->in_sz * sizeof(float));
        for (int64_t od = 0; od < j->out[0]; od++)
            for (int64_t oh = 0; oh < j->out[1]; oh++)
                for (int64_t ow = 0; ow < j->out[2]; ow++) {
                    int64_t o[3] = {od, oh, ow}, st[3], lo[3], hi[3], np[3];
                    for (int q = 0; q < 3; q++) {
                        st[q] = o[q] * j->s[q] - j->pb[q];
                        if (st[q] >= 0 && st[q] + (j->k[q] - 1) * j->d[q] < j->in[q]) {
                            lo[q] = 0, hi[q] = np[q] = j->k[q]; /* window inside: no divisions */
                            continue;
                        }
                        taps(st[q], j->k[q], j->d[q], j->in[q], j->pe[q], &lo[q], &hi[q], &np[q]);
                    }
                    float g = gp[(od * j->out[1] + oh) * j->out[2] + ow];
                    float mx = -INFINITY, w = 0.0f;
                    int64_t arg_i = -1;
                    if (!j->is_max) {
                        int64_t cnt = j->p->count_include_pad ? np[0] * np[1] * np[2]
                                                              : (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
                        w = cnt > 0 ? g / (float)cnt : 0.0f;
                    }
                    for (int64_t kd = lo[0]; kd < hi[0]; kd++) {
                        int64_t id = st[0] + kd * j->d[0];
                        for (int64_t kh = lo[1]; kh < hi[1]; kh++) {
                            int64_t base = (id * j->in[1] + st[1] + kh * j->d[1]) * j->in[2] + st[2];
                            for (int64_t kw = lo[2]; kw < hi[2]; kw++) {
                                int64_t i = base + kw * j->d[2];
                                if (j->is_max) {
                                    if (xp[i] > mx || (arg_i < 0 && isnan(xp[i]))) {
                                        mx = xp[i];
                                        arg_i = i;
                                    }
                                } else {
                                    dp[i] += w;
                                }
                            }
                        }
                    }
                    if (j->is_max && arg_i >= 0) dp[arg_i] += g;
                }
    }
}

ert_status ert_cpu_pool_grad(const ert_kargs *a) {
    const ert_pool_params *p = &a->params->pool;
    const ert_tview *DY = &a->in[0], *X = &a->in[1];
    if (!a->out[0].data) return ERT_OK;
    pg_job j = {.p = p, .is_max = a->op == ERT_OP_MAXPOOL_GRAD, .x = X->data, .dy = DY->data, .dx = a->out[0].data};
    int off = 3 - p->nsp;
    j.in_sz = j.out_sz = 1;
    for (int i = 0; i < 3; i++) {
        int s = i - off;
        bool real = s >= 0;
        j.in[i] = real ? X->dims[2 + s] : 1;
        j.out[i] = real ? DY->dims[2 + s] : 1;
        j.k[i] = real ? p->kernel[s] : 1;
        j.s[i] = real ? p->stride[s] : 1;
        j.d[i] = real ? p->dilation[s] : 1;
        j.pb[i] = real ? p->pad_begin[s] : 0;
        j.pe[i] = real ? p->pad_end[s] : 0;
        j.in_sz *= j.in[i];
        j.out_sz *= j.out[i];
    }
    ert_parallel_for(a->pool, X->dims[0] * X->dims[1], 1, pg_run, &j);
    return ERT_OK;
}

ert_status ert_cpu_global_avgpool_grad(const ert_kargs *a) {
    const ert_tview *DY = &a->in[0], *X = &a->in[1];
    float *dx = a->out[0].data;
    if (!dx) return ERT_OK;
    int64_t sz = 1;
    for (int i = 2; i < X->ndim; i++) sz *= X->dims[i];
    const float *dy = DY->data;
    for (int64_t t = 0; t < X->dims[0] * X->dims[1]; t++) {
        float v = sz ? dy[t] / (float)sz : 0.0f;
        for (int64_t i = 0; i < sz; i++) dx[t * sz + i] = v;
    }
    return ERT_OK;
}

/* ------------------------------------------------------------ softmax */

ert_status ert_cpu_softmax_grad(const ert_kargs *a) {
    const ert_tview *DY = &a->in[0], *Y = &a->in[1];
    float *dx = a->out[0].data;
    if (!dx) return ERT_OK;
    int64_t axis = a->params->axis.axis, outer = 1, inner = 1;
    for (int i = 0; i < Y->ndim; i++) {
        if (i < axis) outer *= Y->dims[i];
        else if (i > axis) inner *= Y->dims[i];
    }
    int64_t n = Y->ndim ? Y->dims[axis] : 1;
    const float *dy = DY->data, *y = Y->data;
    bool lg = a->op == ERT_OP_LOGSOFTMAX_GRAD;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            double s = 0;
            for (int64_t i = 0; i < n; i++) s += lg ? dy[base + i * inner] : dy[base + i * inner] * y[base + i * inner];
            for (int64_t i = 0; i < n; i++) {
                int64_t k = base + i * inner;
                dx[k] = lg ? dy[k] - expf(y[k]) * (float)s : y[k] * (dy[k] - (float)s);
            }
        }
    return ERT_OK;
}

/* ------------------------------------------------------------ slice */

ert_status ert_cpu_slice_grad(const ert_kargs *a) {
    const ert_slice_params *p = &a->params->slice;
    const ert_tview *DY = &a->in[0];
    ert_tview *DX = &a->out[0];
    if (!DX->data) return ERT_OK;
    float *dx = DX->data;
    const float *dy = DY->data;
    memset(dx, 0, (size_t)DX->n_elems * sizeof(float));
    int n = DX->ndim;
    int64_t xs[ERT_MAX_DIMS], idx[ERT_MAX_DIMS] = {0}, s = 1;
    for (int d = n - 1; d >= 0; d--) {
        xs[d] = s;
        s *= DX->dims[d];
    }
    int64_t off = 0;
    for (int d = 0; d < n; d++) off += p->start[d] * xs[d];
    for (int64_t e = 0; e < DY->n_elems; e++) {
        dx[off] += dy[e];
        for (int d = n - 1; d >= 0; d--) {
            off += p->step[d] * xs[d];
            if (++idx[d] < DY->dims[d]) break;
            off -= p->step[d] * xs[d] * DY->dims[d];
            idx[d] = 0;
        }
    }
    return ERT_OK;
}

/* ------------------------------------------------------------ gather */

ert_status ert_cpu_gather_grad(const ert_kargs *a) {
    const ert_tview *DY = &a->in[0], *I = &a->in[1];
    ert_tview *DX = &a->out[0];
    if (!DX->data) return ERT_OK;
    if (I->dtype != ERT_DTYPE_I64 && I->dtype != ERT_DTYPE_I32) return ERT_E_UNSUPPORTED;
    int64_t axis = a->params->gather.axis, dim = DX->dims[axis], outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= DX->dims[d];
    for (int d = (int)axis + 1; d < DX->ndim; d++) inner *= DX->dims[d];
    int64_t n_idx = I->n_elems;
    for (int64_t j = 0; j < n_idx; j++) {
        int64_t k = I->dtype == ERT_DTYPE_I64 ? ((const int64_t *)I->data)[j] : ((const int32_t *)I->data)[j];
        if (k < -dim || k >= dim) return ERT_E_ARG;
    }
    float *dx = DX->data;
    const float *dy = DY->data;
    memset(dx, 0, (size_t)DX->n_elems * sizeof(float));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n_idx; j++) {
            int64_t k = I->dtype == ERT_DTYPE_I64 ? ((const int64_t *)I->data)[j] : ((const int32_t *)I->data)[j];
            if (k < 0) k += dim;
            float *dst = dx + (o * dim + k) * inner;
            const float *src = dy + (o * n_idx + j) * inner;
            for (int64_t i = 0; i < inner; i++) dst[i] += src[i];
        }
    return ERT_OK;
}

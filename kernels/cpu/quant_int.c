/* Integer convolutions and matrix products: the plain, exact reference.
 *
 * QLinearConv / ConvInteger: x (N, C, D1..Dn) and w (M, C/group, k1..kn),
 * n = 1..3, both i8/u8. Per image and group, the integer im2col of
 * (x - xzp) (padding contributes 0) is (Kg, out) int32, the weights minus
 * their zero points (Mg, Kg) int32, and acc = w' cols is exact in int32
 * (|acc| <= Kg * 255 * 255 < 2^31: prepare refuses Kg or K above 33,025).
 * QLinearMatMul / MatMulInteger: MatMul's batch broadcasting; acc(i, j) =
 * sum_k (a(i,k) - azp) (b(k,j) - bzp[j]).
 * Requantisation as onnxruntime's MlasRequantizeOutput: the bias added in
 * int32, then y = clamp(round_half_even((float)acc * mult) + yzp) with
 * mult = xs * ws[m] / ys in f32 (that order); a fused Relu raises the lower
 * clamp to yzp (Q(Relu(v)) = max(Q(v), Q(0)) = max(Q(v), yzp), exactly).
 * The integer outputs (ConvInteger, MatMulInteger) are the exact sums. */
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

static inline int32_t qget(const ert_tview *v, int64_t i) {
    return v->dtype == ERT_DTYPE_U8 ? ((const uint8_t *)v->data)[i] : ((const int8_t *)v->data)[i];
}

/* Zero point k of an optional input (0 when omitted); a scalar serves every k. */
static int32_t zp_at(const ert_kargs *a, int in, int64_t k) {
    if (in < 0 || in >= a->n_in || !a->in[in].data) return 0;
    const ert_tview *z = &a->in[in];
    return qget(z, z->n_elems == 1 ? 0 : k);
}

static float scale_at(const ert_kargs *a, int in, int64_t k) {
    const ert_tview *s = &a->in[in];
    return ((const float *)s->data)[s->n_elems == 1 ? 0 : k];
}

/* y's quantized range and the requantisation of one accumulator. */
typedef struct requant {
    float xs, ys;
    int32_t yzp, lo, hi;
} requant;

static requant requant_of(const ert_kargs *a, int ix_scale) {
    const ert_tview *y = &a->out[0];
    requant r = {.xs = scale_at(a, ix_scale, 0), .ys = scale_at(a, 6, 0), .yzp = zp_at(a, 7, 0)};
    r.lo = y->dtype == ERT_DTYPE_U8 ? 0 : -128;
    r.hi = y->dtype == ERT_DTYPE_U8 ? 255 : 127;
    if (a->params->quant.conv.act.kind == ERT_ACT_RELU && r.yzp > r.lo) r.lo = r.yzp;
    return r;
}

static inline int32_t requant1(int32_t acc, float mult, const requant *r) {
    float v = (float)acc * mult;
    float lo = (float)(r->lo - r->yzp), hi = (float)(r->hi - r->yzp);
    v = v < lo ? lo : v > hi ? hi : v;
    return (int32_t)nearbyintf(v) + r->yzp;
}

static void store(ert_tview *y, int64_t i, int32_t v) {
    if (y->dtype == ERT_DTYPE_U8) ((uint8_t *)y->data)[i] = (uint8_t)v;
    else if (y->dtype == ERT_DTYPE_I8) ((int8_t *)y->data)[i] = (int8_t)v;
    else ((int32_t *)y->data)[i] = v;
}

/* ------------------------------------------------------------ convolution */

typedef struct qconv_job {
    const int32_t *wq, *cols; /* (Mg, Kg), (Kg, out) */
    int32_t *acc;             /* (Mg, out) */
    int64_t Kg, out;
} qconv_job;

static void qconv_rows(void *arg, int64_t m0, int64_t m1) {
    const qconv_job *j = arg;
    for (int64_t m = m0; m < m1; m++) {
        int32_t *acc = j->acc + m * j->out;
        memset(acc, 0, (size_t)j->out * sizeof *acc);
        for (int64_t k = 0; k < j->Kg; k++) {
            int32_t wv = j->wq[m * j->Kg + k];
            if (!wv) continue;
            const int32_t *c = j->cols + k * j->out;
            for (int64_t o = 0; o < j->out; o++) acc[o] += wv * c[o];
        }
    }
}

ert_status ert_cpu_qconv(const ert_kargs *a) {
    const ert_quant_params *qp = &a->params->quant;
    const ert_conv_params *cp = &qp->conv;
    bool ql = a->op == ERT_OP_QLINEAR_CONV;
    int iw = ql ? 3 : 1, ixz = 2, iwz = ql ? 5 : 3;
    const ert_tview *x = &a->in[0], *w = &a->in[iw];
    ert_tview *y = &a->out[0];
    const int32_t *bias = ql && cp->has_bias ? a->in[8].data : NULL;
    /* geometry padded to 3 spatial dims of size 1 */
    int64_t in[3] = {1, 1, 1}, od[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0};
    for (int i = 0; i < cp->nsp; i++) {
        int j = 3 - cp->nsp + i;
        in[j] = x->dims[2 + i], od[j] = y->dims[2 + i], k[j] = cp->kernel[i];
        s[j] = cp->stride[i], d[j] = cp->dilation[i], pb[j] = cp->pad_begin[i];
    }
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0], G = cp->group, Cg = C / G, Mg = M / G;
    int64_t in_sz = in[0] * in[1] * in[2], out_sz = od[0] * od[1] * od[2], k_sz = k[0] * k[1] * k[2];
    int64_t Kg = Cg * k_sz;
    int32_t *cols = a->workspace, *wq = cols + Kg * out_sz, *acc = wq + Mg * Kg;
    int32_t xzp = zp_at(a, ixz, 0);
    requant r = ql ? requant_of(a, 1) : (requant){0};
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            /* cols[(c, k0, k1, k2), (o0, o1, o2)] = x - xzp, 0 in the padding */
            for (int64_t c = 0; c < Cg; c++) {
                int64_t xoff = (n * C + g * Cg + c) * in_sz;
                for (int64_t q = 0; q < k_sz; q++) {
                    int64_t q0 = q / (k[1] * k[2]), q1 = q / k[2] % k[1], q2 = q % k[2];
                    int32_t *row = cols + (c * k_sz + q) * out_sz;
                    for (int64_t o = 0; o < out_sz; o++) {
                        int64_t o0 = o / (od[1] * od[2]), o1 = o / od[2] % od[1], o2 = o % od[2];
                        int64_t i0 = o0 * s[0] - pb[0] + q0 * d[0], i1 = o1 * s[1] - pb[1] + q1 * d[1],
                                i2 = o2 * s[2] - pb[2] + q2 * d[2];
                        bool inside = i0 >= 0 && i0 < in[0] && i1 >= 0 && i1 < in[1] && i2 >= 0 && i2 < in[2];
                        row[o] = inside ? qget(x, xoff + (i0 * in[1] + i1) * in[2] + i2) - xzp : 0;
                    }
                }
            }
            for (int64_t m = 0; m < Mg; m++) {
                int32_t wz = zp_at(a, iwz, g * Mg + m);
                for (int64_t q = 0; q < Kg; q++) wq[m * Kg + q] = qget(w, (g * Mg + m) * Kg + q) - wz;
            }
            qconv_job job = {.wq = wq, .cols = cols, .acc = acc, .Kg = Kg, .out = out_sz};
            ert_parallel_for(a->pool, Mg, 1, qconv_rows, &job);
            for (int64_t m = 0; m < Mg; m++) {
                int64_t mc = g * Mg + m, yoff = (n * M + mc) * out_sz;
                const int32_t *ar = acc + m * out_sz;
                if (!ql) {
                    for (int64_t o = 0; o < out_sz; o++) store(y, yoff + o, ar[o]);
                    continue;
                }
                float mult = r.xs * scale_at(a, 4, mc) / r.ys;
                int32_t b = bias ? bias[mc] : 0;
                for (int64_t o = 0; o < out_sz; o++) store(y, yoff + o, requant1(ar[o] + b, mult, &r));
            }
        }
    return ERT_OK;
}

/* ------------------------------------------------------------ matrix product */

ert_status ert_cpu_qmatmul(const ert_kargs *a) {
    bool ql = a->op == ERT_OP_QLINEAR_MATMUL;
    int ib = ql ? 3 : 1, iaz = 2, ibz = ql ? 5 : 3;
    const ert_tview *A = &a->in[0], *B = &a->in[ib];
    ert_tview *Y = &a->out[0];
    const int32_t *bias = ql && a->params->quant.conv.has_bias ? a->in[8].data : NULL;
    int64_t M = A->ndim >= 2 ? A->dims[A->ndim - 2] : 1, K = A->dims[A->ndim - 1];
    int64_t N = B->ndim >= 2 ? B->dims[B->ndim - 1] : 1;
    int64_t bd[ERT_MAX_DIMS], n_batch;
    int nbd;
    if (!ert_cpu_batch_shape(A, B, bd, &nbd, &n_batch)) return ERT_E_SHAPE;
    int32_t azp = zp_at(a, iaz, 0);
    requant r = ql ? requant_of(a, 1) : (requant){0};
    int32_t *acc = ql ? a->workspace : NULL;
    for (int64_t bi = 0; bi < n_batch; bi++) {
        int64_t oa, ob;
        ert_cpu_batch_offsets(A, B, bd, nbd, bi, M * K, K * N, &oa, &ob);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                int32_t bz = zp_at(a, ibz, j), sum = 0;
                for (int64_t kk = 0; kk < K; kk++)
                    sum += (qget(A, oa + i * K + kk) - azp) * (qget(B, ob + kk * N + j) - bz);
                if (ql) acc[i * N + j] = sum;
                else store(Y, bi * M * N + i * N + j, sum);
            }
        if (!ql) continue;
        for (int64_t j = 0; j < N; j++) {
            float mult = r.xs * scale_at(a, 4, j) / r.ys;
            for (int64_t i = 0; i < M; i++)
                store(Y, bi * M * N + i * N + j, requant1(acc[i * N + j] + (bias ? bias[j] : 0), mult, &r));
        }
    }
    return ERT_OK;
}

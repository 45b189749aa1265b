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
#include "cpu_gemm.h"
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
    int64_t Mg, Kg, out;
} qconv_job;

/* Rows [4*b0, 4*b1) of acc = wq cols, four output channels at a time so
 * each cols row is read once per four (the whole cols block is larger than
 * the caches on big layers). Compiled twice: for the baseline (x86-64 has
 * no 32-bit vector multiply before SSE4.1, so GCC emulates it with
 * pmuludq; aarch64's NEON has one) and for AVX2 (vpmulld, 8 lanes), picked
 * at run time under the kernel cap; int32 sums are exact, so both give the
 * same bits. */
static inline __attribute__((always_inline)) void qconv_rows_body(const qconv_job *j, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        int64_t m = 4 * b, nm = j->Mg - m < 4 ? j->Mg - m : 4;
        int32_t *acc[4];
        for (int r = 0; r < 4; r++) {
            acc[r] = j->acc + (m + (r < nm ? r : 0)) * j->out;
            if (r < nm) memset(acc[r], 0, (size_t)j->out * sizeof *acc[r]);
        }
        for (int64_t k = 0; k < j->Kg; k++) {
            const int32_t *restrict c = j->cols + k * j->out;
            int32_t w[4];
            for (int r = 0; r < 4; r++) w[r] = r < nm ? j->wq[(m + r) * j->Kg + k] : 0;
            int32_t *restrict a0 = acc[0], *restrict a1 = acc[1], *restrict a2 = acc[2], *restrict a3 = acc[3];
            const int32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
            if (nm == 4)
                for (int64_t o = 0; o < j->out; o++) {
                    int32_t v = c[o];
                    a0[o] += w0 * v, a1[o] += w1 * v, a2[o] += w2 * v, a3[o] += w3 * v;
                }
            else
                for (int r = 0; r < nm; r++)
                    for (int64_t o = 0; o < j->out; o++) acc[r][o] += w[r] * c[o];
        }
    }
}

static void qconv_rows(void *arg, int64_t b0, int64_t b1) { qconv_rows_body(arg, b0, b1); }
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void qconv_rows_avx2(void *arg, int64_t b0, int64_t b1) {
    qconv_rows_body(arg, b0, b1);
}
#endif

static ert_par_fn qconv_rows_pick(const ert_kernel_choice *kc) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (ert_cpu_kernel_cap(kc) >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2")) return qconv_rows_avx2;
#endif
    (void)kc;
    return qconv_rows;
}

/* y[o] = requant1(acc[o] + b) for n outputs of a u8/i8 y, one loop per
 * type; the same two copies as the rows (the AVX2 one inlines the rounding
 * as vroundps where the baseline calls nearbyintf: the same bits). */
static inline __attribute__((always_inline)) void qstore_body(const int32_t *restrict acc, int64_t n, int32_t b,
                                                              float mult, const requant *r, void *restrict y, bool u8) {
    if (u8)
        for (int64_t o = 0; o < n; o++) ((uint8_t *)y)[o] = (uint8_t)requant1(acc[o] + b, mult, r);
    else
        for (int64_t o = 0; o < n; o++) ((int8_t *)y)[o] = (int8_t)requant1(acc[o] + b, mult, r);
}

typedef void (*qstore_fn)(const int32_t *, int64_t, int32_t, float, const requant *, void *, bool);
static void qstore(const int32_t *acc, int64_t n, int32_t b, float mult, const requant *r, void *y, bool u8) {
    qstore_body(acc, n, b, mult, r, y, u8);
}
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void qstore_avx2(const int32_t *acc, int64_t n, int32_t b, float mult,
                                                        const requant *r, void *y, bool u8) {
    qstore_body(acc, n, b, mult, r, y, u8);
}
#endif

/* cols[(c, k0, k1, k2), (o0, o1, o2)] = x - xzp, 0 in the padding, for
 * input channels [c0, c0 + Cg) of image n (xs: x's data as int8 or uint8,
 * one copy of the loop per type so the per-element load does not branch). */
typedef struct qcols_geom {
    int64_t in[3], od[3], k[3], s[3], d[3], pb[3], k_sz, out_sz;
} qcols_geom;

#define QCOLS_BODY(T)                                                                                                 \
    for (int64_t c = 0; c < Cg; c++) {                                                                                \
        const T *xc = (const T *)xs + xoff + c * in_sz;                                                               \
        for (int64_t q = 0; q < g->k_sz; q++) {                                                                       \
            int64_t q0 = q / (g->k[1] * g->k[2]), q1 = q / g->k[2] % g->k[1], q2 = q % g->k[2];                       \
            int32_t *row = cols + (c * g->k_sz + q) * g->out_sz;                                                      \
            for (int64_t o0 = 0; o0 < g->od[0]; o0++) {                                                               \
                int64_t i0 = o0 * g->s[0] - g->pb[0] + q0 * g->d[0];                                                  \
                for (int64_t o1 = 0; o1 < g->od[1]; o1++, row += g->od[2]) {                                          \
                    int64_t i1 = o1 * g->s[1] - g->pb[1] + q1 * g->d[1];                                              \
                    if (i0 < 0 || i0 >= g->in[0] || i1 < 0 || i1 >= g->in[1]) {                                       \
                        memset(row, 0, (size_t)g->od[2] * sizeof *row);                                               \
                        continue;                                                                                     \
                    }                                                                                                 \
                    /* o2 in [lo, hi) reads inside the row: no test there (stride 1 vectorises) */            \
                    const T *xr = xc + (i0 * g->in[1] + i1) * g->in[2] - g->pb[2] + q2 * g->d[2];                     \
                    const int64_t s2 = g->s[2], off = q2 * g->d[2] - g->pb[2];                                        \
                    int64_t lo = off >= 0 ? 0 : (-off + s2 - 1) / s2;                                                 \
                    int64_t hi = g->in[2] - off <= 0 ? 0 : (g->in[2] - off + s2 - 1) / s2;                            \
                    if (hi > g->od[2]) hi = g->od[2];                                                                 \
                    if (lo > hi) lo = hi;                                                                             \
                    for (int64_t o2 = 0; o2 < lo; o2++) row[o2] = 0;                                                  \
                    if (s2 == 1)                                                                                      \
                        for (int64_t o2 = lo; o2 < hi; o2++) row[o2] = (int32_t)xr[o2] - xzp;                         \
                    else                                                                                              \
                        for (int64_t o2 = lo; o2 < hi; o2++) row[o2] = (int32_t)xr[o2 * s2] - xzp;                    \
                    for (int64_t o2 = hi; o2 < g->od[2]; o2++) row[o2] = 0;                                           \
                }                                                                                                     \
            }                                                                                                         \
        }                                                                                                             \
    }

static void qconv_cols(const qcols_geom *g, const void *xs, bool u8, int64_t xoff, int64_t Cg, int64_t in_sz,
                       int32_t xzp, int32_t *cols) {
    if (u8) {
        QCOLS_BODY(uint8_t)
    } else {
        QCOLS_BODY(int8_t)
    }
}
#undef QCOLS_BODY

ert_status ert_cpu_qconv(const ert_kargs *a) {
    const ert_quant_params *qp = &a->params->quant;
    const ert_conv_params *cp = &qp->conv;
    bool ql = a->op == ERT_OP_QLINEAR_CONV;
    int iw = ql ? 3 : 1, ixz = 2, iwz = ql ? 5 : 3;
    const ert_tview *x = &a->in[0], *w = &a->in[iw];
    ert_tview *y = &a->out[0];
    const int32_t *bias = ql && cp->has_bias ? a->in[8].data : NULL;
    const uint8_t *lut = ql && a->n_in > 9 ? a->in[9].data : NULL;
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
    qcols_geom geo = {.k_sz = k_sz, .out_sz = out_sz};
    for (int i = 0; i < 3; i++)
        geo.in[i] = in[i], geo.od[i] = od[i], geo.k[i] = k[i], geo.s[i] = s[i], geo.d[i] = d[i], geo.pb[i] = pb[i];
    const ert_par_fn rows = qconv_rows_pick(a->choice);
    qstore_fn put = qstore;
#if defined(__x86_64__) && defined(__GNUC__)
    if (rows == qconv_rows_avx2) put = qstore_avx2;
#endif
    const bool y_u8 = y->dtype == ERT_DTYPE_U8, y_q8 = y_u8 || y->dtype == ERT_DTYPE_I8;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            qconv_cols(&geo, x->data, x->dtype == ERT_DTYPE_U8, (n * C + g * Cg) * in_sz, Cg, in_sz, xzp, cols);
            for (int64_t m = 0; m < Mg; m++) {
                int32_t wz = zp_at(a, iwz, g * Mg + m);
                for (int64_t q = 0; q < Kg; q++) wq[m * Kg + q] = qget(w, (g * Mg + m) * Kg + q) - wz;
            }
            qconv_job job = {.wq = wq, .cols = cols, .acc = acc, .Mg = Mg, .Kg = Kg, .out = out_sz};
            ert_parallel_for(a->pool, (Mg + 3) / 4, 1, rows, &job);
            for (int64_t m = 0; m < Mg; m++) {
                int64_t mc = g * Mg + m, yoff = (n * M + mc) * out_sz;
                const int32_t *ar = acc + m * out_sz;
                if (!ql) {
                    for (int64_t o = 0; o < out_sz; o++) store(y, yoff + o, ar[o]);
                    continue;
                }
                float mult = r.xs * scale_at(a, 4, mc) / r.ys;
                int32_t b = bias ? bias[mc] : 0;
                if (y_q8) put(ar, out_sz, b, mult, &r, (char *)y->data + yoff, y_u8);
                else
                    for (int64_t o = 0; o < out_sz; o++) store(y, yoff + o, requant1(ar[o] + b, mult, &r));
                if (lut) { /* a fused ert.QLut (input 9): y = table[(uint8_t)y], same type */
                    uint8_t *yb = (uint8_t *)y->data + yoff;
                    for (int64_t o = 0; o < out_sz; o++) yb[o] = lut[yb[o]];
                }
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

/* ------------------------------------------------------------ max pooling */

/* MaxPool of int8/uint8 x (N, C, D1..Dn), n = 1..3: the largest value of
 * each window, padding ignored (what DQ -> MaxPool -> Q of one scale and
 * zero point computes, exactly). A window entirely in the padding (possible
 * with ceil_mode) gives the lowest value. */
ert_status ert_cpu_maxpool_q8(const ert_kargs *a) {
    const ert_pool_params *p = &a->params->pool;
    const ert_tview *x = &a->in[0];
    ert_tview *y = &a->out[0];
    if (p->nhwc) return ERT_E_UNSUPPORTED;
    int64_t in[3] = {1, 1, 1}, od[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0};
    for (int i = 0; i < p->nsp; i++) {
        int j = 3 - p->nsp + i;
        in[j] = x->dims[2 + i], od[j] = y->dims[2 + i], k[j] = p->kernel[i];
        s[j] = p->stride[i], d[j] = p->dilation[i] ? p->dilation[i] : 1, pb[j] = p->pad_begin[i];
    }
    int64_t planes = x->dims[0] * x->dims[1], in_sz = in[0] * in[1] * in[2], out_sz = od[0] * od[1] * od[2];
    int32_t lowest = x->dtype == ERT_DTYPE_U8 ? 0 : -128;
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t o = 0; o < out_sz; o++) {
            int64_t o0 = o / (od[1] * od[2]), o1 = o / od[2] % od[1], o2 = o % od[2];
            int32_t best = lowest;
            for (int64_t q0 = 0; q0 < k[0]; q0++) {
                int64_t i0 = o0 * s[0] - pb[0] + q0 * d[0];
                if (i0 < 0 || i0 >= in[0]) continue;
                for (int64_t q1 = 0; q1 < k[1]; q1++) {
                    int64_t i1 = o1 * s[1] - pb[1] + q1 * d[1];
                    if (i1 < 0 || i1 >= in[1]) continue;
                    for (int64_t q2 = 0; q2 < k[2]; q2++) {
                        int64_t i2 = o2 * s[2] - pb[2] + q2 * d[2];
                        if (i2 < 0 || i2 >= in[2]) continue;
                        int32_t v = qget(x, pl * in_sz + (i0 * in[1] + i1) * in[2] + i2);
                        best = v > best ? v : best;
                    }
                }
            }
            store(y, pl * out_sz + o, best);
        }
    return ERT_OK;
}

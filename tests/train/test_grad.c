/* Gradient check of every backward rule of the trainer.
 *
 * Each case builds a small graph with the builder in which every operand is a
 * weight (so the trainer computes dL/d operand for all of them), with random
 * shapes (broadcasting, strided/grouped/dilated/padded conv...). The trainer
 * runs one step with SGD lr = 0 (weights unchanged) and an MSE loss against a
 * random target; its f32 gradients are compared with central finite
 * differences of an independent float64 reference forward written here
 * (L = mean((y - t)^2), h = 1e-5). Non-smooth ops get inputs away from their
 * kinks. Losses (CE with label smoothing and class weights, BCE) are checked
 * the same way with their own float64 reference. */
#include "testutil.h"
#include "plan_oracle.h"
#include "trainer_internal.h"

#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
static ert_test_rng rng;

#define MAXP 6
typedef struct gc {
    const char *what;
    int np;
    const char *pname[MAXP];
    int pnd[MAXP];
    int64_t pdims[MAXP][6], pn[MAXP];
    float *pf[MAXP];
    double *pd[MAXP];
    int32_t pid[MAXP];
    int64_t iv[32];
    double fv[8];
    int64_t yd[6];
    int ynd;
    ert_builder *b;
    ert_loss_kind loss;
    double *tgt;     /* f32-valued target, or class indices */
    int64_t ny;
} gc;

typedef void (*fwd_fn)(const gc *c, double *y);

static int64_t prod(int nd, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

/* A parameter with values in [lo, hi); |v| >= gap away from 0 when gap > 0
 * (kinks). gap < 0: the values are a random permutation of an even grid on
 * [lo, hi), no two closer than (hi - lo) / n, so max-like ops have no
 * near-ties for the finite differences (step 1e-5) to straddle. */
static int32_t addp(gc *c, const char *name, int nd, const int64_t *d, double lo, double hi, double gap) {
    int k = c->np++;
    c->pname[k] = name;
    c->pnd[k] = nd;
    memcpy(c->pdims[k], d, (size_t)nd * sizeof *d);
    c->pn[k] = prod(nd, d);
    c->pf[k] = malloc((size_t)c->pn[k] * sizeof(float) + 4);
    c->pd[k] = malloc((size_t)c->pn[k] * sizeof(double) + 8);
    for (int64_t i = 0; i < c->pn[k]; i++) {
        double v;
        do v = ert_test_uniform(&rng, lo, hi);
        while (gap > 0 && fabs(v) < gap);
        if (gap < 0) v = lo + ((double)i + 0.5) * (hi - lo) / (double)c->pn[k];
        c->pf[k][i] = (float)v;
    }
    for (int64_t i = c->pn[k] - 1; gap < 0 && i > 0; i--) {
        int64_t j = (int64_t)(ert_test_u64(&rng) % (uint64_t)(i + 1));
        float t = c->pf[k][i];
        c->pf[k][i] = c->pf[k][j], c->pf[k][j] = t;
    }
    for (int64_t i = 0; i < c->pn[k]; i++) c->pd[k][i] = c->pf[k][i];
    CHECK_OK(ert_builder_weight(c->b, name, ERT_DTYPE_F32, nd, d, c->pf[k], &c->pid[k]), ctx);
    return c->pid[k];
}

static int32_t iconst(gc *c, int n, const int64_t *v) {
    int64_t d[1] = {n};
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(c->b, NULL, ERT_DTYPE_I64, 1, d, v, &id), ctx);
    return id;
}

static void gc_begin(gc *c, const char *what) {
    memset(c, 0, sizeof *c);
    c->what = what;
    c->loss = ERT_LOSS_MSE;
    CHECK_OK(ert_builder_create(ctx, &c->b), ctx);
}

static double loss_ref(const gc *c, const double *y, int64_t C) {
    double s = 0;
    if (c->loss == ERT_LOSS_MSE) {
        for (int64_t i = 0; i < c->ny; i++) s += (y[i] - c->tgt[i]) * (y[i] - c->tgt[i]);
        return s / (double)c->ny;
    }
    if (c->loss == ERT_LOSS_BCE_LOGITS) {
        for (int64_t i = 0; i < c->ny; i++) {
            double p = 1.0 / (1.0 + exp(-y[i]));
            s -= c->tgt[i] * log(p) + (1 - c->tgt[i]) * log(1 - p);
        }
        return s / (double)c->ny;
    }
    /* CE: fv[0] label smoothing, fv[1] != 0: class weights 1 + 0.5*c */
    double e = c->fv[0], norm = 0;
    int64_t N = c->ny / C;
    for (int64_t i = 0; i < N; i++) {
        const double *z = y + i * C;
        double mx = z[0], se = 0;
        for (int64_t k = 1; k < C; k++) mx = z[k] > mx ? z[k] : mx;
        for (int64_t k = 0; k < C; k++) se += exp(z[k] - mx);
        int64_t t = (int64_t)c->tgt[i];
        for (int64_t k = 0; k < C; k++) {
            double w = c->fv[1] != 0 ? 1 + 0.5 * (double)k : 1.0, lp = z[k] - mx - log(se);
            s -= (k == t ? (1 - e) * w : 0.0) * lp + e / (double)C * w * lp;
        }
        norm += c->fv[1] != 0 ? 1 + 0.5 * (double)t : 1.0;
    }
    return s / norm;
}

/* Build, step once with lr 0, compare gradients with finite differences. */
static void gc_check(gc *c, int32_t out, fwd_fn fwd, ert_bn_mode bn) {
    CHECK_OK(ert_builder_output(c->b, out, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(c->b, &m), ctx);
    ert_builder_free(c->b);
    ert_trainer *t = NULL;
    float cw[64];
    for (int i = 0; i < 64; i++) cw[i] = 1.0f + 0.5f * (float)i;
    ert_trainer_options to = {0};
    to.loss.kind = c->loss;
    to.optim.kind = ERT_OPTIM_SGD;
    to.bn = bn;
    if (m && c->loss == ERT_LOSS_CROSS_ENTROPY) {
        to.loss.label_smoothing = (float)c->fv[0];
        ert_tensor_info oi;
        ert_model_output_info(m, 0, &oi);
        if (c->fv[1] != 0) {
            to.loss.class_weights = cw;
            to.loss.n_class_weights = (int)oi.dims[1];
        }
    }
    if (m) CHECK_OK(ert_trainer_create(m, &to, &t), ctx);
    if (!t) {
        fprintf(stderr, "  case %s: no trainer\n", c->what);
        goto done;
    }
    ert_tensor_info yi;
    ert_trainer_output_info(t, &yi);
    c->ny = prod(yi.ndim, yi.dims);
    int64_t C = yi.ndim == 2 ? yi.dims[1] : 1;
    void *tg;
    ert_trainer_target_data(t, &tg);
    int64_t nt = c->loss == ERT_LOSS_CROSS_ENTROPY ? yi.dims[0] : c->ny;
    c->tgt = malloc((size_t)nt * sizeof(double));
    for (int64_t i = 0; i < nt; i++) {
        if (c->loss == ERT_LOSS_CROSS_ENTROPY) {
            int64_t k = ert_test_int(&rng, 0, (int)C - 1);
            ((int64_t *)tg)[i] = k;
            c->tgt[i] = (double)k;
        } else {
            float v = (float)ert_test_uniform(&rng, c->loss == ERT_LOSS_MSE ? -1 : 0, 1);
            ((float *)tg)[i] = v;
            c->tgt[i] = v;
        }
    }
    char why[256] = "";
    CHECK(ert_trainer_plan_check(t, why, sizeof why), "%s: plan: %s", c->what, why);
    int nb;
    const ert_plan_block *blk = ert_trainer_plan_blocks(t, &nb);
    CHECK(ert_plan_matches_oracle(blk, nb, why, sizeof why), "%s: plan vs oracle: %s", c->what, why);
    float loss = 0;
    CHECK_OK(ert_trainer_step(t, &loss), ctx);
    double *y = malloc((size_t)c->ny * sizeof(double));
    fwd(c, y);
    double L0 = loss_ref(c, y, C);
    CHECK(fabs(L0 - loss) <= 1e-4 * (1 + fabs(L0)), "%s: loss %.9g, float64 reference %.9g", c->what, (double)loss, L0);
    const double h = 1e-5;
    for (int k = 0; k < c->np; k++) {
        const float *g = NULL;
        if (ert_trainer_param(t, c->pname[k], NULL, &g, NULL) != ERT_OK) {
            CHECK(0, "%s: parameter %s has no gradient", c->what, c->pname[k]);
            continue;
        }
        int64_t n = c->pn[k], m_chk = n < 48 ? n : 48;
        double *fd = malloc((size_t)m_chk * sizeof(double));
        float *gg = malloc((size_t)m_chk * sizeof(float));
        double scale = 1e-3;
        for (int64_t j = 0; j < m_chk; j++) {
            int64_t e = n <= 48 ? j : (int64_t)(ert_test_u64(&rng) % (uint64_t)n);
            double v = c->pd[k][e];
            c->pd[k][e] = v + h;
            fwd(c, y);
            double lp = loss_ref(c, y, C);
            c->pd[k][e] = v - h;
            fwd(c, y);
            double lm = loss_ref(c, y, C);
            c->pd[k][e] = v;
            fd[j] = (lp - lm) / (2 * h);
            gg[j] = g[e];
            if (fabs(fd[j]) > scale) scale = fabs(fd[j]);
        }
        char what[128];
        snprintf(what, sizeof what, "%s d%s", c->what, c->pname[k]);
        CHECK(ert_test_close(what, gg, fd, m_chk, 2e-3 * scale, 2e-3), "%s: gradient vs finite differences", what);
        free(fd);
        free(gg);
    }
    free(y);
done:
    ert_trainer_free(t);
    ert_model_free(m);
    for (int k = 0; k < c->np; k++) {
        free(c->pf[k]);
        free(c->pd[k]);
    }
    free(c->tgt);
}

/* ------------------------------------------------------------ Conv */

/* iv: N C H W M KH KW sh sw pt pl pb pr dh dw G bias */
static void conv_ref(const gc *c, double *y) {
    const int64_t *v = c->iv;
    int64_t N = v[0], C = v[1], H = v[2], W = v[3], M = v[4], KH = v[5], KW = v[6], sh = v[7], sw = v[8];
    int64_t pt = v[9], pl = v[10], pb = v[11], pr = v[12], dh = v[13], dw = v[14], G = v[15];
    int64_t OH = (H + pt + pb - dh * (KH - 1) - 1) / sh + 1, OW = (W + pl + pr - dw * (KW - 1) - 1) / sw + 1;
    int64_t Cg = C / G, Mg = M / G;
    const double *x = c->pd[0], *w = c->pd[1], *b = v[16] ? c->pd[2] : NULL;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = b ? b[m] : 0;
                    int64_t g = m / Mg;
                    for (int64_t cc = 0; cc < Cg; cc++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += x[((n * C + g * Cg + cc) * H + ih) * W + iw] * w[((m * Cg + cc) * KH + kh) * KW + kw];
                            }
                    y[((n * M + m) * OH + oh) * OW + ow] = s;
                }
}

static void case_conv(int G, bool depthwise) {
    gc c;
    gc_begin(&c, depthwise ? "conv depthwise" : "conv");
    int64_t *v = c.iv;
    v[15] = G;
    v[0] = ert_test_int(&rng, 1, 2);
    v[1] = depthwise ? G : G * ert_test_int(&rng, 1, 3);
    v[2] = ert_test_int(&rng, 5, 8), v[3] = ert_test_int(&rng, 5, 8);
    v[4] = depthwise ? G * ert_test_int(&rng, 1, 2) : G * ert_test_int(&rng, 1, 3);
    v[5] = ert_test_int(&rng, 1, 3), v[6] = ert_test_int(&rng, 1, 3);
    v[7] = ert_test_int(&rng, 1, 2), v[8] = ert_test_int(&rng, 1, 2);
    for (int i = 9; i < 13; i++) v[i] = ert_test_int(&rng, 0, 1);
    v[13] = ert_test_int(&rng, 1, 2), v[14] = ert_test_int(&rng, 1, 2);
    v[16] = ert_test_int(&rng, 0, 1);
    int64_t xd[4] = {v[0], v[1], v[2], v[3]}, wd[4] = {v[4], v[1] / G, v[5], v[6]}, bd[1] = {v[4]};
    int32_t x = addp(&c, "x", 4, xd, -1, 1, 0), w = addp(&c, "w", 4, wd, -1, 1, 0);
    int32_t in[3] = {x, w, v[16] ? addp(&c, "b", 1, bd, -1, 1, 0) : -1};
    int64_t ks[2] = {v[5], v[6]}, st[2] = {v[7], v[8]}, pads[4] = {v[9], v[10], v[11], v[12]}, dl[2] = {v[13], v[14]};
    ert_attr at[5] = {ERT_ATTR_IS("kernel_shape", ks, 2), ERT_ATTR_IS("strides", st, 2), ERT_ATTR_IS("pads", pads, 4),
                      ERT_ATTR_IS("dilations", dl, 2), ERT_ATTR_I("group", G)};
    int32_t y = -1;
    CHECK_OK(ert_builder_node(c.b, "Conv", "conv", in, v[16] ? 3 : 2, at, 5, &y, 1), ctx);
    gc_check(&c, y, conv_ref, ERT_BN_TRAIN);
}

/* ------------------------------------------------------------ Gemm / MatMul */

/* iv: M N K transA transB cshape(0 none,1 (N),2 (M,N),3 (M,1)); fv: alpha beta */
static void gemm_ref(const gc *c, double *y) {
    int64_t M = c->iv[0], N = c->iv[1], K = c->iv[2];
    bool ta = c->iv[3], tb = c->iv[4];
    const double *A = c->pd[0], *B = c->pd[1], *C = c->iv[5] ? c->pd[2] : NULL;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
            double cv = !C ? 0 : c->iv[5] == 1 ? C[j] : c->iv[5] == 2 ? C[i * N + j] : C[i];
            y[i * N + j] = c->fv[0] * s + c->fv[1] * cv;
        }
}

static void case_gemm(void) {
    gc c;
    gc_begin(&c, "gemm");
    int64_t M = ert_test_int(&rng, 1, 7), N = ert_test_int(&rng, 1, 9), K = ert_test_int(&rng, 1, 8);
    c.iv[0] = M, c.iv[1] = N, c.iv[2] = K;
    c.iv[3] = ert_test_int(&rng, 0, 1), c.iv[4] = ert_test_int(&rng, 0, 1), c.iv[5] = ert_test_int(&rng, 0, 3);
    c.fv[0] = ert_test_uniform(&rng, 0.5, 1.5), c.fv[1] = ert_test_uniform(&rng, 0.5, 1.5);
    int64_t ad[2] = {c.iv[3] ? K : M, c.iv[3] ? M : K}, bd[2] = {c.iv[4] ? N : K, c.iv[4] ? K : N};
    int64_t cd[3][2] = {{N, 0}, {M, N}, {M, 1}};
    int32_t in[3] = {addp(&c, "a", 2, ad, -1, 1, 0), addp(&c, "bm", 2, bd, -1, 1, 0), -1};
    if (c.iv[5]) in[2] = addp(&c, "c", c.iv[5] == 1 ? 1 : 2, cd[c.iv[5] - 1], -1, 1, 0);
    ert_attr at[4] = {ERT_ATTR_I("transA", c.iv[3]), ERT_ATTR_I("transB", c.iv[4]), ERT_ATTR_F("alpha", (float)c.fv[0]),
                      ERT_ATTR_F("beta", (float)c.fv[1])};
    c.fv[0] = (float)c.fv[0], c.fv[1] = (float)c.fv[1];
    int32_t y = -1;
    CHECK_OK(ert_builder_node(c.b, "Gemm", "gemm", in, c.iv[5] ? 3 : 2, at, 4, &y, 1), ctx);
    gc_check(&c, y, gemm_ref, ERT_BN_TRAIN);
}

/* A and B padded to rank 4 (iv[0..3], iv[4..7]); M K N in iv[8..10]. */
static void matmul_ref(const gc *c, double *y) {
    const int64_t *ad = c->iv, *bd = c->iv + 4;
    int64_t M = c->iv[8], K = c->iv[9], N = c->iv[10];
    int64_t o0 = ad[0] > bd[0] ? ad[0] : bd[0], o1 = ad[1] > bd[1] ? ad[1] : bd[1];
    for (int64_t p = 0; p < o0; p++)
        for (int64_t q = 0; q < o1; q++) {
            const double *A = c->pd[0] + ((ad[0] == 1 ? 0 : p) * ad[1] + (ad[1] == 1 ? 0 : q)) * M * K;
            const double *B = c->pd[1] + ((bd[0] == 1 ? 0 : p) * bd[1] + (bd[1] == 1 ? 0 : q)) * K * N;
            double *Y = y + (p * o1 + q) * M * N;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
                    Y[i * N + j] = s;
                }
        }
}

static void case_matmul(void) {
    gc c;
    gc_begin(&c, "matmul");
    int64_t M = ert_test_int(&rng, 1, 5), K = ert_test_int(&rng, 1, 6), N = ert_test_int(&rng, 1, 5);
    int64_t b0 = ert_test_int(&rng, 1, 3), b1 = ert_test_int(&rng, 1, 3);
    int na = ert_test_int(&rng, 2, 4), nb = ert_test_int(&rng, 2, 4);
    /* batch dims: each side either has the dim or 1 (broadcast) */
    int64_t a4[4] = {ert_test_int(&rng, 0, 1) ? b0 : 1, ert_test_int(&rng, 0, 1) ? b1 : 1, M, K};
    int64_t b4[4] = {ert_test_int(&rng, 0, 1) ? b0 : 1, ert_test_int(&rng, 0, 1) ? b1 : 1, K, N};
    for (int i = 0; i < 4 - na; i++) a4[i] = 1;
    for (int i = 0; i < 4 - nb; i++) b4[i] = 1;
    memcpy(c.iv, a4, sizeof a4);
    memcpy(c.iv + 4, b4, sizeof b4);
    c.iv[8] = M, c.iv[9] = K, c.iv[10] = N;
    int32_t in[2] = {addp(&c, "a", na, a4 + 4 - na, -1, 1, 0), addp(&c, "bm", nb, b4 + 4 - nb, -1, 1, 0)};
    int32_t y = -1;
    CHECK_OK(ert_builder_node(c.b, "MatMul", "mm", in, 2, NULL, 0, &y, 1), ctx);
    gc_check(&c, y, matmul_ref, ERT_BN_TRAIN);
}

/* ------------------------------------------------------------ element-wise */

/* binary with broadcast, both padded to rank 4: a iv[0..3], b iv[4..7], op iv[8] */
static void binary_ref(const gc *c, double *y) {
    const int64_t *a = c->iv, *b = c->iv + 4;
    int64_t o[4];
    for (int i = 0; i < 4; i++) o[i] = a[i] > b[i] ? a[i] : b[i];
    int64_t e = 0;
    for (int64_t i0 = 0; i0 < o[0]; i0++)
        for (int64_t i1 = 0; i1 < o[1]; i1++)
            for (int64_t i2 = 0; i2 < o[2]; i2++)
                for (int64_t i3 = 0; i3 < o[3]; i3++, e++) {
                    int64_t ix[4] = {i0, i1, i2, i3}, ia = 0, ib = 0;
                    for (int d = 0; d < 4; d++) {
                        ia = ia * a[d] + (a[d] == 1 ? 0 : ix[d]);
                        ib = ib * b[d] + (b[d] == 1 ? 0 : ix[d]);
                    }
                    double va = c->pd[0][ia], vb = c->pd[1][ib];
                    switch (c->iv[8]) {
                    case 0: y[e] = va + vb; break;
                    case 1: y[e] = va - vb; break;
                    case 2: y[e] = va * vb; break;
                    default: y[e] = va / vb; break;
                    }
                }
}

static void case_binary(int op) {
    static const char *names[] = {"Add", "Sub", "Mul", "Div"};
    gc c;
    gc_begin(&c, names[op]);
    int64_t full[4] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 2, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 2, 5)};
    int na = ert_test_int(&rng, 1, 4), nb = ert_test_int(&rng, 1, 4);
    int64_t a4[4], b4[4];
    for (int i = 0; i < 4; i++) {
        int mode = ert_test_int(&rng, 0, 2); /* 0 both, 1 a broadcast, 2 b broadcast */
        a4[i] = mode == 1 ? 1 : full[i];
        b4[i] = mode == 2 ? 1 : full[i];
        if (i < 4 - na) a4[i] = 1;
        if (i < 4 - nb) b4[i] = 1;
    }
    /* one-element weights of element-wise ops are constants, not parameters */
    if (prod(4, a4) == 1) a4[3] = full[3];
    if (prod(4, b4) == 1) b4[3] = full[3];
    memcpy(c.iv, a4, sizeof a4);
    memcpy(c.iv + 4, b4, sizeof b4);
    c.iv[8] = op;
    /* Div: keep the divisor away from 0 */
    int32_t in[2] = {addp(&c, "a", na, a4 + 4 - na, -1, 1, 0), addp(&c, "bb", nb, b4 + 4 - nb, op == 3 ? 0.5 : -1, op == 3 ? 1.5 : 1, 0)};
    int32_t y = -1;
    CHECK_OK(ert_builder_node(c.b, names[op], "bin", in, 2, NULL, 0, &y, 1), ctx);
    gc_check(&c, y, binary_ref, ERT_BN_TRAIN);
}

/* iv[0]: which activation; fv: alpha beta */
static double act_ref(int k, double x, const double *fv) {
    switch (k) {
    case 0: return x > 0 ? x : 0;
    case 1: return x >= 0 ? x : fv[0] * x;
    case 2: return 1 / (1 + exp(-x));
    case 3: return tanh(x);
    case 4: { double v = fv[0] * x + fv[1]; return v < 0 ? 0 : v > 1 ? 1 : v; }
    case 5: { double v = x / 6 + 0.5; return x * (v < 0 ? 0 : v > 1 ? 1 : v); }
    case 6: return x / (1 + exp(-x));
    case 7: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case 8: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    default: return x < fv[0] ? fv[0] : x > fv[1] ? fv[1] : x; /* clip */
    }
}

static void unary_fwd(const gc *c, double *y) {
    for (int64_t i = 0; i < c->pn[0]; i++) y[i] = act_ref((int)c->iv[0], c->pd[0][i], c->fv);
}

static void case_unary(int k) {
    static const char *ops[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Silu", "Gelu", "Gelu", "Clip"};
    gc c;
    gc_begin(&c, k == 8 ? "Gelu(tanh)" : ops[k]);
    c.iv[0] = k;
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 2, 6)};
    /* kinks: relu/leaky at 0, hardsigmoid at +-2.5, hardswish at +-3, clip at its bounds: values avoid them */
    int32_t x = addp(&c, "x", 3, d, -4, 4, 0.05);
    for (int64_t i = 0; i < c.pn[0]; i++) {
        double v = c.pd[0][i];
        if (fabs(fabs(v) - 2.5) < 0.05 || fabs(fabs(v) - 3) < 0.05 || fabs(v - 1.0) < 0.05 || fabs(v + 0.5) < 0.05)
            c.pf[0][i] = (float)(v + 0.13), c.pd[0][i] = c.pf[0][i];
    }
    /* re-create the weight with the adjusted values */
    ert_builder_free(c.b);
    CHECK_OK(ert_builder_create(ctx, &c.b), ctx);
    CHECK_OK(ert_builder_weight(c.b, "x", ERT_DTYPE_F32, 3, d, c.pf[0], &x), ctx);
    ert_attr at[2];
    int na = 0, n_in = 1;
    int32_t in[3] = {x, -1, -1};
    if (k == 1) c.fv[0] = 0.1, at[na++] = ERT_ATTR_F("alpha", 0.1f);
    if (k == 4) c.fv[0] = 0.2, c.fv[1] = 0.5, at[na++] = ERT_ATTR_F("alpha", 0.2f), at[na++] = ERT_ATTR_F("beta", 0.5f);
    c.fv[0] = (float)c.fv[0], c.fv[1] = (float)c.fv[1];
    if (k == 8) at[na++] = ERT_ATTR_S("approximate", "tanh");
    if (k == 9) {
        float lo = -0.5f, hi = 1.0f;
        int32_t l = -1, h = -1;
        CHECK_OK(ert_builder_weight(c.b, "clip_lo", ERT_DTYPE_F32, 0, NULL, &lo, &l), ctx);
        CHECK_OK(ert_builder_weight(c.b, "clip_hi", ERT_DTYPE_F32, 0, NULL, &hi, &h), ctx);
        in[1] = l, in[2] = h, n_in = 3;
        c.fv[0] = lo, c.fv[1] = hi;
    }
    int32_t y = -1;
    CHECK_OK(ert_builder_node(c.b, ops[k], "act", in, n_in, at, na, &y, 1), ctx);
    gc_check(&c, y, unary_fwd, ERT_BN_TRAIN);
}

/* ------------------------------------------------------------ pooling */

/* iv: N C H W KH KW sh sw pt pl pb pr max count_include_pad dh dw */
static void pool_ref(const gc *c, double *y) {
    const int64_t *v = c->iv;
    int64_t N = v[0], C = v[1], H = v[2], W = v[3], KH = v[4], KW = v[5], sh = v[6], sw = v[7];
    int64_t pt = v[8], pl = v[9], pb = v[10], pr = v[11], dh = v[14], dw = v[15];
    int64_t OH = (H + pt + pb - dh * (KH - 1) - 1) / sh + 1, OW = (W + pl + pr - dw * (KW - 1) - 1) / sw + 1;
    const double *x = c->pd[0];
    for (int64_t p = 0; p < N * C; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double mx = -INFINITY, s = 0;
                int64_t cnt = 0;
                for (int64_t kh = 0; kh < KH; kh++)
                    for (int64_t kw = 0; kw < KW; kw++) {
                        int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
                            cnt += v[13];
                            continue;
                        }
                        double xv = x[(p * H + ih) * W + iw];
                        mx = xv > mx ? xv : mx;
                        s += xv;
                        cnt++;
                    }
                y[(p * OH + oh) * OW + ow] = v[12] ? mx : s / (double)cnt;
            }
}

static void case_pool(bool is_max) {
    gc c;
    gc_begin(&c, is_max ? "MaxPool" : "AveragePool");
    int64_t *v = c.iv;
    v[0] = ert_test_int(&rng, 1, 2), v[1] = ert_test_int(&rng, 1, 3), v[2] = ert_test_int(&rng, 5, 8), v[3] = ert_test_int(&rng, 5, 8);
    v[4] = ert_test_int(&rng, 2, 3), v[5] = ert_test_int(&rng, 1, 3), v[6] = ert_test_int(&rng, 1, 2), v[7] = ert_test_int(&rng, 1, 2);
    for (int i = 8; i < 12; i++) v[i] = ert_test_int(&rng, 0, 1);
    /* no window entirely in the padding (MaxPool gives -inf there, AveragePool 0/0) */
    if (v[4] == 1) v[8] = v[10] = 0;
    if (v[5] == 1) v[9] = v[11] = 0;
    v[12] = is_max;
    v[13] = is_max ? 0 : ert_test_int(&rng, 0, 1);
    v[14] = is_max ? ert_test_int(&rng, 1, 2) : 1, v[15] = is_max ? ert_test_int(&rng, 1, 2) : 1;
    int64_t xd[4] = {v[0], v[1], v[2], v[3]};
    int32_t x = addp(&c, "x", 4, xd, -1, 1, -1);
    int64_t ks[2] = {v[4], v[5]}, st[2] = {v[6], v[7]}, pads[4] = {v[8], v[9], v[10], v[11]}, dl[2] = {v[14], v[15]};
    ert_attr at[4] = {ERT_ATTR_IS("kernel_shape", ks, 2), ERT_ATTR_IS("strides", st, 2), ERT_ATTR_IS("pads", pads, 4),
                      is_max ? ERT_ATTR_IS("dilations", dl, 2) : ERT_ATTR_I("count_include_pad", v[13])};
    int32_t y = -1;
    CHECK_OK(ert_builder_node(c.b, is_max ? "MaxPool" : "AveragePool", "pool", &x, 1, at, 4, &y, 1), ctx);
    gc_check(&c, y, pool_ref, ERT_BN_TRAIN);
}

/* MaxPool 2x2 stride 2 (the kernels' fast path), odd sizes: the last row or
 * column is not covered. */
static void case_pool22(void) {
    gc c;
    gc_begin(&c, "MaxPool 2x2/2");
    int64_t *v = c.iv;
    v[0] = ert_test_int(&rng, 1, 2), v[1] = ert_test_int(&rng, 1, 3), v[2] = ert_test_int(&rng, 2, 7), v[3] = ert_test_int(&rng, 2, 9);
    v[4] = v[5] = v[6] = v[7] = 2;
    v[12] = 1, v[14] = v[15] = 1;
    int64_t xd[4] = {v[0], v[1], v[2], v[3]};
    int32_t x = addp(&c, "x", 4, xd, -1, 1, -1), y = -1;
    CHECK_OK(ert_builder_maxpool2d(c.b, x, 2, 2, 0, &y), ctx);
    gc_check(&c, y, pool_ref, ERT_BN_TRAIN);
}

static void gap_ref(const gc *c, double *y) {
    int64_t P = c->iv[0] * c->iv[1], S = c->iv[2] * c->iv[3];
    for (int64_t p = 0; p < P; p++) {
        double s = 0;
        for (int64_t i = 0; i < S; i++) s += c->pd[0][p * S + i];
        y[p] = s / (double)S;
    }
}

static void case_gap(void) {
    gc c;
    gc_begin(&c, "GlobalAveragePool");
    int64_t d[4] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 1, 5), ert_test_int(&rng, 1, 5)};
    memcpy(c.iv, d, sizeof d);
    int32_t x = addp(&c, "x", 4, d, -1, 1, 0), y = -1;
    CHECK_OK(ert_builder_unary(c.b, "GlobalAveragePool", x, &y), ctx);
    gc_check(&c, y, gap_ref, ERT_BN_TRAIN);
}

/* ------------------------------------------------------------ normalisation */

/* iv: N C S frozen; fv[0] eps. params x scale B (mean var as constants) */
static void bn_ref(const gc *c, double *y) {
    int64_t N = c->iv[0], C = c->iv[1], S = c->iv[2];
    const double *x = c->pd[0], *sc = c->pd[1], *b = c->pd[2];
    for (int64_t ch = 0; ch < C; ch++) {
        double mu = 0, var = 0;
        if (!c->iv[3]) {
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) mu += x[(n * C + ch) * S + i];
            mu /= (double)(N * S);
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) var += pow(x[(n * C + ch) * S + i] - mu, 2);
            var /= (double)(N * S);
        } else {
            mu = c->iv[8 + ch] / 1000.0;   /* running mean, stored exactly */
            var = c->iv[16 + ch] / 1000.0; /* running var */
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                int64_t e = (n * C + ch) * S + i;
                y[e] = (x[e] - mu) / sqrt(var + c->fv[0]) * sc[ch] + b[ch];
            }
    }
}

static void case_bn(bool frozen) {
    gc c;
    gc_begin(&c, frozen ? "BatchNorm(frozen)" : "BatchNorm(train)");
    int64_t N = ert_test_int(&rng, 2, 3), C = ert_test_int(&rng, 1, 4), H = ert_test_int(&rng, 1, 3), W = ert_test_int(&rng, 2, 4);
    c.iv[0] = N, c.iv[1] = C, c.iv[2] = H * W, c.iv[3] = frozen;
    c.fv[0] = (float)1e-3;
    int64_t xd[4] = {N, C, H, W}, cd[1] = {C};
    int32_t in[5] = {addp(&c, "x", 4, xd, -1, 1, 0), addp(&c, "scale", 1, cd, 0.5, 1.5, 0), addp(&c, "bias", 1, cd, -1, 1, 0), -1, -1};
    float rm[8], rv[8];
    for (int64_t ch = 0; ch < C; ch++) {
        c.iv[8 + ch] = ert_test_int(&rng, -500, 500);
        c.iv[16 + ch] = ert_test_int(&rng, 500, 2000);
        rm[ch] = (float)(c.iv[8 + ch] / 1000.0);
        rv[ch] = (float)(c.iv[16 + ch] / 1000.0);
        c.iv[8 + ch] = (int64_t)llround((double)rm[ch] * 1000.0); /* keep the reference equal to the f32 value */
    }
    CHECK_OK(ert_builder_weight(c.b, "rmean", ERT_DTYPE_F32, 1, cd, rm, &in[3]), ctx);
    CHECK_OK(ert_builder_weight(c.b, "rvar", ERT_DTYPE_F32, 1, cd, rv, &in[4]), ctx);
    ert_attr at[1] = {ERT_ATTR_F("epsilon", 1e-3f)};
    int32_t y = -1;
    CHECK_OK(ert_builder_node(c.b, "BatchNormalization", "bn", in, 5, at, 1, &y, 1), ctx);
    gc_check(&c, y, bn_ref, frozen ? ERT_BN_FROZEN : ERT_BN_TRAIN);
}

/* iv: outer inner has_bias; fv[0] eps */
static void ln_ref(const gc *c, double *y) {
    int64_t O = c->iv[0], I = c->iv[1];
    for (int64_t r = 0; r < O; r++) {
        const double *x = c->pd[0] + r * I;
        double mu = 0, var = 0;
        for (int64_t i = 0; i < I; i++) mu += x[i];
        mu /= (double)I;
        for (int64_t i = 0; i < I; i++) var += (x[i] - mu) * (x[i] - mu);
        var /= (double)I;
        for (int64_t i = 0; i < I; i++)
            y[r * I + i] = (x[i] - mu) / sqrt(var + c->fv[0]) * c->pd[1][i] + (c->iv[2] ? c->pd[2][i] : 0);
    }
}

static void case_ln(void) {
    gc c;
    gc_begin(&c, "LayerNorm");
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 2, 4), ert_test_int(&rng, 2, 6)};
    int axis = ert_test_int(&rng, 1, 2);
    c.iv[0] = axis == 1 ? d[0] : d[0] * d[1];
    c.iv[1] = axis == 1 ? d[1] * d[2] : d[2];
    c.iv[2] = ert_test_int(&rng, 0, 1);
    c.fv[0] = (float)1e-4;
    int32_t in[3] = {addp(&c, "x", 3, d, -1, 1, 0), addp(&c, "scale", 3 - axis, d + axis, 0.5, 1.5, 0), -1};
    if (c.iv[2]) in[2] = addp(&c, "bias", 3 - axis, d + axis, -1, 1, 0);
    ert_attr at[2] = {ERT_ATTR_I("axis", axis), ERT_ATTR_F("epsilon", 1e-4f)};
    int32_t y = -1;
    CHECK_OK(ert_builder_node(c.b, "LayerNormalization", "ln", in, c.iv[2] ? 3 : 2, at, 2, &y, 1), ctx);
    gc_check(&c, y, ln_ref, ERT_BN_TRAIN);
}

/* iv: outer n inner log */
static void softmax_ref(const gc *c, double *y) {
    int64_t O = c->iv[0], n = c->iv[1], I = c->iv[2];
    for (int64_t o = 0; o < O; o++)
        for (int64_t in = 0; in < I; in++) {
            const double *x = c->pd[0] + o * n * I + in;
            double mx = -INFINITY, s = 0;
            for (int64_t i = 0; i < n; i++) mx = x[i * I] > mx ? x[i * I] : mx;
            for (int64_t i = 0; i < n; i++) s += exp(x[i * I] - mx);
            for (int64_t i = 0; i < n; i++)
                y[o * n * I + in + i * I] = c->iv[3] ? x[i * I] - mx - log(s) : exp(x[i * I] - mx) / s;
        }
}

static void case_softmax(bool lg) {
    gc c;
    gc_begin(&c, lg ? "LogSoftmax" : "Softmax");
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 2, 5), ert_test_int(&rng, 1, 4)};
    int axis = ert_test_int(&rng, 0, 2);
    c.iv[0] = 1, c.iv[2] = 1;
    for (int i = 0; i < axis; i++) c.iv[0] *= d[i];
    for (int i = axis + 1; i < 3; i++) c.iv[2] *= d[i];
    c.iv[1] = d[axis];
    c.iv[3] = lg;
    int32_t x = addp(&c, "x", 3, d, -2, 2, 0), y = -1;
    ert_attr at[1] = {ERT_ATTR_I("axis", axis)};
    CHECK_OK(ert_builder_node(c.b, lg ? "LogSoftmax" : "Softmax", "sm", &x, 1, at, 1, &y, 1), ctx);
    gc_check(&c, y, softmax_ref, ERT_BN_TRAIN);
}

/* iv: d0 d1 d2, red mask bits, mean */
static void reduce_ref(const gc *c, double *y) {
    const int64_t *d = c->iv;
    int mask = (int)c->iv[3];
    int64_t od[3];
    for (int i = 0; i < 3; i++) od[i] = mask >> i & 1 ? 1 : d[i];
    int64_t cnt = 1;
    for (int i = 0; i < 3; i++) cnt *= mask >> i & 1 ? d[i] : 1;
    memset(y, 0, (size_t)(od[0] * od[1] * od[2]) * sizeof *y);
    for (int64_t a = 0; a < d[0]; a++)
        for (int64_t b = 0; b < d[1]; b++)
            for (int64_t e = 0; e < d[2]; e++) {
                int64_t oa = mask & 1 ? 0 : a, ob = mask & 2 ? 0 : b, oe = mask & 4 ? 0 : e;
                y[(oa * od[1] + ob) * od[2] + oe] += c->pd[0][(a * d[1] + b) * d[2] + e] / (c->iv[4] ? (double)cnt : 1.0);
            }
}

static void case_reduce(bool mean) {
    gc c;
    gc_begin(&c, mean ? "ReduceMean" : "ReduceSum");
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 2, 4), ert_test_int(&rng, 2, 5)};
    memcpy(c.iv, d, sizeof d);
    int mask = ert_test_int(&rng, 1, 7), keep = ert_test_int(&rng, 0, 1);
    c.iv[3] = mask, c.iv[4] = mean;
    int32_t x = addp(&c, "x", 3, d, -1, 1, 0), y = -1;
    int64_t axes[3];
    int na = 0;
    for (int i = 0; i < 3; i++)
        if (mask >> i & 1) axes[na++] = i - (ert_test_int(&rng, 0, 1) ? 3 : 0); /* negative axes too */
    int32_t in[2] = {x, iconst(&c, na, axes)};
    ert_attr at[1] = {ERT_ATTR_I("keepdims", keep)};
    CHECK_OK(ert_builder_node(c.b, mean ? "ReduceMean" : "ReduceSum", "red", in, 2, at, 1, &y, 1), ctx);
    gc_check(&c, y, reduce_ref, ERT_BN_TRAIN);
}

/* Gather of a weight (embedding rows, repeated indices) or along axis 1 with
 * a scalar index (ViT's class token x[:, 0]). iv: d0 d1 d2 axis n_idx idx... */
static void gather_ref(const gc *c, double *y) {
    const int64_t *d = c->iv;
    int64_t axis = c->iv[3], n = c->iv[4], outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= d[i];
    for (int i = (int)axis + 1; i < 3; i++) inner *= d[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++) {
            int64_t k = c->iv[5 + j] < 0 ? c->iv[5 + j] + d[axis] : c->iv[5 + j];
            for (int64_t i = 0; i < inner; i++) y[(o * n + j) * inner + i] = c->pd[0][(o * d[axis] + k) * inner + i];
        }
}

static void case_gather(bool scalar) {
    gc c;
    gc_begin(&c, scalar ? "Gather(scalar index)" : "Gather(embedding)");
    int64_t d[3] = {ert_test_int(&rng, 2, 5), ert_test_int(&rng, 2, 4), ert_test_int(&rng, 1, 3)};
    memcpy(c.iv, d, sizeof d);
    int axis = scalar ? 1 : ert_test_int(&rng, 0, 2), n = scalar ? 1 : ert_test_int(&rng, 1, 6);
    c.iv[3] = axis, c.iv[4] = n;
    for (int j = 0; j < n; j++) c.iv[5 + j] = ert_test_int(&rng, -(int)d[axis], (int)d[axis] - 1); /* repeats, negatives */
    int32_t x = addp(&c, "x", 3, d, -1, 1, 0), idx = -1, y = -1;
    int64_t nd[1] = {n};
    CHECK_OK(ert_builder_weight(c.b, "idx", ERT_DTYPE_I64, scalar ? 0 : 1, nd, c.iv + 5, &idx), ctx);
    int32_t in[2] = {x, idx};
    ert_attr at[1] = {ERT_ATTR_I("axis", axis)};
    CHECK_OK(ert_builder_node(c.b, "Gather", "gather", in, 2, at, 1, &y, 1), ctx);
    gc_check(&c, y, gather_ref, ERT_BN_TRAIN);
}

/* Expand (ViT's cls_token.expand(B, -1, -1)): x (1, C) or (B0, 1) -> (A, B0, C). iv: A B0 C, which */
static void expand_ref(const gc *c, double *y) {
    int64_t A = c->iv[0], B = c->iv[1], C = c->iv[2];
    for (int64_t a = 0; a < A; a++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t k = 0; k < C; k++) y[(a * B + b) * C + k] = c->pd[0][c->iv[3] ? b : k];
}

static void case_expand(void) {
    gc c;
    gc_begin(&c, "Expand");
    int64_t A = ert_test_int(&rng, 1, 3), B = ert_test_int(&rng, 2, 4), C = ert_test_int(&rng, 2, 5);
    c.iv[0] = A, c.iv[1] = B, c.iv[2] = C, c.iv[3] = ert_test_int(&rng, 0, 1);
    int64_t xd[2] = {c.iv[3] ? B : 1, c.iv[3] ? 1 : C}, shp[3] = {A, B, C};
    int32_t x = addp(&c, "x", 2, xd, -1, 1, 0), y = -1;
    int32_t in[2] = {x, iconst(&c, 3, shp)};
    CHECK_OK(ert_builder_node(c.b, "Expand", "expand", in, 2, NULL, 0, &y, 1), ctx);
    gc_check(&c, y, expand_ref, ERT_BN_TRAIN);
}

/* ------------------------------------------------------------ data movement */

/* One graph chains them: x (A,B,C) -> Transpose(perm) -> Reshape(flat 2-D)
 * -> Unsqueeze(0) -> Squeeze(0) -> Flatten; Concat with w along axis 1 after
 * Slice; Split of the result into two and Concat back swapped. The
 * reference does the same index arithmetic directly. iv: A B C perm[3]
 * slice start step; Q (w's columns). */
static void move_ref(const gc *c, double *y) {
    int64_t d[3] = {c->iv[0], c->iv[1], c->iv[2]}, perm[3] = {c->iv[3], c->iv[4], c->iv[5]};
    int64_t td[3] = {d[perm[0]], d[perm[1]], d[perm[2]]};
    int64_t R = td[0], K = td[1] * td[2], st = c->iv[6], sp = c->iv[7], Q = c->iv[8];
    int64_t KS = (K - st + sp - 1) / sp; /* sliced columns */
    int64_t cols = KS + Q, s0 = c->iv[9];
    double *tmp = malloc((size_t)(R * cols) * sizeof(double));
    for (int64_t r = 0; r < R; r++) {
        for (int64_t j = 0; j < KS; j++) {
            int64_t k = st + j * sp, t1 = k / td[2], t2 = k % td[2];
            int64_t idx[3];
            idx[perm[0]] = r, idx[perm[1]] = t1, idx[perm[2]] = t2;
            tmp[r * cols + j] = c->pd[0][(idx[0] * d[1] + idx[1]) * d[2] + idx[2]];
        }
        for (int64_t q = 0; q < Q; q++) tmp[r * cols + KS + q] = c->pd[1][r * Q + q];
    }
    /* split columns at s0, concat (second, first) */
    for (int64_t r = 0; r < R; r++) {
        int64_t o = 0;
        for (int64_t j = s0; j < cols; j++) y[r * cols + o++] = tmp[r * cols + j];
        for (int64_t j = 0; j < s0; j++) y[r * cols + o++] = tmp[r * cols + j];
    }
    free(tmp);
}

static void case_move(void) {
    gc c;
    gc_begin(&c, "Transpose/Reshape/Squeeze/Flatten/Slice/Concat/Split");
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 2, 4), ert_test_int(&rng, 2, 4)};
    int64_t perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    int pi = ert_test_int(&rng, 0, 5);
    memcpy(c.iv, d, sizeof d);
    memcpy(c.iv + 3, perms[pi], sizeof perms[pi]);
    int64_t R = d[perms[pi][0]], K = d[perms[pi][1]] * d[perms[pi][2]];
    c.iv[6] = ert_test_int(&rng, 0, 1), c.iv[7] = ert_test_int(&rng, 1, 2), c.iv[8] = ert_test_int(&rng, 1, 3);
    int64_t KS = (K - c.iv[6] + c.iv[7] - 1) / c.iv[7], cols = KS + c.iv[8];
    c.iv[9] = ert_test_int(&rng, 1, (int)cols - 1);
    int32_t x = addp(&c, "x", 3, d, -1, 1, 0);
    int64_t wd[2] = {R, c.iv[8]};
    int32_t w = addp(&c, "w", 2, wd, -1, 1, 0);
    int32_t tr, rs, us, sq, fl, sl, cat, sp[2], y;
    ert_attr pat[1] = {ERT_ATTR_IS("perm", perms[pi], 3)};
    CHECK_OK(ert_builder_node(c.b, "Transpose", "tr", &x, 1, pat, 1, &tr, 1), ctx);
    int64_t shp[2] = {R, -1}, zero[1] = {0};
    int32_t rin[2] = {tr, iconst(&c, 2, shp)};
    CHECK_OK(ert_builder_node(c.b, "Reshape", "rs", rin, 2, NULL, 0, &rs, 1), ctx);
    int32_t uin[2] = {rs, iconst(&c, 1, zero)};
    CHECK_OK(ert_builder_node(c.b, "Unsqueeze", "us", uin, 2, NULL, 0, &us, 1), ctx);
    int32_t sqin[2] = {us, iconst(&c, 1, zero)};
    CHECK_OK(ert_builder_node(c.b, "Squeeze", "sq", sqin, 2, NULL, 0, &sq, 1), ctx);
    ert_attr fat[1] = {ERT_ATTR_I("axis", 1)};
    CHECK_OK(ert_builder_node(c.b, "Flatten", "fl", &sq, 1, fat, 1, &fl, 1), ctx);
    int64_t sst[1] = {c.iv[6]}, sen[1] = {K}, sax[1] = {1}, ssp[1] = {c.iv[7]};
    int32_t slin[5] = {fl, iconst(&c, 1, sst), iconst(&c, 1, sen), iconst(&c, 1, sax), iconst(&c, 1, ssp)};
    CHECK_OK(ert_builder_node(c.b, "Slice", "sl", slin, 5, NULL, 0, &sl, 1), ctx);
    int32_t cin[2] = {sl, w};
    CHECK_OK(ert_builder_node(c.b, "Concat", "cat", cin, 2, fat, 1, &cat, 1), ctx);
    int64_t sizes[2] = {c.iv[9], cols - c.iv[9]};
    int32_t spin[2] = {cat, iconst(&c, 2, sizes)};
    CHECK_OK(ert_builder_node(c.b, "Split", "split", spin, 2, fat, 1, sp, 2), ctx);
    int32_t c2in[2] = {sp[1], sp[0]};
    CHECK_OK(ert_builder_node(c.b, "Concat", "cat2", c2in, 2, fat, 1, &y, 1), ctx);
    gc_check(&c, y, move_ref, ERT_BN_TRAIN);
}

/* Split with an unused output: its gradient is zeros (FILL_ZERO path). */
static void split1_ref(const gc *c, double *y) {
    int64_t R = c->iv[0], K = c->iv[1], s0 = c->iv[2];
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = s0; j < K; j++) y[r * (K - s0) + j - s0] = c->pd[0][r * K + j];
}

static void case_split_unused(void) {
    gc c;
    gc_begin(&c, "Split(one output unused)");
    int64_t d[2] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 3, 6)};
    c.iv[0] = d[0], c.iv[1] = d[1], c.iv[2] = ert_test_int(&rng, 1, (int)d[1] - 1);
    int32_t x = addp(&c, "x", 2, d, -1, 1, 0), sp[2];
    int64_t sizes[2] = {c.iv[2], d[1] - c.iv[2]};
    int32_t in[2] = {x, iconst(&c, 2, sizes)};
    ert_attr at[1] = {ERT_ATTR_I("axis", 1)};
    CHECK_OK(ert_builder_node(c.b, "Split", "split", in, 2, at, 1, sp, 2), ctx);
    gc_check(&c, sp[1], split1_ref, ERT_BN_TRAIN);
}

/* ------------------------------------------------------------ losses */

static void ident_ref(const gc *c, double *y) { memcpy(y, c->pd[0], (size_t)c->pn[0] * sizeof(double)); }

static void case_loss(ert_loss_kind k, double smoothing, bool weights) {
    gc c;
    gc_begin(&c, k == ERT_LOSS_CROSS_ENTROPY ? (weights ? "CE(smoothing, class weights)" : "CE") : "BCE-with-logits");
    c.loss = k;
    c.fv[0] = (float)smoothing;
    c.fv[1] = weights;
    int64_t d[2] = {ert_test_int(&rng, 1, 5), ert_test_int(&rng, 2, 7)};
    int32_t x = addp(&c, "z", 2, d, -3, 3, 0), y = -1;
    CHECK_OK(ert_builder_unary(c.b, "Identity", x, &y), ctx);
    gc_check(&c, y, ident_ref, ERT_BN_TRAIN);
}

/* ------------------------------------------------------------ composite */

/* Weight sharing and fan-out: y = Relu(x W^T) W  (W used twice, x feeds both
 * a MatMul and an Add: gradients of several consumers are summed). */
static void share_ref(const gc *c, double *y) {
    int64_t M = c->iv[0], K = c->iv[1], N = c->iv[2];
    const double *x = c->pd[0], *w = c->pd[1];
    for (int64_t i = 0; i < M; i++) {
        double h[16];
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += x[i * K + k] * w[n * K + k];
            h[n] = s > 0 ? s : 0;
        }
        for (int64_t k = 0; k < K; k++) {
            double s = 0;
            for (int64_t n = 0; n < N; n++) s += h[n] * w[n * K + k];
            y[i * K + k] = s + x[i * K + k];
        }
    }
}

static void case_share(void) {
    gc c;
    gc_begin(&c, "shared weight + fan-out");
    int64_t M = ert_test_int(&rng, 1, 4), K = ert_test_int(&rng, 2, 5), N = ert_test_int(&rng, 2, 6);
    c.iv[0] = M, c.iv[1] = K, c.iv[2] = N;
    int64_t xd[2] = {M, K}, wd[2] = {N, K};
    /* The Relu's input x.w^T must stay clear of its kink at 0 (finite
     * differences straddling it are wrong): draw x and w on a copy of the
     * stream until min |h| >= 1e-2, then let addp draw the same values. */
    for (int tries = 0; tries < 1000; tries++) {
        ert_test_rng saved = rng;
        double xv[4 * 5], wv[6 * 5], mn = INFINITY;
        for (int64_t i = 0; i < M * K; i++) xv[i] = (float)ert_test_uniform(&rng, -1, 1);
        for (int64_t i = 0; i < N * K; i++) wv[i] = (float)ert_test_uniform(&rng, -1, 1);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double hv = 0;
                for (int64_t k = 0; k < K; k++) hv += xv[m * K + k] * wv[n * K + k];
                mn = fmin(mn, fabs(hv));
            }
        if (mn >= 1e-2) {
            rng = saved;
            break;
        }
    }
    int32_t x = addp(&c, "x", 2, xd, -1, 1, 0), w = addp(&c, "w", 2, wd, -1, 1, 0), h, r, o, y;
    int32_t in[2] = {x, w};
    ert_attr at[1] = {ERT_ATTR_I("transB", 1)};
    CHECK_OK(ert_builder_node(c.b, "Gemm", "g1", in, 2, at, 1, &h, 1), ctx);
    CHECK_OK(ert_builder_unary(c.b, "Relu", h, &r), ctx);
    CHECK_OK(ert_builder_binary(c.b, "MatMul", r, w, &o), ctx);
    CHECK_OK(ert_builder_binary(c.b, "Add", o, x, &y), ctx);
    gc_check(&c, y, share_ref, ERT_BN_TRAIN);
}

/* Dropout in training: y = x * mask with mask in {0, 1/(1-p)} drawn from the
 * trainer's seeded stream; dL/dx = dL/dy * mask. Finite differences do not
 * apply (the mask changes every step), so the check is exact algebra on the
 * step's own output, plus the mask statistics and eval being the identity. */
static void case_dropout(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    enum { N = 4000 };
    int64_t d[1] = {N};
    float *w = malloc(N * sizeof *w), ratio = 0.3f;
    for (int i = 0; i < N; i++) w[i] = (float)ert_test_uniform(&rng, 0.5, 1.5);
    int32_t x, r, y;
    CHECK_OK(ert_builder_weight(b, "x", ERT_DTYPE_F32, 1, d, w, &x), ctx);
    CHECK_OK(ert_builder_weight(b, "ratio", ERT_DTYPE_F32, 0, NULL, &ratio, &r), ctx);
    int32_t in[2] = {x, r};
    CHECK_OK(ert_builder_node(b, "Dropout", "drop", in, 2, NULL, 0, &y, 1), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    ert_trainer_options to = {0};
    to.loss.kind = ERT_LOSS_MSE;
    to.seed = ert_test_u64(&rng) | 1;
    ert_trainer *t = NULL;
    if (m) CHECK_OK(ert_trainer_create(m, &to, &t), ctx);
    if (t) {
        float *tg;
        const float *out, *g = NULL;
        ert_trainer_target_data(t, (void **)&tg);
        ert_trainer_output_data(t, (const void **)&out);
        for (int i = 0; i < N; i++) tg[i] = (float)ert_test_uniform(&rng, -1, 1);
        CHECK_OK(ert_trainer_step(t, NULL), ctx);
        CHECK_OK(ert_trainer_param(t, "x", NULL, &g, NULL), ctx);
        int zeros = 0, bad = 0;
        for (int i = 0; g && i < N; i++) {
            double mask = out[i] == 0 ? 0.0 : 1.0 / (1.0 - ratio);
            zeros += out[i] == 0;
            if (out[i] != 0 && fabs(out[i] - w[i] * mask) > 1e-6 * fabs(out[i])) bad++;
            double ref = 2.0 * (out[i] - tg[i]) / N * mask;
            if (fabs(g[i] - ref) > 1e-6 + 1e-5 * fabs(ref)) bad++;
        }
        CHECK(bad == 0, "Dropout: %d elements with a wrong output or gradient", bad);
        CHECK(fabs(zeros / (double)N - ratio) < 0.05, "Dropout: %d of %d dropped, ratio %.2f", zeros, N, (double)ratio);
        CHECK_OK(ert_trainer_eval(t, NULL), ctx);
        int same = 0;
        for (int i = 0; i < N; i++) same += out[i] == w[i];
        CHECK(same == N, "Dropout in eval is not the identity (%d of %d)", same, N);
    }
    ert_trainer_free(t);
    ert_model_free(m);
    free(w);
}

int main(void) {
    ert_test_rng_init(&rng, "grad");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    int reps = getenv("ERT_HEAVY") ? 50 : 10;
    for (int r = 0; r < reps; r++) {
        case_conv(1, false);
        case_conv(2, false);
        case_conv(ert_test_int(&rng, 2, 3), true);
        case_gemm();
        case_matmul();
        for (int op = 0; op < 4; op++) case_binary(op);
        for (int k = 0; k < 10; k++) case_unary(k);
        case_pool(true);
        case_pool(false);
        case_pool22();
        case_gap();
        case_bn(false);
        case_bn(true);
        case_ln();
        case_softmax(false);
        case_softmax(true);
        case_expand();
        case_gather(false);
        case_gather(true);
        case_reduce(true);
        case_reduce(false);
        case_move();
        case_split_unused();
        case_loss(ERT_LOSS_CROSS_ENTROPY, 0.0, false);
        case_loss(ERT_LOSS_CROSS_ENTROPY, 0.1, true);
        case_loss(ERT_LOSS_BCE_LOGITS, 0.0, false);
        case_share();
    }
    case_dropout();
    ert_context_free(ctx);
    return ert_test_finish("grad");
}

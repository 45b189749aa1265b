/* Gradient check of the trainer beyond single ops: chains of data-movement
 * ops, a Split output left unused (zero gradient), weight sharing and
 * fan-out, the losses, and Dropout in training. Every op's own backward
 * rule is checked by the op harness (tests/ops/test_op_harness.c) with the
 * same float64 references (tests/common/ref64.h) and the same method.
 *
 * Each case builds a small graph with the builder in which every operand is a
 * weight (so the trainer computes dL/d operand for all of them), with random
 * shapes (transposes, strided slices, splits at random points). The trainer
 * runs one step with SGD lr = 0 (weights unchanged) and an MSE loss against a
 * random target; its f32 gradients are compared with central finite
 * differences of an independent float64 reference forward written here
 * (L = mean((y - t)^2), h = 1e-5). Non-smooth ops get inputs away from their
 * kinks. Losses (CE with label smoothing and class weights, BCE) are checked
 * the same way with their own float64 reference. */
#include "testutil.h"
#include "plan_oracle.h"
#include "ref64.h"
#include "trainer_internal.h"

#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
static ert_test_rng rng;

#define MAXP ERT_REF_MAXP
typedef struct gc {
    const char *what;
    ert_ref r;              /* the operands (np, pd, pn) and the reference's iv/fv */
    const char *pname[MAXP];
    int pnd[MAXP];
    int64_t pdims[MAXP][6];
    float *pf[MAXP];
    int32_t pid[MAXP];
    int64_t yd[6];
    int ynd;
    ert_builder *b;
    ert_loss_kind loss;
    double *tgt;     /* f32-valued target, or class indices */
    int64_t ny;
} gc;

typedef ert_ref_fn fwd_fn;

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
    int k = c->r.np++;
    c->pname[k] = name;
    c->pnd[k] = nd;
    memcpy(c->pdims[k], d, (size_t)nd * sizeof *d);
    c->r.pn[k] = prod(nd, d);
    c->pf[k] = malloc((size_t)c->r.pn[k] * sizeof(float) + 4);
    c->r.pd[k] = malloc((size_t)c->r.pn[k] * sizeof(double) + 8);
    for (int64_t i = 0; i < c->r.pn[k]; i++) {
        double v;
        do v = ert_test_uniform(&rng, lo, hi);
        while (gap > 0 && fabs(v) < gap);
        if (gap < 0) v = lo + ((double)i + 0.5) * (hi - lo) / (double)c->r.pn[k];
        c->pf[k][i] = (float)v;
    }
    for (int64_t i = c->r.pn[k] - 1; gap < 0 && i > 0; i--) {
        int64_t j = (int64_t)(ert_test_u64(&rng) % (uint64_t)(i + 1));
        float t = c->pf[k][i];
        c->pf[k][i] = c->pf[k][j], c->pf[k][j] = t;
    }
    for (int64_t i = 0; i < c->r.pn[k]; i++) c->r.pd[k][i] = c->pf[k][i];
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
    double e = c->r.fv[0], norm = 0;
    int64_t N = c->ny / C;
    for (int64_t i = 0; i < N; i++) {
        const double *z = y + i * C;
        double mx = z[0], se = 0;
        for (int64_t k = 1; k < C; k++) mx = z[k] > mx ? z[k] : mx;
        for (int64_t k = 0; k < C; k++) se += exp(z[k] - mx);
        int64_t t = (int64_t)c->tgt[i];
        for (int64_t k = 0; k < C; k++) {
            double w = c->r.fv[1] != 0 ? 1 + 0.5 * (double)k : 1.0, lp = z[k] - mx - log(se);
            s -= (k == t ? (1 - e) * w : 0.0) * lp + e / (double)C * w * lp;
        }
        norm += c->r.fv[1] != 0 ? 1 + 0.5 * (double)t : 1.0;
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
        to.loss.label_smoothing = (float)c->r.fv[0];
        ert_tensor_info oi;
        ert_model_output_info(m, 0, &oi);
        if (c->r.fv[1] != 0) {
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
    fwd(&c->r, y);
    double L0 = loss_ref(c, y, C);
    CHECK(fabs(L0 - loss) <= 1e-4 * (1 + fabs(L0)), "%s: loss %.9g, float64 reference %.9g", c->what, (double)loss, L0);
    const double h = 1e-5;
    for (int k = 0; k < c->r.np; k++) {
        const float *g = NULL;
        if (ert_trainer_param(t, c->pname[k], NULL, &g, NULL) != ERT_OK) {
            CHECK(0, "%s: parameter %s has no gradient", c->what, c->pname[k]);
            continue;
        }
        int64_t n = c->r.pn[k], m_chk = n < 48 ? n : 48;
        double *fd = malloc((size_t)m_chk * sizeof(double));
        float *gg = malloc((size_t)m_chk * sizeof(float));
        double scale = 1e-3;
        for (int64_t j = 0; j < m_chk; j++) {
            int64_t e = n <= 48 ? j : (int64_t)(ert_test_u64(&rng) % (uint64_t)n);
            double v = c->r.pd[k][e];
            c->r.pd[k][e] = v + h;
            fwd(&c->r, y);
            double lp = loss_ref(c, y, C);
            c->r.pd[k][e] = v - h;
            fwd(&c->r, y);
            double lm = loss_ref(c, y, C);
            c->r.pd[k][e] = v;
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
    for (int k = 0; k < c->r.np; k++) {
        free(c->pf[k]);
        free(c->r.pd[k]);
    }
    free(c->tgt);
}

/* ------------------------------------------------------------ Conv */

/* ------------------------------------------------------------ Gemm / MatMul */

/* ------------------------------------------------------------ element-wise */

/* ------------------------------------------------------------ pooling */

/* ------------------------------------------------------------ normalisation */

/* ------------------------------------------------------------ data movement */

/* One graph chains them: x (A,B,C) -> Transpose(perm) -> Reshape(flat 2-D)
 * -> Unsqueeze(0) -> Squeeze(0) -> Flatten; Concat with w along axis 1 after
 * Slice; Split of the result into two and Concat back swapped. The
 * reference does the same index arithmetic directly. iv: A B C perm[3]
 * slice start step; Q (w's columns). */
static void move_ref(const ert_ref *c, double *y) {
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
    memcpy(c.r.iv, d, sizeof d);
    memcpy(c.r.iv + 3, perms[pi], sizeof perms[pi]);
    int64_t R = d[perms[pi][0]], K = d[perms[pi][1]] * d[perms[pi][2]];
    c.r.iv[6] = ert_test_int(&rng, 0, 1), c.r.iv[7] = ert_test_int(&rng, 1, 2), c.r.iv[8] = ert_test_int(&rng, 1, 3);
    int64_t KS = (K - c.r.iv[6] + c.r.iv[7] - 1) / c.r.iv[7], cols = KS + c.r.iv[8];
    c.r.iv[9] = ert_test_int(&rng, 1, (int)cols - 1);
    int32_t x = addp(&c, "x", 3, d, -1, 1, 0);
    int64_t wd[2] = {R, c.r.iv[8]};
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
    int64_t sst[1] = {c.r.iv[6]}, sen[1] = {K}, sax[1] = {1}, ssp[1] = {c.r.iv[7]};
    int32_t slin[5] = {fl, iconst(&c, 1, sst), iconst(&c, 1, sen), iconst(&c, 1, sax), iconst(&c, 1, ssp)};
    CHECK_OK(ert_builder_node(c.b, "Slice", "sl", slin, 5, NULL, 0, &sl, 1), ctx);
    int32_t cin[2] = {sl, w};
    CHECK_OK(ert_builder_node(c.b, "Concat", "cat", cin, 2, fat, 1, &cat, 1), ctx);
    int64_t sizes[2] = {c.r.iv[9], cols - c.r.iv[9]};
    int32_t spin[2] = {cat, iconst(&c, 2, sizes)};
    CHECK_OK(ert_builder_node(c.b, "Split", "split", spin, 2, fat, 1, sp, 2), ctx);
    int32_t c2in[2] = {sp[1], sp[0]};
    CHECK_OK(ert_builder_node(c.b, "Concat", "cat2", c2in, 2, fat, 1, &y, 1), ctx);
    gc_check(&c, y, move_ref, ERT_BN_TRAIN);
}

/* Split with an unused output: its gradient is zeros (FILL_ZERO path). */
static void split1_ref(const ert_ref *c, double *y) {
    int64_t R = c->iv[0], K = c->iv[1], s0 = c->iv[2];
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = s0; j < K; j++) y[r * (K - s0) + j - s0] = c->pd[0][r * K + j];
}

static void case_split_unused(void) {
    gc c;
    gc_begin(&c, "Split(one output unused)");
    int64_t d[2] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 3, 6)};
    c.r.iv[0] = d[0], c.r.iv[1] = d[1], c.r.iv[2] = ert_test_int(&rng, 1, (int)d[1] - 1);
    int32_t x = addp(&c, "x", 2, d, -1, 1, 0), sp[2];
    int64_t sizes[2] = {c.r.iv[2], d[1] - c.r.iv[2]};
    int32_t in[2] = {x, iconst(&c, 2, sizes)};
    ert_attr at[1] = {ERT_ATTR_I("axis", 1)};
    CHECK_OK(ert_builder_node(c.b, "Split", "split", in, 2, at, 1, sp, 2), ctx);
    gc_check(&c, sp[1], split1_ref, ERT_BN_TRAIN);
}

/* ------------------------------------------------------------ losses */

static void case_loss(ert_loss_kind k, double smoothing, bool weights) {
    gc c;
    gc_begin(&c, k == ERT_LOSS_CROSS_ENTROPY ? (weights ? "CE(smoothing, class weights)" : "CE") : "BCE-with-logits");
    c.loss = k;
    c.r.fv[0] = (float)smoothing;
    c.r.fv[1] = weights;
    int64_t d[2] = {ert_test_int(&rng, 1, 5), ert_test_int(&rng, 2, 7)};
    int32_t x = addp(&c, "z", 2, d, -3, 3, 0), y = -1;
    CHECK_OK(ert_builder_unary(c.b, "Identity", x, &y), ctx);
    gc_check(&c, y, ident_ref, ERT_BN_TRAIN);
}

/* ------------------------------------------------------------ composite */

/* Weight sharing and fan-out: y = Relu(x W^T) W  (W used twice, x feeds both
 * a MatMul and an Add: gradients of several consumers are summed). */
static void share_ref(const ert_ref *c, double *y) {
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
    c.r.iv[0] = M, c.r.iv[1] = K, c.r.iv[2] = N;
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

/* One op harness over every backend, with gradients (issue 11; ggml's
 * test-backend-ops is the model).
 *
 * Every op of the op table is either covered here or listed in NOT_HERE
 * with the reason and where it is tested instead; an op that is neither
 * fails the run, and so does an op with a backward rule (ert_ad_diff_slot)
 * whose gradient no case checked and that NOT_HERE does not excuse.
 *
 * A case is one node on random shapes (odd sizes, broadcasting where the op
 * allows it) built with the public builder:
 *   - forward: the node's float operands are graph inputs (weights for the
 *     ops that take constant filters), run on every backend of this run and
 *     compared with a float64 reference (tests/common/ref64.h, shared with
 *     tests/train/test_grad.c): f32 within 1e-4 relative to the output's
 *     scale, f16 sessions within 2e-2 on inputs rounded to f16 first,
 *     integer and bool outputs exactly;
 *   - gradient (ops with a backward rule): the float operands become
 *     weights of a trainer (MSE loss against a random target, SGD with lr 0)
 *     and every differentiable operand's gradient is compared with central
 *     finite differences of the float64 reference (h = 1e-5). Operands keep
 *     away from kinks and near-ties.
 * The training-internal ops (ert.*, made by the trainer only) are covered
 * through the gradient checks: each must appear in one of their trainers.
 *
 *   test_op_harness          CPU backend, CPU trainer (ctest op_harness)
 *   test_op_harness --cuda   CUDA f32 and f16 sessions, CUDA trainer (ctest
 *                            op_harness_cuda, label gpu; 77 = SKIPPED without
 *                            a GPU or without the CUDA backend)
 *   test_op_harness --cpu-selfcheck   the f16 session path (inputs and
 *                            weights rounded to f16, its tolerance) on the
 *                            CPU, which ignores precision: the harness's own
 *                            check where no GPU is (ctest op_harness_selfcheck)
 * ERT_HEAVY=1: 10 random draws per case instead of 3.
 * This file runs the cases; they are described in op_harness_eltwise.c,
 * op_harness_nn.c and op_harness_tensor.c (types in harness_cases.h). */
#include "harness_cases.h"
#include "plan_oracle.h"
#include "trainer_internal.h" /* ert_ad_diff_slot, ert_trainer_param_copy, the trainer's nodes */

#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
ert_test_rng rng;

typedef struct backend {
    const char *name;
    ert_device dev;
    ert_dtype prec;
    double tol; /* relative to max(1, |reference|) */
} backend;
static backend backends[2];
static int n_backends;
static ert_device train_dev = ERT_DEVICE_CPU;

enum { COV_FWD = 1, COV_GRAD = 2 };
static unsigned covered[ERT_OP_COUNT];
static bool in_trainer[ERT_OP_COUNT]; /* ops seen in a gradient check's trainer */
static int fell_back[ERT_OP_COUNT];   /* CUDA sessions that ran the op on the CPU fallback */
static int refused[ERT_OP_COUNT];     /* CUDA trainers refused (ERT_E_UNSUPPORTED) */
static bool cuda_run;

/* Ops not covered here: why, and where they are tested. The run fails when
 * an op is in neither this list nor a case, so no gap is silent. */
static const struct { const char *op; unsigned what; const char *why; } NOT_HERE[] = {
    /* issue 14 (int8, quant branches): integer in or out, exact rather than float64 */
    {"QLinearConv", COV_FWD, "integer op: exact against onnxruntime in ctest quant_integer (tests/ops/quant_ort.py)"},
    {"QLinearMatMul", COV_FWD, "integer op: exact against onnxruntime in ctest quant_integer (tests/ops/quant_ort.py)"},
    {"MatMulInteger", COV_FWD, "integer op: exact against onnxruntime in ctest quant_integer (tests/ops/quant_ort.py)"},
    {"ConvInteger", COV_FWD, "integer op: exact against onnxruntime in ctest quant_integer (tests/ops/quant_ort.py)"},
    {"ert.QLinearAdd", COV_GRAD, "inference only: the Q/DQ pass's residual join (integers: no gradient); exact against "
                                 "onnxruntime and the unfolded session in ctest quant_pool (tests/ops/quant_ort.py)"},
    {"ert.QLut", COV_GRAD, "inference only: the Q/DQ pass's element-wise functions as a 256-entry table (integers: no "
                           "gradient); against onnxruntime and exact against the unfolded session in ctest quant_pool "
                           "(tests/ops/quant_ort.py), CUDA against the CPU in quant_cuda"},
    {"ert.DropoutTrain", COV_GRAD, "made for Dropout in training, whose random mask rules out finite differences: test_grad case_dropout"},
    {"ert.Attention", COV_GRAD, "inference only: made by the session's attention pass, which the trainer does not run "
                                "(its forward: the case above, ctest ops_attention, and ctest zoo's 'attention fused' check that the pass fires on the ViT exports)"},
    {"Dropout", COV_GRAD, "the training mask is random: finite differences do not apply; test_grad case_dropout checks the mask algebra"},
};

static const char *not_here(const char *op, unsigned what) {
    for (size_t i = 0; i < sizeof NOT_HERE / sizeof NOT_HERE[0]; i++)
        if (!strcmp(NOT_HERE[i].op, op) && (NOT_HERE[i].what & what)) return NOT_HERE[i].why;
    return NULL;
}

static bool has_backward(ert_op op) {
    for (int k = 0; k < 8; k++)
        if (ert_ad_diff_slot(op, k)) return true;
    return false;
}

int64_t nel(int nd, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

int rdims(int rmin, int rmax, int dmax, int64_t *d) {
    int nd = rand_dims(&rng, rmin, rmax, dmax, d);
    if (nel(nd, d) < 2) d[nd - 1] = 2;
    return nd;
}

hcase *begin(hcase *c, const char *op) {
    memset(c, 0, sizeof *c);
    c->op = op;
    snprintf(c->what, sizeof c->what, "%s", op);
    c->n_out = 1;
    c->ydt = ERT_DTYPE_F32;
    return c;
}

slot *add_f32(hcase *c, int nd, const int64_t *d, double lo, double hi) {
    slot *s = &c->s[c->ns++];
    s->kind = S_F32;
    s->nd = nd;
    if (nd) memcpy(s->dims, d, (size_t)nd * sizeof *d);
    s->lo = lo, s->hi = hi;
    return s;
}

slot *add_const(hcase *c, ert_dtype dt, int nd, const int64_t *d, const void *data) {
    slot *s = &c->s[c->ns++];
    s->kind = S_CONST;
    s->dt = dt;
    s->nd = nd;
    if (nd) memcpy(s->dims, d, (size_t)nd * sizeof *d);
    s->data = data;
    return s;
}

void set_y(hcase *c, ert_dtype dt, int nd, const int64_t *d) {
    c->ydt = dt;
    c->ynd = nd;
    if (nd) memcpy(c->yd, d, (size_t)nd * sizeof *d); /* d may be NULL for a scalar */
}

/* Draw the S_F32/S_BOOL operands: f32 values (what the library gets) in
 * xf[k], their float64 copies in c->r.pd. */
static void draw(hcase *c, float **xf) {
    c->r.np = 0;
    for (int k = 0; k < c->ns; k++) {
        slot *s = &c->s[k];
        xf[k] = NULL;
        if (s->kind != S_F32 && s->kind != S_BOOL && s->kind != S_INT) continue;
        int64_t n = nel(s->nd, s->dims);
        xf[k] = malloc((size_t)(n ? n : 1) * sizeof(float));
        for (int64_t i = 0; i < n; i++) {
            double v;
            if (s->kind == S_BOOL) v = (double)ert_test_int(&rng, 0, 1);
            else if (s->kind == S_INT) v = (double)ert_test_int(&rng, (int)s->lo, (int)s->hi);
            else if (s->grid) v = (double)ert_test_int(&rng, -2, 2);
            else if (s->gap < 0) v = s->lo + ((double)i + 0.5) * (s->hi - s->lo) / (double)n;
            else {
                bool near;
                do {
                    v = ert_test_uniform(&rng, s->lo, s->hi);
                    near = s->gap > 0 && fabs(v) < s->gap;
                    for (int q = 0; q < s->n_kink; q++) near |= fabs(v - s->kink[q]) < 0.05;
                } while (near);
            }
            xf[k][i] = (float)v;
        }
        for (int64_t i = n - 1; s->kind == S_F32 && s->gap < 0 && i > 0; i--) {
            int64_t j = (int64_t)(ert_test_u64(&rng) % (uint64_t)(i + 1));
            float t = xf[k][i];
            xf[k][i] = xf[k][j], xf[k][j] = t;
        }
        int p = c->r.np++;
        c->r.pn[p] = n;
        c->r.pd[p] = malloc((size_t)(n ? n : 1) * sizeof(double));
    }
}

/* pd from xf, rounded to f16 for a half session (its inputs are converted). */
static void to_ref(hcase *c, float **xf, bool half) {
    for (int k = 0, p = 0; k < c->ns; k++) {
        if (!xf[k]) continue;
        for (int64_t i = 0; i < c->r.pn[p]; i++) {
            float v = xf[k][i];
            if (half && c->s[k].kind == S_F32) v = ert_f16_to_f32(ert_f32_to_f16(v));
            c->r.pd[p][i] = v;
        }
        p++;
    }
}

static void undraw(hcase *c, float **xf) {
    for (int k = 0; k < c->ns; k++) free(xf[k]);
    for (int p = 0; p < c->r.np; p++) free(c->r.pd[p]);
}

/* The node alone in a model. train: every float operand is a weight pk. */
static ert_model *build(hcase *c, float **xf, bool train, bool half) {
    ert_builder *b = NULL;
    if (ert_builder_create(ctx, &b) != ERT_OK) return NULL;
    int32_t in[MAXS], out[8];
    ert_status st = ERT_OK;
    float *tmp[MAXS] = {0};
    for (int k = 0; k < c->ns && st == ERT_OK; k++) {
        slot *s = &c->s[k];
        char nm[16];
        snprintf(nm, sizeof nm, "%s%d", train ? "p" : "x", k);
        in[k] = -1;
        if (s->kind == S_OMIT) continue;
        if (s->kind == S_CONST) st = ert_builder_weight(b, NULL, s->dt, s->nd, s->dims, s->data, &in[k]);
        else if (s->kind == S_BOOL) {
            int64_t n = nel(s->nd, s->dims);
            uint8_t *u = malloc((size_t)(n ? n : 1));
            for (int64_t i = 0; i < n; i++) u[i] = xf[k][i] != 0;
            st = train ? ert_builder_weight(b, nm, ERT_DTYPE_BOOL, s->nd, s->dims, u, &in[k])
                       : ert_builder_input(b, nm, ERT_DTYPE_BOOL, s->nd, s->dims, &in[k]);
            free(u);
        } else if (s->kind == S_INT) { /* i8 or u8 */
            int64_t n = nel(s->nd, s->dims);
            uint8_t *u = malloc((size_t)(n ? n : 1));
            for (int64_t i = 0; i < n; i++) u[i] = (uint8_t)(int)xf[k][i];
            st = train ? ert_builder_weight(b, nm, s->dt, s->nd, s->dims, u, &in[k])
                       : ert_builder_input(b, nm, s->dt, s->nd, s->dims, &in[k]);
            free(u);
        } else if (train || s->weight) {
            const float *w = xf[k];
            if (half) { /* the reference saw the f16-rounded value */
                int64_t n = nel(s->nd, s->dims);
                tmp[k] = malloc((size_t)(n ? n : 1) * sizeof(float));
                for (int64_t i = 0; i < n; i++) tmp[k][i] = ert_f16_to_f32(ert_f32_to_f16(xf[k][i]));
                w = tmp[k];
            }
            st = ert_builder_weight(b, nm, ERT_DTYPE_F32, s->nd, s->dims, w, &in[k]);
        } else
            st = ert_builder_input(b, nm, ERT_DTYPE_F32, s->nd, s->dims, &in[k]);
    }
    if (st == ERT_OK) st = ert_builder_node(b, c->op, "t", in, c->ns, c->at, c->na, out, c->n_out);
    if (st == ERT_OK) st = ert_builder_output(b, out[c->y_out], "y");
    ert_model *m = NULL;
    if (st == ERT_OK) st = ert_builder_finish(b, &m);
    CHECK(st == ERT_OK, "%s: building the model: %s (%s)", c->what, ert_status_str(st), ert_last_error(ctx));
    ert_builder_free(b);
    for (int k = 0; k < MAXS; k++) free(tmp[k]);
    return m;
}

static double scale_of(const double *y, int64_t n) {
    double s = 1;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(y[i]) && fabs(y[i]) > s) s = fabs(y[i]);
    return s;
}

/* Output of one backend against the reference. */
static void check_fwd(hcase *c, float **xf, const backend *bk) {
    bool half = bk->prec == ERT_DTYPE_F16;
    if (half && c->no_half) {
        static int said;
        if (!said++) printf("%s: not on %s: %s\n", c->what, bk->name, c->no_half);
        return;
    }
    to_ref(c, xf, half);
    int64_t ny = nel(c->ynd, c->yd);
    double *ref = malloc((size_t)(ny ? ny : 1) * sizeof(double));
    c->ref(&c->r, ref);
    ert_model *m = build(c, xf, false, half);
    ert_session *s = NULL;
    ert_session_options o = {.device = bk->dev, .precision = bk->prec};
    ert_status st = m ? ert_session_create(m, &o, &s) : ERT_E_INTERNAL;
    CHECK(st == ERT_OK, "%s on %s: session: %s (%s)", c->what, bk->name, ert_status_str(st), ert_last_error(ctx));
    if (st != ERT_OK) goto done;
    ert_op op = ert_op_find(c->op)->op;
    if (bk->dev == ERT_DEVICE_CUDA && ert_session_n_cpu_fallback(s) > 0) fell_back[op]++;
    for (int k = 0; k < c->ns; k++) {
        slot *sl = &c->s[k];
        if (!xf[k] || (sl->kind == S_F32 && sl->weight)) continue;
        char nm[16];
        snprintf(nm, sizeof nm, "x%d", k);
        int idx = -1;
        int64_t n = nel(sl->nd, sl->dims);
        CHECK_OK(ert_session_find_input(s, nm, &idx), ctx);
        if (sl->kind == S_BOOL || sl->kind == S_INT) { /* one byte each: bool, i8, u8 */
            uint8_t *u = malloc((size_t)(n ? n : 1));
            for (int64_t i = 0; i < n; i++) u[i] = sl->kind == S_BOOL ? xf[k][i] != 0 : (uint8_t)(int)xf[k][i];
            CHECK_OK(ert_session_set_input(s, idx, u, (size_t)n), ctx);
            free(u);
        } else {
            float *v = malloc((size_t)(n ? n : 1) * sizeof(float));
            for (int64_t i = 0; i < n; i++) v[i] = half ? ert_f16_to_f32(ert_f32_to_f16(xf[k][i])) : xf[k][i];
            CHECK_OK(ert_session_set_input(s, idx, v, (size_t)n * sizeof(float)), ctx);
            free(v);
        }
    }
    CHECK_OK(ert_session_run(s), ctx);
    ert_tensor_info yi;
    CHECK_OK(ert_session_output_info(s, 0, &yi), ctx);
    bool shape_ok = yi.dtype == c->ydt && yi.ndim == c->ynd;
    for (int d = 0; shape_ok && d < c->ynd; d++) shape_ok = yi.dims[d] == c->yd[d];
    CHECK(shape_ok, "%s on %s: output %s of rank %d, expected %s of rank %d", c->what, bk->name,
          ert_dtype_name(yi.dtype), yi.ndim, ert_dtype_name(c->ydt), c->ynd);
    if (!shape_ok) goto done;
    size_t bytes = (size_t)ny * ert_dtype_size(c->ydt);
    void *got = malloc(bytes ? bytes : 1);
    CHECK_OK(ert_session_get_output(s, 0, got, bytes), ctx);
    char what[160];
    snprintf(what, sizeof what, "%s on %s", c->what, bk->name);
    if (c->ydt == ERT_DTYPE_F32) {
        double tol = bk->tol * (c->tol > 0 ? c->tol : 1), sc = scale_of(ref, ny);
        CHECK(ert_test_close(what, (const float *)got, ref, ny, tol * sc, tol), "%s: output vs float64 reference", what);
    } else {
        int64_t bad = 0, first = -1;
        double fg = 0;
        for (int64_t i = 0; i < ny; i++) {
            double g = c->ydt == ERT_DTYPE_I64 ? (double)((int64_t *)got)[i]
                     : c->ydt == ERT_DTYPE_I32 ? (double)((int32_t *)got)[i]
                     : c->ydt == ERT_DTYPE_I8 ? (double)((int8_t *)got)[i] : (double)((uint8_t *)got)[i];
            if (g != ref[i] && bad++ == 0) first = i, fg = g;
        }
        CHECK(bad == 0, "%s: %lld of %lld values differ, the first at %lld: %g, expected %g", what, (long long)bad,
              (long long)ny, (long long)first, fg, first >= 0 ? ref[first] : 0.0);
    }
    free(got);
    covered[op] |= COV_FWD;
done:
    ert_session_free(s);
    ert_model_free(m);
    free(ref);
}

/* Gradients of the differentiable f32 operands against finite differences. */
static void check_grad(hcase *c, float **xf) {
    ert_op op = ert_op_find(c->op)->op;
    to_ref(c, xf, false);
    if (c->bn_train) c->r.iv[3] = 0;
    ert_model *m = build(c, xf, true, false);
    ert_trainer_options to = {0};
    to.loss.kind = ERT_LOSS_MSE;
    to.optim.kind = ERT_OPTIM_SGD;
    to.bn = c->bn_train ? ERT_BN_TRAIN : ERT_BN_FROZEN;
    to.session.device = train_dev;
    ert_trainer *t = NULL;
    ert_status st = m ? ert_trainer_create(m, &to, &t) : ERT_E_INTERNAL;
    if (st == ERT_E_UNSUPPORTED && train_dev == ERT_DEVICE_CUDA) { /* reported in the table, not a failure here */
        refused[op]++;
        goto done;
    }
    CHECK(st == ERT_OK, "%s: trainer: %s (%s)", c->what, ert_status_str(st), ert_last_error(ctx));
    if (st != ERT_OK) goto done;
    for (int i = 0; i < t->g.nn; i++) in_trainer[t->g.n[i].op] = true;
    if (train_dev == ERT_DEVICE_CPU) { /* the plan (test_train_cuda checks the CUDA trainer's) */
        char why[256] = "";
        int nb = 0;
        CHECK(ert_trainer_plan_check(t, why, sizeof why), "%s: trainer plan: %s", c->what, why);
        const ert_plan_block *blk = ert_trainer_plan_blocks(t, &nb);
        CHECK(ert_plan_matches_oracle(blk, nb, why, sizeof why), "%s: trainer plan vs oracle: %s", c->what, why);
    }
    int64_t ny = nel(c->ynd, c->yd);
    float *tg = NULL;
    CHECK_OK(ert_trainer_target_data(t, (void **)&tg), ctx);
    double *tgt = malloc((size_t)ny * sizeof(double)), *y = malloc((size_t)ny * sizeof(double));
    for (int64_t i = 0; i < ny; i++) tgt[i] = tg[i] = (float)ert_test_uniform(&rng, -1, 1);
    float loss = 0;
    CHECK_OK(ert_trainer_step(t, &loss), ctx);
#define LOSS_REF(L)                                                        \
    do {                                                                   \
        c->ref(&c->r, y);                                                  \
        double s_ = 0;                                                     \
        for (int64_t i_ = 0; i_ < ny; i_++) s_ += (y[i_] - tgt[i_]) * (y[i_] - tgt[i_]); \
        (L) = s_ / (double)ny;                                             \
    } while (0)
    double L0;
    LOSS_REF(L0);
    CHECK(fabs(L0 - loss) <= 1e-4 * (1 + fabs(L0)), "%s: loss %.9g, float64 reference %.9g", c->what, (double)loss, L0);
    const double h = 1e-5;
    bool any = false;
    for (int k = 0, p = 0; k < c->ns; k++) {
        if (!xf[k]) continue;
        int pk = p++;
        if (c->s[k].kind != S_F32 || !ert_ad_diff_slot(op, k) || c->r.pn[pk] < 2) continue;
        char nm[16];
        snprintf(nm, sizeof nm, "p%d", k);
        int64_t n = c->r.pn[pk], m_chk = n < 24 ? n : 24;
        float *g = malloc((size_t)n * sizeof(float)), *gg = malloc((size_t)m_chk * sizeof(float));
        double *fd = malloc((size_t)m_chk * sizeof(double)), sc = 1e-3;
        int64_t ng = n;
        st = ert_trainer_param_copy(t, nm, NULL, g, &ng);
        CHECK(st == ERT_OK, "%s: no gradient for operand %d: %s (%s)", c->what, k, ert_status_str(st), ert_last_error(ctx));
        for (int64_t j = 0; st == ERT_OK && j < m_chk; j++) {
            int64_t e = n <= 24 ? j : (int64_t)(ert_test_u64(&rng) % (uint64_t)n);
            double v = c->r.pd[pk][e], lp, lm;
            c->r.pd[pk][e] = v + h;
            LOSS_REF(lp);
            c->r.pd[pk][e] = v - h;
            LOSS_REF(lm);
            c->r.pd[pk][e] = v;
            fd[j] = (lp - lm) / (2 * h);
            gg[j] = g[e];
            sc = fmax(sc, fabs(fd[j]));
        }
        char what[128];
        snprintf(what, sizeof what, "%s d(operand %d)", c->what, k);
        if (st == ERT_OK) CHECK(ert_test_close(what, gg, fd, m_chk, 2e-3 * sc, 2e-3), "%s: gradient vs finite differences", what);
        any |= st == ERT_OK;
        free(g), free(gg), free(fd);
    }
#undef LOSS_REF
    if (any) covered[op] |= COV_GRAD;
    free(tgt), free(y);
done:
    ert_trainer_free(t);
    ert_model_free(m);
}

void run(hcase *c) {
    const ert_op_def *def = ert_op_find(c->op);
    if (!def) { /* a case ahead of its op (another branch adds it): the coverage table still sees every op this build has */
        static const char *said[16];
        int k = 0;
        while (k < 16 && said[k] && said[k] != c->op) k++;
        if (k < 16 && !said[k]) said[k] = c->op, printf("%s: not in this build's op table: case skipped\n", c->op);
        return;
    }
    float *xf[MAXS];
    draw(c, xf);
    for (int b = 0; b < n_backends; b++) check_fwd(c, xf, &backends[b]);
    if (has_backward(def->op) && c->ydt == ERT_DTYPE_F32 && !c->no_grad) check_grad(c, xf);
    undraw(c, xf);
}

void run_grad_only(hcase *c) {
    float *xf[MAXS];
    draw(c, xf);
    check_grad(c, xf);
    undraw(c, xf);
}

/* ------------------------------------------------------------ main */

static bool cuda_probe(char *why, size_t n) {
    ert_builder *b = NULL;
    int64_t d[1] = {4};
    int32_t x = -1, y = -1;
    ert_model *m = NULL;
    ert_builder_create(ctx, &b);
    ert_builder_input(b, "x", ERT_DTYPE_F32, 1, d, &x);
    ert_builder_unary(b, "Relu", x, &y);
    ert_builder_output(b, y, "y");
    ert_status st = ert_builder_finish(b, &m);
    ert_builder_free(b);
    ert_session_options o = {.device = ERT_DEVICE_CUDA};
    ert_session *s = NULL;
    if (st == ERT_OK) st = ert_session_create(m, &o, &s);
    snprintf(why, n, "%s", ert_last_error(ctx));
    ert_session_free(s);
    ert_model_free(m);
    return st == ERT_OK;
}

int main(int argc, char **argv) {
    bool cuda = argc > 1 && !strcmp(argv[1], "--cuda");
    bool selfcheck = argc > 1 && !strcmp(argv[1], "--cpu-selfcheck");
    const char *name = cuda ? "op_harness_cuda" : selfcheck ? "op_harness --cpu-selfcheck" : "op_harness";
    ert_test_rng_init(&rng, name);
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    if (cuda) {
        char why[600];
        if (!cuda_probe(why, sizeof why)) {
            ert_context_free(ctx);
            return ert_test_skip(name, why);
        }
        backends[0] = (backend){"cuda f32", ERT_DEVICE_CUDA, ERT_DTYPE_F32, 1e-4};
        backends[1] = (backend){"cuda f16", ERT_DEVICE_CUDA, ERT_DTYPE_F16, 2e-2};
        n_backends = 2;
        train_dev = ERT_DEVICE_CUDA;
        cuda_run = true;
    } else {
        backends[0] = (backend){"cpu", ERT_DEVICE_CPU, ERT_DTYPE_F32, 1e-4};
        n_backends = 1;
        if (selfcheck) { /* the f16 path (rounded inputs and weights, its tolerance) on the CPU, which ignores precision */
            backends[1] = (backend){"cpu f16 inputs", ERT_DEVICE_CPU, ERT_DTYPE_F16, 2e-2};
            n_backends = 2;
        }
    }
    int reps = getenv("ERT_HEAVY") ? 10 : 3;
    for (int r = 0; r < reps; r++) {
        cases_unary();
        cases_binary();
        cases_reduce();
        cases_softmax();
        cases_norm();
        cases_conv();
        cases_gemm();
        cases_pool();
        cases_reshape();
        cases_transpose_slice_pad();
        cases_tile_expand();
        cases_concat_split_gather();
        cases_misc();
        cases_resize();
        cases_scatter();
        cases_quant();
        cases_attention();
    }
    /* Coverage: every op of the table is covered or listed. */
    int n_fwd = 0, n_grad = 0, n_listed = 0, n_internal = 0;
    printf("%-24s %-8s %-8s\n", "op", "forward", "gradient");
    for (int op = 1; op < ERT_OP_COUNT; op++) {
        const ert_op_def *def = ert_op_get((ert_op)op);
        if (!def) continue;
        bool internal = !strncmp(def->name, "ert.", 4), bw = has_backward((ert_op)op);
        const char *fwhy = not_here(def->name, COV_FWD), *gwhy = not_here(def->name, COV_GRAD);
        char fcol[32], gcol[32];
        if (internal) {
            snprintf(fcol, sizeof fcol, "%s", in_trainer[op] ? "trainer" : "-");
            snprintf(gcol, sizeof gcol, "%s", in_trainer[op] ? "yes" : gwhy ? "listed" : "MISSING");
            CHECK(cuda_run || in_trainer[op] || gwhy,
                  "%s (training-internal) appeared in no gradient check's trainer and is not listed", def->name);
            n_internal += in_trainer[op];
        } else {
            snprintf(fcol, sizeof fcol, "%s", covered[op] & COV_FWD ? "yes" : fwhy ? "listed" : "MISSING");
            snprintf(gcol, sizeof gcol, "%s", !bw ? "no rule" : covered[op] & COV_GRAD ? "yes" : gwhy ? "listed" : "MISSING");
            CHECK((covered[op] & COV_FWD) || fwhy, "op %s: no forward case ran and it is not listed", def->name);
            CHECK(cuda_run || !bw || (covered[op] & COV_GRAD) || gwhy,
                  "op %s has a backward rule: no gradient case ran and it is not listed", def->name);
            n_fwd += (covered[op] & COV_FWD) != 0;
            n_grad += (covered[op] & COV_GRAD) != 0;
        }
        n_listed += (fwhy != NULL) + (gwhy != NULL);
        if (fell_back[op]) snprintf(fcol + strlen(fcol), sizeof fcol - strlen(fcol), " (fallback %d)", fell_back[op]);
        if (refused[op]) snprintf(gcol, sizeof gcol, "refused %d", refused[op]);
        printf("%-24s %-16s %-8s%s%s\n", def->name, fcol, gcol, fwhy ? "  forward: " : gwhy ? "  gradient: " : "",
               fwhy ? fwhy : gwhy ? gwhy : "");
    }
    printf("%s: %d ops forward x %d backend(s) (%s%s), %d gradients (%s trainer), %d training-internal ops "
           "through the trainers, %d listed\n",
           name, n_fwd, n_backends, backends[0].name, n_backends > 1 ? ", cuda f16" : "", n_grad, cuda ? "cuda" : "cpu",
           n_internal, n_listed);
    ert_context_free(ctx);
    return ert_test_finish(name);
}

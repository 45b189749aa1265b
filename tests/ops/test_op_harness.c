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
 * ERT_HEAVY=1: 10 random draws per case instead of 3. */
#include "op_harness.h" /* rand_dims, unflat */
#include "plan_oracle.h"
#include "ref64.h"
#include "trainer_internal.h" /* ert_ad_diff_slot, ert_trainer_param_copy, the trainer's nodes */

#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
static ert_test_rng rng;

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
    {"ert.DropoutTrain", COV_GRAD, "made for Dropout in training, whose random mask rules out finite differences: test_grad case_dropout"},
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

/* ------------------------------------------------------------ cases */

enum { S_F32, S_BOOL, S_CONST, S_OMIT };
typedef struct slot {
    int kind;
    bool weight;      /* S_F32: a weight in the forward model too (filters, norm parameters) */
    int nd;
    int64_t dims[6];
    double lo, hi;    /* S_F32: uniform in [lo, hi) */
    double gap;       /* > 0: |v| >= gap; < 0: a permuted even grid (no near-ties) */
    double kink[4];   /* S_F32: values kept 0.05 away from these (n_kink of them) */
    int n_kink;
    bool grid;        /* S_F32: values from {-2, -1, 0, 1, 2} (Equal can be true) */
    ert_dtype dt;     /* S_CONST */
    const void *data; /* S_CONST */
} slot;

#define MAXS 6
typedef struct hcase {
    const char *op;
    char what[96];
    slot s[MAXS];
    int ns;
    ert_attr at[8];
    int na;
    int n_out, y_out;  /* node outputs; the one that is checked */
    ert_dtype ydt;
    int ynd;
    int64_t yd[6];
    ert_ref r;         /* iv/fv set by the case; np/pd/pn filled from the S_F32/S_BOOL slots */
    ert_ref_fn ref;
    bool no_grad;      /* the op has a backward rule, but not for this case's types */
    bool bn_train;     /* gradient: BatchNorm with batch statistics (ref iv[3] = 0) */
    const char *no_half; /* not run on f16 sessions: why */
    double tol;        /* tolerance factor (1 when 0) */
} hcase;

static int64_t nel(int nd, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

/* Random dims (rank in [rmin, rmax], each in [1, dmax]) with at least two
 * elements: the trainer keeps one-element weights as constants. */
static int rdims(int rmin, int rmax, int dmax, int64_t *d) {
    int nd = rand_dims(&rng, rmin, rmax, dmax, d);
    if (nel(nd, d) < 2) d[nd - 1] = 2;
    return nd;
}

static hcase *begin(hcase *c, const char *op) {
    memset(c, 0, sizeof *c);
    c->op = op;
    snprintf(c->what, sizeof c->what, "%s", op);
    c->n_out = 1;
    c->ydt = ERT_DTYPE_F32;
    return c;
}

static slot *add_f32(hcase *c, int nd, const int64_t *d, double lo, double hi) {
    slot *s = &c->s[c->ns++];
    s->kind = S_F32;
    s->nd = nd;
    memcpy(s->dims, d, (size_t)nd * sizeof *d);
    s->lo = lo, s->hi = hi;
    return s;
}

static slot *add_const(hcase *c, ert_dtype dt, int nd, const int64_t *d, const void *data) {
    slot *s = &c->s[c->ns++];
    s->kind = S_CONST;
    s->dt = dt;
    s->nd = nd;
    memcpy(s->dims, d, (size_t)nd * sizeof *d);
    s->data = data;
    return s;
}

static void set_y(hcase *c, ert_dtype dt, int nd, const int64_t *d) {
    c->ydt = dt;
    c->ynd = nd;
    memcpy(c->yd, d, (size_t)nd * sizeof *d);
}

/* Draw the S_F32/S_BOOL operands: f32 values (what the library gets) in
 * xf[k], their float64 copies in c->r.pd. */
static void draw(hcase *c, float **xf) {
    c->r.np = 0;
    for (int k = 0; k < c->ns; k++) {
        slot *s = &c->s[k];
        xf[k] = NULL;
        if (s->kind != S_F32 && s->kind != S_BOOL) continue;
        int64_t n = nel(s->nd, s->dims);
        xf[k] = malloc((size_t)(n ? n : 1) * sizeof(float));
        for (int64_t i = 0; i < n; i++) {
            double v;
            if (s->kind == S_BOOL) v = (double)ert_test_int(&rng, 0, 1);
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
        if (sl->kind == S_BOOL) {
            uint8_t *u = malloc((size_t)(n ? n : 1));
            for (int64_t i = 0; i < n; i++) u[i] = xf[k][i] != 0;
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
        for (int64_t i = 0; i < ny; i++) {
            double g = c->ydt == ERT_DTYPE_I64 ? (double)((int64_t *)got)[i]
                     : c->ydt == ERT_DTYPE_I32 ? (double)((int32_t *)got)[i] : (double)((uint8_t *)got)[i];
            if (g != ref[i] && bad++ == 0) first = i;
        }
        CHECK(bad == 0, "%s: %lld of %lld values differ, the first at %lld", what, (long long)bad, (long long)ny,
              (long long)first);
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
    for (int i = 0; i < t->nn; i++) in_trainer[t->n[i].op] = true;
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

/* Forward on every backend; gradient when the op has a backward rule. */
static void run(hcase *c) {
    const ert_op_def *def = ert_op_find(c->op);
    CHECK(def != NULL, "%s: not in the op table", c->op);
    if (!def) return;
    float *xf[MAXS];
    draw(c, xf);
    for (int b = 0; b < n_backends; b++) check_fwd(c, xf, &backends[b]);
    if (has_backward(def->op) && c->ydt == ERT_DTYPE_F32 && !c->no_grad) check_grad(c, xf);
    undraw(c, xf);
}

/* ------------------------------------------------------------ element-wise */

static void unary_ref(const ert_ref *c, double *y) {
    int k = (int)c->iv[0];
    for (int64_t i = 0; i < c->pn[0]; i++) {
        double x = c->pd[0][i], v;
        switch (k) {
        case 10: v = erf(x); break;
        case 11: v = sqrt(x); break;
        case 12: v = exp(x); break;
        case 13: v = log(x); break;
        case 14: v = -x; break;
        case 15: v = fabs(x); break;
        case 16: v = 1 / x; break;
        case 17: v = floor(x); break;
        case 18: v = ceil(x); break;
        case 19: v = x > 0 ? x : c->fv[0] * (exp(x) - 1); break;                          /* Elu */
        case 20: v = 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (exp(x) - 1)); break; /* Selu */
        case 21: v = log1p(exp(x)); break;                                                  /* Softplus */
        case 22: v = x * tanh(log1p(exp(x))); break;                                        /* Mish */
        case 23: v = sin(x); break;
        case 24: v = cos(x); break;
        default: v = act_ref(k, x, c->fv); break; /* 0-9: ref64.h's activations */
        }
        y[i] = v;
    }
}

static void case_unary(void) {
    static const struct { const char *op; int k; double lo, hi, kink[3]; int nk; double tol; } U[] = {
        {"Relu", 0, -4, 4, {0}, 1, 1}, {"LeakyRelu", 1, -4, 4, {0}, 1, 1}, {"Sigmoid", 2, -4, 4, {0}, 0, 1},
        {"Tanh", 3, -4, 4, {0}, 0, 1}, {"HardSigmoid", 4, -4, 4, {-2.5, 2.5}, 2, 1},
        {"HardSwish", 5, -4, 4, {-3, 3}, 2, 1}, {"Silu", 6, -4, 4, {0}, 0, 1}, {"Gelu", 7, -4, 4, {0}, 0, 1},
        {"Gelu", 8, -4, 4, {0}, 0, 1}, {"Clip", 9, -2, 2, {-0.5, 1.0}, 2, 1}, {"Erf", 10, -3, 3, {0}, 0, 1},
        {"Sqrt", 11, 0.1, 4, {0}, 0, 1}, {"Exp", 12, -3, 3, {0}, 0, 1}, {"Log", 13, 0.1, 4, {0}, 0, 1},
        {"Neg", 14, -4, 4, {0}, 0, 1}, {"Abs", 15, -4, 4, {0}, 1, 1}, {"Reciprocal", 16, 0.5, 2, {0}, 0, 1},
        {"Floor", 17, -4, 4, {0}, 0, 1}, {"Ceil", 18, -4, 4, {0}, 0, 1}, {"Elu", 19, -4, 4, {0}, 1, 1},
        {"Selu", 20, -4, 4, {0}, 1, 1}, {"Softplus", 21, -4, 4, {0}, 0, 1}, {"Mish", 22, -4, 4, {0}, 0, 1},
        {"Sin", 23, -4, 4, {0}, 0, 1}, {"Cos", 24, -4, 4, {0}, 0, 1},
    };
    static const float clip_lo = -0.5f, clip_hi = 1.0f;
    for (size_t u = 0; u < sizeof U / sizeof U[0]; u++) {
        hcase hc, *c = begin(&hc, U[u].op);
        if (U[u].k == 8) snprintf(c->what, sizeof c->what, "Gelu(tanh)");
        int64_t d[4];
        int nd = rdims(1, 4, 5, d);
        slot *x = add_f32(c, nd, d, U[u].lo, U[u].hi);
        x->n_kink = U[u].nk;
        memcpy(x->kink, U[u].kink, sizeof U[u].kink);
        if (U[u].k == 17 || U[u].k == 18) x->n_kink = 0, x->gap = 0; /* exact in f32 and f16 alike */
        c->r.iv[0] = U[u].k;
        if (U[u].k == 1) c->at[c->na++] = ERT_ATTR_F("alpha", 0.1f), c->r.fv[0] = 0.1f;
        if (U[u].k == 4) {
            c->at[c->na++] = ERT_ATTR_F("alpha", 0.2f), c->at[c->na++] = ERT_ATTR_F("beta", 0.5f);
            c->r.fv[0] = 0.2f, c->r.fv[1] = 0.5f;
        }
        if (U[u].k == 8) c->at[c->na++] = ERT_ATTR_S("approximate", "tanh");
        if (U[u].k == 19) c->at[c->na++] = ERT_ATTR_F("alpha", 0.7f), c->r.fv[0] = 0.7f;
        if (U[u].k == 9) {
            add_const(c, ERT_DTYPE_F32, 0, NULL, &clip_lo);
            add_const(c, ERT_DTYPE_F32, 0, NULL, &clip_hi);
            c->r.fv[0] = clip_lo, c->r.fv[1] = clip_hi;
        }
        c->ref = unary_ref;
        set_y(c, ERT_DTYPE_F32, nd, d);
        run(c);
    }
}

/* Operands of a broadcasting op: k operands of random rank whose dims are
 * the output's or 1; dims padded to rank 4 into iv[4k..]. */
static void bcast_shapes(hcase *c, int n, double lo, double hi, int64_t *od) {
    int64_t full[4];
    for (int i = 0; i < 4; i++) full[i] = ert_test_int(&rng, 1, 4);
    full[3] = ert_test_int(&rng, 2, 4);
    int nd_out = 0;
    for (int k = 0; k < n; k++) {
        int nd = ert_test_int(&rng, 1, 4);
        int64_t d4[4];
        for (int i = 0; i < 4; i++) d4[i] = i < 4 - nd ? 1 : ert_test_int(&rng, 0, 2) ? full[i] : 1;
        if (nel(4, d4) < 2) d4[3] = full[3];
        memcpy(c->r.iv + 4 * k, d4, sizeof d4);
        add_f32(c, nd, d4 + 4 - nd, lo, hi);
        nd_out = nd > nd_out ? nd : nd_out;
    }
    c->r.iv[13] = n;
    c->ynd = nd_out;
    for (int i = 0; i < nd_out; i++) {
        int64_t m = 1;
        for (int k = 0; k < n; k++) m = c->r.iv[4 * k + 4 - nd_out + i] > m ? c->r.iv[4 * k + 4 - nd_out + i] : m;
        od[i] = m;
    }
}

static void case_binary(void) {
    static const struct { const char *op; int code, n; double lo, hi; } B[] = {
        {"Add", ERT_REF_ADD, 2, -2, 2}, {"Sub", ERT_REF_SUB, 2, -2, 2}, {"Mul", ERT_REF_MUL, 2, -2, 2},
        {"Div", ERT_REF_DIV, 2, 0.5, 2}, {"Pow", ERT_REF_POW, 2, 0.5, 2}, {"Min", ERT_REF_MIN, 3, -2, 2},
        {"Max", ERT_REF_MAX, 2, -2, 2}, {"Mean", ERT_REF_MEAN, 3, -2, 2}, {"Mod", ERT_REF_MOD, 2, 0.5, 4},
        {"Equal", ERT_REF_EQUAL, 2, -2, 2}, {"Less", ERT_REF_LESS, 2, -2, 2}, {"Greater", ERT_REF_GREATER, 2, -2, 2},
    };
    for (size_t u = 0; u < sizeof B / sizeof B[0]; u++) {
        hcase hc, *c = begin(&hc, B[u].op);
        int64_t od[4];
        int n = B[u].n == 3 ? ert_test_int(&rng, 1, 3) : 2;
        bcast_shapes(c, n, B[u].lo, B[u].hi, od);
        c->r.iv[12] = B[u].code;
        bool cmp = B[u].code >= ERT_REF_EQUAL;
        for (int k = 0; k < n; k++) c->s[k].grid = cmp; /* ties happen: Equal can be true */
        if (B[u].code == ERT_REF_POW) c->s[1].lo = -2, c->s[1].hi = 2;
        if (B[u].code == ERT_REF_MOD) {
            c->at[c->na++] = ERT_ATTR_I("fmod", 1), c->r.fv[0] = 1;
            c->s[0].lo = -8, c->s[0].hi = 8;
            c->tol = 10; /* fmod of values near a multiple: one f32 rounding of the quotient */
            c->no_half = "an f16 quotient picks another multiple near its boundaries";
        }
        set_y(c, cmp ? ERT_DTYPE_BOOL : ERT_DTYPE_F32, c->ynd, od);
        c->ref = binary_ref;
        run(c);
    }
    /* PRelu: the slope broadcasts to x (unidirectional) */
    hcase hc, *c = begin(&hc, "PRelu");
    int64_t d[4], sd[4];
    int nd = rdims(1, 4, 5, d);
    for (int i = 0; i < 4; i++) sd[i] = 1;
    for (int i = 0; i < nd; i++) sd[4 - nd + i] = ert_test_int(&rng, 0, 1) ? d[i] : 1;
    int snd = ert_test_int(&rng, 1, nd);
    for (int i = 0; i < 4 - snd; i++) sd[i] = 1; /* the slope has only its last snd dims */
    slot *x = add_f32(c, nd, d, -2, 2);
    x->gap = 0.05;
    add_f32(c, snd, sd + 4 - snd, 0.1, 0.5);
    for (int i = 0; i < 4; i++) c->r.iv[i] = i < 4 - nd ? 1 : d[i - (4 - nd)];
    memcpy(c->r.iv + 4, sd, sizeof sd);
    c->r.iv[12] = ERT_REF_PRELU, c->r.iv[13] = 2;
    set_y(c, ERT_DTYPE_F32, nd, d);
    c->ref = binary_ref;
    run(c);
    /* Where: a bool condition broadcast with both values */
    c = begin(&hc, "Where");
    int64_t od[4];
    bcast_shapes(c, 3, -2, 2, od);
    c->s[0].kind = S_BOOL;
    c->r.iv[12] = ERT_REF_WHERE;
    set_y(c, ERT_DTYPE_F32, c->ynd, od);
    c->ref = binary_ref;
    run(c);
}

/* ------------------------------------------------------------ reductions, softmax, norms */

static void arg_ref(const ert_ref *c, double *y) { /* iv: d0 d1 d2, axis, min */
    const int64_t *d = c->iv;
    int ax = (int)c->iv[3];
    int64_t outer, inner;
    ert_ref_axis(d, 3, ax, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t best = 0;
            for (int64_t j = 1; j < d[ax]; j++) {
                double v = c->pd[0][(o * d[ax] + j) * inner + in], bv = c->pd[0][(o * d[ax] + best) * inner + in];
                if (c->iv[4] ? v < bv : v > bv) best = j;
            }
            y[o * inner + in] = (double)best;
        }
}

static void case_reduce(void) {
    static const char *R[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
    for (int kind = 0; kind < 3; kind++) {
        hcase hc, *c = begin(&hc, R[kind]);
        int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 2, 5)}, od[3];
        int mask = ert_test_int(&rng, 1, 7), keep = ert_test_int(&rng, 0, 1), na = 0, ond = 0;
        static int64_t axes[3];
        for (int i = 0; i < 3; i++)
            if (mask >> i & 1) axes[na++] = i - (ert_test_int(&rng, 0, 1) ? 3 : 0);
        for (int i = 0; i < 3; i++)
            if (!(mask >> i & 1) || keep) od[ond++] = mask >> i & 1 ? 1 : d[i];
        slot *x = add_f32(c, 3, d, -1, 1);
        if (kind == 2) x->gap = -1; /* no near-ties for the max */
        int64_t an = na;
        add_const(c, ERT_DTYPE_I64, 1, &an, axes);
        c->at[c->na++] = ERT_ATTR_I("keepdims", keep);
        memcpy(c->r.iv, d, sizeof d);
        c->r.iv[3] = mask, c->r.iv[4] = kind;
        set_y(c, ERT_DTYPE_F32, ond, od);
        c->ref = reduce_ref;
        run(c);
    }
    for (int mn = 0; mn < 2; mn++) {
        hcase hc, *c = begin(&hc, mn ? "ArgMin" : "ArgMax");
        int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 2, 5)}, od[3];
        int ax = ert_test_int(&rng, 0, 2), keep = ert_test_int(&rng, 0, 1), ond = 0;
        for (int i = 0; i < 3; i++)
            if (i != ax || keep) od[ond++] = i == ax ? 1 : d[i];
        slot *x = add_f32(c, 3, d, -1, 1);
        x->gap = -1;
        c->at[c->na++] = ERT_ATTR_I("axis", ax - (ert_test_int(&rng, 0, 1) ? 3 : 0));
        c->at[c->na++] = ERT_ATTR_I("keepdims", keep);
        memcpy(c->r.iv, d, sizeof d);
        c->r.iv[3] = ax, c->r.iv[4] = mn;
        set_y(c, ERT_DTYPE_I64, ond, od);
        c->ref = arg_ref;
        run(c);
    }
}

static void case_softmax(void) {
    for (int lg = 0; lg < 2; lg++) {
        hcase hc, *c = begin(&hc, lg ? "LogSoftmax" : "Softmax");
        int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 2, 5), ert_test_int(&rng, 1, 4)};
        int axis = ert_test_int(&rng, 0, 2);
        c->r.iv[0] = 1, c->r.iv[2] = 1;
        for (int i = 0; i < axis; i++) c->r.iv[0] *= d[i];
        for (int i = axis + 1; i < 3; i++) c->r.iv[2] *= d[i];
        c->r.iv[1] = d[axis], c->r.iv[3] = lg;
        add_f32(c, 3, d, -2, 2);
        c->at[c->na++] = ERT_ATTR_I("axis", axis);
        set_y(c, ERT_DTYPE_F32, 3, d);
        c->ref = softmax_ref;
        run(c);
    }
}

static void instnorm_ref(const ert_ref *c, double *y) { /* iv: N C S; fv[0] eps */
    int64_t N = c->iv[0], C = c->iv[1], S = c->iv[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t ch = 0; ch < C; ch++) {
            const double *x = c->pd[0] + (n * C + ch) * S;
            double mu = 0, var = 0;
            for (int64_t i = 0; i < S; i++) mu += x[i];
            mu /= (double)S;
            for (int64_t i = 0; i < S; i++) var += (x[i] - mu) * (x[i] - mu);
            var /= (double)S;
            for (int64_t i = 0; i < S; i++)
                y[(n * C + ch) * S + i] = (x[i] - mu) / sqrt(var + c->fv[0]) * c->pd[1][ch] + c->pd[2][ch];
        }
}

static void case_norm(void) {
    /* LayerNormalization over the last 1 or 2 dims, with or without bias */
    hcase hc, *c = begin(&hc, "LayerNormalization");
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 2, 4), ert_test_int(&rng, 2, 6)};
    int axis = ert_test_int(&rng, 1, 2);
    c->r.iv[0] = axis == 1 ? d[0] : d[0] * d[1];
    c->r.iv[1] = axis == 1 ? d[1] * d[2] : d[2];
    c->r.iv[2] = ert_test_int(&rng, 0, 1);
    c->r.fv[0] = 1e-4f;
    add_f32(c, 3, d, -1, 1);
    add_f32(c, 3 - axis, d + axis, 0.5, 1.5)->weight = true;
    if (c->r.iv[2]) add_f32(c, 3 - axis, d + axis, -1, 1)->weight = true;
    c->at[c->na++] = ERT_ATTR_I("axis", axis), c->at[c->na++] = ERT_ATTR_F("epsilon", 1e-4f);
    set_y(c, ERT_DTYPE_F32, 3, d);
    c->ref = ln_ref;
    c->tol = 3;
    run(c);
    /* BatchNormalization: running statistics (inference, and a trainer with
     * frozen statistics), then batch statistics (the trainer's default) */
    for (int train = 0; train < 2; train++) {
        c = begin(&hc, "BatchNormalization");
        snprintf(c->what, sizeof c->what, "BatchNormalization(%s)", train ? "batch statistics" : "running statistics");
        int64_t N = ert_test_int(&rng, 2, 3), C = ert_test_int(&rng, 1, 4), H = ert_test_int(&rng, 1, 3), W = ert_test_int(&rng, 2, 4);
        int64_t xd[4] = {N, C, H, W}, cd[1] = {C};
        static float rm[8], rv[8];
        c->r.iv[0] = N, c->r.iv[1] = C, c->r.iv[2] = H * W, c->r.iv[3] = 1;
        c->r.fv[0] = 1e-3f;
        for (int64_t ch = 0; ch < C; ch++) {
            rm[ch] = (float)(ert_test_int(&rng, -500, 500) / 1000.0);
            rv[ch] = (float)(ert_test_int(&rng, 500, 2000) / 1000.0);
            c->r.iv[8 + ch] = (int64_t)llround((double)rm[ch] * 1000.0); /* bn_ref reads them /1000 */
            c->r.iv[16 + ch] = (int64_t)llround((double)rv[ch] * 1000.0);
            rm[ch] = (float)(c->r.iv[8 + ch] / 1000.0), rv[ch] = (float)(c->r.iv[16 + ch] / 1000.0);
        }
        add_f32(c, 4, xd, -1, 1);
        add_f32(c, 1, cd, 0.5, 1.5)->weight = true;
        add_f32(c, 1, cd, -1, 1)->weight = true;
        add_const(c, ERT_DTYPE_F32, 1, cd, rm);
        add_const(c, ERT_DTYPE_F32, 1, cd, rv);
        c->at[c->na++] = ERT_ATTR_F("epsilon", 1e-3f);
        set_y(c, ERT_DTYPE_F32, 4, xd);
        c->ref = bn_ref;
        c->bn_train = train;
        if (!train) {
            run(c); /* forward, and the gradient with the statistics frozen */
        } else { /* the gradient only: a session always uses the running statistics */
            float *xf[MAXS];
            draw(c, xf);
            check_grad(c, xf);
            undraw(c, xf);
        }
    }
    /* InstanceNormalization (no backward rule) */
    c = begin(&hc, "InstanceNormalization");
    int64_t N = ert_test_int(&rng, 1, 3), C = ert_test_int(&rng, 1, 4), S1 = ert_test_int(&rng, 2, 5), S2 = ert_test_int(&rng, 1, 4);
    int64_t xd[4] = {N, C, S1, S2}, cd[1] = {C};
    c->r.iv[0] = N, c->r.iv[1] = C, c->r.iv[2] = S1 * S2, c->r.fv[0] = 1e-5f;
    add_f32(c, 4, xd, -1, 1);
    add_f32(c, 1, cd, 0.5, 1.5)->weight = true;
    add_f32(c, 1, cd, -1, 1)->weight = true;
    set_y(c, ERT_DTYPE_F32, 4, xd);
    c->ref = instnorm_ref;
    c->tol = 3;
    run(c);
}

/* ------------------------------------------------------------ conv, gemm, pools */

static void convt_ref(const ert_ref *c, double *y) { /* iv: N C H W M KH KW s p d OH OW (group 1) */
    const int64_t *v = c->iv;
    int64_t N = v[0], C = v[1], H = v[2], W = v[3], M = v[4], KH = v[5], KW = v[6], s = v[7], p = v[8], dl = v[9];
    int64_t OH = v[10], OW = v[11];
    for (int64_t i = 0; i < N * M * OH * OW; i++) y[i] = v[12] ? c->pd[2][(i / (OH * OW)) % M] : 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t ih = 0; ih < H; ih++)
                for (int64_t iw = 0; iw < W; iw++)
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t oh = ih * s - p + kh * dl, ow = iw * s - p + kw * dl;
                                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                                y[((n * M + m) * OH + oh) * OW + ow] +=
                                    c->pd[0][((n * C + ch) * H + ih) * W + iw] * c->pd[1][((ch * M + m) * KH + kh) * KW + kw];
                            }
}

static void case_conv(void) {
    for (int depthwise = 0; depthwise < 2; depthwise++) {
        hcase hc, *c = begin(&hc, "Conv");
        int64_t *v = c->r.iv;
        int G = depthwise ? ert_test_int(&rng, 2, 3) : ert_test_int(&rng, 1, 2);
        v[15] = G;
        v[0] = ert_test_int(&rng, 1, 2);
        v[1] = depthwise ? G : G * ert_test_int(&rng, 1, 3);
        v[2] = ert_test_int(&rng, 5, 8), v[3] = ert_test_int(&rng, 5, 8);
        v[4] = G * ert_test_int(&rng, 1, depthwise ? 2 : 3);
        v[5] = ert_test_int(&rng, 1, 3), v[6] = ert_test_int(&rng, 1, 3);
        v[7] = ert_test_int(&rng, 1, 2), v[8] = ert_test_int(&rng, 1, 2);
        for (int i = 9; i < 13; i++) v[i] = ert_test_int(&rng, 0, 1);
        v[13] = ert_test_int(&rng, 1, 2), v[14] = ert_test_int(&rng, 1, 2);
        v[16] = ert_test_int(&rng, 0, 1);
        snprintf(c->what, sizeof c->what, "Conv(group %d%s)", G, depthwise ? ", depthwise" : "");
        int64_t xd[4] = {v[0], v[1], v[2], v[3]}, wd[4] = {v[4], v[1] / G, v[5], v[6]}, bd[1] = {v[4]};
        add_f32(c, 4, xd, -1, 1);
        add_f32(c, 4, wd, -1, 1)->weight = true;
        if (v[16]) add_f32(c, 1, bd, -1, 1)->weight = true;
        static int64_t ks[2], st[2], pads[4], dl[2];
        ks[0] = v[5], ks[1] = v[6], st[0] = v[7], st[1] = v[8], dl[0] = v[13], dl[1] = v[14];
        for (int i = 0; i < 4; i++) pads[i] = v[9 + i];
        c->at[c->na++] = ERT_ATTR_IS("kernel_shape", ks, 2), c->at[c->na++] = ERT_ATTR_IS("strides", st, 2);
        c->at[c->na++] = ERT_ATTR_IS("pads", pads, 4), c->at[c->na++] = ERT_ATTR_IS("dilations", dl, 2);
        c->at[c->na++] = ERT_ATTR_I("group", G);
        int64_t OH = (v[2] + v[9] + v[11] - v[13] * (v[5] - 1) - 1) / v[7] + 1;
        int64_t OW = (v[3] + v[10] + v[12] - v[14] * (v[6] - 1) - 1) / v[8] + 1, yd[4] = {v[0], v[4], OH, OW};
        set_y(c, ERT_DTYPE_F32, 4, yd);
        c->ref = conv_ref;
        c->tol = 3;
        run(c);
    }
    hcase hc, *c = begin(&hc, "ConvTranspose");
    int64_t *v = c->r.iv;
    v[0] = ert_test_int(&rng, 1, 2), v[1] = ert_test_int(&rng, 1, 3), v[2] = ert_test_int(&rng, 2, 5), v[3] = ert_test_int(&rng, 2, 5);
    v[4] = ert_test_int(&rng, 1, 3), v[5] = ert_test_int(&rng, 1, 3), v[6] = ert_test_int(&rng, 1, 3);
    v[7] = ert_test_int(&rng, 1, 2), v[8] = ert_test_int(&rng, 0, 1), v[9] = ert_test_int(&rng, 1, 2), v[12] = ert_test_int(&rng, 0, 1);
    if (v[8] > v[9] * (v[5] - 1) || v[8] > v[9] * (v[6] - 1)) v[8] = 0; /* no negative output size */
    v[10] = (v[2] - 1) * v[7] - 2 * v[8] + v[9] * (v[5] - 1) + 1;
    v[11] = (v[3] - 1) * v[7] - 2 * v[8] + v[9] * (v[6] - 1) + 1;
    int64_t xd[4] = {v[0], v[1], v[2], v[3]}, wd[4] = {v[1], v[4], v[5], v[6]}, bd[1] = {v[4]}, yd[4] = {v[0], v[4], v[10], v[11]};
    add_f32(c, 4, xd, -1, 1);
    add_f32(c, 4, wd, -1, 1)->weight = true;
    if (v[12]) add_f32(c, 1, bd, -1, 1)->weight = true;
    static int64_t ks[2], st[2], pads[4], dl[2];
    ks[0] = v[5], ks[1] = v[6], st[0] = st[1] = v[7], dl[0] = dl[1] = v[9];
    for (int i = 0; i < 4; i++) pads[i] = v[8];
    c->at[c->na++] = ERT_ATTR_IS("kernel_shape", ks, 2), c->at[c->na++] = ERT_ATTR_IS("strides", st, 2);
    c->at[c->na++] = ERT_ATTR_IS("pads", pads, 4), c->at[c->na++] = ERT_ATTR_IS("dilations", dl, 2);
    set_y(c, ERT_DTYPE_F32, 4, yd);
    c->ref = convt_ref;
    c->tol = 3;
    run(c);
}

static void case_gemm(void) {
    hcase hc, *c = begin(&hc, "Gemm");
    int64_t M = ert_test_int(&rng, 1, 7), N = ert_test_int(&rng, 1, 9), K = ert_test_int(&rng, 2, 8);
    int64_t *v = c->r.iv;
    v[0] = M, v[1] = N, v[2] = K, v[3] = ert_test_int(&rng, 0, 1), v[4] = ert_test_int(&rng, 0, 1), v[5] = ert_test_int(&rng, 0, 3);
    c->r.fv[0] = (float)ert_test_uniform(&rng, 0.5, 1.5), c->r.fv[1] = (float)ert_test_uniform(&rng, 0.5, 1.5);
    int64_t ad[2] = {v[3] ? K : M, v[3] ? M : K}, bd[2] = {v[4] ? N : K, v[4] ? K : N}, cd[3][2] = {{N, 0}, {M, N}, {M, 1}};
    add_f32(c, 2, ad, -1, 1);
    add_f32(c, 2, bd, -1, 1)->weight = true;
    if (v[5]) add_f32(c, v[5] == 1 ? 1 : 2, cd[v[5] - 1], -1, 1)->weight = true;
    c->at[c->na++] = ERT_ATTR_I("transA", v[3]), c->at[c->na++] = ERT_ATTR_I("transB", v[4]);
    c->at[c->na++] = ERT_ATTR_F("alpha", (float)c->r.fv[0]), c->at[c->na++] = ERT_ATTR_F("beta", (float)c->r.fv[1]);
    int64_t yd[2] = {M, N};
    set_y(c, ERT_DTYPE_F32, 2, yd);
    c->ref = gemm_ref;
    c->tol = 3;
    run(c);

    c = begin(&hc, "MatMul");
    M = ert_test_int(&rng, 1, 5), K = ert_test_int(&rng, 2, 6), N = ert_test_int(&rng, 1, 5);
    int64_t b0 = ert_test_int(&rng, 1, 3), b1 = ert_test_int(&rng, 1, 3);
    int na = ert_test_int(&rng, 2, 4), nb = ert_test_int(&rng, 2, 4);
    int64_t a4[4] = {ert_test_int(&rng, 0, 1) ? b0 : 1, ert_test_int(&rng, 0, 1) ? b1 : 1, M, K};
    int64_t b4[4] = {ert_test_int(&rng, 0, 1) ? b0 : 1, ert_test_int(&rng, 0, 1) ? b1 : 1, K, N};
    for (int i = 0; i < 4 - na; i++) a4[i] = 1;
    for (int i = 0; i < 4 - nb; i++) b4[i] = 1;
    memcpy(c->r.iv, a4, sizeof a4);
    memcpy(c->r.iv + 4, b4, sizeof b4);
    c->r.iv[8] = M, c->r.iv[9] = K, c->r.iv[10] = N;
    add_f32(c, na, a4 + 4 - na, -1, 1);
    add_f32(c, nb, b4 + 4 - nb, -1, 1);
    int ond = na > nb ? na : nb;
    int64_t od[4] = {a4[0] > b4[0] ? a4[0] : b4[0], a4[1] > b4[1] ? a4[1] : b4[1], M, N};
    set_y(c, ERT_DTYPE_F32, ond, od + 4 - ond);
    c->ref = matmul_ref;
    c->tol = 3;
    run(c);
}

static void case_pool(void) {
    for (int kind = 0; kind < 3; kind++) {
        int is_max = kind > 0;
        hcase hc, *c = begin(&hc, is_max ? "MaxPool" : "AveragePool");
        int64_t *v = c->r.iv;
        v[0] = ert_test_int(&rng, 1, 2), v[1] = ert_test_int(&rng, 1, 3), v[2] = ert_test_int(&rng, 5, 8), v[3] = ert_test_int(&rng, 5, 8);
        v[4] = ert_test_int(&rng, 2, 3), v[5] = ert_test_int(&rng, 1, 3), v[6] = ert_test_int(&rng, 1, 2), v[7] = ert_test_int(&rng, 1, 2);
        for (int i = 8; i < 12; i++) v[i] = ert_test_int(&rng, 0, 1);
        if (kind == 2) { /* 2x2 stride 2, odd sizes (the kernels' fast path): the last row or column is not covered */
            snprintf(c->what, sizeof c->what, "MaxPool 2x2/2");
            v[2] = ert_test_int(&rng, 2, 7), v[3] = ert_test_int(&rng, 2, 9);
            v[4] = v[5] = v[6] = v[7] = 2;
            for (int i = 8; i < 12; i++) v[i] = 0;
        }
        if (v[5] == 1) v[9] = v[11] = 0; /* no window entirely in the padding */
        v[12] = is_max;
        v[13] = is_max ? 0 : ert_test_int(&rng, 0, 1);
        v[14] = kind == 1 ? ert_test_int(&rng, 1, 2) : 1, v[15] = kind == 1 ? ert_test_int(&rng, 1, 2) : 1;
        int64_t xd[4] = {v[0], v[1], v[2], v[3]};
        add_f32(c, 4, xd, -1, 1)->gap = -1;
        static int64_t ks[2], st[2], pads[4], dl[2];
        ks[0] = v[4], ks[1] = v[5], st[0] = v[6], st[1] = v[7], dl[0] = v[14], dl[1] = v[15];
        for (int i = 0; i < 4; i++) pads[i] = v[8 + i];
        c->at[c->na++] = ERT_ATTR_IS("kernel_shape", ks, 2), c->at[c->na++] = ERT_ATTR_IS("strides", st, 2);
        c->at[c->na++] = ERT_ATTR_IS("pads", pads, 4);
        c->at[c->na++] = is_max ? ERT_ATTR_IS("dilations", dl, 2) : ERT_ATTR_I("count_include_pad", v[13]);
        int64_t OH = (v[2] + v[8] + v[10] - v[14] * (v[4] - 1) - 1) / v[6] + 1;
        int64_t OW = (v[3] + v[9] + v[11] - v[15] * (v[5] - 1) - 1) / v[7] + 1, yd[4] = {v[0], v[1], OH, OW};
        set_y(c, ERT_DTYPE_F32, 4, yd);
        c->ref = pool_ref;
        run(c);
    }
    for (int is_max = 0; is_max < 2; is_max++) {
        hcase hc, *c = begin(&hc, is_max ? "GlobalMaxPool" : "GlobalAveragePool");
        int64_t d[4] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 1, 5), ert_test_int(&rng, 2, 5)};
        add_f32(c, 4, d, -1, 1)->gap = -1;
        memcpy(c->r.iv, d, sizeof d);
        c->r.iv[4] = is_max;
        int64_t yd[4] = {d[0], d[1], 1, 1};
        set_y(c, ERT_DTYPE_F32, 4, yd);
        c->ref = gap_ref;
        run(c);
    }
}

/* ------------------------------------------------------------ data movement */

/* Output element i reads input element map(i) (or a constant fill when the
 * map gives -1): iv[0] the fill value index (no fill: 0), the map in the
 * case's own `gmap`, computed when the case is made. */
static int64_t *g_map;
static double g_fill;
static void map_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->iv[0]; i++) y[i] = g_map[i] < 0 ? g_fill : c->pd[0][g_map[i]];
}

/* A one-input node whose output is a gather of its input through g_map. */
static void run_map(hcase *c, int64_t ny) {
    c->r.iv[0] = ny;
    c->ref = map_ref;
    run(c);
    free(g_map);
    g_map = NULL;
}

static int64_t *identity_map(int64_t n) {
    int64_t *m = malloc((size_t)(n ? n : 1) * sizeof *m);
    for (int64_t i = 0; i < n; i++) m[i] = i;
    return m;
}

static void case_reshape_family(void) {
    int64_t d[4];
    int nd = rdims(1, 4, 4, d);
    int64_t n = nel(nd, d);
    hcase hc, *c;
    /* Identity, Dropout (inference) */
    static const char *same[] = {"Identity", "Dropout"};
    for (int k = 0; k < 2; k++) {
        c = begin(&hc, same[k]);
        c->no_grad = k == 1; /* NOT_HERE says why */
        add_f32(c, nd, d, -1, 1);
        set_y(c, ERT_DTYPE_F32, nd, d);
        g_map = identity_map(n);
        run_map(c, n);
    }
    /* Flatten at a random axis */
    c = begin(&hc, "Flatten");
    int ax = ert_test_int(&rng, 0, nd);
    add_f32(c, nd, d, -1, 1);
    c->at[c->na++] = ERT_ATTR_I("axis", ax);
    int64_t fd[2] = {nel(ax, d), nel(nd - ax, d + ax)};
    set_y(c, ERT_DTYPE_F32, 2, fd);
    g_map = identity_map(n);
    run_map(c, n);
    /* Reshape to (n/last, last) with a -1 */
    c = begin(&hc, "Reshape");
    static int64_t shp[2];
    shp[0] = -1, shp[1] = d[nd - 1];
    add_f32(c, nd, d, -1, 1);
    int64_t two = 2;
    add_const(c, ERT_DTYPE_I64, 1, &two, shp);
    int64_t rd[2] = {n / d[nd - 1], d[nd - 1]};
    set_y(c, ERT_DTYPE_F32, 2, rd);
    g_map = identity_map(n);
    run_map(c, n);
    /* Unsqueeze at 0 and the end; Squeeze of a 1-dim */
    c = begin(&hc, "Unsqueeze");
    static int64_t uax[2];
    uax[0] = 0, uax[1] = -1;
    add_f32(c, nd, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 1, &two, uax);
    int64_t ud[6] = {1};
    memcpy(ud + 1, d, (size_t)nd * sizeof *d);
    ud[nd + 1] = 1;
    set_y(c, ERT_DTYPE_F32, nd + 2, ud);
    g_map = identity_map(n);
    run_map(c, n);
    c = begin(&hc, "Squeeze");
    add_f32(c, nd + 2, ud, -1, 1);
    static int64_t sax[1];
    sax[0] = ert_test_int(&rng, 0, 1) ? 0 : -1;
    int64_t one = 1;
    add_const(c, ERT_DTYPE_I64, 1, &one, sax);
    set_y(c, ERT_DTYPE_F32, nd + 1, sax[0] == 0 ? ud + 1 : ud);
    g_map = identity_map(n);
    run_map(c, n);
}

static void case_transpose_slice_pad(void) {
    int64_t d[4], idx[6];
    int nd = rdims(1, 4, 5, d);
    int64_t n = nel(nd, d);
    /* Transpose by a random permutation */
    hcase hc, *c = begin(&hc, "Transpose");
    static int64_t perm[4];
    for (int i = 0; i < nd; i++) perm[i] = i;
    for (int i = nd - 1; i > 0; i--) {
        int j = ert_test_int(&rng, 0, i);
        int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int64_t td[4];
    for (int i = 0; i < nd; i++) td[i] = d[perm[i]];
    add_f32(c, nd, d, -1, 1);
    c->at[c->na++] = ERT_ATTR_IS("perm", perm, nd);
    set_y(c, ERT_DTYPE_F32, nd, td);
    g_map = malloc((size_t)n * sizeof *g_map);
    for (int64_t i = 0; i < n; i++) {
        int64_t o[4], in_idx[4], off = 0;
        unflat(i, nd, td, o);
        for (int k = 0; k < nd; k++) in_idx[perm[k]] = o[k];
        for (int k = 0; k < nd; k++) off = off * d[k] + in_idx[k];
        g_map[i] = off;
    }
    run_map(c, n);
    /* Slice: random start/end/step (negative steps too) on random axes */
    c = begin(&hc, "Slice");
    static int64_t st[4], en[4], axs[4], sp[4];
    int64_t sd[4];
    memcpy(sd, d, sizeof sd);
    int na = 0;
    int64_t start[4] = {0}, step[4] = {1, 1, 1, 1};
    for (int a = 0; a < nd; a++) {
        if (!ert_test_int(&rng, 0, 1)) continue;
        int64_t s0 = ert_test_int(&rng, 0, (int)d[a] - 1), s1 = ert_test_int(&rng, 0, (int)d[a] - 1);
        int64_t stp = ert_test_int(&rng, 1, 2) * (s1 < s0 ? -1 : 1);
        if (s1 == s0) s1 = s0 + 1, stp = 1;
        else if (stp > 0) s1++; /* end exclusive: at least one element */
        else s1 = s1 - 1;
        st[na] = s0, en[na] = s1 < 0 ? -(int64_t)d[a] - 1 : s1, axs[na] = a - (ert_test_int(&rng, 0, 1) ? nd : 0), sp[na] = stp;
        start[a] = s0, step[a] = stp;
        sd[a] = stp > 0 ? (s1 - s0 + stp - 1) / stp : (s0 - s1 + (-stp) - 1) / (-stp);
        na++;
    }
    if (na == 0) { /* at least one axis */
        st[0] = 0, en[0] = d[0], axs[0] = 0, sp[0] = 1, na = 1;
    }
    int64_t nna = na;
    add_f32(c, nd, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 1, &nna, st);
    add_const(c, ERT_DTYPE_I64, 1, &nna, en);
    add_const(c, ERT_DTYPE_I64, 1, &nna, axs);
    add_const(c, ERT_DTYPE_I64, 1, &nna, sp);
    int64_t ns = nel(nd, sd);
    set_y(c, ERT_DTYPE_F32, nd, sd);
    g_map = malloc((size_t)(ns ? ns : 1) * sizeof *g_map);
    for (int64_t i = 0; i < ns; i++) {
        int64_t off = 0;
        unflat(i, nd, sd, idx);
        for (int k = 0; k < nd; k++) off = off * d[k] + start[k] + idx[k] * step[k];
        g_map[i] = off;
    }
    run_map(c, ns);
    /* Pad: constant (with a value), edge or reflect; negative pads crop */
    static const char *modes[] = {"constant", "edge", "reflect"};
    for (int mode = 0; mode < 3; mode++) {
        c = begin(&hc, "Pad");
        snprintf(c->what, sizeof c->what, "Pad(%s)", modes[mode]);
        static int64_t pads[8];
        static float val;
        int64_t pd[4];
        for (int a = 0; a < nd; a++) {
            int lo_max = mode == 2 ? (int)d[a] - 1 : 2;
            pads[a] = ert_test_int(&rng, mode == 0 && d[a] > 1 ? -1 : 0, lo_max < 2 ? lo_max : 2);
            pads[nd + a] = ert_test_int(&rng, 0, lo_max < 2 ? lo_max : 2);
            pd[a] = d[a] + pads[a] + pads[nd + a];
        }
        val = (float)ert_test_uniform(&rng, -1, 1);
        int64_t np2 = 2 * nd;
        add_f32(c, nd, d, -1, 1);
        add_const(c, ERT_DTYPE_I64, 1, &np2, pads);
        if (mode == 0) add_const(c, ERT_DTYPE_F32, 0, NULL, &val);
        c->at[c->na++] = ERT_ATTR_S("mode", modes[mode]);
        int64_t np = nel(nd, pd);
        set_y(c, ERT_DTYPE_F32, nd, pd);
        g_fill = mode == 0 ? val : 0;
        g_map = malloc((size_t)(np ? np : 1) * sizeof *g_map);
        for (int64_t i = 0; i < np; i++) {
            int64_t off = 0;
            bool out = false;
            unflat(i, nd, pd, idx);
            for (int k = 0; k < nd; k++) {
                int64_t j = idx[k] - pads[k];
                if (j < 0 || j >= d[k]) {
                    if (mode == 0) out = true;
                    else if (mode == 1) j = j < 0 ? 0 : d[k] - 1;
                    else j = j < 0 ? -j : 2 * (d[k] - 1) - j;
                }
                off = off * d[k] + (j < 0 ? 0 : j >= d[k] ? d[k] - 1 : j);
            }
            g_map[i] = out ? -1 : off;
        }
        run_map(c, np);
    }
}

static void case_tile_expand(void) {
    int64_t d[4], idx[4];
    int nd = rdims(1, 4, 3, d);
    hcase hc, *c = begin(&hc, "Tile");
    static int64_t reps[4];
    int64_t td[4];
    for (int a = 0; a < nd; a++) reps[a] = ert_test_int(&rng, 1, 3), td[a] = d[a] * reps[a];
    int64_t nnd = nd;
    add_f32(c, nd, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 1, &nnd, reps);
    int64_t nt = nel(nd, td);
    set_y(c, ERT_DTYPE_F32, nd, td);
    g_map = malloc((size_t)nt * sizeof *g_map);
    for (int64_t i = 0; i < nt; i++) {
        int64_t off = 0;
        unflat(i, nd, td, idx);
        for (int k = 0; k < nd; k++) off = off * d[k] + idx[k] % d[k];
        g_map[i] = off;
    }
    run_map(c, nt);
    /* Expand: x's dims are 1 or the target's; the target may add leading dims */
    c = begin(&hc, "Expand");
    static int64_t shp[5];
    int extra = ert_test_int(&rng, 0, 1), ond = nd + extra;
    int64_t xd[4], od[5];
    for (int a = 0; a < ond; a++) od[a] = ert_test_int(&rng, 1, 4);
    od[ond - 1] = ert_test_int(&rng, 2, 4);
    for (int a = 0; a < nd; a++) xd[a] = ert_test_int(&rng, 0, 1) ? od[a + extra] : 1;
    xd[nd - 1] = od[ond - 1];
    for (int a = 0; a < ond; a++) shp[a] = ert_test_int(&rng, 0, 3) == 0 && a >= extra && xd[a - extra] == od[a] ? 1 : od[a];
    int64_t nsh = ond;
    add_f32(c, nd, xd, -1, 1);
    add_const(c, ERT_DTYPE_I64, 1, &nsh, shp);
    int64_t ne = nel(ond, od);
    set_y(c, ERT_DTYPE_F32, ond, od);
    g_map = malloc((size_t)ne * sizeof *g_map);
    for (int64_t i = 0; i < ne; i++) {
        int64_t oi[5], off = 0;
        unflat(i, ond, od, oi);
        for (int k = 0; k < nd; k++) off = off * xd[k] + (xd[k] == 1 ? 0 : oi[k + extra]);
        g_map[i] = off;
    }
    run_map(c, ne);
}

/* Concat of 2-3 operands along a random axis. iv: n, axis, dims (rank 3) of
 * each at iv[2 + 3k]. */
static void concat_ref(const ert_ref *c, double *y) {
    int n = (int)c->iv[0], ax = (int)c->iv[1];
    int64_t outer = 1, inner = 1, tot = 0;
    for (int i = 0; i < ax; i++) outer *= c->iv[2 + i];
    for (int i = ax + 1; i < 3; i++) inner *= c->iv[2 + i];
    for (int k = 0; k < n; k++) tot += c->iv[2 + 3 * k + ax];
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0, base = 0; k < n; base += (int)c->iv[2 + 3 * k + ax], k++) {
            int64_t dk = c->iv[2 + 3 * k + ax];
            for (int64_t j = 0; j < dk * inner; j++) y[(o * tot + base) * inner + j] = c->pd[k][o * dk * inner + j];
        }
}

static void case_concat_split_gather(void) {
    hcase hc, *c = begin(&hc, "Concat");
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 2, 4)};
    int n = ert_test_int(&rng, 2, 3), ax = ert_test_int(&rng, 0, 2);
    c->r.iv[0] = n, c->r.iv[1] = ax;
    int64_t od[3];
    memcpy(od, d, sizeof d);
    od[ax] = 0;
    for (int k = 0; k < n; k++) {
        int64_t dk[3] = {d[0], d[1], d[2]};
        dk[ax] = ert_test_int(&rng, 1, 3);
        od[ax] += dk[ax];
        memcpy(c->r.iv + 2 + 3 * k, dk, sizeof dk);
        add_f32(c, 3, dk, -1, 1);
    }
    c->at[c->na++] = ERT_ATTR_I("axis", ax - (ert_test_int(&rng, 0, 1) ? 3 : 0));
    set_y(c, ERT_DTYPE_F32, 3, od);
    c->ref = concat_ref;
    run(c);
    /* Split into 2-3 parts (sizes as an input); one output checked */
    c = begin(&hc, "Split");
    ax = ert_test_int(&rng, 0, 2);
    int parts = ert_test_int(&rng, 2, 3);
    static int64_t sizes[3];
    int64_t x3[3] = {d[0], d[1], d[2]};
    x3[ax] = 0;
    for (int k = 0; k < parts; k++) sizes[k] = ert_test_int(&rng, 1, 3), x3[ax] += sizes[k];
    int which = ert_test_int(&rng, 0, parts - 1);
    int64_t before = 0;
    for (int k = 0; k < which; k++) before += sizes[k];
    int64_t np = parts;
    add_f32(c, 3, x3, -1, 1);
    add_const(c, ERT_DTYPE_I64, 1, &np, sizes);
    c->at[c->na++] = ERT_ATTR_I("axis", ax);
    c->n_out = parts, c->y_out = which;
    snprintf(c->what, sizeof c->what, "Split(output %d of %d, axis %d)", which, parts, ax);
    int64_t yd[3] = {x3[0], x3[1], x3[2]}, idx[3];
    yd[ax] = sizes[which];
    int64_t ny = nel(3, yd);
    set_y(c, ERT_DTYPE_F32, 3, yd);
    g_map = malloc((size_t)ny * sizeof *g_map);
    for (int64_t i = 0; i < ny; i++) {
        unflat(i, 3, yd, idx);
        idx[ax] += before;
        g_map[i] = (idx[0] * x3[1] + idx[1]) * x3[2] + idx[2];
    }
    run_map(c, ny);
    /* Gather: repeated and negative indices along a random axis */
    c = begin(&hc, "Gather");
    ax = ert_test_int(&rng, 0, 2);
    bool scalar = ert_test_int(&rng, 0, 2) == 0; /* x[:, k]: the axis goes */
    int ni = scalar ? 1 : ert_test_int(&rng, 1, 5);
    memcpy(c->r.iv, d, sizeof d);
    c->r.iv[3] = ax, c->r.iv[4] = ni;
    for (int j = 0; j < ni; j++) c->r.iv[5 + j] = ert_test_int(&rng, -(int)d[ax], (int)d[ax] - 1);
    static int64_t gidx[8];
    memcpy(gidx, c->r.iv + 5, (size_t)ni * sizeof *gidx);
    int64_t nni = ni;
    add_f32(c, 3, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, scalar ? 0 : 1, &nni, gidx);
    c->at[c->na++] = ERT_ATTR_I("axis", ax);
    int64_t gd[3] = {d[0], d[1], d[2]};
    gd[ax] = ni;
    if (scalar) {
        snprintf(c->what, sizeof c->what, "Gather(scalar index, axis %d)", ax);
        for (int i = ax; i < 2; i++) gd[i] = gd[i + 1];
    }
    set_y(c, ERT_DTYPE_F32, scalar ? 2 : 3, gd);
    c->ref = gather_ref;
    run(c);
}

static void cumsum_ref(const ert_ref *c, double *y) { /* iv: d0 d1 d2, axis, exclusive, reverse */
    const int64_t *d = c->iv;
    int ax = (int)c->iv[3];
    int64_t outer, inner;
    ert_ref_axis(d, 3, ax, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            double s = 0;
            for (int64_t j0 = 0; j0 < d[ax]; j0++) {
                int64_t j = c->iv[5] ? d[ax] - 1 - j0 : j0, e = (o * d[ax] + j) * inner + in;
                if (c->iv[4]) y[e] = s, s += c->pd[0][e];
                else s += c->pd[0][e], y[e] = s;
            }
        }
}

static void range_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->iv[0]; i++) y[i] = c->fv[0] + (double)i * c->fv[1];
}

static void shape_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->iv[0]; i++) y[i] = (double)c->iv[1 + i];
}

static void zeros_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->iv[0]; i++) y[i] = 0;
}

static void not_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->pn[0]; i++) y[i] = c->pd[0][i] == 0;
}

static void cast_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->pn[0]; i++) y[i] = c->iv[0] ? c->pd[0][i] != 0 : c->pd[0][i];
}

static void case_misc(void) {
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 5), ert_test_int(&rng, 2, 4)};
    hcase hc, *c = begin(&hc, "CumSum");
    int ax = ert_test_int(&rng, 0, 2);
    static int64_t axis;
    axis = ax - (ert_test_int(&rng, 0, 1) ? 3 : 0);
    memcpy(c->r.iv, d, sizeof d);
    c->r.iv[3] = ax, c->r.iv[4] = ert_test_int(&rng, 0, 1), c->r.iv[5] = ert_test_int(&rng, 0, 1);
    add_f32(c, 3, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 0, NULL, &axis);
    c->at[c->na++] = ERT_ATTR_I("exclusive", c->r.iv[4]), c->at[c->na++] = ERT_ATTR_I("reverse", c->r.iv[5]);
    set_y(c, ERT_DTYPE_F32, 3, d);
    c->ref = cumsum_ref;
    run(c);
    /* Not: bool in, bool out */
    c = begin(&hc, "Not");
    add_f32(c, 3, d, 0, 1)->kind = S_BOOL;
    set_y(c, ERT_DTYPE_BOOL, 3, d);
    c->ref = not_ref;
    run(c);
    /* Cast f32 -> f32 (gradient flows), -> i64 of whole numbers, -> bool */
    static const int64_t to[3] = {ERT_DTYPE_F32, ERT_DTYPE_I64, ERT_DTYPE_BOOL};
    static const int onnx_to[3] = {1, 7, 9};
    for (int k = 0; k < 3; k++) {
        c = begin(&hc, "Cast");
        slot *x = add_f32(c, 3, d, -3, 3);
        x->grid = k > 0; /* whole numbers, zeros among them */
        c->at[c->na++] = ERT_ATTR_I("to", onnx_to[k]);
        c->r.iv[0] = k == 2;
        c->no_grad = k > 0;
        set_y(c, (ert_dtype)to[k], 3, d);
        c->ref = cast_ref;
        run(c);
    }
    /* Shape and Size of a graph input (folded at create: shapes are static) */
    c = begin(&hc, "Shape");
    add_f32(c, 3, d, -1, 1);
    c->r.iv[0] = 3;
    memcpy(c->r.iv + 1, d, sizeof d);
    int64_t three = 3;
    set_y(c, ERT_DTYPE_I64, 1, &three);
    c->ref = shape_ref;
    run(c);
    c = begin(&hc, "Size");
    add_f32(c, 3, d, -1, 1);
    c->r.iv[0] = 1, c->r.iv[1] = nel(3, d);
    set_y(c, ERT_DTYPE_I64, 0, NULL);
    c->ref = shape_ref;
    run(c);
    /* ConstantOfShape (no value attribute: f32 zeros); Range of constants */
    c = begin(&hc, "ConstantOfShape");
    add_const(c, ERT_DTYPE_I64, 1, &three, d);
    c->r.iv[0] = nel(3, d);
    set_y(c, ERT_DTYPE_F32, 3, d);
    c->ref = zeros_ref;
    run(c);
    c = begin(&hc, "Range");
    static float rs[3];
    rs[0] = (float)ert_test_int(&rng, -5, 5), rs[2] = ert_test_int(&rng, 0, 1) ? 0.5f : -1.5f;
    int64_t cnt = ert_test_int(&rng, 1, 9);
    rs[1] = rs[0] + rs[2] * ((float)cnt - 0.5f);
    for (int k = 0; k < 3; k++) add_const(c, ERT_DTYPE_F32, 0, NULL, &rs[k]);
    c->r.iv[0] = cnt, c->r.fv[0] = rs[0], c->r.fv[1] = rs[2];
    set_y(c, ERT_DTYPE_F32, 1, &cnt);
    c->ref = range_ref;
    run(c);
}

/* Resize of (N, C, H, W) by whole factors (sizes given): nearest (floor or
 * round_prefer_floor; whole factors leave no source coordinate on a tie)
 * or linear. iv: N C H W OH OW, mode (0 nearest, 1 linear), coordinate
 * transform (0 half_pixel, 1 asymmetric, 2 align_corners), nearest floor. */
static double resize_src(const ert_ref *c, int64_t o, int64_t in, int64_t out) {
    switch (c->iv[7]) {
    case 0: return ((double)o + 0.5) * (double)in / (double)out - 0.5;
    case 1: return (double)o * (double)in / (double)out;
    default: return out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0;
    }
}

static void resize_ref(const ert_ref *c, double *y) {
    const int64_t *v = c->iv;
    int64_t H = v[2], W = v[3], OH = v[4], OW = v[5];
    for (int64_t p = 0; p < v[0] * v[1]; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double sh = resize_src(c, oh, H, OH), sw = resize_src(c, ow, W, OW), r;
                const double *x = c->pd[0] + p * H * W;
                if (v[6] == 0) {
                    int64_t ih = (int64_t)(v[8] ? floor(sh) : ceil(sh - 0.5)), iw = (int64_t)(v[8] ? floor(sw) : ceil(sw - 0.5));
                    ih = ih < 0 ? 0 : ih >= H ? H - 1 : ih, iw = iw < 0 ? 0 : iw >= W ? W - 1 : iw;
                    r = x[ih * W + iw];
                } else {
                    sh = fmin(fmax(sh, 0), (double)(H - 1)), sw = fmin(fmax(sw, 0), (double)(W - 1));
                    int64_t h0 = (int64_t)floor(sh), w0 = (int64_t)floor(sw);
                    int64_t h1 = h0 + 1 < H ? h0 + 1 : H - 1, w1 = w0 + 1 < W ? w0 + 1 : W - 1;
                    double fh = sh - (double)h0, fw = sw - (double)w0;
                    r = (1 - fh) * ((1 - fw) * x[h0 * W + w0] + fw * x[h0 * W + w1]) +
                        fh * ((1 - fw) * x[h1 * W + w0] + fw * x[h1 * W + w1]);
                }
                y[(p * OH + oh) * OW + ow] = r;
            }
}

static void case_resize(void) {
    static const char *modes[] = {"nearest", "linear"}, *ctm[] = {"half_pixel", "asymmetric", "align_corners"};
    for (int mode = 0; mode < 2; mode++) {
        hcase hc, *c = begin(&hc, "Resize");
        int64_t *v = c->r.iv;
        v[0] = ert_test_int(&rng, 1, 2), v[1] = ert_test_int(&rng, 1, 3), v[2] = ert_test_int(&rng, 1, 5), v[3] = ert_test_int(&rng, 2, 5);
        v[4] = v[2] * ert_test_int(&rng, 1, 3), v[5] = v[3] * ert_test_int(&rng, 1, 3);
        v[6] = mode, v[7] = ert_test_int(&rng, 0, mode ? 2 : 1), v[8] = ert_test_int(&rng, 0, 1);
        snprintf(c->what, sizeof c->what, "Resize(%s, %s%s)", modes[mode], ctm[v[7]], mode == 0 && v[8] ? ", floor" : "");
        static int64_t sizes[4];
        int64_t xd[4] = {v[0], v[1], v[2], v[3]}, four = 4;
        sizes[0] = v[0], sizes[1] = v[1], sizes[2] = v[4], sizes[3] = v[5];
        add_f32(c, 4, xd, -1, 1);
        c->s[c->ns++].kind = S_OMIT; /* roi */
        c->s[c->ns++].kind = S_OMIT; /* scales */
        add_const(c, ERT_DTYPE_I64, 1, &four, sizes);
        c->at[c->na++] = ERT_ATTR_S("mode", modes[mode]);
        c->at[c->na++] = ERT_ATTR_S("coordinate_transformation_mode", ctm[v[7]]);
        if (mode == 0) c->at[c->na++] = ERT_ATTR_S("nearest_mode", v[8] ? "floor" : "round_prefer_floor");
        set_y(c, ERT_DTYPE_F32, 4, sizes);
        c->ref = resize_ref;
        run(c);
    }
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
    const char *name = cuda ? "op_harness_cuda" : "op_harness";
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
    }
    int reps = getenv("ERT_HEAVY") ? 10 : 3;
    for (int r = 0; r < reps; r++) {
        case_unary();
        case_binary();
        case_reduce();
        case_softmax();
        case_norm();
        case_conv();
        case_gemm();
        case_pool();
        case_reshape_family();
        case_transpose_slice_pad();
        case_tile_expand();
        case_concat_split_gather();
        case_misc();
        case_resize();
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

/* One model, two pipelines on the one working graph (runtime/graph.*): an
 * inference session and a trainer are built from the same model (random
 * weights, CPU, same batch), and their graphs are compared tensor by tensor
 * (a model tensor has the same id in both: ert_graph_from_model):
 *   - every model tensor the session's graph defines is defined in the
 *     trainer's with the same dtype and dims, among them the output of a
 *     Reshape whose shape only constant folding makes known
 *     (Shape -> Slice -> Concat), checked against N x C*H*W;
 *   - a model tensor the session folded into a constant is folded in the
 *     trainer too, byte for byte, unless it depends on a trainable weight:
 *     then it is an activation the trainer computes each step (and its
 *     gradient flows), which is the difference that must exist;
 *   - each trainable weight is a constant of the session (CONST: the model's
 *     bytes) and a parameter of the trainer (PARAM, the same bytes at
 *     create) with a gradient of its size; the session holds no parameter,
 *     gradient or optimizer state at all.
 * Models: Conv+bias -> BatchNormalization -> Relu -> MaxPool -> Reshape
 * (folded shape) -> Gemm; and Gemm(x, Mul(wa, s)) -> Relu -> Gemm, trained
 * in full (Mul live in the trainer) and head only (Mul folded in both). */
#include "session_internal.h"
#include "testutil.h"
#include "trainer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
static ert_test_rng rng;
static int n_w;

static int32_t weight(ert_builder *b, int nd, const int64_t *d, float lo, float hi) {
    char nm[32];
    snprintf(nm, sizeof nm, "w%d", n_w++);
    return ert_test_weight(b, &rng, nm, nd, d, lo, hi);
}

static int32_t weight_i64(ert_builder *b, int64_t n, const int64_t *v) {
    int32_t id = -1;
    char nm[32];
    snprintf(nm, sizeof nm, "i%d", n_w++);
    CHECK_OK(ert_builder_weight(b, nm, ERT_DTYPE_I64, 1, &n, v, &id), ctx);
    return id;
}

/* x (N,C,H,W) -> Conv 3x3 pad 1 (+bias) -> BN -> Relu -> MaxPool 2 ->
 * Reshape to (N, -1) with the shape Concat(Slice(Shape(.), 0, 1), [-1]) ->
 * Gemm to `classes`; *flat gets the Reshape's output id. */
static ert_model *cnn(int64_t C, int64_t H, int64_t W, int64_t M, int64_t classes, int32_t *flat) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, C, H, W}, wd[4] = {M, C, 3, 3}, md[1] = {M};
    int32_t x, c, z, r, p, shp, s0, cat, f, y;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    float ws = 1.0f / sqrtf((float)(C * 9));
    CHECK_OK(ert_builder_conv2d(b, x, weight(b, 4, wd, -ws, ws), weight(b, 1, md, -0.1f, 0.1f), 1, 1, 1, 1, &c), ctx);
    int32_t bn_in[5] = {c, weight(b, 1, md, 0.8f, 1.2f), weight(b, 1, md, -0.1f, 0.1f), weight(b, 1, md, -0.1f, 0.1f),
                        weight(b, 1, md, 0.8f, 1.2f)};
    CHECK_OK(ert_builder_node(b, "BatchNormalization", "bn", bn_in, 5, NULL, 0, &z, 1), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", z, &r), ctx);
    CHECK_OK(ert_builder_maxpool2d(b, r, 2, 2, 0, &p), ctx);
    CHECK_OK(ert_builder_node(b, "Shape", "shape", &p, 1, NULL, 0, &shp, 1), ctx);
    static const int64_t zero = 0, one = 1, minus1 = -1;
    int32_t sl_in[3] = {shp, weight_i64(b, 1, &zero), weight_i64(b, 1, &one)};
    CHECK_OK(ert_builder_node(b, "Slice", "batch", sl_in, 3, NULL, 0, &s0, 1), ctx);
    int32_t cat_in[2] = {s0, weight_i64(b, 1, &minus1)};
    ert_attr ax = ERT_ATTR_I("axis", 0);
    CHECK_OK(ert_builder_node(b, "Concat", "target", cat_in, 2, &ax, 1, &cat, 1), ctx);
    int32_t rs_in[2] = {p, cat};
    CHECK_OK(ert_builder_node(b, "Reshape", "flat", rs_in, 2, NULL, 0, &f, 1), ctx);
    int64_t k = M * (H / 2) * (W / 2), gd[2] = {classes, k}, gb[1] = {classes};
    float gs = 1.0f / sqrtf((float)k);
    CHECK_OK(ert_builder_linear(b, f, weight(b, 2, gd, -gs, gs), weight(b, 1, gb, -0.1f, 0.1f), &y), ctx);
    *flat = f;
    return ert_test_model(b, y);
}

/* x (N,K) -> Gemm(x, Mul(wa, s)) -> Relu -> Gemm to `classes`; *prod gets Mul's output id. */
static ert_model *mlp(int64_t K, int64_t Hd, int64_t classes, int32_t *prod) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[2] = {-1, K}, wd[2] = {Hd, K}, hd[1] = {Hd}, od[2] = {classes, Hd}, ob[1] = {classes};
    int32_t x, w, h, r, y;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, xd, &x), ctx);
    float s = 1.0f / sqrtf((float)K);
    CHECK_OK(ert_builder_binary(b, "Mul", weight(b, 2, wd, -s, s), weight(b, 2, wd, 0.5f, 1.5f), &w), ctx);
    CHECK_OK(ert_builder_linear(b, x, w, weight(b, 1, hd, -0.1f, 0.1f), &h), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", h, &r), ctx);
    CHECK_OK(ert_builder_linear(b, r, weight(b, 2, od, -0.3f, 0.3f), weight(b, 1, ob, -0.1f, 0.1f), &y), ctx);
    *prod = w;
    return ert_test_model(b, y);
}

static bool is_folded(const ert_gtensor *x) { return x->mem == ERT_MEM_OWNED; }

/* The comparison above, on one pair; *n_folded_both / *n_folded_session_only
 * count the folded tensors the two share and the ones only the session folds. */
static void compare(const char *what, const ert_model *m, ert_session *s, ert_trainer *t, int *n_folded_both,
                    int *n_folded_session_only) {
    const ert_graph *gs = &s->g, *gt = &t->g;
    *n_folded_both = *n_folded_session_only = 0;
    CHECK(gs->nt >= m->n_tensors && gt->nt >= m->n_tensors, "%s: graphs hold %d and %d tensors, the model %d", what,
          gs->nt, gt->nt, m->n_tensors);
    if (gs->nt < m->n_tensors || gt->nt < m->n_tensors) return;
    int n_shapes = 0, n_params = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const ert_gtensor *a = &gs->t[i], *b = &gt->t[i];
        const char *nm = m->tensors[i].name ? m->tensors[i].name : "?";
        CHECK(a->model_id == i && b->model_id == i, "%s: tensor %d ('%s'): model ids %d / %d", what, i, nm,
              a->model_id, b->model_id);
        if (!a->defined) continue;
        CHECK(b->defined, "%s: '%s' is defined in the session, not in the trainer", what, nm);
        if (!b->defined) continue;
        n_shapes++;
        bool same = a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes;
        for (int d = 0; same && d < a->ndim; d++) same = a->dims[d] == b->dims[d];
        CHECK(same, "%s: '%s': session %s rank %d (%lld %lld ...), trainer %s rank %d (%lld %lld ...)", what, nm,
              ert_dtype_name(a->dtype), a->ndim, (long long)a->dims[0], (long long)(a->ndim > 1 ? a->dims[1] : 0),
              ert_dtype_name(b->dtype), b->ndim, (long long)b->dims[0], (long long)(b->ndim > 1 ? b->dims[1] : 0));
        if (!same) continue;
        /* what the session folded */
        if (is_folded(a)) {
            if (is_folded(b)) {
                const void *pa = a->data ? a->data : a->owned, *pb = b->data ? b->data : b->owned;
                if (pa && pb) {
                    CHECK(memcmp(pa, pb, a->nbytes) == 0, "%s: '%s' folded to different bytes", what, nm);
                    (*n_folded_both)++;
                }
            } else {
                /* only where a trainable weight feeds it: then the trainer computes it each step */
                CHECK(b->need_grad && b->mem == ERT_MEM_ACT, "%s: '%s' folded in the session, in the trainer mem %d "
                      "need_grad %d (should be folded, or an activation a parameter feeds)", what, nm, (int)b->mem,
                      (int)b->need_grad);
                (*n_folded_session_only)++;
            }
        }
        CHECK(!(is_folded(b) && !is_folded(a) && a->mem != ERT_MEM_CONST && a->n_uses > 0),
              "%s: '%s' folded in the trainer but computed by the session", what, nm);
        /* trainable weights */
        if (b->trainable) {
            n_params++;
            CHECK(m->tensors[i].role == ERT_ROLE_WEIGHT && a->mem == ERT_MEM_CONST && b->mem == ERT_MEM_PARAM,
                  "%s: trainable '%s': session mem %d, trainer mem %d", what, nm, (int)a->mem, (int)b->mem);
            CHECK(a->cdata && b->data && memcmp(a->cdata, b->data, a->nbytes) == 0,
                  "%s: trainable '%s' does not start from the model's bytes", what, nm);
            float *val = NULL;
            const float *grad = NULL;
            int64_t n = 0;
            CHECK_OK(ert_trainer_param(t, nm, &val, &grad, &n), ctx);
            CHECK(grad && n * (int64_t)sizeof(float) == (int64_t)b->nbytes, "%s: '%s' has no gradient of its size", what, nm);
        }
    }
    CHECK(n_shapes > 0 && n_params == t->n_params, "%s: %d shapes compared, %d trainable model weights of %d params",
          what, n_shapes, n_params, t->n_params);
    for (int i = 0; i < gs->nt; i++) {
        ert_mem k = gs->t[i].mem;
        CHECK(k != ERT_MEM_PARAM && k != ERT_MEM_GRAD && k != ERT_MEM_STATE && !gs->t[i].trainable,
              "%s: the session holds '%s' as mem %d", what, gs->t[i].name ? gs->t[i].name : "?", (int)k);
    }
    int n_grad = 0;
    for (int i = 0; i < gt->nt; i++) n_grad += gt->t[i].mem == ERT_MEM_GRAD;
    CHECK(n_grad >= t->n_params, "%s: %d gradient tensors for %d parameters", what, n_grad, t->n_params);
}

static void make_pair(const char *what, const ert_model *m, int batch, ert_trainable tr, ert_session **s,
                      ert_trainer **t) {
    ert_session_options so = {.device = ERT_DEVICE_CPU, .batch = batch};
    ert_trainer_options to = {.session = so, .trainable = tr, .last_n = 1};
    *s = NULL, *t = NULL;
    ert_status st = ert_session_create(m, &so, s);
    CHECK(st == ERT_OK, "%s: session: %s", what, ert_last_error(ctx));
    st = ert_trainer_create(m, &to, t);
    CHECK(st == ERT_OK, "%s: trainer: %s", what, ert_last_error(ctx));
}

static void test_cnn(void) {
    int64_t C = ert_test_int(&rng, 1, 4), H = 2 * ert_test_int(&rng, 2, 6) + ert_test_int(&rng, 0, 1),
            W = 2 * ert_test_int(&rng, 2, 6) + 1, M = ert_test_int(&rng, 2, 7), classes = ert_test_int(&rng, 2, 5);
    int batch = ert_test_int(&rng, 1, 4);
    int32_t flat;
    ert_model *m = cnn(C, H, W, M, classes, &flat);
    if (!m) return;
    char what[128];
    snprintf(what, sizeof what, "cnn N%d C%lld %lldx%lld M%lld classes %lld", batch, (long long)C, (long long)H,
             (long long)W, (long long)M, (long long)classes);
    ert_session *s;
    ert_trainer *t;
    make_pair(what, m, batch, ERT_TRAIN_ALL, &s, &t);
    if (s && t) {
        int both, only;
        compare(what, m, s, t, &both, &only);
        /* the Reshape's shape came from folding: (N, M * H/2 * W/2) in both */
        const int64_t want[2] = {batch, M * (H / 2) * (W / 2)};
        const ert_gtensor *fs = &s->g.t[flat], *ft = &t->g.t[flat];
        CHECK(fs->defined && fs->ndim == 2 && fs->dims[0] == want[0] && fs->dims[1] == want[1],
              "%s: session's Reshape output %lld x %lld, want %lld x %lld", what, (long long)fs->dims[0],
              (long long)fs->dims[1], (long long)want[0], (long long)want[1]);
        CHECK(ft->defined && ft->ndim == 2 && ft->dims[0] == want[0] && ft->dims[1] == want[1],
              "%s: trainer's Reshape output %lld x %lld, want %lld x %lld", what, (long long)ft->dims[0],
              (long long)ft->dims[1], (long long)want[0], (long long)want[1]);
        /* the shape chain folded the same in both; nothing else is constant */
        CHECK(both >= 1 && only == 0, "%s: %d tensors folded in both, %d only in the session", what, both, only);
        /* the trainer trains the conv, BN scale/bias and Gemm; the session folded BN into the conv */
        CHECK(t->n_params == 6, "%s: %d trainable parameters, want 6 (conv w, b; bn scale, bias; gemm w, b)", what,
              t->n_params);
        bool bn_live = false;
        for (int k = 0; k < t->fwd_end; k++) bn_live = bn_live || (!t->g.n[k].dead && t->g.n[k].op == ERT_OP_BATCHNORM_TRAIN);
        CHECK(bn_live, "%s: the trainer's forward lost its BatchNormalization (batch statistics)", what);
        for (int k = 0; k < s->n_sched; k++)
            CHECK(s->g.n[s->sched[k]].op != ERT_OP_BATCHNORM, "%s: the session did not fold BatchNormalization", what);
    }
    ert_session_free(s);
    ert_trainer_free(t);
    ert_model_free(m);
}

static void test_mlp(void) {
    int64_t K = ert_test_int(&rng, 2, 19), Hd = ert_test_int(&rng, 2, 13), classes = ert_test_int(&rng, 2, 6);
    int batch = ert_test_int(&rng, 1, 5);
    int32_t prod;
    ert_model *m = mlp(K, Hd, classes, &prod);
    if (!m) return;
    for (int head = 0; head < 2; head++) {
        char what[128];
        snprintf(what, sizeof what, "mlp %s N%d K%lld H%lld classes %lld", head ? "head only" : "full", batch,
                 (long long)K, (long long)Hd, (long long)classes);
        ert_session *s;
        ert_trainer *t;
        make_pair(what, m, batch, head ? ERT_TRAIN_LAST_N : ERT_TRAIN_ALL, &s, &t);
        if (s && t) {
            int both, only;
            compare(what, m, s, t, &both, &only);
            CHECK(is_folded(&s->g.t[prod]), "%s: the session did not fold Mul(wa, s)", what);
            if (head) { /* wa and s frozen: Mul folded in the trainer too, to the same bytes */
                CHECK(is_folded(&t->g.t[prod]) && both == 1 && only == 0 && t->n_params == 2,
                      "%s: Mul folded %d, %d folded in both, %d only in the session, %d params", what,
                      is_folded(&t->g.t[prod]), both, only, t->n_params);
            } else { /* wa and s train: the trainer keeps the Mul and differentiates through it */
                CHECK(!is_folded(&t->g.t[prod]) && t->g.t[prod].need_grad && only == 1 && t->n_params == 5,
                      "%s: Mul folded %d need_grad %d, %d only in the session, %d params", what,
                      is_folded(&t->g.t[prod]), t->g.t[prod].need_grad, only, t->n_params);
            }
        }
        ert_session_free(s);
        ert_trainer_free(t);
    }
    ert_model_free(m);
}

int main(void) {
    ert_test_rng_init(&rng, "graph_pair");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    for (int it = 0; it < 6; it++) {
        test_cnn();
        test_mlp();
    }
    ert_context_free(ctx);
    return ert_test_finish("graph_pair");
}

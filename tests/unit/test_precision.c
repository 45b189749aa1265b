/* The reduced-precision pass (runtime/passes/precision.c), white-box: the
 * pass runs only in CUDA f16/bf16 sessions, so here it is applied to the
 * graph of a CPU session built up to the passes it follows
 * (ert_session_build_passed) and the graph is inspected, never run. The CUDA runs of the same graphs are in
 * tests/cuda (zoo_cuda: PaddleOCR's fp16 detector on a photograph).
 * 1. A mixed-precision file as fp16 exporters write it (f16 conv, Cast to
 *    f32, a BatchNormalization whose running variance reaches 2e7, Cast
 *    back, Relu): the BatchNormalization and its constants stay f32 and
 *    finite, the file's Casts become real conversions, no Cast is added and
 *    none converts a dtype to itself. Before the fix every activation was f16
 *    and the variance became inf (an all-zero map on the GPU).
 * 2. An f32 file whose Mul reads a constant beyond f16's range (random values
 *    up to 1e6): that Mul computes in f32 with its constant f32, Casts are
 *    inserted at both edges of it, everything else is f16.
 * 3. An f32 file with nothing out of range: every activation f16, one Cast
 *    in front and one at the end, as before.
 * In every case the node list stays topologically ordered and every Cast's
 * `to` is its output's dtype. Fresh random shapes and values per run. */
#include "session_internal.h" /* white-box: the graph */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
static ert_test_rng rng;

static ert_session *cpu_session(ert_model *m) {
    ert_session_options so = {0};
    ert_session *s = NULL;
    CHECK_OK(ert_session_build_passed(m, &so, &s), ctx);
    return s;
}

/* The live node named `name` (its first), or NULL. */
static const ert_gnode *node_named(const ert_graph *g, const char *name) {
    for (int i = 0; i < g->nn; i++)
        if (!g->n[i].dead && g->n[i].name && !strcmp(g->n[i].name, name)) return &g->n[i];
    return NULL;
}

static int n_live(const ert_graph *g, ert_op op) {
    int n = 0;
    for (int i = 0; i < g->nn; i++) n += !g->n[i].dead && g->n[i].op == op;
    return n;
}

/* Every live node's inputs are constants, graph inputs or written by an
 * earlier live node; every Cast converts to its output's dtype and not to
 * its input's. */
static void check_graph(const ert_graph *g, const char *what) {
    bool *made = calloc((size_t)g->nt, 1);
    for (int i = 0; i < g->n_inputs; i++) made[g->inputs[i]] = true;
    for (int i = 0; i < g->nn; i++) {
        const ert_gnode *n = &g->n[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            int32_t t = n->in[k];
            CHECK(t < 0 || ert_graph_is_const(g, t) || made[t], "%s: node '%s' reads '%s' before it is written", what,
                  n->name, g->t[t].name);
        }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) made[n->out[k]] = true;
        if (n->op == ERT_OP_CAST) {
            CHECK(n->params.cast.to == g->t[n->out[0]].dtype, "%s: Cast '%s' converts to %s into a %s tensor", what,
                  n->name, ert_dtype_name(n->params.cast.to), ert_dtype_name(g->t[n->out[0]].dtype));
            CHECK(g->t[n->in[0]].dtype != g->t[n->out[0]].dtype, "%s: Cast '%s' converts %s to itself", what, n->name,
                  ert_dtype_name(g->t[n->in[0]].dtype));
        }
    }
    free(made);
}

static uint16_t *half_weight(ert_builder *b, const char *name, int nd, const int64_t *d, int32_t *id) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    uint16_t *h = malloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++) h[i] = ert_f32_to_f16((float)ert_test_uniform(&rng, -1, 1));
    CHECK_OK(ert_builder_weight(b, name, ERT_DTYPE_F16, nd, d, h, id), ctx);
    return h;
}

/* 1. The mixed-precision file. (gcc 12 for aarch64 crashes vectorising its
 * max loops: internal compiler error in vect_transform_reduction, as in
 * test_finetune.c.) */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
static void test_mixed(void) {
    int64_t C = ert_test_int(&rng, 1, 5), K = ert_test_int(&rng, 2, 9), H = ert_test_int(&rng, 3, 12);
    ert_builder *b = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {1, C, H, H}, wd[4] = {K, C, 3, 3}, kd[1] = {K};
    int32_t x, w, bias, xh, c, c32, bn, bnh, r, y, sc, sh, mu, var;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    uint16_t *wv = half_weight(b, "w", 4, wd, &w), *bv = half_weight(b, "b", 1, kd, &bias);
    float *p = malloc((size_t)K * 4 * sizeof *p);
    double vmax = 0;
    for (int64_t k = 0; k < K; k++) {
        p[k] = (float)ert_test_uniform(&rng, 0.5, 1.5);
        p[K + k] = (float)ert_test_uniform(&rng, -0.5, 0.5);
        p[2 * K + k] = (float)ert_test_uniform(&rng, -400, 20);
        p[3 * K + k] = (float)ert_test_uniform(&rng, 6e5, 2.2e7); /* beyond f16 */
        vmax = fmax(vmax, p[3 * K + k]);
    }
    CHECK_OK(ert_builder_weight(b, "bn.scale", ERT_DTYPE_F32, 1, kd, p, &sc), ctx);
    CHECK_OK(ert_builder_weight(b, "bn.B", ERT_DTYPE_F32, 1, kd, p + K, &sh), ctx);
    CHECK_OK(ert_builder_weight(b, "bn.mean", ERT_DTYPE_F32, 1, kd, p + 2 * K, &mu), ctx);
    CHECK_OK(ert_builder_weight(b, "bn.var", ERT_DTYPE_F32, 1, kd, p + 3 * K, &var), ctx);
    ert_attr to16 = ERT_ATTR_I("to", 10), to32 = ERT_ATTR_I("to", 1);
    int64_t pads[4] = {1, 1, 1, 1};
    ert_attr ca[1] = {ERT_ATTR_IS("pads", pads, 4)};
    int32_t cin[3] = {0, w, bias};
    CHECK_OK(ert_builder_node(b, "Cast", "in_cast", &x, 1, &to16, 1, &xh, 1), ctx);
    cin[0] = xh;
    CHECK_OK(ert_builder_node(b, "Conv", "conv", cin, 3, ca, 1, &c, 1), ctx);
    CHECK_OK(ert_builder_node(b, "Cast", "bn_in_cast", &c, 1, &to32, 1, &c32, 1), ctx);
    int32_t bin[5] = {c32, sc, sh, mu, var};
    CHECK_OK(ert_builder_node(b, "BatchNormalization", "bn", bin, 5, NULL, 0, &bn, 1), ctx);
    CHECK_OK(ert_builder_node(b, "Cast", "bn_out_cast", &bn, 1, &to16, 1, &bnh, 1), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", bnh, &r), ctx);
    CHECK_OK(ert_builder_node(b, "Cast", "out_cast", &r, 1, &to32, 1, &y, 1), ctx);
    ert_model *m = ert_test_model(b, y);
    free(wv), free(bv), free(p);
    ert_session *s = m ? cpu_session(m) : NULL;
    if (!s) {
        ert_model_free(m);
        return;
    }
    ert_graph *g = &s->g;
    int n_cast0 = n_live(g, ERT_OP_CAST);
    CHECK_OK(ert_pass_lower_precision(g, ERT_DTYPE_F16), ctx);
    check_graph(g, "mixed file");
    CHECK(n_live(g, ERT_OP_CAST) == n_cast0, "mixed file: %d Casts before the pass, %d after", n_cast0,
          n_live(g, ERT_OP_CAST));
    const ert_gnode *nb = node_named(g, "bn"), *nc = node_named(g, "conv");
    CHECK(nb && nc, "mixed file: the conv or the BatchNormalization is gone");
    if (nb && nc) {
        CHECK(g->t[nb->in[0]].dtype == ERT_DTYPE_F32 && g->t[nb->out[0]].dtype == ERT_DTYPE_F32,
              "mixed file: the BatchNormalization the file keeps in f32 runs %s -> %s",
              ert_dtype_name(g->t[nb->in[0]].dtype), ert_dtype_name(g->t[nb->out[0]].dtype));
        for (int k = 1; k < 5; k++) {
            const ert_gtensor *t = &g->t[nb->in[k]];
            CHECK(t->dtype == ERT_DTYPE_F32, "mixed file: BatchNormalization constant %d is %s", k, ert_dtype_name(t->dtype));
            if (t->dtype == ERT_DTYPE_F32) {
                double m2 = 0;
                for (int64_t j = 0; j < K; j++) m2 = fmax(m2, ((const float *)t->cdata)[j]);
                if (k == 4) CHECK(m2 == (double)(float)vmax, "mixed file: the variance's largest value is %g, not %g", m2, vmax);
            }
        }
        CHECK(g->t[nc->out[0]].dtype == ERT_DTYPE_F16 && g->t[nc->in[1]].dtype == ERT_DTYPE_F16,
              "mixed file: the f16 conv writes %s with %s weights", ert_dtype_name(g->t[nc->out[0]].dtype),
              ert_dtype_name(g->t[nc->in[1]].dtype));
    }
    ert_session_free(s);
    ert_model_free(m);
}

/* 2 (big = true) and 3: an f32 file x -> Relu -> Mul(c) -> Mul(d) -> Relu -> y. */
static void test_f32(bool big) {
    int64_t n = ert_test_int(&rng, 2, 40);
    ert_builder *b = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t d[2] = {2, n};
    int32_t x, cw, dw, r1, m1, m2, y;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, d, &x), ctx);
    float *cv = malloc((size_t)n * sizeof *cv), *dv = malloc((size_t)n * sizeof *dv);
    for (int64_t i = 0; i < n; i++) {
        cv[i] = (float)ert_test_uniform(&rng, 1, big ? 1e6 : 100);
        dv[i] = 1.0f / cv[i];
    }
    cv[ert_test_int(&rng, 0, (int)n - 1)] = big ? 9.5e5f : 99.0f; /* at least one value past 65504 when big */
    int64_t cd[1] = {n};
    CHECK_OK(ert_builder_weight(b, "c", ERT_DTYPE_F32, 1, cd, cv, &cw), ctx);
    CHECK_OK(ert_builder_weight(b, "d", ERT_DTYPE_F32, 1, cd, dv, &dw), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", x, &r1), ctx);
    int32_t ins[2] = {r1, cw};
    CHECK_OK(ert_builder_node(b, "Mul", "mul_c", ins, 2, NULL, 0, &m1, 1), ctx);
    ins[0] = m1, ins[1] = dw;
    CHECK_OK(ert_builder_node(b, "Mul", "mul_d", ins, 2, NULL, 0, &m2, 1), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", m2, &y), ctx);
    ert_model *m = ert_test_model(b, y);
    free(cv), free(dv);
    ert_session_options so = {.flags = ERT_SESSION_NO_FUSE}; /* keep both Muls */
    ert_session *s = NULL;
    if (m) CHECK_OK(ert_session_build_passed(m, &so, &s), ctx);
    if (!s) {
        ert_model_free(m);
        return;
    }
    ert_graph *g = &s->g;
    const char *what = big ? "f32 file, constant beyond f16" : "f32 file";
    CHECK_OK(ert_pass_lower_precision(g, ERT_DTYPE_F16), ctx);
    check_graph(g, what);
    const ert_gnode *mc = node_named(g, "mul_c"), *md = node_named(g, "mul_d");
    CHECK(mc && md, "%s: a Mul is gone", what);
    if (mc && md) {
        ert_dtype want = big ? ERT_DTYPE_F32 : ERT_DTYPE_F16;
        CHECK(g->t[mc->out[0]].dtype == want && g->t[mc->in[0]].dtype == want && g->t[mc->in[1]].dtype == want,
              "%s: Mul(c) runs %s x %s -> %s, expected %s", what, ert_dtype_name(g->t[mc->in[0]].dtype),
              ert_dtype_name(g->t[mc->in[1]].dtype), ert_dtype_name(g->t[mc->out[0]].dtype), ert_dtype_name(want));
        CHECK(g->t[md->out[0]].dtype == ERT_DTYPE_F16 && g->t[md->in[0]].dtype == ERT_DTYPE_F16,
              "%s: Mul(d) runs %s -> %s", what, ert_dtype_name(g->t[md->in[0]].dtype),
              ert_dtype_name(g->t[md->out[0]].dtype));
    }
    /* 2 Casts at the edges of the graph; 2 more around the f32 Mul */
    int want_casts = big ? 4 : 2;
    CHECK(n_live(g, ERT_OP_CAST) == want_casts, "%s: %d Casts, expected %d", what, n_live(g, ERT_OP_CAST), want_casts);
    ert_session_free(s);
    ert_model_free(m);
}

int main(void) {
    ert_context_options co = {0};
    if (ert_context_create(&co, &ctx) != ERT_OK) return 1;
    ert_test_rng_init(&rng, "precision");
    for (int rep = 0; rep < 3; rep++) {
        test_mixed();
        test_f32(true);
        test_f32(false);
    }
    ert_context_free(ctx);
    return ert_test_finish("precision");
}

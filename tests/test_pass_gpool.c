/* The session pass that turns ReduceMean/ReduceMax over every spatial axis
 * (keepdims) into GlobalAveragePool/GlobalMaxPool (runtime/passes/fuse.c).
 * Random f32 inputs, CPU sessions with and without the pass
 * (ERT_SESSION_NO_FUSE), both against a float64 reference written here;
 * cases the pass must leave alone (other axes, keepdims = 0) too, and a NaN
 * in one plane that a max must propagate (a mean too). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
static ert_test_rng rng;

typedef struct rcase {
    const char *op;
    int nd;
    int64_t d[4];
    int na;
    int64_t ax[3];  /* as given: may be negative */
    bool keep;
    bool as_input;  /* axes as input 1 (opset 18) or the attribute */
} rcase;

static int64_t nel(int nd, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

/* float64 reduction of x over the marked axes; y in x's order without them */
static void ref_reduce(const rcase *c, const float *x, double *y, int64_t ny) {
    bool red[4] = {false};
    for (int k = 0; k < c->na; k++) red[c->ax[k] < 0 ? c->ax[k] + c->nd : c->ax[k]] = true;
    bool is_max = strcmp(c->op, "ReduceMax") == 0;
    int64_t nr = 1;
    for (int d = 0; d < c->nd; d++)
        if (red[d]) nr *= c->d[d];
    for (int64_t o = 0; o < ny; o++) y[o] = is_max ? -INFINITY : 0;
    int64_t n = nel(c->nd, c->d);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i, o = 0, mul = 1;
        for (int d = c->nd - 1; d >= 0; d--) {
            int64_t q = r % c->d[d];
            r /= c->d[d];
            if (!red[d]) {
                o += q * mul;
                mul *= c->d[d];
            }
        }
        double v = x[i];
        if (is_max) y[o] = (v > y[o] || isnan(v)) ? v : y[o];
        else y[o] += v;
    }
    if (!is_max)
        for (int64_t o = 0; o < ny; o++) y[o] /= (double)nr;
}

static ert_model *build(const rcase *c) {
    ert_builder *b = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int32_t x, ax = -1, y;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, c->nd, c->d, &x), ctx);
    int64_t nad[1] = {c->na};
    if (c->as_input) CHECK_OK(ert_builder_weight(b, "axes", ERT_DTYPE_I64, 1, nad, c->ax, &ax), ctx);
    ert_attr at[2] = {ERT_ATTR_I("keepdims", c->keep), ERT_ATTR_IS("axes", c->ax, c->na)};
    int32_t ins[2] = {x, ax};
    CHECK_OK(ert_builder_node(b, c->op, NULL, ins, c->as_input ? 2 : 1, at, c->as_input ? 1 : 2, &y, 1), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

static void run_case(const rcase *c, bool with_nan) {
    ert_model *m = build(c);
    if (!m) return;
    int64_t n = nel(c->nd, c->d), ny = n;
    for (int k = 0; k < c->na; k++) ny /= c->d[c->ax[k] < 0 ? c->ax[k] + c->nd : c->ax[k]];
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)ny * sizeof *y);
    double *ref = malloc((size_t)ny * sizeof *ref);
    ert_test_fill(&rng, x, n, -3, 3);
    if (with_nan) x[ert_test_int(&rng, 0, (int)n - 1)] = NAN;
    ref_reduce(c, x, ref, ny);
    for (int pass = 0; pass < 2; pass++) {
        ert_session_options so = {0};
        so.flags = pass ? ERT_SESSION_NO_FUSE : 0;
        ert_session *s = NULL;
        CHECK_OK(ert_session_create(m, &so, &s), ctx);
        if (!s) continue;
        ert_test_poison(y, ny);
        CHECK_OK(ert_session_set_input(s, 0, x, (size_t)n * sizeof *x), ctx);
        CHECK_OK(ert_session_run(s), ctx);
        CHECK_OK(ert_session_get_output(s, 0, y, (size_t)ny * sizeof *y), ctx);
        char what[96];
        snprintf(what, sizeof what, "%s rank %d keep %d%s%s", c->op, c->nd, c->keep, pass ? " unfused" : "",
                 with_nan ? " NaN" : "");
        if (with_nan) {
            int64_t bad = 0, nan_ref = 0;
            for (int64_t i = 0; i < ny; i++) {
                nan_ref += isnan(ref[i]);
                if (isnan(ref[i]) != isnan(y[i]) || (!isnan(ref[i]) && fabs(y[i] - ref[i]) > 1e-5 + 1e-5 * fabs(ref[i])))
                    bad++;
            }
            CHECK(bad == 0 && nan_ref == 1, "%s: %lld outputs differ (NaN propagation), %lld NaN expected", what,
                  (long long)bad, (long long)nan_ref);
        } else {
            CHECK(ert_test_close(what, y, ref, ny, 1e-6, 1e-5), "%s", what);
        }
        ert_session_free(s);
    }
    free(x), free(y), free(ref);
    ert_model_free(m);
}

int main(void) {
    ert_context_options co = {0};
    if (ert_context_create(&co, &ctx) != ERT_OK) return 1;
    ert_test_rng_init(&rng, "pass_gpool");
    int64_t h = ert_test_int(&rng, 3, 41), w = ert_test_int(&rng, 1, 37), ch = ert_test_int(&rng, 1, 19);
    const rcase cases[] = {
        /* rewritten: every spatial axis, keepdims */
        {"ReduceMean", 4, {2, ch, h, w}, 2, {-2, -1}, true, true},
        {"ReduceMax", 4, {2, ch, h, w}, 2, {2, 3}, true, false},
        {"ReduceMean", 3, {3, ch, h * w}, 1, {2}, true, true},
        /* left alone: other axes, keepdims = 0, channel axis included */
        {"ReduceMean", 4, {2, ch, h, w}, 2, {2, 3}, false, true},
        {"ReduceMax", 4, {2, ch, h, w}, 2, {1, 2}, true, false},
        {"ReduceMean", 4, {2, ch, h, w}, 3, {1, 2, 3}, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_case(&cases[i], false);
        run_case(&cases[i], true);
    }
    ert_context_free(ctx);
    return ert_test_finish("pass_gpool");
}

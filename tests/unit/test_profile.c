/* ert_session_profile: one entry per scheduled node, in run order, with the
 * node's name and op and a finite, non-negative time; the outputs equal those
 * of ert_session_run on the same inputs (bitwise: same kernels, same order);
 * NULL arguments and a too-small `cap` behave as documented. `test_profile`
 * checks a CPU session; `test_profile cuda` (ctest profile_cuda, label gpu) the
 * same on a CUDA session (device time per node), SKIPPED without one. */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 257, DEPTH = 6 };

static ert_context *ctx;

/* h = x; DEPTH times: h = Tanh(MatMul(h, w_k) + b_k); y = Softmax(h). */
static ert_model *build(ert_test_rng *r) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[2] = {3, N}, wd[2] = {N, N}, bd[1] = {N};
    int32_t h;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, xd, &h), ctx);
    float *v = malloc((size_t)N * N * sizeof *v);
    for (int k = 0; k < DEPTH; k++) {
        int32_t w, c, in[2];
        ert_test_fill(r, v, (int64_t)N * N, -0.1f, 0.1f);
        CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_F32, 2, wd, v, &w), ctx);
        ert_test_fill(r, v, N, -0.5f, 0.5f);
        CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_F32, 1, bd, v, &c), ctx);
        in[0] = h, in[1] = w;
        CHECK_OK(ert_builder_node(b, "MatMul", NULL, in, 2, NULL, 0, &h, 1), ctx);
        in[0] = h, in[1] = c;
        CHECK_OK(ert_builder_node(b, "Add", NULL, in, 2, NULL, 0, &h, 1), ctx);
        CHECK_OK(ert_builder_node(b, "Tanh", NULL, &h, 1, NULL, 0, &h, 1), ctx);
    }
    CHECK_OK(ert_builder_node(b, "Softmax", NULL, &h, 1, NULL, 0, &h, 1), ctx);
    free(v);
    CHECK_OK(ert_builder_output(b, h, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

static void check_device(ert_model *m, ert_device dev, const float *x) {
    const char *dn = dev == ERT_DEVICE_CUDA ? "cuda" : "cpu";
    ert_session_options o = {.device = dev};
    ert_session *s = NULL;
    CHECK_OK(ert_session_create(m, &o, &s), ctx);
    if (!s) return;
    float y_run[3 * N], y_prof[3 * N];
    CHECK_OK(ert_session_set_input(s, 0, x, sizeof y_run), ctx);
    CHECK_OK(ert_session_run(s), ctx);
    CHECK_OK(ert_session_get_output(s, 0, y_run, sizeof y_run), ctx);

    int n = -1;
    CHECK(ert_session_profile(NULL, NULL, 0, &n) == ERT_E_ARG, "%s: NULL session accepted", dn);
    CHECK(ert_session_profile(s, NULL, 0, NULL) == ERT_E_ARG, "%s: NULL n accepted", dn);
    CHECK(ert_session_profile(s, NULL, 4, &n) == ERT_E_ARG, "%s: NULL out with cap 4 accepted", dn);
    CHECK_OK(ert_session_profile(s, NULL, 0, &n), ctx); /* count only */
    /* every op fuses at most into Gemm-like nodes: at least the Softmax and
     * one node per layer are scheduled, at most the model's 3 per layer + 1 */
    CHECK(n >= DEPTH + 1 && n <= 3 * DEPTH + 1, "%s: %d scheduled nodes, expected %d..%d", dn, n, DEPTH + 1,
          3 * DEPTH + 1);
    if (n <= 0 || n > 1000) {
        ert_session_free(s);
        return;
    }
    ert_profile_entry *e = calloc((size_t)n + 1, sizeof *e);
    e[n].ms = -12345.0; /* past cap: must stay untouched */
    memset(y_prof, 0xff, sizeof y_prof); /* NaN poison */
    CHECK_OK(ert_session_set_input(s, 0, x, sizeof y_run), ctx);
    int n2 = -1;
    CHECK_OK(ert_session_profile(s, e, n, &n2), ctx);
    CHECK(n2 == n, "%s: n %d then %d", dn, n, n2);
    CHECK(e[n].ms == -12345.0, "%s: entry past cap written", dn);
    double total = 0;
    int softmax = 0;
    for (int k = 0; k < n; k++) {
        CHECK(e[k].node && e[k].node[0] && e[k].op && e[k].op[0], "%s: entry %d has no name/op", dn, k);
        CHECK(isfinite(e[k].ms) && e[k].ms >= 0 && e[k].ms < 1e4, "%s: entry %d time %g", dn, k, e[k].ms);
        total += e[k].ms;
        if (e[k].op && !strcmp(e[k].op, "Softmax")) softmax = k + 1;
    }
    CHECK(softmax == n, "%s: the Softmax is not the last scheduled node (at %d of %d)", dn, softmax, n);
    CHECK(total > 0, "%s: all times zero", dn);
    CHECK_OK(ert_session_get_output(s, 0, y_prof, sizeof y_prof), ctx);
    CHECK(memcmp(y_run, y_prof, sizeof y_run) == 0, "%s: profiled outputs differ from run's", dn);
    /* a short cap fills only cap entries and still reports n */
    memset(e, 0, sizeof *e * (size_t)n);
    CHECK_OK(ert_session_profile(s, e, 2, &n2), ctx);
    CHECK(n2 == n && e[2].node == NULL && e[1].node != NULL, "%s: cap 2 wrote wrong entries (n %d)", dn, n2);
    free(e);
    ert_session_free(s);
    printf("profile %s: %d nodes, %.3f ms in all\n", dn, n, total);
}

int main(int argc, char **argv) {
    bool cuda = argc > 1 && !strcmp(argv[1], "cuda");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    ert_test_rng r;
    ert_test_rng_init(&r, "profile");
    ert_model *m = build(&r);
    float x[3 * N];
    ert_test_fill(&r, x, 3 * N, -1, 1);
    if (!cuda) {
        check_device(m, ERT_DEVICE_CPU, x);
    } else {
        ert_session *probe = NULL;
        ert_session_options po = {.device = ERT_DEVICE_CUDA};
        if (ert_session_create(m, &po, &probe) != ERT_OK) {
            char why[300];
            snprintf(why, sizeof why, "no CUDA session: %s", ert_last_error(ctx));
            ert_model_free(m);
            ert_context_free(ctx);
            return ert_test_skip("profile_cuda", why);
        }
        ert_session_free(probe);
        check_device(m, ERT_DEVICE_CUDA, x);
    }
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_finish(cuda ? "profile_cuda" : "profile");
}

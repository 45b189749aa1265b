/* Batch strips (runtime/strips.c): a CPU session of batch N runs the
 * separable middle of a CNN image by image, its internal tensors one image
 * big. Checked on fresh random weights and inputs, batch 3 and 8, 1 and 2
 * threads:
 *   - strips formed (white-box: session_internal.h), the plan passes ert_session_plan_check (blocks
 *     apart while live, tensors inside the arena, no two sharing bytes while live); never more than
 *     1.25x the one without strips (ERT_SESSION_NO_STRIPS), at batch 8
 *     smaller by at least half a full-batch tensor;
 *   - the same bits as that whole-batch session;
 *   - every output, image by image, bit for bit that of a batch-1 session
 *     on that image (the same kernels over one image: any slicing, offset or
 *     lifetime error shows), outputs poisoned before each run; one output
 *     (a graph output made inside the strip, sliced per image) and one after
 *     it (a Gemm over the whole batch);
 *   - an input broadcast over the batch (1, C, H, W) read whole inside the
 *     strip; a squeeze-excitation branch (GAP, 1x1 convs, Sigmoid, Mul)
 *     inside it;
 *   - ert_session_profile: one entry per scheduled node, the strip nodes'
 *     times summed over the images; ert_session_run_check_finite: a NaN in
 *     the last image is reported at the first node with its index in the
 *     whole tensor. */
#include "runtime_internal.h" /* ert_session_plan_check */
#include "session_internal.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { C = 16, HW = 160, NCLS = 7 };

static ert_context *ctx;

/* x (N, C, HW, HW), bias (1, C, HW, HW) ->
 *   a = Relu(conv3x3(x)) + bias; d = dwconv3x3(a); r = conv1x1(d) + a;
 *   se = Sigmoid(conv1x1(Relu(conv1x1(GAP(r))))); m = r * se; feat = MaxPool2(m)  [output]
 *   logits = Gemm(Flatten(GAP(feat)))                                           [output] */
static ert_model *model(ert_test_rng *r) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    const int64_t xd[4] = {-1, C, HW, HW}, bd[4] = {1, C, HW, HW}, w3[4] = {C, C, 3, 3}, wd[4] = {C, 1, 3, 3};
    const int64_t w1[4] = {C, C, 1, 1}, ws1[4] = {4, C, 1, 1}, ws2[4] = {C, 4, 1, 1}, cb[1] = {C}, sb[1] = {4};
    const int64_t fd[2] = {NCLS, C}, fb[1] = {NCLS};
    int32_t x, bias, c1, r1, a, d, c2, rr, g, s1, s1r, s2, sg, m, feat, g2, f, o;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_input(b, "bias", ERT_DTYPE_F32, 4, bd, &bias), ctx);
    CHECK_OK(ert_builder_conv2d(b, x, ert_test_weight(b, r, NULL, 4, w3, -0.2f, 0.2f), ert_test_weight(b, r, NULL, 1, cb, -0.1f, 0.1f), 1, 1, 1, 1, &c1),
             ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", c1, &r1), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", r1, bias, &a), ctx);
    CHECK_OK(ert_builder_conv2d(b, a, ert_test_weight(b, r, NULL, 4, wd, -0.3f, 0.3f), ert_test_weight(b, r, NULL, 1, cb, -0.1f, 0.1f), 1, 1, 1, C, &d),
             ctx);
    CHECK_OK(ert_builder_conv2d(b, d, ert_test_weight(b, r, NULL, 4, w1, -0.3f, 0.3f), ert_test_weight(b, r, NULL, 1, cb, -0.1f, 0.1f), 1, 0, 1, 1, &c2),
             ctx);
    CHECK_OK(ert_builder_binary(b, "Add", c2, a, &rr), ctx);
    CHECK_OK(ert_builder_unary(b, "GlobalAveragePool", rr, &g), ctx);
    CHECK_OK(ert_builder_conv2d(b, g, ert_test_weight(b, r, NULL, 4, ws1, -0.3f, 0.3f), ert_test_weight(b, r, NULL, 1, sb, -0.1f, 0.1f), 1, 0, 1, 1, &s1),
             ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", s1, &s1r), ctx);
    CHECK_OK(ert_builder_conv2d(b, s1r, ert_test_weight(b, r, NULL, 4, ws2, -0.3f, 0.3f), ert_test_weight(b, r, NULL, 1, cb, -0.1f, 0.1f), 1, 0, 1, 1,
                                &s2),
             ctx);
    CHECK_OK(ert_builder_unary(b, "Sigmoid", s2, &sg), ctx);
    CHECK_OK(ert_builder_binary(b, "Mul", rr, sg, &m), ctx);
    CHECK_OK(ert_builder_maxpool2d(b, m, 2, 2, 0, &feat), ctx);
    CHECK_OK(ert_builder_unary(b, "GlobalAveragePool", feat, &g2), ctx);
    CHECK_OK(ert_builder_unary(b, "Flatten", g2, &f), ctx);
    CHECK_OK(ert_builder_linear(b, f, ert_test_weight(b, r, NULL, 2, fd, -0.5f, 0.5f), ert_test_weight(b, r, NULL, 1, fb, -0.1f, 0.1f), &o), ctx);
    CHECK_OK(ert_builder_output(b, feat, "feat"), ctx);
    CHECK_OK(ert_builder_output(b, o, "logits"), ctx);
    ert_model *mdl = NULL;
    CHECK_OK(ert_builder_finish(b, &mdl), ctx);
    ert_builder_free(b);
    return mdl;
}

static const int64_t IMG = (int64_t)C * HW * HW, FEAT = (int64_t)C * (HW / 2) * (HW / 2);

/* Runs s on x (batch n) and bias; outputs into feat, logits (poisoned first). */
static void run(ert_session *s, const float *x, int64_t n, const float *bias, float *feat, float *logits) {
    ert_test_poison(feat, n * FEAT);
    ert_test_poison(logits, n * NCLS);
    CHECK_OK(ert_session_set_input(s, 0, x, (size_t)(n * IMG) * sizeof(float)), ctx);
    CHECK_OK(ert_session_set_input(s, 1, bias, (size_t)IMG * sizeof(float)), ctx);
    CHECK_OK(ert_session_run(s), ctx);
    CHECK_OK(ert_session_get_output(s, 0, feat, (size_t)(n * FEAT) * sizeof(float)), ctx);
    CHECK_OK(ert_session_get_output(s, 1, logits, (size_t)(n * NCLS) * sizeof(float)), ctx);
}

static void one(ert_test_rng *r, const ert_model *m, int64_t N, int threads) {
    float *x = malloc((size_t)(N * IMG) * sizeof(float)), *bias = malloc((size_t)IMG * sizeof(float));
    float *feat = malloc((size_t)(N * FEAT) * sizeof(float)), *logits = malloc((size_t)(N * NCLS) * sizeof(float));
    float *f1 = malloc((size_t)FEAT * sizeof(float)), l1[NCLS];
    ert_test_fill(r, x, N * IMG, -1, 1);
    ert_test_fill(r, bias, IMG, -0.5f, 0.5f);
    ert_session_options o = {.batch = N, .n_threads = threads}, o1 = {.batch = 1, .n_threads = threads};
    ert_session *s = NULL, *s1 = NULL;
    CHECK_OK(ert_session_create(m, &o, &s), ctx);
    CHECK_OK(ert_session_create(m, &o1, &s1), ctx);
    if (!s || !s1) goto out;
    CHECK(s->n_strips >= 1 && s->srun.n_entries > s->n_sched, "batch %lld, %d threads: no strip (%d)", (long long)N,
          threads, s->n_strips);
    CHECK(s->n_strips == 0 || s->strips[0].b - s->strips[0].a >= 4, "the strip has %d nodes",
          s->n_strips ? s->strips[0].b - s->strips[0].a + 1 : 0);
    CHECK(s1->n_strips == 0, "a batch-1 session has strips");
    char why[256] = "";
    CHECK(ert_session_plan_check(s, why, sizeof why), "batch %lld: plan check: %s", (long long)N, why);
    /* the same batch without strips (every node over the whole batch): the same bits, a bigger plan
     * (the strip's internal tensors hold one image: 4 of them were N * IMG floats each) */
    ert_session_options o0 = o;
    o0.flags |= ERT_SESSION_NO_STRIPS;
    ert_session *s0 = NULL;
    CHECK_OK(ert_session_create(m, &o0, &s0), ctx);
    if (s0) {
        CHECK(s0->n_strips == 0, "ERT_SESSION_NO_STRIPS: %d strips", s0->n_strips);
        /* never more than ERT_STRIP_MEM (1.25) times the plan without; at batch 8 the strip runs to the
         * MaxPool, its tensors internal but the input's conv's: at least half a full-batch tensor less */
        CHECK((double)s->mem.activations_bytes <= 1.25 * (double)s0->mem.activations_bytes,
              "activations %zu bytes with strips, %zu without, batch %lld", s->mem.activations_bytes,
              s0->mem.activations_bytes, (long long)N);
        if (N == 8)
            CHECK(s->mem.activations_bytes + (size_t)(N * IMG / 2) * sizeof(float) <= s0->mem.activations_bytes,
                  "activations %zu bytes with strips, %zu without, batch %lld", s->mem.activations_bytes,
                  s0->mem.activations_bytes, (long long)N);
        run(s0, x, N, bias, feat, logits);
    }
    float *feat0 = malloc((size_t)(N * FEAT) * sizeof(float)), *logits0 = malloc((size_t)(N * NCLS) * sizeof(float));
    memcpy(feat0, feat, (size_t)(N * FEAT) * sizeof(float));
    memcpy(logits0, logits, (size_t)(N * NCLS) * sizeof(float));
    run(s, x, N, bias, feat, logits);
    if (s0)
        CHECK(!memcmp(feat0, feat, (size_t)(N * FEAT) * sizeof(float)) &&
                  !memcmp(logits0, logits, (size_t)(N * NCLS) * sizeof(float)),
              "batch %lld, %d threads: strips and the whole-batch run differ", (long long)N, threads);
    ert_session_free(s0);
    free(feat0), free(logits0);
    for (int64_t i = 0; i < N; i++) {
        run(s1, x + i * IMG, 1, bias, f1, l1);
        CHECK(memcmp(f1, feat + i * FEAT, (size_t)FEAT * sizeof(float)) == 0,
              "batch %lld, %d threads: image %lld's feat differs from a batch-1 run", (long long)N, threads, (long long)i);
        CHECK(memcmp(l1, logits + i * NCLS, sizeof l1) == 0,
              "batch %lld, %d threads: image %lld's logits differ from a batch-1 run", (long long)N, threads,
              (long long)i);
    }
    /* the profile: every scheduled node once, strip nodes summed over the images */
    ert_profile_entry e[64];
    int n = 0;
    CHECK_OK(ert_session_profile(s, e, 64, &n), ctx);
    CHECK(n == s->n_sched && n <= 64, "profile: %d entries for %d nodes", n, s->n_sched);
    double tot = 0;
    for (int k = 0; k < n && k < 64; k++) {
        CHECK(e[k].ms >= 0 && e[k].node, "profile entry %d", k);
        tot += e[k].ms;
    }
    CHECK(tot > 0, "profile: total %g ms", tot);
    float *got = malloc((size_t)(N * FEAT) * sizeof(float));
    CHECK_OK(ert_session_get_output(s, 0, got, (size_t)(N * FEAT) * sizeof(float)), ctx);
    CHECK(memcmp(got, feat, (size_t)(N * FEAT) * sizeof(float)) == 0, "the profile run's feat differs from run's");
    free(got);
    /* a NaN in the last image: the first conv's output has it, at an index of that image */
    const int64_t at = (N - 1) * IMG + ert_test_int(r, 0, (int)IMG - 1);
    x[at] = NAN;
    CHECK_OK(ert_session_set_input(s, 0, x, (size_t)(N * IMG) * sizeof(float)), ctx);
    ert_nonfinite nf;
    ert_status st = ert_session_run_check_finite(s, &nf);
    CHECK(st == ERT_E_NUMERIC && nf.node_index == 0 && nf.first_index >= (N - 1) * IMG &&
              nf.first_index < N * IMG,
          "check_finite: status %d, node %d, first index %lld (image %lld starts at %lld)", (int)st, nf.node_index,
          (long long)nf.first_index, (long long)(N - 1), (long long)((N - 1) * IMG));
out:
    ert_session_free(s);
    ert_session_free(s1);
    free(x), free(bias), free(feat), free(logits), free(f1);
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "strips");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    ert_model *m = model(&r);
    for (int t = 1; m && t <= 2; t++) {
        one(&r, m, 3, t);
        one(&r, m, 8, t);
    }
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_finish("strips");
}

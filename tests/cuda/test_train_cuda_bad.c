/* CUDA trainer on bad input and with a caller arena (label `gpu`; issue #5).
 *
 * - Gather gradient, an index out of range (one bad index per batch, too
 *   large and too negative): the step returns ERT_E_ARG naming the gradient
 *   node and the index, the weights region (parameters, constants, BatchNorm
 *   running statistics) and the optimizer state region are bit-identical
 *   before and after, the step count is kept; the CPU trainer refuses the
 *   same batch (its forward Gather does). The next valid step (negative
 *   indices included) matches the CPU trainer, which never took the bad one:
 *   loss and every parameter.
 * - Cross-entropy target out of range (C and -1) on a CNN with BatchNorm:
 *   ERT_E_ARG naming the target and its value, nothing changed (regions
 *   bit-identical, BatchNorm statistics included: the targets are checked
 *   before anything runs), eval refuses it too; then valid steps match the
 *   CPU trainer.
 * - A training export's BatchNorm (training_mode=1, running outputs nobody
 *   reads) trains on both devices equally, frozen and on batch statistics.
 * - Caller arena: a trainer on device memory the test cudaMallocs (the size
 *   ert_trainer_plan reports) trains 10 steps with the losses and final
 *   parameters of a trainer with its own arena on the same batches and seed,
 *   allocates nothing during the steps and leaves the arena to the caller;
 *   an arena one byte short is ERT_E_ARENA with the byte count needed in the
 *   message, a misaligned one ERT_E_ARG.
 *
 * --cpu-selfcheck runs the "CUDA" side on the CPU (checks this harness on a
 * machine without a GPU; the device-specific message checks are skipped).
 * Without a GPU, or in a build without CUDA: returns 77 (ctest SKIPPED). */
#include "testutil.h"
#include "trainer_internal.h" /* regions of the arena, ert_trainer_param_copy */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ERT_TEST_HAVE_CUDA
int main(void) { return ert_test_skip("train_cuda_bad", "this build has no CUDA backend (ERT_CUDA=OFF)"); }
#else
#include <cuda_runtime_api.h>

#include "cuda_alloc_count.h"

static ert_context *ctx;
static ert_test_rng rng;
static ert_device gdev = ERT_DEVICE_CUDA;

/* ------------------------------------------------------------------ models */

static int32_t weight(ert_builder *b, const char *nm, int nd, const int64_t *d, float lo, float hi) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    float *w = malloc((size_t)n * 4 + 4);
    ert_test_fill(&rng, w, n, lo, hi);
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, nm, ERT_DTYPE_F32, nd, d, w, &id), ctx);
    free(w);
    return id;
}

static ert_model *finish(ert_builder *b, int32_t out) {
    CHECK_OK(ert_builder_output(b, out, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

/* idx (N, EMB_L) int64 -> Gather "embed" of a (EMB_V, EMB_D) table ->
 * Flatten -> Linear -> EMB_C classes. */
enum { EMB_V = 7, EMB_D = 4, EMB_L = 3, EMB_C = 3, EMB_N = 8 };

static ert_model *embed_model(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[2] = {-1, EMB_L}, ed[2] = {EMB_V, EMB_D}, fw[2] = {EMB_C, EMB_L * EMB_D}, fb[1] = {EMB_C};
    int32_t x, g, f, o;
    CHECK_OK(ert_builder_input(b, "idx", ERT_DTYPE_I64, 2, xd, &x), ctx);
    int32_t in[2] = {weight(b, "emb", 2, ed, -1.0f, 1.0f), x};
    ert_attr ax[1] = {ERT_ATTR_I("axis", 0)};
    CHECK_OK(ert_builder_node(b, "Gather", "embed", in, 2, ax, 1, &g, 1), ctx);
    CHECK_OK(ert_builder_unary(b, "Flatten", g, &f), ctx);
    CHECK_OK(ert_builder_linear(b, f, weight(b, "fc.w", 2, fw, -0.5f, 0.5f), weight(b, "fc.b", 1, fb, -0.1f, 0.1f),
                                &o), ctx);
    return finish(b, o);
}

/* x (N, 2, 6, 6) -> Conv 3x3 (4) -> BatchNorm -> Relu -> GlobalAveragePool
 * -> Flatten -> Linear -> CNN_C. bn_export: the BatchNorm as a training
 * export has it (training_mode=1, running mean/var outputs nothing reads). */
enum { CNN_C = 5, CNN_N = 8, CNN_X = 2 * 6 * 6 };

static ert_model *cnn_model_as(bool bn_export) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 2, 6, 6}, wd[4] = {4, 2, 3, 3}, c4[1] = {4}, fw[2] = {CNN_C, 4}, fb[1] = {CNN_C};
    int32_t x, c, bn, r, g, f, o;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_conv2d(b, x, weight(b, "conv.w", 4, wd, -0.5f, 0.5f), -1, 1, 1, 1, 1, &c), ctx);
    int32_t bin[5] = {c, weight(b, "bn.scale", 1, c4, 0.5f, 1.5f), weight(b, "bn.bias", 1, c4, -0.2f, 0.2f),
                      weight(b, "bn.mean", 1, c4, -0.5f, 0.5f), weight(b, "bn.var", 1, c4, 0.5f, 1.5f)};
    int32_t bo[3] = {-1, -1, -1};
    ert_attr tm[1] = {ERT_ATTR_I("training_mode", 1)};
    CHECK_OK(ert_builder_node(b, "BatchNormalization", "bn", bin, 5, bn_export ? tm : NULL, bn_export ? 1 : 0, bo,
                              bn_export ? 3 : 1), ctx);
    bn = bo[0];
    CHECK_OK(ert_builder_unary(b, "Relu", bn, &r), ctx);
    CHECK_OK(ert_builder_unary(b, "GlobalAveragePool", r, &g), ctx);
    CHECK_OK(ert_builder_unary(b, "Flatten", g, &f), ctx);
    CHECK_OK(ert_builder_linear(b, f, weight(b, "fc.w", 2, fw, -0.5f, 0.5f), weight(b, "fc.b", 1, fb, -0.1f, 0.1f),
                                &o), ctx);
    return finish(b, o);
}

/* ------------------------------------------------------------------ harness */

static ert_model *cnn_model(void) { return cnn_model_as(false); }

static ert_trainer_options adam_opts(int batch) {
    ert_trainer_options o = {0};
    o.session.batch = batch;
    o.loss.kind = ERT_LOSS_CROSS_ENTROPY;
    o.optim.kind = ERT_OPTIM_ADAM;
    o.optim.lr = 0.01f;
    o.optim.weight_decay = 1e-3f;
    o.seed = 4321;
    return o;
}

/* The arena's weights region (parameters, constants, BatchNorm running
 * statistics) and optimizer state region, copied to host memory. */
typedef struct snap {
    uint8_t *w, *s;
    size_t wn, sn;
} snap;

static bool take_snap(ert_trainer *t, snap *p) {
    p->wn = t->w_bytes;
    p->sn = t->s_bytes;
    p->w = malloc(p->wn + 1);
    p->s = malloc(p->sn + 1);
    const uint8_t *wb = t->arena, *sb = wb + t->w_bytes + t->g_bytes;
    ert_status st = ERT_OK;
    if (t->g.be) {
        if (p->wn) st = t->g.be->download(t->g.bctx, p->w, wb, p->wn);
        if (!st && p->sn) st = t->g.be->download(t->g.bctx, p->s, sb, p->sn);
    } else {
        memcpy(p->w, wb, p->wn);
        memcpy(p->s, sb, p->sn);
    }
    CHECK(st == ERT_OK, "cannot read the arena back: %s", ert_last_error(ctx));
    return st == ERT_OK;
}

static void free_snap(snap *p) {
    free(p->w);
    free(p->s);
}

/* Weights and optimizer state bit-identical to `before`. */
static void check_unchanged(const char *what, ert_trainer *t, const snap *before) {
    snap now;
    if (!take_snap(t, &now)) return;
    CHECK(now.wn == before->wn && memcmp(now.w, before->w, now.wn) == 0,
          "%s: the weights region changed (parameters or BatchNorm statistics)", what);
    CHECK(now.sn == before->sn && memcmp(now.s, before->s, now.sn) == 0, "%s: the optimizer state changed", what);
    free_snap(&now);
}

/* max |a - b| / max(max |a|, 1e-3) over every trainable parameter, <= tol. */
static void compare_params(const char *what, ert_trainer *c, ert_trainer *g, double tol) {
    for (int k = 0; k < c->n_params; k++) {
        const char *nm = c->g.t[c->params[k]].name;
        int64_t n = c->g.t[c->params[k]].nbytes / sizeof(float), n1 = 0, n2 = 0;
        float *a = malloc((size_t)n * sizeof(float) + 4), *b = malloc((size_t)n * sizeof(float) + 4);
        ert_status s1 = ert_trainer_param_copy(c, nm, a, NULL, &n1), s2 = ert_trainer_param_copy(g, nm, b, NULL, &n2);
        CHECK(s1 == ERT_OK && s2 == ERT_OK && n1 == n && n2 == n, "%s: cannot read '%s'", what, nm);
        if (s1 == ERT_OK && s2 == ERT_OK && n1 == n && n2 == n) {
            double mx = 1e-3, worst = 0;
            for (int64_t i = 0; i < n; i++) mx = fabs(a[i]) > mx ? fabs(a[i]) : mx;
            for (int64_t i = 0; i < n; i++) {
                double d = fabs((double)a[i] - b[i]) / mx;
                if (!(d <= worst)) worst = d; /* NaN counts as worst */
            }
            CHECK(worst <= tol, "%s: '%s' differs, rel %.3g (tolerance %.3g)", what, nm, worst, tol);
        }
        free(a);
        free(b);
    }
}

static bool close_rel(float a, float b, double tol) {
    return fabs((double)a - b) <= tol * (fabs((double)a) > 1 ? fabs((double)a) : 1);
}

/* A CPU and a device trainer of m with the same options and seed. */
static bool make_pair_bn(ert_model *m, int batch, ert_bn_mode bn, ert_trainer **c, ert_trainer **g) {
    ert_trainer_options o = adam_opts(batch);
    o.bn = bn;
    *c = *g = NULL;
    o.session.device = ERT_DEVICE_CPU;
    CHECK_OK(ert_trainer_create(m, &o, c), ctx);
    o.session.device = gdev;
    CHECK_OK(ert_trainer_create(m, &o, g), ctx);
    return *c && *g;
}

static bool make_pair(ert_model *m, int batch, ert_trainer **c, ert_trainer **g) {
    return make_pair_bn(m, batch, ERT_BN_TRAIN, c, g);
}

/* A valid step on both (the batch already in both), equal losses; the
 * device trainer's step count goes up by one. */
static void step_both(const char *what, int round, ert_trainer *c, ert_trainer *g) {
    float lc = 0, lg = 0;
    int64_t n0 = ert_trainer_step_count(g);
    CHECK_OK(ert_trainer_step(c, &lc), ctx);
    CHECK_OK(ert_trainer_step(g, &lg), ctx);
    CHECK(close_rel(lc, lg, 1e-4), "%s round %d: loss cpu %.8g cuda %.8g", what, round, (double)lc, (double)lg);
    CHECK(ert_trainer_step_count(g) == n0 + 1, "%s round %d: step count %lld, want %lld", what, round,
          (long long)ert_trainer_step_count(g), (long long)(n0 + 1));
}

/* ------------------------------------------------------------------ Gather index */

static void fill_idx(int64_t *idx) {
    for (int i = 0; i < EMB_N * EMB_L; i++) idx[i] = ert_test_int(&rng, -EMB_V, EMB_V - 1); /* negatives valid */
}

static void gather_index(void) {
    ert_model *m = embed_model();
    if (!m) return;
    ert_trainer *c, *g;
    if (!make_pair(m, EMB_N, &c, &g)) goto done;
    int64_t *ic, *ig, *yc, *yg;
    ert_trainer_input_data(c, 0, (void **)&ic);
    ert_trainer_input_data(g, 0, (void **)&ig);
    ert_trainer_target_data(c, (void **)&yc);
    ert_trainer_target_data(g, (void **)&yg);
    for (int round = 0; round < 2; round++) {
        /* a valid step on both */
        fill_idx(ic);
        for (int i = 0; i < EMB_N; i++) yc[i] = ert_test_int(&rng, 0, EMB_C - 1);
        memcpy(ig, ic, sizeof(int64_t) * EMB_N * EMB_L);
        memcpy(yg, yc, sizeof(int64_t) * EMB_N);
        step_both("gather, valid step", round, c, g);
        float lc = 0, lg = 0;
        int64_t steps = ert_trainer_step_count(g);

        /* one index out of range: too large in round 0, too negative in round 1 */
        fill_idx(ic);
        int at = ert_test_int(&rng, 0, EMB_N * EMB_L - 1);
        int64_t bad = round == 0 ? EMB_V + ert_test_int(&rng, 0, 5) : -EMB_V - 1 - ert_test_int(&rng, 0, 5);
        int64_t good = ic[at];
        ic[at] = bad;
        memcpy(ig, ic, sizeof(int64_t) * EMB_N * EMB_L);
        snap before;
        if (!take_snap(g, &before)) break;
        ert_status s1 = ert_trainer_step(c, &lc);
        CHECK(s1 == ERT_E_ARG, "gather index %lld on the CPU: %s (%s), want ERT_E_ARG", (long long)bad,
              ert_status_str(s1), ert_last_error(ctx));
        ert_status s2 = ert_trainer_step(g, &lg);
        const char *msg = ert_last_error(ctx);
        char want[64];
        snprintf(want, sizeof want, "index %lld out of range [-%d, %d)", (long long)bad, EMB_V, EMB_V);
        CHECK(s2 == ERT_E_ARG, "gather index %lld: %s (%s), want ERT_E_ARG", (long long)bad, ert_status_str(s2), msg);
        if (gdev == ERT_DEVICE_CUDA)
            CHECK(strstr(msg, "'embed/grad'") && strstr(msg, want) && strstr(msg, "refused"),
                  "gather index %lld: message '%s' should name 'embed/grad' and say '%s'", (long long)bad, msg, want);
        printf("  bad gather index %lld: %s\n", (long long)bad, msg);
        check_unchanged("refused gather step", g, &before);
        free_snap(&before);
        CHECK(ert_trainer_step_count(g) == steps, "a refused gather step counted (%lld, want %lld)",
              (long long)ert_trainer_step_count(g), (long long)steps);

        /* the same batch made valid: both trainers step on, equal */
        ic[at] = ig[at] = good;
        step_both("gather, the step after the refused one", round, c, g);
    }
    compare_params("gather: after the refused steps", c, g, 1e-3);
done:
    ert_trainer_free(c);
    ert_trainer_free(g);
    ert_model_free(m);
}

/* ------------------------------------------------------------------ CE target */

/* A fresh CNN batch into a, the same into b. */
static void feed_cnn(ert_trainer *a, ert_trainer *b) {
    float *xa, *xb;
    int64_t *ya, *yb;
    ert_trainer_input_data(a, 0, (void **)&xa);
    ert_trainer_input_data(b, 0, (void **)&xb);
    ert_trainer_target_data(a, (void **)&ya);
    ert_trainer_target_data(b, (void **)&yb);
    ert_test_fill(&rng, xa, (int64_t)CNN_N * CNN_X, -1.0f, 1.0f);
    for (int i = 0; i < CNN_N; i++) ya[i] = ert_test_int(&rng, 0, CNN_C - 1);
    memcpy(xb, xa, sizeof(float) * CNN_N * CNN_X);
    memcpy(yb, ya, sizeof(int64_t) * CNN_N);
}

static void ce_target(void) {
    ert_model *m = cnn_model();
    if (!m) return;
    ert_trainer *c, *g;
    if (!make_pair(m, CNN_N, &c, &g)) goto done;
    int64_t *yc, *yg;
    ert_trainer_target_data(c, (void **)&yc);
    ert_trainer_target_data(g, (void **)&yg);
    for (int round = 0; round < 2; round++) {
        feed_cnn(c, g);
        step_both("CE, valid step", round, c, g);
        float lc = 0;
        int64_t steps = ert_trainer_step_count(g);

        feed_cnn(c, g);
        int at = ert_test_int(&rng, 0, CNN_N - 1);
        int64_t good = yc[at], bad = round == 0 ? CNN_C + ert_test_int(&rng, 0, 3) : -1 - ert_test_int(&rng, 0, 3);
        yc[at] = yg[at] = bad;
        snap before;
        if (!take_snap(g, &before)) break;
        ert_status s1 = ert_trainer_step(c, &lc);
        CHECK(s1 == ERT_E_ARG, "CE target %lld on the CPU: %s, want ERT_E_ARG", (long long)bad, ert_status_str(s1));
        float lbad = -7.0f;
        ert_status s2 = ert_trainer_step(g, &lbad);
        const char *msg = ert_last_error(ctx);
        char want[96];
        snprintf(want, sizeof want, "target[%d] = %lld", at, (long long)bad);
        CHECK(s2 == ERT_E_ARG, "CE target %lld: %s (%s), want ERT_E_ARG", (long long)bad, ert_status_str(s2), msg);
        CHECK(strstr(msg, "target class index out of range") != NULL, "CE target %lld: message '%s'",
              (long long)bad, msg);
        if (gdev == ERT_DEVICE_CUDA)
            CHECK(strstr(msg, want) && lbad == -7.0f, "CE target %lld: message '%s' should say '%s'; loss written %g",
                  (long long)bad, msg, want, (double)lbad);
        printf("  bad CE target %lld: %s\n", (long long)bad, msg);
        check_unchanged("refused CE step", g, &before);
        CHECK(ert_trainer_step_count(g) == steps, "a refused CE step counted");
        ert_status s3 = ert_trainer_eval(g, NULL);
        CHECK(s3 == ERT_E_ARG, "eval with CE target %lld: %s, want ERT_E_ARG", (long long)bad, ert_status_str(s3));
        check_unchanged("refused CE eval", g, &before);
        free_snap(&before);

        yc[at] = yg[at] = good;
        step_both("CE, the step after the refused one", round, c, g);
    }
    compare_params("CE: after the refused steps", c, g, 1e-3);
done:
    ert_trainer_free(c);
    ert_trainer_free(g);
    ert_model_free(m);
}

/* ------------------------------------------------------------------ frozen BN export */

/* A training export's BatchNorm (training_mode=1, three outputs) in frozen
 * mode runs on its running statistics on both devices (the CUDA inference
 * BatchNorm refuses training_mode=1: create failed before the trainer
 * forced it off), in both modes the dangling outputs are dropped. */
static void bn_export(void) {
    ert_model *m = cnn_model_as(true);
    if (!m) return;
    for (int frozen = 0; frozen < 2; frozen++) {
        ert_trainer *c, *g;
        if (make_pair_bn(m, CNN_N, frozen ? ERT_BN_FROZEN : ERT_BN_TRAIN, &c, &g)) {
            for (int s = 0; s < 3; s++) {
                feed_cnn(c, g);
                step_both(frozen ? "training_mode=1 BN, frozen" : "training_mode=1 BN, batch statistics", s, c, g);
            }
            compare_params(frozen ? "training_mode=1 BN, frozen" : "training_mode=1 BN, batch statistics", c, g, 1e-3);
        }
        ert_trainer_free(c);
        ert_trainer_free(g);
    }
    ert_model_free(m);
}

/* ------------------------------------------------------------------ caller arena */

static void *arena_alloc(size_t n) {
    void *p = NULL;
    if (gdev == ERT_DEVICE_CPU) return aligned_alloc(256, (n + 256) / 256 * 256);
    cudaError_t e = __real_cudaMalloc(&p, n);
    CHECK(e == cudaSuccess, "cudaMalloc(%zu): %s", n, cudaGetErrorString(e));
    return e == cudaSuccess ? p : NULL;
}

static bool arena_free(void *p) {
    if (gdev == ERT_DEVICE_CPU) {
        free(p);
        return true;
    }
    return cudaFree(p) == cudaSuccess;
}

static void caller_arena(void) {
    ert_model *m = cnn_model();
    if (!m) return;
    ert_trainer_options o = adam_opts(CNN_N);
    o.session.device = gdev;
    ert_memory_report mr;
    CHECK_OK(ert_trainer_plan(m, &o, &mr), ctx);
    void *arena = mr.total_bytes ? arena_alloc(mr.total_bytes + 256) : NULL;
    ert_trainer *own = NULL, *mine = NULL;
    if (!arena) goto done;

    /* one byte short: ERT_E_ARENA with the bytes needed */
    ert_trainer_options ob = o;
    ob.session.arena = arena;
    ob.session.arena_bytes = mr.total_bytes - 1;
    ert_trainer *t = NULL;
    ert_status st = ert_trainer_create(m, &ob, &t);
    char want[64];
    snprintf(want, sizeof want, "%zu needed", mr.total_bytes);
    CHECK(st == ERT_E_ARENA && !t && strstr(ert_last_error(ctx), want),
          "caller arena of %zu bytes (needs %zu): %s (%s), want ERT_E_ARENA saying '%s'", ob.session.arena_bytes,
          mr.total_bytes, ert_status_str(st), ert_last_error(ctx), want);
    printf("  small caller arena: %s\n", ert_last_error(ctx));
    ert_trainer_free(t);
    t = NULL;
    ob.session.arena = (uint8_t *)arena + 32; /* not 64-byte aligned */
    ob.session.arena_bytes = mr.total_bytes;
    st = ert_trainer_create(m, &ob, &t);
    CHECK(st == ERT_E_ARG && !t, "misaligned caller arena: %s (%s), want ERT_E_ARG", ert_status_str(st),
          ert_last_error(ctx));
    ert_trainer_free(t);

    CHECK_OK(ert_trainer_create(m, &o, &own), ctx);
    ob.session.arena = arena;
    ob.session.arena_bytes = mr.total_bytes;
    CHECK_OK(ert_trainer_create(m, &ob, &mine), ctx);
    if (!own || !mine) goto done;
    CHECK(mine->arena == arena && !mine->arena_owned, "the trainer does not use the caller's arena");
    ert_memory_report r2;
    CHECK_OK(ert_trainer_memory(mine, &r2), ctx);
    CHECK(r2.total_bytes == mr.total_bytes, "caller-arena trainer reports %zu bytes, plan said %zu", r2.total_bytes,
          mr.total_bytes);
    long before = n_allocs;
    float first = 0, last = 0;
    for (int s = 0; s < 10; s++) {
        feed_cnn(own, mine);
        float la = 0, lb = 0;
        ert_status s1 = ert_trainer_step(own, &la), s2 = ert_trainer_step(mine, &lb);
        CHECK(s1 == ERT_OK && s2 == ERT_OK, "caller arena step %d: own %s, caller %s (%s)", s, ert_status_str(s1),
              ert_status_str(s2), ert_last_error(ctx));
        if (s1 || s2) break;
        CHECK(close_rel(la, lb, 1e-5), "caller arena step %d: loss %.8g, own arena %.8g", s, (double)lb, (double)la);
        if (s == 0) first = lb;
        last = lb;
    }
    CHECK(n_allocs == before, "%ld allocations during 10 steps with a caller arena", n_allocs - before);
    compare_params("caller arena after 10 steps", own, mine, 1e-4);
    float ea = 0, eb = 0;
    CHECK_OK(ert_trainer_eval(own, &ea), ctx);
    CHECK_OK(ert_trainer_eval(mine, &eb), ctx);
    CHECK(close_rel(ea, eb, 1e-5), "caller arena eval loss %.8g, own arena %.8g", (double)eb, (double)ea);
    printf("  caller arena (%zu bytes): 10 steps, loss %.4f -> %.4f, equal to an own-arena trainer\n", mr.total_bytes,
           (double)first, (double)last);
done:
    ert_trainer_free(own);
    ert_trainer_free(mine);
    /* still the caller's: the trainer must not have freed it */
    if (arena) CHECK(arena_free(arena), "the caller's arena was freed by the trainer");
    ert_model_free(m);
}

int main(int argc, char **argv) {
    int n = 0;
    if (argc > 1 && !strcmp(argv[1], "--cpu-selfcheck")) gdev = ERT_DEVICE_CPU;
    cudaError_t e = gdev == ERT_DEVICE_CPU ? cudaSuccess : cudaGetDeviceCount(&n);
    if (gdev == ERT_DEVICE_CUDA && (e != cudaSuccess || n == 0))
        return ert_test_skip("train_cuda_bad", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    ert_test_rng_init(&rng, "train_cuda_bad");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    gather_index();
    ce_target();
    bn_export();
    caller_arena();
    ert_context_free(ctx);
    return ert_test_finish("train_cuda_bad");
}
#endif

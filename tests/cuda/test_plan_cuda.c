/* CUDA session create: the plan cache and the fast create mode (label `gpu`).
 *
 * The model: x (1, 16, 14, 14) -> Conv 3x3 (32) + Relu -> Conv 3x3 (32) +
 * residual Add + Relu -> depthwise Conv 3x3 (group 32) -> 18 x (Conv 1x1
 * growing by 8 channels + Relu) -> Conv 1x1 (24) -> GlobalAveragePool = y;
 * channel counts multiples of 8 so f16 sessions take the channels-last and
 * fused-graph paths whose choices create measures; 22 conv shapes, 44
 * algorithm entries with the f16 filter-layout variants, past the backend's
 * first 32-entry table (conv_describe once kept a pointer into it across a
 * lookup that could grow it).
 * Per precision (f32, f16):
 * 1. tuned, cache folder fresh: create measures (n_searches > 0) and writes
 *    the file (ERT_PLAN_CACHE_WRITTEN);
 * 2. tuned again, same options: the file is used (ERT_PLAN_CACHE_USED),
 *    nothing is measured (n_searches == 0), n_cached > 0, and the outputs
 *    equal the first session's (same algorithms: 1e-6 of the largest
 *    |output|) on the same random input;
 * 3. one byte of the file flipped: ignored (a measured create again,
 *    WRITTEN), outputs as before;
 * 4. fast (heuristics only, no cache): n_searches == 0, mode FAST, outputs
 *    within tolerance of the tuned session's;
 * every session against a CPU session: f32 1e-4, f16 1e-2 of the largest
 * |output| (inputs and weights rounded to f16, f16 intermediates).
 * 5. an unwritable cache folder (non-root only): create succeeds,
 *    ERT_PLAN_CACHE_NOT_WRITTEN.
 * The same steps 1-4, f16 only, on an attention block: x (4, 128, 32) as
 * (heads, tokens, dim) -> q, k, v = MatMul(x, W) -> Softmax(q k^T / sqrt(32))
 * v -> MatMul(W_o) = y (4, 128, 8): what create measures there (cuBLASLt
 * GEMM algorithms, the attention path) comes from the cache too, so the
 * warm create measures nothing; its create phase times must add up to no
 * more than create_ms.
 * Without a GPU (or the CUDA backend) it returns 77: ctest SKIPPED. */
#include "edgert.h"
#include "testutil.h"
#include "cuda_probe.h"

#include <execinfo.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ert_context *ctx;
static ert_test_rng rng;

static int32_t weight(ert_builder *b, int nd, const int64_t *d, float scale) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    float *w = malloc((size_t)n * 4);
    ert_test_fill(&rng, w, n, -scale, scale);
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_F32, nd, d, w, &id), ctx);
    free(w);
    return id;
}

static ert_model *plan_model(void) {
    ert_builder *b;
    ert_model *m = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {1, 16, 14, 14}, w1[4] = {32, 16, 3, 3}, w2[4] = {32, 32, 3, 3}, wd[4] = {32, 1, 3, 3},
            w3[4] = {24, 32, 1, 1}, b32[1] = {32}, b24[1] = {24};
    int32_t x, c1, r1, c2, s2, r2, d, c3, y;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_conv2d(b, x, weight(b, 4, w1, 0.25f), weight(b, 1, b32, 0.1f), 1, 1, 1, 1, &c1), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", c1, &r1), ctx);
    CHECK_OK(ert_builder_conv2d(b, r1, weight(b, 4, w2, 0.1f), weight(b, 1, b32, 0.1f), 1, 1, 1, 1, &c2), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", c2, r1, &s2), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", s2, &r2), ctx);
    CHECK_OK(ert_builder_conv2d(b, r2, weight(b, 4, wd, 0.3f), -1, 1, 1, 1, 32, &d), ctx);
    for (int k = 0, cin = 32; k < 18; k++, cin += 8) {
        int64_t wk[4] = {cin + 8, cin, 1, 1}, bk[1] = {cin + 8};
        int32_t ck;
        CHECK_OK(ert_builder_conv2d(b, d, weight(b, 4, wk, sqrtf(3.0f / (float)cin)), weight(b, 1, bk, 0.1f), 1, 0, 1,
                                    1, &ck),
                 ctx);
        CHECK_OK(ert_builder_unary(b, "Relu", ck, &d), ctx);
    }
    w3[1] = 32 + 18 * 8;
    CHECK_OK(ert_builder_conv2d(b, d, weight(b, 4, w3, 0.1f), weight(b, 1, b24, 0.1f), 1, 0, 1, 1, &c3), ctx);
    CHECK_OK(ert_builder_unary(b, "GlobalAveragePool", c3, &y), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

static ert_model *attn_model(void) {
    ert_builder *b;
    ert_model *m = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[3] = {4, 128, 32}, wd[2] = {32, 32}, wo[2] = {32, 8}, sd[1] = {1};
    int32_t x, q, k, v, kt, sc, s2, p, o, y;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 3, xd, &x), ctx);
    CHECK_OK(ert_builder_binary(b, "MatMul", x, weight(b, 2, wd, 0.3f), &q), ctx);
    CHECK_OK(ert_builder_binary(b, "MatMul", x, weight(b, 2, wd, 0.3f), &k), ctx);
    CHECK_OK(ert_builder_binary(b, "MatMul", x, weight(b, 2, wd, 0.3f), &v), ctx);
    const int64_t perm[3] = {0, 2, 1};
    ert_attr pa = ERT_ATTR_IS("perm", perm, 3);
    CHECK_OK(ert_builder_node(b, "Transpose", NULL, &k, 1, &pa, 1, &kt, 1), ctx);
    CHECK_OK(ert_builder_binary(b, "MatMul", q, kt, &sc), ctx);
    float scale = 1.0f / sqrtf(32.0f);
    int32_t cs;
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_F32, 1, sd, &scale, &cs), ctx);
    CHECK_OK(ert_builder_binary(b, "Mul", sc, cs, &s2), ctx);
    ert_attr ax = ERT_ATTR_I("axis", -1);
    CHECK_OK(ert_builder_node(b, "Softmax", NULL, &s2, 1, &ax, 1, &p, 1), ctx);
    CHECK_OK(ert_builder_binary(b, "MatMul", p, v, &o), ctx);
    CHECK_OK(ert_builder_binary(b, "MatMul", o, weight(b, 2, wo, 0.3f), &y), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

/* the model under test: its input and output element counts */
static int NX = 16 * 14 * 14, NY = 24;
#define NMAX (4 * 128 * 32) /* the attention model's input, the largest */

/* Create with o, run on x, copy y out; stats into *st. false: no GPU session. */
static bool run_once(const ert_model *m, const ert_session_options *o, const float *x, float *y, ert_create_stats *st) {
    ert_session *s = NULL;
    ert_status rc = ert_session_create(m, o, &s);
    CHECK(rc == ERT_OK, "create (%s, mode %d): %s: %s", o->device == ERT_DEVICE_CPU ? "cpu" : "cuda",
          (int)o->create_mode, ert_status_str(rc), ert_last_error(ctx));
    if (rc != ERT_OK) return false;
    if (st) CHECK_OK(ert_session_create_stats(s, st), ctx);
    CHECK_OK(ert_session_set_input(s, 0, x, (size_t)NX * sizeof(float)), ctx);
    float *out = NULL;
    CHECK_OK(ert_session_output_data(s, 0, (const void **)&out), ctx);
    if (out) ert_test_poison(out, NY);
    CHECK_OK(ert_session_run(s), ctx);
    if (out) memcpy(y, out, NY * sizeof *y);
    ert_session_free(s);
    return true;
}

static double rel_max(const float *a, const float *b) {
    double m = 0, d = 0;
    for (int i = 0; i < NY; i++) {
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
        double e = fabs((double)a[i] - b[i]);
        d = e > d || e != e ? e : d;
    }
    return d / (m > 0 ? m : 1);
}

static void flip_one_byte(const char *dir) {
    char cmd[600];
    /* the one .ertplan in dir: flip a byte in its middle */
    snprintf(cmd, sizeof cmd,
             "f=$(ls %s/*.ertplan | head -1); n=$(stat -c %%s \"$f\"); "
             "printf '\\x5a' | dd of=\"$f\" bs=1 seek=$((n / 2)) conv=notrunc status=none",
             dir);
    CHECK(system(cmd) == 0, "flip a byte of the cache file");
}

static void test_precision(const ert_model *m, ert_dtype prec, const char *root) {
    const char *pn = prec == ERT_DTYPE_F16 ? "f16" : "f32";
    double tol = prec == ERT_DTYPE_F16 ? 1e-2 : 1e-4;
    char dir[400], what[128];
    snprintf(dir, sizeof dir, "%s/%s", root, pn);
    static float x[NMAX], ref[NMAX], y1[NMAX], y[NMAX];
    ert_test_fill(&rng, x, NX, -1, 1);
    ert_session_options cpu = {.device = ERT_DEVICE_CPU};
    if (!run_once(m, &cpu, x, ref, NULL)) return;
    ert_session_options o = {.device = ERT_DEVICE_CUDA, .precision = prec, .plan_cache_dir = dir};
    ert_create_stats st;
    /* 1. cold */
    if (!run_once(m, &o, x, y1, &st)) return;
    CHECK(st.plan_cache == ERT_PLAN_CACHE_WRITTEN && st.n_searches > 0 && st.mode == ERT_CREATE_TUNED,
          "%s cold: cache %d, %d searches (want WRITTEN, > 0)", pn, (int)st.plan_cache, st.n_searches);
    snprintf(what, sizeof what, "%s tuned (cold) vs CPU", pn);
    CHECK(rel_max(y1, ref) <= tol, "%s: %.3g > %.3g", what, rel_max(y1, ref), tol);
    printf("%s cold create: %.1f ms, %d searches\n", pn, st.create_ms, st.n_searches);
    /* 2. warm */
    if (!run_once(m, &o, x, y, &st)) return;
    CHECK(st.plan_cache == ERT_PLAN_CACHE_USED && st.n_searches == 0 && st.n_cached > 0,
          "%s warm: cache %d, %d searches, %d cached (want USED, 0, > 0)", pn, (int)st.plan_cache, st.n_searches,
          st.n_cached);
    CHECK(rel_max(y, y1) <= 1e-6, "%s warm vs cold outputs: %.3g", pn, rel_max(y, y1));
    printf("%s warm create: %.1f ms, %d answers from the cache (init %.1f, graph %.1f, upload %.1f, bind %.1f: "
           "measure %.1f, finalize %.1f)\n",
           pn, st.create_ms, st.n_cached, st.init_ms, st.graph_ms, st.upload_ms, st.bind_ms, st.measure_ms,
           st.finalize_ms);
    double parts = st.init_ms + st.graph_ms + st.upload_ms + st.bind_ms;
    CHECK(st.init_ms >= 0 && st.graph_ms >= 0 && st.upload_ms >= 0 && st.bind_ms >= 0 && st.measure_ms == 0 &&
              st.finalize_ms >= 0 && st.finalize_ms <= st.graph_ms + st.bind_ms + 0.01 &&
              parts <= st.create_ms + 0.01 && parts > 0,
          "%s warm create phases: %.2f + %.2f + %.2f + %.2f ms of %.2f (measure %.2f, finalize %.2f)", pn, st.init_ms,
          st.graph_ms, st.upload_ms, st.bind_ms, st.create_ms, st.measure_ms, st.finalize_ms);
    /* 3. corrupt file: measured again */
    flip_one_byte(dir);
    printf("%s corrupt file: creating\n", pn);
    fflush(stdout);
    if (!run_once(m, &o, x, y, &st)) return;
    CHECK(st.plan_cache == ERT_PLAN_CACHE_WRITTEN && st.n_searches > 0 && st.n_cached == 0,
          "%s corrupt file: cache %d, %d searches, %d cached (want WRITTEN, > 0, 0)", pn, (int)st.plan_cache,
          st.n_searches, st.n_cached);
    CHECK(rel_max(y, ref) <= tol, "%s after a corrupt cache vs CPU: %.3g", pn, rel_max(y, ref));
    /* 4. fast */
    ert_session_options f = {.device = ERT_DEVICE_CUDA, .precision = prec, .create_mode = ERT_CREATE_FAST};
    if (!run_once(m, &f, x, y, &st)) return;
    CHECK(st.n_searches == 0 && st.mode == ERT_CREATE_FAST && st.plan_cache == ERT_PLAN_CACHE_OFF,
          "%s fast: %d searches, mode %d, cache %d", pn, st.n_searches, (int)st.mode, (int)st.plan_cache);
    CHECK(rel_max(y, ref) <= tol, "%s fast vs CPU: %.3g", pn, rel_max(y, ref));
    CHECK(rel_max(y, y1) <= tol, "%s fast vs tuned: %.3g", pn, rel_max(y, y1));
    printf("%s fast create: %.1f ms\n", pn, st.create_ms);
}

/* the library's warnings (and with ERT_TEST_LOG=debug everything) on stderr */
static void log_stderr(void *user, ert_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "  [edgert %d] %s\n", (int)level, msg);
}

/* a crash prints where it happened (binary+offset, for addr2line) */
static void on_segv(int sig) {
    void *fr[48];
    int n = backtrace(fr, 48);
    static const char msg[] = "plan_cuda: crashed; backtrace:\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(128 + sig);
    backtrace_symbols_fd(fr, n, 2);
    _exit(128 + sig);
}

int main(void) {
    signal(SIGSEGV, on_segv);
    ert_test_rng_init(&rng, "plan_cuda");
    const char *lv = getenv("ERT_TEST_LOG");
    ert_context_options co = {.log = log_stderr,
                              .log_level = lv && !strcmp(lv, "debug") ? ERT_LOG_DEBUG : ERT_LOG_WARN};
    if (ert_context_create(&co, &ctx) != ERT_OK) return 1;
    ert_model *m = plan_model();
    int skip = ert_test_cuda_probe("plan_cuda", ctx, m);
    if (skip) return skip;
    char root[256], root2[300];
    snprintf(root, sizeof root, "/tmp/ert_plan_cuda_%d", (int)getpid());
    test_precision(m, ERT_DTYPE_F32, root);
    test_precision(m, ERT_DTYPE_F16, root);
    ert_model *ma = attn_model();
    NX = 4 * 128 * 32;
    NY = 4 * 128 * 8;
    snprintf(root2, sizeof root2, "%s/attn", root);
    test_precision(ma, ERT_DTYPE_F16, root2);
    ert_model_free(ma);
    NX = 16 * 14 * 14;
    NY = 24;
    if (geteuid() != 0) { /* 5. permissions bind: a read-only folder */
        char ro[300];
        snprintf(ro, sizeof ro, "%s/ro", root);
        mkdir(root, 0755);
        mkdir(ro, 0555);
        ert_session_options o = {.device = ERT_DEVICE_CUDA, .plan_cache_dir = ro};
        static float x[NMAX], y[NMAX];
        ert_test_fill(&rng, x, NX, -1, 1);
        ert_create_stats st;
        if (run_once(m, &o, x, y, &st))
            CHECK(st.plan_cache == ERT_PLAN_CACHE_NOT_WRITTEN, "read-only folder: cache %d", (int)st.plan_cache);
        chmod(ro, 0755);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_finish("plan_cuda");
}

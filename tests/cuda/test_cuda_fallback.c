/* CUDA sessions: the per-node CPU fallback and the kernels added for the zoo
 * (InstanceNormalization, CumSum), through the public API (label `gpu`).
 *
 * 1. Fallback: Conv -> Mish -> Conv, with ArgMax (i64) over channels as a
 *    second output. Mish and ArgMax have no CUDA kernel: the session must
 *    still be created on CUDA (device CUDA and AUTO; placements DEVICE and
 *    UNIFIED; f32 and f16), report them in ert_session_n_cpu_fallback, and
 *    match a CPU session on fresh random inputs (outputs poisoned before
 *    every run; run 1 captures the CUDA graph, later runs replay it). ArgMax
 *    is checked exactly against the argmax of the session's own float output
 *    (the same values it read). No cudaMalloc / cudaHostAlloc /
 *    cudaMallocManaged / cudaMallocHost / cudaMallocAsync during 50 runs
 *    (wrapped at link time, tests/cuda/CMakeLists.txt).
 * 2. InstanceNormalization and CumSum (every axis, exclusive x reverse, f32,
 *    f16 and i64 data) on random odd shapes against float64 references
 *    written here, with no node on the fallback (the CUDA kernels ran).
 * Tolerances, relative to the output's largest magnitude: f32 1e-4; f16
 * 1e-2 (inputs and weights rounded to f16 by the session, f16 intermediates;
 * the CPU session computes in f32), f16 CumSum 2e-2 (a running sum stored in
 * f16 at each step is rounded once more per element, never accumulated in
 * f16: the kernel sums in f32).
 * Without a GPU (or without the CUDA backend) it returns 77: ctest SKIPPED. */
#include "edgert.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#ifndef ERT_TEST_HAVE_CUDA
int main(void) { return ert_test_skip("cuda_fallback", "this build has no CUDA backend (ERT_CUDA=OFF)"); }
#else
#include "cuda_alloc_count.h"

static ert_context *ctx;
static ert_test_rng rng;
static int n_fallback_logs; /* "runs on the CPU inside the session" INFO lines */

static void on_log(void *user, ert_log_level level, const char *msg) {
    (void)user;
    if (level == ERT_LOG_INFO && strstr(msg, "runs on the CPU inside the session")) n_fallback_logs++;
}

static int64_t nel(int nd, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

static int32_t weight(ert_builder *b, int nd, const int64_t *d, float lo, float hi) {
    int64_t n = nel(nd, d);
    float *w = malloc((size_t)n * 4);
    ert_test_fill(&rng, w, n, lo, hi);
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_F32, nd, d, w, &id), ctx);
    free(w);
    return id;
}

static double max_abs(const double *r, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fabs(r[i]) > m ? fabs(r[i]) : m;
    return m > 0 ? m : 1;
}

/* Close within tol of the largest |ref|. */
static void check_close(const char *what, const float *got, const double *ref, int64_t n, double tol) {
    bool ok = ert_test_close(what, got, ref, n, tol * max_abs(ref, n), 0);
    CHECK(ok, "%s", what);
}

/* ------------------------------------------------------------------ 1. fallback */

/* x (2, 3, 9, 11) -> Conv 3x3 (5) -> Mish -> Conv 3x3 (4) = y; ArgMax(y, axis 1) = idx (2, 9, 11) */
static ert_model *fallback_model(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 3, 9, 11}, w1[4] = {5, 3, 3, 3}, b1[1] = {5}, w2[4] = {4, 5, 3, 3}, b2[1] = {4};
    int32_t x, c1, m, c2, am;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_conv2d(b, x, weight(b, 4, w1, -0.4f, 0.4f), weight(b, 1, b1, -0.2f, 0.2f), 1, 1, 1, 1, &c1), ctx);
    CHECK_OK(ert_builder_unary(b, "Mish", c1, &m), ctx);
    CHECK_OK(ert_builder_conv2d(b, m, weight(b, 4, w2, -0.4f, 0.4f), weight(b, 1, b2, -0.2f, 0.2f), 1, 1, 1, 1, &c2), ctx);
    ert_attr at[2] = {ERT_ATTR_I("axis", 1), ERT_ATTR_I("keepdims", 0)};
    CHECK_OK(ert_builder_node(b, "ArgMax", "argmax", &c2, 1, at, 2, &am, 1), ctx);
    CHECK_OK(ert_builder_output(b, c2, "y"), ctx);
    CHECK_OK(ert_builder_output(b, am, "idx"), ctx);
    ert_model *mod = NULL;
    CHECK_OK(ert_builder_finish(b, &mod), ctx);
    ert_builder_free(b);
    return mod;
}

static void test_fallback(ert_model *m, ert_device dev, ert_placement pl, ert_dtype prec) {
    char what[128];
    snprintf(what, sizeof what, "fallback %s placement %d %s", dev == ERT_DEVICE_AUTO ? "AUTO" : "CUDA", (int)pl,
             ert_dtype_name(prec));
    ert_session_options go = {.device = dev, .placement = pl, .precision = prec, .batch = 2};
    ert_session_options co = {.device = ERT_DEVICE_CPU, .batch = 2};
    ert_session *gs = NULL, *cs = NULL;
    int logs0 = n_fallback_logs;
    CHECK_OK(ert_session_create(m, &go, &gs), ctx);
    CHECK_OK(ert_session_create(m, &co, &cs), ctx);
    if (!gs || !cs) goto done;
    CHECK(ert_session_n_cpu_fallback(gs) >= 1, "%s: %d nodes on the CPU fallback (Mish and ArgMax have no CUDA kernel)",
          what, ert_session_n_cpu_fallback(gs));
    CHECK(n_fallback_logs - logs0 == ert_session_n_cpu_fallback(gs), "%s: %d fallback log lines for %d nodes of distinct ops",
          what, n_fallback_logs - logs0, ert_session_n_cpu_fallback(gs));
    CHECK(ert_session_n_cpu_fallback(cs) == 0, "%s: a CPU session reports a fallback", what);
    ert_memory_report mem;
    CHECK_OK(ert_session_memory(gs, &mem), ctx);
    int64_t xn = 2 * 3 * 9 * 11, yn = 2 * 4 * 9 * 11, in_ = 2 * 9 * 11;
    float *x = malloc((size_t)xn * 4);
    double *ref = malloc((size_t)yn * sizeof *ref);
    for (int rep = 0; rep < 53; rep++) {
        ert_test_fill(&rng, x, xn, -1, 1);
        CHECK_OK(ert_session_set_input(gs, 0, x, (size_t)xn * 4), ctx);
        const float *y = NULL;
        const int64_t *idx = NULL;
        CHECK_OK(ert_session_output_data(gs, 0, (const void **)&y), ctx);
        CHECK_OK(ert_session_output_data(gs, 1, (const void **)&idx), ctx);
        ert_test_poison((float *)y, yn);
        memset((void *)idx, 0xA5, (size_t)in_ * 8);
        long a0 = n_allocs;
        ert_status st = ert_session_run(gs);
        if (rep >= 3) CHECK(n_allocs == a0, "%s: run %d made %ld CUDA allocations", what, rep, n_allocs - a0);
        CHECK(st == ERT_OK, "%s: run: %s (%s)", what, ert_status_str(st), ert_last_error(ctx));
        if (st != ERT_OK) break;
        if (rep >= 3 && rep < 50) continue; /* allocation count only */
        CHECK_OK(ert_session_set_input(cs, 0, x, (size_t)xn * 4), ctx);
        CHECK_OK(ert_session_run(cs), ctx);
        const float *cy = NULL;
        CHECK_OK(ert_session_output_data(cs, 0, (const void **)&cy), ctx);
        for (int64_t i = 0; i < yn; i++) ref[i] = cy[i];
        char w2[160];
        snprintf(w2, sizeof w2, "%s run %d: y vs CPU", what, rep);
        check_close(w2, y, ref, yn, prec == ERT_DTYPE_F16 ? 1e-2 : 1e-4);
        int64_t bad = -1;
        for (int64_t n = 0; n < 2; n++)
            for (int64_t p = 0; p < 99; p++) {
                int64_t best = 0;
                for (int64_t c = 1; c < 4; c++)
                    if (y[(n * 4 + c) * 99 + p] > y[(n * 4 + best) * 99 + p]) best = c;
                if (idx[n * 99 + p] != best && bad < 0) bad = n * 99 + p;
            }
        CHECK(bad < 0, "%s run %d: ArgMax at %lld is %lld, the output's argmax is different", what, rep, (long long)bad,
              bad >= 0 ? (long long)idx[bad] : 0LL);
    }
    free(x);
    free(ref);
done:
    ert_session_free(gs);
    ert_session_free(cs);
}

/* ------------------------------------------------------------------ 2. new kernels */

/* A model of one node `op` over input x and weights ws (both already in b),
 * output "y". Frees b. */
static ert_model *one_node(ert_builder *b, const char *op, int32_t x, const int32_t *ws, int n_w, const ert_attr *at,
                           int n_at) {
    int32_t ins[4] = {x, n_w > 0 ? ws[0] : -1, n_w > 1 ? ws[1] : -1, -1}, y = -1;
    CHECK_OK(ert_builder_node(b, op, NULL, ins, 1 + n_w, at, n_at, &y, 1), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

/* One-node model: InstanceNormalization(x, scale, B) on (N, C, spatial...) */
static void test_instancenorm(ert_dtype prec) {
    for (int rep = 0; rep < 6; rep++) {
        int nd = 3 + rep % 3;
        int64_t d[5] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 7)};
        for (int i = 2; i < nd; i++) d[i] = ert_test_int(&rng, 1, 13) | 1;
        int64_t cd[1] = {d[1]}, n = nel(nd, d), sz = n / (d[0] * d[1]);
        float eps = rep % 2 ? 1e-5f : 0.1f;
        float *sc = malloc((size_t)d[1] * 4), *bi = malloc((size_t)d[1] * 4), *x = malloc((size_t)n * 4);
        ert_test_fill(&rng, sc, d[1], 0.5f, 2);
        ert_test_fill(&rng, bi, d[1], -1, 1);
        ert_builder *b;
        CHECK_OK(ert_builder_create(ctx, &b), ctx);
        int32_t xi, w[2];
        CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, nd, d, &xi), ctx);
        CHECK_OK(ert_builder_weight(b, "scale", ERT_DTYPE_F32, 1, cd, sc, &w[0]), ctx);
        CHECK_OK(ert_builder_weight(b, "B", ERT_DTYPE_F32, 1, cd, bi, &w[1]), ctx);
        ert_attr at = ERT_ATTR_F("epsilon", eps);
        ert_model *m = one_node(b, "InstanceNormalization", xi, w, 2, &at, 1);
        ert_session_options o = {.device = ERT_DEVICE_CUDA, .precision = prec};
        ert_session *s = NULL;
        if (m) CHECK_OK(ert_session_create(m, &o, &s), ctx);
        if (s) {
            CHECK(ert_session_n_cpu_fallback(s) == 0, "instancenorm: %d nodes fell back", ert_session_n_cpu_fallback(s));
            double *ref = malloc((size_t)n * sizeof *ref);
            for (int run = 0; run < 2; run++) {
                ert_test_fill(&rng, x, n, -3, 5);
                /* f16 sessions see x rounded to f16: the reference uses what they see */
                for (int64_t i = 0; i < n && prec == ERT_DTYPE_F16; i++) x[i] = ert_f16_to_f32(ert_f32_to_f16(x[i]));
                for (int64_t pl = 0; pl < d[0] * d[1]; pl++) {
                    const float *xp = x + pl * sz;
                    double mu = 0, v = 0;
                    for (int64_t i = 0; i < sz; i++) mu += xp[i];
                    mu /= (double)sz;
                    for (int64_t i = 0; i < sz; i++) v += (xp[i] - mu) * (xp[i] - mu);
                    v /= (double)sz;
                    int64_t c = pl % d[1];
                    for (int64_t i = 0; i < sz; i++) ref[pl * sz + i] = (xp[i] - mu) / sqrt(v + eps) * sc[c] + bi[c];
                }
                CHECK_OK(ert_session_set_input(s, 0, x, (size_t)n * 4), ctx);
                const float *got = NULL;
                CHECK_OK(ert_session_output_data(s, 0, (const void **)&got), ctx);
                ert_test_poison((float *)got, n);
                CHECK_OK(ert_session_run(s), ctx);
                char what[96];
                snprintf(what, sizeof what, "cuda instancenorm %s rank %d rep %d run %d", ert_dtype_name(prec), nd, rep, run);
                check_close(what, got, ref, n, prec == ERT_DTYPE_F16 ? 1e-2 : 1e-4);
            }
            free(ref);
            ert_session_free(s);
        }
        ert_model_free(m);
        free(sc);
        free(bi);
        free(x);
    }
}

/* One-node model: CumSum(x, axis) with x f32 (f32/f16 sessions) or i64. */
static void test_cumsum(ert_dtype prec, bool i64) {
    for (int rep = 0; rep < 12; rep++) {
        int nd = ert_test_int(&rng, 1, 4);
        int64_t d[4];
        for (int i = 0; i < nd; i++) d[i] = ert_test_int(&rng, 1, 9) | 1;
        int64_t n = nel(nd, d);
        int axis = ert_test_int(&rng, 0, nd - 1);
        int64_t ax = rep % 2 ? axis - nd : axis;
        bool excl = rep % 4 >= 2, rev = (rep / 4) % 2;
        ert_dtype dt = i64 ? ERT_DTYPE_I64 : ERT_DTYPE_F32;
        ert_builder *b;
        CHECK_OK(ert_builder_create(ctx, &b), ctx);
        int32_t xi, ai;
        CHECK_OK(ert_builder_input(b, "x", dt, nd, d, &xi), ctx);
        CHECK_OK(ert_builder_weight(b, "axis", ERT_DTYPE_I64, 0, NULL, &ax, &ai), ctx);
        ert_attr at[2] = {ERT_ATTR_I("exclusive", excl), ERT_ATTR_I("reverse", rev)};
        ert_model *m = one_node(b, "CumSum", xi, &ai, 1, at, 2);
        ert_session_options o = {.device = ERT_DEVICE_CUDA, .precision = prec};
        ert_session *s = NULL;
        if (m) CHECK_OK(ert_session_create(m, &o, &s), ctx);
        char w[128];
        snprintf(w, sizeof w, "cuda cumsum %s%s rank %d axis %lld excl %d rev %d", ert_dtype_name(prec), i64 ? " i64" : "",
                 nd, (long long)ax, excl, rev);
        if (s) {
            CHECK(ert_session_n_cpu_fallback(s) == 0, "%s: %d nodes fell back", w, ert_session_n_cpu_fallback(s));
            float *xf = malloc((size_t)n * 4);
            int64_t *xl = malloc((size_t)n * 8);
            double *ref = malloc((size_t)n * sizeof *ref);
            ert_test_fill(&rng, xf, n, -2, 2);
            for (int64_t i = 0; i < n; i++) {
                if (prec == ERT_DTYPE_F16) xf[i] = ert_f16_to_f32(ert_f32_to_f16(xf[i]));
                xl[i] = (int64_t)(xf[i] * 1e12);
            }
            int64_t outer = 1, inner = 1, len = d[axis];
            for (int i = 0; i < nd; i++) {
                if (i < axis) outer *= d[i];
                else if (i > axis) inner *= d[i];
            }
            for (int64_t o2 = 0; o2 < outer; o2++)
                for (int64_t in = 0; in < inner; in++)
                    for (int64_t j = 0; j < len; j++) {
                        double acc = 0;
                        for (int64_t k = 0; k < len; k++)
                            if (rev ? (excl ? k > j : k >= j) : (excl ? k < j : k <= j)) {
                                int64_t e = (o2 * len + k) * inner + in;
                                acc += i64 ? (double)xl[e] : xf[e];
                            }
                        ref[(o2 * len + j) * inner + in] = acc;
                    }
            CHECK_OK(ert_session_set_input(s, 0, i64 ? (void *)xl : (void *)xf, (size_t)n * (i64 ? 8 : 4)), ctx);
            const void *got = NULL;
            CHECK_OK(ert_session_output_data(s, 0, &got), ctx);
            memset((void *)got, 0xFF, (size_t)n * (i64 ? 8 : 4));
            CHECK_OK(ert_session_run(s), ctx);
            if (i64) {
                int64_t bad = -1;
                for (int64_t i = 0; i < n && bad < 0; i++)
                    if ((double)((const int64_t *)got)[i] != ref[i]) bad = i; /* sums < 2^53: exact */
                CHECK(bad < 0, "%s: element %lld wrong", w, (long long)bad);
            } else {
                check_close(w, got, ref, n, prec == ERT_DTYPE_F16 ? 2e-2 : 1e-5);
            }
            free(xf);
            free(xl);
            free(ref);
            ert_session_free(s);
        }
        ert_model_free(m);
    }
}

int main(void) {
    ert_test_rng_init(&rng, "cuda_fallback");
    ert_context_options co = {.log = on_log, .log_level = ERT_LOG_INFO};
    if (ert_context_create(&co, &ctx) != ERT_OK) return 1;
    int64_t d[1] = {4};
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int32_t x, y;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 1, d, &x), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", x, &y), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *probe = NULL;
    CHECK_OK(ert_builder_finish(b, &probe), ctx);
    ert_builder_free(b);
    ert_session_options o = {.device = ERT_DEVICE_CUDA};
    ert_session *s = NULL;
    ert_status st = probe ? ert_session_create(probe, &o, &s) : ERT_E_INTERNAL;
    ert_session_free(s);
    ert_model_free(probe);
    if (st == ERT_E_CUDA || st == ERT_E_UNSUPPORTED) {
        char why[600];
        snprintf(why, sizeof why, "%s", ert_last_error(ctx));
        ert_context_free(ctx);
        return ert_test_skip("cuda_fallback", why);
    }
    CHECK(st == ERT_OK, "probe session: %s (%s)", ert_status_str(st), ert_last_error(ctx));
    ert_model *m = fallback_model();
    static const ert_dtype precs[2] = {ERT_DTYPE_F32, ERT_DTYPE_F16};
    for (int k = 0; m && k < 2; k++) {
        test_fallback(m, ERT_DEVICE_CUDA, ERT_PLACEMENT_DEVICE, precs[k]);
        test_fallback(m, ERT_DEVICE_AUTO, ERT_PLACEMENT_UNIFIED, precs[k]);
        test_instancenorm(precs[k]);
        test_cumsum(precs[k], false);
    }
    test_cumsum(ERT_DTYPE_F32, true);
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_finish("cuda_fallback");
}
#endif

/* NaN propagation (issue 13 item 5): NaN in gives NaN out, as in PyTorch and
 * numpy, for Relu, LeakyRelu, Clip, HardSigmoid, HardSwish, Max, Min,
 * MaxPool, GlobalMaxPool, ReduceMax, ArgMax and the fused epilogues (Conv +
 * bias + Relu/Clip, Gemm + Relu). Each op runs on fresh random inputs holding
 * NaN (and +-inf where the op is element-wise) against a float64 reference:
 * NaN positions must match exactly, other values to 1e-4. (onnxruntime is not
 * the oracle here: its MaxPool and GlobalMaxPool drop some NaNs.)
 * Then end to end: a NaN pixel in MNIST makes every logit NaN, and
 * ert_session_run_check_finite names the first node whose output is not
 * finite. `test_nan --write DIR` writes the model and input of the CLI test
 * (tests/unit/CMakeLists.txt). */
#include "runtime_internal.h" /* ert_session_n_scheduled: the fused cases must really fuse */
#include "npy.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
static ert_test_rng rng;

enum { N = 2, C = 3, H = 7, W = 9, NX = N * C * H * W };

/* x: uniform [-2, 2] with about 10% NaN and, when infs, 3% +-inf */
static void fill(float *x, int64_t n, bool infs) {
    for (int64_t i = 0; i < n; i++) {
        double u = ert_test_uniform(&rng, 0, 1);
        x[i] = u < 0.10 ? NAN : (infs && u < 0.13) ? (u < 0.115 ? INFINITY : -INFINITY)
                                                   : (float)ert_test_uniform(&rng, -2, 2);
    }
}

static int64_t numel(int nd, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

static double clampd(double v, double lo, double hi) { return isnan(v) ? v : v < lo ? lo : v > hi ? hi : v; }

/* got (f32) against ref: same NaN positions, other values close */
static void compare(const char *what, const float *got, const double *ref, int64_t n) {
    int64_t bad = 0, first = -1, nans = 0;
    for (int64_t i = 0; i < n; i++) {
        bool ok = isnan(ref[i]) ? isnan(got[i])
                  : isinf(ref[i]) ? got[i] == ref[i]
                                  : !isnan(got[i]) && fabs(got[i] - ref[i]) <= 1e-4 + 1e-4 * fabs(ref[i]);
        nans += isnan(ref[i]);
        if (!ok && bad++ == 0) first = i;
    }
    CHECK(bad == 0, "%s: %lld of %lld values wrong, first at %lld: got %g, reference %g", what, (long long)bad,
          (long long)n, (long long)first, first >= 0 ? got[first] : 0.0, first >= 0 ? ref[first] : 0.0);
    CHECK(nans > 0, "%s: the reference has no NaN: the case tests nothing", what);
}

static int32_t weight(ert_builder *b, int nd, const int64_t *d, const float *v) {
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_F32, nd, d, v, &id), ctx);
    return id;
}

/* b with output y as a model (b is freed) */
static ert_model *finish(ert_builder *b, int32_t y) {
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

/* Finishes b with output y, runs it on the CPU on inputs x (and z), copies
 * the output into out (n_out values); returns the number of scheduled nodes. */
static int run(ert_builder *b, int32_t y, const float *x, const float *z, void *out, size_t out_bytes) {
    ert_model *m = finish(b, y);
    ert_session *s = NULL;
    if (m) CHECK_OK(ert_session_create(m, NULL, &s), ctx);
    int n_sched = -1;
    if (s) {
        n_sched = ert_session_n_scheduled(s);
        ert_tensor_info ti;
        CHECK_OK(ert_session_input_info(s, 0, &ti), ctx);
        CHECK_OK(ert_session_set_input(s, 0, x, (size_t)numel(ti.ndim, ti.dims) * sizeof(float)), ctx);
        if (z) {
            CHECK_OK(ert_session_input_info(s, 1, &ti), ctx);
            CHECK_OK(ert_session_set_input(s, 1, z, (size_t)numel(ti.ndim, ti.dims) * sizeof(float)), ctx);
        }
        CHECK_OK(ert_session_run(s), ctx);
        CHECK_OK(ert_session_get_output(s, 0, out, out_bytes), ctx);
    }
    ert_session_free(s);
    ert_model_free(m);
    return n_sched;
}

static ert_builder *start(int32_t *x, int nd, const int64_t *d) {
    ert_builder *b = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, nd, d, x), ctx);
    return b;
}

/* ------------------------------------------------------------ element-wise */

static void elementwise(void) {
    static const int64_t d[4] = {N, C, H, W};
    float x[NX], z[NX], y[NX];
    double ref[NX];
    static const char *ops[] = {"Relu", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "Max", "Min"};
    for (int k = 0; k < 7; k++) {
        fill(x, NX, true);
        fill(z, NX, true);
        int32_t xi, zi = -1, yi = -1;
        ert_builder *b = start(&xi, 4, d);
        bool two = k >= 5;
        if (two) CHECK_OK(ert_builder_input(b, "z", ERT_DTYPE_F32, 4, d, &zi), ctx);
        if (k == 2) { /* Clip(x, -0.5, 0.7): bounds are constant inputs */
            float lo = -0.5f, hi = 0.7f;
            int32_t in[3] = {xi, weight(b, 0, NULL, &lo), weight(b, 0, NULL, &hi)};
            CHECK_OK(ert_builder_node(b, "Clip", NULL, in, 3, NULL, 0, &yi, 1), ctx);
        } else if (k == 1) {
            ert_attr a = ERT_ATTR_F("alpha", 0.1f);
            CHECK_OK(ert_builder_node(b, "LeakyRelu", NULL, &xi, 1, &a, 1, &yi, 1), ctx);
        } else if (k == 3) {
            ert_attr a[2] = {ERT_ATTR_F("alpha", 0.2f), ERT_ATTR_F("beta", 0.5f)};
            CHECK_OK(ert_builder_node(b, "HardSigmoid", NULL, &xi, 1, a, 2, &yi, 1), ctx);
        } else if (two) {
            CHECK_OK(ert_builder_binary(b, ops[k], xi, zi, &yi), ctx);
        } else {
            CHECK_OK(ert_builder_unary(b, ops[k], xi, &yi), ctx);
        }
        run(b, yi, x, two ? z : NULL, y, sizeof y);
        for (int i = 0; i < NX; i++) {
            double v = x[i], u = z[i];
            switch (k) {
            case 0: ref[i] = isnan(v) ? v : v > 0 ? v : 0; break;
            case 1: ref[i] = isnan(v) ? v : v >= 0 ? v : 0.1 * v; break;
            case 2: ref[i] = clampd(v, -0.5, 0.7); break;
            case 3: ref[i] = clampd(0.2 * v + 0.5, 0, 1); break;
            case 4: ref[i] = v * clampd(v / 6 + 0.5, 0, 1); break; /* -inf * 0 = NaN, as PyTorch */
            case 5: ref[i] = isnan(v) || isnan(u) ? NAN : v > u ? v : u; break;
            default: ref[i] = isnan(v) || isnan(u) ? NAN : v < u ? v : u; break;
            }
        }
        compare(ops[k], y, ref, NX);
    }
}

/* ------------------------------------------------------------ pooling, reductions */

static void pools(void) {
    static const int64_t d[4] = {N, C, H, W};
    float x[NX];
    /* MaxPool 3x3 / 2, pad 1: (7, 9) -> (4, 5) */
    enum { OH = 4, OW = 5 };
    {
        fill(x, NX, true);
        int32_t xi, yi;
        ert_builder *b = start(&xi, 4, d);
        CHECK_OK(ert_builder_maxpool2d(b, xi, 3, 2, 1, &yi), ctx);
        float y[N * C * OH * OW];
        double ref[N * C * OH * OW];
        run(b, yi, x, NULL, y, sizeof y);
        for (int p = 0; p < N * C; p++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double m = -INFINITY;
                    for (int kh = 0; kh < 3; kh++)
                        for (int kw = 0; kw < 3; kw++) {
                            int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            double v = x[(p * H + ih) * W + iw];
                            if (isnan(v) || v > m) m = isnan(m) ? m : v;
                        }
                    ref[(p * OH + oh) * OW + ow] = m;
                }
        compare("MaxPool 3x3/2", y, ref, N * C * OH * OW);
    }
    /* GlobalMaxPool: NaN on some planes only (a NaN in every plane would
     * make the reference all NaN) */
    {
        for (int i = 0; i < NX; i++) x[i] = (float)ert_test_uniform(&rng, -2, 2);
        for (int p = 0; p < N * C; p += 2) x[p * H * W + ert_test_int(&rng, 0, H * W - 1)] = NAN;
        int32_t xi, yi;
        ert_builder *b = start(&xi, 4, d);
        CHECK_OK(ert_builder_unary(b, "GlobalMaxPool", xi, &yi), ctx);
        float y[N * C];
        double ref[N * C];
        run(b, yi, x, NULL, y, sizeof y);
        for (int p = 0; p < N * C; p++) {
            double m = -INFINITY;
            for (int i = 0; i < H * W; i++) m = isnan(m) || isnan(x[p * H * W + i]) ? NAN : fmax(m, x[p * H * W + i]);
            ref[p] = m;
        }
        compare("GlobalMaxPool", y, ref, N * C);
    }
    /* ReduceMax over the last axis (keepdims 0) and ArgMax over it: a row
     * with a NaN gives NaN, and ArgMax the first NaN's index (numpy) */
    for (int arg = 0; arg < 2; arg++) {
        for (int i = 0; i < NX; i++) x[i] = (float)ert_test_uniform(&rng, -2, 2);
        for (int r = 0; r < N * C * H; r += 3) x[r * W + ert_test_int(&rng, 0, W - 1)] = NAN;
        for (int r = 0; r < N * C * H; r += 5) x[r * W + ert_test_int(&rng, 0, W - 1)] = NAN;
        int32_t xi, yi;
        ert_builder *b = start(&xi, 4, d);
        if (arg) {
            ert_attr a[2] = {ERT_ATTR_I("axis", 3), ERT_ATTR_I("keepdims", 0)};
            CHECK_OK(ert_builder_node(b, "ArgMax", NULL, &xi, 1, a, 2, &yi, 1), ctx);
        } else {
            int64_t ax = 3, one = 1;
            int32_t axes;
            CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_I64, 1, &one, &ax, &axes), ctx);
            int32_t in[2] = {xi, axes};
            ert_attr a = ERT_ATTR_I("keepdims", 0);
            CHECK_OK(ert_builder_node(b, "ReduceMax", NULL, in, 2, &a, 1, &yi, 1), ctx);
        }
        enum { R = N * C * H };
        float y[R];
        int64_t yarg[R];
        double ref[R];
        run(b, yi, x, NULL, arg ? (void *)yarg : (void *)y, arg ? sizeof yarg : sizeof y);
        int bad = 0, first_bad = -1;
        for (int r = 0; r < R; r++) {
            double m = -INFINITY;
            int64_t at = 0;
            for (int i = 0; i < W; i++) {
                double v = x[r * W + i];
                if (isnan(m)) break;
                if (isnan(v) || v > m) m = v, at = i;
            }
            ref[r] = m;
            if (arg && yarg[r] != at && bad++ == 0) first_bad = r;
        }
        if (arg) CHECK(bad == 0, "ArgMax: %d rows wrong, first %d: got %lld", bad, first_bad,
                       first_bad >= 0 ? (long long)yarg[first_bad] : 0LL);
        else compare("ReduceMax", y, ref, R);
    }
}

/* ------------------------------------------------------------ fused epilogues */

/* Conv(3 -> 4, 3x3, pad 1) + bias, then Relu or Clip(0, 6): one scheduled
 * node on the CPU (the fused epilogue). NaN only (inf * 0-weight sums would
 * test the summation order, not the NaN rule). */
static void fused_conv(void) {
    static const int64_t d[4] = {N, C, H, W}, wd[4] = {4, C, 3, 3}, bd[1] = {4};
    enum { K = 4, NY = N * K * H * W };
    for (int clip = 0; clip < 2; clip++) {
        float x[NX], w[K * C * 9], bias[K], y[NY];
        double ref[NY];
        for (int i = 0; i < NX; i++)
            x[i] = ert_test_uniform(&rng, 0, 1) < 0.01 ? NAN : (float)ert_test_uniform(&rng, -2, 2);
        x[ert_test_int(&rng, 0, NX - 1)] = NAN; /* at least one, whatever the draw */
        for (int i = 0; i < K * C * 9; i++) w[i] = (float)ert_test_uniform(&rng, -1, 1);
        for (int i = 0; i < K; i++) bias[i] = (float)ert_test_uniform(&rng, -1, 1);
        int32_t xi, yi, ci;
        ert_builder *b = start(&xi, 4, d);
        CHECK_OK(ert_builder_conv2d(b, xi, weight(b, 4, wd, w), weight(b, 1, bd, bias), 1, 1, 1, 1, &ci), ctx);
        if (clip) {
            float lo = 0, hi = 6;
            int32_t in[3] = {ci, weight(b, 0, NULL, &lo), weight(b, 0, NULL, &hi)};
            CHECK_OK(ert_builder_node(b, "Clip", NULL, in, 3, NULL, 0, &yi, 1), ctx);
        } else {
            CHECK_OK(ert_builder_unary(b, "Relu", ci, &yi), ctx);
        }
        int ns = run(b, yi, x, NULL, y, sizeof y);
        CHECK(ns == 1, "conv + %s: %d scheduled nodes, expected 1 (fused)", clip ? "Clip" : "Relu", ns);
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++)
                for (int oh = 0; oh < H; oh++)
                    for (int ow = 0; ow < W; ow++) {
                        double acc = bias[k];
                        for (int c = 0; c < C; c++)
                            for (int kh = 0; kh < 3; kh++)
                                for (int kw = 0; kw < 3; kw++) {
                                    int ih = oh - 1 + kh, iw = ow - 1 + kw;
                                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                    acc += (double)x[((n * C + c) * H + ih) * W + iw] * w[((k * C + c) * 3 + kh) * 3 + kw];
                                }
                        ref[((n * K + k) * H + oh) * W + ow] = clip ? clampd(acc, 0, 6) : clampd(acc, 0, INFINITY);
                    }
        compare(clip ? "Conv + bias + Clip(0, 6), fused" : "Conv + bias + Relu, fused", y, ref, NY);
    }
}

/* y = Relu(x @ w^T + b), x (5, 12), w (7, 12): Gemm with its Relu fused */
static void fused_gemm(void) {
    enum { M = 5, KD = 12, NO = 7 };
    static const int64_t d[2] = {M, KD}, wd[2] = {NO, KD}, bd[1] = {NO};
    float x[M * KD], w[NO * KD], bias[NO], y[M * NO];
    double ref[M * NO];
    for (int i = 0; i < M * KD; i++) x[i] = (float)ert_test_uniform(&rng, -2, 2);
    x[ert_test_int(&rng, 0, KD - 1)] = NAN; /* row 0 */
    x[3 * KD + ert_test_int(&rng, 0, KD - 1)] = NAN; /* row 3 */
    for (int i = 0; i < NO * KD; i++) w[i] = (float)ert_test_uniform(&rng, -1, 1);
    for (int i = 0; i < NO; i++) bias[i] = (float)ert_test_uniform(&rng, -1, 1);
    int32_t xi, li, yi;
    ert_builder *b = start(&xi, 2, d);
    CHECK_OK(ert_builder_linear(b, xi, weight(b, 2, wd, w), weight(b, 1, bd, bias), &li), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", li, &yi), ctx);
    int ns = run(b, yi, x, NULL, y, sizeof y);
    CHECK(ns == 1, "Gemm + Relu: %d scheduled nodes, expected 1 (fused)", ns);
    for (int m = 0; m < M; m++)
        for (int o = 0; o < NO; o++) {
            double acc = bias[o];
            for (int k = 0; k < KD; k++) acc += (double)x[m * KD + k] * w[o * KD + k];
            ref[m * NO + o] = clampd(acc, 0, INFINITY);
        }
    compare("Gemm + bias + Relu, fused", y, ref, M * NO);
}

/* ------------------------------------------------------------ end to end */

/* MNIST (Conv, Relu, MaxPool, MatMul): one NaN pixel, and an all-NaN frame,
 * give NaN in every logit (before: Relu turned them into plausible logits).
 * ert_session_run_check_finite names the first scheduled node (it reads the
 * input). */
static void mnist(void) {
    const char *shared = ert_test_shared_dir();
    if (!shared) { /* a clone without ../shared beside it: the rest of the test still runs */
        printf("note: ../shared not found: the MNIST end-to-end check skipped\n");
        return;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/models/mnist_8/model.onnx", shared);
    ert_model *m = NULL;
    if (ert_model_load_file(ctx, path, &m) != ERT_OK) {
        CHECK(0, "cannot load %s: %s", path, ert_last_error(ctx));
        return;
    }
    ert_session *s = NULL;
    CHECK_OK(ert_session_create(m, NULL, &s), ctx);
    float x[28 * 28], y[10];
    for (int all = 0; s && all < 2; all++) {
        for (int i = 0; i < 28 * 28; i++) x[i] = all ? NAN : (float)ert_test_uniform(&rng, 0, 255);
        int at = ert_test_int(&rng, 0, 28 * 28 - 1);
        x[at] = NAN;
        CHECK_OK(ert_session_set_input(s, 0, x, sizeof x), ctx);
        CHECK_OK(ert_session_run(s), ctx);
        CHECK_OK(ert_session_get_output(s, 0, y, sizeof y), ctx);
        int nans = 0;
        for (int i = 0; i < 10; i++) nans += isnan(y[i]);
        CHECK(nans == 10, "%s: %d of 10 logits NaN", all ? "all-NaN frame" : "one NaN pixel", nans);
        ert_nonfinite nf;
        CHECK(ert_session_run_check_finite(s, &nf) == ERT_E_NUMERIC, "check_finite: %s", ert_last_error(ctx));
        CHECK(nf.node_index == 0 && nf.count > 0 && nf.first_index >= 0 && isnan(nf.first_value),
              "first non-finite node #%d (%s), count %lld", nf.node_index, nf.node ? nf.node : "-", (long long)nf.count);
    }
    /* finite frame: OK, node_index -1, outputs as run gives them */
    for (int i = 0; s && i < 28 * 28; i++) x[i] = (float)ert_test_uniform(&rng, 0, 255);
    if (s) {
        float y2[10];
        ert_nonfinite nf;
        CHECK_OK(ert_session_set_input(s, 0, x, sizeof x), ctx);
        CHECK_OK(ert_session_run(s), ctx);
        CHECK_OK(ert_session_get_output(s, 0, y, sizeof y), ctx);
        CHECK_OK(ert_session_run_check_finite(s, &nf), ctx);
        CHECK_OK(ert_session_get_output(s, 0, y2, sizeof y2), ctx);
        CHECK(nf.node_index == -1 && memcmp(y, y2, sizeof y) == 0, "finite run: node %d, outputs %s", nf.node_index,
              memcmp(y, y2, sizeof y) ? "differ" : "same");
    }
    ert_session_free(s);
    ert_model_free(m);
}

/* x (1, L) -> Relu 'relu0' -> Sub 1 'sub1' -> Log 'log2' -> Exp 'exp3' -> y.
 * Log makes the first non-finite values (log of <= 0), where relu(x) <= 1. */
enum { L = 16 };
static ert_model *log_chain(void) {
    static const int64_t d[2] = {1, L};
    int32_t xi, r, sb, lg, ex;
    float one = 1.0f;
    ert_builder *b = start(&xi, 2, d);
    CHECK_OK(ert_builder_node(b, "Relu", "relu0", &xi, 1, NULL, 0, &r, 1), ctx);
    int32_t in[2] = {r, weight(b, 0, NULL, &one)};
    CHECK_OK(ert_builder_node(b, "Sub", "sub1", in, 2, NULL, 0, &sb, 1), ctx);
    CHECK_OK(ert_builder_node(b, "Log", "log2", &sb, 1, NULL, 0, &lg, 1), ctx);
    CHECK_OK(ert_builder_node(b, "Exp", "exp3", &lg, 1, NULL, 0, &ex, 1), ctx);
    return finish(b, ex);
}

static void check_finite_names_node(void) {
    ert_model *m = log_chain();
    ert_session *s = NULL;
    if (m) CHECK_OK(ert_session_create(m, NULL, &s), ctx);
    float x[L];
    int64_t want = 0, first = -1;
    for (int i = 0; i < L; i++) {
        x[i] = (float)ert_test_uniform(&rng, -1, 4);
        if ((x[i] > 0 ? x[i] : 0) - 1.0f <= 0 && want++ == 0) first = i;
    }
    if (!want) x[0] = -1, want = 1, first = 0;
    ert_nonfinite nf;
    if (s) {
        CHECK_OK(ert_session_set_input(s, 0, x, sizeof x), ctx);
        CHECK(ert_session_run_check_finite(s, &nf) == ERT_E_NUMERIC, "check_finite: %s", ert_last_error(ctx));
        CHECK(nf.node && strcmp(nf.node, "log2") == 0 && nf.op && strcmp(nf.op, "Log") == 0 && nf.node_index == 2,
              "reported node '%s' (%s) #%d, expected 'log2' (Log) #2", nf.node ? nf.node : "-", nf.op ? nf.op : "-",
              nf.node_index);
        CHECK(nf.count == want && nf.first_index == first, "count %lld first %lld, expected %lld at %lld",
              (long long)nf.count, (long long)nf.first_index, (long long)want, (long long)first);
        CHECK(strstr(ert_last_error(ctx), "log2") != NULL, "message: %s", ert_last_error(ctx));
        /* the flag is released: a plain run works */
        CHECK_OK(ert_session_run(s), ctx);
    }
    CHECK(ert_session_run_check_finite(s, NULL) == ERT_E_ARG, "NULL out");
    ert_session_free(s);
    ert_model_free(m);
}

/* The CLI test's files: DIR/nan_chain.ert (log_chain) and DIR/nan_x.npy with
 * x = (-2, 0.5, 3, 4, 1.5, -1, 2, 5, 3...): log2 gives 3 non-finite values,
 * the first at index 0. */
static int write_cli_files(const char *dir) {
    char p[1024], err[256];
    ert_model *m = log_chain();
    snprintf(p, sizeof p, "%s/nan_chain.ert", dir);
    CHECK_OK(ert_model_save(m, p), ctx);
    ert_model_free(m);
    float x[L] = {-2, 0.5f, 3, 4, 1.5f, -1, 2, 5};
    for (int i = 8; i < L; i++) x[i] = 3;
    int64_t d[2] = {1, L};
    snprintf(p, sizeof p, "%s/nan_x.npy", dir);
    CHECK(npy_write_file(p, ERT_DTYPE_F32, 2, d, x, sizeof x, err, sizeof err) == 0, "%s", err);
    return ert_test_finish("nan --write");
}

int main(int argc, char **argv) {
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    if (argc == 3 && strcmp(argv[1], "--write") == 0) return write_cli_files(argv[2]);
    ert_test_rng_init(&rng, "nan");
    elementwise();
    pools();
    fused_conv();
    fused_gemm();
    mnist();
    check_finite_names_node();
    ert_context_free(ctx);
    return ert_test_finish("nan");
}

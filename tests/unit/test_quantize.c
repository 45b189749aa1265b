/* Post-training quantization (ert_model_quantize), on small models built
 * here with random weights and random calibration data (seed printed).
 *
 * 1. Statistics: minmax equals max |x| of the data; the percentile is within
 *    one histogram bin of the exact one (sorted in the test); entropy on a
 *    Gaussian with rare outliers clips them, on uniform data keeps ~all.
 * 2. Determinism: the same set gives bit-identical ranges and outputs in
 *    two runs, for every method.
 * 3. Arithmetic: a Gemm-only model against fake quantization computed here
 *    in double (activation Q/DQ, per-channel and per-tensor int8 weights,
 *    int32 bias with scale s_x * s_w).
 * 4. keep_float: the matching layers keep their float weights and inputs, the
 *    others are quantized; a pattern matching nothing is ERT_E_NOT_FOUND.
 * 5. max_drop: a layer made sensitive (per-tensor weights with an outlier
 *    row) is returned to float, and the drop measured here (top-1 changes
 *    against the float model over the set) is within the budget and equals
 *    the report's.
 * 6. Round trip: the quantized model saved as .ert and loaded gives the same
 *    outputs bit for bit, with int8 weights (the file ~4x smaller).
 * 7. Bad input: empty set, NaN in a sample, NaN made inside the model,
 *    labels out of range, unknown version, NULL data, MSE or equalize
 *    out of their range or before version 3: each an error naming the
 *    problem, no model returned.
 * 8. Cross-layer equalisation: conv -> relu -> depthwise -> relu -> 1x1
 *    with output channels 3000x apart: the pairs found, the rescaled float
 *    model equal to the original on fresh inputs (float rounding), the
 *    depthwise input's channels equal in range, and the quantized model
 *    closer to float with it than without.
 * 9. Bias correction: a conv whose int8 weights shift its mean (input with
 *    a large constant part): the per-channel mean output error, measured
 *    here against the float model, shrinks.
 * 10. MSE ranges against a search done here on the data in double (the
 *    squared error of the chosen range within 2% of the best of a fine
 *    grid, below minmax's); a tensor read only by HardSwish is quantized
 *    over [max(min, -3), max] (the values below -3 read the same). */
#define _POSIX_C_SOURCE 200809L
#include "ert_internal.h"
#include "quant_internal.h" /* equalisation's pair finder and rescaling, tested directly */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ert_context *ctx;
static ert_test_rng rng;

#define H 8
#define W 8
#define CLASSES 5

static int32_t weight(ert_builder *b, const char *name, int ndim, const int64_t *dims, float scale) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= dims[d];
    float *w = malloc((size_t)n * sizeof *w);
    ert_test_fill(&rng, w, n, -scale, scale);
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, name, ERT_DTYPE_F32, ndim, dims, w, &id), ctx);
    free(w);
    return id;
}

static int32_t conv(ert_builder *b, const char *name, int32_t x, int cin, int cout, int k) {
    char wn[64], bn[64];
    snprintf(wn, sizeof wn, "%s.w", name);
    snprintf(bn, sizeof bn, "%s.b", name);
    int64_t wd[4] = {cout, cin, k, k}, bd[1] = {cout};
    int32_t in[3] = {x, weight(b, wn, 4, wd, 0.5f), weight(b, bn, 1, bd, 0.1f)}, y = -1;
    int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2}, ks[2] = {k, k};
    ert_attr at[2] = {ERT_ATTR_IS("pads", pads, 4), ERT_ATTR_IS("kernel_shape", ks, 2)};
    CHECK_OK(ert_builder_node(b, "Conv", name, in, 3, at, 2, &y, 1), ctx);
    return y;
}

static int32_t unary(ert_builder *b, const char *op, const char *name, int32_t x) {
    int32_t y = -1;
    CHECK_OK(ert_builder_node(b, op, name, &x, 1, NULL, 0, &y, 1), ctx);
    return y;
}

/* The last layer, fc = Gemm(in[0], in[1], in[2]) transB, as graph output `name`; finishes b. */
static ert_model *finish_fc(ert_builder *b, const int32_t *in, const char *name) {
    int32_t y = -1;
    ert_attr ga = ERT_ATTR_I("transB", 1);
    CHECK_OK(ert_builder_node(b, "Gemm", "fc", in, 3, &ga, 1, &y, 1), ctx);
    CHECK_OK(ert_builder_output(b, y, name), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

/* x (N, 1, 8, 8) -> conv1 3x3 (4) -> relu -> maxpool 2 -> conv2 3x3 (6) -> relu -> conv3 1x1 (6) + relu2
 * (add1) -> relu -> flatten -> fc (96 -> 5). With sqrt_first, x goes through Sqrt first (NaN for x < 0). */
static ert_model *small_cnn(bool sqrt_first) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 1, H, W};
    int32_t x;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    if (sqrt_first) x = unary(b, "Sqrt", "sqrt", x);
    int32_t y = unary(b, "Relu", "relu1", conv(b, "conv1", x, 1, 4, 3));
    int64_t k2[2] = {2, 2};
    ert_attr pa[2] = {ERT_ATTR_IS("kernel_shape", k2, 2), ERT_ATTR_IS("strides", k2, 2)};
    int32_t p = -1;
    CHECK_OK(ert_builder_node(b, "MaxPool", "pool1", &y, 1, pa, 2, &p, 1), ctx);
    /* conv2 -> BatchNormalization: folded into conv2 before quantization */
    int64_t cd[1] = {6};
    int32_t bi[5] = {conv(b, "conv2", p, 4, 6, 3), -1, -1, -1, -1}, bn = -1;
    const char *bnp[4] = {"bn.scale", "bn.bias", "bn.mean", "bn.var"};
    for (int k = 0; k < 4; k++) {
        float v[6];
        for (int c = 0; c < 6; c++) v[c] = (float)ert_test_uniform(&rng, k == 0 || k == 3 ? 0.5 : -0.2, k == 0 || k == 3 ? 1.5 : 0.2);
        CHECK_OK(ert_builder_weight(b, bnp[k], ERT_DTYPE_F32, 1, cd, v, &bi[k + 1]), ctx);
    }
    CHECK_OK(ert_builder_node(b, "BatchNormalization", "bn2", bi, 5, NULL, 0, &bn, 1), ctx);
    int32_t r2 = unary(b, "Relu", "relu2", bn);
    int32_t c3 = conv(b, "conv3", r2, 6, 6, 1), s = -1;
    int32_t ai[2] = {c3, r2};
    CHECK_OK(ert_builder_node(b, "Add", "add1", ai, 2, NULL, 0, &s, 1), ctx);
    int32_t f = unary(b, "Flatten", "flat", unary(b, "Relu", "relu3", s));
    int64_t wd[2] = {CLASSES, 6 * (H / 2) * (W / 2)}, bd[1] = {CLASSES};
    int32_t gi[3] = {f, weight(b, "fc.w", 2, wd, 0.3f), weight(b, "fc.b", 1, bd, 0.1f)};
    return finish_fc(b, gi, "logits");
}

/* y = Gemm(x (N, K), w (M, K) transB, bias (M)) */
static ert_model *gemm_model(int K, int M, const float *w, const float *bias) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[2] = {-1, K}, wd[2] = {M, K}, bd[1] = {M};
    int32_t x, wi, bi;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, xd, &x), ctx);
    CHECK_OK(ert_builder_weight(b, "w", ERT_DTYPE_F32, 2, wd, w, &wi), ctx);
    CHECK_OK(ert_builder_weight(b, "b", ERT_DTYPE_F32, 1, bd, bias, &bi), ctx);
    int32_t in[3] = {x, wi, bi};
    return finish_fc(b, in, "y");
}

/* Run a model at batch 1 on n samples of `per` floats; outputs (n x n_out) malloc'd. */
static float *run_all(const ert_model *m, const float *x, int n, size_t per, int64_t *n_out) {
    ert_session_options so = {.batch = 1};
    ert_session *s = NULL;
    CHECK_OK(ert_session_create(m, &so, &s), ctx);
    if (!s) return NULL;
    ert_tensor_info oi;
    ert_session_output_info(s, 0, &oi);
    int64_t no = 1;
    for (int d = 0; d < oi.ndim; d++) no *= oi.dims[d];
    float *y = malloc((size_t)n * (size_t)no * sizeof *y);
    for (int k = 0; k < n; k++) {
        CHECK_OK(ert_session_set_input(s, 0, x + (size_t)k * per, per * sizeof *x), ctx);
        CHECK_OK(ert_session_run(s), ctx);
        CHECK_OK(ert_session_get_output(s, 0, y + (size_t)k * (size_t)no, (size_t)no * sizeof *y), ctx);
    }
    ert_session_free(s);
    *n_out = no;
    return y;
}

static const ert_quant_range *find_range(const ert_quantize_report *r, const char *t) {
    for (int k = 0; k < r->n_ranges; k++)
        if (strcmp(r->ranges[k].tensor, t) == 0) return &r->ranges[k];
    return NULL;
}

static const ert_quant_layer *find_layer(const ert_quantize_report *r, const char *n) {
    for (int k = 0; k < r->n_layers; k++)
        if (strcmp(r->layers[k].node, n) == 0) return &r->layers[k];
    return NULL;
}

static const ert_node *find_node(const ert_model *m, const char *name) {
    for (int i = 0; i < m->n_nodes; i++)
        if (strcmp(m->nodes[i].name, name) == 0) return &m->nodes[i];
    return NULL;
}

static int count_op(const ert_model *m, const char *op) {
    int c = 0;
    for (int i = 0; i < ert_model_n_nodes(m); i++) c += strcmp(ert_model_node_op(m, i), op) == 0;
    return c;
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

#define N_CAL 40
#define PER (H * W)

static void stats_and_determinism(const ert_model *m, const float *cal) {
    const void *data[1] = {cal};
    ert_calib_method methods[3] = {ERT_CALIB_MINMAX, ERT_CALIB_PERCENTILE, ERT_CALIB_ENTROPY};
    float amax_in[3] = {0};
    for (int mi = 0; mi < 3; mi++) {
        ert_quantize_report r[2];
        ert_model *q[2] = {NULL, NULL};
        for (int run = 0; run < 2; run++) {
            ert_quantize_options o = {.version = ERT_QUANTIZE_OPTIONS_VERSION, .method = methods[mi], .n_samples = N_CAL,
                                      .calib_data = data, .report = &r[run]};
            CHECK_OK(ert_model_quantize(m, &o, &q[run]), ctx);
        }
        if (!q[0] || !q[1]) return;
        bool same = r[0].n_ranges == r[1].n_ranges && r[0].n_ranges > 0;
        for (int k = 0; same && k < r[0].n_ranges; k++)
            same = strcmp(r[0].ranges[k].tensor, r[1].ranges[k].tensor) == 0 &&
                   memcmp(&r[0].ranges[k].amax, &r[1].ranges[k].amax, sizeof(float)) == 0 &&
                   memcmp(&r[0].ranges[k].scale, &r[1].ranges[k].scale, sizeof(float)) == 0;
        CHECK(same, "method %d: two runs on the same set gave different ranges", mi);
        int64_t no = 0;
        float *y0 = run_all(q[0], cal, N_CAL, PER, &no), *y1 = run_all(q[1], cal, N_CAL, PER, &no);
        CHECK(y0 && y1 && memcmp(y0, y1, (size_t)N_CAL * (size_t)no * sizeof *y0) == 0,
              "method %d: two quantized models of the same set give different outputs", mi);
        free(y0);
        free(y1);
        /* every layer quantized: 4 layers (3 conv + add + fc = 5) */
        CHECK(r[0].n_layers == 5 && r[0].n_kept_float == 0, "method %d: %d layers, %d float", mi, r[0].n_layers,
              r[0].n_kept_float);
        const ert_quant_range *g = find_range(&r[0], "x");
        CHECK(g != NULL, "no range for the graph input x");
        if (g) amax_in[mi] = g->amax;
        /* MaxPool keeps its input's range: pool1's output uses relu1's */
        const ert_node *pool = find_node(m, "pool1"), *relu1 = find_node(m, "relu1");
        const ert_quant_range *gp = pool ? find_range(&r[0], m->tensors[pool->out[0]].name) : NULL;
        const ert_quant_range *gr = relu1 ? find_range(&r[0], m->tensors[relu1->out[0]].name) : NULL;
        CHECK(gp && gr && gp->amax == gr->amax, "pool1's output does not share relu1's range");
        for (int k = 0; k < r[0].n_ranges; k++)
            CHECK(r[0].ranges[k].amax <= fmaxf(fabsf(r[0].ranges[k].min), fabsf(r[0].ranges[k].max)) * (1 + 1e-6f) &&
                      r[0].ranges[k].scale > 0,
                  "range '%s': amax %g outside [0, max |x|]", r[0].ranges[k].tensor, r[0].ranges[k].amax);
        ert_quantize_report_free(&r[0]);
        ert_quantize_report_free(&r[1]);
        ert_model_free(q[0]);
        ert_model_free(q[1]);
    }
    /* the input's thresholds against the data itself */
    float *a = malloc(sizeof(float) * N_CAL * PER);
    float mx = 0;
    for (int i = 0; i < N_CAL * PER; i++) {
        a[i] = fabsf(cal[i]);
        mx = fmaxf(mx, a[i]);
    }
    qsort(a, N_CAL * PER, sizeof *a, cmp_f);
    float p = a[(int)ceil(N_CAL * PER * 0.9999) - 1];
    CHECK(amax_in[0] == mx, "minmax amax %.9g, max |x| %.9g", amax_in[0], mx);
    CHECK(fabsf(amax_in[1] - p) <= mx / 2048 * 1.001f, "percentile 99.99 amax %.9g, exact %.9g (bin %.3g)", amax_in[1],
          p, mx / 2048);
    CHECK(amax_in[2] > 0 && amax_in[2] <= mx, "entropy amax %g", amax_in[2]);
    free(a);
}

/* asymmetric = 1: uint8 ranges [lo, hi] hold 0 and the observed values
 * (minmax), ReLU outputs start at 0 with zero point 0, a signed input gets
 * a zero point inside (0, 255); each method gives a range inside
 * [min, max]. Symmetric ranges are (-amax, amax) with zero point 0. */
static void asym_ranges(const ert_model *m, const float *cal) {
    const void *data[1] = {cal};
    ert_calib_method methods[3] = {ERT_CALIB_MINMAX, ERT_CALIB_PERCENTILE, ERT_CALIB_ENTROPY};
    const ert_node *relu1 = find_node(m, "relu1");
    for (int mi = 0; mi < 3; mi++)
        for (int asym = 0; asym < 2; asym++) {
            ert_quantize_report r;
            ert_model *q = NULL;
            ert_quantize_options o = {.version = ERT_QUANTIZE_OPTIONS_VERSION, .method = methods[mi],
                                      .n_samples = N_CAL, .calib_data = data, .report = &r, .asymmetric = asym};
            CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
            if (!q) continue;
            for (int k = 0; k < r.n_ranges; k++) {
                const ert_quant_range *g = &r.ranges[k];
                const float tol = 1e-6f * fmaxf(1, fmaxf(fabsf(g->min), fabsf(g->max)));
                bool ok = g->lo <= 0 && g->hi >= 0 && g->scale > 0;
                if (asym) {
                    ok = ok && g->lo >= fminf(g->min, 0) - tol && g->hi <= fmaxf(g->max, 0) + tol &&
                         g->zero_point >= 0 && g->zero_point <= 255 &&
                         fabsf(g->scale - (g->hi - g->lo) / 255) <= 1e-6f * g->scale &&
                         fabsf(g->lo + g->zero_point * g->scale) <= g->scale; /* 0 maps to the zero point */
                    if (mi == 0) ok = ok && g->lo == fminf(g->min, 0) && g->hi == fmaxf(g->max, 0);
                } else {
                    ok = ok && g->lo == -g->hi && g->zero_point == 0 && g->amax == g->hi;
                }
                CHECK(ok, "method %d asym %d range '%s': min %g max %g -> lo %g hi %g scale %g zero point %d", mi, asym,
                      g->tensor, g->min, g->max, g->lo, g->hi, g->scale, g->zero_point);
            }
            const ert_quant_range *gr = relu1 ? find_range(&r, m->tensors[relu1->out[0]].name) : NULL;
            const ert_quant_range *gx = find_range(&r, "x");
            CHECK(gr && (!asym || (gr->lo == 0 && gr->zero_point == 0)), "method %d asym %d: relu1's range lo %g zp %d",
                  mi, asym, gr ? gr->lo : NAN, gr ? gr->zero_point : -1);
            CHECK(gx && (!asym || (gx->zero_point > 0 && gx->zero_point < 255)), "method %d asym %d: x's zero point %d",
                  mi, asym, gx ? gx->zero_point : -1);
            ert_quantize_report_free(&r);
            ert_model_free(q);
        }
}

/* Entropy and percentile on known distributions (the histogram code alone). */
static void entropy_shapes(void) {
    /* Gaussian core, 0.01% outliers at 40 sigma: entropy clips far below */
    int n = 200000;
    float *x = malloc((size_t)n * sizeof *x);
    for (int i = 0; i < n; i++) {
        double u1 = ert_test_uniform(&rng, 1e-12, 1), u2 = ert_test_uniform(&rng, 0, 1);
        x[i] = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    for (int i = 0; i < 20; i++) x[ert_test_int(&rng, 0, n - 1)] = 40.0f;
    ert_model *m = gemm_model(1, 1, (float[]){1}, (float[]){0});
    const void *data[1] = {x};
    ert_quantize_report r;
    ert_model *q = NULL;
    ert_quantize_options o = {.method = ERT_CALIB_ENTROPY, .n_samples = n, .calib_data = data, .report = &r};
    CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
    const ert_quant_range *g = q ? find_range(&r, "x") : NULL;
    CHECK(g && g->amax > 2.5f && g->amax < 10.0f, "entropy on a Gaussian with outliers at 40: amax %g (want 2.5..10)",
          g ? g->amax : -1.0f);
    ert_quantize_report_free(&r);
    ert_model_free(q);
    /* uniform |x| in [0, 1): no outliers, entropy keeps nearly everything */
    for (int i = 0; i < n; i++) x[i] = (float)ert_test_uniform(&rng, -1, 1);
    q = NULL;
    CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
    g = q ? find_range(&r, "x") : NULL;
    CHECK(g && g->amax > 0.9f && g->amax <= 1.0f, "entropy on uniform [-1, 1): amax %g (want > 0.9)", g ? g->amax : -1.0f);
    ert_quantize_report_free(&r);
    ert_model_free(q);
    ert_model_free(m);
    free(x);
}

static double q_round(double v) { return nearbyint(v); } /* half to even, like QuantizeLinear */

/* 3. Gemm against fake quantization in double. (aarch64 gcc 12 -O3 crashes
 * vectorising this function: internal compiler error in
 * vect_transform_reduction.) */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
static void gemm_arith(void) {
    enum { K = 37, M = 11, N = 25 };
    float w[M * K], bias[M], x[N * K];
    ert_test_fill(&rng, w, M * K, -1, 1);
    for (int k = 0; k < K; k++) w[3 * K + k] *= 8; /* a row with a wider range: per-channel matters */
    ert_test_fill(&rng, bias, M, -0.5f, 0.5f);
    ert_test_fill(&rng, x, N * K, -2, 2);
    ert_model *m = gemm_model(K, M, w, bias);
    const void *data[1] = {x};
    /* 0: per-channel, 1: per-tensor, 2: per-channel with uint8 activations
     * (asymmetric) on x skewed to [-0.4, 1.6) */
    for (int cfg = 0; cfg < 3; cfg++) {
        const int per_tensor = cfg == 1, asym = cfg == 2;
        if (asym)
            for (int i = 0; i < N * K; i++) x[i] = x[i] * 0.5f + 0.6f;
        ert_quantize_options o = {.version = ERT_QUANTIZE_OPTIONS_VERSION, .n_samples = N, .calib_data = data,
                                  .per_tensor = per_tensor, .asymmetric = asym};
        ert_model *q = NULL;
        CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
        if (!q) continue;
        int64_t no = 0;
        float *y = run_all(q, x, N, K, &no);
        double ax = 0, sw[M], all = 0, lo = 0, hi = 0;
        for (int i = 0; i < N * K; i++) {
            ax = fmax(ax, fabs(x[i]));
            lo = fmin(lo, x[i]);
            hi = fmax(hi, x[i]);
        }
        /* the activation's scale and zero point as onnxruntime's quantize_static forms them */
        double sx = asym ? (float)((hi - lo) / 255) : (float)(ax / 127);
        double zx = asym ? fmin(255, fmax(0, q_round(-lo / sx))) : 0, qlo = asym ? 0 : -128, qhi = asym ? 255 : 127;
        for (int j = 0; j < M; j++) {
            double mx = 0;
            for (int k = 0; k < K; k++) mx = fmax(mx, fabs(w[j * K + k]));
            sw[j] = mx;
            all = fmax(all, mx);
        }
        for (int j = 0; j < M; j++) sw[j] = (float)((per_tensor ? all : sw[j]) / 127);
        double worst = 0;
        for (int s = 0; s < N; s++)
            for (int j = 0; j < M; j++) {
                double acc = 0;
                for (int k = 0; k < K; k++) {
                    double xq = (fmin(qhi, fmax(qlo, q_round(x[s * K + k] / sx) + zx)) - zx) * sx;
                    double wq = fmin(127, fmax(-127, q_round(w[j * K + k] / sw[j]))) * sw[j];
                    acc += xq * wq;
                }
                float bs = (float)sx * (float)sw[j];
                acc += q_round(bias[j] / bs) * bs;
                /* + one bias quantum bs: bias / bs near a tie rounds either way between this double
                 * division and the library's f32 one (seed 1795815944784715031: 4.85x of 1e-5 without);
                 * one int8 level of x times a weight is ~60x larger, so a wrong level still fails */
                worst = fmax(worst, fabs(acc - y[s * M + j]) / (1e-5 + 1e-5 * fabs(acc) + bs));
            }
        CHECK(no == M && worst <= 1, "cfg %d: Gemm vs fake quantization in double: worst %.3g x tolerance", cfg,
              worst);
        /* the result holds int8 weights and an int32 bias, no f32 copy of w;
         * the activation's zero point is a u8 scalar when asymmetric */
        int i8 = 0, i32 = 0, f32w = 0, zp8[2] = {0, 0};
        for (int t = 0; t < q->n_tensors; t++) {
            const ert_tensor *tt = &q->tensors[t];
            if (tt->role != ERT_ROLE_WEIGHT) continue;
            i8 += tt->dtype == ERT_DTYPE_I8 && tt->ndim == 2;
            i32 += tt->dtype == ERT_DTYPE_I32;
            f32w += tt->dtype == ERT_DTYPE_F32 && tt->ndim == 2;
            if (tt->ndim == 0 && (tt->dtype == ERT_DTYPE_I8 || tt->dtype == ERT_DTYPE_U8))
                zp8[tt->dtype == ERT_DTYPE_U8]++;
        }
        CHECK(i8 == 1 && i32 == 1 && f32w == 0, "weights: %d int8, %d int32, %d f32 matrices", i8, i32, f32w);
        CHECK(zp8[asym] >= 1 && zp8[!asym] == 0, "cfg %d: %d int8 and %d uint8 scalar zero points", cfg, zp8[0],
              zp8[1]);
        free(y);
        ert_model_free(q);
    }
    ert_model_free(m);
}

/* 4. keep_float */
static void keep_float(const ert_model *m, const float *cal) {
    const void *data[1] = {cal};
    ert_quantize_report r;
    ert_model *q = NULL;
    /* everything float: the BatchNorm folded into conv2 and nothing else changed */
    ert_quantize_options all = {.n_samples = N_CAL, .calib_data = data, .keep_float = "*"};
    CHECK_OK(ert_model_quantize(m, &all, &q), ctx);
    if (q) {
        int64_t no = 0;
        float *yf = run_all(m, cal, N_CAL, PER, &no), *yq = run_all(q, cal, N_CAL, PER, &no);
        double *ref = malloc((size_t)N_CAL * (size_t)no * sizeof *ref);
        for (int64_t i = 0; yf && i < N_CAL * no; i++) ref[i] = yf[i];
        CHECK(yf && yq && ert_test_close("BatchNorm folded, all float", yq, ref, N_CAL * no, 1e-5, 1e-5),
              "keep_float '*' changed the outputs");
        CHECK(count_op(q, "BatchNormalization") == 0 && count_op(q, "QuantizeLinear") == 0, "BatchNorm left or Q added");
        free(yf);
        free(yq);
        free(ref);
        ert_model_free(q);
        q = NULL;
    }
    ert_quantize_options o = {.n_samples = N_CAL, .calib_data = data, .keep_float = "conv2,f?", .report = &r};
    CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
    if (!q) return;
    const char *fl[] = {"conv2", "fc"}, *qz[] = {"conv1", "conv3"};
    for (int k = 0; k < 2; k++) {
        const ert_quant_layer *l = find_layer(&r, fl[k]);
        CHECK(l && l->state == ERT_QUANT_KEEP_PATTERN, "%s should be kept float by the pattern", fl[k]);
        const ert_node *n = find_node(q, fl[k]);
        CHECK(n && q->tensors[n->in[1]].role == ERT_ROLE_WEIGHT && q->tensors[n->in[1]].dtype == ERT_DTYPE_F32,
              "%s's weight is not its float weight", fl[k]);
        const ert_node *prod = NULL;
        for (int i = 0; n && i < q->n_nodes; i++)
            if (q->nodes[i].out[0] == n->in[0]) prod = &q->nodes[i];
        CHECK(prod && prod->op != ERT_OP_INVALID && strcmp(ert_op_get(prod->op)->name, "DequantizeLinear") != 0,
              "%s reads a dequantized input", fl[k]);
        l = find_layer(&r, qz[k]);
        CHECK(l && l->state == ERT_QUANT_QUANTIZED, "%s should be quantized", qz[k]);
        n = find_node(q, qz[k]);
        CHECK(n && q->tensors[n->in[1]].role != ERT_ROLE_WEIGHT, "%s's weight is not dequantized", qz[k]);
    }
    CHECK(r.n_kept_float == 2, "%d layers float, want 2", r.n_kept_float);
    ert_quantize_report_free(&r);
    ert_model_free(q);
    q = NULL;
    o.keep_float = "conv1,nothing*";
    o.report = NULL;
    ert_status st = ert_model_quantize(m, &o, &q);
    CHECK(st == ERT_E_NOT_FOUND && !q && strstr(ert_last_error(ctx), "nothing*"), "pattern matching nothing: %s (%s)",
          ert_status_str(st), ert_last_error(ctx));
}

/* 5. max_drop: fc with per-tensor scales and one huge row makes the other
 * classes' logits coarse; the budget returns layers to float until met. */
static void max_drop(void) {
    enum { K = 48, M = 10, N = 300 };
    float w[M * K], bias[M], x[N * K];
    ert_test_fill(&rng, w, M * K, -1, 1);
    for (int k = 0; k < K; k++) w[k] *= 400;
    for (int j = 1; j < M; j++) bias[j] = 0;
    bias[0] = -1e4f; /* class 0 never wins, its row only spoils the scale */
    ert_test_fill(&rng, x, N * K, -1, 1);
    ert_model *m = gemm_model(K, M, w, bias);
    const void *data[1] = {x};
    ert_quantize_report r;
    ert_model *q = NULL;
    ert_quantize_options o = {.n_samples = N, .calib_data = data, .per_tensor = 1, .sensitivity = 1, .report = &r};
    CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
    double full = q ? r.drop : 0;
    CHECK(full > 2, "the sensitive Gemm changes only %.2f%% of the top-1 classes: the test cannot fail", full);
    const ert_quant_layer *l = q ? find_layer(&r, "fc") : NULL;
    CHECK(l && isfinite(l->rel_l2) && l->rel_l2 > 0 && isfinite(l->drop), "fc's error alone was not measured");
    ert_quantize_report_free(&r);
    ert_model_free(q);
    q = NULL;
    o.max_drop = 1.0f;
    CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
    if (!q) return;
    l = find_layer(&r, "fc");
    CHECK(l && l->state == ERT_QUANT_KEEP_DROP, "fc was not returned to float by max_drop");
    CHECK(r.drop <= 1.0, "reported drop %.3g over the budget 1", r.drop);
    int64_t no = 0;
    float *yf = run_all(m, x, N, K, &no), *yq = run_all(q, x, N, K, &no);
    int changed = 0;
    for (int s = 0; yf && yq && s < N; s++) {
        int a = 0, b = 0;
        for (int j = 1; j < M; j++) {
            if (yf[s * M + j] > yf[s * M + a]) a = j;
            if (yq[s * M + j] > yq[s * M + b]) b = j;
        }
        changed += a != b;
    }
    double drop = 100.0 * changed / N;
    CHECK(drop <= 1.0 && fabs(drop - r.drop) < 1e-9, "measured drop %.3g (report %.3g), budget 1", drop, r.drop);
    free(yf);
    free(yq);
    ert_quantize_report_free(&r);
    ert_model_free(q);
    ert_model_free(m);
}

/* 6. .ert round trip */
static void round_trip(const ert_model *m, const float *cal, int asym) {
    const void *data[1] = {cal};
    ert_model *q = NULL, *back = NULL;
    ert_quantize_options o = {.version = ERT_QUANTIZE_OPTIONS_VERSION, .n_samples = N_CAL, .calib_data = data,
                              .method = ERT_CALIB_PERCENTILE, .asymmetric = asym};
    CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
    if (!q) return;
    char dir[] = "/tmp/ert_quant_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char pq[64], pf[64];
    snprintf(pq, sizeof pq, "%s/q.ert", dir);
    snprintf(pf, sizeof pf, "%s/f.ert", dir);
    CHECK_OK(ert_model_save(q, pq), ctx);
    CHECK_OK(ert_model_save(m, pf), ctx);
    CHECK_OK(ert_model_load_file(ctx, pq, &back), ctx);
    if (back) {
        int64_t no = 0;
        float *a = run_all(q, cal, N_CAL, PER, &no), *b = run_all(back, cal, N_CAL, PER, &no);
        CHECK(a && b && memcmp(a, b, (size_t)N_CAL * (size_t)no * sizeof *a) == 0, "reloaded .ert gives other outputs");
        free(a);
        free(b);
        int i8 = 0;
        for (int t = 0; t < back->n_tensors; t++)
            i8 += back->tensors[t].role == ERT_ROLE_WEIGHT && back->tensors[t].dtype == ERT_DTYPE_I8 && back->tensors[t].ndim >= 2;
        CHECK(i8 == 4, "%d int8 weight tensors after the round trip, want 4", i8);
        CHECK(count_op(back, "QuantizeLinear") == count_op(q, "QuantizeLinear") && count_op(back, "QuantizeLinear") > 0,
              "Q nodes lost in the round trip");
        int u8 = 0;
        for (int t = 0; t < back->n_tensors; t++) u8 += back->tensors[t].dtype == ERT_DTYPE_U8;
        CHECK(asym ? u8 > 0 : u8 == 0, "asym %d: %d uint8 tensors after the round trip", asym, u8);
    }
    ert_model_free(back);
    ert_model_free(q);
    unlink(pq);
    unlink(pf);
    rmdir(dir);
}

/* 7. bad input */
static void bad_input(const ert_model *m, float *cal) {
    const void *data[1] = {cal};
    ert_model *q = NULL;
    ert_quantize_options o = {.n_samples = 0, .calib_data = data};
    ert_status st = ert_model_quantize(m, &o, &q);
    CHECK(st == ERT_E_ARG && !q && strstr(ert_last_error(ctx), "empty"), "empty set: %s (%s)", ert_status_str(st),
          ert_last_error(ctx));
    o.n_samples = N_CAL;
    o.version = 99;
    st = ert_model_quantize(m, &o, &q);
    CHECK(st == ERT_E_ARG && !q, "version 99 accepted");
    o.version = 0;
    o.calib_data = NULL;
    st = ert_model_quantize(m, &o, &q);
    CHECK(st == ERT_E_ARG && !q, "NULL calib_data accepted");
    o.calib_data = data;
    float keep = cal[3 * PER + 17];
    cal[3 * PER + 17] = NAN;
    st = ert_model_quantize(m, &o, &q);
    CHECK(st == ERT_E_ARG && !q && strstr(ert_last_error(ctx), "sample 3") && strstr(ert_last_error(ctx), "NaN"),
          "NaN in sample 3: %s (%s)", ert_status_str(st), ert_last_error(ctx));
    cal[3 * PER + 17] = keep;
    int64_t lab[N_CAL] = {0};
    lab[5] = CLASSES;
    o.labels = lab;
    st = ert_model_quantize(m, &o, &q);
    CHECK(st == ERT_E_ARG && !q && strstr(ert_last_error(ctx), "label"), "label out of range: %s (%s)",
          ert_status_str(st), ert_last_error(ctx));
    o.labels = NULL;
    o.version = 2;
    o.method = ERT_CALIB_MSE;
    st = ert_model_quantize(m, &o, &q);
    CHECK(st == ERT_E_ARG && !q && strstr(ert_last_error(ctx), "method"), "MSE with options version 2: %s (%s)",
          ert_status_str(st), ert_last_error(ctx));
    o.version = ERT_QUANTIZE_OPTIONS_VERSION;
    o.method = (ert_calib_method)4;
    st = ert_model_quantize(m, &o, &q);
    CHECK(st == ERT_E_ARG && !q, "method 4 accepted");
    o.method = ERT_CALIB_MINMAX;
    o.equalize = 2;
    st = ert_model_quantize(m, &o, &q);
    CHECK(st == ERT_E_ARG && !q && strstr(ert_last_error(ctx), "equalize"), "equalize 2: %s (%s)", ert_status_str(st),
          ert_last_error(ctx));
    o.equalize = 0;
    o.bias_correct = -2;
    st = ert_model_quantize(m, &o, &q);
    CHECK(st == ERT_E_ARG && !q && strstr(ert_last_error(ctx), "bias_correct"), "bias_correct -2: %s (%s)",
          ert_status_str(st), ert_last_error(ctx));
    o.bias_correct = 0;
    o.version = 0;
    /* a NaN the float model makes (Sqrt of negative inputs) */
    ert_model *sq = small_cnn(true);
    st = sq ? ert_model_quantize(sq, &o, &q) : ERT_E_INTERNAL;
    CHECK(st == ERT_E_ARG && !q && strstr(ert_last_error(ctx), "sample 0") && strstr(ert_last_error(ctx), "NaN"),
          "NaN inside the model: %s (%s)", ert_status_str(st), ert_last_error(ctx));
    ert_model_free(sq);
}

/* ------------------------------------------------------------------ 8-10 */

/* Conv `name` (cout, cin / group, k, k) with `group`, weights uniform in
 * +-scale, output channel c's filter and bias times ch_scale[c] (NULL: 1). */
static int32_t conv_g(ert_builder *b, const char *name, int32_t x, int cin, int cout, int k, int group,
                      const float *ch_scale) {
    char wn[64], bn[64];
    snprintf(wn, sizeof wn, "%s.w", name);
    snprintf(bn, sizeof bn, "%s.b", name);
    const int per = cin / group * k * k;
    float *w = malloc((size_t)cout * per * sizeof *w), bias[64];
    ert_test_fill(&rng, w, (int64_t)cout * per, -0.5f, 0.5f);
    ert_test_fill(&rng, bias, cout, -0.1f, 0.1f);
    for (int c = 0; ch_scale && c < cout; c++) {
        for (int q = 0; q < per; q++) w[c * per + q] *= ch_scale[c];
        bias[c] *= ch_scale[c];
    }
    int64_t wd[4] = {cout, cin / group, k, k}, bd[1] = {cout};
    int32_t in[3] = {x, -1, -1}, y = -1;
    CHECK_OK(ert_builder_weight(b, wn, ERT_DTYPE_F32, 4, wd, w, &in[1]), ctx);
    CHECK_OK(ert_builder_weight(b, bn, ERT_DTYPE_F32, 1, bd, bias, &in[2]), ctx);
    free(w);
    int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2}, ks[2] = {k, k};
    ert_attr at[3] = {ERT_ATTR_IS("pads", pads, 4), ERT_ATTR_IS("kernel_shape", ks, 2), ERT_ATTR_I("group", group)};
    CHECK_OK(ert_builder_node(b, "Conv", name, in, 3, at, 3, &y, 1), ctx);
    return y;
}

/* Output y named `name`, then finish b (freed). */
static ert_model *finish_out(ert_builder *b, int32_t y, const char *name) {
    CHECK_OK(ert_builder_output(b, y, name), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

#define EQ_C 6
#define EQ_HW 8
#define EQ_PER (3 * EQ_HW * EQ_HW)

/* x (1, 3, 8, 8) -> a 3x3 (6, channels scaled 0.01..30) -> relu -> b depthwise 3x3 (channels scaled back, as a
 * BatchNorm folded into it would) -> relu -> c 1x1 (4) -> y */
static ert_model *eq_model(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {1, 3, EQ_HW, EQ_HW};
    int32_t x;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    const float sc[EQ_C] = {0.01f, 0.1f, 1, 3, 10, 30}, inv[EQ_C] = {100, 10, 1, 1 / 3.0f, 0.1f, 1 / 30.0f};
    int32_t y = unary(b, "Relu", "ra", conv_g(b, "a", x, 3, EQ_C, 3, 1, sc));
    y = unary(b, "Relu", "rb", conv_g(b, "b", y, EQ_C, EQ_C, 3, EQ_C, inv));
    return finish_out(b, conv_g(b, "c", y, EQ_C, 4, 1, 1, NULL), "y");
}

/* max |t| per channel of (1, C, H, W) tensor t of m over n samples (ERT_NO_VECTORIZE: aarch64 gcc 12 ICE) */
ERT_NO_VECTORIZE static void chan_max(const ert_model *m, int32_t t, const float *x, int n, double *r) {
    ert_model *c = NULL;
    CHECK_OK(ert_qdq_with_outputs(m, &t, 1, &c), ctx);
    if (!c) return;
    int64_t no = 0;
    ert_session_options so = {.batch = 1};
    ert_session *s = NULL;
    CHECK_OK(ert_session_create(c, &so, &s), ctx);
    for (int ch = 0; ch < EQ_C; ch++) r[ch] = 0;
    for (int k = 0; s && k < n; k++) {
        CHECK_OK(ert_session_set_input(s, 0, x + (size_t)k * EQ_PER, EQ_PER * sizeof *x), ctx);
        CHECK_OK(ert_session_run(s), ctx);
        const void *yv;
        ert_session_output_data(s, 1, &yv);
        const float *v = yv;
        no = EQ_HW * EQ_HW;
        for (int ch = 0; ch < EQ_C; ch++)
            for (int64_t i = 0; i < no; i++) r[ch] = fmax(r[ch], fabs((double)v[ch * no + i]));
    }
    ert_session_free(s);
    ert_model_free(c);
}

ERT_NO_VECTORIZE static double rel_l2(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* 8. */
ERT_NO_VECTORIZE static void equalisation(void) {
    ert_model *m = eq_model(), *e = NULL;
    if (!m) return;
    enum { N = 24 };
    float *x = malloc(sizeof(float) * N * EQ_PER), *xe = malloc(sizeof(float) * N * EQ_PER);
    ert_test_fill(&rng, x, N * EQ_PER, -1, 1);
    ert_test_fill(&rng, xe, N * EQ_PER, -1, 1); /* fresh inputs for the function check */
    CHECK_OK(ert_qdq_fold_bn(m, &e), ctx); /* an owned copy (no BatchNorm here) */
    ert_cle_pair *pairs = NULL;
    int np = 0;
    if (e) CHECK_OK(ert_qdq_cle_pairs(e, &pairs, &np), ctx);
    const ert_node *na = find_node(e, "a"), *nb = find_node(e, "b"), *nc = find_node(e, "c");
    CHECK(np == 2 && na && nb && nc && &e->nodes[pairs[0].a] == na && &e->nodes[pairs[0].b] == nb &&
              pairs[0].depthwise && &e->nodes[pairs[1].a] == nb && &e->nodes[pairs[1].b] == nc && !pairs[1].depthwise &&
              pairs[0].channels == EQ_C,
          "equalisation pairs: %d found, want (a, b depthwise), (b, c)", np);
    if (np == 2) {
        double r0[EQ_C], r1[EQ_C], after[EQ_C];
        chan_max(e, pairs[0].mid, x, N, r0);
        chan_max(e, pairs[1].mid, x, N, r1);
        const double *r[2] = {r0, r1};
        CHECK(ert_qdq_equalize(e, pairs, np, r) == 2, "not every pair rescaled");
        int64_t no = 0;
        float *y0 = run_all(m, xe, N, EQ_PER, &no), *y1 = run_all(e, xe, N, EQ_PER, &no);
        double err = y0 && y1 ? rel_l2(y1, y0, N * no) : 1;
        CHECK(err < 1e-5, "the equalised float model differs from the original: rel L2 %.3g", err);
        free(y0);
        free(y1);
        /* the depthwise input: every channel now as wide as the widest (on the calibration samples) */
        double mx = 0;
        for (int c = 0; c < EQ_C; c++) mx = fmax(mx, r0[c]);
        chan_max(e, pairs[0].mid, x, N, after);
        for (int c = 0; c < EQ_C; c++)
            CHECK(fabs(after[c] - mx) <= 1e-4 * mx, "channel %d of b's input: max %g after equalisation, want %g (was %g)",
                  c, after[c], mx, r0[c]);
    }
    /* the quantized model is closer to float with equalisation than without */
    double err[2] = {0, 0};
    for (int on = 0; on < 2; on++) {
        const void *data[1] = {x};
        ert_model *q = NULL;
        ert_quantize_options o = {.version = ERT_QUANTIZE_OPTIONS_VERSION, .n_samples = N, .calib_data = data,
                                  .asymmetric = 1, .equalize = on ? 1 : -1};
        CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
        int64_t no = 0;
        float *yf = run_all(m, xe, N, EQ_PER, &no), *yq = q ? run_all(q, xe, N, EQ_PER, &no) : NULL;
        err[on] = yf && yq ? rel_l2(yq, yf, N * no) : 1;
        free(yf);
        free(yq);
        ert_model_free(q);
    }
    printf("  equalisation: int8 rel L2 %.4f without, %.4f with\n", err[0], err[1]);
    CHECK(err[1] < 0.5 * err[0], "equalisation does not help: int8 rel L2 %.4g without, %.4g with", err[0], err[1]);
    free(pairs);
    ert_model_free(e);
    ert_model_free(m);
    free(x);
    free(xe);
}

/* 9. x (1, 4, 6, 6) = 5 + noise -> conv 3x3 (5) -> y: rounding its weights shifts every output channel's mean */
ERT_NO_VECTORIZE static void bias_correction(void) { /* aarch64 gcc 12: see gemm_arith */
    enum { N = 16, C = 4, K = 5, HW = 6, PERX = C * HW * HW };
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {1, C, HW, HW};
    int32_t x;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    /* one large tap per filter sets its int8 step; the small taps' rounding errors add up under a DC input */
    float w[K * C * 9], bias[K];
    ert_test_fill(&rng, w, K * C * 9, -0.03f, 0.03f);
    for (int k = 0; k < K; k++) w[k * C * 9 + 4] = 1.0f;
    ert_test_fill(&rng, bias, K, -0.1f, 0.1f);
    int64_t wd[4] = {K, C, 3, 3}, bd[1] = {K};
    int32_t in[3] = {x, -1, -1}, y = -1;
    CHECK_OK(ert_builder_weight(b, "w", ERT_DTYPE_F32, 4, wd, w, &in[1]), ctx);
    CHECK_OK(ert_builder_weight(b, "b", ERT_DTYPE_F32, 1, bd, bias, &in[2]), ctx);
    int64_t ks[2] = {3, 3};
    ert_attr at[1] = {ERT_ATTR_IS("kernel_shape", ks, 2)}; /* no padding: every output sees the DC */
    CHECK_OK(ert_builder_node(b, "Conv", "conv", in, 3, at, 1, &y, 1), ctx);
    ert_model *m = finish_out(b, y, "y");
    if (!m) return;
    float *xs = malloc(sizeof(float) * N * PERX);
    for (int i = 0; i < N * PERX; i++) xs[i] = 5.0f + (float)ert_test_uniform(&rng, -0.5, 0.5);
    double worst[2] = {0, 0}, l2[2] = {0, 0};
    for (int on = 0; on < 2; on++) {
        const void *data[1] = {xs};
        ert_model *q = NULL;
        ert_quantize_options o = {.version = ERT_QUANTIZE_OPTIONS_VERSION, .n_samples = N, .calib_data = data,
                                  .bias_correct = on ? 1 : -1};
        CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
        int64_t no = 0;
        float *yf = run_all(m, xs, N, PERX, &no), *yq = q ? run_all(q, xs, N, PERX, &no) : NULL;
        if (yf && yq) {
            const int64_t per = no / K; /* (1, K, 4, 4) */
            for (int k = 0; k < K; k++) {
                double d = 0;
                for (int n = 0; n < N; n++)
                    for (int64_t i = 0; i < per; i++) d += (double)yq[n * no + k * per + i] - yf[n * no + k * per + i];
                worst[on] = fmax(worst[on], fabs(d / (N * per)));
            }
            l2[on] = rel_l2(yq, yf, N * no);
        }
        free(yf);
        free(yq);
        ert_model_free(q);
    }
    printf("  bias correction: worst channel mean error %.4g without, %.4g with (rel L2 %.4g, %.4g)\n", worst[0],
           worst[1], l2[0], l2[1]);
    CHECK(worst[0] > 0.01 && worst[1] < 0.25 * worst[0] && l2[1] < l2[0],
          "bias correction: worst channel mean error %.4g without, %.4g with; rel L2 %.4g, %.4g", worst[0], worst[1],
          l2[0], l2[1]);
    free(xs);
    ert_model_free(m);
}

/* Squared error of quantizing x to [lo, hi] as QuantizeLinear/DequantizeLinear would. */
ERT_NO_VECTORIZE static double data_sse(const float *x, int n, double lo, double hi, bool asym) {
    float sc;
    int32_t zp;
    ert_qdq_act_params(lo, hi, asym, &sc, &zp);
    const double qmin = asym ? 0 : -127, qmax = asym ? 255 : 127;
    double e = 0;
    for (int i = 0; i < n; i++) {
        double q = nearbyint(x[i] / (double)sc) + zp;
        q = q < qmin ? qmin : q > qmax ? qmax : q;
        const double d = x[i] - (q - zp) * sc;
        e += d * d;
    }
    return e;
}

/* 10. */
ERT_NO_VECTORIZE static void mse_and_bounds(void) {
    /* a shifted Gaussian and two outliers: with this many values, clipping them pays */
    enum { N = 200000 };
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) {
        double u1 = ert_test_uniform(&rng, 1e-12, 1), u2 = ert_test_uniform(&rng, 0, 1);
        x[i] = (float)(0.5 + sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    x[ert_test_int(&rng, 0, N / 2 - 1)] = 12.0f;
    x[ert_test_int(&rng, N / 2, N - 1)] = -8.0f;
    double mn = 0, mx = 0;
    for (int i = 0; i < N; i++) mn = fmin(mn, x[i]), mx = fmax(mx, x[i]);
    ert_model *m = gemm_model(1, 1, (float[]){1}, (float[]){0});
    for (int asym = 0; m && asym < 2; asym++) {
        const void *data[1] = {x};
        ert_quantize_report r;
        ert_model *q = NULL;
        ert_quantize_options o = {.version = ERT_QUANTIZE_OPTIONS_VERSION, .method = ERT_CALIB_MSE, .n_samples = N,
                                  .calib_data = data, .report = &r, .asymmetric = asym};
        CHECK_OK(ert_model_quantize(m, &o, &q), ctx);
        const ert_quant_range *g = q ? find_range(&r, "x") : NULL;
        if (g) {
            const double e = data_sse(x, N, g->lo, g->hi, asym), e_mm = data_sse(x, N, asym ? mn : -fmax(-mn, mx), mx, asym);
            /* a finer grid than the library's: hi = top * k / 200, lo = mn * j / 100. The
             * asymmetric grid (101 x 200 points, 4e9 operations: 3 minutes under qemu) is
             * searched every 5th point, then at every point within 5 of the best */
            double best = INFINITY;
            const double top = asym ? mx : fmax(-mn, mx);
            const int step = asym ? 5 : 1;
            int bj = 0, bk = 1;
            for (int j = 0; j <= (asym ? 100 : 0); j += step)
                for (int k = step; k <= 200; k += step) {
                    const double hi = top * k / 200, lo = asym ? mn * j / 100 : -hi, e2 = data_sse(x, N, lo, hi, asym);
                    if (e2 < best) best = e2, bj = j, bk = k;
                }
            for (int j = bj - step; asym && j <= bj + step; j++)
                for (int k = bk - step; k <= bk + step; k++)
                    if (j >= 0 && j <= 100 && k >= 1 && k <= 200)
                        best = fmin(best, data_sse(x, N, mn * j / 100, top * k / 200, asym));
            printf("  mse asym %d: [%.3f, %.3f], squared error %.4g (best of the grid %.4g, minmax %.4g)\n", asym, g->lo,
                   g->hi, e, best, e_mm);
            CHECK(e <= 1.02 * best && e < 0.9 * e_mm, "mse asym %d: range [%g, %g] error %.6g, grid best %.6g, minmax %.6g",
                  asym, g->lo, g->hi, e, best, e_mm);
        }
        CHECK(g != NULL, "mse asym %d: no range for x", asym);
        ert_quantize_report_free(&r);
        ert_model_free(q);
    }
    ert_model_free(m);
    free(x);
    /* x (1, 3, 8, 8) -> conv (6, channels up to x30) -> HardSwish -> conv 1x1 -> y: the first conv's output
     * holds values far below -3, which HardSwish reads as 0 */
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {1, 3, EQ_HW, EQ_HW};
    int32_t xi;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &xi), ctx);
    const float sc[EQ_C] = {1, 3, 10, 30, 30, 30};
    int32_t c1 = conv_g(b, "c1", xi, 3, EQ_C, 3, 1, sc);
    ert_model *hm = finish_out(b, conv_g(b, "c2", unary(b, "HardSwish", "hs", c1), EQ_C, 4, 1, 1, NULL), "y");
    float *xs = malloc(sizeof(float) * 16 * EQ_PER);
    ert_test_fill(&rng, xs, 16 * EQ_PER, -1, 1);
    for (int asym = 0; hm && asym < 2; asym++) {
        const void *data[1] = {xs};
        ert_quantize_report r;
        ert_model *q = NULL;
        ert_quantize_options o = {.version = ERT_QUANTIZE_OPTIONS_VERSION, .n_samples = 16, .calib_data = data,
                                  .report = &r, .asymmetric = asym};
        CHECK_OK(ert_model_quantize(hm, &o, &q), ctx);
        const ert_quant_range *g = q ? find_range(&r, hm->tensors[c1].name) : NULL;
        CHECK(g && g->min < -3 && g->max > 3, "c1's output: min %g max %g (want beyond +-3)", g ? g->min : NAN,
              g ? g->max : NAN);
        if (g && asym) CHECK(g->lo == -3 && g->hi == g->max, "asym: c1's range [%g, %g], want [-3, %g]", g->lo, g->hi, g->max);
        if (g && !asym) CHECK(g->hi == fmaxf(g->max, 3), "sym: c1's amax %g, want max(max, 3) = %g", g->hi, fmaxf(g->max, 3));
        ert_quantize_report_free(&r);
        ert_model_free(q);
    }
    free(xs);
    ert_model_free(hm);
}

int main(void) {
    ert_test_rng_init(&rng, "quantize");
    CHECK_OK(ert_context_create(NULL, &ctx), ctx);
    if (!ert_op_find("QuantizeLinear")) return ert_test_skip("quantize", "this build has no QuantizeLinear op");
    ert_model *m = small_cnn(false);
    float *cal = malloc(sizeof(float) * N_CAL * PER);
    ert_test_fill(&rng, cal, N_CAL * PER, -1, 1);
    if (m) {
        stats_and_determinism(m, cal);
        keep_float(m, cal);
        round_trip(m, cal, 0);
        round_trip(m, cal, 1);
        asym_ranges(m, cal);
        bad_input(m, cal);
    }
    entropy_shapes();
    gemm_arith();
    max_drop();
    equalisation();
    bias_correction();
    mse_and_bounds();
    free(cal);
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_finish("quantize");
}

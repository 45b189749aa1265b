/* CUDA backend against references, through the public API (label `gpu`).
 *
 * Per op: a one-node model from the builder, run on a CUDA session with
 * fresh random inputs three times (the first run captures the CUDA graph, the
 * next two replay it with new input values), output poisoned before each run,
 * compared with a float64 reference written here and, where this build's CPU
 * backend runs the op, with a CPU session too. Then a small CNN end to end
 * under every placement policy, and a count of device/pinned/managed
 * allocations over 1000 runs (must be 0). Then the whole battery again on
 * f16 and bf16 sessions (ert_session_options.precision): inputs and weights
 * are drawn as values that dtype holds exactly, so the CPU f32 session and
 * the float64 references see what the GPU sees, and the tolerance covers the
 * rounding of intermediate and output values (f16 1e-2, bf16 4e-2, relative
 * to the output's largest magnitude).
 *
 * Allocation counting: the test link wraps the public CUDA runtime entry
 * points (-Wl,--wrap=cudaMalloc,cudaMallocManaged,cudaHostAlloc,
 * cudaMallocHost,cudaMallocAsync; tests/common/CMakeLists.txt). --wrap rewrites every
 * undefined reference in the objects linked, libedgert.a's included, so any
 * call edgert (or a static cuBLAS) makes through those symbols is counted;
 * allocations a library makes through the driver API directly are not.
 *
 * Without a GPU (or in a build without the CUDA backend) it prints why and
 * returns 77 (ctest SKIPPED). */
#include "edgert.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#ifndef ERT_TEST_HAVE_CUDA
int main(void) { return ert_test_skip("cuda", "this build has no CUDA backend (ERT_CUDA=OFF)"); }
#else
#include "cuda_alloc_count.h"

/* ------------------------------------------------------------------ harness */

static ert_context *ctx;
static ert_test_rng rng;
/* --cpu-selfcheck runs every case on the CPU backend instead: checks this
 * file's references and models on a machine without a GPU. */
static ert_device gpu_dev = ERT_DEVICE_CUDA;

/* The backend logs (INFO) its device once per session and when it cannot
 * capture a CUDA graph; a capture failure would silently test only the eager
 * path, so it fails the test. */
static int n_no_graph;
static bool device_logged;
static int n_conv_graph; /* convs that run as one cuDNN graph with their epilogue (DEBUG line at bind) */
static int n_conv_patch; /* patchify convs bound as a gather + cuBLASLt GEMM (DEBUG line at bind) */
static int n_patch_nchw; /* channels-first patchify convs bound as gather + GEMM (DEBUG line at bind) */
static int n_attn_bound, n_attn_mma; /* ert.Attention nodes bound, and of them on the mma flash kernel (DEBUG) */
static int n_lt_gelu; /* MatMuls bound to cuBLASLt with GELU (tanh form) in its epilogue (DEBUG line at bind) */
static int n_dw_packed; /* depthwise filters packed as (K, K, C) at bind (DEBUG line) */
static void on_log(void *user, ert_log_level level, const char *msg) {
    (void)user;
    if (level == ERT_LOG_DEBUG && strstr(msg, "(tanh-form GELU)") && strstr(msg, "ms: cuBLASLt")) n_lt_gelu++;
    if (level == ERT_LOG_DEBUG && strstr(msg, "depthwise filter packed as (K, K, C)")) n_dw_packed++;
    if (level == ERT_LOG_DEBUG && strstr(msg, "cuDNN graph (conv + epilogue fused)")) n_conv_graph++;
    if (level == ERT_LOG_DEBUG && strstr(msg, "cuBLASLt GEMM (patchify")) n_conv_patch++;
    if (level == ERT_LOG_DEBUG && strstr(msg, "patchify gather + GEMM, channels-first")) n_patch_nchw++;
    if (level == ERT_LOG_DEBUG && !strncmp(msg, "attention '", 11)) {
        n_attn_bound++;
        if (strstr(msg, "): mma flash kernel")) n_attn_mma++;
    }
    if (level != ERT_LOG_INFO) return;
    if (strstr(msg, "graph capture not possible")) {
        n_no_graph++;
        printf("  backend: %s\n", msg);
    } else if (!device_logged && strstr(msg, "CUDA device 0")) {
        device_logged = true;
        printf("  backend: %s\n", msg);
    }
}
static int n_skipped;

/* Compute precision of the CUDA sessions under test (F32 first, then F16, BF16). */
static ert_dtype g_prec = ERT_DTYPE_F32;

/* Round x to the nearest value of g_prec (f16: 11 significant bits, normal
 * from 2^-14; bf16: 8 bits, f32's exponent range). */
static float quant(float x) {
    if (g_prec != ERT_DTYPE_F16 && g_prec != ERT_DTYPE_BF16) return x;
    if (x == 0 || !isfinite(x)) return x;
    int bits = g_prec == ERT_DTYPE_F16 ? 11 : 8, min_e = g_prec == ERT_DTYPE_F16 ? -13 : -125, e;
    frexp(x, &e);
    if (e < min_e) e = min_e;
    double q = ldexp(1.0, e - bits);
    return (float)(nearbyint(x / q) * q);
}
static void quant_buf(float *p, int64_t n) {
    if (g_prec == ERT_DTYPE_F16 || g_prec == ERT_DTYPE_BF16)
        for (int64_t i = 0; i < n; i++) p[i] = quant(p[i]);
}
static double prec_tol(double tol) {
    double t = g_prec == ERT_DTYPE_F16 ? 1e-2 : g_prec == ERT_DTYPE_BF16 ? 4e-2 : 0;
    return tol > t ? tol : t;
}

#define MAXIN 6
typedef void (*ref_fn)(const void *u, float *const *in, double *out);

static int64_t nel(int nd, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* Session flags of the CUDA sessions under test (ERT_SESSION_NHWC: channels-last regions whatever cuDNN measures). */
static unsigned g_flags;
/* Create mode of the CUDA sessions under test (ERT_CREATE_FAST: nothing
 * timed, so channels-last depthwise convs take the direct kernel). */
static ert_create_mode g_mode;

static bool make_session(ert_model *m, ert_device dev, ert_placement pl, ert_session **s, const char *name,
                         bool quiet) {
    ert_session_options o = {.device = dev, .placement = pl, .precision = dev == gpu_dev ? g_prec : ERT_DTYPE_F32,
                             .flags = dev == gpu_dev ? g_flags : 0, .create_mode = dev == gpu_dev ? g_mode : 0};
    ert_status st = ert_session_create(m, &o, s);
    if (st == ERT_OK) return true;
    *s = NULL;
    const char *msg = ert_last_error(ctx);
    if (dev == gpu_dev && !(st == ERT_E_UNSUPPORTED && !strstr(msg, "cuda backend")))
        CHECK(false, "%s: CUDA session: %s (%s)", name, ert_status_str(st), msg);
    else if (!quiet)
        printf("  skip %s on %s: %s\n", name, dev == ERT_DEVICE_CUDA ? "cuda" : "cpu", msg);
    return false;
}

/* Run `m` on CUDA (placement pl) three times with fresh inputs in [lo, hi);
 * check output 0 against ref (may be NULL) and against a CPU session where
 * the CPU backend runs it. tol is the relative tolerance. */
static void check_model(const char *name, ert_model *m, ref_fn ref, const void *u, float lo, float hi, double tol,
                        ert_placement pl) {
    ert_session *gs = NULL, *cs = NULL;
    if (!m) {
        n_skipped++;
        return;
    }
    if (!make_session(m, gpu_dev, pl, &gs, name, false)) {
        n_skipped++;
        return;
    }
    bool cpu = make_session(m, ERT_DEVICE_CPU, ERT_PLACEMENT_AUTO, &cs, name, true);
    CHECK(ref || cpu, "%s: no reference and no CPU session (%s)", name, ert_last_error(ctx));
    tol = prec_tol(tol);
    int nin = ert_session_n_inputs(gs);
    float *in[MAXIN] = {0};
    ert_tensor_info oi;
    CHECK_OK(ert_session_output_info(gs, 0, &oi), ctx);
    int64_t no = nel(oi.ndim, oi.dims);
    double *want = xmalloc((size_t)no * sizeof *want);
    float *cpu_out = xmalloc((size_t)no * sizeof *cpu_out);
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < nin && i < MAXIN; i++) {
            ert_tensor_info ii;
            CHECK_OK(ert_session_input_info(gs, i, &ii), ctx);
            int64_t n = nel(ii.ndim, ii.dims);
            if (!in[i]) in[i] = xmalloc((size_t)n * sizeof(float));
            ert_test_fill(&rng, in[i], n, lo, hi);
            quant_buf(in[i], n);
            CHECK_OK(ert_session_set_input(gs, i, in[i], (size_t)n * sizeof(float)), ctx);
            if (cpu) CHECK_OK(ert_session_set_input(cs, i, in[i], (size_t)n * sizeof(float)), ctx);
        }
        const float *got = NULL;
        CHECK_OK(ert_session_output_data(gs, 0, (const void **)&got), ctx);
        ert_test_poison((float *)got, no);
        ert_status st = ert_session_run(gs);
        CHECK(st == ERT_OK, "%s: cuda run %d: %s (%s)", name, rep, ert_status_str(st), ert_last_error(ctx));
        if (st != ERT_OK) break;
        CHECK_OK(ert_session_output_data(gs, 0, (const void **)&got), ctx);
        double amax = 0;
        if (ref) {
            ref(u, in, want);
            for (int64_t i = 0; i < no; i++) amax = fmax(amax, fabs(want[i]));
            char what[160];
            snprintf(what, sizeof what, "%s (%s, placement %d, run %d) vs reference", name, ert_dtype_name(g_prec),
                     (int)pl, rep);
            CHECK(ert_test_close(what, got, want, no, tol * (amax + 1e-3), tol), "%s", what);
        }
        ert_status cst = cpu ? ert_session_run(cs) : ERT_E_UNSUPPORTED;
        CHECK(ref || cst == ERT_OK, "%s: CPU reference run: %s (%s)", name, ert_status_str(cst), ert_last_error(ctx));
        if (cst == ERT_OK) {
            CHECK_OK(ert_session_get_output(cs, 0, cpu_out, (size_t)no * sizeof(float)), ctx);
            amax = 0;
            for (int64_t i = 0; i < no; i++) {
                want[i] = cpu_out[i];
                amax = fmax(amax, fabs(want[i]));
            }
            char what[160];
            snprintf(what, sizeof what, "%s (%s, placement %d, run %d) vs CPU session", name, ert_dtype_name(g_prec),
                     (int)pl, rep);
            CHECK(ert_test_close(what, got, want, no, tol * (amax + 1e-3), tol), "%s", what);
        }
    }
    for (int i = 0; i < MAXIN; i++) free(in[i]);
    free(want);
    free(cpu_out);
    ert_session_free(gs);
    ert_session_free(cs);
}

/* Builder shorthands: errors are recorded and give a NULL model. */
static ert_builder *B;
static bool bok;
#define BT(expr)                                                                                  \
    do {                                                                                          \
        ert_status s_ = (expr);                                                                   \
        if (s_ != ERT_OK) {                                                                       \
            if (bok) printf("  builder: %s -> %s (%s)\n", #expr, ert_status_str(s_), ert_last_error(ctx)); \
            bok = false;                                                                          \
        }                                                                                         \
    } while (0)

static void bstart(void) {
    B = NULL;
    bok = ert_builder_create(ctx, &B) == ERT_OK;
}
static int32_t binput(const char *name, int nd, const int64_t *d) {
    int32_t id = -1;
    BT(ert_builder_input(B, name, ERT_DTYPE_F32, nd, d, &id));
    return id;
}
static int32_t bweight(int nd, const int64_t *d, const float *data) {
    int32_t id = -1;
    static const int64_t scalar[1] = {1};
    BT(ert_builder_weight(B, NULL, ERT_DTYPE_F32, nd, nd ? d : scalar, data, &id));
    return id;
}
static int32_t bweight_i64(int n, const int64_t *data) {
    int32_t id = -1;
    int64_t d[1] = {n};
    BT(ert_builder_weight(B, NULL, ERT_DTYPE_I64, 1, d, data, &id));
    return id;
}
static int32_t bnode(const char *op, const int32_t *in, int n_in, const ert_attr *at, int n_at) {
    int32_t y = -1;
    BT(ert_builder_node(B, op, NULL, in, n_in, at, n_at, &y, 1));
    return y;
}
static ert_model *bfinish(int32_t y) {
    ert_model *m = NULL;
    BT(ert_builder_output(B, y, "y"));
    if (bok) BT(ert_builder_finish(B, &m));
    ert_builder_free(B);
    return bok ? m : NULL;
}
static float *rnd(int64_t n, float lo, float hi) {
    float *p = xmalloc((size_t)n * sizeof *p);
    ert_test_fill(&rng, p, n, lo, hi);
    quant_buf(p, n);
    return p;
}

/* ------------------------------------------------------------------ element-wise */

typedef struct ew_case {
    const char *op;
    float alpha, beta;
    int nd[3];
    int64_t d[3][5];
    int ond;
    int64_t od[5];
} ew_case;

static double ref_act(const char *op, double x, double al, double be) {
    if (!strcmp(op, "Relu")) return x > 0 ? x : 0;
    if (!strcmp(op, "LeakyRelu")) return x >= 0 ? x : al * x;
    if (!strcmp(op, "Clip")) return x < al ? al : (x > be ? be : x);
    if (!strcmp(op, "Sigmoid")) return 1 / (1 + exp(-x));
    if (!strcmp(op, "Tanh")) return tanh(x);
    if (!strcmp(op, "HardSigmoid")) return fmin(1, fmax(0, al * x + be));
    if (!strcmp(op, "HardSwish")) return x * fmin(1, fmax(0, x / 6 + 0.5));
    if (!strcmp(op, "Silu")) return x / (1 + exp(-x));
    if (!strcmp(op, "Gelu")) return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    if (!strcmp(op, "Erf")) return erf(x);
    if (!strcmp(op, "Sqrt")) return sqrt(x);
    if (!strcmp(op, "Exp")) return exp(x);
    if (!strcmp(op, "Log")) return log(x);
    if (!strcmp(op, "Neg")) return -x;
    if (!strcmp(op, "Abs")) return fabs(x);
    if (!strcmp(op, "Reciprocal")) return 1 / x;
    if (!strcmp(op, "Floor")) return floor(x);
    if (!strcmp(op, "Ceil")) return ceil(x);
    return NAN;
}

static void ref_unary(const void *u, float *const *in, double *out) {
    const ew_case *c = u;
    int64_t n = nel(c->nd[0], c->d[0]);
    for (int64_t i = 0; i < n; i++) out[i] = ref_act(c->op, in[0][i], c->alpha, c->beta);
}

/* Offset in an operand of (nd, d) broadcast to (ond, od) for flat output i. */
static int64_t bcast_off(int ond, const int64_t *od, int nd, const int64_t *d, int64_t i) {
    int64_t off = 0, stride = 1;
    for (int k = ond - 1; k >= 0; k--) {
        int64_t idx = i % od[k];
        i /= od[k];
        int j = k - (ond - nd);
        if (j < 0) continue;
        if (d[j] != 1) off += idx * stride;
        stride *= d[j];
    }
    return off;
}

static void ref_binary(const void *u, float *const *in, double *out) {
    const ew_case *c = u;
    int64_t n = nel(c->ond, c->od);
    for (int64_t i = 0; i < n; i++) {
        double a = in[0][bcast_off(c->ond, c->od, c->nd[0], c->d[0], i)];
        double b = in[1][bcast_off(c->ond, c->od, c->nd[1], c->d[1], i)];
        double r = NAN;
        if (!strcmp(c->op, "Add")) r = a + b;
        else if (!strcmp(c->op, "Sub")) r = a - b;
        else if (!strcmp(c->op, "Mul")) r = a * b;
        else if (!strcmp(c->op, "Div")) r = a / b;
        else if (!strcmp(c->op, "Pow")) r = pow(a, b);
        else if (!strcmp(c->op, "Min")) r = fmin(a, b);
        else if (!strcmp(c->op, "Max")) r = fmax(a, b);
        out[i] = r;
    }
}

static void test_unary(void) {
    static const char *ops[] = {"Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
                                "Silu", "Gelu", "Erf", "Sqrt", "Exp", "Log", "Neg", "Abs", "Reciprocal",
                                "Floor", "Ceil"};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        ew_case c = {.op = ops[k], .nd = {3}, .d = {{3, 5, 7}}};
        float lo = -3, hi = 3;
        if (!strcmp(c.op, "Sqrt") || !strcmp(c.op, "Log") || !strcmp(c.op, "Reciprocal")) lo = 0.25f;
        bstart();
        int32_t x = binput("x", 3, c.d[0]), y;
        if (!strcmp(c.op, "LeakyRelu")) {
            c.alpha = 0.13f;
            ert_attr at[] = {ERT_ATTR_F("alpha", c.alpha)};
            int32_t ins[] = {x};
            y = bnode(c.op, ins, 1, at, 1);
        } else if (!strcmp(c.op, "HardSigmoid")) {
            c.alpha = 0.3f, c.beta = 0.4f;
            ert_attr at[] = {ERT_ATTR_F("alpha", c.alpha), ERT_ATTR_F("beta", c.beta)};
            int32_t ins[] = {x};
            y = bnode(c.op, ins, 1, at, 2);
        } else if (!strcmp(c.op, "Clip")) {
            c.alpha = -0.7f, c.beta = 1.1f;
            float lo_v = c.alpha, hi_v = c.beta;
            int32_t ins[] = {x, bweight(0, NULL, &lo_v), bweight(0, NULL, &hi_v)};
            y = bnode(c.op, ins, 3, NULL, 0);
        } else {
            int32_t ins[] = {x};
            y = bnode(c.op, ins, 1, NULL, 0);
        }
        ert_model *m = bfinish(y);
        check_model(c.op, m, ref_unary, &c, lo, hi, 1e-5, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
}

static void test_binary(void) {
    static const char *ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Min", "Max"};
    /* (2,1,5,7) op (3,1,7) -> (2,3,5,7); and same shapes; and a scalar.
     * Then one operand full and the other repeated in blocks
     * (binary_bcast_kernel, kernels/cuda/eltwise.cu), odd sizes with and
     * without whole vectors (element counts that 8 divides or not), either
     * operand the small one: EfficientNet's SE scale NCHW and channels-last,
     * Swin's shifted-window mask (B, nW, heads, L, L) + (nW, 1, L, L) and
     * relative position bias, a per-channel constant, a bias over the last
     * dim. */
    const ew_case shapes[] = {
        {.nd = {4, 3}, .d = {{2, 1, 5, 7}, {3, 1, 7}}, .ond = 4, .od = {2, 3, 5, 7}},
        {.nd = {2, 2}, .d = {{9, 11}, {9, 11}}, .ond = 2, .od = {9, 11}},
        {.nd = {3, 0}, .d = {{4, 3, 5}, {0}}, .ond = 3, .od = {4, 3, 5}},
        {.nd = {4, 4}, .d = {{2, 17, 7, 5}, {2, 17, 1, 1}}, .ond = 4, .od = {2, 17, 7, 5}},
        {.nd = {4, 4}, .d = {{2, 3, 1, 1}, {2, 3, 7, 5}}, .ond = 4, .od = {2, 3, 7, 5}},
        {.nd = {4, 4}, .d = {{2, 33, 8, 6}, {2, 33, 1, 1}}, .ond = 4, .od = {2, 33, 8, 6}},
        {.nd = {4, 4}, .d = {{2, 7, 5, 17}, {2, 1, 1, 17}}, .ond = 4, .od = {2, 7, 5, 17}},
        {.nd = {4, 4}, .d = {{2, 1, 1, 24}, {2, 4, 6, 24}}, .ond = 4, .od = {2, 4, 6, 24}},
        {.nd = {5, 4}, .d = {{2, 4, 3, 7, 7}, {4, 1, 7, 7}}, .ond = 5, .od = {2, 4, 3, 7, 7}},
        {.nd = {4, 3}, .d = {{8, 3, 7, 7}, {3, 7, 7}}, .ond = 4, .od = {8, 3, 7, 7}},
        {.nd = {3, 4}, .d = {{3, 1, 1}, {2, 3, 7, 5}}, .ond = 4, .od = {2, 3, 7, 5}},
        {.nd = {2, 1}, .d = {{6, 16}, {16}}, .ond = 2, .od = {6, 16}},
    };
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            ew_case c = shapes[s];
            c.op = ops[k];
            bstart();
            int32_t a = binput("a", c.nd[0], c.d[0]), b = binput("b", c.nd[1], c.d[1]), y;
            BT(ert_builder_binary(B, c.op, a, b, &y));
            ert_model *m = bfinish(y);
            char name[64];
            snprintf(name, sizeof name, "%s shape %zu", c.op, s);
            bool pos = !strcmp(c.op, "Pow") || !strcmp(c.op, "Div");
            check_model(name, m, ref_binary, &c, pos ? 0.5f : -2.0f, 2.0f, 1e-5, ERT_PLACEMENT_AUTO);
            ert_model_free(m);
        }
}

/* ------------------------------------------------------------------ conv */

typedef struct conv_case {
    int nsp;
    int64_t N, C, M, group, in[2], k[2], s[2], d[2], pb[2], pe[2], out[2];
    bool bias, residual;
    int act; /* 0 none, 1 relu, 3 clip [0, 0.5] (ert_act values) */
    float *w, *b;
} conv_case;

static void ref_conv(const void *u, float *const *in, double *out) {
    const conv_case *c = u;
    int64_t H = c->nsp == 2 ? c->in[0] : 1, W = c->in[c->nsp - 1], OH = c->nsp == 2 ? c->out[0] : 1,
            OW = c->out[c->nsp - 1];
    int64_t KH = c->nsp == 2 ? c->k[0] : 1, KW = c->k[c->nsp - 1];
    int64_t sh = c->nsp == 2 ? c->s[0] : 1, sw = c->s[c->nsp - 1], dh = c->nsp == 2 ? c->d[0] : 1,
            dw = c->d[c->nsp - 1], ph = c->nsp == 2 ? c->pb[0] : 0, pw = c->pb[c->nsp - 1];
    int64_t Cg = c->C / c->group, Mg = c->M / c->group;
    const float *x = in[0], *res = c->residual ? in[1] : NULL;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = c->bias ? c->b[m] : 0;
                    int64_t g = m / Mg;
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += (double)x[((n * c->C + g * Cg + ci) * H + ih) * W + iw] *
                                       c->w[((m * Cg + ci) * KH + kh) * KW + kw];
                            }
                    int64_t oi = ((n * c->M + m) * OH + oh) * OW + ow;
                    if (res) acc += res[oi];
                    if ((c->act == 1 || c->act == 3) && acc < 0) acc = 0;
                    if (c->act == 3 && acc > 0.5) acc = 0.5;
                    out[oi] = acc;
                }
}

static ert_model *build_conv(conv_case *c) {
    int nsp = c->nsp;
    for (int i = 0; i < nsp; i++) {
        int64_t eff = (c->k[i] - 1) * c->d[i] + 1;
        c->out[i] = (c->in[i] + c->pb[i] + c->pe[i] - eff) / c->s[i] + 1;
    }
    int64_t xd[4] = {c->N, c->C, c->in[0], c->in[1]}, wd[4] = {c->M, c->C / c->group, c->k[0], c->k[1]};
    int64_t yd[4] = {c->N, c->M, c->out[0], c->out[1]}, bd[1] = {c->M};
    c->w = rnd(nel(2 + nsp, wd), -0.5f, 0.5f);
    c->b = rnd(c->M, -0.5f, 0.5f);
    bstart();
    int32_t x = binput("x", 2 + nsp, xd);
    int32_t r = c->residual ? binput("r", 2 + nsp, yd) : -1;
    int32_t ins[4] = {x, bweight(2 + nsp, wd, c->w), c->bias ? bweight(1, bd, c->b) : -1, r};
    int64_t pads[4] = {c->pb[0], c->pb[1], c->pe[0], c->pe[1]};
    if (nsp == 1) pads[1] = c->pe[0];
    ert_attr at[] = {ERT_ATTR_IS("kernel_shape", c->k, nsp), ERT_ATTR_IS("strides", c->s, nsp),
                     ERT_ATTR_IS("dilations", c->d, nsp), ERT_ATTR_IS("pads", pads, 2 * nsp),
                     ERT_ATTR_I("group", c->group), ERT_ATTR_I("ert_act", c->act), ERT_ATTR_F("ert_act_alpha", 0.0f),
                     ERT_ATTR_F("ert_act_beta", 0.5f)};
    int32_t y = bnode("Conv", ins, c->residual ? 4 : (c->bias ? 3 : 2), at, c->act == 3 ? 8 : 6);
    return bfinish(y);
}

static void run_conv_case(const char *name, conv_case c, ert_placement pl) {
    ert_model *m = build_conv(&c);
    check_model(name, m, ref_conv, &c, -1, 1, 1e-4, pl);
    ert_model_free(m);
    free(c.w);
    free(c.b);
}

/* Depthwise convs as the zoo has them (K 3/5/7, stride 1/2) and beside
 * them dilation 2 and an even K, on the channels-last direct kernel
 * (conv.cu dw_nhwc_kernel) under ERT_CREATE_FAST and as measured: channel
 * counts from one 16-byte vector to 25, bias, residual (also at stride 2)
 * and activations; random sizes each run. */
static void test_dw(void) {
    static const struct { int k, s, d; bool bias, res; int act; } dc[] = {
        {3, 1, 1, true, false, 1}, {3, 2, 1, false, false, 0}, {5, 1, 1, true, true, 3}, {5, 2, 1, true, false, 1},
        {7, 1, 1, true, true, 0},  {7, 2, 1, false, true, 3},  {3, 1, 2, true, false, 1}, {4, 1, 1, true, false, 0},
        {7, 1, 1, true, false, 0}, {3, 2, 1, true, true, 3},   {5, 2, 1, false, true, 1},  {3, 1, 1, false, true, 3},
    };
    /* 96: ConvNeXt-T's 7x7 stage-1 channels */
    static const int64_t chans[] = {8, 24, 40, 72, 96, 136, 200};
    for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++) {
        int64_t C = chans[ert_test_int(&rng, 0, (int)(sizeof chans / sizeof chans[0]) - 1)];
        int64_t H = ert_test_int(&rng, dc[i].k, 19), W = ert_test_int(&rng, dc[i].k % 2 ? 1 : dc[i].k, 23), p = dc[i].d * (dc[i].k - 1) / 2;
        conv_case c = {.nsp = 2, .N = ert_test_int(&rng, 1, 2), .C = C, .M = C, .group = C, .in = {H, W},
                       .k = {dc[i].k, dc[i].k}, .s = {dc[i].s, dc[i].s}, .d = {dc[i].d, dc[i].d}, .pb = {p, p},
                       .pe = {p, p}, .bias = dc[i].bias, .residual = dc[i].res, .act = dc[i].act};
        char nm[96];
        snprintf(nm, sizeof nm, "dw %dx%d s%d d%d C%d %dx%d%s%s", dc[i].k, dc[i].k, dc[i].s, dc[i].d, (int)C, (int)H,
                 (int)W, c.bias ? " bias" : "", c.residual ? " +res" : "");
        run_conv_case(nm, c, ERT_PLACEMENT_AUTO);
    }
    /* maps large enough for the packed kernel's 16-byte threads (more than
     * 132 * 4 blocks of 128 threads at batch 2), 7x7 and 3x3 stride 2 */
    static const struct { int k, s; int64_t C, H; } big[] = {{7, 1, 128, 48}, {3, 2, 64, 112}};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        int64_t p = (big[i].k - 1) / 2;
        conv_case c = {.nsp = 2, .N = 2, .C = big[i].C, .M = big[i].C, .group = big[i].C, .in = {big[i].H, big[i].H},
                       .k = {big[i].k, big[i].k}, .s = {big[i].s, big[i].s}, .d = {1, 1}, .pb = {p, p}, .pe = {p, p},
                       .bias = true, .residual = big[i].s == 1, .act = 1};
        char nm[96];
        snprintf(nm, sizeof nm, "dw %dx%d s%d C%d %dx%d N2 (large)", big[i].k, big[i].k, big[i].s, (int)big[i].C,
                 (int)big[i].H, (int)big[i].H);
        run_conv_case(nm, c, ERT_PLACEMENT_AUTO);
    }
}

static void test_conv(void) {
    run_conv_case("conv 3x3 p1", (conv_case){.nsp = 2, .N = 2, .C = 5, .M = 7, .group = 1, .in = {11, 13},
                                            .k = {3, 3}, .s = {1, 1}, .d = {1, 1}, .pb = {1, 1}, .pe = {1, 1},
                                            .bias = true}, ERT_PLACEMENT_AUTO);
    run_conv_case("conv s2 d2 g2", (conv_case){.nsp = 2, .N = 1, .C = 6, .M = 4, .group = 2, .in = {17, 9},
                                              .k = {3, 2}, .s = {2, 2}, .d = {2, 1}, .pb = {2, 1}, .pe = {2, 1},
                                              .bias = true}, ERT_PLACEMENT_AUTO);
    run_conv_case("conv depthwise", (conv_case){.nsp = 2, .N = 2, .C = 6, .M = 12, .group = 6, .in = {10, 7},
                                               .k = {3, 3}, .s = {1, 2}, .d = {1, 1}, .pb = {1, 1}, .pe = {1, 1},
                                               .bias = false}, ERT_PLACEMENT_AUTO);
    run_conv_case("conv 1x1 +res relu", (conv_case){.nsp = 2, .N = 2, .C = 8, .M = 5, .group = 1, .in = {6, 5},
                                                   .k = {1, 1}, .s = {1, 1}, .d = {1, 1}, .bias = true,
                                                   .residual = true, .act = 1}, ERT_PLACEMENT_AUTO);
    /* the shapes of the fused cuDNN path: bias + ReLU, bias + ReLU6-like
     * clip, bias only (identity: fused only with IMPLICIT_PRECOMP_GEMM) */
    run_conv_case("conv 3x3 relu (fused)", (conv_case){.nsp = 2, .N = 2, .C = 16, .M = 32, .group = 1,
                                                      .in = {14, 14}, .k = {3, 3}, .s = {1, 1}, .d = {1, 1},
                                                      .pb = {1, 1}, .pe = {1, 1}, .bias = true, .act = 1},
                  ERT_PLACEMENT_AUTO);
    run_conv_case("conv 3x3 s2 clip (fused)", (conv_case){.nsp = 2, .N = 1, .C = 8, .M = 24, .group = 1,
                                                         .in = {15, 15}, .k = {3, 3}, .s = {2, 2}, .d = {1, 1},
                                                         .pb = {1, 1}, .pe = {1, 1}, .bias = true, .act = 3},
                  ERT_PLACEMENT_AUTO);
    run_conv_case("conv dw clip (fused)", (conv_case){.nsp = 2, .N = 2, .C = 16, .M = 16, .group = 16,
                                                     .in = {12, 12}, .k = {3, 3}, .s = {1, 1}, .d = {1, 1},
                                                     .pb = {1, 1}, .pe = {1, 1}, .bias = true, .act = 3},
                  ERT_PLACEMENT_AUTO);
    run_conv_case("conv 1x1 bias +res (fused)", (conv_case){.nsp = 2, .N = 2, .C = 32, .M = 16, .group = 1,
                                                           .in = {7, 7}, .k = {1, 1}, .s = {1, 1}, .d = {1, 1},
                                                           .bias = true, .residual = true},
                  ERT_PLACEMENT_AUTO);
    /* 1x1 stride-1 convs: in f16/bf16 channels-last sessions a cuBLASLt GEMM
     * with bias/ReLU fused, the residual as its C matrix and other
     * activations in the epilogue kernel; odd C, K, H, W */
    {
        static const struct { int64_t N, C, M, H, W; bool bias, res; int act; } g1[] = {
            {1, 7, 5, 3, 5, true, false, 1},  {2, 13, 9, 5, 3, true, false, 3}, {1, 17, 11, 7, 9, true, true, 1},
            {1, 9, 3, 1, 1, false, false, 0}, {3, 5, 19, 3, 3, false, true, 0}, {1, 33, 15, 5, 7, true, true, 3},
            {1, 24, 40, 9, 9, true, false, 0}, {2, 3, 7, 11, 13, false, false, 1},
        };
        for (size_t i = 0; i < sizeof g1 / sizeof g1[0]; i++) {
            char nm[96];
            snprintf(nm, sizeof nm, "conv 1x1 N%d C%d K%d %dx%d%s%s%s", (int)g1[i].N, (int)g1[i].C, (int)g1[i].M,
                     (int)g1[i].H, (int)g1[i].W, g1[i].bias ? " bias" : "", g1[i].res ? " +res" : "",
                     g1[i].act == 1 ? " relu" : g1[i].act == 3 ? " clip" : "");
            run_conv_case(nm, (conv_case){.nsp = 2, .N = g1[i].N, .C = g1[i].C, .M = g1[i].M, .group = 1,
                                          .in = {g1[i].H, g1[i].W}, .k = {1, 1}, .s = {1, 1}, .d = {1, 1},
                                          .bias = g1[i].bias, .residual = g1[i].res, .act = g1[i].act},
                          ERT_PLACEMENT_AUTO);
        }
    }
    run_conv_case("conv asym pads (direct)", (conv_case){.nsp = 2, .N = 1, .C = 3, .M = 4, .group = 1,
                                                        .in = {9, 8}, .k = {3, 3}, .s = {2, 1}, .d = {1, 1},
                                                        .pb = {0, 1}, .pe = {1, 2}, .bias = true, .act = 1},
                  ERT_PLACEMENT_AUTO);
    run_conv_case("conv 1-D", (conv_case){.nsp = 1, .N = 3, .C = 4, .M = 6, .group = 2, .in = {19, 1}, .k = {5, 1},
                                         .s = {2, 1}, .d = {1, 1}, .pb = {2, 0}, .pe = {2, 0}, .bias = true},
                  ERT_PLACEMENT_AUTO);
    { /* two convs sharing one filter (the f16/bf16 path rewrites a filter once, in place) */
        int64_t xd[4] = {2, 16, 9, 9}, wd[4] = {16, 16, 3, 3};
        float *w = rnd(nel(4, wd), -0.3f, 0.3f);
        bstart();
        int32_t x = binput("x", 4, xd), wi = bweight(4, wd, w), h, r, y;
        BT(ert_builder_conv2d(B, x, wi, -1, 1, 1, 1, 1, &h));
        BT(ert_builder_unary(B, "Relu", h, &r));
        BT(ert_builder_conv2d(B, r, wi, -1, 1, 1, 1, 1, &y));
        ert_model *m = bfinish(y);
        check_model("two convs, one filter", m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
        free(w);
    }
    for (int pl = ERT_PLACEMENT_DEVICE; pl <= ERT_PLACEMENT_MAPPED; pl++)
        run_conv_case("conv placement", (conv_case){.nsp = 2, .N = 1, .C = 3, .M = 8, .group = 1, .in = {15, 15},
                                                   .k = {3, 3}, .s = {1, 1}, .d = {1, 1}, .pb = {1, 1},
                                                   .pe = {1, 1}, .bias = true, .residual = true, .act = 1},
                      (ert_placement)pl);
}

/* Patchify convs (kernel == stride, no pad) kept channels-first: in f16/bf16
 * sessions a gather + GEMM + epilogue when bind times it faster than cuDNN,
 * always under ERT_CREATE_FAST (checked by its DEBUG line); ViT's 16x16/16
 * on 3 channels, Swin's 4x4/4, odd sizes that leave rows and columns over,
 * bias, residual, ReLU, batch 2. NCHW forced (ERT_SESSION_NO_NHWC). */
static void test_patch_nchw(void) {
    static const struct { int64_t N, C, M, H, W, k; bool bias, res; int act; } pc[] = {
        {1, 3, 24, 48, 33, 16, true, false, 0}, {2, 3, 17, 19, 23, 4, true, false, 0},
        {1, 5, 9, 13, 17, 4, false, true, 1},   {2, 7, 11, 10, 9, 2, true, true, 1},
    };
    unsigned flags0 = g_flags;
    ert_create_mode mode0 = g_mode;
    for (int timed = 0; timed < 2; timed++) {
        g_flags = ERT_SESSION_NO_NHWC;
        g_mode = timed ? ERT_CREATE_TUNED : ERT_CREATE_FAST;
        int n0 = n_patch_nchw;
        for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) {
            char nm[96];
            snprintf(nm, sizeof nm, "patchify NCHW %lldx%lld/%lld N%lld C%lld K%lld %lldx%lld%s%s%s", (long long)pc[i].k,
                     (long long)pc[i].k, (long long)pc[i].k, (long long)pc[i].N, (long long)pc[i].C, (long long)pc[i].M,
                     (long long)pc[i].H, (long long)pc[i].W, pc[i].bias ? " bias" : "", pc[i].res ? " +res" : "",
                     pc[i].act ? " relu" : "");
            run_conv_case(nm, (conv_case){.nsp = 2, .N = pc[i].N, .C = pc[i].C, .M = pc[i].M, .group = 1,
                                          .in = {pc[i].H, pc[i].W}, .k = {pc[i].k, pc[i].k}, .s = {pc[i].k, pc[i].k},
                                          .d = {1, 1}, .bias = pc[i].bias, .residual = pc[i].res, .act = pc[i].act},
                          ERT_PLACEMENT_AUTO);
        }
        if (!timed && g_prec != ERT_DTYPE_F32 && gpu_dev == ERT_DEVICE_CUDA)
            CHECK(n_patch_nchw - n0 >= 4, "%s: %d channels-first patchify convs bound as gather + GEMM under "
                  "ERT_CREATE_FAST, want 4", ert_dtype_name(g_prec), n_patch_nchw - n0);
        printf("  %d channels-first patchify convs bound as gather + GEMM (%s, %s)\n", n_patch_nchw - n0,
               ert_dtype_name(g_prec), timed ? "timed" : "fast create");
    }
    g_flags = flags0;
    g_mode = mode0;
}

/* ------------------------------------------------------------------ fused attention */

/* Scaled dot-product attention as exporters write it, fused by the graph pass
 * into one ert.Attention node (checked by its DEBUG line at bind), against
 * the CPU session. Shapes: ViT's 197 tokens x 64 dims, Swin's windows of 49
 * x 32 with a relative-position bias, a query count unlike the key count,
 * head dims that are not multiples of 8 or 16 (the element-wise loads, the
 * zero padding of the tensor-core tiles), 1 token, 128 dims; with and
 * without an additive bias holding -inf (masked keys, never a whole row).
 * Layouts: separate (B, H, N, D) inputs, and timm's fused qkv projection
 * (B, N, 3 H D) -> Reshape -> Transpose(2, 0, 3, 1, 4) -> Gather, whose views
 * have a token stride of 3 H D. f16/bf16 run twice: under ERT_CREATE_FAST
 * (the mma flash kernel wherever the chip has it, sm_80+) and tuned (bind
 * times it against the cuBLAS path). */
static void attn_case(int64_t Bn, int64_t H, int64_t nq, int64_t nk, int64_t D, int bias_kind, bool qkv) {
    float scale = 1.0f / sqrtf((float)D);
    char nm[128];
    snprintf(nm, sizeof nm, "attention %s B%lld H%lld nq%lld nk%lld D%lld%s", qkv ? "qkv" : "q/k/v", (long long)Bn,
             (long long)H, (long long)nq, (long long)nk, (long long)D,
             bias_kind == 1 ? " +bias (H,nq,nk) -inf" : bias_kind == 2 ? " +bias (nq,nk)" : "");
    bstart();
    int32_t q, k, v;
    int64_t perm_k[4] = {0, 1, 3, 2};
    if (qkv) {
        int64_t xd[3] = {Bn, nq, 3 * H * D}, shp[5] = {Bn, nq, 3, H, D}, perm[5] = {2, 0, 3, 1, 4}, sd[1] = {5};
        int32_t x = binput("x", 3, xd);
        int32_t sh;
        BT(ert_builder_weight(B, NULL, ERT_DTYPE_I64, 1, sd, shp, &sh));
        int32_t r = bnode("Reshape", (int32_t[]){x, sh}, 2, NULL, 0);
        ert_attr pa[] = {ERT_ATTR_IS("perm", perm, 5)};
        r = bnode("Transpose", &r, 1, pa, 1);
        int32_t g[3];
        for (int i = 0; i < 3; i++) {
            int32_t idx;
            int64_t iv = i;
            BT(ert_builder_weight(B, NULL, ERT_DTYPE_I64, 0, sd, &iv, &idx));
            ert_attr ga[] = {ERT_ATTR_I("axis", 0)};
            g[i] = bnode("Gather", (int32_t[]){r, idx}, 2, ga, 1);
        }
        q = g[0], k = g[1], v = g[2];
    } else {
        int64_t dq[4] = {Bn, H, nq, D}, dk[4] = {Bn, H, nk, D};
        q = binput("q", 4, dq), k = binput("k", 4, dk), v = binput("v", 4, dk);
    }
    ert_attr pk[] = {ERT_ATTR_IS("perm", perm_k, 4)}, sa[] = {ERT_ATTR_I("axis", -1)};
    int32_t qs = bnode("Mul", (int32_t[]){q, bweight(0, NULL, &scale)}, 2, NULL, 0);
    int32_t kt = bnode("Transpose", &k, 1, pk, 1);
    int32_t y = bnode("MatMul", (int32_t[]){qs, kt}, 2, NULL, 0);
    if (bias_kind) {
        int64_t bd[3] = {H, nq, nk};
        int nd = bias_kind == 1 ? 3 : 2;
        const int64_t *bdp = bias_kind == 1 ? bd : bd + 1;
        int64_t n = nel(nd, bdp);
        float *bv = rnd(n, -2.0f, 2.0f);
        if (bias_kind == 1) /* mask about one key in five, never a row's key 0 */
            for (int64_t i = 0; i < n; i++)
                if (i % nk && ert_test_int(&rng, 0, 4) == 0) bv[i] = -INFINITY;
        y = bnode("Add", (int32_t[]){y, bweight(nd, bdp, bv)}, 2, NULL, 0);
        free(bv);
    }
    y = bnode("Softmax", &y, 1, sa, 1);
    y = bnode("MatMul", (int32_t[]){y, v}, 2, NULL, 0);
    if (qkv) { /* (B, H, N, D) -> (B, N, H D), as timm does before the projection */
        int64_t perm2[4] = {0, 2, 1, 3}, shp[3] = {Bn, nq, H * D}, sd[1] = {3};
        ert_attr pa[] = {ERT_ATTR_IS("perm", perm2, 4)};
        y = bnode("Transpose", &y, 1, pa, 1);
        int32_t sh;
        BT(ert_builder_weight(B, NULL, ERT_DTYPE_I64, 1, sd, shp, &sh));
        y = bnode("Reshape", (int32_t[]){y, sh}, 2, NULL, 0);
    }
    ert_model *m = bfinish(y);
    int b0 = n_attn_bound;
    ert_session *cs = NULL;
    if (m && make_session(m, ERT_DEVICE_CPU, ERT_PLACEMENT_AUTO, &cs, nm, true)) { /* the pass fused the block */
        ert_profile_entry pe[64];
        int np = 0, n_att = 0, n_sm = 0;
        CHECK_OK(ert_session_profile(cs, pe, 64, &np), ctx);
        for (int i = 0; i < np && i < 64; i++) {
            n_att += !strcmp(pe[i].op, "ert.Attention");
            n_sm += !strcmp(pe[i].op, "Softmax");
        }
        CHECK(n_att == 1 && n_sm == 0, "%s: the CPU session runs %d ert.Attention and %d Softmax nodes, want 1 and 0",
              nm, n_att, n_sm);
        ert_session_free(cs);
    }
    check_model(nm, m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
    if (m && gpu_dev == ERT_DEVICE_CUDA)
        CHECK(n_attn_bound == b0 + 1, "%s: %d ert.Attention nodes bound, want 1 (the pass did not fuse it)", nm,
              n_attn_bound - b0);
    ert_model_free(m);
}

static void test_attention(void) {
    static const struct { int64_t B, H, nq, nk, D; int bias; bool qkv; } ac[] = {
        {1, 3, 197, 197, 64, 0, true}, {2, 2, 50, 50, 20, 0, true},  {1, 4, 49, 49, 32, 1, false},
        {3, 2, 7, 77, 48, 2, false},   {1, 5, 1, 1, 16, 0, false},   {2, 1, 130, 65, 128, 1, false},
        {1, 2, 33, 33, 96, 0, false},  {1, 6, 65, 65, 8, 2, true},   {4, 3, 49, 49, 32, 1, true},
    };
    ert_create_mode mode0 = g_mode;
    int dev = 0, cc = 0;
    if (gpu_dev == ERT_DEVICE_CUDA && cudaGetDevice(&dev) == cudaSuccess)
        cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, dev);
    for (int timed = 0; timed < (g_prec == ERT_DTYPE_F32 ? 1 : 2); timed++) {
        g_mode = timed ? ERT_CREATE_TUNED : ERT_CREATE_FAST;
        int b0 = n_attn_bound, m0 = n_attn_mma;
        for (size_t i = 0; i < sizeof ac / sizeof ac[0]; i++)
            attn_case(ac[i].B, ac[i].H, ac[i].nq, ac[i].nk, ac[i].D, ac[i].bias, ac[i].qkv);
        int n = n_attn_bound - b0, mma = n_attn_mma - m0;
        if (!timed && g_prec != ERT_DTYPE_F32 && cc >= 8)
            CHECK(mma == n, "%s: %d of %d attention nodes on the mma flash kernel under ERT_CREATE_FAST (sm_%d0), want all",
                  ert_dtype_name(g_prec), mma, n, cc);
        printf("  attention: %d of %d nodes on the mma flash kernel (%s, %s)\n", mma, n, ert_dtype_name(g_prec),
               timed ? "timed" : "fast create");
    }
    g_mode = mode0;
}

/* ------------------------------------------------------------------ gemm / matmul */

typedef struct mm_case {
    int64_t M, N, K;
    bool ta, tb, has_c;
    float alpha, beta;
    float *w, *cw;
    int64_t cdims[2];
    int cnd;
    /* matmul */
    int and_, bnd;
    int64_t ad[4], bd[4], od[4];
    int ond;
} mm_case;

static void ref_gemm(const void *u, float *const *in, double *out) {
    const mm_case *c = u;
    const float *A = in[0], *W = c->w;
    for (int64_t i = 0; i < c->M; i++)
        for (int64_t j = 0; j < c->N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < c->K; k++) {
                double a = c->ta ? A[k * c->M + i] : A[i * c->K + k];
                double b = c->tb ? W[j * c->K + k] : W[k * c->N + j];
                acc += a * b;
            }
            acc *= c->alpha;
            if (c->has_c) {
                int64_t od[2] = {c->M, c->N};
                acc += c->beta * c->cw[bcast_off(2, od, c->cnd, c->cdims, i * c->N + j)];
            }
            out[i * c->N + j] = acc;
        }
}

static void test_gemm(void) {
    mm_case cs[] = {
        {.M = 5, .N = 9, .K = 7, .tb = true, .has_c = true, .alpha = 0.5f, .beta = 2.0f, .cnd = 1, .cdims = {9}},
        {.M = 33, .N = 17, .K = 65, .ta = true, .has_c = true, .alpha = 1.0f, .beta = 1.0f, .cnd = 2,
         .cdims = {33, 1}},
        {.M = 4, .N = 3, .K = 129, .alpha = 1.0f, .beta = 1.0f},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        mm_case *c = &cs[k];
        int64_t ad[2] = {c->ta ? c->K : c->M, c->ta ? c->M : c->K};
        int64_t wd[2] = {c->tb ? c->N : c->K, c->tb ? c->K : c->N};
        c->w = rnd(c->N * c->K, -1, 1);
        c->cw = rnd(nel(c->cnd, c->cdims), -1, 1);
        bstart();
        int32_t ins[3] = {binput("a", 2, ad), bweight(2, wd, c->w), c->has_c ? bweight(c->cnd, c->cdims, c->cw) : -1};
        ert_attr at[] = {ERT_ATTR_F("alpha", c->alpha), ERT_ATTR_F("beta", c->beta), ERT_ATTR_I("transA", c->ta),
                         ERT_ATTR_I("transB", c->tb)};
        int32_t y = bnode("Gemm", ins, c->has_c ? 3 : 2, at, 4);
        ert_model *m = bfinish(y);
        char name[32];
        snprintf(name, sizeof name, "Gemm %zu", k);
        check_model(name, m, ref_gemm, c, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
        free(c->w);
        free(c->cw);
    }
}

static void ref_matmul(const void *u, float *const *in, double *out) {
    const mm_case *c = u;
    int obn = c->ond - 2;
    int64_t batch = nel(obn, c->od);
    int64_t abd[4] = {0}, bbd[4] = {0};
    int abn = c->and_ - 2, bbn = c->bnd - 2;
    for (int i = 0; i < abn; i++) abd[i] = c->ad[i];
    for (int i = 0; i < bbn; i++) bbd[i] = c->bd[i];
    for (int64_t b = 0; b < batch; b++) {
        const float *A = in[0] + bcast_off(obn, c->od, abn, abd, b) * c->M * c->K;
        const float *Bm = in[1] + bcast_off(obn, c->od, bbn, bbd, b) * c->K * c->N;
        for (int64_t i = 0; i < c->M; i++)
            for (int64_t j = 0; j < c->N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < c->K; k++) acc += (double)A[i * c->K + k] * Bm[k * c->N + j];
                out[(b * c->M + i) * c->N + j] = acc;
            }
    }
}

/* GELU of h as the exporters spell it: h * (Erf(h / sqrt 2) + 1) * 0.5 (the
 * fusion pass makes it one GELU, then part of the MatMul before it). */
static int32_t erf_gelu(int32_t h) {
    float sq2 = 1.4142135f, one = 1.0f, half = 0.5f;
    int32_t g = bnode("Div", (int32_t[]){h, bweight(0, NULL, &sq2)}, 2, NULL, 0);
    g = bnode("Erf", (int32_t[]){g}, 1, NULL, 0);
    g = bnode("Add", (int32_t[]){g, bweight(0, NULL, &one)}, 2, NULL, 0);
    g = bnode("Mul", (int32_t[]){h, g}, 2, NULL, 0);
    return bnode("Mul", (int32_t[]){g, bweight(0, NULL, &half)}, 2, NULL, 0);
}

/* MatMul + bias + GELU (erf, as exporters spell it): x (3, 37, 40) @ I +
 * 0, so the GELU reads x itself (rounded to the session's precision), with
 * x in [-4, 3]: around x = -2.7 the tanh form and the erf form differ by
 * 4.7e-4 while GELU is -0.0094 (f16 steps of 7.6e-6 there), so the two
 * forms are told apart. f16/bf16 under ERT_CREATE_FAST (cuBLASLt whenever it
 * runs): the GEMM takes GELU into cuBLASLt's epilogue and the output is
 * within 4.8e-4 of erf-GELU plus the rounding of the type; with
 * ERT_SESSION_EXACT_GELU, and in f32, every value is erf-GELU within the
 * type's rounding (2e-5 absolute). Double reference; output poisoned. */
static void test_gelu_epilogue(void) {
    const int64_t R = 3 * 37, K = 40;
    int64_t xd[3] = {3, 37, K}, wd[2] = {K, K}, bd[1] = {K};
    float *w = calloc((size_t)(K * K), sizeof *w), *bz = calloc((size_t)K, sizeof *bz);
    float *x = xmalloc((size_t)(R * K) * sizeof *x);
    for (int64_t i = 0; i < K; i++) w[i * K + i] = 1.0f;
    bstart();
    int32_t in = binput("x", 3, xd), h;
    h = bnode("MatMul", (int32_t[]){in, bweight(2, wd, w)}, 2, NULL, 0);
    h = bnode("Add", (int32_t[]){h, bweight(1, bd, bz)}, 2, NULL, 0);
    ert_model *m = bfinish(erf_gelu(h));
    free(w), free(bz);
    unsigned flags0 = g_flags;
    ert_create_mode mode0 = g_mode;
    g_mode = ERT_CREATE_FAST;
    const bool half_t = g_prec == ERT_DTYPE_F16 || g_prec == ERT_DTYPE_BF16;
    for (int exact = 0; exact < 2 && m; exact++) {
        g_flags = exact ? ERT_SESSION_EXACT_GELU : 0;
        int n0 = n_lt_gelu;
        ert_session *s = NULL;
        if (!make_session(m, gpu_dev, ERT_PLACEMENT_AUTO, &s, "GELU epilogue", false)) {
            n_skipped++;
            continue;
        }
        int lt = n_lt_gelu - n0;
        if (gpu_dev == ERT_DEVICE_CUDA)
            CHECK(lt == (half_t && !exact), "GELU epilogue (%s, exact %d): %d MatMuls with cuBLASLt's GELU, want %d",
                  ert_dtype_name(g_prec), exact, lt, half_t && !exact);
        double tanh_err = 0, worst = 0;
        for (int rep = 0; rep < 2; rep++) {
            ert_test_fill(&rng, x, R * K, -4.0f, 3.0f);
            quant_buf(x, R * K);
            CHECK_OK(ert_session_set_input(s, 0, x, (size_t)(R * K) * sizeof *x), ctx);
            const float *got = NULL;
            CHECK_OK(ert_session_output_data(s, 0, (const void **)&got), ctx);
            ert_test_poison((float *)got, R * K);
            CHECK_OK(ert_session_run(s), ctx);
            CHECK_OK(ert_session_output_data(s, 0, (const void **)&got), ctx);
            for (int64_t i = 0; i < R * K; i++) {
                double v = x[i], ref = 0.5 * v * erfc(-v / sqrt(2.0));
                /* the type's rounding of the output: half a step of f16 (2^-11 relative) or bf16 (2^-8) */
                double step = fabs(ref) * (g_prec == ERT_DTYPE_BF16 ? 0x1p-8 : g_prec == ERT_DTYPE_F16 ? 0x1p-11 : 0x1p-22);
                double e = fabs((double)got[i] - ref) - step;
                if (e > worst) worst = e;
                if (fabs(v + 2.7) < 0.2 && fabs((double)got[i] - ref) > tanh_err) tanh_err = fabs((double)got[i] - ref);
            }
        }
        double bound = half_t && !exact ? 4.8e-4 : 2e-5;
        CHECK(worst <= bound, "GELU epilogue (%s, exact %d): error %.3g beyond the type's rounding, bound %.3g",
              ert_dtype_name(g_prec), exact, worst, bound);
        printf("  GELU epilogue (%s%s): %d MatMul(s) on cuBLASLt's tanh-form GELU; worst error beyond rounding %.2e, "
               "largest near x = -2.7 %.2e\n", ert_dtype_name(g_prec), exact ? ", EXACT_GELU" : "", lt, worst, tanh_err);
        ert_session_free(s);
    }
    g_flags = flags0;
    g_mode = mode0;
    free(x);
    ert_model_free(m);
}

static void test_matmul(void) {
    mm_case cs[] = {
        {.M = 5, .K = 7, .N = 4, .and_ = 4, .ad = {2, 3, 5, 7}, .bnd = 2, .bd = {7, 4}, .ond = 4, .od = {2, 3, 5, 4}},
        {.M = 5, .K = 7, .N = 4, .and_ = 4, .ad = {2, 1, 5, 7}, .bnd = 3, .bd = {3, 7, 4}, .ond = 4, .od = {2, 3, 5, 4}},
        {.M = 31, .K = 67, .N = 13, .and_ = 3, .ad = {3, 31, 67}, .bnd = 3, .bd = {3, 67, 13}, .ond = 3,
         .od = {3, 31, 13}},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        mm_case *c = &cs[k];
        bstart();
        int32_t a = binput("a", c->and_, c->ad), b = binput("b", c->bnd, c->bd), y;
        BT(ert_builder_binary(B, "MatMul", a, b, &y));
        ert_model *m = bfinish(y);
        char name[32];
        snprintf(name, sizeof name, "MatMul %zu", k);
        check_model(name, m, ref_matmul, c, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
}

/* ------------------------------------------------------------------ pool, norm, softmax */

typedef struct misc_case {
    int64_t d[4];
    int64_t k[2], s[2], pb[2], pe[2], out[2];
    bool is_max, ceil, incl;
    int axis;
    float *w[4];
    float eps;
} misc_case;

static void ref_pool(const void *u, float *const *in, double *out) {
    const misc_case *c = u;
    int64_t H = c->d[2], W = c->d[3], OH = c->out[0], OW = c->out[1];
    for (int64_t p = 0; p < c->d[0] * c->d[1]; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double mx = -INFINITY, sum = 0;
                int64_t n_in = 0, n_pad = 0;
                for (int64_t kh = 0; kh < c->k[0]; kh++)
                    for (int64_t kw = 0; kw < c->k[1]; kw++) {
                        int64_t ih = oh * c->s[0] - c->pb[0] + kh, iw = ow * c->s[1] - c->pb[1] + kw;
                        if (ih >= H + c->pe[0] || iw >= W + c->pe[1]) continue;
                        n_pad++;
                        if (ih < 0 || iw < 0 || ih >= H || iw >= W) continue;
                        double v = in[0][(p * H + ih) * W + iw];
                        mx = fmax(mx, v);
                        sum += v;
                        n_in++;
                    }
                out[(p * OH + oh) * OW + ow] = c->is_max ? mx : sum / (double)(c->incl ? n_pad : n_in);
            }
}

static void test_pool(void) {
    misc_case cs[] = {
        {.d = {2, 3, 11, 13}, .k = {3, 3}, .s = {2, 2}, .pb = {1, 1}, .pe = {1, 1}, .is_max = true},
        {.d = {1, 4, 10, 9}, .k = {3, 2}, .s = {2, 2}, .pb = {1, 0}, .pe = {1, 0}, .is_max = false, .incl = false,
         .ceil = true},
        {.d = {1, 2, 8, 7}, .k = {2, 3}, .s = {1, 2}, .pb = {1, 1}, .pe = {0, 1}, .is_max = false, .incl = true},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        misc_case *c = &cs[k];
        for (int i = 0; i < 2; i++) {
            int64_t num = c->d[2 + i] + c->pb[i] + c->pe[i] - c->k[i];
            c->out[i] = (c->ceil ? (num + c->s[i] - 1) / c->s[i] : num / c->s[i]) + 1;
            if (c->ceil && (c->out[i] - 1) * c->s[i] >= c->d[2 + i] + c->pb[i]) c->out[i]--;
        }
        int64_t pads[4] = {c->pb[0], c->pb[1], c->pe[0], c->pe[1]};
        bstart();
        int32_t ins[1] = {binput("x", 4, c->d)};
        ert_attr at[] = {ERT_ATTR_IS("kernel_shape", c->k, 2), ERT_ATTR_IS("strides", c->s, 2),
                         ERT_ATTR_IS("pads", pads, 4), ERT_ATTR_I("ceil_mode", c->ceil),
                         ERT_ATTR_I("count_include_pad", c->incl)};
        int32_t y = bnode(c->is_max ? "MaxPool" : "AveragePool", ins, 1, at, c->is_max ? 4 : 5);
        ert_model *m = bfinish(y);
        char name[32];
        snprintf(name, sizeof name, "%s %zu", c->is_max ? "MaxPool" : "AveragePool", k);
        check_model(name, m, ref_pool, c, -2, 2, 1e-5, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
}

static void ref_gpool(const void *u, float *const *in, double *out) {
    const misc_case *c = u;
    int64_t sz = c->d[2] * c->d[3];
    for (int64_t p = 0; p < c->d[0] * c->d[1]; p++) {
        double s = 0, mx = -INFINITY;
        for (int64_t i = 0; i < sz; i++) {
            s += in[0][p * sz + i];
            mx = fmax(mx, in[0][p * sz + i]);
        }
        out[p] = c->is_max ? mx : s / (double)sz;
    }
}

static void ref_bn(const void *u, float *const *in, double *out) {
    const misc_case *c = u;
    int64_t sz = c->d[2] * c->d[3];
    for (int64_t i = 0; i < nel(4, c->d); i++) {
        int64_t ch = (i / sz) % c->d[1];
        out[i] = ((double)in[0][i] - c->w[2][ch]) * c->w[0][ch] / sqrt((double)c->w[3][ch] + c->eps) + c->w[1][ch];
    }
}

static void ref_softmax(const void *u, float *const *in, double *out) {
    const misc_case *c = u; /* is_max: LogSoftmax */
    int64_t outer = 1, inner = 1, n = c->d[c->axis];
    for (int i = 0; i < 4; i++) {
        if (i < c->axis) outer *= c->d[i];
        if (i > c->axis) inner *= c->d[i];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            const float *x = in[0] + o * n * inner + j;
            double m = -INFINITY, s = 0;
            for (int64_t i = 0; i < n; i++) m = fmax(m, x[i * inner]);
            for (int64_t i = 0; i < n; i++) s += exp(x[i * inner] - m);
            for (int64_t i = 0; i < n; i++)
                out[o * n * inner + j + i * inner] = c->is_max ? x[i * inner] - m - log(s) : exp(x[i * inner] - m) / s;
        }
}

static void ref_layernorm(const void *u, float *const *in, double *out) {
    const misc_case *c = u;
    int64_t inner = c->d[3], outer = c->d[0] * c->d[1] * c->d[2];
    for (int64_t r = 0; r < outer; r++) {
        const float *x = in[0] + r * inner;
        double s = 0, v = 0;
        for (int64_t i = 0; i < inner; i++) s += x[i];
        double mean = s / (double)inner;
        for (int64_t i = 0; i < inner; i++) v += (x[i] - mean) * (x[i] - mean);
        double inv = 1 / sqrt(v / (double)inner + c->eps);
        for (int64_t i = 0; i < inner; i++) out[r * inner + i] = (x[i] - mean) * inv * c->w[0][i] + c->w[1][i];
    }
}

static void test_norm(void) {
    /* global pools */
    for (int mx = 0; mx < 2; mx++) {
        misc_case c = {.d = {2, 5, 9, 11}, .is_max = mx};
        bstart();
        int32_t y;
        BT(ert_builder_unary(B, mx ? "GlobalMaxPool" : "GlobalAveragePool", binput("x", 4, c.d), &y));
        ert_model *m = bfinish(y);
        check_model(mx ? "GlobalMaxPool" : "GlobalAveragePool", m, ref_gpool, &c, -2, 2, 1e-5, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    { /* BatchNorm (not after a Conv, so not folded) */
        misc_case c = {.d = {2, 4, 5, 7}, .eps = 1e-3f};
        int64_t cd[1] = {4};
        for (int i = 0; i < 4; i++) c.w[i] = rnd(4, i == 3 ? 0.5f : -1.0f, 1.5f);
        bstart();
        int32_t ins[5] = {binput("x", 4, c.d), bweight(1, cd, c.w[0]), bweight(1, cd, c.w[1]), bweight(1, cd, c.w[2]),
                          bweight(1, cd, c.w[3])};
        ert_attr at[] = {ERT_ATTR_F("epsilon", c.eps)};
        int32_t y = bnode("BatchNormalization", ins, 5, at, 1);
        ert_model *m = bfinish(y);
        check_model("BatchNormalization", m, ref_bn, &c, -2, 2, 1e-5, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
        for (int i = 0; i < 4; i++) free(c.w[i]);
    }
    for (int lg = 0; lg < 2; lg++) /* Softmax / LogSoftmax, last axis and a middle one */
        for (int ax = 1; ax < 4; ax += 2) {
            misc_case c = {.d = {2, 3, 6, 37}, .is_max = lg, .axis = ax};
            bstart();
            int32_t ins[1] = {binput("x", 4, c.d)};
            ert_attr at[] = {ERT_ATTR_I("axis", ax)};
            int32_t y = bnode(lg ? "LogSoftmax" : "Softmax", ins, 1, at, 1);
            ert_model *m = bfinish(y);
            char name[32];
            snprintf(name, sizeof name, "%s axis %d", lg ? "LogSoftmax" : "Softmax", ax);
            check_model(name, m, ref_softmax, &c, -4, 4, 1e-5, ERT_PLACEMENT_AUTO);
            ert_model_free(m);
        }
    /* Softmax over rows of random lengths on both sides of the warp kernel's 1024 */
    for (int k = 0; k < 3; k++) {
        int64_t n = k == 0 ? ert_test_int(&rng, 1, 128) : k == 1 ? ert_test_int(&rng, 129, 1024) : ert_test_int(&rng, 1025, 1500);
        misc_case c = {.d = {1, ert_test_int(&rng, 1, 9), ert_test_int(&rng, 1, 33), n}, .is_max = k == 2, .axis = 3};
        bstart();
        int32_t ins[1] = {binput("x", 4, c.d)};
        ert_attr at[] = {ERT_ATTR_I("axis", 3)};
        ert_model *m = bfinish(bnode(k == 2 ? "LogSoftmax" : "Softmax", ins, 1, at, 1));
        char name[48];
        snprintf(name, sizeof name, "%s rows of %lld", k == 2 ? "LogSoftmax" : "Softmax", (long long)n);
        check_model(name, m, ref_softmax, &c, -4, 4, 1e-5, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    /* LayerNorm over the last axis: rows of 300, then random lengths in each
     * warp-kernel size class (<= 128, 256, 512, 1024) and past it, many rows */
    for (int k = 0; k < 6; k++) {
        static const int lo[6] = {300, 1, 129, 257, 513, 1025}, hi[6] = {300, 128, 256, 512, 1024, 1600};
        int64_t inner = ert_test_int(&rng, lo[k], hi[k]);
        misc_case c = {.d = {2, k ? ert_test_int(&rng, 1, 40) : 3, k ? ert_test_int(&rng, 1, 21) : 5, inner}, .eps = 1e-5f};
        int64_t sd[1] = {inner};
        c.w[0] = rnd(inner, 0.5f, 1.5f);
        c.w[1] = rnd(inner, -1, 1);
        bstart();
        int32_t ins[3] = {binput("x", 4, c.d), bweight(1, sd, c.w[0]), bweight(1, sd, c.w[1])};
        ert_attr at[] = {ERT_ATTR_I("axis", -1), ERT_ATTR_F("epsilon", c.eps)};
        int32_t y = bnode("LayerNormalization", ins, 3, at, 2);
        ert_model *m = bfinish(y);
        char name[48];
        snprintf(name, sizeof name, "LayerNormalization rows of %lld", (long long)inner);
        check_model(name, m, ref_layernorm, &c, -3, 3, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
        free(c.w[0]);
        free(c.w[1]);
    }
}

/* ------------------------------------------------------------------ data movement */

static void ref_transpose(const void *u, float *const *in, double *out) {
    (void)u; /* x (2,3,4,5), perm (2,0,3,1) -> (4,2,5,3) */
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 5; c++)
                for (int d = 0; d < 3; d++) out[((a * 2 + b) * 5 + c) * 3 + d] = in[0][((b * 3 + d) * 4 + a) * 5 + c];
}

static void ref_concat(const void *u, float *const *in, double *out) {
    (void)u; /* (2,1,5) (2,3,5) (2,2,5) along axis 1 -> (2,6,5) */
    const int cs[3] = {1, 3, 2};
    for (int n = 0; n < 2; n++) {
        int pos = 0;
        for (int k = 0; k < 3; k++)
            for (int c = 0; c < cs[k]; c++, pos++)
                for (int i = 0; i < 5; i++) out[(n * 6 + pos) * 5 + i] = in[k][(n * cs[k] + c) * 5 + i];
    }
}

static void ref_slice(const void *u, float *const *in, double *out) {
    (void)u; /* x (6,9): rows 1..5 step 2, cols 8..0 step -3 -> (3,3) */
    int o = 0;
    for (int r = 1; r < 6; r += 2)
        for (int c = 8; c > 0; c -= 3) out[o++] = in[0][r * 9 + c];
}

/* Nearest Resize by whole factors, NCHW (kernels/cuda/tensor.cu's upsample
 * kernels where rz_whole_ok holds, resize_kernel elsewhere): odd channel
 * counts and planes; W = 24 and 20 give the 2x-along-W kernel 16- and
 * 8-byte words in f16 (W = 5: one element); scales 2, 3, (1, 2) and (2, 1)
 * under the mode pairs that read o / s (Ultralytics' asymmetric + floor;
 * half_pixel and pytorch_half_pixel with either rounding, by 3 too;
 * asymmetric and align_corners rounding, by 2) and two that do not (they
 * stay on the general kernel). Against the CPU session. */
static void test_resize_whole(void) {
    struct { const char *coord, *nearest; float sh, sw; } rz[] = {
        {"asymmetric", "floor", 2, 2},
        {"asymmetric", "floor", 3, 3},
        {"half_pixel", "round_prefer_floor", 3, 3},
        {"pytorch_half_pixel", "round_prefer_ceil", 2, 2},
        {"asymmetric", "round_prefer_floor", 1, 2},
        {"align_corners", "round_prefer_ceil", 2, 1},
        {"asymmetric", "round_prefer_floor", 3, 3}, /* not o / s: 2/3 rounds to 1 */
        {"half_pixel", "floor", 2, 2},              /* not o / s: 0.25 - 0.5 floors to -1 */
    };
    const int64_t shapes[][4] = {{2, 3, 7, 5}, {2, 17, 7, 5}, {1, 33, 7, 5}, {1, 3, 4, 24}, {2, 5, 3, 20}};
    for (size_t k = 0; k < sizeof rz / sizeof rz[0]; k++)
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
            int64_t sd[1] = {4};
            float sc[4] = {1, 1, rz[k].sh, rz[k].sw};
            bstart();
            int32_t ins[3] = {binput("x", 4, shapes[j]), -1, bweight(1, sd, sc)};
            ert_attr at[] = {ERT_ATTR_S("mode", "nearest"), ERT_ATTR_S("coordinate_transformation_mode", rz[k].coord),
                             ERT_ATTR_S("nearest_mode", rz[k].nearest)};
            ert_model *m = bfinish(bnode("Resize", ins, 3, at, 3));
            char name[96];
            snprintf(name, sizeof name, "Resize nearest x(%g,%g) %s %s (%lld,%lld,%lld,%lld)", sc[2], sc[3], rz[k].coord,
                     rz[k].nearest, (long long)shapes[j][0], (long long)shapes[j][1], (long long)shapes[j][2],
                     (long long)shapes[j][3]);
            check_model(name, m, NULL, NULL, -1, 1, 1e-6, ERT_PLACEMENT_AUTO);
            ert_model_free(m);
        }
}

/* Pad / Reduce* / Resize: checked against the CPU session (the CPU kernels are the oracle). */
static void test_tensor_cpu_ref(void) {
    static const char *pad_modes[] = {"constant", "reflect", "edge", "wrap"};
    for (int k = 0; k < 4; k++) {
        int64_t d[4] = {2, 3, 7, 9}, pads[8] = {0, 0, 2, -1, 0, 1, 1, 3};
        float cv = 0.75f;
        bstart();
        int32_t ins[3] = {binput("x", 4, d), bweight_i64(8, pads), bweight(0, NULL, &cv)};
        ert_attr at[] = {ERT_ATTR_S("mode", pad_modes[k])};
        ert_model *m = bfinish(bnode("Pad", ins, k == 0 ? 3 : 2, at, 1));
        char name[32];
        snprintf(name, sizeof name, "Pad %s", pad_modes[k]);
        check_model(name, m, NULL, NULL, -1, 1, 1e-6, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    static const char *red_ops[] = {"ReduceMean", "ReduceSum", "ReduceMax"};
    for (int k = 0; k < 3; k++)
        for (int v = 0; v < 2; v++) {
            int64_t d[4] = {2, 5, 6, 7}, ax2[2] = {2, 3}, ax1[1] = {-3};
            bstart();
            int32_t ins[2] = {binput("x", 4, d), v ? bweight_i64(1, ax1) : bweight_i64(2, ax2)};
            ert_attr at[] = {ERT_ATTR_I("keepdims", !v)};
            ert_model *m = bfinish(bnode(red_ops[k], ins, 2, at, 1));
            char name[40];
            snprintf(name, sizeof name, "%s %s", red_ops[k], v ? "axis -3" : "axes 2,3 keepdims");
            check_model(name, m, NULL, NULL, -2, 2, 1e-5, ERT_PLACEMENT_AUTO);
            ert_model_free(m);
        }
    /* the parallel reductions: (K1, R, K2) blocks -- a column (K2 > 1), rows
     * by warps, rows by blocks (R >= 2048) -- and two blocks of axes (the
     * general kernel); axes 2,3 keepdims above became a GlobalAveragePool */
    struct { int64_t d[4]; int n; int64_t ax[3]; int keep; } rc[] = {
        {{2, 5, 6, 7}, 1, {1}, 1},     {{3, 37, 2, 45}, 2, {0, 1}, 0}, {{2, 3, 5, 33}, 1, {3}, 0},
        {{1, 3, 48, 50}, 2, {2, 3}, 0}, {{2, 40, 60, 5}, 2, {1, 2}, 1}, {{2, 5, 6, 7}, 2, {1, 3}, 1},
    };
    for (size_t c = 0; c < sizeof rc / sizeof rc[0]; c++)
        for (int k = 0; k < 3; k++) {
            bstart();
            int32_t ins[2] = {binput("x", 4, rc[c].d), bweight_i64(rc[c].n, rc[c].ax)};
            ert_attr at[] = {ERT_ATTR_I("keepdims", rc[c].keep)};
            ert_model *m = bfinish(bnode(red_ops[k], ins, 2, at, 1));
            char name[64];
            snprintf(name, sizeof name, "%s case %zu", red_ops[k], c);
            check_model(name, m, NULL, NULL, -2, 2, 1e-5, ERT_PLACEMENT_AUTO);
            ert_model_free(m);
        }
    struct { const char *mode, *coord, *nearest; float sc[4]; } rz[] = {
        {"nearest", "asymmetric", "floor", {1, 1, 2, 2}},
        {"nearest", "half_pixel", "round_prefer_floor", {1, 1, 1.5f, 0.75f}},
        {"linear", "half_pixel", "round_prefer_floor", {1, 1, 2, 2}},
        {"linear", "align_corners", "round_prefer_floor", {1, 1, 1.75f, 0.6f}},
        {"linear", "pytorch_half_pixel", "round_prefer_floor", {1, 1, 0.5f, 3}},
    };
    for (size_t k = 0; k < sizeof rz / sizeof rz[0]; k++) {
        int64_t d[4] = {2, 3, 8, 5}, sd[1] = {4};
        bstart();
        int32_t ins[3] = {binput("x", 4, d), -1, bweight(1, sd, rz[k].sc)};
        ert_attr at[] = {ERT_ATTR_S("mode", rz[k].mode), ERT_ATTR_S("coordinate_transformation_mode", rz[k].coord),
                         ERT_ATTR_S("nearest_mode", rz[k].nearest)};
        ert_model *m = bfinish(bnode("Resize", ins, 3, at, 3));
        char name[64];
        snprintf(name, sizeof name, "Resize %s %s", rz[k].mode, rz[k].coord);
        check_model(name, m, NULL, NULL, -1, 1, 1e-5, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    test_resize_whole();
}

static void test_tensor(void) {
    /* Transposes the copy kernel runs as batched 2-D transposes: NCHW <-> NHWC
     * with 3 channels, a random small count (<= 8) and a random larger one, at
     * batch 1 and 2, odd planes; a 2-D transpose; a 3-D one moving the last
     * axis first. CPU session as the oracle. */
    for (int k = 0; k < 12; k++) {
        static const int64_t to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};
        int64_t C = k % 3 == 0 ? 3 : k % 3 == 1 ? ert_test_int(&rng, 1, 8) : ert_test_int(&rng, 9, 70);
        int64_t H = ert_test_int(&rng, 1, 41), W = ert_test_int(&rng, 1, 37), N = 1 + (k / 3) % 2;
        bool back = k >= 6;
        int64_t d[4] = {N, back ? H : C, back ? W : H, back ? C : W};
        bstart();
        int32_t ins[1] = {binput("x", 4, d)};
        ert_attr at[] = {ERT_ATTR_IS("perm", back ? to_nchw : to_nhwc, 4)};
        ert_model *m = bfinish(bnode("Transpose", ins, 1, at, 1));
        char name[64];
        snprintf(name, sizeof name, "Transpose %s %lldx%lldx%lldx%lld", back ? "NHWC->NCHW" : "NCHW->NHWC",
                 (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3]);
        check_model(name, m, NULL, NULL, -1, 1, 1e-6, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    for (int k = 0; k < 2; k++) {
        int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 2, 90), ert_test_int(&rng, 2, 130)};
        static const int64_t p2[2] = {1, 0}, p3[3] = {2, 0, 1};
        bstart();
        int32_t ins[1] = {binput("x", k ? 3 : 2, k ? d : d + 1)};
        ert_attr at[] = {ERT_ATTR_IS("perm", k ? p3 : p2, k ? 3 : 2)};
        ert_model *m = bfinish(bnode("Transpose", ins, 1, at, 1));
        check_model(k ? "Transpose 3-D (2, 0, 1)" : "Transpose 2-D", m, NULL, NULL, -1, 1, 1e-6, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    {
        int64_t d[4] = {2, 3, 4, 5}, perm[4] = {2, 0, 3, 1};
        bstart();
        int32_t ins[1] = {binput("x", 4, d)};
        ert_attr at[] = {ERT_ATTR_IS("perm", perm, 4)};
        ert_model *m = bfinish(bnode("Transpose", ins, 1, at, 1));
        check_model("Transpose", m, ref_transpose, NULL, -1, 1, 1e-6, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    {
        int64_t d0[3] = {2, 1, 5}, d1[3] = {2, 3, 5}, d2[3] = {2, 2, 5};
        bstart();
        int32_t ins[3] = {binput("a", 3, d0), binput("b", 3, d1), binput("c", 3, d2)};
        ert_attr at[] = {ERT_ATTR_I("axis", 1)};
        ert_model *m = bfinish(bnode("Concat", ins, 3, at, 1));
        check_model("Concat", m, ref_concat, NULL, -1, 1, 1e-6, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    {
        int64_t d[2] = {6, 9}, st[2] = {1, 8}, en[2] = {6, 0}, ax[2] = {0, 1}, sp[2] = {2, -3};
        bstart();
        int32_t ins[5] = {binput("x", 2, d), bweight_i64(2, st), bweight_i64(2, en), bweight_i64(2, ax),
                          bweight_i64(2, sp)};
        ert_model *m = bfinish(bnode("Slice", ins, 5, NULL, 0));
        check_model("Slice", m, ref_slice, NULL, -1, 1, 1e-6, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    /* the copy kernels' paths (CPU session as oracle): Concat/Split along
     * channels with whole contiguous rows (one row per image; 16-byte words,
     * or narrower where a size is odd), along the last axis (short rows: the
     * element-wise path), a Slice with a negative step, and a Concat of the
     * pieces in another order */
    for (int v = 0; v < 3; v++) {
        int ax = v == 2 ? 3 : 1;
        int64_t c0 = v == 1 ? 7 : 24, w = v == 2 ? 3 : 16;
        int64_t d0[4] = {2, c0, 9, w}, d1[4] = {2, v == 2 ? c0 : 40, 9, w};
        int64_t split[3] = {5, 30, c0 + 5};
        if (v == 2) split[0] = 2, split[1] = 1, split[2] = 2 * w - 3;
        bstart();
        int32_t ins[2] = {binput("a", 4, d0), binput("b", 4, d1)};
        ert_attr at[] = {ERT_ATTR_I("axis", ax)};
        int32_t cat = bnode("Concat", ins, 2, at, 1), parts[3] = {-1, -1, -1};
        BT(ert_builder_node(B, "Split", NULL, (int32_t[]){cat, bweight_i64(3, split)}, 2, at, 1, parts, 3));
        int64_t st[1] = {-1}, en[1] = {-1000}, sax[1] = {ax}, sp[1] = {-2};
        int32_t sl = bnode("Slice", (int32_t[]){parts[1], bweight_i64(1, st), bweight_i64(1, en), bweight_i64(1, sax),
                                               bweight_i64(1, sp)}, 5, NULL, 0);
        int32_t y = bnode("Concat", (int32_t[]){parts[2], sl, parts[0]}, 3, at, 1);
        ert_model *m = bfinish(y);
        char name[48];
        snprintf(name, sizeof name, "Concat/Split/Slice copies %d", v);
        check_model(name, m, NULL, NULL, -1, 1, 1e-6, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    /* a transformer MLP as exporters write it (CPU session as oracle): MatMul
     * + bias Add on a rank-3 input, GELU spelled with Erf (both become one
     * MatMul with a bias and GELU epilogue), MatMul + bias + Relu, and a
     * MatMul whose bias is not over the last axis only (stays an Add) */
    for (int v = 0; v < 2; v++) {
        int64_t xd[3] = {2, 7, 24}, w1d[2] = {24, 40}, b1d[1] = {40}, w2d[2] = {40, 9}, b2d[3] = {1, v ? 7 : 1, 9};
        float *w1 = rnd(24 * 40, -0.3f, 0.3f), *b1 = rnd(40, -0.5f, 0.5f), *w2 = rnd(40 * 9, -0.3f, 0.3f),
              *b2 = rnd(7 * 9, -0.5f, 0.5f);
        bstart();
        int32_t x = binput("x", 3, xd), h, g;
        h = bnode("MatMul", (int32_t[]){x, bweight(2, w1d, w1)}, 2, NULL, 0);
        h = bnode("Add", (int32_t[]){h, bweight(1, b1d, b1)}, 2, NULL, 0);
        g = erf_gelu(h);
        int32_t y = bnode("MatMul", (int32_t[]){g, bweight(2, w2d, w2)}, 2, NULL, 0);
        y = bnode("Add", (int32_t[]){bweight(3, b2d, b2), y}, 2, NULL, 0);
        y = bnode("Relu", (int32_t[]){y}, 1, NULL, 0);
        free(w1), free(b1), free(w2), free(b2);
        ert_model *m = bfinish(y);
        check_model(v ? "MLP MatMul+bias, GELU (full b2)" : "MLP MatMul+bias, GELU", m, NULL, NULL, -1, 1, 1e-4,
                    ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    /* Linear layers of a residual stream, each one GEMM with its epilogue in
     * cuBLASLt (kernels/cuda/cuda_gemm.c): x (3, 5, 24) @ W + b + x (bias and
     * residual), and (x * 0.5) @ Transpose(w) + b -> Relu with w an input (2-D
     * (N, K): trans_b, the scalar as alpha, ReLU in cuBLASLt's epilogue) */
    for (int v = 0; v < 2; v++) {
        int64_t xd[3] = {3, 5, 24}, wd[2] = {24, 24}, bd[1] = {v ? 17 : 24}, wtd[2] = {17, 24}, perm[2] = {1, 0};
        float *w = rnd(24 * 24, -0.3f, 0.3f), *b = rnd(24, -0.5f, 0.5f), half = 0.5f;
        bstart();
        int32_t x = binput("x", 3, xd), y;
        if (!v) {
            y = bnode("MatMul", (int32_t[]){x, bweight(2, wd, w)}, 2, NULL, 0);
            y = bnode("Add", (int32_t[]){y, bweight(1, bd, b)}, 2, NULL, 0);
            y = bnode("Add", (int32_t[]){x, y}, 2, NULL, 0);
        } else {
            ert_attr pa[] = {ERT_ATTR_IS("perm", perm, 2)};
            int32_t wt = bnode("Transpose", (int32_t[]){binput("w", 2, wtd)}, 1, pa, 1);
            int32_t xs = bnode("Mul", (int32_t[]){x, bweight(0, NULL, &half)}, 2, NULL, 0);
            y = bnode("MatMul", (int32_t[]){xs, wt}, 2, NULL, 0);
            y = bnode("Add", (int32_t[]){y, bweight(1, bd, b)}, 2, NULL, 0);
            y = bnode("Relu", (int32_t[]){y}, 1, NULL, 0);
        }
        free(w), free(b);
        ert_model *m = bfinish(y);
        check_model(v ? "Linear trans_b alpha bias Relu (cuBLASLt)" : "Linear bias + residual (cuBLASLt)", m, NULL, NULL,
                    -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    { /* attention: heads (2, 3, 6, 16); (q * c) @ (Transpose(k) * c) -> Softmax
       * -> @ v, + q: the scalars become alpha, the Transpose trans_b, the Add a
       * residual of the last MatMul */
        int64_t d[4] = {2, 3, 6, 16}, perm[4] = {0, 1, 3, 2};
        float c = 0.5f;
        bstart();
        int32_t q = binput("q", 4, d), k = binput("k", 4, d), v = binput("v", 4, d), y;
        ert_attr pa[] = {ERT_ATTR_IS("perm", perm, 4)}, sa[] = {ERT_ATTR_I("axis", -1)};
        int32_t qs = bnode("Mul", (int32_t[]){q, bweight(0, NULL, &c)}, 2, NULL, 0);
        int32_t kt = bnode("Transpose", (int32_t[]){k}, 1, pa, 1);
        kt = bnode("Mul", (int32_t[]){bweight(0, NULL, &c), kt}, 2, NULL, 0);
        y = bnode("MatMul", (int32_t[]){qs, kt}, 2, NULL, 0);
        y = bnode("Softmax", (int32_t[]){y}, 1, sa, 1);
        y = bnode("MatMul", (int32_t[]){y, v}, 2, NULL, 0);
        y = bnode("Add", (int32_t[]){y, q}, 2, NULL, 0);
        ert_model *m = bfinish(y);
        check_model("attention alpha/trans_b/residual", m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
}

/* ------------------------------------------------------------------ Cast, Gather, ConvTranspose (CPU session as oracle) */

static void test_new_ops(void) {
    /* Cast chains (output f32 for the harness): f32 -> f16 -> f32, f32 -> i64 -> f32 (truncation),
     * f32 -> bf16 -> f32, f32 -> bool -> f32 */
    static const int64_t chain[][2] = {{10, 1}, {7, 1}, {16, 1}, {9, 1}};
    static const char *chain_name[] = {"Cast f32>f16>f32", "Cast f32>i64>f32", "Cast f32>bf16>f32",
                                       "Cast f32>bool>f32"};
    for (int k = 0; k < 4; k++) {
        int64_t d[3] = {3, 5, 7};
        bstart();
        int32_t x = binput("x", 3, d);
        ert_attr a0[] = {ERT_ATTR_I("to", chain[k][0])}, a1[] = {ERT_ATTR_I("to", chain[k][1])};
        int32_t h = bnode("Cast", &x, 1, a0, 1);
        ert_model *m = bfinish(bnode("Cast", &h, 1, a1, 1));
        check_model(chain_name[k], m, NULL, NULL, -4, 4, 1e-6, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    /* Gather: axis 1 with a negative index, axis 0 with 2-D indices */
    for (int k = 0; k < 2; k++) {
        int64_t d[3] = {4, 6, 5}, idx1[3] = {5, -1, 0}, idx0[4] = {3, 0, 0, -2};
        bstart();
        int32_t x = binput("x", 3, d), ind;
        if (k == 0) {
            ind = bweight_i64(3, idx1);
        } else {
            int64_t id[2] = {2, 2};
            BT(ert_builder_weight(B, NULL, ERT_DTYPE_I64, 2, id, idx0, &ind));
        }
        int32_t ins[2] = {x, ind};
        ert_attr at[] = {ERT_ATTR_I("axis", k == 0 ? 1 : 0)};
        ert_model *m = bfinish(bnode("Gather", ins, 2, at, 1));
        check_model(k == 0 ? "Gather axis 1" : "Gather axis 0 2-D indices", m, NULL, NULL, -1, 1, 1e-6,
                    ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    /* ConvTranspose: 2-D stride 2 pad 1 output_padding 1 + bias; grouped with dilation; 1-D; kernel ==
     * stride (f16/bf16: the GEMM + scatter path), with and without bias, square and not, then + Relu */
    int64_t ck = ert_test_int(&rng, 1, 19), cm = ert_test_int(&rng, 1, 23);
    struct { int nsp; int64_t xd[4], wd[4], k[2], s[2], d[2], pads[4], opad[2], group; bool bias, relu; } ct[] = {
        {2, {2, 6, 5, 7}, {6, 4, 3, 3}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, false},
        {2, {1, 4, 6, 5}, {4, 3, 3, 2}, {3, 2}, {2, 1}, {2, 1}, {0, 1, 2, 0}, {1, 0}, 2, false, false},
        {1, {2, 3, 9, 0}, {3, 5, 4, 0}, {4, 0}, {3, 0}, {1, 0}, {1, 2, 0, 0}, {2, 0}, 1, true, false},
        {2, {2, ck, 5, 9}, {ck, cm, 2, 2}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, false},
        {2, {1, cm, 6, 4}, {cm, ck, 3, 2}, {3, 2}, {3, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, false, false},
        {2, {3, ck, 7, 3}, {ck, cm, 2, 2}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, true},
    };
    for (size_t k = 0; k < sizeof ct / sizeof ct[0]; k++) {
        int nsp = ct[k].nsp, nd = 2 + nsp;
        int64_t bd[1] = {ct[k].wd[1] * ct[k].group};
        float *w = rnd(nel(nd, ct[k].wd), -0.5f, 0.5f), *b = rnd(bd[0], -0.5f, 0.5f);
        int64_t pads[4];
        for (int i = 0; i < nsp; i++) {
            pads[i] = ct[k].pads[i];
            pads[nsp + i] = ct[k].pads[2 + i];
        }
        bstart();
        int32_t ins[3] = {binput("x", nd, ct[k].xd), bweight(nd, ct[k].wd, w), ct[k].bias ? bweight(1, bd, b) : -1};
        ert_attr at[] = {ERT_ATTR_IS("kernel_shape", ct[k].k, nsp), ERT_ATTR_IS("strides", ct[k].s, nsp),
                         ERT_ATTR_IS("dilations", ct[k].d, nsp), ERT_ATTR_IS("pads", pads, 2 * nsp),
                         ERT_ATTR_IS("output_padding", ct[k].opad, nsp), ERT_ATTR_I("group", ct[k].group)};
        int32_t yct = bnode("ConvTranspose", ins, ct[k].bias ? 3 : 2, at, 6);
        ert_model *m = bfinish(ct[k].relu ? bnode("Relu", &yct, 1, NULL, 0) : yct);
        char name[40];
        snprintf(name, sizeof name, "ConvTranspose %zu", k);
        check_model(name, m, NULL, NULL, -1, 1, 1e-5, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
        free(w);
        free(b);
    }
}

/* ------------------------------------------------------------------ channels-last regions */

/* f16/bf16 CUDA sessions keep conv activations NHWC (session step 4c) and
 * convert at the region's edges; each model here crosses such an edge in a
 * different way. In f32 they run NCHW (the same checks, a control). */
static int32_t nconv(int32_t x, int64_t cin, int64_t cout, int k, int stride, int group, bool relu) {
    int64_t wd[4] = {cout, cin / group, k, k}, bd[1] = {cout};
    float *w = rnd(nel(4, wd), -0.3f, 0.3f), *b = rnd(cout, -0.1f, 0.1f);
    int32_t y = -1;
    BT(ert_builder_conv2d(B, x, bweight(4, wd, w), bweight(1, bd, b), stride, k / 2, 1, group, &y));
    if (relu) BT(ert_builder_unary(B, "Relu", y, &y));
    free(w), free(b);
    return y;
}

/* a patchify conv: kernel k x k, stride k, no pad */
static int32_t pconv(int32_t x, int64_t cin, int64_t cout, int k, bool relu) {
    int64_t wd[4] = {cout, cin, k, k}, bd[1] = {cout};
    float *w = rnd(nel(4, wd), -0.3f, 0.3f), *b = rnd(cout, -0.1f, 0.1f);
    int32_t y = -1;
    BT(ert_builder_conv2d(B, x, bweight(4, wd, w), bweight(1, bd, b), k, 0, 1, 1, &y));
    if (relu) BT(ert_builder_unary(B, "Relu", y, &y));
    free(w), free(b);
    return y;
}

static void test_nhwc(void) {
    { /* residual Add, MaxPool, AveragePool, Concat of two convs (odd channel counts),
       * GlobalAveragePool -> Flatten -> Gemm (the 1x1 edge is a Reshape) */
        int64_t xd[4] = {2, 6, 11, 13}, fwd[2] = {5, 24}, fbd[1] = {5};
        bstart();
        int32_t x = binput("x", 4, xd), h, r, p, a, c1, c2, cat, g, f, y;
        h = nconv(x, 6, 8, 3, 1, 1, true);
        r = nconv(h, 8, 8, 3, 1, 1, false);
        BT(ert_builder_binary(B, "Add", r, h, &r));
        BT(ert_builder_unary(B, "Relu", r, &r));
        BT(ert_builder_maxpool2d(B, r, 3, 2, 1, &p));
        ert_attr pa[] = {ERT_ATTR_IS("kernel_shape", ((int64_t[]){2, 2}), 2), ERT_ATTR_IS("strides", ((int64_t[]){1, 1}), 2)};
        a = bnode("AveragePool", (int32_t[]){p}, 1, pa, 2);
        c1 = nconv(a, 8, 7, 1, 2, 1, true);
        c2 = nconv(a, 8, 17, 3, 2, 1, false);
        c2 = nconv(c2, 17, 17, 3, 1, 17, true); /* depthwise */
        ert_attr ca[] = {ERT_ATTR_I("axis", 1)};
        int32_t cin[2] = {c1, c2};
        cat = bnode("Concat", cin, 2, ca, 1);
        BT(ert_builder_unary(B, "GlobalAveragePool", cat, &g));
        BT(ert_builder_unary(B, "Flatten", g, &f));
        float *fw = rnd(5 * 24, -0.5f, 0.5f), *fb = rnd(5, -0.1f, 0.1f);
        BT(ert_builder_linear(B, f, bweight(2, fwd, fw), bweight(1, fbd, fb), &y));
        free(fw), free(fb);
        ert_model *m = bfinish(y);
        check_model("NHWC residual/pools/concat/GAP", m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    { /* SE block: h * Sigmoid(Conv(Relu(Conv(GAP(h))))) broadcasts (N,C,1,1)
       * over (N,C,H,W); then a scalar Mul, HardSwish, a Clip, a Mul by a
       * (C,1,1) constant (ends the region) and a 4-D graph output */
        int64_t xd[4] = {2, 16, 7, 9}, kd[3] = {10, 1, 1};
        bstart();
        int32_t x = binput("x", 4, xd), h, g, s, y, sc;
        h = nconv(x, 16, 16, 3, 1, 1, true);
        BT(ert_builder_unary(B, "GlobalAveragePool", h, &g));
        s = nconv(g, 16, 4, 1, 1, 1, true);
        s = nconv(s, 4, 16, 1, 1, 1, false);
        BT(ert_builder_unary(B, "Sigmoid", s, &s));
        BT(ert_builder_binary(B, "Mul", h, s, &y));
        float two = 2.0f, *kc = rnd(10, 0.5f, 1.5f);
        BT(ert_builder_binary(B, "Mul", y, bweight(0, NULL, &two), &y));
        BT(ert_builder_unary(B, "HardSwish", y, &y));
        y = nconv(y, 16, 10, 3, 2, 1, false);
        BT(ert_builder_binary(B, "Mul", y, sc = bweight(3, kd, kc), &y));
        (void)sc;
        free(kc);
        ert_model *m = bfinish(y);
        check_model("NHWC SE block", m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    { /* ConvNeXt's block: depthwise 7x7 -> Transpose to (N,H,W,C) (the
       * channels-last twin's bytes: no copy) -> LayerNorm -> MatMul+bias ->
       * GELU -> MatMul+bias -> Transpose back (a view of the MatMul output)
       * -> layer scale (C,1,1) -> + x -> conv */
        int64_t xd[4] = {1, 16, 14, 14}, p1[4] = {0, 2, 3, 1}, p2[4] = {0, 3, 1, 2}, cd[1] = {16}, w1d[2] = {16, 64},
                b1d[1] = {64}, w2d[2] = {64, 16}, gd[3] = {16, 1, 1};
        float *ls = rnd(16, 0.5f, 1.5f), *lb = rnd(16, -0.2f, 0.2f), *w1 = rnd(16 * 64, -0.3f, 0.3f),
              *b1 = rnd(64, -0.2f, 0.2f), *w2 = rnd(64 * 16, -0.2f, 0.2f), *b2 = rnd(16, -0.2f, 0.2f),
              *gm = rnd(16, 0.1f, 1.0f);
        bstart();
        int32_t x = binput("x", 4, xd), h, y;
        h = nconv(x, 16, 16, 7, 1, 16, false);
        ert_attr t1[] = {ERT_ATTR_IS("perm", p1, 4)}, t2[] = {ERT_ATTR_IS("perm", p2, 4)}, la[] = {ERT_ATTR_I("axis", -1)};
        h = bnode("Transpose", (int32_t[]){h}, 1, t1, 1);
        h = bnode("LayerNormalization", (int32_t[]){h, bweight(1, cd, ls), bweight(1, cd, lb)}, 3, la, 1);
        h = bnode("MatMul", (int32_t[]){h, bweight(2, w1d, w1)}, 2, NULL, 0);
        h = bnode("Add", (int32_t[]){h, bweight(1, b1d, b1)}, 2, NULL, 0);
        h = bnode("Gelu", (int32_t[]){h}, 1, NULL, 0);
        h = bnode("MatMul", (int32_t[]){h, bweight(2, w2d, w2)}, 2, NULL, 0);
        h = bnode("Add", (int32_t[]){h, bweight(1, cd, b2)}, 2, NULL, 0);
        h = bnode("Transpose", (int32_t[]){h}, 1, t2, 1);
        h = bnode("Mul", (int32_t[]){h, bweight(3, gd, gm)}, 2, NULL, 0);
        BT(ert_builder_binary(B, "Add", h, x, &y));
        y = nconv(y, 16, 8, 1, 1, 1, false);
        free(ls), free(lb), free(w1), free(b1), free(w2), free(b2), free(gm);
        ert_model *m = bfinish(y);
        check_model("NHWC ConvNeXt block (transposes as views)", m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    { /* YOLO's C2f: conv -> Split in two halves -> conv on one -> Concat of
       * all three (channels-last: rows of 16 channels, 32-byte rows in f16,
       * copied a word per thread) -> conv */
        int64_t xd[4] = {1, 8, 20, 20}, sp[2] = {16, 16};
        bstart();
        int32_t x = binput("x", 4, xd), h, parts[2] = {-1, -1}, b2, cat, y;
        h = nconv(x, 8, 32, 3, 1, 1, true);
        ert_attr ax[] = {ERT_ATTR_I("axis", 1)};
        BT(ert_builder_node(B, "Split", NULL, (int32_t[]){h, bweight_i64(2, sp)}, 2, ax, 1, parts, 2));
        b2 = nconv(parts[1], 16, 16, 3, 1, 1, true);
        cat = bnode("Concat", (int32_t[]){parts[0], parts[1], b2}, 3, ax, 1);
        y = nconv(cat, 48, 16, 1, 1, 1, false);
        ert_model *m = bfinish(y);
        check_model("NHWC C2f split/concat", m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    /* YOLO's neck: Split and Resize inside the channels-last region (the
     * split axis and the per-dim scales permuted with the dims), an uneven
     * three-way split, nearest 2x (Ultralytics' spelling) and linear 1.5x */
    for (int lin = 0; lin < 2; lin++) {
        int64_t xd[4] = {2, 8, 10, 12}, sp[3] = {8, 16, 8}, sd[1] = {4};
        float sc[4] = {1, 1, lin ? 1.5f : 2.0f, lin ? 1.5f : 2.0f};
        bstart();
        int32_t x = binput("x", 4, xd), h, parts[3] = {-1, -1, -1}, b, cat, r, z, y;
        h = nconv(x, 8, 32, 3, 1, 1, true);
        ert_attr ax[] = {ERT_ATTR_I("axis", 1)};
        BT(ert_builder_node(B, "Split", NULL, (int32_t[]){h, bweight_i64(3, sp)}, 2, ax, 1, parts, 3));
        b = nconv(parts[1], 16, 8, 3, 1, 1, true);
        cat = bnode("Concat", (int32_t[]){parts[2], b, parts[0]}, 3, ax, 1);
        ert_attr ra[] = {ERT_ATTR_S("mode", lin ? "linear" : "nearest"),
                         ERT_ATTR_S("coordinate_transformation_mode", lin ? "half_pixel" : "asymmetric"),
                         ERT_ATTR_S("nearest_mode", "floor")};
        r = bnode("Resize", (int32_t[]){cat, -1, bweight(1, sd, sc)}, 3, ra, 3);
        z = nconv(r, 24, 8, 3, 1, 1, true);
        y = nconv(bnode("Concat", (int32_t[]){r, z}, 2, ax, 1), 32, 8, 1, 1, 1, false);
        ert_model *m = bfinish(y);
        check_model(lin ? "NHWC split + linear Resize" : "NHWC split + nearest Resize (YOLO neck)", m, NULL, NULL, -1, 1,
                    1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    { /* timm's SE block: ReduceMean(axes 2,3, keepdims) instead of a
       * GlobalAveragePool (becomes one), SiLU as x * Sigmoid(x), 40 channels
       * (not a multiple of 32) over 56x56 pixels: the channels-last global
       * pool splits the pixels over its threads */
        int64_t xd[4] = {1, 8, 56, 56}, ax[2] = {2, 3};
        bstart();
        int32_t x = binput("x", 4, xd), h, g, s, y, sg;
        h = nconv(x, 8, 40, 3, 1, 1, false);
        BT(ert_builder_unary(B, "Sigmoid", h, &sg));
        BT(ert_builder_binary(B, "Mul", h, sg, &h));
        ert_attr ka[] = {ERT_ATTR_I("keepdims", 1)};
        g = bnode("ReduceMean", (int32_t[]){h, bweight_i64(2, ax)}, 2, ka, 1);
        s = nconv(g, 40, 10, 1, 1, 1, true);
        s = nconv(s, 10, 40, 1, 1, 1, false);
        BT(ert_builder_unary(B, "Sigmoid", s, &s));
        BT(ert_builder_binary(B, "Mul", h, s, &y));
        y = nconv(y, 40, 16, 1, 1, 1, false);
        ert_model *m = bfinish(y);
        check_model("NHWC timm SE block (ReduceMean)", m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    { /* inverted residual (MobileNetV2) and bottleneck (ResNet-50) ends: 1x1
       * expand + ReLU, depthwise, 1x1 project + Add (the residual becomes the
       * project conv's: the cuBLASLt GEMM's C matrix), odd sizes */
        int64_t xd[4] = {1, 9, 7, 5};
        bstart();
        int32_t x = binput("x", 4, xd), h, y;
        h = nconv(x, 9, 27, 1, 1, 1, true);
        h = nconv(h, 27, 27, 3, 1, 27, true);
        h = nconv(h, 27, 9, 1, 1, 1, false);
        BT(ert_builder_binary(B, "Add", h, x, &y));
        h = nconv(y, 9, 5, 1, 1, 1, false);
        h = nconv(h, 5, 9, 1, 1, 1, false);
        BT(ert_builder_binary(B, "Add", h, y, &y));
        BT(ert_builder_unary(B, "Relu", y, &y));
        ert_model *m = bfinish(y);
        check_model("NHWC inverted residual/bottleneck 1x1", m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    { /* a region entered twice: conv -> Transpose (no NHWC path) -> conv, and a
       * residual from before the Transpose (NCHW -> NHWC again) */
        int64_t xd[4] = {1, 4, 9, 9};
        bstart();
        int32_t x = binput("x", 4, xd), h, t, y;
        h = nconv(x, 4, 4, 3, 1, 1, true);
        ert_attr ta[] = {ERT_ATTR_IS("perm", ((int64_t[]){0, 1, 3, 2}), 4)};
        t = bnode("Transpose", (int32_t[]){h}, 1, ta, 1);
        y = nconv(t, 4, 4, 3, 1, 1, false);
        BT(ert_builder_binary(B, "Add", y, x, &y));
        BT(ert_builder_binary(B, "Sub", y, h, &y));
        ert_model *m = bfinish(y);
        check_model("NHWC edges", m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
    { /* patchify convs (kernel == stride, no pad: ViT's patch embedding,
       * ConvNeXt's stem and downsampling), channels-last as a gather + GEMM
       * (kernels/cuda/cuda_gemm.c): 3x3/3 on 5 channels (runs of 15
       * elements: the 2-byte gather), 2x2/2 on 16 (16-byte units), spatial
       * sizes the stride does not divide (the rest is dropped), a ReLU, a
       * residual Add, 7 output channels */
        int64_t xd[4] = {2, 5, 19, 23};
        bstart();
        int32_t x = binput("x", 4, xd), h, g, r, q, y;
        h = pconv(x, 5, 16, 3, true);  /* (2, 16, 6, 7) */
        g = nconv(h, 16, 16, 3, 1, 1, false);
        r = pconv(g, 16, 16, 2, false); /* (2, 16, 3, 3) */
        q = pconv(h, 16, 16, 2, false);
        BT(ert_builder_binary(B, "Add", r, q, &y));
        BT(ert_builder_unary(B, "Relu", y, &y));
        y = pconv(y, 16, 7, 3, false); /* (2, 7, 1, 1) */
        ert_model *m = bfinish(y);
        check_model("NHWC patchify convs", m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
        ert_model_free(m);
    }
}

/* Nearest Resize by whole factors inside a channels-last region (f16/bf16
 * sessions; f32 ones stay NCHW): conv to C channels -> Resize -> conv, so
 * the Resize reads and writes (N, H, W, C) with scales (1, sh, sw, 1).
 * Odd C (3, 17, 33: rows of 2-byte words), 8 and 24 (16-byte words),
 * scales 2, 3 and (1, 2) under asymmetric + floor (Ultralytics) and
 * half_pixel + round_prefer_floor (the same o / s). Against the CPU. */
static void test_resize_nhwc(void) {
    struct { const char *coord, *nearest; float sh, sw; } rz[] = {
        {"asymmetric", "floor", 2, 2},
        {"half_pixel", "round_prefer_floor", 3, 3},
        {"asymmetric", "floor", 1, 2},
    };
    const int64_t cs[] = {3, 17, 33, 8, 24};
    for (size_t k = 0; k < sizeof rz / sizeof rz[0]; k++)
        for (size_t j = 0; j < sizeof cs / sizeof cs[0]; j++) {
            int64_t xd[4] = {2, 4, 7, 5}, sd[1] = {4};
            float sc[4] = {1, 1, rz[k].sh, rz[k].sw};
            bstart();
            int32_t h = nconv(binput("x", 4, xd), 4, cs[j], 3, 1, 1, true), r, y;
            ert_attr ra[] = {ERT_ATTR_S("mode", "nearest"), ERT_ATTR_S("coordinate_transformation_mode", rz[k].coord),
                             ERT_ATTR_S("nearest_mode", rz[k].nearest)};
            r = bnode("Resize", (int32_t[]){h, -1, bweight(1, sd, sc)}, 3, ra, 3);
            y = nconv(r, cs[j], 6, 3, 1, 1, false);
            ert_model *m = bfinish(y);
            char name[96];
            snprintf(name, sizeof name, "NHWC conv + Resize nearest x(%g,%g) %s %s, C %lld", sc[2], sc[3], rz[k].coord,
                     rz[k].nearest, (long long)cs[j]);
            check_model(name, m, NULL, NULL, -1, 1, 1e-4, ERT_PLACEMENT_AUTO);
            ert_model_free(m);
        }
}

/* ------------------------------------------------------------------ small CNN, placements, replay, allocations */

/* x (2,3,16,16) -> Conv 3->8 k3 p1 + Relu -> MaxPool 2 -> Conv 8->16 k3 s2 p1
 * -> BatchNorm (folded into the conv) -> Relu -> GlobalAveragePool -> Flatten
 * -> Gemm 16->10 -> Softmax. Checked against the CPU session. */
static ert_model *build_cnn(void) {
    int64_t xd[4] = {2, 3, 16, 16}, w1d[4] = {8, 3, 3, 3}, b1d[1] = {8}, w2d[4] = {16, 8, 3, 3}, cd[1] = {16},
            fwd[2] = {10, 16}, fbd[1] = {10};
    float *w1 = rnd(nel(4, w1d), -0.4f, 0.4f), *b1 = rnd(8, -0.1f, 0.1f), *w2 = rnd(nel(4, w2d), -0.2f, 0.2f);
    float *bn[4], *fw = rnd(160, -0.5f, 0.5f), *fb = rnd(10, -0.1f, 0.1f);
    for (int i = 0; i < 4; i++) bn[i] = rnd(16, i == 3 ? 0.5f : -0.5f, 1.5f);
    bstart();
    int32_t x = binput("x", 4, xd), h, p, h2, h3, r, g, f, l, y;
    BT(ert_builder_conv2d(B, x, bweight(4, w1d, w1), bweight(1, b1d, b1), 1, 1, 1, 1, &h));
    BT(ert_builder_unary(B, "Relu", h, &r));
    BT(ert_builder_maxpool2d(B, r, 2, 2, 0, &p));
    BT(ert_builder_conv2d(B, p, bweight(4, w2d, w2), -1, 2, 1, 1, 1, &h2));
    int32_t bins[5] = {h2, bweight(1, cd, bn[0]), bweight(1, cd, bn[1]), bweight(1, cd, bn[2]), bweight(1, cd, bn[3])};
    h3 = bnode("BatchNormalization", bins, 5, NULL, 0);
    BT(ert_builder_unary(B, "Relu", h3, &r));
    BT(ert_builder_unary(B, "GlobalAveragePool", r, &g));
    BT(ert_builder_unary(B, "Flatten", g, &f));
    BT(ert_builder_linear(B, f, bweight(2, fwd, fw), bweight(1, fbd, fb), &l));
    BT(ert_builder_unary(B, "Softmax", l, &y));
    ert_model *m = bfinish(y);
    free(w1), free(b1), free(w2), free(fw), free(fb);
    for (int i = 0; i < 4; i++) free(bn[i]);
    return m;
}

/* f32 -> f16 bits, round to nearest even; finite normal values only (the
 * weights below are in [-256, 256]). */
static uint16_t to_half(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, e = (u >> 23) & 0xffu, mant = u & 0x7fffffu;
    if (e == 0 || (int)e - 127 < -14) return (uint16_t)sign; /* tiny: signed zero */
    uint32_t h = sign | (((e - 127 + 15) & 0x1fu) << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)h;
}

/* f32 islands of an f16/bf16 session (runtime/passes/precision.c):
 * 1. a mixed-precision file (f16 conv, Cast to f32, a BatchNormalization
 *    with running variances in [1e5, 1e6], beyond f16, Cast back, Relu):
 *    PP-OCRv3's fp16 detector keeps such a BatchNormalization f32; lowered,
 *    its variance was inf and the map all zero. The conv's outputs are
 *    scaled so the normalised values are O(1): an inf variance (output =
 *    its shift B) fails the check.
 * 2. an f32 file whose Mul reads a constant beyond f16 (up to 1e6), undone
 *    by the next Mul: the first Mul runs f32 between inserted Casts (its
 *    product stays within f16: only the constant is out of range; lowered,
 *    it was inf and the output inf or NaN). */
static void test_islands(void) {
    int64_t C = ert_test_int(&rng, 1, 5), K = ert_test_int(&rng, 2, 13), H = ert_test_int(&rng, 4, 19);
    int64_t xd[4] = {1, C, H, H + 3}, wd[4] = {K, C, 3, 3}, kd[1] = {K};
    bstart();
    int32_t x = binput("x", 4, xd);
    int64_t nw = K * C * 9;
    uint16_t *wh = xmalloc((size_t)(nw + K) * sizeof *wh);
    for (int64_t i = 0; i < nw + K; i++) wh[i] = to_half((float)ert_test_uniform(&rng, -256, 256));
    int32_t w = -1, bias = -1;
    BT(ert_builder_weight(B, "w", ERT_DTYPE_F16, 4, wd, wh, &w));
    BT(ert_builder_weight(B, "b", ERT_DTYPE_F16, 1, kd, wh + nw, &bias));
    float *p = xmalloc((size_t)(4 * K) * sizeof *p);
    for (int64_t k = 0; k < K; k++) {
        p[k] = (float)ert_test_uniform(&rng, 0.5, 1.5);
        p[K + k] = (float)ert_test_uniform(&rng, -0.5, 0.5);
        p[2 * K + k] = (float)ert_test_uniform(&rng, -50, 50);
        p[3 * K + k] = (float)ert_test_uniform(&rng, 1e5, 1e6);
    }
    int32_t bn_in[5] = {-1, bweight(1, kd, p), bweight(1, kd, p + K), bweight(1, kd, p + 2 * K), bweight(1, kd, p + 3 * K)};
    ert_attr to16 = ERT_ATTR_I("to", 10), to32 = ERT_ATTR_I("to", 1);
    int64_t pads[4] = {1, 1, 1, 1};
    ert_attr ca = ERT_ATTR_IS("pads", pads, 4);
    int32_t xh = bnode("Cast", &x, 1, &to16, 1);
    int32_t cin[3] = {xh, w, bias};
    int32_t c = bnode("Conv", cin, 3, &ca, 1);
    bn_in[0] = bnode("Cast", &c, 1, &to32, 1);
    int32_t bn = bnode("BatchNormalization", bn_in, 5, NULL, 0);
    int32_t bnh = bnode("Cast", &bn, 1, &to16, 1);
    int32_t r = bnode("Relu", &bnh, 1, NULL, 0);
    int32_t y = bnode("Cast", &r, 1, &to32, 1);
    free(wh), free(p);
    check_model("island: mixed-precision file, BatchNormalization kept f32", bfinish(y), NULL, NULL, -1, 1, 2e-2,
                ERT_PLACEMENT_AUTO);

    int64_t n = ert_test_int(&rng, 3, 300), d2[2] = {2, n}, cd[1] = {n};
    bstart();
    x = binput("x", 2, d2);
    float *cv = xmalloc((size_t)n * sizeof *cv), *dv = xmalloc((size_t)n * sizeof *dv);
    for (int64_t i = 0; i < n; i++) {
        cv[i] = (float)ert_test_uniform(&rng, 7e4, 1e6);
        dv[i] = 1.0f / cv[i];
    }
    int32_t r1 = bnode("Relu", &x, 1, NULL, 0);
    int32_t mi[2] = {r1, bweight(1, cd, cv)};
    int32_t m1 = bnode("Mul", mi, 2, NULL, 0);
    mi[0] = m1, mi[1] = bweight(1, cd, dv);
    int32_t m2 = bnode("Mul", mi, 2, NULL, 0);
    static const float k1000[1] = {1000.0f};
    mi[0] = m2, mi[1] = bweight(0, NULL, k1000);
    int32_t m3 = bnode("Mul", mi, 2, NULL, 0);
    int32_t y2 = bnode("Sigmoid", &m3, 1, NULL, 0);
    free(cv), free(dv);
    /* x in [-3e-3, 3e-3]: x * c stays within f16 (< 3000); only the constant is out of range */
    check_model("island: f32 file, constant beyond f16", bfinish(y2), NULL, NULL, -3e-3f, 3e-3f, 2e-2,
                ERT_PLACEMENT_DEVICE);
}

static void test_cnn(void) {
    ert_model *m = build_cnn();
    if (!m) {
        n_skipped++;
        return;
    }
    for (int pl = ERT_PLACEMENT_AUTO; pl <= ERT_PLACEMENT_MAPPED; pl++) {
        char name[32];
        snprintf(name, sizeof name, "CNN placement %d", pl);
        check_model(name, m, NULL, NULL, -1, 1, 1e-4, (ert_placement)pl);
    }
    /* zero allocations over 1000 runs (the first one captures the graph) */
    ert_session *s = NULL;
    if (gpu_dev == ERT_DEVICE_CUDA && make_session(m, gpu_dev, ERT_PLACEMENT_DEVICE, &s, "CNN alloc", false)) {
        float *in;
        CHECK_OK(ert_session_input_data(s, 0, (void **)&in), ctx);
        ert_test_fill(&rng, in, 2 * 3 * 16 * 16, -1, 1);
        long before = n_allocs;
        int fails = 0;
        for (int i = 0; i < 1000; i++) fails += ert_session_run(s) != ERT_OK;
        CHECK(fails == 0, "1000 runs: %d failed (%s)", fails, ert_last_error(ctx));
        CHECK(n_allocs == before, "runs made %ld CUDA allocations", n_allocs - before);
        printf("  CUDA allocations during 1000 runs: %ld\n", n_allocs - before);
        ert_session_free(s);
    }
    ert_model_free(m);
}

/* A caller arena: device memory works (inputs/outputs through the pinned
 * mirror), managed memory works in place, plain malloc'd memory is refused
 * with ERT_E_ARG unless the GPU can read pageable memory (then it must run). */
static void test_caller_arena(void) {
    ert_model *m = build_cnn();
    if (!m) return;
    ert_session_options o = {.device = ERT_DEVICE_CUDA};
    ert_memory_report rep;
    CHECK_OK(ert_session_plan(m, &o, &rep), ctx);
    ert_session *cs = NULL;
    bool cpu = make_session(m, ERT_DEVICE_CPU, ERT_PLACEMENT_AUTO, &cs, "caller arena (cpu)", true);
    int64_t nin = 2 * 3 * 16 * 16;
    float *x = rnd(nin, -1, 1), want[20], got[20];
    if (cpu) {
        CHECK_OK(ert_session_set_input(cs, 0, x, (size_t)nin * 4), ctx);
        CHECK_OK(ert_session_run(cs), ctx);
        CHECK_OK(ert_session_get_output(cs, 0, want, sizeof want), ctx);
    }
    for (int kind = 0; kind < 3; kind++) {
        void *arena = NULL;
        cudaError_t e = kind == 0 ? cudaMalloc(&arena, rep.total_bytes)
                      : kind == 1 ? cudaMallocManaged(&arena, rep.total_bytes, cudaMemAttachGlobal)
                                  : (arena = aligned_alloc(256, (rep.total_bytes + 255) / 256 * 256)) ? cudaSuccess
                                                                                                     : cudaErrorMemoryAllocation;
        CHECK(e == cudaSuccess, "arena allocation %d", kind);
        if (e != cudaSuccess) continue;
        o.arena = arena;
        o.arena_bytes = rep.total_bytes;
        ert_session *s = NULL;
        ert_status st = ert_session_create(m, &o, &s);
        if (kind == 2 && st == ERT_E_ARG) {
            printf("  plain host arena refused: %s\n", ert_last_error(ctx));
        } else {
            CHECK(st == ERT_OK, "caller arena %d: %s (%s)", kind, ert_status_str(st), ert_last_error(ctx));
            if (st == ERT_OK) {
                for (int rep_i = 0; rep_i < 2; rep_i++) {
                    CHECK_OK(ert_session_set_input(s, 0, x, (size_t)nin * 4), ctx);
                    CHECK_OK(ert_session_run(s), ctx);
                    CHECK_OK(ert_session_get_output(s, 0, got, sizeof got), ctx);
                    double w[20];
                    for (int i = 0; i < 20; i++) w[i] = want[i];
                    if (cpu) CHECK(ert_test_close("caller arena vs CPU", got, w, 20, 1e-5, 1e-4), "arena kind %d", kind);
                }
            }
        }
        ert_session_free(s);
        if (kind == 2) free(arena);
        else cudaFree(arena);
    }
    free(x);
    ert_session_free(cs);
    ert_model_free(m);
}

static void test_errors(void) {
    /* an op the backend has no kernel for (integer Add): CUDA and AUTO both
     * run it on the CPU inside the CUDA session (the per-node fallback) */
    int64_t d[2] = {3, 4};
    bstart();
    int32_t ins[2] = {-1, -1};
    BT(ert_builder_input(B, "a", ERT_DTYPE_I64, 2, d, &ins[0]));
    BT(ert_builder_input(B, "b", ERT_DTYPE_I64, 2, d, &ins[1]));
    ert_model *m = bfinish(bnode("Add", ins, 2, NULL, 0));
    if (!m) return;
    static const ert_device devs[2] = {ERT_DEVICE_CUDA, ERT_DEVICE_AUTO};
    ert_session *s = NULL;
    ert_status st;
    for (int k = 0; k < 2; k++) {
        ert_session_options o = {.device = devs[k]};
        st = ert_session_create(m, &o, &s);
        CHECK(st == ERT_OK, "i64 Add on device %d: %s (%s)", (int)devs[k], ert_status_str(st), ert_last_error(ctx));
        if (st != ERT_OK) continue;
        CHECK(ert_session_n_cpu_fallback(s) == (gpu_dev == ERT_DEVICE_CUDA ? 1 : 0), "i64 Add: %d nodes on the fallback",
              ert_session_n_cpu_fallback(s));
        int64_t a[12], b[12];
        for (int i = 0; i < 12; i++) {
            a[i] = (int64_t)(ert_test_u64(&rng) >> 2) - ((int64_t)1 << 60);
            b[i] = (int64_t)(ert_test_u64(&rng) >> 3);
        }
        CHECK_OK(ert_session_set_input(s, 0, a, sizeof a), ctx);
        CHECK_OK(ert_session_set_input(s, 1, b, sizeof b), ctx);
        const int64_t *y = NULL;
        CHECK_OK(ert_session_output_data(s, 0, (const void **)&y), ctx);
        memset((void *)y, 0xA5, sizeof a);
        CHECK_OK(ert_session_run(s), ctx);
        int bad = -1;
        for (int i = 0; i < 12 && bad < 0; i++)
            if (y[i] != a[i] + b[i]) bad = i;
        CHECK(bad < 0, "i64 Add on device %d: element %d wrong", (int)devs[k], bad);
        ert_session_free(s);
        s = NULL;
    }
    ert_model_free(m);
    /* precision must be a float dtype */
    m = build_cnn();
    if (!m) return;
    ert_session_options po = {.device = ERT_DEVICE_CUDA, .precision = ERT_DTYPE_I32};
    st = ert_session_create(m, &po, &s);
    CHECK(st == ERT_E_ARG, "precision i32: %s", ert_status_str(st));
    ert_model_free(m);
    /* an f16 session plans its activations at 2 bytes, its inputs/outputs
     * stay f32: x (f32) -> 4 x Relu -> y (f32); two intermediates live at
     * once (f32: 2 x 64 KiB; f16: 2 x 32 KiB, the edge Casts included) */
    int64_t rd[4] = {1, 16, 32, 32};
    bstart();
    int32_t rh = binput("x", 4, rd);
    for (int k = 0; k < 4; k++) BT(ert_builder_unary(B, "Relu", rh, &rh));
    m = bfinish(rh);
    if (!m) return;
    ert_memory_report r32, r16;
    po.precision = ERT_DTYPE_F32;
    CHECK_OK(ert_session_plan(m, &po, &r32), ctx);
    po.precision = ERT_DTYPE_F16;
    CHECK_OK(ert_session_plan(m, &po, &r16), ctx);
    CHECK(r32.activations_bytes == 2 * 16 * 32 * 32 * 4 && r16.activations_bytes == 2 * 16 * 32 * 32 * 2 &&
              r16.io_bytes == r32.io_bytes,
          "f16 plan: activations %zu (f32 %zu), io %zu (f32 %zu)", r16.activations_bytes, r32.activations_bytes,
          r16.io_bytes, r32.io_bytes);
    if (ert_session_create(m, &po, &s) == ERT_OK) {
        ert_tensor_info ii, oi;
        CHECK_OK(ert_session_input_info(s, 0, &ii), ctx);
        CHECK_OK(ert_session_output_info(s, 0, &oi), ctx);
        CHECK(ii.dtype == ERT_DTYPE_F32 && oi.dtype == ERT_DTYPE_F32, "f16 session io dtypes %s %s",
              ert_dtype_name(ii.dtype), ert_dtype_name(oi.dtype));
        ert_session_free(s);
    }
    ert_model_free(m);
}

/* Every op and the CNN, in the current g_prec. */
/* ------------------------------------------------------------------ NaN */

/* NaN propagates (issue 13 item 5): `m` on the GPU and on the CPU (whose NaN
 * rule test_nan checks against float64) from the same inputs holding NaN
 * (about 4% of the values, then a single one): the outputs must be NaN at
 * exactly the same places. Runs under every battery setting, so the fused
 * paths (legacy cuDNN conv+bias+act, the cuDNN runtime-fusion graph, the
 * conv + epilogue kernel, cuBLASLt's ReLU epilogue for 1x1 convs and Gemm)
 * are each covered. */
/* +inf inputs through a conv + Clip(0, hi): a conv output that is +-inf
 * must clip to hi or 0 as on the CPU (the fused graph writes Clip(0, hi) as
 * hi - relu(hi - relu(x)), which an inf must not turn into NaN), a NaN the
 * CPU has (inf - inf in one window) stays NaN, and every finite output
 * matches within 0.02. Strictly with ERT_SESSION_NO_CONV_TRANSFORMS, and in
 * f16/bf16 without it; an f32 session's default may take cuDNN's FFT or
 * Winograd algorithms, which turn a tile with an inf into NaN: there an
 * output may also be NaN where the CPU's is not (counted), but never a
 * wrong finite value and never finite where the CPU's is NaN. */
static void check_inf_one(const char *name, ert_model *m, bool strict) {
    ert_session *gs = NULL, *cs = NULL;
    if (!make_session(m, gpu_dev, ERT_PLACEMENT_AUTO, &gs, name, false)) {
        n_skipped++;
        return;
    }
    if (!make_session(m, ERT_DEVICE_CPU, ERT_PLACEMENT_AUTO, &cs, name, false)) {
        CHECK(false, "%s: no CPU session for the inf reference (%s)", name, ert_last_error(ctx));
        ert_session_free(gs);
        return;
    }
    ert_tensor_info oi, ii;
    CHECK_OK(ert_session_output_info(gs, 0, &oi), ctx);
    CHECK_OK(ert_session_input_info(gs, 0, &ii), ctx);
    int64_t no = nel(oi.ndim, oi.dims), n = nel(ii.ndim, ii.dims);
    float *got = xmalloc((size_t)no * sizeof *got), *want = xmalloc((size_t)no * sizeof *want);
    float *x = xmalloc((size_t)n * sizeof *x);
    ert_test_fill(&rng, x, n, -1, 1);
    quant_buf(x, n);
    for (int64_t e = 0; e < n; e++) x[e] = ert_test_uniform(&rng, 0, 1) < 0.003 ? INFINITY : x[e];
    x[ert_test_int(&rng, 0, (int)n - 1)] = INFINITY;
    CHECK_OK(ert_session_set_input(gs, 0, x, (size_t)n * sizeof *x), ctx);
    CHECK_OK(ert_session_set_input(cs, 0, x, (size_t)n * sizeof *x), ctx);
    CHECK_OK(ert_session_run(gs), ctx);
    CHECK_OK(ert_session_run(cs), ctx);
    CHECK_OK(ert_session_get_output(gs, 0, got, (size_t)no * sizeof *got), ctx);
    CHECK_OK(ert_session_get_output(cs, 0, want, (size_t)no * sizeof *want), ctx);
    int64_t bad = 0, first = -1, extra = 0;
    for (int64_t e = 0; e < no; e++) {
        bool ok = isnan(want[e]) ? isnan(got[e]) : isfinite(got[e]) && fabsf(got[e] - want[e]) <= 0.02f;
        if (!ok && !strict && !isnan(want[e]) && isnan(got[e])) {
            extra++;
            continue;
        }
        if (!ok && bad++ == 0) first = e;
    }
    if (extra)
        printf("  %s (%s, flags %u): %lld of %lld outputs NaN with +inf inputs where the CPU's are not (a transform "
               "algorithm)\n", name, ert_dtype_name(g_prec), g_flags, (long long)extra, (long long)no);
    CHECK(bad == 0, "%s (%s, flags %u%s): %lld of %lld outputs differ from the CPU with +inf inputs, first at %lld: "
          "got %g, CPU %g", name, ert_dtype_name(g_prec), g_flags, strict ? ", strict" : "", (long long)bad,
          (long long)no, (long long)first, first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0);
    free(x), free(got), free(want);
    ert_session_free(gs);
    ert_session_free(cs);
}

static void check_inf(const char *name, ert_model *m) {
    const unsigned keep = g_flags;
    /* the battery's flags as they are: strict unless an f32 session may take a transform algorithm */
    check_inf_one(name, m, g_prec != ERT_DTYPE_F32 || (g_flags & ERT_SESSION_NO_CONV_TRANSFORMS));
    if (!(g_flags & ERT_SESSION_NO_CONV_TRANSFORMS)) {
        g_flags |= ERT_SESSION_NO_CONV_TRANSFORMS;
        check_inf_one(name, m, true);
        g_flags = keep;
    }
}

static void check_nan(const char *name, ert_model *m) {
    ert_session *gs = NULL, *cs = NULL;
    if (!m) {
        n_skipped++;
        return;
    }
    if (!make_session(m, gpu_dev, ERT_PLACEMENT_AUTO, &gs, name, false)) {
        n_skipped++;
        return;
    }
    if (!make_session(m, ERT_DEVICE_CPU, ERT_PLACEMENT_AUTO, &cs, name, false)) {
        CHECK(false, "%s: no CPU session for the NaN reference (%s)", name, ert_last_error(ctx));
        ert_session_free(gs);
        return;
    }
    ert_tensor_info oi;
    CHECK_OK(ert_session_output_info(gs, 0, &oi), ctx);
    int64_t no = nel(oi.ndim, oi.dims);
    float *got = xmalloc((size_t)no * sizeof *got), *want = xmalloc((size_t)no * sizeof *want);
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < ert_session_n_inputs(gs); i++) {
            ert_tensor_info ii;
            CHECK_OK(ert_session_input_info(gs, i, &ii), ctx);
            int64_t n = nel(ii.ndim, ii.dims);
            float *x = xmalloc((size_t)n * sizeof *x);
            ert_test_fill(&rng, x, n, -1, 1);
            quant_buf(x, n);
            for (int64_t e = 0; rep == 0 && e < n; e++) x[e] = ert_test_uniform(&rng, 0, 1) < 0.04 ? NAN : x[e];
            x[ert_test_int(&rng, 0, (int)n - 1)] = NAN; /* at least one, whatever the draw */
            CHECK_OK(ert_session_set_input(gs, i, x, (size_t)n * sizeof *x), ctx);
            CHECK_OK(ert_session_set_input(cs, i, x, (size_t)n * sizeof *x), ctx);
            free(x);
        }
        CHECK_OK(ert_session_run(gs), ctx);
        CHECK_OK(ert_session_run(cs), ctx);
        CHECK_OK(ert_session_get_output(gs, 0, got, (size_t)no * sizeof *got), ctx);
        CHECK_OK(ert_session_get_output(cs, 0, want, (size_t)no * sizeof *want), ctx);
        /* A NaN the CPU has must be NaN here (never dropped). The GPU may
         * have more: cuDNN's FFT/Winograd algorithms mix a tile's inputs, so
         * a NaN reaches outputs outside its receptive field (seen on an H100
         * with f32 3x3 convs); those are counted, not failed. */
        int64_t bad = 0, first = -1, nans = 0, extra = 0;
        for (int64_t e = 0; e < no; e++) {
            nans += isnan(want[e]);
            extra += isnan(got[e]) && !isnan(want[e]);
            if (isnan(want[e]) && !isnan(got[e]) && bad++ == 0) first = e;
        }
        if (extra) printf("  %s (%s, flags %u): %lld NaN beyond the CPU's (a transform algorithm)\n", name,
                          ert_dtype_name(g_prec), g_flags, (long long)extra);
        CHECK(bad == 0, "%s (%s, flags %u, %s): %lld of %lld outputs NaN on the CPU are not NaN here, first at %lld: "
              "got %g, CPU %g", name, ert_dtype_name(g_prec), g_flags, rep ? "one NaN" : "4% NaN", (long long)bad,
              (long long)no, (long long)first, first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0);
        CHECK(nans > 0, "%s: the CPU output has no NaN: the case tests nothing", name);
    }
    free(got);
    free(want);
    ert_session_free(gs);
    ert_session_free(cs);
}

static void test_nan(void) {
    int64_t d[4] = {2, 3, 5, 7};
    static const char *unary[] = {"Relu", "LeakyRelu", "HardSigmoid", "HardSwish", "GlobalMaxPool"};
    for (int k = 0; k < 5; k++) {
        bstart();
        int32_t y = -1;
        BT(ert_builder_unary(B, unary[k], binput("x", 4, d), &y));
        ert_model *m = bfinish(y);
        check_nan(unary[k], m);
        ert_model_free(m);
    }
    for (int k = 0; k < 5; k++) { /* Max, Min, Clip, MaxPool, ReduceMax */
        static const char *names[] = {"Max", "Min", "Clip(-0.5, 0.7)", "MaxPool 3x3/2", "ReduceMax"};
        bstart();
        int32_t x = binput("x", 4, d), y = -1;
        float lo = -0.5f, hi = 0.7f;
        if (k < 2) BT(ert_builder_binary(B, k ? "Min" : "Max", x, binput("z", 4, d), &y));
        else if (k == 2) y = bnode("Clip", (int32_t[]){x, bweight(0, NULL, &lo), bweight(0, NULL, &hi)}, 3, NULL, 0);
        else if (k == 3) BT(ert_builder_maxpool2d(B, x, 3, 2, 1, &y));
        else y = bnode("ReduceMax", (int32_t[]){x, bweight_i64(1, (int64_t[]){3})}, 2, NULL, 0);
        ert_model *m = bfinish(y);
        check_nan(names[k], m);
        ert_model_free(m);
    }
    /* fused convs: 3x3 + bias + ReLU, 3x3/2 + bias + Clip(0, 0.5), 1x1 + residual + ReLU */
    conv_case cc[3] = {
        {.nsp = 2, .N = 2, .C = 16, .M = 32, .group = 1, .in = {14, 14}, .k = {3, 3}, .s = {1, 1}, .d = {1, 1},
         .pb = {1, 1}, .pe = {1, 1}, .bias = true, .act = 1},
        {.nsp = 2, .N = 1, .C = 8, .M = 24, .group = 1, .in = {15, 15}, .k = {3, 3}, .s = {2, 2}, .d = {1, 1},
         .pb = {1, 1}, .pe = {1, 1}, .bias = true, .act = 3},
        {.nsp = 2, .N = 2, .C = 16, .M = 24, .group = 1, .in = {6, 5}, .k = {1, 1}, .s = {1, 1}, .d = {1, 1},
         .bias = true, .residual = true, .act = 1}};
    static const char *cnames[3] = {"conv 3x3 + bias + relu", "conv 3x3/2 + bias + clip", "conv 1x1 + res + relu"};
    for (int k = 0; k < 3; k++) {
        ert_model *m = build_conv(&cc[k]);
        check_nan(cnames[k], m);
        /* not with NO_CONV_GRAPH: cuDNN's conv + the epilogue there gave
         * 64 of 1536 outputs in [0, 0.5] where the CPU's is 0 (f16, H100,
         * 2026-11-24; not yet understood, README "Known problems") */
        if (k == 1 && m && !(g_flags & ERT_SESSION_NO_CONV_GRAPH)) check_inf(cnames[k], m);
        ert_model_free(m);
        free(cc[k].w);
        free(cc[k].b);
    }
    { /* Gemm + bias + ReLU (cuBLASLt epilogue), and a small CNN: conv+relu,
       * maxpool, conv 1x1 + relu, GlobalMaxPool, Flatten, Gemm */
        int64_t xd[2] = {5, 24}, wd[2] = {9, 24}, bd[1] = {9};
        float *w = rnd(9 * 24, -0.5f, 0.5f), *b = rnd(9, -0.1f, 0.1f);
        bstart();
        int32_t y = -1;
        BT(ert_builder_linear(B, binput("x", 2, xd), bweight(2, wd, w), bweight(1, bd, b), &y));
        BT(ert_builder_unary(B, "Relu", y, &y));
        ert_model *m = bfinish(y);
        check_nan("Gemm + bias + relu", m);
        ert_model_free(m);
        free(w), free(b);
        int64_t cd[4] = {2, 8, 12, 12}, fwd[2] = {5, 16}, fbd[1] = {5};
        bstart();
        int32_t h = nconv(binput("x", 4, cd), 8, 16, 3, 1, 1, true), g, f;
        BT(ert_builder_maxpool2d(B, h, 3, 2, 1, &h));
        h = nconv(h, 16, 16, 1, 1, 1, true);
        BT(ert_builder_unary(B, "GlobalMaxPool", h, &g));
        BT(ert_builder_unary(B, "Flatten", g, &f));
        w = rnd(5 * 16, -0.5f, 0.5f), b = rnd(5, -0.1f, 0.1f);
        BT(ert_builder_linear(B, f, bweight(2, fwd, w), bweight(1, fbd, b), &y));
        free(w), free(b);
        m = bfinish(y);
        check_nan("CNN conv/maxpool/GMP/Gemm", m);
        ert_model_free(m);
    }
}

static void run_battery(bool gpu) {
    test_unary();
    test_binary();
    test_conv();
    test_gemm();
    test_matmul();
    test_gelu_epilogue();
    test_pool();
    test_norm();
    test_tensor();
    test_tensor_cpu_ref();
    test_new_ops();
    test_cnn();
    test_islands();
    test_patch_nchw();
    test_attention();
    test_nan();
    /* channels-last regions, forced (the default measures and may keep NCHW),
     * with 1x1 convs as cuBLASLt GEMMs (ERT_SESSION_GEMM_1X1, off by default) */
    g_flags = ERT_SESSION_NHWC | ERT_SESSION_GEMM_1X1;
    int patch0 = n_conv_patch;
    test_nhwc();
    test_resize_nhwc();
    if (g_prec != ERT_DTYPE_F32) {
        if (gpu)
            CHECK(n_conv_patch >= patch0 + 4, "%s: %d patchify convs bound as GEMMs with ERT_SESSION_GEMM_1X1, want 4",
                  ert_dtype_name(g_prec), n_conv_patch - patch0);
        printf("  %d patchify convs bound as gather + GEMM (%s, forced)\n", n_conv_patch - patch0, ert_dtype_name(g_prec));
    }
    test_nan();
    if (g_prec != ERT_DTYPE_F32) {
        test_conv();
        test_pool();
        test_cnn();
    }
    /* channels-last convs with their epilogue fused in one cuDNN graph
     * whenever cuDNN runs it (the default uses it only where it measures
     * faster): f16/bf16 only, so the f32 battery leaves the count alone */
    g_flags = ERT_SESSION_NHWC | ERT_SESSION_CONV_GRAPH;
    int graphs0 = n_conv_graph;
    test_nhwc();
    test_nan();
    if (g_prec != ERT_DTYPE_F32) {
        test_conv();
        test_cnn();
        if (gpu)
            CHECK(n_conv_graph > graphs0, "%s: no conv ran as a fused cuDNN graph with ERT_SESSION_CONV_GRAPH",
                  ert_dtype_name(g_prec));
        printf("  %d convs bound as fused cuDNN graphs (%s, forced)\n", n_conv_graph - graphs0, ert_dtype_name(g_prec));
    }
    g_flags = ERT_SESSION_NHWC | ERT_SESSION_NO_CONV_GRAPH; /* the conv + epilogue kernel path */
    test_nhwc();
    test_nan();
    /* depthwise convs: channels-last on the direct kernels (fast create
     * times nothing and takes them), then as measured */
    g_flags = ERT_SESSION_NHWC;
    g_mode = ERT_CREATE_FAST;
    int packed0 = n_dw_packed;
    test_dw();
    /* f32 sessions stay NCHW (channels-last regions are f16/bf16 only): no packing */
    if (gpu && g_prec != ERT_DTYPE_F32)
        CHECK(n_dw_packed - packed0 >= 12, "%s: %d depthwise filters packed (K, K, C) under ERT_CREATE_FAST, want 12",
              ert_dtype_name(g_prec), n_dw_packed - packed0);
    printf("  %d depthwise convs on the packed-filter kernel (%s, fast create)\n", n_dw_packed - packed0,
           ert_dtype_name(g_prec));
    /* ERT_SESSION_NO_PACK: the filter as the model has it, on the first kernel */
    g_flags = ERT_SESSION_NHWC | ERT_SESSION_NO_PACK;
    packed0 = n_dw_packed;
    test_dw();
    if (gpu) CHECK(n_dw_packed == packed0, "%s: a depthwise filter packed under ERT_SESSION_NO_PACK", ert_dtype_name(g_prec));
    g_flags = ERT_SESSION_NHWC;
    g_mode = 0;
    test_dw();
    g_flags = 0;
    test_nhwc(); /* as measured */
    (void)gpu;
}

int main(int argc, char **argv) {
    ert_test_rng_init(&rng, "cuda");
    ert_context_options co = {.log = on_log, .log_level = ERT_LOG_DEBUG};
    if (ert_context_create(&co, &ctx) != ERT_OK) return 1;
    if (argc > 1 && !strcmp(argv[1], "--cpu-selfcheck")) {
        gpu_dev = ERT_DEVICE_CPU;
        run_battery(false);
        g_prec = ERT_DTYPE_F16; /* the CPU ignores precision: checks the quantised inputs and tolerances */
        run_battery(false);
        g_prec = ERT_DTYPE_F32;
        printf("%d cases skipped\n", n_skipped);
        ert_context_free(ctx);
        return ert_test_finish("cuda --cpu-selfcheck");
    }
    /* GPU present? */
    int64_t d[1] = {4};
    bstart();
    int32_t x = binput("x", 1, d), y;
    BT(ert_builder_unary(B, "Relu", x, &y));
    ert_model *m = bfinish(y);
    ert_session_options o = {.device = ERT_DEVICE_CUDA};
    ert_session *s = NULL;
    ert_status st = m ? ert_session_create(m, &o, &s) : ERT_E_INTERNAL;
    if (st == ERT_E_CUDA) {
        char why[600];
        snprintf(why, sizeof why, "%s", ert_last_error(ctx));
        /* no GPU: AUTO must still give a (CPU) session */
        o.device = ERT_DEVICE_AUTO;
        ert_status st2 = ert_session_create(m, &o, &s);
        if (st2 != ERT_OK) {
            fprintf(stderr, "FAIL: AUTO without a GPU: %s (%s)\n", ert_status_str(st2), ert_last_error(ctx));
            return 1;
        }
        ert_session_free(s);
        ert_model_free(m);
        ert_context_free(ctx);
        return ert_test_skip("cuda", why);
    }
    CHECK(st == ERT_OK, "probe session: %s (%s)", ert_status_str(st), ert_last_error(ctx));
    ert_session_free(s);
    ert_model_free(m);
    int dev = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
        printf("device: %s, sm_%d%d\n", prop.name, prop.major, prop.minor);
    run_battery(true);
    test_caller_arena();
    test_errors();
    static const ert_dtype low[2] = {ERT_DTYPE_F16, ERT_DTYPE_BF16};
    for (int k = 0; k < 2; k++) {
        g_prec = low[k];
        printf("== %s sessions\n", ert_dtype_name(g_prec));
        run_battery(true);
    }
    g_prec = ERT_DTYPE_F32;
    CHECK(n_no_graph == 0, "%d sessions ran without a CUDA graph", n_no_graph);
    printf("%d cases skipped (op not available in this build's graph layer)\n", n_skipped);
    ert_context_free(ctx);
    return ert_test_finish("cuda");
}
#endif

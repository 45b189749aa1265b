/* NN ops (Conv, ConvTranspose, BatchNorm, MatMul, Gemm, pools, LayerNorm, InstanceNorm,
 * Softmax/LogSoftmax) and the thread pool.
 * Each op runs through the real path: ert_tinfo inputs -> the op's prepare on
 * a hand-made node -> outputs (poisoned) + workspace (poisoned) ->
 * ert_cpu_run_node, without a pool and with 2 and 3 threads, and is compared
 * with a float64 reference written here with plain loops. Error paths check
 * the status and the message. */
#include "act_vec.h"
#include "cpu_gemm.h"
#include "cpu_kernels.h"
#include "runtime_internal.h"
#include "testutil.h"

#include <float.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>


static ert_test_rng rng;
static ert_context *ctx;
#define N_POOLS 3
static struct ert_threadpool *pools[N_POOLS]; /* NULL, 2 threads, 3 threads */
/* the kernel choice every kernel here runs under (ert_kargs.choice): main
 * lowers the SGEMM cap, test_dw_fast switches the direct depthwise off */
static ert_kernel_choice kc;
static const int pool_threads[N_POOLS] = {1, 2, 3};

/* ------------------------------------------------------------ attributes */

typedef struct attrs {
    ert_attr_val a[16];
    int64_t ints[16][10];
    int n;
} attrs;

static void at_i(attrs *A, const char *name, int64_t v) {
    A->a[A->n++] = (ert_attr_val){.name = (char *)name, .type = ERT_ATTR_INT, .i = v};
}
static void at_f(attrs *A, const char *name, float v) {
    A->a[A->n++] = (ert_attr_val){.name = (char *)name, .type = ERT_ATTR_FLOAT, .f = v};
}
static void at_s(attrs *A, const char *name, const char *v) {
    A->a[A->n++] = (ert_attr_val){.name = (char *)name, .type = ERT_ATTR_STRING, .s = (char *)v};
}
static void at_is(attrs *A, const char *name, int n, const int64_t *v) {
    memcpy(A->ints[A->n], v, (size_t)n * sizeof *v);
    A->a[A->n] = (ert_attr_val){.name = (char *)name, .type = ERT_ATTR_INTS, .n = n, .ints = A->ints[A->n]};
    A->n++;
}
#define IS(...) (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/* ------------------------------------------------------------ tensors */

typedef struct tens {
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    float *data;             /* NULL: omitted input */
    ert_dtype dtype;         /* 0 -> f32 */
} tens;

static int64_t nel(const tens *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->dims[i];
    return n;
}

static tens mk(int ndim, const int64_t *dims) {
    tens t = {.ndim = ndim};
    if (ndim) memcpy(t.dims, dims, (size_t)ndim * sizeof *dims);
    int64_t n = nel(&t);
    t.data = malloc((size_t)(n ? n : 1) * sizeof(float));
    ert_test_fill(&rng, t.data, n, -1.0f, 1.0f);
    return t;
}
#define MK(...) mk((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
static tens none(void) { return (tens){0}; }

/* Runs prepare + kernel. On success *out has its dims and malloc'd data. */
static ert_status run_op(ert_op op, const attrs *A, int n_in, const tens *in, int n_out, tens *out, int pool_i) {
    ert_tinfo ti[8], to[4];
    int32_t in_idx[8], out_idx[4];
    memset(ti, 0, sizeof ti);
    memset(to, 0, sizeof to);
    for (int i = 0; i < n_in; i++) {
        in_idx[i] = in[i].data ? i : -1;
        if (!in[i].data) continue;
        ti[i].dtype = in[i].dtype ? in[i].dtype : ERT_DTYPE_F32;
        ti[i].ndim = in[i].ndim;
        memcpy(ti[i].dims, in[i].dims, sizeof ti[i].dims);
    }
    for (int i = 0; i < n_out; i++) out_idx[i] = 10 + i;
    ert_node node = {.op = op, .name = "t", .n_in = n_in, .n_out = n_out, .in = in_idx, .out = out_idx,
                     .n_attrs = A ? A->n : 0, .attrs = A ? (ert_attr_val *)A->a : NULL};
    ert_op_params params;
    memset(&params, 0xAB, sizeof params); /* prepare must set every field it uses */
    ert_prep prep = {.ctx = ctx, .node = &node, .n_in = n_in, .n_out = n_out, .in = ti, .out = to,
                     .params = &params, .n_threads = pool_threads[pool_i], .fold_ok = true,
                     .gemm_workspace = ert_cpu_backend.gemm_workspace};
    ctx->err[0] = 0;
    ert_status st = ert_op_get(op)->prepare(&prep);
    if (st) return st;
    ert_tview vin[8], vout[4];
    for (int i = 0; i < n_in; i++) {
        vin[i] = (ert_tview){.data = in[i].data, .dtype = ti[i].dtype, .ndim = ti[i].ndim};
        memcpy(vin[i].dims, ti[i].dims, sizeof vin[i].dims);
        vin[i].n_elems = in[i].data ? nel(&in[i]) : 0;
    }
    for (int i = 0; i < n_out; i++) {
        out[i] = (tens){.ndim = to[i].ndim};
        memcpy(out[i].dims, to[i].dims, sizeof out[i].dims);
        int64_t n = nel(&out[i]);
        out[i].data = malloc((size_t)(n ? n : 1) * sizeof(float));
        ert_test_poison(out[i].data, n);
        vout[i] = (ert_tview){.data = out[i].data, .dtype = to[i].dtype, .ndim = to[i].ndim, .n_elems = n};
        memcpy(vout[i].dims, to[i].dims, sizeof vout[i].dims);
    }
    size_t wsb = ert_align_up(prep.workspace_bytes, 64);
    void *ws = wsb ? aligned_alloc(64, wsb) : NULL;
    if (ws) ert_test_poison(ws, (int64_t)(wsb / sizeof(float)));
    ert_kargs ka = {.op = op, .params = &params, .n_in = n_in, .n_out = n_out, .in = vin, .out = vout,
                    .workspace = ws, .workspace_bytes = prep.workspace_bytes, .pool = pools[pool_i], .choice = &kc};
    st = ert_cpu_run_node(&ka);
    free(ws);
    return st;
}

static void free_t(tens *t) {
    free(t->data);
    t->data = NULL;
}

static bool same_dims(const tens *t, int ndim, const int64_t *dims) {
    if (t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->dims[i] != dims[i]) return false;
    return true;
}

static const char *dims_str(const tens *t) {
    static char buf[128];
    int k = snprintf(buf, sizeof buf, "(");
    for (int i = 0; i < t->ndim; i++) k += snprintf(buf + k, sizeof buf - (size_t)k, "%lld%s", (long long)t->dims[i], i + 1 < t->ndim ? "," : "");
    snprintf(buf + k, sizeof buf - (size_t)k, ")");
    return buf;
}

/* Run on every pool and compare with ref (expected dims edims). */
static void check_op(const char *what, ert_op op, const attrs *A, int n_in, const tens *in, const double *ref,
                     int endim, const int64_t *edims, int max_pools) {
    for (int pi = 0; pi < max_pools; pi++) {
        tens out;
        ert_status st = run_op(op, A, n_in, in, 1, &out, pi);
        CHECK(st == ERT_OK, "%s (pool %d): %s: %s", what, pi, ert_status_str(st), ert_last_error(ctx));
        if (st) continue;
        CHECK(same_dims(&out, endim, edims), "%s: output dims %s", what, dims_str(&out));
        if (same_dims(&out, endim, edims)) {
            char w[160];
            snprintf(w, sizeof w, "%s (threads %d)", what, pool_threads[pi]);
            CHECK(ert_test_close(w, out.data, ref, nel(&out), 1e-4, 1e-4), "%s", w);
        }
        free_t(&out);
    }
}

/* ------------------------------------------------------------ reference activation */

static double ref_act(double v, int kind, double alpha, double beta) {
    switch (kind) {
    case ERT_ACT_RELU: return v > 0 ? v : 0;
    case ERT_ACT_LEAKY_RELU: return v >= 0 ? v : alpha * v;
    case ERT_ACT_CLIP: return v < alpha ? alpha : v > beta ? beta : v;
    case ERT_ACT_SIGMOID: return 1 / (1 + exp(-v));
    case ERT_ACT_SILU: return v / (1 + exp(-v));
    case ERT_ACT_TANH: return tanh(v);
    case ERT_ACT_HARD_SWISH: return v * fmin(1, fmax(0, v / 6 + 0.5));
    default: return v;
    }
}

/* ------------------------------------------------------------ Conv */

typedef struct convcfg {
    int nsp;
    int64_t N, C, M, group;
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3];
    const char *auto_pad;    /* NULL: explicit pads */
    bool bias, residual, give_kshape;
    int act;
    float act_a, act_b;
} convcfg;

/* Independent output size + SAME padding (in the test's own words). */
static void conv_out_dims(convcfg *c, int64_t *od) {
    for (int i = 0; i < c->nsp; i++) {
        int64_t ext = c->d[i] * (c->k[i] - 1) + 1;
        if (c->auto_pad && strncmp(c->auto_pad, "SAME", 4) == 0) {
            od[i] = (c->in[i] + c->s[i] - 1) / c->s[i];
            int64_t tot = (od[i] - 1) * c->s[i] + ext - c->in[i];
            if (tot < 0) tot = 0;
            bool upper = strcmp(c->auto_pad, "SAME_UPPER") == 0;
            c->pb[i] = upper ? tot / 2 : (tot + 1) / 2;
            c->pe[i] = tot - c->pb[i];
        } else {
            od[i] = (c->in[i] + c->pb[i] + c->pe[i] - ext) / c->s[i] + 1;
        }
    }
}

static void conv_ref(const convcfg *c, const int64_t *od, const tens *x, const tens *w, const tens *b, const tens *r,
                     double *y) {
    int64_t I[3] = {1, 1, 1}, O[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, D[3] = {1, 1, 1}, P[3] = {0, 0, 0};
    int off = 3 - c->nsp;
    for (int i = 0; i < c->nsp; i++) {
        I[off + i] = c->in[i], O[off + i] = od[i], K[off + i] = c->k[i];
        S[off + i] = c->s[i], D[off + i] = c->d[i], P[off + i] = c->pb[i];
    }
    int64_t Cg = c->C / c->group, Mg = c->M / c->group;
    int64_t osz = O[0] * O[1] * O[2];
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < c->M; m++) {
            int64_t g = m / Mg;
            for (int64_t o0 = 0; o0 < O[0]; o0++)
                for (int64_t o1 = 0; o1 < O[1]; o1++)
                    for (int64_t o2 = 0; o2 < O[2]; o2++) {
                        double acc = b->data ? b->data[m] : 0;
                        for (int64_t ci = 0; ci < Cg; ci++)
                            for (int64_t k0 = 0; k0 < K[0]; k0++)
                                for (int64_t k1 = 0; k1 < K[1]; k1++)
                                    for (int64_t k2 = 0; k2 < K[2]; k2++) {
                                        int64_t i0 = o0 * S[0] - P[0] + k0 * D[0];
                                        int64_t i1 = o1 * S[1] - P[1] + k1 * D[1];
                                        int64_t i2 = o2 * S[2] - P[2] + k2 * D[2];
                                        if (i0 < 0 || i0 >= I[0] || i1 < 0 || i1 >= I[1] || i2 < 0 || i2 >= I[2]) continue;
                                        int64_t c_in = g * Cg + ci;
                                        double xv = x->data[(((n * c->C + c_in) * I[0] + i0) * I[1] + i1) * I[2] + i2];
                                        double wv = w->data[(((m * Cg + ci) * K[0] + k0) * K[1] + k1) * K[2] + k2];
                                        acc += xv * wv;
                                    }
                        int64_t yi = (n * c->M + m) * osz + (o0 * O[1] + o1) * O[2] + o2;
                        if (r && r->data) acc += r->data[yi];
                        y[yi] = ref_act(acc, c->act, c->act_a, c->act_b);
                    }
        }
}

static void test_conv_case(const char *what, convcfg c, int max_pools) {
    int64_t xd[5] = {c.N, c.C}, wd[5] = {c.M, c.C / c.group}, od[3], yd[5] = {c.N, c.M};
    for (int i = 0; i < c.nsp; i++) xd[2 + i] = c.in[i], wd[2 + i] = c.k[i];
    conv_out_dims(&c, od);
    for (int i = 0; i < c.nsp; i++) yd[2 + i] = od[i];
    tens in[4] = {mk(2 + c.nsp, xd), mk(2 + c.nsp, wd), c.bias ? MK(c.M) : none(), c.residual ? mk(2 + c.nsp, yd) : none()};
    attrs A = {.n = 0};
    if (c.group != 1) at_i(&A, "group", c.group);
    at_is(&A, "strides", c.nsp, c.s);
    at_is(&A, "dilations", c.nsp, c.d);
    if (c.give_kshape) at_is(&A, "kernel_shape", c.nsp, c.k);
    if (c.auto_pad) at_s(&A, "auto_pad", c.auto_pad);
    else {
        int64_t pads[6];
        for (int i = 0; i < c.nsp; i++) pads[i] = c.pb[i], pads[c.nsp + i] = c.pe[i];
        at_is(&A, "pads", 2 * c.nsp, pads);
    }
    if (c.act) {
        at_i(&A, "ert_act", c.act);
        at_f(&A, "ert_act_alpha", c.act_a);
        at_f(&A, "ert_act_beta", c.act_b);
    }
    tens yshape = {.ndim = 2 + c.nsp};
    memcpy(yshape.dims, yd, sizeof yd);
    double *ref = malloc((size_t)nel(&yshape) * sizeof(double));
    conv_ref(&c, od, &in[0], &in[1], &in[2], &in[3], ref);
    int n_in = c.residual ? 4 : c.bias ? 3 : 2;
    check_op(what, ERT_OP_CONV, &A, n_in, in, ref, 2 + c.nsp, yd, max_pools);
    free(ref);
    for (int i = 0; i < 4; i++) free_t(&in[i]);
}

#define V3(a, b, c) {a, b, c}
static void test_conv(void) {
    test_conv_case("conv 3->4 7x5 k3 p1 bias", (convcfg){.nsp = 2, .N = 1, .C = 3, .M = 4, .group = 1, .in = V3(7, 5, 0),
        .k = V3(3, 3, 0), .s = V3(1, 1, 0), .d = V3(1, 1, 0), .pb = V3(1, 1, 0), .pe = V3(1, 1, 0), .bias = true,
        .give_kshape = true}, N_POOLS);
    test_conv_case("depthwise g3 s2 d2 asym pads", (convcfg){.nsp = 2, .N = 2, .C = 3, .M = 3, .group = 3,
        .in = V3(7, 5, 0), .k = V3(3, 2, 0), .s = V3(2, 2, 0), .d = V3(2, 1, 0), .pb = V3(0, 2, 0), .pe = V3(1, 1, 0),
        .bias = true}, N_POOLS);
    test_conv_case("depthwise x2 multiplier + residual + relu", (convcfg){.nsp = 2, .N = 1, .C = 3, .M = 6, .group = 3,
        .in = V3(6, 9, 0), .k = V3(3, 3, 0), .s = V3(1, 1, 0), .d = V3(1, 1, 0), .pb = V3(1, 1, 0), .pe = V3(1, 1, 0),
        .bias = true, .residual = true, .act = ERT_ACT_RELU}, N_POOLS);
    test_conv_case("grouped g2 s2 SAME_UPPER", (convcfg){.nsp = 2, .N = 1, .C = 4, .M = 6, .group = 2,
        .in = V3(7, 6, 0), .k = V3(4, 3, 0), .s = V3(2, 3, 0), .d = V3(1, 1, 0), .auto_pad = "SAME_UPPER"}, N_POOLS);
    test_conv_case("SAME_LOWER k4 s2", (convcfg){.nsp = 2, .N = 1, .C = 3, .M = 5, .group = 1, .in = V3(7, 5, 0),
        .k = V3(4, 2, 0), .s = V3(2, 1, 0), .d = V3(1, 2, 0), .auto_pad = "SAME_LOWER", .bias = true}, N_POOLS);
    test_conv_case("conv VALID", (convcfg){.nsp = 2, .N = 1, .C = 2, .M = 3, .group = 1, .in = V3(5, 7, 0),
        .k = V3(2, 3, 0), .s = V3(2, 2, 0), .d = V3(1, 1, 0), .pb = V3(0, 0, 0), .pe = V3(0, 0, 0), .auto_pad = "VALID"}, N_POOLS);
    test_conv_case("conv1d s2 d2", (convcfg){.nsp = 1, .N = 2, .C = 5, .M = 3, .group = 1, .in = V3(11, 0, 0),
        .k = V3(3, 0, 0), .s = V3(2, 0, 0), .d = V3(2, 0, 0), .pb = V3(1, 0, 0), .pe = V3(2, 0, 0), .bias = true}, N_POOLS);
    test_conv_case("conv3d", (convcfg){.nsp = 3, .N = 1, .C = 2, .M = 3, .group = 1, .in = V3(4, 5, 3),
        .k = V3(2, 3, 2), .s = V3(1, 2, 1), .d = V3(1, 1, 1), .pb = V3(0, 1, 1), .pe = V3(1, 1, 0), .bias = true,
        .give_kshape = true}, N_POOLS);
    test_conv_case("pointwise 1x1 + residual + leaky", (convcfg){.nsp = 2, .N = 2, .C = 8, .M = 5, .group = 1,
        .in = V3(6, 7, 0), .k = V3(1, 1, 0), .s = V3(1, 1, 0), .d = V3(1, 1, 0), .bias = true, .residual = true,
        .act = ERT_ACT_LEAKY_RELU, .act_a = 0.1f}, N_POOLS);
    test_conv_case("1x1 stride 2 + clip", (convcfg){.nsp = 2, .N = 1, .C = 4, .M = 7, .group = 1, .in = V3(7, 5, 0),
        .k = V3(1, 1, 0), .s = V3(2, 2, 0), .d = V3(1, 1, 0), .act = ERT_ACT_CLIP, .act_a = -0.3f, .act_b = 0.4f}, N_POOLS);
    test_conv_case("depthwise 1d s2", (convcfg){.nsp = 1, .N = 2, .C = 4, .M = 4, .group = 4, .in = V3(13, 0, 0),
        .k = V3(5, 0, 0), .s = V3(2, 0, 0), .d = V3(1, 0, 0), .pb = V3(2, 0, 0), .pe = V3(1, 0, 0), .bias = true}, N_POOLS);
    test_conv_case("depthwise 3d", (convcfg){.nsp = 3, .N = 1, .C = 2, .M = 2, .group = 2, .in = V3(3, 4, 5),
        .k = V3(2, 3, 3), .s = V3(1, 1, 2), .d = V3(1, 1, 1), .pb = V3(1, 1, 1), .pe = V3(0, 1, 1),
        .act = ERT_ACT_SIGMOID}, N_POOLS);
    /* one case big enough to cross every SGEMM block (M > 144, K > 256, N > 256) */
    test_conv_case("big conv 40->150 17x19", (convcfg){.nsp = 2, .N = 1, .C = 40, .M = 150, .group = 1,
        .in = V3(17, 19, 0), .k = V3(3, 3, 0), .s = V3(1, 1, 0), .d = V3(1, 1, 0), .pb = V3(1, 1, 0), .pe = V3(1, 1, 0),
        .bias = true, .residual = true, .act = ERT_ACT_RELU}, 2);
    test_conv_case("conv 16->300 s2 (row blocks)", (convcfg){.nsp = 2, .N = 1, .C = 16, .M = 300, .group = 1,
        .in = V3(9, 11, 0), .k = V3(3, 3, 0), .s = V3(2, 2, 0), .d = V3(1, 1, 0), .pb = V3(1, 1, 0), .pe = V3(1, 1, 0),
        .bias = true, .act = ERT_ACT_RELU}, 2);
}

/* fp16 conversions (FCVT on aarch64) against the portable ones: every half,
 * and floats around every half's rounding boundary plus random ones. NaN only
 * has to stay NaN (FCVT quiets a signalling NaN). */
static void test_fp16_convert(void) {
    int64_t bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = ert_f16_to_f32((uint16_t)h), b = ert_f16_to_f32_plain((uint16_t)h);
        if (isnan(b) ? !isnan(a) : memcmp(&a, &b, 4) != 0) bad++;
        uint32_t u;
        memcpy(&u, &b, 4);
        for (int d = -2; d <= 2; d++) { /* bit patterns next to the half: ties and their neighbours */
            uint32_t v = u + (uint32_t)(d * 4096);
            float f;
            memcpy(&f, &v, 4);
            uint16_t x = ert_f32_to_f16(f), y = ert_f32_to_f16_plain(f);
            if (isnan(f) ? (x & 0x7c00u) != 0x7c00u || !(x & 0x3ffu) : x != y) bad++;
        }
    }
    for (int i = 0; i < 100000; i++) {
        uint32_t v = (uint32_t)ert_test_int(&rng, 0, 0xffff) << 16 | (uint32_t)ert_test_int(&rng, 0, 0xffff);
        float f;
        memcpy(&f, &v, 4);
        if (!isnan(f) && ert_f32_to_f16(f) != ert_f32_to_f16_plain(f)) bad++;
    }
    CHECK(bad == 0, "fp16 conversion: %lld results differ from the portable conversion", (long long)bad);
}

/* act_vec.h's row activation (the conv/GEMM store epilogue) against a float64
 * reference on odd lengths (vector body + scalar tail), values around every
 * kink, and NaN, which must stay NaN. */
static void test_act_row(void) {
    static const int kinds[] = {ERT_ACT_RELU, ERT_ACT_CLIP, ERT_ACT_LEAKY_RELU, ERT_ACT_HARD_SIGMOID,
                                ERT_ACT_HARD_SWISH, ERT_ACT_SIGMOID, ERT_ACT_SILU, ERT_ACT_TANH, ERT_ACT_GELU};
    for (int rep = 0; rep < 36; rep++) {
        int kind = kinds[rep % 9];
        ert_act_params ap = {.kind = kind, .alpha = kind == ERT_ACT_CLIP ? -0.5f : 0.2f,
                             .beta = kind == ERT_ACT_CLIP ? 6.0f : 0.5f};
        int64_t n = ert_test_int(&rng, 1, 300);
        float *x = malloc((size_t)n * sizeof *x);
        double *ref = malloc((size_t)n * sizeof *ref);
        int64_t nan_at = ert_test_int(&rng, 0, (int)n - 1);
        for (int64_t i = 0; i < n; i++) {
            /* mostly around the kinks, some far out (exp's clamps) */
            x[i] = (float)(i % 7 == 3 ? ert_test_uniform(&rng, -120, 120) : ert_test_uniform(&rng, -8, 8));
            double v = x[i], y;
            switch (kind) {
            case ERT_ACT_SILU: y = v / (1 + exp(-v)); break;
            case ERT_ACT_TANH: y = tanh(v); break;
            case ERT_ACT_GELU: y = 0.5 * v * erfc(-v / sqrt(2.0)); break;
            case ERT_ACT_HARD_SIGMOID: y = fmin(1, fmax(0, ap.alpha * v + ap.beta)); break;
            case ERT_ACT_HARD_SWISH: y = v * fmin(1, fmax(0, v / 6 + 0.5)); break;
            default: y = ref_act(v, kind, ap.alpha, ap.beta); break;
            }
            ref[i] = y;
        }
        x[nan_at] = NAN, ref[nan_at] = NAN;
        ert_cpu_act_row(x, n, &ap);
        char w[64];
        snprintf(w, sizeof w, "act row kind %d n %lld", kind, (long long)n);
        CHECK(isnan(x[nan_at]), "%s: NaN at %lld became %g", w, (long long)nan_at, x[nan_at]);
        x[nan_at] = 0, ref[nan_at] = 0;
        CHECK(ert_test_close(w, x, ref, n, 1e-7, 1e-6), "%s", w); /* exp's polynomial: a few ulp */
        free(x);
        free(ref);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* one 16-lane vector through ert_av_act_z (a function of its own: the
 * always_inline body needs the avx512f target) */
__attribute__((target("avx512f,avx2,fma"))) static void act_z16(float *x, int kind, float al, float be) {
    __m512 v = _mm512_loadu_ps(x);
    switch (kind) { /* constant kinds, as the kernels call it */
    case ERT_ACT_RELU: v = ert_av_act_z(v, ERT_ACT_RELU, al, be); break;
    case ERT_ACT_CLIP: v = ert_av_act_z(v, ERT_ACT_CLIP, al, be); break;
    case ERT_ACT_LEAKY_RELU: v = ert_av_act_z(v, ERT_ACT_LEAKY_RELU, al, be); break;
    case ERT_ACT_HARD_SIGMOID: v = ert_av_act_z(v, ERT_ACT_HARD_SIGMOID, al, be); break;
    case ERT_ACT_HARD_SWISH: v = ert_av_act_z(v, ERT_ACT_HARD_SWISH, al, be); break;
    case ERT_ACT_SIGMOID: v = ert_av_act_z(v, ERT_ACT_SIGMOID, al, be); break;
    case ERT_ACT_SILU: v = ert_av_act_z(v, ERT_ACT_SILU, al, be); break;
    case ERT_ACT_GELU: v = ert_av_act_z(v, ERT_ACT_GELU, al, be); break;
    default: break;
    }
    _mm512_storeu_ps(x, v);
}

/* The AVX-512 activations (ert_av_act_z: the AVX-512 SGEMM and 1x1-conv
 * stores) against float64 on values around every kink and far out (exp's
 * clamps), and on the special values against the 8-lane form (ert_av_act,
 * the row epilogue): NaN stays NaN, +-inf and +-FLT_MAX give what the row
 * epilogue gives (inf, -inf or NaN alike). Skipped where the CPU has no AVX-512. */
static void test_act_z(void) {
    if (!__builtin_cpu_supports("avx512f")) {
        printf("act_z: SKIPPED (no AVX-512 on this CPU)\n");
        return;
    }
    static const int kinds[] = {ERT_ACT_RELU, ERT_ACT_CLIP, ERT_ACT_LEAKY_RELU, ERT_ACT_HARD_SIGMOID,
                                ERT_ACT_HARD_SWISH, ERT_ACT_SIGMOID, ERT_ACT_SILU, ERT_ACT_GELU};
    for (int rep = 0; rep < 32; rep++) {
        const int kind = kinds[rep % 8];
        ert_act_params ap = {.kind = kind, .alpha = kind == ERT_ACT_CLIP ? -0.5f : 0.2f,
                             .beta = kind == ERT_ACT_CLIP ? 6.0f : 0.5f};
        float x[64];
        double ref[64];
        for (int i = 0; i < 64; i++) {
            x[i] = (float)(i % 7 == 3 ? ert_test_uniform(&rng, -120, 120) : ert_test_uniform(&rng, -8, 8));
            double v = x[i];
            switch (kind) {
            case ERT_ACT_SILU: ref[i] = v / (1 + exp(-v)); break;
            case ERT_ACT_GELU: ref[i] = 0.5 * v * erfc(-v / sqrt(2.0)); break;
            case ERT_ACT_HARD_SIGMOID: ref[i] = fmin(1, fmax(0, ap.alpha * v + ap.beta)); break;
            case ERT_ACT_HARD_SWISH: ref[i] = v * fmin(1, fmax(0, v / 6 + 0.5)); break;
            default: ref[i] = ref_act(v, kind, ap.alpha, ap.beta); break;
            }
        }
        for (int i = 0; i < 64; i += 16) act_z16(x + i, kind, ap.alpha, ap.beta);
        char w[64];
        snprintf(w, sizeof w, "act_z kind %d", kind);
        CHECK(ert_test_close(w, x, ref, 64, 1e-7, 1e-6), "%s", w);
        /* special values, 16 lanes against the 8-lane row form */
        const float sp[16] = {NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 0.0f, -0.0f, 1e-30f,
                              -1e-30f, 88.5f, -88.5f, 200.0f, -200.0f, -NAN, 3.0f, -3.0f};
        float z[16], r[16];
        memcpy(z, sp, sizeof z);
        memcpy(r, sp, sizeof r);
        act_z16(z, kind, ap.alpha, ap.beta);
        ert_cpu_act_row(r, 16, &ap);
        for (int i = 0; i < 16; i++) {
            const bool same = isnan(r[i]) ? isnan(z[i])
                              : isinf(r[i]) ? z[i] == r[i]
                                            : fabs((double)z[i] - r[i]) <= 1e-6 * fabs((double)r[i]) + 1e-30;
            CHECK(same, "%s: x = %g gives %g, the row epilogue %g", w, sp[i], z[i], r[i]);
        }
    }
}
#endif

/* The epilogue of a random depthwise case (bias on 2 reps in 3, the given
 * residual and activation) and its ert_dw2d, for the fits/path checks. */
static ert_dw2d dw_case_finish(convcfg *c, int rep, bool residual, int act) {
    c->bias = rep % 3 != 0;
    c->residual = residual;
    c->act = act;
    c->act_a = act == ERT_ACT_CLIP ? -0.2f : 0.1f;
    c->act_b = 0.3f;
    int64_t od[3];
    convcfg probe = *c;
    conv_out_dims(&probe, od);
    return (ert_dw2d){.N = c->N, .C = c->C, .M = c->M, .mult = c->M / c->C, .H = c->in[0], .W = c->in[1],
                      .OH = od[0], .OW = od[1], .KH = c->k[0], .KW = c->k[1], .sh = c->s[0], .sw = c->s[1],
                      .dh = c->d[0], .dw = c->d[1], .ph = c->pb[0], .pw = c->pb[1]};
}

/* The direct depthwise kernel (dwconv.c) against the float64 reference and
 * against the plain loops (hook off), on random 2-D cases over everything it
 * claims: kernels 1..7 per axis, stride 1/2 per axis, dilation 1/2, any pads,
 * odd channel counts, multiplier 1/2, rows wider than two vectors (interior
 * blocks + border + tail), planes that fit the padded-plane copy and taller
 * ones that take the row paths, bias/residual/activation, 1-3 threads; outputs
 * poisoned by run_op. */
static void test_dw_fast(void) {
    static const int acts[] = {0, ERT_ACT_RELU, ERT_ACT_LEAKY_RELU, ERT_ACT_CLIP, ERT_ACT_SIGMOID};
    for (int rep = 0; rep < 54; rep++) {
        convcfg c = {.nsp = 2, .N = ert_test_int(&rng, 1, 2), .group = ert_test_int(&rng, 1, 13)};
        const bool k7 = rep >= 42; /* 7x7 (ConvNeXt): padded plane, padded rows, and rows too wide for either */
        c.C = c.group;
        c.M = c.C * ert_test_int(&rng, 1, 2);
        for (int i = 0; i < 2; i++) {
            /* every (kernel width, column stride) pair, each with wide and narrow rows */
            c.k[i] = i || rep % 3 == 0 ? 1 + rep % 7 : ert_test_int(&rng, 1, 7); /* square: 3x3, 5x5 specialised */
            c.s[i] = i ? 1 + (rep / 7) % 2 : ert_test_int(&rng, 1, 2);
            c.d[i] = rep % 4 == 3 ? 2 : 1;
            c.pb[i] = ert_test_int(&rng, 0, (int)c.k[i] - 1);
            c.pe[i] = ert_test_int(&rng, 0, (int)c.k[i] - 1);
            int64_t ext = c.d[i] * (c.k[i] - 1) + 1;
            int64_t lo = ext > c.pb[i] + c.pe[i] ? ext - c.pb[i] - c.pe[i] : 1; /* at least one output */
            c.in[i] = lo + ert_test_int(&rng, 0, i ? ((rep / 14) % 2 ? 40 : 110) : 8); /* wide rows: unpadded path */
            /* tall planes: too big for the padded plane (8192 floats), so the rows take the row paths */
            if (!i && rep % 6 == 5) c.in[i] += 80;
            if (k7) {
                c.k[i] = 7;
                c.pb[i] = ert_test_int(&rng, 0, 6);
                c.pe[i] = ert_test_int(&rng, 0, 6);
                ext = c.d[i] * 6 + 1;
                lo = ext > c.pb[i] + c.pe[i] ? ext - c.pb[i] - c.pe[i] : 1;
                static const int wide[3][2] = {{0, 20}, {40, 70}, {150, 190}};
                c.in[i] = lo + (i ? ert_test_int(&rng, wide[rep % 3][0], wide[rep % 3][1]) : ert_test_int(&rng, 0, 70));
            }
        }
        ert_dw2d d = dw_case_finish(&c, rep, rep % 5 == 1, acts[rep % 5]);
        CHECK(ert_cpu_dw2d_fits(&d), "dw rep %d: the direct kernel should take k %lldx%lld s %lld,%lld", rep,
              (long long)c.k[0], (long long)c.k[1], (long long)c.s[0], (long long)c.s[1]);
        char w[160];
        for (int fast = 1; fast >= 0; fast--) {
            kc.dw_plain = !fast;
            snprintf(w, sizeof w, "dw %s rep %d C%lld M%lld %lldx%lld in %lldx%lld k%lldx%lld s%lld,%lld d%lld",
                     fast ? "direct" : "plain", rep, (long long)c.C, (long long)c.M, (long long)c.N, (long long)c.C,
                     (long long)c.in[0], (long long)c.in[1], (long long)c.k[0], (long long)c.k[1], (long long)c.s[0],
                     (long long)c.s[1], (long long)c.d[0]);
            test_conv_case(w, c, N_POOLS);
        }
        kc.dw_plain = false;
    }
}

/* The channel-blocked depthwise path (dwconv_cb.h: small planes,
 * multiplier 1, dilation 1) against the float64 reference and the plain
 * loops: channel counts 8..41 (whole blocks and a leftover block that takes
 * the plane kernel), planes 1x1 to 30x30 (fewer pixels than a block, plane
 * tails), kernels 1..7 per axis (3x3/5x5/7x7 specialised), strides 1/2 per
 * axis, any pads, bias/residual and every activation kind (vectorised and
 * not), 1-3 threads, each SGEMM/ISA cap this CPU has (it caps the depthwise
 * copy too), batch 1-2. Each case is checked to take the path. */
static void test_dw_cblock(void) {
    static const int acts[] = {0, ERT_ACT_CLIP, ERT_ACT_HARD_SWISH, ERT_ACT_SILU, ERT_ACT_RELU, ERT_ACT_TANH};
    int rep = 0;
    for (int cap = ERT_CPU_GEMM_FASTEST; cap >= ERT_CPU_GEMM_PORTABLE; cap--) {
        kc.gemm_cap = cap;
        if ((int)ert_cpu_sgemm_kernel(&kc) != cap) continue;
        for (int i_rep = 0; i_rep < 24; i_rep++, rep++) {
            convcfg c = {.nsp = 2, .N = ert_test_int(&rng, 1, 2), .group = ert_test_int(&rng, 8, 41)};
            c.C = c.M = c.group;
            const int sq = (int[]){3, 5, 7, 0}[rep % 4]; /* 0: any KH x KW */
            for (int i = 0; i < 2; i++) {
                c.k[i] = sq ? sq : ert_test_int(&rng, 1, 7);
                c.s[i] = ert_test_int(&rng, 1, 2);
                c.d[i] = 1;
                c.pb[i] = ert_test_int(&rng, 0, (int)c.k[i] - 1);
                c.pe[i] = ert_test_int(&rng, 0, (int)c.k[i] - 1);
                int64_t lo = c.k[i] > c.pb[i] + c.pe[i] ? c.k[i] - c.pb[i] - c.pe[i] : 1;
                c.in[i] = lo + ert_test_int(&rng, 0, rep % 3 == 0 ? 3 : 22);
            }
            ert_dw2d d = dw_case_finish(&c, rep, rep % 4 == 1, acts[rep % 6]);
            d.choice = &kc;
            CHECK(ert_cpu_dw2d_cblocked(&d), "dw cblock rep %d: should be channel-blocked: C%lld in %lldx%lld k%lldx%lld", rep,
                  (long long)c.C, (long long)c.in[0], (long long)c.in[1], (long long)c.k[0], (long long)c.k[1]);
            char w[160];
            for (int fast = 1; fast >= 0; fast--) {
                kc.dw_plain = !fast;
                snprintf(w, sizeof w, "dw cblock %s cap %d rep %d %lldx%lld in %lldx%lld k%lldx%lld s%lld,%lld act %d",
                         fast ? "direct" : "plain", cap, rep, (long long)c.N, (long long)c.C, (long long)c.in[0],
                         (long long)c.in[1], (long long)c.k[0], (long long)c.k[1], (long long)c.s[0],
                         (long long)c.s[1], c.act);
                test_conv_case(w, c, N_POOLS);
            }
            kc.dw_plain = false;
        }
    }
    kc.gemm_cap = ERT_KC_GEMM_ANY;
    /* and what it declines: a multiplier, dilation, wide rows */
    ert_dw2d d = {.N = 1, .C = 16, .M = 16, .mult = 1, .H = 14, .W = 14, .OH = 14, .OW = 14, .KH = 3, .KW = 3,
                  .sh = 1, .sw = 1, .dh = 1, .dw = 1, .ph = 1, .pw = 1};
    CHECK(ert_cpu_dw2d_cblocked(&d), "dw cblock: 16x14x14 3x3 should be channel-blocked");
    ert_dw2d e = d;
    e.M = 32, e.mult = 2;
    CHECK(!ert_cpu_dw2d_cblocked(&e), "dw cblock: multiplier 2 should not be channel-blocked");
    e = d, e.dh = e.dw = 2, e.OH = e.OW = 12;
    CHECK(!ert_cpu_dw2d_cblocked(&e), "dw cblock: dilation 2 should not be channel-blocked");
    e = d, e.H = e.W = e.OH = e.OW = 56;
    CHECK(!ert_cpu_dw2d_cblocked(&e), "dw cblock: 56-wide rows should not be channel-blocked");
}

/* ------------------------------------------------------------ ConvTranspose */

typedef struct ctcfg {
    int nsp;
    int64_t N, C, M, group;  /* M = output channels */
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], opad[3], oshape[3];
    const char *auto_pad;
    bool bias, use_oshape;
} ctcfg;

static void test_convt_case(const char *what, ctcfg c) {
    int64_t Mg = c.M / c.group, Cg = c.C / c.group;
    int64_t xd[5] = {c.N, c.C}, wd[5] = {c.C, Mg}, yd[5] = {c.N, c.M};
    int64_t O[3] = {1, 1, 1}, I[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, D[3] = {1, 1, 1}, P[3] = {0, 0, 0};
    int off = 3 - c.nsp;
    for (int i = 0; i < c.nsp; i++) {
        xd[2 + i] = c.in[i], wd[2 + i] = c.k[i];
        int64_t full = c.s[i] * (c.in[i] - 1) + c.opad[i] + (c.k[i] - 1) * c.d[i] + 1;
        int64_t pb = c.pb[i], pe = c.pe[i], o;
        bool same = c.auto_pad && strncmp(c.auto_pad, "SAME", 4) == 0;
        if (c.use_oshape || same) {
            o = c.use_oshape ? c.oshape[i] : c.in[i] * c.s[i];
            int64_t tot = full - o;
            bool upper = c.auto_pad && strcmp(c.auto_pad, "SAME_UPPER") == 0;
            pb = upper ? tot / 2 : tot - tot / 2;
        } else {
            o = full - pb - pe;
        }
        yd[2 + i] = o;
        O[off + i] = o, I[off + i] = c.in[i], K[off + i] = c.k[i], S[off + i] = c.s[i], D[off + i] = c.d[i], P[off + i] = pb;
    }
    tens in[3] = {mk(2 + c.nsp, xd), mk(2 + c.nsp, wd), c.bias ? MK(c.M) : none()};
    tens ys = {.ndim = 2 + c.nsp};
    memcpy(ys.dims, yd, sizeof yd);
    int64_t ysz = nel(&ys), osz = O[0] * O[1] * O[2], isz = I[0] * I[1] * I[2];
    double *ref = calloc((size_t)ysz, sizeof(double));
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t m = 0; m < c.M; m++)
            for (int64_t o = 0; o < osz; o++) ref[(n * c.M + m) * osz + o] = c.bias ? in[2].data[m] : 0;
    /* scatter form: each input tap adds to the output position it maps to */
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t ci = 0; ci < c.C; ci++) {
            int64_t g = ci / Cg;
            for (int64_t mo = 0; mo < Mg; mo++)
                for (int64_t i0 = 0; i0 < I[0]; i0++)
                    for (int64_t i1 = 0; i1 < I[1]; i1++)
                        for (int64_t i2 = 0; i2 < I[2]; i2++)
                            for (int64_t k0 = 0; k0 < K[0]; k0++)
                                for (int64_t k1 = 0; k1 < K[1]; k1++)
                                    for (int64_t k2 = 0; k2 < K[2]; k2++) {
                                        int64_t o0 = i0 * S[0] - P[0] + k0 * D[0];
                                        int64_t o1 = i1 * S[1] - P[1] + k1 * D[1];
                                        int64_t o2 = i2 * S[2] - P[2] + k2 * D[2];
                                        if (o0 < 0 || o0 >= O[0] || o1 < 0 || o1 >= O[1] || o2 < 0 || o2 >= O[2]) continue;
                                        double xv = in[0].data[(n * c.C + ci) * isz + (i0 * I[1] + i1) * I[2] + i2];
                                        double wv = in[1].data[(((ci * Mg + mo) * K[0] + k0) * K[1] + k1) * K[2] + k2];
                                        ref[(n * c.M + g * Mg + mo) * osz + (o0 * O[1] + o1) * O[2] + o2] += xv * wv;
                                    }
        }
    attrs A = {.n = 0};
    if (c.group != 1) at_i(&A, "group", c.group);
    at_is(&A, "strides", c.nsp, c.s);
    at_is(&A, "dilations", c.nsp, c.d);
    at_is(&A, "output_padding", c.nsp, c.opad);
    if (c.use_oshape) at_is(&A, "output_shape", c.nsp, c.oshape);
    if (c.auto_pad) at_s(&A, "auto_pad", c.auto_pad);
    else if (!c.use_oshape) {
        int64_t pads[6];
        for (int i = 0; i < c.nsp; i++) pads[i] = c.pb[i], pads[c.nsp + i] = c.pe[i];
        at_is(&A, "pads", 2 * c.nsp, pads);
    }
    check_op(what, ERT_OP_CONV_TRANSPOSE, &A, c.bias ? 3 : 2, in, ref, 2 + c.nsp, yd, N_POOLS);
    free(ref);
    for (int i = 0; i < 3; i++) free_t(&in[i]);
}

static void test_convt(void) {
    test_convt_case("convT s2 p1 opad1", (ctcfg){.nsp = 2, .N = 1, .C = 3, .M = 4, .group = 1, .in = V3(4, 3, 0),
        .k = V3(3, 3, 0), .s = V3(2, 2, 0), .d = V3(1, 1, 0), .pb = V3(1, 0, 0), .pe = V3(1, 1, 0), .opad = V3(1, 0, 0),
        .bias = true});
    test_convt_case("convT g2 d2", (ctcfg){.nsp = 2, .N = 2, .C = 4, .M = 6, .group = 2, .in = V3(3, 5, 0),
        .k = V3(2, 2, 0), .s = V3(1, 2, 0), .d = V3(2, 1, 0), .bias = true});
    test_convt_case("convT output_shape", (ctcfg){.nsp = 2, .N = 1, .C = 2, .M = 3, .group = 1, .in = V3(3, 4, 0),
        .k = V3(3, 3, 0), .s = V3(2, 2, 0), .d = V3(1, 1, 0), .oshape = V3(6, 8, 0), .use_oshape = true});
    test_convt_case("convT SAME_UPPER", (ctcfg){.nsp = 2, .N = 1, .C = 2, .M = 2, .group = 1, .in = V3(3, 4, 0),
        .k = V3(3, 2, 0), .s = V3(2, 2, 0), .d = V3(1, 1, 0), .auto_pad = "SAME_UPPER", .bias = true});
    test_convt_case("convT 1d", (ctcfg){.nsp = 1, .N = 1, .C = 3, .M = 2, .group = 1, .in = V3(5, 0, 0),
        .k = V3(4, 0, 0), .s = V3(3, 0, 0), .d = V3(1, 0, 0), .pb = V3(2, 0, 0), .pe = V3(1, 0, 0)});
}

/* ------------------------------------------------------------ MatMul / Gemm */

static void test_matmul_case(const char *what, tens a, tens b, int max_pools, int act) {
    /* independent shape rule: pad 1-D operands, broadcast batch, drop pads */
    int64_t ad[8], bd[8];
    int an = a.ndim, bn = b.ndim;
    if (an == 1) ad[0] = 1, ad[1] = a.dims[0], an = 2;
    else memcpy(ad, a.dims, sizeof ad);
    if (bn == 1) bd[0] = b.dims[0], bd[1] = 1, bn = 2;
    else memcpy(bd, b.dims, sizeof bd);
    int64_t M = ad[an - 2], K = ad[an - 1], N = bd[bn - 1];
    int nb = (an > bn ? an : bn) - 2;
    int64_t od[8], batch[8], nbatch = 1;
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - (an - 2)), ib = i - (nb - (bn - 2));
        int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
        batch[i] = da > db ? da : db;
        nbatch *= batch[i];
    }
    double *ref = malloc((size_t)(nbatch * M * N) * sizeof(double));
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t idx[8], r = bi;
        for (int i = nb - 1; i >= 0; i--) idx[i] = r % batch[i], r /= batch[i];
        int64_t oa = 0, ob = 0;
        for (int i = 0; i < an - 2; i++) oa = oa * ad[i] + (ad[i] == 1 ? 0 : idx[i + nb - (an - 2)]);
        for (int i = 0; i < bn - 2; i++) ob = ob * bd[i] + (bd[i] == 1 ? 0 : idx[i + nb - (bn - 2)]);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += (double)a.data[oa * M * K + i * K + k] * b.data[ob * K * N + k * N + j];
                ref[(bi * M + i) * N + j] = ref_act(s, act, 0, 0);
            }
    }
    int ond = 0;
    for (int i = 0; i < nb; i++) od[ond++] = batch[i];
    if (a.ndim > 1) od[ond++] = M;
    if (b.ndim > 1) od[ond++] = N;
    tens in[2] = {a, b};
    attrs A = {.n = 0};
    if (act) at_i(&A, "ert_act", act);
    check_op(what, ERT_OP_MATMUL, &A, 2, in, ref, ond, od, max_pools);
    free(ref);
    free_t(&a);
    free_t(&b);
}

static void test_gemm_case(bool ta, bool tb, int c_kind, float alpha, float beta, int act) {
    const int64_t M = 7, K = 9, N = 11;
    tens A = ta ? MK(K, M) : MK(M, K), B = tb ? MK(N, K) : MK(K, N), C = none();
    int64_t cs_i = 0, cs_j = 0;
    switch (c_kind) {
    case 1: C = MK(N), cs_j = 1; break;
    case 2: C = MK(M, 1), cs_i = 1; break;
    case 3: C = MK(1, 1); break;
    case 4: C = MK(M, N), cs_i = N, cs_j = 1; break;
    case 5: C = mk(0, NULL); break; /* scalar */
    default: break;
    }
    double *ref = malloc((size_t)(M * N) * sizeof(double));
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) {
                double av = ta ? A.data[k * M + i] : A.data[i * K + k];
                double bv = tb ? B.data[j * K + k] : B.data[k * N + j];
                s += av * bv;
            }
            s *= alpha;
            if (C.data) s += beta * C.data[i * cs_i + j * cs_j];
            ref[i * N + j] = ref_act(s, act, 0, 0);
        }
    attrs at = {.n = 0};
    at_i(&at, "transA", ta);
    at_i(&at, "transB", tb);
    at_f(&at, "alpha", alpha);
    at_f(&at, "beta", beta);
    if (act) at_i(&at, "ert_act", act);
    tens in[3] = {A, B, C};
    char what[96];
    snprintf(what, sizeof what, "gemm tA%d tB%d C%d act%d", ta, tb, c_kind, act);
    check_op(what, ERT_OP_GEMM, &at, C.data ? 3 : 2, in, ref, 2, (int64_t[]){M, N}, N_POOLS);
    free(ref);
    for (int i = 0; i < 3; i++) free_t(&in[i]);
}

static void test_matmul_gemm(void) {
    test_matmul_case("matmul batched broadcast", MK(2, 1, 3, 5), MK(4, 5, 7), N_POOLS, 0);
    test_matmul_case("matmul 1-D x 2-D", MK(5), MK(5, 7), N_POOLS, 0);
    test_matmul_case("matmul 2-D x 1-D", MK(3, 5), MK(5), N_POOLS, 0);
    test_matmul_case("matmul 1-D x 1-D", MK(6), MK(6), N_POOLS, 0);
    test_matmul_case("matmul 3-D x 1-D", MK(2, 3, 4), MK(4), N_POOLS, 0);
    test_matmul_case("matmul broadcast b + relu", MK(3, 4, 6), MK(1, 6, 5), N_POOLS, ERT_ACT_RELU);
    test_matmul_case("matmul big", MK(150, 300), MK(300, 270), 2, 0);
    /* M > 288 (the largest SGEMM row block) and K > 320: several row and K blocks on one thread */
    test_matmul_case("matmul tall", MK(601, 333), MK(333, 45), 2, 0);
    for (int t = 0; t < 4; t++)
        for (int ck = 0; ck < 6; ck++) test_gemm_case(t & 1, t >> 1, ck, 0.7f, 1.3f, 0);
    test_gemm_case(true, false, 4, 1.0f, 0.0f, ERT_ACT_RELU);
    test_gemm_case(false, true, 1, 1.0f, 1.0f, ERT_ACT_SIGMOID);
}

/* ------------------------------------------------------------ pools */

typedef struct poolcfg {
    int nsp;
    bool is_max;
    int64_t N, C, in[3], k[3], s[3], d[3], pb[3], pe[3];
    bool ceil_mode, cip, give_dil;
    const char *auto_pad;
} poolcfg;

static void test_pool_case(const char *what, poolcfg c) {
    int64_t xd[5] = {c.N, c.C}, od[5] = {c.N, c.C};
    for (int i = 0; i < c.nsp; i++) {
        xd[2 + i] = c.in[i];
        int64_t ext = c.d[i] * (c.k[i] - 1) + 1;
        if (c.auto_pad && strncmp(c.auto_pad, "SAME", 4) == 0) {
            int64_t o = (c.in[i] + c.s[i] - 1) / c.s[i], tot = (o - 1) * c.s[i] + ext - c.in[i];
            if (tot < 0) tot = 0;
            c.pb[i] = strcmp(c.auto_pad, "SAME_UPPER") == 0 ? tot / 2 : (tot + 1) / 2;
            c.pe[i] = tot - c.pb[i];
            od[2 + i] = o;
        } else {
            double q = (double)(c.in[i] + c.pb[i] + c.pe[i] - ext) / (double)c.s[i];
            int64_t o = (int64_t)(c.ceil_mode ? ceil(q) : floor(q)) + 1;
            if (c.ceil_mode && (o - 1) * c.s[i] >= c.in[i] + c.pb[i]) o--;
            od[2 + i] = o;
        }
    }
    int64_t I[3] = {1, 1, 1}, O[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, D[3] = {1, 1, 1}, P[3] = {0, 0, 0},
            E[3] = {0, 0, 0};
    int off = 3 - c.nsp;
    for (int i = 0; i < c.nsp; i++)
        I[off + i] = c.in[i], O[off + i] = od[2 + i], K[off + i] = c.k[i], S[off + i] = c.s[i], D[off + i] = c.d[i],
        P[off + i] = c.pb[i], E[off + i] = c.pe[i];
    tens x = mk(2 + c.nsp, xd);
    int64_t isz = I[0] * I[1] * I[2], osz = O[0] * O[1] * O[2];
    double *ref = malloc((size_t)(c.N * c.C * osz) * sizeof(double));
    for (int64_t t = 0; t < c.N * c.C; t++)
        for (int64_t o0 = 0; o0 < O[0]; o0++)
            for (int64_t o1 = 0; o1 < O[1]; o1++)
                for (int64_t o2 = 0; o2 < O[2]; o2++) {
                    double mx = -INFINITY, sum = 0;
                    int64_t cnt_in = 0, cnt_pad = 0;
                    for (int64_t k0 = 0; k0 < K[0]; k0++)
                        for (int64_t k1 = 0; k1 < K[1]; k1++)
                            for (int64_t k2 = 0; k2 < K[2]; k2++) {
                                int64_t p[3] = {o0 * S[0] - P[0] + k0 * D[0], o1 * S[1] - P[1] + k1 * D[1],
                                                o2 * S[2] - P[2] + k2 * D[2]};
                                bool in_pad = true, in_img = true;
                                for (int q = 0; q < 3; q++) {
                                    if (p[q] >= I[q] + E[q]) in_pad = false;
                                    if (p[q] < 0 || p[q] >= I[q]) in_img = false;
                                }
                                if (in_pad) cnt_pad++;
                                if (!in_img) continue;
                                double v = x.data[t * isz + (p[0] * I[1] + p[1]) * I[2] + p[2]];
                                cnt_in++;
                                sum += v;
                                if (v > mx) mx = v;
                            }
                    ref[t * osz + (o0 * O[1] + o1) * O[2] + o2] = c.is_max ? mx : sum / (double)(c.cip ? cnt_pad : cnt_in);
                }
    attrs A = {.n = 0};
    at_is(&A, "kernel_shape", c.nsp, c.k);
    at_is(&A, "strides", c.nsp, c.s);
    if (c.give_dil) at_is(&A, "dilations", c.nsp, c.d);
    if (c.auto_pad) at_s(&A, "auto_pad", c.auto_pad);
    else {
        int64_t pads[6];
        for (int i = 0; i < c.nsp; i++) pads[i] = c.pb[i], pads[c.nsp + i] = c.pe[i];
        at_is(&A, "pads", 2 * c.nsp, pads);
    }
    at_i(&A, "ceil_mode", c.ceil_mode);
    if (!c.is_max) at_i(&A, "count_include_pad", c.cip);
    check_op(what, c.is_max ? ERT_OP_MAXPOOL : ERT_OP_AVGPOOL, &A, 1, &x, ref, 2 + c.nsp, od, N_POOLS);
    free(ref);
    free_t(&x);
}

static void test_pools(void) {
    test_pool_case("maxpool k3 s2 asym pads", (poolcfg){.nsp = 2, .is_max = true, .N = 1, .C = 3, .in = V3(7, 5, 0),
        .k = V3(3, 3, 0), .s = V3(2, 2, 0), .d = V3(1, 1, 0), .pb = V3(1, 0, 0), .pe = V3(1, 1, 0)});
    /* the 2-D MaxPool fast paths (3x3/2, 2x2/2, other dilation-1 shapes): edges
     * through the general code, the interior without bounds checks */
    test_pool_case("maxpool 3x3/2 p1 (resnet stem)", (poolcfg){.nsp = 2, .is_max = true, .N = 2, .C = 3,
        .in = V3(13, 12, 0), .k = V3(3, 3, 0), .s = V3(2, 2, 0), .d = V3(1, 1, 0), .pb = V3(1, 1, 0), .pe = V3(1, 1, 0)});
    test_pool_case("maxpool 5x5/1 p2 (yolo sppf)", (poolcfg){.nsp = 2, .is_max = true, .N = 2, .C = 3,
        .in = V3(11, 21, 0), .k = V3(5, 5, 0), .s = V3(1, 1, 0), .d = V3(1, 1, 0), .pb = V3(2, 2, 0), .pe = V3(2, 2, 0)});
    test_pool_case("maxpool 5x5/1 asym pads narrow", (poolcfg){.nsp = 2, .is_max = true, .N = 1, .C = 2,
        .in = V3(6, 4, 0), .k = V3(5, 5, 0), .s = V3(1, 1, 0), .d = V3(1, 1, 0), .pb = V3(1, 3, 0), .pe = V3(3, 0, 0)});
    /* the separable path (16+ taps, dilation 1): random kernels 4..7 per axis, strides 1..3, asymmetric
     * pads up to k - 1, ceil mode, planes from narrower than the kernel to wider than one strip of the
     * stack buffer (2048 floats) and past it (the tap-by-tap fallback) */
    for (int rep = 0; rep < 12; rep++) {
        poolcfg c = {.nsp = 2, .is_max = true, .N = 1, .C = ert_test_int(&rng, 1, 3), .ceil_mode = rep % 3 == 2};
        for (int i = 0; i < 2; i++) {
            c.k[i] = ert_test_int(&rng, 4, 7);
            c.s[i] = ert_test_int(&rng, 1, 3);
            c.d[i] = 1;
            c.pb[i] = ert_test_int(&rng, 0, (int)c.k[i] - 1);
            c.pe[i] = ert_test_int(&rng, 0, (int)c.k[i] - 1);
            c.in[i] = ert_test_int(&rng, 1, i == 1 && rep % 4 == 3 ? 700 : 40);
            if (c.in[i] + c.pb[i] + c.pe[i] < c.k[i]) c.in[i] = c.k[i] - c.pb[i] - c.pe[i]; /* one window at least */
        }
        char w[96];
        snprintf(w, sizeof w, "maxpool sep %lldx%lld/%lldx%lld on %lldx%lld", (long long)c.k[0], (long long)c.k[1],
                 (long long)c.s[0], (long long)c.s[1], (long long)c.in[0], (long long)c.in[1]);
        test_pool_case(w, c);
    }
    test_pool_case("maxpool 3x3/1 p1 odd", (poolcfg){.nsp = 2, .is_max = true, .N = 1, .C = 3,
        .in = V3(9, 17, 0), .k = V3(3, 3, 0), .s = V3(1, 1, 0), .d = V3(1, 1, 0), .pb = V3(1, 1, 0), .pe = V3(1, 1, 0)});
    test_pool_case("maxpool 2x2/2 ceil odd", (poolcfg){.nsp = 2, .is_max = true, .N = 1, .C = 2, .in = V3(9, 7, 0),
        .k = V3(2, 2, 0), .s = V3(2, 2, 0), .d = V3(1, 1, 0), .ceil_mode = true});
    test_pool_case("maxpool 2x4/1 p2 wide pads", (poolcfg){.nsp = 2, .is_max = true, .N = 1, .C = 2, .in = V3(5, 6, 0),
        .k = V3(2, 4, 0), .s = V3(1, 1, 0), .d = V3(1, 1, 0), .pb = V3(1, 2, 0), .pe = V3(0, 3, 0)});
    test_pool_case("maxpool 1d k3 s2", (poolcfg){.nsp = 1, .is_max = true, .N = 1, .C = 3, .in = V3(10, 0, 0),
        .k = V3(3, 0, 0), .s = V3(2, 0, 0), .d = V3(1, 0, 0), .pb = V3(1, 0, 0), .pe = V3(1, 0, 0)});
    test_pool_case("maxpool ceil d2", (poolcfg){.nsp = 2, .is_max = true, .N = 2, .C = 2, .in = V3(8, 7, 0),
        .k = V3(2, 3, 0), .s = V3(3, 2, 0), .d = V3(2, 1, 0), .ceil_mode = true, .give_dil = true});
    test_pool_case("avgpool ceil excl pad", (poolcfg){.nsp = 2, .N = 1, .C = 3, .in = V3(7, 5, 0), .k = V3(3, 2, 0),
        .s = V3(2, 2, 0), .d = V3(1, 1, 0), .pb = V3(1, 1, 0), .pe = V3(1, 0, 0), .ceil_mode = true});
    test_pool_case("avgpool ceil incl pad", (poolcfg){.nsp = 2, .N = 1, .C = 3, .in = V3(7, 5, 0), .k = V3(3, 2, 0),
        .s = V3(2, 2, 0), .d = V3(1, 1, 0), .pb = V3(1, 1, 0), .pe = V3(1, 0, 0), .ceil_mode = true, .cip = true});
    test_pool_case("avgpool SAME_UPPER incl", (poolcfg){.nsp = 2, .N = 1, .C = 2, .in = V3(6, 5, 0), .k = V3(3, 4, 0),
        .s = V3(2, 1, 0), .d = V3(1, 1, 0), .cip = true, .auto_pad = "SAME_UPPER"});
    test_pool_case("maxpool SAME_LOWER", (poolcfg){.nsp = 2, .is_max = true, .N = 1, .C = 2, .in = V3(6, 5, 0),
        .k = V3(2, 4, 0), .s = V3(2, 2, 0), .d = V3(1, 1, 0), .auto_pad = "SAME_LOWER"});
    test_pool_case("avgpool 1d", (poolcfg){.nsp = 1, .N = 2, .C = 3, .in = V3(9, 0, 0), .k = V3(3, 0, 0),
        .s = V3(2, 0, 0), .d = V3(1, 0, 0), .pb = V3(1, 0, 0), .pe = V3(2, 0, 0)});
    test_pool_case("maxpool 3d", (poolcfg){.nsp = 3, .is_max = true, .N = 1, .C = 2, .in = V3(4, 5, 3),
        .k = V3(2, 2, 2), .s = V3(2, 1, 2), .d = V3(1, 1, 1), .pb = V3(0, 1, 1), .pe = V3(1, 0, 1), .ceil_mode = true});
    /* global pools */
    for (int is_max = 0; is_max < 2; is_max++) {
        tens x = MK(2, 3, 5, 7);
        double ref[6];
        for (int t = 0; t < 6; t++) {
            double s = 0, m = -INFINITY;
            for (int i = 0; i < 35; i++) {
                s += x.data[t * 35 + i];
                if (x.data[t * 35 + i] > m) m = x.data[t * 35 + i];
            }
            ref[t] = is_max ? m : s / 35;
        }
        check_op(is_max ? "global max" : "global avg", is_max ? ERT_OP_GLOBAL_MAXPOOL : ERT_OP_GLOBAL_AVGPOOL, NULL, 1, &x,
                 ref, 4, (int64_t[]){2, 3, 1, 1}, N_POOLS);
        free_t(&x);
    }
}

/* ------------------------------------------------------------ norms, softmax */

static void test_norms(void) {
    { /* BatchNorm (2,3,4,5) */
        tens in[5] = {MK(2, 3, 4, 5), MK(3), MK(3), MK(3), MK(3)};
        for (int c = 0; c < 3; c++) in[4].data[c] = 0.5f + in[4].data[c] * 0.4f; /* var > 0 */
        double ref[120];
        for (int i = 0; i < 120; i++) {
            int c = (i / 20) % 3;
            ref[i] = (in[0].data[i] - (double)in[3].data[c]) / sqrt((double)in[4].data[c] + 1e-3) * in[1].data[c] +
                     in[2].data[c];
        }
        attrs A = {.n = 0};
        at_f(&A, "epsilon", 1e-3f);
        check_op("batchnorm", ERT_OP_BATCHNORM, &A, 5, in, ref, 4, (int64_t[]){2, 3, 4, 5}, N_POOLS);
        for (int i = 0; i < 5; i++) free_t(&in[i]);
    }
    for (int variant = 0; variant < 3; variant++) { /* LayerNorm (3,4,5) */
        int64_t axis = variant == 0 ? -1 : 1;
        bool with_bias = variant != 2;
        int64_t inner = axis == -1 ? 5 : 20, outer = 60 / inner;
        tens in[3] = {MK(3, 4, 5), axis == -1 ? MK(5) : MK(4, 5), with_bias ? (axis == -1 ? MK(5) : MK(4, 5)) : none()};
        double ref[60];
        for (int64_t r = 0; r < outer; r++) {
            double m = 0, v = 0;
            for (int64_t i = 0; i < inner; i++) m += in[0].data[r * inner + i];
            m /= (double)inner;
            for (int64_t i = 0; i < inner; i++) v += pow(in[0].data[r * inner + i] - m, 2);
            v /= (double)inner;
            for (int64_t i = 0; i < inner; i++)
                ref[r * inner + i] = (in[0].data[r * inner + i] - m) / sqrt(v + 1e-5) * in[1].data[i] +
                                     (with_bias ? in[2].data[i] : 0);
        }
        attrs A = {.n = 0};
        at_i(&A, "axis", axis);
        check_op("layernorm", ERT_OP_LAYERNORM, &A, with_bias ? 3 : 2, in, ref, 3, (int64_t[]){3, 4, 5}, N_POOLS);
        for (int i = 0; i < 3; i++) free_t(&in[i]);
    }
    for (int is_log = 0; is_log < 2; is_log++)
        for (int axis = -1; axis < 3; axis++) { /* Softmax (3,4,5) */
            tens x = MK(3, 4, 5);
            for (int i = 0; i < 60; i++) x.data[i] *= 8; /* exercise the max shift */
            int64_t d[3] = {3, 4, 5}, st[3] = {20, 5, 1};
            int ax = axis < 0 ? 2 : axis;
            double ref[60];
            for (int i = 0; i < 60; i++) {
                int64_t base = i - ((i / st[ax]) % d[ax]) * st[ax];
                double m = -INFINITY, s = 0;
                for (int64_t j = 0; j < d[ax]; j++) /* not fmax: gcc 12 aarch64 ICEs vectorising it */
                    if (x.data[base + j * st[ax]] > m) m = x.data[base + j * st[ax]];
                for (int64_t j = 0; j < d[ax]; j++) s += exp(x.data[base + j * st[ax]] - m);
                ref[i] = is_log ? x.data[i] - m - log(s) : exp(x.data[i] - m) / s;
            }
            attrs A = {.n = 0};
            at_i(&A, "axis", axis);
            check_op(is_log ? "logsoftmax" : "softmax", is_log ? ERT_OP_LOGSOFTMAX : ERT_OP_SOFTMAX, &A, 1, &x, ref, 3, d,
                     N_POOLS);
            free_t(&x);
        }
}

/* Runs op with n_out outputs on every pool; output k must have dims ed[k]
 * (rank en[k]) and match ref[k]. */
static void check_outs(const char *what, ert_op op, const attrs *A, int n_in, const tens *in, int n_out,
                       const double *const *ref, const int *en, const int64_t *const *ed) {
    for (int pi = 0; pi < N_POOLS; pi++) {
        tens out[3];
        ert_status st = run_op(op, A, n_in, in, n_out, out, pi);
        CHECK(st == ERT_OK, "%s (pool %d): %s: %s", what, pi, ert_status_str(st), ert_last_error(ctx));
        if (st) continue;
        for (int k = 0; k < n_out; k++) {
            char w[160];
            snprintf(w, sizeof w, "%s output %d (threads %d)", what, k, pool_threads[pi]);
            bool dims_ok = same_dims(&out[k], en[k], ed[k]);
            CHECK(dims_ok, "%s: dims %s", w, dims_str(&out[k]));
            if (dims_ok) CHECK(ert_test_close(w, out[k].data, ref[k], nel(&out[k]), 1e-4, 1e-4), "%s", w);
            free_t(&out[k]);
        }
    }
}

/* BatchNorm training_mode=1 and LayerNorm's Mean/InvStdDev outputs against
 * float64 references. */
static void test_norm_stats(void) {
    /* BatchNorm training, x (2,3,4,5) and (3,2); variant 2: (2,3,4,5) at 100
     * with a spread of 0.02 and eps 1e-5 (k ~ 1e2: x * k and mean * k cancel) */
    for (int variant = 0; variant < 3; variant++) {
        const int64_t N = variant == 1 ? 3 : 2, C = variant == 1 ? 2 : 3, sz = variant == 1 ? 1 : 20;
        tens in[5] = {variant == 1 ? MK(3, 2) : MK(2, 3, 4, 5), MK(C), MK(C), MK(C), MK(C)};
        for (int64_t c = 0; c < C; c++) in[4].data[c] = 0.5f + in[4].data[c] * 0.4f;
        for (int64_t i = 0; i < N * C * sz; i++) /* mean, var far from 0, 1 */
            in[0].data[i] = variant == 2 ? in[0].data[i] * 0.01f + 100 : in[0].data[i] * 3 + 1;
        const double eps = variant == 2 ? 1e-5 : 1e-2, mom = 0.8;
        double y[120], rm[3], rv[3];
        for (int64_t c = 0; c < C; c++) {
            double m = 0, v = 0;
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < sz; i++) m += in[0].data[(n * C + c) * sz + i];
            m /= (double)(N * sz);
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < sz; i++) v += pow(in[0].data[(n * C + c) * sz + i] - m, 2);
            v /= (double)(N * sz); /* biased, as the ONNX reference */
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < sz; i++) {
                    int64_t e = (n * C + c) * sz + i;
                    y[e] = (in[0].data[e] - m) / sqrt(v + eps) * in[1].data[c] + in[2].data[c];
                }
            rm[c] = in[3].data[c] * mom + m * (1 - mom);
            rv[c] = in[4].data[c] * mom + v * (1 - mom);
        }
        attrs A = {.n = 0};
        at_i(&A, "training_mode", 1);
        at_f(&A, "epsilon", (float)eps);
        at_f(&A, "momentum", (float)mom);
        const double *ref[3] = {y, rm, rv};
        const int64_t *ed[3] = {in[0].dims, &C, &C};
        check_outs("batchnorm training", ERT_OP_BATCHNORM, &A, 5, in, 3, ref, (int[]){in[0].ndim, 1, 1}, ed);
        check_outs("batchnorm training, y only", ERT_OP_BATCHNORM, &A, 5, in, 1, ref, (int[]){in[0].ndim}, ed);
        for (int i = 0; i < 5; i++) free_t(&in[i]);
    }
    for (int axis = -3; axis < 3; axis++) { /* LayerNorm (3,4,5), every axis, with Mean and InvStdDev */
        int a = axis < 0 ? axis + 3 : axis;
        const int64_t d[3] = {3, 4, 5};
        int64_t inner = 1, outer = 1, sd[3];
        for (int i = 0; i < 3; i++) {
            if (i < a) outer *= d[i];
            else inner *= d[i];
            sd[i] = i < a ? d[i] : 1;
        }
        tens in[3] = {MK(3, 4, 5), mk(3 - a, d + a), mk(3 - a, d + a)};
        const double eps = 1e-3;
        double y[60], mean[60], inv[60];
        for (int64_t r = 0; r < outer; r++) {
            double m = 0, v = 0;
            for (int64_t i = 0; i < inner; i++) m += in[0].data[r * inner + i];
            m /= (double)inner;
            for (int64_t i = 0; i < inner; i++) v += pow(in[0].data[r * inner + i] - m, 2);
            v /= (double)inner;
            mean[r] = m;
            inv[r] = 1 / sqrt(v + eps);
            for (int64_t i = 0; i < inner; i++)
                y[r * inner + i] = (in[0].data[r * inner + i] - m) * inv[r] * in[1].data[i] + in[2].data[i];
        }
        attrs A = {.n = 0};
        at_i(&A, "axis", axis);
        at_f(&A, "epsilon", (float)eps);
        const double *ref[3] = {y, mean, inv};
        const int64_t *ed[3] = {d, sd, sd};
        char w[64];
        snprintf(w, sizeof w, "layernorm stats axis %d", axis);
        check_outs(w, ERT_OP_LAYERNORM, &A, 3, in, 3, ref, (int[]){3, 3, 3}, ed);
        snprintf(w, sizeof w, "layernorm mean only axis %d", axis);
        check_outs(w, ERT_OP_LAYERNORM, &A, 3, in, 2, ref, (int[]){3, 3}, ed);
        for (int i = 0; i < 3; i++) free_t(&in[i]);
    }
}

/* ------------------------------------------------------------ error paths */

static void expect_err(const char *what, ert_op op, const attrs *A, int n_in, tens *in, int n_out, ert_status want,
                       const char *msg_part) {
    tens out[2] = {{0}};
    ert_status st = run_op(op, A, n_in, in, n_out, out, 0);
    CHECK(st == want, "%s: got %s want %s (%s)", what, ert_status_str(st), ert_status_str(want), ert_last_error(ctx));
    if (st == ERT_OK)
        for (int i = 0; i < n_out; i++) free_t(&out[i]);
    if (msg_part) CHECK(strstr(ert_last_error(ctx), msg_part) != NULL, "%s: message '%s'", what, ert_last_error(ctx));
}

static void test_errors(void) {
    tens cin[2] = {MK(1, 3, 5, 5), MK(4, 4, 3, 3)};
    expect_err("conv channel mismatch", ERT_OP_CONV, NULL, 2, cin, 1, ERT_E_SHAPE, "input has 3 channels, weight expects 4 (group 1)");
    free_t(&cin[1]);
    cin[1] = MK(4, 3, 3, 3);
    attrs A = {.n = 0};
    at_is(&A, "strides", IS(0, 1));
    expect_err("conv stride 0", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_FORMAT, "strides");
    A.n = 0;
    at_is(&A, "dilations", IS(1, -2));
    expect_err("conv negative dilation", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_FORMAT, "dilations");
    A.n = 0;
    at_is(&A, "dilations", IS(3, 1));
    expect_err("conv kernel larger than input", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_SHAPE, "larger than the padded input");
    A.n = 0;
    at_is(&A, "kernel_shape", IS(3, 2));
    expect_err("conv kernel_shape mismatch", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_SHAPE, "kernel_shape");
    A.n = 0;
    at_is(&A, "pads", IS(INT64_MAX, 0, INT64_MAX, 0));
    expect_err("conv pad overflow", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_FORMAT, "overflow");
    A.n = 0;
    at_is(&A, "dilations", IS(INT64_MAX, 1));
    expect_err("conv dilation overflow", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_FORMAT, "overflow");
    A.n = 0;
    at_is(&A, "pads", IS(1, 1, 1));
    expect_err("conv pads count", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_FORMAT, "pads");
    A.n = 0;
    at_i(&A, "group", 0);
    expect_err("conv group 0", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_FORMAT, "group");
    A.n = 0;
    at_i(&A, "group", 3);
    expect_err("conv group mismatch", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_SHAPE, "(group 3)");
    A.n = 0;
    at_s(&A, "auto_pad", "SAME_SIDEWAYS");
    expect_err("conv bad auto_pad", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_FORMAT, "auto_pad");
    A.n = 0;
    at_i(&A, "ert_act", 99);
    expect_err("conv bad act", ERT_OP_CONV, &A, 2, cin, 1, ERT_E_FORMAT, "ert_act");
    cin[0].dtype = ERT_DTYPE_F16;
    expect_err("conv f16", ERT_OP_CONV, NULL, 2, cin, 1, ERT_E_UNSUPPORTED, "f16");
    cin[0].dtype = 0;
    tens bad_bias[3] = {cin[0], cin[1], MK(5)};
    expect_err("conv bias shape", ERT_OP_CONV, NULL, 3, bad_bias, 1, ERT_E_SHAPE, "bias");
    free_t(&bad_bias[2]);
    A.n = 0;
    expect_err("maxpool no kernel_shape", ERT_OP_MAXPOOL, &A, 1, cin, 1, ERT_E_FORMAT, "kernel_shape");
    at_is(&A, "kernel_shape", IS(2, 2));
    expect_err("maxpool indices", ERT_OP_MAXPOOL, &A, 1, cin, 2, ERT_E_UNSUPPORTED, "Indices");
    at_is(&A, "strides", IS(1, -1));
    expect_err("avgpool bad stride", ERT_OP_AVGPOOL, &A, 1, cin, 1, ERT_E_FORMAT, "strides");
    free_t(&cin[0]);
    free_t(&cin[1]);

    tens mm[2] = {MK(3, 4), MK(5, 6)};
    expect_err("matmul K mismatch", ERT_OP_MATMUL, NULL, 2, mm, 1, ERT_E_SHAPE, "K=4");
    free_t(&mm[0]);
    free_t(&mm[1]);
    tens mb[2] = {MK(2, 3, 4), MK(3, 4, 5)};
    expect_err("matmul batch mismatch", ERT_OP_MATMUL, NULL, 2, mb, 1, ERT_E_SHAPE, "broadcast");
    free_t(&mb[0]);
    free_t(&mb[1]);
    tens gm[3] = {MK(3, 4), MK(4, 5), MK(2, 5)};
    expect_err("gemm C shape", ERT_OP_GEMM, NULL, 3, gm, 1, ERT_E_SHAPE, "C cannot");
    A.n = 0;
    at_i(&A, "transB", 1);
    expect_err("gemm transB mismatch", ERT_OP_GEMM, &A, 2, gm, 1, ERT_E_SHAPE, "inner dims");
    for (int i = 0; i < 3; i++) free_t(&gm[i]);

    tens bn[5] = {MK(1, 3, 2, 2), MK(3), MK(3), MK(3), MK(3)};
    expect_err("bn running outputs in inference", ERT_OP_BATCHNORM, NULL, 5, bn, 3, ERT_E_UNSUPPORTED, "training_mode");
    free_t(&bn[4]);
    bn[4] = MK(4);
    expect_err("bn var shape", ERT_OP_BATCHNORM, NULL, 5, bn, 1, ERT_E_SHAPE, "var");
    for (int i = 0; i < 5; i++) free_t(&bn[i]);

    tens ln[2] = {MK(2, 3), MK(3)};
    free_t(&ln[1]);
    ln[1] = MK(4);
    expect_err("layernorm scale shape", ERT_OP_LAYERNORM, NULL, 2, ln, 1, ERT_E_SHAPE, "scale");
    free_t(&ln[0]);
    free_t(&ln[1]);
    ln[0] = MK(2, 4, 3);
    ln[1] = MK(1, 3);
    A.n = 0;
    at_i(&A, "axis", 1);
    expect_err("layernorm partial broadcast", ERT_OP_LAYERNORM, &A, 2, ln, 1, ERT_E_UNSUPPORTED, "broadcasts");
    A.n = 0;
    at_i(&A, "axis", -4);
    expect_err("softmax axis", ERT_OP_SOFTMAX, &A, 1, ln, 1, ERT_E_SHAPE, "axis");
    free_t(&ln[0]);
    free_t(&ln[1]);

    tens ct[2] = {MK(1, 3, 4, 4), MK(2, 2, 3, 3)};
    expect_err("convT channel mismatch", ERT_OP_CONV_TRANSPOSE, NULL, 2, ct, 1, ERT_E_SHAPE, "input has 3 channels");
    free_t(&ct[1]);
    ct[1] = MK(3, 2, 3, 3);
    A.n = 0;
    at_is(&A, "strides", IS(2, 2));
    at_is(&A, "output_padding", IS(2, 0));
    expect_err("convT output_padding", ERT_OP_CONV_TRANSPOSE, &A, 2, ct, 1, ERT_E_FORMAT, "output_padding");
    A.n = 0;
    at_is(&A, "pads", IS(INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX));
    expect_err("convT huge pads", ERT_OP_CONV_TRANSPOSE, &A, 2, ct, 1, ERT_E_SHAPE, "leave no output");
    A.n = 0;
    at_is(&A, "output_shape", IS(INT64_MAX, 4));
    expect_err("convT unreachable output_shape", ERT_OP_CONV_TRANSPOSE, &A, 2, ct, 1, ERT_E_SHAPE, "output_shape");
    free_t(&ct[0]);
    free_t(&ct[1]);
}

/* ------------------------------------------------------------ thread pool */

typedef struct tp_check {
    atomic_int *hits;
    atomic_llong sum;
    struct ert_threadpool *tp;
    bool nested;
} tp_check;

static void tp_body(void *arg, int64_t b, int64_t e) {
    tp_check *c = arg;
    long long s = 0;
    for (int64_t i = b; i < e; i++) {
        atomic_fetch_add_explicit(&c->hits[i], 1, memory_order_relaxed);
        s += i;
    }
    atomic_fetch_add(&c->sum, s);
}

static void tp_nested(void *arg, int64_t b, int64_t e) {
    tp_check *c = arg;
    for (int64_t i = b; i < e; i++) {
        tp_check inner = {c->hits + i * 10, 0, c->tp, false};
        ert_parallel_for(c->tp, 10, 1, tp_body, &inner); /* must run inline, not deadlock */
        atomic_fetch_add(&c->sum, (long long)atomic_load(&inner.sum));
    }
}

static void test_threadpool(void) {
    atomic_int hits[1000];
    for (int pi = 0; pi < N_POOLS; pi++) {
        CHECK(ert_threadpool_size(pools[pi]) == pool_threads[pi], "pool size %d", ert_threadpool_size(pools[pi]));
        int bad = 0;
        for (int rep = 0; rep < 600; rep++) {
            int64_t n = rep % 7 == 0 ? rep % 5 : ert_test_int(&rng, 0, 1000), grain = ert_test_int(&rng, 0, 40);
            for (int64_t i = 0; i < n; i++) atomic_init(&hits[i], 0);
            tp_check c = {hits, 0, pools[pi], false};
            ert_parallel_for(pools[pi], n, grain, tp_body, &c);
            for (int64_t i = 0; i < n; i++) bad += atomic_load(&hits[i]) != 1;
            bad += atomic_load(&c.sum) != n * (n - 1) / 2;
        }
        /* back-to-back tiny jobs: workers often wake after the job is done */
        for (int rep = 0; rep < 3000; rep++) {
            for (int64_t i = 0; i < 8; i++) atomic_init(&hits[i], 0);
            tp_check c = {hits, 0, pools[pi], false};
            ert_parallel_for(pools[pi], 8, 1, tp_body, &c);
            for (int64_t i = 0; i < 8; i++) bad += atomic_load(&hits[i]) != 1;
        }
        CHECK(bad == 0, "threadpool %d threads: %d bad chunks", pool_threads[pi], bad);
        for (int i = 0; i < 1000; i++) atomic_init(&hits[i], 0);
        tp_check c = {hits, 0, pools[pi], true};
        ert_parallel_for(pools[pi], 50, 1, tp_nested, &c);
        bad = 0;
        for (int i = 0; i < 500; i++) bad += atomic_load(&hits[i]) != 1;
        CHECK(bad == 0 && atomic_load(&c.sum) == 50 * 45, "nested parallel_for: %d bad", bad);
    }
    ert_parallel_for(NULL, 0, 1, tp_body, NULL); /* n = 0 never calls fn */
    for (int i = 0; i < 20; i++) { /* create/free churn, including unused pools */
        struct ert_threadpool *tp = NULL;
        CHECK(ert_threadpool_create(i % 4, &tp) == ERT_OK && tp, "create %d", i % 4);
        if (i % 2) {
            tp_check c = {hits, 0, tp, false};
            for (int64_t k = 0; k < 100; k++) atomic_init(&hits[k], 0);
            ert_parallel_for(tp, 100, 1, tp_body, &c);
            CHECK(atomic_load(&c.sum) == 4950, "sum");
        }
        ert_threadpool_free(tp);
    }
}

/* InstanceNormalization on random (N, C, spatial...) shapes of rank 3 to 5
 * (planes of one element included: variance 0, y = B), against a float64
 * reference that normalises each (n, c) plane; then its bad inputs. */
static void test_instancenorm(void) {
    for (int rep = 0; rep < 12; rep++) {
        int nd = 3 + rep % 3;
        int64_t d[5];
        d[0] = ert_test_int(&rng, 1, 3);
        d[1] = ert_test_int(&rng, 1, 4);
        for (int i = 2; i < nd; i++) d[i] = rep == 0 ? 1 : ert_test_int(&rng, 1, 6);
        tens in[3] = {mk(nd, d), mk(1, &d[1]), mk(1, &d[1])};
        /* mean far from 0; every 4th rep planes at 100 with a spread of 0.02, so a
         * kernel that folds the mean into a float bias (x * k - mean * k, both
         * ~1e4 when k ~ 1e2) loses 1e-3 to the cancellation */
        const float off = rep % 4 == 3 ? 100.0f : 1.5f, spread = rep % 4 == 3 ? 0.01f : 3.0f;
        for (int64_t i = 0; i < nel(&in[0]); i++) in[0].data[i] = in[0].data[i] * spread + off;
        int64_t sz = nel(&in[0]) / (d[0] * d[1]);
        double *ref = malloc((size_t)nel(&in[0]) * sizeof *ref);
        float eps = rep % 2 ? 1e-5f : 0.3f;
        for (int64_t pl = 0; pl < d[0] * d[1]; pl++) {
            const float *xp = in[0].data + pl * sz;
            double m = 0, v = 0;
            for (int64_t i = 0; i < sz; i++) m += xp[i];
            m /= (double)sz;
            for (int64_t i = 0; i < sz; i++) v += (xp[i] - m) * (xp[i] - m);
            v /= (double)sz;
            int64_t c = pl % d[1];
            for (int64_t i = 0; i < sz; i++)
                ref[pl * sz + i] = (xp[i] - m) / sqrt(v + (double)eps) * in[1].data[c] + in[2].data[c];
        }
        attrs A = {.n = 0};
        if (rep % 2 == 0) at_f(&A, "epsilon", eps);
        char w[64];
        snprintf(w, sizeof w, "instancenorm rank %d rep %d off %g", nd, rep, (double)off);
        check_op(w, ERT_OP_INSTANCENORM, &A, 3, in, ref, nd, d, N_POOLS);
        free(ref);
        for (int i = 0; i < 3; i++) free_t(&in[i]);
    }
    tens bad[3] = {MK(2, 3), MK(3), MK(3)};
    expect_err("instancenorm rank 2", ERT_OP_INSTANCENORM, NULL, 3, bad, 1, ERT_E_SHAPE, "rank 2");
    free_t(&bad[0]);
    bad[0] = MK(2, 3, 4);
    free_t(&bad[1]);
    bad[1] = MK(4);
    expect_err("instancenorm scale shape", ERT_OP_INSTANCENORM, NULL, 3, bad, 1, ERT_E_SHAPE, "scale");
    free_t(&bad[1]);
    bad[1] = MK(3);
    free_t(&bad[2]);
    bad[2] = MK(1, 3);
    expect_err("instancenorm B rank", ERT_OP_INSTANCENORM, NULL, 3, bad, 1, ERT_E_SHAPE, "B");
    free_t(&bad[2]);
    bad[2] = MK(3);
    bad[0].dtype = ERT_DTYPE_I32;
    expect_err("instancenorm i32", ERT_OP_INSTANCENORM, NULL, 3, bad, 1, ERT_E_UNSUPPORTED, "i32");
    bad[0].dtype = 0;
    attrs A = {.n = 0};
    at_f(&A, "epsilon", -1.0f);
    expect_err("instancenorm negative epsilon", ERT_OP_INSTANCENORM, &A, 3, bad, 1, ERT_E_FORMAT, "epsilon");
    for (int i = 0; i < 3; i++) free_t(&bad[i]);
}

int main(void) {
    ert_test_rng_init(&rng, "ops_nn");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    for (int i = 1; i < N_POOLS; i++)
        if (ert_threadpool_create(pool_threads[i], &pools[i]) != ERT_OK) return 1;
    test_threadpool();
    /* every SGEMM micro-kernel this CPU has (panel widths differ: 6x16, 8x32) */
    kc = ert_kernel_choice_of(NULL);
    for (int cap = ERT_CPU_GEMM_FASTEST; cap >= ERT_CPU_GEMM_PORTABLE; cap--) {
        kc.gemm_cap = cap;
        if ((int)ert_cpu_sgemm_kernel(&kc) != cap) continue; /* not on this CPU: already covered by a lower cap */
        test_conv();
        test_convt();
        test_matmul_gemm();
    }
    kc.gemm_cap = ERT_KC_GEMM_ANY;
    test_fp16_convert();
    test_act_row();
#if defined(__x86_64__) && defined(__GNUC__)
    test_act_z();
#endif
    test_dw_fast();
    test_dw_cblock();
    test_pools();
    test_norms();
    test_norm_stats();
    test_errors();
    test_instancenorm();
    for (int i = 1; i < N_POOLS; i++) ert_threadpool_free(pools[i]);
    ert_context_free(ctx);
    return ert_test_finish("ops_nn");
}

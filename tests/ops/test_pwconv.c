/* The pointwise conv kernel (kernels/cpu/pwconv.c) against a float64
 * reference and against conv.c's SGEMM path (the portable micro-kernel,
 * which these convs took before), outputs poisoned, at 1, 2 and 3 threads,
 * for 1x1 stride-1 convs (x read in place) and, through each task's
 * im2col, other group-1 1-D/2-D convs whose windows do not overlap with
 * C*KH*KW up to 576 (strides 1..4, kernels up to the stride, padding on
 * each side 0..3, dilation 1..2):
 *   - overlapping windows (3x3 and 2x3, stride 1-2, padding 0-1) on up to 8x8 outputs, C*KH*KW up
 *     to 2700 (the deep-K blocks of the AVX-512 copy; its other copies leave them to the SGEMM);
 *   - odd shapes: input channels 1..300 (K steps past a multiple of 4, and
 *     past the SGEMM's 256-deep blocks), output channels 1..80 (whole
 *     24-channel blocks, last blocks of 1..3 vectors, channels past the
 *     last vector's end), pixels 1..300 (a last tile of 1..3 pixels, tasks
 *     of several pixel chunks), batch 1-3, 1-D, 2-D and 3-D;
 *   - the fused tails: bias, residual, every activation (the vectorised
 *     ones in the tile's registers, Tanh through the row pass), the
 *     per-output-channel scale (frozen BatchNorm) and the squeeze-
 *     excitation input scale (a scaled copy of each task's pixels);
 *   - weights packed at create with the original filter NaN while the conv
 *     runs (only the panels can give the answer), and unpacked (each task
 *     packs its blocks into the workspace): the two bit for bit equal;
 *   - a NaN in the residual comes out NaN through every activation;
 *   - a session of a 1x1 conv: ERT_SESSION_NO_PACK gives the same bits;
 *   - many channel blocks over few pixels (the 7x7 maps' convs: pixel chunks and block groups
 *     both split between threads), and every case again on another thread count: the same bits
 *     (on 2 and 3 threads the im2col rows are built once and shared by the tasks, on 1 each task
 *     builds its own).
 * Tolerance: |got - ref| <= 1e-5 |ref| + 1e-6 + u K^1.5 / 2 sum-scale, the
 * K-term sum bound of test_cpu_fast.c's dot_atol. */
#include "cpu_gemm.h"
#include "cpu_kernels.h"
#include "onnx_enc.h"
#include "op_harness.h"

#include <math.h>

static ert_test_rng rng;
static ert_context *ctx;
static struct ert_threadpool *pools[3]; /* NULL (1 thread), 2, 3 threads */

typedef struct pcase {
    int nsp;
    int64_t N, K, M, sp[3]; /* K: input channels; sp: input spatial dims (nsp of them) */
    int64_t k[3], s[3], d[3], pb[3], pe[3]; /* kernel, stride, dilation, padding begin/end per axis */
    bool bias, res, scale, in_scale;
    ert_act_params act;
} pcase;

static int64_t out_dim(const pcase *c, int i) {
    return (c->sp[i] + c->pb[i] + c->pe[i] - (c->k[i] - 1) * c->d[i] - 1) / c->s[i] + 1;
}

static int64_t pix(const pcase *c) { /* output pixels */
    int64_t P = 1;
    for (int i = 0; i < c->nsp; i++) P *= out_dim(c, i);
    return P;
}

/* y = act(sc[m] * sum w[m][k][taps] (x[n][k][tap] * isc[n][k]) + b[m] + res),
 * the SE product rounded to f32 as the Mul it fuses; 1-D and 2-D (3-D: 1x1) */
static void ref_pw(const pcase *c, const float *x, const float *w, const float *b, const float *res, const float *sc,
                   const float *isc, double *ref) {
    const int two = c->nsp >= 2;
    const int64_t H = two ? c->sp[0] : 1, W = c->nsp == 3 ? c->sp[1] * c->sp[2] : c->sp[c->nsp - 1];
    const int64_t OH = two ? out_dim(c, 0) : 1, OW = c->nsp == 3 ? W : out_dim(c, c->nsp - 1);
    const int64_t KH = two ? c->k[0] : 1, KW = c->k[c->nsp - 1], sh = two ? c->s[0] : 1, sw = c->s[c->nsp - 1];
    const int64_t dh = two ? c->d[0] : 1, dw = c->d[c->nsp - 1], ph = two ? c->pb[0] : 0, pw = c->pb[c->nsp - 1];
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double v = 0;
                    for (int64_t k = 0; k < c->K; k++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                const int64_t ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                float xv = x[((n * c->K + k) * H + ih) * W + iw];
                                if (isc) xv = xv * isc[n * c->K + k];
                                v += (double)w[((m * c->K + k) * KH + kh) * KW + kw] * xv;
                            }
                    if (sc) v *= sc[m];
                    const int64_t i = ((n * c->M + m) * OH + oh) * OW + ow;
                    if (b) v += b[m];
                    if (res) v += res[i];
                    ref[i] = oh_act_ref(v, &c->act);
                }
}

/* mode 0: panels packed at create, the filter then NaN; 1: no packed
 * weights; both under the micro-kernel cap `cap`; 2: the SGEMM's portable
 * kernel (its own packing). y is poisoned first. *ran: whether the
 * pointwise kernel ran; false if it declined a case it packed for. */
static bool run_pw(const pcase *c, int pool_i, int cap, int mode, const tt *x, const tt *w, const tt *b, const tt *r,
                   const tt *s, const tt *is, tt *y, bool *ran_pw) {
    ert_test_poison(y->data, tt_n(y));
    tt wk = tt_new(ERT_DTYPE_F32, w->nd, w->dims);
    memcpy(wk.data, w->data, (size_t)tt_n(w) * sizeof(float));
    ert_op_params prm;
    memset(&prm, 0, sizeof prm);
    ert_conv_params *p = &prm.conv;
    p->nsp = c->nsp;
    for (int i = 0; i < c->nsp; i++) {
        p->kernel[i] = c->k[i], p->stride[i] = c->s[i], p->dilation[i] = c->d[i];
        p->pad_begin[i] = c->pb[i], p->pad_end[i] = c->pe[i];
    }
    p->group = 1;
    p->has_bias = c->bias, p->has_residual = c->res, p->has_scale = c->scale, p->has_in_scale = c->in_scale;
    p->act = c->act;
    ert_tview v[7];
    memset(v, 0, sizeof v);
    const tt *ins[6] = {x, &wk, c->bias ? b : NULL, c->res ? r : NULL, c->scale ? s : NULL, c->in_scale ? is : NULL};
    for (int i = 0; i < 6; i++) {
        if (!ins[i]) continue;
        v[i].data = ins[i]->data, v[i].dtype = ERT_DTYPE_F32, v[i].ndim = ins[i]->nd;
        memcpy(v[i].dims, ins[i]->dims, sizeof v[i].dims);
        v[i].n_elems = tt_n(ins[i]);
    }
    v[6].data = y->data, v[6].dtype = ERT_DTYPE_F32, v[6].ndim = y->nd, v[6].n_elems = tt_n(y);
    memcpy(v[6].dims, y->dims, sizeof y->dims);
    ert_kernel_choice kc = ert_kernel_choice_of(NULL);
    kc.gemm_cap = mode == 2 ? ERT_CPU_GEMM_PORTABLE : cap;
    kc.wino = -1; /* Winograd would take some 3x3 stride-1 cases when packed (its own test covers it) */
    ert_kargs a = {.op = ERT_OP_CONV, .params = &prm, .n_in = 6, .n_out = 1, .in = v, .out = v + 6,
                   .pool = pools[pool_i], .choice = &kc};
    /* a session's workspace for a conv, poisoned: prepare's (the SGEMM's, core/ops/conv.c) and the
     * backend's extra for this kernel (cpu_node_workspace: with several threads, room for the
     * im2col rows every task then shares) */
    int64_t ksz = 1;
    for (int i = 0; i < c->nsp; i++) ksz *= c->k[i];
    a.workspace_bytes = ert_cpu_sgemm_workspace(c->M, pix(c), c->K * ksz, ert_threadpool_size(a.pool)) +
                        (mode == 2 ? 0 : ert_cpu_pw_workspace(&a));
    a.workspace = aligned_alloc(64, ert_align_up(a.workspace_bytes, 64));
    memset(a.workspace, 0xFF, a.workspace_bytes);
    if (mode == 0) {
        a.packed_bytes = ert_cpu_conv_packed_bytes(&a);
        a.packed = aligned_alloc(64, ert_align_up(a.packed_bytes ? a.packed_bytes : 1, 64));
        memset(a.packed, 0xFF, a.packed_bytes);
        CHECK_OK(ert_cpu_conv_pack(&a), ctx);
        ert_test_poison(wk.data, tt_n(&wk));
    }
    bool ran = true;
    *ran_pw = false;
    if (mode < 2) { /* the pointwise kernel directly: with its panels it must take what it packed for (without,
                     * it declines where prepare's workspace cannot hold a block's panel and a chunk's im2col) */
        bool done = false;
        CHECK_OK(ert_cpu_pw_conv(&a, &done), ctx);
        *ran_pw = done;
        ran = done || mode == 1 || ert_cpu_pw_packed_bytes(&a) == 0;
        if (!done) CHECK_OK(ert_cpu_conv(&a), ctx);
    } else {
        CHECK_OK(ert_cpu_conv(&a), ctx);
    }
    free(a.workspace);
    free(a.packed);
    tt_free(&wk);
    return ran;
}

static int n_ran[ERT_CPU_GEMM_FASTEST + 1]; /* cases the pointwise kernel took, per cap */

static void test_random(int pool_i, int cap, int it) {
    static const ert_act kinds[] = {ERT_ACT_NONE,         ERT_ACT_RELU,       ERT_ACT_CLIP,    ERT_ACT_LEAKY_RELU,
                                    ERT_ACT_HARD_SIGMOID, ERT_ACT_HARD_SWISH, ERT_ACT_SIGMOID, ERT_ACT_SILU,
                                    ERT_ACT_TANH,         ERT_ACT_GELU};
    /* it % 3 == 2: a conv through the per-task im2col (1-D or 2-D), else 1x1 stride 1 (1-D, 2-D, 3-D) */
    const bool gather = it % 3 == 2;
    pcase c = {.nsp = it % 7 == 5 ? 1 : it % 7 == 6 && !gather ? 3 : 2, .N = ert_test_int(&rng, 1, 3),
               .K = ert_test_int(&rng, 1, it % 5 == 0 ? 300 : 40),
               /* whole blocks of the AVX2 (24) and AVX-512 (16 a vector: M % 16 == 0 takes it, any M at 16
                * pixels or fewer) copies */
               .M = it % 4 == 0 ? (it % 8 ? 24 * ert_test_int(&rng, 1, 3) : 16 * ert_test_int(&rng, 1, 5))
                                : ert_test_int(&rng, 1, 80),
               .bias = ert_test_int(&rng, 0, 1), .res = ert_test_int(&rng, 0, 1), .scale = it % 6 == 4,
               .in_scale = it % 3 == 1 || it % 9 == 8, .act = {.kind = kinds[it % 10], .alpha = 0.2f, .beta = 0.5f}};
    if (c.act.kind == ERT_ACT_CLIP) c.act.alpha = -0.5f, c.act.beta = 0.7f;
    int64_t ksz = 1;
    for (int i = 0; i < c.nsp; i++) {
        /* gather: windows that do not overlap ((k - 1) d < s), kernels 1..4, strides 1..4 */
        c.s[i] = gather ? ert_test_int(&rng, 1, 4) : 1;
        c.d[i] = gather && it % 4 == 3 && c.s[i] > 2 ? 2 : 1;
        c.k[i] = gather ? ert_test_int(&rng, 1, (int)((c.s[i] - 1) / c.d[i] + 1)) : 1;
        c.pb[i] = gather ? ert_test_int(&rng, 0, c.k[i] > 3 ? 3 : (int)c.k[i]) : 0;
        c.pe[i] = gather ? ert_test_int(&rng, 0, c.k[i] > 3 ? 3 : (int)c.k[i]) : 0;
        const int64_t span = (c.k[i] - 1) * c.d[i] + 1 - c.pb[i] - c.pe[i]; /* the smallest input with an output */
        c.sp[i] = ert_test_int(&rng, span > 1 ? (int)span : 1, c.nsp == 1 ? 300 : c.nsp == 2 ? 17 : 6);
        if (it % 11 == 10 && !gather) c.sp[i] = ert_test_int(&rng, 1, 3); /* a squeeze-excitation's few pixels */
        ksz *= c.k[i];
    }
    if (gather) c.K = ert_test_int(&rng, 1, (int)(576 / ksz < 40 ? 576 / ksz : 40));
    if (it % 13 == 12 && !gather && c.nsp == 2) {
        /* a classifier's last stages: many channel blocks (up to 6 of 64, 16 of 24) over a 3x3..9x9
         * map, which the threads split by pixel chunks and block groups together (pw_split) */
        c.M = 16 * ert_test_int(&rng, 9, 24), c.K = ert_test_int(&rng, 1, 300);
        c.sp[0] = ert_test_int(&rng, 3, 9), c.sp[1] = ert_test_int(&rng, 3, 9);
    }
    if (gather && it % 6 == 5 && c.nsp == 2) {
        /* overlapping windows on few pixels (pwconv.c's PW_OVERLAP_PMAX, the AVX-512 copy): 3x3 or 2x3,
         * stride 1-2, padding 0-1, outputs up to 8x8, K = C * taps past PW_KB (128) and past 576, whole
         * 16-channel vectors */
        ksz = 1;
        for (int i = 0; i < 2; i++) {
            c.k[i] = i == 0 && it % 12 == 11 ? 2 : 3, c.s[i] = ert_test_int(&rng, 1, 2), c.d[i] = 1;
            c.pb[i] = ert_test_int(&rng, 0, 1), c.pe[i] = ert_test_int(&rng, 0, 1);
            const int64_t lo = c.k[i] - c.pb[i] - c.pe[i];
            c.sp[i] = ert_test_int(&rng, lo > 1 ? (int)lo : 1, c.s[i] == 1 ? 8 : 15);
            ksz *= c.k[i];
        }
        c.K = ert_test_int(&rng, 1, it % 4 == 1 ? 300 : 40);
        c.M = 16 * ert_test_int(&rng, 1, 5);
    }
    const int64_t P = pix(&c);
    int64_t xd[5] = {c.N, c.K}, wd[5] = {c.M, c.K}, yd[5] = {c.N, c.M}, md[1] = {c.M}, sd[2] = {c.N, c.K};
    for (int i = 0; i < c.nsp; i++) xd[2 + i] = c.sp[i], yd[2 + i] = out_dim(&c, i), wd[2 + i] = c.k[i];
    const int nd = 2 + c.nsp;
    tt x = tt_rand(&rng, nd, xd, -1, 1), w = tt_rand(&rng, nd, wd, -1, 1), b = tt_rand(&rng, 1, md, -1, 1);
    tt r = tt_rand(&rng, nd, yd, -2, 2), s = tt_rand(&rng, 1, md, 0.5f, 1.5f), is = tt_rand(&rng, 2, sd, 0, 1);
    const int64_t ny = c.N * c.M * P;
    int64_t nan_at = c.res && it % 2 ? ert_test_int(&rng, 0, (int)ny - 1) : -1;
    if (nan_at >= 0) ((float *)r.data)[nan_at] = NAN;
    double *ref = malloc((size_t)ny * sizeof *ref);
    ref_pw(&c, x.data, w.data, c.bias ? b.data : NULL, c.res ? r.data : NULL, c.scale ? s.data : NULL,
           c.in_scale ? is.data : NULL, ref);
    tt y[3];
    char what[256];
    snprintf(what, sizeof what, "pw N%lld C%lld M%lld P%lld nsp%d k%lld s%lld d%lld p%lld,%lld%s%s%s%s act%d pool%d cap%d",
             (long long)c.N, (long long)c.K, (long long)c.M, (long long)P, c.nsp, (long long)c.k[0], (long long)c.s[0],
             (long long)c.d[0], (long long)c.pb[0], (long long)c.pe[0], c.bias ? " bias" : "", c.res ? " res" : "",
             c.scale ? " scale" : "", c.in_scale ? " in_scale" : "", (int)c.act.kind, pool_i, cap);
    static const char *mode_name[3] = {"packed", "unpacked", "sgemm"};
    bool ran[3];
    for (int mode = 0; mode < 3; mode++) {
        y[mode] = tt_new(ERT_DTYPE_F32, nd, yd);
        CHECK(run_pw(&c, pool_i, cap, mode, &x, &w, &b, &r, &s, &is, &y[mode], &ran[mode]), "%s %s: the pointwise kernel declined",
              what, mode_name[mode]);
        float *yp = y[mode].data;
        if (nan_at >= 0) {
            CHECK(isnan(yp[nan_at]), "%s %s: NaN residual came out %g", what, mode_name[mode], yp[nan_at]);
            yp[nan_at] = 0;
        }
    }
    if (nan_at >= 0) ref[nan_at] = 0;
    {   /* the same bits on another thread count: a task split never changes a sum's order */
        const int q = (pool_i + 1) % 3;
        tt yq = tt_new(ERT_DTYPE_F32, nd, yd);
        bool ranq;
        CHECK(run_pw(&c, q, cap, 0, &x, &w, &b, &r, &s, &is, &yq, &ranq), "%s pool%d: declined", what, q);
        float *yp = yq.data;
        if (nan_at >= 0) yp[nan_at] = 0;
        if (ranq == ran[0])
            CHECK(memcmp(yq.data, y[0].data, (size_t)ny * sizeof(float)) == 0, "%s: pool%d gives other bits", what, q);
        tt_free(&yq);
    }
    const double sum_scale = (c.scale ? 1.5 : 1.0);
    for (int mode = 0; mode < 3; mode++) {
        char w2[300];
        snprintf(w2, sizeof w2, "%s %s", what, mode_name[mode]);
        const double kt = (double)(c.K * ksz); /* terms in each sum */
        CHECK(ert_test_close(w2, y[mode].data, ref, ny, 1e-6 + 0.5 * sum_scale * ldexp(kt * sqrt(kt), -24),
                             1e-5),
              "%s", w2);
    }
    if (ran[0] == ran[1])
        CHECK(memcmp(y[0].data, y[1].data, (size_t)ny * sizeof(float)) == 0, "%s: packed and unpacked differ", what);
    n_ran[cap] += ran[0];
    for (int mode = 0; mode < 3; mode++) tt_free(&y[mode]);
    free(ref);
    tt *all[] = {&x, &w, &b, &r, &s, &is};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tt_free(all[i]);
}

/* y = Relu(Conv1x1(x) + b) through a session: packed panels in the arena,
 * and ERT_SESSION_NO_PACK (tasks pack their blocks) give the same bits. */
static void test_session(int n_threads) {
    int64_t N = 2, C = ert_test_int(&rng, 1, 60), M = ert_test_int(&rng, 1, 70), H = ert_test_int(&rng, 1, 15),
            W = ert_test_int(&rng, 1, 15);
    int64_t xd[4] = {N, C, H, W}, wd[4] = {M, C, 1, 1}, bd[1] = {M}, yd[4] = {N, M, H, W};
    tt w = tt_rand(&rng, 4, wd, -1, 1), b = tt_rand(&rng, 1, bd, -1, 1), x = tt_rand(&rng, 4, xd, -1, 1);
    oxg g = {0};
    ox_g_input(&g, ox_value_info("x", 1, 4, xd));
    ox_g_output(&g, ox_value_info("y", 1, 4, yd));
    ox_g_init(&g, ox_tensor("w", 1, 4, wd, w.data, (size_t)tt_n(&w) * sizeof(float)));
    ox_g_init(&g, ox_tensor("b", 1, 1, bd, b.data, (size_t)M * sizeof(float)));
    const char *ci[] = {"x", "w", "b", NULL}, *co[] = {"c", NULL}, *ri[] = {"c", NULL}, *ro[] = {"y", NULL};
    ox_g_node(&g, ox_node("Conv", "conv", NULL, ci, co, NULL, 0));
    ox_g_node(&g, ox_node("Relu", "relu", NULL, ri, ro, NULL, 0));
    pbuf m = ox_model(&g, 14);
    ert_model *model = NULL;
    CHECK_OK(ert_model_load_memory(ctx, m.p, m.n, 0, &model), ctx);
    pb_free(&m);
    pcase c = {.nsp = 2, .N = N, .K = C, .M = M, .sp = {H, W}, .k = {1, 1}, .s = {1, 1}, .d = {1, 1}, .bias = true,
               .act = {.kind = ERT_ACT_RELU}};
    double *ref = malloc((size_t)tt_n(&x) / C * M * sizeof *ref);
    ref_pw(&c, x.data, w.data, b.data, NULL, NULL, NULL, ref);
    tt y[2];
    for (int np = 0; np < 2 && model; np++) {
        y[np] = tt_new(ERT_DTYPE_F32, 4, yd);
        ert_session_options o = {.device = ERT_DEVICE_CPU, .n_threads = n_threads,
                                 .flags = np ? ERT_SESSION_NO_PACK : 0};
        ert_session *ses = NULL;
        CHECK_OK(ert_session_create(model, &o, &ses), ctx);
        if (!ses) continue;
        ert_test_poison(y[np].data, tt_n(&y[np]));
        CHECK_OK(ert_session_set_input(ses, 0, x.data, (size_t)tt_n(&x) * sizeof(float)), ctx);
        CHECK_OK(ert_session_run(ses), ctx);
        CHECK_OK(ert_session_get_output(ses, 0, y[np].data, (size_t)tt_n(&y[np]) * sizeof(float)), ctx);
        char what[128];
        snprintf(what, sizeof what, "session 1x1 conv C%lld M%lld %lldx%lld %s, %d threads", (long long)C,
                 (long long)M, (long long)H, (long long)W, np ? "NO_PACK" : "packed", n_threads);
        CHECK(ert_test_close(what, y[np].data, ref, tt_n(&y[np]), 1e-5, 1e-5), "%s", what);
        ert_session_free(ses);
    }
    if (model)
        CHECK(memcmp(y[0].data, y[1].data, (size_t)tt_n(&y[0]) * sizeof(float)) == 0,
              "session 1x1 conv, %d threads: NO_PACK differs", n_threads);
    for (int np = 0; np < 2 && model; np++) tt_free(&y[np]);
    ert_model_free(model);
    free(ref);
    tt_free(&w), tt_free(&b), tt_free(&x);
}

int main(void) {
    ert_test_rng_init(&rng, "pwconv");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    if (ert_threadpool_create(2, &pools[1]) != ERT_OK || ert_threadpool_create(3, &pools[2]) != ERT_OK) return 1;
    int n_pw = 0; /* caps under which the pointwise kernel runs on this CPU */
    for (int cap = ERT_CPU_GEMM_FASTEST; cap >= ERT_CPU_GEMM_PORTABLE; cap--) {
        ert_kernel_choice kc = ert_kernel_choice_of(NULL);
        kc.gemm_cap = cap;
        if ((int)ert_cpu_sgemm_kernel(&kc) != cap) continue; /* not on this CPU */
        n_pw += cap == ERT_CPU_GEMM_AVX2 || cap == ERT_CPU_GEMM_AVX512 || cap == ERT_CPU_GEMM_NEON;
        for (int p = 0; p < 3; p++)
            for (int it = 0; it < 60; it++) test_random(p, cap, it);
        if (cap == ERT_CPU_GEMM_AVX2 || cap == ERT_CPU_GEMM_AVX512 || cap == ERT_CPU_GEMM_NEON)
            CHECK(n_ran[cap] > 0, "cap %d: the pointwise kernel took none of the random cases", cap);
        ert_context_set_kernel_choice(ctx, &kc);
        for (int t = 1; t <= 3; t++) test_session(t);
    }
    ert_context_set_kernel_choice(ctx, NULL);
#if defined(__x86_64__) || defined(__aarch64__)
    if (!n_pw) printf("pwconv: this CPU has no AVX2/FMA or NEON: only the SGEMM path was checked\n");
#endif
    ert_threadpool_free(pools[1]);
    ert_threadpool_free(pools[2]);
    ert_context_free(ctx);
    return ert_test_finish("pwconv");
}

/* The pointwise conv kernel (kernels/cpu/pwconv.c) against a float64
 * reference and against conv.c's SGEMM path (the portable micro-kernel,
 * which pointwise convs took before), outputs poisoned, at 1, 2 and 3
 * threads:
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
 *   - a session of a 1x1 conv: ERT_SESSION_NO_PACK gives the same bits.
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
    int64_t N, K, M, sp[3]; /* spatial dims (nsp of them) */
    bool bias, res, scale, in_scale;
    ert_act_params act;
} pcase;

static int64_t pix(const pcase *c) {
    int64_t P = 1;
    for (int i = 0; i < c->nsp; i++) P *= c->sp[i];
    return P;
}

/* y = act(sc[m] * sum_k w[m][k] (x[n][k][p] * isc[n][k]) + b[m] + res), the
 * SE product rounded to f32 as the Mul it fuses */
static void ref_pw(const pcase *c, const float *x, const float *w, const float *b, const float *res, const float *sc,
                   const float *isc, double *ref) {
    const int64_t P = pix(c);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t p = 0; p < P; p++) {
                double v = 0;
                for (int64_t k = 0; k < c->K; k++) {
                    float xv = x[(n * c->K + k) * P + p];
                    if (isc) xv = xv * isc[n * c->K + k];
                    v += (double)w[m * c->K + k] * xv;
                }
                if (sc) v *= sc[m];
                const int64_t i = (n * c->M + m) * P + p;
                if (b) v += b[m];
                if (res) v += res[i];
                ref[i] = oh_act_ref(v, &c->act);
            }
}

/* mode 0: panels packed at create, the filter then NaN; 1: no packed
 * weights; both under the micro-kernel cap `cap`; 2: the SGEMM's portable
 * kernel (its own packing). y is poisoned first; false if the pointwise
 * kernel did not run where the cap gives it its ISA. */
static bool run_pw(const pcase *c, int pool_i, int cap, int mode, const tt *x, const tt *w, const tt *b, const tt *r,
                   const tt *s, const tt *is, tt *y) {
    ert_test_poison(y->data, tt_n(y));
    tt wk = tt_new(ERT_DTYPE_F32, w->nd, w->dims);
    memcpy(wk.data, w->data, (size_t)tt_n(w) * sizeof(float));
    ert_op_params prm;
    memset(&prm, 0, sizeof prm);
    ert_conv_params *p = &prm.conv;
    p->nsp = c->nsp;
    for (int i = 0; i < c->nsp; i++) p->kernel[i] = p->stride[i] = p->dilation[i] = 1;
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
    ert_kargs a = {.op = ERT_OP_CONV, .params = &prm, .n_in = 6, .n_out = 1, .in = v, .out = v + 6,
                   .pool = pools[pool_i], .choice = &kc};
    /* prepare's workspace for a conv (the SGEMM's, core/ops/conv.c), poisoned */
    a.workspace_bytes = ert_cpu_sgemm_workspace(c->M, pix(c), c->K, ert_threadpool_size(a.pool));
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
    if (mode < 2) { /* the pointwise kernel directly: it must take the case where this CPU has its ISA */
        bool done = false;
        CHECK_OK(ert_cpu_pw_conv(&a, &done), ctx);
        ran = done || ert_cpu_pw_packed_bytes(&a) == 0;
        if (!done) CHECK_OK(ert_cpu_conv(&a), ctx);
    } else {
        CHECK_OK(ert_cpu_conv(&a), ctx);
    }
    free(a.workspace);
    free(a.packed);
    tt_free(&wk);
    return ran;
}

static void test_random(int pool_i, int cap, int it) {
    static const ert_act kinds[] = {ERT_ACT_NONE,         ERT_ACT_RELU,       ERT_ACT_CLIP,    ERT_ACT_LEAKY_RELU,
                                    ERT_ACT_HARD_SIGMOID, ERT_ACT_HARD_SWISH, ERT_ACT_SIGMOID, ERT_ACT_SILU,
                                    ERT_ACT_TANH,         ERT_ACT_GELU};
    pcase c = {.nsp = it % 7 == 5 ? 1 : it % 7 == 6 ? 3 : 2, .N = ert_test_int(&rng, 1, 3),
               .K = ert_test_int(&rng, 1, it % 5 == 0 ? 300 : 40),
               .M = it % 4 == 0 ? 24 * ert_test_int(&rng, 1, 3) : ert_test_int(&rng, 1, 80),
               .bias = ert_test_int(&rng, 0, 1), .res = ert_test_int(&rng, 0, 1), .scale = it % 6 == 4,
               .in_scale = it % 3 == 1, .act = {.kind = kinds[it % 10], .alpha = 0.2f, .beta = 0.5f}};
    if (c.act.kind == ERT_ACT_CLIP) c.act.alpha = -0.5f, c.act.beta = 0.7f;
    for (int i = 0; i < c.nsp; i++) c.sp[i] = ert_test_int(&rng, 1, c.nsp == 1 ? 300 : c.nsp == 2 ? 17 : 6);
    const int64_t P = pix(&c);
    int64_t xd[5] = {c.N, c.K}, wd[5] = {c.M, c.K}, yd[5] = {c.N, c.M}, md[1] = {c.M}, sd[2] = {c.N, c.K};
    for (int i = 0; i < c.nsp; i++) xd[2 + i] = yd[2 + i] = c.sp[i], wd[2 + i] = 1;
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
    snprintf(what, sizeof what, "pw N%lld K%lld M%lld P%lld nsp%d%s%s%s%s act%d pool%d cap%d", (long long)c.N,
             (long long)c.K, (long long)c.M, (long long)P, c.nsp, c.bias ? " bias" : "", c.res ? " res" : "",
             c.scale ? " scale" : "", c.in_scale ? " in_scale" : "", (int)c.act.kind, pool_i, cap);
    static const char *mode_name[3] = {"packed", "unpacked", "sgemm"};
    for (int mode = 0; mode < 3; mode++) {
        y[mode] = tt_new(ERT_DTYPE_F32, nd, yd);
        CHECK(run_pw(&c, pool_i, cap, mode, &x, &w, &b, &r, &s, &is, &y[mode]), "%s %s: the pointwise kernel declined",
              what, mode_name[mode]);
        float *yp = y[mode].data;
        if (nan_at >= 0) {
            CHECK(isnan(yp[nan_at]), "%s %s: NaN residual came out %g", what, mode_name[mode], yp[nan_at]);
            yp[nan_at] = 0;
        }
    }
    if (nan_at >= 0) ref[nan_at] = 0;
    const double sum_scale = (c.scale ? 1.5 : 1.0);
    for (int mode = 0; mode < 3; mode++) {
        char w2[300];
        snprintf(w2, sizeof w2, "%s %s", what, mode_name[mode]);
        CHECK(ert_test_close(w2, y[mode].data, ref, ny, 1e-6 + 0.5 * sum_scale * ldexp((double)c.K * sqrt((double)c.K), -24),
                             1e-5),
              "%s", w2);
    }
    CHECK(memcmp(y[0].data, y[1].data, (size_t)ny * sizeof(float)) == 0, "%s: packed and unpacked differ", what);
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
    pcase c = {.nsp = 2, .N = N, .K = C, .M = M, .sp = {H, W}, .bias = true, .act = {.kind = ERT_ACT_RELU}};
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
        n_pw += cap == ERT_CPU_GEMM_AVX2 || cap == ERT_CPU_GEMM_NEON;
        for (int p = 0; p < 3; p++)
            for (int it = 0; it < 40; it++) test_random(p, cap, it);
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

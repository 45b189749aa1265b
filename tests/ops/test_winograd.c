/* Winograd F(4x4, 3x3) (kernels/cpu/winograd.c) against a float64 direct
 * convolution, outputs poisoned, at 1, 2 and 3 threads and for every SGEMM
 * micro-kernel this CPU has, each result bit-identical at 1, 2, 3 and 5
 * threads:
 *   - odd shapes: channels 1..37 (not multiples of the vector length),
 *     images from 1x1 up, sizes that leave a partial last tile, batch 1-3;
 *   - every padding: each of the four sides 0, 1 or 2 on its own;
 *   - the fused tails: bias, residual, activations (vectorised ReLU, Clip,
 *     SiLU; Tanh through the scalar path), the per-output-channel scale
 *     (frozen BatchNorm) and the squeeze-excitation input scale;
 *   - the original filter is NaN while the conv runs, so only Winograd's
 *     transformed copy can give the answer (the im2col fallback would read
 *     the NaN filter);
 *   - a filter packed for one micro-kernel and run with another: Winograd
 *     declines and the im2col SGEMM answers;
 *   - through a session: Winograd's packed filter and scratch are planned
 *     into the arena, ERT_SESSION_NO_PACK gives the same numbers without;
 *     a NaN and an Inf in the input give NaN/Inf exactly where the float64
 *     direct conv has them (not smeared over Winograd's tiles);
 *   - the cost rule picks ResNet-18's 56x56/28x28/14x14 convs, not its
 *     7x7 x 512 ones at batch 1, nor what is not 3x3 stride 1.
 * Tolerance: |got - ref| <= 1e-5 * sum_c (sum |w_c|) * max |x_c| + 1e-6
 * per output, the max over the 6x6 input window of its tile: the
 * transforms mix the whole window, so their rounding scales with those
 * magnitudes, not with the result or its own 3x3 taps. (3e-6 failed one
 * case in about 20 runs: 3.6e-6 of the window's magnitude, one channel with
 * both scales; F(4x4, 3x3)'s worst case in f32 is of that order.) */
#include "cpu_gemm.h"
#include "cpu_kernels.h"
#include "onnx_enc.h"
#include "op_harness.h"

#include <math.h>

static ert_test_rng rng;
static ert_context *ctx;
static struct ert_threadpool *pools[4]; /* NULL (1 thread), 2, 3, 5 threads */
static const int pool_threads[4] = {1, 2, 3, 5};

typedef struct wcase {
    int64_t N, C, M, H, W, pt, pb, pl, pr;
    bool bias, res, scale, in_scale;
    ert_act act;
} wcase;

static int64_t oh_of(const wcase *c) { return c->H + c->pt + c->pb - 2; }
static int64_t ow_of(const wcase *c) { return c->W + c->pl + c->pr - 2; }

static double act_ref(double v, ert_act a) {
    switch (a) {
    case ERT_ACT_RELU: return v < 0 ? 0 : v;
    case ERT_ACT_CLIP: return v < -0.5 ? -0.5 : v > 0.5 ? 0.5 : v;
    case ERT_ACT_SILU: return v / (1.0 + exp(-v));
    case ERT_ACT_TANH: return tanh(v);
    default: return v;
    }
}

/* float64 direct conv with every tail; tol[i] = the error the test allows */
static void ref_conv(const wcase *c, const float *x, const float *w, const float *b, const float *res,
                     const float *sc, const float *isc, double *ref, double *tol) {
    const int64_t OH = oh_of(c), OW = ow_of(c);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double v = 0, mag = 0;
                    for (int64_t ci = 0; ci < c->C; ci++) {
                        const float *xc = x + (n * c->C + ci) * c->H * c->W;
                        const double s = isc ? isc[n * c->C + ci] : 1.0;
                        double wsum = 0, xmax = 0;
                        for (int kh = 0; kh < 3; kh++)
                            for (int kw = 0; kw < 3; kw++) {
                                int64_t ih = oh - c->pt + kh, iw = ow - c->pl + kw;
                                double wv = w[((m * c->C + ci) * 3 + kh) * 3 + kw];
                                wsum += fabs(wv);
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                                double xv = (double)(float)(xc[ih * c->W + iw] * s); /* the f32 Mul it fuses */
                                v += wv * xv;
                            }
                        /* the 6x6 input window of this output's tile: its transform mixes all of it */
                        for (int64_t ih = oh / 4 * 4 - c->pt; ih < oh / 4 * 4 - c->pt + 6; ih++)
                            for (int64_t iw = ow / 4 * 4 - c->pl; iw < ow / 4 * 4 - c->pl + 6; iw++)
                                if (ih >= 0 && ih < c->H && iw >= 0 && iw < c->W && fabs(xc[ih * c->W + iw] * s) > xmax)
                                    xmax = fabs(xc[ih * c->W + iw] * s);
                        mag += wsum * xmax;
                    }
                    if (sc) v *= sc[m], mag *= fabs(sc[m]);
                    int64_t i = ((n * c->M + m) * OH + oh) * OW + ow;
                    if (b) v += b[m];
                    if (res) v += res[i];
                    ref[i] = act_ref(v, c->act);
                    tol[i] = 1e-5 * mag + 1e-6;
                }
}

/* Runs the conv kernel as session create would: packing, Winograd's extra
 * scratch (poisoned), optional NaN filter after packing. pack_cap/run_cap:
 * the micro-kernel at packing and at the run. */
static bool run_case(const wcase *c, int pool_i, bool nan_filter, int pack_cap, int run_cap, const char *what) {
    const int64_t OH = oh_of(c), OW = ow_of(c);
    int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->M, c->C, 3, 3}, md[1] = {c->M}, yd[4] = {c->N, c->M, OH, OW};
    int64_t sd[2] = {c->N, c->C};
    tt x = tt_rand(&rng, 4, xd, -1, 1), w = tt_rand(&rng, 4, wd, -1, 1), b = tt_rand(&rng, 1, md, -1, 1);
    tt r = tt_rand(&rng, 4, yd, -1, 1), s = tt_rand(&rng, 1, md, 0.5f, 1.5f), is = tt_rand(&rng, 2, sd, 0, 1);
    tt y = tt_new(ERT_DTYPE_F32, 4, yd), wk = tt_new(ERT_DTYPE_F32, 4, wd);
    memcpy(wk.data, w.data, (size_t)tt_n(&w) * sizeof(float));
    ert_test_poison(y.data, tt_n(&y));
    ert_op_params prm;
    memset(&prm, 0, sizeof prm);
    ert_conv_params *p = &prm.conv;
    p->nsp = 2;
    for (int i = 0; i < 2; i++) p->kernel[i] = 3, p->stride[i] = 1, p->dilation[i] = 1;
    p->pad_begin[0] = c->pt, p->pad_begin[1] = c->pl, p->pad_end[0] = c->pb, p->pad_end[1] = c->pr;
    p->group = 1;
    p->has_bias = c->bias, p->has_residual = c->res, p->has_scale = c->scale, p->has_in_scale = c->in_scale;
    p->act.kind = c->act;
    if (c->act == ERT_ACT_CLIP) p->act.alpha = -0.5f, p->act.beta = 0.5f;
    ert_tview v[7];
    memset(v, 0, sizeof v);
    const tt *ins[6] = {&x, &wk, c->bias ? &b : NULL, c->res ? &r : NULL, c->scale ? &s : NULL,
                        c->in_scale ? &is : NULL};
    for (int i = 0; i < 6; i++) {
        if (!ins[i]) continue;
        v[i].data = ins[i]->data, v[i].dtype = ERT_DTYPE_F32, v[i].ndim = ins[i]->nd;
        memcpy(v[i].dims, ins[i]->dims, sizeof v[i].dims);
        v[i].n_elems = tt_n(ins[i]);
    }
    v[6].data = y.data, v[6].dtype = ERT_DTYPE_F32, v[6].ndim = 4, v[6].n_elems = tt_n(&y);
    memcpy(v[6].dims, yd, sizeof yd);
    /* every eligible conv takes Winograd; the SGEMM micro-kernel: pack_cap's to pack, run_cap's to run */
    ert_kernel_choice kc = {.gemm_cap = pack_cap, .wino = 1};
    ert_kargs a = {.op = ERT_OP_CONV, .params = &prm, .n_in = 6, .n_out = 1, .in = v, .out = v + 6,
                   .pool = pools[pool_i], .choice = &kc};
    bool ok = true;
    CHECK(ert_cpu_wino_chosen(&a), "%s: not taken with the choice forcing it", what);
    a.workspace_bytes = ert_cpu_sgemm_workspace(c->M, OH * OW, 9 * c->C, ert_threadpool_size(a.pool)) +
                        ert_cpu_wino_workspace(&a);
    a.workspace = aligned_alloc(64, ert_align_up(a.workspace_bytes, 64));
    memset(a.workspace, 0xFF, a.workspace_bytes);
    a.packed_bytes = ert_cpu_conv_packed_bytes(&a);
    CHECK(a.packed_bytes == ert_cpu_wino_packed_bytes(&a) && a.packed_bytes > 0, "%s: packed bytes %zu", what,
          a.packed_bytes);
    a.packed = aligned_alloc(64, ert_align_up(a.packed_bytes, 64));
    memset(a.packed, 0xFF, a.packed_bytes);
    ert_status st = ert_cpu_conv_pack(&a);
    kc.gemm_cap = run_cap;
    CHECK(st == ERT_OK, "%s: pack: %s", what, ert_status_str(st));
    if (nan_filter) ert_test_poison(wk.data, tt_n(&wk));
    st = ert_cpu_conv(&a);
    CHECK(st == ERT_OK, "%s: run: %s", what, ert_status_str(st));
    double *ref = malloc((size_t)tt_n(&y) * 2 * sizeof *ref), *tol = ref + tt_n(&y);
    ref_conv(c, x.data, w.data, c->bias ? b.data : NULL, c->res ? r.data : NULL, c->scale ? s.data : NULL,
             c->in_scale ? is.data : NULL, ref, tol);
    const float *yp = y.data;
    int64_t worst = -1;
    double wr = 0;
    for (int64_t i = 0; i < tt_n(&y); i++) {
        double e = fabs(yp[i] - ref[i]) / tol[i];
        if (!(e <= wr)) wr = e, worst = i; /* NaN counts as worst */
    }
    if (st == ERT_OK && wr > 1.0) {
        fprintf(stderr, "%s: y[%lld] = %.9g, float64 %.9g, allowed +-%.3g\n", what, (long long)worst, yp[worst],
                ref[worst], tol[worst]);
        ok = false;
    }
    free(ref);
    /* the same bits on every thread count: the 36 products side by side, in
     * row chunks where 36 does not spread over the workers (5 threads), or
     * one at a time split over them, never change a sum */
    const int64_t ny = tt_n(&y);
    float *y0 = malloc((size_t)ny * sizeof *y0);
    memcpy(y0, y.data, (size_t)ny * sizeof *y0);
    void *ws0 = a.workspace;
    for (int q = 0; q < 4 && st == ERT_OK && ok; q++) {
        if (q == pool_i) continue;
        a.pool = pools[q];
        a.workspace_bytes = ert_cpu_sgemm_workspace(c->M, OH * OW, 9 * c->C, ert_threadpool_size(a.pool)) +
                            ert_cpu_wino_workspace(&a);
        a.workspace = aligned_alloc(64, ert_align_up(a.workspace_bytes, 64));
        ert_test_poison(y.data, ny);
        ert_status st2 = ert_cpu_conv(&a);
        bool same = st2 == ERT_OK && memcmp(y.data, y0, (size_t)ny * sizeof *y0) == 0;
        CHECK(same, "%s: %d threads give other bits than %d threads (%s)", what, pool_threads[q],
              pool_threads[pool_i], ert_status_str(st2));
        ok = ok && same;
        free(a.workspace);
    }
    free(y0);
    free(ws0);
    free(a.packed);
    tt *all[] = {&x, &w, &b, &r, &s, &is, &y, &wk};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tt_free(all[i]);
    return ok;
}

static void random_case(wcase *c, int it) {
    static const ert_act acts[] = {ERT_ACT_NONE, ERT_ACT_RELU, ERT_ACT_CLIP, ERT_ACT_SILU, ERT_ACT_TANH};
    *c = (wcase){.N = ert_test_int(&rng, 1, 3), .C = ert_test_int(&rng, 1, 37), .M = ert_test_int(&rng, 1, 37),
                 .pt = ert_test_int(&rng, 0, 2), .pb = ert_test_int(&rng, 0, 2), .pl = ert_test_int(&rng, 0, 2),
                 .pr = ert_test_int(&rng, 0, 2), .bias = ert_test_int(&rng, 0, 1), .res = ert_test_int(&rng, 0, 1),
                 .scale = it % 5 == 3, .in_scale = it % 4 == 1, .act = acts[ert_test_int(&rng, 0, 4)]};
    /* every image at least one output; small ones now and then (one partial tile) */
    int64_t lo_h = 3 - c->pt - c->pb, lo_w = 3 - c->pl - c->pr;
    c->H = ert_test_int(&rng, lo_h < 1 ? 1 : (int)lo_h, it % 3 == 0 ? 6 : 23);
    c->W = ert_test_int(&rng, lo_w < 1 ? 1 : (int)lo_w, it % 3 == 0 ? 6 : 29);
    if (oh_of(c) < 1) c->H = 3 - c->pt - c->pb + 1;
    if (ow_of(c) < 1) c->W = 3 - c->pl - c->pr + 1;
}

static void describe(const wcase *c, char *s, size_t n, const char *tag, int pool_i, int cap) {
    snprintf(s, n, "%s N%lld C%lld M%lld %lldx%lld pads t%lld b%lld l%lld r%lld%s%s%s%s act%d pool%d cap%d", tag,
             (long long)c->N, (long long)c->C, (long long)c->M, (long long)c->H, (long long)c->W, (long long)c->pt,
             (long long)c->pb, (long long)c->pl, (long long)c->pr, c->bias ? " bias" : "", c->res ? " res" : "",
             c->scale ? " scale" : "", c->in_scale ? " in_scale" : "", (int)c->act, pool_i, cap);
}

static void test_random(int pool_i, int cap) {
    for (int it = 0; it < 14; it++) {
        wcase c;
        random_case(&c, it);
        char what[256];
        describe(&c, what, sizeof what, "winograd", pool_i, cap);
        CHECK(run_case(&c, pool_i, true, cap, cap, what), "%s", what);
    }
}

/* every padding combination once, on an image with a partial last tile */
static void test_all_pads(void) {
    for (int m = 0; m < 81; m++) {
        wcase c = {.N = 1, .C = 5, .M = 9, .H = 11, .W = 13, .pt = m % 3, .pb = m / 3 % 3, .pl = m / 9 % 3,
                   .pr = m / 27, .bias = true, .act = ERT_ACT_RELU};
        char what[256];
        describe(&c, what, sizeof what, "pads", 0, ERT_CPU_GEMM_FASTEST);
        CHECK(run_case(&c, m % 3, true, ERT_CPU_GEMM_FASTEST, ERT_CPU_GEMM_FASTEST, what), "%s", what);
    }
}

/* packed for one kernel, run on a slower one: Winograd must decline (its
 * B operands are in the wrong panel width) and the im2col path answer */
static void test_stale_pack(void) {
    int top = (int)ert_cpu_sgemm_kernel(NULL);
    if (top == ERT_CPU_GEMM_PORTABLE) return;
    wcase c = {.N = 2, .C = 19, .M = 21, .H = 15, .W = 17, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .bias = true,
               .res = true, .act = ERT_ACT_SILU};
    CHECK(run_case(&c, 1, false, top, ERT_CPU_GEMM_PORTABLE, "packed for the fastest kernel, run on the portable one"),
          "stale pack");
}

/* The cost rule (choice wino 0, the default) on ResNet-18's 3x3 convs and on
 * what it must refuse; wino -1 turns it off */
static bool chosen_in(int wino, int64_t N, int64_t C, int64_t M, int64_t HW, int64_t k, int64_t s) {
    ert_op_params prm;
    memset(&prm, 0, sizeof prm);
    ert_conv_params *p = &prm.conv;
    p->nsp = 2, p->group = 1;
    for (int i = 0; i < 2; i++)
        p->kernel[i] = k, p->stride[i] = s, p->dilation[i] = 1, p->pad_begin[i] = p->pad_end[i] = k / 2;
    int64_t OHW = (HW + 2 * (k / 2) - k) / s + 1;
    ert_tview v[3] = {{.dtype = ERT_DTYPE_F32, .ndim = 4, .dims = {N, C, HW, HW}},
                      {.dtype = ERT_DTYPE_F32, .ndim = 4, .dims = {M, C, k, k}},
                      {.dtype = ERT_DTYPE_F32, .ndim = 4, .dims = {N, M, OHW, OHW}}};
    ert_kernel_choice kc = ert_kernel_choice_of(NULL);
    kc.wino = wino;
    ert_kargs a = {.op = ERT_OP_CONV, .params = &prm, .n_in = 2, .n_out = 1, .in = v, .out = v + 2,
                   .choice = wino ? &kc : NULL};
    return ert_cpu_wino_chosen(&a);
}

static bool chosen(int64_t N, int64_t C, int64_t M, int64_t HW, int64_t k, int64_t s) {
    return chosen_in(0, N, C, M, HW, k, s);
}

static void test_cost_rule(void) {
    CHECK(chosen(1, 64, 64, 56, 3, 1) && chosen(1, 128, 128, 28, 3, 1) && chosen(1, 256, 256, 14, 3, 1),
          "ResNet-18's 56x56, 28x28 and 14x14 3x3 convs should take Winograd");
    CHECK(!chosen(1, 512, 512, 7, 3, 1), "ResNet-18's 7x7 x 512 conv at batch 1 should not take Winograd");
    CHECK(chosen(8, 512, 512, 7, 3, 1), "at batch 8 the 7x7 x 512 conv should take Winograd (filter read once)");
    CHECK(!chosen(1, 64, 64, 56, 3, 2) && !chosen(1, 64, 64, 56, 5, 1) && !chosen(1, 64, 64, 56, 1, 1),
          "stride 2, 5x5 and 1x1 convs are not Winograd's");
    CHECK(!chosen_in(-1, 1, 64, 64, 56, 3, 1), "choice wino -1 must turn Winograd off");
}

/* Through a session (the rule picks this conv): arena-planned packed filter
 * and scratch, against float64; ERT_SESSION_NO_PACK (im2col) agrees. */
static void test_session(int n_threads) {
    int64_t N = 2, C = 32, M = 40, H = 20, W = 22;
    int64_t xd[4] = {N, C, H, W}, wd[4] = {M, C, 3, 3}, bd[1] = {M}, yd[4] = {N, M, H, W};
    tt w = tt_rand(&rng, 4, wd, -1, 1), b = tt_rand(&rng, 1, bd, -1, 1), x = tt_rand(&rng, 4, xd, -1, 1);
    oxg g = {0};
    ox_g_input(&g, ox_value_info("x", 1, 4, xd));
    ox_g_output(&g, ox_value_info("y", 1, 4, yd));
    ox_g_init(&g, ox_tensor("w", 1, 4, wd, w.data, (size_t)tt_n(&w) * sizeof(float)));
    ox_g_init(&g, ox_tensor("b", 1, 1, bd, b.data, (size_t)M * sizeof(float)));
    const char *ci[] = {"x", "w", "b", NULL}, *co[] = {"c", NULL}, *ri[] = {"c", NULL}, *ro[] = {"y", NULL};
    int64_t pads[4] = {1, 1, 1, 1};
    pbuf at[1] = {ox_attr_is("pads", pads, 4, 0)};
    ox_g_node(&g, ox_node("Conv", "conv", NULL, ci, co, at, 1));
    ox_g_node(&g, ox_node("Relu", "relu", NULL, ri, ro, NULL, 0));
    pbuf m = ox_model(&g, 14);
    ert_model *model = NULL;
    CHECK_OK(ert_model_load_memory(ctx, m.p, m.n, 0, &model), ctx);
    pb_free(&m);
    wcase c = {.N = N, .C = C, .M = M, .H = H, .W = W, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .bias = true,
               .act = ERT_ACT_RELU};
    double *ref = malloc((size_t)(N * M * H * W) * 2 * sizeof *ref), *tol = ref + N * M * H * W;
    ref_conv(&c, x.data, w.data, b.data, NULL, NULL, NULL, ref, tol);
    size_t wbytes[2] = {0, 0};
    for (int np = 0; np < 2 && model; np++) {
        ert_session_options o = {.device = ERT_DEVICE_CPU, .n_threads = n_threads,
                                 .flags = np ? ERT_SESSION_NO_PACK : 0};
        ert_session *ses = NULL;
        CHECK_OK(ert_session_create(model, &o, &ses), ctx);
        if (!ses) continue;
        ert_memory_report mr;
        ert_session_memory(ses, &mr);
        wbytes[np] = mr.weights_bytes;
        tt y = tt_new(ERT_DTYPE_F32, 4, yd);
        ert_test_poison(y.data, tt_n(&y));
        CHECK_OK(ert_session_set_input(ses, 0, x.data, (size_t)tt_n(&x) * sizeof(float)), ctx);
        CHECK_OK(ert_session_run(ses), ctx);
        CHECK_OK(ert_session_get_output(ses, 0, y.data, (size_t)tt_n(&y) * sizeof(float)), ctx);
        const float *yp = y.data;
        double wr = 0;
        for (int64_t i = 0; i < tt_n(&y); i++) {
            double e = fabs(yp[i] - ref[i]) / tol[i];
            if (!(e <= wr)) wr = e;
        }
        CHECK(wr <= 1.0, "session conv %s, %d threads: error %.3g of the allowed", np ? "NO_PACK" : "packed",
              n_threads, wr);
        /* a NaN and an Inf in x: the transforms would smear them over whole
         * tiles, so the conv takes the im2col path and NaN/Inf land exactly
         * where the float64 direct conv puts them (the CUDA tests use the
         * CPU as their NaN oracle) */
        tt xn = tt_new(ERT_DTYPE_F32, 4, xd);
        memcpy(xn.data, x.data, (size_t)tt_n(&x) * sizeof(float));
        float *xp = xn.data;
        xp[ert_test_int(&rng, 0, tt_n(&x) - 1)] = NAN;
        xp[ert_test_int(&rng, 0, tt_n(&x) - 1)] = ert_test_int(&rng, 0, 1) ? INFINITY : -INFINITY;
        double *nref = malloc((size_t)tt_n(&y) * 2 * sizeof *nref);
        ref_conv(&c, xn.data, w.data, b.data, NULL, NULL, NULL, nref, nref + tt_n(&y));
        ert_test_poison(y.data, tt_n(&y));
        CHECK_OK(ert_session_set_input(ses, 0, xn.data, (size_t)tt_n(&x) * sizeof(float)), ctx);
        CHECK_OK(ert_session_run(ses), ctx);
        CHECK_OK(ert_session_get_output(ses, 0, y.data, (size_t)tt_n(&y) * sizeof(float)), ctx);
        int64_t wrong = 0, first = -1, n_nonfinite = 0;
        for (int64_t i = 0; i < tt_n(&y); i++) {
            bool rn = isnan(nref[i]), rinf = isinf(nref[i]);
            n_nonfinite += rn || rinf;
            bool ok_i = rn ? isnan(yp[i]) : rinf ? (double)yp[i] == nref[i] : isfinite(yp[i]);
            if (!ok_i && wrong++ == 0) first = i;
        }
        CHECK(wrong == 0 && n_nonfinite > 0, "session conv %s, %d threads, NaN/Inf input: %lld of %lld outputs "
              "differ in NaN/Inf from float64 (first y[%lld] = %g, float64 %g)", np ? "NO_PACK" : "packed", n_threads,
              (long long)wrong, (long long)n_nonfinite, (long long)first, first >= 0 ? yp[first] : 0.0,
              first >= 0 ? nref[first] : 0.0);
        free(nref);
        tt_free(&xn);
        tt_free(&y);
        ert_session_free(ses);
    }
    /* the transformed filter (36 floats per channel pair) is in the arena's weights */
    CHECK(wbytes[0] >= wbytes[1] + (size_t)(36 * C * M) * sizeof(float), "weights %zu packed vs %zu unpacked",
          wbytes[0], wbytes[1]);
    free(ref);
    ert_model_free(model);
    tt_free(&w), tt_free(&b), tt_free(&x);
}

int main(void) {
    ert_test_rng_init(&rng, "winograd");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    if (ert_threadpool_create(2, &pools[1]) != ERT_OK || ert_threadpool_create(3, &pools[2]) != ERT_OK ||
        ert_threadpool_create(5, &pools[3]) != ERT_OK)
        return 1;
    test_cost_rule();
    for (int t = 1; t <= 3; t++) test_session(t);
    for (int cap = ERT_CPU_GEMM_FASTEST; cap >= ERT_CPU_GEMM_PORTABLE; cap--) {
        if ((int)ert_cpu_sgemm_kernel(&(ert_kernel_choice){.gemm_cap = cap}) != cap) continue; /* not on this CPU */
        for (int p = 0; p < 3; p++) test_random(p, cap);
    }
    test_all_pads();
    test_stale_pack();
    ert_threadpool_free(pools[1]);
    ert_threadpool_free(pools[2]);
    ert_threadpool_free(pools[3]);
    ert_context_free(ctx);
    return ert_test_finish("winograd");
}

/* ert.Attention on the CPU (kernels/cpu/attention.c, core/ops/attention.c).
 * 1. The kernel through its prepare (op_harness.h: outputs and workspace
 *    poisoned) against a float64 reference written here, on random shapes:
 *    odd token counts (1, 7, 49, 197), head_dim 5, 32, 64, 80, heads 1-12,
 *    batch 1-2, with and without a bias broadcast from (nq, nk), (H, nq,
 *    nk) or (B, 1, nq, nk), on 1-4 threads, on the widest kernels and on
 *    the baseline ones, in three layouts:
 *    dense (B, H, N, D) operands; q, k, v read as strided views out of one
 *    packed (B, N, 3, H, D) qkv tensor (timm's Linear output) with y written
 *    as (B, N, H * D); and k stored transposed (B, H, D, N).
 * 2. Bad params: views past their tensor, a y view that skips elements,
 *    mixed dtypes, malformed attributes. */
#include "cpu_gemm.h"
#include "op_harness.h"

#include <math.h>

static ert_context *ctx;
static ert_test_rng rng;

typedef struct layout {
    int64_t B, H, nq, nk, D;
    int64_t q[5], k[5], v[5], o[5], b[5];
    bool bias;
    double scale;
} layout;

static double at(const float *x, const int64_t *v, int64_t b, int64_t h, int64_t t, int64_t d) {
    return x[v[0] + b * v[1] + h * v[2] + t * v[3] + d * v[4]];
}

/* y at the o view, in double */
static void ref_attention(const layout *L, const float *q, const float *k, const float *v, const float *bias, double *y) {
    double *s = malloc((size_t)L->nk * sizeof *s);
    for (int64_t b = 0; b < L->B; b++)
        for (int64_t h = 0; h < L->H; h++)
            for (int64_t i = 0; i < L->nq; i++) {
                double m = -INFINITY, sum = 0;
                for (int64_t j = 0; j < L->nk; j++) {
                    double dot = 0;
                    for (int64_t d = 0; d < L->D; d++) dot += at(q, L->q, b, h, i, d) * at(k, L->k, b, h, j, d);
                    s[j] = L->scale * dot + (L->bias ? at(bias, L->b, b, h, i, j) : 0.0);
                    if (s[j] > m) m = s[j];
                }
                for (int64_t j = 0; j < L->nk; j++) sum += (s[j] = exp(s[j] - m));
                for (int64_t d = 0; d < L->D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < L->nk; j++) acc += s[j] * at(v, L->v, b, h, j, d);
                    y[L->o[0] + b * L->o[1] + h * L->o[2] + i * L->o[3] + d * L->o[4]] = acc / sum;
                }
            }
    free(s);
}

static void dense(int64_t *v, int64_t H, int64_t N, int64_t D) {
    v[0] = 0, v[4] = 1, v[3] = D, v[2] = N * D, v[1] = H * N * D;
}

static void test_random(void) {
    static const int64_t toks[] = {1, 7, 49, 197, 3}, hd[] = {5, 32, 64, 80};
    for (int rep = 0; rep < 40; rep++) {
        layout L;
        memset(&L, 0, sizeof L);
        L.B = ert_test_int(&rng, 1, 2);
        L.H = ert_test_int(&rng, 1, rep % 5 == 0 ? 12 : 3);
        L.nq = toks[ert_test_int(&rng, 0, rep % 7 == 0 ? 4 : 2)];
        L.nk = rep % 3 == 0 ? toks[ert_test_int(&rng, 0, 2)] : L.nq;
        L.D = hd[ert_test_int(&rng, 0, 3)];
        int mode = rep % 3; /* 0 dense, 1 packed qkv (nq == nk), 2 k transposed */
        if (mode == 1) L.nk = L.nq;
        int bmode = ert_test_int(&rng, 0, 3); /* 0 none, 1 (nq, nk), 2 (H, nq, nk), 3 (B, 1, nq, nk) */
        L.bias = bmode != 0;
        bool scale_attr = rep % 2;
        L.scale = scale_attr ? 0.37 : 1.0 / sqrt((double)L.D);
        oh_pool = NULL;
        struct ert_threadpool *tp = NULL;
        /* 1-4 workers: with 3 or 4 and heads * batch not a multiple, the
         * GEMM path splits the query rows into blocks (kernels/cpu/attention.c) */
        int n_thr = 1 + rep % 4;
        if (n_thr > 1 && ert_threadpool_create(n_thr, &tp) == ERT_OK) oh_pool = tp;
        int64_t HD = L.H * L.D;
        tt in[4];
        int64_t ys[3] = {L.B, L.nq, HD}, y4[4] = {L.B, L.H, L.nq, L.D};
        ert_attr_val at_[8];
        int na = 0;
        int64_t dims5[5] = {L.B, L.H, L.nq, L.nk, L.D};
        if (mode == 1) {
            int64_t pd[3] = {L.B, L.nq, 3 * HD};
            in[0] = tt_rand(&rng, 3, pd, -2, 2);
            in[1] = in[0], in[2] = in[0]; /* one buffer, three views */
            int64_t base[5] = {0, L.nq * 3 * HD, L.D, 3 * HD, 1};
            memcpy(L.q, base, sizeof base), memcpy(L.k, base, sizeof base), memcpy(L.v, base, sizeof base);
            L.k[0] = HD, L.v[0] = 2 * HD;
            int64_t o[5] = {0, L.nq * HD, L.D, HD, 1};
            memcpy(L.o, o, sizeof o);
            at_[na++] = A_IS("ert_dims", dims5, 5);
            at_[na++] = A_IS("ert_q", L.q, 5), at_[na++] = A_IS("ert_k", L.k, 5), at_[na++] = A_IS("ert_v", L.v, 5);
            at_[na++] = A_IS("ert_o", L.o, 5), at_[na++] = A_IS("ert_out_shape", ys, 3);
        } else {
            int64_t qd[4] = {L.B, L.H, L.nq, L.D}, kd[4] = {L.B, L.H, L.nk, L.D}, ktd[4] = {L.B, L.H, L.D, L.nk};
            in[0] = tt_rand(&rng, 4, qd, -2, 2);
            in[1] = tt_rand(&rng, 4, mode == 2 ? ktd : kd, -2, 2);
            in[2] = tt_rand(&rng, 4, kd, -2, 2);
            dense(L.q, L.H, L.nq, L.D), dense(L.v, L.H, L.nk, L.D), dense(L.o, L.H, L.nq, L.D), dense(L.k, L.H, L.nk, L.D);
            if (mode == 2) {
                int64_t kt[5] = {0, L.H * L.D * L.nk, L.D * L.nk, 1, L.nk};
                memcpy(L.k, kt, sizeof kt);
                at_[na++] = A_IS("ert_dims", dims5, 5);
                at_[na++] = A_IS("ert_k", L.k, 5);
            }
        }
        int64_t bd[4];
        int bnd = 0;
        if (bmode == 1) bnd = 2, bd[0] = L.nq, bd[1] = L.nk;
        if (bmode == 2) bnd = 3, bd[0] = L.H, bd[1] = L.nq, bd[2] = L.nk;
        if (bmode == 3) bnd = 4, bd[0] = L.B, bd[1] = 1, bd[2] = L.nq, bd[3] = L.nk;
        if (L.bias) {
            in[3] = tt_rand(&rng, bnd, bd, -3, 3);
            L.b[0] = 0, L.b[4] = 1, L.b[3] = L.nk, L.b[2] = bmode == 2 ? L.nq * L.nk : 0;
            L.b[1] = bmode == 3 ? L.nq * L.nk : 0;
        }
        if (scale_attr) at_[na++] = A_F("scale", (float)L.scale);
        tt y;
        ert_status st = run_op(ctx, ERT_OP_ATTENTION, at_, na, in, L.bias ? 4 : 3, &y, 1, NULL);
        char what[160];
        snprintf(what, sizeof what, "attention B%lld H%lld nq%lld nk%lld D%lld layout %d bias %d threads %d",
                 (long long)L.B, (long long)L.H, (long long)L.nq, (long long)L.nk, (long long)L.D, mode, bmode,
                 oh_pool ? n_thr : 1);
        CHECK(st == ERT_OK, "%s: %s (%s)", what, ert_status_str(st), ert_last_error(ctx));
        if (st == ERT_OK) {
            int64_t n = tt_n(&y);
            CHECK(n == L.B * L.nq * HD, "%s: y has %lld elements", what, (long long)n);
            CHECK(mode == 1 ? (y.nd == 3 && !memcmp(y.dims, ys, sizeof ys)) : (y.nd == 4 && !memcmp(y.dims, y4, sizeof y4)),
                  "%s: y's shape", what);
            double *ref = malloc((size_t)n * sizeof *ref);
            ref_attention(&L, in[0].data, in[1].data, in[2].data, L.bias ? in[3].data : NULL, ref);
            CHECK(ert_test_close(what, y.data, ref, n, 1e-4, 1e-4), "%s: against float64", what);
            free(ref);
            tt_free(&y);
        }
        tt_free(&in[0]);
        if (mode != 1) tt_free(&in[1]), tt_free(&in[2]);
        if (L.bias) tt_free(&in[3]);
        oh_pool = NULL;
        ert_threadpool_free(tp);
    }
}

static void test_errors(void) {
    int64_t d[4] = {1, 2, 5, 8};
    tt in[4] = {tt_rand(&rng, 4, d, -1, 1), tt_rand(&rng, 4, d, -1, 1), tt_rand(&rng, 4, d, -1, 1)};
    tt y;
    /* k's view reaches past k: token stride too large */
    int64_t kv[5] = {0, 80, 40, 9, 1};
    ert_attr_val a1[1] = {A_IS("ert_k", kv, 5)};
    CHECK(run_op(ctx, ERT_OP_ATTENTION, a1, 1, in, 3, &y, 1, NULL) == ERT_E_SHAPE, "k view past the end refused");
    /* y's view skips elements (and would leave poison): dim stride 2 */
    int64_t ov[5] = {0, 80, 40, 8, 2};
    ert_attr_val a2[1] = {A_IS("ert_o", ov, 5)};
    CHECK(run_op(ctx, ERT_OP_ATTENTION, a2, 1, in, 3, &y, 1, NULL) == ERT_E_SHAPE, "sparse y view refused");
    /* a y view that writes one element twice: head and token strides equal */
    int64_t ov2[5] = {0, 80, 8, 8, 1};
    ert_attr_val a3[1] = {A_IS("ert_o", ov2, 5)};
    CHECK(run_op(ctx, ERT_OP_ATTENTION, a3, 1, in, 3, &y, 1, NULL) == ERT_E_SHAPE, "overlapping y view refused");
    /* four ints where five are needed */
    ert_attr_val a4[1] = {A_IS("ert_q", kv, 4)};
    CHECK(run_op(ctx, ERT_OP_ATTENTION, a4, 1, in, 3, &y, 1, NULL) == ERT_E_FORMAT, "short view attribute refused");
    /* a negative stride */
    int64_t neg[5] = {40, 80, 40, -8, 1};
    ert_attr_val a5[1] = {A_IS("ert_q", neg, 5)};
    CHECK(run_op(ctx, ERT_OP_ATTENTION, a5, 1, in, 3, &y, 1, NULL) == ERT_E_SHAPE, "negative stride refused");
    /* mixed dtypes */
    tt i32 = tt_new(ERT_DTYPE_I32, 4, d);
    tt mix[3] = {in[0], i32, in[2]};
    CHECK(run_op(ctx, ERT_OP_ATTENTION, NULL, 0, mix, 3, &y, 1, NULL) == ERT_E_UNSUPPORTED, "i32 k refused");
    /* a bias that does not broadcast */
    int64_t bd[2] = {5, 7};
    in[3] = tt_rand(&rng, 2, bd, -1, 1);
    CHECK(run_op(ctx, ERT_OP_ATTENTION, NULL, 0, in, 4, &y, 1, NULL) == ERT_E_SHAPE, "bias (5, 7) for nk 5 refused");
    /* without ert_dims, q must be rank 4 */
    int64_t d3[3] = {2, 5, 8};
    tt r3[3] = {tt_rand(&rng, 3, d3, -1, 1), in[1], in[2]};
    CHECK(run_op(ctx, ERT_OP_ATTENTION, NULL, 0, r3, 3, &y, 1, NULL) == ERT_E_SHAPE, "rank-3 q without ert_dims refused");
    tt_free(&r3[0]);
    tt_free(&i32);
    for (int k = 0; k < 4; k++) tt_free(&in[k]);
}

int main(void) {
    ert_test_rng_init(&rng, "ops_attention");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    /* the widest kernels the CPU runs, then the baseline copies (softmax
     * and SGEMM follow the kernel choice's cap, cpu_gemm.h) */
    test_random();
    ert_kernel_choice base = ert_kernel_choice_of(NULL);
    base.gemm_cap = ERT_CPU_GEMM_PORTABLE;
    oh_choice = &base;
    test_random();
    oh_choice = NULL;
    test_errors();
    ert_context_free(ctx);
    return ert_test_finish("ops_attention");
}

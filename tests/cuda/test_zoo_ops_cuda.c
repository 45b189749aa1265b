/* The ops the zoo needed beyond the first CUDA kernels (ReduceL2,
 * ReduceSumSquare, ReduceLogSumExp, ScatterND, GatherElements) in CUDA
 * sessions: ReduceL2 and ReduceSumSquare have CUDA kernels now, the other
 * three run through the per-node CPU fallback, and the session must match a
 * CPU session (label `gpu`).
 *
 * The model (EdgeNeXt's F.normalize and Swin-T's slice assignment, on computed
 * data): x (1, 8, 5, 7) -> Conv 3x3 (16) = c;
 *   n = c / ReduceL2(c, axis 1, keepdims)          (normalize over channels)
 *   s = ScatterND(n, idx (3, 2) constant, u)       (u: a graph input (3, 5, 7))
 *   g = GatherElements(c, gi, axis 1)              (gi: constant (1, 4, 5, 7))
 *   q = ReduceSumSquare(c, axes (2, 3), keepdims 0), l = ReduceLogSumExp(c, axis 1)
 * Outputs s, g, q, l against a CPU session on fresh random x and u, outputs
 * poisoned, f32 (1e-4 of the largest |output|) and f16 (1e-2) sessions, two
 * runs each (capture, then replay). ert_session_n_cpu_fallback must count
 * exactly the three fallback nodes. Without a GPU (or the CUDA backend): 77, ctest SKIPPED. */
#include "edgert.h"
#include "testutil.h"
#include "cuda_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
static ert_test_rng rng;

static ert_model *ops_model(void) {
    ert_builder *b;
    ert_model *m = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {1, 8, 5, 7}, ud[3] = {3, 5, 7}, wd[4] = {16, 8, 3, 3}, bd[1] = {16}, id[2] = {3, 2},
            gd[4] = {1, 4, 5, 7};
    float w[16 * 8 * 9], bias[16];
    ert_test_fill(&rng, w, 16 * 8 * 9, -0.3f, 0.3f);
    ert_test_fill(&rng, bias, 16, -0.2f, 0.2f);
    int64_t idx[6] = {0, 3, 0, -2, 0, 9}, gi[4 * 5 * 7];
    for (int i = 0; i < 4 * 5 * 7; i++) gi[i] = ert_test_int(&rng, -16, 15);
    int32_t x, u, wi, bi, ii, gii, c, n2, nrm, s, g, q, l;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_input(b, "u", ERT_DTYPE_F32, 3, ud, &u), ctx);
    CHECK_OK(ert_builder_weight(b, "w", ERT_DTYPE_F32, 4, wd, w, &wi), ctx);
    CHECK_OK(ert_builder_weight(b, "b", ERT_DTYPE_F32, 1, bd, bias, &bi), ctx);
    CHECK_OK(ert_builder_weight(b, "idx", ERT_DTYPE_I64, 2, id, idx, &ii), ctx);
    CHECK_OK(ert_builder_weight(b, "gi", ERT_DTYPE_I64, 4, gd, gi, &gii), ctx);
    CHECK_OK(ert_builder_conv2d(b, x, wi, bi, 1, 1, 1, 1, &c), ctx);
    int64_t ax1[1] = {1}, ax23[2] = {2, 3};
    ert_attr a_l2[2] = {ERT_ATTR_IS("axes", ax1, 1), ERT_ATTR_I("keepdims", 1)};
    CHECK_OK(ert_builder_node(b, "ReduceL2", "l2", &c, 1, a_l2, 2, &n2, 1), ctx);
    CHECK_OK(ert_builder_binary(b, "Div", c, n2, &nrm), ctx);
    int32_t sin[3] = {nrm, ii, u}, gin[2] = {c, gii};
    CHECK_OK(ert_builder_node(b, "ScatterND", "scatter", sin, 3, NULL, 0, &s, 1), ctx);
    ert_attr a_g = ERT_ATTR_I("axis", 1);
    CHECK_OK(ert_builder_node(b, "GatherElements", "gather", gin, 2, &a_g, 1, &g, 1), ctx);
    ert_attr a_q[2] = {ERT_ATTR_IS("axes", ax23, 2), ERT_ATTR_I("keepdims", 0)};
    CHECK_OK(ert_builder_node(b, "ReduceSumSquare", "ssq", &c, 1, a_q, 2, &q, 1), ctx);
    ert_attr a_l[1] = {ERT_ATTR_IS("axes", ax1, 1)};
    CHECK_OK(ert_builder_node(b, "ReduceLogSumExp", "lse", &c, 1, a_l, 1, &l, 1), ctx);
    CHECK_OK(ert_builder_output(b, s, "s"), ctx);
    CHECK_OK(ert_builder_output(b, g, "g"), ctx);
    CHECK_OK(ert_builder_output(b, q, "q"), ctx);
    CHECK_OK(ert_builder_output(b, l, "l"), ctx);
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

static const int64_t N_OUT[4] = {16 * 5 * 7, 4 * 5 * 7, 16, 5 * 7};

/* Create, set x and u, run `runs` times with outputs poisoned; out[k] copies. */
static bool run(const ert_model *m, ert_device dev, ert_dtype prec, const float *x, const float *u, float **out,
                int runs, int *n_fallback) {
    ert_session_options o = {.device = dev, .precision = prec};
    ert_session *s = NULL;
    ert_status st = ert_session_create(m, &o, &s);
    CHECK(st == ERT_OK, "create (%s): %s", dev == ERT_DEVICE_CPU ? "cpu" : "cuda", ert_last_error(ctx));
    if (st) return false;
    if (n_fallback) *n_fallback = ert_session_n_cpu_fallback(s);
    CHECK_OK(ert_session_set_input(s, 0, x, 8 * 5 * 7 * sizeof(float)), ctx);
    CHECK_OK(ert_session_set_input(s, 1, u, 3 * 5 * 7 * sizeof(float)), ctx);
    for (int r = 0; r < runs; r++) {
        float *o_[4];
        for (int k = 0; k < 4; k++) {
            CHECK_OK(ert_session_output_data(s, k, (const void **)&o_[k]), ctx);
            ert_test_poison(o_[k], N_OUT[k]);
        }
        CHECK_OK(ert_session_run(s), ctx);
        for (int k = 0; k < 4; k++) memcpy(out[k], o_[k], (size_t)N_OUT[k] * sizeof(float));
    }
    ert_session_free(s);
    return true;
}

int main(void) {
    ert_test_rng_init(&rng, "zoo_ops_cuda");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    ert_model *m = ops_model();
    int skip = ert_test_cuda_probe("zoo_ops_cuda", ctx, m);
    if (skip) return skip;
    static const char *const names[4] = {"ScatterND", "GatherElements", "ReduceSumSquare", "ReduceLogSumExp"};
    float *ref[4], *got[4];
    for (int k = 0; k < 4; k++) {
        ref[k] = malloc((size_t)N_OUT[k] * sizeof(float));
        got[k] = malloc((size_t)N_OUT[k] * sizeof(float));
    }
    for (int rep = 0; rep < 4; rep++) {
        ert_dtype prec = rep % 2 ? ERT_DTYPE_F16 : ERT_DTYPE_F32;
        double tol = prec == ERT_DTYPE_F16 ? 1e-2 : 1e-4;
        float x[8 * 5 * 7], u[3 * 5 * 7];
        ert_test_fill(&rng, x, 8 * 5 * 7, -1, 1);
        ert_test_fill(&rng, u, 3 * 5 * 7, -2, 2);
        int nf = -1;
        if (!run(m, ERT_DEVICE_CPU, ERT_DTYPE_F32, x, u, ref, 1, NULL) ||
            !run(m, ERT_DEVICE_CUDA, prec, x, u, got, 2, &nf))
            continue;
        CHECK(nf == 3, "%s: %d nodes on the CPU fallback, want 3 (ScatterND, GatherElements, ReduceLogSumExp)", prec == ERT_DTYPE_F16 ? "f16" : "f32", nf);
        for (int k = 0; k < 4; k++) {
            double mx = 0;
            double *r = malloc((size_t)N_OUT[k] * sizeof *r);
            for (int64_t i = 0; i < N_OUT[k]; i++) {
                r[i] = ref[k][i];
                mx = fabs(r[i]) > mx ? fabs(r[i]) : mx;
            }
            char what[96];
            snprintf(what, sizeof what, "%s %s CUDA vs CPU", names[k], prec == ERT_DTYPE_F16 ? "f16" : "f32");
            CHECK(ert_test_close(what, got[k], r, N_OUT[k], tol * (mx > 0 ? mx : 1), 0), "%s", what);
            free(r);
        }
    }
    for (int k = 0; k < 4; k++) {
        free(ref[k]);
        free(got[k]);
    }
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_finish("zoo_ops_cuda");
}

/* CumSum on the CPU (kernels/cpu/cumsum.c, core/ops/cumsum.c).
 * 1. The kernel through its prepare (op_harness.h): random odd shapes of rank
 *    1 to 4, every axis (negative too), all four exclusive x reverse
 *    combinations, f32 / i32 / i64, outputs poisoned, against a float64 (or
 *    int64) reference written here.
 * 2. Bad inputs: computed axis, axis out of range, two axis values, a float
 *    axis, a scalar x, exclusive = 2.
 * 3. The ONNX loader: a hand-encoded CumSum model (axis an initializer, both
 *    attributes set) loads and runs on a CPU session with the same reference. */
#include "onnx_enc.h"
#include "op_harness.h"

static ert_context *ctx;
static ert_test_rng rng;

/* Reference: y along axis of x (outer, n, inner) in double. */
static void ref_cumsum(const tt *x, int axis, bool excl, bool rev, double *y) {
    int64_t outer = 1, inner = 1, n = x->dims[axis];
    for (int d = 0; d < x->nd; d++) {
        if (d < axis) outer *= x->dims[d];
        else if (d > axis) inner *= x->dims[d];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t k = 0; k < n; k++) {
                    bool in = rev ? (excl ? k > j : k >= j) : (excl ? k < j : k <= j);
                    if (in) s += tt_get(x, (o * n + k) * inner + i);
                }
                y[(o * n + j) * inner + i] = s;
            }
}

static void test_random(void) {
    static const ert_dtype dts[3] = {ERT_DTYPE_F32, ERT_DTYPE_I32, ERT_DTYPE_I64};
    for (int rep = 0; rep < 48; rep++) {
        int64_t d[4];
        int nd = rand_dims(&rng, 1, 4, 7, d);
        ert_dtype dt = dts[rep % 3];
        tt x = tt_new(dt, nd, d);
        for (int64_t i = 0; i < tt_n(&x); i++) {
            double v = ert_test_uniform(&rng, -4, 4);
            if (dt == ERT_DTYPE_F32) ((float *)x.data)[i] = (float)v;
            else if (dt == ERT_DTYPE_I32) ((int32_t *)x.data)[i] = (int32_t)floor(v * 100);
            else ((int64_t *)x.data)[i] = (int64_t)floor(v * 1e9);
        }
        int axis = ert_test_int(&rng, 0, nd - 1);
        int64_t ax_given = rep % 2 ? axis - nd : axis; /* negative axes count from the end */
        bool excl = (rep / 3) % 2, rev = (rep / 6) % 2;
        tt in[2] = {x, tt_ints(&ax_given, 1)};
        if (rep % 4 == 0) in[1].nd = 0; /* 0-D axis, as exporters emit it */
        if (rep % 5 == 0) { /* an i32 axis */
            tt a32 = tt_new(ERT_DTYPE_I32, 0, NULL);
            *(int32_t *)a32.data = (int32_t)ax_given;
            a32.cst = true;
            tt_free(&in[1]);
            in[1] = a32;
        }
        ert_attr_val at[2] = {A_I("exclusive", excl), A_I("reverse", rev)};
        tt out;
        int stage = -1;
        ert_status st = run_op(ctx, ERT_OP_CUMSUM, at, 2, in, 2, &out, 1, &stage);
        char what[96];
        snprintf(what, sizeof what, "cumsum %s rank %d axis %lld excl %d rev %d", ert_dtype_name(dt), nd,
                 (long long)ax_given, excl, rev);
        CHECK(st == ERT_OK, "%s: %s (%s)", what, ert_status_str(st), ert_last_error(ctx));
        if (st == ERT_OK) {
            CHECK(out.dt == dt && same_shape(&out, nd, d), "%s: output dtype/shape", what);
            double *ref = malloc((size_t)tt_n(&x) * sizeof *ref);
            ref_cumsum(&x, axis, excl, rev, ref);
            if (dt == ERT_DTYPE_F32) {
                ert_test_close(what, out.data, ref, tt_n(&x), 1e-6, 1e-6) ? ert_test_pass++ : ert_test_fail++;
            } else {
                int64_t bad = -1;
                for (int64_t i = 0; i < tt_n(&x) && bad < 0; i++)
                    if (tt_get(&out, i) != ref[i]) bad = i; /* exact: |sums| < 2^53 */
                CHECK(bad < 0, "%s: element %lld is %.0f, expected %.0f", what, (long long)bad,
                      bad >= 0 ? tt_get(&out, bad) : 0.0, bad >= 0 ? ref[bad] : 0.0);
            }
            free(ref);
            tt_free(&out);
        }
        tt_free(&in[0]);
        tt_free(&in[1]);
    }
}

static void expect_err(const char *what, tt *in, const ert_attr_val *at, int n_at, ert_status want, const char *needle) {
    tt out;
    ert_status st = run_op(ctx, ERT_OP_CUMSUM, at, n_at, in, 2, &out, 1, NULL);
    if (st == ERT_OK) tt_free(&out);
    CHECK(st == want, "%s: got %s, want %s", what, ert_status_str(st), ert_status_str(want));
    CHECK(strstr(ert_last_error(ctx), needle), "%s: message '%s' lacks '%s'", what, ert_last_error(ctx), needle);
}

static void test_errors(void) {
    int64_t d[2] = {3, 5}, ax = 1, ax2[2] = {0, 1}, big = 2;
    tt x = tt_rand(&rng, 2, d, -1, 1);
    tt a = tt_ints(&ax, 1);
    a.cst = false;
    tt in[2] = {x, a};
    expect_err("computed axis", in, NULL, 0, ERT_E_UNSUPPORTED, "constant");
    tt_free(&in[1]);
    in[1] = tt_ints(&big, 1);
    expect_err("axis 2 of rank 2", in, NULL, 0, ERT_E_ARG, "out of range");
    tt_free(&in[1]);
    in[1] = tt_ints(ax2, 2);
    expect_err("two axes", in, NULL, 0, ERT_E_SHAPE, "one value");
    tt_free(&in[1]);
    in[1] = tt_scalar_f32(1, true);
    expect_err("float axis", in, NULL, 0, ERT_E_SHAPE, "i32 or i64");
    tt_free(&in[1]);
    in[1] = tt_ints(&ax, 1);
    ert_attr_val at = A_I("exclusive", 2);
    expect_err("exclusive 2", in, &at, 1, ERT_E_FORMAT, "exclusive");
    tt_free(&in[0]);
    in[0] = tt_scalar_f32(1, false);
    expect_err("scalar x", in, NULL, 0, ERT_E_SHAPE, "rank");
    tt_free(&in[0]);
    tt_free(&in[1]);
}

/* x (2, 5, 3) f32 input, axis = -2 (an i64 initializer), exclusive, reverse. */
static void test_onnx(void) {
    int64_t d[3] = {2, 5, 3}, axis = -2;
    oxg g = {0};
    ox_g_input(&g, ox_value_info("x", 1, 3, d));
    ox_g_output(&g, ox_value_info("y", 1, 3, d));
    ox_g_init(&g, ox_tensor("axis", 7, 0, NULL, &axis, sizeof axis));
    pbuf at[2] = {ox_attr_i("exclusive", 1), ox_attr_i("reverse", 1)};
    const char *ins[] = {"x", "axis", NULL}, *outs[] = {"y", NULL};
    ox_g_node(&g, ox_node("CumSum", "cs", NULL, ins, outs, at, 2));
    pbuf m = ox_model(&g, 14);
    ert_model *model = NULL;
    CHECK_OK(ert_model_load_memory(ctx, m.p, m.n, 0, &model), ctx);
    pb_free(&m);
    if (!model) return;
    ert_session *s = NULL;
    ert_session_options o = {.device = ERT_DEVICE_CPU};
    CHECK_OK(ert_session_create(model, &o, &s), ctx);
    if (s) {
        tt x = tt_rand(&rng, 3, d, -2, 2);
        CHECK_OK(ert_session_set_input(s, 0, x.data, (size_t)tt_n(&x) * 4), ctx);
        const float *y = NULL;
        CHECK_OK(ert_session_output_data(s, 0, (const void **)&y), ctx);
        ert_test_poison((float *)y, tt_n(&x));
        CHECK_OK(ert_session_run(s), ctx);
        double ref[30];
        ref_cumsum(&x, 1, true, true, ref);
        ert_test_close("onnx CumSum exclusive reverse", y, ref, 30, 1e-6, 1e-6) ? ert_test_pass++ : ert_test_fail++;
        tt_free(&x);
        ert_session_free(s);
    }
    ert_model_free(model);
}

int main(void) {
    ert_test_rng_init(&rng, "ops_cumsum");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    test_random();
    test_errors();
    test_onnx();
    ert_context_free(ctx);
    return ert_test_finish("ops_cumsum");
}

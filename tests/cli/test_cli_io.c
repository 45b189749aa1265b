/* The CLI's tensor helpers (apps/cli_io.c): dims and float-list parsing,
 * --shape resolution against a model, and the --expect comparison
 * (tolerance, NaN/inf, integers exact, dtype/shape mismatches), on fresh
 * random data compared with a float64 evaluation of the rule. */
#define _POSIX_C_SOURCE 200809L
#include "cli_io.h"
#include "cli_util.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_parse(void) {
    int nd = 0;
    int64_t d[ERT_MAX_DIMS];
    CHECK(cli_parse_dims("1x3x736x1280", &nd, d) == 0 && nd == 4 && d[0] == 1 && d[1] == 3 && d[2] == 736 && d[3] == 1280,
          "1x3x736x1280");
    CHECK(cli_parse_dims("2,5", &nd, d) == 0 && nd == 2 && d[1] == 5, "2,5");
    CHECK(cli_parse_dims("0", &nd, d) == 0 && nd == 1 && d[0] == 0, "0");
    const char *bad[] = {"", "x", "1x", "x1", "1xx2", "-1x2", "1.5", "1x2y", "99999999999999999999", "1x2x3x4x5x6x7x8x9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(cli_parse_dims(bad[i], &nd, d) != 0, "'%s' refused", bad[i]);
    float v[3];
    CHECK(cli_parse_floats3("0.485,0.456,0.406", v) == 0 && v[0] == 0.485f && v[1] == 0.456f && v[2] == 0.406f, "3 floats");
    CHECK(cli_parse_floats3("0.5", v) == 0 && v[0] == 0.5f && v[1] == 0.5f && v[2] == 0.5f, "one float for all");
    const char *badf[] = {"", "1,2", "1,2,3,4", "a", "1,,2", "nan", "inf,1,1"};
    for (size_t i = 0; i < sizeof badf / sizeof badf[0]; i++) CHECK(cli_parse_floats3(badf[i], v) != 0, "'%s' refused", badf[i]);
}

/* A two-input model: x (?, 3, ?, ?) f32 and y (2, 4) f32 (unused), out = Relu(x). */
static ert_model *model(ert_context *ctx) {
    ert_builder *b = NULL;
    ert_model *m = NULL;
    int32_t x, y, r;
    int64_t xd[4] = {-1, 3, -1, -1}, yd[2] = {2, 4};
    if (ert_builder_create(ctx, &b) != ERT_OK) return NULL;
    if (ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x) == ERT_OK &&
        ert_builder_input(b, "y", ERT_DTYPE_F32, 2, yd, &y) == ERT_OK && ert_builder_unary(b, "Relu", x, &r) == ERT_OK &&
        ert_builder_output(b, r, "out") == ERT_OK)
        ert_builder_finish(b, &m);
    ert_builder_free(b);
    return m;
}

static void test_shapes(ert_context *ctx) {
    ert_model *m = model(ctx);
    CHECK(m != NULL, "test model: %s", ert_last_error(ctx));
    if (!m) return;
    ert_input_shape sh[4];
    int n = 0;
    char err[512];
    CHECK(cli_shape_resolve(m, "x=1x3x736x1280", sh, &n, err, sizeof err) == 0 && n == 1 && strcmp(sh[0].name, "x") == 0 &&
              sh[0].ndim == 4 && sh[0].dims[2] == 736 && sh[0].dims[3] == 1280,
          "x=1x3x736x1280: %s", err);
    CHECK(cli_shape_resolve(m, "x=1x3x8x8", sh, &n, err, sizeof err) != 0 && strstr(err, "already has shape") && n == 1,
          "second --shape for x refused: %s", err);
    CHECK(cli_shape_resolve(m, "y=2x5", sh, &n, err, sizeof err) != 0 && strstr(err, "declared (2, 4)"),
          "a fixed dim cannot change: %s", err);
    CHECK(cli_shape_resolve(m, "y=2x4x1", sh, &n, err, sizeof err) != 0, "rank must match");
    CHECK(cli_shape_resolve(m, "z=1", sh, &n, err, sizeof err) != 0 && strstr(err, "its inputs: x, y"),
          "unknown input names the inputs: %s", err);
    CHECK(cli_shape_resolve(m, "1x3x8x8", sh, &n, err, sizeof err) != 0 && strstr(err, "NAME=DIMS"),
          "two inputs: NAME needed: %s", err);
    CHECK(cli_shape_resolve(m, "y=2x4", sh, &n, err, sizeof err) == 0 && n == 2, "fixed dims may be restated");
    ert_model_free(m);
}

/* cli_tensor_compare against the rule evaluated here in double. */
static void test_compare(void) {
    cli_rng r;
    cli_rng_seed(&r, 99);
    enum { N = 37 };
    float got[N], ref[N];
    for (int i = 0; i < N; i++) ref[i] = cli_rng_uniform(&r, -100, 100), got[i] = ref[i];
    ert_tensor_info gi = {.name = "o", .dtype = ERT_DTYPE_F32, .ndim = 1, .dims = {N}};
    cli_tensor t = {.path = "ref", .dtype = ERT_DTYPE_F32, .ndim = 1, .dims = {N}, .data = ref, .bytes = sizeof ref};
    char msg[512];
    CHECK(cli_tensor_compare(&gi, got, &t, 0, 0, msg, sizeof msg) == 1, "identical: %s", msg);
    double atol = 1e-3, rtol = 1e-4;
    int k = (int)(cli_rng_next(&r) % N);
    /* just inside and just outside the tolerance of element k */
    double lim = atol + rtol * fabs((double)ref[k]);
    got[k] = (float)((double)ref[k] + 0.9 * lim);
    CHECK(cli_tensor_compare(&gi, got, &t, atol, rtol, msg, sizeof msg) == 1, "inside tolerance: %s", msg);
    got[k] = (float)((double)ref[k] + 1.5 * lim);
    CHECK(cli_tensor_compare(&gi, got, &t, atol, rtol, msg, sizeof msg) == 0, "outside tolerance");
    char want[64];
    snprintf(want, sizeof want, "worst at [%d]", k);
    CHECK(strstr(msg, "1 of 37 values differ") && strstr(msg, want), "message names the element: %s", msg);
    got[k] = ref[k];
    /* NaN matches NaN only; inf the same inf only */
    got[3] = ref[3] = NAN;
    CHECK(cli_tensor_compare(&gi, got, &t, atol, rtol, msg, sizeof msg) == 1, "NaN vs NaN: %s", msg);
    got[3] = 0;
    CHECK(cli_tensor_compare(&gi, got, &t, 1e30, 0, msg, sizeof msg) == 0, "0 vs NaN differs at any tolerance");
    got[3] = ref[3] = INFINITY;
    CHECK(cli_tensor_compare(&gi, got, &t, atol, rtol, msg, sizeof msg) == 1, "inf vs inf");
    got[3] = -INFINITY;
    CHECK(cli_tensor_compare(&gi, got, &t, 1e30, 1e30, msg, sizeof msg) == 0, "-inf vs inf differs");
    got[3] = ref[3] = 1;
    /* shape and dtype must match */
    t.dims[0] = N - 1;
    CHECK(cli_tensor_compare(&gi, got, &t, 1, 1, msg, sizeof msg) == 0 && strstr(msg, "shape"), "shape: %s", msg);
    t.dims[0] = N;
    t.dtype = ERT_DTYPE_I32;
    CHECK(cli_tensor_compare(&gi, got, &t, 1, 1, msg, sizeof msg) == 0 && strstr(msg, "dtype"), "dtype: %s", msg);
    /* integers: exact whatever the tolerance */
    int64_t gi64[4] = {1, -2, 3, 1000000007}, ri64[4] = {1, -2, 3, 1000000007};
    ert_tensor_info ii = {.name = "i", .dtype = ERT_DTYPE_I64, .ndim = 1, .dims = {4}};
    cli_tensor it = {.path = "iref", .dtype = ERT_DTYPE_I64, .ndim = 1, .dims = {4}, .data = ri64, .bytes = sizeof ri64};
    CHECK(cli_tensor_compare(&ii, gi64, &it, 0, 0, msg, sizeof msg) == 1, "ints equal");
    gi64[3]++;
    CHECK(cli_tensor_compare(&ii, gi64, &it, 10, 10, msg, sizeof msg) == 0, "ints differ by 1 at tolerance 10");
}

int main(void) {
    ert_context *ctx = NULL;
    CHECK_OK(ert_context_create(NULL, &ctx), ctx);
    test_parse();
    if (ctx) test_shapes(ctx);
    test_compare();
    ert_context_free(ctx);
    return ert_test_finish("cli_io");
}

/* Element-wise ops through prepare + ert_cpu_run_node: unary (f32, and
 * Clip/Neg/Abs/Relu on every integer dtype), broadcasting binary
 * (f32/i32/i64/i8), variadic Min/Max/Mean, PRelu, Where, ReduceMean/Sum/Max,
 * ArgMax/ArgMin, Identity/Dropout. Each is checked against a float64 /
 * plain-index reference written here. */
#include "op_harness.h"

static ert_context *ctx;
static ert_test_rng rng;

/* ------------------------------------------------------------------ unary */

static double ref_unary(ert_op op, double x, double p0, double p1, int gelu_tanh) {
    switch (op) {
    case ERT_OP_RELU: return x > 0 ? x : 0;
    case ERT_OP_LEAKY_RELU: return x >= 0 ? x : p0 * x;
    case ERT_OP_CLIP: return x < p0 ? p0 : x > p1 ? p1 : x;
    case ERT_OP_SIGMOID: return 1 / (1 + exp(-x));
    case ERT_OP_TANH: return tanh(x);
    case ERT_OP_HARD_SIGMOID: return fmax(0, fmin(1, p0 * x + p1));
    case ERT_OP_HARD_SWISH: return x * fmax(0, fmin(1, x / 6 + 0.5));
    case ERT_OP_SILU: return x / (1 + exp(-x));
    case ERT_OP_GELU:
        if (gelu_tanh) return 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
        return 0.5 * x * (1 + erf(x / sqrt(2)));
    case ERT_OP_ERF: return erf(x);
    case ERT_OP_SQRT: return sqrt(x);
    case ERT_OP_EXP: return exp(x);
    case ERT_OP_LOG: return log(x);
    case ERT_OP_NEG: return -x;
    case ERT_OP_ABS: return fabs(x);
    case ERT_OP_RECIPROCAL: return 1 / x;
    case ERT_OP_FLOOR: return floor(x);
    case ERT_OP_CEIL: return ceil(x);
    case ERT_OP_ELU: return x >= 0 ? x : p0 * (exp(x) - 1);
    case ERT_OP_SELU: return p1 * (x > 0 ? x : p0 * (exp(x) - 1));
    case ERT_OP_SOFTPLUS: return log(1 + exp(x));
    case ERT_OP_MISH: return x * tanh(log(1 + exp(x)));
    default: return NAN;
    }
}

static void test_unary(void) {
    static const ert_op ops[] = {ERT_OP_RELU, ERT_OP_LEAKY_RELU, ERT_OP_CLIP, ERT_OP_SIGMOID, ERT_OP_TANH,
                                 ERT_OP_HARD_SIGMOID, ERT_OP_HARD_SWISH, ERT_OP_SILU, ERT_OP_GELU, ERT_OP_ERF,
                                 ERT_OP_SQRT, ERT_OP_EXP, ERT_OP_LOG, ERT_OP_NEG, ERT_OP_ABS, ERT_OP_RECIPROCAL,
                                 ERT_OP_FLOOR, ERT_OP_CEIL, ERT_OP_ELU, ERT_OP_SELU, ERT_OP_SOFTPLUS, ERT_OP_MISH};
    for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
        for (int rep = 0; rep < 3; rep++) {
            ert_op op = ops[oi];
            int64_t dims[ERT_MAX_DIMS];
            int nd = rand_dims(&rng, 0, 4, 7, dims);
            if (rep == 2 && op == ERT_OP_SIGMOID) { /* big enough to be split across threads */
                nd = 2;
                dims[0] = 97;
                dims[1] = 401;
            }
            bool pos = op == ERT_OP_SQRT || op == ERT_OP_LOG || op == ERT_OP_RECIPROCAL;
            tt in[3];
            /* rep 2 of the exp-based activations: large |x| (softplus must not overflow) */
            bool wide = rep == 2 && (op == ERT_OP_ELU || op == ERT_OP_SELU || op == ERT_OP_SOFTPLUS || op == ERT_OP_MISH);
            in[0] = tt_rand(&rng, nd, dims, pos ? 0.05f : wide ? -90.0f : -5.0f, wide ? 90.0f : 5.0f);
            int n_in = 1, na = 0, gt = 0;
            ert_attr_val at[2];
            double p0 = 0, p1 = 0;
            if (op == ERT_OP_LEAKY_RELU) {
                p0 = 0.01;
                if (rep) at[na++] = A_F("alpha", (float)(p0 = 0.25));
            } else if (op == ERT_OP_HARD_SIGMOID) {
                p0 = 0.2, p1 = 0.5;
                if (rep) at[na++] = A_F("alpha", (float)(p0 = 0.125)), at[na++] = A_F("beta", (float)(p1 = 0.375));
            } else if (op == ERT_OP_CLIP) {
                p0 = rep == 1 ? -INFINITY : -1.5, p1 = 2.25;
                in[1] = rep == 1 ? tt_omitted() : tt_scalar_f32((float)p0, true);
                in[2] = tt_scalar_f32((float)p1, true);
                n_in = 3;
            } else if (op == ERT_OP_ELU) {
                p0 = 1.0;
                if (rep) at[na++] = A_F("alpha", (float)(p0 = 0.375));
            } else if (op == ERT_OP_SELU) {
                p0 = 1.67326319217681884765625, p1 = 1.05070102214813232421875;
                if (rep) at[na++] = A_F("alpha", (float)(p0 = 2.5)), at[na++] = A_F("gamma", (float)(p1 = 0.75));
            } else if (op == ERT_OP_GELU) {
                gt = rep == 1;
                if (rep) at[na++] = A_S("approximate", gt ? "tanh" : "none");
            }
            tt out;
            int stage;
            ert_status st = run_op(ctx, op, at, na, in, n_in, &out, 1, &stage);
            CHECK(st == ERT_OK, "unary op %d: %s %s", op, ert_status_str(st), ert_last_error(ctx));
            if (st == ERT_OK) {
                int64_t n = tt_n(&in[0]);
                double *ref = malloc((size_t)n * sizeof *ref);
                for (int64_t i = 0; i < n; i++) ref[i] = ref_unary(op, ((float *)in[0].data)[i], p0, p1, gt);
                CHECK(same_shape(&out, nd, dims) && out.dt == ERT_DTYPE_F32, "unary op %d shape", op);
                char what[32];
                snprintf(what, sizeof what, "unary op %d", op);
                CHECK(ert_test_close(what, out.data, ref, n, 2e-6, 2e-6), "unary op %d values", op);
                free(ref);
                tt_free(&out);
            }
            for (int k = 0; k < n_in; k++) tt_free(&in[k]);
        }
    }
    /* integer Clip/Neg/Abs/Relu on every integer dtype, against exact references */
    static const ert_dtype idt[] = {ERT_DTYPE_I8, ERT_DTYPE_U8, ERT_DTYPE_I32, ERT_DTYPE_I64};
    static const ert_op iops[] = {ERT_OP_CLIP, ERT_OP_NEG, ERT_OP_ABS, ERT_OP_RELU};
    for (int di = 0; di < 4; di++)
        for (int oi = 0; oi < 4; oi++)
            for (int rep = 0; rep < 4; rep++) {
                ert_dtype dt = idt[di];
                ert_op op = iops[oi];
                int64_t dims[ERT_MAX_DIMS];
                int nd = rand_dims(&rng, 0, 3, 9, dims);
                bool u8 = dt == ERT_DTYPE_U8;
                tt in[3];
                in[0] = tt_new(dt, nd, dims);
                int n_in = 1;
                int64_t lo = u8 ? 0 : dt == ERT_DTYPE_I8 ? INT8_MIN : dt == ERT_DTYPE_I32 ? INT32_MIN : INT64_MIN;
                int64_t hi = u8 ? UINT8_MAX : dt == ERT_DTYPE_I8 ? INT8_MAX : dt == ERT_DTYPE_I32 ? INT32_MAX : INT64_MAX;
                int64_t n = tt_n(&in[0]), esz = (int64_t)ert_dtype_size(dt);
                /* values over the dtype's whole range (i64 beyond 2^53 too) */
                for (int64_t i = 0; i < n; i++) {
                    uint64_t r = 0;
                    for (int q = 0; q < 4; q++) r = r << 16 | (uint64_t)ert_test_int(&rng, 0, 0xffff);
                    memcpy((char *)in[0].data + i * esz, &r, (size_t)esz); /* little-endian: the low bytes */
                }
                if (op == ERT_OP_CLIP) {
                    /* rep 0: both bounds; 1: min only; 2: max only; 3: min > max (all max) */
                    int64_t a = u8 ? ert_test_int(&rng, 0, 120) : ert_test_int(&rng, -100, 20);
                    int64_t b = a + ert_test_int(&rng, 0, 100);
                    if (dt == ERT_DTYPE_I64 && rep == 0) a = INT64_MIN + 5, b = ((int64_t)1 << 60) + 1; /* exact, not via float */
                    if (rep == 3) { int64_t t = a; a = b + 1; b = t; }
                    tt bnd[2] = {tt_new(dt, 0, NULL), tt_new(dt, 1, (int64_t[]){1})};
                    memcpy(bnd[0].data, &a, (size_t)esz);
                    memcpy(bnd[1].data, &b, (size_t)esz);
                    bnd[0].cst = bnd[1].cst = true;
                    in[1] = rep == 2 ? (tt_free(&bnd[0]), tt_omitted()) : bnd[0];
                    in[2] = rep == 1 ? (tt_free(&bnd[1]), tt_omitted()) : bnd[1];
                    n_in = 3;
                    if (rep != 2) lo = a;
                    if (rep != 1) hi = b;
                }
                tt out;
                ert_status st = run_op(ctx, op, NULL, 0, in, n_in, &out, 1, NULL);
                CHECK(st == ERT_OK, "int unary op %d dt %s: %s", op, ert_dtype_name(dt), ert_last_error(ctx));
                if (st == ERT_OK) {
                    int64_t bad = 0;
                    for (int64_t i = 0; i < n; i++) {
                        /* read exactly (tt_get goes through double) */
                        int64_t x = 0, y = 0, want;
                        switch (dt) {
                        case ERT_DTYPE_I8: x = ((int8_t *)in[0].data)[i], y = ((int8_t *)out.data)[i]; break;
                        case ERT_DTYPE_U8: x = ((uint8_t *)in[0].data)[i], y = ((uint8_t *)out.data)[i]; break;
                        case ERT_DTYPE_I32: x = ((int32_t *)in[0].data)[i], y = ((int32_t *)out.data)[i]; break;
                        default: x = ((int64_t *)in[0].data)[i], y = ((int64_t *)out.data)[i]; break;
                        }
                        if (op == ERT_OP_CLIP) want = x > lo ? x : lo, want = want < hi ? want : hi;
                        else if (op == ERT_OP_RELU) want = x > 0 ? x : 0;
                        else {
                            /* two's complement wrap of -x (|MIN| stays MIN), then back to the dtype */
                            uint64_t m = (uint64_t)0 - (uint64_t)x;
                            int64_t negx = dt == ERT_DTYPE_I8 ? (int8_t)(uint8_t)m : u8 ? (uint8_t)m
                                         : dt == ERT_DTYPE_I32 ? (int32_t)(uint32_t)m : (int64_t)m;
                            want = op == ERT_OP_NEG ? negx : x < 0 ? negx : x;
                        }
                        bad += y != want;
                    }
                    CHECK(bad == 0 && out.dt == dt && same_shape(&out, nd, dims), "int unary op %d dt %s: %lld wrong",
                          op, ert_dtype_name(dt), (long long)bad);
                    tt_free(&out);
                }
                for (int k = 0; k < n_in; k++) tt_free(&in[k]);
            }
    /* integer Neg/Abs wrap at INT_MIN instead of overflowing */
    int64_t d4 = 4;
    tt x = tt_new(ERT_DTYPE_I32, 1, &d4), out;
    int32_t xv[4] = {INT32_MIN, -7, 0, 9};
    memcpy(x.data, xv, sizeof xv);
    CHECK_OK(run_op(ctx, ERT_OP_ABS, NULL, 0, &x, 1, &out, 1, NULL), ctx);
    if (out.data) {
        int32_t *y = out.data;
        CHECK(y[0] == INT32_MIN && y[1] == 7 && y[2] == 0 && y[3] == 9, "abs i32 %d %d %d %d", y[0], y[1], y[2], y[3]);
        tt_free(&out);
    }
    /* errors */
    tt c[3] = {tt_rand(&rng, 1, &d4, -1, 1), tt_scalar_f32(0, false), tt_omitted()};
    CHECK(run_op(ctx, ERT_OP_CLIP, NULL, 0, c, 3, &out, 1, NULL) == ERT_E_UNSUPPORTED, "clip runtime min");
    CHECK(strstr(ert_last_error(ctx), "constant") != NULL, "clip message: %s", ert_last_error(ctx));
    ert_attr_val ga = A_S("approximate", "fast");
    CHECK(run_op(ctx, ERT_OP_GELU, &ga, 1, c, 1, &out, 1, NULL) == ERT_E_UNSUPPORTED, "gelu bad approximate");
    CHECK(run_op(ctx, ERT_OP_SIGMOID, NULL, 0, &x, 1, &out, 1, NULL) == ERT_E_UNSUPPORTED, "sigmoid i32");
    CHECK(run_op(ctx, ERT_OP_ELU, NULL, 0, &x, 1, &out, 1, NULL) == ERT_E_UNSUPPORTED, "elu i32");
    /* integer Clip: bounds must be constants of x's dtype */
    tt ci[3] = {x, tt_new(ERT_DTYPE_I64, 0, NULL), tt_omitted()};
    ci[1].cst = true;
    CHECK(run_op(ctx, ERT_OP_CLIP, NULL, 0, ci, 3, &out, 1, NULL) == ERT_E_SHAPE, "clip i32 with an i64 bound");
    CHECK(strstr(ert_last_error(ctx), "i64") != NULL, "clip bound message: %s", ert_last_error(ctx));
    ci[1].cst = false;
    ci[1].dt = ERT_DTYPE_I32;
    CHECK(run_op(ctx, ERT_OP_CLIP, NULL, 0, ci, 3, &out, 1, NULL) == ERT_E_UNSUPPORTED, "clip i32 runtime bound");
    tt_free(&ci[1]);
    tt_free(&x);
    tt_free(&c[0]);
    tt_free(&c[1]);
}

/* ------------------------------------------------------------------ binary */

/* Random pair of shapes that broadcast: an output shape, then each side drops
 * some leading dims and turns some dims into 1. */
static void rand_bcast(int64_t *od, int *ond, int n_side, tt *sides, ert_dtype dt) {
    *ond = rand_dims(&rng, 0, 4, 6, od);
    for (int s = 0; s < n_side; s++) {
        int64_t d[ERT_MAX_DIMS];
        int drop = ert_test_int(&rng, 0, *ond);
        int nd = *ond - drop;
        for (int k = 0; k < nd; k++) d[k] = ert_test_int(&rng, 0, 2) == 0 ? 1 : od[drop + k];
        sides[s] = tt_new(dt, nd, d);
    }
}

static void fill_any(tt *t, double lo, double hi) {
    int64_t n = tt_n(t);
    for (int64_t i = 0; i < n; i++) {
        double v = ert_test_uniform(&rng, lo, hi);
        switch (t->dt) {
        case ERT_DTYPE_F32: ((float *)t->data)[i] = (float)v; break;
        case ERT_DTYPE_I32: ((int32_t *)t->data)[i] = (int32_t)floor(v); break;
        case ERT_DTYPE_I64: ((int64_t *)t->data)[i] = (int64_t)floor(v); break;
        case ERT_DTYPE_BOOL: ((uint8_t *)t->data)[i] = v > 0; break;
        default: ((uint8_t *)t->data)[i] = (uint8_t)(int)floor(v); break;
        }
    }
}

static double ref_binary(ert_op op, double a, double b, bool is_int) {
    switch (op) {
    case ERT_OP_ADD: return a + b;
    case ERT_OP_SUB: return a - b;
    case ERT_OP_MUL: return a * b;
    case ERT_OP_DIV:
        if (!is_int) return a / b;
        return b == 0 ? 0 : trunc(a / b);
    case ERT_OP_POW: return pow(a, b);
    case ERT_OP_MIN: return a < b ? a : b;
    case ERT_OP_MAX: return a > b ? a : b;
    case ERT_OP_EQUAL: return a == b;
    case ERT_OP_LESS: return a < b;
    case ERT_OP_GREATER: return a > b;
    default: return NAN;
    }
}

static void check_binary(ert_op op, tt *ab) {
    bool is_int = ab[0].dt != ERT_DTYPE_F32;
    tt out;
    ert_status st = run_op(ctx, op, NULL, 0, ab, 2, &out, 1, NULL);
    CHECK(st == ERT_OK, "binary op %d dt %d: %s %s", op, ab[0].dt, ert_status_str(st), ert_last_error(ctx));
    if (st) return;
    bool cmp = op == ERT_OP_EQUAL || op == ERT_OP_LESS || op == ERT_OP_GREATER;
    CHECK(out.dt == (cmp ? ERT_DTYPE_BOOL : ab[0].dt), "binary out dtype");
    int64_t n = tt_n(&out), idx[ERT_MAX_DIMS];
    double *ref = malloc((size_t)n * sizeof *ref);
    float *got = malloc((size_t)n * sizeof *got);
    for (int64_t i = 0; i < n; i++) {
        unflat(i, out.nd, out.dims, idx);
        ref[i] = ref_binary(op, tt_get(&ab[0], bcast_off(&ab[0], out.nd, idx)), tt_get(&ab[1], bcast_off(&ab[1], out.nd, idx)), is_int);
        got[i] = (float)tt_get(&out, i);
    }
    char what[48];
    snprintf(what, sizeof what, "binary op %d dt %d", op, ab[0].dt);
    CHECK(ert_test_close(what, got, ref, n, is_int || cmp ? 0.01 : 1e-6, is_int || cmp ? 0 : 1e-6), "%s", what);
    free(ref);
    free(got);
    tt_free(&out);
}

static void test_binary(void) {
    static const ert_op ops[] = {ERT_OP_ADD, ERT_OP_SUB, ERT_OP_MUL, ERT_OP_DIV, ERT_OP_POW,
                                 ERT_OP_MIN, ERT_OP_MAX, ERT_OP_EQUAL, ERT_OP_LESS, ERT_OP_GREATER};
    static const ert_dtype dts[] = {ERT_DTYPE_F32, ERT_DTYPE_I32, ERT_DTYPE_I64, ERT_DTYPE_I8}; /* i8: values stay in range */
    /* fixed shapes: (3,1,5)+(4,1), 0-d + (2,3), (N,C)+(C), (C,1)+(N... ), same shape big */
    static const int64_t fa[][4] = {{3, 3, 1, 5}, {0}, {2, 6, 7}, {2, 1, 3}, {1, 40000}};
    static const int64_t fb[][4] = {{2, 4, 1}, {2, 2, 3}, {1, 7}, {2, 4, 1}, {1, 40000}};
    for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
        for (size_t di = 0; di < 4; di++) {
            ert_dtype dt = dts[di];
            if (ops[oi] == ERT_OP_POW && dt != ERT_DTYPE_F32) continue;
            bool pw = ops[oi] == ERT_OP_POW;
            for (int rep = 0; rep < 4 + 5; rep++) {
                tt ab[2];
                if (rep < 5) {
                    ab[0] = tt_new(dt, (int)fa[rep][0], &fa[rep][1]);
                    ab[1] = tt_new(dt, (int)fb[rep][0], &fb[rep][1]);
                    if (rep == 4 && (oi % 3 != 0 || di)) { /* the big one for a few ops only */
                        tt_free(&ab[0]);
                        tt_free(&ab[1]);
                        continue;
                    }
                } else {
                    int64_t od[ERT_MAX_DIMS];
                    int ond;
                    rand_bcast(od, &ond, 2, ab, dt);
                }
                fill_any(&ab[0], pw ? 0.1 : -20, 20);
                fill_any(&ab[1], pw ? -2 : -5, pw ? 2 : 5); /* integer divisors include 0 */
                check_binary(ops[oi], ab);
                tt_free(&ab[0]);
                tt_free(&ab[1]);
            }
        }
    }
    /* Pow by a scalar 2 (the x*x fast path): negative bases, -0, an underflow, NaN */
    for (int rep = 0; rep < 4; rep++) {
        int64_t dx[2] = {ert_test_int(&rng, 1, 9), ert_test_int(&rng, 1, 300)}, one = 1;
        tt pw[2] = {tt_new(ERT_DTYPE_F32, 2, dx), tt_new(ERT_DTYPE_F32, rep % 2, &one)};
        fill_any(&pw[0], -30, 30);
        ((float *)pw[1].data)[0] = 2.0f;
        float *x = pw[0].data;
        x[0] = NAN;
        if (dx[0] * dx[1] > 2) x[1] = -0.0f, x[2] = -1e-20f;
        check_binary(ERT_OP_POW, pw);
        tt_free(&pw[0]);
        tt_free(&pw[1]);
    }
    /* Equal on bool */
    int64_t d3 = 3;
    tt bb[2] = {tt_new(ERT_DTYPE_BOOL, 1, &d3), tt_new(ERT_DTYPE_BOOL, 0, NULL)};
    fill_any(&bb[0], -1, 1);
    fill_any(&bb[1], -1, 1);
    check_binary(ERT_OP_EQUAL, bb);
    /* integer division edge cases: truncation toward zero, /0 -> 0, MIN/-1 wraps */
    int64_t d5 = 5;
    tt q[2] = {tt_new(ERT_DTYPE_I32, 1, &d5), tt_new(ERT_DTYPE_I32, 1, &d5)}, out;
    int32_t qa[5] = {-7, 7, -7, 5, INT32_MIN}, qb[5] = {2, -2, -2, 0, -1};
    memcpy(q[0].data, qa, sizeof qa);
    memcpy(q[1].data, qb, sizeof qb);
    CHECK_OK(run_op(ctx, ERT_OP_DIV, NULL, 0, q, 2, &out, 1, NULL), ctx);
    if (out.data) {
        int32_t *y = out.data;
        CHECK(y[0] == -3 && y[1] == -3 && y[2] == 3 && y[3] == 0 && y[4] == INT32_MIN, "int div %d %d %d %d %d", y[0],
              y[1], y[2], y[3], y[4]);
        tt_free(&out);
    }
    /* errors */
    int64_t s34[2] = {3, 4}, s5 = 5;
    tt e[2] = {tt_new(ERT_DTYPE_F32, 2, s34), tt_new(ERT_DTYPE_F32, 1, &s5)};
    CHECK(run_op(ctx, ERT_OP_ADD, NULL, 0, e, 2, &out, 1, NULL) == ERT_E_SHAPE, "incompatible broadcast");
    CHECK(strstr(ert_last_error(ctx), "broadcast") != NULL, "message: %s", ert_last_error(ctx));
    tt bq[2] = {bb[0], bb[0]};
    CHECK(run_op(ctx, ERT_OP_POW, NULL, 0, bq, 2, &out, 1, NULL) == ERT_E_UNSUPPORTED, "pow bool");
    /* shapes that are fine alone but whose broadcast overflows: checked, never allocated */
    tt h[2];
    memset(h, 0, sizeof h);
    h[0].dt = h[1].dt = ERT_DTYPE_F32;
    h[0].nd = h[1].nd = 2;
    h[0].dims[0] = h[1].dims[1] = (int64_t)1 << 40;
    h[0].dims[1] = h[1].dims[0] = 1;
    CHECK(run_op(ctx, ERT_OP_ADD, NULL, 0, h, 2, &out, 1, NULL) == ERT_E_SHAPE, "broadcast overflow");
    tt mix[2] = {e[0], q[0]};
    CHECK(run_op(ctx, ERT_OP_MUL, NULL, 0, mix, 2, &out, 1, NULL) == ERT_E_SHAPE, "dtype mismatch");
    for (int k = 0; k < 2; k++) tt_free(&bb[k]), tt_free(&q[k]), tt_free(&e[k]);
}

/* Variadic Min/Max (1 to 4 inputs, broadcast together) and Pow with mixed
 * base/exponent dtypes (output in the base's dtype, float -> int truncates). */
static void test_variadic_pow(void) {
    for (int rep = 0; rep < 24; rep++) {
        /* reps 16..23: Mean (f32 only), 1 to 4 inputs */
        ert_op op = rep >= 16 ? ERT_OP_MEAN : rep % 2 ? ERT_OP_MAX : ERT_OP_MIN;
        ert_dtype dt = rep >= 16 || rep % 4 < 2 ? ERT_DTYPE_F32 : ERT_DTYPE_I64;
        int n = 1 + rep % 4;
        tt in[4], out;
        int64_t od[ERT_MAX_DIMS];
        int ond;
        rand_bcast(od, &ond, n, in, dt);
        for (int k = 0; k < n; k++) fill_any(&in[k], -100, 100);
        ert_status st = run_op(ctx, op, NULL, 0, in, n, &out, 1, NULL);
        CHECK(st == ERT_OK, "variadic %d x%d: %s", op, n, ert_last_error(ctx));
        if (st == ERT_OK) {
            int64_t idx[ERT_MAX_DIMS], bad = 0, on = 1;
            /* the output shape is the broadcast of the inputs, which may be smaller than od */
            for (int d = 0; d < out.nd; d++) on *= out.dims[d];
            for (int64_t i = 0; i < on; i++) {
                unflat(i, out.nd, out.dims, idx);
                double want = tt_get(&in[0], bcast_off(&in[0], out.nd, idx));
                for (int k = 1; k < n; k++) {
                    double v = tt_get(&in[k], bcast_off(&in[k], out.nd, idx));
                    want = op == ERT_OP_MAX ? fmax(want, v) : op == ERT_OP_MIN ? fmin(want, v) : want + v;
                }
                if (op == ERT_OP_MEAN) {
                    want /= n;
                    bad += !(fabs(tt_get(&out, i) - want) <= 1e-5 * fabs(want) + 1e-5);
                } else {
                    bad += tt_get(&out, i) != want;
                }
            }
            CHECK(bad == 0 && out.dt == dt, "variadic %d x%d: %lld wrong", op, n, (long long)bad);
            tt_free(&out);
        }
        for (int k = 0; k < n; k++) tt_free(&in[k]);
    }
    {
        /* Mean is float-only; its inputs broadcast like Min/Max */
        int64_t d23[2] = {2, 3}, d4 = 4;
        tt mi[2] = {tt_new(ERT_DTYPE_I32, 2, d23), tt_new(ERT_DTYPE_I32, 2, d23)}, mo;
        CHECK(run_op(ctx, ERT_OP_MEAN, NULL, 0, mi, 2, &mo, 1, NULL) == ERT_E_UNSUPPORTED, "mean i32");
        tt mf[2] = {tt_new(ERT_DTYPE_F32, 2, d23), tt_new(ERT_DTYPE_F32, 1, &d4)};
        CHECK(run_op(ctx, ERT_OP_MEAN, NULL, 0, mf, 2, &mo, 1, NULL) == ERT_E_SHAPE, "mean bad broadcast");
        for (int k = 0; k < 2; k++) tt_free(&mi[k]), tt_free(&mf[k]);
    }
    static const ert_dtype pts[3] = {ERT_DTYPE_F32, ERT_DTYPE_I32, ERT_DTYPE_I64};
    for (int bi = 0; bi < 3; bi++)
        for (int ei = 0; ei < 3; ei++) {
            int64_t d6 = 6;
            tt in[2] = {tt_new(pts[bi], 1, &d6), tt_new(pts[ei], 0, NULL)}, out;
            fill_any(&in[0], 0, 9);
            fill_any(&in[1], 0, 3.5);
            ert_status st = run_op(ctx, ERT_OP_POW, NULL, 0, in, 2, &out, 1, NULL);
            CHECK(st == ERT_OK, "pow %d^%d: %s", bi, ei, ert_last_error(ctx));
            if (st == ERT_OK) {
                int bad = 0;
                for (int i = 0; i < 6; i++) {
                    double want = pow(tt_get(&in[0], i), tt_get(&in[1], 0));
                    if (bi) want = trunc(want);
                    bad += fabs(tt_get(&out, i) - want) > 1e-5 * fabs(want) + 1e-6;
                }
                CHECK(bad == 0 && out.dt == pts[bi], "pow %d^%d values", bi, ei);
                tt_free(&out);
            }
            tt_free(&in[0]);
            tt_free(&in[1]);
        }
}

/* ------------------------------------------------------------------ PRelu */

/* y = x < 0 ? slope * x : x, slope broadcast to x's shape (a suffix of x's
 * dims, some of them 1). */
static void test_prelu(void) {
    for (int rep = 0; rep < 30; rep++) {
        int64_t xd[ERT_MAX_DIMS], sd[ERT_MAX_DIMS];
        int nd = rand_dims(&rng, 0, 4, 7, xd);
        if (rep == 29) nd = 2, xd[0] = 211, xd[1] = 193; /* split across threads */
        int snd = ert_test_int(&rng, 0, nd);
        for (int k = 0; k < snd; k++) sd[k] = ert_test_int(&rng, 0, 1) ? xd[nd - snd + k] : 1;
        tt in[2] = {tt_rand(&rng, nd, xd, -4, 4), tt_rand(&rng, snd, sd, -2, 2)}, out;
        ert_status st = run_op(ctx, ERT_OP_PRELU, NULL, 0, in, 2, &out, 1, NULL);
        CHECK(st == ERT_OK, "prelu: %s", ert_last_error(ctx));
        if (st == ERT_OK) {
            int64_t n = tt_n(&in[0]), idx[ERT_MAX_DIMS];
            double *ref = malloc((size_t)n * sizeof *ref);
            for (int64_t i = 0; i < n; i++) {
                unflat(i, nd, xd, idx);
                double x = tt_get(&in[0], i), sl = tt_get(&in[1], bcast_off(&in[1], nd, idx));
                ref[i] = x < 0 ? sl * x : x;
            }
            CHECK(same_shape(&out, nd, xd) && ert_test_close("prelu", out.data, ref, n, 1e-6, 1e-6), "prelu values");
            free(ref);
            tt_free(&out);
        }
        tt_free(&in[0]);
        tt_free(&in[1]);
    }
    /* the slope may not widen x; integer PRelu is not implemented */
    int64_t d31[2] = {3, 1}, d34[2] = {3, 4};
    tt e[2] = {tt_new(ERT_DTYPE_F32, 2, d31), tt_new(ERT_DTYPE_F32, 2, d34)}, out;
    CHECK(run_op(ctx, ERT_OP_PRELU, NULL, 0, e, 2, &out, 1, NULL) == ERT_E_SHAPE, "prelu slope wider than x");
    CHECK(strstr(ert_last_error(ctx), "slope") != NULL, "prelu message: %s", ert_last_error(ctx));
    tt ei[2] = {tt_new(ERT_DTYPE_I32, 2, d34), tt_new(ERT_DTYPE_I32, 2, d31)};
    CHECK(run_op(ctx, ERT_OP_PRELU, NULL, 0, ei, 2, &out, 1, NULL) == ERT_E_UNSUPPORTED, "prelu i32");
    for (int k = 0; k < 2; k++) tt_free(&e[k]), tt_free(&ei[k]);
}

/* ------------------------------------------------------------------ ArgMax/ArgMin */

/* Reference: walk the axis for each output element; ties (small integer
 * values make many) resolve to the first or last index. */
static void test_arg(void) {
    static const ert_dtype dts[] = {ERT_DTYPE_F32, ERT_DTYPE_I32, ERT_DTYPE_I64, ERT_DTYPE_I8, ERT_DTYPE_U8};
    for (int rep = 0; rep < 60; rep++) {
        ert_op op = rep % 2 ? ERT_OP_ARGMIN : ERT_OP_ARGMAX;
        ert_dtype dt = dts[(rep / 2) % 5];
        bool keep = (rep / 10) % 2, last = (rep / 20) % 2;
        int64_t dims[ERT_MAX_DIMS];
        int nd = rand_dims(&rng, 1, 4, 6, dims);
        if (rep == 59) nd = 2, dims[0] = 300, dims[1] = 257; /* a larger one */
        tt x = tt_new(dt, nd, dims);
        /* few distinct values: ties are common */
        fill_any(&x, dt == ERT_DTYPE_U8 ? 0 : -3, 3);
        int64_t axis = ert_test_int(&rng, -nd, nd - 1), ax = axis < 0 ? axis + nd : axis;
        ert_attr_val at[3];
        int na = 0;
        if (rep % 3 || axis) at[na++] = A_I("axis", axis);
        if (!keep || rep % 4 == 0) at[na++] = A_I("keepdims", keep);
        if (last || rep % 5 == 0) at[na++] = A_I("select_last_index", last);
        tt out;
        ert_status st = run_op(ctx, op, at, na, &x, 1, &out, 1, NULL);
        CHECK(st == ERT_OK, "arg op %d dt %s: %s", op, ert_dtype_name(dt), ert_last_error(ctx));
        if (st == ERT_OK) {
            int64_t od[ERT_MAX_DIMS];
            int ond = 0;
            for (int d = 0; d < nd; d++)
                if (d != ax || keep) od[ond++] = d == ax ? 1 : dims[d];
            CHECK(out.dt == ERT_DTYPE_I64 && same_shape(&out, ond, od), "arg out shape");
            int64_t outer = 1, inner = 1, bad = 0;
            for (int d = 0; d < ax; d++) outer *= dims[d];
            for (int d = (int)ax + 1; d < nd; d++) inner *= dims[d];
            for (int64_t o = 0; o < outer; o++)
                for (int64_t i = 0; i < inner; i++) {
                    int64_t want = 0;
                    double best = tt_get(&x, o * dims[ax] * inner + i);
                    for (int64_t k = 1; k < dims[ax]; k++) {
                        double v = tt_get(&x, (o * dims[ax] + k) * inner + i);
                        bool better = op == ERT_OP_ARGMAX ? v > best : v < best;
                        if (better || (last && v == best)) best = v, want = k;
                    }
                    bad += ((int64_t *)out.data)[o * inner + i] != want;
                }
            CHECK(bad == 0, "arg op %d dt %s axis %lld keep %d last %d: %lld wrong", op, ert_dtype_name(dt),
                  (long long)axis, keep, last, (long long)bad);
            tt_free(&out);
        }
        tt_free(&x);
    }
    /* NaN wins (numpy: the first NaN); errors: axis out of range, non-INT axis, empty axis, bool */
    int64_t d5 = 5, d20[2] = {2, 0};
    tt x = tt_new(ERT_DTYPE_F32, 1, &d5), out;
    float xv[5] = {1, NAN, 7, NAN, -2};
    memcpy(x.data, xv, sizeof xv);
    ert_attr_val lastv = A_I("select_last_index", 1);
    for (int k = 0; k < 4; k++) {
        CHECK_OK(run_op(ctx, k % 2 ? ERT_OP_ARGMIN : ERT_OP_ARGMAX, &lastv, k / 2, &x, 1, &out, 1, NULL), ctx);
        if (out.data) {
            CHECK(*(int64_t *)out.data == (k / 2 ? 3 : 1), "arg NaN case %d: %lld", k, (long long)*(int64_t *)out.data);
            tt_free(&out);
        }
    }
    ert_attr_val bad_axis = A_I("axis", 1), fl_axis = A_F("axis", 0);
    CHECK(run_op(ctx, ERT_OP_ARGMAX, &bad_axis, 1, &x, 1, &out, 1, NULL) == ERT_E_ARG, "arg axis out of range");
    CHECK(strstr(ert_last_error(ctx), "out of range") != NULL, "arg axis message: %s", ert_last_error(ctx));
    CHECK(run_op(ctx, ERT_OP_ARGMIN, &fl_axis, 1, &x, 1, &out, 1, NULL) == ERT_E_ARG, "arg FLOAT axis");
    tt e = tt_new(ERT_DTYPE_F32, 2, d20);
    CHECK(run_op(ctx, ERT_OP_ARGMAX, &bad_axis, 1, &e, 1, &out, 1, NULL) == ERT_E_SHAPE, "arg empty axis");
    tt b = tt_new(ERT_DTYPE_BOOL, 1, &d5);
    CHECK(run_op(ctx, ERT_OP_ARGMAX, NULL, 0, &b, 1, &out, 1, NULL) == ERT_E_UNSUPPORTED, "arg bool");
    tt_free(&x);
    tt_free(&e);
    tt_free(&b);
}

/* ------------------------------------------------------------------ Where */

static void test_where(void) {
    static const ert_dtype dts[] = {ERT_DTYPE_F32, ERT_DTYPE_I64, ERT_DTYPE_U8, ERT_DTYPE_I32};
    for (int rep = 0; rep < 24; rep++) {
        ert_dtype dt = dts[rep % 4];
        tt in[3], out;
        int64_t od[ERT_MAX_DIMS];
        int ond;
        rand_bcast(od, &ond, 3, in, dt);
        tt c = tt_new(ERT_DTYPE_BOOL, in[0].nd, in[0].dims);
        tt_free(&in[0]);
        in[0] = c;
        fill_any(&in[0], -1, 1);
        fill_any(&in[1], 0, 100);
        fill_any(&in[2], 100, 200);
        ert_status st = run_op(ctx, ERT_OP_WHERE, NULL, 0, in, 3, &out, 1, NULL);
        CHECK(st == ERT_OK, "where: %s", ert_last_error(ctx));
        if (st == ERT_OK) {
            int64_t idx[ERT_MAX_DIMS], bad = 0;
            for (int64_t i = 0; i < tt_n(&out); i++) {
                unflat(i, out.nd, out.dims, idx);
                double want = tt_get(&in[0], bcast_off(&in[0], out.nd, idx)) ? tt_get(&in[1], bcast_off(&in[1], out.nd, idx))
                                                                            : tt_get(&in[2], bcast_off(&in[2], out.nd, idx));
                bad += tt_get(&out, i) != want;
            }
            CHECK(bad == 0 && out.dt == dt, "where dt %d: %lld wrong", dt, (long long)bad);
            tt_free(&out);
        }
        for (int k = 0; k < 3; k++) tt_free(&in[k]);
    }
    int64_t d2 = 2;
    tt w[3] = {tt_rand(&rng, 1, &d2, 0, 1), tt_rand(&rng, 1, &d2, 0, 1), tt_rand(&rng, 1, &d2, 0, 1)}, out;
    CHECK(run_op(ctx, ERT_OP_WHERE, NULL, 0, w, 3, &out, 1, NULL) == ERT_E_SHAPE, "where f32 condition");
    for (int k = 0; k < 3; k++) tt_free(&w[k]);
}

/* ------------------------------------------------------------------ reductions */

static void test_reduce(void) {
    static const ert_op ops[] = {ERT_OP_REDUCE_MEAN, ERT_OP_REDUCE_SUM, ERT_OP_REDUCE_MAX};
    for (int rep = 0; rep < 60; rep++) {
        ert_op op = ops[rep % 3];
        ert_dtype dt = (op != ERT_OP_REDUCE_MEAN && rep % 2) ? ERT_DTYPE_I64 : ERT_DTYPE_F32;
        int64_t dims[ERT_MAX_DIMS];
        int nd = rand_dims(&rng, 1, 4, 6, dims);
        tt in[2];
        in[0] = tt_new(dt, nd, dims);
        fill_any(&in[0], -50, 50);
        /* random subset of axes, written with random signs */
        int64_t axes[ERT_MAX_DIMS];
        bool red[ERT_MAX_DIMS] = {false};
        int na = 0;
        for (int d = 0; d < nd; d++)
            if (ert_test_int(&rng, 0, 1)) {
                red[d] = true;
                axes[na++] = ert_test_int(&rng, 0, 1) ? d - nd : d;
            }
        int keep = ert_test_int(&rng, 0, 1), noop = rep % 7 == 0;
        bool as_attr = rep % 5 == 0;
        ert_attr_val at[3];
        int nat = 0;
        at[nat++] = A_I("keepdims", keep);
        if (noop) at[nat++] = A_I("noop_with_empty_axes", 1);
        if (as_attr && na) at[nat++] = A_IS("axes", axes, na);
        in[1] = tt_ints(axes, na);
        int n_in = as_attr ? 1 : 2;
        if (na == 0 && !noop)
            for (int d = 0; d < nd; d++) red[d] = true;
        tt out;
        ert_status st = run_op(ctx, op, at, nat, in, n_in, &out, 1, NULL);
        CHECK(st == ERT_OK, "reduce %d: %s", op, ert_last_error(ctx));
        if (st == ERT_OK) {
            /* reference: accumulate each input element into its output slot */
            int64_t od[ERT_MAX_DIMS], ond = 0, kd[ERT_MAX_DIMS], nk = 0;
            for (int d = 0; d < nd; d++) {
                if (!red[d]) kd[nk++] = dims[d];
                if (!red[d] || keep) od[ond++] = red[d] ? 1 : dims[d];
            }
            int64_t no = 1, cnt = 1;
            for (int d = 0; d < nk; d++) no *= kd[d];
            for (int d = 0; d < nd; d++) cnt *= red[d] ? dims[d] : 1;
            double *ref = malloc((size_t)no * sizeof *ref);
            float *got = malloc((size_t)no * sizeof *got);
            for (int64_t i = 0; i < no; i++) ref[i] = op == ERT_OP_REDUCE_MAX ? -INFINITY : 0;
            int64_t idx[ERT_MAX_DIMS];
            for (int64_t i = 0; i < tt_n(&in[0]); i++) {
                unflat(i, nd, dims, idx);
                int64_t o = 0;
                for (int d = 0; d < nd; d++)
                    if (!red[d]) o = o * dims[d] + idx[d];
                double v = tt_get(&in[0], i);
                if (op == ERT_OP_REDUCE_MAX) ref[o] = fmax(ref[o], v);
                else ref[o] += v;
            }
            if (op == ERT_OP_REDUCE_MEAN)
                for (int64_t i = 0; i < no; i++) ref[i] /= (double)cnt;
            for (int64_t i = 0; i < no; i++) got[i] = (float)tt_get(&out, i);
            CHECK(same_shape(&out, (int)ond, od) && out.dt == dt, "reduce shape rank %d", out.nd);
            CHECK(tt_n(&out) == no && ert_test_close("reduce", got, ref, no, 1e-4, 1e-5), "reduce op %d dt %d", op, dt);
            free(ref);
            free(got);
            tt_free(&out);
        }
        tt_free(&in[0]);
        tt_free(&in[1]);
    }
    /* empty reductions: Sum 0, Max -inf, Mean NaN (0/0); and an empty output */
    {
        int64_t d0[2] = {3, 0}, a1 = 1, a0 = 0;
        tt e[2] = {tt_new(ERT_DTYPE_F32, 2, d0), tt_ints(&a1, 1)}, o;
        const ert_op rops[3] = {ERT_OP_REDUCE_SUM, ERT_OP_REDUCE_MAX, ERT_OP_REDUCE_MEAN};
        for (int k = 0; k < 3; k++) {
            CHECK_OK(run_op(ctx, rops[k], NULL, 0, e, 2, &o, 1, NULL), ctx);
            if (!o.data) continue;
            float v = ((float *)o.data)[2];
            CHECK(o.nd == 2 && o.dims[0] == 3 && o.dims[1] == 1 &&
                      (k == 0 ? v == 0 : k == 1 ? (isinf(v) && v < 0) : isnan(v)), "empty reduce %d: %g", k, (double)v);
            tt_free(&o);
        }
        tt_free(&e[1]);
        e[1] = tt_ints(&a0, 1);
        CHECK_OK(run_op(ctx, ERT_OP_REDUCE_SUM, NULL, 0, e, 2, &o, 1, NULL), ctx);
        if (o.data) {
            CHECK(o.nd == 2 && o.dims[0] == 1 && o.dims[1] == 0, "reduce to an empty output");
            tt_free(&o);
        }
        tt b3 = tt_new(ERT_DTYPE_F32, 1, d0);
        tt ab[2] = {e[0], b3};
        ab[1].dims[0] = 1;
        CHECK_OK(run_op(ctx, ERT_OP_MUL, NULL, 0, ab, 2, &o, 1, NULL), ctx);
        if (o.data) {
            CHECK(o.nd == 2 && o.dims[0] == 3 && o.dims[1] == 0, "empty broadcast");
            tt_free(&o);
        }
        tt_free(&b3);
        tt_free(&e[0]);
        tt_free(&e[1]);
    }
    /* errors: axis out of range, repeated, not constant */
    int64_t d23[2] = {2, 3}, bad[2] = {2, 0}, rep2[2] = {1, -1};
    tt in[2] = {tt_rand(&rng, 2, d23, 0, 1), tt_ints(bad, 1)}, out;
    CHECK(run_op(ctx, ERT_OP_REDUCE_SUM, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_ARG, "axis out of range");
    CHECK(strstr(ert_last_error(ctx), "out of range") != NULL, "message: %s", ert_last_error(ctx));
    tt_free(&in[1]);
    in[1] = tt_ints(rep2, 2);
    CHECK(run_op(ctx, ERT_OP_REDUCE_MAX, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_ARG, "repeated axis");
    in[1].cst = false;
    CHECK(run_op(ctx, ERT_OP_REDUCE_MEAN, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_UNSUPPORTED, "runtime axes");
    tt_free(&in[0]);
    tt_free(&in[1]);
}

/* ------------------------------------------------------------------ Identity, Dropout */

static void test_identity(void) {
    int64_t d[3] = {2, 3, 5};
    tt x = tt_new(ERT_DTYPE_I64, 3, d), out[2];
    fill_any(&x, -1e6, 1e6);
    CHECK_OK(run_op(ctx, ERT_OP_IDENTITY, NULL, 0, &x, 1, out, 1, NULL), ctx);
    if (out[0].data) {
        CHECK(same_shape(&out[0], 3, d) && memcmp(out[0].data, x.data, 30 * 8) == 0, "identity");
        tt_free(&out[0]);
    }
    CHECK_OK(run_op(ctx, ERT_OP_DROPOUT, NULL, 0, &x, 1, out, 2, NULL), ctx);
    if (out[0].data) {
        bool all = out[1].dt == ERT_DTYPE_BOOL && same_shape(&out[1], 3, d);
        for (int i = 0; i < 30 && all; i++) all = ((uint8_t *)out[1].data)[i] == 1;
        CHECK(memcmp(out[0].data, x.data, 30 * 8) == 0 && all, "dropout copy + mask");
        tt_free(&out[0]);
        tt_free(&out[1]);
    }
    tt_free(&x);
}

int main(void) {
    ert_test_rng_init(&rng, "ops_eltwise");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0 single-threaded (pool NULL), pass 1 through a 2-worker pool */
        if (pass == 1 && ert_threadpool_create(2, &oh_pool) != ERT_OK) break;
        test_unary();
        test_binary();
        test_variadic_pow();
        test_where();
        test_reduce();
        test_arg();
        test_prelu();
        test_identity();
    }
    ert_threadpool_free(oh_pool);
    ert_context_free(ctx);
    return ert_test_finish("ops_eltwise");
}

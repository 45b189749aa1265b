/* Sin, Cos and Mod on the CPU (kernels/cpu/math.c, core/ops/math.c):
 * random shapes (Mod with numpy broadcasting between random shapes), outputs
 * poisoned, against references computed here in double: Sin/Cos within 1e-6;
 * Mod exactly (integers from floor/trunc division in double on values below
 * 2^20; floats from double fmod, which is exact). Then the refused cases. */
#include "op_harness.h"

static ert_context *ctx;
static ert_test_rng rng;

static void test_trig(void) {
    for (int rep = 0; rep < 10; rep++) {
        int64_t d[4];
        int nd = rand_dims(&rng, 0, 4, 9, d);
        tt x = tt_rand(&rng, nd, d, -20, 20), y;
        ert_op op = rep % 2 ? ERT_OP_COS : ERT_OP_SIN;
        ert_status st = run_op(ctx, op, NULL, 0, &x, 1, &y, 1, NULL);
        CHECK(st == ERT_OK, "%s: %s (%s)", op == ERT_OP_SIN ? "sin" : "cos", ert_status_str(st), ert_last_error(ctx));
        if (st == ERT_OK) {
            double *ref = malloc((size_t)tt_n(&x) * sizeof *ref);
            for (int64_t i = 0; i < tt_n(&x); i++) ref[i] = op == ERT_OP_SIN ? sin(tt_get(&x, i)) : cos(tt_get(&x, i));
            bool ok = ert_test_close(op == ERT_OP_SIN ? "sin" : "cos", y.data, ref, tt_n(&x), 1e-6, 1e-6);
            CHECK(ok, "%s rank %d", op == ERT_OP_SIN ? "sin" : "cos", nd);
            free(ref);
            tt_free(&y);
        }
        tt_free(&x);
    }
}

/* Random broadcastable shapes: b's dims are a's (right-aligned) or 1, with a rank up to a's. */
static void test_mod(void) {
    static const ert_dtype dts[3] = {ERT_DTYPE_I32, ERT_DTYPE_I64, ERT_DTYPE_F32};
    for (int rep = 0; rep < 36; rep++) {
        ert_dtype dt = dts[rep % 3];
        bool fm = dt == ERT_DTYPE_F32 || (rep / 3) % 2;
        int64_t da[4], db[4];
        int na = rand_dims(&rng, 1, 4, 7, da), nb = ert_test_int(&rng, 1, na);
        for (int i = 0; i < nb; i++) db[i] = ert_test_int(&rng, 0, 2) ? da[na - nb + i] : 1;
        if (rep % 4 == 0) { /* broadcast the other way round too */
            int64_t t[4];
            for (int i = 0; i < na; i++) t[i] = da[i];
            for (int i = 0; i < na; i++) da[i] = i >= na - nb && ert_test_int(&rng, 0, 1) ? 1 : t[i];
            for (int i = 0; i < nb; i++) db[i] = t[na - nb + i];
        }
        tt in[2] = {tt_new(dt, na, da), tt_new(dt, nb, db)}, y;
        for (int k = 0; k < 2; k++)
            for (int64_t i = 0; i < tt_n(&in[k]); i++) {
                int v = ert_test_int(&rng, -1000, 1000);
                if (k == 1 && v == 0) v = 7; /* no division by zero in the reference */
                if (dt == ERT_DTYPE_I32) ((int32_t *)in[k].data)[i] = v;
                else if (dt == ERT_DTYPE_I64) ((int64_t *)in[k].data)[i] = v;
                else ((float *)in[k].data)[i] = (float)v / 8.0f;
            }
        ert_attr_val at = A_I("fmod", fm);
        ert_status st = run_op(ctx, ERT_OP_MOD, &at, 1, in, 2, &y, 1, NULL);
        CHECK(st == ERT_OK, "mod %s: %s (%s)", ert_dtype_name(dt), ert_status_str(st), ert_last_error(ctx));
        if (st == ERT_OK) {
            int64_t bad = -1, idx[4];
            for (int64_t i = 0; i < tt_n(&y) && bad < 0; i++) {
                unflat(i, y.nd, y.dims, idx);
                double p = tt_get(&in[0], bcast_off(&in[0], y.nd, idx)), q = tt_get(&in[1], bcast_off(&in[1], y.nd, idx));
                double want = dt == ERT_DTYPE_F32 ? fmod(p, q) : fm ? p - q * trunc(p / q) : p - q * floor(p / q);
                if (tt_get(&y, i) != want) bad = i;
            }
            CHECK(bad < 0, "mod %s fmod %d: element %lld wrong", ert_dtype_name(dt), fm, (long long)bad);
            tt_free(&y);
        }
        tt_free(&in[0]);
        tt_free(&in[1]);
    }
}

static void test_errors(void) {
    int64_t d = 4, d3 = 3;
    tt in[2] = {tt_new(ERT_DTYPE_F32, 1, &d), tt_new(ERT_DTYPE_F32, 1, &d)}, y;
    ert_attr_val at0 = A_I("fmod", 0);
    ert_status st = run_op(ctx, ERT_OP_MOD, &at0, 1, in, 2, &y, 1, NULL);
    CHECK(st == ERT_E_FORMAT, "float Mod with fmod 0: %s", ert_status_str(st));
    tt_free(&in[1]);
    in[1] = tt_new(ERT_DTYPE_F32, 1, &d3);
    ert_attr_val at1 = A_I("fmod", 1);
    st = run_op(ctx, ERT_OP_MOD, &at1, 1, in, 2, &y, 1, NULL);
    CHECK(st == ERT_E_SHAPE, "Mod of (4) and (3): %s", ert_status_str(st));
    tt_free(&in[1]);
    in[1] = tt_new(ERT_DTYPE_I32, 1, &d);
    st = run_op(ctx, ERT_OP_MOD, &at1, 1, in, 2, &y, 1, NULL);
    CHECK(st == ERT_E_SHAPE, "Mod of f32 and i32: %s", ert_status_str(st));
    /* integer division by zero gives 0, never a trap */
    tt_free(&in[0]);
    in[0] = tt_new(ERT_DTYPE_I32, 1, &d);
    for (int i = 0; i < 4; i++) ((int32_t *)in[0].data)[i] = i + 5;
    st = run_op(ctx, ERT_OP_MOD, &at0, 1, in, 2, &y, 1, NULL); /* in[1] is all zeros */
    CHECK(st == ERT_OK, "Mod by zero: %s", ert_status_str(st));
    if (st == ERT_OK) {
        CHECK(((int32_t *)y.data)[0] == 0 && ((int32_t *)y.data)[3] == 0, "Mod by zero gives 0");
        tt_free(&y);
    }
    tt_free(&in[0]);
    tt_free(&in[1]);
    in[0] = tt_new(ERT_DTYPE_I32, 1, &d);
    st = run_op(ctx, ERT_OP_SIN, NULL, 0, in, 1, &y, 1, NULL);
    CHECK(st == ERT_E_UNSUPPORTED, "Sin of i32: %s", ert_status_str(st));
    tt_free(&in[0]);
}

int main(void) {
    ert_test_rng_init(&rng, "ops_math");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    test_trig();
    test_mod();
    test_errors();
    ert_context_free(ctx);
    return ert_test_finish("ops_math");
}

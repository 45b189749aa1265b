/* ScatterND, ScatterElements, GatherElements and the new reductions on hostile
 * input (their numbers are checked against onnxruntime by tests/ops/ops_ort.py):
 * 1. index values out of range, constant (refused by prepare, ERT_E_ARG,
 *    naming the value) and computed (the kernel returns ERT_E_ARG before it
 *    writes anything), on random shapes, both signs;
 * 2. shapes and attributes that do not fit: wrong updates shape, k > rank,
 *    ranks that differ, an unknown reduction, a reduction on bool, i32
 *    indices for ScatterND, an axis out of range, ReduceL2 on i64. */
#include "op_harness.h"

static ert_context *ctx;
static ert_test_rng rng;

static void expect(const char *what, ert_op op, tt *in, int n_in, const ert_attr_val *at, int n_at, ert_status want,
                   int want_stage, const char *needle) {
    tt out;
    int stage = -1;
    ert_status st = run_op(ctx, op, at, n_at, in, n_in, &out, 1, &stage);
    if (st == ERT_OK) tt_free(&out);
    CHECK(st == want && stage == want_stage, "%s: got %s at stage %d, want %s at stage %d", what, ert_status_str(st),
          stage, ert_status_str(want), want_stage);
    if (needle) CHECK(strstr(ert_last_error(ctx), needle), "%s: message '%s' lacks '%s'", what, ert_last_error(ctx), needle);
}

/* One index of a random valid ScatterND / Elements set made out of range
 * (dim or -dim-1): constant -> prepare refuses, computed -> the kernel does. */
static void test_bad_indices(void) {
    for (int rep = 0; rep < 24; rep++) {
        int64_t d[4] = {1, 1, 1, 1};
        int nd = rand_dims(&rng, 1, 4, 6, d);
        bool computed = rep % 2, nd_op = rep % 3 == 0, gather = rep % 3 == 2;
        tt x = tt_rand(&rng, nd, d, -1, 1), ind, upd;
        int64_t axis = ert_test_int(&rng, 0, nd - 1);
        int64_t bad_dim;
        if (nd_op) {
            int64_t k = ert_test_int(&rng, 1, nd), n = ert_test_int(&rng, 1, 5), id[2] = {n, k}, ud[ERT_MAX_DIMS] = {n};
            ind = tt_new(ERT_DTYPE_I64, 2, id);
            for (int64_t i = 0; i < n * k; i++)
                ((int64_t *)ind.data)[i] = ert_test_int(&rng, 0, (int)d[i % k] - 1);
            int64_t j = ert_test_int(&rng, 0, (int)(n * k) - 1);
            bad_dim = d[j % k];
            ((int64_t *)ind.data)[j] = rep % 4 < 2 ? bad_dim : -bad_dim - 1;
            for (int t = (int)k; t < nd; t++) ud[1 + t - k] = d[t];
            upd = tt_rand(&rng, 1 + nd - (int)k, ud, -1, 1);
        } else {
            int64_t idims[ERT_MAX_DIMS];
            for (int t = 0; t < nd; t++) idims[t] = ert_test_int(&rng, 1, (int)d[t]);
            ind = tt_new(ERT_DTYPE_I64, nd, idims);
            for (int64_t i = 0; i < tt_n(&ind); i++) ((int64_t *)ind.data)[i] = ert_test_int(&rng, 0, (int)d[axis] - 1);
            bad_dim = d[axis];
            ((int64_t *)ind.data)[ert_test_int(&rng, 0, (int)tt_n(&ind) - 1)] = rep % 4 < 2 ? bad_dim : -bad_dim - 1;
            upd = tt_rand(&rng, nd, idims, -1, 1);
        }
        ind.cst = !computed;
        tt in[3] = {x, ind, upd};
        ert_attr_val at = A_I("axis", axis);
        ert_op op = nd_op ? ERT_OP_SCATTER_ND : gather ? ERT_OP_GATHER_ELEMENTS : ERT_OP_SCATTER_ELEMENTS;
        char what[96];
        snprintf(what, sizeof what, "%s rank %d, %s bad index", ert_op_get(op)->name, nd, computed ? "computed" : "constant");
        if (computed) {
            expect(what, op, in, gather ? 2 : 3, &at, nd_op ? 0 : 1, ERT_E_ARG, 1, NULL);
        } else {
            expect(what, op, in, gather ? 2 : 3, &at, nd_op ? 0 : 1, ERT_E_ARG, 0, "out of range");
        }
        tt_free(&x);
        tt_free(&ind);
        tt_free(&upd);
    }
}

static void test_bad_shapes(void) {
    int64_t d[3] = {4, 5, 3}, id[2] = {2, 2}, ud_ok[2] = {2, 3}, ud_bad[2] = {2, 4}, k4[2] = {1, 4}, v[4] = {0, 1, 2, 3};
    tt x = tt_rand(&rng, 3, d, -1, 1);
    tt ind = tt_new(ERT_DTYPE_I64, 2, id);
    memcpy(ind.data, v, sizeof v);
    ind.cst = true;
    tt upd = tt_rand(&rng, 2, ud_bad, -1, 1);
    tt in[3] = {x, ind, upd};
    expect("ScatterND updates (2,4) for data[2:] (3)", ERT_OP_SCATTER_ND, in, 3, NULL, 0, ERT_E_SHAPE, 0, "updates' shape");
    tt_free(&in[2]);
    in[2] = tt_rand(&rng, 2, ud_ok, -1, 1);
    tt out;
    CHECK(run_op(ctx, ERT_OP_SCATTER_ND, NULL, 0, in, 3, &out, 1, NULL) == ERT_OK, "ScatterND valid: %s", ert_last_error(ctx));
    tt_free(&out);
    ert_attr_val red = A_S("reduction", "sum");
    expect("ScatterND reduction 'sum'", ERT_OP_SCATTER_ND, in, 3, &red, 1, ERT_E_FORMAT, 0, "reduction");
    tt i32 = tt_new(ERT_DTYPE_I32, 2, id);
    i32.cst = true;
    tt in32[3] = {x, i32, in[2]};
    expect("ScatterND i32 indices", ERT_OP_SCATTER_ND, in32, 3, NULL, 0, ERT_E_SHAPE, 0, "i64");
    tt_free(&i32);
    tt big = tt_new(ERT_DTYPE_I64, 2, k4);
    big.cst = true;
    tt inb[3] = {x, big, in[2]};
    expect("ScatterND k 4 > rank 3", ERT_OP_SCATTER_ND, inb, 3, NULL, 0, ERT_E_SHAPE, 0, "last dim");
    tt_free(&big);
    /* bool data with a reduction */
    tt xb = tt_new(ERT_DTYPE_BOOL, 3, d), ub = tt_new(ERT_DTYPE_BOOL, 2, ud_ok);
    tt inbool[3] = {xb, ind, ub};
    ert_attr_val add = A_S("reduction", "add");
    expect("ScatterND add on bool", ERT_OP_SCATTER_ND, inbool, 3, &add, 1, ERT_E_UNSUPPORTED, 0, "reduction");
    tt_free(&xb);
    tt_free(&ub);
    /* Elements: indices of another rank; a dim beyond data's; axis 3 of rank 3 */
    tt ie[2] = {x, ind};
    expect("GatherElements rank 2 indices, rank 3 data", ERT_OP_GATHER_ELEMENTS, ie, 2, NULL, 0, ERT_E_SHAPE, 0, "rank");
    int64_t wide[3] = {1, 6, 1};
    tt iw = tt_new(ERT_DTYPE_I64, 3, wide);
    tt inw[2] = {x, iw};
    expect("GatherElements indices dim 6 > 5 off the axis", ERT_OP_GATHER_ELEMENTS, inw, 2, NULL, 0, ERT_E_SHAPE, 0, "dim 1");
    ert_attr_val ax3 = A_I("axis", 3);
    expect("GatherElements axis 3 of rank 3", ERT_OP_GATHER_ELEMENTS, inw, 2, &ax3, 1, ERT_E_ARG, 0, "axis");
    tt_free(&iw);
    /* ReduceL2 over i64 */
    tt xi = tt_new(ERT_DTYPE_I64, 3, d);
    expect("ReduceL2 on i64", ERT_OP_REDUCE_L2, &xi, 1, NULL, 0, ERT_E_UNSUPPORTED, 0, "dtype");
    tt_free(&xi);
    tt_free(&x);
    tt_free(&ind);
    tt_free(&in[2]);
}

int main(void) {
    ert_test_rng_init(&rng, "ops_scatter");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    test_bad_indices();
    test_bad_shapes();
    ert_context_free(ctx);
    return ert_test_finish("ops_scatter");
}

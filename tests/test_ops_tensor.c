/* Data-movement and shape ops through prepare + ert_cpu_run_node, each against
 * plain index arithmetic written here: Flatten, Reshape, Squeeze, Unsqueeze,
 * Transpose, Concat, Split, Slice, Gather, Pad, Resize, Expand, Cast, Shape,
 * ConstantOfShape, Range; plus their error paths. */
#include "op_harness.h"

static ert_context *ctx;
static ert_test_rng rng;

/* Random data of any dtype: distinct-ish values so misplaced elements show. */
static tt rand_t(ert_dtype dt, int nd, const int64_t *dims) {
    tt t = tt_new(dt, nd, dims);
    int64_t n = tt_n(&t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = ert_test_u64(&rng);
        switch (dt) {
        case ERT_DTYPE_F32: ((float *)t.data)[i] = (float)ert_test_uniform(&rng, -100, 100); break;
        case ERT_DTYPE_I64: ((int64_t *)t.data)[i] = (int64_t)r; break;
        case ERT_DTYPE_I32: ((int32_t *)t.data)[i] = (int32_t)r; break;
        case ERT_DTYPE_F16: ((uint16_t *)t.data)[i] = (uint16_t)(r & 0x7bff); break;
        default: ((uint8_t *)t.data)[i] = (uint8_t)r; break;
        }
    }
    return t;
}

static const ert_dtype DTS[] = {ERT_DTYPE_F32, ERT_DTYPE_U8, ERT_DTYPE_F16, ERT_DTYPE_I64};

/* out element i must equal x element src(i) byte for byte. */
static bool same_elem(const tt *out, int64_t i, const tt *x, int64_t j) {
    size_t es = ert_dtype_size(x->dt);
    return memcmp((const char *)out->data + i * (int64_t)es, (const char *)x->data + j * (int64_t)es, es) == 0;
}

static int64_t flat(int n, const int64_t *dims, const int64_t *idx) {
    int64_t o = 0;
    for (int d = 0; d < n; d++) o = o * dims[d] + idx[d];
    return o;
}

/* ------------------------------------------------------------------ views */

static void test_views(void) {
    int64_t d[4] = {2, 3, 1, 5};
    tt x = rand_t(ERT_DTYPE_F32, 4, d), out;
    /* Flatten, every axis */
    for (int ax = -4; ax <= 4; ax++) {
        ert_attr_val a = A_I("axis", ax);
        CHECK_OK(run_op(ctx, ERT_OP_FLATTEN, &a, 1, &x, 1, &out, 1, NULL), ctx);
        if (!out.data) continue;
        int p = ax < 0 ? ax + 4 : ax;
        int64_t l = 1;
        for (int k = 0; k < p; k++) l *= d[k];
        int64_t want[2] = {l, 30 / l};
        CHECK(same_shape(&out, 2, want) && memcmp(out.data, x.data, 30 * 4) == 0, "flatten axis %d", ax);
        tt_free(&out);
    }
    /* Reshape: 0 copies, -1 inferred, allowzero */
    struct { int n; int64_t s[4]; int allowzero; int64_t want[4]; int wn; ert_status st; } rc[] = {
        {3, {0, -1, 5}, 0, {2, 3, 5}, 3, ERT_OK},
        {2, {-1, 10}, 0, {3, 10}, 2, ERT_OK},
        {1, {30}, 0, {30}, 1, ERT_OK},
        {4, {5, 0, 2, -1}, 0, {5, 3, 2, 1}, 4, ERT_OK},
        {2, {7, -1}, 0, {0}, 0, ERT_E_SHAPE},
        {2, {6, 6}, 0, {0}, 0, ERT_E_SHAPE},
        {3, {-1, -1, 5}, 0, {0}, 0, ERT_E_SHAPE},
        {2, {0, 15}, 1, {0}, 0, ERT_E_SHAPE}, /* allowzero: 0 is a real zero */
        {2, {-3, -10}, 0, {0}, 0, ERT_E_SHAPE},
    };
    for (size_t i = 0; i < sizeof rc / sizeof rc[0]; i++) {
        tt in[2] = {x, tt_ints(rc[i].s, rc[i].n)};
        ert_attr_val a = A_I("allowzero", rc[i].allowzero);
        ert_status st = run_op(ctx, ERT_OP_RESHAPE, &a, 1, in, 2, &out, 1, NULL);
        CHECK(st == rc[i].st, "reshape case %zu: %s %s", i, ert_status_str(st), ert_last_error(ctx));
        if (st == ERT_OK) {
            CHECK(same_shape(&out, rc[i].wn, rc[i].want) && memcmp(out.data, x.data, 30 * 4) == 0, "reshape case %zu", i);
            tt_free(&out);
        }
        tt_free(&in[1]);
    }
    int64_t s77[2] = {7, 7};
    tt rin[2] = {x, tt_ints(s77, 2)};
    CHECK(run_op(ctx, ERT_OP_RESHAPE, NULL, 0, rin, 2, &out, 1, NULL) == ERT_E_SHAPE &&
              strstr(ert_last_error(ctx), "49") != NULL, "reshape count message: %s", ert_last_error(ctx));
    rin[1].cst = false;
    CHECK(run_op(ctx, ERT_OP_RESHAPE, NULL, 0, rin, 2, &out, 1, NULL) == ERT_E_UNSUPPORTED, "reshape runtime shape");
    tt_free(&rin[1]);
    /* Squeeze: all 1-dims, listed axes, non-1 axis */
    int64_t sq_all[3] = {2, 3, 5}, ax2[1] = {-2}, ax1[1] = {1};
    CHECK_OK(run_op(ctx, ERT_OP_SQUEEZE, NULL, 0, &x, 1, &out, 1, NULL), ctx);
    if (out.data) {
        CHECK(same_shape(&out, 3, sq_all) && memcmp(out.data, x.data, 120) == 0, "squeeze all");
        tt_free(&out);
    }
    tt sin[2] = {x, tt_ints(ax2, 1)};
    CHECK_OK(run_op(ctx, ERT_OP_SQUEEZE, NULL, 0, sin, 2, &out, 1, NULL), ctx);
    if (out.data) {
        CHECK(same_shape(&out, 3, sq_all), "squeeze -2");
        tt_free(&out);
    }
    tt_free(&sin[1]);
    sin[1] = tt_ints(ax1, 1);
    CHECK(run_op(ctx, ERT_OP_SQUEEZE, NULL, 0, sin, 2, &out, 1, NULL) == ERT_E_SHAPE, "squeeze non-1 dim");
    tt_free(&sin[1]);
    /* Unsqueeze: axes in output rank, negative, sorted or not */
    int64_t ua[3] = {-1, 0, 3}, uw[7] = {1, 2, 3, 1, 1, 5, 1};
    sin[1] = tt_ints(ua, 3);
    CHECK_OK(run_op(ctx, ERT_OP_UNSQUEEZE, NULL, 0, sin, 2, &out, 1, NULL), ctx);
    if (out.data) {
        CHECK(same_shape(&out, 7, uw) && memcmp(out.data, x.data, 120) == 0, "unsqueeze");
        tt_free(&out);
    }
    tt_free(&sin[1]);
    int64_t ub[2] = {0, -7};
    sin[1] = tt_ints(ub, 2);
    CHECK(run_op(ctx, ERT_OP_UNSQUEEZE, NULL, 0, sin, 2, &out, 1, NULL) == ERT_E_ARG, "unsqueeze repeated axis");
    tt_free(&sin[1]);
    tt_free(&x);
}

/* ------------------------------------------------------------------ Transpose */

static void test_transpose(void) {
    for (int rep = 0; rep < 40; rep++) {
        int64_t d[ERT_MAX_DIMS], perm[ERT_MAX_DIMS];
        int nd = rand_dims(&rng, rep == 0 ? 0 : 1, 5, 5, d);
        tt x = rand_t(DTS[rep % 4], nd, d), out;
        for (int k = 0; k < nd; k++) perm[k] = k;
        for (int k = nd - 1; k > 0; k--) { /* Fisher-Yates */
            int j = ert_test_int(&rng, 0, k);
            int64_t t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
        bool dflt = rep % 6 == 0;
        if (dflt)
            for (int k = 0; k < nd; k++) perm[k] = nd - 1 - k;
        ert_attr_val a = A_IS("perm", perm, nd);
        ert_status st = run_op(ctx, ERT_OP_TRANSPOSE, &a, dflt ? 0 : 1, &x, 1, &out, 1, NULL);
        CHECK(st == ERT_OK, "transpose: %s", ert_last_error(ctx));
        if (st == ERT_OK) {
            int64_t od[ERT_MAX_DIMS], oi[ERT_MAX_DIMS], xi[ERT_MAX_DIMS], bad = 0;
            for (int k = 0; k < nd; k++) od[k] = d[perm[k]];
            CHECK(same_shape(&out, nd, od), "transpose shape");
            for (int64_t i = 0; i < tt_n(&out); i++) {
                unflat(i, nd, od, oi);
                for (int k = 0; k < nd; k++) xi[perm[k]] = oi[k];
                bad += !same_elem(&out, i, &x, flat(nd, d, xi));
            }
            CHECK(bad == 0, "transpose rank %d: %lld wrong", nd, (long long)bad);
            tt_free(&out);
        }
        tt_free(&x);
    }
    int64_t d3[3] = {2, 3, 4}, p_dup[3] = {0, 1, 1}, p_big[3] = {0, 1, 3}, p_short[2] = {1, 0};
    tt x = rand_t(ERT_DTYPE_F32, 3, d3), out;
    ert_attr_val a = A_IS("perm", p_dup, 3);
    CHECK(run_op(ctx, ERT_OP_TRANSPOSE, &a, 1, &x, 1, &out, 1, NULL) == ERT_E_ARG &&
              strstr(ert_last_error(ctx), "permutation") != NULL, "transpose dup perm: %s", ert_last_error(ctx));
    a = A_IS("perm", p_big, 3);
    CHECK(run_op(ctx, ERT_OP_TRANSPOSE, &a, 1, &x, 1, &out, 1, NULL) == ERT_E_ARG, "transpose perm out of range");
    a = A_IS("perm", p_short, 2);
    CHECK(run_op(ctx, ERT_OP_TRANSPOSE, &a, 1, &x, 1, &out, 1, NULL) == ERT_E_ARG, "transpose perm length");
    tt_free(&x);
}

/* ------------------------------------------------------------------ Concat, Split */

static void test_concat_split(void) {
    for (int rep = 0; rep < 30; rep++) {
        int64_t d[ERT_MAX_DIMS];
        int nd = rand_dims(&rng, 1, 4, 5, d);
        int ax = ert_test_int(&rng, 0, nd - 1), nin = ert_test_int(&rng, 1, 4);
        ert_dtype dt = DTS[rep % 4];
        tt in[24], out; /* 24: the harness's bound, so gcc sees no overrun */
        int64_t total = 0, sizes[4];
        for (int k = 0; k < nin; k++) {
            d[ax] = sizes[k] = ert_test_int(&rng, 0, 4);
            total += sizes[k];
            in[k] = rand_t(dt, nd, d);
        }
        ert_attr_val a = A_I("axis", rep % 2 ? ax - nd : ax);
        ert_status st = run_op(ctx, ERT_OP_CONCAT, &a, 1, in, nin, &out, 1, NULL);
        CHECK(st == ERT_OK, "concat: %s", ert_last_error(ctx));
        d[ax] = total;
        if (st == ERT_OK) {
            int64_t idx[ERT_MAX_DIMS], bad = 0;
            CHECK(same_shape(&out, nd, d), "concat shape");
            for (int64_t i = 0; i < tt_n(&out); i++) {
                unflat(i, nd, d, idx);
                int k = 0;
                while (idx[ax] >= sizes[k]) idx[ax] -= sizes[k++];
                bad += !same_elem(&out, i, &in[k], flat(nd, in[k].dims, idx));
            }
            CHECK(bad == 0, "concat %lld wrong", (long long)bad);
            /* Split the result back with the sizes as an input: must give the inputs */
            tt sp[2] = {out, tt_ints(sizes, nin)}, parts[24];
            st = run_op(ctx, ERT_OP_SPLIT, &a, 1, sp, 2, parts, nin, NULL);
            CHECK(st == ERT_OK, "split: %s", ert_last_error(ctx));
            for (int k = 0; k < nin && st == ERT_OK; k++) {
                size_t b = (size_t)tt_n(&in[k]) * ert_dtype_size(dt);
                CHECK(same_shape(&parts[k], nd, in[k].dims) && (b == 0 || memcmp(parts[k].data, in[k].data, b) == 0), "split part %d", k);
                tt_free(&parts[k]);
            }
            tt_free(&sp[1]);
            tt_free(&out);
        }
        for (int k = 0; k < nin; k++) tt_free(&in[k]);
    }
    /* equal / uneven splits without sizes (opset 18 num_outputs) */
    int64_t d7[2] = {7, 3};
    tt x = rand_t(ERT_DTYPE_F32, 2, d7), parts[4];
    ert_attr_val at[2] = {A_I("axis", 0), A_I("num_outputs", 3)};
    CHECK_OK(run_op(ctx, ERT_OP_SPLIT, at, 2, &x, 1, parts, 3, NULL), ctx);
    if (parts[0].data) {
        CHECK(parts[0].dims[0] == 3 && parts[1].dims[0] == 3 && parts[2].dims[0] == 1, "uneven split");
        CHECK(memcmp(parts[2].data, (float *)x.data + 18, 12) == 0 && memcmp(parts[1].data, (float *)x.data + 9, 36) == 0, "uneven split data");
        for (int k = 0; k < 3; k++) tt_free(&parts[k]);
    }
    ert_attr_val a1 = A_I("axis", -1);
    CHECK_OK(run_op(ctx, ERT_OP_SPLIT, &a1, 1, &x, 1, parts, 3, NULL), ctx);
    if (parts[0].data) {
        bool ok = true;
        for (int k = 0; k < 3; k++)
            for (int r = 0; r < 7; r++) ok = ok && ((float *)parts[k].data)[r] == ((float *)x.data)[r * 3 + k];
        CHECK(ok && parts[1].dims[1] == 1, "equal split on last axis");
        for (int k = 0; k < 3; k++) tt_free(&parts[k]);
    }
    int64_t bad_sizes[2] = {3, 3};
    tt sp[2] = {x, tt_ints(bad_sizes, 2)};
    CHECK(run_op(ctx, ERT_OP_SPLIT, at, 1, sp, 2, parts, 2, NULL) == ERT_E_SHAPE, "split sizes sum");
    tt_free(&sp[1]);
    /* Concat errors */
    int64_t d8[2] = {7, 4};
    tt c[2] = {x, rand_t(ERT_DTYPE_F32, 2, d8)}, out;
    CHECK(run_op(ctx, ERT_OP_CONCAT, at, 1, c, 2, &out, 1, NULL) == ERT_E_SHAPE, "concat other dim differs");
    ert_attr_val a9 = A_I("axis", 2);
    CHECK(run_op(ctx, ERT_OP_CONCAT, &a9, 1, c, 2, &out, 1, NULL) == ERT_E_ARG, "concat axis out of range");
    tt_free(&c[1]);
    tt_free(&x);
}

/* ------------------------------------------------------------------ Slice */

/* Reference: enumerate the selected indices of one dim per the ONNX spec. */
static int ref_slice_dim(int64_t dim, int64_t s, int64_t e, int64_t step, int64_t *sel) {
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int n = 0;
    if (step > 0) {
        if (s < 0) s = 0;
        if (s > dim) s = dim;
        if (e > dim) e = dim;
        for (int64_t k = s; k < e; k += step) sel[n++] = k;
    } else {
        if (s < 0) s = 0;
        if (s > dim - 1) s = dim - 1;
        if (e < -1) e = -1;
        for (int64_t k = s; k > e; k += step) {
            sel[n++] = k;
            if (k + step <= e) break; /* also keeps k + step from overflowing */
        }
    }
    return n;
}

static void test_slice(void) {
    /* known answers on arange(10) */
    struct { int64_t s, e, st; int n; int64_t want[10]; } kc[] = {
        {-3, INT64_MAX, 1, 3, {7, 8, 9}},
        {8, 1, -3, 3, {8, 5, 2}},
        {INT64_MAX, INT64_MIN, -1, 10, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
        {-1, -100, -2, 5, {9, 7, 5, 3, 1}},
        {2, 2, 1, 0, {0}},
        {-100, 100, 4, 3, {0, 4, 8}},
        {5, 0, INT64_MIN, 1, {5}},
    };
    int64_t d10 = 10;
    tt x = tt_new(ERT_DTYPE_I64, 1, &d10), out;
    for (int i = 0; i < 10; i++) ((int64_t *)x.data)[i] = i;
    for (size_t i = 0; i < sizeof kc / sizeof kc[0]; i++) {
        tt in[5] = {x, tt_ints(&kc[i].s, 1), tt_ints(&kc[i].e, 1), tt_omitted(), tt_ints(&kc[i].st, 1)};
        ert_status st = run_op(ctx, ERT_OP_SLICE, NULL, 0, in, 5, &out, 1, NULL);
        CHECK(st == ERT_OK, "slice known %zu: %s", i, ert_last_error(ctx));
        if (st == ERT_OK) {
            bool ok = out.nd == 1 && out.dims[0] == kc[i].n;
            for (int k = 0; ok && k < kc[i].n; k++) ok = ((int64_t *)out.data)[k] == kc[i].want[k];
            CHECK(ok, "slice known case %zu (got %lld elems)", i, (long long)out.dims[0]);
            tt_free(&out);
        }
        for (int k = 1; k < 5; k++) tt_free(&in[k]);
    }
    tt_free(&x);
    /* random N-D slices vs enumeration */
    for (int rep = 0; rep < 40; rep++) {
        int64_t d[ERT_MAX_DIMS], s[ERT_MAX_DIMS], e[ERT_MAX_DIMS], ax[ERT_MAX_DIMS], st[ERT_MAX_DIMS];
        int nd = rand_dims(&rng, 1, 4, 7, d), na = 0;
        int64_t sel[ERT_MAX_DIMS][64], nsel[ERT_MAX_DIMS];
        for (int k = 0; k < nd; k++) {
            nsel[k] = d[k];
            for (int64_t i = 0; i < d[k]; i++) sel[k][i] = i;
            if (ert_test_int(&rng, 0, 3) == 0) continue; /* dim not sliced */
            ax[na] = ert_test_int(&rng, 0, 1) ? k - nd : k;
            s[na] = ert_test_int(&rng, -9, 9);
            e[na] = ert_test_int(&rng, 0, 5) == 0 ? (ert_test_int(&rng, 0, 1) ? INT64_MAX : INT64_MIN) : ert_test_int(&rng, -9, 9);
            st[na] = ert_test_int(&rng, 1, 3) * (ert_test_int(&rng, 0, 1) ? 1 : -1);
            nsel[k] = ref_slice_dim(d[k], s[na], e[na], st[na], sel[k]);
            na++;
        }
        tt in[5] = {rand_t(DTS[rep % 4], nd, d), tt_ints(s, na), tt_ints(e, na), tt_ints(ax, na), tt_ints(st, na)};
        ert_status r = run_op(ctx, ERT_OP_SLICE, NULL, 0, in, 5, &out, 1, NULL);
        CHECK(r == ERT_OK, "slice: %s", ert_last_error(ctx));
        if (r == ERT_OK) {
            CHECK(same_shape(&out, nd, nsel), "slice shape");
            int64_t oi[ERT_MAX_DIMS], xi[ERT_MAX_DIMS], bad = 0;
            for (int64_t i = 0; i < tt_n(&out) && same_shape(&out, nd, nsel); i++) {
                unflat(i, nd, nsel, oi);
                for (int k = 0; k < nd; k++) xi[k] = sel[k][oi[k]];
                bad += !same_elem(&out, i, &in[0], flat(nd, d, xi));
            }
            CHECK(bad == 0, "slice %lld wrong", (long long)bad);
            tt_free(&out);
        }
        for (int k = 0; k < 5; k++) tt_free(&in[k]);
    }
    /* errors: zero step, repeated axis */
    int64_t d2[2] = {3, 4}, z[1] = {0}, one[1] = {1}, axr[2] = {1, -1}, two[2] = {0, 0};
    tt in[5] = {rand_t(ERT_DTYPE_F32, 2, d2), tt_ints(z, 1), tt_ints(one, 1), tt_omitted(), tt_ints(z, 1)};
    CHECK(run_op(ctx, ERT_OP_SLICE, NULL, 0, in, 5, &out, 1, NULL) == ERT_E_ARG, "slice step 0");
    tt in2[4] = {in[0], tt_ints(two, 2), tt_ints(two, 2), tt_ints(axr, 2)};
    CHECK(run_op(ctx, ERT_OP_SLICE, NULL, 0, in2, 4, &out, 1, NULL) == ERT_E_ARG, "slice repeated axis");
    for (int k = 0; k < 5; k++) tt_free(&in[k]);
    for (int k = 1; k < 4; k++) tt_free(&in2[k]);
}

/* ------------------------------------------------------------------ Gather */

static void test_gather(void) {
    for (int rep = 0; rep < 30; rep++) {
        int64_t d[ERT_MAX_DIMS], id[ERT_MAX_DIMS];
        int nd = rand_dims(&rng, 1, 3, 5, d), ni = rand_dims(&rng, 0, 2, 4, id);
        int ax = ert_test_int(&rng, 0, nd - 1);
        ert_dtype idt = rep % 2 ? ERT_DTYPE_I32 : ERT_DTYPE_I64;
        tt in[2] = {rand_t(DTS[rep % 4], nd, d), tt_new(idt, ni, id)}, out;
        for (int64_t i = 0; i < tt_n(&in[1]); i++) {
            int64_t v = ert_test_int(&rng, (int)-d[ax], (int)d[ax] - 1);
            if (idt == ERT_DTYPE_I32) ((int32_t *)in[1].data)[i] = (int32_t)v;
            else ((int64_t *)in[1].data)[i] = v;
        }
        in[1].cst = rep % 3 == 0;
        ert_attr_val a = A_I("axis", rep % 4 == 1 ? ax - nd : ax);
        ert_status st = run_op(ctx, ERT_OP_GATHER, &a, 1, in, 2, &out, 1, NULL);
        CHECK(st == ERT_OK, "gather: %s", ert_last_error(ctx));
        if (st == ERT_OK) {
            int64_t od[ERT_MAX_DIMS], oi[ERT_MAX_DIMS], xi[ERT_MAX_DIMS], bad = 0;
            int on = 0;
            for (int k = 0; k < ax; k++) od[on++] = d[k];
            for (int k = 0; k < ni; k++) od[on++] = id[k];
            for (int k = ax + 1; k < nd; k++) od[on++] = d[k];
            CHECK(same_shape(&out, on, od), "gather shape");
            for (int64_t i = 0; i < tt_n(&out); i++) {
                unflat(i, on, od, oi);
                for (int k = 0; k < ax; k++) xi[k] = oi[k];
                int64_t v = (int64_t)tt_get(&in[1], flat(ni, id, oi + ax));
                xi[ax] = v < 0 ? v + d[ax] : v;
                for (int k = ax + 1; k < nd; k++) xi[k] = oi[k - 1 + ni];
                bad += !same_elem(&out, i, &in[0], flat(nd, d, xi));
            }
            CHECK(bad == 0, "gather %lld wrong", (long long)bad);
            tt_free(&out);
        }
        tt_free(&in[0]);
        tt_free(&in[1]);
    }
    /* out of range: constant -> prepare error with a message; runtime -> kernel ERT_E_ARG */
    int64_t d3[2] = {3, 2}, bad_idx[2] = {1, 3}, neg_idx[1] = {-4};
    tt in[2] = {rand_t(ERT_DTYPE_F32, 2, d3), tt_ints(bad_idx, 2)}, out;
    int stage;
    CHECK(run_op(ctx, ERT_OP_GATHER, NULL, 0, in, 2, &out, 1, &stage) == ERT_E_ARG && stage == 0 &&
              strstr(ert_last_error(ctx), "out of range") != NULL, "gather const out of range: %s", ert_last_error(ctx));
    in[1].cst = false;
    CHECK(run_op(ctx, ERT_OP_GATHER, NULL, 0, in, 2, &out, 1, &stage) == ERT_E_ARG && stage == 1, "gather runtime out of range");
    tt_free(&in[1]);
    in[1] = tt_ints(neg_idx, 1);
    in[1].cst = false;
    CHECK(run_op(ctx, ERT_OP_GATHER, NULL, 0, in, 2, &out, 1, &stage) == ERT_E_ARG && stage == 1, "gather runtime -4");
    tt_free(&in[0]);
    tt_free(&in[1]);
}

/* ------------------------------------------------------------------ Pad */

/* numpy.pad semantics, by repeated reflection / wrapping (not closed forms). */
static int64_t ref_pad_src(int64_t c, int64_t n, int mode) {
    if (c >= 0 && c < n) return c;
    if (mode == 0) return -1;
    if (mode == 2) return c < 0 ? 0 : n - 1;
    if (mode == 3) {
        while (c < 0) c += n;
        while (c >= n) c -= n;
        return c;
    }
    if (n == 1) return 0;
    while (c < 0 || c >= n) c = c < 0 ? -c : 2 * (n - 1) - c;
    return c;
}

static void test_pad(void) {
    static const char *modes[] = {"constant", "reflect", "edge", "wrap"};
    for (int rep = 0; rep < 40; rep++) {
        int mode = rep % 4;
        int64_t d[ERT_MAX_DIMS], pads[2 * ERT_MAX_DIMS], ax[ERT_MAX_DIMS], od[ERT_MAX_DIMS];
        int nd = rand_dims(&rng, 1, 4, 5, d);
        bool use_axes = rep % 3 == 0;
        int na = 0;
        int64_t pb[ERT_MAX_DIMS] = {0}, pe[ERT_MAX_DIMS] = {0};
        for (int k = 0; k < nd; k++) {
            if (use_axes && ert_test_int(&rng, 0, 1)) continue;
            int lo = mode == 0 ? -(int)d[k] / 2 : 0;
            pb[k] = ert_test_int(&rng, lo, 6);
            pe[k] = ert_test_int(&rng, lo, 6);
            ax[na++] = k;
        }
        if (!use_axes) na = nd;
        for (int i = 0; i < na; i++) {
            pads[i] = pb[ax[i]];
            pads[na + i] = pe[ax[i]];
        }
        for (int k = 0; k < nd; k++) od[k] = d[k] + pb[k] + pe[k];
        ert_dtype dt = rep % 8 < 4 ? ERT_DTYPE_F32 : ERT_DTYPE_I64;
        tt in[4] = {rand_t(dt, nd, d), tt_ints(pads, 2 * na), tt_new(dt, 0, NULL), tt_ints(ax, na)}, out;
        in[2].cst = true;
        double cv = rep % 5 ? 7.0 : 0.0;
        if (dt == ERT_DTYPE_F32) *(float *)in[2].data = (float)cv;
        else *(int64_t *)in[2].data = (int64_t)cv;
        if (rep % 5 == 0) in[2] = (tt_free(&in[2]), tt_omitted());
        ert_attr_val a = A_S("mode", modes[mode]);
        ert_status st = run_op(ctx, ERT_OP_PAD, &a, 1, in, use_axes ? 4 : 3, &out, 1, NULL);
        CHECK(st == ERT_OK, "pad %s: %s", modes[mode], ert_last_error(ctx));
        if (st == ERT_OK) {
            CHECK(same_shape(&out, nd, od), "pad shape");
            int64_t oi[ERT_MAX_DIMS], xi[ERT_MAX_DIMS], bad = 0;
            for (int64_t i = 0; i < tt_n(&out); i++) {
                unflat(i, nd, od, oi);
                bool fill = false;
                for (int k = 0; k < nd; k++) {
                    xi[k] = ref_pad_src(oi[k] - pb[k], d[k], mode);
                    fill |= xi[k] < 0;
                }
                bad += fill ? tt_get(&out, i) != cv : !same_elem(&out, i, &in[0], flat(nd, d, xi));
            }
            CHECK(bad == 0, "pad %s: %lld wrong", modes[mode], (long long)bad);
            tt_free(&out);
        }
        for (int k = 0; k < 4; k++) tt_free(&in[k]);
    }
    int64_t d2[2] = {2, 3}, badp[4] = {0, -4, 0, 0}, p3[3] = {1, 1, 1};
    tt in[2] = {rand_t(ERT_DTYPE_F32, 2, d2), tt_ints(badp, 4)}, out;
    CHECK(run_op(ctx, ERT_OP_PAD, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_SHAPE, "pad crop beyond dim");
    tt_free(&in[1]);
    in[1] = tt_ints(p3, 3);
    CHECK(run_op(ctx, ERT_OP_PAD, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_SHAPE, "pad odd pads length");
    ert_attr_val a = A_S("mode", "mirror");
    CHECK(run_op(ctx, ERT_OP_PAD, &a, 1, in, 2, &out, 1, NULL) == ERT_E_UNSUPPORTED, "pad unknown mode");
    tt_free(&in[0]);
    tt_free(&in[1]);
}

int main(void) {
    ert_test_rng_init(&rng, "ops_tensor");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0 single-threaded (pool NULL), pass 1 through a 2-worker pool */
        if (pass == 1 && ert_threadpool_create(2, &oh_pool) != ERT_OK) break;
        test_views();
        test_transpose();
        test_concat_split();
        test_slice();
        test_gather();
        test_pad();
    }
    ert_threadpool_free(oh_pool);
    ert_context_free(ctx);
    return ert_test_finish("ops_tensor");
}

/* Data-movement and shape ops through prepare + ert_cpu_run_node, each against
 * plain index arithmetic written here: Flatten, Reshape, Squeeze, Unsqueeze,
 * Transpose, Concat, Split, Slice, Gather, Pad, Resize, Expand, Tile, Cast, Shape,
 * ConstantOfShape, Range; Resize tf_crop_and_resize against a separate
 * ONNX-style recursive reference; plus their error paths. */
#include "cpu_gemm.h"
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
    for (int rep = 0; rep < 52; rep++) {
        int64_t d[ERT_MAX_DIMS], perm[ERT_MAX_DIMS];
        int nd = rand_dims(&rng, rep == 0 ? 0 : 1, 5, 5, d);
        if (rep == 1) { /* big enough for the row loop to be split across workers */
            nd = 3;
            d[0] = 64, d[1] = 65, d[2] = 9;
        }
        if (rep >= 40) { /* the tiled path: odd planes and channels, incl. NCHW <-> NHWC with size-1 dims */
            nd = 4;
            d[0] = ert_test_int(&rng, 1, 2), d[1] = ert_test_int(&rng, 5, 41);
            d[2] = rep % 3 ? ert_test_int(&rng, 1, 23) : 1, d[3] = ert_test_int(&rng, 7, 37);
        }
        tt x = rand_t(rep >= 40 && rep % 4 != 3 ? ERT_DTYPE_F32 : DTS[rep % 4], nd, d), out;
        for (int k = 0; k < nd; k++) perm[k] = k;
        for (int k = nd - 1; k > 0; k--) { /* Fisher-Yates */
            int j = ert_test_int(&rng, 0, k);
            int64_t t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
        bool dflt = rep % 6 == 0 && rep < 40;
        if (dflt)
            for (int k = 0; k < nd; k++) perm[k] = nd - 1 - k;
        static const int64_t nhwc[2][4] = {{0, 2, 3, 1}, {0, 3, 1, 2}};
        if (rep >= 40 && rep % 2 == 0) memcpy(perm, nhwc[rep / 2 % 2], sizeof nhwc[0]);
        ert_attr_val a = A_IS("perm", perm, nd);
        /* the tiled path twice: its AVX2 8x8 blocks where the CPU has them,
         * then the plain tiles (a kernel cap below AVX2) */
        ert_kernel_choice kc_plain = ert_kernel_choice_of(NULL);
        kc_plain.gemm_cap = ERT_CPU_GEMM_PORTABLE;
        for (int plain = 0; plain < (rep >= 40 ? 2 : 1); plain++) {
            oh_choice = plain ? &kc_plain : NULL;
            ert_status st = run_op(ctx, ERT_OP_TRANSPOSE, &a, dflt ? 0 : 1, &x, 1, &out, 1, NULL);
            oh_choice = NULL;
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
                CHECK(bad == 0, "transpose rank %d%s: %lld wrong", nd, plain ? " plain tiles" : "", (long long)bad);
                tt_free(&out);
            }
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
    tt x = rand_t(ERT_DTYPE_F32, 2, d7), parts[24];
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
    /* 6 into 4 -> 2,2,2,0 (as the ONNX reference); 5 into 4 cannot be split */
    int64_t d6 = 6, d5 = 5;
    tt x6 = rand_t(ERT_DTYPE_I64, 1, &d6), x5 = rand_t(ERT_DTYPE_I64, 1, &d5);
    ert_attr_val n4 = A_I("num_outputs", 4), a1_m = A_I("axis", 1);
    CHECK_OK(run_op(ctx, ERT_OP_SPLIT, &n4, 1, &x6, 1, parts, 4, NULL), ctx);
    if (parts[0].data) {
        CHECK(parts[2].dims[0] == 2 && parts[3].dims[0] == 0 && ((int64_t *)parts[2].data)[1] == ((int64_t *)x6.data)[5], "split 6/4");
        for (int k = 0; k < 4; k++) tt_free(&parts[k]);
    }
    CHECK(run_op(ctx, ERT_OP_SPLIT, &n4, 1, &x5, 1, parts, 4, NULL) == ERT_E_SHAPE, "split 5/4");
    /* more outputs than ERT_MAX_NODE_IO */
    int64_t d20[2] = {2, 20};
    tt x20 = rand_t(ERT_DTYPE_F32, 2, d20);
    CHECK_OK(run_op(ctx, ERT_OP_SPLIT, &a1_m, 1, &x20, 1, parts, 20, NULL), ctx);
    if (parts[0].data) {
        bool ok = true;
        for (int k = 0; k < 20; k++) {
            ok = ok && parts[k].dims[1] == 1 && ((float *)parts[k].data)[1] == ((float *)x20.data)[20 + k];
            tt_free(&parts[k]);
        }
        CHECK(ok, "split into 20");
    }
    tt_free(&x20);
    tt_free(&x6);
    tt_free(&x5);
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

/* ------------------------------------------------------------------ Resize */

/* ONNX coordinate transforms, evaluated in double. */
static double ref_coord(int cm, int64_t o, double sc, int64_t in, int64_t out) {
    switch (cm) {
    case 0: return (o + 0.5) / sc - 0.5;
    case 1: return o / sc;
    case 2: return in * sc == 1 ? 0 : (double)o * (double)(in - 1) / (in * sc - 1); /* ONNX reference: unfloored size */
    case 3: return out > 1 ? (o + 0.5) / sc - 0.5 : 0;
    default: {
        double adj = out / (sc * in);
        return in / 2.0 * (1 - adj) + (o + 0.5) / sc - 0.5;
    }
    }
}

static const char *CM[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"};
static const char *NM[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

/* Cubic taps the way ONNX's reference finds them: pad the line by 2 on each
 * side (edge values), take the 4 padded positions nearest to c + 2 (ties to
 * the smaller), ratio = c - floor(c) or 1 when c is an integer, Keys
 * coefficients; exclude_outside zeroes taps outside [0, in) and renormalises. */
static void ref_cubic_taps(double c, int64_t in, double A, bool excl, int64_t *ix, double *w) {
    int64_t np = in + 4, pick[4];
    double xp = c + 2;
    bool used[64] = {false};
    for (int k = 0; k < 4; k++) {
        int64_t best = -1;
        for (int64_t q = 0; q < np && q < 64; q++)
            if (!used[q] && (best < 0 || fabs(xp - (double)q) < fabs(xp - (double)best))) best = q;
        used[best] = true;
        pick[k] = best;
    }
    for (int a = 0; a < 4; a++) /* sort ascending */
        for (int b = a + 1; b < 4; b++)
            if (pick[b] < pick[a]) { int64_t t = pick[a]; pick[a] = pick[b]; pick[b] = t; }
    double r = c == floor(c) ? 1 : c - floor(c);
    double d[4] = {r + 1, r, 1 - r, 2 - r}, sum = 0; /* distances to the 4 taps */
    for (int k = 0; k < 4; k++) {
        double s = d[k];
        w[k] = s <= 1 ? ((A + 2) * s - (A + 3)) * s * s + 1 : ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
        int64_t orig = pick[k] - 2;
        if (excl && (orig < 0 || orig >= in)) w[k] = 0;
        sum += w[k];
        ix[k] = orig < 0 ? 0 : orig >= in ? in - 1 : orig;
    }
    if (excl)
        for (int k = 0; k < 4; k++) w[k] /= sum;
}

/* 4-D reference: nearest per dim, multilinear over all 16 corners (linear 1),
 * or cubic over all 256 tap combinations (linear 2, with A and exclude_outside). */
static void ref_resize(const tt *x, const int64_t *od, const double *sc, int linear, int cm, int nm, double A,
                       bool excl, double *ref) {
    int64_t n = od[0] * od[1] * od[2] * od[3], oi[4];
    for (int64_t i = 0; i < n; i++) {
        unflat(i, 4, od, oi);
        int64_t lo[4], hi[4], cix[4][4];
        double w[4], cw[4][4];
        for (int d = 0; d < 4; d++) {
            int64_t in = x->dims[d];
            double c = ref_coord(cm, oi[d], sc[d], in, od[d]);
            lo[d] = hi[d] = 0;
            w[d] = 0;
            if (linear == 2) {
                ref_cubic_taps(c, in, A, excl, cix[d], cw[d]);
            } else if (linear) {
                c = fmin(fmax(c, 0), (double)(in - 1));
                lo[d] = (int64_t)floor(c);
                hi[d] = lo[d] + 1 < in ? lo[d] + 1 : lo[d];
                w[d] = c - (double)lo[d];
            } else {
                double f = floor(c), r;
                if (nm == 0) r = c - f == 0.5 ? f : floor(c + 0.5);
                else if (nm == 1) r = c - f == 0.5 ? f + 1 : floor(c + 0.5);
                else r = nm == 2 ? f : ceil(c);
                lo[d] = (int64_t)fmin(fmax(r, 0), (double)(in - 1));
                hi[d] = lo[d];
                w[d] = 0;
            }
        }
        double acc = 0;
        if (linear == 2) {
            for (int combo = 0; combo < 256; combo++) {
                double wt = 1;
                int64_t xi[4];
                for (int d = 0; d < 4; d++) {
                    int k = (combo >> (2 * d)) & 3;
                    xi[d] = cix[d][k];
                    wt *= cw[d][k];
                }
                acc += wt * tt_get(x, flat(4, x->dims, xi));
            }
            ref[i] = acc;
            continue;
        }
        for (int corner = 0; corner < 16; corner++) {
            double wt = 1;
            int64_t xi[4];
            for (int d = 0; d < 4; d++) {
                bool h = (corner >> d) & 1;
                xi[d] = h ? hi[d] : lo[d];
                wt *= h ? w[d] : 1 - w[d];
            }
            if (wt != 0) acc += wt * tt_get(x, flat(4, x->dims, xi));
        }
        ref[i] = acc;
    }
}

static void test_resize(void) {
    static const float scs[] = {0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 2.0f, 2.5f, 3.0f};
    for (int rep = 0; rep < 90; rep++) {
        /* mode: 0 nearest, 1 linear, 2 cubic (random cubic_coeff_a and exclude_outside) */
        int linear = rep % 3, cm = (rep / 3) % 5, nm = ert_test_int(&rng, 0, 3);
        bool use_sizes = rep % 4 == 0, scale_c = linear && rep % 7 == 1; /* N-D linear/cubic: also resize C */
        double A = rep % 5 == 0 ? -0.75 : rep % 5 == 1 ? -0.5 : ert_test_uniform(&rng, -1, 0);
        bool excl = ert_test_int(&rng, 0, 1);
        int64_t d[4] = {ert_test_int(&rng, 1, 2), ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 6), ert_test_int(&rng, 1, 6)};
        int64_t od[4], sizes[4], four = 4;
        float sf[4] = {1, 1, 1, 1};
        double sc[4];
        for (int k = 0; k < 4; k++) {
            if (k >= 2 || (k == 1 && scale_c)) {
                if (use_sizes) sizes[k] = ert_test_int(&rng, 1, 9);
                else sf[k] = scs[ert_test_int(&rng, 0, 7)];
            } else {
                sizes[k] = d[k];
            }
            if (use_sizes) {
                od[k] = sizes[k];
                sc[k] = (double)sizes[k] / (double)d[k];
            } else {
                od[k] = (int64_t)floor((double)sf[k] * (double)d[k]);
                sc[k] = sf[k];
            }
        }
        bool empty = od[2] == 0 || od[3] == 0;
        tt in[4] = {tt_rand(&rng, 4, d, -10, 10), tt_omitted(), tt_new(ERT_DTYPE_F32, 1, &four), tt_ints(sizes, 4)}, out;
        memcpy(in[2].data, sf, sizeof sf);
        in[2].cst = true;
        if (use_sizes) {
            int64_t zero = 0;
            tt_free(&in[2]);
            in[2] = tt_new(ERT_DTYPE_F32, 1, &zero); /* empty scales, as exporters write */
            in[2].cst = true;
        }
        static const char *MODE[3] = {"nearest", "linear", "cubic"};
        ert_attr_val at[5] = {A_S("mode", MODE[linear]), A_S("coordinate_transformation_mode", CM[cm]),
                              A_S("nearest_mode", NM[nm]), A_F("cubic_coeff_a", (float)A), A_I("exclude_outside", excl)};
        int nat = 3;
        if (linear == 2) {
            A = (float)A; /* the kernel sees the f32 attribute */
            if (rep % 5 != 0) nat = 4; /* rep % 5 == 0: the default A */
            if (excl || rep % 2) nat = 5;
        } else {
            excl = false;
        }
        ert_status st = run_op(ctx, ERT_OP_RESIZE, at, nat, in, use_sizes ? 4 : 3, &out, 1, NULL);
        CHECK(st == ERT_OK, "resize: %s", ert_last_error(ctx));
        if (st == ERT_OK) {
            CHECK(same_shape(&out, 4, od), "resize shape (%lld,%lld)", (long long)out.dims[2], (long long)out.dims[3]);
            if (!empty && same_shape(&out, 4, od)) {
                int64_t n = tt_n(&out);
                double *ref = malloc((size_t)n * sizeof *ref);
                ref_resize(&in[0], od, sc, linear, cm, nm, A, excl, ref);
                char what[128];
                snprintf(what, sizeof what, "resize %s %s %s sizes=%d A=%g excl=%d", MODE[linear], CM[cm], NM[nm], use_sizes,
                         A, excl);
                CHECK(ert_test_close(what, out.data, ref, n, 1e-4, 1e-5), "%s", what);
                free(ref);
            }
            tt_free(&out);
        }
        for (int k = 0; k < 4; k++) tt_free(&in[k]);
    }
    /* ONNX documentation examples (resize_upsample_scales_linear / _nearest) */
    int64_t d22[4] = {1, 1, 2, 2}, four = 4;
    tt in[3] = {tt_new(ERT_DTYPE_F32, 4, d22), tt_omitted(), tt_new(ERT_DTYPE_F32, 1, &four)}, out;
    float xv[4] = {1, 2, 3, 4}, s_lin[4] = {1, 1, 2, 2}, s_nn[4] = {1, 1, 2, 3};
    memcpy(in[0].data, xv, sizeof xv);
    memcpy(in[2].data, s_lin, sizeof s_lin);
    in[2].cst = true;
    ert_attr_val lin = A_S("mode", "linear");
    CHECK_OK(run_op(ctx, ERT_OP_RESIZE, &lin, 1, in, 3, &out, 1, NULL), ctx);
    if (out.data) {
        static const double want[16] = {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4};
        CHECK(tt_n(&out) == 16 && ert_test_close("resize linear doc", out.data, want, 16, 1e-6, 0), "resize linear example");
        tt_free(&out);
    }
    memcpy(in[2].data, s_nn, sizeof s_nn);
    CHECK_OK(run_op(ctx, ERT_OP_RESIZE, NULL, 0, in, 3, &out, 1, NULL), ctx);
    if (out.data) {
        static const double want[24] = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
        CHECK(tt_n(&out) == 24 && ert_test_close("resize nearest doc", out.data, want, 24, 0, 0), "resize nearest example");
        tt_free(&out);
    }
    /* opset-18 axes attribute (negative) and nearest on u8 == nearest on f32 */
    {
        int64_t d5[4] = {1, 2, 3, 5}, two = 2, ax[2] = {-1, 2};
        float s2[2] = {2.0f, 0.5f}; /* W x2, H x0.5 */
        tt u = rand_t(ERT_DTYPE_U8, 4, d5), fx = tt_new(ERT_DTYPE_F32, 4, d5), o8, o32;
        for (int i = 0; i < 30; i++) ((float *)fx.data)[i] = ((uint8_t *)u.data)[i];
        tt sc = tt_new(ERT_DTYPE_F32, 1, &two);
        memcpy(sc.data, s2, sizeof s2);
        sc.cst = true;
        ert_attr_val at[2] = {A_IS("axes", ax, 2), A_S("coordinate_transformation_mode", "asymmetric")};
        tt i8[3] = {u, tt_omitted(), sc}, i32[3] = {fx, tt_omitted(), sc};
        CHECK_OK(run_op(ctx, ERT_OP_RESIZE, at, 2, i8, 3, &o8, 1, NULL), ctx);
        CHECK_OK(run_op(ctx, ERT_OP_RESIZE, at, 2, i32, 3, &o32, 1, NULL), ctx);
        if (o8.data && o32.data) {
            int64_t want[4] = {1, 2, 1, 10};
            int bad = 0;
            for (int i = 0; i < 20; i++) bad += tt_get(&o8, i) != tt_get(&o32, i);
            /* asymmetric x2 on W: out[w] = in[w/2]; x0.5 on H: out row 0 = in row 0 */
            for (int c = 0; c < 2; c++)
                for (int w = 0; w < 10; w++) bad += tt_get(&o8, c * 10 + w) != tt_get(&u, c * 15 + w / 2);
            CHECK(same_shape(&o8, 4, want) && bad == 0, "resize axes / u8: %d wrong", bad);
        }
        if (o8.data) tt_free(&o8);
        if (o32.data) tt_free(&o32);
        tt_free(&u);
        tt_free(&fx);
        tt_free(&sc);
    }
    /* ONNX documentation example (resize_upsample_scales_cubic_asymmetric: A -0.75, 4x4 x2): spot values
     * computed by hand from the Keys kernel: out(0,0) = in(0,0); out(0,1) at x = 0.5 uses taps -1..2
     * (edge-clamped) with weights -0.09375, 0.59375, 0.59375, -0.09375 */
    {
        int64_t d44[4] = {1, 1, 4, 4};
        float s2[4] = {1, 1, 2, 2};
        tt ci[3] = {tt_new(ERT_DTYPE_F32, 4, d44), tt_omitted(), tt_new(ERT_DTYPE_F32, 1, &four)}, co;
        for (int i = 0; i < 16; i++) ((float *)ci[0].data)[i] = (float)(i + 1);
        memcpy(ci[2].data, s2, sizeof s2);
        ci[2].cst = true;
        ert_attr_val ca[2] = {A_S("mode", "cubic"), A_S("coordinate_transformation_mode", "asymmetric")};
        CHECK_OK(run_op(ctx, ERT_OP_RESIZE, ca, 2, ci, 3, &co, 1, NULL), ctx);
        if (co.data) {
            const float *y = co.data;
            double row0_x05 = -0.09375 * 1 + 0.59375 * 1 + 0.59375 * 2 - 0.09375 * 3; /* row 0, x = 0.5 */
            CHECK(co.dims[2] == 8 && co.dims[3] == 8 && y[0] == 1 && fabs(y[1] - row0_x05) < 1e-6,
                  "resize cubic doc: %g %g (want 1 %g)", y[0], y[1], row0_x05);
            tt_free(&co);
        }
        /* refused: cubic on u8, cubic_coeff_a given as an INT, cubic on 5 resized dims */
        tt u = rand_t(ERT_DTYPE_U8, 4, d44), ui[3] = {u, tt_omitted(), ci[2]};
        CHECK(run_op(ctx, ERT_OP_RESIZE, ca, 1, ui, 3, &co, 1, NULL) == ERT_E_UNSUPPORTED, "resize cubic u8");
        ert_attr_val cai[2] = {A_S("mode", "cubic"), A_I("cubic_coeff_a", 0)};
        CHECK(run_op(ctx, ERT_OP_RESIZE, cai, 2, ci, 3, &co, 1, NULL) == ERT_E_ARG, "resize cubic_coeff_a INT");
        CHECK(strstr(ert_last_error(ctx), "cubic_coeff_a") != NULL, "message: %s", ert_last_error(ctx));
        int64_t d5[5] = {2, 2, 2, 2, 2}, five = 5;
        float s5[5] = {2, 2, 2, 2, 2};
        tt c5[3] = {tt_new(ERT_DTYPE_F32, 5, d5), tt_omitted(), tt_new(ERT_DTYPE_F32, 1, &five)};
        memcpy(c5[2].data, s5, sizeof s5);
        c5[2].cst = true;
        CHECK(run_op(ctx, ERT_OP_RESIZE, ca, 1, c5, 3, &co, 1, NULL) == ERT_E_UNSUPPORTED, "resize cubic 5 dims");
        tt_free(&u);
        tt_free(&c5[0]);
        tt_free(&c5[2]);
        tt_free(&ci[0]);
        tt_free(&ci[2]);
    }
    /* refused: antialias, a runtime scales tensor, scales and sizes both missing */
    ert_attr_val aa = A_I("antialias", 1);
    CHECK(run_op(ctx, ERT_OP_RESIZE, &aa, 1, in, 3, &out, 1, NULL) == ERT_E_UNSUPPORTED, "resize antialias");
    in[2].cst = false;
    CHECK(run_op(ctx, ERT_OP_RESIZE, NULL, 0, in, 3, &out, 1, NULL) == ERT_E_UNSUPPORTED, "resize runtime scales");
    CHECK(run_op(ctx, ERT_OP_RESIZE, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_ARG, "resize no scales");
    for (int k = 0; k < 3; k++) tt_free(&in[k]);
}

/* tf_crop_and_resize reference, written the way ONNX's reference is: the
 * value at output index o is a 1-D interpolation along dim d of values that
 * are themselves interpolated along the dims after d; a source coordinate
 * outside [0, in - 1] in any dim gives extrapolation_value. Taps are the n
 * input positions nearest the coordinate (ties to the left) on the
 * edge-extended input, weighted by the tent (linear) or Keys (cubic)
 * kernel of the distance. */
typedef struct crop_ref {
    const tt *x;
    const int64_t *od, *o;
    const double *rs, *re;
    int mode, nm;
    double A, extra;
    bool excl;
} crop_ref;

static double keys_w(double dist, double A) {
    double t = fabs(dist);
    if (t <= 1) return (A + 2) * t * t * t - (A + 3) * t * t + 1;
    if (t < 2) return A * t * t * t - 5 * A * t * t + 8 * A * t - 4 * A;
    return 0;
}

static double crop_interp(const crop_ref *c, int d, int64_t off) {
    int64_t in = c->x->dims[d], out = c->od[d], o = c->o[d], st = 1;
    for (int k = d + 1; k < 4; k++) st *= c->x->dims[k];
    double m = (double)(in - 1), xo;
    if (out == 1) xo = (c->re[d] - c->rs[d]) * m / 2;
    else xo = (double)o * (c->re[d] - c->rs[d]) * m / (double)(out - 1);
    xo += c->rs[d] * m;
    if (xo < 0 || xo > m) return c->extra;
#define VAL(k) (d == 3 ? tt_get(c->x, off + (k)) : crop_interp(c, d + 1, off + (k) * st))
    if (c->mode == 0) {
        double f = floor(xo), r;
        if (c->nm == 0) r = xo - f == 0.5 ? f : floor(xo + 0.5);
        else if (c->nm == 1) r = xo - f == 0.5 ? f + 1 : floor(xo + 0.5);
        else r = c->nm == 2 ? f : ceil(xo);
        int64_t k = (int64_t)r;
        return VAL(k < 0 ? 0 : k > in - 1 ? in - 1 : k);
    }
    int n = c->mode == 1 ? 2 : 4;
    /* the n positions nearest xo, ties to the smaller one (may lie outside the input) */
    int64_t pos[4];
    int np = 0;
    for (int pick = 0; pick < n; pick++) {
        int64_t best = 0;
        double bd = INFINITY;
        for (int64_t k = (int64_t)floor(xo) - 3; k <= (int64_t)floor(xo) + 3; k++) {
            bool used = false;
            for (int q = 0; q < np; q++) used |= pos[q] == k;
            if (!used && fabs(xo - (double)k) < bd) bd = fabs(xo - (double)k), best = k;
        }
        pos[np++] = best;
    }
    double acc = 0, wsum = 0;
    for (int q = 0; q < n; q++) {
        double w = c->mode == 1 ? fmax(0, 1 - fabs(xo - (double)pos[q])) : keys_w(xo - (double)pos[q], c->A);
        if (c->mode == 2 && c->excl && (pos[q] < 0 || pos[q] >= in)) w = 0;
        int64_t k = pos[q] < 0 ? 0 : pos[q] > in - 1 ? in - 1 : pos[q];
        if (w != 0) acc += w * VAL(k);
        wsum += w;
    }
#undef VAL
    return c->mode == 2 && c->excl && wsum != 0 ? acc / wsum : acc;
}

/* Resize with coordinate_transformation_mode tf_crop_and_resize: random
 * (N, C, H, W) input, sizes and roi (boxes reaching outside the input and
 * flipped ones), roi on every dim or on "axes" (2, 3) / (3, 2); nearest,
 * linear and cubic against crop_interp. Then its bad inputs. */
static void test_resize_crop(void) {
    static const char *MODE[3] = {"nearest", "linear", "cubic"};
    for (int rep = 0; rep < 60; rep++) {
        int mode = rep % 3, nm = ert_test_int(&rng, 0, 3), axes_kind = (rep / 3) % 3; /* 0 all dims, 1 (2,3), 2 (3,2) */
        int64_t d[4] = {ert_test_int(&rng, 1, 2), ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 6), ert_test_int(&rng, 1, 6)};
        int64_t od[4] = {d[0], d[1], ert_test_int(&rng, 1, 7), ert_test_int(&rng, 1, 7)};
        double rs[4] = {0, 0, 0, 0}, re[4] = {1, 1, 1, 1};
        for (int k = 0; k < 4; k++) {
            if (k < 2 && (axes_kind != 0 || mode == 2 || rep % 2)) continue; /* N, C: whole input */
            rs[k] = ert_test_uniform(&rng, -0.3, 0.8);
            re[k] = ert_test_uniform(&rng, 0.2, 1.3);
            if (rep % 7 == 3) { /* a flipped box */
                double t = rs[k];
                rs[k] = re[k];
                re[k] = t;
            }
            rs[k] = (float)rs[k]; /* the kernel sees f32 roi */
            re[k] = (float)re[k];
        }
        int64_t ax[2] = {axes_kind == 2 ? 3 : 2, axes_kind == 2 ? 2 : 3};
        int na = axes_kind ? 2 : 4;
        int64_t sizes[4], nroi = 2 * na, zero = 0;
        float roi[8];
        for (int i = 0; i < na; i++) {
            int64_t k = axes_kind ? ax[i] : i;
            sizes[i] = od[k];
            roi[i] = (float)rs[k];
            roi[na + i] = (float)re[k];
        }
        tt in[4] = {tt_rand(&rng, 4, d, -10, 10), tt_new(ERT_DTYPE_F32, 1, &nroi), tt_new(ERT_DTYPE_F32, 1, &zero),
                    tt_ints(sizes, na)}, out;
        memcpy(in[1].data, roi, (size_t)nroi * sizeof(float));
        in[1].cst = in[2].cst = true;
        double A = (float)ert_test_uniform(&rng, -1, -0.25), extra = (float)ert_test_uniform(&rng, -20, 20);
        bool excl = ert_test_int(&rng, 0, 1);
        ert_attr_val at[7] = {A_S("coordinate_transformation_mode", "tf_crop_and_resize"), A_S("mode", MODE[mode]),
                              A_S("nearest_mode", NM[nm]), A_F("cubic_coeff_a", (float)A), A_I("exclude_outside", excl),
                              A_F("extrapolation_value", (float)extra), A_IS("axes", ax, 2)};
        int nat = axes_kind ? 7 : 6;
        if (rep % 5 == 4 && !axes_kind) { /* defaults: extrapolation_value 0, A -0.75, exclude_outside 0 */
            nat = 3;
            extra = 0, A = -0.75, excl = false;
        }
        if (mode != 2) excl = false;
        ert_status st = run_op(ctx, ERT_OP_RESIZE, at, nat, in, 4, &out, 1, NULL);
        CHECK(st == ERT_OK, "resize crop: %s", ert_last_error(ctx));
        if (st == ERT_OK) {
            CHECK(same_shape(&out, 4, od), "resize crop shape");
            int64_t n = tt_n(&out), o[4];
            double *ref = malloc((size_t)n * sizeof *ref);
            crop_ref c = {&in[0], od, o, rs, re, mode, nm, A, extra, excl};
            for (int64_t i = 0; i < n; i++) {
                unflat(i, 4, od, o);
                ref[i] = crop_interp(&c, 0, 0);
            }
            char what[128];
            snprintf(what, sizeof what, "resize tf_crop_and_resize %s %s axes %d A=%g excl=%d", MODE[mode], NM[nm], axes_kind,
                     A, excl);
            if (same_shape(&out, 4, od)) CHECK(ert_test_close(what, out.data, ref, n, 1e-4, 1e-5), "%s", what);
            free(ref);
            tt_free(&out);
        }
        for (int k = 0; k < 4; k++) tt_free(&in[k]);
    }
    /* bad input: roi of the wrong size, roi not constant, no roi, roi i64, scales instead of sizes, u8 data */
    int64_t d[4] = {1, 2, 3, 4}, six = 6, eight = 8, four = 4, zero = 0, sz[4] = {1, 2, 5, 5};
    tt in[4] = {tt_rand(&rng, 4, d, -1, 1), tt_new(ERT_DTYPE_F32, 1, &six), tt_new(ERT_DTYPE_F32, 1, &zero), tt_ints(sz, 4)}, out;
    in[1].cst = in[2].cst = true;
    ert_attr_val crop = A_S("coordinate_transformation_mode", "tf_crop_and_resize");
    CHECK(run_op(ctx, ERT_OP_RESIZE, &crop, 1, in, 4, &out, 1, NULL) == ERT_E_SHAPE && strstr(ert_last_error(ctx), "roi"),
          "resize crop roi size: %s", ert_last_error(ctx));
    tt_free(&in[1]);
    in[1] = tt_new(ERT_DTYPE_F32, 1, &eight);
    for (int k = 0; k < 8; k++) ((float *)in[1].data)[k] = k < 4 ? 0.0f : 1.0f;
    CHECK(run_op(ctx, ERT_OP_RESIZE, &crop, 1, in, 4, &out, 1, NULL) == ERT_E_UNSUPPORTED &&
              strstr(ert_last_error(ctx), "must be a constant"),
          "resize crop runtime roi: %s", ert_last_error(ctx));
    in[1].cst = true;
    CHECK_OK(run_op(ctx, ERT_OP_RESIZE, &crop, 1, in, 4, &out, 1, NULL), ctx);
    if (out.data) {
        /* roi (0, 1) everywhere: the corners of the output are the input's corners */
        const float *y = out.data, *x = in[0].data;
        CHECK(y[0] == x[0] && y[24] == x[11] && y[49] == x[23], "resize crop identity box corners");
        tt_free(&out);
    }
    tt r = in[1];
    in[1] = tt_omitted();
    CHECK(run_op(ctx, ERT_OP_RESIZE, &crop, 1, in, 4, &out, 1, NULL) == ERT_E_ARG, "resize crop no roi: %s", ert_last_error(ctx));
    in[1] = r;
    int64_t r64[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    tt ri = tt_ints(r64, 8);
    in[1] = ri;
    CHECK(run_op(ctx, ERT_OP_RESIZE, &crop, 1, in, 4, &out, 1, NULL) == ERT_E_UNSUPPORTED, "resize crop i64 roi");
    tt_free(&ri);
    in[1] = r;
    tt_free(&in[2]);
    in[2] = tt_new(ERT_DTYPE_F32, 1, &four);
    for (int k = 0; k < 4; k++) ((float *)in[2].data)[k] = 2.0f;
    in[2].cst = true;
    CHECK(run_op(ctx, ERT_OP_RESIZE, &crop, 1, in, 3, &out, 1, NULL) == ERT_E_UNSUPPORTED &&
              strstr(ert_last_error(ctx), "scales"),
          "resize crop with scales: %s", ert_last_error(ctx));
    tt_free(&in[2]);
    in[2] = tt_new(ERT_DTYPE_F32, 1, &zero);
    in[2].cst = true;
    tt u = rand_t(ERT_DTYPE_U8, 4, d), f = in[0];
    in[0] = u;
    CHECK(run_op(ctx, ERT_OP_RESIZE, &crop, 1, in, 4, &out, 1, NULL) == ERT_E_UNSUPPORTED, "resize crop u8");
    in[0] = f;
    tt_free(&u);
    for (int k = 0; k < 4; k++) tt_free(&in[k]);
}

/* ------------------------------------------------------------------ Expand, Cast, Shape, ConstantOfShape, Range */

static void test_expand(void) {
    for (int rep = 0; rep < 30; rep++) {
        int64_t od[ERT_MAX_DIMS], xd[ERT_MAX_DIMS], sd[ERT_MAX_DIMS];
        int ond = rand_dims(&rng, 0, 4, 5, od);
        /* x and the shape argument each drop leading dims / use 1s; together they cover od */
        int xn = ert_test_int(&rng, 0, ond), sn = ond;
        for (int k = 0; k < xn; k++) xd[k] = ert_test_int(&rng, 0, 1) ? 1 : od[ond - xn + k];
        for (int k = 0; k < sn; k++) sd[k] = (k >= ond - xn && xd[k - (ond - xn)] == od[k] && ert_test_int(&rng, 0, 1)) ? 1 : od[k];
        tt in[2] = {rand_t(DTS[rep % 4], xn, xd), tt_ints(sd, sn)}, out;
        ert_status st = run_op(ctx, ERT_OP_EXPAND, NULL, 0, in, 2, &out, 1, NULL);
        CHECK(st == ERT_OK, "expand: %s", ert_last_error(ctx));
        if (st == ERT_OK) {
            CHECK(same_shape(&out, ond, od), "expand shape");
            int64_t idx[ERT_MAX_DIMS], bad = 0;
            for (int64_t i = 0; i < tt_n(&out); i++) {
                unflat(i, ond, od, idx);
                bad += !same_elem(&out, i, &in[0], bcast_off(&in[0], ond, idx));
            }
            CHECK(bad == 0, "expand %lld wrong", (long long)bad);
            tt_free(&out);
        }
        tt_free(&in[0]);
        tt_free(&in[1]);
    }
    int64_t d3 = 3, s4 = 4;
    tt in[2] = {rand_t(ERT_DTYPE_F32, 1, &d3), tt_ints(&s4, 1)}, out;
    CHECK(run_op(ctx, ERT_OP_EXPAND, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_SHAPE, "expand 3 -> 4");
    tt_free(&in[0]);
    tt_free(&in[1]);
}

/* Tile: random shapes (rank 0 to 4, zero dims and zero repeats included),
 * every dtype size, i64 and i32 repeats; output element idx must be input
 * element (idx[d] % x.dims[d]). Then bad repeats. */
static void test_tile(void) {
    static const ert_dtype tdts[] = {ERT_DTYPE_F32, ERT_DTYPE_U8, ERT_DTYPE_F16, ERT_DTYPE_I64, ERT_DTYPE_BOOL, ERT_DTYPE_I32};
    for (int rep = 0; rep < 40; rep++) {
        int64_t xd[ERT_MAX_DIMS], rp[ERT_MAX_DIMS], od[ERT_MAX_DIMS];
        int nd = rand_dims(&rng, 0, 4, 4, xd);
        for (int d = 0; d < nd; d++) {
            rp[d] = ert_test_int(&rng, 1, 3);
            if (rep % 10 == 9 && d == 0) rp[d] = 0; /* empty output */
            if (rep % 10 == 8 && d == nd - 1) xd[d] = 0; /* empty input */
            od[d] = xd[d] * rp[d];
        }
        tt in[2] = {rand_t(tdts[rep % 6], nd, xd), tt_ints(rp, nd)}, out;
        if (rep % 3 == 2) { /* repeats as i32 */
            int64_t one = nd;
            tt r32 = tt_new(ERT_DTYPE_I32, 1, &one);
            for (int d = 0; d < nd; d++) ((int32_t *)r32.data)[d] = (int32_t)rp[d];
            r32.cst = true;
            tt_free(&in[1]);
            in[1] = r32;
        }
        ert_status st = run_op(ctx, ERT_OP_TILE, NULL, 0, in, 2, &out, 1, NULL);
        CHECK(st == ERT_OK, "tile rank %d: %s", nd, ert_last_error(ctx));
        if (st == ERT_OK) {
            CHECK(same_shape(&out, nd, od) && out.dt == in[0].dt, "tile shape/dtype");
            int64_t idx[ERT_MAX_DIMS], bad = 0;
            for (int64_t i = 0; i < tt_n(&out); i++) {
                unflat(i, nd, od, idx);
                for (int d = 0; d < nd; d++) idx[d] %= xd[d];
                bad += !same_elem(&out, i, &in[0], flat(nd, xd, idx));
            }
            CHECK(bad == 0, "tile rank %d: %lld wrong", nd, (long long)bad);
            tt_free(&out);
        }
        tt_free(&in[0]);
        tt_free(&in[1]);
    }
    int64_t xd[2] = {2, 3}, r_neg[2] = {2, -1}, r_one[1] = {2}, r_ok[2] = {2, 2};
    tt x = rand_t(ERT_DTYPE_F32, 2, xd), out;
    tt in[2] = {x, tt_ints(r_neg, 2)};
    CHECK(run_op(ctx, ERT_OP_TILE, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_ARG && strstr(ert_last_error(ctx), "negative"),
          "tile negative repeats: %s", ert_last_error(ctx));
    tt_free(&in[1]);
    in[1] = tt_ints(r_one, 1);
    CHECK(run_op(ctx, ERT_OP_TILE, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_SHAPE && strstr(ert_last_error(ctx), "rank"),
          "tile repeats of the wrong length: %s", ert_last_error(ctx));
    tt_free(&in[1]);
    in[1] = tt_ints(r_ok, 2);
    in[1].cst = false;
    CHECK(run_op(ctx, ERT_OP_TILE, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_UNSUPPORTED &&
              strstr(ert_last_error(ctx), "must be a constant"),
          "tile repeats not constant: %s", ert_last_error(ctx));
    tt_free(&in[1]);
    int64_t two = 2;
    in[1] = tt_new(ERT_DTYPE_F32, 1, &two);
    in[1].cst = true;
    CHECK(run_op(ctx, ERT_OP_TILE, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_SHAPE, "tile f32 repeats: %s", ert_last_error(ctx));
    tt_free(&in[1]);
    int64_t rd[2] = {1, 2};
    in[1] = tt_new(ERT_DTYPE_I64, 2, rd);
    in[1].cst = true;
    CHECK(run_op(ctx, ERT_OP_TILE, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_SHAPE, "tile 2-D repeats: %s", ert_last_error(ctx));
    tt_free(&in[1]);
    int64_t big[2] = {INT64_MAX / 2, 3};
    in[1] = tt_ints(big, 2);
    CHECK(run_op(ctx, ERT_OP_TILE, NULL, 0, in, 2, &out, 1, NULL) == ERT_E_SHAPE, "tile overflow: %s", ert_last_error(ctx));
    tt_free(&in[1]);
    tt_free(&in[0]);
}

static void test_cast(void) {
    int64_t n = 64;
    tt f = tt_new(ERT_DTYPE_F32, 1, &n), out;
    float *fv = f.data;
    for (int i = 0; i < n; i++) fv[i] = (float)ert_test_uniform(&rng, -130, 300);
    fv[0] = -2.75f, fv[1] = 2.75f, fv[2] = 0, fv[3] = -0.5f;
    struct { int code; ert_dtype dt; } cs[] = {{6, ERT_DTYPE_I32}, {7, ERT_DTYPE_I64}, {3, ERT_DTYPE_I8}, {2, ERT_DTYPE_U8},
                                               {9, ERT_DTYPE_BOOL}, {10, ERT_DTYPE_F16}, {16, ERT_DTYPE_BF16}, {1, ERT_DTYPE_F32}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        ert_attr_val a = A_I("to", cs[c].code);
        ert_status st = run_op(ctx, ERT_OP_CAST, &a, 1, &f, 1, &out, 1, NULL);
        CHECK(st == ERT_OK && out.dt == cs[c].dt, "cast to %d: %s", cs[c].code, ert_last_error(ctx));
        if (st) continue;
        int bad = 0;
        for (int i = 0; i < n; i++) {
            double x = fv[i], y = tt_get(&out, i), t = trunc(x);
            switch (cs[c].dt) {
            case ERT_DTYPE_I32: case ERT_DTYPE_I64: bad += y != t; break;
            case ERT_DTYPE_I8: bad += (t >= -128 && t <= 127) ? y != t : 0; break; /* out of range: unspecified */
            case ERT_DTYPE_U8: bad += (t >= 0 && t <= 255) ? y != t : 0; break;
            case ERT_DTYPE_BOOL: bad += y != (x != 0); break;
            case ERT_DTYPE_F16: bad += fabs(y - x) > fabs(x) * 0x1p-11; break;
            case ERT_DTYPE_BF16: bad += fabs(y - x) > fabs(x) * 0x1p-8; break;
            default: bad += y != x; break;
            }
        }
        CHECK(bad == 0, "cast f32 -> %d: %d wrong", cs[c].code, bad);
        /* and back to f32 where exact */
        if (cs[c].dt == ERT_DTYPE_I32 || cs[c].dt == ERT_DTYPE_BOOL) {
            tt back;
            ert_attr_val a1 = A_I("to", 1);
            CHECK_OK(run_op(ctx, ERT_OP_CAST, &a1, 1, &out, 1, &back, 1, NULL), ctx);
            if (back.data) {
                bad = 0;
                for (int i = 0; i < n; i++) bad += tt_get(&back, i) != tt_get(&out, i);
                CHECK(bad == 0, "cast %d -> f32", cs[c].code);
                tt_free(&back);
            }
        }
        tt_free(&out);
    }
    /* i64 beyond 2^53 -> i32 wraps like two's complement, -> i64 exactly */
    int64_t big[2] = {((int64_t)1 << 40) + 5, -3};
    tt b = tt_ints(big, 2);
    ert_attr_val a6 = A_I("to", 6), a11 = A_I("to", 11);
    CHECK_OK(run_op(ctx, ERT_OP_CAST, &a6, 1, &b, 1, &out, 1, NULL), ctx);
    if (out.data) {
        CHECK(((int32_t *)out.data)[0] == 5 && ((int32_t *)out.data)[1] == -3, "cast i64 -> i32 wraps");
        tt_free(&out);
    }
    CHECK(run_op(ctx, ERT_OP_CAST, &a11, 1, &f, 1, &out, 1, NULL) == ERT_E_UNSUPPORTED, "cast to double");
    CHECK(run_op(ctx, ERT_OP_CAST, NULL, 0, &f, 1, &out, 1, NULL) == ERT_E_ARG, "cast without to");
    tt_free(&b);
    tt_free(&f);
}

static void test_shape_range(void) {
    /* Shape(start, end) */
    int64_t d[4] = {2, 3, 5, 7};
    tt x = rand_t(ERT_DTYPE_U8, 4, d), out;
    struct { int has_s, has_e; int64_t s, e; int n; int64_t first; } sc[] = {
        {0, 0, 0, 0, 4, 2}, {1, 0, 1, 0, 3, 3}, {0, 1, 0, -1, 3, 2}, {1, 1, -10, 10, 4, 2}, {1, 1, 3, 1, 0, 0}, {1, 1, -2, 4, 2, 5}};
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
        ert_attr_val at[2];
        int na = 0;
        if (sc[i].has_s) at[na++] = A_I("start", sc[i].s);
        if (sc[i].has_e) at[na++] = A_I("end", sc[i].e);
        CHECK_OK(run_op(ctx, ERT_OP_SHAPE, at, na, &x, 1, &out, 1, NULL), ctx);
        if (!out.data) continue;
        CHECK(out.dt == ERT_DTYPE_I64 && out.nd == 1 && out.dims[0] == sc[i].n && (sc[i].n == 0 || ((int64_t *)out.data)[0] == sc[i].first),
              "shape case %zu", i);
        tt_free(&out);
    }
    tt_free(&x);
    /* Size: element count as an i64 scalar, any dtype and rank (0-d: 1, a zero dim: 0) */
    static const ert_dtype sdt[] = {ERT_DTYPE_F32, ERT_DTYPE_U8, ERT_DTYPE_I64, ERT_DTYPE_BOOL, ERT_DTYPE_F16};
    for (int rep = 0; rep < 12; rep++) {
        int64_t sd[ERT_MAX_DIMS], want = 1;
        int snd = rand_dims(&rng, 0, 5, 6, sd);
        if (rep == 11) snd = 3, sd[0] = 4, sd[1] = 0, sd[2] = 3;
        for (int k = 0; k < snd; k++) want *= sd[k];
        tt sx = tt_new(sdt[rep % 5], snd, sd);
        CHECK_OK(run_op(ctx, ERT_OP_SIZE, NULL, 0, &sx, 1, &out, 1, NULL), ctx);
        if (out.data) {
            CHECK(out.dt == ERT_DTYPE_I64 && out.nd == 0 && *(int64_t *)out.data == want, "size rank %d: %lld want %lld",
                  snd, (long long)*(int64_t *)out.data, (long long)want);
            tt_free(&out);
        }
        tt_free(&sx);
    }
    /* ConstantOfShape */
    int64_t s23[2] = {2, 3}, neg[1] = {-1};
    float fv[1] = {2.5f};
    int64_t iv[1] = {-7}, iv2[1] = {((int64_t)1 << 60) + 1};
    tt s = tt_ints(s23, 2);
    struct { int na; ert_attr_val a[2]; ert_dtype dt; double v; } cc[] = {
        {0, {{0}}, ERT_DTYPE_F32, 0},
        {1, {A_FS("value", fv, 1)}, ERT_DTYPE_F32, 2.5},
        {1, {A_IS("value", iv, 1)}, ERT_DTYPE_I64, -7},
        {2, {A_IS("value", iv, 1), A_I("value_dtype", ERT_DTYPE_I32)}, ERT_DTYPE_I32, -7},
        {2, {A_FS("value", fv, 1), A_I("value_dtype", ERT_DTYPE_F16)}, ERT_DTYPE_F16, 2.5},
    };
    for (size_t i = 0; i < sizeof cc / sizeof cc[0]; i++) {
        ert_status st = run_op(ctx, ERT_OP_CONSTANT_OF_SHAPE, cc[i].a, cc[i].na, &s, 1, &out, 1, NULL);
        CHECK(st == ERT_OK, "constant_of_shape %zu: %s", i, ert_last_error(ctx));
        if (st) continue;
        bool ok = out.dt == cc[i].dt && same_shape(&out, 2, s23);
        for (int k = 0; ok && k < 6; k++) ok = tt_get(&out, k) == cc[i].v;
        CHECK(ok, "constant_of_shape case %zu", i);
        tt_free(&out);
    }
    ert_attr_val big = A_IS("value", iv2, 1);
    tt s0 = tt_ints(NULL, 0);
    CHECK_OK(run_op(ctx, ERT_OP_CONSTANT_OF_SHAPE, &big, 1, &s0, 1, &out, 1, NULL), ctx);
    if (out.data) {
        CHECK(out.nd == 0 && *(int64_t *)out.data == iv2[0], "constant_of_shape 0-d exact i64");
        tt_free(&out);
    }
    tt_free(&s);
    s = tt_ints(neg, 1);
    CHECK(run_op(ctx, ERT_OP_CONSTANT_OF_SHAPE, NULL, 0, &s, 1, &out, 1, NULL) == ERT_E_SHAPE, "constant_of_shape negative");
    tt_free(&s);
    tt_free(&s0);
    /* Range: f32, i32, i64 with negative delta; length = max(ceil((limit - start) / delta), 0) */
    struct { ert_dtype dt; double s, l, dl; } rc[] = {{ERT_DTYPE_F32, 0, 1, 0.1}, {ERT_DTYPE_F32, 3, -2.5, -0.75},
                                                      {ERT_DTYPE_I32, 10, 0, -3}, {ERT_DTYPE_I64, -5, 5, 2},
                                                      {ERT_DTYPE_I64, 5, -5, 2}, {ERT_DTYPE_I32, 1, 2, 100}};
    for (size_t i = 0; i < sizeof rc / sizeof rc[0]; i++) {
        tt in[3];
        double v[3] = {rc[i].s, rc[i].l, rc[i].dl};
        for (int k = 0; k < 3; k++) {
            in[k] = tt_new(rc[i].dt, 0, NULL);
            in[k].cst = true;
            if (rc[i].dt == ERT_DTYPE_F32) *(float *)in[k].data = (float)v[k];
            else if (rc[i].dt == ERT_DTYPE_I32) *(int32_t *)in[k].data = (int32_t)v[k];
            else *(int64_t *)in[k].data = (int64_t)v[k];
        }
        ert_status st = run_op(ctx, ERT_OP_RANGE, NULL, 0, in, 3, &out, 1, NULL);
        CHECK(st == ERT_OK, "range %zu: %s", i, ert_last_error(ctx));
        if (st == ERT_OK) {
            double fs = tt_get(&in[0], 0), fl = tt_get(&in[1], 0), fd = tt_get(&in[2], 0);
            int64_t len = (int64_t)fmax(ceil((fl - fs) / fd), 0);
            bool ok = out.dt == rc[i].dt && out.nd == 1 && out.dims[0] == len;
            for (int64_t k = 0; ok && k < len; k++) ok = fabs(tt_get(&out, k) - (fs + (double)k * fd)) < 1e-5;
            CHECK(ok, "range case %zu (len %lld)", i, (long long)out.dims[0]);
            tt_free(&out);
        }
        if (i == 0) {
            *(float *)in[2].data = 0;
            CHECK(run_op(ctx, ERT_OP_RANGE, NULL, 0, in, 3, &out, 1, NULL) == ERT_E_ARG, "range delta 0");
            in[1].cst = false;
            CHECK(run_op(ctx, ERT_OP_RANGE, NULL, 0, in, 3, &out, 1, NULL) == ERT_E_UNSUPPORTED, "range runtime limit");
        }
        for (int k = 0; k < 3; k++) tt_free(&in[k]);
    }
}

/* ------------------------------------------------------------------ through a session */

/* The shape sub-graph exporters emit for x.view(x.size(0), -1):
 * Shape -> Gather(0) -> Unsqueeze -> Concat(.., [-1]) -> Reshape, then a
 * Transpose and a Slice. The shape chain must fold at create (batch is
 * dynamic in the model, fixed by the session). */
static void test_session_chain(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    if (!b) return;
    int64_t dims[3] = {-1, 3, 4}, one = 1, zero = 0, idx0 = 0, minus1 = -1, perm[2] = {1, 0};
    int64_t s_st = 1, s_en = INT64_MAX, s_ax = 0, s_step = 2;
    int32_t x, w_idx, w_m1, w_ax, w_st, w_en, w_sax, w_step, sh, g, u, cat, r, t, y;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 3, dims, &x), ctx);
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_I64, 0, NULL, &idx0, &w_idx), ctx);
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_I64, 1, &one, &minus1, &w_m1), ctx);
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_I64, 1, &one, &zero, &w_ax), ctx);
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_I64, 1, &one, &s_st, &w_st), ctx);
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_I64, 1, &one, &s_en, &w_en), ctx);
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_I64, 1, &one, &s_ax, &w_sax), ctx);
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_I64, 1, &one, &s_step, &w_step), ctx);
    ert_attr ax0 = ERT_ATTR_I("axis", 0), pm = ERT_ATTR_IS("perm", perm, 2);
    int32_t in_g[2] = {0, w_idx}, in_u[2] = {0, w_ax}, in_c[2] = {0, w_m1}, in_r[2] = {x, 0};
    CHECK_OK(ert_builder_node(b, "Shape", NULL, &x, 1, NULL, 0, &sh, 1), ctx);
    in_g[0] = sh;
    CHECK_OK(ert_builder_node(b, "Gather", NULL, in_g, 2, &ax0, 1, &g, 1), ctx);
    in_u[0] = g;
    CHECK_OK(ert_builder_node(b, "Unsqueeze", NULL, in_u, 2, NULL, 0, &u, 1), ctx);
    in_c[0] = u;
    CHECK_OK(ert_builder_node(b, "Concat", NULL, in_c, 2, &ax0, 1, &cat, 1), ctx);
    in_r[1] = cat;
    CHECK_OK(ert_builder_node(b, "Reshape", NULL, in_r, 2, NULL, 0, &r, 1), ctx);
    CHECK_OK(ert_builder_node(b, "Transpose", NULL, &r, 1, &pm, 1, &t, 1), ctx);
    int32_t in_s[5] = {t, w_st, w_en, w_sax, w_step};
    CHECK_OK(ert_builder_node(b, "Slice", NULL, in_s, 5, NULL, 0, &y, 1), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    if (!m) return;
    ert_session_options o = {.batch = 3};
    ert_session *s = NULL;
    CHECK_OK(ert_session_create(m, &o, &s), ctx);
    if (s) {
        ert_tensor_info ti;
        CHECK_OK(ert_session_output_info(s, 0, &ti), ctx);
        /* (3,12) -> transpose (12,3) -> rows 1,3,..,11 -> (6,3) */
        CHECK(ti.ndim == 2 && ti.dims[0] == 6 && ti.dims[1] == 3, "chain output shape %lld,%lld", (long long)ti.dims[0], (long long)ti.dims[1]);
        float xv[36], yv[18];
        ert_test_fill(&rng, xv, 36, -1, 1);
        CHECK_OK(ert_session_set_input(s, 0, xv, sizeof xv), ctx);
        CHECK_OK(ert_session_run(s), ctx);
        CHECK_OK(ert_session_get_output(s, 0, yv, sizeof yv), ctx);
        int bad = 0;
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 3; j++) bad += yv[i * 3 + j] != xv[j * 12 + 1 + 2 * i];
        CHECK(bad == 0, "chain values: %d wrong", bad);
        ert_session_free(s);
    }
    ert_model_free(m);
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
        test_resize();
        test_resize_crop();
        test_expand();
        test_tile();
        test_cast();
        test_shape_range();
    }
    test_session_chain();
    ert_threadpool_free(oh_pool);
    ert_context_free(ctx);
    return ert_test_finish("ops_tensor");
}

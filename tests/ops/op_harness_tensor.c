/* Op harness cases: data movement, shape ops, CumSum, Not, Cast, Resize. */
#include "harness_cases.h"

/* ------------------------------------------------------------ data movement */

/* Output element i (of iv[0]) reads element g_map[i] of operand g_src[i]
 * (operand 0 where there is no g_src), or g_fill where the map gives -1;
 * the case computes the map when it is made. */
static int64_t *g_map;
static uint8_t *g_src;
static double g_fill;
static void map_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->iv[0]; i++) y[i] = g_map[i] < 0 ? g_fill : c->pd[g_src ? g_src[i] : 0][g_map[i]];
}

/* A node whose output gathers its operands' elements through g_map. */
static void run_map(hcase *c, int64_t ny) {
    c->r.iv[0] = ny;
    c->ref = map_ref;
    run(c);
    free(g_map), free(g_src);
    g_map = NULL, g_src = NULL;
}

static int64_t *identity_map(int64_t n) {
    int64_t *m = malloc((size_t)(n ? n : 1) * sizeof *m);
    for (int64_t i = 0; i < n; i++) m[i] = i;
    return m;
}

void cases_reshape(void) {
    int64_t d[4];
    int nd = rdims(1, 4, 4, d);
    int64_t n = nel(nd, d);
    hcase hc, *c;
    /* Identity, Dropout (inference) */
    static const char *same[] = {"Identity", "Dropout"};
    for (int k = 0; k < 2; k++) {
        c = begin(&hc, same[k]);
        c->no_grad = k == 1; /* NOT_HERE says why */
        add_f32(c, nd, d, -1, 1);
        set_y(c, ERT_DTYPE_F32, nd, d);
        g_map = identity_map(n);
        run_map(c, n);
    }
    /* Flatten at a random axis */
    c = begin(&hc, "Flatten");
    int ax = ert_test_int(&rng, 0, nd);
    add_f32(c, nd, d, -1, 1);
    c->at[c->na++] = ERT_ATTR_I("axis", ax);
    int64_t fd[2] = {nel(ax, d), nel(nd - ax, d + ax)};
    set_y(c, ERT_DTYPE_F32, 2, fd);
    g_map = identity_map(n);
    run_map(c, n);
    /* Reshape to (n/last, last) with a -1 */
    c = begin(&hc, "Reshape");
    static int64_t shp[2];
    shp[0] = -1, shp[1] = d[nd - 1];
    add_f32(c, nd, d, -1, 1);
    int64_t two = 2;
    add_const(c, ERT_DTYPE_I64, 1, &two, shp);
    int64_t rd[2] = {n / d[nd - 1], d[nd - 1]};
    set_y(c, ERT_DTYPE_F32, 2, rd);
    g_map = identity_map(n);
    run_map(c, n);
    /* Unsqueeze at 0 and the end; Squeeze of a 1-dim */
    c = begin(&hc, "Unsqueeze");
    static int64_t uax[2];
    uax[0] = 0, uax[1] = -1;
    add_f32(c, nd, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 1, &two, uax);
    int64_t ud[6] = {1};
    memcpy(ud + 1, d, (size_t)nd * sizeof *d);
    ud[nd + 1] = 1;
    set_y(c, ERT_DTYPE_F32, nd + 2, ud);
    g_map = identity_map(n);
    run_map(c, n);
    c = begin(&hc, "Squeeze");
    add_f32(c, nd + 2, ud, -1, 1);
    static int64_t sax[1];
    sax[0] = ert_test_int(&rng, 0, 1) ? 0 : -1;
    int64_t one = 1;
    add_const(c, ERT_DTYPE_I64, 1, &one, sax);
    set_y(c, ERT_DTYPE_F32, nd + 1, sax[0] == 0 ? ud + 1 : ud);
    g_map = identity_map(n);
    run_map(c, n);
}

void cases_transpose_slice_pad(void) {
    int64_t d[4], idx[6];
    int nd = rdims(1, 4, 5, d);
    int64_t n = nel(nd, d);
    /* Transpose by a random permutation */
    hcase hc, *c = begin(&hc, "Transpose");
    static int64_t perm[4];
    for (int i = 0; i < nd; i++) perm[i] = i;
    for (int i = nd - 1; i > 0; i--) {
        int j = ert_test_int(&rng, 0, i);
        int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int64_t td[4];
    for (int i = 0; i < nd; i++) td[i] = d[perm[i]];
    add_f32(c, nd, d, -1, 1);
    c->at[c->na++] = ERT_ATTR_IS("perm", perm, nd);
    set_y(c, ERT_DTYPE_F32, nd, td);
    g_map = malloc((size_t)n * sizeof *g_map);
    for (int64_t i = 0; i < n; i++) {
        int64_t o[4], in_idx[4], off = 0;
        unflat(i, nd, td, o);
        for (int k = 0; k < nd; k++) in_idx[perm[k]] = o[k];
        for (int k = 0; k < nd; k++) off = off * d[k] + in_idx[k];
        g_map[i] = off;
    }
    run_map(c, n);
    /* Slice: random start/end/step (negative steps too) on random axes */
    c = begin(&hc, "Slice");
    static int64_t st[4], en[4], axs[4], sp[4];
    int64_t sd[4];
    memcpy(sd, d, sizeof sd);
    int na = 0;
    int64_t start[4] = {0}, step[4] = {1, 1, 1, 1};
    for (int a = 0; a < nd; a++) {
        if (!ert_test_int(&rng, 0, 1)) continue;
        int64_t s0 = ert_test_int(&rng, 0, (int)d[a] - 1), s1 = ert_test_int(&rng, 0, (int)d[a] - 1);
        int64_t stp = ert_test_int(&rng, 1, 2) * (s1 < s0 ? -1 : 1);
        if (s1 == s0) s1 = s0 + 1, stp = 1;
        else if (stp > 0) s1++; /* end exclusive: at least one element */
        else s1 = s1 - 1;
        st[na] = s0, en[na] = s1 < 0 ? -(int64_t)d[a] - 1 : s1, axs[na] = a - (ert_test_int(&rng, 0, 1) ? nd : 0), sp[na] = stp;
        start[a] = s0, step[a] = stp;
        sd[a] = stp > 0 ? (s1 - s0 + stp - 1) / stp : (s0 - s1 + (-stp) - 1) / (-stp);
        na++;
    }
    if (na == 0) { /* at least one axis */
        st[0] = 0, en[0] = d[0], axs[0] = 0, sp[0] = 1, na = 1;
    }
    int64_t nna = na;
    add_f32(c, nd, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 1, &nna, st);
    add_const(c, ERT_DTYPE_I64, 1, &nna, en);
    add_const(c, ERT_DTYPE_I64, 1, &nna, axs);
    add_const(c, ERT_DTYPE_I64, 1, &nna, sp);
    int64_t ns = nel(nd, sd);
    set_y(c, ERT_DTYPE_F32, nd, sd);
    g_map = malloc((size_t)(ns ? ns : 1) * sizeof *g_map);
    for (int64_t i = 0; i < ns; i++) {
        int64_t off = 0;
        unflat(i, nd, sd, idx);
        for (int k = 0; k < nd; k++) off = off * d[k] + start[k] + idx[k] * step[k];
        g_map[i] = off;
    }
    run_map(c, ns);
    /* Pad: constant (with a value), edge or reflect; negative pads crop */
    static const char *modes[] = {"constant", "edge", "reflect"};
    for (int mode = 0; mode < 3; mode++) {
        c = begin(&hc, "Pad");
        snprintf(c->what, sizeof c->what, "Pad(%s)", modes[mode]);
        static int64_t pads[8];
        static float val;
        int64_t pd[4];
        for (int a = 0; a < nd; a++) {
            int lo_max = mode == 2 ? (int)d[a] - 1 : 2;
            pads[a] = ert_test_int(&rng, mode == 0 && d[a] > 1 ? -1 : 0, lo_max < 2 ? lo_max : 2);
            pads[nd + a] = ert_test_int(&rng, 0, lo_max < 2 ? lo_max : 2);
            pd[a] = d[a] + pads[a] + pads[nd + a];
        }
        val = (float)ert_test_uniform(&rng, -1, 1);
        int64_t np2 = 2 * nd;
        add_f32(c, nd, d, -1, 1);
        add_const(c, ERT_DTYPE_I64, 1, &np2, pads);
        if (mode == 0) add_const(c, ERT_DTYPE_F32, 0, NULL, &val);
        c->at[c->na++] = ERT_ATTR_S("mode", modes[mode]);
        int64_t np = nel(nd, pd);
        set_y(c, ERT_DTYPE_F32, nd, pd);
        g_fill = mode == 0 ? val : 0;
        g_map = malloc((size_t)(np ? np : 1) * sizeof *g_map);
        for (int64_t i = 0; i < np; i++) {
            int64_t off = 0;
            bool out = false;
            unflat(i, nd, pd, idx);
            for (int k = 0; k < nd; k++) {
                int64_t j = idx[k] - pads[k];
                if (j < 0 || j >= d[k]) {
                    if (mode == 0) out = true;
                    else if (mode == 1) j = j < 0 ? 0 : d[k] - 1;
                    else j = j < 0 ? -j : 2 * (d[k] - 1) - j;
                }
                off = off * d[k] + (j < 0 ? 0 : j >= d[k] ? d[k] - 1 : j);
            }
            g_map[i] = out ? -1 : off;
        }
        run_map(c, np);
    }
}

void cases_tile_expand(void) {
    int64_t d[4], idx[4];
    int nd = rdims(1, 4, 3, d);
    hcase hc, *c = begin(&hc, "Tile");
    static int64_t reps[4];
    int64_t td[4];
    for (int a = 0; a < nd; a++) reps[a] = ert_test_int(&rng, 1, 3), td[a] = d[a] * reps[a];
    int64_t nnd = nd;
    add_f32(c, nd, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 1, &nnd, reps);
    int64_t nt = nel(nd, td);
    set_y(c, ERT_DTYPE_F32, nd, td);
    g_map = malloc((size_t)nt * sizeof *g_map);
    for (int64_t i = 0; i < nt; i++) {
        int64_t off = 0;
        unflat(i, nd, td, idx);
        for (int k = 0; k < nd; k++) off = off * d[k] + idx[k] % d[k];
        g_map[i] = off;
    }
    run_map(c, nt);
    /* Expand: x's dims are 1 or the target's; the target may add leading dims */
    c = begin(&hc, "Expand");
    static int64_t shp[5];
    int extra = ert_test_int(&rng, 0, 1), ond = nd + extra;
    int64_t xd[4], od[5];
    for (int a = 0; a < ond; a++) od[a] = ert_test_int(&rng, 1, 4);
    od[ond - 1] = ert_test_int(&rng, 2, 4);
    for (int a = 0; a < nd; a++) xd[a] = ert_test_int(&rng, 0, 1) ? od[a + extra] : 1;
    xd[nd - 1] = od[ond - 1];
    for (int a = 0; a < ond; a++) shp[a] = ert_test_int(&rng, 0, 3) == 0 && a >= extra && xd[a - extra] == od[a] ? 1 : od[a];
    int64_t nsh = ond;
    add_f32(c, nd, xd, -1, 1);
    add_const(c, ERT_DTYPE_I64, 1, &nsh, shp);
    int64_t ne = nel(ond, od);
    set_y(c, ERT_DTYPE_F32, ond, od);
    g_map = malloc((size_t)ne * sizeof *g_map);
    for (int64_t i = 0; i < ne; i++) {
        int64_t oi[5], off = 0;
        unflat(i, ond, od, oi);
        for (int k = 0; k < nd; k++) off = off * xd[k] + (xd[k] == 1 ? 0 : oi[k + extra]);
        g_map[i] = off;
    }
    run_map(c, ne);
}

/* Concat of 2-3 operands along a random axis. iv: n, axis, dims (rank 3) of
 * each at iv[2 + 3k]. */
static void concat_ref(const ert_ref *c, double *y) {
    int n = (int)c->iv[0], ax = (int)c->iv[1];
    int64_t outer = 1, inner = 1, tot = 0;
    for (int i = 0; i < ax; i++) outer *= c->iv[2 + i];
    for (int i = ax + 1; i < 3; i++) inner *= c->iv[2 + i];
    for (int k = 0; k < n; k++) tot += c->iv[2 + 3 * k + ax];
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0, base = 0; k < n; base += (int)c->iv[2 + 3 * k + ax], k++) {
            int64_t dk = c->iv[2 + 3 * k + ax];
            for (int64_t j = 0; j < dk * inner; j++) y[(o * tot + base) * inner + j] = c->pd[k][o * dk * inner + j];
        }
}

void cases_concat_split_gather(void) {
    hcase hc, *c = begin(&hc, "Concat");
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 2, 4)};
    int n = ert_test_int(&rng, 2, 3), ax = ert_test_int(&rng, 0, 2);
    c->r.iv[0] = n, c->r.iv[1] = ax;
    int64_t od[3];
    memcpy(od, d, sizeof d);
    od[ax] = 0;
    for (int k = 0; k < n; k++) {
        int64_t dk[3] = {d[0], d[1], d[2]};
        dk[ax] = ert_test_int(&rng, 1, 3);
        od[ax] += dk[ax];
        memcpy(c->r.iv + 2 + 3 * k, dk, sizeof dk);
        add_f32(c, 3, dk, -1, 1);
    }
    c->at[c->na++] = ERT_ATTR_I("axis", ax - (ert_test_int(&rng, 0, 1) ? 3 : 0));
    set_y(c, ERT_DTYPE_F32, 3, od);
    c->ref = concat_ref;
    run(c);
    /* Split into 2-3 parts (sizes as an input); one output checked */
    c = begin(&hc, "Split");
    ax = ert_test_int(&rng, 0, 2);
    int parts = ert_test_int(&rng, 2, 3);
    static int64_t sizes[3];
    int64_t x3[3] = {d[0], d[1], d[2]};
    x3[ax] = 0;
    for (int k = 0; k < parts; k++) sizes[k] = ert_test_int(&rng, 1, 3), x3[ax] += sizes[k];
    int which = ert_test_int(&rng, 0, parts - 1);
    int64_t before = 0;
    for (int k = 0; k < which; k++) before += sizes[k];
    int64_t np = parts;
    add_f32(c, 3, x3, -1, 1);
    add_const(c, ERT_DTYPE_I64, 1, &np, sizes);
    c->at[c->na++] = ERT_ATTR_I("axis", ax);
    c->n_out = parts, c->y_out = which;
    snprintf(c->what, sizeof c->what, "Split(output %d of %d, axis %d)", which, parts, ax);
    int64_t yd[3] = {x3[0], x3[1], x3[2]}, idx[3];
    yd[ax] = sizes[which];
    int64_t ny = nel(3, yd);
    set_y(c, ERT_DTYPE_F32, 3, yd);
    g_map = malloc((size_t)ny * sizeof *g_map);
    for (int64_t i = 0; i < ny; i++) {
        unflat(i, 3, yd, idx);
        idx[ax] += before;
        g_map[i] = (idx[0] * x3[1] + idx[1]) * x3[2] + idx[2];
    }
    run_map(c, ny);
    /* Gather: repeated and negative indices along a random axis */
    c = begin(&hc, "Gather");
    ax = ert_test_int(&rng, 0, 2);
    bool scalar = ert_test_int(&rng, 0, 2) == 0; /* x[:, k]: the axis goes */
    int ni = scalar ? 1 : ert_test_int(&rng, 1, 5);
    memcpy(c->r.iv, d, sizeof d);
    c->r.iv[3] = ax, c->r.iv[4] = ni;
    for (int j = 0; j < ni; j++) c->r.iv[5 + j] = ert_test_int(&rng, -(int)d[ax], (int)d[ax] - 1);
    static int64_t gidx[8];
    memcpy(gidx, c->r.iv + 5, (size_t)ni * sizeof *gidx);
    int64_t nni = ni;
    add_f32(c, 3, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, scalar ? 0 : 1, &nni, gidx);
    c->at[c->na++] = ERT_ATTR_I("axis", ax);
    int64_t gd[3] = {d[0], d[1], d[2]};
    gd[ax] = ni;
    if (scalar) {
        snprintf(c->what, sizeof c->what, "Gather(scalar index, axis %d)", ax);
        for (int i = ax; i < 2; i++) gd[i] = gd[i + 1];
    }
    set_y(c, ERT_DTYPE_F32, scalar ? 2 : 3, gd);
    c->ref = gather_ref;
    run(c);
}

static void cumsum_ref(const ert_ref *c, double *y) { /* iv: d0 d1 d2, axis, exclusive, reverse */
    const int64_t *d = c->iv;
    int ax = (int)c->iv[3];
    int64_t outer, inner;
    ert_ref_axis(d, 3, ax, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            double s = 0;
            for (int64_t j0 = 0; j0 < d[ax]; j0++) {
                int64_t j = c->iv[5] ? d[ax] - 1 - j0 : j0, e = (o * d[ax] + j) * inner + in;
                if (c->iv[4]) y[e] = s, s += c->pd[0][e];
                else s += c->pd[0][e], y[e] = s;
            }
        }
}

static void range_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->iv[0]; i++) y[i] = c->fv[0] + (double)i * c->fv[1];
}

static void shape_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->iv[0]; i++) y[i] = (double)c->iv[1 + i];
}

static void zeros_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->iv[0]; i++) y[i] = 0;
}

static void not_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->pn[0]; i++) y[i] = c->pd[0][i] == 0;
}

static void cast_ref(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->pn[0]; i++) y[i] = c->iv[0] ? c->pd[0][i] != 0 : c->pd[0][i];
}

void cases_misc(void) {
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 5), ert_test_int(&rng, 2, 4)};
    hcase hc, *c = begin(&hc, "CumSum");
    int ax = ert_test_int(&rng, 0, 2);
    static int64_t axis;
    axis = ax - (ert_test_int(&rng, 0, 1) ? 3 : 0);
    memcpy(c->r.iv, d, sizeof d);
    c->r.iv[3] = ax, c->r.iv[4] = ert_test_int(&rng, 0, 1), c->r.iv[5] = ert_test_int(&rng, 0, 1);
    add_f32(c, 3, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 0, NULL, &axis);
    c->at[c->na++] = ERT_ATTR_I("exclusive", c->r.iv[4]), c->at[c->na++] = ERT_ATTR_I("reverse", c->r.iv[5]);
    set_y(c, ERT_DTYPE_F32, 3, d);
    c->ref = cumsum_ref;
    run(c);
    /* Not: bool in, bool out */
    c = begin(&hc, "Not");
    add_f32(c, 3, d, 0, 1)->kind = S_BOOL;
    set_y(c, ERT_DTYPE_BOOL, 3, d);
    c->ref = not_ref;
    run(c);
    /* Cast f32 -> f32 (gradient flows), -> i64 of whole numbers, -> bool */
    static const int64_t to[3] = {ERT_DTYPE_F32, ERT_DTYPE_I64, ERT_DTYPE_BOOL};
    static const int onnx_to[3] = {1, 7, 9};
    for (int k = 0; k < 3; k++) {
        c = begin(&hc, "Cast");
        slot *x = add_f32(c, 3, d, -3, 3);
        x->grid = k > 0; /* whole numbers, zeros among them */
        c->at[c->na++] = ERT_ATTR_I("to", onnx_to[k]);
        c->r.iv[0] = k == 2;
        c->no_grad = k > 0;
        set_y(c, (ert_dtype)to[k], 3, d);
        c->ref = cast_ref;
        run(c);
    }
    /* Shape and Size of a graph input (folded at create: shapes are static) */
    c = begin(&hc, "Shape");
    add_f32(c, 3, d, -1, 1);
    c->r.iv[0] = 3;
    memcpy(c->r.iv + 1, d, sizeof d);
    int64_t three = 3;
    set_y(c, ERT_DTYPE_I64, 1, &three);
    c->ref = shape_ref;
    run(c);
    c = begin(&hc, "Size");
    add_f32(c, 3, d, -1, 1);
    c->r.iv[0] = 1, c->r.iv[1] = nel(3, d);
    set_y(c, ERT_DTYPE_I64, 0, NULL);
    c->ref = shape_ref;
    run(c);
    /* ConstantOfShape (no value attribute: f32 zeros); Range of constants */
    c = begin(&hc, "ConstantOfShape");
    add_const(c, ERT_DTYPE_I64, 1, &three, d);
    c->r.iv[0] = nel(3, d);
    set_y(c, ERT_DTYPE_F32, 3, d);
    c->ref = zeros_ref;
    run(c);
    c = begin(&hc, "Range");
    static float rs[3];
    rs[0] = (float)ert_test_int(&rng, -5, 5), rs[2] = ert_test_int(&rng, 0, 1) ? 0.5f : -1.5f;
    int64_t cnt = ert_test_int(&rng, 1, 9);
    rs[1] = rs[0] + rs[2] * ((float)cnt - 0.5f);
    for (int k = 0; k < 3; k++) add_const(c, ERT_DTYPE_F32, 0, NULL, &rs[k]);
    c->r.iv[0] = cnt, c->r.fv[0] = rs[0], c->r.fv[1] = rs[2];
    set_y(c, ERT_DTYPE_F32, 1, &cnt);
    c->ref = range_ref;
    run(c);
}

/* Resize of (N, C, H, W) by whole factors (sizes given): nearest (floor or
 * round_prefer_floor; whole factors leave no source coordinate on a tie)
 * or linear. iv: N C H W OH OW, mode (0 nearest, 1 linear), coordinate
 * transform (0 half_pixel, 1 asymmetric, 2 align_corners), nearest floor. */
static double resize_src(const ert_ref *c, int64_t o, int64_t in, int64_t out) {
    switch (c->iv[7]) {
    case 0: return ((double)o + 0.5) * (double)in / (double)out - 0.5;
    case 1: return (double)o * (double)in / (double)out;
    default: return out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0;
    }
}

static void resize_ref(const ert_ref *c, double *y) {
    const int64_t *v = c->iv;
    int64_t H = v[2], W = v[3], OH = v[4], OW = v[5];
    for (int64_t p = 0; p < v[0] * v[1]; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double sh = resize_src(c, oh, H, OH), sw = resize_src(c, ow, W, OW), r;
                const double *x = c->pd[0] + p * H * W;
                if (v[6] == 0) {
                    int64_t ih = (int64_t)(v[8] ? floor(sh) : ceil(sh - 0.5)), iw = (int64_t)(v[8] ? floor(sw) : ceil(sw - 0.5));
                    ih = ih < 0 ? 0 : ih >= H ? H - 1 : ih, iw = iw < 0 ? 0 : iw >= W ? W - 1 : iw;
                    r = x[ih * W + iw];
                } else {
                    sh = fmin(fmax(sh, 0), (double)(H - 1)), sw = fmin(fmax(sw, 0), (double)(W - 1));
                    int64_t h0 = (int64_t)floor(sh), w0 = (int64_t)floor(sw);
                    int64_t h1 = h0 + 1 < H ? h0 + 1 : H - 1, w1 = w0 + 1 < W ? w0 + 1 : W - 1;
                    double fh = sh - (double)h0, fw = sw - (double)w0;
                    r = (1 - fh) * ((1 - fw) * x[h0 * W + w0] + fw * x[h0 * W + w1]) +
                        fh * ((1 - fw) * x[h1 * W + w0] + fw * x[h1 * W + w1]);
                }
                y[(p * OH + oh) * OW + ow] = r;
            }
}

void cases_resize(void) {
    static const char *modes[] = {"nearest", "linear"}, *ctm[] = {"half_pixel", "asymmetric", "align_corners"};
    for (int mode = 0; mode < 2; mode++) {
        hcase hc, *c = begin(&hc, "Resize");
        int64_t *v = c->r.iv;
        v[0] = ert_test_int(&rng, 1, 2), v[1] = ert_test_int(&rng, 1, 3), v[2] = ert_test_int(&rng, 1, 5), v[3] = ert_test_int(&rng, 2, 5);
        v[4] = v[2] * ert_test_int(&rng, 1, 3), v[5] = v[3] * ert_test_int(&rng, 1, 3);
        v[6] = mode, v[7] = ert_test_int(&rng, 0, mode ? 2 : 1), v[8] = ert_test_int(&rng, 0, 1);
        snprintf(c->what, sizeof c->what, "Resize(%s, %s%s)", modes[mode], ctm[v[7]], mode == 0 && v[8] ? ", floor" : "");
        static int64_t sizes[4];
        int64_t xd[4] = {v[0], v[1], v[2], v[3]}, four = 4;
        sizes[0] = v[0], sizes[1] = v[1], sizes[2] = v[4], sizes[3] = v[5];
        add_f32(c, 4, xd, -1, 1);
        c->s[c->ns++].kind = S_OMIT; /* roi */
        c->s[c->ns++].kind = S_OMIT; /* scales */
        add_const(c, ERT_DTYPE_I64, 1, &four, sizes);
        c->at[c->na++] = ERT_ATTR_S("mode", modes[mode]);
        c->at[c->na++] = ERT_ATTR_S("coordinate_transformation_mode", ctm[v[7]]);
        if (mode == 0) c->at[c->na++] = ERT_ATTR_S("nearest_mode", v[8] ? "floor" : "round_prefer_floor");
        set_y(c, ERT_DTYPE_F32, 4, sizes);
        c->ref = resize_ref;
        run(c);
    }
}

/* GatherElements: y = data at the indices along axis (indices' dims at most
 * data's off the axis, any along it; negative indices too). ScatterElements:
 * data with updates written at distinct indices along axis. ScatterND: data
 * with update slices written at distinct index tuples of length k = 1 or 2. */
void cases_scatter(void) {
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 2, 4)}, id[3], idx[3];
    int ax = ert_test_int(&rng, 0, 2);
    static int64_t ind[64];
    hcase hc, *c = begin(&hc, "GatherElements");
    for (int a = 0; a < 3; a++) id[a] = a == ax ? ert_test_int(&rng, 1, 4) : ert_test_int(&rng, 1, (int)d[a]);
    int64_t n = nel(3, id);
    for (int64_t i = 0; i < n; i++) ind[i] = ert_test_int(&rng, -(int)d[ax], (int)d[ax] - 1);
    add_f32(c, 3, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 3, id, ind);
    c->at[c->na++] = ERT_ATTR_I("axis", ax - (ert_test_int(&rng, 0, 1) ? 3 : 0));
    set_y(c, ERT_DTYPE_F32, 3, id);
    g_map = malloc((size_t)n * sizeof *g_map);
    for (int64_t i = 0; i < n; i++) {
        unflat(i, 3, id, idx);
        idx[ax] = ind[i] < 0 ? ind[i] + d[ax] : ind[i];
        g_map[i] = (idx[0] * d[1] + idx[1]) * d[2] + idx[2];
    }
    run_map(c, n);

    c = begin(&hc, "ScatterElements");
    for (int a = 0; a < 3; a++) id[a] = ert_test_int(&rng, 1, (int)d[a]);
    n = nel(3, id);
    int64_t nd_ = nel(3, d);
    g_map = malloc((size_t)nd_ * sizeof *g_map), g_src = calloc((size_t)nd_, 1);
    for (int64_t o = 0; o < nd_; o++) g_map[o] = o;
    for (int64_t i = 0; i < n; i++) { /* each line along the axis: a prefix of a permutation */
        unflat(i, 3, id, idx);
        if (idx[ax] == 0) {
            int64_t perm[4];
            for (int64_t k = 0; k < d[ax]; k++) perm[k] = k;
            for (int64_t k = d[ax] - 1; k > 0; k--) {
                int j = ert_test_int(&rng, 0, (int)k);
                int64_t t = perm[k];
                perm[k] = perm[j], perm[j] = t;
            }
            for (int64_t k = 0; k < id[ax]; k++) {
                int64_t e = i + k * (ax == 0 ? id[1] * id[2] : ax == 1 ? id[2] : 1);
                ind[e] = perm[k] - (ert_test_int(&rng, 0, 1) ? d[ax] : 0);
            }
        }
    }
    for (int64_t i = 0; i < n; i++) {
        unflat(i, 3, id, idx);
        idx[ax] = ind[i] < 0 ? ind[i] + d[ax] : ind[i];
        int64_t t = (idx[0] * d[1] + idx[1]) * d[2] + idx[2];
        g_map[t] = i, g_src[t] = 1;
    }
    add_f32(c, 3, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 3, id, ind);
    add_f32(c, 3, id, -1, 1);
    c->at[c->na++] = ERT_ATTR_I("axis", ax);
    snprintf(c->what, sizeof c->what, "ScatterElements(axis %d)", ax);
    set_y(c, ERT_DTYPE_F32, 3, d);
    run_map(c, nd_);

    c = begin(&hc, "ScatterND");
    int k = ert_test_int(&rng, 1, 2);
    int64_t tuples = k == 1 ? d[0] : d[0] * d[1], order[12], slice = k == 1 ? d[1] * d[2] : d[2];
    for (int64_t t = 0; t < tuples; t++) order[t] = t;
    for (int64_t t = tuples - 1; t > 0; t--) {
        int j = ert_test_int(&rng, 0, (int)t);
        int64_t tmp = order[t];
        order[t] = order[j], order[j] = tmp;
    }
    int64_t m = ert_test_int(&rng, 1, (int)tuples), ishape[2] = {m, k}, ushape[3] = {m, k == 1 ? d[1] : d[2], d[2]};
    for (int64_t j = 0; j < m; j++) {
        if (k == 1) ind[j] = order[j];
        else ind[2 * j] = order[j] / d[1], ind[2 * j + 1] = order[j] % d[1];
    }
    g_map = malloc((size_t)nd_ * sizeof *g_map), g_src = calloc((size_t)nd_, 1);
    for (int64_t o = 0; o < nd_; o++) g_map[o] = o;
    for (int64_t j = 0; j < m; j++)
        for (int64_t e = 0; e < slice; e++) g_map[order[j] * slice + e] = j * slice + e, g_src[order[j] * slice + e] = 1;
    add_f32(c, 3, d, -1, 1);
    add_const(c, ERT_DTYPE_I64, 2, ishape, ind);
    add_f32(c, k == 1 ? 3 : 2, ushape, -1, 1);
    snprintf(c->what, sizeof c->what, "ScatterND(k %d)", k);
    set_y(c, ERT_DTYPE_F32, 3, d);
    run_map(c, nd_);
}

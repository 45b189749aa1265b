/* Op harness cases: element-wise ops, reductions, softmax, normalisations. */
#include "harness_cases.h"

/* ------------------------------------------------------------ element-wise */

static void unary_ref(const ert_ref *c, double *y) {
    int k = (int)c->iv[0];
    for (int64_t i = 0; i < c->pn[0]; i++) {
        double x = c->pd[0][i], v;
        switch (k) {
        case 10: v = erf(x); break;
        case 11: v = sqrt(x); break;
        case 12: v = exp(x); break;
        case 13: v = log(x); break;
        case 14: v = -x; break;
        case 15: v = fabs(x); break;
        case 16: v = 1 / x; break;
        case 17: v = floor(x); break;
        case 18: v = ceil(x); break;
        case 19: v = x > 0 ? x : c->fv[0] * (exp(x) - 1); break;                          /* Elu */
        case 20: v = 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (exp(x) - 1)); break; /* Selu */
        case 21: v = log1p(exp(x)); break;                                                  /* Softplus */
        case 22: v = x * tanh(log1p(exp(x))); break;                                        /* Mish */
        case 23: v = sin(x); break;
        case 24: v = cos(x); break;
        default: v = act_ref(k, x, c->fv); break; /* 0-9: ref64.h's activations */
        }
        y[i] = v;
    }
}

void cases_unary(void) {
    static const struct { const char *op; int k; double lo, hi, kink[3]; int nk; double tol; } U[] = {
        {"Relu", 0, -4, 4, {0}, 1, 1}, {"LeakyRelu", 1, -4, 4, {0}, 1, 1}, {"Sigmoid", 2, -4, 4, {0}, 0, 1},
        {"Tanh", 3, -4, 4, {0}, 0, 1}, {"HardSigmoid", 4, -4, 4, {-2.5, 2.5}, 2, 1},
        {"HardSwish", 5, -4, 4, {-3, 3}, 2, 1}, {"Silu", 6, -4, 4, {0}, 0, 1}, {"Gelu", 7, -4, 4, {0}, 0, 1},
        {"Gelu", 8, -4, 4, {0}, 0, 1}, {"Clip", 9, -2, 2, {-0.5, 1.0}, 2, 1}, {"Erf", 10, -3, 3, {0}, 0, 1},
        {"Sqrt", 11, 0.1, 4, {0}, 0, 1}, {"Exp", 12, -3, 3, {0}, 0, 1}, {"Log", 13, 0.1, 4, {0}, 0, 1},
        {"Neg", 14, -4, 4, {0}, 0, 1}, {"Abs", 15, -4, 4, {0}, 1, 1}, {"Reciprocal", 16, 0.5, 2, {0}, 0, 1},
        {"Floor", 17, -4, 4, {0}, 0, 1}, {"Ceil", 18, -4, 4, {0}, 0, 1}, {"Elu", 19, -4, 4, {0}, 1, 1},
        {"Selu", 20, -4, 4, {0}, 1, 1}, {"Softplus", 21, -4, 4, {0}, 0, 1}, {"Mish", 22, -4, 4, {0}, 0, 1},
        {"Sin", 23, -4, 4, {0}, 0, 1}, {"Cos", 24, -4, 4, {0}, 0, 1},
    };
    static const float clip_lo = -0.5f, clip_hi = 1.0f;
    for (size_t u = 0; u < sizeof U / sizeof U[0]; u++) {
        hcase hc, *c = begin(&hc, U[u].op);
        if (U[u].k == 8) snprintf(c->what, sizeof c->what, "Gelu(tanh)");
        int64_t d[4];
        int nd = rdims(1, 4, 5, d);
        slot *x = add_f32(c, nd, d, U[u].lo, U[u].hi);
        x->n_kink = U[u].nk;
        memcpy(x->kink, U[u].kink, sizeof U[u].kink);
        if (U[u].k == 17 || U[u].k == 18) x->n_kink = 0, x->gap = 0; /* exact in f32 and f16 alike */
        c->r.iv[0] = U[u].k;
        if (U[u].k == 1) c->at[c->na++] = ERT_ATTR_F("alpha", 0.1f), c->r.fv[0] = 0.1f;
        if (U[u].k == 4) {
            c->at[c->na++] = ERT_ATTR_F("alpha", 0.2f), c->at[c->na++] = ERT_ATTR_F("beta", 0.5f);
            c->r.fv[0] = 0.2f, c->r.fv[1] = 0.5f;
        }
        if (U[u].k == 8) c->at[c->na++] = ERT_ATTR_S("approximate", "tanh");
        if (U[u].k == 19) c->at[c->na++] = ERT_ATTR_F("alpha", 0.7f), c->r.fv[0] = 0.7f;
        if (U[u].k == 9) {
            add_const(c, ERT_DTYPE_F32, 0, NULL, &clip_lo);
            add_const(c, ERT_DTYPE_F32, 0, NULL, &clip_hi);
            c->r.fv[0] = clip_lo, c->r.fv[1] = clip_hi;
        }
        c->ref = unary_ref;
        set_y(c, ERT_DTYPE_F32, nd, d);
        run(c);
    }
}

/* Operands of a broadcasting op: k operands of random rank whose dims are
 * the output's or 1; dims padded to rank 4 into iv[4k..]. */
static void bcast_shapes(hcase *c, int n, double lo, double hi, int64_t *od) {
    int64_t full[4];
    for (int i = 0; i < 4; i++) full[i] = ert_test_int(&rng, 1, 4);
    full[3] = ert_test_int(&rng, 2, 4);
    int nd_out = 0;
    for (int k = 0; k < n; k++) {
        int nd = ert_test_int(&rng, 1, 4);
        int64_t d4[4];
        for (int i = 0; i < 4; i++) d4[i] = i < 4 - nd ? 1 : ert_test_int(&rng, 0, 2) ? full[i] : 1;
        if (nel(4, d4) < 2) d4[3] = full[3];
        memcpy(c->r.iv + 4 * k, d4, sizeof d4);
        add_f32(c, nd, d4 + 4 - nd, lo, hi);
        nd_out = nd > nd_out ? nd : nd_out;
    }
    c->r.iv[13] = n;
    c->ynd = nd_out;
    for (int i = 0; i < nd_out; i++) {
        int64_t m = 1;
        for (int k = 0; k < n; k++) m = c->r.iv[4 * k + 4 - nd_out + i] > m ? c->r.iv[4 * k + 4 - nd_out + i] : m;
        od[i] = m;
    }
}

void cases_binary(void) {
    static const struct { const char *op; int code, n; double lo, hi; } B[] = {
        {"Add", ERT_REF_ADD, 2, -2, 2}, {"Sub", ERT_REF_SUB, 2, -2, 2}, {"Mul", ERT_REF_MUL, 2, -2, 2},
        {"Div", ERT_REF_DIV, 2, 0.5, 2}, {"Pow", ERT_REF_POW, 2, 0.5, 2}, {"Min", ERT_REF_MIN, 3, -2, 2},
        {"Max", ERT_REF_MAX, 2, -2, 2}, {"Mean", ERT_REF_MEAN, 3, -2, 2}, {"Mod", ERT_REF_MOD, 2, 0.5, 4},
        {"Equal", ERT_REF_EQUAL, 2, -2, 2}, {"Less", ERT_REF_LESS, 2, -2, 2}, {"Greater", ERT_REF_GREATER, 2, -2, 2},
    };
    for (size_t u = 0; u < sizeof B / sizeof B[0]; u++) {
        hcase hc, *c = begin(&hc, B[u].op);
        int64_t od[4];
        int n = B[u].n == 3 ? ert_test_int(&rng, 1, 3) : 2;
        bcast_shapes(c, n, B[u].lo, B[u].hi, od);
        c->r.iv[12] = B[u].code;
        bool cmp = B[u].code >= ERT_REF_EQUAL;
        for (int k = 0; k < n; k++) c->s[k].grid = cmp; /* ties happen: Equal can be true */
        if (B[u].code == ERT_REF_POW) c->s[1].lo = -2, c->s[1].hi = 2;
        if (B[u].code == ERT_REF_MOD) {
            c->at[c->na++] = ERT_ATTR_I("fmod", 1), c->r.fv[0] = 1;
            c->s[0].lo = -8, c->s[0].hi = 8;
            c->tol = 10; /* fmod of values near a multiple: one f32 rounding of the quotient */
            c->no_half = "an f16 quotient picks another multiple near its boundaries";
        }
        set_y(c, cmp ? ERT_DTYPE_BOOL : ERT_DTYPE_F32, c->ynd, od);
        c->ref = binary_ref;
        run(c);
    }
    /* PRelu: the slope broadcasts to x (unidirectional) */
    hcase hc, *c = begin(&hc, "PRelu");
    int64_t d[4], sd[4];
    int nd = rdims(1, 4, 5, d);
    for (int i = 0; i < 4; i++) sd[i] = 1;
    for (int i = 0; i < nd; i++) sd[4 - nd + i] = ert_test_int(&rng, 0, 1) ? d[i] : 1;
    int snd = ert_test_int(&rng, 1, nd);
    for (int i = 0; i < 4 - snd; i++) sd[i] = 1; /* the slope has only its last snd dims */
    slot *x = add_f32(c, nd, d, -2, 2);
    x->gap = 0.05;
    add_f32(c, snd, sd + 4 - snd, 0.1, 0.5);
    for (int i = 0; i < 4; i++) c->r.iv[i] = i < 4 - nd ? 1 : d[i - (4 - nd)];
    memcpy(c->r.iv + 4, sd, sizeof sd);
    c->r.iv[12] = ERT_REF_PRELU, c->r.iv[13] = 2;
    set_y(c, ERT_DTYPE_F32, nd, d);
    c->ref = binary_ref;
    run(c);
    /* Where: a bool condition broadcast with both values */
    c = begin(&hc, "Where");
    int64_t od[4];
    bcast_shapes(c, 3, -2, 2, od);
    c->s[0].kind = S_BOOL;
    c->r.iv[12] = ERT_REF_WHERE;
    set_y(c, ERT_DTYPE_F32, c->ynd, od);
    c->ref = binary_ref;
    run(c);
}

/* ------------------------------------------------------------ reductions, softmax, norms */

static void arg_ref(const ert_ref *c, double *y) { /* iv: d0 d1 d2, axis, min */
    const int64_t *d = c->iv;
    int ax = (int)c->iv[3];
    int64_t outer, inner;
    ert_ref_axis(d, 3, ax, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t best = 0;
            for (int64_t j = 1; j < d[ax]; j++) {
                double v = c->pd[0][(o * d[ax] + j) * inner + in], bv = c->pd[0][(o * d[ax] + best) * inner + in];
                if (c->iv[4] ? v < bv : v > bv) best = j;
            }
            y[o * inner + in] = (double)best;
        }
}

void cases_reduce(void) {
    static const char *R[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};
    for (int kind = 0; kind < 10; kind++) {
        hcase hc, *c = begin(&hc, R[kind]);
        int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 2, 5)}, od[3];
        int mask = ert_test_int(&rng, 1, 7), keep = ert_test_int(&rng, 0, 1), na = 0, ond = 0;
        static int64_t axes[3];
        for (int i = 0; i < 3; i++)
            if (mask >> i & 1) axes[na++] = i - (ert_test_int(&rng, 0, 1) ? 3 : 0);
        for (int i = 0; i < 3; i++)
            if (!(mask >> i & 1) || keep) od[ond++] = mask >> i & 1 ? 1 : d[i];
        slot *x = add_f32(c, 3, d, -1, 1);
        if (kind == 2 || kind == 3) x->gap = -1; /* no near-ties for the max or min */
        if (kind == 4) x->lo = 0.9, x->hi = 1.1;  /* a product of up to 60 stays in f16's range */
        if (kind == 5 || kind == 6) x->gap = 0.05; /* |x| and the norm's kink at 0 */
        if (kind == 8) x->lo = 0.1;               /* the log of a positive sum */
        int64_t an = na;
        add_const(c, ERT_DTYPE_I64, 1, &an, axes);
        c->at[c->na++] = ERT_ATTR_I("keepdims", keep);
        memcpy(c->r.iv, d, sizeof d);
        c->r.iv[3] = mask, c->r.iv[4] = kind;
        set_y(c, ERT_DTYPE_F32, ond, od);
        c->ref = reduce_ref;
        run(c);
    }
    for (int mn = 0; mn < 2; mn++) {
        hcase hc, *c = begin(&hc, mn ? "ArgMin" : "ArgMax");
        int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 2, 5)}, od[3];
        int ax = ert_test_int(&rng, 0, 2), keep = ert_test_int(&rng, 0, 1), ond = 0;
        for (int i = 0; i < 3; i++)
            if (i != ax || keep) od[ond++] = i == ax ? 1 : d[i];
        slot *x = add_f32(c, 3, d, -1, 1);
        x->gap = -1;
        c->at[c->na++] = ERT_ATTR_I("axis", ax - (ert_test_int(&rng, 0, 1) ? 3 : 0));
        c->at[c->na++] = ERT_ATTR_I("keepdims", keep);
        memcpy(c->r.iv, d, sizeof d);
        c->r.iv[3] = ax, c->r.iv[4] = mn;
        set_y(c, ERT_DTYPE_I64, ond, od);
        c->ref = arg_ref;
        run(c);
    }
}

void cases_softmax(void) {
    for (int lg = 0; lg < 2; lg++) {
        hcase hc, *c = begin(&hc, lg ? "LogSoftmax" : "Softmax");
        int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 2, 5), ert_test_int(&rng, 1, 4)};
        int axis = ert_test_int(&rng, 0, 2);
        c->r.iv[0] = 1, c->r.iv[2] = 1;
        for (int i = 0; i < axis; i++) c->r.iv[0] *= d[i];
        for (int i = axis + 1; i < 3; i++) c->r.iv[2] *= d[i];
        c->r.iv[1] = d[axis], c->r.iv[3] = lg;
        add_f32(c, 3, d, -2, 2);
        c->at[c->na++] = ERT_ATTR_I("axis", axis);
        set_y(c, ERT_DTYPE_F32, 3, d);
        c->ref = softmax_ref;
        run(c);
    }
}

static void instnorm_ref(const ert_ref *c, double *y) { /* iv: N C S; fv[0] eps */
    int64_t N = c->iv[0], C = c->iv[1], S = c->iv[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t ch = 0; ch < C; ch++) {
            const double *x = c->pd[0] + (n * C + ch) * S;
            double mu = 0, var = 0;
            for (int64_t i = 0; i < S; i++) mu += x[i];
            mu /= (double)S;
            for (int64_t i = 0; i < S; i++) var += (x[i] - mu) * (x[i] - mu);
            var /= (double)S;
            for (int64_t i = 0; i < S; i++)
                y[(n * C + ch) * S + i] = (x[i] - mu) / sqrt(var + c->fv[0]) * c->pd[1][ch] + c->pd[2][ch];
        }
}

void cases_norm(void) {
    /* LayerNormalization over the last 1 or 2 dims, with or without bias */
    hcase hc, *c = begin(&hc, "LayerNormalization");
    int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 2, 4), ert_test_int(&rng, 2, 6)};
    int axis = ert_test_int(&rng, 1, 2);
    c->r.iv[0] = axis == 1 ? d[0] : d[0] * d[1];
    c->r.iv[1] = axis == 1 ? d[1] * d[2] : d[2];
    c->r.iv[2] = ert_test_int(&rng, 0, 1);
    c->r.fv[0] = 1e-4f;
    add_f32(c, 3, d, -1, 1);
    add_f32(c, 3 - axis, d + axis, 0.5, 1.5)->weight = true;
    if (c->r.iv[2]) add_f32(c, 3 - axis, d + axis, -1, 1)->weight = true;
    c->at[c->na++] = ERT_ATTR_I("axis", axis), c->at[c->na++] = ERT_ATTR_F("epsilon", 1e-4f);
    set_y(c, ERT_DTYPE_F32, 3, d);
    c->ref = ln_ref;
    c->tol = 3;
    run(c);
    /* LayerNormalization over few long rows (a row split over several CUDA
     * blocks, kernels/cuda/norm.cu); forward only: finite differences over
     * ~10^4 inputs would take minutes */
    c = begin(&hc, "LayerNormalization");
    snprintf(c->what, sizeof c->what, "LayerNormalization(few long rows)");
    int64_t dl[2] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 4100, 9000)};
    c->r.iv[0] = dl[0], c->r.iv[1] = dl[1], c->r.iv[2] = 1, c->r.fv[0] = 1e-5f;
    add_f32(c, 2, dl, -1, 3);
    add_f32(c, 1, dl + 1, 0.5, 1.5)->weight = true;
    add_f32(c, 1, dl + 1, -1, 1)->weight = true;
    c->at[c->na++] = ERT_ATTR_I("axis", 1), c->at[c->na++] = ERT_ATTR_F("epsilon", 1e-5f);
    set_y(c, ERT_DTYPE_F32, 2, dl);
    c->ref = ln_ref;
    c->tol = 3;
    c->no_grad = true;
    run(c);
    /* BatchNormalization: running statistics (inference, and a trainer with
     * frozen statistics), then batch statistics (the trainer's default) */
    for (int train = 0; train < 2; train++) {
        c = begin(&hc, "BatchNormalization");
        snprintf(c->what, sizeof c->what, "BatchNormalization(%s)", train ? "batch statistics" : "running statistics");
        int64_t N = ert_test_int(&rng, 2, 3), C = ert_test_int(&rng, 1, 4), H = ert_test_int(&rng, 1, 3), W = ert_test_int(&rng, 2, 4);
        int64_t xd[4] = {N, C, H, W}, cd[1] = {C};
        static float rm[8], rv[8];
        c->r.iv[0] = N, c->r.iv[1] = C, c->r.iv[2] = H * W, c->r.iv[3] = 1;
        c->r.fv[0] = 1e-3f;
        for (int64_t ch = 0; ch < C; ch++) {
            rm[ch] = (float)(ert_test_int(&rng, -500, 500) / 1000.0);
            rv[ch] = (float)(ert_test_int(&rng, 500, 2000) / 1000.0);
            c->r.iv[8 + ch] = (int64_t)llround((double)rm[ch] * 1000.0); /* bn_ref reads them /1000 */
            c->r.iv[16 + ch] = (int64_t)llround((double)rv[ch] * 1000.0);
            rm[ch] = (float)(c->r.iv[8 + ch] / 1000.0), rv[ch] = (float)(c->r.iv[16 + ch] / 1000.0);
        }
        add_f32(c, 4, xd, -1, 1);
        add_f32(c, 1, cd, 0.5, 1.5)->weight = true;
        add_f32(c, 1, cd, -1, 1)->weight = true;
        add_const(c, ERT_DTYPE_F32, 1, cd, rm);
        add_const(c, ERT_DTYPE_F32, 1, cd, rv);
        c->at[c->na++] = ERT_ATTR_F("epsilon", 1e-3f);
        set_y(c, ERT_DTYPE_F32, 4, xd);
        c->ref = bn_ref;
        c->bn_train = train;
        if (!train) {
            run(c); /* forward, and the gradient with the statistics frozen */
        } else { /* the gradient only: a session always uses the running statistics */
            run_grad_only(c);
        }
    }
    /* InstanceNormalization (no backward rule): small planes, then few long
     * ones (GroupNorm(1) as exporters write it, Reshape to (N, 1, C*H*W) ->
     * InstanceNormalization: the split CUDA path) with a mean far from 0, so
     * the variance's cancellation shows */
    for (int lng = 0; lng < 2; lng++) {
        c = begin(&hc, "InstanceNormalization");
        if (lng) snprintf(c->what, sizeof c->what, "InstanceNormalization(few long planes)");
        int64_t N = ert_test_int(&rng, 1, lng ? 2 : 3), C = ert_test_int(&rng, 1, lng ? 3 : 4),
                S1 = lng ? ert_test_int(&rng, 100, 200) : ert_test_int(&rng, 2, 5),
                S2 = lng ? ert_test_int(&rng, 101, 201) : ert_test_int(&rng, 1, 4);
        int64_t xd[4] = {N, C, S1, S2}, cd[1] = {C};
        c->r.iv[0] = N, c->r.iv[1] = C, c->r.iv[2] = S1 * S2, c->r.fv[0] = 1e-5f;
        add_f32(c, 4, xd, lng ? -2 : -1, lng ? 4 : 1);
        add_f32(c, 1, cd, 0.5, 1.5)->weight = true;
        add_f32(c, 1, cd, -1, 1)->weight = true;
        set_y(c, ERT_DTYPE_F32, 4, xd);
        c->ref = instnorm_ref;
        c->tol = 3;
        run(c);
    }
}

/* ------------------------------------------------------------ quantization */

/* QuantizeLinear / DequantizeLinear, per-tensor or per-axis (along iv[1]
 * of the rank-3 x, dims iv[2..4]); iv[0]: 0 Quantize (to iv[5]: 0 i8, 1 u8),
 * 1 Dequantize; iv[6] > 1: one scale and zero point per index along the
 * axis (q_scale, q_zp: the constant operands 1 and 2). */
static float q_scale[8]; /* one per index along the axis: at most 5 */
static uint8_t q_zp[8];
static double q_zpd[8];
static void quant_ref(const ert_ref *c, double *y) {
    const int64_t *d = c->iv + 2;
    int ax = (int)c->iv[1];
    for (int64_t i = 0; i < c->pn[0]; i++) {
        int64_t idx[3];
        unflat(i, 3, d, idx);
        int64_t q = c->iv[6] > 1 ? idx[ax] : 0;
        double sc = q_scale[q], zp = q_zpd[q], x = c->pd[0][i];
        if (c->iv[0] == 1) {
            y[i] = (x - zp) * sc;
            continue;
        }
        double v = nearbyint(x / sc) + zp, lo = c->iv[5] ? 0 : -128, hi = c->iv[5] ? 255 : 127; /* half to even */
        y[i] = v < lo ? lo : v > hi ? hi : v;
    }
}

void cases_quant(void) {
    for (int deq = 0; deq < 2; deq++) {
        hcase hc, *c = begin(&hc, deq ? "DequantizeLinear" : "QuantizeLinear");
        int64_t d[3] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 2, 5)};
        int ax = ert_test_int(&rng, 0, 2), per_axis = ert_test_int(&rng, 0, 1), u8 = ert_test_int(&rng, 0, 1);
        ert_dtype qdt = u8 ? ERT_DTYPE_U8 : ERT_DTYPE_I8;
        int64_t nq = per_axis ? d[ax] : 1;
        for (int64_t q = 0; q < nq; q++) { /* powers of two: x / scale is exact, no tie is decided by rounding */
            q_scale[q] = ldexpf(1.0f, ert_test_int(&rng, -4, 1));
            q_zpd[q] = u8 ? ert_test_int(&rng, 100, 150) : ert_test_int(&rng, -20, 20);
            q_zp[q] = (uint8_t)(int)q_zpd[q];
        }
        c->r.iv[0] = deq, c->r.iv[1] = ax, c->r.iv[5] = u8, c->r.iv[6] = nq;
        memcpy(c->r.iv + 2, d, sizeof d);
        slot *x = add_f32(c, 3, d, -20, 20);
        if (deq) x->kind = S_INT, x->dt = qdt, x->lo = u8 ? 0 : -128, x->hi = u8 ? 255 : 127;
        add_const(c, ERT_DTYPE_F32, per_axis ? 1 : 0, &nq, q_scale);
        add_const(c, qdt, per_axis ? 1 : 0, &nq, q_zp);
        if (per_axis) c->at[c->na++] = ERT_ATTR_I("axis", ax - (ert_test_int(&rng, 0, 1) ? 3 : 0));
        snprintf(c->what, sizeof c->what, "%s(%s, %s)", c->op, u8 ? "u8" : "i8", per_axis ? "per axis" : "per tensor");
        if (!deq) c->no_half = "an f16 x / scale rounds to another integer near .5";
        set_y(c, deq ? ERT_DTYPE_F32 : qdt, 3, d);
        c->ref = quant_ref;
        run(c);
    }
}

/* Session step 4: inference passes on the working graph: BatchNorm folded
 * into the preceding Conv, spatial ReduceMean/Max -> global pools, the
 * exporters' Erf spelling of GELU -> Gelu, MatMul + bias Add -> MatMul with
 * a bias, scalar Muls, a last-axes Transpose and a residual Add into the
 * MatMul, a per-column layer scale folded into the MatMul's constants, attention blocks -> ert.Attention (passes/attention.c),
 * Mul(x, Sigmoid(x)) -> SiLU, Conv + Add (residual)
 * and Conv/Gemm + activation fused into the producer's epilogue, the
 * squeeze-excitation Mul(x, s) folded into the Conv that reads it where the
 * backend says its kernels can (ert_backend.fusions), dead nodes removed.
 * Called from build() in session.c. */
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ step 4 */

/* The single live consumer of tensor t (NULL if not exactly one, or t is a graph output). */
ert_gnode *ert_graph_sole_consumer(ert_graph *g, int32_t t, int after) {
    if (g->t[t].n_uses != 1 || ert_graph_is_output(g, t)) return NULL;
    for (int j = after + 1; j < g->nn; j++) {
        if (g->n[j].dead) continue;
        for (int k = 0; k < g->n[j].n_in; k++)
            if (g->n[j].in[k] == t) return &g->n[j];
    }
    return NULL;
}

/* Conv(x, W, b) -> BN(scale, B, mean, var): W' = W * f, b' = (b - mean) * f + B
 * with f = scale / sqrt(var + eps), per output channel. */
ert_status ert_pass_fold_batchnorm(ert_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *c = &g->n[i];
        if (c->dead || c->op != ERT_OP_CONV || c->params.conv.has_residual || c->params.conv.act.kind != ERT_ACT_NONE)
            continue;
        int32_t w = c->in[1], b = c->n_in > 2 ? c->in[2] : -1;
        if (!ert_graph_is_const(g, w) || g->t[w].dtype != ERT_DTYPE_F32 || (b >= 0 && !ert_graph_is_const(g, b))) continue;
        ert_gnode *bn = ert_graph_sole_consumer(g, c->out[0], i);
        if (!bn || bn->op != ERT_OP_BATCHNORM || bn->in[0] != c->out[0] || bn->n_out != 1 ||
            bn->params.norm.training) /* batch statistics: not a per-channel affine of constants */
            continue;
        bool ok = true;
        for (int k = 1; k < 5; k++) ok = ok && ert_graph_is_const(g, bn->in[k]) && g->t[bn->in[k]].dtype == ERT_DTYPE_F32;
        if (!ok) continue;
        const ert_gtensor *wt = &g->t[w];
        int64_t cout = wt->dims[0], per = 1;
        for (int d = 1; d < wt->ndim; d++) per *= wt->dims[d];
        const float *sc = g->t[bn->in[1]].cdata, *bb = g->t[bn->in[2]].cdata, *mu = g->t[bn->in[3]].cdata,
                    *var = g->t[bn->in[4]].cdata, *w0 = wt->cdata, *b0 = b >= 0 ? g->t[b].cdata : NULL;
        float *nw = malloc(wt->nbytes ? wt->nbytes : 1), *nb = malloc((size_t)cout * sizeof(float));
        if (!nw || !nb) {
            free(nw);
            free(nb);
            return ert_graph_oom(g);
        }
        float eps = bn->params.norm.epsilon;
        for (int64_t o = 0; o < cout; o++) {
            double f = sc[o] / sqrt((double)var[o] + eps);
            for (int64_t k = 0; k < per; k++) nw[o * per + k] = (float)(w0[o * per + k] * f);
            nb[o] = (float)(((b0 ? b0[o] : 0.0) - mu[o]) * f + bb[o]);
        }
        /* new_const may move g->t: copy what we still need first */
        int64_t wdims[ERT_MAX_DIMS];
        int wnd = wt->ndim;
        const char *wname = wt->name, *bname = g->t[bn->in[2]].name;
        memcpy(wdims, wt->dims, sizeof wdims);
        int32_t nwi = -1, nbi = -1;
        ert_status st = ert_graph_new_const(g, wname, ERT_DTYPE_F32, wnd, wdims, nw, &nwi);
        if (st) {
            free(nb);
            return st;
        }
        int64_t bd[1] = {cout};
        if ((st = ert_graph_new_const(g, bname, ERT_DTYPE_F32, 1, bd, nb, &nbi))) return st;
        c = &g->n[i]; /* add_tensor does not move nodes, but keep it obviously right */
        c->in[1] = nwi;
        c->in[2] = nbi;
        c->n_in = 3;
        c->params.conv.has_bias = true;
        c->out[0] = bn->out[0];
        bn->dead = true;
        ert_graph_count_uses(g, NULL);
    }
    return ERT_OK;
}

/* Activation params of a unary node, if it can be fused into an epilogue. */
static bool act_of(const ert_graph *g, const ert_gnode *n, ert_act_params *a) {
    memset(a, 0, sizeof *a);
    switch (n->op) {
    case ERT_OP_RELU: a->kind = ERT_ACT_RELU; return true;
    case ERT_OP_SIGMOID: a->kind = ERT_ACT_SIGMOID; return true;
    case ERT_OP_TANH: a->kind = ERT_ACT_TANH; return true;
    case ERT_OP_HARD_SWISH: a->kind = ERT_ACT_HARD_SWISH; return true;
    case ERT_OP_SILU: a->kind = ERT_ACT_SILU; return true;
    case ERT_OP_LEAKY_RELU:
        a->kind = ERT_ACT_LEAKY_RELU;
        a->alpha = n->src ? ert_attr_float(n->src, "alpha", 0.01f) : 0.01f;
        return true;
    case ERT_OP_HARD_SIGMOID:
        a->kind = ERT_ACT_HARD_SIGMOID;
        a->alpha = n->src ? ert_attr_float(n->src, "alpha", 0.2f) : 0.2f;
        a->beta = n->src ? ert_attr_float(n->src, "beta", 0.5f) : 0.5f;
        return true;
    case ERT_OP_GELU:
        if (n->src && strcmp(ert_attr_str(n->src, "approximate", "none"), "none") != 0) return false;
        a->kind = ERT_ACT_GELU;
        return true;
    case ERT_OP_CLIP: {
        a->kind = ERT_ACT_CLIP;
        a->alpha = -INFINITY;
        a->beta = INFINITY;
        for (int k = 1; k < n->n_in && k < 3; k++) {
            if (n->in[k] < 0) continue;
            if (!ert_graph_is_const(g, n->in[k]) || g->t[n->in[k]].dtype != ERT_DTYPE_F32) return false;
            float v = *(const float *)g->t[n->in[k]].cdata;
            if (k == 1) a->alpha = v;
            else a->beta = v;
        }
        return true;
    }
    default: return false;
    }
}

static bool same_shape(const ert_gtensor *a, const ert_gtensor *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim && memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof a->dims[0]) == 0;
}

/* ReduceMean/ReduceMax(x, axes = every spatial axis, keepdims) on f32 is
 * GlobalAveragePool/GlobalMaxPool (timm's squeeze-excitation writes
 * x.mean((2, 3), keepdim=True)): the same numbers, and the global pools have
 * channels-last kernels, so the block stays in a channels-last region. */
static void reduce_to_global_pool(ert_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *n = &g->n[i];
        if (n->dead || (n->op != ERT_OP_REDUCE_MEAN && n->op != ERT_OP_REDUCE_MAX) || n->n_out != 1) continue;
        const ert_axis_params *ap = &n->params.axis;
        const ert_gtensor *x = &g->t[n->in[0]];
        if (!ap->keepdims || x->ndim < 3 || x->dtype != ERT_DTYPE_F32 || ap->n_axes != x->ndim - 2) continue;
        bool spatial = true;
        for (int k = 0; k < ap->n_axes; k++) spatial = spatial && ap->axes[k] == k + 2;
        if (!spatial) continue;
        n->op = n->op == ERT_OP_REDUCE_MEAN ? ERT_OP_GLOBAL_AVGPOOL : ERT_OP_GLOBAL_MAXPOOL;
        memset(&n->params, 0, sizeof n->params);
        n->n_in = 1; /* the axes input is no longer read */
        n->src = NULL;
    }
}

/* Tensor t is an f32 constant holding one value near v (relative 1e-4). */
static bool const_near(const ert_graph *g, int32_t t, double v) {
    if (!ert_graph_is_const(g, t) || g->t[t].dtype != ERT_DTYPE_F32 || !g->t[t].cdata) return false;
    int64_t n = 0;
    if (!ert_dims_nelems(g->t[t].ndim, g->t[t].dims, &n) || n != 1) return false;
    double x = *(const float *)g->t[t].cdata;
    return fabs(x - v) <= 1e-4 * fabs(v);
}

/* Binary node n (op) with operand t: the other operand, or -1. */
static int32_t other_in(const ert_gnode *n, ert_op op, int32_t t) {
    if (!n || n->dead || n->op != op || n->n_in != 2) return -1;
    return n->in[0] == t ? n->in[1] : n->in[1] == t ? n->in[0] : -1;
}

/* GELU as exporters spell it below opset 20:
 *   x * 0.5 * (1 + Erf(x / sqrt(2)))   (Div by sqrt(2) or Mul by 1/sqrt(2);
 *   the 0.5 applied to x first or to the product last, either operand order)
 * -> one Gelu node (erf form) in the last Mul's place, which the activation
 * pass below can then fuse into a Gemm/MatMul/Conv. */
static void fuse_gelu(ert_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *erf = &g->n[i];
        if (erf->dead || erf->op != ERT_OP_ERF) continue;
        ert_gnode *scale = NULL; /* x / sqrt(2) */
        for (int j = 0; j < i && !scale; j++)
            if (!g->n[j].dead && g->n[j].n_out == 1 && g->n[j].out[0] == erf->in[0]) scale = &g->n[j];
        if (!scale || scale->n_in != 2 || g->t[erf->in[0]].n_uses != 1) continue;
        int32_t x = -1;
        if (scale->op == ERT_OP_DIV && const_near(g, scale->in[1], 1.4142135623730951)) x = scale->in[0];
        for (int k = 0; k < 2 && scale->op == ERT_OP_MUL; k++)
            if (const_near(g, scale->in[1 - k], 0.7071067811865476)) x = scale->in[k];
        if (x < 0 || g->t[x].dtype != ERT_DTYPE_F32) continue;
        ert_gnode *add = ert_graph_sole_consumer(g, erf->out[0], i);
        int32_t one = other_in(add, ERT_OP_ADD, erf->out[0]);
        if (one < 0 || !const_near(g, one, 1.0)) continue;
        ert_gnode *m1 = ert_graph_sole_consumer(g, add->out[0], (int)(add - g->n));
        int32_t h = other_in(m1, ERT_OP_MUL, add->out[0]);
        if (h < 0) continue;
        ert_gnode *last = NULL, *half = NULL;
        if (h == x) { /* (x * (1 + erf)) * 0.5 */
            last = ert_graph_sole_consumer(g, m1->out[0], (int)(m1 - g->n));
            int32_t c = other_in(last, ERT_OP_MUL, m1->out[0]);
            if (c < 0 || !const_near(g, c, 0.5)) continue;
        } else { /* (x * 0.5) * (1 + erf) */
            for (int j = 0; j < g->nn && !half; j++)
                if (!g->n[j].dead && g->n[j].n_out == 1 && g->n[j].out[0] == h) half = &g->n[j];
            int32_t c = other_in(half, ERT_OP_MUL, x);
            if (c < 0 || !const_near(g, c, 0.5) || g->t[h].n_uses != 1) continue;
            last = m1;
        }
        int32_t y = last->out[0];
        if (g->t[y].ndim != g->t[x].ndim || memcmp(g->t[y].dims, g->t[x].dims, (size_t)g->t[x].ndim * sizeof(int64_t)))
            continue;
        scale->dead = erf->dead = add->dead = true;
        if (half) half->dead = true;
        if (last != m1) m1->dead = true;
        last->op = ERT_OP_GELU;
        memset(&last->params, 0, sizeof last->params);
        last->params.unary.act.kind = ERT_ACT_GELU; /* unary.alpha 0: the erf form */
        last->src = NULL;
        last->in[0] = x;
        last->n_in = 1;
        ert_graph_count_uses(g, NULL);
    }
}

/* MatMul(x, W) + b with b a constant over the last axis only (a Linear layer
 * on an input of rank > 2, as exporters write it) -> MatMul with a bias
 * input (in[2], gemm.has_c): one GEMM and its epilogue instead of a GEMM and
 * a broadcast Add, and the activation pass below can fuse into it too. */
static void fuse_matmul_bias(ert_graph *g, int32_t *producer) {
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *mm = &g->n[i];
        if (mm->dead || mm->op != ERT_OP_MATMUL || mm->n_in != 2 || mm->params.gemm.has_c ||
            mm->params.gemm.act.kind != ERT_ACT_NONE)
            continue;
        const ert_gtensor *y = &g->t[mm->out[0]];
        if (y->ndim < 2 || g->t[mm->in[1]].ndim < 2 || y->dtype != ERT_DTYPE_F32) continue;
        ert_gnode *add = ert_graph_sole_consumer(g, mm->out[0], i);
        int32_t b = other_in(add, ERT_OP_ADD, mm->out[0]);
        if (b < 0 || b == mm->out[0] || !ert_graph_is_const(g, b) || g->t[b].dtype != ERT_DTYPE_F32) continue;
        const ert_gtensor *bt = &g->t[b];
        int64_t N = y->dims[y->ndim - 1], nb = 0;
        if (bt->ndim < 1 || bt->ndim > y->ndim || bt->dims[bt->ndim - 1] != N ||
            !ert_dims_nelems(bt->ndim, bt->dims, &nb) || nb != N || !same_shape(y, &g->t[add->out[0]]))
            continue;
        mm->in[2] = b;
        mm->n_in = 3;
        mm->params.gemm.has_c = true;
        mm->params.gemm.beta = 1.0f;
        mm->out[0] = add->out[0];
        add->dead = true;
        ert_graph_count_uses(g, producer);
    }
}

/* The node that writes tensor t (one output), or NULL. */
static ert_gnode *writer_of(ert_graph *g, const int32_t *producer, int32_t t) {
    if (t < 0 || producer[t] < 0) return NULL;
    ert_gnode *n = &g->n[producer[t]];
    return n->dead || n->n_out != 1 ? NULL : n;
}

/* Around a MatMul (attention as exporters write it: q * c @ (k^T * c), the
 * residual stream's x + Linear(...)):
 * - an operand that is Mul(u, scalar constant) read by the MatMul alone
 *   -> u, the scalar folded into gemm.alpha;
 * - B that is Transpose(u) swapping the last two axes, read by the MatMul
 *   alone -> u with gemm.trans_b (no transpose copy);
 * - an Add of the MatMul's output and a tensor z of the same shape written
 *   before it (after the bias pass) -> z as the MatMul's residual (in[3]). */
static void fuse_matmul_operands(ert_graph *g, int32_t *producer) {
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *mm = &g->n[i];
        if (mm->dead || mm->op != ERT_OP_MATMUL || g->t[mm->out[0]].dtype != ERT_DTYPE_F32) continue;
        for (int k = 0; k < 2; k++) {
            ert_gnode *mul = g->t[mm->in[k]].n_uses == 1 ? writer_of(g, producer, mm->in[k]) : NULL;
            for (int j = 0; j < 2 && mul && mul->op == ERT_OP_MUL && mul->n_in == 2; j++) {
                int32_t u = mul->in[j], c = mul->in[1 - j];
                int64_t nc = 0;
                if (!ert_graph_is_const(g, c) || g->t[c].dtype != ERT_DTYPE_F32 || !g->t[c].cdata ||
                    !ert_dims_nelems(g->t[c].ndim, g->t[c].dims, &nc) || nc != 1 || !same_shape(&g->t[u], &g->t[mm->in[k]]))
                    continue;
                mm->params.gemm.alpha *= *(const float *)g->t[c].cdata;
                mm->in[k] = u;
                mul->dead = true;
                ert_graph_count_uses(g, producer);
                break;
            }
        }
        ert_gnode *tr = g->t[mm->in[1]].n_uses == 1 ? writer_of(g, producer, mm->in[1]) : NULL;
        int nd = g->t[mm->in[1]].ndim;
        if (tr && tr->op == ERT_OP_TRANSPOSE && !mm->params.gemm.trans_b && nd >= 2) {
            const int64_t *perm = tr->params.transpose.perm;
            bool swap = perm[nd - 2] == nd - 1 && perm[nd - 1] == nd - 2;
            for (int d = 0; d < nd - 2; d++) swap = swap && perm[d] == d;
            if (swap) {
                mm->in[1] = tr->in[0];
                mm->params.gemm.trans_b = true;
                tr->dead = true;
                ert_graph_count_uses(g, producer);
            }
        }
        if (mm->n_in > 3 || mm->params.gemm.act.kind != ERT_ACT_NONE) continue;
        ert_gnode *add = ert_graph_sole_consumer(g, mm->out[0], i);
        int32_t z = other_in(add, ERT_OP_ADD, mm->out[0]);
        if (z < 0 || z == mm->out[0] || producer[z] >= i || !same_shape(&g->t[z], &g->t[mm->out[0]]) ||
            !same_shape(&g->t[z], &g->t[add->out[0]]))
            continue;
        if (mm->n_in == 2) mm->in[2] = -1;
        mm->in[3] = z;
        mm->n_in = 4;
        mm->out[0] = add->out[0];
        add->dead = true;
        ert_graph_count_uses(g, producer);
    }
}

/* A copy of f32 constant t as a new constant (the original may have other
 * readers); its id, or -1 when out of memory. */
static int32_t const_copy(ert_graph *g, int32_t t) {
    size_t nb = g->t[t].nbytes;
    float *d = malloc(nb ? nb : 1);
    if (!d) return -1;
    memcpy(d, g->t[t].cdata, nb);
    int64_t dims[ERT_MAX_DIMS];
    memcpy(dims, g->t[t].dims, sizeof dims);
    int32_t id = -1;
    return ert_graph_new_const(g, g->t[t].name, ERT_DTYPE_F32, g->t[t].ndim, dims, d, &id) == ERT_OK ? id : -1;
}

/* Layer scale (ConvNeXt, CaiT...): MatMul(x, B) [+ bias] -> [Transpose] ->
 * Mul(gamma), gamma a constant with one value per output column of the
 * MatMul (on the axis the Transpose moved that column axis to), or Conv ->
 * Mul(gamma) with one value per output channel -> the MatMul or Conv alone
 * with its weights and bias scaled: y = (x B + b) g = x (B g) + b g.
 * torchvision's ConvNeXt block ends MatMul -> Transpose(0,3,1,2) ->
 * Mul(gamma (C,1,1)) -> Add, timm's conv_mlp one 1x1 Conv -> Mul(gamma
 * (1,C,1,1)): 18 element-wise launches in ConvNeXt-T (0.13 ms of the H100
 * per-node profile, f16). Weights and bias must be constants (they are
 * copied, never rewritten in place: another node may read them); not with a
 * fused residual, activation or input scale (the scale would reach them). */
static ert_status fold_layer_scale(ert_graph *g, int32_t **producer_p) {
    int32_t *producer = *producer_p;
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *mul = &g->n[i];
        if (mul->dead || mul->op != ERT_OP_MUL || mul->n_in != 2) continue;
        for (int j = 0; j < 2; j++) {
            int32_t x = mul->in[j], gm = mul->in[1 - j];
            if (!ert_graph_is_const(g, gm) || g->t[gm].dtype != ERT_DTYPE_F32 || !g->t[gm].cdata ||
                g->t[x].n_uses != 1 || !same_shape(&g->t[x], &g->t[mul->out[0]]))
                continue;
            ert_gnode *w = writer_of(g, producer, x), *tr = NULL, *mm = w;
            if (w && w->op == ERT_OP_TRANSPOSE && g->t[w->in[0]].n_uses == 1) {
                tr = w;
                mm = writer_of(g, producer, w->in[0]);
            }
            if (!mm || (mm->op != ERT_OP_MATMUL && mm->op != ERT_OP_CONV) || mm->n_in < 2) continue;
            bool conv = mm->op == ERT_OP_CONV;
            const ert_conv_params *cp = &mm->params.conv;
            if (conv ? tr || cp->has_residual || cp->act.kind != ERT_ACT_NONE || cp->has_in_scale || cp->has_scale
                     : mm->params.gemm.act.kind != ERT_ACT_NONE || mm->n_in > 3 ||
                           (mm->n_in == 3 && mm->in[2] >= 0 && !mm->params.gemm.has_c))
                continue;
            const ert_gtensor *y = &g->t[mm->out[0]], *B = &g->t[mm->in[1]];
            int32_t bias = conv ? (cp->has_bias && mm->n_in > 2 ? mm->in[2] : -1)
                                : (mm->params.gemm.has_c && mm->n_in > 2 ? mm->in[2] : -1);
            if (!ert_graph_is_const(g, mm->in[1]) || B->ndim != (conv ? y->ndim : 2) || B->dtype != ERT_DTYPE_F32 ||
                !B->cdata || y->ndim < 2 ||
                (bias >= 0 && (!ert_graph_is_const(g, bias) || g->t[bias].dtype != ERT_DTYPE_F32)))
                continue;
            /* the axis of x that holds the output columns (MatMul) or channels (Conv) */
            int nd = g->t[x].ndim, ax = conv ? 1 : nd - 1, yax = conv ? 1 : y->ndim - 1;
            if (tr) {
                ax = -1;
                for (int d = 0; d < nd; d++)
                    if (tr->params.transpose.perm[d] == yax) ax = d;
                if (ax < 0 || g->t[tr->in[0]].ndim != nd) continue;
            }
            /* gamma: size N on that axis (right-aligned against x), 1 elsewhere */
            const ert_gtensor *gt = &g->t[gm];
            int64_t N = y->dims[yax], ng = 0;
            bool ok = gt->ndim <= nd && ert_dims_nelems(gt->ndim, gt->dims, &ng) && ng == N && N >= 1 &&
                      (!conv || B->dims[0] == N);
            for (int d = 0; ok && d < gt->ndim; d++) {
                int xd = nd - gt->ndim + d;
                ok = gt->dims[d] == (xd == ax ? N : 1);
            }
            if (!ok) continue;
            const float *gv = gt->cdata; /* y, B and gt point into g->t, which the copies may move */
            int32_t nb = const_copy(g, mm->in[1]), nbias = bias >= 0 ? const_copy(g, bias) : -2;
            /* producer has an entry per tensor: grow it past the new constants */
            int32_t *grown = nb >= 0 && nbias != -1 ? realloc(producer, (size_t)g->nt * sizeof *producer) : NULL;
            if (!grown) return ert_graph_oom(g);
            *producer_p = producer = grown;
            float *bw = g->t[nb].owned;
            int64_t ne = 0;
            ert_dims_nelems(g->t[nb].ndim, g->t[nb].dims, &ne);
            if (conv) { /* (N, C/group, k...): row n scaled */
                for (int64_t e = 0; e < ne; e++) bw[e] *= gv[e / (ne / N)];
            } else {
                int64_t K = ne / N;
                for (int64_t k = 0; k < K; k++)
                    for (int64_t n = 0; n < N; n++) bw[mm->params.gemm.trans_b ? n * K + k : k * N + n] *= gv[n];
            }
            mm->in[1] = nb;
            if (nbias >= 0) {
                float *bb = g->t[nbias].owned;
                for (int64_t n = 0; n < N; n++) bb[n] *= gv[n];
                mm->in[2] = nbias;
            }
            (tr ? tr : mm)->out[0] = mul->out[0];
            mul->dead = true;
            ert_graph_count_uses(g, producer);
            break;
        }
    }
    return ERT_OK;
}

/* s is a per-(image, channel) scale of x: x (N, C, ...), s (N, C, 1, ...) */
static bool is_channel_scale(const ert_gtensor *sc, const ert_gtensor *x) {
    if (sc->dtype != ERT_DTYPE_F32 || x->dtype != ERT_DTYPE_F32 || sc->ndim != x->ndim || x->ndim < 3) return false;
    if (sc->dims[0] != x->dims[0] || sc->dims[1] != x->dims[1]) return false;
    for (int d = 2; d < sc->ndim; d++)
        if (sc->dims[d] != 1) return false;
    return true;
}

/* Conv(Mul(x, s)) with s (N, C, 1, 1) -> Conv(x), input 5 = s: the kernel
 * scales x while it reads it, and the Mul's pass over the activation goes. */
static void fuse_in_scale(ert_graph *g, int32_t *producer) {
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *mul = &g->n[i];
        if (mul->dead || mul->op != ERT_OP_MUL) continue;
        ert_gnode *c = ert_graph_sole_consumer(g, mul->out[0], i);
        if (!c || c->op != ERT_OP_CONV || c->in[0] != mul->out[0] || c->params.conv.group != 1 ||
            c->params.conv.has_in_scale || c->params.conv.has_scale || c->params.conv.nhwc)
            continue;
        for (int side = 0; side < 2; side++) {
            int32_t x = mul->in[side], sc = mul->in[1 - side];
            if (!is_channel_scale(&g->t[sc], &g->t[x]) || !same_shape(&g->t[x], &g->t[mul->out[0]])) continue;
            for (int k = c->n_in; k < 5; k++) c->in[k] = -1;
            c->in[0] = x;
            c->in[5] = sc;
            c->n_in = 6;
            c->params.conv.has_in_scale = true;
            mul->dead = true;
            ert_graph_count_uses(g, producer);
            break;
        }
    }
}

/* A Transpose that moves only dims of size 1 keeps every byte where it is:
 * a Reshape, which the planner makes a view. torchvision's
 * MultiheadAttention writes two per block at batch 1 ((197, 1, 768) <->
 * (1, 197, 768)): ViT-B/16 ran them as 26 copy kernels per inference. */
static void transpose_as_reshape(ert_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *n = &g->n[i];
        if (n->dead || n->op != ERT_OP_TRANSPOSE || n->n_in != 1 || n->n_out != 1 || n->in[0] < 0) continue;
        const ert_gtensor *x = &g->t[n->in[0]];
        int64_t last = -1;
        bool same = x->ndim >= 1;
        for (int d = 0; d < x->ndim && same; d++) {
            int64_t p = n->params.transpose.perm[d];
            if (p < 0 || p >= x->ndim) same = false;
            else if (x->dims[p] != 1) {
                same = p > last;
                last = p;
            }
        }
        if (!same) continue;
        n->op = ERT_OP_RESHAPE;
        memset(&n->params, 0, sizeof n->params);
        n->src = NULL;
    }
}

ert_status ert_pass_fuse(ert_graph *g) {
    int32_t *producer = malloc((size_t)g->nt * sizeof *producer);
    if (!producer) return ert_graph_oom(g);
    reduce_to_global_pool(g);
    ert_graph_count_uses(g, producer);
    fuse_gelu(g);
    fuse_matmul_bias(g, producer);
    fuse_matmul_operands(g, producer);
    ert_status st = fold_layer_scale(g, &producer);
    if (st != ERT_OK) {
        free(producer);
        return st;
    }
    ert_pass_fuse_attention(g, producer);
    transpose_as_reshape(g);
    ert_graph_count_uses(g, producer);
    /* Mul(x, Sigmoid(x)) -> Silu(x) */
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *sg = &g->n[i];
        if (sg->dead || sg->op != ERT_OP_SIGMOID) continue;
        ert_gnode *mul = ert_graph_sole_consumer(g, sg->out[0], i);
        if (!mul || mul->op != ERT_OP_MUL) continue;
        int other = mul->in[0] == sg->out[0] ? 1 : 0;
        if (mul->in[other] != sg->in[0] || !same_shape(&g->t[sg->in[0]], &g->t[mul->out[0]])) continue;
        sg->op = ERT_OP_SILU;
        memset(&sg->params, 0, sizeof sg->params);
        sg->params.unary.act.kind = ERT_ACT_SILU;
        sg->src = NULL;
        sg->out[0] = mul->out[0];
        mul->dead = true;
        ert_graph_count_uses(g, producer);
    }
    if (g->be->fusions & ERT_FUSE_CONV_IN_SCALE) fuse_in_scale(g, producer);
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *c = &g->n[i];
        if (c->dead || (c->op != ERT_OP_CONV && c->op != ERT_OP_GEMM && c->op != ERT_OP_MATMUL)) continue;
        /* residual: Conv -> Add(y, z) with z ready before the Conv runs */
        if (c->op == ERT_OP_CONV && !c->params.conv.has_residual && c->params.conv.act.kind == ERT_ACT_NONE) {
            ert_gnode *add = ert_graph_sole_consumer(g, c->out[0], i);
            if (add && add->op == ERT_OP_ADD) {
                int other = add->in[0] == c->out[0] ? 1 : 0;
                int32_t z = add->in[other];
                if (z != c->out[0] && same_shape(&g->t[z], &g->t[add->out[0]]) &&
                    same_shape(&g->t[c->out[0]], &g->t[add->out[0]]) && (producer[z] < i)) {
                    if (c->n_in == 2) c->in[2] = -1;
                    c->in[3] = z;
                    if (c->n_in < 4) c->n_in = 4; /* 6 with a fused input scale */
                    c->params.conv.has_residual = true;
                    c->out[0] = add->out[0];
                    add->dead = true;
                    ert_graph_count_uses(g, producer);
                }
            }
        }
        ert_act_params *act = c->op == ERT_OP_CONV ? &c->params.conv.act : &c->params.gemm.act;
        if (act->kind != ERT_ACT_NONE) continue;
        ert_gnode *u = ert_graph_sole_consumer(g, c->out[0], i);
        ert_act_params a;
        if (u && u->in[0] == c->out[0] && act_of(g, u, &a) && same_shape(&g->t[c->out[0]], &g->t[u->out[0]])) {
            *act = a;
            c->out[0] = u->out[0];
            u->dead = true;
            ert_graph_count_uses(g, producer);
        }
    }
    free(producer);
    return ERT_OK;
}

void ert_pass_remove_dead(ert_graph *g) {
    ert_graph_count_uses(g, NULL);
    for (int i = g->nn - 1; i >= 0; i--) {
        ert_gnode *n = &g->n[i];
        if (n->dead) continue;
        bool used = false;
        for (int k = 0; k < n->n_out; k++) used = used || g->t[n->out[k]].n_uses > 0 || ert_graph_is_output(g, n->out[k]);
        if (used) continue;
        n->dead = true;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) g->t[n->in[k]].n_uses--;
    }
}

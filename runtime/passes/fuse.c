/* Session step 4: inference passes on the working graph: BatchNorm folded
 * into the preceding Conv, spatial ReduceMean/Max -> global pools, the
 * exporters' Erf spelling of GELU -> Gelu, MatMul + bias Add -> MatMul with
 * a bias, scalar Muls, a last-axes Transpose and a residual Add into the
 * MatMul, attention blocks -> ert.Attention (passes/attention.c),
 * Mul(x, Sigmoid(x)) -> SiLU, Conv + Add (residual)
 * and Conv/Gemm + activation fused into the producer's epilogue, the
 * squeeze-excitation Mul(x, s) folded into the Conv that reads it where the
 * backend says its kernels can (ert_backend.fusions), dead nodes removed.
 * Called from build() in session.c. */
#include "session_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ step 4 */

bool ert_s_is_const(const ert_session *s, int32_t t) { return t >= 0 && (s->t[t].mem == MEM_CONST || s->t[t].mem == MEM_OWNED); }

bool ert_s_is_graph_out(const ert_session *s, int32_t t) {
    for (int i = 0; i < s->n_out; i++)
        if (s->out_t[i] == t) return true;
    return false;
}

void ert_s_count_uses(ert_session *s, int32_t *producer) {
    for (int i = 0; i < s->nt; i++) {
        s->t[i].n_uses = 0;
        if (producer) producer[i] = -1;
    }
    for (int i = 0; i < s->nn; i++) {
        if (s->n[i].dead) continue;
        for (int k = 0; k < s->n[i].n_in; k++)
            if (s->n[i].in[k] >= 0) s->t[s->n[i].in[k]].n_uses++;
        if (producer)
            for (int k = 0; k < s->n[i].n_out; k++) producer[s->n[i].out[k]] = i;
    }
}

/* The single live consumer of tensor t (NULL if not exactly one, or t is a graph output). */
snode *ert_s_sole_consumer(ert_session *s, int32_t t, int after) {
    if (s->t[t].n_uses != 1 || ert_s_is_graph_out(s, t)) return NULL;
    for (int j = after + 1; j < s->nn; j++) {
        if (s->n[j].dead) continue;
        for (int k = 0; k < s->n[j].n_in; k++)
            if (s->n[j].in[k] == t) return &s->n[j];
    }
    return NULL;
}

ert_status ert_s_new_const(ert_session *s, const char *name, ert_dtype dt, int ndim, const int64_t *dims, void *owned,
                            int32_t *id) {
    int32_t c = ert_s_add_tensor(s, name);
    if (c < 0) {
        free(owned);
        return ert_s_oom(s);
    }
    stensor *t = &s->t[c];
    t->dtype = t->orig_dtype = dt;
    t->ndim = ndim;
    memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    t->defined = true;
    t->mem = MEM_OWNED;
    t->owned = owned;
    t->cdata = owned;
    ert_s_set_nbytes(t);
    *id = c;
    return ERT_OK;
}

/* Conv(x, W, b) -> BN(scale, B, mean, var): W' = W * g, b' = (b - mean) * g + B
 * with g = scale / sqrt(var + eps), per output channel. */
ert_status ert_s_fold_batchnorm(ert_session *s) {
    for (int i = 0; i < s->nn; i++) {
        snode *c = &s->n[i];
        if (c->dead || c->op != ERT_OP_CONV || c->params.conv.has_residual || c->params.conv.act.kind != ERT_ACT_NONE)
            continue;
        int32_t w = c->in[1], b = c->n_in > 2 ? c->in[2] : -1;
        if (!ert_s_is_const(s, w) || s->t[w].dtype != ERT_DTYPE_F32 || (b >= 0 && !ert_s_is_const(s, b))) continue;
        snode *bn = ert_s_sole_consumer(s, c->out[0], i);
        if (!bn || bn->op != ERT_OP_BATCHNORM || bn->in[0] != c->out[0] || bn->n_out != 1 ||
            bn->params.norm.training) /* batch statistics: not a per-channel affine of constants */
            continue;
        bool ok = true;
        for (int k = 1; k < 5; k++) ok = ok && ert_s_is_const(s, bn->in[k]) && s->t[bn->in[k]].dtype == ERT_DTYPE_F32;
        if (!ok) continue;
        const stensor *wt = &s->t[w];
        int64_t cout = wt->dims[0], per = 1;
        for (int d = 1; d < wt->ndim; d++) per *= wt->dims[d];
        const float *sc = s->t[bn->in[1]].cdata, *bb = s->t[bn->in[2]].cdata, *mu = s->t[bn->in[3]].cdata,
                    *var = s->t[bn->in[4]].cdata, *w0 = wt->cdata, *b0 = b >= 0 ? s->t[b].cdata : NULL;
        float *nw = malloc(wt->nbytes ? wt->nbytes : 1), *nb = malloc((size_t)cout * sizeof(float));
        if (!nw || !nb) {
            free(nw);
            free(nb);
            return ert_s_oom(s);
        }
        float eps = bn->params.norm.epsilon;
        for (int64_t o = 0; o < cout; o++) {
            double g = sc[o] / sqrt((double)var[o] + eps);
            for (int64_t k = 0; k < per; k++) nw[o * per + k] = (float)(w0[o * per + k] * g);
            nb[o] = (float)(((b0 ? b0[o] : 0.0) - mu[o]) * g + bb[o]);
        }
        /* new_const may move s->t: copy what we still need first */
        int64_t wdims[ERT_MAX_DIMS];
        int wnd = wt->ndim;
        const char *wname = wt->name, *bname = s->t[bn->in[2]].name;
        memcpy(wdims, wt->dims, sizeof wdims);
        int32_t nwi = -1, nbi = -1;
        ert_status st = ert_s_new_const(s, wname, ERT_DTYPE_F32, wnd, wdims, nw, &nwi);
        if (st) {
            free(nb);
            return st;
        }
        int64_t bd[1] = {cout};
        if ((st = ert_s_new_const(s, bname, ERT_DTYPE_F32, 1, bd, nb, &nbi))) return st;
        c = &s->n[i]; /* add_tensor does not move nodes, but keep it obviously right */
        c->in[1] = nwi;
        c->in[2] = nbi;
        c->n_in = 3;
        c->params.conv.has_bias = true;
        c->out[0] = bn->out[0];
        bn->dead = true;
        ert_s_count_uses(s, NULL);
    }
    return ERT_OK;
}

/* Activation params of a unary node, if it can be fused into an epilogue. */
static bool act_of(const ert_session *s, const snode *n, ert_act_params *a) {
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
            if (!ert_s_is_const(s, n->in[k]) || s->t[n->in[k]].dtype != ERT_DTYPE_F32) return false;
            float v = *(const float *)s->t[n->in[k]].cdata;
            if (k == 1) a->alpha = v;
            else a->beta = v;
        }
        return true;
    }
    default: return false;
    }
}

static bool same_shape(const stensor *a, const stensor *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim && memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof a->dims[0]) == 0;
}

/* ReduceMean/ReduceMax(x, axes = every spatial axis, keepdims) on f32 is
 * GlobalAveragePool/GlobalMaxPool (timm's squeeze-excitation writes
 * x.mean((2, 3), keepdim=True)): the same numbers, and the global pools have
 * channels-last kernels, so the block stays in a channels-last region. */
static void reduce_to_global_pool(ert_session *s) {
    for (int i = 0; i < s->nn; i++) {
        snode *n = &s->n[i];
        if (n->dead || (n->op != ERT_OP_REDUCE_MEAN && n->op != ERT_OP_REDUCE_MAX) || n->n_out != 1) continue;
        const ert_axis_params *ap = &n->params.axis;
        const stensor *x = &s->t[n->in[0]];
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
static bool const_near(const ert_session *s, int32_t t, double v) {
    if (!ert_s_is_const(s, t) || s->t[t].dtype != ERT_DTYPE_F32 || !s->t[t].cdata) return false;
    int64_t n = 0;
    if (!ert_dims_nelems(s->t[t].ndim, s->t[t].dims, &n) || n != 1) return false;
    double x = *(const float *)s->t[t].cdata;
    return fabs(x - v) <= 1e-4 * fabs(v);
}

/* Binary node n (op) with operand t: the other operand, or -1. */
static int32_t other_in(const snode *n, ert_op op, int32_t t) {
    if (!n || n->dead || n->op != op || n->n_in != 2) return -1;
    return n->in[0] == t ? n->in[1] : n->in[1] == t ? n->in[0] : -1;
}

/* GELU as exporters spell it below opset 20:
 *   x * 0.5 * (1 + Erf(x / sqrt(2)))   (Div by sqrt(2) or Mul by 1/sqrt(2);
 *   the 0.5 applied to x first or to the product last, either operand order)
 * -> one Gelu node (erf form) in the last Mul's place, which the activation
 * pass below can then fuse into a Gemm/MatMul/Conv. */
static void fuse_gelu(ert_session *s) {
    for (int i = 0; i < s->nn; i++) {
        snode *erf = &s->n[i];
        if (erf->dead || erf->op != ERT_OP_ERF) continue;
        snode *scale = NULL; /* x / sqrt(2) */
        for (int j = 0; j < i && !scale; j++)
            if (!s->n[j].dead && s->n[j].n_out == 1 && s->n[j].out[0] == erf->in[0]) scale = &s->n[j];
        if (!scale || scale->n_in != 2 || s->t[erf->in[0]].n_uses != 1) continue;
        int32_t x = -1;
        if (scale->op == ERT_OP_DIV && const_near(s, scale->in[1], 1.4142135623730951)) x = scale->in[0];
        for (int k = 0; k < 2 && scale->op == ERT_OP_MUL; k++)
            if (const_near(s, scale->in[1 - k], 0.7071067811865476)) x = scale->in[k];
        if (x < 0 || s->t[x].dtype != ERT_DTYPE_F32) continue;
        snode *add = ert_s_sole_consumer(s, erf->out[0], i);
        int32_t one = other_in(add, ERT_OP_ADD, erf->out[0]);
        if (one < 0 || !const_near(s, one, 1.0)) continue;
        snode *m1 = ert_s_sole_consumer(s, add->out[0], (int)(add - s->n));
        int32_t h = other_in(m1, ERT_OP_MUL, add->out[0]);
        if (h < 0) continue;
        snode *last = NULL, *half = NULL;
        if (h == x) { /* (x * (1 + erf)) * 0.5 */
            last = ert_s_sole_consumer(s, m1->out[0], (int)(m1 - s->n));
            int32_t c = other_in(last, ERT_OP_MUL, m1->out[0]);
            if (c < 0 || !const_near(s, c, 0.5)) continue;
        } else { /* (x * 0.5) * (1 + erf) */
            for (int j = 0; j < s->nn && !half; j++)
                if (!s->n[j].dead && s->n[j].n_out == 1 && s->n[j].out[0] == h) half = &s->n[j];
            int32_t c = other_in(half, ERT_OP_MUL, x);
            if (c < 0 || !const_near(s, c, 0.5) || s->t[h].n_uses != 1) continue;
            last = m1;
        }
        int32_t y = last->out[0];
        if (s->t[y].ndim != s->t[x].ndim || memcmp(s->t[y].dims, s->t[x].dims, (size_t)s->t[x].ndim * sizeof(int64_t)))
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
        ert_s_count_uses(s, NULL);
    }
}

/* MatMul(x, W) + b with b a constant over the last axis only (a Linear layer
 * on an input of rank > 2, as exporters write it) -> MatMul with a bias
 * input (in[2], gemm.has_c): one GEMM and its epilogue instead of a GEMM and
 * a broadcast Add, and the activation pass below can fuse into it too. */
static void fuse_matmul_bias(ert_session *s, int32_t *producer) {
    for (int i = 0; i < s->nn; i++) {
        snode *mm = &s->n[i];
        if (mm->dead || mm->op != ERT_OP_MATMUL || mm->n_in != 2 || mm->params.gemm.has_c ||
            mm->params.gemm.act.kind != ERT_ACT_NONE)
            continue;
        const stensor *y = &s->t[mm->out[0]];
        if (y->ndim < 2 || s->t[mm->in[1]].ndim < 2 || y->dtype != ERT_DTYPE_F32) continue;
        snode *add = ert_s_sole_consumer(s, mm->out[0], i);
        int32_t b = other_in(add, ERT_OP_ADD, mm->out[0]);
        if (b < 0 || b == mm->out[0] || !ert_s_is_const(s, b) || s->t[b].dtype != ERT_DTYPE_F32) continue;
        const stensor *bt = &s->t[b];
        int64_t N = y->dims[y->ndim - 1], nb = 0;
        if (bt->ndim < 1 || bt->ndim > y->ndim || bt->dims[bt->ndim - 1] != N ||
            !ert_dims_nelems(bt->ndim, bt->dims, &nb) || nb != N || !same_shape(y, &s->t[add->out[0]]))
            continue;
        mm->in[2] = b;
        mm->n_in = 3;
        mm->params.gemm.has_c = true;
        mm->params.gemm.beta = 1.0f;
        mm->out[0] = add->out[0];
        add->dead = true;
        ert_s_count_uses(s, producer);
    }
}

/* The node that writes tensor t (one output), or NULL. */
static snode *writer_of(ert_session *s, const int32_t *producer, int32_t t) {
    if (t < 0 || producer[t] < 0) return NULL;
    snode *n = &s->n[producer[t]];
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
static void fuse_matmul_operands(ert_session *s, int32_t *producer) {
    for (int i = 0; i < s->nn; i++) {
        snode *mm = &s->n[i];
        if (mm->dead || mm->op != ERT_OP_MATMUL || s->t[mm->out[0]].dtype != ERT_DTYPE_F32) continue;
        for (int k = 0; k < 2; k++) {
            snode *mul = s->t[mm->in[k]].n_uses == 1 ? writer_of(s, producer, mm->in[k]) : NULL;
            for (int j = 0; j < 2 && mul && mul->op == ERT_OP_MUL && mul->n_in == 2; j++) {
                int32_t u = mul->in[j], c = mul->in[1 - j];
                int64_t nc = 0;
                if (!ert_s_is_const(s, c) || s->t[c].dtype != ERT_DTYPE_F32 || !s->t[c].cdata ||
                    !ert_dims_nelems(s->t[c].ndim, s->t[c].dims, &nc) || nc != 1 || !same_shape(&s->t[u], &s->t[mm->in[k]]))
                    continue;
                mm->params.gemm.alpha *= *(const float *)s->t[c].cdata;
                mm->in[k] = u;
                mul->dead = true;
                ert_s_count_uses(s, producer);
                break;
            }
        }
        snode *tr = s->t[mm->in[1]].n_uses == 1 ? writer_of(s, producer, mm->in[1]) : NULL;
        int nd = s->t[mm->in[1]].ndim;
        if (tr && tr->op == ERT_OP_TRANSPOSE && !mm->params.gemm.trans_b && nd >= 2) {
            const int64_t *perm = tr->params.transpose.perm;
            bool swap = perm[nd - 2] == nd - 1 && perm[nd - 1] == nd - 2;
            for (int d = 0; d < nd - 2; d++) swap = swap && perm[d] == d;
            if (swap) {
                mm->in[1] = tr->in[0];
                mm->params.gemm.trans_b = true;
                tr->dead = true;
                ert_s_count_uses(s, producer);
            }
        }
        if (mm->n_in > 3 || mm->params.gemm.act.kind != ERT_ACT_NONE) continue;
        snode *add = ert_s_sole_consumer(s, mm->out[0], i);
        int32_t z = other_in(add, ERT_OP_ADD, mm->out[0]);
        if (z < 0 || z == mm->out[0] || producer[z] >= i || !same_shape(&s->t[z], &s->t[mm->out[0]]) ||
            !same_shape(&s->t[z], &s->t[add->out[0]]))
            continue;
        if (mm->n_in == 2) mm->in[2] = -1;
        mm->in[3] = z;
        mm->n_in = 4;
        mm->out[0] = add->out[0];
        add->dead = true;
        ert_s_count_uses(s, producer);
    }
}

/* s is a per-(image, channel) scale of x: x (N, C, ...), s (N, C, 1, ...) */
static bool is_channel_scale(const stensor *sc, const stensor *x) {
    if (sc->dtype != ERT_DTYPE_F32 || x->dtype != ERT_DTYPE_F32 || sc->ndim != x->ndim || x->ndim < 3) return false;
    if (sc->dims[0] != x->dims[0] || sc->dims[1] != x->dims[1]) return false;
    for (int d = 2; d < sc->ndim; d++)
        if (sc->dims[d] != 1) return false;
    return true;
}

/* Conv(Mul(x, s)) with s (N, C, 1, 1) -> Conv(x), input 5 = s: the kernel
 * scales x while it reads it, and the Mul's pass over the activation goes. */
static void fuse_in_scale(ert_session *s, int32_t *producer) {
    for (int i = 0; i < s->nn; i++) {
        snode *mul = &s->n[i];
        if (mul->dead || mul->op != ERT_OP_MUL) continue;
        snode *c = ert_s_sole_consumer(s, mul->out[0], i);
        if (!c || c->op != ERT_OP_CONV || c->in[0] != mul->out[0] || c->params.conv.group != 1 ||
            c->params.conv.has_in_scale || c->params.conv.has_scale || c->params.conv.nhwc)
            continue;
        for (int side = 0; side < 2; side++) {
            int32_t x = mul->in[side], sc = mul->in[1 - side];
            if (!is_channel_scale(&s->t[sc], &s->t[x]) || !same_shape(&s->t[x], &s->t[mul->out[0]])) continue;
            for (int k = c->n_in; k < 5; k++) c->in[k] = -1;
            c->in[0] = x;
            c->in[5] = sc;
            c->n_in = 6;
            c->params.conv.has_in_scale = true;
            mul->dead = true;
            ert_s_count_uses(s, producer);
            break;
        }
    }
}

ert_status ert_s_fuse(ert_session *s) {
    int32_t *producer = malloc((size_t)s->nt * sizeof *producer);
    if (!producer) return ert_s_oom(s);
    reduce_to_global_pool(s);
    ert_s_count_uses(s, producer);
    fuse_gelu(s);
    fuse_matmul_bias(s, producer);
    fuse_matmul_operands(s, producer);
    ert_s_fuse_attention(s, producer);
    ert_s_count_uses(s, producer);
    /* Mul(x, Sigmoid(x)) -> Silu(x) */
    for (int i = 0; i < s->nn; i++) {
        snode *sg = &s->n[i];
        if (sg->dead || sg->op != ERT_OP_SIGMOID) continue;
        snode *mul = ert_s_sole_consumer(s, sg->out[0], i);
        if (!mul || mul->op != ERT_OP_MUL) continue;
        int other = mul->in[0] == sg->out[0] ? 1 : 0;
        if (mul->in[other] != sg->in[0] || !same_shape(&s->t[sg->in[0]], &s->t[mul->out[0]])) continue;
        sg->op = ERT_OP_SILU;
        memset(&sg->params, 0, sizeof sg->params);
        sg->params.unary.act.kind = ERT_ACT_SILU;
        sg->src = NULL;
        sg->out[0] = mul->out[0];
        mul->dead = true;
        ert_s_count_uses(s, producer);
    }
    if (s->be->fusions & ERT_FUSE_CONV_IN_SCALE) fuse_in_scale(s, producer);
    for (int i = 0; i < s->nn; i++) {
        snode *c = &s->n[i];
        if (c->dead || (c->op != ERT_OP_CONV && c->op != ERT_OP_GEMM && c->op != ERT_OP_MATMUL)) continue;
        /* residual: Conv -> Add(y, z) with z ready before the Conv runs */
        if (c->op == ERT_OP_CONV && !c->params.conv.has_residual && c->params.conv.act.kind == ERT_ACT_NONE) {
            snode *add = ert_s_sole_consumer(s, c->out[0], i);
            if (add && add->op == ERT_OP_ADD) {
                int other = add->in[0] == c->out[0] ? 1 : 0;
                int32_t z = add->in[other];
                if (z != c->out[0] && same_shape(&s->t[z], &s->t[add->out[0]]) &&
                    same_shape(&s->t[c->out[0]], &s->t[add->out[0]]) && (producer[z] < i)) {
                    if (c->n_in == 2) c->in[2] = -1;
                    c->in[3] = z;
                    if (c->n_in < 4) c->n_in = 4; /* 6 with a fused input scale */
                    c->params.conv.has_residual = true;
                    c->out[0] = add->out[0];
                    add->dead = true;
                    ert_s_count_uses(s, producer);
                }
            }
        }
        ert_act_params *act = c->op == ERT_OP_CONV ? &c->params.conv.act : &c->params.gemm.act;
        if (act->kind != ERT_ACT_NONE) continue;
        snode *u = ert_s_sole_consumer(s, c->out[0], i);
        ert_act_params a;
        if (u && u->in[0] == c->out[0] && act_of(s, u, &a) && same_shape(&s->t[c->out[0]], &s->t[u->out[0]])) {
            *act = a;
            c->out[0] = u->out[0];
            u->dead = true;
            ert_s_count_uses(s, producer);
        }
    }
    free(producer);
    return ERT_OK;
}

void ert_s_remove_dead(ert_session *s) {
    ert_s_count_uses(s, NULL);
    for (int i = s->nn - 1; i >= 0; i--) {
        snode *n = &s->n[i];
        if (n->dead) continue;
        bool used = false;
        for (int k = 0; k < n->n_out; k++) used = used || s->t[n->out[k]].n_uses > 0 || ert_s_is_graph_out(s, n->out[k]);
        if (used) continue;
        n->dead = true;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) s->t[n->in[k]].n_uses--;
    }
}

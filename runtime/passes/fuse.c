/* Session step 4: inference passes on the working graph: BatchNorm folded
 * into the preceding Conv, Mul(x, Sigmoid(x)) -> SiLU, Conv + Add (residual)
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
static snode *sole_consumer(ert_session *s, int32_t t, int after) {
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
        snode *bn = sole_consumer(s, c->out[0], i);
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
        snode *c = sole_consumer(s, mul->out[0], i);
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
    ert_s_count_uses(s, producer);
    /* Mul(x, Sigmoid(x)) -> Silu(x) */
    for (int i = 0; i < s->nn; i++) {
        snode *sg = &s->n[i];
        if (sg->dead || sg->op != ERT_OP_SIGMOID) continue;
        snode *mul = sole_consumer(s, sg->out[0], i);
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
        if (c->dead || (c->op != ERT_OP_CONV && c->op != ERT_OP_GEMM)) continue;
        /* residual: Conv -> Add(y, z) with z ready before the Conv runs */
        if (c->op == ERT_OP_CONV && !c->params.conv.has_residual && c->params.conv.act.kind == ERT_ACT_NONE) {
            snode *add = sole_consumer(s, c->out[0], i);
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
        snode *u = sole_consumer(s, c->out[0], i);
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

/* Trainer step 3a: the frozen prefix. Nodes before the first trainable
 * parameter whose inputs are frozen constants are folded or rewritten as
 * inference nodes (BatchNorm folded into the conv's scale, BN+Relu fused),
 * so they need no gradient and save no activation. Called from build() in
 * trainer.c. */
#include "trainer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ step 3a: frozen prefix */

/* A frozen tensor: a constant, or a weight that is not trained. */
bool ert_tr_frozen_w(const ert_gtensor *x) { return (ert_graph_is_imm(x) || x->mem == ERT_MEM_PARAM) && !x->trainable && x->cdata; }

int ert_tr_n_uses(const ert_trainer *t, int32_t x) {
    int u = 0;
    for (int k = 0; k < t->g.nn; k++)
        for (int j = 0; j < t->g.n[k].n_in; j++) u += t->g.n[k].in[j] == x;
    for (int i = 0; i < t->model->n_outputs; i++) u += t->model->outputs[i] == x;
    return u;
}

int ert_tr_find_user(const ert_trainer *t, int32_t x, int from) {
    for (int k = from; k < t->g.nn; k++)
        for (int j = 0; j < t->g.n[k].n_in; j++)
            if (t->g.n[k].in[j] == x) return k;
    return -1;
}

void ert_tr_drop_node(ert_trainer *t, int k) {
    free(t->g.n[k].in);
    free(t->g.n[k].name_owned);
    memmove(&t->g.n[k], &t->g.n[k + 1], (size_t)(t->g.nn - k - 1) * sizeof *t->g.n);
    t->g.nn--;
}

/* A new f32 constant computed by the trainer (ERT_MEM_OWNED, owns data). */
static int32_t folded(ert_trainer *t, const char *name, int ndim, const int64_t *dims, float **data) {
    int32_t id = ert_graph_new_tensor(&t->g, name, ERT_DTYPE_F32, ndim, dims);
    if (id < 0) return -1;
    ert_gtensor *x = &t->g.t[id];
    x->owned = malloc(x->nbytes ? x->nbytes : 1);
    if (!x->owned) return -1;
    x->mem = ERT_MEM_OWNED;
    x->cdata = x->owned;
    *data = x->owned;
    return id;
}

/* A weight that is not trained and never written: a candidate parameter
 * outside the trainable set (not a BatchNorm's running statistic, which
 * ERT_BN_TRAIN updates in place), with the model's bytes. */
static bool frozen_param(const ert_trainer *t, int32_t id) {
    const ert_gtensor *x = &t->g.t[id];
    if (x->mem != ERT_MEM_PARAM || !x->candidate || x->trainable || !x->cdata) return false;
    for (int k = 0; t->o.bn == ERT_BN_TRAIN && k < t->g.nn; k++) {
        const ert_gnode *n = &t->g.n[k];
        if (n->op == ERT_OP_BATCHNORM || n->op == ERT_OP_BATCHNORM_TRAIN)
            for (int j = 3; j < 5 && j < n->n_in; j++)
                if (n->in[j] == id) return false;
    }
    return true;
}

/* 0. A node whose inputs are constants and frozen weights, at least one of
 * them a weight (the all-constant ones infer folded already, as the session
 * does): run once now and its outputs become constants, as the session folds
 * it (Mul(w, s) of a frozen layer; tests/train/test_graph_pair.c). Not
 * Dropout (random per step) nor a node writing a graph output. */
static ert_status fold_frozen_nodes(ert_trainer *t) {
    for (int k = 0; k < t->g.nn; k++) {
        ert_gnode *n = &t->g.n[k];
        if (n->op == ERT_OP_DROPOUT || n->op == ERT_OP_DROPOUT_TRAIN || n->n_in < 1) continue;
        bool all = true, weight = false;
        for (int j = 0; j < n->n_in && all; j++) {
            if (n->in[j] < 0) continue;
            bool w = frozen_param(t, n->in[j]);
            weight = weight || w;
            all = w || ert_graph_is_imm(&t->g.t[n->in[j]]);
        }
        for (int j = 0; j < n->n_out && all; j++)
            for (int i = 0; i < t->model->n_outputs; i++) all = all && n->out[j] != t->model->outputs[i];
        if (!all || !weight) continue;
        ert_status st = ert_graph_fold_node(&t->g, n);
        if (st) return st;
        ert_tr_drop_node(t, k--);
    }
    return ERT_OK;
}

/*
 * The part of the graph no gradient reaches is inference: plan it so.
 * 0. fold_frozen_nodes above.
 * 1. Conv -> BatchNorm (inference: frozen statistics) where the conv's
 *    weight and bias and all four BN tensors are frozen: the BN is folded into
 *    a new weight and bias (W' = W s, b' = (b - mean) s + beta, s = gamma /
 *    sqrt(var + eps)); valid even when the conv's input needs a gradient
 *    (the folded conv is the same function of its input).
 * 2. Conv -> Relu where no input of the conv needs a gradient (a frozen
 *    prefix: the fused epilogue has no backward rule, and needs none here):
 *    one node, cuDNN's fused conv+bias+relu on CUDA.
 * 3. Such a conv -> Add (-> Relu), the Add's other input made earlier: the
 *    Add becomes the conv's residual epilogue (ResNet block ends).
 * Each removes an activation tensor from the plan. The folded-away weights
 * keep their model values (frozen: never updated), so checkpoints and export
 * still read them from the model.
 */
ert_status ert_tr_fold_frozen(ert_trainer *t) {
    ert_status st0 = fold_frozen_nodes(t);
    if (st0) return st0;
    /* need[x]: x depends on a trainable parameter */
    int n0 = t->g.nt;
    bool *need = calloc((size_t)n0 + 1, 1);
    if (!need) return ert_graph_oom(&t->g);
    for (int i = 0; i < t->g.nt; i++) need[i] = t->g.t[i].trainable;
    for (int k = 0; k < t->g.nn; k++) {
        bool any = false;
        for (int j = 0; j < t->g.n[k].n_in; j++) any = any || (t->g.n[k].in[j] >= 0 && need[t->g.n[k].in[j]]);
        for (int j = 0; j < t->g.n[k].n_out; j++)
            if (t->g.n[k].out[j] >= 0 && t->g.n[k].out[j] < n0) need[t->g.n[k].out[j]] = any;
    }
    ert_status st = ERT_OK;
    for (int k = 0; k < t->g.nn && st == ERT_OK; k++) {
        ert_gnode *c = &t->g.n[k];
        if (c->op != ERT_OP_CONV || c->n_out < 1 || c->out[0] < 0 || c->params.conv.has_residual) continue;
        ert_conv_params *cp = &c->params.conv;
        int32_t y = c->out[0], w = c->in[1], b = cp->has_bias && c->n_in > 2 ? c->in[2] : -1;
        const ert_gtensor *W = &t->g.t[w];
        if (W->dtype != ERT_DTYPE_F32 || t->g.t[y].dtype != ERT_DTYPE_F32 || !ert_tr_frozen_w(W) ||
            (b >= 0 && !ert_tr_frozen_w(&t->g.t[b])) || ert_tr_n_uses(t, y) != 1)
            continue;
        int u = ert_tr_find_user(t, y, k + 1);
        ert_gnode *bn = u >= 0 ? &t->g.n[u] : NULL;
        if (bn && bn->op == ERT_OP_BATCHNORM && cp->act.kind == ERT_ACT_NONE && bn->n_in >= 5 && bn->in[0] == y &&
            bn->n_out >= 1 && bn->out[0] >= 0 && (bn->n_out < 2 || bn->out[1] < 0)) {
            bool ok = true;
            for (int j = 1; j < 5; j++) ok = ok && bn->in[j] >= 0 && ert_tr_frozen_w(&t->g.t[bn->in[j]]) &&
                                             t->g.t[bn->in[j]].dtype == ERT_DTYPE_F32;
            int64_t M = W->dims[0], per = M ? (int64_t)(W->nbytes / sizeof(float)) / M : 0;
            if (ok && t->g.t[y].ndim >= 2 && t->g.t[y].dims[1] == M) {
                const float *g = t->g.t[bn->in[1]].cdata, *be = t->g.t[bn->in[2]].cdata, *mu = t->g.t[bn->in[3]].cdata,
                            *var = t->g.t[bn->in[4]].cdata, *w0 = W->cdata,
                            *b0 = b >= 0 ? (const float *)t->g.t[b].cdata : NULL;
                float eps = bn->params.norm.epsilon, *w1 = NULL, *b1 = NULL, *s1 = NULL;
                /* On the CPU the filter stays the model's own (mapped, not in the arena) and the
                 * conv scales its output channels (has_scale: applied while packing the filter);
                 * a device copies weights into its arena anyway, so there they are scaled once. */
                const bool scale_only = !t->g.be;
                char nm[256];
                snprintf(nm, sizeof nm, scale_only ? "%s.bnfold_scale" : "%s.bnfold", W->name);
                int32_t wn = scale_only ? folded(t, nm, 1, &M, &s1) : folded(t, nm, W->ndim, W->dims, &w1);
                snprintf(nm, sizeof nm, "%s.bnfold_bias", c->name);
                int32_t bnid = wn >= 0 ? folded(t, nm, 1, &M, &b1) : -1;
                if (bnid < 0) {
                    st = ert_graph_oom(&t->g);
                    break;
                }
                c = &t->g.n[k];
                bn = &t->g.n[u];
                for (int64_t m = 0; m < M; m++) {
                    double sc = (double)g[m] / sqrt((double)var[m] + eps);
                    if (scale_only) s1[m] = (float)sc;
                    else
                        for (int64_t i = 0; i < per; i++) w1[m * per + i] = (float)(w0[m * per + i] * sc);
                    b1[m] = (float)(((b0 ? b0[m] : 0.0) - mu[m]) * sc + be[m]);
                }
                const int n_in = scale_only ? 5 : 3;
                int32_t *io = malloc((size_t)(n_in + c->n_out + 1) * sizeof *io);
                if (!io) {
                    st = ert_graph_oom(&t->g);
                    break;
                }
                io[0] = c->in[0], io[1] = scale_only ? w : wn, io[2] = bnid;
                if (scale_only) io[3] = -1, io[4] = wn;
                for (int j = 0; j < c->n_out; j++) io[n_in + j] = c->out[j];
                io[n_in] = bn->out[0];
                free(c->in);
                c->in = io;
                c->n_in = n_in;
                c->out = io + n_in;
                cp->has_bias = true;
                cp->has_scale = scale_only;
                if (scale_only) t->g.t[w].mem = ERT_MEM_CONST; /* read in place from the model, never copied */
                ert_tr_drop_node(t, u);
                c = &t->g.n[k];
                cp = &c->params.conv;
                y = c->out[0]; /* the BN's output: need[] already right (same inputs) */
                if (ert_tr_n_uses(t, y) != 1) continue;
                u = ert_tr_find_user(t, y, k + 1);
            }
        }
        /* 2. relu into a conv of the frozen prefix (folded constants: no need) */
        bool in_need = false;
        for (int j = 0; j < c->n_in; j++) in_need = in_need || (c->in[j] >= 0 && c->in[j] < n0 && need[c->in[j]]);
        ert_gnode *r = u >= 0 ? &t->g.n[u] : NULL;
        if (!in_need && r && r->op == ERT_OP_RELU && r->in[0] == y && r->out[0] >= 0 && cp->act.kind == ERT_ACT_NONE) {
            cp->act.kind = ERT_ACT_RELU;
            c->out[0] = r->out[0];
            ert_tr_drop_node(t, u);
        }
    }
    /* 3. Add (-> Relu) into the later-made of its two inputs when that is a
     * frozen-prefix conv read only there: the other input, made before it,
     * becomes the conv's residual (ResNet's block ends) */
    for (int k = 0; k < t->g.nn && st == ERT_OK; k++) {
        ert_gnode *ad = &t->g.n[k];
        if (ad->op != ERT_OP_ADD || ad->n_in != 2 || ad->in[0] < 0 || ad->in[1] < 0 || ad->out[0] < 0) continue;
        const ert_gtensor *A = &t->g.t[ad->in[0]], *Bt = &t->g.t[ad->in[1]], *S = &t->g.t[ad->out[0]];
        if (A->dtype != ERT_DTYPE_F32 || Bt->dtype != ERT_DTYPE_F32 || A->ndim != S->ndim || Bt->ndim != S->ndim ||
            memcmp(A->dims, S->dims, (size_t)S->ndim * sizeof S->dims[0]) ||
            memcmp(Bt->dims, S->dims, (size_t)S->ndim * sizeof S->dims[0]) ||
            (ad->in[0] < n0 && need[ad->in[0]]) || (ad->in[1] < n0 && need[ad->in[1]]))
            continue;
        int pa = -1, pb = -1; /* producers */
        for (int j = 0; j < k; j++)
            for (int o = 0; o < t->g.n[j].n_out; o++) {
                if (t->g.n[j].out[o] == ad->in[0]) pa = j;
                if (t->g.n[j].out[o] == ad->in[1]) pb = j;
            }
        int ci = pa > pb ? pa : pb;
        int32_t res = pa > pb ? ad->in[1] : ad->in[0];
        ert_gnode *c = ci >= 0 ? &t->g.n[ci] : NULL;
        if (!c || c->op != ERT_OP_CONV || c->params.conv.has_residual || c->params.conv.act.kind != ERT_ACT_NONE ||
            c->n_out != 1 || ert_tr_n_uses(t, c->out[0]) != 1 || res == c->out[0])
            continue;
        bool in_need = false;
        for (int j = 0; j < c->n_in; j++) in_need = in_need || (c->in[j] >= 0 && c->in[j] < n0 && need[c->in[j]]);
        if (in_need) continue;
        const int n_in = c->params.conv.has_scale ? 5 : 4; /* keep a folded scale (input 4) */
        int32_t *io = malloc((size_t)(n_in + 1 + 1) * sizeof *io);
        if (!io) {
            st = ert_graph_oom(&t->g);
            break;
        }
        io[0] = c->in[0], io[1] = c->in[1], io[2] = c->n_in > 2 ? c->in[2] : -1, io[3] = res;
        if (n_in == 5) io[4] = c->in[4];
        io[n_in] = ad->out[0];
        free(c->in);
        c->in = io;
        c->n_in = n_in;
        c->out = io + n_in;
        c->params.conv.has_residual = true;
        ert_tr_drop_node(t, k); /* the Add: after c, so c's index holds */
        c = &t->g.n[ci];
        int32_t y = c->out[0];
        int u = ert_tr_n_uses(t, y) == 1 ? ert_tr_find_user(t, y, ci + 1) : -1;
        if (u >= 0 && t->g.n[u].op == ERT_OP_RELU && t->g.n[u].in[0] == y && t->g.n[u].out[0] >= 0) {
            c->params.conv.act.kind = ERT_ACT_RELU;
            c->out[0] = t->g.n[u].out[0];
            ert_tr_drop_node(t, u);
        }
        k = ci; /* the loop's k++ moves past the conv */
    }
    free(need);
    return st;
}

/* BatchNorm (batch statistics) + Relu: when the BatchNorm's output is read
 * only by a Relu, the Relu becomes the BatchNorm's epilogue (grad.relu): one
 * pass over the activation instead of two in the forward, and the backward
 * masks dy by the output inside the BatchNorm gradient (no Relu gradient
 * tensor). The Relu's output is what both rules read, and it is saved anyway
 * (the next conv's input). options.bn_relu_unfused keeps them apart. */
ert_status ert_tr_fuse_bn_relu(ert_trainer *t) {
    if (t->o.bn_relu_unfused) return ERT_OK;
    for (int k = 0; k < t->g.nn; k++) {
        ert_gnode *bn = &t->g.n[k];
        if (bn->op != ERT_OP_BATCHNORM_TRAIN || bn->params.grad.relu || bn->n_out < 1 || bn->out[0] < 0) continue;
        int32_t y = bn->out[0];
        int u = ert_tr_n_uses(t, y) == 1 ? ert_tr_find_user(t, y, k + 1) : -1;
        if (u < 0) continue;
        ert_gnode *r = &t->g.n[u];
        if (r->op != ERT_OP_RELU || r->n_in < 1 || r->in[0] != y || r->n_out < 1 || r->out[0] < 0 ||
            t->g.t[r->out[0]].dtype != t->g.t[y].dtype)
            continue;
        bn->params.grad.relu = true;
        bn->out[0] = r->out[0];
        ert_tr_drop_node(t, u); /* after k: bn's index holds */
    }
    return ERT_OK;
}


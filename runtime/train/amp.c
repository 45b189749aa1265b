/* Trainer step 3b: mixed precision (CUDA, F16/BF16): amp_rewrite wraps
 * eligible Convs in Casts (see trainer.c's header for why casts in the
 * graph). Called from build() in trainer.c. */
#include "trainer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ step 3b: mixed precision */

/* A Conv the half type can run: 2-D, f32, no bias and no fused epilogue (the
 * conv+BN blocks that carry the FLOPs; a bias would need a half REDUCE_TO). */
static bool amp_conv(const ert_trainer *t, const ert_gnode *n) {
    if (n->op != ERT_OP_CONV || n->n_in < 2 || n->n_out < 1 || n->in[0] < 0 || n->in[1] < 0 || n->out[0] < 0)
        return false;
    const ert_conv_params *p = &n->params.conv;
    if (p->has_bias || (n->n_in > 2 && n->in[2] >= 0) || p->act.kind != ERT_ACT_NONE || p->has_residual ||
        p->nsp != 2)
        return false;
    return t->g.t[n->in[0]].dtype == ERT_DTYPE_F32 && t->g.t[n->in[1]].dtype == ERT_DTYPE_F32 &&
           t->g.t[n->out[0]].dtype == ERT_DTYPE_F32;
}

/* x cast to h, once per tensor (memo: its cast, -1 none). */
static int32_t amp_cast(ert_trainer *t, int32_t *memo, int32_t x, ert_dtype h) {
    if (memo[x] >= 0) return memo[x];
    char nm[256];
    snprintf(nm, sizeof nm, "%s.%s", t->g.t[x].name, ert_dtype_name(h));
    ert_gtensor c = t->g.t[x];
    int32_t y = ert_graph_new_tensor(&t->g, nm, h, c.ndim, c.dims);
    ert_gnode *n = y >= 0 ? ert_graph_new_node(&t->g, ERT_OP_CAST, nm, 1, 1, ERT_PHASE_FWD) : NULL;
    if (!n) return -1;
    t->g.t[y].fwd = true;
    n->in[0] = x;
    n->out[0] = y;
    n->params.cast.to = h;
    memo[x] = y;
    if (ert_tr_frozen_w(&t->g.t[x])) { /* a frozen weight: converted once, here */
        if (ert_graph_fold_node(&t->g, n) != ERT_OK) return -1;
        free(n->in);
        free(n->name_owned);
        t->g.nn--;
    }
    return y;
}

/* Frozen-prefix ops that run in the half type end to end (the CUDA
 * inference kernels take f16/bf16 for all of them). */
static bool amp_half_op(const ert_trainer *t, const ert_gnode *n) {
    switch (n->op) {
    case ERT_OP_CONV: return n->params.conv.nsp == 2 && t->g.t[n->in[0]].dtype == ERT_DTYPE_F32;
    case ERT_OP_BATCHNORM: case ERT_OP_RELU: case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL: case ERT_OP_GLOBAL_AVGPOOL:
    case ERT_OP_ADD: case ERT_OP_FLATTEN: case ERT_OP_RESHAPE: case ERT_OP_IDENTITY:
        return n->n_in >= 1 && n->in[0] >= 0 && t->g.t[n->in[0]].dtype == ERT_DTYPE_F32;
    default: return false;
    }
}

/* Trainable-region ops whose activations (slot 0; both for Add) are kept in
 * the half type, with their gradients (the CUDA kernels of cuda_train.c take
 * f16/bf16 activations with f32 parameters); *slots: how many leading inputs
 * are activations. */
static bool amp_act_op(const ert_trainer *t, const ert_gnode *n, int *slots) {
    *slots = 1;
    if (n->n_in < 1 || n->in[0] < 0 || n->n_out < 1 || n->out[0] < 0 || t->g.t[n->in[0]].dtype != ERT_DTYPE_F32 ||
        t->g.t[n->out[0]].dtype != ERT_DTYPE_F32)
        return false;
    switch (n->op) {
    case ERT_OP_BATCHNORM_TRAIN: case ERT_OP_RELU: case ERT_OP_LEAKY_RELU: case ERT_OP_CLIP: case ERT_OP_SIGMOID:
    case ERT_OP_TANH: case ERT_OP_HARD_SIGMOID: case ERT_OP_HARD_SWISH: case ERT_OP_SILU: case ERT_OP_GELU:
    case ERT_OP_AVGPOOL: case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_FLATTEN: case ERT_OP_RESHAPE: case ERT_OP_IDENTITY:
    case ERT_OP_SQUEEZE: case ERT_OP_UNSQUEEZE:
        return true;
    case ERT_OP_MAXPOOL: return n->n_out < 2 || n->out[1] < 0;
    case ERT_OP_ADD: /* same shapes: the gradient passes through, no reduction */
        *slots = 2;
        return n->n_in == 2 && n->in[1] >= 0 && t->g.t[n->in[1]].dtype == ERT_DTYPE_F32 &&
               t->g.t[n->in[0]].ndim == t->g.t[n->in[1]].ndim &&
               !memcmp(t->g.t[n->in[0]].dims, t->g.t[n->in[1]].dims, (size_t)t->g.t[n->in[0]].ndim * sizeof(int64_t)) &&
               !memcmp(t->g.t[n->in[0]].dims, t->g.t[n->out[0]].dims, (size_t)t->g.t[n->in[0]].ndim * sizeof(int64_t));
    default: return false;
    }
}

/* Nodes: frozen prefix (no input needs a gradient, an amp_half_op): every
 * f32 input and output becomes its half twin, the f32 tensor is made only
 * when a later f32 node (or the loss) reads it (missing[]); trainable convs
 * and amp_act_op nodes: their activation inputs and output 0 likewise (with
 * amp_conv_only: casts around each conv instead); the rest: f32, with casts
 * of half-only inputs back. */
ert_status ert_tr_amp_rewrite(ert_trainer *t) {
    ert_dtype h = t->amp;
    if (h == ERT_DTYPE_F32) return ERT_OK;
    int nold = t->g.nn, n_orig = t->g.nt;
    /* a node becomes at most n_in casts + itself + 1 cast: the new list never
     * reallocates, so a failure can still hand every old node over */
    int cap = 16 + t->model->n_outputs;
    for (int k = 0; k < nold; k++) cap += t->g.n[k].n_in + 2;
    ert_gnode *old = t->g.n, *nw = malloc((size_t)cap * sizeof *nw);
    int32_t *memo = malloc((size_t)(n_orig + 1) * sizeof *memo);
    bool *need = calloc((size_t)n_orig + 1, 1), *missing = calloc((size_t)n_orig + 1, 1);
    if (!nw || !memo || !need || !missing) {
        free(nw);
        free(memo);
        free(need);
        free(missing);
        return ert_graph_oom(&t->g);
    }
    for (int i = 0; i < n_orig; i++) {
        memo[i] = -1;
        need[i] = t->g.t[i].trainable;
    }
    t->g.n = nw;
    t->g.nn = 0;
    t->g.cap_n = cap;
    ert_status st = ERT_OK;
    int k = 0;
    char nm[256];
    for (; k < nold && st == ERT_OK; k++) {
        ert_gnode f = old[k];
        bool any = false;
        for (int j = 0; j < f.n_in; j++) any = any || (f.in[j] >= 0 && need[f.in[j]]);
        for (int j = 0; j < f.n_out; j++)
            if (f.out[j] >= 0) need[f.out[j]] = any;
        int slots = 0;
        bool frozen_half = !any && amp_half_op(t, &f);
        bool act_half = !frozen_half && !t->o.amp_conv_only && (amp_act_op(t, &f, &slots) || amp_conv(t, &f));
        if (act_half && f.op == ERT_OP_CONV) slots = 2; /* x and the weight's half copy */
        if (frozen_half || act_half) {
            for (int j = 0; j < f.n_in && st == ERT_OK; j++) {
                if (f.in[j] < 0 || t->g.t[f.in[j]].dtype != ERT_DTYPE_F32 || (act_half && j >= slots)) continue;
                int32_t xh = amp_cast(t, memo, f.in[j], h);
                if (xh < 0) st = ert_graph_oom(&t->g);
                else f.in[j] = xh;
            }
            for (int j = 0; j < f.n_out && st == ERT_OK; j++) {
                int32_t y = f.out[j];
                if (y < 0 || t->g.t[y].dtype != ERT_DTYPE_F32 || (act_half && j > 0)) continue; /* BN statistics: f32 */
                snprintf(nm, sizeof nm, "%s.%s", t->g.t[y].name, ert_dtype_name(h));
                ert_gtensor c = t->g.t[y];
                int32_t yh = ert_graph_new_tensor(&t->g, nm, h, c.ndim, c.dims);
                if (yh < 0) {
                    st = ert_graph_oom(&t->g);
                    break;
                }
                t->g.t[yh].fwd = true;
                memo[y] = yh;
                missing[y] = true;
                f.out[j] = yh;
            }
            t->g.n[t->g.nn++] = f;
            continue;
        }
        /* f32 node: its half-only inputs cast back first (a trainable AMP
         * conv reads x and W in the half type anyway) */
        bool ac = amp_conv(t, &f);
        for (int j = 0; j < f.n_in && st == ERT_OK; j++) {
            int32_t x = f.in[j];
            if (x < 0 || x >= n_orig || !missing[x] || (ac && j < 2)) continue;
            ert_gnode *b = ert_graph_new_node(&t->g, ERT_OP_CAST, t->g.t[x].name, 1, 1, ERT_PHASE_FWD);
            if (!b) {
                st = ert_graph_oom(&t->g);
                break;
            }
            b->in[0] = memo[x];
            b->out[0] = x;
            b->params.cast.to = ERT_DTYPE_F32;
            missing[x] = false;
        }
        if (st != ERT_OK || !ac) {
            t->g.n[t->g.nn++] = f;
            continue;
        }
        int32_t y = f.out[0];
        int32_t xh = amp_cast(t, memo, f.in[0], h), wh = xh >= 0 ? amp_cast(t, memo, f.in[1], h) : -1;
        snprintf(nm, sizeof nm, "%s.%s", t->g.t[y].name, ert_dtype_name(h));
        ert_gtensor c = t->g.t[y];
        int32_t yh = wh >= 0 ? ert_graph_new_tensor(&t->g, nm, h, c.ndim, c.dims) : -1;
        if (yh < 0) {
            t->g.n[t->g.nn++] = f;
            st = ert_graph_oom(&t->g);
            break;
        }
        t->g.t[yh].fwd = true;
        f.in[0] = xh;
        f.in[1] = wh;
        f.out[0] = yh;
        t->g.n[t->g.nn++] = f;
        ert_gnode *b = ert_graph_new_node(&t->g, ERT_OP_CAST, t->g.t[y].name, 1, 1, ERT_PHASE_FWD);
        if (!b) {
            st = ert_graph_oom(&t->g);
            continue;
        }
        b->in[0] = yh;
        b->out[0] = y;
        b->params.cast.to = ERT_DTYPE_F32;
    }
    for (; k < nold; k++) t->g.n[t->g.nn++] = old[k];
    for (int i = 0; i < t->model->n_outputs && st == ERT_OK; i++) {
        int32_t x = t->model->outputs[i];
        if (x < 0 || x >= n_orig || !missing[x]) continue;
        ert_gnode *b = ert_graph_new_node(&t->g, ERT_OP_CAST, t->g.t[x].name, 1, 1, ERT_PHASE_FWD);
        if (!b) {
            st = ert_graph_oom(&t->g);
            break;
        }
        b->in[0] = memo[x];
        b->out[0] = x;
        b->params.cast.to = ERT_DTYPE_F32;
        missing[x] = false;
    }
    free(old);
    free(memo);
    free(need);
    free(missing);
    return st;
}


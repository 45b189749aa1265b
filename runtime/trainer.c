/*
 * Trainer: a model planned for training on the CPU.
 *
 * Why its own pipeline and not session.c: inference folds BatchNorm into
 * Conv, fuses epilogues, folds every all-constant node and treats weights as
 * immutable (used in place from the mmap'd file). Training needs the
 * opposite for parameters, plus phases (forward, backward, optimizer) and
 * more memory categories. Sharing: op prepare (shape inference), the CPU
 * kernels, the planner (planner.c) and the backend's thread pool. session.c
 * is untouched.
 *
 * Create (all allocation happens here; ert_trainer_plan runs steps 1-7):
 *   1. Copy the model's tensors; fix dynamic input dims (batch / input_shapes).
 *   2. Parameters: a float weight read at a differentiable input slot (Conv/
 *      Gemm/MatMul/BN/LN/Add... see ert_ad_diff_slot), except one-element
 *      weights of element-wise ops (exporters' constants such as 0.5 in Gelu).
 *      The trainable subset: all, fnmatch pattern, or the last N nodes that
 *      read parameters. BN running stats in train mode are mutable too.
 *   3. Walk the nodes: prepare infers shapes; a node whose inputs are all
 *      immutable constants (or a Shape node) is run once and becomes a
 *      constant (shape chains); parameters never fold. BatchNorm becomes
 *      BATCHNORM_TRAIN (batch statistics) unless frozen; Dropout with a
 *      ratio becomes DROPOUT_TRAIN (seeded splitmix64 stream in a u64 tensor).
 *   4. Loss node (logits, target) -> (loss, dlogits).
 *   5. Autodiff (autodiff.c) appends the backward nodes.
 *   6. Gradient norm node (clipping), one optimizer node per parameter with
 *      its state tensors.
 *   7. Lifetimes over the whole schedule; planned blocks (activations, saved
 *      activations, activation gradients, workspaces) placed by the planner;
 *      fixed regions: [weights | gradients | optimizer state | io | planned].
 *   8. Take the arena; copy parameters and constants in, zero gradients and
 *      state; resolve every kernel argument once.
 * Step: run forward+backward+norm, check the loss and norm are finite, set
 * lr/step in the optimizer nodes, run the optimizer nodes. No allocation.
 * Mixed precision (CUDA, session.precision F16/BF16): after step 3,
 * amp_rewrite() wraps every eligible Conv in Casts (x and the f32 master
 * weight to the half type, the output back to f32), so autodiff emits the
 * conv's gradients in the half type and the Casts' gradients bring them back
 * to f32. Why casts in the graph and not half storage everywhere: every
 * other training kernel (BatchNorm statistics, activation and pooling
 * gradients, loss, optimizer) stays the checked f32 code, and the half copy
 * of a weight is made by the step itself from the freshly updated master
 * (no separate refresh pass to forget). F16 adds a device loss scaler (a
 * state tensor read by the loss kernel, which scales dlogits, and by the
 * gradient norm kernel, which unscales the norm, folds 1/S into the factor
 * the optimizer applies, and updates the scale).
 * Limits: f32 parameters and activations outside the AMP convs (f16/bf16
 * weights are refused); activations are never computed in place (only
 * Reshape-like outputs alias their input, when it dies there).
 */
#include "trainer_internal.h"

#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ helpers */

ert_status ert_tr_oom(ert_trainer *t) { return ert_set_error(t->ctx, ERT_E_NOMEM, "out of memory creating the trainer"); }

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static bool set_nbytes(ttensor *x) {
    ert_tensor tmp = {.dtype = x->dtype, .ndim = x->ndim};
    memcpy(tmp.dims, x->dims, sizeof tmp.dims);
    return ert_tensor_nbytes(&tmp, &x->nbytes);
}

static int32_t add_raw(ert_trainer *t) {
    if (t->nt == t->cap_t) {
        int cap = t->cap_t ? t->cap_t * 2 : 128;
        ttensor *n = realloc(t->t, (size_t)cap * sizeof *n);
        if (!n) return -1;
        t->t = n;
        t->cap_t = cap;
    }
    ttensor *x = &t->t[t->nt];
    memset(x, 0, sizeof *x);
    x->model_id = -1;
    x->block = -1;
    x->alias = -1;
    x->first = x->last = -1;
    return t->nt++;
}

int32_t ert_tr_add_tensor(ert_trainer *t, const char *name, ert_dtype dt, int ndim, const int64_t *dims) {
    char *nm = dupstr(name ? name : "?");
    if (!nm) return -1;
    int32_t id = add_raw(t);
    if (id < 0) {
        free(nm);
        return -1;
    }
    ttensor *x = &t->t[id];
    x->name = x->name_owned = nm;
    x->dtype = dt;
    x->ndim = ndim;
    if (ndim) memcpy(x->dims, dims, (size_t)ndim * sizeof *dims);
    x->defined = true;
    set_nbytes(x);
    return id;
}

tnode *ert_tr_add_node(ert_trainer *t, ert_op op, const char *name, int n_in, int n_out, int phase) {
    if (t->nn == t->cap_n) {
        int cap = t->cap_n ? t->cap_n * 2 : 128;
        tnode *n = realloc(t->n, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        t->n = n;
        t->cap_n = cap;
    }
    tnode *n = &t->n[t->nn];
    memset(n, 0, sizeof *n);
    n->in = malloc((size_t)(n_in + n_out + 1) * sizeof(int32_t));
    n->name_owned = name ? dupstr(name) : NULL;
    if (!n->in || (name && !n->name_owned)) {
        free(n->in);
        free(n->name_owned);
        return NULL;
    }
    n->out = n->in + n_in;
    for (int k = 0; k < n_in + n_out; k++) n->in[k] = -1;
    n->name = n->name_owned ? n->name_owned : "?";
    n->op = op;
    n->n_in = n_in;
    n->n_out = n_out;
    n->ws_block = -1;
    n->phase = phase;
    t->nn++;
    return n;
}

static const char *op_name(ert_op op) {
    const ert_op_def *d = ert_op_get(op);
    return d ? d->name : "?";
}

static void fill_view(ert_tview *v, const ttensor *x, void *data) {
    memset(v, 0, sizeof *v);
    v->data = data;
    v->dtype = x->dtype;
    v->ndim = x->ndim;
    memcpy(v->dims, x->dims, sizeof v->dims);
    int64_t ne = 0;
    ert_dims_nelems(x->ndim, x->dims, &ne);
    v->n_elems = ne;
}

static bool is_imm(const ttensor *x) { return x->mem == TM_CONST || x->mem == TM_FOLDED; }

float ert_tr_lr_at(const ert_trainer_options *o, int64_t step) {
    const ert_lr_options *l = &o->lr;
    float lr = o->optim.lr;
    if (l->warmup_steps > 0 && step < l->warmup_steps) return lr * (float)(step + 1) / (float)l->warmup_steps;
    int64_t s = step - (l->warmup_steps > 0 ? l->warmup_steps : 0);
    switch (l->kind) {
    case ERT_LR_STEP: {
        float gamma = l->gamma > 0 ? l->gamma : 0.1f;
        return lr * (float)pow(gamma, (double)(s / l->step_size));
    }
    case ERT_LR_COSINE: {
        double f = s >= l->total_steps ? 1.0 : (double)s / l->total_steps;
        return (float)(l->min_lr + (lr - l->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * f)));
    }
    default: return lr;
    }
}

/* ------------------------------------------------------------------ steps 1-3 */

static ert_status fix_inputs(ert_trainer *t) {
    const ert_model *m = t->model;
    const ert_session_options *o = &t->o.session;
    int64_t batch = o->batch > 0 ? o->batch : 1;
    for (int i = 0; i < m->n_inputs; i++) {
        ttensor *x = &t->t[m->inputs[i]];
        const ert_input_shape *is = NULL;
        for (int k = 0; k < o->n_input_shapes; k++)
            if (o->input_shapes[k].name && strcmp(o->input_shapes[k].name, x->name) == 0) is = &o->input_shapes[k];
        for (int d = 0; d < x->ndim; d++) {
            if (is) {
                if (is->ndim != x->ndim || is->dims[d] < 0 || (x->dims[d] >= 0 && x->dims[d] != is->dims[d]))
                    return ert_set_error(t->ctx, ERT_E_SHAPE, "input '%s': input_shapes entry does not fit the model",
                                         x->name);
                x->dims[d] = is->dims[d];
            } else if (x->dims[d] < 0) {
                if (d != 0)
                    return ert_set_error(t->ctx, ERT_E_SHAPE, "input '%s': dim %d is dynamic; give input_shapes",
                                         x->name, d);
                x->dims[d] = batch;
            }
        }
        if (!set_nbytes(x)) return ert_set_error(t->ctx, ERT_E_SHAPE, "input '%s': size overflows", x->name);
        x->defined = true;
        x->mem = TM_IO;
    }
    return ERT_OK;
}

static bool eltwise(ert_op op) { return op == ERT_OP_ADD || op == ERT_OP_SUB || op == ERT_OP_MUL || op == ERT_OP_DIV; }

/* Step 2: candidates, trainable subset, mutable BN stats. */
static ert_status select_params(ert_trainer *t) {
    const ert_model *m = t->model;
    int n_layers = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *nd = &m->nodes[i];
        bool has = false;
        for (int k = 0; k < nd->n_in; k++) {
            int32_t id = nd->in[k];
            if (id < 0 || m->tensors[id].role != ERT_ROLE_WEIGHT || !ert_ad_diff_slot(nd->op, k)) continue;
            ttensor *x = &t->t[id];
            int64_t ne = 0;
            ert_dims_nelems(x->ndim, x->dims, &ne);
            if (eltwise(nd->op) && ne == 1) continue;
            if (x->dtype != ERT_DTYPE_F32 && x->dtype != ERT_DTYPE_F16 && x->dtype != ERT_DTYPE_BF16)
                continue; /* integer data (shape pieces in a Concat): not a parameter */
            if (x->dtype != ERT_DTYPE_F32)
                return ert_set_error(t->ctx, ERT_E_UNSUPPORTED, "weight '%s': training needs f32 parameters, it is %s",
                                     x->name, ert_dtype_name(x->dtype));
            x->candidate = true;
            has = true;
        }
        if (has) n_layers++;
        if (nd->op == ERT_OP_BATCHNORM && t->o.bn == ERT_BN_TRAIN)
            for (int k = 3; k < 5 && k < nd->n_in; k++)
                if (nd->in[k] >= 0 && m->tensors[nd->in[k]].role == ERT_ROLE_WEIGHT) t->t[nd->in[k]].mem = TM_PARAM;
    }
    int layer = 0, first_layer = n_layers - t->o.last_n;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *nd = &m->nodes[i];
        bool has = false;
        for (int k = 0; k < nd->n_in; k++) {
            int32_t id = nd->in[k];
            if (id < 0 || !t->t[id].candidate || !ert_ad_diff_slot(nd->op, k)) continue;
            has = true;
            ttensor *x = &t->t[id];
            switch (t->o.trainable) {
            case ERT_TRAIN_ALL: x->trainable = true; break;
            case ERT_TRAIN_PATTERN: x->trainable = x->trainable || fnmatch(t->o.pattern, x->name, 0) == 0; break;
            case ERT_TRAIN_LAST_N: x->trainable = x->trainable || layer >= first_layer; break;
            }
        }
        if (has) layer++;
    }
    t->n_params = 0;
    t->params = malloc((size_t)(t->nt + 1) * sizeof *t->params);
    if (!t->params) return ert_tr_oom(t);
    for (int i = 0; i < t->nt; i++) {
        ttensor *x = &t->t[i];
        if (x->candidate) x->mem = TM_PARAM;
        if (x->trainable) t->params[t->n_params++] = i;
    }
    if (t->n_params == 0) {
        if (t->o.trainable == ERT_TRAIN_PATTERN)
            return ert_set_error(t->ctx, ERT_E_NOT_FOUND, "trainable pattern '%s' matches no parameter", t->o.pattern);
        return ert_set_error(t->ctx, ERT_E_NOT_FOUND, "the model has no trainable parameter");
    }
    return ERT_OK;
}

static ert_status fold_node(ert_trainer *t, tnode *n) {
    ert_tview v[128]; /* infer() admits at most 64 inputs and 64 outputs */
    void *ws = NULL;
    ert_status st = ERT_OK;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) memset(&v[k], 0, sizeof v[k]);
        else fill_view(&v[k], &t->t[n->in[k]], (void *)t->t[n->in[k]].cdata);
    }
    for (int k = 0; k < n->n_out; k++) {
        ttensor *x = &t->t[n->out[k]];
        x->owned = malloc(x->nbytes ? x->nbytes : 1);
        if (!x->owned) return ert_tr_oom(t);
        fill_view(&v[n->n_in + k], x, x->owned);
    }
    if (n->ws_bytes && !(ws = aligned_alloc(64, ert_align_up(n->ws_bytes, 64)))) return ert_tr_oom(t);
    ert_kargs a = {.op = n->op, .params = &n->params, .n_in = n->n_in, .n_out = n->n_out, .in = v,
                   .out = v + n->n_in, .workspace = ws, .workspace_bytes = n->ws_bytes};
    st = ert_cpu_run_node(&a);
    free(ws);
    if (st != ERT_OK) return ert_set_error(t->ctx, st, "node '%s' (%s): constant folding failed", n->name, op_name(n->op));
    for (int k = 0; k < n->n_out; k++) {
        ttensor *x = &t->t[n->out[k]];
        x->mem = TM_FOLDED;
        x->cdata = x->owned;
    }
    return ERT_OK;
}

/* Dropout ratio of a model node: input 1 (opset 12+) or attribute (older). */
static float dropout_ratio(const ert_trainer *t, const ert_node *mn) {
    if (mn->n_in > 1 && mn->in[1] >= 0) {
        const ttensor *r = &t->t[mn->in[1]];
        if (is_imm(r) && r->dtype == ERT_DTYPE_F32 && r->cdata) return *(const float *)r->cdata;
        return 0.5f;
    }
    return ert_attr_float(mn, "ratio", 0.5f);
}

/* BatchNormalization with training_mode=1 (ONNX 14+ training exports) may
 * name the updated running mean/var as outputs 1 and 2. The trainer produces
 * neither: it updates the running statistics in place as state (ERT_BN_TRAIN)
 * or uses them unchanged (ERT_BN_FROZEN). Dangling ones (PyTorch's exports)
 * are dropped; one a node or a graph output reads is refused, since it would
 * read memory nothing writes. */
static ert_status bn_stat_outputs(ert_trainer *t) {
    const ert_model *m = t->model;
    bool any = false;
    for (int i = 0; i < m->n_nodes && !any; i++) {
        const ert_node *nd = &m->nodes[i];
        for (int k = 1; nd->op == ERT_OP_BATCHNORM && k < nd->n_out; k++) any = any || nd->out[k] >= 0;
    }
    if (!any) return ERT_OK;
    uint8_t *read = calloc((size_t)m->n_tensors + 1, 1); /* 1: a node reads it, 2: a graph output */
    if (!read) return ert_tr_oom(t);
    for (int i = 0; i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_in; k++) {
            int32_t id = m->nodes[i].in[k];
            if (id >= 0 && id < m->n_tensors) read[id] |= 1;
        }
    for (int i = 0; i < m->n_outputs; i++)
        if (m->outputs[i] >= 0 && m->outputs[i] < m->n_tensors) read[m->outputs[i]] |= 2;
    ert_status st = ERT_OK;
    for (int i = 0; i < m->n_nodes && !st; i++) {
        const ert_node *nd = &m->nodes[i];
        for (int k = 1; nd->op == ERT_OP_BATCHNORM && k < nd->n_out && !st; k++) {
            int32_t id = nd->out[k];
            if (id < 0 || id >= m->n_tensors || !read[id]) continue;
            st = ert_set_error(t->ctx, ERT_E_UNSUPPORTED,
                               "node '%s' (BatchNormalization): its running %s output '%s' is %s; the trainer keeps "
                               "the running statistics as state and does not produce that output",
                               nd->name, k == 1 ? "mean" : "var", m->tensors[id].name ? m->tensors[id].name : "?",
                               read[id] & 2 ? "a graph output" : "read by another node");
        }
    }
    free(read);
    return st;
}

static ert_status infer(ert_trainer *t) {
    const ert_model *m = t->model;
    ert_tinfo tin[64], tout[64];
    ert_status st0 = bn_stat_outputs(t);
    if (st0) return st0;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *mn = &m->nodes[i];
        if (mn->n_in > 64 || mn->n_out > 64)
            return ert_set_error(t->ctx, ERT_E_UNSUPPORTED, "node '%s': more than 64 inputs or outputs", mn->name);
        tnode *n = ert_tr_add_node(t, mn->op, NULL, mn->n_in, mn->n_out, PH_FWD);
        if (!n) return ert_tr_oom(t);
        n->src = mn;
        n->name = mn->name;
        bool all_imm = true;
        for (int k = 0; k < mn->n_in; k++) {
            n->in[k] = mn->in[k];
            memset(&tin[k], 0, sizeof tin[k]);
            if (n->in[k] < 0) continue;
            const ttensor *x = &t->t[n->in[k]];
            if (!x->defined)
                return ert_set_error(t->ctx, ERT_E_INTERNAL, "node '%s': input %d not defined", mn->name, k);
            tin[k].dtype = x->dtype;
            tin[k].ndim = x->ndim;
            memcpy(tin[k].dims, x->dims, sizeof tin[k].dims);
            tin[k].const_data = is_imm(x) ? x->cdata : NULL;
            if (!is_imm(x)) all_imm = false;
        }
        for (int k = 0; k < mn->n_out; k++) {
            n->out[k] = mn->out[k];
            memset(&tout[k], 0, sizeof tout[k]);
        }
        ert_prep p = {.ctx = t->ctx, .node = mn, .n_in = mn->n_in, .n_out = mn->n_out, .in = tin, .out = tout,
                      .params = &n->params, .n_threads = t->n_threads, .fold_ok = true};
        t->ctx->err[0] = 0;
        ert_status st = ert_op_get(mn->op)->prepare(&p);
        if (st != ERT_OK) {
            char msg[ERT_ERRMSG_SIZE];
            snprintf(msg, sizeof msg, "%s", ert_last_error(t->ctx));
            return ert_set_error(t->ctx, st, "node '%s' (%s): %s", mn->name, op_name(mn->op), msg);
        }
        n->ws_bytes = p.workspace_bytes;
        for (int k = 0; k < mn->n_out; k++) {
            ttensor *x = &t->t[n->out[k]];
            x->dtype = tout[k].dtype;
            x->ndim = tout[k].ndim;
            memcpy(x->dims, tout[k].dims, sizeof x->dims);
            x->defined = true;
            x->fwd = true;
            if (x->dtype == ERT_DTYPE_F16 || x->dtype == ERT_DTYPE_BF16)
                return ert_set_error(t->ctx, ERT_E_UNSUPPORTED, "node '%s': f16/bf16 tensors are not trainable yet",
                                     mn->name);
            if (!set_nbytes(x)) return ert_set_error(t->ctx, ERT_E_SHAPE, "node '%s': output size overflows", mn->name);
        }
        if (p.fold_ok && (all_imm || n->op == ERT_OP_SHAPE || n->op == ERT_OP_SIZE)) {
            if ((st = fold_node(t, n))) return st;
            free(n->in);
            t->nn--;
            continue;
        }
        if (n->op == ERT_OP_BATCHNORM && t->o.bn == ERT_BN_FROZEN) {
            /* frozen: the running statistics, whatever training_mode says (its
             * gradient rule and the conv folding assume them); no running
             * outputs (bn_stat_outputs: nothing reads them) */
            n->params.norm.training = false;
            n->n_out = 1;
        } else if (n->op == ERT_OP_BATCHNORM && t->o.bn == ERT_BN_TRAIN) {
            /* (x, scale, B, rmean, rvar) -> (y, mean, invstd) */
            if (t->t[n->in[3]].mem != TM_PARAM || t->t[n->in[4]].mem != TM_PARAM)
                return ert_set_error(t->ctx, ERT_E_UNSUPPORTED, "node '%s': running mean/var must be weights", mn->name);
            int32_t y = n->out[0];
            int64_t c = t->t[n->in[0]].dims[1];
            char nm[256];
            snprintf(nm, sizeof nm, "%s.mean", mn->name);
            int32_t mu = ert_tr_add_tensor(t, nm, ERT_DTYPE_F32, 1, &c);
            snprintf(nm, sizeof nm, "%s.invstd", mn->name);
            int32_t is = ert_tr_add_tensor(t, nm, ERT_DTYPE_F32, 1, &c);
            if (mu < 0 || is < 0) return ert_tr_oom(t);
            n = &t->n[t->nn - 1];
            int32_t *io = realloc(n->in, (size_t)(5 + 3) * sizeof *io);
            if (!io) return ert_tr_oom(t);
            n->in = io;
            n->out = io + 5;
            n->n_out = 3;
            n->out[0] = y, n->out[1] = mu, n->out[2] = is;
            t->t[mu].fwd = t->t[is].fwd = true;
            float eps = n->params.norm.epsilon, mom = n->params.norm.momentum;
            memset(&n->params, 0, sizeof n->params);
            n->params.grad.eps = eps;
            n->params.grad.momentum = mom;
            n->params.grad.training = true;
            n->op = ERT_OP_BATCHNORM_TRAIN;
        } else if (n->op == ERT_OP_DROPOUT) {
            float ratio = dropout_ratio(t, mn);
            if (ratio > 0.0f) {
                if (ratio >= 1.0f) return ert_set_error(t->ctx, ERT_E_ARG, "node '%s': dropout ratio >= 1", mn->name);
                if (mn->n_out > 1 && mn->out[1] >= 0)
                    return ert_set_error(t->ctx, ERT_E_UNSUPPORTED, "node '%s': Dropout mask output in training",
                                         mn->name);
                int32_t y = n->out[0], x = n->in[0];
                char nm[256];
                snprintf(nm, sizeof nm, "%s.mask", mn->name);
                int32_t mk = ert_tr_add_tensor(t, nm, ERT_DTYPE_F32, t->t[y].ndim, t->t[y].dims);
                if (mk < 0) return ert_tr_oom(t);
                t->t[mk].fwd = true;
                n = &t->n[t->nn - 1];
                int32_t *io = malloc(4 * sizeof *io);
                if (!io) return ert_tr_oom(t);
                free(n->in);
                n->in = io;
                n->out = io + 2;
                n->n_in = 2;
                n->n_out = 2;
                n->in[0] = x, n->in[1] = t->rng_t, n->out[0] = y, n->out[1] = mk;
                memset(&n->params, 0, sizeof n->params);
                n->params.grad.ratio = ratio;
                n->params.grad.training = true;
                n->op = ERT_OP_DROPOUT_TRAIN;
            }
        }
    }
    return ERT_OK;
}

/* ------------------------------------------------------------------ step 3a: frozen prefix */

/* A frozen tensor: a constant, or a weight that is not trained. */
static bool frozen_w(const ttensor *x) { return (is_imm(x) || x->mem == TM_PARAM) && !x->trainable && x->cdata; }

static int n_uses(const ert_trainer *t, int32_t x) {
    int u = 0;
    for (int k = 0; k < t->nn; k++)
        for (int j = 0; j < t->n[k].n_in; j++) u += t->n[k].in[j] == x;
    for (int i = 0; i < t->model->n_outputs; i++) u += t->model->outputs[i] == x;
    return u;
}

static int find_user(const ert_trainer *t, int32_t x, int from) {
    for (int k = from; k < t->nn; k++)
        for (int j = 0; j < t->n[k].n_in; j++)
            if (t->n[k].in[j] == x) return k;
    return -1;
}

static void drop_node(ert_trainer *t, int k) {
    free(t->n[k].in);
    free(t->n[k].name_owned);
    memmove(&t->n[k], &t->n[k + 1], (size_t)(t->nn - k - 1) * sizeof *t->n);
    t->nn--;
}

/* A new f32 constant computed by the trainer (TM_FOLDED, owns data). */
static int32_t folded(ert_trainer *t, const char *name, int ndim, const int64_t *dims, float **data) {
    int32_t id = ert_tr_add_tensor(t, name, ERT_DTYPE_F32, ndim, dims);
    if (id < 0) return -1;
    ttensor *x = &t->t[id];
    x->owned = malloc(x->nbytes ? x->nbytes : 1);
    if (!x->owned) return -1;
    x->mem = TM_FOLDED;
    x->cdata = x->owned;
    *data = x->owned;
    return id;
}

/*
 * The part of the graph no gradient reaches is inference: plan it so.
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
static ert_status fold_frozen(ert_trainer *t) {
    /* need[x]: x depends on a trainable parameter */
    int n0 = t->nt;
    bool *need = calloc((size_t)n0 + 1, 1);
    if (!need) return ert_tr_oom(t);
    for (int i = 0; i < t->nt; i++) need[i] = t->t[i].trainable;
    for (int k = 0; k < t->nn; k++) {
        bool any = false;
        for (int j = 0; j < t->n[k].n_in; j++) any = any || (t->n[k].in[j] >= 0 && need[t->n[k].in[j]]);
        for (int j = 0; j < t->n[k].n_out; j++)
            if (t->n[k].out[j] >= 0 && t->n[k].out[j] < n0) need[t->n[k].out[j]] = any;
    }
    ert_status st = ERT_OK;
    for (int k = 0; k < t->nn && st == ERT_OK; k++) {
        tnode *c = &t->n[k];
        if (c->op != ERT_OP_CONV || c->n_out < 1 || c->out[0] < 0 || c->params.conv.has_residual) continue;
        ert_conv_params *cp = &c->params.conv;
        int32_t y = c->out[0], w = c->in[1], b = cp->has_bias && c->n_in > 2 ? c->in[2] : -1;
        const ttensor *W = &t->t[w];
        if (W->dtype != ERT_DTYPE_F32 || t->t[y].dtype != ERT_DTYPE_F32 || !frozen_w(W) ||
            (b >= 0 && !frozen_w(&t->t[b])) || n_uses(t, y) != 1)
            continue;
        int u = find_user(t, y, k + 1);
        tnode *bn = u >= 0 ? &t->n[u] : NULL;
        if (bn && bn->op == ERT_OP_BATCHNORM && cp->act.kind == ERT_ACT_NONE && bn->n_in >= 5 && bn->in[0] == y &&
            bn->n_out >= 1 && bn->out[0] >= 0 && (bn->n_out < 2 || bn->out[1] < 0)) {
            bool ok = true;
            for (int j = 1; j < 5; j++) ok = ok && bn->in[j] >= 0 && frozen_w(&t->t[bn->in[j]]) &&
                                             t->t[bn->in[j]].dtype == ERT_DTYPE_F32;
            int64_t M = W->dims[0], per = M ? (int64_t)(W->nbytes / sizeof(float)) / M : 0;
            if (ok && t->t[y].ndim >= 2 && t->t[y].dims[1] == M) {
                const float *g = t->t[bn->in[1]].cdata, *be = t->t[bn->in[2]].cdata, *mu = t->t[bn->in[3]].cdata,
                            *var = t->t[bn->in[4]].cdata, *w0 = W->cdata,
                            *b0 = b >= 0 ? (const float *)t->t[b].cdata : NULL;
                float eps = bn->params.norm.epsilon, *w1 = NULL, *b1 = NULL, *s1 = NULL;
                /* On the CPU the filter stays the model's own (mapped, not in the arena) and the
                 * conv scales its output channels (has_scale: applied while packing the filter);
                 * a device copies weights into its arena anyway, so there they are scaled once. */
                const bool scale_only = !t->be;
                char nm[256];
                snprintf(nm, sizeof nm, scale_only ? "%s.bnfold_scale" : "%s.bnfold", W->name);
                int32_t wn = scale_only ? folded(t, nm, 1, &M, &s1) : folded(t, nm, W->ndim, W->dims, &w1);
                snprintf(nm, sizeof nm, "%s.bnfold_bias", c->name);
                int32_t bnid = wn >= 0 ? folded(t, nm, 1, &M, &b1) : -1;
                if (bnid < 0) {
                    st = ert_tr_oom(t);
                    break;
                }
                c = &t->n[k];
                bn = &t->n[u];
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
                    st = ert_tr_oom(t);
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
                if (scale_only) t->t[w].mem = TM_CONST; /* read in place from the model, never copied */
                drop_node(t, u);
                c = &t->n[k];
                cp = &c->params.conv;
                y = c->out[0]; /* the BN's output: need[] already right (same inputs) */
                if (n_uses(t, y) != 1) continue;
                u = find_user(t, y, k + 1);
            }
        }
        /* 2. relu into a conv of the frozen prefix (folded constants: no need) */
        bool in_need = false;
        for (int j = 0; j < c->n_in; j++) in_need = in_need || (c->in[j] >= 0 && c->in[j] < n0 && need[c->in[j]]);
        tnode *r = u >= 0 ? &t->n[u] : NULL;
        if (!in_need && r && r->op == ERT_OP_RELU && r->in[0] == y && r->out[0] >= 0 && cp->act.kind == ERT_ACT_NONE) {
            cp->act.kind = ERT_ACT_RELU;
            c->out[0] = r->out[0];
            drop_node(t, u);
        }
    }
    /* 3. Add (-> Relu) into the later-made of its two inputs when that is a
     * frozen-prefix conv read only there: the other input, made before it,
     * becomes the conv's residual (ResNet's block ends) */
    for (int k = 0; k < t->nn && st == ERT_OK; k++) {
        tnode *ad = &t->n[k];
        if (ad->op != ERT_OP_ADD || ad->n_in != 2 || ad->in[0] < 0 || ad->in[1] < 0 || ad->out[0] < 0) continue;
        const ttensor *A = &t->t[ad->in[0]], *Bt = &t->t[ad->in[1]], *S = &t->t[ad->out[0]];
        if (A->dtype != ERT_DTYPE_F32 || Bt->dtype != ERT_DTYPE_F32 || A->ndim != S->ndim || Bt->ndim != S->ndim ||
            memcmp(A->dims, S->dims, (size_t)S->ndim * sizeof S->dims[0]) ||
            memcmp(Bt->dims, S->dims, (size_t)S->ndim * sizeof S->dims[0]) ||
            (ad->in[0] < n0 && need[ad->in[0]]) || (ad->in[1] < n0 && need[ad->in[1]]))
            continue;
        int pa = -1, pb = -1; /* producers */
        for (int j = 0; j < k; j++)
            for (int o = 0; o < t->n[j].n_out; o++) {
                if (t->n[j].out[o] == ad->in[0]) pa = j;
                if (t->n[j].out[o] == ad->in[1]) pb = j;
            }
        int ci = pa > pb ? pa : pb;
        int32_t res = pa > pb ? ad->in[1] : ad->in[0];
        tnode *c = ci >= 0 ? &t->n[ci] : NULL;
        if (!c || c->op != ERT_OP_CONV || c->params.conv.has_residual || c->params.conv.act.kind != ERT_ACT_NONE ||
            c->n_out != 1 || n_uses(t, c->out[0]) != 1 || res == c->out[0])
            continue;
        bool in_need = false;
        for (int j = 0; j < c->n_in; j++) in_need = in_need || (c->in[j] >= 0 && c->in[j] < n0 && need[c->in[j]]);
        if (in_need) continue;
        const int n_in = c->params.conv.has_scale ? 5 : 4; /* keep a folded scale (input 4) */
        int32_t *io = malloc((size_t)(n_in + 1 + 1) * sizeof *io);
        if (!io) {
            st = ert_tr_oom(t);
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
        drop_node(t, k); /* the Add: after c, so c's index holds */
        c = &t->n[ci];
        int32_t y = c->out[0];
        int u = n_uses(t, y) == 1 ? find_user(t, y, ci + 1) : -1;
        if (u >= 0 && t->n[u].op == ERT_OP_RELU && t->n[u].in[0] == y && t->n[u].out[0] >= 0) {
            c->params.conv.act.kind = ERT_ACT_RELU;
            c->out[0] = t->n[u].out[0];
            drop_node(t, u);
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
static ert_status fuse_bn_relu(ert_trainer *t) {
    if (t->o.bn_relu_unfused) return ERT_OK;
    for (int k = 0; k < t->nn; k++) {
        tnode *bn = &t->n[k];
        if (bn->op != ERT_OP_BATCHNORM_TRAIN || bn->params.grad.relu || bn->n_out < 1 || bn->out[0] < 0) continue;
        int32_t y = bn->out[0];
        int u = n_uses(t, y) == 1 ? find_user(t, y, k + 1) : -1;
        if (u < 0) continue;
        tnode *r = &t->n[u];
        if (r->op != ERT_OP_RELU || r->n_in < 1 || r->in[0] != y || r->n_out < 1 || r->out[0] < 0 ||
            t->t[r->out[0]].dtype != t->t[y].dtype)
            continue;
        bn->params.grad.relu = true;
        bn->out[0] = r->out[0];
        drop_node(t, u); /* after k: bn's index holds */
    }
    return ERT_OK;
}

/* ------------------------------------------------------------------ step 3b: mixed precision */

/* A Conv the half type can run: 2-D, f32, no bias and no fused epilogue (the
 * conv+BN blocks that carry the FLOPs; a bias would need a half REDUCE_TO). */
static bool amp_conv(const ert_trainer *t, const tnode *n) {
    if (n->op != ERT_OP_CONV || n->n_in < 2 || n->n_out < 1 || n->in[0] < 0 || n->in[1] < 0 || n->out[0] < 0)
        return false;
    const ert_conv_params *p = &n->params.conv;
    if (p->has_bias || (n->n_in > 2 && n->in[2] >= 0) || p->act.kind != ERT_ACT_NONE || p->has_residual ||
        p->nsp != 2)
        return false;
    return t->t[n->in[0]].dtype == ERT_DTYPE_F32 && t->t[n->in[1]].dtype == ERT_DTYPE_F32 &&
           t->t[n->out[0]].dtype == ERT_DTYPE_F32;
}

/* x cast to h, once per tensor (memo: its cast, -1 none). */
static int32_t amp_cast(ert_trainer *t, int32_t *memo, int32_t x, ert_dtype h) {
    if (memo[x] >= 0) return memo[x];
    char nm[256];
    snprintf(nm, sizeof nm, "%s.%s", t->t[x].name, ert_dtype_name(h));
    ttensor c = t->t[x];
    int32_t y = ert_tr_add_tensor(t, nm, h, c.ndim, c.dims);
    tnode *n = y >= 0 ? ert_tr_add_node(t, ERT_OP_CAST, nm, 1, 1, PH_FWD) : NULL;
    if (!n) return -1;
    t->t[y].fwd = true;
    n->in[0] = x;
    n->out[0] = y;
    n->params.cast.to = h;
    memo[x] = y;
    if (frozen_w(&t->t[x])) { /* a frozen weight: converted once, here */
        if (fold_node(t, n) != ERT_OK) return -1;
        free(n->in);
        free(n->name_owned);
        t->nn--;
    }
    return y;
}

/* Frozen-prefix ops that run in the half type end to end (the CUDA
 * inference kernels take f16/bf16 for all of them). */
static bool amp_half_op(const ert_trainer *t, const tnode *n) {
    switch (n->op) {
    case ERT_OP_CONV: return n->params.conv.nsp == 2 && t->t[n->in[0]].dtype == ERT_DTYPE_F32;
    case ERT_OP_BATCHNORM: case ERT_OP_RELU: case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL: case ERT_OP_GLOBAL_AVGPOOL:
    case ERT_OP_ADD: case ERT_OP_FLATTEN: case ERT_OP_RESHAPE: case ERT_OP_IDENTITY:
        return n->n_in >= 1 && n->in[0] >= 0 && t->t[n->in[0]].dtype == ERT_DTYPE_F32;
    default: return false;
    }
}

/* Trainable-region ops whose activations (slot 0; both for Add) are kept in
 * the half type, with their gradients (the CUDA kernels of cuda_train.c take
 * f16/bf16 activations with f32 parameters); *slots: how many leading inputs
 * are activations. */
static bool amp_act_op(const ert_trainer *t, const tnode *n, int *slots) {
    *slots = 1;
    if (n->n_in < 1 || n->in[0] < 0 || n->n_out < 1 || n->out[0] < 0 || t->t[n->in[0]].dtype != ERT_DTYPE_F32 ||
        t->t[n->out[0]].dtype != ERT_DTYPE_F32)
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
        return n->n_in == 2 && n->in[1] >= 0 && t->t[n->in[1]].dtype == ERT_DTYPE_F32 &&
               t->t[n->in[0]].ndim == t->t[n->in[1]].ndim &&
               !memcmp(t->t[n->in[0]].dims, t->t[n->in[1]].dims, (size_t)t->t[n->in[0]].ndim * sizeof(int64_t)) &&
               !memcmp(t->t[n->in[0]].dims, t->t[n->out[0]].dims, (size_t)t->t[n->in[0]].ndim * sizeof(int64_t));
    default: return false;
    }
}

/* Nodes: frozen prefix (no input needs a gradient, an amp_half_op): every
 * f32 input and output becomes its half twin, the f32 tensor is made only
 * when a later f32 node (or the loss) reads it (missing[]); trainable convs
 * and amp_act_op nodes: their activation inputs and output 0 likewise (with
 * amp_conv_only: casts around each conv instead); the rest: f32, with casts
 * of half-only inputs back. */
static ert_status amp_rewrite(ert_trainer *t) {
    ert_dtype h = t->amp;
    if (h == ERT_DTYPE_F32) return ERT_OK;
    int nold = t->nn, n_orig = t->nt;
    /* a node becomes at most n_in casts + itself + 1 cast: the new list never
     * reallocates, so a failure can still hand every old node over */
    int cap = 16 + t->model->n_outputs;
    for (int k = 0; k < nold; k++) cap += t->n[k].n_in + 2;
    tnode *old = t->n, *nw = malloc((size_t)cap * sizeof *nw);
    int32_t *memo = malloc((size_t)(n_orig + 1) * sizeof *memo);
    bool *need = calloc((size_t)n_orig + 1, 1), *missing = calloc((size_t)n_orig + 1, 1);
    if (!nw || !memo || !need || !missing) {
        free(nw);
        free(memo);
        free(need);
        free(missing);
        return ert_tr_oom(t);
    }
    for (int i = 0; i < n_orig; i++) {
        memo[i] = -1;
        need[i] = t->t[i].trainable;
    }
    t->n = nw;
    t->nn = 0;
    t->cap_n = cap;
    ert_status st = ERT_OK;
    int k = 0;
    char nm[256];
    for (; k < nold && st == ERT_OK; k++) {
        tnode f = old[k];
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
                if (f.in[j] < 0 || t->t[f.in[j]].dtype != ERT_DTYPE_F32 || (act_half && j >= slots)) continue;
                int32_t xh = amp_cast(t, memo, f.in[j], h);
                if (xh < 0) st = ert_tr_oom(t);
                else f.in[j] = xh;
            }
            for (int j = 0; j < f.n_out && st == ERT_OK; j++) {
                int32_t y = f.out[j];
                if (y < 0 || t->t[y].dtype != ERT_DTYPE_F32 || (act_half && j > 0)) continue; /* BN statistics: f32 */
                snprintf(nm, sizeof nm, "%s.%s", t->t[y].name, ert_dtype_name(h));
                ttensor c = t->t[y];
                int32_t yh = ert_tr_add_tensor(t, nm, h, c.ndim, c.dims);
                if (yh < 0) {
                    st = ert_tr_oom(t);
                    break;
                }
                t->t[yh].fwd = true;
                memo[y] = yh;
                missing[y] = true;
                f.out[j] = yh;
            }
            t->n[t->nn++] = f;
            continue;
        }
        /* f32 node: its half-only inputs cast back first (a trainable AMP
         * conv reads x and W in the half type anyway) */
        bool ac = amp_conv(t, &f);
        for (int j = 0; j < f.n_in && st == ERT_OK; j++) {
            int32_t x = f.in[j];
            if (x < 0 || x >= n_orig || !missing[x] || (ac && j < 2)) continue;
            tnode *b = ert_tr_add_node(t, ERT_OP_CAST, t->t[x].name, 1, 1, PH_FWD);
            if (!b) {
                st = ert_tr_oom(t);
                break;
            }
            b->in[0] = memo[x];
            b->out[0] = x;
            b->params.cast.to = ERT_DTYPE_F32;
            missing[x] = false;
        }
        if (st != ERT_OK || !ac) {
            t->n[t->nn++] = f;
            continue;
        }
        int32_t y = f.out[0];
        int32_t xh = amp_cast(t, memo, f.in[0], h), wh = xh >= 0 ? amp_cast(t, memo, f.in[1], h) : -1;
        snprintf(nm, sizeof nm, "%s.%s", t->t[y].name, ert_dtype_name(h));
        ttensor c = t->t[y];
        int32_t yh = wh >= 0 ? ert_tr_add_tensor(t, nm, h, c.ndim, c.dims) : -1;
        if (yh < 0) {
            t->n[t->nn++] = f;
            st = ert_tr_oom(t);
            break;
        }
        t->t[yh].fwd = true;
        f.in[0] = xh;
        f.in[1] = wh;
        f.out[0] = yh;
        t->n[t->nn++] = f;
        tnode *b = ert_tr_add_node(t, ERT_OP_CAST, t->t[y].name, 1, 1, PH_FWD);
        if (!b) {
            st = ert_tr_oom(t);
            continue;
        }
        b->in[0] = yh;
        b->out[0] = y;
        b->params.cast.to = ERT_DTYPE_F32;
    }
    for (; k < nold; k++) t->n[t->nn++] = old[k];
    for (int i = 0; i < t->model->n_outputs && st == ERT_OK; i++) {
        int32_t x = t->model->outputs[i];
        if (x < 0 || x >= n_orig || !missing[x]) continue;
        tnode *b = ert_tr_add_node(t, ERT_OP_CAST, t->t[x].name, 1, 1, PH_FWD);
        if (!b) {
            st = ert_tr_oom(t);
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

/* ------------------------------------------------------------------ step 3c: channels-last frozen prefix */

/* CUDA mixed precision: the frozen prefix (no input needs a gradient) runs
 * channels-last like an inference session's convs (session.c step 4c):
 * cuDNN's tensor-core convs read and write (N, H, W, C) directly instead of
 * transposing x and y through a workspace (up to 64 MiB a conv at batch 32),
 * and the backend may rewrite the constant filters and fuse the conv
 * epilogue (ert_conv_params.const_w). Region: 4-D half-type Conv (2-D,
 * symmetric pads), MaxPool/AveragePool (2-D), GlobalAveragePool, Relu and
 * same-shape Add nodes fed by it; a Transpose brings an outside input in,
 * and a Transpose (a Reshape when H = W = 1) takes a tensor back to
 * (N, C, H, W) for a reader outside. Measured on an H200, ResNet-18 head-only
 * batch 32 f16: see bench/RESULTS.md. */
static bool cl_node_ok(const ert_trainer *t, const tnode *n, const bool *need, const bool *nh) {
    if (n->phase != PH_FWD || n->n_out < 1 || n->out[0] < 0) return false;
    for (int k = 1; k < n->n_out; k++)
        if (n->out[k] >= 0) return false; /* MaxPool indices */
    const ttensor *y = &t->t[n->out[0]];
    if (y->dtype != t->amp || y->ndim != 4 || need[n->out[0]]) return false;
    bool any = false;
    for (int k = 0; k < n->n_in; k++) {
        int32_t x = n->in[k];
        if (x < 0) continue;
        if (need[x]) return false;
        if (n->op == ERT_OP_CONV && (k == 1 || k == 2)) {
            if (!frozen_w(&t->t[x])) return false;
            continue;
        }
        if (t->t[x].dtype != y->dtype || t->t[x].ndim != 4) return false;
        any = any || nh[x];
    }
    switch (n->op) {
    case ERT_OP_CONV: {
        const ert_conv_params *p = &n->params.conv;
        if (p->nsp != 2 || n->n_in > 4) return false;
        for (int i = 0; i < 2; i++)
            if (p->pad_begin[i] != p->pad_end[i]) return false;
        return true;
    }
    case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL: return any && n->params.pool.nsp == 2;
    case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_RELU: return any;
    case ERT_OP_ADD:
        return any && n->n_in == 2 && n->in[0] >= 0 && n->in[1] >= 0 &&
               !memcmp(t->t[n->in[0]].dims, y->dims, sizeof y->dims[0] * 4) &&
               !memcmp(t->t[n->in[1]].dims, y->dims, sizeof y->dims[0] * 4);
    default: return false;
    }
}

/* A Transpose (Reshape when same_bytes) from -> to, appended to t->n. */
static ert_status cl_layout(ert_trainer *t, int32_t from, int32_t to, const int *perm, bool same_bytes) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s.%s", t->t[to].name, same_bytes ? "reshape" : "transpose");
    tnode *n = ert_tr_add_node(t, same_bytes ? ERT_OP_RESHAPE : ERT_OP_TRANSPOSE, nm, 1, 1, PH_FWD);
    if (!n) return ert_tr_oom(t);
    n->in[0] = from;
    n->out[0] = to;
    for (int d = 0; d < 4; d++) n->params.transpose.perm[d] = perm[d];
    return ERT_OK;
}

static int32_t cl_twin(ert_trainer *t, int32_t x, const int *perm) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s.nhwc", t->t[x].name);
    int64_t d[4];
    for (int i = 0; i < 4; i++) d[i] = t->t[x].dims[perm[i]];
    int32_t y = ert_tr_add_tensor(t, nm, t->t[x].dtype, 4, d);
    if (y >= 0) t->t[y].fwd = true;
    return y;
}

/* A frozen conv's filter (K, C, R, S) as (K, cp, R, S), the channels past C
 * zero (a folded constant of the filter's dtype); -1 when out of memory. */
static int32_t pad_filter(ert_trainer *t, int32_t w, int64_t cp) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s.pad%lld", t->t[w].name, (long long)cp);
    int64_t d[4] = {t->t[w].dims[0], cp, t->t[w].dims[2], t->t[w].dims[3]};
    int32_t id = ert_tr_add_tensor(t, nm, t->t[w].dtype, 4, d);
    if (id < 0) return -1;
    ttensor *x = &t->t[id];
    const ttensor *W = &t->t[w];
    x->owned = calloc(1, x->nbytes ? x->nbytes : 1);
    if (!x->owned) return -1;
    x->mem = TM_FOLDED;
    x->cdata = x->owned;
    const int64_t K = W->dims[0], C = W->dims[1];
    const size_t rs = (size_t)(W->dims[2] * W->dims[3]) * ert_dtype_size(W->dtype);
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < C; c++)
            memcpy((char *)x->owned + (size_t)(k * cp + c) * rs, (const char *)W->cdata + (size_t)(k * C + c) * rs, rs);
    return id;
}

/* Channels-last input of a frozen conv with fewer than 8 channels (an image's
 * 3): padded with zero channels to 8 (Pad node after the layout transpose),
 * the filter likewise. cuDNN then runs ResNet-18's first conv (batch 32,
 * f16) as a fused graph with a 256-byte workspace in 0.163 ms instead of an
 * algorithm needing a 64 MB workspace (bench/RESULTS.md). */
static ert_status cl_pad8(ert_trainer *t, int32_t from, int32_t *to) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s.pad8", t->t[from].name);
    int64_t d[4] = {t->t[from].dims[0], t->t[from].dims[1], t->t[from].dims[2], 8};
    int32_t y = ert_tr_add_tensor(t, nm, t->t[from].dtype, 4, d);
    if (y < 0) return ert_tr_oom(t);
    t->t[y].fwd = true;
    tnode *n = ert_tr_add_node(t, ERT_OP_PAD, nm, 1, 1, PH_FWD);
    if (!n) return ert_tr_oom(t);
    n->in[0] = from;
    n->out[0] = y;
    n->params.pad.mode = 0;
    n->params.pad.pad_end[3] = 8 - t->t[from].dims[3];
    *to = y;
    return ERT_OK;
}

static ert_status prefix_channels_last(ert_trainer *t) {
    static const int to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};
    if (!t->be || t->amp == ERT_DTYPE_F32 || t->o.amp_conv_only) return ERT_OK;
    int nold = t->nn, n0 = t->nt;
    bool *need = calloc((size_t)n0 + 1, 1), *nh = calloc((size_t)n0 + 1, 1), *node_nh = calloc((size_t)nold + 1, 1);
    int32_t *twin = malloc(((size_t)n0 + 1) * sizeof *twin), *fwd = malloc(((size_t)n0 + 1) * sizeof *fwd),
            *fwd8 = malloc(((size_t)n0 + 1) * sizeof *fwd8);
    bool *back = calloc((size_t)n0 + 1, 1);
    tnode *nw = NULL, *old = t->n;
    ert_status st = ERT_OK;
    if (!need || !nh || !node_nh || !twin || !fwd || !fwd8 || !back) {
        st = ert_tr_oom(t);
        goto done;
    }
    for (int i = 0; i < n0; i++) need[i] = t->t[i].trainable, twin[i] = fwd[i] = fwd8[i] = -1;
    int n_conv = 0;
    for (int k = 0; k < nold; k++) {
        const tnode *n = &old[k];
        bool any = false;
        for (int j = 0; j < n->n_in; j++) any = any || (n->in[j] >= 0 && need[n->in[j]]);
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) need[n->out[j]] = need[n->out[j]] || any;
        if (!cl_node_ok(t, n, need, nh)) continue;
        node_nh[k] = true;
        nh[n->out[0]] = true;
        n_conv += n->op == ERT_OP_CONV;
    }
    if (!n_conv) goto done;
    /* a tensor a trainable node also reads (need[] above saw them all) keeps
     * its NCHW twin via the back transpose below */
    int cap = nold + 3 * n0 + 16;
    nw = malloc((size_t)cap * sizeof *nw);
    if (!nw) {
        st = ert_tr_oom(t);
        goto done;
    }
    for (int i = 0; i < n0 && st == ERT_OK; i++)
        if (nh[i] && (twin[i] = cl_twin(t, i, to_nhwc)) < 0) st = ert_tr_oom(t);
    if (st) {
        free(nw);
        goto done;
    }
    /* the new list never reallocates (cap: every old node once, at most one
     * layout node in, one Pad and one layout node out per tensor), so a failure can still hand
     * every old node over to be freed */
    t->n = nw;
    t->nn = 0;
    t->cap_n = cap;
    int k = 0;
    for (; k < nold && st == ERT_OK; k++) {
        tnode f = old[k];
        if (!node_nh[k]) {
            for (int j = 0; j < f.n_in && st == ERT_OK; j++) {
                int32_t x = f.in[j];
                if (x < 0 || x >= n0 || !nh[x] || back[x]) continue;
                back[x] = true;
                st = cl_layout(t, twin[x], x, to_nchw, t->t[x].dims[2] == 1 && t->t[x].dims[3] == 1);
            }
            t->n[t->nn++] = f;
            continue;
        }
        for (int j = 0; j < f.n_in && st == ERT_OK; j++) {
            int32_t x = f.in[j];
            if (x < 0 || (f.op == ERT_OP_CONV && (j == 1 || j == 2))) continue;
            if (nh[x]) {
                f.in[j] = twin[x];
                continue;
            }
            if (fwd[x] < 0) {
                if ((fwd[x] = cl_twin(t, x, to_nhwc)) < 0) st = ert_tr_oom(t);
                else st = cl_layout(t, x, fwd[x], to_nhwc, false);
            }
            f.in[j] = fwd[x];
            const int64_t C = t->t[x].dims[1];
            if (st == ERT_OK && f.op == ERT_OP_CONV && j == 0 && C < 8 && f.params.conv.group == 1 && f.n_in > 1 &&
                f.in[1] >= 0 && t->t[f.in[1]].dims[1] == C) {
                int32_t wp = pad_filter(t, f.in[1], 8);
                if (wp < 0) st = ert_tr_oom(t);
                else if (fwd8[x] < 0) st = cl_pad8(t, fwd[x], &fwd8[x]);
                if (st == ERT_OK) f.in[0] = fwd8[x], f.in[1] = wp;
            }
        }
        f.out[0] = twin[f.out[0]];
        if (f.op == ERT_OP_CONV) {
            f.params.conv.nhwc = true;
            f.params.conv.const_w = true;
        } else if (f.op == ERT_OP_MAXPOOL || f.op == ERT_OP_AVGPOOL || f.op == ERT_OP_GLOBAL_AVGPOOL) {
            f.params.pool.nhwc = true;
        }
        t->n[t->nn++] = f;
    }
    for (; k < nold; k++) t->n[t->nn++] = old[k];
    free(old);
    if (st == ERT_OK) ert_log(t->ctx, ERT_LOG_DEBUG, "trainer: %d frozen-prefix convs channels-last", n_conv);
done:
    free(need);
    free(nh);
    free(node_nh);
    free(twin);
    free(fwd);
    free(fwd8);
    free(back);
    return st;
}

/* Frozen stem in batch chunks: the chain from a graph input through frozen
 * Cast/Transpose/Pad/Conv/Relu to the first MaxPool (each link read only by
 * the next) keeps nothing for the backward, yet its activations are the
 * largest of the network (ResNet-18's stem output at batch 32 in f16: 51 MB,
 * next to its 8-channel padded input). Run it on batch slices instead: a
 * Slice of the input per chunk, the chain cloned on the chunk, the pooled
 * chunks concatenated into the original output, so only one chunk's
 * activations are live at a time. Only where it matters (a chain tensor of
 * 4 MiB or more) and the batch splits evenly (4 chunks, else 2). */
static bool stem_op(ert_op op) {
    return op == ERT_OP_CAST || op == ERT_OP_TRANSPOSE || op == ERT_OP_PAD || op == ERT_OP_CONV || op == ERT_OP_RELU;
}

static ert_status chunk_stem(ert_trainer *t) {
    const ert_model *m = t->model;
    if (m->n_inputs < 1 || t->o.session.batch < 2) return ERT_OK;
    const int32_t x = m->inputs[0];
    if (x < 0 || t->t[x].ndim < 2) return ERT_OK;
    const int64_t B = t->t[x].dims[0];
    const int k_chunks = B % 4 == 0 ? 4 : B % 2 == 0 ? 2 : 1;
    if (k_chunks < 2) return ERT_OK;
    int chain[16], len = 0;
    int32_t cur = x;
    size_t biggest = 0;
    for (;;) {
        if (len == 16 || n_uses(t, cur) != 1) return ERT_OK;
        int u = find_user(t, cur, 0);
        if (u < 0) return ERT_OK;
        const tnode *n = &t->n[u];
        if (n->phase != PH_FWD || n->n_out != 1 || n->out[0] < 0 || n->in[0] != cur ||
            (!stem_op(n->op) && n->op != ERT_OP_MAXPOOL))
            return ERT_OK;
        for (int j = 1; j < n->n_in; j++) /* weights and the like: constants, never a gradient */
            if (n->in[j] >= 0 && (!(is_imm(&t->t[n->in[j]]) || t->t[n->in[j]].mem == TM_PARAM) ||
                                  t->t[n->in[j]].trainable))
                return ERT_OK;
        if (n->op == ERT_OP_CONV && n->params.conv.has_residual) return ERT_OK;
        const ttensor *y = &t->t[n->out[0]];
        if (y->ndim < 2 || y->dims[0] != B || y->trainable) return ERT_OK;
        if (y->nbytes > biggest) biggest = y->nbytes;
        chain[len++] = u;
        cur = n->out[0];
        if (n->op == ERT_OP_MAXPOOL) break;
    }
    if (biggest < ((size_t)4 << 20)) return ERT_OK;
    for (int i = 1; i < len; i++)
        if (chain[i] < chain[i - 1]) return ERT_OK; /* schedule order assumed below */
    const int at = chain[0], n_new = k_chunks * (len + 1) + 1;
    const int32_t out = t->n[chain[len - 1]].out[0];
    tnode *made = calloc((size_t)n_new, sizeof *made);
    if (!made) return ert_tr_oom(t);
    int nm_ = 0;
    ert_status st = ERT_OK;
    int32_t *parts = malloc((size_t)k_chunks * sizeof *parts);
    if (!parts) st = ert_tr_oom(t);
    const int64_t b = B / k_chunks;
    for (int c = 0; c < k_chunks && st == ERT_OK; c++) {
        char nm[256];
        int64_t d[ERT_MAX_DIMS];
        memcpy(d, t->t[x].dims, sizeof d);
        d[0] = b;
        snprintf(nm, sizeof nm, "%s.chunk%d", t->t[x].name, c);
        int32_t in = ert_tr_add_tensor(t, nm, t->t[x].dtype, t->t[x].ndim, d);
        tnode *sl = in >= 0 ? ert_tr_add_node(t, ERT_OP_SLICE, nm, 1, 1, PH_FWD) : NULL;
        if (!sl) {
            st = ert_tr_oom(t);
            break;
        }
        t->t[in].fwd = true;
        sl->in[0] = x;
        sl->out[0] = in;
        sl->params.slice.start[0] = c * b;
        for (int q = 0; q < ERT_MAX_DIMS; q++) sl->params.slice.step[q] = 1;
        made[nm_++] = *sl;
        t->nn--; /* parked in made[] until the list is rebuilt */
        for (int i = 0; i < len && st == ERT_OK; i++) {
            const tnode *f = &t->n[chain[i]];
            const ttensor *fy = &t->t[f->out[0]];
            memcpy(d, fy->dims, sizeof d);
            d[0] = b;
            snprintf(nm, sizeof nm, "%s.chunk%d", fy->name, c);
            int32_t o = ert_tr_add_tensor(t, nm, fy->dtype, fy->ndim, d);
            f = &t->n[chain[i]];
            tnode *n = o >= 0 ? ert_tr_add_node(t, f->op, nm, f->n_in, 1, PH_FWD) : NULL;
            if (!n) {
                st = ert_tr_oom(t);
                break;
            }
            f = &t->n[chain[i]];
            t->t[o].fwd = true;
            for (int j = 0; j < f->n_in; j++) n->in[j] = f->in[j];
            n->in[0] = in;
            n->out[0] = o;
            n->params = f->params;
            n->ws_bytes = f->ws_bytes; /* the CPU's (from the whole batch: enough); a device's is asked later */
            n->src = f->src;
            made[nm_++] = *n;
            t->nn--;
            in = o;
        }
        parts[c] = in;
    }
    if (st == ERT_OK) {
        tnode *cc = ert_tr_add_node(t, ERT_OP_CONCAT, "stem.concat", k_chunks, 1, PH_FWD);
        if (!cc) st = ert_tr_oom(t);
        else {
            for (int c = 0; c < k_chunks; c++) cc->in[c] = parts[c];
            cc->out[0] = out;
            cc->params.axis.axis = 0;
            made[nm_++] = *cc;
            t->nn--;
        }
    }
    if (st == ERT_OK && t->nn + nm_ > t->cap_n) { /* room for the new nodes */
        tnode *g = realloc(t->n, (size_t)(t->nn + nm_) * sizeof *g);
        if (!g) st = ert_tr_oom(t);
        else t->n = g, t->cap_n = t->nn + nm_;
    }
    if (st != ERT_OK) {
        for (int i = 0; i < nm_; i++) free(made[i].in), free(made[i].name_owned);
        free(made);
        free(parts);
        return st;
    }
    for (int i = len - 1; i >= 0; i--) drop_node(t, chain[i]); /* the originals (chain[] ascending) */
    memmove(&t->n[at + nm_], &t->n[at], (size_t)(t->nn - at) * sizeof *t->n);
    memcpy(&t->n[at], made, (size_t)nm_ * sizeof *made);
    t->nn += nm_;
    ert_log(t->ctx, ERT_LOG_DEBUG, "trainer: frozen stem (%d nodes to '%s') in %d batch chunks", len, t->t[out].name,
            k_chunks);
    free(made);
    free(parts);
    return ERT_OK;
}

/* ------------------------------------------------------------------ steps 4, 6 */

/* Rematerialisation (after the autodiff, before the optimizer): an output
 * that a backward node reads and that is cheap to make again is remade by a
 * replay node placed just before its first backward reader, and the backward
 * readers take the copy; the original then dies after its last forward
 * reader instead of living through the backward, and the copy lives only
 * from the replay to its last reader. Two kinds:
 *   - a batch-statistics BatchNorm's output (with its fused Relu): the next
 *     conv's weight gradient reads its input, a MaxPool's gradient its input.
 *     Replayed by BATCHNORM_TRAIN (grad.replay) from the BatchNorm's input x
 *     (its own gradient keeps x anyway) and the step's mean/invstd, bit for
 *     bit. The BatchNorm gradient recomputes its fused Relu's mask itself
 *     (autodiff.c). keep_bn_outputs turns this off.
 *   - a Cast of something that lives through the whole step anyway (a
 *     parameter, a constant, a graph input): mixed precision's f16 copies of
 *     the weights (a conv's data gradient reads its filter) and of the input
 *     (the first conv's weight gradient).
 * Cost: one elementwise pass per replay. */
static bool lives_all_step(const ert_trainer *t, int32_t x) {
    const ttensor *v = &t->t[x];
    if (v->mem == TM_CONST || v->mem == TM_FOLDED) return true;
    if (v->mem == TM_PARAM) return v->candidate; /* weights; not running statistics (the forward updates them) */
    if (v->mem != TM_IO) return false;
    for (int i = 0; i < t->model->n_inputs; i++)
        if (t->model->inputs[i] == x) return true; /* a graph input (not the loss or the target) */
    return false;
}

static ert_status replay(ert_trainer *t, int k) {
    const tnode *f = &t->n[k];
    bool bn = f->op == ERT_OP_BATCHNORM_TRAIN && f->n_in >= 5 && f->n_out >= 3 && f->out[1] >= 0 && f->out[2] >= 0 &&
              f->in[0] >= 0 && !t->o.keep_bn_outputs;
    bool cast = f->op == ERT_OP_CAST && f->n_in == 1 && f->n_out == 1 && f->in[0] >= 0 && lives_all_step(t, f->in[0]);
    if ((!bn && !cast) || f->out[0] < 0) return ERT_OK;
    const int32_t y = f->out[0], x = f->in[0];
    int first = -1;
    bool x_kept = cast; /* a BatchNorm's x: the backward must read it anyway (its gradient) */
    for (int j = t->fwd_end; j < t->nn; j++)
        for (int q = 0; q < t->n[j].n_in; q++) {
            if (t->n[j].in[q] == y && first < 0) first = j;
            x_kept = x_kept || t->n[j].in[q] == x;
        }
    if (first < 0 || !x_kept || (bn && t->t[y].dtype != t->t[x].dtype)) return ERT_OK;
    char nm[256];
    snprintf(nm, sizeof nm, "%s.recomputed", t->t[y].name);
    int32_t y2 = ert_tr_add_tensor(t, nm, t->t[y].dtype, t->t[y].ndim, t->t[y].dims);
    snprintf(nm, sizeof nm, "%s/recompute", f->name);
    tnode *r = y2 >= 0 ? ert_tr_add_node(t, f->op, nm, bn ? 5 : 1, 1, PH_BWD) : NULL;
    if (!r) return ert_tr_oom(t);
    f = &t->n[k]; /* the node array may have moved */
    r->params = f->params;
    r->in[0] = x;
    r->out[0] = y2;
    if (bn) {
        r->in[1] = f->in[1], r->in[2] = f->in[2], r->in[3] = f->out[1], r->in[4] = f->out[2];
        r->params.grad.training = false;
        r->params.grad.replay = true;
    }
    for (int j = first; j < t->nn - 1; j++)
        for (int q = 0; q < t->n[j].n_in; q++)
            if (t->n[j].in[q] == y) t->n[j].in[q] = y2;
    tnode tmp = t->n[t->nn - 1]; /* move the replay to just before its first reader */
    memmove(&t->n[first + 1], &t->n[first], (size_t)(t->nn - 1 - first) * sizeof *t->n);
    t->n[first] = tmp;
    return ERT_OK;
}

static ert_status recompute(ert_trainer *t) {
    ert_status st = ERT_OK;
    for (int k = 0; k < t->fwd_end && st == ERT_OK; k++) st = replay(t, k);
    return st;
}

static ert_status add_loss(ert_trainer *t) {
    const ert_model *m = t->model;
    int oi = 0;
    if (t->o.output) {
        oi = -1;
        for (int i = 0; i < m->n_outputs; i++)
            if (strcmp(m->tensors[m->outputs[i]].name, t->o.output) == 0) oi = i;
        if (oi < 0) return ert_set_error(t->ctx, ERT_E_NOT_FOUND, "the model has no output '%s'", t->o.output);
    }
    if (m->n_outputs < 1) return ert_set_error(t->ctx, ERT_E_ARG, "the model has no output");
    t->out_t = m->outputs[oi];
    ttensor *y = &t->t[t->out_t];
    if (!y->defined || y->dtype != ERT_DTYPE_F32 || is_imm(y) || y->mem == TM_IO)
        return ert_set_error(t->ctx, ERT_E_SHAPE, "output '%s' is not a computed f32 tensor", y->name);
    y->mem = TM_IO;
    const ert_loss_options *lo = &t->o.loss;
    int32_t tg;
    if (lo->kind == ERT_LOSS_CROSS_ENTROPY) {
        if (y->ndim != 2)
            return ert_set_error(t->ctx, ERT_E_SHAPE, "cross-entropy needs logits (N, C); output '%s' has rank %d",
                                 y->name, y->ndim);
        if (t->class_weights && t->n_class_weights != y->dims[1])
            return ert_set_error(t->ctx, ERT_E_ARG, "%d class weights given, the output has %lld classes",
                                 t->n_class_weights, (long long)y->dims[1]);
        int64_t n = y->dims[0];
        tg = ert_tr_add_tensor(t, "target", ERT_DTYPE_I64, 1, &n);
    } else {
        ttensor c = *y;
        tg = ert_tr_add_tensor(t, "target", ERT_DTYPE_F32, c.ndim, c.dims);
    }
    int64_t one = 1;
    int32_t ls = ert_tr_add_tensor(t, "loss", ERT_DTYPE_F32, 1, &one);
    ttensor yc = t->t[t->out_t];
    char nm[256];
    snprintf(nm, sizeof nm, "%s.grad", yc.name);
    int32_t dl = ert_tr_add_tensor(t, nm, ERT_DTYPE_F32, yc.ndim, yc.dims);
    int32_t cw = -1;
    bool has_cw = t->class_weights != NULL;
    if (lo->kind == ERT_LOSS_CROSS_ENTROPY && has_cw) {
        int64_t c = yc.dims[1];
        cw = ert_tr_add_tensor(t, "class_weights", ERT_DTYPE_F32, 1, &c);
        if (cw >= 0) {
            t->t[cw].mem = TM_FOLDED;
            t->t[cw].owned = t->class_weights;
            t->t[cw].cdata = t->class_weights;
            t->class_weights = NULL;
        }
    }
    if (tg < 0 || ls < 0 || dl < 0 || (has_cw && cw < 0)) return ert_tr_oom(t);
    t->t[tg].mem = t->t[ls].mem = TM_IO;
    if (t->amp == ERT_DTYPE_F16 && t->o.loss_scale >= 0) {
        int64_t three = 3;
        if ((t->scaler_t = ert_tr_add_tensor(t, "ert.train.loss_scale", ERT_DTYPE_F32, 1, &three)) < 0)
            return ert_tr_oom(t);
        t->t[t->scaler_t].mem = TM_STATE;
    }
    /* device + F16: the scaler (dlogits *= scale) in slot 3 */
    tnode *n = ert_tr_add_node(t, ERT_OP_LOSS, "loss", t->scaler_t >= 0 ? 4 : cw >= 0 ? 3 : 2, 2, PH_FWD);
    if (!n) return ert_tr_oom(t);
    n->in[0] = t->out_t;
    n->in[1] = tg;
    if (cw >= 0) n->in[2] = cw;
    if (t->scaler_t >= 0) n->in[3] = t->scaler_t;
    n->out[0] = ls;
    n->out[1] = dl;
    n->params.loss.kind = lo->kind;
    n->params.loss.label_smoothing = lo->label_smoothing;
    t->target_t = tg;
    t->loss_t = ls;
    t->dlogits_t = dl;
    return ERT_OK;
}

/* Device: the step's status tensor (i64 {reporting node + 1, bad value}, io
 * region: zeroed by the host, copied in and back with hyper and the loss),
 * and a third input on every GatherGrad node, which records there the first
 * index outside [-dim, dim) it meets (on the CPU the forward Gather refuses
 * it; a kernel inside the captured step cannot return). */
static ert_status dev_status(ert_trainer *t) {
    if (!t->be) return ERT_OK;
    int64_t two = 2;
    if ((t->status_t = ert_tr_add_tensor(t, "ert.train.status", ERT_DTYPE_I64, 1, &two)) < 0) return ert_tr_oom(t);
    t->t[t->status_t].mem = TM_IO;
    for (int k = 0; k < t->nn; k++) {
        tnode *n = &t->n[k];
        if (n->op != ERT_OP_GATHER_GRAD || n->n_in != 2) continue;
        int32_t *io = realloc(n->in, (size_t)(n->n_in + 1 + n->n_out) * sizeof *io);
        if (!io) return ert_tr_oom(t);
        memmove(io + n->n_in + 1, io + n->n_in, (size_t)n->n_out * sizeof *io); /* in, then out, one block */
        io[n->n_in] = t->status_t;
        n->in = io;
        n->n_in++;
        n->out = io + n->n_in;
    }
    return ERT_OK;
}

static ert_status add_optim(ert_trainer *t, const int32_t *grads) {
    const ert_optim_options *op = &t->o.optim;
    /* {norm, clip factor} (device: + {next loss scale, skipped steps}) */
    int64_t nn = t->be ? 4 : 2;
    bool sc = t->scaler_t >= 0;
    ert_status st0 = dev_status(t);
    if (st0) return st0;
    t->gnorm_t = ert_tr_add_tensor(t, "ert.train.grad_norm", ERT_DTYPE_F32, 1, &nn);
    tnode *gn = t->gnorm_t >= 0 ? ert_tr_add_node(t, ERT_OP_GRAD_NORM, "grad_norm",
                                                  t->n_params + (sc ? 2 : 0) + (t->be ? 1 : 0), 1, PH_BWD)
                                : NULL;
    if (!gn) return ert_tr_oom(t);
    if (sc) { /* + the loss and the scaler: the norm is unscaled, the scale updated */
        gn->in[t->n_params] = t->loss_t;
        gn->in[t->n_params + 1] = t->scaler_t;
        gn->params.optim.scale_interval = t->o.loss_scale_interval > 0 ? t->o.loss_scale_interval : 2000;
    }
    if (t->be) { /* + the status last: a bad index found in the backward skips every update */
        gn->in[gn->n_in - 1] = t->status_t;
        gn->params.optim.status_in = true;
    }
    /* on a device the norm comes back with the loss (the step's finite check) */
    t->t[t->gnorm_t].mem = t->be ? TM_IO : TM_STATE;
    if (t->be) {
        int64_t three = 3;
        if ((t->hyper_t = ert_tr_add_tensor(t, "ert.train.hyper", ERT_DTYPE_F32, 1, &three)) < 0) return ert_tr_oom(t);
        t->t[t->hyper_t].mem = TM_IO;
    }
    for (int k = 0; k < t->n_params; k++) {
        gn->in[k] = grads[k];
        t->t[grads[k]].mem = TM_GRAD;
    }
    gn->out[0] = t->gnorm_t;
    gn->params.optim.clip = op->clip_grad_norm;
    t->bwd_end = t->nn;
    for (int k = 0; k < t->n_params; k++) {
        int32_t p = t->params[k], st[2] = {-1, -1};
        int n_state = op->kind == ERT_OPTIM_SGD ? (op->momentum != 0.0f ? 1 : 0) : 2;
        for (int s = 0; s < n_state; s++) {
            char nm[256];
            snprintf(nm, sizeof nm, "ert.train.%s.%s", t->t[p].name,
                     s == 0 ? (op->kind == ERT_OPTIM_SGD ? "momentum" : "m") : "v");
            ttensor c = t->t[p];
            st[s] = ert_tr_add_tensor(t, nm, ERT_DTYPE_F32, c.ndim, c.dims);
            if (st[s] < 0) return ert_tr_oom(t);
            t->t[st[s]].mem = TM_STATE;
        }
        /* device: + hyper (lr, bias corrections: per-step values live in device
         * memory, not in the captured kernel arguments) and the loss (the
         * update is skipped on device when it or the norm is not finite) */
        tnode *n = ert_tr_add_node(t, ERT_OP_OPTIM, t->t[p].name, t->be ? 7 : 5, 0, PH_OPT);
        if (!n) return ert_tr_oom(t);
        if (t->be) {
            n->in[5] = t->hyper_t;
            n->in[6] = t->loss_t;
        }
        n->in[0] = p;
        n->in[1] = grads[k];
        n->in[2] = st[0];
        n->in[3] = st[1];
        n->in[4] = t->gnorm_t;
        ert_optim_params *q = &n->params.optim;
        q->kind = op->kind;
        q->lr = op->lr;
        q->momentum = op->momentum;
        q->nesterov = op->nesterov != 0;
        q->weight_decay = op->weight_decay;
        q->beta1 = op->beta1 > 0 ? op->beta1 : 0.9f;
        q->beta2 = op->beta2 > 0 ? op->beta2 : 0.999f;
        q->eps = op->eps > 0 ? op->eps : 1e-8f;
    }
    return ERT_OK;
}

/* ------------------------------------------------------------------ step 7 */

/* At DEBUG level: the step where the most activation bytes are live and the
 * tensors and workspaces live there, largest first (where the arena goes). */
static void log_plan(const ert_trainer *t) {
    if (!t->ctx || !t->ctx->log || t->ctx->log_level < ERT_LOG_DEBUG || t->nn <= 0) return;
    int best = 0;
    size_t most = 0;
    for (int k = 0; k < t->nn; k++) {
        size_t live = 0;
        for (int b = 0; b < t->n_blocks; b++)
            if (t->blocks[b].first <= k && k <= t->blocks[b].last) live += t->blocks[b].size;
        if (live > most) most = live, best = k;
    }
    ert_log(t->ctx, ERT_LOG_DEBUG, "trainer plan: %zu activation bytes live at node %d '%s' (of %d; backward from %d)",
            most, best, t->n[best].name, t->nn, t->fwd_end);
    size_t floor = most / 100, shown = 0; /* tensors of 1% of the peak or more */
    for (int i = 0; i < t->nt && shown < 48; i++) {
        const ttensor *x = &t->t[i];
        if (x->mem != TM_ACT || x->alias >= 0 || x->first < 0 || x->first > best || x->last < best ||
            x->nbytes < floor)
            continue;
        shown++;
        ert_log(t->ctx, ERT_LOG_DEBUG, "  live %9zu B %-6s '%s' (nodes %d..%d%s)", x->nbytes, ert_dtype_name(x->dtype),
                x->name, x->first, x->last,
                x->first < t->fwd_end && x->last >= t->fwd_end ? ", saved for the backward" : "");
    }
    for (int k = 0; k < t->nn; k++)
        if (t->n[k].ws_bytes >= ((size_t)1 << 20))
            ert_log(t->ctx, ERT_LOG_DEBUG, "  workspace %9zu B node %d '%s'%s", t->n[k].ws_bytes, k, t->n[k].name,
                    k == best ? " (at the peak)" : "");
}

/* The backend's workspace for node n (shapes only). budget > 0: the most it
 * may take without raising the arena's peak; a backend that can choose
 * (cuDNN's convs) takes its fastest algorithm within it, unless none fits or
 * that one is much slower than its fastest. */
static ert_status node_ws(ert_trainer *t, const tnode *n, size_t budget, size_t *bytes) {
    *bytes = 0;
    if (!t->be || !t->be->node_workspace) return ERT_OK;
    ert_tview *v = calloc((size_t)(n->n_in + n->n_out + 1), sizeof *v);
    if (!v) return ert_tr_oom(t);
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] >= 0) fill_view(&v[j], &t->t[n->in[j]], NULL);
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] >= 0) fill_view(&v[n->n_in + j], &t->t[n->out[j]], NULL);
    ert_kargs a = {.op = n->op, .params = &n->params, .n_in = n->n_in, .n_out = n->n_out, .in = v,
                   .out = v + n->n_in, .name = n->name, .workspace_bytes = budget};
    ert_status st = t->be->node_workspace(t->bctx, &a, bytes);
    free(v);
    return st;
}

/* Workspaces never raise the peak when they need not: with the lifetimes
 * known, a node's headroom is the activation peak minus the bytes live at
 * it; a node whose workspace exceeds that asks the backend again within it
 * (ResNet-18 AMP b32 on an H200: one backward conv of layer 2 wanted 155 MB
 * at the very step where the saved activations peak). */
static ert_status ws_budget(ert_trainer *t) {
    if (!t->be || t->nn <= 0) return ERT_OK;
    int64_t *d = calloc((size_t)t->nn + 1, sizeof *d);
    if (!d) return ert_tr_oom(t);
    for (int i = 0; i < t->nt; i++) {
        const ttensor *x = &t->t[i];
        if (x->mem != TM_ACT || x->first < 0 || x->alias >= 0) continue;
        int64_t b = (int64_t)ert_align_up(x->nbytes ? x->nbytes : 1, ERT_ALIGN);
        d[x->first] += b;
        d[x->last + 1] -= b;
    }
    int64_t live = 0, peak = 0;
    for (int k = 0; k < t->nn; k++) {
        live += d[k];
        d[k] = live;
        if (live > peak) peak = live;
    }
    ert_status st = ERT_OK;
    int64_t slack = t->o.workspace_slack ? t->o.workspace_slack : (peak / 8 > (32 << 20) ? peak / 8 : (32 << 20));
    for (int k = 0; k < t->nn && st == ERT_OK && slack >= 0; k++) {
        tnode *n = &t->n[k];
        size_t room = (size_t)(peak - d[k] + slack), ws = 0;
        if (n->ws_bytes <= room) continue;
        if ((st = node_ws(t, n, room ? room : 1, &ws)) == ERT_OK && ws < n->ws_bytes) {
            ert_log(t->ctx, ERT_LOG_DEBUG, "node '%s': workspace %zu -> %zu bytes (room under the peak + slack: %zu)",
                    n->name, n->ws_bytes, ws, room);
            n->ws_bytes = ws;
        }
    }
    free(d);
    return st;
}

static ert_status plan(ert_trainer *t) {
    for (int i = 0; i < t->nt; i++) {
        ttensor *x = &t->t[i];
        if (x->mem == TM_NONE) x->mem = TM_ACT;
        x->first = x->last = -1;
    }
    for (int k = 0; k < t->nn; k++) {
        tnode *n = &t->n[k];
        for (int j = 0; j < n->n_out; j++) {
            if (n->out[j] < 0) continue;
            ttensor *x = &t->t[n->out[j]];
            if (x->first < 0) x->first = k;
            if (x->last < k) x->last = k;
        }
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && t->t[n->in[j]].last < k) t->t[n->in[j]].last = k;
    }
    /* Reshape-like outputs share their input's storage when the input dies
     * there (the copy kernel then has nothing to move); alias chains point
     * backwards in schedule order, so one pass extends the roots' lifetimes */
    for (int k = 0; k < t->nn; k++) {
        const tnode *n = &t->n[k];
        bool copy = n->op == ERT_OP_IDENTITY || n->op == ERT_OP_FLATTEN || n->op == ERT_OP_RESHAPE ||
                    n->op == ERT_OP_SQUEEZE || n->op == ERT_OP_UNSQUEEZE || n->op == ERT_OP_DROPOUT;
        if (!copy || n->n_out < 1 || n->in[0] < 0 || n->out[0] < 0) continue;
        ttensor *in = &t->t[n->in[0]], *o = &t->t[n->out[0]];
        if (in->mem != TM_ACT || o->mem != TM_ACT || in->last != k || in->nbytes != o->nbytes) continue;
        int32_t r = n->in[0];
        while (t->t[r].alias >= 0) r = t->t[r].alias;
        o->alias = r;
        if (o->last > t->t[r].last) t->t[r].last = o->last;
    }
    ert_status st = ws_budget(t);
    if (st) return st;
    int nb = 0;
    for (int i = 0; i < t->nt; i++)
        if (t->t[i].mem == TM_ACT && t->t[i].first >= 0 && t->t[i].alias < 0) nb++;
    for (int k = 0; k < t->nn; k++)
        if (t->n[k].ws_bytes) nb++;
    t->blocks = calloc((size_t)(nb ? nb : 1), sizeof *t->blocks);
    if (!t->blocks) return ert_tr_oom(t);
    nb = 0;
    size_t saved = 0, ws_max = 0;
    for (int i = 0; i < t->nt; i++) {
        ttensor *x = &t->t[i];
        if (x->mem != TM_ACT || x->first < 0 || x->alias >= 0) continue;
        x->block = nb;
        t->blocks[nb++] = (ert_plan_block){.size = x->nbytes ? x->nbytes : 1, .first = x->first, .last = x->last};
        if (x->first < t->fwd_end && x->last >= t->fwd_end) saved += ert_align_up(x->nbytes, ERT_ALIGN);
    }
    for (int k = 0; k < t->nn; k++) {
        tnode *n = &t->n[k];
        if (!n->ws_bytes) continue;
        if (n->ws_bytes == SIZE_MAX) return ert_set_error(t->ctx, ERT_E_SHAPE, "node '%s': workspace overflows", n->name);
        n->ws_block = nb;
        t->blocks[nb++] = (ert_plan_block){.size = n->ws_bytes, .first = k, .last = k};
        if (n->ws_bytes > ws_max) ws_max = n->ws_bytes;
    }
    t->n_blocks = nb;
    size_t peak, lb;
    st = ert_plan_offsets(t->blocks, nb, ERT_ALIGN, &peak, &lb);
    if (st) return st == ERT_E_NOMEM ? ert_tr_oom(t) : ert_set_error(t->ctx, st, "activation sizes overflow");
    /* fixed regions; a tensor nobody reads or writes gets no room */
    size_t w = 0, g = 0, s = 0, io = 0;
    for (int i = 0; i < t->nt; i++) {
        ttensor *x = &t->t[i];
        size_t *r = NULL;
        switch (x->mem) {
        case TM_PARAM: case TM_FOLDED: r = x->last >= 0 ? &w : NULL; break;
        case TM_CONST: r = t->be && x->last >= 0 ? &w : NULL; break; /* device: copied in once */
        case TM_GRAD: r = &g; break;
        case TM_STATE: r = &s; break;
        case TM_IO: r = &io; break;
        default: break;
        }
        if (!r) continue;
        x->offset = *r;
        *r = ert_align_up(*r + (x->nbytes ? x->nbytes : 1), ERT_ALIGN);
    }
    t->w_bytes = w, t->g_bytes = g, t->s_bytes = s, t->io_bytes = io;
    t->act_bytes = ert_align_up(peak, ERT_ALIGN);
    ert_memory_report *r = &t->mem;
    memset(r, 0, sizeof *r);
    r->weights_bytes = w;
    r->gradients_bytes = g;
    r->optimizer_bytes = s;
    r->io_bytes = io;
    r->activations_bytes = t->act_bytes;
    r->activations_lower_bound = lb;
    r->workspace_bytes = ws_max;
    r->saved_bytes = saved;
    r->total_bytes = w + g + s + io + t->act_bytes;
    log_plan(t);
    return ERT_OK;
}


/* ------------------------------------------------------------------ device (CUDA) */

/* Every node on the backend: supported op (named in the error otherwise),
 * and its workspace as the backend sizes it (cuDNN, cuBLAS) instead of the
 * CPU kernels'. Runs before plan(). */
static ert_status dev_prepare(ert_trainer *t) {
    for (int k = 0; k < t->nn; k++) {
        tnode *n = &t->n[k];
        ert_dtype dt = ERT_DTYPE_F32;
        if (n->n_in > 0 && n->in[0] >= 0) dt = t->t[n->in[0]].dtype;
        else if (n->n_out > 0 && n->out[0] >= 0) dt = t->t[n->out[0]].dtype;
        if (!t->be->supports(n->op, dt))
            return ert_set_error(t->ctx, ERT_E_UNSUPPORTED, "node '%s' (%s): no %s kernel for %s on %s", n->name,
                                 op_name(n->op), n->phase == PH_FWD ? "forward" : "training",
                                 ert_dtype_name(dt), t->be->name);
    }
    for (int k = 0; k < t->nn; k++) {
        ert_status st = node_ws(t, &t->n[k], 0, &t->n[k].ws_bytes);
        if (st) return st;
    }
    return ERT_OK;
}

/* Arena pointers are device addresses: copy parameters, constants and the
 * RNG seed in once, zero the gradient/state/io regions, map the io region to
 * the user's host mirror. */
static ert_status dev_fill(ert_trainer *t, uint8_t *wb, uint8_t *iob) {
    const ert_backend *be = t->be;
    ert_status st;
    size_t zn = t->g_bytes + t->s_bytes + t->io_bytes;
    if (zn) {
        void *z = calloc(1, zn);
        if (!z) return ert_tr_oom(t);
        st = be->upload(t->bctx, wb + t->w_bytes, z, zn);
        free(z);
        if (st) return st;
    }
    for (int i = 0; i < t->nt; i++) {
        ttensor *x = &t->t[i];
        if ((x->mem == TM_PARAM || x->mem == TM_FOLDED || x->mem == TM_CONST) && x->last >= 0 && x->data &&
            (st = be->upload(t->bctx, x->data, x->cdata, x->nbytes)))
            return st;
    }
    if (t->rng_t >= 0 && t->t[t->rng_t].data) {
        uint64_t seed = t->o.seed ? t->o.seed : 0x5eed5eed5eedull;
        if ((st = be->upload(t->bctx, t->t[t->rng_t].data, &seed, sizeof seed))) return st;
    }
    if (t->scaler_t >= 0 && t->t[t->scaler_t].data) {
        float s0[3] = {t->scale_now, 0.0f, 0.0f};
        if ((st = be->upload(t->bctx, t->t[t->scaler_t].data, s0, sizeof s0))) return st;
    }
    void *h = iob;
    if (t->io_bytes && (st = be->io_host(t->bctx, iob, t->io_bytes, &h))) return st;
    t->io_host = h;
    for (int i = 0; i < t->nt; i++)
        if (t->t[i].mem == TM_IO && t->t[i].data) t->t[i].host = (uint8_t *)h + t->t[i].offset;
    return ERT_OK;
}

/* After the kernel arguments: per-node backend state (cuDNN descriptors and
 * algorithms) and the step's copies: inputs, target, hyper and status in;
 * loss, gradient norm, output and status back. */
static ert_status dev_bind(ert_trainer *t, uint8_t *iob) {
    ert_status st;
    t->bound = true;
    for (int k = 0; k < t->nn; k++)
        if (t->be->bind_node && (st = t->be->bind_node(t->bctx, &t->n[k].args))) {
            if (t->ctx->err[0] == 0)
                ert_set_error(t->ctx, st, "node '%s' (%s): %s", t->n[k].name, op_name(t->n[k].op), ert_status_str(st));
            return st;
        }
    if (t->io_host == (void *)iob || !t->be->bind_io) return ERT_OK; /* the user writes the io region itself */
    ert_io_copy *in = calloc((size_t)t->n_in + 3, sizeof *in), out[4];
    if (!in) return ert_tr_oom(t);
    int ni = 0;
    for (int i = 0; i < t->n_in + 3; i++) {
        ttensor *x = &t->t[i < t->n_in    ? t->in_t[i]
                           : i == t->n_in ? t->target_t
                           : i == t->n_in + 1 ? t->hyper_t
                                              : t->status_t];
        if (x->data) in[ni++] = (ert_io_copy){.host = x->host, .dev = x->data, .bytes = x->nbytes};
    }
    int32_t oid[4] = {t->loss_t, t->gnorm_t, t->out_t, t->status_t};
    for (int i = 0; i < 4; i++) {
        ttensor *x = &t->t[oid[i]];
        out[i] = (ert_io_copy){.host = x->host, .dev = x->data, .bytes = x->nbytes};
    }
    st = t->be->bind_io(t->bctx, in, ni, out, 4);
    free(in);
    return st;
}

/* ------------------------------------------------------------------ step 8 */

static ert_status bind(ert_trainer *t) {
    const ert_session_options *o = &t->o.session;
    size_t total = t->mem.total_bytes;
    if (o->arena) {
        if ((uintptr_t)o->arena % ERT_HOST_ALIGN)
            return ert_set_error(t->ctx, ERT_E_ARG, "arena must be %d-byte aligned", ERT_HOST_ALIGN);
        if (o->arena_bytes < total)
            return ert_set_error(t->ctx, ERT_E_ARENA,
                                 "arena too small: %zu bytes given, %zu needed (weights %zu, gradients %zu, optimizer "
                                 "%zu, io %zu, activations %zu)",
                                 o->arena_bytes, total, t->w_bytes, t->g_bytes, t->s_bytes, t->io_bytes, t->act_bytes);
        t->arena = o->arena;
        t->arena_bytes = o->arena_bytes;
    } else if (t->be) {
        void *p = NULL;
        ert_status st = t->be->arena_alloc(t->bctx, total, &p);
        if (st) return st;
        t->arena = p;
        t->arena_owned = true;
        t->arena_bytes = total;
    } else {
        t->arena = aligned_alloc(ERT_ALIGN, ert_align_up(total ? total : 1, ERT_ALIGN));
        if (!t->arena) return ert_set_error(t->ctx, ERT_E_NOMEM, "cannot allocate the %zu-byte training arena", total);
        t->arena_owned = true;
        t->arena_bytes = total;
    }
    uint8_t *wb = t->arena, *gb = wb + t->w_bytes, *sb = gb + t->g_bytes, *iob = sb + t->s_bytes, *ab = iob + t->io_bytes;
    if (!t->be) memset(gb, 0, t->g_bytes + t->s_bytes + t->io_bytes);
    for (int i = 0; i < t->nt; i++) {
        ttensor *x = &t->t[i];
        switch (x->mem) {
        case TM_CONST:
            if (t->be) x->data = x->last >= 0 ? wb + x->offset : NULL;
            else x->data = (void *)x->cdata;
            break;
        case TM_PARAM: case TM_FOLDED:
            if (x->last < 0) break;
            x->data = wb + x->offset;
            if (!t->be) memcpy(x->data, x->cdata, x->nbytes);
            break;
        case TM_GRAD: x->data = gb + x->offset; break;
        case TM_STATE: x->data = sb + x->offset; break;
        case TM_IO: x->data = iob + x->offset; break;
        case TM_ACT: if (x->block >= 0) x->data = ab + t->blocks[x->block].offset; break;
        default: break;
        }
    }
    for (int i = 0; i < t->nt; i++)
        if (t->t[i].mem == TM_ACT && t->t[i].alias >= 0) {
            int32_t r = t->t[i].alias;
            while (t->t[r].alias >= 0) r = t->t[r].alias;
            t->t[i].data = t->t[r].data;
        }
    for (int i = 0; i < t->nt; i++) t->t[i].host = t->t[i].data;
    if (t->be) {
        ert_status st = dev_fill(t, wb, iob);
        if (st) return st;
    }
    for (int i = 0; i < t->nt; i++) {
        free(t->t[i].owned);
        t->t[i].owned = NULL;
        if (t->t[i].mem == TM_FOLDED) t->t[i].cdata = t->t[i].data;
    }
    if (t->rng_t >= 0 && !t->be) *(uint64_t *)t->t[t->rng_t].data = t->o.seed ? t->o.seed : 0x5eed5eed5eedull;
    t->kptr = calloc((size_t)t->nn + 1, sizeof *t->kptr);
    if (!t->kptr) return ert_tr_oom(t);
    for (int k = 0; k < t->nn; k++) {
        tnode *n = &t->n[k];
        n->views = calloc((size_t)(n->n_in + n->n_out + 1), sizeof *n->views);
        if (!n->views) return ert_tr_oom(t);
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) fill_view(&n->views[j], &t->t[n->in[j]], t->t[n->in[j]].data);
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) fill_view(&n->views[n->n_in + j], &t->t[n->out[j]], t->t[n->out[j]].data);
        n->args = (ert_kargs){.op = n->op, .params = &n->params, .n_in = n->n_in, .n_out = n->n_out, .in = n->views,
                              .out = n->views + n->n_in, .pool = t->be ? NULL : t->pool, .name = n->name,
                              .workspace = n->ws_block >= 0 ? ab + t->blocks[n->ws_block].offset : NULL,
                              .workspace_bytes = n->ws_bytes};
        t->kptr[k] = &n->args;
        if (n->op == ERT_OP_GATHER_GRAD) n->params.gather.tag = k + 1; /* see dev_status */
    }
    return t->be ? dev_bind(t, iob) : ERT_OK;
}

/* ------------------------------------------------------------------ public */

void ert_trainer_free(ert_trainer *t) {
    if (!t) return;
    if (t->be) {
        for (int k = 0; t->bound && k < t->nn; k++)
            if (t->be->release_node) t->be->release_node(t->bctx, &t->n[k].args);
        if (t->io_host && t->be->io_host_free && t->io_bytes)
            t->be->io_host_free(t->bctx, t->io_host, t->arena + t->w_bytes + t->g_bytes + t->s_bytes);
        if (t->arena_owned && t->arena) t->be->arena_free(t->bctx, t->arena);
        t->arena_owned = false;
        t->be->release(t->bctx);
    }
    for (int i = 0; i < t->nt; i++) {
        free(t->t[i].owned);
        free(t->t[i].name_owned);
    }
    for (int i = 0; i < t->nn; i++) {
        free(t->n[i].in);
        free(t->n[i].name_owned);
        free(t->n[i].views);
    }
    free(t->t);
    free(t->n);
    free(t->in_t);
    free(t->params);
    free(t->blocks);
    free(t->kptr);
    free(t->class_weights);
    if (t->arena_owned) free(t->arena);
    ert_threadpool_free(t->pool);
    free(t);
}

static ert_status check_options(ert_context *ctx, const ert_trainer_options *o) {
    const ert_session_options *so = &o->session;
    if ((unsigned)so->device > ERT_DEVICE_AUTO) return ert_set_error(ctx, ERT_E_ARG, "unknown device %d", (int)so->device);
    if (so->n_input_shapes < 0 || (so->n_input_shapes && !so->input_shapes) || so->batch < 0 || so->n_threads < 0 ||
        so->n_threads > 256)
        return ert_set_error(ctx, ERT_E_ARG, "invalid session options");
    if ((unsigned)o->loss.kind > ERT_LOSS_BCE_LOGITS) return ert_set_error(ctx, ERT_E_ARG, "unknown loss %d", o->loss.kind);
    if (!(o->loss.label_smoothing >= 0.0f && o->loss.label_smoothing < 1.0f))
        return ert_set_error(ctx, ERT_E_ARG, "label_smoothing must be in [0, 1)");
    if (o->loss.class_weights && o->loss.kind != ERT_LOSS_CROSS_ENTROPY)
        return ert_set_error(ctx, ERT_E_ARG, "class weights apply to cross-entropy only");
    const ert_optim_options *p = &o->optim;
    if ((unsigned)p->kind > ERT_OPTIM_ADAMW) return ert_set_error(ctx, ERT_E_ARG, "unknown optimizer %d", p->kind);
    if (!(p->lr >= 0) || !(p->weight_decay >= 0) || !(p->momentum >= 0 && p->momentum < 1) || !(p->eps >= 0) ||
        !(p->beta1 >= 0 && p->beta1 < 1) || !(p->beta2 >= 0 && p->beta2 < 1) || !(p->clip_grad_norm >= 0))
        return ert_set_error(ctx, ERT_E_ARG, "optimizer options out of range (lr, weight_decay, eps, clip >= 0; "
                                             "momentum, betas in [0, 1))");
    if (p->nesterov && (p->kind != ERT_OPTIM_SGD || p->momentum <= 0))
        return ert_set_error(ctx, ERT_E_ARG, "nesterov needs SGD with momentum > 0");
    const ert_lr_options *l = &o->lr;
    if ((unsigned)l->kind > ERT_LR_COSINE || l->warmup_steps < 0 || (l->kind == ERT_LR_STEP && l->step_size < 1) ||
        (l->kind == ERT_LR_COSINE && l->total_steps < 1) || !(l->gamma >= 0) || !(l->min_lr >= 0))
        return ert_set_error(ctx, ERT_E_ARG, "invalid LR schedule (STEP needs step_size >= 1, COSINE total_steps >= 1)");
    if ((unsigned)o->trainable > ERT_TRAIN_LAST_N || (o->trainable == ERT_TRAIN_PATTERN && !o->pattern) ||
        (o->trainable == ERT_TRAIN_LAST_N && o->last_n < 1))
        return ert_set_error(ctx, ERT_E_ARG, "invalid trainable selection (PATTERN needs a pattern, LAST_N last_n >= 1)");
    if ((unsigned)o->bn > ERT_BN_FROZEN) return ert_set_error(ctx, ERT_E_ARG, "unknown BatchNorm mode %d", o->bn);
    ert_dtype pr = so->precision;
    if (pr != ERT_DTYPE_UNDEFINED && pr != ERT_DTYPE_F32 && pr != ERT_DTYPE_F16 && pr != ERT_DTYPE_BF16)
        return ert_set_error(ctx, ERT_E_ARG, "precision must be F32, F16 or BF16");
    if (!(o->loss_scale == o->loss_scale) || o->loss_scale_interval < 0 || isinf(o->loss_scale))
        return ert_set_error(ctx, ERT_E_ARG, "loss_scale must be finite, loss_scale_interval >= 0");
    return ERT_OK;
}

/* FNV-1a over what a checkpoint must match: mutable tensors' names and
 * shapes, trainable flags, optimizer kind and state layout. */
static uint64_t fingerprint(const ert_trainer *t) {
    uint64_t h = 1469598103934665603ull;
#define MIX(p, n)                                                         \
    do {                                                                  \
        const unsigned char *b_ = (const unsigned char *)(p);             \
        for (size_t i_ = 0; i_ < (n); i_++) h = (h ^ b_[i_]) * 1099511628211ull; \
    } while (0)
    for (int i = 0; i < t->nt; i++) {
        const ttensor *x = &t->t[i];
        /* the gradient norm is state on the CPU, io on a device: not checkpointed */
        /* candidates: also a frozen filter read in place (TM_CONST), so the print is the same either way */
        if ((x->mem != TM_PARAM && x->mem != TM_STATE && !x->candidate) || i == t->gnorm_t) continue;
        MIX(x->name, strlen(x->name) + 1);
        MIX(&x->ndim, sizeof x->ndim);
        MIX(x->dims, (size_t)x->ndim * sizeof x->dims[0]);
        MIX(&x->trainable, 1);
    }
    int k = t->o.optim.kind;
    MIX(&k, sizeof k);
#undef MIX
    return h;
}

static ert_status build(const ert_model *m, const ert_trainer_options *opts, bool plan_only, ert_trainer **out) {
    ert_context *ctx = m->ctx;
    ert_trainer_options dflt = {0};
    const ert_trainer_options *o = opts ? opts : &dflt;
    ert_status st = check_options(ctx, o);
    if (st) return st;
    ert_trainer *t = calloc(1, sizeof *t);
    if (!t) return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
    atomic_init(&t->running, false);
    t->ctx = ctx;
    t->model = m;
    t->o = *o;
    t->o.loss.class_weights = NULL; /* copied below */
    t->rng_t = -1;
    t->hyper_t = -1;
    t->status_t = -1;
    t->scaler_t = -1;
    t->amp = o->session.precision == ERT_DTYPE_F16 || o->session.precision == ERT_DTYPE_BF16 ? o->session.precision
                                                                                              : ERT_DTYPE_F32;
    t->scale_now = t->amp == ERT_DTYPE_F16 && o->loss_scale >= 0 ? (o->loss_scale > 0 ? o->loss_scale : 65536.0f)
                                                                  : 1.0f;
    if (t->amp != ERT_DTYPE_F32 && o->session.device != ERT_DEVICE_CUDA) {
        st = ert_set_error(ctx, ERT_E_UNSUPPORTED,
                           "mixed precision training (precision %s) needs the CUDA device; the CPU trainer is f32",
                           ert_dtype_name(t->amp));
        goto fail;
    }
    t->n_threads = o->session.n_threads > 0 ? o->session.n_threads : 1;
    if (o->session.device == ERT_DEVICE_CUDA) { /* AUTO was resolved by the caller */
        const ert_backend *be = ert_cuda_backend_get();
        if (!be) {
            st = ert_set_error(ctx, ERT_E_UNSUPPORTED, "device CUDA: this edgert was built without the CUDA backend");
            goto fail;
        }
        ert_session_options so = o->session;
        so.precision = ERT_DTYPE_F32; /* the trainer chooses each tensor's dtype itself */
        so.flags |= ERT_SESSION_TRAINER_;
        void *bctx = NULL;
        if ((st = be->init(ctx, &so, &bctx))) goto fail;
        t->be = be;
        t->bctx = bctx;
    }
    if (o->loss.class_weights) {
        if (o->loss.n_class_weights < 1) {
            st = ert_set_error(ctx, ERT_E_ARG, "class_weights given with n_class_weights %d", o->loss.n_class_weights);
            goto fail;
        }
        t->class_weights = malloc((size_t)o->loss.n_class_weights * sizeof(float));
        if (!t->class_weights) {
            st = ert_tr_oom(t);
            goto fail;
        }
        t->n_class_weights = o->loss.n_class_weights;
        memcpy(t->class_weights, o->loss.class_weights, (size_t)o->loss.n_class_weights * sizeof(float));
        for (int i = 0; i < o->loss.n_class_weights; i++)
            if (!(o->loss.class_weights[i] >= 0)) {
                st = ert_set_error(ctx, ERT_E_ARG, "class weight %d is negative or NaN", i);
                goto fail;
            }
    }
    for (int i = 0; i < m->n_tensors; i++) {
        int32_t id = add_raw(t);
        if (id < 0) {
            st = ert_tr_oom(t);
            goto fail;
        }
        ttensor *x = &t->t[id];
        const ert_tensor *mt = &m->tensors[i];
        x->name = mt->name;
        x->dtype = mt->dtype;
        x->ndim = mt->ndim;
        memcpy(x->dims, mt->dims, sizeof x->dims);
        x->model_id = i;
        if (mt->role == ERT_ROLE_WEIGHT) {
            x->mem = TM_CONST;
            x->cdata = mt->data;
            x->defined = true;
            if (!set_nbytes(x)) {
                st = ert_set_error(ctx, ERT_E_FORMAT, "weight '%s': invalid size", x->name);
                goto fail;
            }
        }
    }
    {
        int64_t one = 1;
        t->rng_t = ert_tr_add_tensor(t, "ert.train.rng", ERT_DTYPE_I64, 1, &one); /* u64 state, stored as 8 bytes */
        if (t->rng_t < 0) {
            st = ert_tr_oom(t);
            goto fail;
        }
        t->t[t->rng_t].mem = TM_STATE;
    }
    if ((st = fix_inputs(t)) || (st = select_params(t)) || (st = infer(t)) || (st = fold_frozen(t)) || (st = fuse_bn_relu(t)) ||
        (st = amp_rewrite(t)) || (st = prefix_channels_last(t)) || (st = chunk_stem(t)) ||
        (st = add_loss(t)))
        goto fail;
    t->fwd_end = t->nn;
    {
        int32_t *grads = malloc((size_t)(t->n_params + 1) * sizeof *grads);
        if (!grads) {
            st = ert_tr_oom(t);
            goto fail;
        }
        st = ert_autodiff(t, grads);
        if (st == ERT_OK) st = recompute(t);
        if (st == ERT_OK) st = add_optim(t, grads);
        free(grads);
        if (st) goto fail;
    }
    if (t->be && (st = dev_prepare(t))) goto fail;
    t->n_in = m->n_inputs;
    t->in_t = malloc((size_t)(m->n_inputs + 1) * sizeof *t->in_t);
    if (!t->in_t) {
        st = ert_tr_oom(t);
        goto fail;
    }
    for (int i = 0; i < m->n_inputs; i++) t->in_t[i] = m->inputs[i];
    if ((st = plan(t))) goto fail;
    t->fingerprint = fingerprint(t);
    if (!plan_only) {
        if (t->n_threads > 1 && (st = ert_threadpool_create(t->n_threads, &t->pool)) != ERT_OK) {
            ert_set_error(ctx, st, "cannot start %d worker threads", t->n_threads);
            goto fail;
        }
        if ((st = bind(t))) goto fail;
    }
    t->o.pattern = NULL; /* the caller's strings are not kept past create */
    t->o.output = NULL;
    *out = t;
    return ERT_OK;
fail:
    ert_trainer_free(t);
    return st;
}

/* AUTO: CUDA when this build has it, a device answers and every node has a
 * CUDA kernel; otherwise the CPU (the reason is logged). */
static ert_status build_auto(const ert_model *m, const ert_trainer_options *opts, bool plan_only, ert_trainer **out) {
    if (!opts || opts->session.device != ERT_DEVICE_AUTO) return build(m, opts, plan_only, out);
    ert_trainer_options o = *opts;
    ert_status st = ERT_E_UNSUPPORTED;
    if (ert_cuda_backend_get()) {
        o.session.device = ERT_DEVICE_CUDA;
        if ((st = build(m, &o, plan_only, out)) == ERT_OK) return ERT_OK;
        ert_log(m->ctx, ERT_LOG_INFO, "training on the CPU: %s", ert_last_error(m->ctx));
    }
    o.session.device = ERT_DEVICE_CPU;
    return build(m, &o, plan_only, out);
}

ert_status ert_trainer_plan(const ert_model *m, const ert_trainer_options *o, ert_memory_report *out) {
    if (!m || !out) return ERT_E_ARG;
    ert_trainer *t;
    ert_status st = build_auto(m, o, true, &t);
    if (st) return st;
    *out = t->mem;
    ert_trainer_free(t);
    return ERT_OK;
}

ert_status ert_trainer_create(const ert_model *m, const ert_trainer_options *o, ert_trainer **out) {
    if (!m || !out) return m ? ert_set_error(m->ctx, ERT_E_ARG, "ert_trainer_create: NULL out") : ERT_E_ARG;
    return build_auto(m, o, false, out);
}

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ms (optional): each node's wall time, indexed by node */
static ert_status run_range(ert_trainer *t, int k0, int k1, float *ms) {
    for (int k = k0; k < k1; k++) {
        double t0 = ms ? wall_ms() : 0.0;
        ert_status st = ert_cpu_run_node(t->kptr[k]);
        if (ms) ms[k] = (float)(wall_ms() - t0);
        if (st != ERT_OK) {
            const tnode *n = &t->n[k];
            if (n->op == ERT_OP_LOSS && st == ERT_E_ARG)
                return ert_set_error(t->ctx, st, "target class index out of range [0, %lld)",
                                     (long long)t->t[t->out_t].dims[1]);
            int64_t pos, val, dim;
            if (st == ERT_E_ARG && ert_gather_bad_index(t->kptr[k], &pos, &val, &dim))
                return ert_set_error(t->ctx, st, "node '%s' (Gather): index %lld (at position %lld) out of range [-%lld, %lld)",
                                     n->name, (long long)val, (long long)pos, (long long)dim, (long long)dim);
            return ert_set_error(t->ctx, st, "node '%s' (%s) failed: %s", n->name, op_name(n->op), ert_status_str(st));
        }
    }
    return ERT_OK;
}

static void set_training(ert_trainer *t, bool on) {
    for (int k = 0; k < t->fwd_end; k++)
        if (t->n[k].op == ERT_OP_BATCHNORM_TRAIN || t->n[k].op == ERT_OP_DROPOUT_TRAIN) t->n[k].params.grad.training = on;
}

/* Device step: the whole step is one backend run (a CUDA graph after the
 * first); lr and the bias corrections go in through the staged hyper
 * tensor, the finite check happens on device (the optimizer kernels skip the
 * update) and is reported here from the copied-back loss and norm. */
/* Before anything runs, class indices are checked on the host (the CPU's
 * loss kernel would refuse them only after the forward had updated the
 * BatchNorm statistics; the device kernel could only leave a NaN), so a
 * refused step changes nothing. */
static ert_status check_target(ert_trainer *t) {
    if (t->o.loss.kind != ERT_LOSS_CROSS_ENTROPY) return ERT_OK;
    const ttensor *y = &t->t[t->target_t], *z = &t->t[t->out_t];
    const int64_t *v = y->host;
    int64_t n = (int64_t)(y->nbytes / sizeof(int64_t)), C = z->ndim > 1 ? z->dims[1] : 1;
    for (int64_t i = 0; v && i < n; i++)
        if (v[i] < 0 || v[i] >= C)
            return ert_set_error(t->ctx, ERT_E_ARG,
                                 "target class index out of range [0, %lld): target[%lld] = %lld (step %lld refused, "
                                 "nothing updated)",
                                 (long long)C, (long long)i, (long long)v[i], (long long)t->step);
    return ERT_OK;
}

static ert_status dev_step(ert_trainer *t, float *loss, float *ms) {
    ert_status st = check_target(t);
    if (st) return st;
    int64_t *sv = t->t[t->status_t].host;
    sv[0] = sv[1] = 0;
    float *h = t->t[t->hyper_t].host;
    const tnode *on = t->bwd_end < t->nn ? &t->n[t->bwd_end] : NULL;
    double k = (double)(t->step + 1);
    h[0] = ert_tr_lr_at(&t->o, t->step);
    h[1] = on ? (float)(1.0 - pow(on->params.optim.beta1, k)) : 1.0f;
    h[2] = on ? (float)(1.0 - pow(on->params.optim.beta2, k)) : 1.0f;
    int failed = -1;
    if (ms && !t->be->run_timed) return ert_set_error(t->ctx, ERT_E_UNSUPPORTED, "this backend cannot time nodes");
    st = ms ? t->be->run_timed(t->bctx, t->kptr, t->nn, &failed, ms) : t->be->run(t->bctx, t->kptr, t->nn, &failed);
    if (st) {
        if (failed >= 0 && failed < t->nn) {
            char why[256];
            snprintf(why, sizeof why, "%s", ert_last_error(t->ctx));
            ert_set_error(t->ctx, st, "node '%s' (%s) failed: %s", t->n[failed].name, op_name(t->n[failed].op), why);
        }
        return st;
    }
    if (sv[0]) { /* a GatherGrad index out of range: GRAD_NORM skipped every update (the scaler too) */
        int64_t ni = sv[0] - 1;
        const tnode *n = ni >= 0 && ni < t->nn ? &t->n[ni] : NULL;
        int64_t dim = -1;
        if (n && n->op == ERT_OP_GATHER_GRAD && n->n_out > 0 && n->out[0] >= 0) {
            const ttensor *dx = &t->t[n->out[0]];
            int64_t ax = n->params.gather.axis;
            if (ax >= 0 && ax < dx->ndim) dim = dx->dims[ax];
        }
        return ert_set_error(t->ctx, ERT_E_ARG,
                             "node '%s' (%s): index %lld out of range [-%lld, %lld) (step %lld refused: weights and "
                             "optimizer state not updated)",
                             n ? n->name : "?", n ? op_name(n->op) : "?", (long long)sv[1], (long long)dim,
                             (long long)dim, (long long)t->step);
    }
    const float *g = t->t[t->gnorm_t].host;
    float l = *(const float *)t->t[t->loss_t].host, gn = g[0];
    if (loss) *loss = l;
    if (t->scaler_t >= 0) {
        t->scale_now = g[2];
        t->skipped = (int64_t)g[3];
        if (isfinite(l) && !isfinite(gn)) return ERT_OK; /* gradient overflow: skipped, the scale halved */
    }
    if (!isfinite(l) || !isfinite(gn))
        return ert_set_error(t->ctx, ERT_E_ARG,
                             "step %lld skipped: loss %g, gradient norm %g (NaN/inf in the inputs, or a target class "
                             "out of range?)",
                             (long long)t->step, (double)l, (double)gn);
    t->step++;
    return ERT_OK;
}

static ert_status step(ert_trainer *t, float *loss, float *ms) {
    if (!t) return ERT_E_ARG;
    if (t->be) return dev_step(t, loss, ms);
    ert_status st = check_target(t);
    if (st) return st;
    set_training(t, true);
    st = run_range(t, 0, t->bwd_end, ms);
    if (st) return st;
    float l = *(const float *)t->t[t->loss_t].data, gn = ((const float *)t->t[t->gnorm_t].data)[0];
    if (loss) *loss = l;
    if (!isfinite(l) || !isfinite(gn))
        return ert_set_error(t->ctx, ERT_E_ARG, "step %lld skipped: loss %g, gradient norm %g (NaN/inf in the inputs?)",
                             (long long)t->step, (double)l, (double)gn);
    float lr = ert_tr_lr_at(&t->o, t->step);
    for (int k = t->bwd_end; k < t->nn; k++) {
        t->n[k].params.optim.lr = lr;
        t->n[k].params.optim.step = t->step;
    }
    if ((st = run_range(t, t->bwd_end, t->nn, ms))) return st;
    t->step++;
    return ERT_OK;
}

/* Calls that read or write the arena run with the trainer's running flag
 * held; a second thread gets ERT_E_STATE (busy_internal.h). */
ert_status ert_trainer_step(ert_trainer *t, float *loss) {
    if (!t) return ERT_E_ARG;
    ERT_BUSY_RETURN(&t->running, t->ctx, "trainer", step(t, loss, NULL));
}

ert_status ert_trainer_profile(ert_trainer *t, ert_profile_entry *out, int cap, int *n, float *loss) {
    if (!t || !n || (cap > 0 && !out)) return ERT_E_ARG;
    ert_status st = ert_busy_enter(&t->running, t->ctx, "trainer", __func__);
    if (st) return st;
    float *ms = calloc((size_t)t->nn + 1, sizeof *ms);
    if (!ms) {
        ert_busy_leave(&t->running);
        return ert_tr_oom(t);
    }
    st = step(t, loss, ms);
    ert_busy_leave(&t->running);
    *n = t->nn;
    for (int k = 0; k < t->nn && k < cap; k++) {
        out[k].node = t->n[k].name;
        out[k].op = op_name(t->n[k].op);
        out[k].ms = ms[k];
    }
    free(ms);
    return st;
}

static ert_status eval(ert_trainer *t, float *loss) {
    set_training(t, false);
    ert_status st = check_target(t);
    int failed = -1;
    if (st == ERT_OK && t->be && !t->be->run_eager)
        st = ert_set_error(t->ctx, ERT_E_UNSUPPORTED, "eval on %s", t->be->name);
    else if (st == ERT_OK)
        st = t->be ? t->be->run_eager(t->bctx, t->kptr, t->fwd_end, &failed) : run_range(t, 0, t->fwd_end, NULL);
    set_training(t, true);
    if (st) return st;
    if (loss) *loss = *(const float *)t->t[t->loss_t].host;
    return ERT_OK;
}

ert_status ert_trainer_eval(ert_trainer *t, float *loss) {
    if (!t) return ERT_E_ARG;
    ERT_BUSY_RETURN(&t->running, t->ctx, "trainer", eval(t, loss));
}

ert_status ert_trainer_memory(const ert_trainer *t, ert_memory_report *out) {
    if (!t || !out) return ERT_E_ARG;
    *out = t->mem;
    return ERT_OK;
}

int ert_trainer_n_inputs(const ert_trainer *t) { return t ? t->n_in : 0; }

static ert_status info_of(const ert_trainer *t, int32_t id, ert_tensor_info *out) {
    const ttensor *x = &t->t[id];
    memset(out, 0, sizeof *out);
    out->name = x->name;
    out->dtype = x->dtype;
    out->ndim = x->ndim;
    memcpy(out->dims, x->dims, sizeof out->dims);
    return ERT_OK;
}

ert_status ert_trainer_input_info(const ert_trainer *t, int i, ert_tensor_info *out) {
    if (!t || !out) return ERT_E_ARG;
    if (i < 0 || i >= t->n_in) return ert_set_error(t->ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, t->n_in);
    return info_of(t, t->in_t[i], out);
}

ert_status ert_trainer_input_data(ert_trainer *t, int i, void **data) {
    if (!t || !data) return ERT_E_ARG;
    if (i < 0 || i >= t->n_in) return ert_set_error(t->ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, t->n_in);
    *data = t->t[t->in_t[i]].host;
    return ERT_OK;
}

ert_status ert_trainer_target_data(ert_trainer *t, void **data) {
    if (!t || !data) return ERT_E_ARG;
    *data = t->t[t->target_t].host;
    return ERT_OK;
}

ert_status ert_trainer_target_info(const ert_trainer *t, ert_tensor_info *out) {
    if (!t || !out) return ERT_E_ARG;
    return info_of(t, t->target_t, out);
}

ert_status ert_trainer_output_data(ert_trainer *t, const void **data) {
    if (!t || !data) return ERT_E_ARG;
    *data = t->t[t->out_t].host;
    return ERT_OK;
}

ert_status ert_trainer_output_info(const ert_trainer *t, ert_tensor_info *out) {
    if (!t || !out) return ERT_E_ARG;
    return info_of(t, t->out_t, out);
}

int64_t ert_trainer_step_count(const ert_trainer *t) { return t ? t->step : 0; }
float ert_trainer_lr(const ert_trainer *t) { return t ? ert_tr_lr_at(&t->o, t->step) : 0.0f; }
int ert_trainer_n_trainable(const ert_trainer *t) { return t ? t->n_params : 0; }

int64_t ert_trainer_n_trainable_elems(const ert_trainer *t) {
    int64_t s = 0;
    for (int k = 0; t && k < t->n_params; k++) {
        int64_t ne = 0;
        ert_dims_nelems(t->t[t->params[k]].ndim, t->t[t->params[k]].dims, &ne);
        s += ne;
    }
    return s;
}

/* ------------------------------------------------------------------ introspection (tests) */

ert_status ert_trainer_param(ert_trainer *t, const char *name, float **value, const float **grad, int64_t *n) {
    if (!t || !name) return ERT_E_ARG;
    for (int k = 0; k < t->n_params; k++) {
        const ttensor *x = &t->t[t->params[k]];
        if (strcmp(x->name, name) != 0) continue;
        for (int j = t->bwd_end; j < t->nn; j++)
            if (t->n[j].in[0] == t->params[k]) {
                if (value) *value = x->data;
                if (grad) *grad = t->t[t->n[j].in[1]].data;
                if (n) ert_dims_nelems(x->ndim, x->dims, n);
                return ERT_OK;
            }
    }
    return ert_set_error(t->ctx, ERT_E_NOT_FOUND, "no trainable parameter '%s'", name);
}

/* Planner invariant for tests: no two planned blocks overlap in time and
 * space, and every tensor with storage lies inside the arena. */
const ert_plan_block *ert_trainer_plan_blocks(const ert_trainer *t, int *n) {
    *n = t->n_blocks;
    return t->blocks;
}

bool ert_trainer_plan_check(const ert_trainer *t, char *why, size_t cap) {
    if (!ert_plan_check(t->blocks, t->n_blocks, why, cap)) return false;
    for (int i = 0; i < t->nt; i++) {
        const ttensor *x = &t->t[i];
        if (!x->data || x->mem == TM_CONST) continue;
        const uint8_t *p = x->data;
        if (p < t->arena || p + x->nbytes > t->arena + t->mem.total_bytes) {
            snprintf(why, cap, "tensor '%s' outside the arena", x->name);
            return false;
        }
    }
    return true;
}

static ert_status param_copy(ert_trainer *t, const char *name, float *value, float *grad, int64_t *n) {
    float *v = NULL;
    const float *g = NULL;
    int64_t cnt = 0;
    ert_status st = ert_trainer_param(t, name, &v, &g, &cnt);
    if (st) return st;
    size_t nb = (size_t)cnt * sizeof(float);
    if (t->be) {
        if (!t->be->download) return ERT_E_UNSUPPORTED;
        if (value && (st = t->be->download(t->bctx, value, v, nb))) return st;
        if (grad && g && (st = t->be->download(t->bctx, grad, g, nb))) return st;
    } else {
        if (value) memcpy(value, v, nb);
        if (grad && g) memcpy(grad, g, nb);
    }
    *n = cnt;
    return ERT_OK;
}

ert_status ert_trainer_param_copy(ert_trainer *t, const char *name, float *value, float *grad, int64_t *n) {
    if (!t || !name || !n) return ERT_E_ARG;
    ERT_BUSY_RETURN(&t->running, t->ctx, "trainer", param_copy(t, name, value, grad, n));
}

float ert_trainer_loss_scale(const ert_trainer *t) { return t ? t->scale_now : 1.0f; }
int64_t ert_trainer_skipped_steps(const ert_trainer *t) { return t ? t->skipped : 0; }
ert_device ert_trainer_device(const ert_trainer *t) { return t && t->be ? t->be->device : ERT_DEVICE_CPU; }

/*
 * Trainer: a model planned for training, on the CPU or a CUDA device (the
 * backend table of either; the CPU runs every node through ert_cpu_backend).
 *
 * Why its own node list and not the session's: inference folds BatchNorm
 * into Conv, fuses epilogues, folds every all-constant node and treats
 * weights as immutable (used in place from the mmap'd file). Training needs
 * the opposite for parameters, plus phases (forward, backward, optimizer)
 * and more memory categories. Shared with the session: op prepare
 * (core/ops), runtime/graph.h (sizes, kernel views, constant folding and
 * the CPU run through the backend table, the channels-last op predicate),
 * the planner (planner.c) and the backend tables.
 * Files (runtime/train/): trainer.c steps 1-3 and 7-8 and the public calls;
 * frozen.c 3a; amp.c 3b; stem.c 3c; emit.c 4 and 6; autodiff.c 5;
 * checkpoint.c checkpoints and export.
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
 *   5. Autodiff (train/autodiff.c) appends the backward nodes.
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
 * ert_tr_amp_rewrite() wraps every eligible Conv in Casts (x and the f32 master
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
#include "graph.h"

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

static bool set_nbytes(ttensor *x) { return ert_graph_nbytes(x->dtype, x->ndim, x->dims, &x->nbytes); }

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


static void fill_view(ert_tview *v, const ttensor *x, void *data) { ert_graph_view(v, x->dtype, x->ndim, x->dims, data); }

bool ert_tr_is_imm(const ttensor *x) { return x->mem == TM_CONST || x->mem == TM_FOLDED; }

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
    ert_status st = ert_graph_check_input_shapes(t->ctx, m, o);
    if (st != ERT_OK) return st;
    for (int i = 0; i < m->n_inputs; i++) {
        ttensor *x = &t->t[m->inputs[i]];
        if ((st = ert_graph_input_dims(t->ctx, o, x->name, x->ndim, x->dims)) != ERT_OK) return st;
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

ert_status ert_tr_fold_node(ert_trainer *t, tnode *n) {
    ert_tview v[128]; /* infer() admits at most 64 inputs and 64 outputs */
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
    ert_status st = ert_graph_fold(t->ctx, n->name, n->op, &n->params, n->n_in, n->n_out, v, n->ws_bytes);
    if (st != ERT_OK) return st;
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
        if (ert_tr_is_imm(r) && r->dtype == ERT_DTYPE_F32 && r->cdata) return *(const float *)r->cdata;
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
    ert_tinfo tin[ERT_GRAPH_MAX_IO], tout[ERT_GRAPH_MAX_IO];
    ert_status st0 = bn_stat_outputs(t);
    if (st0) return st0;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *mn = &m->nodes[i];
        if ((st0 = ert_graph_check_node_io(t->ctx, mn)) != ERT_OK) return st0;
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
            ert_graph_tinfo(&tin[k], x->dtype, x->ndim, x->dims, ert_tr_is_imm(x) ? x->cdata : NULL);
            if (!ert_tr_is_imm(x)) all_imm = false;
        }
        for (int k = 0; k < mn->n_out; k++) n->out[k] = mn->out[k];
        bool fold_ok;
        ert_status st = ert_graph_prepare(t->ctx, mn, t->n_threads, tin, tout, &n->params, &n->ws_bytes, &fold_ok);
        if (st != ERT_OK) return st;
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
        if (fold_ok && (all_imm || n->op == ERT_OP_SHAPE || n->op == ERT_OP_SIZE)) {
            if ((st = ert_tr_fold_node(t, n))) return st;
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
        if (!ert_graph_is_copy_op(n->op) || n->n_out < 1 || n->in[0] < 0 || n->out[0] < 0) continue;
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
                                 ert_graph_op_name(n->op), n->phase == PH_FWD ? "forward" : "training",
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
                ert_set_error(t->ctx, st, "node '%s' (%s): %s", t->n[k].name, ert_graph_op_name(t->n[k].op), ert_status_str(st));
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
    char parts[200];
    snprintf(parts, sizeof parts, "weights %zu, gradients %zu, optimizer %zu, io %zu, activations %zu", t->w_bytes,
             t->g_bytes, t->s_bytes, t->io_bytes, t->act_bytes);
    ert_status st0 = ert_graph_arena(t->ctx, t->be, t->bctx, o, total, parts, &t->arena, &t->arena_bytes,
                                     &t->arena_owned);
    if (st0 != ERT_OK) return st0;
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
    if ((st = fix_inputs(t)) || (st = select_params(t)) || (st = infer(t)) || (st = ert_tr_fold_frozen(t)) || (st = ert_tr_fuse_bn_relu(t)) ||
        (st = ert_tr_amp_rewrite(t)) || (st = ert_tr_prefix_channels_last(t)) || (st = ert_tr_chunk_stem(t)) ||
        (st = ert_tr_add_loss(t)))
        goto fail;
    t->fwd_end = t->nn;
    {
        int32_t *grads = malloc((size_t)(t->n_params + 1) * sizeof *grads);
        if (!grads) {
            st = ert_tr_oom(t);
            goto fail;
        }
        st = ert_autodiff(t, grads);
        if (st == ERT_OK) st = ert_tr_recompute(t);
        if (st == ERT_OK) st = ert_tr_add_optim(t, grads);
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
        ert_status st = ert_graph_cpu_run(t->kptr[k]);
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
            return ert_set_error(t->ctx, st, "node '%s' (%s) failed: %s", n->name, ert_graph_op_name(n->op), ert_status_str(st));
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
            ert_set_error(t->ctx, st, "node '%s' (%s) failed: %s", t->n[failed].name, ert_graph_op_name(t->n[failed].op), why);
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
                             n ? n->name : "?", n ? ert_graph_op_name(n->op) : "?", (long long)sv[1], (long long)dim,
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
        out[k].op = ert_graph_op_name(t->n[k].op);
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

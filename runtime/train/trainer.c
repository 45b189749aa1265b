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

/* Step 1: graph inputs are io */
static ert_status fix_inputs(ert_trainer *t) {
    const ert_model *m = t->model;
    ert_status st = ert_graph_fix_inputs(&t->g, m, &t->o.session);
    for (int i = 0; st == ERT_OK && i < m->n_inputs; i++) t->g.t[m->inputs[i]].mem = ERT_MEM_IO;
    return st;
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
            ert_gtensor *x = &t->g.t[id];
            int64_t ne = 0;
            ert_dims_nelems(x->ndim, x->dims, &ne);
            if (eltwise(nd->op) && ne == 1) continue;
            if (x->dtype != ERT_DTYPE_F32 && x->dtype != ERT_DTYPE_F16 && x->dtype != ERT_DTYPE_BF16)
                continue; /* integer data (shape pieces in a Concat): not a parameter */
            if (x->dtype != ERT_DTYPE_F32)
                return ert_set_error(t->g.ctx, ERT_E_UNSUPPORTED, "weight '%s': training needs f32 parameters, it is %s",
                                     x->name, ert_dtype_name(x->dtype));
            x->candidate = true;
            has = true;
        }
        if (has) n_layers++;
        if (nd->op == ERT_OP_BATCHNORM && t->o.bn == ERT_BN_TRAIN)
            for (int k = 3; k < 5 && k < nd->n_in; k++)
                if (nd->in[k] >= 0 && m->tensors[nd->in[k]].role == ERT_ROLE_WEIGHT) t->g.t[nd->in[k]].mem = ERT_MEM_PARAM;
    }
    int layer = 0, first_layer = n_layers - t->o.last_n;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *nd = &m->nodes[i];
        bool has = false;
        for (int k = 0; k < nd->n_in; k++) {
            int32_t id = nd->in[k];
            if (id < 0 || !t->g.t[id].candidate || !ert_ad_diff_slot(nd->op, k)) continue;
            has = true;
            ert_gtensor *x = &t->g.t[id];
            switch (t->o.trainable) {
            case ERT_TRAIN_ALL: x->trainable = true; break;
            case ERT_TRAIN_PATTERN: x->trainable = x->trainable || fnmatch(t->o.pattern, x->name, 0) == 0; break;
            case ERT_TRAIN_LAST_N: x->trainable = x->trainable || layer >= first_layer; break;
            }
        }
        if (has) layer++;
    }
    t->n_params = 0;
    t->params = malloc((size_t)(t->g.nt + 1) * sizeof *t->params);
    if (!t->params) return ert_graph_oom(&t->g);
    for (int i = 0; i < t->g.nt; i++) {
        ert_gtensor *x = &t->g.t[i];
        if (x->candidate) x->mem = ERT_MEM_PARAM;
        if (x->trainable) t->params[t->n_params++] = i;
    }
    if (t->n_params == 0) {
        if (t->o.trainable == ERT_TRAIN_PATTERN)
            return ert_set_error(t->g.ctx, ERT_E_NOT_FOUND, "trainable pattern '%s' matches no parameter", t->o.pattern);
        return ert_set_error(t->g.ctx, ERT_E_NOT_FOUND, "the model has no trainable parameter");
    }
    return ERT_OK;
}

/* Dropout ratio of a model node: input 1 (opset 12+) or attribute (older). */
static float dropout_ratio(const ert_trainer *t, const ert_node *mn) {
    if (mn->n_in > 1 && mn->in[1] >= 0) {
        const ert_gtensor *r = &t->g.t[mn->in[1]];
        if (ert_graph_is_imm(r) && r->dtype == ERT_DTYPE_F32 && r->cdata) return *(const float *)r->cdata;
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
    if (!read) return ert_graph_oom(&t->g);
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
            st = ert_set_error(t->g.ctx, ERT_E_UNSUPPORTED,
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
    ert_status st = bn_stat_outputs(t);
    if (st) return st;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *mn = &m->nodes[i];
        ert_gnode *n;
        if ((st = ert_graph_infer_node(&t->g, mn, NULL, &n))) return st;
        if (!n) continue; /* folded */
        if (n->op == ERT_OP_BATCHNORM && t->o.bn == ERT_BN_FROZEN) {
            /* frozen: the running statistics, whatever training_mode says (its
             * gradient rule and the conv folding assume them); no running
             * outputs (bn_stat_outputs: nothing reads them) */
            n->params.norm.training = false;
            n->n_out = 1;
        } else if (n->op == ERT_OP_BATCHNORM && t->o.bn == ERT_BN_TRAIN) {
            /* (x, scale, B, rmean, rvar) -> (y, mean, invstd) */
            if (t->g.t[n->in[3]].mem != ERT_MEM_PARAM || t->g.t[n->in[4]].mem != ERT_MEM_PARAM)
                return ert_set_error(t->g.ctx, ERT_E_UNSUPPORTED, "node '%s': running mean/var must be weights", mn->name);
            int32_t y = n->out[0];
            int64_t c = t->g.t[n->in[0]].dims[1];
            char nm[256];
            snprintf(nm, sizeof nm, "%s.mean", mn->name);
            int32_t mu = ert_graph_new_tensor(&t->g, nm, ERT_DTYPE_F32, 1, &c);
            snprintf(nm, sizeof nm, "%s.invstd", mn->name);
            int32_t is = ert_graph_new_tensor(&t->g, nm, ERT_DTYPE_F32, 1, &c);
            if (mu < 0 || is < 0) return ert_graph_oom(&t->g);
            n = &t->g.n[t->g.nn - 1];
            int32_t *io = realloc(n->in, (size_t)(5 + 3) * sizeof *io);
            if (!io) return ert_graph_oom(&t->g);
            n->in = io;
            n->out = io + 5;
            n->n_out = 3;
            n->out[0] = y, n->out[1] = mu, n->out[2] = is;
            t->g.t[mu].fwd = t->g.t[is].fwd = true;
            float eps = n->params.norm.epsilon, mom = n->params.norm.momentum;
            memset(&n->params, 0, sizeof n->params);
            n->params.grad.eps = eps;
            n->params.grad.momentum = mom;
            n->params.grad.training = true;
            n->op = ERT_OP_BATCHNORM_TRAIN;
        } else if (n->op == ERT_OP_DROPOUT) {
            float ratio = dropout_ratio(t, mn);
            if (ratio > 0.0f) {
                if (ratio >= 1.0f) return ert_set_error(t->g.ctx, ERT_E_ARG, "node '%s': dropout ratio >= 1", mn->name);
                if (mn->n_out > 1 && mn->out[1] >= 0)
                    return ert_set_error(t->g.ctx, ERT_E_UNSUPPORTED, "node '%s': Dropout mask output in training",
                                         mn->name);
                int32_t y = n->out[0], x = n->in[0];
                char nm[256];
                snprintf(nm, sizeof nm, "%s.mask", mn->name);
                int32_t mk = ert_graph_new_tensor(&t->g, nm, ERT_DTYPE_F32, t->g.t[y].ndim, t->g.t[y].dims);
                if (mk < 0) return ert_graph_oom(&t->g);
                t->g.t[mk].fwd = true;
                n = &t->g.n[t->g.nn - 1];
                int32_t *io = malloc(4 * sizeof *io);
                if (!io) return ert_graph_oom(&t->g);
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
    if (!t->g.ctx || !t->g.ctx->log || t->g.ctx->log_level < ERT_LOG_DEBUG || t->g.nn <= 0) return;
    int best = 0;
    size_t most = 0;
    for (int k = 0; k < t->g.nn; k++) {
        size_t live = 0;
        for (int b = 0; b < t->g.n_blocks; b++)
            if (t->g.blocks[b].first <= k && k <= t->g.blocks[b].last) live += t->g.blocks[b].size;
        if (live > most) most = live, best = k;
    }
    ert_log(t->g.ctx, ERT_LOG_DEBUG, "trainer plan: %zu activation bytes live at node %d '%s' (of %d; backward from %d)",
            most, best, t->g.n[best].name, t->g.nn, t->fwd_end);
    size_t floor = most / 100, shown = 0; /* tensors of 1% of the peak or more */
    for (int i = 0; i < t->g.nt && shown < 48; i++) {
        const ert_gtensor *x = &t->g.t[i];
        if (x->mem != ERT_MEM_ACT || x->alias >= 0 || x->first < 0 || x->first > best || x->last < best ||
            x->nbytes < floor)
            continue;
        shown++;
        ert_log(t->g.ctx, ERT_LOG_DEBUG, "  live %9zu B %-6s '%s' (nodes %d..%d%s)", x->nbytes, ert_dtype_name(x->dtype),
                x->name, x->first, x->last,
                x->first < t->fwd_end && x->last >= t->fwd_end ? ", saved for the backward" : "");
    }
    for (int k = 0; k < t->g.nn; k++)
        if (t->g.n[k].ws_bytes >= ((size_t)1 << 20))
            ert_log(t->g.ctx, ERT_LOG_DEBUG, "  workspace %9zu B node %d '%s'%s", t->g.n[k].ws_bytes, k, t->g.n[k].name,
                    k == best ? " (at the peak)" : "");
}

/* The backend's workspace for node n (shapes only). budget > 0: the most it
 * may take without raising the arena's peak; a backend that can choose
 * (cuDNN's convs) takes its fastest algorithm within it, unless none fits or
 * that one is much slower than its fastest. */
static ert_status node_ws(ert_trainer *t, const ert_gnode *n, size_t budget, size_t *bytes) {
    *bytes = 0;
    if (!t->g.be || !t->g.be->node_workspace) return ERT_OK;
    int cap = n->n_in + n->n_out + 1;
    ert_tview *v = calloc((size_t)cap, sizeof *v);
    if (!v) return ert_graph_oom(&t->g);
    ert_kargs a;
    ert_graph_shape_args(&t->g, n, v, cap, &a);
    a.workspace_bytes = budget;
    ert_status st = t->g.be->node_workspace(t->g.bctx, &a, bytes);
    free(v);
    return st;
}

/* Workspaces never raise the peak when they need not: with the lifetimes
 * known, a node's headroom is the activation peak minus the bytes live at
 * it; a node whose workspace exceeds that asks the backend again within it
 * (ResNet-18 AMP b32 on an H200: one backward conv of layer 2 wanted 155 MB
 * at the very step where the saved activations peak). */
static ert_status ws_budget(ert_trainer *t) {
    if (!t->g.be || t->g.nn <= 0) return ERT_OK;
    int64_t *d = calloc((size_t)t->g.nn + 1, sizeof *d);
    if (!d) return ert_graph_oom(&t->g);
    for (int i = 0; i < t->g.nt; i++) {
        const ert_gtensor *x = &t->g.t[i];
        if (x->mem != ERT_MEM_ACT || x->first < 0 || x->alias >= 0) continue;
        int64_t b = (int64_t)ert_align_up(x->nbytes ? x->nbytes : 1, ERT_ALIGN);
        d[x->first] += b;
        d[x->last + 1] -= b;
    }
    int64_t live = 0, peak = 0;
    for (int k = 0; k < t->g.nn; k++) {
        live += d[k];
        d[k] = live;
        if (live > peak) peak = live;
    }
    ert_status st = ERT_OK;
    int64_t slack = t->o.workspace_slack ? t->o.workspace_slack : (peak / 8 > (32 << 20) ? peak / 8 : (32 << 20));
    for (int k = 0; k < t->g.nn && st == ERT_OK && slack >= 0; k++) {
        ert_gnode *n = &t->g.n[k];
        size_t room = (size_t)(peak - d[k] + slack), ws = 0;
        if (n->ws_bytes <= room) continue;
        if ((st = node_ws(t, n, room ? room : 1, &ws)) == ERT_OK && ws < n->ws_bytes) {
            ert_log(t->g.ctx, ERT_LOG_DEBUG, "node '%s': workspace %zu -> %zu bytes (room under the peak + slack: %zu)",
                    n->name, n->ws_bytes, ws, room);
            n->ws_bytes = ws;
        }
    }
    free(d);
    return st;
}

static ert_status plan(ert_trainer *t) {
    /* Reshape-like outputs share their input's storage when the input dies
     * there (the copy kernel then has nothing to move) */
    ert_graph_lifetimes(&t->g, NULL, t->g.nn);
    ert_graph_alias_copies(&t->g, NULL, t->g.nn);
    ert_graph_alias_extend(&t->g);
    ert_status st = ws_budget(t);
    if (st) return st;
    size_t peak, lb, ws_max, saved = 0;
    if ((st = ert_graph_plan_blocks(&t->g, NULL, t->g.nn, &peak, &lb, &ws_max))) return st;
    for (int i = 0; i < t->g.nt; i++) { /* activations the backward reads */
        const ert_gtensor *x = &t->g.t[i];
        if (x->block >= 0 && x->first < t->fwd_end && x->last >= t->fwd_end) saved += ert_align_up(x->nbytes, ERT_ALIGN);
    }
    /* fixed regions; a tensor nobody reads or writes gets no room */
    size_t w = 0, g = 0, s = 0, io = 0;
    for (int i = 0; i < t->g.nt; i++) {
        ert_gtensor *x = &t->g.t[i];
        size_t *r = NULL;
        switch (x->mem) {
        case ERT_MEM_PARAM: case ERT_MEM_OWNED: r = x->last >= 0 ? &w : NULL; break;
        case ERT_MEM_CONST: r = t->g.be && x->last >= 0 ? &w : NULL; break; /* device: copied in once */
        case ERT_MEM_GRAD: r = &g; break;
        case ERT_MEM_STATE: r = &s; break;
        case ERT_MEM_IO: r = &io; break;
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
    for (int k = 0; k < t->g.nn; k++) {
        ert_gnode *n = &t->g.n[k];
        ert_dtype dt = ERT_DTYPE_F32;
        if (n->n_in > 0 && n->in[0] >= 0) dt = t->g.t[n->in[0]].dtype;
        else if (n->n_out > 0 && n->out[0] >= 0) dt = t->g.t[n->out[0]].dtype;
        if (!t->g.be->supports(n->op, dt))
            return ert_set_error(t->g.ctx, ERT_E_UNSUPPORTED, "node '%s' (%s): no %s kernel for %s on %s", n->name,
                                 ert_graph_op_name(n->op), n->phase == ERT_PHASE_FWD ? "forward" : "training",
                                 ert_dtype_name(dt), t->g.be->name);
    }
    for (int k = 0; k < t->g.nn; k++) {
        ert_status st = node_ws(t, &t->g.n[k], 0, &t->g.n[k].ws_bytes);
        if (st) return st;
    }
    return ERT_OK;
}

/* Arena pointers are device addresses: copy parameters, constants and the
 * RNG seed in once, zero the gradient/state/io regions, map the io region to
 * the user's host mirror. */
static ert_status dev_fill(ert_trainer *t, uint8_t *wb, uint8_t *iob) {
    const ert_backend *be = t->g.be;
    ert_status st;
    size_t zn = t->g_bytes + t->s_bytes + t->io_bytes;
    if (zn) {
        void *z = calloc(1, zn);
        if (!z) return ert_graph_oom(&t->g);
        st = be->upload(t->g.bctx, wb + t->w_bytes, z, zn);
        free(z);
        if (st) return st;
    }
    for (int i = 0; i < t->g.nt; i++) {
        ert_gtensor *x = &t->g.t[i];
        if ((x->mem == ERT_MEM_PARAM || x->mem == ERT_MEM_OWNED || x->mem == ERT_MEM_CONST) && x->last >= 0 && x->data &&
            (st = be->upload(t->g.bctx, x->data, x->cdata, x->nbytes)))
            return st;
    }
    if (t->rng_t >= 0 && t->g.t[t->rng_t].data) {
        uint64_t seed = t->o.seed ? t->o.seed : 0x5eed5eed5eedull;
        if ((st = be->upload(t->g.bctx, t->g.t[t->rng_t].data, &seed, sizeof seed))) return st;
    }
    if (t->scaler_t >= 0 && t->g.t[t->scaler_t].data) {
        float s0[3] = {t->scale_now, 0.0f, 0.0f};
        if ((st = be->upload(t->g.bctx, t->g.t[t->scaler_t].data, s0, sizeof s0))) return st;
    }
    void *h = iob;
    if (t->io_bytes && (st = be->io_host(t->g.bctx, iob, t->io_bytes, &h))) return st;
    t->io_host = h;
    for (int i = 0; i < t->g.nt; i++)
        if (t->g.t[i].mem == ERT_MEM_IO && t->g.t[i].data) t->g.t[i].host = (uint8_t *)h + t->g.t[i].offset;
    return ERT_OK;
}

/* After the kernel arguments: per-node backend state (cuDNN descriptors and
 * algorithms) and the step's copies: inputs, target, hyper and status in;
 * loss, gradient norm, output and status back. */
static ert_status dev_bind(ert_trainer *t, uint8_t *iob) {
    ert_status st;
    t->bound = true;
    for (int k = 0; k < t->g.nn; k++)
        if (t->g.be->bind_node && (st = t->g.be->bind_node(t->g.bctx, &t->g.n[k].args))) {
            if (t->g.ctx->err[0] == 0)
                ert_set_error(t->g.ctx, st, "node '%s' (%s): %s", t->g.n[k].name, ert_graph_op_name(t->g.n[k].op), ert_status_str(st));
            return st;
        }
    /* the end of the backend's create work: it frees what only that needed */
    if (t->g.be->plan_cache_save) t->g.be->plan_cache_save(t->g.bctx);
    if (t->io_host == (void *)iob || !t->g.be->bind_io) return ERT_OK; /* the user writes the io region itself */
    ert_io_copy *in = calloc((size_t)t->g.n_inputs + 3, sizeof *in), out[4];
    if (!in) return ert_graph_oom(&t->g);
    int ni = 0;
    for (int i = 0; i < t->g.n_inputs + 3; i++) {
        ert_gtensor *x = &t->g.t[i < t->g.n_inputs    ? t->g.inputs[i]
                           : i == t->g.n_inputs ? t->target_t
                           : i == t->g.n_inputs + 1 ? t->hyper_t
                                              : t->status_t];
        if (x->data) in[ni++] = (ert_io_copy){.host = x->host, .dev = x->data, .bytes = x->nbytes};
    }
    int32_t oid[4] = {t->loss_t, t->gnorm_t, t->out_t, t->status_t};
    for (int i = 0; i < 4; i++) {
        ert_gtensor *x = &t->g.t[oid[i]];
        out[i] = (ert_io_copy){.host = x->host, .dev = x->data, .bytes = x->nbytes};
    }
    st = t->g.be->bind_io(t->g.bctx, in, ni, out, 4);
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
    ert_status st0 = ert_graph_arena(t->g.ctx, t->g.be, t->g.bctx, o, total, parts, &t->arena, &t->arena_bytes,
                                     &t->arena_owned);
    if (st0 != ERT_OK) return st0;
    uint8_t *wb = t->arena, *gb = wb + t->w_bytes, *sb = gb + t->g_bytes, *iob = sb + t->s_bytes, *ab = iob + t->io_bytes;
    if (!t->g.be) memset(gb, 0, t->g_bytes + t->s_bytes + t->io_bytes);
    for (int i = 0; i < t->g.nt; i++) {
        ert_gtensor *x = &t->g.t[i];
        switch (x->mem) {
        case ERT_MEM_CONST:
            if (t->g.be) x->data = x->last >= 0 ? wb + x->offset : NULL;
            else x->data = (void *)x->cdata;
            break;
        case ERT_MEM_PARAM: case ERT_MEM_OWNED:
            if (x->last < 0) break;
            x->data = wb + x->offset;
            if (!t->g.be) memcpy(x->data, x->cdata, x->nbytes);
            break;
        case ERT_MEM_GRAD: x->data = gb + x->offset; break;
        case ERT_MEM_STATE: x->data = sb + x->offset; break;
        case ERT_MEM_IO: x->data = iob + x->offset; break;
        case ERT_MEM_ACT: if (x->block >= 0) x->data = ab + t->g.blocks[x->block].offset; break;
        default: break;
        }
    }
    ert_graph_resolve_aliases(&t->g);
    for (int i = 0; i < t->g.nt; i++) t->g.t[i].host = t->g.t[i].data;
    if (t->g.be) {
        ert_status st = dev_fill(t, wb, iob);
        if (st) return st;
    }
    for (int i = 0; i < t->g.nt; i++) {
        free(t->g.t[i].owned);
        t->g.t[i].owned = NULL;
        if (t->g.t[i].mem == ERT_MEM_OWNED) t->g.t[i].cdata = t->g.t[i].data;
    }
    if (t->rng_t >= 0 && !t->g.be) *(uint64_t *)t->g.t[t->rng_t].data = t->o.seed ? t->o.seed : 0x5eed5eed5eedull;
    t->kptr = calloc((size_t)t->g.nn + 1, sizeof *t->kptr);
    if (!t->kptr) return ert_graph_oom(&t->g);
    for (int k = 0; k < t->g.nn; k++) {
        ert_gnode *n = &t->g.n[k];
        ert_status st = ert_graph_node_args(&t->g, n, t->g.be ? NULL : t->g.pool, ab);
        if (st) return st;
        t->kptr[k] = &n->args;
        if (n->op == ERT_OP_GATHER_GRAD) n->params.gather.tag = k + 1; /* see dev_status */
    }
    return t->g.be ? dev_bind(t, iob) : ERT_OK;
}

/* ------------------------------------------------------------------ public */

void ert_trainer_free(ert_trainer *t) {
    if (!t) return;
    if (t->g.be) {
        for (int k = 0; t->bound && k < t->g.nn; k++)
            if (t->g.be->release_node) t->g.be->release_node(t->g.bctx, &t->g.n[k].args);
        if (t->io_host && t->g.be->io_host_free && t->io_bytes)
            t->g.be->io_host_free(t->g.bctx, t->io_host, t->arena + t->w_bytes + t->g_bytes + t->s_bytes);
        if (t->arena_owned && t->arena) t->g.be->arena_free(t->g.bctx, t->arena);
        t->arena_owned = false;
        t->g.be->release(t->g.bctx);
    }
    free(t->params);
    free(t->kptr);
    free(t->class_weights);
    if (t->arena_owned) free(t->arena);
    ert_threadpool_free(t->g.pool);
    ert_graph_release(&t->g);
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
    for (int i = 0; i < t->g.nt; i++) {
        const ert_gtensor *x = &t->g.t[i];
        /* the gradient norm is state on the CPU, io on a device: not checkpointed */
        /* candidates: also a frozen filter read in place (ERT_MEM_CONST), so the print is the same either way */
        if ((x->mem != ERT_MEM_PARAM && x->mem != ERT_MEM_STATE && !x->candidate) || i == t->gnorm_t) continue;
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
    t->g.ctx = ctx;
    t->g.kc = ert_kernel_choice_of(ctx ? &ctx->kc : NULL);
    t->g.what = "trainer";
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
    t->g.n_threads = o->session.n_threads > 0 ? o->session.n_threads : 1;
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
        t->g.be = be;
        t->g.bctx = bctx;
    }
    if (o->loss.class_weights) {
        if (o->loss.n_class_weights < 1) {
            st = ert_set_error(ctx, ERT_E_ARG, "class_weights given with n_class_weights %d", o->loss.n_class_weights);
            goto fail;
        }
        t->class_weights = malloc((size_t)o->loss.n_class_weights * sizeof(float));
        if (!t->class_weights) {
            st = ert_graph_oom(&t->g);
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
    if ((st = ert_graph_from_model(&t->g, m))) goto fail;
    {
        int64_t one = 1;
        t->rng_t = ert_graph_new_tensor(&t->g, "ert.train.rng", ERT_DTYPE_I64, 1, &one); /* u64 state, stored as 8 bytes */
        if (t->rng_t < 0) {
            st = ert_graph_oom(&t->g);
            goto fail;
        }
        t->g.t[t->rng_t].mem = ERT_MEM_STATE;
    }
    if ((st = fix_inputs(t)) || (st = select_params(t)) || (st = infer(t)) || (st = ert_tr_fold_frozen(t)) || (st = ert_tr_fuse_bn_relu(t)) ||
        (st = ert_tr_amp_rewrite(t)) || (st = ert_tr_prefix_channels_last(t)) || (st = ert_tr_chunk_stem(t)) ||
        (st = ert_tr_add_loss(t)))
        goto fail;
    t->fwd_end = t->g.nn;
    {
        int32_t *grads = malloc((size_t)(t->n_params + 1) * sizeof *grads);
        if (!grads) {
            st = ert_graph_oom(&t->g);
            goto fail;
        }
        st = ert_autodiff(t, grads);
        if (st == ERT_OK) st = ert_tr_recompute(t);
        if (st == ERT_OK) st = ert_tr_add_optim(t, grads);
        free(grads);
        if (st) goto fail;
    }
    if (t->g.be && (st = dev_prepare(t))) goto fail;
    t->g.n_inputs = m->n_inputs;
    t->g.inputs = malloc((size_t)(m->n_inputs + 1) * sizeof *t->g.inputs);
    if (!t->g.inputs) {
        st = ert_graph_oom(&t->g);
        goto fail;
    }
    for (int i = 0; i < m->n_inputs; i++) t->g.inputs[i] = m->inputs[i];
    if ((st = plan(t))) goto fail;
    t->fingerprint = fingerprint(t);
    if (!plan_only) {
        if (t->g.n_threads > 1 && (st = ert_threadpool_create(t->g.n_threads, &t->g.pool)) != ERT_OK) {
            ert_set_error(ctx, st, "cannot start %d worker threads", t->g.n_threads);
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
            const ert_gnode *n = &t->g.n[k];
            if (n->op == ERT_OP_LOSS && st == ERT_E_ARG)
                return ert_set_error(t->g.ctx, st, "target class index out of range [0, %lld)",
                                     (long long)t->g.t[t->out_t].dims[1]);
            int64_t pos, val, dim;
            if (st == ERT_E_ARG && ert_gather_bad_index(t->kptr[k], &pos, &val, &dim))
                return ert_set_error(t->g.ctx, st, "node '%s' (Gather): index %lld (at position %lld) out of range [-%lld, %lld)",
                                     n->name, (long long)val, (long long)pos, (long long)dim, (long long)dim);
            return ert_set_error(t->g.ctx, st, "node '%s' (%s) failed: %s", n->name, ert_graph_op_name(n->op), ert_status_str(st));
        }
    }
    return ERT_OK;
}

static void set_training(ert_trainer *t, bool on) {
    for (int k = 0; k < t->fwd_end; k++)
        if (t->g.n[k].op == ERT_OP_BATCHNORM_TRAIN || t->g.n[k].op == ERT_OP_DROPOUT_TRAIN) t->g.n[k].params.grad.training = on;
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
    const ert_gtensor *y = &t->g.t[t->target_t], *z = &t->g.t[t->out_t];
    const int64_t *v = y->host;
    int64_t n = (int64_t)(y->nbytes / sizeof(int64_t)), C = z->ndim > 1 ? z->dims[1] : 1;
    for (int64_t i = 0; v && i < n; i++)
        if (v[i] < 0 || v[i] >= C)
            return ert_set_error(t->g.ctx, ERT_E_ARG,
                                 "target class index out of range [0, %lld): target[%lld] = %lld (step %lld refused, "
                                 "nothing updated)",
                                 (long long)C, (long long)i, (long long)v[i], (long long)t->step);
    return ERT_OK;
}

static ert_status dev_step(ert_trainer *t, float *loss, float *ms) {
    ert_status st = check_target(t);
    if (st) return st;
    int64_t *sv = t->g.t[t->status_t].host;
    sv[0] = sv[1] = 0;
    float *h = t->g.t[t->hyper_t].host;
    const ert_gnode *on = t->bwd_end < t->g.nn ? &t->g.n[t->bwd_end] : NULL;
    double k = (double)(t->step + 1);
    h[0] = ert_tr_lr_at(&t->o, t->step);
    h[1] = on ? (float)(1.0 - pow(on->params.optim.beta1, k)) : 1.0f;
    h[2] = on ? (float)(1.0 - pow(on->params.optim.beta2, k)) : 1.0f;
    int failed = -1;
    if (ms && !t->g.be->run_timed) return ert_set_error(t->g.ctx, ERT_E_UNSUPPORTED, "this backend cannot time nodes");
    st = ms ? t->g.be->run_timed(t->g.bctx, t->kptr, t->g.nn, &failed, ms) : t->g.be->run(t->g.bctx, t->kptr, t->g.nn, &failed);
    if (st) {
        if (failed >= 0 && failed < t->g.nn) {
            char why[256];
            snprintf(why, sizeof why, "%s", ert_last_error(t->g.ctx));
            ert_set_error(t->g.ctx, st, "node '%s' (%s) failed: %s", t->g.n[failed].name, ert_graph_op_name(t->g.n[failed].op), why);
        }
        return st;
    }
    if (sv[0]) { /* a GatherGrad index out of range: GRAD_NORM skipped every update (the scaler too) */
        int64_t ni = sv[0] - 1;
        const ert_gnode *n = ni >= 0 && ni < t->g.nn ? &t->g.n[ni] : NULL;
        int64_t dim = -1;
        if (n && n->op == ERT_OP_GATHER_GRAD && n->n_out > 0 && n->out[0] >= 0) {
            const ert_gtensor *dx = &t->g.t[n->out[0]];
            int64_t ax = n->params.gather.axis;
            if (ax >= 0 && ax < dx->ndim) dim = dx->dims[ax];
        }
        return ert_set_error(t->g.ctx, ERT_E_ARG,
                             "node '%s' (%s): index %lld out of range [-%lld, %lld) (step %lld refused: weights and "
                             "optimizer state not updated)",
                             n ? n->name : "?", n ? ert_graph_op_name(n->op) : "?", (long long)sv[1], (long long)dim,
                             (long long)dim, (long long)t->step);
    }
    const float *g = t->g.t[t->gnorm_t].host;
    float l = *(const float *)t->g.t[t->loss_t].host, gn = g[0];
    if (loss) *loss = l;
    if (t->scaler_t >= 0) {
        t->scale_now = g[2];
        t->skipped = (int64_t)g[3];
        if (isfinite(l) && !isfinite(gn)) return ERT_OK; /* gradient overflow: skipped, the scale halved */
    }
    if (!isfinite(l) || !isfinite(gn))
        return ert_set_error(t->g.ctx, ERT_E_ARG,
                             "step %lld skipped: loss %g, gradient norm %g (NaN/inf in the inputs, or a target class "
                             "out of range?)",
                             (long long)t->step, (double)l, (double)gn);
    t->step++;
    return ERT_OK;
}

static ert_status step(ert_trainer *t, float *loss, float *ms) {
    if (!t) return ERT_E_ARG;
    if (t->g.be) return dev_step(t, loss, ms);
    ert_status st = check_target(t);
    if (st) return st;
    set_training(t, true);
    st = run_range(t, 0, t->bwd_end, ms);
    if (st) return st;
    float l = *(const float *)t->g.t[t->loss_t].data, gn = ((const float *)t->g.t[t->gnorm_t].data)[0];
    if (loss) *loss = l;
    if (!isfinite(l) || !isfinite(gn))
        return ert_set_error(t->g.ctx, ERT_E_ARG, "step %lld skipped: loss %g, gradient norm %g (NaN/inf in the inputs?)",
                             (long long)t->step, (double)l, (double)gn);
    float lr = ert_tr_lr_at(&t->o, t->step);
    for (int k = t->bwd_end; k < t->g.nn; k++) {
        t->g.n[k].params.optim.lr = lr;
        t->g.n[k].params.optim.step = t->step;
    }
    if ((st = run_range(t, t->bwd_end, t->g.nn, ms))) return st;
    t->step++;
    return ERT_OK;
}

/* Calls that read or write the arena run with the trainer's running flag
 * held; a second thread gets ERT_E_STATE (busy_internal.h). */
ert_status ert_trainer_step(ert_trainer *t, float *loss) {
    if (!t) return ERT_E_ARG;
    ERT_BUSY_RETURN(&t->running, t->g.ctx, "trainer", step(t, loss, NULL));
}

ert_status ert_trainer_profile(ert_trainer *t, ert_profile_entry *out, int cap, int *n, float *loss) {
    if (!t || !n || (cap > 0 && !out)) return ERT_E_ARG;
    ert_status st = ert_busy_enter(&t->running, t->g.ctx, "trainer", __func__);
    if (st) return st;
    float *ms = calloc((size_t)t->g.nn + 1, sizeof *ms);
    if (!ms) {
        ert_busy_leave(&t->running);
        return ert_graph_oom(&t->g);
    }
    st = step(t, loss, ms);
    ert_busy_leave(&t->running);
    *n = t->g.nn;
    for (int k = 0; k < t->g.nn && k < cap; k++) {
        out[k].node = t->g.n[k].name;
        out[k].op = ert_graph_op_name(t->g.n[k].op);
        out[k].ms = ms[k];
    }
    free(ms);
    return st;
}

static ert_status eval(ert_trainer *t, float *loss) {
    set_training(t, false);
    ert_status st = check_target(t);
    int failed = -1;
    if (st == ERT_OK && t->g.be && !t->g.be->run_eager)
        st = ert_set_error(t->g.ctx, ERT_E_UNSUPPORTED, "eval on %s", t->g.be->name);
    else if (st == ERT_OK)
        st = t->g.be ? t->g.be->run_eager(t->g.bctx, t->kptr, t->fwd_end, &failed) : run_range(t, 0, t->fwd_end, NULL);
    set_training(t, true);
    if (st) return st;
    if (loss) *loss = *(const float *)t->g.t[t->loss_t].host;
    return ERT_OK;
}

ert_status ert_trainer_eval(ert_trainer *t, float *loss) {
    if (!t) return ERT_E_ARG;
    ERT_BUSY_RETURN(&t->running, t->g.ctx, "trainer", eval(t, loss));
}

ert_status ert_trainer_memory(const ert_trainer *t, ert_memory_report *out) {
    if (!t || !out) return ERT_E_ARG;
    *out = t->mem;
    return ERT_OK;
}

int ert_trainer_n_inputs(const ert_trainer *t) { return t ? t->g.n_inputs : 0; }

static ert_status info_of(const ert_trainer *t, int32_t id, ert_tensor_info *out) {
    const ert_gtensor *x = &t->g.t[id];
    memset(out, 0, sizeof *out);
    out->name = x->name;
    out->dtype = x->dtype;
    out->ndim = x->ndim;
    memcpy(out->dims, x->dims, sizeof out->dims);
    return ERT_OK;
}

ert_status ert_trainer_input_info(const ert_trainer *t, int i, ert_tensor_info *out) {
    if (!t || !out) return ERT_E_ARG;
    if (i < 0 || i >= t->g.n_inputs) return ert_set_error(t->g.ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, t->g.n_inputs);
    return info_of(t, t->g.inputs[i], out);
}

ert_status ert_trainer_input_data(ert_trainer *t, int i, void **data) {
    if (!t || !data) return ERT_E_ARG;
    if (i < 0 || i >= t->g.n_inputs) return ert_set_error(t->g.ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, t->g.n_inputs);
    *data = t->g.t[t->g.inputs[i]].host;
    return ERT_OK;
}

ert_status ert_trainer_target_data(ert_trainer *t, void **data) {
    if (!t || !data) return ERT_E_ARG;
    *data = t->g.t[t->target_t].host;
    return ERT_OK;
}

ert_status ert_trainer_target_info(const ert_trainer *t, ert_tensor_info *out) {
    if (!t || !out) return ERT_E_ARG;
    return info_of(t, t->target_t, out);
}

ert_status ert_trainer_output_data(ert_trainer *t, const void **data) {
    if (!t || !data) return ERT_E_ARG;
    *data = t->g.t[t->out_t].host;
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
        ert_dims_nelems(t->g.t[t->params[k]].ndim, t->g.t[t->params[k]].dims, &ne);
        s += ne;
    }
    return s;
}

/* ------------------------------------------------------------------ introspection (tests) */

ert_status ert_trainer_param(ert_trainer *t, const char *name, float **value, const float **grad, int64_t *n) {
    if (!t || !name) return ERT_E_ARG;
    for (int k = 0; k < t->n_params; k++) {
        const ert_gtensor *x = &t->g.t[t->params[k]];
        if (strcmp(x->name, name) != 0) continue;
        for (int j = t->bwd_end; j < t->g.nn; j++)
            if (t->g.n[j].in[0] == t->params[k]) {
                if (value) *value = x->data;
                if (grad) *grad = t->g.t[t->g.n[j].in[1]].data;
                if (n) ert_dims_nelems(x->ndim, x->dims, n);
                return ERT_OK;
            }
    }
    return ert_set_error(t->g.ctx, ERT_E_NOT_FOUND, "no trainable parameter '%s'", name);
}

/* Planner invariant for tests: no two planned blocks overlap in time and
 * space, and every tensor with storage lies inside the arena. */
const ert_plan_block *ert_trainer_plan_blocks(const ert_trainer *t, int *n) {
    *n = t->g.n_blocks;
    return t->g.blocks;
}

bool ert_trainer_plan_check(const ert_trainer *t, char *why, size_t cap) {
    return ert_graph_plan_check(&t->g, t->arena, t->mem.total_bytes, why, cap);
}

static ert_status param_copy(ert_trainer *t, const char *name, float *value, float *grad, int64_t *n) {
    float *v = NULL;
    const float *g = NULL;
    int64_t cnt = 0;
    ert_status st = ert_trainer_param(t, name, &v, &g, &cnt);
    if (st) return st;
    size_t nb = (size_t)cnt * sizeof(float);
    if (t->g.be) {
        if (!t->g.be->download) return ERT_E_UNSUPPORTED;
        if (value && (st = t->g.be->download(t->g.bctx, value, v, nb))) return st;
        if (grad && g && (st = t->g.be->download(t->g.bctx, grad, g, nb))) return st;
    } else {
        if (value) memcpy(value, v, nb);
        if (grad && g) memcpy(grad, g, nb);
    }
    *n = cnt;
    return ERT_OK;
}

ert_status ert_trainer_param_copy(ert_trainer *t, const char *name, float *value, float *grad, int64_t *n) {
    if (!t || !name || !n) return ERT_E_ARG;
    ERT_BUSY_RETURN(&t->running, t->g.ctx, "trainer", param_copy(t, name, value, grad, n));
}

float ert_trainer_loss_scale(const ert_trainer *t) { return t ? t->scale_now : 1.0f; }
int64_t ert_trainer_skipped_steps(const ert_trainer *t) { return t ? t->skipped : 0; }
ert_device ert_trainer_device(const ert_trainer *t) { return t && t->g.be ? t->g.be->device : ERT_DEVICE_CPU; }

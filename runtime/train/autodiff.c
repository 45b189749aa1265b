/*
 * Reverse-mode autodiff as a graph transform.
 *
 * Input: the trainer's forward nodes (shapes inferred, no BatchNorm folding,
 * no fusion, parameters kept as mutable tensors) followed by the loss node,
 * whose second output is dL/dlogits. Output: backward nodes appended to the
 * same node list, so the planner sees one schedule (forward, backward,
 * optimizer) and plans saved activations and gradients like any tensor.
 *
 * Steps:
 *   1. need_grad: trainable parameters need a gradient; a forward node's
 *      outputs need one if any input does. Nodes whose inputs need none get
 *      no backward (frozen trunks cost nothing: their activations are not
 *      kept for the backward). A node reached by a gradient whose
 *      parameter-dependent input sits in a slot without a rule is refused
 *      (ERT_E_UNSUPPORTED), never silently cut off.
 *   2. Walk the forward nodes in reverse. Every consumer of a node's outputs
 *      comes later in topological order, so their gradients are complete
 *      when the node is reached. Each rule emits nodes producing one
 *      contribution per input that needs a gradient.
 *   3. Contributions are summed as they arrive (Add nodes), so at most one
 *      partial sum per tensor is live.
 *   4. A trainable parameter's final gradient tensor is returned; one that
 *      does not reach the loss gets zeros.
 *
 * Rules: Conv (dx = ConvTranspose(dy, W) with the forward geometry; dW by
 * im2col GEMM; db = sum), Gemm (Gemm nodes with swapped transposes; dC sum
 * to its broadcast shape), MatMul (batched, broadcast batch dims summed),
 * Add/Sub/Mul/Div (broadcast dims summed), the activations, Max/Average/
 * GlobalAverage pooling, BatchNorm (batch statistics or frozen; with a fused
 * Relu its gradient node masks dy by the output), LayerNorm,
 * Softmax/LogSoftmax, ReduceMean/ReduceSum, Cast between float types (mixed
 * precision: the gradient is cast back), Gather (data: embeddings, the
 * class token x[:, 0]), Expand, Reshape/Flatten/Squeeze/
 * Unsqueeze/Identity, Transpose, Concat, Split, Slice, Dropout.
 * Limits: rank-1 MatMul operands, Conv with a fused epilogue, ConvTranspose
 * and other ops refuse with ERT_E_UNSUPPORTED when a gradient has to
 * flow through them. Workspace sizes set here are the CPU kernels' (the
 * SGEMM's through ert_cpu_backend.gemm_workspace); on a
 * CUDA device the trainer's plan step (trainer.c node_ws) asks the backend's
 * node_workspace for its own.
 */
#include "trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The backward rules' table (this switch and emit's): a new op must decide
 * here whether gradients flow through it. */
/* CumSum, Not, Sin, Cos, Mod, the other reductions, Scatter/GatherElements, ScatterND and
 * the quantized ops (95-115): no backward rule yet (a trainable path through them is refused).
 * ert.Attention (116), ert.QLinearAdd (117) and ert.QLut (118): made by the session's attention and Q/DQ
 * passes only, which the trainer does not run. */
_Static_assert(ERT_OP_COUNT == 119, "ERT_OP_COUNT changed: give the new op its backward rule (or none) here");
bool ert_ad_diff_slot(ert_op op, int k) {
    switch (op) {
    case ERT_OP_CONV: case ERT_OP_GEMM: case ERT_OP_BATCHNORM: case ERT_OP_BATCHNORM_TRAIN:
    case ERT_OP_LAYERNORM: return k <= 2;
    case ERT_OP_MATMUL: case ERT_OP_ADD: case ERT_OP_SUB: case ERT_OP_MUL: case ERT_OP_DIV: return k <= 1;
    case ERT_OP_REDUCE_MEAN: case ERT_OP_REDUCE_SUM: return k == 0;
    case ERT_OP_GATHER: return k == 0; /* data; indices are integers */
    case ERT_OP_EXPAND: return k == 0;
    case ERT_OP_CONCAT: return true;
    case ERT_OP_RELU: case ERT_OP_LEAKY_RELU: case ERT_OP_CLIP: case ERT_OP_SIGMOID: case ERT_OP_TANH:
    case ERT_OP_HARD_SIGMOID: case ERT_OP_HARD_SWISH: case ERT_OP_SILU: case ERT_OP_GELU:
    case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL: case ERT_OP_GLOBAL_AVGPOOL:
    case ERT_OP_SOFTMAX: case ERT_OP_LOGSOFTMAX:
    case ERT_OP_IDENTITY: case ERT_OP_DROPOUT: case ERT_OP_DROPOUT_TRAIN: case ERT_OP_FLATTEN: case ERT_OP_RESHAPE:
    case ERT_OP_SQUEEZE: case ERT_OP_UNSQUEEZE: case ERT_OP_TRANSPOSE: case ERT_OP_SPLIT: case ERT_OP_SLICE:
    case ERT_OP_CAST:
        return k == 0;
    default: return false;
    }
}

typedef struct ad {
    ert_trainer *t;
    int32_t *gacc;   /* per tensor: its gradient so far, -1 none (grows with t->g.nt) */
    int cap;
} ad;

static ert_status grow(ad *a) {
    if (a->t->g.nt <= a->cap) return ERT_OK;
    int cap = a->t->g.nt * 2;
    int32_t *g = realloc(a->gacc, (size_t)cap * sizeof *g);
    if (!g) return ert_graph_oom(&a->t->g);
    for (int i = a->cap; i < cap; i++) g[i] = -1;
    a->gacc = g;
    a->cap = cap;
    return ERT_OK;
}

/* A new tensor shaped like `like`, named "<like>.grad": f32, or f16/bf16
 * for the half tensors of mixed precision (their gradients stay half until
 * the Cast's gradient brings them back). */
static int32_t grad_tensor(ad *a, int32_t like) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s.grad", a->t->g.t[like].name);
    ert_gtensor c = a->t->g.t[like];
    ert_dtype dt = c.dtype == ERT_DTYPE_F16 || c.dtype == ERT_DTYPE_BF16 ? c.dtype : ERT_DTYPE_F32;
    int32_t id = ert_graph_new_tensor(&a->t->g, nm, dt, c.ndim, c.dims);
    if (id >= 0 && grow(a) != ERT_OK) return -1;
    return id;
}

static ert_gnode *node(ad *a, ert_op op, const ert_gnode *fwd, int n_in, int n_out) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s/grad", fwd->name ? fwd->name : "?");
    return ert_graph_new_node(&a->t->g, op, nm, n_in, n_out, ERT_PHASE_BWD);
}

/* Add contribution g to tensor x's gradient. */
static ert_status contrib(ad *a, int32_t x, int32_t g) {
    if (a->gacc[x] < 0) {
        a->gacc[x] = g;
        return ERT_OK;
    }
    int32_t s = grad_tensor(a, x);
    if (s < 0) return ert_graph_oom(&a->t->g);
    ert_gnode *n = ert_graph_new_node(&a->t->g, ERT_OP_ADD, "grad_sum", 2, 1, ERT_PHASE_BWD);
    if (!n) return ert_graph_oom(&a->t->g);
    n->in[0] = a->gacc[x];
    n->in[1] = g;
    n->out[0] = s;
    a->gacc[x] = s;
    return ERT_OK;
}

static bool need(const ert_trainer *t, const ert_gnode *f, int k) {
    return k < f->n_in && f->in[k] >= 0 && t->g.t[f->in[k]].need_grad && ert_ad_diff_slot(f->op, k);
}

/* One node `op` (dy, extra inputs...) -> one gradient for input k of f. */
static ert_status simple(ad *a, int fi, int k, ert_op op, const int32_t *ins, int n_in, const ert_op_params *prm,
                         size_t ws) {
    int32_t x = a->t->g.n[fi].in[k];
    int32_t g = grad_tensor(a, x);
    if (g < 0) return ert_graph_oom(&a->t->g);
    ert_gnode *n = node(a, op, &a->t->g.n[fi], n_in, 1);
    if (!n) return ert_graph_oom(&a->t->g);
    for (int i = 0; i < n_in; i++) n->in[i] = ins[i];
    n->out[0] = g;
    if (prm) n->params = *prm;
    n->ws_bytes = ws;
    return contrib(a, x, g);
}

static ert_status reduce_to(ad *a, int fi, int k, int32_t dy, float scale, int lead) {
    ert_trainer *t = a->t;
    int32_t x = t->g.n[fi].in[k];
    ert_op_params p;
    memset(&p, 0, sizeof p);
    const ert_gtensor *ty = &t->g.t[dy], *tx = &t->g.t[x];
    p.grad.ndim = ty->ndim;
    p.grad.scale = scale;
    for (int d = 0; d < ty->ndim; d++) p.grad.shape[d] = 1;
    if (lead >= 0) { /* conv bias: (M) lines up with dim `lead` */
        p.grad.shape[lead] = tx->dims[0];
    } else {
        for (int d = 0; d < tx->ndim; d++) p.grad.shape[ty->ndim - tx->ndim + d] = tx->dims[d];
    }
    int32_t ins[1] = {dy};
    return simple(a, fi, k, ERT_OP_REDUCE_TO, ins, 1, &p, 0);
}

static bool same_dims(const ert_gtensor *x, const ert_gtensor *y) {
    return x->ndim == y->ndim && memcmp(x->dims, y->dims, (size_t)x->ndim * sizeof x->dims[0]) == 0;
}

static ert_status unsupported(ert_trainer *t, const ert_gnode *f, const char *why) {
    const ert_op_def *d = ert_op_get(f->op);
    return ert_set_error(t->g.ctx, ERT_E_UNSUPPORTED, "node '%s' (%s): no backward rule%s%s", f->name,
                         d ? d->name : "?", why ? ": " : "", why ? why : "");
}

static ert_status rule(ad *a, int fi) {
    ert_trainer *t = a->t;
    const int nthr = t->g.n_threads;
    ert_gnode f = t->g.n[fi]; /* a copy: t->g.n moves as nodes are added */
    int32_t dy = a->gacc[f.out[0]];
    ert_status st = ERT_OK;
    switch (f.op) {
    case ERT_OP_CAST: { /* float -> float only (mixed precision): the gradient is cast back */
        ert_dtype xd = t->g.t[f.in[0]].dtype;
        if (xd != ERT_DTYPE_F32 && xd != ERT_DTYPE_F16 && xd != ERT_DTYPE_BF16)
            return unsupported(t, &f, "cast from a non-float type");
        ert_op_params p;
        memset(&p, 0, sizeof p);
        p.cast.to = xd;
        int32_t ins[1] = {dy};
        return simple(a, fi, 0, ERT_OP_CAST, ins, 1, &p, 0);
    }
    case ERT_OP_CONV: {
        const ert_conv_params *cp = &f.params.conv;
        if (cp->act.kind != ERT_ACT_NONE || cp->has_residual) return unsupported(t, &f, "fused epilogue");
        const ert_gtensor *X = &t->g.t[f.in[0]], *Y = &t->g.t[f.out[0]];
        if (need(t, &f, 0)) {
            ert_op_params p = f.params;
            p.conv.has_bias = false;
            /* ConvTranspose(dy, W): channels M -> C; cols (C/G*k, S_y) + SGEMM */
            int64_t G = cp->group, kc = X->dims[1] / G, in_sz = 1, ksz = 1;
            for (int i = 0; i < cp->nsp; i++) {
                kc *= cp->kernel[i];
                ksz *= cp->kernel[i];
                in_sz *= Y->dims[2 + i];
            }
            (void)ksz;
            size_t cols = ert_align_up((size_t)kc * (size_t)in_sz * sizeof(float), 64);
            size_t ws = cols + ert_cpu_backend.gemm_workspace(kc, in_sz, Y->dims[1] / G, nthr);
            int32_t ins[2] = {dy, f.in[1]};
            if ((st = simple(a, fi, 0, ERT_OP_CONV_TRANSPOSE, ins, 2, &p, ws))) return st;
        }
        if (need(t, &f, 1)) {
            const ert_gtensor *X2 = &t->g.t[f.in[0]], *Y2 = &t->g.t[f.out[0]];
            size_t ws = ert_cpu_backend.conv_grad_weight_workspace(cp, X2->dims, Y2->dims, nthr);
            int32_t ins[2] = {dy, f.in[0]};
            if ((st = simple(a, fi, 1, ERT_OP_CONV_GRAD_WEIGHT, ins, 2, &f.params, ws))) return st;
        }
        if (need(t, &f, 2)) return reduce_to(a, fi, 2, dy, 1.0f, 1);
        return ERT_OK;
    }
    case ERT_OP_GEMM: {
        const ert_gemm_params *gp = &f.params.gemm;
        if (gp->act.kind != ERT_ACT_NONE) return unsupported(t, &f, "fused epilogue");
        const ert_gtensor *A = &t->g.t[f.in[0]], *B = &t->g.t[f.in[1]];
        int64_t M = t->g.t[f.out[0]].dims[0], N = t->g.t[f.out[0]].dims[1];
        int64_t K = gp->trans_a ? A->dims[0] : A->dims[1];
        (void)B;
        ert_op_params p;
        memset(&p, 0, sizeof p);
        p.gemm.alpha = gp->alpha;
        p.gemm.beta = 0.0f;
        if (need(t, &f, 0)) {
            int32_t ins[2];
            if (!gp->trans_a) { /* dA (M,K) = a * dy op(B)^T */
                ins[0] = dy, ins[1] = f.in[1];
                p.gemm.trans_a = false, p.gemm.trans_b = !gp->trans_b;
            } else { /* dA (K,M) = a * op(B) dy^T */
                ins[0] = f.in[1], ins[1] = dy;
                p.gemm.trans_a = gp->trans_b, p.gemm.trans_b = true;
            }
            size_t ws = ert_cpu_backend.gemm_workspace(gp->trans_a ? K : M, gp->trans_a ? M : K, N, nthr);
            if ((st = simple(a, fi, 0, ERT_OP_GEMM, ins, 2, &p, ws))) return st;
        }
        if (need(t, &f, 1)) {
            int32_t ins[2];
            if (!gp->trans_b) { /* dB (K,N) = a * op(A)^T dy */
                ins[0] = f.in[0], ins[1] = dy;
                p.gemm.trans_a = !gp->trans_a, p.gemm.trans_b = false;
            } else { /* dB (N,K) = a * dy^T op(A) */
                ins[0] = dy, ins[1] = f.in[0];
                p.gemm.trans_a = true, p.gemm.trans_b = gp->trans_a;
            }
            size_t ws = ert_cpu_backend.gemm_workspace(gp->trans_b ? N : K, gp->trans_b ? K : N, M, nthr);
            if ((st = simple(a, fi, 1, ERT_OP_GEMM, ins, 2, &p, ws))) return st;
        }
        if (need(t, &f, 2)) return reduce_to(a, fi, 2, dy, gp->beta, -1);
        return ERT_OK;
    }
    case ERT_OP_MATMUL: {
        const ert_gtensor *A = &t->g.t[f.in[0]], *B = &t->g.t[f.in[1]];
        if (A->ndim < 2 || B->ndim < 2) return unsupported(t, &f, "rank-1 operand");
        if (f.params.gemm.act.kind != ERT_ACT_NONE) return unsupported(t, &f, "fused epilogue");
        int64_t M = A->dims[A->ndim - 2], K = A->dims[A->ndim - 1], N = B->dims[B->ndim - 1];
        size_t w0 = ert_cpu_backend.gemm_workspace(M, K, N, nthr), w1 = ert_cpu_backend.gemm_workspace(K, N, M, nthr);
        int32_t ins[3] = {dy, f.in[0], f.in[1]};
        for (int k = 0; k < 2; k++) {
            if (!need(t, &f, k)) continue;
            ert_op_params p;
            memset(&p, 0, sizeof p);
            p.grad.which = k;
            if ((st = simple(a, fi, k, ERT_OP_MATMUL_GRAD, ins, 3, &p, k ? w1 : w0))) return st;
        }
        return ERT_OK;
    }
    case ERT_OP_ADD: case ERT_OP_SUB: case ERT_OP_MUL: case ERT_OP_DIV: {
        for (int k = 0; k < 2; k++) {
            if (!need(t, &f, k)) continue;
            const ert_gtensor *X = &t->g.t[f.in[k]];
            bool lin = f.op == ERT_OP_ADD || f.op == ERT_OP_SUB;
            float sign = f.op == ERT_OP_SUB && k == 1 ? -1.0f : 1.0f;
            if (lin && sign > 0 && same_dims(X, &t->g.t[dy])) {
                if ((st = contrib(a, f.in[k], dy))) return st; /* the gradient passes unchanged */
            } else if (lin) {
                if ((st = reduce_to(a, fi, k, dy, sign, -1))) return st;
            } else {
                ert_op_params p;
                memset(&p, 0, sizeof p);
                p.grad.which = k;
                p.grad.fwd_op = f.op;
                int32_t ins[3] = {dy, f.in[0], f.in[1]};
                if ((st = simple(a, fi, k, ERT_OP_BINARY_GRAD, ins, 3, &p, 0))) return st;
            }
        }
        return ERT_OK;
    }
    case ERT_OP_RELU: case ERT_OP_LEAKY_RELU: case ERT_OP_CLIP: case ERT_OP_SIGMOID: case ERT_OP_TANH:
    case ERT_OP_HARD_SIGMOID: case ERT_OP_HARD_SWISH: case ERT_OP_SILU: case ERT_OP_GELU: {
        /* Relu (and LeakyRelu with alpha > 0) keep the sign: f'(x) = f'(y),
         * so the rule reads the output, which the next layer saves anyway
         * (a conv's input), and the input (a BatchNorm's or an Add's
         * output) dies in the forward: a third of ResNet-18's saved bytes. */
        const ert_act_params *ap = &f.params.unary.act;
        bool by_out = ap->kind == ERT_ACT_RELU || (ap->kind == ERT_ACT_LEAKY_RELU && ap->alpha > 0);
        int32_t ins[2] = {dy, by_out ? f.out[0] : f.in[0]};
        return simple(a, fi, 0, ERT_OP_ACT_GRAD, ins, 2, &f.params, 0);
    }
    case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL: {
        int32_t ins[2] = {dy, f.in[0]};
        return simple(a, fi, 0, f.op == ERT_OP_MAXPOOL ? ERT_OP_MAXPOOL_GRAD : ERT_OP_AVGPOOL_GRAD, ins, 2,
                      &f.params, 0);
    }
    case ERT_OP_GLOBAL_AVGPOOL: {
        int32_t ins[2] = {dy, f.in[0]};
        return simple(a, fi, 0, ERT_OP_GLOBAL_AVGPOOL_GRAD, ins, 2, NULL, 0);
    }
    case ERT_OP_SOFTMAX: case ERT_OP_LOGSOFTMAX: {
        int32_t ins[2] = {dy, f.out[0]};
        return simple(a, fi, 0, f.op == ERT_OP_SOFTMAX ? ERT_OP_SOFTMAX_GRAD : ERT_OP_LOGSOFTMAX_GRAD, ins, 2,
                      &f.params, 0);
    }
    case ERT_OP_IDENTITY: case ERT_OP_DROPOUT: case ERT_OP_FLATTEN: case ERT_OP_RESHAPE: case ERT_OP_SQUEEZE:
    case ERT_OP_UNSQUEEZE: {
        int32_t ins[1] = {dy};
        return simple(a, fi, 0, ERT_OP_IDENTITY, ins, 1, NULL, 0);
    }
    case ERT_OP_DROPOUT_TRAIN: {
        int32_t ins[2] = {dy, f.out[1]};
        return simple(a, fi, 0, ERT_OP_MUL, ins, 2, NULL, 0);
    }
    case ERT_OP_TRANSPOSE: {
        ert_op_params p;
        memset(&p, 0, sizeof p);
        int nd = t->g.t[f.in[0]].ndim;
        for (int i = 0; i < nd; i++) p.transpose.perm[f.params.transpose.perm[i]] = i;
        int32_t ins[1] = {dy};
        return simple(a, fi, 0, ERT_OP_TRANSPOSE, ins, 1, &p, 0);
    }
    case ERT_OP_REDUCE_MEAN: case ERT_OP_REDUCE_SUM: {
        const ert_axis_params *ap = &f.params.axis;
        const ert_gtensor *X = &t->g.t[f.in[0]];
        ert_op_params p;
        memset(&p, 0, sizeof p);
        p.grad.ndim = X->ndim;
        int64_t count = 1;
        for (int d = 0; d < X->ndim; d++) p.grad.shape[d] = X->dims[d];
        for (int i = 0; i < ap->n_axes; i++) {
            count *= X->dims[ap->axes[i]];
            p.grad.shape[ap->axes[i]] = 1;
        }
        p.grad.scale = f.op == ERT_OP_REDUCE_MEAN && count > 0 ? 1.0f / (float)count : 1.0f;
        int32_t ins[1] = {dy};
        return simple(a, fi, 0, ERT_OP_BROADCAST_TO, ins, 1, &p, 0);
    }
    case ERT_OP_EXPAND: /* numpy broadcast: the gradient sums over the broadcast dims */
        return reduce_to(a, fi, 0, dy, 1.0f, -1);
    case ERT_OP_GATHER: {
        int32_t ins[2] = {dy, f.in[1]};
        return simple(a, fi, 0, ERT_OP_GATHER_GRAD, ins, 2, &f.params, 0);
    }
    case ERT_OP_SLICE: {
        int32_t ins[1] = {dy};
        return simple(a, fi, 0, ERT_OP_SLICE_GRAD, ins, 1, &f.params, 0);
    }
    case ERT_OP_CONCAT: {
        if (f.n_in > ERT_MAX_NODE_IO) return unsupported(t, &f, "more than 16 inputs");
        int64_t axis = f.params.axis.axis;
        int32_t outs[ERT_MAX_NODE_IO];
        for (int k = 0; k < f.n_in; k++) {
            outs[k] = grad_tensor(a, f.in[k]);
            if (outs[k] < 0) return ert_graph_oom(&t->g);
        }
        ert_gnode *n = node(a, ERT_OP_SPLIT, &f, 1, f.n_in);
        if (!n) return ert_graph_oom(&t->g);
        n->in[0] = dy;
        n->params.split.axis = axis;
        n->params.split.n_out = f.n_in;
        for (int k = 0; k < f.n_in; k++) {
            n->out[k] = outs[k];
            n->params.split.sizes[k] = t->g.t[f.in[k]].dims[axis];
        }
        for (int k = 0; k < f.n_in; k++)
            if (need(t, &f, k) && (st = contrib(a, f.in[k], outs[k]))) return st;
        return ERT_OK;
    }
    case ERT_OP_SPLIT: {
        int32_t *ins = malloc((size_t)f.n_out * sizeof *ins);
        if (!ins) return ert_graph_oom(&t->g);
        for (int k = 0; k < f.n_out && st == ERT_OK; k++) {
            ins[k] = a->gacc[f.out[k]];
            if (ins[k] >= 0) continue;
            ins[k] = grad_tensor(a, f.out[k]);
            ert_gnode *z = ins[k] >= 0 ? node(a, ERT_OP_FILL_ZERO, &f, 0, 1) : NULL;
            if (!z) st = ert_graph_oom(&t->g);
            else z->out[0] = ins[k];
        }
        if (st == ERT_OK) {
            ert_op_params p;
            memset(&p, 0, sizeof p);
            p.axis.axis = f.params.split.axis;
            st = simple(a, fi, 0, ERT_OP_CONCAT, ins, f.n_out, &p, 0);
        }
        free(ins);
        return st;
    }
    case ERT_OP_BATCHNORM: case ERT_OP_BATCHNORM_TRAIN: {
        bool frozen = f.op == ERT_OP_BATCHNORM;
        int32_t outs[3] = {-1, -1, -1};
        for (int k = 0; k < 3; k++)
            if (need(t, &f, k) && (outs[k] = grad_tensor(a, f.in[k])) < 0) return ert_graph_oom(&t->g);
        bool relu = !frozen && f.params.grad.relu;
        ert_gnode *n = node(a, ERT_OP_BATCHNORM_GRAD, &f, relu ? 6 : 5, 3);
        if (!n) return ert_graph_oom(&t->g);
        if (relu) n->in[5] = f.in[2]; /* the fused Relu's mask, recomputed from x and the bias */
        n->params.grad.relu = relu;
        n->in[0] = dy;
        n->in[1] = f.in[0];
        n->in[2] = f.in[1];
        n->in[3] = frozen ? f.in[3] : f.out[1];
        n->in[4] = frozen ? f.in[4] : f.out[2];
        for (int k = 0; k < 3; k++) n->out[k] = outs[k];
        n->params.grad.frozen = frozen;
        n->params.grad.eps = frozen ? f.params.norm.epsilon : f.params.grad.eps;
        for (int k = 0; k < 3; k++)
            if (outs[k] >= 0 && (st = contrib(a, f.in[k], outs[k]))) return st;
        return ERT_OK;
    }
    case ERT_OP_LAYERNORM: {
        int32_t outs[3] = {-1, -1, -1};
        for (int k = 0; k < 3; k++)
            if (need(t, &f, k) && (outs[k] = grad_tensor(a, f.in[k])) < 0) return ert_graph_oom(&t->g);
        ert_gnode *n = node(a, ERT_OP_LAYERNORM_GRAD, &f, 3, 3);
        if (!n) return ert_graph_oom(&t->g);
        n->in[0] = dy;
        n->in[1] = f.in[0];
        n->in[2] = f.in[1];
        for (int k = 0; k < 3; k++) n->out[k] = outs[k];
        n->params = f.params;
        for (int k = 0; k < 3; k++)
            if (outs[k] >= 0 && (st = contrib(a, f.in[k], outs[k]))) return st;
        return ERT_OK;
    }
    default: return unsupported(t, &f, NULL);
    }
}

ert_status ert_autodiff(ert_trainer *t, int32_t *grads) {
    /* 1. need_grad */
    for (int i = 0; i < t->g.nt; i++) t->g.t[i].need_grad = t->g.t[i].trainable;
    for (int i = 0; i < t->fwd_end; i++) {
        ert_gnode *n = &t->g.n[i];
        if (n->op == ERT_OP_LOSS) continue;
        /* any slot: a parameter reaching an op through a slot without a
         * rule must still be seen (and refused) when the gradient arrives */
        bool any = false;
        for (int k = 0; k < n->n_in; k++) any = any || (n->in[k] >= 0 && t->g.t[n->in[k]].need_grad);
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) t->g.t[n->out[k]].need_grad = any;
    }
    ad a = {.t = t};
    ert_status st = grow(&a);
    if (st) return st;
    a.gacc[t->out_t] = t->dlogits_t;
    /* 2-3. reverse walk */
    for (int i = t->fwd_end - 1; i >= 0 && st == ERT_OK; i--) {
        ert_gnode *n = &t->g.n[i];
        if (n->op == ERT_OP_LOSS) continue;
        bool any_in = false, any_out = false;
        for (int k = 0; k < n->n_in; k++) any_in = any_in || need(t, n, k);
        for (int k = 0; k < n->n_out; k++) any_out = any_out || (n->out[k] >= 0 && a.gacc[n->out[k]] >= 0);
        if (!any_out) continue;
        /* a gradient reaches the node and an input depends on a trainable
         * parameter through a slot without a rule: refuse rather than train
         * that parameter with a silently missing gradient */
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && t->g.t[n->in[k]].need_grad &&
                (t->g.t[n->in[k]].dtype == ERT_DTYPE_F32 || t->g.t[n->in[k]].dtype == ERT_DTYPE_F16 ||
                 t->g.t[n->in[k]].dtype == ERT_DTYPE_BF16) &&
                !ert_ad_diff_slot(n->op, k)) { /* integer tensors (indices, masks) carry no gradient */
                char why[64];
                snprintf(why, sizeof why, "input %d depends on a trainable parameter", k);
                st = unsupported(t, n, why);
                break;
            }
        if (st || !any_in) continue;
        if (a.gacc[n->out[0]] < 0 && n->op != ERT_OP_SPLIT) continue; /* only a side output (BN stats) reaches */
        st = rule(&a, i);
    }
    /* 4. parameter gradients */
    for (int k = 0; k < t->n_params && st == ERT_OK; k++) {
        int32_t p = t->params[k];
        if ((st = grow(&a))) break;
        if (a.gacc[p] >= 0) {
            grads[k] = a.gacc[p];
            continue;
        }
        int32_t g = grad_tensor(&a, p);
        ert_gnode *z = g >= 0 ? ert_graph_new_node(&t->g, ERT_OP_FILL_ZERO, t->g.t[p].name, 0, 1, ERT_PHASE_BWD) : NULL;
        if (!z) {
            st = ert_graph_oom(&t->g);
            break;
        }
        z->out[0] = g;
        grads[k] = g;
    }
    free(a.gacc);
    return st;
}

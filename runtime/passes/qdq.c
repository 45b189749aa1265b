/*
 * Session step 4 (first pass): Q/DQ folding. Quantized models in the QDQ
 * format (onnxruntime's quantize_static, NVIDIA ModelOpt) wrap every float
 * op in DequantizeLinear -> op -> QuantizeLinear; run literally, each op
 * widens its int8 inputs to f32 and rounds its output back. This pass, for
 * every backend (the CUDA backend runs the integer ops through its per-node
 * CPU fallback until it has int8 kernels):
 *   1. DQ(x) -> Conv(DQ(w), [b]) -> [Relu] -> Q   becomes QLinearConv;
 *      DQ(x) -> MatMul(DQ(w)) / Gemm(DQ(w), [c]) -> [Relu] -> Q   becomes
 *      QLinearMatMul (Gemm: alpha = beta = 1, no transA; a transB weight is
 *      transposed once here). Requirements: x and y per-tensor, w a constant
 *      per-tensor or per output channel, the op's output read only by the
 *      Relu/Q. The bias becomes int32 at scale xs*ws[m]: a DQ'd int32 bias
 *      at that scale (what quantize_static writes) is taken as it is,
 *      anything else is rounded to it (within half a step of the float path).
 *      The multipliers xs*ws[m]/ys are per output channel (the kernels form
 *      them in f32 as onnxruntime does); a Relu clamps at y's zero point.
 *   2. Every DequantizeLinear left whose inputs are all constant (weights of
 *      the ops not folded) is folded into an f32 constant, so the float ops
 *      see constant weights again (BatchNorm folding, epilogue fusion, CUDA
 *      filter layouts) and run as DQ -> float op -> Q, still exact.
 *   1b. DQ(x) -> Reshape/Flatten/Squeeze/Unsqueeze/Transpose/Identity/
 *      MaxPool -> Q with the same per-tensor scale and zero point: the op
 *      runs on the integers (DQ and Q cancel exactly).
 *   1c. DQ(a) + DQ(b) -> [Relu] -> Q, a and b of the Add's shape, all per
 *      tensor: ert.QLinearAdd (the same f32 operations, on the integers).
 *   1d. DQ(x) -> a chain of element-wise float nodes that depend on x alone
 *      -> Q, x int8/uint8, DQ and Q per tensor: ert.QLut(x, table), one
 *      byte lookup per element. The chain: Relu, Clip (constant bounds),
 *      Sigmoid, Tanh, HardSigmoid, HardSwish, LeakyRelu, SiLU, Gelu, Elu,
 *      Softplus, Mish, Neg, Abs, and Add/Sub/Mul/Div/Min/Max of chain values
 *      or one-value constants (so x * Sigmoid(x), exporters' SiLU, counts);
 *      at most 16 nodes, every intermediate read only inside the chain, no
 *      broadcasting past x's shape; several DQs of x with one quantization
 *      are one input. The 256-entry table is the chain run on the CPU
 *      kernels (the session's kernel choice) over every byte: DQ, each node
 *      in graph order, Q, so it equals the unfolded f32 path bit for bit
 *      (the kernels' results do not depend on an element's position). The
 *      Q node becomes the QLut; the chain's nodes die, and its DQs when
 *      nothing else reads them. MobileNetV2's Relu6 (DQ -> Clip -> Q) and
 *      YOLO's SiLU leave no f32 tensor between the int8 layers.
 * Not folded yet (they run as DQ -> float op -> Q, correct, slower): Add
 * with broadcasting, AveragePool/GlobalAveragePool (they would need
 * requantisation), Concat, and the cases the requirements above exclude. `integer_ops` false (ERT_SESSION_NO_FUSE) runs
 * step 2 only, which tests use as the unfolded reference.
 */
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct qside {
    int32_t q, scale, zp; /* integer tensor, its scale and zero point (-1: none) */
} qside;

static int64_t nelems(const ert_gtensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->dims[d];
    return n;
}

/* Is n a DequantizeLinear with constant scale and zero point? Per-tensor
 * unless axis >= 0, then per-tensor or per-axis along `axis` of its data. */
static bool dq_side(const ert_graph *g, const ert_gnode *n, int64_t axis, bool const_data, qside *out) {
    if (!n || n->dead || n->op != ERT_OP_DEQUANTIZE_LINEAR) return false;
    int32_t zp = n->n_in > 2 ? n->in[2] : -1;
    if (!ert_graph_is_const(g, n->in[1]) || (zp >= 0 && !ert_graph_is_const(g, zp))) return false;
    if (const_data && !ert_graph_is_const(g, n->in[0])) return false;
    if (g->t[n->in[0]].dtype != ERT_DTYPE_I8 && g->t[n->in[0]].dtype != ERT_DTYPE_U8) return false;
    int64_t qa = n->params.quant.axis;
    if (qa >= 0 && qa != axis) return false;
    *out = (qside){n->in[0], n->in[1], zp};
    return true;
}

static ert_gnode *producer_node(ert_graph *g, const int32_t *producer, int32_t t) {
    return t >= 0 && producer[t] >= 0 && !g->n[producer[t]].dead ? &g->n[producer[t]] : NULL;
}

/* The only live reader of t (NULL if several, none, or t is a graph output). */
static ert_gnode *sole_reader(ert_graph *g, int32_t t) {
    if (g->t[t].n_uses != 1 || ert_graph_is_output(g, t)) return NULL;
    for (int j = 0; j < g->nn; j++) {
        if (g->n[j].dead) continue;
        for (int k = 0; k < g->n[j].n_in; k++)
            if (g->n[j].in[k] == t) return &g->n[j];
    }
    return NULL;
}

/* int32 bias of n_out values at scale xs * ws[m] from the float op's bias
 * input b (a DQ of int32 constants or an f32 constant); -1 on no bias,
 * -2 when it cannot be made (the op is then left alone). */
static int32_t int_bias(ert_graph *g, const int32_t *producer, int32_t b, const qside *x, const qside *w,
                        int64_t n_out, ert_status *st) {
    if (b < 0) return -1;
    const ert_gtensor *bt = &g->t[b];
    if (nelems(bt) != n_out) return -2;
    ert_gnode *dq = producer_node(g, producer, b);
    const int32_t *bq = NULL;
    const float *bf = NULL, *bscale = NULL;
    int64_t nbs = 0;
    if (dq && dq->op == ERT_OP_DEQUANTIZE_LINEAR && ert_graph_is_const(g, dq->in[0]) && ert_graph_is_const(g, dq->in[1]) &&
        g->t[dq->in[0]].dtype == ERT_DTYPE_I32 && (dq->n_in < 3 || dq->in[2] < 0 || ert_graph_is_const(g, dq->in[2]))) {
        bq = g->t[dq->in[0]].cdata;
        bscale = g->t[dq->in[1]].cdata;
        nbs = nelems(&g->t[dq->in[1]]);
    } else if (ert_graph_is_const(g, b) && bt->dtype == ERT_DTYPE_F32) {
        bf = bt->cdata;
    } else {
        return -2;
    }
    const float xs = *(const float *)g->t[x->scale].cdata, *ws = g->t[w->scale].cdata;
    int64_t nws = nelems(&g->t[w->scale]);
    int32_t *v = malloc((size_t)n_out * sizeof *v);
    if (!v) {
        *st = ert_graph_oom(g);
        return -2;
    }
    for (int64_t m = 0; m < n_out; m++) {
        float acc_scale = xs * ws[nws == 1 ? 0 : m];
        if (bq) {
            float sc = bscale[nbs == 1 ? 0 : m];
            /* quantize_static's bias scale is exactly xs*ws[m]: keep the integers */
            double r = sc == acc_scale ? bq[m] : nearbyint((double)bq[m] * sc / acc_scale);
            v[m] = (int32_t)fmax(fmin(r, 2147483647.0), -2147483648.0);
        } else {
            double r = nearbyint((double)bf[m] / acc_scale);
            v[m] = (int32_t)fmax(fmin(r, 2147483647.0), -2147483648.0);
        }
    }
    int64_t d[1] = {n_out};
    int32_t id;
    if ((*st = ert_graph_new_const(g, g->t[b].name, ERT_DTYPE_I32, 1, d, v, &id))) return -2;
    return id;
}

/* A (N, K) int8/uint8 constant transposed to (K, N) (Gemm transB). */
static int32_t transposed(ert_graph *g, int32_t w, ert_status *st) {
    const ert_gtensor *t = &g->t[w];
    int64_t N = t->dims[0], K = t->dims[1];
    uint8_t *v = malloc((size_t)(N * K) + 1);
    if (!v) {
        *st = ert_graph_oom(g);
        return -1;
    }
    const uint8_t *src = t->cdata;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) v[k * N + n] = src[n * K + k];
    int64_t d[2] = {K, N};
    int32_t id;
    if ((*st = ert_graph_new_const(g, t->name, t->dtype, 2, d, v, &id))) return -1;
    return id;
}

/* Turn node f (Conv/MatMul/Gemm/Add, its output read by relu-or-q) into the
 * integer op with inputs in[cap] (cap 9: an absent int32 bias, in[8] < 0,
 * leaves 8); run its prepare to fill params, workspace and check the result.
 * Returns false (graph unchanged) if prepare refuses. */
static bool rewrite(ert_graph *g, ert_gnode *f, ert_op op, const int32_t *in, int cap, ert_gnode *relu, ert_gnode *q) {
    ert_tinfo tin[9], tout[1];
    for (int k = 0; k < cap; k++) {
        memset(&tin[k], 0, sizeof tin[k]);
        if (in[k] < 0) continue;
        const ert_gtensor *t = &g->t[in[k]];
        tin[k].dtype = t->dtype;
        tin[k].ndim = t->ndim;
        memcpy(tin[k].dims, t->dims, sizeof tin[k].dims);
        tin[k].const_data = ert_graph_is_const(g, in[k]) ? t->cdata : NULL;
    }
    memset(tout, 0, sizeof tout);
    ert_op_params params;
    /* the float op's attributes (strides, pads, group, ...) are QLinearConv's; a MatMul/Gemm's are not read */
    ert_node shell = {.op = op, .name = (char *)f->name};
    const ert_node *src = op == ERT_OP_QLINEAR_CONV && f->src ? f->src : &shell;
    ert_prep p = {.ctx = g->ctx, .node = src, .n_in = cap == 9 && in[8] < 0 ? 8 : cap, .n_out = 1, .in = tin,
                  .out = tout, .params = &params, .n_threads = g->n_threads};
    char saved[ERT_ERRMSG_SIZE];
    memcpy(saved, g->ctx->err, sizeof saved);
    ert_status st = ert_op_get(op)->prepare(&p);
    memcpy(g->ctx->err, saved, sizeof saved); /* a refusal only means "not folded" */
    const ert_gtensor *y = &g->t[q->out[0]];
    if (st || tout[0].dtype != y->dtype || tout[0].ndim != y->ndim ||
        memcmp(tout[0].dims, y->dims, (size_t)y->ndim * sizeof y->dims[0]) != 0)
        return false;
    int32_t *blk = malloc((size_t)(cap + 2 + 1) * sizeof *blk); /* as before: two spare input slots */
    if (!blk) return false;
    memcpy(blk, in, (size_t)cap * sizeof *blk);
    blk[cap + 2] = q->out[0];
    free(f->in);
    f->in = blk;
    f->out = blk + cap + 2;
    f->n_in = p.n_in;
    f->n_out = 1;
    f->op = op;
    f->params = params;
    if (relu) f->params.quant.conv.act.kind = ERT_ACT_RELU;
    f->ws_bytes = p.workspace_bytes;
    q->dead = true;
    if (relu) relu->dead = true;
    return true;
}

/* The op that Q node q (per tensor, constant scale and zero point)
 * quantizes, through a Relu (*relu) that only q reads, its one output read
 * only by the Relu or q; NULL otherwise. */
static ert_gnode *quantized_op(ert_graph *g, int32_t *producer, ert_gnode *q, ert_gnode **relu) {
    *relu = NULL;
    if (q->params.quant.axis >= 0 || !ert_graph_is_const(g, q->in[1]) || (q->n_in > 2 && q->in[2] >= 0 && !ert_graph_is_const(g, q->in[2])))
        return NULL;
    ert_gnode *f = producer_node(g, producer, q->in[0]);
    if (f && f->op == ERT_OP_RELU) {
        if (sole_reader(g, f->out[0]) != q) return NULL;
        *relu = f;
        f = producer_node(g, producer, f->in[0]);
    }
    return f && f->n_out == 1 && sole_reader(g, f->out[0]) == (*relu ? *relu : q) ? f : NULL;
}

/* Step 1 at Q node q: returns true if the pattern ending there was folded. */
static bool fold_at(ert_graph *g, int32_t *producer, ert_gnode *q, ert_status *st) {
    ert_gnode *relu, *f = quantized_op(g, producer, q, &relu);
    if (!f) return false;
    qside x, w;
    int32_t b = -1, wq;
    int64_t n_out;
    ert_op op;
    if (f->op == ERT_OP_CONV) {
        const ert_conv_params *cp = &f->params.conv;
        if (cp->has_residual || cp->act.kind != ERT_ACT_NONE || cp->has_scale || cp->nhwc) return false;
        if (!dq_side(g, producer_node(g, producer, f->in[0]), -1, false, &x) ||
            !dq_side(g, producer_node(g, producer, f->in[1]), 0, true, &w))
            return false;
        b = cp->has_bias ? f->in[2] : -1;
        n_out = g->t[w.q].dims[0];
        wq = w.q;
        op = ERT_OP_QLINEAR_CONV;
    } else if (f->op == ERT_OP_MATMUL || f->op == ERT_OP_GEMM) {
        const ert_gemm_params *gp = &f->params.gemm;
        bool gemm = f->op == ERT_OP_GEMM;
        if (gp->act.kind != ERT_ACT_NONE || (gemm && (gp->trans_a || gp->alpha != 1.0f || (gp->has_c && gp->beta != 1.0f))) ||
            (!gemm && (gp->trans_b || gp->has_c || f->n_in > 2)))
            return false;
        const ert_gtensor *bt = &g->t[f->in[1]];
        if (bt->ndim != 2) return false;
        int64_t w_axis = gemm && gp->trans_b ? 0 : 1; /* the N dim of the stored weight */
        if (!dq_side(g, producer_node(g, producer, f->in[0]), -1, false, &x) ||
            !dq_side(g, producer_node(g, producer, f->in[1]), w_axis, true, &w))
            return false;
        n_out = bt->dims[w_axis];
        b = gemm && gp->has_c ? f->in[2] : -1;
        wq = w.q;
        if (gemm && gp->trans_b && (wq = transposed(g, w.q, st)) < 0) return false;
        op = ERT_OP_QLINEAR_MATMUL;
    } else {
        return false;
    }
    if (nelems(&g->t[x.scale]) != 1 || nelems(&g->t[q->in[1]]) != 1) return false;
    int32_t bi = int_bias(g, producer, b, &x, &w, n_out, st);
    if (bi == -2) return false;
    int32_t in[9] = {x.q, x.scale, x.zp, wq, w.scale, w.zp, q->in[1], q->n_in > 2 ? q->in[2] : -1, bi};
    return rewrite(g, f, op, in, 9, relu, q);
}

/* Step 1c at Q node q: DQ(a) + DQ(b) -> [Relu] -> Q (a residual join) with
 * a, b int8/uint8 of the Add's shape and every scale and zero point a
 * per-tensor constant becomes ert.QLinearAdd, which does the same f32
 * operations in one pass over the integers (no f32 tensors between). */
static bool fold_add_at(ert_graph *g, int32_t *producer, ert_gnode *q) {
    ert_gnode *relu, *f = quantized_op(g, producer, q, &relu);
    if (!f || f->op != ERT_OP_ADD || f->n_in != 2 || nelems(&g->t[q->in[1]]) != 1) return false;
    qside x[2];
    for (int k = 0; k < 2; k++) {
        if (!dq_side(g, producer_node(g, producer, f->in[k]), -1, false, &x[k]) || nelems(&g->t[x[k].scale]) != 1)
            return false;
        const ert_gtensor *t = &g->t[x[k].q], *s = &g->t[f->out[0]];
        if (t->ndim != s->ndim || memcmp(t->dims, s->dims, (size_t)t->ndim * sizeof t->dims[0]) != 0) return false;
    }
    int32_t in[8] = {x[0].q, x[0].scale, x[0].zp, x[1].q, x[1].scale, x[1].zp, q->in[1], q->n_in > 2 ? q->in[2] : -1};
    return rewrite(g, f, ERT_OP_QLINEAR_ADD, in, 8, relu, q);
}

/* Same per-tensor quantization: equal scale values and zero points (absent = 0). */
static bool same_q(const ert_graph *g, int32_t s1, int32_t z1, int32_t s2, int32_t z2) {
    if (nelems(&g->t[s1]) != 1 || nelems(&g->t[s2]) != 1 || *(const float *)g->t[s1].cdata != *(const float *)g->t[s2].cdata)
        return false;
    ert_dtype d1 = z1 >= 0 ? g->t[z1].dtype : ERT_DTYPE_U8, d2 = z2 >= 0 ? g->t[z2].dtype : ERT_DTYPE_U8;
    int32_t v1 = z1 < 0 ? 0 : d1 == ERT_DTYPE_I8 ? *(const int8_t *)g->t[z1].cdata : *(const uint8_t *)g->t[z1].cdata;
    int32_t v2 = z2 < 0 ? 0 : d2 == ERT_DTYPE_I8 ? *(const int8_t *)g->t[z2].cdata : *(const uint8_t *)g->t[z2].cdata;
    return d1 == d2 && v1 == v2;
}

/* DQ -> a data-movement op or MaxPool -> Q with the same quantization: the
 * op moves (or takes the max of) the integers themselves, exact: DQ is
 * monotone and Q(DQ(v)) = v element by element. */
static bool fold_move_at(ert_graph *g, int32_t *producer, ert_gnode *q) {
    ert_gnode *f = producer_node(g, producer, q->in[0]);
    if (!f || (f->op != ERT_OP_RESHAPE && f->op != ERT_OP_FLATTEN && f->op != ERT_OP_SQUEEZE &&
               f->op != ERT_OP_UNSQUEEZE && f->op != ERT_OP_TRANSPOSE && f->op != ERT_OP_IDENTITY &&
               !(f->op == ERT_OP_MAXPOOL && !f->params.pool.nhwc)) ||
        f->n_out != 1 || sole_reader(g, f->out[0]) != q)
        return false;
    qside x;
    ert_gnode *dq = producer_node(g, producer, f->in[0]);
    if (!dq_side(g, dq, -1, false, &x) || !ert_graph_is_const(g, q->in[1]) ||
        (q->n_in > 2 && q->in[2] >= 0 && !ert_graph_is_const(g, q->in[2])) || q->params.quant.axis >= 0 ||
        g->t[x.q].dtype != g->t[q->out[0]].dtype ||
        !same_q(g, x.scale, x.zp, q->in[1], q->n_in > 2 ? q->in[2] : -1))
        return false;
    f->in[0] = x.q;
    f->out[0] = q->out[0];
    q->dead = true;
    return true;
}

/* ------------------------------------------------------------------ step 1d: tables */

#define LUT_MAX_NODES 16 /* float nodes in one chain */
#define LUT_MAX_CONSTS (2 * LUT_MAX_NODES)

/* Element-wise float ops a chain may hold: one value in, one out, with
 * params that do not depend on the shape (the unary and binary kernels
 * read shapes from their views), so running them on 256 values is running
 * them on the tensor. */
static bool lut_op(ert_op op) {
    switch (op) {
    case ERT_OP_RELU: case ERT_OP_CLIP: case ERT_OP_SIGMOID: case ERT_OP_TANH: case ERT_OP_HARD_SIGMOID:
    case ERT_OP_HARD_SWISH: case ERT_OP_LEAKY_RELU: case ERT_OP_SILU: case ERT_OP_GELU: case ERT_OP_ELU:
    case ERT_OP_SOFTPLUS: case ERT_OP_MISH: case ERT_OP_NEG: case ERT_OP_ABS:
    case ERT_OP_ADD: case ERT_OP_SUB: case ERT_OP_MUL: case ERT_OP_DIV: case ERT_OP_MIN: case ERT_OP_MAX:
        return true;
    default: return false;
    }
}

static bool binary_op(ert_op op) {
    return op == ERT_OP_ADD || op == ERT_OP_SUB || op == ERT_OP_MUL || op == ERT_OP_DIV || op == ERT_OP_MIN ||
           op == ERT_OP_MAX;
}

/* DQ(x) -> float nodes depending only on x -> Q. root: x and its DQ's
 * scale and zero point; the DQ nodes of x seen (several DQs of x with one
 * quantization are one root); the chain's nodes in graph order; its
 * constant leaves (one value each; the output of an all-constant DQ not yet
 * folded by step 2 counts, with its value computed here). */
typedef struct lut_chain {
    qside x;
    int n_dq, n_nodes, n_consts;
    int32_t dq[LUT_MAX_NODES + 1];       /* node indices */
    int32_t nodes[LUT_MAX_NODES];        /* node indices, ascending */
    int32_t consts[LUT_MAX_CONSTS];      /* tensors */
    float cval[LUT_MAX_CONSTS];          /* their values (f32) */
    const ert_gtensor *xt;               /* the DQ output's shape: every chain tensor has it */
} lut_chain;

static bool same_dims(const ert_gtensor *a, const ert_gtensor *b) {
    return a->ndim == b->ndim && memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof a->dims[0]) == 0;
}

static bool in_list(const int32_t *v, int n, int32_t x) {
    for (int k = 0; k < n; k++)
        if (v[k] == x) return true;
    return false;
}

/* Is tensor t produced by a DequantizeLinear whose inputs are all constant? */
static ert_gnode *const_dq(ert_graph *g, const int32_t *producer, int32_t t) {
    ert_gnode *p = producer_node(g, producer, t);
    if (!p || p->op != ERT_OP_DEQUANTIZE_LINEAR) return NULL;
    for (int k = 0; k < p->n_in; k++)
        if (p->in[k] >= 0 && !ert_graph_is_const(g, p->in[k])) return NULL;
    return p;
}

/* One input t of a chain node: the root (a per-tensor DQ of x), a
 * one-value f32 constant, or another chain node's output (collected). */
static bool lut_leaf_or_node(ert_graph *g, const int32_t *producer, int32_t t, lut_chain *c);

static bool lut_collect(ert_graph *g, const int32_t *producer, ert_gnode *n, lut_chain *c) {
    const int32_t idx = (int32_t)(n - g->n);
    if (in_list(c->nodes, c->n_nodes, idx)) return true;
    if (!lut_op(n->op) || n->n_out != 1 || n->n_in < 1 || c->n_nodes == LUT_MAX_NODES) return false;
    if (binary_op(n->op) ? n->n_in != 2 : n->op == ERT_OP_CLIP ? n->n_in > 3 : n->n_in != 1) return false;
    if (g->t[n->out[0]].dtype != ERT_DTYPE_F32) return false;
    c->nodes[c->n_nodes++] = idx;
    for (int k = 0; k < n->n_in; k++) {
        if (n->op == ERT_OP_CLIP && k > 0) { /* its bounds: prepare read them from constants */
            if (n->in[k] >= 0 && !ert_graph_is_const(g, n->in[k])) return false;
            continue;
        }
        if (n->in[k] < 0 || !lut_leaf_or_node(g, producer, n->in[k], c)) return false;
    }
    return true;
}

static bool lut_leaf_or_node(ert_graph *g, const int32_t *producer, int32_t t, lut_chain *c) {
    const ert_gtensor *x = &g->t[t];
    if (ert_graph_is_const(g, t) || const_dq(g, producer, t)) {
        if (x->dtype != ERT_DTYPE_F32 || nelems(x) != 1) return false;
        if (in_list(c->consts, c->n_consts, t)) return true;
        if (c->n_consts == LUT_MAX_CONSTS) return false;
        c->consts[c->n_consts++] = t;
        return true;
    }
    ert_gnode *p = producer_node(g, producer, t);
    qside s;
    if (p && dq_side(g, p, -1, false, &s)) {
        if (x->dtype != ERT_DTYPE_F32 || nelems(&g->t[s.scale]) != 1 || g->t[s.scale].dtype != ERT_DTYPE_F32) return false;
        if (!c->xt) {
            c->x = s;
            c->xt = x;
        } else if (s.q != c->x.q || !same_q(g, s.scale, s.zp, c->x.scale, c->x.zp)) {
            return false; /* a second integer input: not a function of one byte */
        }
        const int32_t idx = (int32_t)(p - g->n);
        if (!in_list(c->dq, c->n_dq, idx)) {
            if (c->n_dq == LUT_MAX_NODES + 1) return false;
            c->dq[c->n_dq++] = idx;
        }
        return true;
    }
    return p && lut_collect(g, producer, p, c);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The chain ending at Q node q, checked: every chain tensor of the root's
 * shape (no broadcasting past it), every intermediate read only by chain
 * nodes, the last one only by q. */
static bool lut_chain_at(ert_graph *g, const int32_t *producer, ert_gnode *q, lut_chain *c) {
    memset(c, 0, sizeof *c);
    if (q->params.quant.axis >= 0 || !ert_graph_is_const(g, q->in[1]) || nelems(&g->t[q->in[1]]) != 1 ||
        g->t[q->in[1]].dtype != ERT_DTYPE_F32 || (q->n_in > 2 && q->in[2] >= 0 && !ert_graph_is_const(g, q->in[2])))
        return false;
    const int32_t last = q->in[0];
    ert_gnode *L = producer_node(g, producer, last);
    if (!L || L->op == ERT_OP_DEQUANTIZE_LINEAR || sole_reader(g, last) != q) return false;
    if (!lut_collect(g, producer, L, c) || !c->xt) return false;
    qsort(c->nodes, (size_t)c->n_nodes, sizeof c->nodes[0], cmp_i32);
    for (int i = 0; i < c->n_nodes; i++) {
        const int32_t t = g->n[c->nodes[i]].out[0];
        if (!same_dims(&g->t[t], c->xt)) return false;
        if (t == last) continue;
        int reads = 0;
        for (int j = 0; j < c->n_nodes; j++) {
            const ert_gnode *n = &g->n[c->nodes[j]];
            for (int k = 0; k < n->n_in; k++) reads += n->in[k] == t;
        }
        if (reads != g->t[t].n_uses || ert_graph_is_output(g, t)) return false;
    }
    return same_dims(&g->t[q->out[0]], c->xt);
}

/* The table: the chain's own nodes run on the CPU kernels (the session's
 * kernel choice) over the 256 values of x, DQ first and Q last, each chain
 * tensor viewed as 256 values of the root's rank (1, ..., 1, 256) so the
 * constants broadcast as they do on the tensor. table[b] is the result for
 * the byte b (x = (int8_t)b for int8). NULL (and *st unset) when a kernel
 * refuses; *st on out of memory. */
static uint8_t *lut_table(ert_graph *g, const int32_t *producer, ert_gnode *q, lut_chain *c, ert_status *st) {
    const int rank = c->xt->ndim > 0 ? c->xt->ndim : 1;
    int64_t dims[ERT_MAX_DIMS] = {0};
    for (int d = 0; d < rank; d++) dims[d] = d == rank - 1 ? 256 : 1;
    float *buf = malloc((size_t)(c->n_nodes + 1) * 256 * sizeof *buf);
    uint8_t *xb = malloc(256), *table = malloc(256);
    bool ok = buf && xb && table;
    if (!ok) *st = ert_graph_oom(g);
    ert_tview v[ERT_MAX_NODE_IO + 1];
    /* the constant leaves made by all-constant DQs: their one value */
    for (int k = 0; ok && k < c->n_consts; k++) {
        ert_gnode *dq = const_dq(g, producer, c->consts[k]);
        if (!dq) {
            c->cval[k] = *(const float *)g->t[c->consts[k]].cdata;
            continue;
        }
        for (int i = 0; i < dq->n_in; i++) {
            if (dq->in[i] < 0) memset(&v[i], 0, sizeof v[i]);
            else ert_graph_fill_view(&v[i], &g->t[dq->in[i]], (void *)g->t[dq->in[i]].cdata);
        }
        ert_graph_fill_view(&v[dq->n_in], &g->t[c->consts[k]], &c->cval[k]);
        ok = !ert_graph_fold(g->ctx, &g->kc, dq->name, dq->op, &dq->params, dq->n_in, 1, v, dq->ws_bytes);
    }
    /* DQ of the 256 bytes into buf[0] */
    if (ok) {
        const ert_gnode *dq = &g->n[c->dq[0]];
        for (int b = 0; b < 256; b++) xb[b] = (uint8_t)b;
        ert_graph_view(&v[0], g->t[c->x.q].dtype, rank, dims, xb);
        ert_graph_fill_view(&v[1], &g->t[c->x.scale], (void *)g->t[c->x.scale].cdata);
        if (c->x.zp >= 0) ert_graph_fill_view(&v[2], &g->t[c->x.zp], (void *)g->t[c->x.zp].cdata);
        else memset(&v[2], 0, sizeof v[2]);
        ert_graph_view(&v[3], ERT_DTYPE_F32, rank, dims, buf);
        ok = !ert_graph_fold(g->ctx, &g->kc, dq->name, dq->op, &dq->params, 3, 1, v, dq->ws_bytes);
    }
    /* every chain node in graph order, node i's output in buf[i + 1] */
    for (int i = 0; ok && i < c->n_nodes; i++) {
        const ert_gnode *n = &g->n[c->nodes[i]];
        for (int k = 0; k < n->n_in; k++) {
            const int32_t t = n->in[k];
            int j = 0;
            if (t < 0) {
                memset(&v[k], 0, sizeof v[k]);
            } else if (producer_node(g, producer, t) && in_list(c->dq, c->n_dq, producer[t])) {
                ert_graph_view(&v[k], ERT_DTYPE_F32, rank, dims, buf);
            } else if (producer_node(g, producer, t) && in_list(c->nodes, c->n_nodes, producer[t])) {
                while (c->nodes[j] != producer[t]) j++;
                ert_graph_view(&v[k], ERT_DTYPE_F32, rank, dims, buf + (size_t)(j + 1) * 256);
            } else if (in_list(c->consts, c->n_consts, t)) {
                while (c->consts[j] != t) j++;
                ert_graph_fill_view(&v[k], &g->t[t], &c->cval[j]);
            } else { /* Clip's bounds */
                ert_graph_fill_view(&v[k], &g->t[t], (void *)g->t[t].cdata);
            }
        }
        ert_graph_view(&v[n->n_in], ERT_DTYPE_F32, rank, dims, buf + (size_t)(i + 1) * 256);
        ok = !ert_graph_fold(g->ctx, &g->kc, n->name, n->op, &n->params, n->n_in, 1, v, n->ws_bytes);
    }
    /* Q of the last node's output (q reads it) into the table */
    if (ok) {
        int j = 0;
        while (g->n[c->nodes[j]].out[0] != q->in[0]) j++;
        ert_graph_view(&v[0], ERT_DTYPE_F32, rank, dims, buf + (size_t)(j + 1) * 256);
        ert_graph_fill_view(&v[1], &g->t[q->in[1]], (void *)g->t[q->in[1]].cdata);
        const int32_t zp = q->n_in > 2 ? q->in[2] : -1;
        if (zp >= 0) ert_graph_fill_view(&v[2], &g->t[zp], (void *)g->t[zp].cdata);
        else memset(&v[2], 0, sizeof v[2]);
        ert_graph_view(&v[3], g->t[q->out[0]].dtype, rank, dims, table);
        ok = !ert_graph_fold(g->ctx, &g->kc, q->name, q->op, &q->params, 3, 1, v, q->ws_bytes);
    }
    free(buf);
    free(xb);
    if (!ok) {
        free(table);
        return NULL;
    }
    return table;
}

/* Step 1d at Q node q: DQ(x) -> element-wise float nodes on x alone -> Q,
 * all per tensor, becomes q itself turned into ert.QLut(x, table); the
 * chain's nodes die (its DQs too once nothing else reads them). */
static bool fold_lut_at(ert_graph *g, int32_t *producer, ert_gnode *q, ert_status *st) {
    lut_chain c;
    if (!lut_chain_at(g, producer, q, &c)) return false;
    const ert_dtype ydt = g->t[q->out[0]].dtype;
    if (ydt != ERT_DTYPE_I8 && ydt != ERT_DTYPE_U8) return false;
    char saved[ERT_ERRMSG_SIZE];
    memcpy(saved, g->ctx->err, sizeof saved);
    uint8_t *table = lut_table(g, producer, q, &c, st);
    memcpy(g->ctx->err, saved, sizeof saved); /* a kernel's refusal only means "not folded" */
    if (!table) return false;
    const int64_t d[ERT_MAX_DIMS] = {256}; /* ert_graph_tinfo copies ERT_MAX_DIMS of them */
    int32_t tid;
    if ((*st = ert_graph_new_const(g, q->name, ydt, 1, d, table, &tid))) return false;
    ert_tinfo tin[2], tout[1];
    ert_graph_tinfo(&tin[0], g->t[c.x.q].dtype, g->t[c.x.q].ndim, g->t[c.x.q].dims, NULL);
    ert_graph_tinfo(&tin[1], ydt, 1, d, table);
    memset(tout, 0, sizeof tout);
    ert_op_params params;
    ert_node shell = {.op = ERT_OP_QLUT, .name = (char *)q->name};
    ert_prep p = {.ctx = g->ctx, .node = &shell, .n_in = 2, .n_out = 1, .in = tin, .out = tout, .params = &params,
                  .n_threads = g->n_threads};
    const ert_gtensor *y = &g->t[q->out[0]];
    if (ert_op_get(ERT_OP_QLUT)->prepare(&p) || tout[0].dtype != ydt || tout[0].ndim != y->ndim ||
        memcmp(tout[0].dims, y->dims, (size_t)y->ndim * sizeof y->dims[0]) != 0) {
        memcpy(g->ctx->err, saved, sizeof saved);
        return false;
    }
    q->op = ERT_OP_QLUT;
    q->src = NULL; /* a made node: the QuantizeLinear's attributes are not the QLut's */
    q->in[0] = c.x.q;
    q->in[1] = tid;
    q->n_in = 2;
    q->params = params;
    q->ws_bytes = p.workspace_bytes;
    for (int i = 0; i < c.n_nodes; i++) g->n[c.nodes[i]].dead = true;
    return true;
}

/* Step 1e: an ert.QLut whose input only a QLinearConv makes, of the same
 * integer type in and out, becomes that conv's epilogue: the conv takes the
 * table as input 9 and writes the QLut's output (y = table[requantised sum],
 * the bytes the two nodes gave). One pass over the int8 activation fewer
 * (MobileNetV2's Relu6 and YOLO's SiLU after nearly every conv). */
static int fuse_conv_lut(ert_graph *g, ert_status *st) {
    int32_t *producer = malloc((size_t)(g->nt ? g->nt : 1) * sizeof *producer);
    if (!producer) {
        *st = ert_graph_oom(g);
        return 0;
    }
    ert_graph_count_uses(g, producer);
    int n = 0;
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *q = &g->n[i];
        if (q->dead || q->op != ERT_OP_QLUT || q->n_in != 2 || q->in[0] < 0 || !ert_graph_is_const(g, q->in[1]))
            continue;
        const int32_t x = q->in[0];
        ert_gnode *c = producer_node(g, producer, x);
        if (!c || c->op != ERT_OP_QLINEAR_CONV || c->n_in < 8 || c->n_in > 9 || c->n_out != 1 ||
            sole_reader(g, x) != q || g->t[q->out[0]].dtype != g->t[x].dtype)
            continue;
        if (c->n_in == 8) c->in[8] = -1; /* no bias */
        c->in[9] = q->in[1];
        c->n_in = 10;
        c->out[0] = q->out[0];
        producer[q->out[0]] = (int32_t)(c - g->n);
        q->dead = true;
        n++;
    }
    free(producer);
    return n;
}

ert_status ert_pass_fold_qdq(ert_graph *g, bool integer_ops) {
    ert_status st = ERT_OK;
    int n_folded = 0;
    for (int i = 0; integer_ops && i < g->nn && !st; i++) {
        if (g->n[i].dead || g->n[i].op != ERT_OP_QUANTIZE_LINEAR) continue;
        /* fold_at may add tensors (g->t moves and grows) but never nodes */
        int32_t *producer = malloc((size_t)(g->nt ? g->nt : 1) * sizeof *producer);
        if (!producer) return ert_graph_oom(g);
        ert_graph_count_uses(g, producer);
        if (fold_at(g, producer, &g->n[i], &st) ||
            (!st && (fold_move_at(g, producer, &g->n[i]) || fold_add_at(g, producer, &g->n[i]))) ||
            (!st && fold_lut_at(g, producer, &g->n[i], &st)))
            n_folded++;
        free(producer);
    }
    if (st) return st;
    /* step 2: constant DQs -> f32 constants (the folded ones are unread now) */
    ert_pass_remove_dead(g);
    const int n_lut = integer_ops ? fuse_conv_lut(g, &st) : 0; /* the chains' DQs are gone: a conv's one reader */
    if (st) return st;
    int n_const = 0;
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *n = &g->n[i];
        if (n->dead || n->op != ERT_OP_DEQUANTIZE_LINEAR) continue;
        bool all = true;
        for (int k = 0; k < n->n_in; k++) all = all && (n->in[k] < 0 || ert_graph_is_const(g, n->in[k]));
        if (!all) continue;
        if ((st = ert_graph_fold_node(g, n))) return st;
        n->dead = true;
        n_const++;
    }
    if (n_folded || n_const)
        ert_log(g->ctx, ERT_LOG_INFO, "Q/DQ: %d ops folded into integer ops (%d tables into their conv), %d constant "
                "DequantizeLinear folded to f32", n_folded, n_lut, n_const);
    return ERT_OK;
}

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
 * Not folded yet (they run as DQ -> float op -> Q, correct, slower): Add,
 * the pools, Concat/Reshape between Q/DQ, per-tensor-only cases the
 * requirements above exclude. `integer_ops` false (ERT_SESSION_NO_FUSE) runs
 * step 2 only, which tests use as the unfolded reference.
 */
#include "session_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct qside {
    int32_t q, scale, zp; /* integer tensor, its scale and zero point (-1: none) */
} qside;

static int64_t nelems(const stensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->dims[d];
    return n;
}

/* Is n a DequantizeLinear with constant scale and zero point? Per-tensor
 * unless axis >= 0, then per-tensor or per-axis along `axis` of its data. */
static bool dq_side(const ert_session *s, const snode *n, int64_t axis, bool const_data, qside *out) {
    if (!n || n->dead || n->op != ERT_OP_DEQUANTIZE_LINEAR) return false;
    int32_t zp = n->n_in > 2 ? n->in[2] : -1;
    if (!ert_s_is_const(s, n->in[1]) || (zp >= 0 && !ert_s_is_const(s, zp))) return false;
    if (const_data && !ert_s_is_const(s, n->in[0])) return false;
    if (s->t[n->in[0]].dtype != ERT_DTYPE_I8 && s->t[n->in[0]].dtype != ERT_DTYPE_U8) return false;
    int64_t qa = n->params.quant.axis;
    if (qa >= 0 && qa != axis) return false;
    *out = (qside){n->in[0], n->in[1], zp};
    return true;
}

static snode *producer_node(ert_session *s, const int32_t *producer, int32_t t) {
    return t >= 0 && producer[t] >= 0 && !s->n[producer[t]].dead ? &s->n[producer[t]] : NULL;
}

/* The only live reader of t (NULL if several, none, or t is a graph output). */
static snode *sole_reader(ert_session *s, int32_t t) {
    if (s->t[t].n_uses != 1 || ert_s_is_graph_out(s, t)) return NULL;
    for (int j = 0; j < s->nn; j++) {
        if (s->n[j].dead) continue;
        for (int k = 0; k < s->n[j].n_in; k++)
            if (s->n[j].in[k] == t) return &s->n[j];
    }
    return NULL;
}

/* int32 bias of n_out values at scale xs * ws[m] from the float op's bias
 * input b (a DQ of int32 constants or an f32 constant); -1 on no bias,
 * -2 when it cannot be made (the op is then left alone). */
static int32_t int_bias(ert_session *s, const int32_t *producer, int32_t b, const qside *x, const qside *w,
                        int64_t n_out, ert_status *st) {
    if (b < 0) return -1;
    const stensor *bt = &s->t[b];
    if (nelems(bt) != n_out) return -2;
    snode *dq = producer_node(s, producer, b);
    const int32_t *bq = NULL;
    const float *bf = NULL, *bscale = NULL;
    int64_t nbs = 0;
    if (dq && dq->op == ERT_OP_DEQUANTIZE_LINEAR && ert_s_is_const(s, dq->in[0]) && ert_s_is_const(s, dq->in[1]) &&
        s->t[dq->in[0]].dtype == ERT_DTYPE_I32 && (dq->n_in < 3 || dq->in[2] < 0 || ert_s_is_const(s, dq->in[2]))) {
        bq = s->t[dq->in[0]].cdata;
        bscale = s->t[dq->in[1]].cdata;
        nbs = nelems(&s->t[dq->in[1]]);
    } else if (ert_s_is_const(s, b) && bt->dtype == ERT_DTYPE_F32) {
        bf = bt->cdata;
    } else {
        return -2;
    }
    const float xs = *(const float *)s->t[x->scale].cdata, *ws = s->t[w->scale].cdata;
    int64_t nws = nelems(&s->t[w->scale]);
    int32_t *v = malloc((size_t)n_out * sizeof *v);
    if (!v) {
        *st = ert_s_oom(s);
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
    if ((*st = ert_s_new_const(s, s->t[b].name, ERT_DTYPE_I32, 1, d, v, &id))) return -2;
    return id;
}

/* A (N, K) int8/uint8 constant transposed to (K, N) (Gemm transB). */
static int32_t transposed(ert_session *s, int32_t w, ert_status *st) {
    const stensor *t = &s->t[w];
    int64_t N = t->dims[0], K = t->dims[1];
    uint8_t *v = malloc((size_t)(N * K) + 1);
    if (!v) {
        *st = ert_s_oom(s);
        return -1;
    }
    const uint8_t *src = t->cdata;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) v[k * N + n] = src[n * K + k];
    int64_t d[2] = {K, N};
    int32_t id;
    if ((*st = ert_s_new_const(s, t->name, t->dtype, 2, d, v, &id))) return -1;
    return id;
}

/* Turn node f (Conv/MatMul/Gemm, its output read by relu-or-q) into the
 * integer op with inputs in[9]; run its prepare to fill params, workspace
 * and check the result. Returns false (graph unchanged) if prepare refuses. */
static bool rewrite(ert_session *s, snode *f, ert_op op, const int32_t *in, snode *relu, snode *q) {
    ert_tinfo tin[9], tout[1];
    for (int k = 0; k < 9; k++) {
        memset(&tin[k], 0, sizeof tin[k]);
        if (in[k] < 0) continue;
        const stensor *t = &s->t[in[k]];
        tin[k].dtype = t->dtype;
        tin[k].ndim = t->ndim;
        memcpy(tin[k].dims, t->dims, sizeof tin[k].dims);
        tin[k].const_data = ert_s_is_const(s, in[k]) ? t->cdata : NULL;
    }
    memset(tout, 0, sizeof tout);
    ert_op_params params;
    /* the float op's attributes (strides, pads, group, ...) are QLinearConv's; a MatMul/Gemm's are not read */
    ert_node shell = {.op = op, .name = (char *)f->name};
    const ert_node *src = op == ERT_OP_QLINEAR_CONV && f->src ? f->src : &shell;
    ert_prep p = {.ctx = s->ctx, .node = src, .n_in = in[8] >= 0 ? 9 : 8, .n_out = 1, .in = tin, .out = tout,
                  .params = &params, .n_threads = s->n_threads};
    char saved[ERT_ERRMSG_SIZE];
    memcpy(saved, s->ctx->err, sizeof saved);
    ert_status st = ert_op_get(op)->prepare(&p);
    memcpy(s->ctx->err, saved, sizeof saved); /* a refusal only means "not folded" */
    const stensor *y = &s->t[q->out[0]];
    if (st || tout[0].dtype != y->dtype || tout[0].ndim != y->ndim ||
        memcmp(tout[0].dims, y->dims, (size_t)y->ndim * sizeof y->dims[0]) != 0)
        return false;
    int32_t *blk = malloc((size_t)(9 + 2 + 1) * sizeof *blk);
    if (!blk) return false;
    memcpy(blk, in, 9 * sizeof *blk);
    blk[11] = q->out[0];
    free(f->in);
    f->in = blk;
    f->out = blk + 11;
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

/* Step 1 at Q node q: returns true if the pattern ending there was folded. */
static bool fold_at(ert_session *s, int32_t *producer, snode *q, ert_status *st) {
    if (q->params.quant.axis >= 0 || !ert_s_is_const(s, q->in[1]) || (q->n_in > 2 && q->in[2] >= 0 && !ert_s_is_const(s, q->in[2])))
        return false;
    snode *f = producer_node(s, producer, q->in[0]), *relu = NULL;
    if (f && f->op == ERT_OP_RELU) {
        if (sole_reader(s, f->out[0]) != q) return false;
        relu = f;
        f = producer_node(s, producer, relu->in[0]);
    }
    if (!f || sole_reader(s, f->out[0]) != (relu ? relu : q) || f->n_out != 1) return false;
    qside x, w;
    int32_t b = -1, wq;
    int64_t n_out;
    ert_op op;
    if (f->op == ERT_OP_CONV) {
        const ert_conv_params *cp = &f->params.conv;
        if (cp->has_residual || cp->act.kind != ERT_ACT_NONE || cp->has_scale || cp->nhwc) return false;
        if (!dq_side(s, producer_node(s, producer, f->in[0]), -1, false, &x) ||
            !dq_side(s, producer_node(s, producer, f->in[1]), 0, true, &w))
            return false;
        b = cp->has_bias ? f->in[2] : -1;
        n_out = s->t[w.q].dims[0];
        wq = w.q;
        op = ERT_OP_QLINEAR_CONV;
    } else if (f->op == ERT_OP_MATMUL || f->op == ERT_OP_GEMM) {
        const ert_gemm_params *gp = &f->params.gemm;
        bool gemm = f->op == ERT_OP_GEMM;
        if (gp->act.kind != ERT_ACT_NONE || (gemm && (gp->trans_a || gp->alpha != 1.0f || (gp->has_c && gp->beta != 1.0f))) ||
            (!gemm && (gp->trans_b || gp->has_c || f->n_in > 2)))
            return false;
        const stensor *bt = &s->t[f->in[1]];
        if (bt->ndim != 2) return false;
        int64_t w_axis = gemm && gp->trans_b ? 0 : 1; /* the N dim of the stored weight */
        if (!dq_side(s, producer_node(s, producer, f->in[0]), -1, false, &x) ||
            !dq_side(s, producer_node(s, producer, f->in[1]), w_axis, true, &w))
            return false;
        n_out = bt->dims[w_axis];
        b = gemm && gp->has_c ? f->in[2] : -1;
        wq = w.q;
        if (gemm && gp->trans_b && (wq = transposed(s, w.q, st)) < 0) return false;
        op = ERT_OP_QLINEAR_MATMUL;
    } else {
        return false;
    }
    if (nelems(&s->t[x.scale]) != 1 || nelems(&s->t[q->in[1]]) != 1) return false;
    int32_t bi = int_bias(s, producer, b, &x, &w, n_out, st);
    if (bi == -2) return false;
    int32_t in[9] = {x.q, x.scale, x.zp, wq, w.scale, w.zp, q->in[1], q->n_in > 2 ? q->in[2] : -1, bi};
    return rewrite(s, f, op, in, relu, q);
}

ert_status ert_s_fold_qdq(ert_session *s, bool integer_ops) {
    ert_status st = ERT_OK;
    int n_folded = 0;
    for (int i = 0; integer_ops && i < s->nn && !st; i++) {
        if (s->n[i].dead || s->n[i].op != ERT_OP_QUANTIZE_LINEAR) continue;
        /* fold_at may add tensors (s->t moves and grows) but never nodes */
        int32_t *producer = malloc((size_t)(s->nt ? s->nt : 1) * sizeof *producer);
        if (!producer) return ert_s_oom(s);
        ert_s_count_uses(s, producer);
        if (fold_at(s, producer, &s->n[i], &st)) n_folded++;
        free(producer);
    }
    if (st) return st;
    /* step 2: constant DQs -> f32 constants (the folded ones are unread now) */
    ert_s_remove_dead(s);
    int n_const = 0;
    for (int i = 0; i < s->nn; i++) {
        snode *n = &s->n[i];
        if (n->dead || n->op != ERT_OP_DEQUANTIZE_LINEAR) continue;
        bool all = true;
        for (int k = 0; k < n->n_in; k++) all = all && (n->in[k] < 0 || ert_s_is_const(s, n->in[k]));
        if (!all) continue;
        if ((st = ert_s_fold_node(s, n))) return st;
        n->dead = true;
        n_const++;
    }
    if (n_folded || n_const)
        ert_log(s->ctx, ERT_LOG_INFO, "Q/DQ: %d ops folded into integer ops, %d constant DequantizeLinear folded to f32",
                n_folded, n_const);
    return ERT_OK;
}

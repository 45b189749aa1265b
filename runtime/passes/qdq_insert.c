/*
 * Q/DQ insertion for ert_model_quantize (model level: the result is an
 * ordinary model in QDQ form, the layout onnxruntime's quantize_static
 * writes).
 *
 * Steps of ert_qdq_build:
 *   1. Working copy of the model sharing the source's weight storage.
 *   2. Each quantized layer: its constant weight is replaced by
 *      DequantizeLinear(w_q int8, scales f32, zero points int8 = 0) with
 *      per-channel scales max|w_c| / 127 (axis 0 for a Conv filter and a
 *      transB Gemm's B, the last axis otherwise) or one scale; values
 *      round half to even and clamp to [-127, 127]. A Conv bias, and a Gemm
 *      C of N values with alpha = beta = 1, becomes DequantizeLinear(int32,
 *      s_x * s_w, axis 0).
 *   3. Each tensor ert_qdq_tensors chose gets Q -> DQ (int8, zero point 0,
 *      scale amax / 127; or, with plan->amin, uint8 with scale
 *      (amax - amin) / 255 and zero point round(-amin / scale), what
 *      onnxruntime writes by default); every node reads the DQ output except layers that
 *      stay float, which keep reading the float tensor.
 *   4. Copy with only the tensors still used (the float weights of
 *      quantized layers are dropped, so the file holds int8 weights) and
 *      weights owned by the new model; validate (topological order).
 * Names follow onnxruntime: <t>_quantized, <t>_scale, <t>_zero_point,
 * <t>_DequantizeLinear_Output, nodes <t>_QuantizeLinear/_DequantizeLinear.
 * Before all this, ert_qdq_fold_bn folds each inference BatchNorm into the
 * Conv it alone follows (w' = w g / sqrt(var + eps), b' = (b - mean) g /
 * sqrt(var + eps) + beta), so weights are quantized as they will be used
 * and no Q/DQ pair sits on a pre-BatchNorm tensor, whose channels can
 * differ in scale by orders of magnitude (PaddleOCR's detector: a 0.67
 * relative error unfolded).
 * Limits: MatMul/Gemm weights of rank 2 only; an Add with a constant
 * operand stays float.
 */
#include "quant_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_weight(const ert_model *m, int32_t t) { return t >= 0 && m->tensors[t].role == ERT_ROLE_WEIGHT; }

static bool float_dtype(ert_dtype d) { return d == ERT_DTYPE_F32 || d == ERT_DTYPE_F16 || d == ERT_DTYPE_BF16; }

bool ert_qdq_is_candidate(const ert_model *m, const ert_node *n) {
    switch (n->op) {
    case ERT_OP_CONV:
        return n->n_in >= 2 && !is_weight(m, n->in[0]) && is_weight(m, n->in[1]) &&
               float_dtype(m->tensors[n->in[1]].dtype) && m->tensors[n->in[1]].ndim >= 3;
    case ERT_OP_GEMM:
    case ERT_OP_MATMUL:
        return n->n_in >= 2 && !is_weight(m, n->in[0]) && is_weight(m, n->in[1]) &&
               float_dtype(m->tensors[n->in[1]].dtype) && m->tensors[n->in[1]].ndim == 2;
    case ERT_OP_ADD:
        return n->n_in == 2 && n->in[0] >= 0 && n->in[1] >= 0 && !is_weight(m, n->in[0]) && !is_weight(m, n->in[1]);
    default: return false;
    }
}

/* Ops whose output may share its input's scale: they only select or move
 * values (max of a window, reshapes), so quantizing before or after is the
 * same. */
static bool keeps_range(ert_op op) {
    return op == ERT_OP_MAXPOOL || op == ERT_OP_GLOBAL_MAXPOOL || op == ERT_OP_RESHAPE || op == ERT_OP_FLATTEN ||
           op == ERT_OP_SQUEEZE || op == ERT_OP_UNSQUEEZE || op == ERT_OP_TRANSPOSE || op == ERT_OP_IDENTITY;
}

static bool is_graph_output(const ert_model *m, int32_t t) {
    for (int i = 0; i < m->n_outputs; i++)
        if (m->outputs[i] == t) return true;
    return false;
}

/* The single node reading t (-1: none or several). */
static int sole_consumer(const ert_model *m, int32_t t) {
    int found = -1;
    for (int i = 0; i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_in; k++)
            if (m->nodes[i].in[k] == t) {
                if (found >= 0 && found != i) return -1;
                found = i;
            }
    return found;
}

/* Number of activation inputs a layer quantizes (Conv/Gemm/MatMul: input 0;
 * Add: both). */
static int n_act_inputs(const ert_node *n) { return n->op == ERT_OP_ADD ? 2 : 1; }

/* A layer's quantized output: its output, or that of a Relu alone reading
 * it; -1 when the result is a graph output. */
static int32_t layer_output(const ert_model *m, const ert_node *n) {
    int32_t o = n->out[0];
    if (is_graph_output(m, o)) return -1;
    int c = sole_consumer(m, o);
    if (c >= 0 && m->nodes[c].op == ERT_OP_RELU) {
        o = m->nodes[c].out[0];
        if (is_graph_output(m, o)) return -1;
    }
    return o;
}

ert_status ert_qdq_tensors(const ert_model *m, const bool *quantize, int32_t *want) {
    for (int t = 0; t < m->n_tensors; t++) want[t] = -1;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *n = &m->nodes[i];
        if (!quantize[i]) continue;
        for (int k = 0; k < n_act_inputs(n); k++) want[n->in[k]] = n->in[k];
        int32_t o = layer_output(m, n);
        if (o >= 0) want[o] = o;
    }
    /* src[t]: the tensor whose values t only selects or moves (through
     * chains of range-keeping ops; nodes are in topological order) */
    int32_t *src = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *src);
    if (!src) return ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory quantizing the model");
    for (int t = 0; t < m->n_tensors; t++) src[t] = t;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *n = &m->nodes[i];
        if (keeps_range(n->op) && n->n_in >= 1 && n->in[0] >= 0 && n->n_out >= 1) src[n->out[0]] = src[n->in[0]];
    }
    for (int t = 0; t < m->n_tensors; t++)
        if (want[t] >= 0 && want[src[t]] >= 0) want[t] = want[src[t]];
    free(src);
    return ERT_OK;
}

/* ------------------------------------------------------------------ copies */

/* n's op, name and attributes with other inputs and outputs, added to c. */
static ert_status add_node_like(ert_model *c, const ert_node *n, const int32_t *in, int n_in, const int32_t *out) {
    ert_attr *at = calloc((size_t)n->n_attrs + 1, sizeof *at);
    if (!at) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory copying the model");
    for (int k = 0; k < n->n_attrs; k++) {
        const ert_attr_val *a = &n->attrs[k];
        at[k] = (ert_attr){.name = a->name, .type = a->type, .i = a->i, .f = a->f, .ints = a->ints, .floats = a->floats,
                           .n = a->n, .s = a->s};
    }
    ert_status st = ert_model_add_node(c, n->op, n->name, in, n_in, out, n->n_out, at, n->n_attrs);
    free(at);
    return st;
}

/* Node edits applied while copying (per node of the source): left out,
 * other inputs (n_in[i] > 0: in[i][0..n_in[i])), another output 0
 * (out0[i] >= 0). */
typedef struct medit {
    bool *skip;
    int *n_in;
    int32_t (*in)[3];
    int32_t *out0;
} medit;

/* A copy of m keeping the tensors with keep[t] (NULL: all), renumbered;
 * weight data copied (own) or shared; edit may be NULL. */
static ert_status copy_model(const ert_model *m, const bool *keep, bool own, const medit *edit, ert_model **out) {
    ert_context *ctx = m->ctx;
    ert_model *c = ert_model_new(ctx);
    int32_t *map = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *map);
    ert_status st = ERT_OK;
    if (!c || !map) {
        st = ert_set_error(ctx, ERT_E_NOMEM, "out of memory copying the model");
        goto done;
    }
    c->opset = m->opset;
    for (int t = 0; t < m->n_tensors; t++) {
        map[t] = -1;
        if (keep && !keep[t]) continue;
        const ert_tensor *s = &m->tensors[t];
        int32_t id = ert_model_add_tensor(c, s->name, s->dtype, s->role, s->ndim, s->dims);
        if (id < 0) {
            st = ERT_E_NOMEM;
            goto done;
        }
        map[t] = id;
        if (!s->data) continue;
        if (!own) {
            c->tensors[id].data = s->data;
            continue;
        }
        size_t nb = 0;
        ert_tensor_nbytes(s, &nb);
        void *d = malloc(nb ? nb : 1);
        if (!d) {
            st = ert_set_error(ctx, ERT_E_NOMEM, "out of memory copying the model");
            goto done;
        }
        memcpy(d, s->data, nb);
        c->tensors[id].data = d;
        c->tensors[id].data_owned = true;
    }
    for (int i = 0; i < m->n_nodes && st == ERT_OK; i++) {
        const ert_node *n = &m->nodes[i];
        if (edit && edit->skip[i]) continue;
        int32_t io[2 * 4096];
        int n_in = edit && edit->n_in[i] ? edit->n_in[i] : n->n_in;
        if (n_in + n->n_out > (int)(sizeof io / sizeof io[0])) {
            st = ert_set_error(ctx, ERT_E_NOMEM, "node '%s': too many inputs to copy", n->name);
            break;
        }
        for (int k = 0; k < n_in; k++) {
            int32_t t = edit && edit->n_in[i] ? edit->in[i][k] : n->in[k];
            io[k] = t < 0 ? -1 : map[t];
        }
        for (int k = 0; k < n->n_out; k++) io[n_in + k] = map[edit && k == 0 && edit->out0[i] >= 0 ? edit->out0[i] : n->out[k]];
        st = add_node_like(c, n, io, n_in, io + n_in);
    }
    for (int i = 0; i < m->n_inputs && st == ERT_OK; i++) st = ert_model_add_graph_input(c, map[m->inputs[i]]);
    for (int i = 0; i < m->n_outputs && st == ERT_OK; i++) st = ert_model_add_graph_output(c, map[m->outputs[i]]);
done:
    free(map);
    if (st != ERT_OK) {
        ert_model_free(c);
        return st;
    }
    *out = c;
    return ERT_OK;
}

ert_status ert_qdq_with_outputs(const ert_model *m, const int32_t *extra, int n_extra, ert_model **out) {
    ert_model *c = NULL;
    ert_status st = copy_model(m, NULL, false, NULL, &c);
    for (int i = 0; i < n_extra && st == ERT_OK; i++) st = ert_model_add_graph_output(c, extra[i]);
    if (st == ERT_OK) st = ert_model_validate(c);
    if (st != ERT_OK) {
        ert_model_free(c);
        return st;
    }
    *out = c;
    return ERT_OK;
}

/* ------------------------------------------------------------------ BatchNorm */

/* A BatchNorm parameter: a 1-D float weight of k values. */
static bool bn_param(const ert_model *m, int32_t t, int64_t k) {
    return is_weight(m, t) && float_dtype(m->tensors[t].dtype) && m->tensors[t].ndim == 1 && m->tensors[t].dims[0] == k;
}

static float *weight_f32(const ert_tensor *t, int64_t n);

/* Conv i followed by BatchNormalization j (the conv's only reader, inference
 * form, constant parameters): add the folded filter and bias to w and record
 * the edit. Returns false when the pair does not fold. */
static bool fold_pair(ert_model *w, const ert_model *m, int i, medit *e, ert_status *st) {
    const ert_node *n = &m->nodes[i];
    if (n->op != ERT_OP_CONV || n->n_in < 2 || !is_weight(m, n->in[1]) || !float_dtype(m->tensors[n->in[1]].dtype) ||
        is_graph_output(m, n->out[0]))
        return false;
    int j = sole_consumer(m, n->out[0]);
    const ert_node *bn = j >= 0 ? &m->nodes[j] : NULL;
    const ert_tensor *wt = &m->tensors[n->in[1]];
    int64_t k = wt->dims[0], ne = 0;
    if (!bn || bn->op != ERT_OP_BATCHNORM || bn->n_in != 5 || bn->n_out != 1 || bn->in[0] != n->out[0] ||
        ert_attr_int(bn, "training_mode", 0) != 0 || !ert_dims_nelems(wt->ndim, wt->dims, &ne) || k <= 0)
        return false;
    for (int q = 1; q < 5; q++)
        if (!bn_param(m, bn->in[q], k)) return false;
    bool has_b = n->n_in >= 3 && n->in[2] >= 0;
    if (has_b && !bn_param(m, n->in[2], k)) return false;
    float *f = weight_f32(wt, ne), *g = weight_f32(&m->tensors[bn->in[1]], k), *beta = weight_f32(&m->tensors[bn->in[2]], k);
    float *mean = weight_f32(&m->tensors[bn->in[3]], k), *var = weight_f32(&m->tensors[bn->in[4]], k);
    float *b = has_b ? weight_f32(&m->tensors[n->in[2]], k) : calloc((size_t)k, sizeof *b);
    int32_t wid = -1, bid = -1;
    if (f && g && beta && mean && var && b) {
        double eps = ert_attr_float(bn, "epsilon", 1e-5f);
        int64_t per = ne / k;
        for (int64_t c = 0; c < k; c++) {
            double sc = g[c] / sqrt((double)var[c] + eps);
            for (int64_t q = 0; q < per; q++) f[c * per + q] = (float)(f[c * per + q] * sc);
            b[c] = (float)(((double)b[c] - mean[c]) * sc + beta[c]);
        }
        char name[400];
        snprintf(name, sizeof name, "%s.bn_folded_weight", n->name);
        wid = ert_model_add_tensor(w, name, ERT_DTYPE_F32, ERT_ROLE_WEIGHT, wt->ndim, wt->dims);
        if (wid >= 0) w->tensors[wid].data = f, w->tensors[wid].data_owned = true, f = NULL;
        snprintf(name, sizeof name, "%s.bn_folded_bias", n->name);
        bid = wid >= 0 ? ert_model_add_tensor(w, name, ERT_DTYPE_F32, ERT_ROLE_WEIGHT, 1, &k) : -1;
        if (bid >= 0) w->tensors[bid].data = b, w->tensors[bid].data_owned = true, b = NULL;
    }
    free(f); free(g); free(beta); free(mean); free(var); free(b);
    if (wid < 0 || bid < 0) {
        *st = ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory folding BatchNorm '%s'", bn->name);
        return false;
    }
    e->n_in[i] = 3;
    e->in[i][0] = n->in[0];
    e->in[i][1] = wid;
    e->in[i][2] = bid;
    e->out0[i] = bn->out[0];
    e->skip[j] = true;
    return true;
}

ert_status ert_qdq_fold_bn(const ert_model *m, ert_model **out) {
    ert_model *w = NULL;
    size_t nn = (size_t)m->n_nodes + 1;
    medit e = {.skip = calloc(nn, sizeof *e.skip), .n_in = calloc(nn, sizeof *e.n_in), .in = calloc(nn, sizeof *e.in),
               .out0 = malloc(nn * sizeof *e.out0)};
    ert_status st = e.skip && e.n_in && e.in && e.out0 ? copy_model(m, NULL, false, NULL, &w)
                                                       : ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory folding BatchNorm");
    int n_fold = 0;
    for (int i = 0; st == ERT_OK && i < m->n_nodes; i++) e.out0[i] = -1;
    for (int i = 0; st == ERT_OK && i < m->n_nodes; i++) n_fold += fold_pair(w, m, i, &e, &st);
    ert_model *res = NULL;
    if (st == ERT_OK) st = copy_model(w, NULL, true, &e, &res);
    if (st == ERT_OK) st = ert_model_validate(res);
    if (st == ERT_OK && n_fold) ert_log(m->ctx, ERT_LOG_INFO, "quantize: %d BatchNorms folded into their convs", n_fold);
    ert_model_free(w);
    free(e.skip);
    free(e.n_in);
    free(e.in);
    free(e.out0);
    if (st != ERT_OK) {
        ert_model_free(res);
        return st;
    }
    *out = res;
    return ERT_OK;
}

/* ------------------------------------------------------------------ build */

typedef struct qb {
    ert_model *w;             /* working model */
    ert_context *ctx;
    ert_op q_op, dq_op;
    int32_t *dq_of;           /* per original tensor: its activation DQ output, -1 none */
    int32_t *wdq_of;          /* per original weight: its DQ output (a weight shared by layers is quantized once) */
    float **wsc_of;           /* ... and its per-channel scales */
    int64_t *wch_of;
} qb;

static ert_status oom(qb *b) { return ert_set_error(b->ctx, ERT_E_NOMEM, "out of memory quantizing the model"); }

/* A new weight of the working model owning `data`. */
static int32_t add_weight(qb *b, const char *base, const char *suffix, ert_dtype dt, int ndim, const int64_t *dims,
                          void *data) {
    char name[512];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    int32_t id = data ? ert_model_add_tensor(b->w, name, dt, ERT_ROLE_WEIGHT, ndim, dims) : -1;
    if (id < 0) {
        free(data);
        return -1;
    }
    b->w->tensors[id].data = data;
    b->w->tensors[id].data_owned = true;
    return id;
}

/* An activation shaped like tensor `like` of the working model (its dims
 * are copied first: adding a tensor may move the tensor array). */
static int32_t add_act(qb *b, const char *base, const char *suffix, ert_dtype dt, int32_t like) {
    char name[512];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    int64_t dims[ERT_MAX_DIMS];
    int nd = b->w->tensors[like].ndim;
    memcpy(dims, b->w->tensors[like].dims, sizeof dims);
    return ert_model_add_tensor(b->w, name, dt, ERT_ROLE_ACTIVATION, nd, dims);
}

static ert_status add_node(qb *b, ert_op op, const char *base, const char *suffix, const int32_t *in, int n_in,
                           int32_t out, int64_t axis) {
    char name[512];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    ert_attr at = ERT_ATTR_I("axis", axis);
    return ert_model_add_node(b->w, op, name, in, n_in, &out, 1, &at, axis >= 0 ? 1 : 0);
}

/* w's values as f32 (a new buffer). */
static float *weight_f32(const ert_tensor *t, int64_t n) {
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    if (!f) return NULL;
    if (t->dtype == ERT_DTYPE_F32) memcpy(f, t->data, (size_t)n * sizeof *f);
    else
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = ((const uint16_t *)t->data)[i];
            f[i] = t->dtype == ERT_DTYPE_F16 ? ert_f16_to_f32(h) : ert_bf16_to_f32(h);
        }
    return f;
}

static float scale_of(double amax, int levels) { return amax > 0 ? (float)(amax / levels) : 1.0f; }

/* DQ(int8 w, per-channel scales along axis or one scale) replacing weight
 * t; the scales are returned in *scales (n_ch entries, malloc'd). Not
 * vectorised: aarch64 gcc 12 ICE (quant_internal.h). */
ERT_NO_VECTORIZE static ert_status quantize_weight(qb *b, int32_t t, int axis, bool per_tensor, int32_t *dq_out, float **scales,
                                  int64_t *n_ch) {
    const ert_tensor *src = &b->w->tensors[t];
    int64_t n = 0, outer = 1, inner = 1, ch = src->dims[axis];
    ert_dims_nelems(src->ndim, src->dims, &n);
    for (int d = 0; d < axis; d++) outer *= src->dims[d];
    for (int d = axis + 1; d < src->ndim; d++) inner *= src->dims[d];
    float *f = weight_f32(src, n);
    int8_t *q = malloc((size_t)(n ? n : 1));
    int64_t ns = per_tensor ? 1 : ch;
    float *sc = malloc((size_t)(ch ? ch : 1) * sizeof *sc), *sc_w = malloc((size_t)ns * sizeof *sc_w);
    int8_t *zp = calloc((size_t)ns, 1);
    if (!f || !q || !sc || !sc_w || !zp) {
        free(f); free(q); free(sc); free(sc_w); free(zp);
        return oom(b);
    }
    double all = 0;
    for (int64_t c = 0; c < ch; c++) {
        double mx = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) mx = fmax(mx, fabs((double)f[(o * ch + c) * inner + i]));
        sc[c] = scale_of(mx, 127);
        all = fmax(all, mx);
    }
    if (per_tensor)
        for (int64_t c = 0; c < ch; c++) sc[c] = scale_of(all, 127);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < ch; c++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t k = (o * ch + c) * inner + i;
                float v = nearbyintf(f[k] / sc[c]); /* default rounding: half to even */
                q[k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
            }
    free(f);
    memcpy(sc_w, sc, (size_t)ns * sizeof *sc_w);
    char base[400];
    snprintf(base, sizeof base, "%s", src->name);
    int64_t dims[ERT_MAX_DIMS];
    int nd = src->ndim;
    memcpy(dims, src->dims, sizeof dims);
    int32_t wq = add_weight(b, base, "_quantized", ERT_DTYPE_I8, nd, dims, q);
    int32_t ws = add_weight(b, base, "_scale", ERT_DTYPE_F32, per_tensor ? 0 : 1, &ns, sc_w);
    int32_t wz = add_weight(b, base, "_zero_point", ERT_DTYPE_I8, per_tensor ? 0 : 1, &ns, zp);
    if (wq < 0 || ws < 0 || wz < 0) {
        free(sc);
        return oom(b);
    }
    int32_t o = add_act(b, base, "_DequantizeLinear_Output", ERT_DTYPE_F32, t);
    int32_t in[3] = {wq, ws, wz};
    ert_status st = o < 0 ? oom(b) : add_node(b, b->dq_op, base, "_DequantizeLinear", in, 3, o, per_tensor ? -1 : axis);
    if (st != ERT_OK) {
        free(sc);
        return st;
    }
    *dq_out = o;
    *scales = sc;
    *n_ch = ch;
    return ERT_OK;
}

/* DQ(int32 bias, s_x * s_w[c], axis 0) replacing the 1-D f32 bias t of ch values. */
static ert_status quantize_bias(qb *b, int32_t t, float sx, const float *sw, int64_t ch, int32_t *dq_out) {
    const ert_tensor *src = &b->w->tensors[t];
    int64_t n = 0;
    ert_dims_nelems(src->ndim, src->dims, &n);
    if (src->ndim != 1 || n != ch || !float_dtype(src->dtype)) return ERT_OK; /* stays float */
    float *f = weight_f32(src, n);
    int32_t *q = malloc((size_t)(n ? n : 1) * sizeof *q);
    float *sc = malloc((size_t)(n ? n : 1) * sizeof *sc);
    if (!f || !q || !sc) {
        free(f); free(q); free(sc);
        return oom(b);
    }
    for (int64_t c = 0; c < n; c++) {
        sc[c] = sx * sw[c];
        double v = nearbyint((double)f[c] / sc[c]);
        q[c] = (int32_t)(v > INT32_MAX ? INT32_MAX : v < -INT32_MAX ? -INT32_MAX : v);
    }
    free(f);
    char base[400];
    snprintf(base, sizeof base, "%s", src->name);
    int32_t bq = add_weight(b, base, "_quantized", ERT_DTYPE_I32, 1, &n, q);
    int32_t bs = add_weight(b, base, "_scale", ERT_DTYPE_F32, 1, &n, sc);
    if (bq < 0 || bs < 0) return oom(b);
    int32_t o = add_act(b, base, "_DequantizeLinear_Output", ERT_DTYPE_F32, t);
    int32_t in[2] = {bq, bs};
    ert_status st = o < 0 ? oom(b) : add_node(b, b->dq_op, base, "_DequantizeLinear", in, 2, o, 0);
    if (st == ERT_OK) *dq_out = o;
    return st;
}

void ert_qdq_act_params(double lo, double hi, bool asym, float *scale, int32_t *zero_point) {
    if (!asym) {
        *scale = scale_of(hi, 127);
        *zero_point = 0;
        return;
    }
    const double w = hi - lo;
    *scale = w > 0 ? (float)(w / 255) : 1.0f;
    const double z = w > 0 ? nearbyint(-lo / (double)*scale) : 0;
    *zero_point = z < 0 ? 0 : z > 255 ? 255 : (int32_t)z;
}

/* The range plan gives tensor t (an index into plan's arrays). */
static void act_params(const ert_qdq_plan *plan, int32_t t, float *scale, int32_t *zp) {
    ert_qdq_act_params(plan->amin ? plan->amin[t] : -plan->amax[t], plan->amax[t], plan->amin != NULL, scale, zp);
}

/* Q -> DQ on activation t: int8 (zero point 0) or uint8 with a zero point. */
static ert_status quantize_act(qb *b, int32_t t, float scale, int32_t zero_point, bool asym) {
    char base[400];
    snprintf(base, sizeof base, "%s", b->w->tensors[t].name);
    const ert_dtype qt = asym ? ERT_DTYPE_U8 : ERT_DTYPE_I8;
    float *s = malloc(sizeof *s);
    uint8_t *z = malloc(1);
    if (s) *s = scale;
    if (z) *z = asym ? (uint8_t)zero_point : (uint8_t)(int8_t)zero_point;
    int32_t ts = add_weight(b, base, "_scale", ERT_DTYPE_F32, 0, NULL, s);
    int32_t tz = s ? add_weight(b, base, "_zero_point", qt, 0, NULL, z) : (free(z), -1);
    if (ts < 0 || tz < 0) return oom(b);
    int32_t tq = add_act(b, base, "_quantized", qt, t);
    int32_t td = tq < 0 ? -1 : add_act(b, base, "_DequantizeLinear_Output", ERT_DTYPE_F32, t);
    if (td < 0) return oom(b);
    int32_t qin[3] = {t, ts, tz}, din[3] = {tq, ts, tz};
    ert_status st = add_node(b, b->q_op, base, "_QuantizeLinear", qin, 3, tq, -1);
    if (st == ERT_OK) st = add_node(b, b->dq_op, base, "_DequantizeLinear", din, 3, td, -1);
    if (st == ERT_OK) b->dq_of[t] = td;
    return st;
}

/* Steps 2-3 on the working model (indices of m's tensors and nodes are the
 * same in it). */
static ert_status rewrite(qb *b, const ert_model *m, const ert_qdq_plan *plan, const int32_t *want) {
    ert_status st = ERT_OK;
    for (int t = 0; t < m->n_tensors && st == ERT_OK; t++)
        if (want[t] >= 0) {
            float sc;
            int32_t zp;
            act_params(plan, want[t], &sc, &zp);
            st = quantize_act(b, t, sc, zp, plan->amin != NULL);
        }
    int n_nodes = m->n_nodes;
    for (int i = 0; i < n_nodes && st == ERT_OK; i++) {
        ert_node *n = &b->w->nodes[i];
        bool is_layer = ert_qdq_is_candidate(m, &m->nodes[i]);
        if (is_layer && !plan->quantize[i]) continue; /* stays float: reads the float tensors */
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && n->in[k] < m->n_tensors && b->dq_of[n->in[k]] >= 0) n->in[k] = b->dq_of[n->in[k]];
        if (!is_layer || n->op == ERT_OP_ADD) continue;
        const ert_tensor *w = &m->tensors[m->nodes[i].in[1]];
        int axis = w->ndim - 1;
        if (n->op == ERT_OP_CONV || (n->op == ERT_OP_GEMM && ert_node_attr(&m->nodes[i], "transB") &&
                                     ert_attr_int(&m->nodes[i], "transB", 0)))
            axis = 0;
        int32_t wt = m->nodes[i].in[1], x = m->nodes[i].in[0];
        if (b->wdq_of[wt] < 0) {
            st = quantize_weight(b, wt, axis, plan->per_tensor, &b->wdq_of[wt], &b->wsc_of[wt], &b->wch_of[wt]);
            if (st != ERT_OK) break;
        }
        int32_t dq = b->wdq_of[wt];
        const float *sw = b->wsc_of[wt];
        int64_t ch = b->wch_of[wt];
        n = &b->w->nodes[i]; /* add_node may have moved the array */
        n->in[1] = dq;
        int32_t bias = n->n_in >= 3 ? m->nodes[i].in[2] : -1;
        bool bias_ok = bias >= 0 && is_weight(m, bias) && want[x] >= 0 &&
                       (n->op == ERT_OP_CONV || (ert_attr_float(&m->nodes[i], "alpha", 1) == 1.0f &&
                                                 ert_attr_float(&m->nodes[i], "beta", 1) == 1.0f));
        if (bias_ok) {
            int32_t bdq = -1, xzp;
            float xs;
            act_params(plan, want[x], &xs, &xzp);
            st = quantize_bias(b, bias, xs, sw, ch, &bdq);
            n = &b->w->nodes[i];
            if (st == ERT_OK && bdq >= 0) n->in[2] = bdq;
        }
    }
    return st;
}

ert_status ert_qdq_build(const ert_model *m, const ert_qdq_plan *plan, ert_model **out) {
    ert_context *ctx = m->ctx;
    const ert_op_def *q = ert_op_find("QuantizeLinear"), *dq = ert_op_find("DequantizeLinear");
    if (!q || !dq)
        return ert_set_error(ctx, ERT_E_UNSUPPORTED, "this build has no QuantizeLinear/DequantizeLinear ops");
    qb b = {.ctx = ctx, .q_op = q->op, .dq_op = dq->op};
    int32_t *want = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *want);
    size_t nt = (size_t)(m->n_tensors ? m->n_tensors : 1);
    b.dq_of = malloc(nt * sizeof *b.dq_of);
    b.wdq_of = malloc(nt * sizeof *b.wdq_of);
    b.wsc_of = calloc(nt, sizeof *b.wsc_of);
    b.wch_of = calloc(nt, sizeof *b.wch_of);
    bool *used = NULL;
    ert_model *res = NULL;
    ert_status st = !want || !b.dq_of || !b.wdq_of || !b.wsc_of || !b.wch_of
                        ? ert_set_error(ctx, ERT_E_NOMEM, "out of memory quantizing the model")
                        : ERT_OK;
    if (st == ERT_OK) st = ert_qdq_tensors(m, plan->quantize, want);
    for (int t = 0; st == ERT_OK && t < m->n_tensors; t++) b.dq_of[t] = b.wdq_of[t] = -1;
    if (st == ERT_OK) st = copy_model(m, NULL, false, NULL, &b.w);
    if (st == ERT_OK) st = rewrite(&b, m, plan, want);
    if (st == ERT_OK) {
        used = calloc((size_t)b.w->n_tensors + 1, sizeof *used);
        if (!used) st = oom(&b);
    }
    if (st == ERT_OK) {
        for (int i = 0; i < b.w->n_nodes; i++) {
            for (int k = 0; k < b.w->nodes[i].n_in; k++)
                if (b.w->nodes[i].in[k] >= 0) used[b.w->nodes[i].in[k]] = true;
            for (int k = 0; k < b.w->nodes[i].n_out; k++) used[b.w->nodes[i].out[k]] = true;
        }
        for (int i = 0; i < b.w->n_inputs; i++) used[b.w->inputs[i]] = true;
        for (int i = 0; i < b.w->n_outputs; i++) used[b.w->outputs[i]] = true;
        st = copy_model(b.w, used, true, NULL, &res);
    }
    if (st == ERT_OK) st = ert_model_validate(res);
    free(want);
    free(b.dq_of);
    free(b.wdq_of);
    for (int t = 0; b.wsc_of && t < m->n_tensors; t++) free(b.wsc_of[t]);
    free(b.wsc_of);
    free(b.wch_of);
    free(used);
    ert_model_free(b.w);
    if (st != ERT_OK) {
        ert_model_free(res);
        return st;
    }
    *out = res;
    return ERT_OK;
}

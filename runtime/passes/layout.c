/* Session step 4c: channels-last regions (CUDA f16/bf16 sessions, and the
 * int8 nodes of CUDA f32 sessions, unless ERT_SESSION_NO_NHWC). Called from
 * build() in session.c. */
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ step 4c */

/* Channels-last activations (CUDA sessions in f16/bf16, unless
 * ERT_SESSION_NO_NHWC). cuDNN's tensor-core convolutions work on NHWC data;
 * given NCHW they transpose x and y around every call. So:
 *   0. (after 1) Keep NCHW unless the backend's measurements say the convs
 *      run faster NHWC, edges included (nhwc_pays; ERT_SESSION_NHWC skips it).
 *   1. Decide, in node order, which nodes run channels-last: every 2-D Conv
 *      with symmetric pads; MaxPool/AveragePool (2-D), GlobalAverage/MaxPool
 *      and unary element-wise ops whose input is channels-last; binary
 *      element-wise ops and Concat with a channels-last input whose other
 *      inputs are 4-D (transposed to it) or single values. Their outputs
 *      become channels-last (never a graph input or output).
 *   2. Each such tensor t gets a twin with dims (N, H, W, C) that the
 *      channels-last nodes write and read. A node that needs t itself (any
 *      other op) gets it from a Transpose(0, 3, 1, 2) placed before the first
 *      such consumer -- a Reshape when H = W = 1 (after a global pool), where
 *      both layouts are the same bytes and the planner aliases it (no copy).
 *      An NCHW 4-D input of a channels-last node goes through a
 *      Transpose(0, 2, 3, 1) placed before its first such consumer.
 * Every tensor keeps honest dims, so a channels-last region is ordinary ONNX
 * on permuted tensors except Conv and the pools, which carry params nhwc. A
 * residual (N, C, 1, 1) broadcast in an SE block stays correct: the gate is
 * channels-last (N, 1, 1, C) too, and the binary op broadcasts it.
 *   3. Transposes at the region's edge are views: Transpose(0,2,3,1) of a
 *      channels-last tensor is a Reshape of its twin (the same bytes), and
 *      Transpose(0,3,1,2) of an (N,H,W,C) tensor gives its output a twin
 *      that is a Reshape of that input (ConvNeXt's permutes around
 *      LayerNorm and the MLP); the planner aliases both.
 * Split (YOLO's C2f chunks; its axis remapped, the copy kernel splits any
 * axis) and Resize (per-dim scales permuted with the dims) with a
 * channels-last input stay in the region too.
 * Quantized models (nhwc_quant_ok): 2-D QLinearConv starts a region like
 * Conv, and ert.QLinearAdd, ert.QLut, int8 MaxPool and per-tensor Q/DQ stay in it;
 * then NHWC always pays (nhwc_pays). In f32 sessions (quant_only) only
 * those int8 nodes, DQ excepted, run channels-last.
 * Limits: ops outside the list end the region (an unfolded BatchNorm,
 * Pad, Slice...), and so does a binary op with a constant of rank < 4
 * holding more than one value, except a per-channel (C,1,1) constant (the
 * same bytes as (1,1,1,C)).
 */
static bool nhwc_unary(ert_op op) {
    switch (op) {
    case ERT_OP_RELU: case ERT_OP_LEAKY_RELU: case ERT_OP_CLIP: case ERT_OP_SIGMOID: case ERT_OP_TANH:
    case ERT_OP_HARD_SIGMOID: case ERT_OP_HARD_SWISH: case ERT_OP_SILU: case ERT_OP_GELU: case ERT_OP_ERF:
    case ERT_OP_SQRT: case ERT_OP_EXP: case ERT_OP_LOG: case ERT_OP_NEG: case ERT_OP_ABS: case ERT_OP_RECIPROCAL:
    case ERT_OP_FLOOR: case ERT_OP_CEIL:
        return true;
    default: return false;
    }
}

static bool nhwc_binary(ert_op op) {
    return op == ERT_OP_ADD || op == ERT_OP_SUB || op == ERT_OP_MUL || op == ERT_OP_DIV || op == ERT_OP_POW ||
           op == ERT_OP_MIN || op == ERT_OP_MAX;
}

static int64_t n_elems_of(const ert_gtensor *t) {
    int64_t n = 0;
    return ert_dims_nelems(t->ndim, t->dims, &n) ? n : -1;
}

/* A 4-D Transpose with this permutation. */
static bool is_perm4(const ert_graph *g, const ert_gnode *n, const int *perm) {
    if (n->op != ERT_OP_TRANSPOSE || n->n_in != 1 || n->n_out != 1 || g->t[n->in[0]].ndim != 4) return false;
    for (int d = 0; d < 4; d++)
        if (n->params.transpose.perm[d] != perm[d]) return false;
    return true;
}

static const int to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};

/* A constant of one value per channel of C, shaped (C,1,1) or (1,C,1,1) as
 * exporters write a layer scale or an unfolded bias: channels-last it is the
 * same bytes shaped (1,1,1,C). */
static bool chan_const(const ert_graph *g, int32_t t, int64_t C) {
    const ert_gtensor *c = &g->t[t];
    if (!ert_graph_is_const(g, t) || C <= 1 || !c->cdata) return false;
    if (c->ndim == 3) return c->dims[0] == C && c->dims[1] == 1 && c->dims[2] == 1;
    return c->ndim == 4 && c->dims[0] == 1 && c->dims[1] == C && c->dims[2] == 1 && c->dims[3] == 1;
}

/* Is input k of n an activation the layout applies to? Not Conv's filter
 * and bias, Resize's and Split's shape inputs, nor the integer ops' scales,
 * zero points, filter and bias. */
static bool act_input(const ert_gnode *n, int k) {
    switch (n->op) {
    case ERT_OP_CONV: return k != 1 && k != 2; /* x, the fused residual */
    case ERT_OP_RESIZE: case ERT_OP_SPLIT: case ERT_OP_QLINEAR_CONV: case ERT_OP_QUANTIZE_LINEAR:
    case ERT_OP_DEQUANTIZE_LINEAR: case ERT_OP_QLUT:
        return k == 0;
    case ERT_OP_QLINEAR_ADD: return k == 0 || k == 3;
    default: return true;
    }
}

static bool is_q8(ert_dtype dt) { return dt == ERT_DTYPE_I8 || dt == ERT_DTYPE_U8; }

/* The int8 nodes of a channels-last region (the CUDA int8 kernels read and
 * write NHWC; the tensor-core convs load 16 channels of a tap at once): 2-D
 * QLinearConv, ert.QLinearAdd, ert.QLut, int8 MaxPool, per-tensor Q and DQ (element
 * by element whatever the layout; per-axis ones end the region). With
 * `quant_only` (f32 sessions) DQ ends it: the float ops stay NCHW. */
static bool nhwc_quant_ok(const ert_graph *g, const ert_gnode *n, const bool *nh, bool quant_only) {
    if (n->n_in < 1 || n->in[0] < 0) return false;
    const ert_gtensor *x = &g->t[n->in[0]], *y = &g->t[n->out[0]];
    if (x->ndim != 4) return false;
    switch (n->op) {
    case ERT_OP_QLINEAR_CONV: return n->params.quant.conv.nsp == 2 && is_q8(y->dtype);
    case ERT_OP_QLINEAR_ADD:
        if (n->n_in < 4 || n->in[3] < 0 || !(nh[n->in[0]] || nh[n->in[3]])) return false;
        return g->t[n->in[3]].ndim == 4 && n_elems_of(&g->t[n->in[3]]) == n_elems_of(y) && n_elems_of(x) == n_elems_of(y);
    case ERT_OP_MAXPOOL: return nh[n->in[0]] && is_q8(x->dtype) && n->params.pool.nsp == 2;
    case ERT_OP_QLUT: return nh[n->in[0]]; /* a byte table: element by element */
    case ERT_OP_DEQUANTIZE_LINEAR:
        if (quant_only || !ert_graph_is_float16ish(y->dtype)) return false;
        /* fall through */
    case ERT_OP_QUANTIZE_LINEAR:
        return nh[n->in[0]] && n->n_in > 1 && n->in[1] >= 0 && n_elems_of(&g->t[n->in[1]]) == 1;
    default: return false;
    }
}

/* Step 1 for node n: may it run channels-last, given which tensors are? */
static bool nhwc_node_ok(const ert_graph *g, const ert_gnode *n, const bool *nh, bool quant_only) {
    if (n->n_out < 1 || n->out[0] < 0 || n->host) return false;
    if (n->op == ERT_OP_QLINEAR_CONV || n->op == ERT_OP_QLINEAR_ADD || n->op == ERT_OP_QLUT ||
        n->op == ERT_OP_QUANTIZE_LINEAR ||
        n->op == ERT_OP_DEQUANTIZE_LINEAR || (n->op == ERT_OP_MAXPOOL && n->n_in > 0 && n->in[0] >= 0 &&
                                              is_q8(g->t[n->in[0]].dtype)))
        return !(g->flags & ERT_SESSION_NO_PACK) && g->t[n->out[0]].ndim == 4 && !ert_graph_is_io(g, n->out[0]) &&
               (n->n_out == 1 || n->out[1] < 0) && nhwc_quant_ok(g, n, nh, quant_only);
    if (quant_only) return false;
    const ert_gtensor *y = &g->t[n->out[0]];
    if (!ert_graph_is_float16ish(y->dtype) || y->ndim != 4) return false;
    for (int k = 0; k < n->n_out; k++) /* MaxPool's Indices too; a Split's outputs are all channels-last */
        if (n->out[k] >= 0 && ((k > 0 && n->op != ERT_OP_SPLIT) || ert_graph_is_io(g, n->out[k]) || g->t[n->out[k]].ndim != 4))
            return false;
    bool any = false;
    for (int k = 0; k < n->n_in; k++) {
        int32_t t = n->in[k];
        if (t < 0 || !act_input(n, k)) continue; /* filter, bias; Resize's roi/scales/sizes, Split's sizes */
        if (nh[t]) any = true;
        else if (g->t[t].ndim != 4 && n_elems_of(&g->t[t]) != 1 && !(nhwc_binary(n->op) && chan_const(g, t, y->dims[1])))
            return false;
        if (g->t[t].dtype != y->dtype) return false;
    }
    switch (n->op) {
    case ERT_OP_TRANSPOSE: /* (N,H,W,C) -> (N,C,H,W): the channels-last twin of y is x itself */
        return !nh[n->in[0]] && is_perm4(g, n, to_nchw) && !ert_graph_is_io(g, n->in[0]);
    case ERT_OP_CONV: return ert_graph_nhwc_op_ok(n->op, &n->params) && g->t[n->in[0]].ndim == 4;
    case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL: case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_GLOBAL_MAXPOOL:
        return any && ert_graph_nhwc_op_ok(n->op, &n->params) && g->t[n->in[0]].ndim == 4;
    case ERT_OP_CONCAT:
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && g->t[n->in[k]].ndim != 4) return false;
        return any;
    case ERT_OP_SPLIT: return nh[n->in[0]]; /* C2f's chunk: the copy kernel splits any axis */
    case ERT_OP_RESIZE: /* N-D per-dim scales: permuted with the dims (tf_crop_and_resize: CPU only) */
        return nh[n->in[0]] && n->params.resize.coord != 4;
    default: return any && (nhwc_unary(n->op) || nhwc_binary(n->op)) && n->n_out == 1;
    }
}

/* A planned copy of tensor t with dims permuted by perm (4-D). */
static int32_t permuted_copy(ert_graph *g, int32_t t, const int *perm) {
    int32_t c = ert_pass_retyped_copy(g, t, g->t[t].dtype);
    if (c < 0) return -1;
    for (int d = 0; d < 4; d++) g->t[c].dims[d] = g->t[t].dims[perm[d]];
    return c;
}

/* A Transpose (or Reshape: same bytes) from -> to, to be scheduled before node
 * `anchor` (anchors[] is indexed by the new node's position past nn0). */
static ert_status layout_node(ert_graph *g, int32_t from, int32_t to, const int *perm, bool same_bytes, int anchor,
                              int nn0, int **anchors, int *cap) {
    ert_gnode *n = ert_graph_add_node(g, same_bytes ? ERT_OP_RESHAPE : ERT_OP_TRANSPOSE, NULL, g->t[to].name, 1, 1);
    if (!n) return ert_graph_oom(g);
    n->in[0] = from;
    n->out[0] = to;
    for (int d = 0; d < 4; d++) n->params.transpose.perm[d] = perm[d];
    int k = g->nn - 1 - nn0;
    if (k >= *cap) {
        int c2 = *cap ? *cap * 2 : 64;
        int *a = realloc(*anchors, (size_t)c2 * sizeof *a);
        if (!a) return ert_graph_oom(g);
        *anchors = a;
        *cap = c2;
    }
    (*anchors)[k] = anchor;
    return ERT_OK;
}

/* Does the graph run faster channels-last? The backend measures every conv
 * both ways (cuDNN's times of the picked algorithms: for NCHW they include
 * cuDNN's own transposes); each layout edge costs a transpose (copy_ms), and
 * so does, on the NCHW side, each Transpose that channels-last makes a view
 * (ConvNeXt's permutes around LayerNorm and its MLP). Without that credit
 * ConvNeXt-T stayed NCHW (convs 0.260 ms NCHW vs 0.337 NHWC) and ran 1.139
 * ms where NHWC runs 0.911, ConvNeXt-atto 0.580 vs 0.468 (f16 b1, H100,
 * 2026-11-25). One graph-wide answer. Measured on an H200 (f16, batch 1, p50):
 * ResNet-18 0.378 -> 0.239 ms and ResNet-50 0.691 -> 0.471 ms NHWC, while
 * MobileNetV2 ran 0.329 NCHW vs 0.420 NHWC (cuDNN's NHWC 1x1 convs are slower
 * there; this picks NCHW for it), hence a measurement rather than a rule
 * (bench/RESULTS.md). Without conv_time the answer is yes. */
#define EDGE_MS 0.003
/* One 4-D permute copy of t: a launch plus its bytes at the rate ConvNeXt-T's
 * strided copies ran (44 of them, ~250 KB on average, ~7 us each: ncu on an
 * H100, 2026-11-25). */
static double copy_ms(const ert_gtensor *t) {
    int64_t n = n_elems_of(t);
    return EDGE_MS + (n > 0 ? (double)n * (double)ert_dtype_size(t->dtype) / 6.2e7 : 0.0);
}

static bool nhwc_pays(ert_graph *g, const bool *nh, const bool *node_nh, int nn0) {
    int n_qconv = 0;
    for (int i = 0; i < nn0; i++) n_qconv += node_nh[i] && g->n[i].op == ERT_OP_QLINEAR_CONV;
    if (n_qconv) { /* the int8 tensor-core convs: NCHW gathers every byte alone (bench/RESULTS.md 2026-12-07) */
        ert_log(g->ctx, ERT_LOG_INFO, "channels-last: %d int8 convs: NHWC", n_qconv);
        return true;
    }
    if (!g->be->conv_time) return true;
    double t[2][2] = {{0}}; /* [nchw, nhwc][dense, grouped] */
    double edge_ms = 0, view_ms = 0;
    int edges = 0, views = 0, n_conv = 0;
    for (int i = 0; i < nn0; i++) {
        const ert_gnode *n = &g->n[i];
        if (n->dead) continue;
        if (n->op == ERT_OP_TRANSPOSE && n->n_in == 1 && n->in[0] >= 0 &&
            ((node_nh[i] && is_perm4(g, n, to_nchw)) || (nh[n->in[0]] && is_perm4(g, n, to_nhwc)))) {
            views++; /* a copy NCHW, the same bytes channels-last */
            view_ms += copy_ms(&g->t[n->in[0]]);
        }
        for (int k = 0; k < n->n_in; k++) {
            int32_t x = n->in[k];
            if (x < 0 || !act_input(n, k)) continue;
            if (node_nh[i] != nh[x] && g->t[x].ndim == 4 && n_elems_of(&g->t[x]) != 1 &&
                !(nh[x] && g->t[x].dims[2] == 1 && g->t[x].dims[3] == 1) &&
                !(n->op == ERT_OP_TRANSPOSE && (is_perm4(g, n, to_nchw) || (nh[x] && is_perm4(g, n, to_nhwc))))) {
                edges++; /* counted per use (an upper bound); the Transposes that become views are free */
                edge_ms += copy_ms(&g->t[x]);
            }
        }
        if (!node_nh[i] || n->op != ERT_OP_CONV) continue;
        ert_tview v[2][ERT_MAX_NODE_IO + 2];
        ert_op_params prm[2] = {n->params, n->params};
        float ms[2] = {-1, -1};
        for (int l = 0; l < 2; l++) {
            prm[l].conv.nhwc = l == 1;
            for (int k = 0; k < n->n_in + n->n_out && k < ERT_MAX_NODE_IO + 2; k++) {
                int32_t id = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
                memset(&v[l][k], 0, sizeof v[l][k]);
                if (id < 0) continue;
                ert_graph_fill_view(&v[l][k], &g->t[id], NULL);
                bool act = k == 0 || k == 3 || k >= n->n_in; /* x, residual, y */
                if (l == 1 && act && v[l][k].ndim == 4) {
                    int64_t c = v[l][k].dims[1];
                    v[l][k].dims[1] = v[l][k].dims[2], v[l][k].dims[2] = v[l][k].dims[3], v[l][k].dims[3] = c;
                }
            }
            ert_kargs a = {.op = n->op, .params = &prm[l], .n_in = n->n_in, .n_out = n->n_out, .in = v[l],
                           .out = v[l] + n->n_in, .name = n->name, .choice = &g->kc};
            if (g->be->conv_time(g->bctx, &a, &ms[l]) != ERT_OK) ms[l] = -1;
        }
        if (ms[0] < 0 || ms[1] < 0) continue;
        int grp = n->params.conv.group > 1;
        t[0][grp] += ms[0];
        t[1][grp] += ms[1];
        n_conv++;
    }
    double nchw = t[0][0] + t[0][1] + view_ms, nhwc = t[1][0] + t[1][1] + edge_ms;
    bool yes = nhwc < nchw;
    ert_log(g->ctx, ERT_LOG_INFO,
            "channels-last: %d convs measured NCHW %.3f ms (dense %.3f, grouped %.3f) + %d Transposes that NHWC "
            "makes views (%.3f ms), NHWC %.3f ms (dense %.3f, grouped %.3f) + %d layout edges (%.3f ms): %s",
            n_conv, nchw, t[0][0], t[0][1], views, view_ms, nhwc, t[1][0], t[1][1], edges, edge_ms,
            yes ? "NHWC" : "NCHW kept");
    return yes;
}

ert_status ert_pass_channels_last(ert_graph *g, bool quant_only) {
    /* NCHW axis -> its position in (N, H, W, C) */
    static const int64_t axis_nhwc[4] = {0, 3, 1, 2};
    int nn0 = g->nn, nt0 = g->nt, cap = 0, *anchors = NULL;
    bool *nh = calloc((size_t)nt0 + 1, sizeof *nh), *node_nh = calloc((size_t)nn0 + 1, sizeof *node_nh);
    int32_t *twin = malloc(((size_t)nt0 + 1) * sizeof *twin), *fwd = malloc(((size_t)nt0 + 1) * sizeof *fwd);
    bool *back = calloc((size_t)nt0 + 1, sizeof *back);
    ert_gnode *order = NULL;
    ert_status st = ERT_OK;
    if (!nh || !node_nh || !twin || !fwd || !back) {
        st = ert_graph_oom(g);
        goto done;
    }
    for (int i = 0; i < nt0; i++) twin[i] = fwd[i] = -1;
    int n_nh = 0;
    for (int i = 0; i < nn0; i++) {
        if (g->n[i].dead || !nhwc_node_ok(g, &g->n[i], nh, quant_only)) continue;
        node_nh[i] = true;
        n_nh++;
        for (int k = 0; k < g->n[i].n_out; k++)
            if (g->n[i].out[k] >= 0) nh[g->n[i].out[k]] = true;
    }
    if (!n_nh || (!(g->flags & ERT_SESSION_NHWC) && !nhwc_pays(g, nh, node_nh, nn0))) goto done;
    for (int t = 0; t < nt0; t++)
        if (nh[t] && (twin[t] = permuted_copy(g, t, to_nhwc)) < 0) {
            st = ert_graph_oom(g);
            goto done;
        }
    for (int i = 0; i < nn0 && st == ERT_OK; i++) {
        if (g->n[i].dead) continue;
        if (!node_nh[i]) {
            ert_gnode *n = &g->n[i];
            if (n->n_in == 1 && n->in[0] < nt0 && nh[n->in[0]] && is_perm4(g, n, to_nhwc)) {
                /* Transpose(0,2,3,1) of a channels-last tensor: the twin's bytes
                 * already (a Reshape the planner aliases: no copy) */
                n->op = ERT_OP_RESHAPE;
                memset(&n->params, 0, sizeof n->params);
                n->in[0] = twin[n->in[0]];
                continue;
            }
            for (int k = 0; k < g->n[i].n_in && st == ERT_OK; k++) {
                int32_t t = g->n[i].in[k];
                if (t < 0 || t >= nt0 || !nh[t] || back[t]) continue;
                back[t] = true;
                bool same = g->t[t].dims[2] == 1 && g->t[t].dims[3] == 1;
                st = layout_node(g, twin[t], t, to_nchw, same, i, nn0, &anchors, &cap);
            }
            continue;
        }
        if (g->n[i].op == ERT_OP_TRANSPOSE) { /* Transpose(0,3,1,2): y's twin is x's bytes */
            ert_gnode *n = &g->n[i];
            n->op = ERT_OP_RESHAPE;
            memset(&n->params, 0, sizeof n->params);
            n->out[0] = twin[n->out[0]];
            continue;
        }
        for (int k = 0; k < g->n[i].n_in && st == ERT_OK; k++) {
            int32_t t = g->n[i].in[k];
            if (t < 0 || !act_input(&g->n[i], k)) continue;
            if (t < nt0 && nh[t]) {
                g->n[i].in[k] = twin[t];
            } else if (t < nt0 && nhwc_binary(g->n[i].op) && chan_const(g, t, g->t[g->n[i].out[0]].dims[1])) {
                if (fwd[t] < 0) { /* the same bytes as (1,1,1,C) */
                    size_t nb = g->t[t].nbytes;
                    void *copy = malloc(nb ? nb : 1);
                    const int64_t dims[4] = {1, 1, 1, g->t[g->n[i].out[0]].dims[1]};
                    if (!copy) {
                        st = ert_graph_oom(g);
                        break;
                    }
                    memcpy(copy, g->t[t].cdata, nb);
                    st = ert_graph_new_const(g, g->t[t].name, g->t[t].dtype, 4, dims, copy, &fwd[t]);
                }
                g->n[i].in[k] = fwd[t];
            } else if (g->t[t].ndim == 4 && n_elems_of(&g->t[t]) != 1) {
                if (fwd[t] < 0) {
                    if ((fwd[t] = permuted_copy(g, t, to_nhwc)) < 0) st = ert_graph_oom(g);
                    else st = layout_node(g, t, fwd[t], to_nhwc, false, i, nn0, &anchors, &cap);
                }
                g->n[i].in[k] = fwd[t];
            }
        }
        ert_gnode *n = &g->n[i];
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) n->out[k] = twin[n->out[k]];
        if (n->op == ERT_OP_CONV) n->params.conv.nhwc = true;
        else if (n->op == ERT_OP_QLINEAR_CONV) n->params.quant.conv.nhwc = true;
        else if (n->op == ERT_OP_MAXPOOL || n->op == ERT_OP_AVGPOOL || n->op == ERT_OP_GLOBAL_AVGPOOL ||
                 n->op == ERT_OP_GLOBAL_MAXPOOL)
            n->params.pool.nhwc = true;
        else if (n->op == ERT_OP_CONCAT)
            n->params.axis.axis = axis_nhwc[n->params.axis.axis & 3];
        else if (n->op == ERT_OP_SPLIT)
            n->params.split.axis = axis_nhwc[n->params.split.axis & 3];
        else if (n->op == ERT_OP_RESIZE) {
            double sc[4];
            for (int d = 0; d < 4; d++) sc[d] = n->params.resize.scale[to_nhwc[d]];
            memcpy(n->params.resize.scale, sc, sizeof sc);
        }
    }
    if (st != ERT_OK) goto done;
    /* schedule each new node right before its anchor */
    order = malloc((size_t)g->nn * sizeof *order);
    if (!order) {
        st = ert_graph_oom(g);
        goto done;
    }
    int m = 0;
    for (int i = 0; i < nn0; i++) {
        for (int j = nn0; j < g->nn; j++)
            if (anchors[j - nn0] == i) order[m++] = g->n[j];
        order[m++] = g->n[i];
    }
    memcpy(g->n, order, (size_t)m * sizeof *order);
done:
    free(nh);
    free(node_nh);
    free(twin);
    free(fwd);
    free(back);
    free(anchors);
    free(order);
    return st;
}

/*
 * onnx_write.c - edgert IR -> ONNX ModelProto (for exporting trained models).
 *
 * Steps
 *   1. Refuse what ONNX cannot express as is: ops that are not ONNX (Silu,
 *      the trainer's internal ops), fused epilogues ("ert_act" attributes,
 *      a 4th Conv input), ConstantOfShape's normalised value attributes.
 *   2. Encode bottom-up into growable buffers: initializers (every WEIGHT
 *      tensor, raw_data little-endian), nodes with their attributes, graph
 *      inputs and outputs as ValueInfo (a -1 dim becomes dim_param "N").
 *      The IR holds the newest-opset form of every op (the loader normalises
 *      older opsets), so the file declares opset 18 (20 when a Gelu is
 *      present), ir_version 8.
 *   3. Write atomically with ert_file_write_atomic (core/fileio.c).
 * Limits: no external data (one file, < 2 GiB); optimizer-state tensors of a
 * checkpoint are not written.
 */
#include "ert_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct obuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} obuf;

static void ob_raw(obuf *b, const void *d, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        uint8_t *np = realloc(b->p, c);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void ob_varint(obuf *b, uint64_t v) {
    uint8_t t[10];
    int k = 0;
    do {
        t[k] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) t[k] |= 0x80;
        k++;
    } while (v);
    ob_raw(b, t, (size_t)k);
}

static void ob_tag(obuf *b, uint32_t field, int wt) { ob_varint(b, (uint64_t)field << 3 | (uint64_t)wt); }
static void ob_int(obuf *b, uint32_t f, int64_t v) { ob_tag(b, f, 0), ob_varint(b, (uint64_t)v); }
static void ob_bytes(obuf *b, uint32_t f, const void *d, size_t n) { ob_tag(b, f, 2), ob_varint(b, n), ob_raw(b, d, n); }
static void ob_str(obuf *b, uint32_t f, const char *s) { ob_bytes(b, f, s, strlen(s)); }
static void ob_f32(obuf *b, uint32_t f, float v) {
    uint8_t le[4];
    uint32_t u;
    memcpy(&u, &v, 4);
    for (int i = 0; i < 4; i++) le[i] = (uint8_t)(u >> (8 * i));
    ob_tag(b, f, 5), ob_raw(b, le, 4);
}
/* Append sub as a length-delimited field and empty it. */
static void ob_msg(obuf *b, uint32_t f, obuf *sub) {
    if (sub->oom) b->oom = true;
    ob_bytes(b, f, sub->p, sub->n);
    sub->n = 0;
}

static int onnx_dtype(ert_dtype d) {
    switch (d) {
    case ERT_DTYPE_F32: return 1;
    case ERT_DTYPE_U8: return 2;
    case ERT_DTYPE_I8: return 3;
    case ERT_DTYPE_I32: return 6;
    case ERT_DTYPE_I64: return 7;
    case ERT_DTYPE_BOOL: return 9;
    case ERT_DTYPE_F16: return 10;
    case ERT_DTYPE_BF16: return 16;
    default: return 0;
    }
}

static void value_info(obuf *b, uint32_t field, const ert_tensor *t, obuf *tmp) {
    obuf shape = {0}, tt = {0}, tp = {0}, dim = {0};
    for (int i = 0; i < t->ndim; i++) {
        if (t->dims[i] >= 0) ob_int(&dim, 1, t->dims[i]);
        else ob_str(&dim, 2, "N");
        ob_msg(&shape, 1, &dim);
    }
    if (t->dtype != ERT_DTYPE_UNDEFINED) ob_int(&tt, 1, onnx_dtype(t->dtype));
    ob_msg(&tt, 2, &shape);
    ob_msg(&tp, 1, &tt);
    ob_str(tmp, 1, t->name);
    ob_msg(tmp, 2, &tp);
    ob_msg(b, field, tmp);
    if (shape.oom || tt.oom || tp.oom || dim.oom) b->oom = true;
    free(shape.p), free(tt.p), free(tp.p), free(dim.p);
}

static ert_status encode(const ert_model *m, obuf *model) {
    ert_context *ctx = m->ctx;
    int opset = 18;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *n = &m->nodes[i];
        const char *op = ert_op_get(n->op)->name;
        if (n->op == ERT_OP_GELU) opset = 20;
        if (n->op == ERT_OP_SILU || n->op == ERT_OP_CONSTANT_OF_SHAPE || (n->op >= ERT_OP_BATCHNORM_TRAIN && n->op <= ERT_OP_GATHER_GRAD) ||
            strncmp(op, "ert.", 4) == 0 || ert_node_attr(n, "ert_act") || (n->op == ERT_OP_CONV && n->n_in > 3))
            return ert_set_error(ctx, ERT_E_UNSUPPORTED, "ONNX export: node '%s' (%s) has no plain ONNX form", n->name,
                                 op);
    }
    obuf g = {0}, sub = {0}, sub2 = {0};
    for (int i = 0; i < m->n_tensors; i++) {
        const ert_tensor *t = &m->tensors[i];
        if (t->role != ERT_ROLE_WEIGHT) continue;
        size_t nb = 0;
        if (!onnx_dtype(t->dtype) || !ert_tensor_nbytes(t, &nb) || !t->data) {
            free(g.p), free(sub.p);
            return ert_set_error(ctx, ERT_E_UNSUPPORTED, "ONNX export: weight '%s' (%s)", t->name, ert_dtype_name(t->dtype));
        }
        for (int d = 0; d < t->ndim; d++) ob_int(&sub, 1, t->dims[d]);
        ob_int(&sub, 2, onnx_dtype(t->dtype));
        ob_str(&sub, 8, t->name);
        ob_bytes(&sub, 9, t->data, nb); /* the IR keeps little-endian bytes */
        ob_msg(&g, 5, &sub);
    }
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_in; k++) ob_str(&sub, 1, n->in[k] >= 0 ? m->tensors[n->in[k]].name : "");
        for (int k = 0; k < n->n_out; k++) ob_str(&sub, 2, n->out[k] >= 0 ? m->tensors[n->out[k]].name : "");
        if (n->name) ob_str(&sub, 3, n->name);
        ob_str(&sub, 4, ert_op_get(n->op)->name);
        for (int a = 0; a < n->n_attrs; a++) {
            const ert_attr_val *v = &n->attrs[a];
            ob_str(&sub2, 1, v->name);
            switch (v->type) {
            case ERT_ATTR_FLOAT: ob_f32(&sub2, 2, v->f), ob_int(&sub2, 20, 1); break;
            case ERT_ATTR_INT: ob_int(&sub2, 3, v->i), ob_int(&sub2, 20, 2); break;
            case ERT_ATTR_STRING: ob_str(&sub2, 4, v->s ? v->s : ""), ob_int(&sub2, 20, 3); break;
            case ERT_ATTR_FLOATS:
                for (int k = 0; k < v->n; k++) ob_f32(&sub2, 7, v->floats[k]);
                ob_int(&sub2, 20, 6);
                break;
            case ERT_ATTR_INTS:
                for (int k = 0; k < v->n; k++) ob_int(&sub2, 8, v->ints[k]);
                ob_int(&sub2, 20, 7);
                break;
            }
            ob_msg(&sub, 5, &sub2);
        }
        ob_msg(&g, 1, &sub);
    }
    ob_str(&g, 2, "edgert");
    for (int i = 0; i < m->n_inputs; i++) value_info(&g, 11, &m->tensors[m->inputs[i]], &sub);
    for (int i = 0; i < m->n_outputs; i++) value_info(&g, 12, &m->tensors[m->outputs[i]], &sub);
    ob_int(model, 1, 8);
    ob_str(model, 2, "edgert " ERT_VERSION_STRING);
    ob_str(&sub, 1, "");
    ob_int(&sub, 2, opset);
    ob_msg(model, 8, &sub);
    ob_msg(model, 7, &g);
    bool oom = g.oom || sub.oom || sub2.oom || model->oom;
    free(g.p), free(sub.p), free(sub2.p);
    return oom ? ert_set_error(ctx, ERT_E_NOMEM, "ONNX export: out of memory") : ERT_OK;
}


ert_status ert_model_save_onnx(const ert_model *m, const char *path) {
    if (!m) return ERT_E_ARG;
    ert_context *ctx = m->ctx;
    if (!path || !*path) return ert_set_error(ctx, ERT_E_ARG, "ONNX export: empty path");
    obuf b = {0};
    ert_status st = encode(m, &b);
    if (st) {
        free(b.p);
        return st;
    }
    st = ert_file_write_atomic(ctx, path, b.p, b.n); /* core/fileio.c */
    free(b.p);
    return st;
}

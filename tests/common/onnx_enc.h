/* onnx_enc.h - a tiny protobuf encoder for hand-built ONNX byte streams in the
 * loader tests (test_onnx.c, test_onnx_big.c). Header-only, test code only:
 * allocation failures end the test program. Field numbers are ONNX's
 * (onnx.proto). */
#ifndef ERT_ONNX_ENC_H
#define ERT_ONNX_ENC_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pbuf {
    uint8_t *p;
    size_t n, cap;
} pbuf;

static inline void pb_raw(pbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (c < b->n + n) c *= 2;
        uint8_t *np = realloc(b->p, c);
        if (!np) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        b->p = np;
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void pb_varint(pbuf *b, uint64_t v) {
    uint8_t t[10];
    int k = 0;
    do {
        t[k] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) t[k] |= 0x80;
        k++;
    } while (v);
    pb_raw(b, t, (size_t)k);
}
static inline void pb_tag(pbuf *b, uint32_t field, int wt) { pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wt); }
static inline void pb_vfield(pbuf *b, uint32_t f, uint64_t v) { pb_tag(b, f, 0); pb_varint(b, v); }
static inline void pb_bytes(pbuf *b, uint32_t f, const void *d, size_t n) { pb_tag(b, f, 2); pb_varint(b, n); pb_raw(b, d, n); }
static inline void pb_str(pbuf *b, uint32_t f, const char *s) { pb_bytes(b, f, s, strlen(s)); }
/* Appends `sub` as a LEN field and frees it. */
static inline void pb_msg(pbuf *b, uint32_t f, pbuf *sub) {
    pb_bytes(b, f, sub->p, sub->n);
    free(sub->p);
    memset(sub, 0, sizeof *sub);
}
static inline void pb_f32(pbuf *b, uint32_t f, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    uint8_t t[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    pb_tag(b, f, 5);
    pb_raw(b, t, 4);
}
static inline void pb_free(pbuf *b) { free(b->p); memset(b, 0, sizeof *b); }

/* ------------------------------------------------------------ ONNX messages */

enum { OX_FLOAT = 1, OX_UINT8 = 2, OX_INT8 = 3, OX_INT32 = 6, OX_INT64 = 7, OX_STRING = 8, OX_BOOL = 9,
       OX_FLOAT16 = 10, OX_DOUBLE = 11 };

/* TensorProto with raw_data (NULL data: no data field). */
static inline pbuf ox_tensor(const char *name, int dtype, int ndim, const int64_t *dims, const void *raw, size_t raw_n) {
    pbuf t = {0};
    for (int i = 0; i < ndim; i++) pb_vfield(&t, 1, (uint64_t)dims[i]);
    pb_vfield(&t, 2, (uint64_t)dtype);
    if (name) pb_str(&t, 8, name);
    if (raw) pb_bytes(&t, 9, raw, raw_n);
    return t;
}

/* ValueInfoProto; dims[i] < 0 -> dim_param "N". ndim < 0: no shape. */
static inline pbuf ox_value_info(const char *name, int elem, int ndim, const int64_t *dims) {
    pbuf shape = {0}, tt = {0}, tp = {0}, vi = {0};
    for (int i = 0; i < ndim; i++) {
        pbuf d = {0};
        if (dims[i] >= 0) pb_vfield(&d, 1, (uint64_t)dims[i]);
        else pb_str(&d, 2, "N");
        pb_msg(&shape, 1, &d);
    }
    pb_vfield(&tt, 1, (uint64_t)elem);
    if (ndim >= 0) pb_msg(&tt, 2, &shape);
    pb_msg(&tp, 1, &tt);
    pb_str(&vi, 1, name);
    pb_msg(&vi, 2, &tp);
    pb_free(&shape);
    return vi;
}

/* AttributeProto helpers (type codes: FLOAT 1, INT 2, STRING 3, TENSOR 4,
 * GRAPH 5, FLOATS 6, INTS 7). */
static inline pbuf ox_attr_i(const char *name, int64_t v) {
    pbuf a = {0};
    pb_str(&a, 1, name);
    pb_vfield(&a, 3, (uint64_t)v);
    pb_vfield(&a, 20, 2);
    return a;
}
static inline pbuf ox_attr_f(const char *name, float v) {
    pbuf a = {0};
    pb_str(&a, 1, name);
    pb_f32(&a, 2, v);
    pb_vfield(&a, 20, 1);
    return a;
}
static inline pbuf ox_attr_s(const char *name, const char *v) {
    pbuf a = {0};
    pb_str(&a, 1, name);
    pb_str(&a, 4, v);
    pb_vfield(&a, 20, 3);
    return a;
}
/* INTS, packed when `packed`. */
static inline pbuf ox_attr_is(const char *name, const int64_t *v, int n, int packed) {
    pbuf a = {0};
    pb_str(&a, 1, name);
    if (packed) {
        pbuf p = {0};
        for (int i = 0; i < n; i++) pb_varint(&p, (uint64_t)v[i]);
        pb_msg(&a, 8, &p);
    } else {
        for (int i = 0; i < n; i++) pb_vfield(&a, 8, (uint64_t)v[i]);
    }
    pb_vfield(&a, 20, 7);
    return a;
}
static inline pbuf ox_attr_fs(const char *name, const float *v, int n) {
    pbuf a = {0};
    pb_str(&a, 1, name);
    for (int i = 0; i < n; i++) pb_f32(&a, 7, v[i]);
    pb_vfield(&a, 20, 6);
    return a;
}
/* TENSOR attribute; consumes t. */
static inline pbuf ox_attr_t(const char *name, pbuf *t) {
    pbuf a = {0};
    pb_str(&a, 1, name);
    pb_msg(&a, 5, t);
    pb_vfield(&a, 20, 4);
    return a;
}

/* NodeProto. ins/outs NULL-terminated; attrs consumed. */
static inline pbuf ox_node(const char *op, const char *name, const char *domain, const char *const *ins,
                           const char *const *outs, pbuf *attrs, int n_attrs) {
    pbuf n = {0};
    for (; ins && *ins; ins++) pb_str(&n, 1, *ins);
    for (; outs && *outs; outs++) pb_str(&n, 2, *outs);
    if (name) pb_str(&n, 3, name);
    pb_str(&n, 4, op);
    if (domain) pb_str(&n, 7, domain);
    for (int i = 0; i < n_attrs; i++) pb_msg(&n, 5, &attrs[i]);
    return n;
}

/* A graph under construction: append with ox_g_* then ox_model. */
typedef struct oxg {
    pbuf g;
} oxg;
static inline void ox_g_node(oxg *g, pbuf n) { pb_msg(&g->g, 1, &n); }
static inline void ox_g_init(oxg *g, pbuf t) { pb_msg(&g->g, 5, &t); }
static inline void ox_g_input(oxg *g, pbuf v) { pb_msg(&g->g, 11, &v); }
static inline void ox_g_output(oxg *g, pbuf v) { pb_msg(&g->g, 12, &v); }
static inline void ox_g_value_info(oxg *g, pbuf v) { pb_msg(&g->g, 13, &v); }

/* ModelProto: ir_version, opset_import, then the graph last (so every proper
 * prefix of the file is missing part of the graph). Consumes g. */
static inline pbuf ox_model(oxg *g, int opset) {
    pbuf m = {0}, os = {0};
    pb_vfield(&m, 1, 8);
    pb_str(&os, 1, "");
    pb_vfield(&os, 2, (uint64_t)opset);
    pb_msg(&m, 8, &os);
    pb_str(&g->g, 2, "g");
    pb_msg(&m, 7, &g->g);
    return m;
}

#endif

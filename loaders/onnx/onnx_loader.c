/*
 * onnx_loader.c - ONNX ModelProto -> edgert IR.
 *
 * Steps
 *   1. ModelProto: ir_version, opset_import (the default-domain version drives
 *      normalisation), graph. Everything else is skipped.
 *   2. GraphProto: collect the byte windows of node, initializer, input,
 *      output and value_info (no copies). sparse_initializer -> UNSUPPORTED.
 *   3. Initializers -> WEIGHT tensors (data copied, little-endian). Graph
 *      inputs that are also initializers are weights (IR < 4 lists them).
 *      Other inputs -> INPUT tensors (dim_param / missing dim_value -> -1).
 *   4. Pass 1 over nodes: Constant nodes become WEIGHT tensors; every other
 *      node's outputs become ACTIVATION tensors. A name defined twice is
 *      ERT_E_FORMAT. Doing this before any node is added lets nodes appear in
 *      any order (ert_model_validate sorts them and finds cycles).
 *   5. Pass 2: each node is normalised to the newest-opset form the kernels
 *      implement (see normalise()), its attributes are type-checked and
 *      converted, and it is added with ert_model_add_node.
 *   6. Graph outputs get role OUTPUT; ert_model_validate checks the graph.
 *
 * Normalisation choices (older opsets -> canonical)
 *   Split 'split', Squeeze/Unsqueeze 'axes' (< 13), ReduceSum 'axes' (< 13),
 *   ReduceMean/ReduceMax 'axes' (< 18), Clip min/max (< 11), Pad pads/value
 *   (< 11), Slice starts/ends/axes (< 10), Reshape 'shape' (< 5) -> constant
 *   inputs. Upsample (7-9) and Resize-10 -> Resize(X, roi = omitted, scales)
 *   with coordinate_transformation_mode "asymmetric" and nearest_mode "floor"
 *   (what ONNX's own 10 -> 11 version converter sets). Dropout ratio/is_test,
 *   BatchNormalization spatial/is_test, Gemm and element-wise 'broadcast',
 *   consumed_inputs are dropped; legacy element-wise 'axis' broadcasting is
 *   UNSUPPORTED. Softmax/LogSoftmax < 13 (coerce to 2-D at axis, default 1):
 *   when the input rank is known and axis is the last dim the two semantics
 *   agree and the node is kept with that axis; otherwise it becomes
 *   Shape(X) + Flatten(X, axis) -> Softmax(axis 1) -> Reshape(., shape), which
 *   is exact for every rank. Variadic Max/Min/Sum -> chains of binary
 *   Max/Min/Add (one input: Identity). ConstantOfShape's 'value' tensor ->
 *   "value" (FLOATS or INTS, one element) + "value_dtype" (INT, an ert_dtype).
 *   Cast 'to' stays an ONNX dtype code. CastLike -> Cast when the type it
 *   copies is a graph input's or a weight's. PRelu < 7: a constant 1-D slope
 *   of C values -> a (C, 1, ..., 1) copy (per channel) when X's rank is known.
 *
 * Limits
 *   - Subgraph attributes (If/Loop/Scan), functions, sparse tensors, string
 *     tensors and non-default domains are ERT_E_UNSUPPORTED, naming the node.
 *   - A graph output that is directly a graph input is refused (both would
 *     need the same name); a Constant that is a graph output gets an Identity.
 *   - The decoder is iterative: nesting is model -> graph -> node -> attribute
 *     -> tensor, each level a fixed function, so no input can deepen the stack.
 */
#include "onnx_internal.h"

#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct str {
    const uint8_t *p;
    size_t n;
} str;

/* Length-checked first: memcmp/memchr on a NULL pointer is undefined even for 0 bytes. */
static bool str_eq(str s, const char *c) { return strlen(c) == s.n && (s.n == 0 || memcmp(s.p, c, s.n) == 0); }
static bool has_nul(str s) { return s.n && memchr(s.p, 0, s.n); }

/* ------------------------------------------------------------ name -> id map */

/* Open addressing over names that point into the input buffer; the IR copies
 * names, this map only lives during the load. Linear lookups would make a
 * 200k-node graph quadratic. */
typedef struct name_map {
    size_t cap, n;
    str *keys;
    int32_t *ids;
} name_map;

static uint64_t str_hash(str s) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < s.n; i++) h = (h ^ s.p[i]) * 1099511628211ull;
    return h;
}

static int32_t map_get(const name_map *m, str k) {
    if (!m->cap || !k.n) return -1;
    for (size_t i = str_hash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i].p) return -1;
        if (m->keys[i].n == k.n && memcmp(m->keys[i].p, k.p, k.n) == 0) return m->ids[i];
    }
}

static bool map_put(name_map *m, str k, int32_t id) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 256;
        str *nk = calloc(nc, sizeof *nk);
        int32_t *ni = malloc(nc * sizeof *ni);
        if (!nk || !ni) {
            free(nk);
            free(ni);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i].p) continue;
            size_t j = str_hash(m->keys[i]) & (nc - 1);
            while (nk[j].p) j = (j + 1) & (nc - 1);
            nk[j] = m->keys[i];
            ni[j] = m->ids[i];
        }
        free(m->keys);
        free(m->ids);
        m->keys = nk;
        m->ids = ni;
        m->cap = nc;
    }
    size_t i = str_hash(k) & (m->cap - 1);
    while (m->keys[i].p) i = (i + 1) & (m->cap - 1);
    /* an empty name never gets here (callers refuse it), but keep p non-NULL */
    m->keys[i] = k;
    m->ids[i] = id;
    m->n++;
    return true;
}

static void map_free(name_map *m) {
    free(m->keys);
    free(m->ids);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ loader state */

enum { A_UNDEF = 0, A_FLOAT = 1, A_INT = 2, A_STRING = 3, A_TENSOR = 4, A_GRAPH = 5, A_FLOATS = 6,
       A_INTS = 7, A_STRINGS = 8, A_TENSORS = 9, A_GRAPHS = 10, A_SPARSE = 11, A_SPARSES = 12,
       A_TP = 13, A_TPS = 14 };

static const char *attr_type_name(int t) {
    static const char *n[] = {"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS",
                              "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS",
                              "TYPE_PROTO", "TYPE_PROTOS"};
    return t >= 0 && t <= A_TPS ? n[t] : "?";
}

typedef struct oattr {
    str name;
    int type;
    float f;
    int64_t i;
    str s;
    ert_pb proto;          /* the whole AttributeProto */
    ert_pb t;              /* TENSOR payload (t.p NULL if none) */
    int n_floats, n_ints;
    float *floats;         /* scratch */
    int64_t *ints;         /* scratch */
    bool used;             /* consumed by normalisation: not passed on */
} oattr;

typedef struct onode {
    str name, op_type, domain;
    int n_in, n_out, n_attr;
    size_t off;
} onode;

typedef struct loader {
    ert_context *ctx;
    ert_model *m;
    const char *dir;
    int opset;
    name_map names;        /* every tensor name -> id */
    name_map ranks;        /* value_info / input name -> rank (stored as id) */
    name_map graph_outs;   /* graph output names (value unused) */
    int synth;             /* counter making synthesized names unique */
    /* per-node buffers, reused */
    str *in, *out;
    int cap_in, cap_out;
    oattr *attrs;
    int cap_attrs;
    void **scratch;
    int n_scratch, cap_scratch;
    char what[256];        /* "node 'conv1' (Conv)" for messages */
} loader;

#define FAIL(st_, ...) return ert_set_error(L->ctx, (st_), __VA_ARGS__)

static void *scratch(loader *L, size_t bytes) {
    if (L->n_scratch == L->cap_scratch) {
        int nc = L->cap_scratch ? L->cap_scratch * 2 : 16;
        void **ns = realloc(L->scratch, (size_t)nc * sizeof *ns);
        if (!ns) return NULL;
        L->scratch = ns;
        L->cap_scratch = nc;
    }
    void *p = malloc(bytes ? bytes : 1);
    if (p) L->scratch[L->n_scratch++] = p;
    return p;
}

static void scratch_reset(loader *L) {
    for (int i = 0; i < L->n_scratch; i++) free(L->scratch[i]);
    L->n_scratch = 0;
}

/* NUL-terminated copy in scratch; NULL on NUL inside or no memory. */
static char *cstr(loader *L, str s) {
    if (has_nul(s)) return NULL;
    char *c = scratch(L, s.n + 1);
    if (!c) return NULL;
    if (s.n) memcpy(c, s.p, s.n);
    c[s.n] = 0;
    return c;
}

static ert_status grow(loader *L, void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return ERT_OK;
    int nc = *cap ? *cap : 8;
    while (nc < need) {
        if (nc > INT_MAX / 2) FAIL(ERT_E_FORMAT, "too many entries");
        nc *= 2;
    }
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np) FAIL(ERT_E_NOMEM, "out of memory");
    *p = np;
    *cap = nc;
    return ERT_OK;
}

/* ------------------------------------------------------------ small decoders */

static bool get_str(const ert_pb_field *f, str *s) {
    if (f->wt != ERT_PB_LEN) return false;
    s->p = f->sub.p;
    s->n = (size_t)(f->sub.end - f->sub.p);
    return true;
}

/* NodeProto: 1 input, 2 output, 3 name, 4 op_type, 5 attribute, 7 domain. Fills
 * L->in/out and the attribute windows (as oattr.t, decoded later). */
static ert_status decode_node(loader *L, ert_pb b, onode *n) {
    memset(n, 0, sizeof *n);
    n->off = ert_pb_off(&b);
    ert_pb_field f;
    const char *why = NULL;
    int r;
    while ((r = ert_pb_next(&b, &f, &why)) == 1) {
        str s;
        switch (f.num) {
        case 1: case 2: case 3: case 4: case 7: case 5:
            if (!get_str(&f, &s)) FAIL(ERT_E_FORMAT, "NodeProto at offset %zu: field %u has wire type %d", n->off, f.num, f.wt);
            if (f.num == 1) {
                if (grow(L, (void **)&L->in, &L->cap_in, n->n_in + 1, sizeof *L->in)) return ERT_E_NOMEM;
                L->in[n->n_in++] = s;
            } else if (f.num == 2) {
                if (grow(L, (void **)&L->out, &L->cap_out, n->n_out + 1, sizeof *L->out)) return ERT_E_NOMEM;
                L->out[n->n_out++] = s;
            } else if (f.num == 3) {
                n->name = s;
            } else if (f.num == 4) {
                n->op_type = s;
            } else if (f.num == 7) {
                n->domain = s;
            } else {
                if (grow(L, (void **)&L->attrs, &L->cap_attrs, n->n_attr + 1, sizeof *L->attrs)) return ERT_E_NOMEM;
                memset(&L->attrs[n->n_attr], 0, sizeof L->attrs[0]);
                L->attrs[n->n_attr++].proto = f.sub;
            }
            break;
        default:
            break;
        }
    }
    if (r < 0) FAIL(ERT_E_FORMAT, "NodeProto at offset %zu: %s at offset %zu", n->off, why, ert_pb_off(&b));
    if (has_nul(n->op_type) || has_nul(n->name) || has_nul(n->domain))
        FAIL(ERT_E_FORMAT, "NodeProto at offset %zu: name, op_type or domain has a NUL byte", n->off);
    return ERT_OK;
}

static void set_what(loader *L, const onode *n, int idx) {
    if (n->name.n)
        snprintf(L->what, sizeof L->what, "node '%.*s' (%.*s)", (int)(n->name.n > 100 ? 100 : n->name.n),
                 (const char *)n->name.p, (int)(n->op_type.n > 60 ? 60 : n->op_type.n), (const char *)n->op_type.p);
    else
        snprintf(L->what, sizeof L->what, "node #%d (%.*s)", idx, (int)(n->op_type.n > 60 ? 60 : n->op_type.n),
                 (const char *)n->op_type.p);
}

/* Repeated float / int64 attribute values: packed or not, possibly both. */
static ert_status attr_numbers(loader *L, oattr *a, ert_pb b, bool floats) {
    ert_pb_field f;
    const char *why = NULL;
    int r;
    int64_t cnt = 0;
    uint32_t num = floats ? 7 : 8;
    ert_pb it = b;
    while ((r = ert_pb_next(&it, &f, &why)) == 1) {
        if (f.num != num) continue;
        if (f.wt == ERT_PB_LEN) {
            int64_t c = floats ? (int64_t)((f.sub.end - f.sub.p) / 4) : ert_pb_count_varints(f.sub);
            if (c < 0 || (floats && (f.sub.end - f.sub.p) % 4))
                FAIL(ERT_E_FORMAT, "%s: malformed packed attribute values at offset %zu", L->what, f.off);
            cnt += c;
        } else if (f.wt == (floats ? ERT_PB_I32 : ERT_PB_VARINT)) {
            cnt++;
        } else {
            FAIL(ERT_E_FORMAT, "%s: attribute values have wire type %d", L->what, f.wt);
        }
    }
    if (r < 0) FAIL(ERT_E_FORMAT, "%s: attribute: %s", L->what, why);
    if (cnt > INT_MAX / 8) FAIL(ERT_E_FORMAT, "%s: attribute has too many values", L->what);
    void *dst = scratch(L, (size_t)cnt * (floats ? sizeof(float) : sizeof(int64_t)));
    if (!dst) FAIL(ERT_E_NOMEM, "out of memory");
    int64_t i = 0;
    it = b;
    while (ert_pb_next(&it, &f, &why) == 1) {
        if (f.num != num) continue;
        if (f.wt == ERT_PB_LEN) {
            ert_pb s = f.sub;
            if (floats) {
                if (s.end > s.p) memcpy((float *)dst + i, s.p, (size_t)(s.end - s.p));
                i += (s.end - s.p) / 4;
            } else {
                uint64_t v = 0;
                while (s.p < s.end && ert_pb_varint(&s, &v) == 0) ((int64_t *)dst)[i++] = (int64_t)v;
            }
        } else if (floats) {
            uint32_t u = (uint32_t)f.v;
            memcpy((float *)dst + i++, &u, 4);
        } else {
            ((int64_t *)dst)[i++] = (int64_t)f.v;
        }
    }
    if (floats) a->floats = dst, a->n_floats = (int)cnt;
    else a->ints = dst, a->n_ints = (int)cnt;
    return ERT_OK;
}

/* AttributeProto: 1 name, 2 f, 3 i, 4 s, 5 t, 6 g, 7 floats, 8 ints, 9 strings,
 * 10 tensors, 11 graphs, 20 type, 21 ref_attr_name, 22/23 sparse. */
static ert_status decode_attr(loader *L, oattr *a) {
    ert_pb b = a->proto;
    ert_pb_field f;
    const char *why = NULL;
    int r;
    bool seen[24] = {0};
    bool has_ref = false;
    a->type = A_UNDEF;
    a->t.p = a->t.end = NULL;
    while ((r = ert_pb_next(&b, &f, &why)) == 1) {
        if (f.num < 24) seen[f.num] = true;
        switch (f.num) {
        case 1:
            if (!get_str(&f, &a->name)) FAIL(ERT_E_FORMAT, "%s: attribute name has wire type %d", L->what, f.wt);
            break;
        case 20:
            if (f.wt != ERT_PB_VARINT) FAIL(ERT_E_FORMAT, "%s: attribute type has wire type %d", L->what, f.wt);
            a->type = (int)(int32_t)(uint32_t)f.v;
            break;
        case 2:
            if (f.wt != ERT_PB_I32) FAIL(ERT_E_FORMAT, "%s: attribute f has wire type %d", L->what, f.wt);
            {
                uint32_t u = (uint32_t)f.v;
                memcpy(&a->f, &u, 4);
            }
            break;
        case 3:
            if (f.wt != ERT_PB_VARINT) FAIL(ERT_E_FORMAT, "%s: attribute i has wire type %d", L->what, f.wt);
            a->i = (int64_t)f.v;
            break;
        case 4:
            if (!get_str(&f, &a->s)) FAIL(ERT_E_FORMAT, "%s: attribute s has wire type %d", L->what, f.wt);
            break;
        case 5:
            if (f.wt != ERT_PB_LEN) FAIL(ERT_E_FORMAT, "%s: attribute t has wire type %d", L->what, f.wt);
            a->t = f.sub;
            break;
        case 21:
            has_ref = true;
            break;
        default:
            break;
        }
    }
    if (r < 0) FAIL(ERT_E_FORMAT, "%s: attribute: %s at offset %zu", L->what, why, ert_pb_off(&b));
    if (!a->name.n || has_nul(a->name)) FAIL(ERT_E_FORMAT, "%s: attribute without a valid name", L->what);
    if (has_ref) FAIL(ERT_E_UNSUPPORTED, "%s: attribute '%.*s' refers to a function attribute", L->what, (int)a->name.n, (const char *)a->name.p);
    if (a->type == A_UNDEF) { /* IR < 2 had no type field: infer it from the field present */
        static const int by_field[] = {0, 0, A_FLOAT, A_INT, A_STRING, A_TENSOR, A_GRAPH, A_FLOATS, A_INTS, A_STRINGS, A_TENSORS, A_GRAPHS};
        for (int k = 2; k <= 11; k++)
            if (seen[k]) a->type = by_field[k];
        if (a->type == A_UNDEF)
            FAIL(ERT_E_FORMAT, "%s: attribute '%.*s' has no type and no value", L->what, (int)a->name.n, (const char *)a->name.p);
    }
    if (a->type == A_FLOATS) return attr_numbers(L, a, a->proto, true);
    if (a->type == A_INTS) return attr_numbers(L, a, a->proto, false);
    return ERT_OK;
}

/* ------------------------------------------------------------ tensors */

static ert_status check_name(loader *L, str s, const char *what) {
    if (!s.n) FAIL(ERT_E_FORMAT, "%s has an empty name", what);
    if (has_nul(s)) FAIL(ERT_E_FORMAT, "%s: name has a NUL byte", what);
    if (map_get(&L->names, s) >= 0)
        FAIL(ERT_E_FORMAT, "%s: tensor '%.*s' is defined more than once", what, (int)s.n, (const char *)s.p);
    return ERT_OK;
}

/* Adds a tensor; the model copies the name. */
static int32_t add_tensor(loader *L, const char *name, ert_dtype dt, ert_role role, int ndim, const int64_t *dims) {
    return ert_model_add_tensor(L->m, name, dt, role, ndim, dims);
}

static ert_status add_weight(loader *L, str name, const char *cname, ert_onnx_tensor *t) {
    int32_t id = add_tensor(L, cname, t->dtype, ERT_ROLE_WEIGHT, t->ndim, t->dims);
    if (id < 0) {
        free(t->data);
        return ERT_E_NOMEM;
    }
    L->m->tensors[id].data = t->data;
    L->m->tensors[id].data_owned = true;
    t->data = NULL;
    if (name.n && !map_put(&L->names, name, id)) FAIL(ERT_E_NOMEM, "out of memory");
    return ERT_OK;
}

/* A unique name for a tensor the loader makes up: "<base>::<what>#k". */
static char *synth_name(loader *L, const char *base, const char *what) {
    size_t n = strlen(base) + strlen(what) + 32;
    char *s = scratch(L, n);
    if (!s) return NULL;
    do {
        snprintf(s, n, "%s::%s#%d", base, what, L->synth++);
    } while (map_get(&L->names, (str){(const uint8_t *)s, strlen(s)}) >= 0);
    return s;
}

static int32_t const_tensor(loader *L, const char *base, const char *what, ert_dtype dt, int ndim,
                            const int64_t *dims, const void *data, size_t bytes) {
    char *nm = synth_name(L, base, what);
    void *d = malloc(bytes ? bytes : 1);
    if (!nm || !d) {
        free(d);
        ert_set_error(L->ctx, ERT_E_NOMEM, "out of memory");
        return -1;
    }
    if (bytes) memcpy(d, data, bytes);
    int32_t id = add_tensor(L, nm, dt, ERT_ROLE_WEIGHT, ndim, dims);
    if (id < 0) {
        free(d);
        return -1;
    }
    L->m->tensors[id].data = d;
    L->m->tensors[id].data_owned = true;
    return id;
}

static int32_t const_i64(loader *L, const char *base, const char *what, const int64_t *v, int n) {
    int64_t d = n;
    return const_tensor(L, base, what, ERT_DTYPE_I64, 1, &d, v, (size_t)n * sizeof *v);
}

static int32_t const_f32_scalar(loader *L, const char *base, const char *what, float v) {
    return const_tensor(L, base, what, ERT_DTYPE_F32, 0, NULL, &v, sizeof v);
}

static int32_t act_tensor(loader *L, const char *base, const char *what) {
    char *nm = synth_name(L, base, what);
    if (!nm) {
        ert_set_error(L->ctx, ERT_E_NOMEM, "out of memory");
        return -1;
    }
    return add_tensor(L, nm, ERT_DTYPE_UNDEFINED, ERT_ROLE_ACTIVATION, 0, NULL);
}

/* ValueInfoProto (1 name, 2 type) -> TypeProto (1 tensor_type) ->
 * Tensor (1 elem_type, 2 shape) -> TensorShapeProto (1 dim) -> Dimension
 * (1 dim_value, 2 dim_param). ndim -1: shape absent (unknown rank). */
typedef struct vinfo {
    str name;
    int elem_type;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    bool non_tensor;
} vinfo;

static ert_status decode_value_info(loader *L, ert_pb b, const char *what, vinfo *v) {
    memset(v, 0, sizeof *v);
    v->ndim = -1;
    ert_pb_field f, g, h, d, e;
    const char *why = NULL;
    int r;
    size_t off = ert_pb_off(&b);
    while ((r = ert_pb_next(&b, &f, &why)) == 1) {
        if (f.num == 1 && !get_str(&f, &v->name)) FAIL(ERT_E_FORMAT, "%s at offset %zu: name has wire type %d", what, off, f.wt);
        if (f.num != 2 || f.wt != ERT_PB_LEN) continue;
        ert_pb tp = f.sub;
        while ((r = ert_pb_next(&tp, &g, &why)) == 1) {
            if (g.num == 4 || g.num == 5 || g.num == 8 || g.num == 9) v->non_tensor = true;
            if (g.num != 1 || g.wt != ERT_PB_LEN) continue;
            ert_pb tt = g.sub;
            while ((r = ert_pb_next(&tt, &h, &why)) == 1) {
                if (h.num == 1 && h.wt == ERT_PB_VARINT) v->elem_type = (int)(int32_t)(uint32_t)h.v;
                if (h.num != 2 || h.wt != ERT_PB_LEN) continue;
                v->ndim = 0;
                ert_pb sh = h.sub;
                while ((r = ert_pb_next(&sh, &d, &why)) == 1) {
                    if (d.num != 1 || d.wt != ERT_PB_LEN) continue;
                    if (v->ndim >= ERT_MAX_DIMS) FAIL(ERT_E_UNSUPPORTED, "%s: more than %d dims", what, ERT_MAX_DIMS);
                    int64_t dv = -1;
                    ert_pb dm = d.sub;
                    while ((r = ert_pb_next(&dm, &e, &why)) == 1)
                        if (e.num == 1 && e.wt == ERT_PB_VARINT) dv = (int64_t)e.v;
                    if (r < 0) break;
                    if (dv < -1) FAIL(ERT_E_FORMAT, "%s: negative dim_value %lld", what, (long long)dv);
                    v->dims[v->ndim++] = dv;
                }
                if (r < 0) break;
            }
            if (r < 0) break;
        }
        if (r < 0) break;
    }
    if (r < 0) FAIL(ERT_E_FORMAT, "%s at offset %zu: %s", what, off, why);
    return ERT_OK;
}

/* ------------------------------------------------------------ attributes */

/* Attribute types that are the same for every op that has the attribute, so a
 * file giving another type is malformed. 'value' differs between ops and is
 * checked where it is used. */
static const struct { const char *name; int type; } ATTR_TYPES[] = {
    {"axis", A_INT}, {"axes", A_INTS}, {"keepdims", A_INT}, {"noop_with_empty_axes", A_INT},
    {"kernel_shape", A_INTS}, {"strides", A_INTS}, {"pads", A_INTS}, {"dilations", A_INTS},
    {"group", A_INT}, {"auto_pad", A_STRING}, {"output_padding", A_INTS}, {"output_shape", A_INTS},
    {"ceil_mode", A_INT}, {"count_include_pad", A_INT}, {"storage_order", A_INT}, {"alpha", A_FLOAT},
    {"beta", A_FLOAT}, {"epsilon", A_FLOAT}, {"momentum", A_FLOAT}, {"transA", A_INT},
    {"transB", A_INT}, {"perm", A_INTS}, {"to", A_INT}, {"mode", A_STRING},
    {"coordinate_transformation_mode", A_STRING}, {"nearest_mode", A_STRING}, {"cubic_coeff_a", A_FLOAT},
    {"exclude_outside", A_INT}, {"extrapolation_value", A_FLOAT}, {"split", A_INTS},
    {"num_outputs", A_INT}, {"allowzero", A_INT}, {"approximate", A_STRING}, {"stash_type", A_INT},
    {"start", A_INT}, {"end", A_INT}, {"starts", A_INTS}, {"ends", A_INTS}, {"min", A_FLOAT},
    {"max", A_FLOAT}, {"ratio", A_FLOAT}, {"scales", A_FLOATS}, {"training_mode", A_INT},
    {"saturate", A_INT}, {"fmod", A_INT}, {"antialias", A_INT}, {"keep_aspect_ratio_policy", A_STRING},
    {"value_float", A_FLOAT}, {"value_floats", A_FLOATS}, {"value_int", A_INT}, {"value_ints", A_INTS},
    {"spatial", A_INT}, {"is_test", A_INT}, {"broadcast", A_INT}, {"consumed_inputs", A_INTS},
    {"shape", A_INTS}, {"paddings", A_INTS}, {"select_last_index", A_INT}, {"gamma", A_FLOAT},
};

static oattr *find_attr(loader *L, int n_attr, const char *name) {
    for (int i = 0; i < n_attr; i++)
        if (str_eq(L->attrs[i].name, name)) return &L->attrs[i];
    return NULL;
}

/* Marks an attribute consumed and returns it (NULL if absent). */
static oattr *take_attr(loader *L, int n_attr, const char *name) {
    oattr *a = find_attr(L, n_attr, name);
    if (a) a->used = true;
    return a;
}

static ert_status decode_attrs(loader *L, int n_attr) {
    for (int i = 0; i < n_attr; i++) {
        oattr *a = &L->attrs[i];
        ert_status st = decode_attr(L, a);
        if (st) return st;
        for (size_t k = 0; k < sizeof ATTR_TYPES / sizeof ATTR_TYPES[0]; k++)
            if (str_eq(a->name, ATTR_TYPES[k].name) && a->type != ATTR_TYPES[k].type)
                FAIL(ERT_E_FORMAT, "%s: attribute '%s' has type %s, expected %s", L->what, ATTR_TYPES[k].name,
                     attr_type_name(a->type), attr_type_name(ATTR_TYPES[k].type));
        for (int j = 0; j < i; j++)
            if (L->attrs[j].name.n == a->name.n && memcmp(L->attrs[j].name.p, a->name.p, a->name.n) == 0)
                FAIL(ERT_E_FORMAT, "%s: attribute '%.*s' given twice", L->what, (int)a->name.n, (const char *)a->name.p);
    }
    return ERT_OK;
}

/* ------------------------------------------------------------ nodes */

/* Adds one IR node after checking its op and counts. `op` is an op of the
 * registry (the canonical newest-opset form). */
static ert_status emit(loader *L, const char *op, const char *name, const int32_t *in, int n_in,
                       const int32_t *out, int n_out, const ert_attr *at, int n_at) {
    const ert_op_def *d = ert_op_find(op);
    if (!d) FAIL(ERT_E_UNSUPPORTED, "%s: op '%s' is not supported", L->what, op);
    while (n_in > 0 && in[n_in - 1] < 0) n_in--; /* trailing omitted optional inputs */
    while (n_out > 0 && out[n_out - 1] < 0) n_out--;
    if (n_in < d->min_in || (d->max_in >= 0 && n_in > d->max_in))
        FAIL(ERT_E_FORMAT, "%s: %d inputs, %s takes %d to %d", L->what, n_in, op, d->min_in, d->max_in);
    if (n_out < d->min_out) FAIL(ERT_E_FORMAT, "%s: %d outputs, %s needs at least %d", L->what, n_out, op, d->min_out);
    if (d->max_out >= 0 && n_out > d->max_out)
        FAIL(ERT_E_UNSUPPORTED, "%s: %d outputs used, edgert implements %d (optional outputs such as indices or "
             "training statistics are not supported)", L->what, n_out, d->max_out);
    for (int i = 0; i < n_out; i++)
        if (out[i] < 0) FAIL(ERT_E_UNSUPPORTED, "%s: omitted output %d before a used one", L->what, i);
    ert_status st = ert_model_add_node(L->m, d->op, name, in, n_in, out, n_out, at, n_at);
    if (st != ERT_OK) {
        char msg[ERT_ERRMSG_SIZE];
        snprintf(msg, sizeof msg, "%s", ert_last_error(L->ctx));
        FAIL(st, "%s: %s", L->what, msg);
    }
    return ERT_OK;
}

/* Rank of a tensor when the file tells it (input, weight or value_info), else -1. */
static int known_rank(loader *L, str name, int32_t id) {
    if (id < 0) return -1;
    const ert_tensor *t = &L->m->tensors[id];
    if (t->role == ERT_ROLE_INPUT || t->role == ERT_ROLE_WEIGHT) return t->ndim;
    return map_get(&L->ranks, name);
}

static bool is_op(const char *op, const char *const *list) {
    for (; *list; list++)
        if (strcmp(op, *list) == 0) return true;
    return false;
}

/* Constant -> a WEIGHT tensor named after its output. */
static ert_status convert_constant(loader *L, const onode *n) {
    if (n->n_out < 1 || !L->out[0].n) FAIL(ERT_E_FORMAT, "%s: no output", L->what);
    ert_status st = decode_attrs(L, n->n_attr);
    if (st) return st;
    str oname = L->out[0];
    if ((st = check_name(L, oname, L->what))) return st;
    char *cname = cstr(L, oname);
    if (!cname) FAIL(ERT_E_NOMEM, "out of memory");
    if (n->n_attr != 1) FAIL(ERT_E_FORMAT, "%s: needs exactly one value attribute, has %d", L->what, n->n_attr);
    oattr *a = &L->attrs[0];
    ert_onnx_tensor t;
    memset(&t, 0, sizeof t);
    if (str_eq(a->name, "value")) {
        if (a->type != A_TENSOR || !a->t.p) FAIL(ERT_E_FORMAT, "%s: attribute 'value' has type %s, expected TENSOR", L->what, attr_type_name(a->type));
        st = ert_onnx_decode_tensor(L->ctx, a->t, L->dir, L->what, &t);
        if (st) return st;
    } else if (str_eq(a->name, "value_float") || str_eq(a->name, "value_floats")) {
        bool many = a->type == A_FLOATS;
        t.dtype = ERT_DTYPE_F32;
        t.ndim = many ? 1 : 0;
        t.dims[0] = many ? a->n_floats : 1;
        t.bytes = (size_t)(many ? a->n_floats : 1) * sizeof(float);
        t.data = malloc(t.bytes ? t.bytes : 1);
        if (!t.data) FAIL(ERT_E_NOMEM, "out of memory");
        if (many) memcpy(t.data, a->floats, t.bytes);
        else memcpy(t.data, &a->f, sizeof(float));
    } else if (str_eq(a->name, "value_int") || str_eq(a->name, "value_ints")) {
        bool many = a->type == A_INTS;
        t.dtype = ERT_DTYPE_I64;
        t.ndim = many ? 1 : 0;
        t.dims[0] = many ? a->n_ints : 1;
        t.bytes = (size_t)(many ? a->n_ints : 1) * sizeof(int64_t);
        t.data = malloc(t.bytes ? t.bytes : 1);
        if (!t.data) FAIL(ERT_E_NOMEM, "out of memory");
        if (many) memcpy(t.data, a->ints, t.bytes);
        else memcpy(t.data, &a->i, sizeof(int64_t));
    } else {
        FAIL(ERT_E_UNSUPPORTED, "%s: attribute '%.*s' is not supported (sparse or string constants)", L->what,
             (int)a->name.n, (const char *)a->name.p);
    }
    if (map_get(&L->graph_outs, oname) < 0) return add_weight(L, oname, cname, &t);
    /* A constant that is itself a graph output: the weight gets a made-up
     * name and an Identity produces the output, since sessions give graph
     * outputs their own storage. */
    char *wname = synth_name(L, cname, "value");
    if (!wname) {
        free(t.data);
        FAIL(ERT_E_NOMEM, "out of memory");
    }
    if ((st = add_weight(L, (str){NULL, 0}, wname, &t))) return st;
    int32_t w = L->m->n_tensors - 1;
    int32_t y = add_tensor(L, cname, ERT_DTYPE_UNDEFINED, ERT_ROLE_ACTIVATION, 0, NULL);
    if (y < 0) return ERT_E_NOMEM;
    if (!map_put(&L->names, oname, y)) FAIL(ERT_E_NOMEM, "out of memory");
    return emit(L, "Identity", cname, &w, 1, &y, 1, NULL, 0);
}

/* Opset < 13 Softmax/LogSoftmax coerce the input to 2-D at `axis`. */
static ert_status convert_old_softmax(loader *L, const char *op, const char *base, const char *nname,
                                      const int32_t *in, const int32_t *out, int64_t axis) {
    int r = known_rank(L, L->in[0], in[0]);
    if (r >= 0 && (axis == r - 1 || axis == -1)) {
        ert_attr a = ERT_ATTR_I("axis", r - 1 > 0 ? r - 1 : 0);
        return emit(L, op, nname, in, 1, out, 1, &a, 1);
    }
    int32_t shp = act_tensor(L, base, "shape"), flat = act_tensor(L, base, "flat2d"), sm = act_tensor(L, base, "softmax2d");
    if (shp < 0 || flat < 0 || sm < 0) return ERT_E_NOMEM;
    ert_status st;
    ert_attr fa = ERT_ATTR_I("axis", axis), sa = ERT_ATTR_I("axis", 1);
    int32_t rin[2] = {sm, shp};
    if ((st = emit(L, "Shape", synth_name(L, base, "Shape"), in, 1, &shp, 1, NULL, 0))) return st;
    if ((st = emit(L, "Flatten", synth_name(L, base, "Flatten"), in, 1, &flat, 1, &fa, 1))) return st;
    if ((st = emit(L, op, nname, &flat, 1, &sm, 1, &sa, 1))) return st;
    return emit(L, "Reshape", synth_name(L, base, "Reshape"), rin, 2, out, 1, NULL, 0);
}

static ert_status convert_node(loader *L, const onode *n) {
    ert_status st;
    if (n->domain.n && !str_eq(n->domain, "ai.onnx"))
        FAIL(ERT_E_UNSUPPORTED, "%s: domain '%.*s' is not supported", L->what, (int)n->domain.n, (const char *)n->domain.p);
    char *op = cstr(L, n->op_type);
    if (!op) FAIL(ERT_E_NOMEM, "out of memory");
    if ((st = decode_attrs(L, n->n_attr))) return st;
    int na = n->n_attr, os = L->opset;

    int n_in = n->n_in;
    int32_t *in = scratch(L, (size_t)(n_in + 4) * sizeof *in);
    int32_t *out = scratch(L, (size_t)(n->n_out + 1) * sizeof *out);
    ert_attr *at = scratch(L, (size_t)(na + 4) * sizeof *at);
    if (!in || !out || !at) FAIL(ERT_E_NOMEM, "out of memory");
    for (int i = 0; i < n_in; i++) {
        if (!L->in[i].n) {
            in[i] = -1;
            continue;
        }
        in[i] = map_get(&L->names, L->in[i]);
        if (in[i] < 0)
            FAIL(ERT_E_FORMAT, "%s: input '%.*s' is not defined", L->what, (int)(L->in[i].n > 200 ? 200 : L->in[i].n),
                 (const char *)L->in[i].p);
    }
    for (int i = 0; i < n->n_out; i++) out[i] = L->out[i].n ? map_get(&L->names, L->out[i]) : -1;
    int n_out = n->n_out;
    while (n_out > 0 && out[n_out - 1] < 0) n_out--;
    if (n_out == 0) FAIL(ERT_E_FORMAT, "%s: no outputs", L->what);
    /* ONNX node names are optional; an unnamed node takes its first output's
     * name so session messages can still point at it. */
    char *nname = cstr(L, n->name.n ? n->name : L->out[0]);
    char *base = nname;
    if (!base) FAIL(ERT_E_NOMEM, "out of memory");
    int n_at = 0;

    /* attributes every version drops */
    take_attr(L, na, "consumed_inputs");

    static const char *const LEGACY_BCAST[] = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "Gemm", NULL};
    if (is_op(op, LEGACY_BCAST) && os < 7) {
        take_attr(L, na, "broadcast");
        if (strcmp(op, "Gemm") != 0 && find_attr(L, na, "axis"))
            FAIL(ERT_E_UNSUPPORTED, "%s: legacy broadcasting with 'axis' (opset < 7) is not supported", L->what);
    }
    if (strcmp(op, "Dropout") == 0) {
        take_attr(L, na, "ratio");
        take_attr(L, na, "is_test");
        take_attr(L, na, "seed");
    } else if (strcmp(op, "BatchNormalization") == 0) {
        take_attr(L, na, "spatial");
        take_attr(L, na, "is_test");
    } else if (strcmp(op, "Upsample") == 0 || (strcmp(op, "Resize") == 0 && os < 11)) {
        if (strcmp(op, "Upsample") == 0 && os < 7)
            FAIL(ERT_E_UNSUPPORTED, "%s: experimental Upsample (opset < 7) is not supported", L->what);
        oattr *sc = take_attr(L, na, "scales");
        int32_t scales;
        if (sc) {
            int64_t d = sc->n_floats;
            scales = const_tensor(L, base, "scales", ERT_DTYPE_F32, 1, &d, sc->floats, (size_t)d * sizeof(float));
            if (scales < 0) return ERT_E_NOMEM;
        } else {
            if (n_in < 2) FAIL(ERT_E_FORMAT, "%s: no scales", L->what);
            scales = in[1];
        }
        in[1] = -1; /* roi */
        in[2] = scales;
        n_in = 3;
        oattr *mode = find_attr(L, na, "mode");
        bool nearest = !mode || str_eq(mode->s, "nearest");
        at[n_at++] = ERT_ATTR_S("coordinate_transformation_mode", "asymmetric");
        if (nearest) at[n_at++] = ERT_ATTR_S("nearest_mode", "floor");
        op = "Resize";
    } else if (strcmp(op, "Split") == 0 && os < 13) {
        oattr *a = take_attr(L, na, "split");
        if (a && n_in == 1) {
            if ((in[1] = const_i64(L, base, "split", a->ints, a->n_ints)) < 0) return ERT_E_NOMEM;
            n_in = 2;
        }
    } else if ((strcmp(op, "Squeeze") == 0 || strcmp(op, "Unsqueeze") == 0) && os < 13) {
        oattr *a = take_attr(L, na, "axes");
        if (a && n_in == 1) {
            if ((in[1] = const_i64(L, base, "axes", a->ints, a->n_ints)) < 0) return ERT_E_NOMEM;
            n_in = 2;
        }
    } else if ((strcmp(op, "ReduceSum") == 0 && os < 13) ||
               ((strcmp(op, "ReduceMean") == 0 || strcmp(op, "ReduceMax") == 0) && os < 18)) {
        oattr *a = take_attr(L, na, "axes");
        if (a && n_in == 1) {
            if ((in[1] = const_i64(L, base, "axes", a->ints, a->n_ints)) < 0) return ERT_E_NOMEM;
            n_in = 2;
        }
    } else if (strcmp(op, "Clip") == 0 && os < 11) {
        oattr *mn = take_attr(L, na, "min"), *mx = take_attr(L, na, "max");
        in[1] = in[2] = -1;
        if (mn && (in[1] = const_f32_scalar(L, base, "min", mn->f)) < 0) return ERT_E_NOMEM;
        if (mx && (in[2] = const_f32_scalar(L, base, "max", mx->f)) < 0) return ERT_E_NOMEM;
        n_in = 3;
    } else if (strcmp(op, "Pad") == 0 && os < 11) {
        oattr *p = take_attr(L, na, os < 2 ? "paddings" : "pads"), *v = take_attr(L, na, "value");
        if (!p) FAIL(ERT_E_FORMAT, "%s: no pads", L->what);
        if ((in[1] = const_i64(L, base, "pads", p->ints, p->n_ints)) < 0) return ERT_E_NOMEM;
        in[2] = -1;
        if (v && v->f != 0.0f && (in[2] = const_f32_scalar(L, base, "value", v->f)) < 0) return ERT_E_NOMEM;
        n_in = 3;
    } else if (strcmp(op, "Slice") == 0 && os < 10) {
        oattr *s = take_attr(L, na, "starts"), *e = take_attr(L, na, "ends"), *ax = take_attr(L, na, "axes");
        if (!s || !e) FAIL(ERT_E_FORMAT, "%s: starts/ends missing", L->what);
        if ((in[1] = const_i64(L, base, "starts", s->ints, s->n_ints)) < 0) return ERT_E_NOMEM;
        if ((in[2] = const_i64(L, base, "ends", e->ints, e->n_ints)) < 0) return ERT_E_NOMEM;
        n_in = 3;
        if (ax) {
            if ((in[3] = const_i64(L, base, "axes", ax->ints, ax->n_ints)) < 0) return ERT_E_NOMEM;
            n_in = 4;
        }
    } else if (strcmp(op, "Reshape") == 0 && os < 5) {
        oattr *a = take_attr(L, na, "shape");
        if (!a) FAIL(ERT_E_FORMAT, "%s: no shape", L->what);
        if ((in[1] = const_i64(L, base, "shape", a->ints, a->n_ints)) < 0) return ERT_E_NOMEM;
        n_in = 2;
    } else if (strcmp(op, "ConstantOfShape") == 0) {
        oattr *v = take_attr(L, na, "value");
        float fv = 0.0f;
        int64_t iv = 0;
        ert_dtype dt = ERT_DTYPE_F32;
        if (v) {
            if (v->type != A_TENSOR || !v->t.p)
                FAIL(ERT_E_FORMAT, "%s: attribute 'value' has type %s, expected TENSOR", L->what, attr_type_name(v->type));
            ert_onnx_tensor t;
            if ((st = ert_onnx_decode_tensor(L->ctx, v->t, L->dir, L->what, &t))) return st;
            dt = t.dtype;
            if (t.n_elems != 1) {
                free(t.data);
                FAIL(ERT_E_FORMAT, "%s: 'value' must have one element, has %lld", L->what, (long long)t.n_elems);
            }
            switch (dt) {
            case ERT_DTYPE_F32: memcpy(&fv, t.data, 4); break;
            case ERT_DTYPE_F16: fv = ert_f16_to_f32(*(uint16_t *)t.data); break;
            case ERT_DTYPE_BF16: fv = ert_bf16_to_f32(*(uint16_t *)t.data); break;
            case ERT_DTYPE_I32: iv = *(int32_t *)t.data; break;
            case ERT_DTYPE_I64: memcpy(&iv, t.data, 8); break;
            case ERT_DTYPE_I8: iv = *(int8_t *)t.data; break;
            default: iv = *(uint8_t *)t.data; break; /* U8, BOOL */
            }
            free(t.data);
        }
        float *fp = scratch(L, sizeof *fp);
        int64_t *ip = scratch(L, sizeof *ip);
        if (!fp || !ip) FAIL(ERT_E_NOMEM, "out of memory");
        *fp = fv;
        *ip = iv;
        if (dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16) at[n_at++] = ERT_ATTR_FS("value", fp, 1);
        else at[n_at++] = ERT_ATTR_IS("value", ip, 1);
        at[n_at++] = ERT_ATTR_I("value_dtype", dt);
    } else if ((strcmp(op, "Softmax") == 0 || strcmp(op, "LogSoftmax") == 0) && os < 13) {
        oattr *ax = take_attr(L, na, "axis");
        for (int i = 0; i < na; i++)
            if (!L->attrs[i].used)
                FAIL(ERT_E_UNSUPPORTED, "%s: unknown attribute '%.*s'", L->what, (int)L->attrs[i].name.n, (const char *)L->attrs[i].name.p);
        if (n_in != 1 || n_out != 1) FAIL(ERT_E_FORMAT, "%s: needs one input and one output", L->what);
        return convert_old_softmax(L, op, base, nname, in, out, ax ? ax->i : 1);
    } else if ((strcmp(op, "Max") == 0 || strcmp(op, "Min") == 0 || strcmp(op, "Sum") == 0) && n_in != 2) {
        /* variadic -> chain of binary nodes (the registry's Max/Min take 2) */
        const char *bin = strcmp(op, "Sum") == 0 ? "Add" : op;
        if (n_in < 1 || n_out != 1) FAIL(ERT_E_FORMAT, "%s: %d inputs", L->what, n_in);
        for (int i = 0; i < n_in; i++)
            if (in[i] < 0) FAIL(ERT_E_FORMAT, "%s: empty input", L->what);
        if (n_in == 1) return emit(L, "Identity", nname, in, 1, out, 1, NULL, 0);
        int32_t cur = in[0];
        for (int k = 1; k < n_in; k++) {
            int32_t dst = k == n_in - 1 ? out[0] : act_tensor(L, base, "partial");
            if (dst < 0) return ERT_E_NOMEM;
            int32_t pair[2] = {cur, in[k]};
            if ((st = emit(L, bin, k == n_in - 1 ? nname : synth_name(L, base, bin), pair, 2, &dst, 1, NULL, 0))) return st;
            cur = dst;
        }
        return ERT_OK;
    }
    if (strcmp(op, "Sum") == 0) op = "Add";
    if (strcmp(op, "PRelu") == 0 && os < 7 && n_in == 2 && in[0] >= 0 && in[1] >= 0) {
        /* PRelu-6 applies a 1-D slope of C values per channel (axis 1); from
         * opset 7 the slope broadcasts numpy-style. A constant slope becomes a
         * (C, 1, ..., 1) copy when the input's rank is known. */
        const ert_tensor *sl = &L->m->tensors[in[1]];
        int r = known_rank(L, L->in[0], in[0]);
        if (sl->role == ERT_ROLE_WEIGHT && sl->ndim == 1 && sl->dims[0] > 1 && r >= 3 && r <= ERT_MAX_DIMS) {
            int64_t d[ERT_MAX_DIMS];
            d[0] = sl->dims[0];
            for (int k = 1; k < r - 1; k++) d[k] = 1;
            size_t nb = 0;
            if (!ert_tensor_nbytes(sl, &nb) || !sl->data) FAIL(ERT_E_FORMAT, "%s: slope has no data", L->what);
            if ((in[1] = const_tensor(L, base, "slope", sl->dtype, r - 1, d, sl->data, nb)) < 0) return ERT_E_NOMEM;
        }
    }
    if (strcmp(op, "CastLike") == 0) {
        /* CastLike(x, like) == Cast(x, to = dtype of like) when that dtype is
         * known at load (a graph input or a weight, as in the function bodies
         * ONNX expands ops into); otherwise it needs shape inference: refused. */
        static const int ONNX_CODE[ERT_DTYPE_COUNT] = {
            [ERT_DTYPE_F32] = 1, [ERT_DTYPE_F16] = 10, [ERT_DTYPE_BF16] = 16, [ERT_DTYPE_I8] = 3,
            [ERT_DTYPE_U8] = 2, [ERT_DTYPE_I32] = 6, [ERT_DTYPE_I64] = 7, [ERT_DTYPE_BOOL] = 9};
        if (n_in != 2 || in[0] < 0 || in[1] < 0) FAIL(ERT_E_FORMAT, "%s: needs 2 inputs", L->what);
        const ert_tensor *like = &L->m->tensors[in[1]];
        bool known = like->role == ERT_ROLE_INPUT || like->role == ERT_ROLE_WEIGHT;
        if (!known || like->dtype <= ERT_DTYPE_UNDEFINED || like->dtype >= ERT_DTYPE_COUNT)
            FAIL(ERT_E_UNSUPPORTED, "%s: CastLike's target type is only known at run time", L->what);
        at[n_at++] = ERT_ATTR_I("to", ONNX_CODE[like->dtype]);
        n_in = 1;
        op = "Cast";
    }

    /* remaining attributes pass through unchanged */
    for (int i = 0; i < na; i++) {
        oattr *a = &L->attrs[i];
        if (a->used) continue;
        char *nm = cstr(L, a->name);
        if (!nm) FAIL(ERT_E_NOMEM, "out of memory");
        ert_attr x = {.name = nm};
        switch (a->type) {
        case A_FLOAT: x.type = ERT_ATTR_FLOAT, x.f = a->f; break;
        case A_INT: x.type = ERT_ATTR_INT, x.i = a->i; break;
        case A_FLOATS: x.type = ERT_ATTR_FLOATS, x.floats = a->floats, x.n = a->n_floats; break;
        case A_INTS: x.type = ERT_ATTR_INTS, x.ints = a->ints, x.n = a->n_ints; break;
        case A_STRING:
            x.type = ERT_ATTR_STRING;
            if (!(x.s = cstr(L, a->s))) FAIL(ERT_E_FORMAT, "%s: attribute '%s' has a NUL byte", L->what, nm);
            break;
        case A_GRAPH: case A_GRAPHS:
            FAIL(ERT_E_UNSUPPORTED, "%s: subgraph attribute '%s' (control flow) is not supported", L->what, nm);
        default:
            FAIL(ERT_E_UNSUPPORTED, "%s: attribute '%s' of type %s is not supported", L->what, nm, attr_type_name(a->type));
        }
        at[n_at++] = x;
    }
    if (!ert_op_find(op))
        FAIL(ERT_E_UNSUPPORTED, "%s: op '%s' (domain '%.*s') is not supported", L->what, op, (int)n->domain.n,
             (const char *)n->domain.p);
    return emit(L, op, nname, in, n_in, out, n_out, at, n_at);
}

/* ------------------------------------------------------------ graph */

typedef struct win_list {
    ert_pb *v;
    int n, cap;
} win_list;

static ert_status push_win(loader *L, win_list *l, ert_pb w) {
    if (grow(L, (void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) return ERT_E_NOMEM;
    l->v[l->n++] = w;
    return ERT_OK;
}

enum { G_NODE = 1, G_INIT = 5, G_INPUT = 11, G_OUTPUT = 12, G_VALUE_INFO = 13, G_SPARSE_INIT = 15 };

/* An initializer of an unsupported dtype (int4, float8 zero points of a
 * QuantizeLinear...): prefix the message with the first node that reads it,
 * so the user learns which node needs it. */
static void name_reader(loader *L, const win_list *nodes, str name) {
    char msg[ERT_ERRMSG_SIZE];
    snprintf(msg, sizeof msg, "%s", ert_last_error(L->ctx));
    for (int i = 0; i < nodes->n; i++) {
        onode n;
        if (decode_node(L, nodes->v[i], &n) != ERT_OK) break;
        for (int k = 0; k < n.n_in; k++)
            if (L->in[k].n == name.n && memcmp(L->in[k].p, name.p, name.n) == 0) {
                set_what(L, &n, i);
                ert_set_error(L->ctx, ERT_E_UNSUPPORTED, "%s: input %d: %s", L->what, k, msg);
                return;
            }
    }
    ert_set_error(L->ctx, ERT_E_UNSUPPORTED, "%s", msg); /* decode_node may have overwritten it */
}

static ert_status load_graph(loader *L, ert_pb g) {
    win_list nodes = {0}, inits = {0}, inputs = {0}, outputs = {0}, vis = {0};
    ert_pb_field f;
    const char *why = NULL;
    int r;
    ert_status st = ERT_OK;
    char what[300];
#define GFAIL(...) do { st = ert_set_error(L->ctx, __VA_ARGS__); goto out; } while (0)
#define GCHK(x) do { if ((st = (x)) != ERT_OK) goto out; } while (0)
    while ((r = ert_pb_next(&g, &f, &why)) == 1) {
        win_list *l = f.num == G_NODE ? &nodes : f.num == G_INIT ? &inits : f.num == G_INPUT ? &inputs
                    : f.num == G_OUTPUT ? &outputs : f.num == G_VALUE_INFO ? &vis : NULL;
        if (f.num == G_SPARSE_INIT) GFAIL(ERT_E_UNSUPPORTED, "GraphProto: sparse initializers are not supported");
        if (!l) continue;
        if (f.wt != ERT_PB_LEN) GFAIL(ERT_E_FORMAT, "GraphProto: field %u has wire type %d at offset %zu", f.num, f.wt, f.off);
        GCHK(push_win(L, l, f.sub));
    }
    if (r < 0) GFAIL(ERT_E_FORMAT, "GraphProto: %s at offset %zu", why, ert_pb_off(&g));

    /* initializers */
    for (int i = 0; i < inits.n; i++) {
        ert_onnx_tensor t;
        snprintf(what, sizeof what, "initializer #%d", i);
        memset(&t, 0, sizeof t);
        if ((st = ert_onnx_decode_tensor(L->ctx, inits.v[i], L->dir, what, &t)) != ERT_OK) {
            if (st == ERT_E_UNSUPPORTED && t.name) name_reader(L, &nodes, (str){t.name, t.name_len});
            goto out;
        }
        str nm = {t.name, t.name_len};
        snprintf(what, sizeof what, "initializer '%.*s'", (int)(t.name_len > 200 ? 200 : t.name_len), (const char *)t.name);
        if ((st = check_name(L, nm, what)) != ERT_OK) {
            free(t.data);
            goto out;
        }
        char *cn = cstr(L, nm);
        if (!cn) {
            free(t.data);
            GFAIL(ERT_E_NOMEM, "out of memory");
        }
        GCHK(add_weight(L, nm, cn, &t));
        scratch_reset(L);
    }
    /* inputs (those that are initializers are weights) */
    for (int i = 0; i < inputs.n; i++) {
        vinfo v;
        snprintf(what, sizeof what, "graph input #%d", i);
        GCHK(decode_value_info(L, inputs.v[i], what, &v));
        if (map_get(&L->names, v.name) >= 0) {
            int32_t id = map_get(&L->names, v.name);
            if (L->m->tensors[id].role == ERT_ROLE_WEIGHT) continue;
        }
        snprintf(what, sizeof what, "graph input '%.*s'", (int)(v.name.n > 200 ? 200 : v.name.n), (const char *)v.name.p);
        GCHK(check_name(L, v.name, what));
        if (v.non_tensor) GFAIL(ERT_E_UNSUPPORTED, "%s: only tensor inputs are supported", what);
        if (v.ndim < 0) GFAIL(ERT_E_UNSUPPORTED, "%s: unknown rank (no shape)", what);
        ert_dtype dt = ert_onnx_dtype(v.elem_type);
        if (dt == ERT_DTYPE_UNDEFINED)
            GFAIL(ERT_E_UNSUPPORTED, "%s: element type %s (%d) is not supported", what, ert_onnx_dtype_name(v.elem_type), v.elem_type);
        char *cn = cstr(L, v.name);
        if (!cn) GFAIL(ERT_E_NOMEM, "out of memory");
        int32_t id = add_tensor(L, cn, dt, ERT_ROLE_INPUT, v.ndim, v.dims);
        if (id < 0) GFAIL(ERT_E_NOMEM, "%s", ert_last_error(L->ctx));
        if (!map_put(&L->names, v.name, id)) GFAIL(ERT_E_NOMEM, "out of memory");
        GCHK(ert_model_add_graph_input(L->m, id));
        scratch_reset(L);
    }
    /* ranks from value_info and outputs (used by the opset < 13 Softmax rule) */
    for (int i = 0; i < vis.n + outputs.n; i++) {
        vinfo v;
        snprintf(what, sizeof what, "value_info #%d", i);
        st = decode_value_info(L, i < vis.n ? vis.v[i] : outputs.v[i - vis.n], what, &v);
        if (st == ERT_E_UNSUPPORTED && i < vis.n) { /* only a hint (rank > 8, say): ignore it */
            st = ERT_OK;
            continue;
        }
        if (st != ERT_OK) goto out;
        if (v.name.n && v.ndim >= 0 && map_get(&L->ranks, v.name) < 0 && !map_put(&L->ranks, v.name, v.ndim))
            GFAIL(ERT_E_NOMEM, "out of memory");
        if (i >= vis.n && v.name.n && map_get(&L->graph_outs, v.name) < 0 && !map_put(&L->graph_outs, v.name, i))
            GFAIL(ERT_E_NOMEM, "out of memory");
    }
    /* pass 1: constants and node outputs */
    for (int i = 0; i < nodes.n; i++) {
        onode n;
        GCHK(decode_node(L, nodes.v[i], &n));
        set_what(L, &n, i);
        if (str_eq(n.op_type, "Constant") && (!n.domain.n || str_eq(n.domain, "ai.onnx"))) {
            GCHK(convert_constant(L, &n));
        } else {
            for (int k = 0; k < n.n_out; k++) {
                if (!L->out[k].n) continue;
                GCHK(check_name(L, L->out[k], L->what));
                char *cn = cstr(L, L->out[k]);
                if (!cn) GFAIL(ERT_E_NOMEM, "out of memory");
                int32_t id = add_tensor(L, cn, ERT_DTYPE_UNDEFINED, ERT_ROLE_ACTIVATION, 0, NULL);
                if (id < 0) GFAIL(ERT_E_NOMEM, "%s", ert_last_error(L->ctx));
                if (!map_put(&L->names, L->out[k], id)) GFAIL(ERT_E_NOMEM, "out of memory");
            }
        }
        scratch_reset(L);
    }
    /* pass 2: nodes */
    for (int i = 0; i < nodes.n; i++) {
        onode n;
        GCHK(decode_node(L, nodes.v[i], &n));
        if (str_eq(n.op_type, "Constant") && (!n.domain.n || str_eq(n.domain, "ai.onnx"))) continue;
        set_what(L, &n, i);
        GCHK(convert_node(L, &n));
        scratch_reset(L);
    }
    /* outputs */
    if (outputs.n == 0) GFAIL(ERT_E_FORMAT, "GraphProto: no outputs");
    for (int i = 0; i < outputs.n; i++) {
        vinfo v;
        snprintf(what, sizeof what, "graph output #%d", i);
        GCHK(decode_value_info(L, outputs.v[i], what, &v));
        snprintf(what, sizeof what, "graph output '%.*s'", (int)(v.name.n > 200 ? 200 : v.name.n), (const char *)v.name.p);
        int32_t id = map_get(&L->names, v.name);
        if (id < 0) GFAIL(ERT_E_FORMAT, "%s is not produced by any node", what);
        ert_tensor *t = &L->m->tensors[id];
        if (t->role == ERT_ROLE_INPUT || t->role == ERT_ROLE_WEIGHT)
            GFAIL(ERT_E_UNSUPPORTED, "%s is a graph input or a constant, not a node output", what);
        if (t->role == ERT_ROLE_OUTPUT) GFAIL(ERT_E_FORMAT, "%s is listed twice", what);
        t->role = ERT_ROLE_OUTPUT;
        /* the declared type, for ert_model_output_info; sessions infer their own */
        ert_dtype dt = ert_onnx_dtype(v.elem_type);
        if (dt != ERT_DTYPE_UNDEFINED) t->dtype = dt;
        if (v.ndim >= 0) {
            t->ndim = v.ndim;
            for (int k = 0; k < v.ndim; k++) t->dims[k] = v.dims[k];
        }
        GCHK(ert_model_add_graph_output(L->m, id));
    }
out:
    free(nodes.v);
    free(inits.v);
    free(inputs.v);
    free(outputs.v);
    free(vis.v);
    scratch_reset(L);
    return st;
#undef GFAIL
#undef GCHK
}

/* ModelProto: 1 ir_version, 7 graph, 8 opset_import (1 domain, 2 version). */
ert_status ert_onnx_read(ert_context *ctx, const void *data, size_t size, const char *dir, ert_model **out) {
    if (!data || !out) return ert_set_error(ctx, ERT_E_ARG, "ert_onnx_read: NULL argument");
    const uint8_t *base = data;
    ert_pb b = {base, base + size, base};
    ert_pb_field f, g;
    const char *why = NULL;
    int r;
    int64_t opset = -1, ir_version = -1;
    ert_pb graph = {NULL, NULL, base};
    bool has_graph = false;
    while ((r = ert_pb_next(&b, &f, &why)) == 1) {
        if (f.num == 1 && f.wt == ERT_PB_VARINT) ir_version = (int64_t)f.v;
        if (f.num == 7) {
            if (f.wt != ERT_PB_LEN) return ert_set_error(ctx, ERT_E_FORMAT, "ModelProto: graph has wire type %d", f.wt);
            graph = f.sub;
            has_graph = true;
        }
        if (f.num == 8 && f.wt == ERT_PB_LEN) {
            ert_pb o = f.sub;
            str dom = {(const uint8_t *)"", 0};
            int64_t ver = -1;
            while ((r = ert_pb_next(&o, &g, &why)) == 1) {
                if (g.num == 1) get_str(&g, &dom);
                if (g.num == 2 && g.wt == ERT_PB_VARINT) ver = (int64_t)g.v;
            }
            if (r < 0) return ert_set_error(ctx, ERT_E_FORMAT, "ModelProto.opset_import: %s at offset %zu", why, ert_pb_off(&o));
            if (dom.n == 0 || str_eq(dom, "ai.onnx")) opset = ver;
        }
    }
    if (r < 0) return ert_set_error(ctx, ERT_E_FORMAT, "ModelProto: %s at offset %zu", why, ert_pb_off(&b));
    if (!has_graph) return ert_set_error(ctx, ERT_E_FORMAT, "ModelProto: no graph (not an ONNX model?)");
    if (ir_version < 1) return ert_set_error(ctx, ERT_E_FORMAT, "ModelProto: no ir_version (not an ONNX model?)");
    if (opset < 1 || opset > 1000)
        return ert_set_error(ctx, ERT_E_FORMAT, "ModelProto: no usable opset_import for the default domain");

    loader L0 = {.ctx = ctx, .dir = dir, .opset = (int)opset};
    loader *L = &L0;
    L->m = ert_model_new(ctx);
    if (!L->m) return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
    ert_status st = load_graph(L, graph);
    if (st == ERT_OK) {
        L->m->opset = (int)opset;
        st = ert_model_validate(L->m);
    }
    map_free(&L->names);
    map_free(&L->ranks);
    map_free(&L->graph_outs);
    scratch_reset(L);
    free(L->scratch);
    free(L->in);
    free(L->out);
    free(L->attrs);
    if (st != ERT_OK) {
        ert_model_free(L->m);
        return st;
    }
    *out = L->m;
    return ERT_OK;
}

/*
 * Model: the immutable graph + weights, the helpers loaders use to build one,
 * validation (topological sort) and the public queries. Loading and saving
 * (the public entry points that call the .ert and ONNX readers) live one
 * floor up, in loaders/model_io.c.
 *
 * Validation (ert_model_validate), iterative so a 200k-node chain cannot blow
 * the stack:
 *   1. every tensor is defined exactly once: as a graph input, a weight, or
 *      the output of exactly one node;
 *   2. every node input and graph output refers to a defined tensor;
 *   3. quantized nodes' constant scales and zero points are sane
 *      (ert_quant_check_node);
 *   4. Kahn's algorithm orders the nodes; nodes left over form a cycle.
 * Name lookups go through an open-addressing hash of tensor names, so loading
 * is linear in the graph size.
 */
#include "ert_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ helpers */

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

bool ert_dims_nelems(int ndim, const int64_t *dims, int64_t *out) {
    if (ndim < 0 || ndim > ERT_MAX_DIMS) return false;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0) return false;
        if (__builtin_mul_overflow(n, dims[i], &n)) return false;
    }
    *out = n;
    return true;
}

bool ert_tensor_nbytes(const ert_tensor *t, size_t *out) {
    int64_t n;
    if (!ert_dims_nelems(t->ndim, t->dims, &n)) return false;
    size_t es = ert_dtype_size(t->dtype);
    if (es == 0) return false;
    return !ert_mul_ovf((size_t)n, es, out) && *out < ((size_t)1 << 62);
}

static uint64_t hash_str(const char *s) { /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Hash of tensor names -> index; capacity a power of two, load <= 1/2. */
typedef struct name_index {
    int32_t *slot; /* -1 empty */
    size_t cap;
} name_index;

static bool index_insert(name_index *ix, const ert_tensor *ts, int32_t id) {
    size_t mask = ix->cap - 1;
    for (size_t h = hash_str(ts[id].name) & mask;; h = (h + 1) & mask) {
        if (ix->slot[h] < 0) {
            ix->slot[h] = id;
            return true;
        }
        if (strcmp(ts[ix->slot[h]].name, ts[id].name) == 0) return true; /* keep the first */
    }
}

static bool index_rebuild(ert_model *m, size_t cap) {
    name_index *ix = (name_index *)m->name_index;
    int32_t *slot = malloc(cap * sizeof *slot);
    if (!slot) return false;
    for (size_t i = 0; i < cap; i++) slot[i] = -1;
    free(ix->slot);
    ix->slot = slot;
    ix->cap = cap;
    for (int32_t i = 0; i < m->n_tensors; i++) index_insert(ix, m->tensors, i);
    return true;
}

/* ------------------------------------------------------------------ building */

ert_model *ert_model_new(ert_context *ctx) {
    ert_model *m = calloc(1, sizeof *m);
    if (!m) {
        ert_set_error(ctx, ERT_E_NOMEM, "out of memory creating a model");
        return NULL;
    }
    m->ctx = ctx;
    m->name_index = calloc(1, sizeof(name_index));
    if (!m->name_index || !index_rebuild(m, 64)) {
        free(m->name_index);
        free(m);
        ert_set_error(ctx, ERT_E_NOMEM, "out of memory creating a model");
        return NULL;
    }
    return m;
}

ert_status ert_model_reindex(ert_model *m) {
    name_index *ix = (name_index *)m->name_index;
    if (!index_rebuild(m, ix->cap)) return ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory");
    return ERT_OK;
}

int32_t ert_model_find_tensor(const ert_model *m, const char *name) {
    const name_index *ix = (const name_index *)m->name_index;
    if (!name || !ix || !ix->cap) return -1;
    size_t mask = ix->cap - 1;
    for (size_t h = hash_str(name) & mask; ix->slot[h] >= 0; h = (h + 1) & mask)
        if (strcmp(m->tensors[ix->slot[h]].name, name) == 0) return ix->slot[h];
    return -1;
}

int32_t ert_model_add_tensor(ert_model *m, const char *name, ert_dtype dt, ert_role role,
                             int ndim, const int64_t *dims) {
    if (ndim < 0 || ndim > ERT_MAX_DIMS) {
        ert_set_error(m->ctx, ERT_E_FORMAT, "tensor '%s': rank %d outside [0, %d]", name ? name : "?", ndim,
                      ERT_MAX_DIMS);
        return -1;
    }
    if (m->n_tensors >= INT32_MAX / 2) {
        ert_set_error(m->ctx, ERT_E_FORMAT, "too many tensors");
        return -1;
    }
    if (m->n_tensors == m->cap_tensors) {
        int cap = m->cap_tensors ? m->cap_tensors * 2 : 64;
        ert_tensor *t = realloc(m->tensors, (size_t)cap * sizeof *t);
        if (!t) goto nomem;
        m->tensors = t;
        m->cap_tensors = cap;
    }
    ert_tensor *t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof *t);
    char tmp[32];
    if (!name || !*name) {
        snprintf(tmp, sizeof tmp, "_t%d", m->n_tensors);
        name = tmp;
    }
    t->name = dup_str(name);
    if (!t->name) goto nomem;
    t->dtype = dt;
    t->role = role;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->dims[i] = dims[i];
    int32_t id = m->n_tensors++;
    name_index *ix = (name_index *)m->name_index;
    if ((size_t)m->n_tensors * 2 > ix->cap) {
        if (!index_rebuild(m, ix->cap * 2)) goto nomem_undo;
    } else {
        index_insert(ix, m->tensors, id);
    }
    return id;
nomem_undo:
    m->n_tensors--;
    free(t->name);
nomem:
    ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory adding a tensor");
    return -1;
}

static void free_attr(ert_attr_val *a) {
    free(a->name);
    free(a->ints);
    free(a->floats);
    free(a->s);
}

static ert_status copy_attr(ert_context *ctx, ert_attr_val *d, const ert_attr *s) {
    memset(d, 0, sizeof *d);
    if (!s->name) return ert_set_error(ctx, ERT_E_ARG, "attribute without a name");
    if (s->n < 0 || s->n > (1 << 24)) return ert_set_error(ctx, ERT_E_FORMAT, "attribute '%s': bad length %d", s->name, s->n);
    d->name = dup_str(s->name);
    d->type = s->type;
    d->i = s->i;
    d->f = s->f;
    d->n = s->n;
    if (!d->name) goto nomem;
    switch (s->type) {
    case ERT_ATTR_INT: case ERT_ATTR_FLOAT: d->n = 0; break;
    case ERT_ATTR_INTS:
        if (s->n && !s->ints) return ert_set_error(ctx, ERT_E_ARG, "attribute '%s': NULL ints", s->name);
        d->ints = malloc((size_t)(s->n ? s->n : 1) * sizeof(int64_t));
        if (!d->ints) goto nomem;
        if (s->n) memcpy(d->ints, s->ints, (size_t)s->n * sizeof(int64_t));
        break;
    case ERT_ATTR_FLOATS:
        if (s->n && !s->floats) return ert_set_error(ctx, ERT_E_ARG, "attribute '%s': NULL floats", s->name);
        d->floats = malloc((size_t)(s->n ? s->n : 1) * sizeof(float));
        if (!d->floats) goto nomem;
        if (s->n) memcpy(d->floats, s->floats, (size_t)s->n * sizeof(float));
        break;
    case ERT_ATTR_STRING:
        d->n = 0;
        d->s = dup_str(s->s ? s->s : "");
        if (!d->s) goto nomem;
        break;
    default: return ert_set_error(ctx, ERT_E_FORMAT, "attribute '%s': unknown type %d", s->name, (int)s->type);
    }
    return ERT_OK;
nomem:
    return ert_set_error(ctx, ERT_E_NOMEM, "out of memory copying attribute '%s'", s->name);
}

ert_status ert_model_add_node(ert_model *m, ert_op op, const char *name,
                              const int32_t *in, int n_in, const int32_t *out, int n_out,
                              const ert_attr *attrs, int n_attrs) {
    const ert_op_def *def = ert_op_get(op);
    if (!def) return ert_set_error(m->ctx, ERT_E_UNSUPPORTED, "node '%s': unknown op code %d", name ? name : "", (int)op);
    const char *nm = name ? name : "";
    if (n_in < def->min_in || (def->max_in >= 0 && n_in > def->max_in) || n_in > 4096)
        return ert_set_error(m->ctx, ERT_E_FORMAT, "node '%s' (%s): %d inputs, expected %d..%d", nm, def->name, n_in,
                             def->min_in, def->max_in);
    if (n_out < def->min_out || (def->max_out >= 0 && n_out > def->max_out) || n_out > 4096)
        return ert_set_error(m->ctx, ERT_E_FORMAT, "node '%s' (%s): %d outputs, expected %d..%d", nm, def->name, n_out,
                             def->min_out, def->max_out);
    if (n_attrs < 0 || n_attrs > 4096) return ert_set_error(m->ctx, ERT_E_FORMAT, "node '%s': %d attributes", nm, n_attrs);
    for (int i = 0; i < n_in; i++)
        if (in[i] < -1 || in[i] >= m->n_tensors)
            return ert_set_error(m->ctx, ERT_E_FORMAT, "node '%s' (%s): input %d refers to tensor %d of %d", nm,
                                 def->name, i, in[i], m->n_tensors);
    for (int i = 0; i < n_out; i++)
        if (out[i] < 0 || out[i] >= m->n_tensors)
            return ert_set_error(m->ctx, ERT_E_FORMAT, "node '%s' (%s): output %d refers to tensor %d of %d", nm,
                                 def->name, i, out[i], m->n_tensors);
    if (m->n_nodes >= INT32_MAX / 2) return ert_set_error(m->ctx, ERT_E_FORMAT, "too many nodes");
    if (m->n_nodes == m->cap_nodes) {
        int cap = m->cap_nodes ? m->cap_nodes * 2 : 64;
        ert_node *nn = realloc(m->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory adding a node");
        m->nodes = nn;
        m->cap_nodes = cap;
    }
    ert_node *n = &m->nodes[m->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->n_in = n_in;
    n->n_out = n_out;
    n->in = malloc((size_t)(n_in + n_out + 1) * sizeof(int32_t));
    n->name = dup_str(nm);
    n->attrs = calloc((size_t)(n_attrs ? n_attrs : 1), sizeof *n->attrs);
    if (!n->in || !n->name || !n->attrs) {
        free(n->in); free(n->name); free(n->attrs);
        return ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory adding a node");
    }
    n->out = n->in + n_in;
    if (n_in) memcpy(n->in, in, (size_t)n_in * sizeof(int32_t));
    if (n_out) memcpy(n->out, out, (size_t)n_out * sizeof(int32_t));
    for (int i = 0; i < n_attrs; i++) {
        ert_status st = copy_attr(m->ctx, &n->attrs[i], &attrs[i]);
        n->n_attrs = i + 1;
        if (st != ERT_OK) {
            for (int k = 0; k < n->n_attrs; k++) free_attr(&n->attrs[k]);
            free(n->in); free(n->name); free(n->attrs);
            return st;
        }
    }
    m->n_nodes++;
    return ERT_OK;
}

static void free_node(ert_node *n) {
    for (int k = 0; k < n->n_attrs; k++) free_attr(&n->attrs[k]);
    free(n->attrs);
    free(n->in); /* out shares the block */
    free(n->name);
}

ert_status ert_model_validate(ert_model *m) {
    ert_context *ctx = m->ctx;
    int nt = m->n_tensors, nn = m->n_nodes;
    ert_status st = ERT_OK;
    /* producer[t]: -2 undefined, -1 input/weight, else node index */
    int32_t *producer = malloc((size_t)(nt ? nt : 1) * sizeof *producer);
    int32_t *indeg = calloc((size_t)(nn ? nn : 1), sizeof *indeg);
    int32_t *order = malloc((size_t)(nn ? nn : 1) * sizeof *order);
    /* consumers in CSR form: for each tensor, the nodes reading it */
    int32_t *cstart = calloc((size_t)nt + 1, sizeof *cstart);
    int64_t n_edges = 0;
    for (int i = 0; i < nn; i++) n_edges += m->nodes[i].n_in;
    int32_t *cons = malloc((size_t)(n_edges ? n_edges : 1) * sizeof *cons);
    ert_node *sorted = NULL;
    if (!producer || !indeg || !order || !cstart || !cons) {
        st = ert_set_error(ctx, ERT_E_NOMEM, "out of memory validating the graph");
        goto done;
    }
    for (int t = 0; t < nt; t++) {
        ert_role r = m->tensors[t].role;
        producer[t] = (r == ERT_ROLE_WEIGHT || r == ERT_ROLE_INPUT) ? -1 : -2;
        if (r == ERT_ROLE_WEIGHT && !m->tensors[t].data) {
            st = ert_set_error(ctx, ERT_E_FORMAT, "weight '%s' has no data", m->tensors[t].name);
            goto done;
        }
    }
    for (int i = 0; i < m->n_inputs; i++) {
        int32_t t = m->inputs[i];
        if (t < 0 || t >= nt) {
            st = ert_set_error(ctx, ERT_E_FORMAT, "graph input %d refers to tensor %d of %d", i, t, nt);
            goto done;
        }
    }
    for (int i = 0; i < nn; i++) {
        const ert_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_out; k++) {
            int32_t t = n->out[k];
            if (producer[t] != -2) {
                st = ert_set_error(ctx, ERT_E_FORMAT, "node '%s' (%s): output '%s' is already defined %s", n->name,
                                   ert_op_get(n->op)->name, m->tensors[t].name,
                                   producer[t] == -1 ? "as an input or weight" : "by another node");
                goto done;
            }
            producer[t] = i;
        }
    }
    for (int i = 0; i < nn; i++) {
        const ert_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int32_t t = n->in[k];
            if (t < 0) continue;
            if (producer[t] == -2) {
                st = ert_set_error(ctx, ERT_E_FORMAT, "node '%s' (%s): input %d '%s' is never defined", n->name,
                                   ert_op_get(n->op)->name, k, m->tensors[t].name);
                goto done;
            }
            if (producer[t] >= 0) indeg[i]++;
            cstart[t + 1]++;
        }
    }
    for (int i = 0; i < nn; i++) /* hostile quantization constants, named after the node */
        if ((st = ert_quant_check_node(m, &m->nodes[i]))) goto done;
    for (int i = 0; i < m->n_outputs; i++) {
        int32_t t = m->outputs[i];
        if (t < 0 || t >= nt || producer[t] == -2) {
            st = ert_set_error(ctx, ERT_E_FORMAT, "graph output %d ('%s') is never defined", i,
                               (t >= 0 && t < nt) ? m->tensors[t].name : "?");
            goto done;
        }
    }
    for (int t = 0; t < nt; t++) cstart[t + 1] += cstart[t];
    int32_t *pos = malloc((size_t)(nt ? nt : 1) * sizeof *pos);
    if (!pos) {
        st = ert_set_error(ctx, ERT_E_NOMEM, "out of memory validating the graph");
        goto done;
    }
    memcpy(pos, cstart, (size_t)nt * sizeof *pos);
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < m->nodes[i].n_in; k++) {
            int32_t t = m->nodes[i].in[k];
            if (t >= 0) cons[pos[t]++] = i;
        }
    free(pos);
    /* Kahn: a FIFO over `order` keeps the original order among ready nodes. */
    int head = 0, tail = 0;
    for (int i = 0; i < nn; i++)
        if (indeg[i] == 0) order[tail++] = i;
    while (head < tail) {
        const ert_node *n = &m->nodes[order[head++]];
        for (int k = 0; k < n->n_out; k++) {
            int32_t t = n->out[k];
            for (int32_t c = cstart[t]; c < cstart[t + 1]; c++)
                if (--indeg[cons[c]] == 0) order[tail++] = cons[c];
        }
    }
    if (tail != nn) {
        for (int i = 0; i < nn; i++)
            if (indeg[i] > 0) {
                st = ert_set_error(ctx, ERT_E_FORMAT, "graph has a cycle through node '%s' (%s)", m->nodes[i].name,
                                   ert_op_get(m->nodes[i].op)->name);
                break;
            }
        goto done;
    }
    sorted = malloc((size_t)(nn ? nn : 1) * sizeof *sorted);
    if (!sorted) {
        st = ert_set_error(ctx, ERT_E_NOMEM, "out of memory validating the graph");
        goto done;
    }
    for (int i = 0; i < nn; i++) sorted[i] = m->nodes[order[i]];
    free(m->nodes);
    m->nodes = sorted;
    m->cap_nodes = nn ? nn : 1;
done:
    free(producer);
    free(indeg);
    free(order);
    free(cstart);
    free(cons);
    return st;
}

void ert_model_free(ert_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_tensors; i++) {
        free(m->tensors[i].name);
        if (m->tensors[i].data_owned) free((void *)m->tensors[i].data);
    }
    free(m->tensors);
    for (int i = 0; i < m->n_nodes; i++) free_node(&m->nodes[i]);
    free(m->nodes);
    free(m->inputs);
    free(m->outputs);
    if (m->name_index) free(((name_index *)m->name_index)->slot);
    free(m->name_index);
    if (m->map_base && m->map_size) munmap(m->map_base, m->map_size);
    free(m->blob);
    free(m);
}

/* Append a tensor index to a graph input/output list. */
static ert_status push_io(ert_model *m, int32_t **list, int *n, int32_t id) {
    int32_t *l = realloc(*list, (size_t)(*n + 1) * sizeof *l);
    if (!l) return ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory");
    l[(*n)++] = id;
    *list = l;
    return ERT_OK;
}

ert_status ert_model_add_graph_input(ert_model *m, int32_t id) { return push_io(m, &m->inputs, &m->n_inputs, id); }
ert_status ert_model_add_graph_output(ert_model *m, int32_t id) { return push_io(m, &m->outputs, &m->n_outputs, id); }

/* ------------------------------------------------------------------ queries */

int ert_model_n_inputs(const ert_model *m) { return m ? m->n_inputs : 0; }
int ert_model_n_outputs(const ert_model *m) { return m ? m->n_outputs : 0; }

static ert_status io_info(const ert_model *m, const int32_t *list, int n, int i, ert_tensor_info *out) {
    if (!m || !out) return ERT_E_ARG;
    if (i < 0 || i >= n) return ert_set_error(m->ctx, ERT_E_ARG, "index %d out of range [0, %d)", i, n);
    const ert_tensor *t = &m->tensors[list[i]];
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    for (int k = 0; k < t->ndim; k++) out->dims[k] = t->dims[k];
    return ERT_OK;
}

ert_status ert_model_input_info(const ert_model *m, int i, ert_tensor_info *out) {
    return io_info(m, m ? m->inputs : NULL, m ? m->n_inputs : 0, i, out);
}
ert_status ert_model_output_info(const ert_model *m, int i, ert_tensor_info *out) {
    return io_info(m, m ? m->outputs : NULL, m ? m->n_outputs : 0, i, out);
}

int ert_model_n_nodes(const ert_model *m) { return m ? m->n_nodes : 0; }

const char *ert_model_node_op(const ert_model *m, int i) {
    if (!m || i < 0 || i >= m->n_nodes) return NULL;
    return ert_op_get(m->nodes[i].op)->name;
}

const char *ert_model_node_name(const ert_model *m, int i) {
    if (!m || i < 0 || i >= m->n_nodes) return NULL;
    return m->nodes[i].name;
}

int64_t ert_model_n_params(const ert_model *m) {
    int64_t n = 0;
    if (!m) return 0;
    for (int i = 0; i < m->n_tensors; i++) {
        int64_t k;
        if (m->tensors[i].role == ERT_ROLE_WEIGHT && ert_dims_nelems(m->tensors[i].ndim, m->tensors[i].dims, &k) &&
            (m->tensors[i].dtype == ERT_DTYPE_F32 || m->tensors[i].dtype == ERT_DTYPE_F16 ||
             m->tensors[i].dtype == ERT_DTYPE_BF16))
            n += k;
    }
    return n;
}

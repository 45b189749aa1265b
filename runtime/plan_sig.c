/* The model's shape signature for the plan cache key (core/plan_cache.c):
 * FNV-1a 64 over everything that decides what session create measures, and
 * nothing else, so it is cheap (no weight bytes but small constants) and a
 * fine-tuned model with the same graph reuses its plans.
 * Covered: every tensor's name, dtype, role and dims; the bytes of constant
 * tensors of at most SMALL_CONST bytes (shape operands: Reshape shapes, axes,
 * pads, scales decide the concrete shapes); every node's op, name, inputs,
 * outputs and attributes; the graph inputs and outputs; the session options
 * that change the plan (batch, input shapes, fixed input values, flags,
 * precision, placement, create mode). Not covered, so not in the key: larger
 * weights' values (they change no algorithm choice), threads, the arena. */
#include "runtime_internal.h"

#include <string.h>

#define SMALL_CONST 256 /* bytes: shapes, axes, pads, scales, clip bounds (rank <= 8 of i64: 64 bytes) */

#define H(p, n) (h = ert_fnv64(h, (p), (n)))
#define HV(v) H(&(v), sizeof(v))

static uint64_t hash_str(uint64_t h, const char *s) {
    size_t n = s ? strlen(s) + 1 : 0; /* the NUL separates neighbours */
    H(&n, sizeof n);
    return n ? H(s, n) : h;
}

uint64_t ert_plan_signature(const ert_model *m, const ert_session_options *o) {
    uint64_t h = ERT_FNV64_INIT;
    HV(m->n_tensors);
    for (int i = 0; i < m->n_tensors; i++) {
        const ert_tensor *t = &m->tensors[i];
        h = hash_str(h, t->name);
        HV(t->dtype);
        HV(t->role);
        HV(t->ndim);
        H(t->dims, (size_t)(t->ndim > 0 ? t->ndim : 0) * sizeof t->dims[0]);
        int64_t n;
        size_t es = ert_dtype_size(t->dtype);
        if (t->role == ERT_ROLE_WEIGHT && t->data && ert_dims_nelems(t->ndim, t->dims, &n) && es &&
            (uint64_t)n <= SMALL_CONST / es)
            H(t->data, (size_t)n * es);
    }
    HV(m->n_nodes);
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *nd = &m->nodes[i];
        HV(nd->op);
        h = hash_str(h, nd->name);
        HV(nd->n_in);
        H(nd->in, (size_t)nd->n_in * sizeof nd->in[0]);
        HV(nd->n_out);
        H(nd->out, (size_t)nd->n_out * sizeof nd->out[0]);
        HV(nd->n_attrs);
        for (int k = 0; k < nd->n_attrs; k++) {
            const ert_attr_val *a = &nd->attrs[k];
            h = hash_str(h, a->name);
            HV(a->type);
            HV(a->i);
            HV(a->f);
            HV(a->n);
            if (a->ints && a->n > 0) H(a->ints, (size_t)a->n * sizeof a->ints[0]);
            if (a->floats && a->n > 0) H(a->floats, (size_t)a->n * sizeof a->floats[0]);
            h = hash_str(h, a->s);
        }
    }
    H(m->inputs, (size_t)m->n_inputs * sizeof m->inputs[0]);
    H(m->outputs, (size_t)m->n_outputs * sizeof m->outputs[0]);
    HV(o->batch);
    HV(o->flags);
    HV(o->precision);
    HV(o->placement);
    HV(o->create_mode);
    HV(o->device);
    for (int i = 0; i < o->n_input_shapes; i++) {
        h = hash_str(h, o->input_shapes[i].name);
        int nd = o->input_shapes[i].ndim;
        HV(nd);
        if (nd > 0 && nd <= ERT_MAX_DIMS) H(o->input_shapes[i].dims, (size_t)nd * sizeof o->input_shapes[i].dims[0]);
    }
    for (int i = 0; i < o->n_input_values; i++) {
        const ert_input_value *v = &o->input_values[i];
        int64_t n = 1;
        h = hash_str(h, v->name);
        HV(v->dtype);
        HV(v->ndim);
        for (int d = 0; d < v->ndim && d < ERT_MAX_DIMS; d++) {
            HV(v->dims[d]);
            n *= v->dims[d] > 0 ? v->dims[d] : 0;
        }
        size_t bytes = (size_t)n * ert_dtype_size(v->dtype);
        if (v->data && n > 0 && bytes <= SMALL_CONST) H(v->data, bytes);
    }
    return h;
}

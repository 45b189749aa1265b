/* The C graph builder: a thin, checked layer over the model-building helpers
 * (model.c). Ops use ONNX names; the op's own checks run at session create,
 * but arity, ids and names are checked here so mistakes surface where made. */
#include "runtime_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ert_builder {
    ert_context *ctx;
    ert_model *m;
    int n_auto; /* counter for generated names */
};

ert_status ert_builder_create(ert_context *ctx, ert_builder **out) {
    if (!ctx || !out) return ert_set_error(ctx, ERT_E_ARG, "ert_builder_create: NULL argument");
    ert_builder *b = calloc(1, sizeof *b);
    if (!b) return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
    b->ctx = ctx;
    b->m = ert_model_new(ctx);
    if (!b->m) {
        free(b);
        return ERT_E_NOMEM;
    }
    *out = b;
    return ERT_OK;
}

void ert_builder_free(ert_builder *b) {
    if (!b) return;
    ert_model_free(b->m);
    free(b);
}

static ert_status check_ready(ert_builder *b) {
    if (!b) return ERT_E_ARG;
    if (!b->m) return ert_set_error(b->ctx, ERT_E_STATE, "builder already finished");
    return ERT_OK;
}

static ert_status check_new_name(ert_builder *b, const char *name) {
    if (name && ert_model_find_tensor(b->m, name) >= 0)
        return ert_set_error(b->ctx, ERT_E_ARG, "tensor name '%s' is already used", name);
    return ERT_OK;
}

static ert_status check_shape(ert_builder *b, const char *what, ert_dtype dt, int ndim, const int64_t *dims, bool allow_dyn) {
    if (ert_dtype_size(dt) == 0) return ert_set_error(b->ctx, ERT_E_ARG, "%s: invalid dtype %d", what, (int)dt);
    if (ndim < 0 || ndim > ERT_MAX_DIMS || (ndim > 0 && !dims))
        return ert_set_error(b->ctx, ERT_E_ARG, "%s: rank %d outside [0, %d]", what, ndim, ERT_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (dims[i] < (allow_dyn ? -1 : 0))
            return ert_set_error(b->ctx, ERT_E_ARG, "%s: dim %d is %lld", what, i, (long long)dims[i]);
    return ERT_OK;
}

ert_status ert_builder_input(ert_builder *b, const char *name, ert_dtype dtype, int ndim, const int64_t *dims, int32_t *id) {
    ert_status st = check_ready(b);
    if (st) return st;
    if (!name || !id) return ert_set_error(b->ctx, ERT_E_ARG, "ert_builder_input: NULL name or id");
    if ((st = check_new_name(b, name)) || (st = check_shape(b, name, dtype, ndim, dims, true))) return st;
    int32_t t = ert_model_add_tensor(b->m, name, dtype, ERT_ROLE_INPUT, ndim, dims);
    if (t < 0) return ERT_E_NOMEM;
    if ((st = ert_model_add_graph_input(b->m, t))) return st;
    *id = t;
    return ERT_OK;
}

ert_status ert_builder_weight(ert_builder *b, const char *name, ert_dtype dtype, int ndim, const int64_t *dims,
                              const void *data, int32_t *id) {
    ert_status st = check_ready(b);
    if (st) return st;
    if (!data || !id) return ert_set_error(b->ctx, ERT_E_ARG, "ert_builder_weight: NULL data or id");
    char auto_name[32];
    if (!name) {
        snprintf(auto_name, sizeof auto_name, "w%d", b->n_auto++);
        name = auto_name;
    }
    if ((st = check_new_name(b, name)) || (st = check_shape(b, name, dtype, ndim, dims, false))) return st;
    int32_t t = ert_model_add_tensor(b->m, name, dtype, ERT_ROLE_WEIGHT, ndim, dims);
    if (t < 0) return ERT_E_NOMEM;
    size_t nbytes;
    if (!ert_tensor_nbytes(&b->m->tensors[t], &nbytes))
        return ert_set_error(b->ctx, ERT_E_ARG, "weight '%s': size overflows", name);
    void *copy = malloc(nbytes ? nbytes : 1);
    if (!copy) return ert_set_error(b->ctx, ERT_E_NOMEM, "out of memory copying weight '%s'", name);
    memcpy(copy, data, nbytes);
    b->m->tensors[t].data = copy;
    b->m->tensors[t].data_owned = true;
    *id = t;
    return ERT_OK;
}

ert_status ert_builder_node(ert_builder *b, const char *op, const char *name, const int32_t *inputs, int n_in,
                            const ert_attr *attrs, int n_attrs, int32_t *outputs, int n_out) {
    ert_status st = check_ready(b);
    if (st) return st;
    const ert_op_def *def = ert_op_find(op);
    if (!def) return ert_set_error(b->ctx, ERT_E_UNSUPPORTED, "unknown op '%s'", op ? op : "(null)");
    if ((n_in && !inputs) || (n_out && !outputs) || (n_attrs && !attrs) || n_in < 0 || n_out < 0 || n_attrs < 0)
        return ert_set_error(b->ctx, ERT_E_ARG, "%s: NULL array or negative count", op);
    char auto_name[48];
    if (!name) {
        snprintf(auto_name, sizeof auto_name, "%s_%d", op, b->n_auto++);
        name = auto_name;
    }
    for (int i = 0; i < n_in; i++)
        if (inputs[i] < -1 || inputs[i] >= b->m->n_tensors)
            return ert_set_error(b->ctx, ERT_E_ARG, "node '%s' (%s): input %d is id %d, not a tensor", name, op, i, inputs[i]);
    if (n_out > 4096) return ert_set_error(b->ctx, ERT_E_ARG, "node '%s': %d outputs", name, n_out);
    int32_t outs[4096];
    int first = b->m->n_tensors;
    for (int i = 0; i < n_out; i++) {
        char oname[300];
        snprintf(oname, sizeof oname, n_out == 1 ? "%s" : "%s:%d", name, i);
        if (ert_model_find_tensor(b->m, oname) >= 0) snprintf(oname, sizeof oname, "%s:%d#%d", name, i, b->n_auto++);
        outs[i] = ert_model_add_tensor(b->m, oname, ERT_DTYPE_UNDEFINED, ERT_ROLE_ACTIVATION, 0, NULL);
        if (outs[i] < 0) return ERT_E_NOMEM;
    }
    st = ert_model_add_node(b->m, def->op, name, inputs, n_in, outs, n_out, attrs, n_attrs);
    if (st) {
        /* drop the output tensors just added (they are the last ones) */
        while (b->m->n_tensors > first) free(b->m->tensors[--b->m->n_tensors].name);
        return st;
    }
    for (int i = 0; i < n_out; i++) outputs[i] = outs[i];
    return ERT_OK;
}

ert_status ert_builder_output(ert_builder *b, int32_t id, const char *name) {
    ert_status st = check_ready(b);
    if (st) return st;
    if (id < 0 || id >= b->m->n_tensors) return ert_set_error(b->ctx, ERT_E_ARG, "output: id %d is not a tensor", id);
    if (name && strcmp(name, b->m->tensors[id].name) != 0) {
        if ((st = check_new_name(b, name))) return st;
        /* renaming keeps the index valid; rebuild the hash via a fresh tensor-name copy */
        size_t n = strlen(name) + 1;
        char *nm = malloc(n);
        if (!nm) return ert_set_error(b->ctx, ERT_E_NOMEM, "out of memory");
        memcpy(nm, name, n);
        free(b->m->tensors[id].name);
        b->m->tensors[id].name = nm;
        ert_model_reindex(b->m);
    }
    return ert_model_add_graph_output(b->m, id);
}

/* Give graph outputs a dtype and shape, so the model can be described without
 * a session: infer at batch 1 and 2; dims that differ are dynamic (-1). A graph
 * that cannot be inferred yet (e.g. other dynamic dims) keeps UNDEFINED
 * outputs; the failure surfaces, with its message, at session create. */
static void infer_outputs(ert_model *m) {
    char saved[ERT_ERRMSG_SIZE];
    memcpy(saved, m->ctx->err, sizeof saved);
    ert_log_fn log = m->ctx->log;
    m->ctx->log = NULL; /* a failed attempt here is not an error of the caller */
    ert_tensor_info *a = calloc((size_t)m->n_outputs, sizeof *a), *c = calloc((size_t)m->n_outputs, sizeof *c);
    if (a && c && ert_session_output_shapes(m, 1, a) == ERT_OK && ert_session_output_shapes(m, 2, c) == ERT_OK) {
        for (int i = 0; i < m->n_outputs; i++) {
            ert_tensor *t = &m->tensors[m->outputs[i]];
            if (t->role == ERT_ROLE_INPUT || t->role == ERT_ROLE_WEIGHT) continue;
            t->dtype = a[i].dtype;
            t->ndim = a[i].ndim;
            for (int k = 0; k < a[i].ndim; k++) t->dims[k] = a[i].dims[k] == c[i].dims[k] ? a[i].dims[k] : -1;
        }
    }
    free(a);
    free(c);
    m->ctx->log = log;
    memcpy(m->ctx->err, saved, sizeof saved);
}

ert_status ert_builder_finish(ert_builder *b, ert_model **out) {
    ert_status st = check_ready(b);
    if (st) return st;
    if (!out) return ert_set_error(b->ctx, ERT_E_ARG, "ert_builder_finish: NULL out");
    if (b->m->n_outputs == 0) return ert_set_error(b->ctx, ERT_E_FORMAT, "graph has no outputs (ert_builder_output)");
    if ((st = ert_model_validate(b->m))) return st;
    infer_outputs(b->m);
    *out = b->m;
    b->m = NULL;
    return ERT_OK;
}

/* ------------------------------------------------------------------ wrappers */

ert_status ert_builder_conv2d(ert_builder *b, int32_t x, int32_t w, int32_t bias, int stride, int pad, int dilation,
                              int group, int32_t *y) {
    int64_t s[2] = {stride, stride}, p[4] = {pad, pad, pad, pad}, d[2] = {dilation, dilation};
    ert_attr at[4] = {ERT_ATTR_IS("strides", s, 2), ERT_ATTR_IS("pads", p, 4), ERT_ATTR_IS("dilations", d, 2),
                      ERT_ATTR_I("group", group)};
    int32_t in[3] = {x, w, bias};
    return ert_builder_node(b, "Conv", NULL, in, bias >= 0 ? 3 : 2, at, 4, y, 1);
}

ert_status ert_builder_linear(ert_builder *b, int32_t x, int32_t w, int32_t bias, int32_t *y) {
    ert_attr at[1] = {ERT_ATTR_I("transB", 1)};
    int32_t in[3] = {x, w, bias};
    return ert_builder_node(b, "Gemm", NULL, in, bias >= 0 ? 3 : 2, at, 1, y, 1);
}

ert_status ert_builder_unary(ert_builder *b, const char *op, int32_t x, int32_t *y) {
    return ert_builder_node(b, op, NULL, &x, 1, NULL, 0, y, 1);
}

ert_status ert_builder_binary(ert_builder *b, const char *op, int32_t a, int32_t c, int32_t *y) {
    int32_t in[2] = {a, c};
    return ert_builder_node(b, op, NULL, in, 2, NULL, 0, y, 1);
}

ert_status ert_builder_maxpool2d(ert_builder *b, int32_t x, int kernel, int stride, int pad, int32_t *y) {
    int64_t k[2] = {kernel, kernel}, s[2] = {stride, stride}, p[4] = {pad, pad, pad, pad};
    ert_attr at[3] = {ERT_ATTR_IS("kernel_shape", k, 2), ERT_ATTR_IS("strides", s, 2), ERT_ATTR_IS("pads", p, 4)};
    return ert_builder_node(b, "MaxPool", NULL, &x, 1, at, 3, y, 1);
}

/* Helpers of the working graph shared by session and trainer (graph.h). */
#include "graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ert_graph_nbytes(ert_dtype dt, int ndim, const int64_t *dims, size_t *out) {
    ert_tensor tmp = {.dtype = dt, .ndim = ndim};
    memcpy(tmp.dims, dims, sizeof tmp.dims);
    return ert_tensor_nbytes(&tmp, out);
}

void ert_graph_view(ert_tview *v, ert_dtype dt, int ndim, const int64_t *dims, void *data) {
    memset(v, 0, sizeof *v);
    v->data = data;
    v->dtype = dt;
    v->ndim = ndim;
    memcpy(v->dims, dims, sizeof v->dims);
    int64_t ne = 0;
    ert_dims_nelems(ndim, dims, &ne);
    v->n_elems = ne;
}

const char *ert_graph_op_name(ert_op op) {
    const ert_op_def *d = ert_op_get(op);
    return d ? d->name : "?";
}

ert_status ert_graph_cpu_run(const ert_kargs *a) {
    ert_kargs *one = (ert_kargs *)a; /* run() takes the schedule's array type; it does not write */
    int failed = 0;
    return ert_cpu_backend.run(NULL, &one, 1, &failed);
}

ert_status ert_graph_fold(ert_context *ctx, const char *name, ert_op op, const ert_op_params *params, int n_in,
                          int n_out, ert_tview *v, size_t ws_bytes) {
    void *ws = NULL;
    if (ws_bytes && !(ws = aligned_alloc(64, ert_align_up(ws_bytes, 64))))
        return ert_set_error(ctx, ERT_E_NOMEM, "node '%s': out of memory folding constants", name);
    ert_kargs a = {.op = op, .params = params, .n_in = n_in, .n_out = n_out, .in = v, .out = v + n_in,
                   .workspace = ws, .workspace_bytes = ws_bytes, .name = name};
    if (ctx) ctx->err[0] = 0;
    ert_status st = ert_graph_cpu_run(&a);
    free(ws);
    if (st != ERT_OK && (!ctx || !ctx->err[0] || st == ERT_E_UNSUPPORTED))
        ert_set_error(ctx, st, "node '%s' (%s): constant folding failed", name, ert_graph_op_name(op));
    return st;
}

ert_status ert_graph_check_input_shapes(ert_context *ctx, const ert_model *m, const ert_session_options *o) {
    for (int k = 0; k < o->n_input_shapes; k++) {
        const ert_input_shape *is = &o->input_shapes[k];
        int found = 0;
        for (int i = 0; i < m->n_inputs; i++)
            if (is->name && strcmp(m->tensors[m->inputs[i]].name, is->name) == 0) found = 1;
        if (!found) return ert_set_error(ctx, ERT_E_NOT_FOUND, "input_shapes[%d]: the model has no input '%s'", k,
                                         is->name ? is->name : "(null)");
    }
    return ERT_OK;
}

ert_status ert_graph_input_dims(ert_context *ctx, const ert_session_options *o, const char *name, int ndim,
                                int64_t *dims) {
    int64_t batch = o->batch > 0 ? o->batch : 1;
    const ert_input_shape *is = NULL;
    for (int k = 0; k < o->n_input_shapes; k++)
        if (o->input_shapes[k].name && strcmp(o->input_shapes[k].name, name) == 0) is = &o->input_shapes[k];
    if (is) {
        if (is->ndim != ndim)
            return ert_set_error(ctx, ERT_E_SHAPE, "input '%s': given rank %d, the model says %d", name, is->ndim, ndim);
        for (int d = 0; d < ndim; d++) {
            if (is->dims[d] < 0 || (dims[d] >= 0 && dims[d] != is->dims[d]))
                return ert_set_error(ctx, ERT_E_SHAPE, "input '%s': dim %d given as %lld, the model says %lld", name, d,
                                     (long long)is->dims[d], (long long)dims[d]);
            dims[d] = is->dims[d];
        }
        return ERT_OK;
    }
    for (int d = 0; d < ndim; d++) {
        if (dims[d] >= 0) continue;
        if (d != 0)
            return ert_set_error(ctx, ERT_E_SHAPE,
                                 "input '%s': dim %d is dynamic; give its shape in ert_session_options.input_shapes",
                                 name, d);
        dims[d] = batch;
    }
    return ERT_OK;
}

ert_status ert_graph_check_node_io(ert_context *ctx, const ert_node *mn) {
    if (mn->n_in <= ERT_GRAPH_MAX_IO && mn->n_out <= ERT_GRAPH_MAX_IO) return ERT_OK;
    return ert_set_error(ctx, ERT_E_UNSUPPORTED, "node '%s' (%s): more than %d inputs or outputs", mn->name,
                         ert_graph_op_name(mn->op), ERT_GRAPH_MAX_IO);
}

void ert_graph_tinfo(ert_tinfo *ti, ert_dtype dt, int ndim, const int64_t *dims, const void *const_data) {
    memset(ti, 0, sizeof *ti);
    ti->dtype = dt;
    ti->ndim = ndim;
    memcpy(ti->dims, dims, sizeof ti->dims);
    ti->const_data = const_data;
}

ert_status ert_graph_prepare(ert_context *ctx, const ert_node *mn, int n_threads, const ert_tinfo *in, ert_tinfo *out,
                             ert_op_params *params, size_t *ws_bytes, bool *fold_ok) {
    for (int k = 0; k < mn->n_out; k++) memset(&out[k], 0, sizeof out[k]);
    ert_prep p = {.ctx = ctx, .node = mn, .n_in = mn->n_in, .n_out = mn->n_out, .in = in, .out = out,
                  .params = params, .n_threads = n_threads, .fold_ok = true,
                  .gemm_workspace = ert_cpu_backend.gemm_workspace};
    ctx->err[0] = 0;
    ert_status st = ert_op_get(mn->op)->prepare(&p);
    if (st != ERT_OK) {
        char msg[ERT_ERRMSG_SIZE];
        snprintf(msg, sizeof msg, "%s", ert_last_error(ctx));
        return ert_set_error(ctx, st, "node '%s' (%s): %s", mn->name, ert_graph_op_name(mn->op), msg);
    }
    *ws_bytes = p.workspace_bytes;
    *fold_ok = p.fold_ok;
    return ERT_OK;
}

ert_status ert_graph_arena(ert_context *ctx, const ert_backend *be, void *bctx, const ert_session_options *o,
                           size_t total, const char *parts, uint8_t **arena, size_t *bytes, bool *owned) {
    if (o->arena) {
        if ((uintptr_t)o->arena % ERT_HOST_ALIGN)
            return ert_set_error(ctx, ERT_E_ARG, "arena must be %d-byte aligned", ERT_HOST_ALIGN);
        if (o->arena_bytes < total)
            return ert_set_error(ctx, ERT_E_ARENA, "arena too small: %zu bytes given, %zu needed (%s)", o->arena_bytes,
                                 total, parts);
        *arena = o->arena;
        *bytes = o->arena_bytes;
        *owned = false;
        return ERT_OK;
    }
    void *p = NULL;
    ert_status st = ERT_E_NOMEM;
    ctx->err[0] = 0; /* a backend that fails without a message leaves it empty */
    if (be) st = be->arena_alloc(bctx, total, &p);
    else if ((p = aligned_alloc(ERT_ALIGN, ert_align_up(total ? total : 1, ERT_ALIGN)))) st = ERT_OK;
    if (st != ERT_OK) {
        char why[ERT_ERRMSG_SIZE / 2]; /* the backend's reason, kept: ert_set_error overwrites it */
        snprintf(why, sizeof why, "%.200s", ctx->err[0] ? ctx->err : "out of memory");
        return ert_set_error(ctx, st, "cannot allocate the %zu-byte arena on %s (%s): %s", total,
                             be ? be->name : "cpu", parts, why);
    }
    *arena = p;
    *bytes = total;
    *owned = true;
    return ERT_OK;
}

bool ert_graph_is_copy_op(ert_op op) {
    return op == ERT_OP_IDENTITY || op == ERT_OP_DROPOUT || op == ERT_OP_FLATTEN || op == ERT_OP_RESHAPE ||
           op == ERT_OP_SQUEEZE || op == ERT_OP_UNSQUEEZE;
}

bool ert_graph_nhwc_op_ok(ert_op op, const ert_op_params *p) {
    switch (op) {
    case ERT_OP_CONV:
        if (p->conv.nsp != 2) return false;
        for (int i = 0; i < 2; i++)
            if (p->conv.pad_begin[i] != p->conv.pad_end[i]) return false; /* cuDNN's condition; the rest is slow anyway */
        return true;
    case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL: return p->pool.nsp == 2;
    case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_GLOBAL_MAXPOOL: return true;
    default: return false;
    }
}

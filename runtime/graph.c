/* Helpers of the working graph shared by session and trainer (graph.h). */
#include "graph.h"

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

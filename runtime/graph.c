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

ert_status ert_graph_fold(ert_context *ctx, const ert_kernel_choice *kc, const char *name, ert_op op,
                          const ert_op_params *params, int n_in, int n_out, ert_tview *v, size_t ws_bytes) {
    void *ws = NULL;
    if (ws_bytes && !(ws = aligned_alloc(64, ert_align_up(ws_bytes, 64))))
        return ert_set_error(ctx, ERT_E_NOMEM, "node '%s': out of memory folding constants", name);
    ert_kargs a = {.op = op, .params = params, .n_in = n_in, .n_out = n_out, .in = v, .out = v + n_in,
                   .workspace = ws, .workspace_bytes = ws_bytes, .name = name, .choice = kc};
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

/* ------------------------------------------------------------------ building */

ert_status ert_graph_oom(ert_graph *g) {
    return ert_set_error(g->ctx, ERT_E_NOMEM, "out of memory creating the %s", g->what ? g->what : "graph");
}

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int32_t ert_graph_add_tensor(ert_graph *g, const char *name) {
    if (g->nt == g->cap_t) {
        int cap = g->cap_t ? g->cap_t * 2 : 64;
        ert_gtensor *t = realloc(g->t, (size_t)cap * sizeof *t);
        if (!t) return -1;
        g->t = t;
        g->cap_t = cap;
    }
    ert_gtensor *x = &g->t[g->nt];
    memset(x, 0, sizeof *x);
    x->name = name;
    x->model_id = -1;
    x->alias = -1;
    x->block = -1;
    x->first = x->last = -1;
    return g->nt++;
}

/* dims may point into g->t (another tensor's shape), which adding a tensor
 * can move: both creators (tensor, constant) copy dims first. */
int32_t ert_graph_new_tensor(ert_graph *g, const char *name, ert_dtype dt, int ndim, const int64_t *dims) {
    int64_t d[ERT_MAX_DIMS];
    if (ndim) memcpy(d, dims, (size_t)ndim * sizeof *dims);
    char *nm = dupstr(name ? name : "?");
    if (!nm) return -1;
    int32_t id = ert_graph_add_tensor(g, nm);
    if (id < 0) {
        free(nm);
        return -1;
    }
    ert_gtensor *x = &g->t[id];
    x->name_owned = nm;
    x->dtype = x->orig_dtype = dt;
    x->ndim = ndim;
    if (ndim) memcpy(x->dims, d, (size_t)ndim * sizeof *d);
    x->defined = true;
    ert_graph_set_nbytes(x);
    return id;
}

ert_status ert_graph_new_const(ert_graph *g, const char *name, ert_dtype dt, int ndim, const int64_t *dims, void *owned,
                               int32_t *id) {
    int64_t d[ERT_MAX_DIMS];
    if (ndim) memcpy(d, dims, (size_t)ndim * sizeof *dims);
    int32_t c = ert_graph_add_tensor(g, name);
    if (c < 0) {
        free(owned);
        return ert_graph_oom(g);
    }
    ert_gtensor *x = &g->t[c];
    x->dtype = x->orig_dtype = dt;
    x->ndim = ndim;
    if (ndim) memcpy(x->dims, d, (size_t)ndim * sizeof *d);
    x->defined = true;
    x->mem = ERT_MEM_OWNED;
    x->owned = owned;
    x->cdata = owned;
    ert_graph_set_nbytes(x);
    *id = c;
    return ERT_OK;
}

ert_gnode *ert_graph_add_node(ert_graph *g, ert_op op, const ert_node *src, const char *name, int n_in, int n_out) {
    if (g->nn == g->cap_n) {
        int cap = g->cap_n ? g->cap_n * 2 : 64;
        ert_gnode *n = realloc(g->n, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        g->n = n;
        g->cap_n = cap;
    }
    ert_gnode *n = &g->n[g->nn];
    memset(n, 0, sizeof *n);
    n->in = malloc((size_t)(n_in + ERT_GRAPH_EXTRA_IN + n_out) * sizeof(int32_t));
    if (!n->in) return NULL;
    for (int k = 0; k < n_in + ERT_GRAPH_EXTRA_IN + n_out; k++) n->in[k] = -1;
    n->out = n->in + n_in + ERT_GRAPH_EXTRA_IN;
    n->op = op;
    n->src = src;
    n->name = name ? name : "?";
    n->n_in = n_in;
    n->n_out = n_out;
    n->ws_block = -1;
    g->nn++;
    return n;
}

ert_gnode *ert_graph_new_node(ert_graph *g, ert_op op, const char *name, int n_in, int n_out, int phase) {
    char *nm = name ? dupstr(name) : NULL;
    if (name && !nm) return NULL;
    ert_gnode *n = ert_graph_add_node(g, op, NULL, nm, n_in, n_out);
    if (!n) {
        free(nm);
        return NULL;
    }
    n->name_owned = nm;
    n->phase = phase;
    return n;
}

void ert_graph_release(ert_graph *g) {
    for (int i = 0; i < g->nt; i++) {
        free(g->t[i].owned);
        free(g->t[i].name_owned);
    }
    for (int i = 0; i < g->nn; i++) {
        free(g->n[i].in);
        free(g->n[i].name_owned);
        free(g->n[i].views);
    }
    free(g->t);
    free(g->n);
    free(g->inputs);
    free(g->outputs);
    free(g->blocks);
    memset(g, 0, sizeof *g);
}

bool ert_graph_set_nbytes(ert_gtensor *x) { return ert_graph_nbytes(x->dtype, x->ndim, x->dims, &x->nbytes); }

void ert_graph_fill_view(ert_tview *v, const ert_gtensor *x, void *data) {
    ert_graph_view(v, x->dtype, x->ndim, x->dims, data);
}

bool ert_graph_is_float16ish(ert_dtype d) { return d == ERT_DTYPE_F16 || d == ERT_DTYPE_BF16; }

bool ert_graph_is_imm(const ert_gtensor *x) { return x->mem == ERT_MEM_CONST || x->mem == ERT_MEM_OWNED; }

bool ert_graph_is_const(const ert_graph *g, int32_t t) { return t >= 0 && ert_graph_is_imm(&g->t[t]); }

bool ert_graph_is_output(const ert_graph *g, int32_t t) {
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == t) return true;
    return false;
}

bool ert_graph_is_io(const ert_graph *g, int32_t t) {
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] == t) return true;
    return ert_graph_is_output(g, t);
}

void ert_graph_count_uses(ert_graph *g, int32_t *producer) {
    for (int i = 0; i < g->nt; i++) {
        g->t[i].n_uses = 0;
        if (producer) producer[i] = -1;
    }
    for (int i = 0; i < g->nn; i++) {
        const ert_gnode *n = &g->n[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) g->t[n->in[k]].n_uses++;
        if (producer)
            for (int k = 0; k < n->n_out; k++)
                if (n->out[k] >= 0) producer[n->out[k]] = i;
    }
}

ert_status ert_graph_fold_node(ert_graph *g, ert_gnode *n) {
    ert_tview views[2 * ERT_MAX_NODE_IO];
    ert_tview *v = n->n_in + n->n_out <= 2 * ERT_MAX_NODE_IO ? views : malloc((size_t)(n->n_in + n->n_out) * sizeof *v);
    if (!v) return ert_graph_oom(g);
    ert_status st = ERT_OK;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) memset(&v[k], 0, sizeof v[k]);
        else ert_graph_fill_view(&v[k], &g->t[n->in[k]], (void *)g->t[n->in[k]].cdata);
    }
    for (int k = 0; k < n->n_out; k++) {
        ert_gtensor *x = &g->t[n->out[k]];
        x->owned = malloc(x->nbytes ? x->nbytes : 1);
        if (!x->owned) {
            st = ert_graph_oom(g);
            goto done;
        }
        ert_graph_fill_view(&v[n->n_in + k], x, x->owned);
    }
    st = ert_graph_fold(g->ctx, &g->kc, n->name, n->op, &n->params, n->n_in, n->n_out, v, n->ws_bytes);
    if (st != ERT_OK) goto done;
    for (int k = 0; k < n->n_out; k++) {
        ert_gtensor *x = &g->t[n->out[k]];
        x->mem = ERT_MEM_OWNED;
        x->cdata = x->owned;
    }
done:
    if (v != views) free(v);
    return st;
}

/* ------------------------------------------------------------------ planning */

#define SCHED(k) (sched ? sched[k] : (k))

void ert_graph_lifetimes(ert_graph *g, const int32_t *sched, int n_sched) {
    for (int i = 0; i < g->nt; i++) {
        ert_gtensor *x = &g->t[i];
        if (x->mem == ERT_MEM_NONE) x->mem = ERT_MEM_ACT;
        x->first = x->last = -1;
    }
    for (int k = 0; k < n_sched; k++) {
        const ert_gnode *n = &g->n[SCHED(k)];
        for (int j = 0; j < n->n_out; j++) {
            if (n->out[j] < 0) continue;
            ert_gtensor *x = &g->t[n->out[j]];
            if (x->first < 0) x->first = k;
            if (x->last < k) x->last = k; /* an unused output still needs a home at its step */
        }
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && g->t[n->in[j]].last < k) g->t[n->in[j]].last = k;
    }
}

int32_t ert_graph_root(const ert_graph *g, int32_t t) {
    while (g->t[t].alias >= 0) t = g->t[t].alias;
    return t;
}

void ert_graph_alias_copies(ert_graph *g, const int32_t *sched, int n_sched) {
    for (int k = 0; k < n_sched; k++) {
        const ert_gnode *n = &g->n[SCHED(k)];
        if (!ert_graph_is_copy_op(n->op) || n->n_out < 1 || n->in[0] < 0 || n->out[0] < 0) continue;
        bool others = false; /* a Dropout's mask: output 0 then keeps its own storage */
        for (int j = 1; j < n->n_out; j++) others = others || n->out[j] >= 0;
        if (others) continue;
        ert_gtensor *in = &g->t[n->in[0]], *out = &g->t[n->out[0]];
        if (in->mem != ERT_MEM_ACT || out->mem != ERT_MEM_ACT || in->last != k || in->nbytes != out->nbytes) continue;
        int32_t r = ert_graph_root(g, n->in[0]);
        out->alias = r;
        if (out->last > g->t[r].last) g->t[r].last = out->last;
    }
}

void ert_graph_alias_extend(ert_graph *g) {
    for (int i = 0; i < g->nt; i++) {
        if (g->t[i].alias < 0) continue;
        int32_t r = ert_graph_root(g, i);
        if (g->t[i].last > g->t[r].last) g->t[r].last = g->t[i].last;
        if (g->t[i].first >= 0 && g->t[i].first < g->t[r].first) g->t[r].first = g->t[i].first;
    }
}

/* Product of t's dims before axis (1: the parts along axis are contiguous
 * blocks side by side). */
static int64_t outer_of(const ert_gtensor *t, int64_t axis) {
    int64_t o = 1;
    for (int64_t d = 0; d < axis && d < t->ndim; d++) o *= t->dims[d];
    return o;
}

/* Tensor t may become a view at byte offset off: a planned activation that
 * owns its storage, written by a scheduled node, offset aligned for every
 * kernel (cuDNN/cuBLAS want 16 bytes; ERT_ALIGN is more). */
static bool view_ok(const ert_gtensor *t, size_t off) {
    return t->mem == ERT_MEM_ACT && t->alias < 0 && t->first >= 0 && off % ERT_ALIGN == 0;
}

/* A Slice of x whose output y is one contiguous run of x's bytes: every
 * axis before the last one it cuts keeps one element, that axis is cut
 * with step 1 and every axis after it is whole (at batch 1: a channel range
 * of NCHW, a row range of NHWC, a Swin window roll along H, a no-op crop).
 * *off: the run's byte offset in x. */
static bool slice_run(const ert_gtensor *x, const ert_gtensor *y, const ert_slice_params *p, size_t *off) {
    if (x->ndim != y->ndim || x->ndim < 1 || x->dtype != y->dtype || y->nbytes == 0) return false;
    int cut = -1; /* the last axis y does not take whole */
    for (int d = 0; d < x->ndim; d++) {
        if (y->dims[d] < 1 || y->dims[d] > x->dims[d]) return false;
        if (y->dims[d] != x->dims[d] || p->start[d] != 0) cut = d;
        if (y->dims[d] > 1 && p->step[d] != 1) return false;
    }
    int64_t e = 0, stride = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (d < cut && y->dims[d] != 1) return false;
        if (p->start[d] < 0 || p->start[d] + y->dims[d] > x->dims[d]) return false;
        e += p->start[d] * stride;
        stride *= x->dims[d];
    }
    *off = (size_t)e * ert_dtype_size(x->dtype);
    return true;
}

/* Layout ops as views. With every dim before the axis of size 1 (batch 1
 * and a channel axis, NCHW), a Concat's output is its inputs side by side:
 * each input is planned as a slice of the output (its producer writes
 * there) and the Concat is elided; a Split's outputs are slices of its
 * input and the Split is elided. A Slice whose output is one contiguous
 * run of its input (slice_run) is that run and is elided. Channels-last
 * tensors (axis last, H*W outer) and misaligned slices keep their copies. */
void ert_graph_plan_views(ert_graph *g, const int32_t *sched, int n_sched) {
    for (int k = 0; k < n_sched; k++) {
        ert_gnode *n = &g->n[SCHED(k)];
        if (n->op == ERT_OP_SLICE && n->n_in >= 1 && n->n_out == 1 && n->in[0] >= 0 && n->out[0] >= 0 &&
            n->in[0] != n->out[0]) {
            ert_gtensor *x = &g->t[n->in[0]], *y = &g->t[n->out[0]];
            size_t off;
            if (x->mem != ERT_MEM_ACT || !slice_run(x, y, &n->params.slice, &off) || !view_ok(y, off)) continue;
            y->alias = n->in[0];
            y->alias_off = off;
            if (y->last > x->last) x->last = y->last;
            n->elided = true;
        } else if (n->op == ERT_OP_CONCAT && n->n_out == 1 && n->n_in > 1) {
            ert_gtensor *o = &g->t[n->out[0]];
            if (o->mem != ERT_MEM_ACT || o->alias >= 0 || outer_of(o, n->params.axis.axis) != 1) continue;
            bool ok = true;
            size_t off = 0;
            for (int j = 0; ok && j < n->n_in; j++) {
                int32_t u = n->in[j];
                ok = u >= 0 && u != n->out[0] && view_ok(&g->t[u], off) && g->t[u].dtype == o->dtype;
                for (int i = 0; ok && i < j; i++) ok = n->in[i] != u;
                if (ok) off += g->t[u].nbytes;
            }
            if (!ok || off != o->nbytes) continue;
            off = 0;
            for (int j = 0; j < n->n_in; j++) {
                ert_gtensor *u = &g->t[n->in[j]];
                u->alias = n->out[0];
                u->alias_off = off;
                off += u->nbytes;
                if (u->first < o->first) o->first = u->first;
                if (u->last > o->last) o->last = u->last;
            }
            n->elided = true;
        } else if (n->op == ERT_OP_SPLIT && n->n_in >= 1 && n->n_out > 1) {
            ert_gtensor *x = &g->t[n->in[0]];
            if (x->mem != ERT_MEM_ACT || outer_of(x, n->params.split.axis) != 1) continue;
            bool ok = true;
            size_t off = 0;
            for (int j = 0; ok && j < n->n_out; j++) {
                int32_t y = n->out[j];
                ok = y >= 0 && y != n->in[0] && view_ok(&g->t[y], off) && g->t[y].dtype == x->dtype;
                if (ok) off += g->t[y].nbytes;
            }
            if (!ok || off != x->nbytes) continue;
            off = 0;
            for (int j = 0; j < n->n_out; j++) {
                ert_gtensor *y = &g->t[n->out[j]];
                y->alias = n->in[0];
                y->alias_off = off;
                off += y->nbytes;
                if (y->last > x->last) x->last = y->last;
            }
            n->elided = true;
        }
    }
}

ert_status ert_graph_plan_blocks(ert_graph *g, const int32_t *sched, int n_sched, size_t *peak, size_t *lb,
                                 size_t *ws_max) {
    int nb = 0;
    for (int i = 0; i < g->nt; i++)
        if (g->t[i].mem == ERT_MEM_ACT && g->t[i].alias < 0 && g->t[i].first >= 0) nb++;
    for (int k = 0; k < n_sched; k++)
        if (g->n[SCHED(k)].ws_bytes) nb++;
    free(g->blocks);
    g->blocks = calloc((size_t)(nb ? nb : 1), sizeof *g->blocks);
    if (!g->blocks) return ert_graph_oom(g);
    nb = 0;
    for (int i = 0; i < g->nt; i++) {
        ert_gtensor *x = &g->t[i];
        if (x->mem != ERT_MEM_ACT || x->alias >= 0 || x->first < 0) continue;
        x->block = nb;
        g->blocks[nb++] = (ert_plan_block){.size = x->nbytes ? x->nbytes : 1, .first = x->first, .last = x->last};
    }
    *ws_max = 0;
    for (int k = 0; k < n_sched; k++) {
        ert_gnode *n = &g->n[SCHED(k)];
        if (!n->ws_bytes) continue;
        if (n->ws_bytes == SIZE_MAX) return ert_set_error(g->ctx, ERT_E_SHAPE, "node '%s': workspace overflows", n->name);
        n->ws_block = nb;
        g->blocks[nb++] = (ert_plan_block){.size = n->ws_bytes, .first = k, .last = k};
        if (n->ws_bytes > *ws_max) *ws_max = n->ws_bytes;
    }
    g->n_blocks = nb;
    ert_status st = ert_plan_offsets(g->blocks, nb, ERT_ALIGN, peak, lb);
    if (st) return st == ERT_E_NOMEM ? ert_graph_oom(g) : ert_set_error(g->ctx, st, "activation sizes overflow");
    return ERT_OK;
}

void *ert_graph_alias_data(const ert_graph *g, int32_t t) {
    size_t off = 0;
    while (g->t[t].alias >= 0) {
        off += g->t[t].alias_off;
        t = g->t[t].alias;
    }
    return g->t[t].data ? (char *)g->t[t].data + off : NULL;
}

void ert_graph_resolve_aliases(ert_graph *g) {
    for (int i = 0; i < g->nt; i++)
        if (g->t[i].mem == ERT_MEM_ACT && g->t[i].alias >= 0) g->t[i].data = ert_graph_alias_data(g, i);
}

/* Views of n's operands on data (NULL: shapes only) or on their storage. */
static void node_views(const ert_graph *g, const ert_gnode *n, ert_tview *v, bool storage) {
    for (int j = 0; j < n->n_in; j++) {
        memset(&v[j], 0, sizeof v[j]);
        if (n->in[j] >= 0) ert_graph_fill_view(&v[j], &g->t[n->in[j]], storage ? g->t[n->in[j]].data : NULL);
    }
    for (int j = 0; j < n->n_out; j++) {
        memset(&v[n->n_in + j], 0, sizeof v[n->n_in + j]);
        if (n->out[j] >= 0)
            ert_graph_fill_view(&v[n->n_in + j], &g->t[n->out[j]], storage ? g->t[n->out[j]].data : NULL);
    }
}

bool ert_graph_shape_args(const ert_graph *g, const ert_gnode *n, ert_tview *v, int cap, ert_kargs *a) {
    if (n->n_in + n->n_out > cap) return false;
    node_views(g, n, v, false);
    *a = (ert_kargs){.op = n->op, .params = &n->params, .n_in = n->n_in, .n_out = n->n_out, .in = v,
                     .out = v + n->n_in, .name = n->name, .choice = &g->kc, .n_threads = g->n_threads};
    return true;
}

ert_status ert_graph_node_args(ert_graph *g, ert_gnode *n, struct ert_threadpool *pool, uint8_t *abase) {
    n->views = calloc((size_t)(n->n_in + n->n_out + 1), sizeof *n->views);
    if (!n->views) return ert_graph_oom(g);
    node_views(g, n, n->views, true);
    n->args = (ert_kargs){.op = n->op, .params = &n->params, .n_in = n->n_in, .n_out = n->n_out, .in = n->views,
                          .out = n->views + n->n_in, .pool = pool, .name = n->name, .choice = &g->kc,
                          .workspace = n->ws_block >= 0 ? abase + g->blocks[n->ws_block].offset : NULL,
                          .workspace_bytes = n->ws_bytes, .n_threads = g->n_threads};
    return ERT_OK;
}

bool ert_graph_plan_check(const ert_graph *g, const uint8_t *arena, size_t bytes, char *why, size_t cap) {
    if (!ert_plan_check(g->blocks, g->n_blocks, why, cap)) return false;
    for (int i = 0; i < g->nt; i++) {
        const ert_gtensor *x = &g->t[i];
        if (!x->data || x->mem == ERT_MEM_CONST) continue;
        const uint8_t *p = x->data;
        if (p < arena || p + x->nbytes > arena + bytes) {
            snprintf(why, cap, "tensor '%s' [%p,+%zu) outside the arena", x->name, x->data, x->nbytes);
            return false;
        }
    }
    return true;
}

bool ert_graph_view_check(const ert_graph *g, char *why, size_t cap) {
    for (int i = 0; i < g->nt; i++) {
        const ert_gtensor *x = &g->t[i];
        if (x->mem != ERT_MEM_ACT || x->alias < 0 || !x->data || x->first < 0) continue;
        const ert_gtensor *r = &g->t[ert_graph_root(g, i)];
        const uint8_t *p = x->data, *q = r->data;
        if (!q || p < q || p + x->nbytes > q + r->nbytes) {
            snprintf(why, cap, "view '%s' [%p,+%zu) is not inside '%s' [%p,+%zu)", x->name, x->data, x->nbytes,
                     r->name, r->data, r->nbytes);
            return false;
        }
    }
    for (int i = 0; i < g->nt; i++) {
        const ert_gtensor *a = &g->t[i];
        if (a->mem != ERT_MEM_ACT || !a->data || a->first < 0) continue;
        int32_t ra = ert_graph_root(g, i);
        for (int j = i + 1; j < g->nt; j++) {
            const ert_gtensor *b = &g->t[j];
            if (b->mem != ERT_MEM_ACT || !b->data || b->first < 0) continue;
            int32_t rb = ert_graph_root(g, j);
            if (ra == rb) continue;
            const uint8_t *pa = a->data, *pb = b->data;
            bool mem = pa < pb + b->nbytes && pb < pa + a->nbytes;
            bool time = g->t[ra].first <= g->t[rb].last && g->t[rb].first <= g->t[ra].last;
            if (mem && time) {
                snprintf(why, cap, "'%s' and '%s' share bytes while both live and neither is a view of the other",
                         a->name, b->name);
                return false;
            }
        }
    }
    return true;
}

/* ------------------------------------------------------------------ create steps 1-3 */

ert_status ert_graph_from_model(ert_graph *g, const ert_model *m) {
    for (int i = 0; i < m->n_tensors; i++) {
        const ert_tensor *mt = &m->tensors[i];
        int32_t id = ert_graph_add_tensor(g, mt->name);
        if (id < 0) return ert_graph_oom(g);
        ert_gtensor *x = &g->t[id];
        x->dtype = x->orig_dtype = mt->dtype;
        x->ndim = mt->ndim;
        memcpy(x->dims, mt->dims, sizeof x->dims);
        x->model_id = i;
        if (mt->role != ERT_ROLE_WEIGHT) continue;
        x->mem = ERT_MEM_CONST;
        x->cdata = mt->data;
        x->defined = true;
        if (!ert_graph_set_nbytes(x)) return ert_set_error(g->ctx, ERT_E_FORMAT, "weight '%s': invalid size", x->name);
    }
    return ERT_OK;
}

ert_status ert_graph_fix_inputs(ert_graph *g, const ert_model *m, const ert_session_options *o) {
    ert_status st = ert_graph_check_input_shapes(g->ctx, m, o);
    if (st != ERT_OK) return st;
    for (int i = 0; i < m->n_inputs; i++) {
        ert_gtensor *x = &g->t[m->inputs[i]];
        if ((st = ert_graph_input_dims(g->ctx, o, x->name, x->ndim, x->dims)) != ERT_OK) return st;
        if (!ert_graph_set_nbytes(x)) return ert_set_error(g->ctx, ERT_E_SHAPE, "input '%s': size overflows", x->name);
        x->defined = true;
    }
    return ERT_OK;
}

ert_status ert_graph_infer_node(ert_graph *g, const ert_node *mn, const int32_t *map, ert_gnode **out) {
    *out = NULL;
    ert_status st = ert_graph_check_node_io(g->ctx, mn);
    if (st != ERT_OK) return st;
    ert_gnode *n = ert_graph_add_node(g, mn->op, mn, mn->name, mn->n_in, mn->n_out);
    if (!n) return ert_graph_oom(g);
    ert_tinfo tin[ERT_GRAPH_MAX_IO], tout[ERT_GRAPH_MAX_IO];
    bool all_const = true;
    for (int k = 0; k < mn->n_in; k++) {
        n->in[k] = mn->in[k] < 0 ? -1 : map ? map[mn->in[k]] : mn->in[k];
        memset(&tin[k], 0, sizeof tin[k]);
        if (n->in[k] < 0) continue;
        const ert_gtensor *x = &g->t[n->in[k]];
        if (!x->defined) return ert_set_error(g->ctx, ERT_E_INTERNAL, "node '%s': input %d not defined", mn->name, k);
        ert_graph_tinfo(&tin[k], x->dtype, x->ndim, x->dims, ert_graph_is_imm(x) ? x->cdata : NULL);
        if (!tin[k].const_data) all_const = false;
    }
    for (int k = 0; k < mn->n_out; k++) n->out[k] = mn->out[k] < 0 ? -1 : map ? map[mn->out[k]] : mn->out[k];
    bool fold_ok;
    st = ert_graph_prepare(g->ctx, mn, g->n_threads, tin, tout, &n->params, &n->ws_bytes, &fold_ok);
    if (st != ERT_OK) return st;
    for (int k = 0; k < mn->n_out; k++) {
        if (n->out[k] < 0) continue;
        ert_gtensor *x = &g->t[n->out[k]];
        x->dtype = x->orig_dtype = tout[k].dtype;
        x->ndim = tout[k].ndim;
        memcpy(x->dims, tout[k].dims, sizeof x->dims);
        x->defined = true;
        x->fwd = true;
        if (ert_graph_is_float16ish(x->dtype)) {
            if (!g->widen_half)
                return ert_set_error(g->ctx, ERT_E_UNSUPPORTED, "node '%s': f16/bf16 tensors are not trainable yet",
                                     mn->name);
            x->dtype = ERT_DTYPE_F32; /* the CPU computes in f32 */
        }
        if (!ert_graph_set_nbytes(x))
            return ert_set_error(g->ctx, ERT_E_SHAPE, "node '%s' (%s): output %d size overflows or is invalid",
                                 mn->name, ert_graph_op_name(mn->op), k);
    }
    if (g->widen_half && n->op == ERT_OP_CAST && ert_graph_is_float16ish(n->params.cast.to))
        n->params.cast.to = ERT_DTYPE_F32;
    if (fold_ok && (all_const || n->op == ERT_OP_SHAPE || n->op == ERT_OP_SIZE)) {
        if ((st = ert_graph_fold_node(g, n)) != ERT_OK) return st;
        free(n->in);
        g->nn--;
        return ERT_OK;
    }
    *out = n;
    return ERT_OK;
}

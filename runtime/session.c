/*
 * Session: a model planned for one device, batch and set of input shapes.
 *
 * Create (all allocation happens here; ert_session_plan runs steps 1-6 only):
 *   1. Copy the model's tensors; fix dynamic input dims (options' input_shapes,
 *      else a dynamic leading dim becomes `batch`).
 *   2. Float precision for the CPU: f16/bf16 weights are converted to f32,
 *      f16/bf16 graph inputs get a Cast to f32 in front, f16/bf16 results are
 *      computed in f32 and graph outputs declared f16/bf16 get a Cast back.
 *   3. Walk the nodes in topological order: each op's prepare infers shapes;
 *      a node whose inputs are all constant (or a Shape node) is run at once
 *      on the CPU and its outputs become constants (this folds the
 *      Shape/Gather/Concat/Reshape chains exporters emit).
 *   4. Passes: BatchNorm folded into the preceding Conv; Mul(x, Sigmoid(x)) ->
 *      SiLU; Conv + Add (residual) and Conv/Gemm + activation fused into the
 *      producer's epilogue; dead nodes removed.
 *   5. Lifetimes over the schedule; Reshape-like ops alias their input when it
 *      dies there (no copy). Activations and kernel workspaces are placed by
 *      the planner (planner.c); weights the session made, and graph inputs and
 *      outputs, get their own regions.
 *   4b. Reduced precision (CUDA sessions with options.precision F16/BF16):
 *      every f32 weight a live node reads is converted to that dtype, every
 *      f32 activation is planned in it, Cast(to f32) becomes Cast(to it); f32
 *      graph inputs get a Cast to it in front of the schedule and f32 graph
 *      outputs a Cast back at the end, so the user still sees f32.
 *   4c. Channels-last (the same sessions, unless ERT_SESSION_NO_NHWC): 2-D
 *      convs, pools and the element-wise ops between them keep activations
 *      NHWC; explicit Transposes convert at the region's edges (see step 4c).
 *   6. Arena layout [weights | io | activations], each 256-byte aligned.
 *   7. Take the caller's arena (checked against the plan) or allocate one;
 *      copy made weights in; resolve every kernel argument once.
 * Run: call the backend for each node with its pre-built arguments; no
 * allocation, no shape work.
 */
#include "ert_internal.h"
#include "planner_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum mem_kind {
    MEM_NONE = 0,
    MEM_CONST,    /* constant in memory the session does not own (model weights) */
    MEM_OWNED,    /* constant made by the session (folded, converted); goes to the weights region */
    MEM_IO,       /* graph input or output: persistent */
    MEM_ACT,      /* planned activation */
} mem_kind;

typedef struct stensor {
    const char *name;
    ert_dtype dtype, orig_dtype;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    size_t nbytes;
    mem_kind mem;
    const void *cdata; /* constant data (MEM_CONST / MEM_OWNED) */
    void *owned;       /* heap copy of MEM_OWNED data until it moves into the arena */
    bool defined;      /* has dtype/shape (produced or given) */
    int n_uses;
    int first, last;   /* schedule steps */
    int32_t alias;     /* shares the storage of this tensor (-1: own) */
    int32_t block;     /* planner block index (MEM_ACT roots) */
    size_t offset;     /* within its region */
    void *data;        /* resolved pointer kernels use */
    void *host;        /* MEM_IO: the pointer the user reads/writes */
} stensor;

typedef struct snode {
    ert_op op;
    const ert_node *src; /* model node (attributes, name); NULL for synthetic nodes */
    const char *name;
    int n_in, n_out;
    int32_t *in, *out;   /* in has room for 2 extra entries (bias, residual) */
    ert_op_params params;
    size_t ws_bytes;
    int32_t ws_block;
    bool dead;
    bool host;           /* the device backend has no kernel: runs the CPU kernel (backend's bind_host_node) */
    ert_tview *views;
    ert_kargs args;
} snode;

struct ert_session {
    ert_context *ctx;
    const ert_model *model;
    const ert_backend *be;
    void *bctx;
    struct ert_threadpool *pool;
    int n_threads;
    unsigned flags;
    stensor *t;
    int nt, cap_t;
    snode *n;
    int nn, cap_n;
    int32_t *sched; /* live node indices in run order */
    int n_sched;
    int n_in, n_out;
    int32_t *in_t, *out_t; /* user-facing tensors */
    uint8_t *arena;
    size_t arena_bytes;
    bool arena_owned;
    uint8_t *io_host;     /* user-visible io region (== arena io region unless the backend mirrors it) */
    ert_kargs **kptr;     /* scheduled nodes' arguments, in run order */
    ert_plan_block *blocks;
    int n_blocks;
    size_t w_bytes, io_bytes, act_bytes;
    ert_memory_report mem;
    bool planned_only;
    bool bctx_live;       /* be->init succeeded */
    int n_host;           /* scheduled nodes on the CPU fallback */
};

/* ------------------------------------------------------------------ helpers */

static ert_status oom(ert_session *s) { return ert_set_error(s->ctx, ERT_E_NOMEM, "out of memory creating the session"); }

static int32_t add_tensor(ert_session *s, const char *name) {
    if (s->nt == s->cap_t) {
        int cap = s->cap_t ? s->cap_t * 2 : 64;
        stensor *t = realloc(s->t, (size_t)cap * sizeof *t);
        if (!t) return -1;
        s->t = t;
        s->cap_t = cap;
    }
    stensor *t = &s->t[s->nt];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->alias = -1;
    t->block = -1;
    t->first = t->last = -1;
    return s->nt++;
}

static snode *add_node(ert_session *s, ert_op op, const ert_node *src, const char *name, int n_in, int n_out) {
    if (s->nn == s->cap_n) {
        int cap = s->cap_n ? s->cap_n * 2 : 64;
        snode *n = realloc(s->n, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        s->n = n;
        s->cap_n = cap;
    }
    snode *n = &s->n[s->nn];
    memset(n, 0, sizeof *n);
    n->in = malloc((size_t)(n_in + 2 + n_out) * sizeof(int32_t));
    if (!n->in) return NULL;
    n->out = n->in + n_in + 2;
    n->op = op;
    n->src = src;
    n->name = name;
    n->n_in = n_in;
    n->n_out = n_out;
    n->ws_block = -1;
    s->nn++;
    return n;
}

static bool is_float16ish(ert_dtype d) { return d == ERT_DTYPE_F16 || d == ERT_DTYPE_BF16; }

static bool set_nbytes(stensor *t) {
    ert_tensor tmp = {.dtype = t->dtype, .ndim = t->ndim};
    memcpy(tmp.dims, t->dims, sizeof tmp.dims);
    return ert_tensor_nbytes(&tmp, &t->nbytes);
}

static const char *op_name(ert_op op) {
    const ert_op_def *d = ert_op_get(op);
    return d ? d->name : "?";
}

/* Convert n f16/bf16 values to a new f32 buffer. */
static float *widen(const void *src, int64_t n, ert_dtype dt) {
    float *d = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!d) return NULL;
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) d[i] = dt == ERT_DTYPE_F16 ? ert_f16_to_f32(h[i]) : ert_bf16_to_f32(h[i]);
    return d;
}

static void fill_view(ert_tview *v, const stensor *t, void *data) {
    memset(v, 0, sizeof *v);
    v->data = data;
    v->dtype = t->dtype;
    v->ndim = t->ndim;
    memcpy(v->dims, t->dims, sizeof v->dims);
    int64_t ne = 0;
    ert_dims_nelems(t->ndim, t->dims, &ne);
    v->n_elems = ne;
}

/* ------------------------------------------------------------------ step 1-3 */

/* Graph inputs given a value at create become session-owned constants
 * (f16/bf16 values widened to f32 like weights). */
static ert_status freeze_inputs(ert_session *s, const ert_session_options *o) {
    const ert_model *m = s->model;
    for (int k = 0; k < o->n_input_values; k++) {
        const ert_input_value *iv = &o->input_values[k];
        int32_t ti = -1;
        for (int i = 0; i < m->n_inputs; i++)
            if (iv->name && strcmp(m->tensors[m->inputs[i]].name, iv->name) == 0) ti = m->inputs[i];
        if (ti < 0)
            return ert_set_error(s->ctx, ERT_E_NOT_FOUND, "input_values[%d]: the model has no input '%s'", k,
                                 iv->name ? iv->name : "(null)");
        stensor *t = &s->t[ti];
        if (t->mem != MEM_NONE)
            return ert_set_error(s->ctx, ERT_E_ARG, "input '%s' is given a value twice", t->name);
        if (!iv->data || iv->dtype != t->dtype || iv->ndim != t->ndim)
            return ert_set_error(s->ctx, ERT_E_SHAPE, "input '%s': value given as %s rank %d, the model says %s rank %d",
                                 t->name, ert_dtype_name(iv->dtype), iv->ndim, ert_dtype_name(t->dtype), t->ndim);
        for (int d = 0; d < t->ndim; d++)
            if (iv->dims[d] < 0 || (t->dims[d] >= 0 && t->dims[d] != iv->dims[d]))
                return ert_set_error(s->ctx, ERT_E_SHAPE, "input '%s': value dim %d is %lld, the model says %lld", t->name,
                                     d, (long long)iv->dims[d], (long long)t->dims[d]);
        memcpy(t->dims, iv->dims, sizeof t->dims);
        if (!set_nbytes(t)) return ert_set_error(s->ctx, ERT_E_SHAPE, "input '%s': size overflows", t->name);
        int64_t ne = 0;
        ert_dims_nelems(t->ndim, t->dims, &ne);
        if (is_float16ish(t->dtype)) {
            t->owned = widen(iv->data, ne, t->dtype);
            t->orig_dtype = t->dtype;
            t->dtype = ERT_DTYPE_F32;
            set_nbytes(t);
        } else {
            t->owned = malloc(t->nbytes ? t->nbytes : 1);
            if (t->owned) memcpy(t->owned, iv->data, t->nbytes);
        }
        if (!t->owned) return oom(s);
        t->cdata = t->owned;
        t->mem = MEM_OWNED;
        t->defined = true;
    }
    return ERT_OK;
}

static ert_status fix_inputs(ert_session *s, const ert_session_options *o) {
    const ert_model *m = s->model;
    int64_t batch = o->batch > 0 ? o->batch : 1;
    for (int k = 0; k < o->n_input_shapes; k++) {
        const ert_input_shape *is = &o->input_shapes[k];
        int found = 0;
        for (int i = 0; i < m->n_inputs; i++)
            if (is->name && strcmp(m->tensors[m->inputs[i]].name, is->name) == 0) found = 1;
        if (!found) return ert_set_error(s->ctx, ERT_E_NOT_FOUND, "input_shapes[%d]: the model has no input '%s'", k,
                                         is->name ? is->name : "(null)");
    }
    for (int i = 0; i < m->n_inputs; i++) {
        stensor *t = &s->t[m->inputs[i]];
        const ert_input_shape *is = NULL;
        for (int k = 0; k < o->n_input_shapes; k++)
            if (o->input_shapes[k].name && strcmp(o->input_shapes[k].name, t->name) == 0) is = &o->input_shapes[k];
        if (is) {
            if (is->ndim != t->ndim)
                return ert_set_error(s->ctx, ERT_E_SHAPE, "input '%s': given rank %d, the model says %d", t->name,
                                     is->ndim, t->ndim);
            for (int d = 0; d < t->ndim; d++) {
                if (is->dims[d] < 0 || (t->dims[d] >= 0 && t->dims[d] != is->dims[d]))
                    return ert_set_error(s->ctx, ERT_E_SHAPE, "input '%s': dim %d given as %lld, the model says %lld",
                                         t->name, d, (long long)is->dims[d], (long long)t->dims[d]);
                t->dims[d] = is->dims[d];
            }
        } else {
            for (int d = 0; d < t->ndim; d++) {
                if (t->dims[d] >= 0) continue;
                if (d != 0)
                    return ert_set_error(s->ctx, ERT_E_SHAPE,
                                         "input '%s': dim %d is dynamic; give its shape in ert_session_options.input_shapes",
                                         t->name, d);
                t->dims[d] = batch;
            }
        }
        if (!set_nbytes(t)) return ert_set_error(s->ctx, ERT_E_SHAPE, "input '%s': size overflows", t->name);
    }
    return ERT_OK;
}

/* Run one node on the CPU now; its outputs become session-owned constants. */
static ert_status fold_node(ert_session *s, snode *n) {
    ert_tview views[2 * ERT_MAX_NODE_IO];
    ert_tview *v = n->n_in + n->n_out <= 2 * ERT_MAX_NODE_IO ? views : malloc((size_t)(n->n_in + n->n_out) * sizeof *v);
    if (!v) return oom(s);
    void *ws = NULL;
    ert_status st = ERT_OK;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) {
            memset(&v[k], 0, sizeof v[k]);
            continue;
        }
        stensor *t = &s->t[n->in[k]];
        fill_view(&v[k], t, (void *)t->cdata);
    }
    for (int k = 0; k < n->n_out; k++) {
        stensor *t = &s->t[n->out[k]];
        t->owned = malloc(t->nbytes ? t->nbytes : 1);
        if (!t->owned) {
            st = oom(s);
            goto done;
        }
        fill_view(&v[n->n_in + k], t, t->owned);
    }
    if (n->ws_bytes && !(ws = aligned_alloc(64, ert_align_up(n->ws_bytes, 64)))) {
        st = oom(s);
        goto done;
    }
    ert_kargs a = {.op = n->op, .params = &n->params, .n_in = n->n_in, .n_out = n->n_out, .in = v, .out = v + n->n_in,
                   .workspace = ws, .workspace_bytes = n->ws_bytes, .pool = NULL};
    st = ert_cpu_run_node(&a);
    if (st != ERT_OK) {
        if (!ert_last_error(s->ctx)[0] || st == ERT_E_UNSUPPORTED)
            ert_set_error(s->ctx, st, "node '%s' (%s): constant folding failed", n->name, op_name(n->op));
        goto done;
    }
    for (int k = 0; k < n->n_out; k++) {
        stensor *t = &s->t[n->out[k]];
        t->mem = MEM_OWNED;
        t->cdata = t->owned;
    }
done:
    free(ws);
    if (v != views) free(v);
    return st;
}

/* Shape inference + folding over the model's nodes, with the precision
 * rewrites of step 2. map[] turns model tensor ids into session ids. */
static ert_status infer(ert_session *s) {
    const ert_model *m = s->model;
    int32_t *map = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *map);
    if (!map) return oom(s);
    for (int i = 0; i < m->n_tensors; i++) map[i] = i;
    ert_status st = ERT_OK;
    /* f16/bf16 weights -> f32 constants */
    for (int i = 0; i < m->n_tensors; i++) {
        stensor *t = &s->t[i];
        if (t->mem != MEM_CONST || !is_float16ish(t->dtype)) continue;
        int64_t ne;
        ert_dims_nelems(t->ndim, t->dims, &ne);
        t->owned = widen(t->cdata, ne, t->dtype);
        if (!t->owned) {
            st = oom(s);
            goto done;
        }
        t->cdata = t->owned;
        t->mem = MEM_OWNED;
        t->orig_dtype = t->dtype;
        t->dtype = ERT_DTYPE_F32;
        set_nbytes(t);
    }
    /* f16/bf16 graph inputs: Cast to f32 in front */
    for (int i = 0; i < m->n_inputs; i++) {
        int32_t ti = m->inputs[i];
        if (!is_float16ish(s->t[ti].dtype) || s->t[ti].mem != MEM_NONE) continue; /* frozen: a constant */
        int32_t c = add_tensor(s, s->t[ti].name);
        snode *n = c >= 0 ? add_node(s, ERT_OP_CAST, NULL, s->t[ti].name, 1, 1) : NULL;
        if (!n) {
            st = oom(s);
            goto done;
        }
        stensor *ct = &s->t[c];
        *ct = s->t[ti];
        ct->mem = MEM_NONE;
        ct->dtype = ERT_DTYPE_F32;
        ct->alias = ct->block = -1;
        set_nbytes(ct);
        n->in[0] = ti;
        n->out[0] = c;
        n->params.cast.to = ERT_DTYPE_F32;
        map[ti] = c;
    }
    ert_tinfo tin[64], tout[64];
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *mn = &m->nodes[i];
        if (mn->n_in > 64 || mn->n_out > 64) {
            st = ert_set_error(s->ctx, ERT_E_UNSUPPORTED, "node '%s' (%s): more than 64 inputs or outputs", mn->name,
                               op_name(mn->op));
            goto done;
        }
        snode *n = add_node(s, mn->op, mn, mn->name, mn->n_in, mn->n_out);
        if (!n) {
            st = oom(s);
            goto done;
        }
        bool all_const = true;
        for (int k = 0; k < mn->n_in; k++) {
            n->in[k] = mn->in[k] < 0 ? -1 : map[mn->in[k]];
            memset(&tin[k], 0, sizeof tin[k]);
            if (n->in[k] < 0) continue;
            const stensor *t = &s->t[n->in[k]];
            if (!t->defined) {
                st = ert_set_error(s->ctx, ERT_E_INTERNAL, "node '%s': input %d not defined", mn->name, k);
                goto done;
            }
            tin[k].dtype = t->dtype;
            tin[k].ndim = t->ndim;
            memcpy(tin[k].dims, t->dims, sizeof tin[k].dims);
            tin[k].const_data = (t->mem == MEM_CONST || t->mem == MEM_OWNED) ? t->cdata : NULL;
            if (!tin[k].const_data) all_const = false;
        }
        for (int k = 0; k < mn->n_out; k++) {
            n->out[k] = map[mn->out[k]];
            memset(&tout[k], 0, sizeof tout[k]);
        }
        ert_prep p = {.ctx = s->ctx, .node = mn, .n_in = mn->n_in, .n_out = mn->n_out, .in = tin, .out = tout,
                      .params = &n->params, .n_threads = s->n_threads, .fold_ok = true};
        s->ctx->err[0] = 0;
        st = ert_op_get(mn->op)->prepare(&p);
        if (st != ERT_OK) {
            char msg[ERT_ERRMSG_SIZE];
            snprintf(msg, sizeof msg, "%s", ert_last_error(s->ctx));
            ert_set_error(s->ctx, st, "node '%s' (%s): %s", mn->name, op_name(mn->op), msg);
            goto done;
        }
        n->ws_bytes = p.workspace_bytes;
        for (int k = 0; k < mn->n_out; k++) {
            stensor *t = &s->t[n->out[k]];
            t->dtype = t->orig_dtype = tout[k].dtype;
            t->ndim = tout[k].ndim;
            memcpy(t->dims, tout[k].dims, sizeof t->dims);
            t->defined = true;
            if (is_float16ish(t->dtype)) t->dtype = ERT_DTYPE_F32; /* CPU computes in f32 */
            if (!set_nbytes(t)) {
                st = ert_set_error(s->ctx, ERT_E_SHAPE, "node '%s' (%s): output %d size overflows or is invalid",
                                   mn->name, op_name(mn->op), k);
                goto done;
            }
        }
        if (n->op == ERT_OP_CAST && is_float16ish(n->params.cast.to)) n->params.cast.to = ERT_DTYPE_F32;
        if (p.fold_ok && (all_const || n->op == ERT_OP_SHAPE || n->op == ERT_OP_SIZE)) {
            if ((st = fold_node(s, n)) != ERT_OK) goto done;
            free(n->in);
            s->nn--;
        }
    }
    /* graph outputs declared f16/bf16: Cast back */
    s->n_out = m->n_outputs;
    s->out_t = malloc((size_t)(m->n_outputs + 1) * sizeof *s->out_t);
    s->n_in = m->n_inputs;
    s->in_t = malloc((size_t)(m->n_inputs + 1) * sizeof *s->in_t);
    if (!s->out_t || !s->in_t) {
        st = oom(s);
        goto done;
    }
    s->n_in = 0;
    for (int i = 0; i < m->n_inputs; i++)
        if (s->t[m->inputs[i]].mem == MEM_NONE) s->in_t[s->n_in++] = m->inputs[i]; /* frozen ones are constants */
    for (int i = 0; i < m->n_outputs; i++) {
        int32_t ti = map[m->outputs[i]];
        s->out_t[i] = ti;
        /* The model's declared dtype wins: a node fed by inputs already
         * widened to f32 infers f32 although the model promises f16. */
        ert_dtype want = m->tensors[m->outputs[i]].dtype;
        if (!is_float16ish(want)) want = s->t[ti].orig_dtype;
        if (!is_float16ish(want) || s->t[ti].dtype != ERT_DTYPE_F32) continue;
        s->t[ti].orig_dtype = want;
        int32_t c = add_tensor(s, s->t[ti].name);
        snode *n = c >= 0 ? add_node(s, ERT_OP_CAST, NULL, s->t[ti].name, 1, 1) : NULL;
        if (!n) {
            st = oom(s);
            goto done;
        }
        stensor *ct = &s->t[c];
        *ct = s->t[ti];
        ct->mem = MEM_NONE;
        ct->owned = NULL;
        ct->cdata = NULL;
        ct->dtype = ct->orig_dtype;
        ct->alias = ct->block = -1;
        set_nbytes(ct);
        n->in[0] = ti;
        n->out[0] = c;
        n->params.cast.to = ct->dtype;
        s->out_t[i] = c;
    }
done:
    free(map);
    return st;
}

/* ------------------------------------------------------------------ step 4 */

static bool is_const(const ert_session *s, int32_t t) { return t >= 0 && (s->t[t].mem == MEM_CONST || s->t[t].mem == MEM_OWNED); }

static bool is_graph_out(const ert_session *s, int32_t t) {
    for (int i = 0; i < s->n_out; i++)
        if (s->out_t[i] == t) return true;
    return false;
}

static void count_uses(ert_session *s, int32_t *producer) {
    for (int i = 0; i < s->nt; i++) {
        s->t[i].n_uses = 0;
        if (producer) producer[i] = -1;
    }
    for (int i = 0; i < s->nn; i++) {
        if (s->n[i].dead) continue;
        for (int k = 0; k < s->n[i].n_in; k++)
            if (s->n[i].in[k] >= 0) s->t[s->n[i].in[k]].n_uses++;
        if (producer)
            for (int k = 0; k < s->n[i].n_out; k++) producer[s->n[i].out[k]] = i;
    }
}

/* The single live consumer of tensor t (NULL if not exactly one, or t is a graph output). */
static snode *sole_consumer(ert_session *s, int32_t t, int after) {
    if (s->t[t].n_uses != 1 || is_graph_out(s, t)) return NULL;
    for (int j = after + 1; j < s->nn; j++) {
        if (s->n[j].dead) continue;
        for (int k = 0; k < s->n[j].n_in; k++)
            if (s->n[j].in[k] == t) return &s->n[j];
    }
    return NULL;
}

static ert_status new_const(ert_session *s, const char *name, ert_dtype dt, int ndim, const int64_t *dims, void *owned,
                            int32_t *id) {
    int32_t c = add_tensor(s, name);
    if (c < 0) {
        free(owned);
        return oom(s);
    }
    stensor *t = &s->t[c];
    t->dtype = t->orig_dtype = dt;
    t->ndim = ndim;
    memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    t->defined = true;
    t->mem = MEM_OWNED;
    t->owned = owned;
    t->cdata = owned;
    set_nbytes(t);
    *id = c;
    return ERT_OK;
}

/* Conv(x, W, b) -> BN(scale, B, mean, var): W' = W * g, b' = (b - mean) * g + B
 * with g = scale / sqrt(var + eps), per output channel. */
static ert_status fold_batchnorm(ert_session *s) {
    for (int i = 0; i < s->nn; i++) {
        snode *c = &s->n[i];
        if (c->dead || c->op != ERT_OP_CONV || c->params.conv.has_residual || c->params.conv.act.kind != ERT_ACT_NONE)
            continue;
        int32_t w = c->in[1], b = c->n_in > 2 ? c->in[2] : -1;
        if (!is_const(s, w) || s->t[w].dtype != ERT_DTYPE_F32 || (b >= 0 && !is_const(s, b))) continue;
        snode *bn = sole_consumer(s, c->out[0], i);
        if (!bn || bn->op != ERT_OP_BATCHNORM || bn->in[0] != c->out[0] || bn->n_out != 1 ||
            bn->params.norm.training) /* batch statistics: not a per-channel affine of constants */
            continue;
        bool ok = true;
        for (int k = 1; k < 5; k++) ok = ok && is_const(s, bn->in[k]) && s->t[bn->in[k]].dtype == ERT_DTYPE_F32;
        if (!ok) continue;
        const stensor *wt = &s->t[w];
        int64_t cout = wt->dims[0], per = 1;
        for (int d = 1; d < wt->ndim; d++) per *= wt->dims[d];
        const float *sc = s->t[bn->in[1]].cdata, *bb = s->t[bn->in[2]].cdata, *mu = s->t[bn->in[3]].cdata,
                    *var = s->t[bn->in[4]].cdata, *w0 = wt->cdata, *b0 = b >= 0 ? s->t[b].cdata : NULL;
        float *nw = malloc(wt->nbytes ? wt->nbytes : 1), *nb = malloc((size_t)cout * sizeof(float));
        if (!nw || !nb) {
            free(nw);
            free(nb);
            return oom(s);
        }
        float eps = bn->params.norm.epsilon;
        for (int64_t o = 0; o < cout; o++) {
            double g = sc[o] / sqrt((double)var[o] + eps);
            for (int64_t k = 0; k < per; k++) nw[o * per + k] = (float)(w0[o * per + k] * g);
            nb[o] = (float)(((b0 ? b0[o] : 0.0) - mu[o]) * g + bb[o]);
        }
        /* new_const may move s->t: copy what we still need first */
        int64_t wdims[ERT_MAX_DIMS];
        int wnd = wt->ndim;
        const char *wname = wt->name, *bname = s->t[bn->in[2]].name;
        memcpy(wdims, wt->dims, sizeof wdims);
        int32_t nwi = -1, nbi = -1;
        ert_status st = new_const(s, wname, ERT_DTYPE_F32, wnd, wdims, nw, &nwi);
        if (st) {
            free(nb);
            return st;
        }
        int64_t bd[1] = {cout};
        if ((st = new_const(s, bname, ERT_DTYPE_F32, 1, bd, nb, &nbi))) return st;
        c = &s->n[i]; /* add_tensor does not move nodes, but keep it obviously right */
        c->in[1] = nwi;
        c->in[2] = nbi;
        c->n_in = 3;
        c->params.conv.has_bias = true;
        c->out[0] = bn->out[0];
        bn->dead = true;
        count_uses(s, NULL);
    }
    return ERT_OK;
}

/* Activation params of a unary node, if it can be fused into an epilogue. */
static bool act_of(const ert_session *s, const snode *n, ert_act_params *a) {
    memset(a, 0, sizeof *a);
    switch (n->op) {
    case ERT_OP_RELU: a->kind = ERT_ACT_RELU; return true;
    case ERT_OP_SIGMOID: a->kind = ERT_ACT_SIGMOID; return true;
    case ERT_OP_TANH: a->kind = ERT_ACT_TANH; return true;
    case ERT_OP_HARD_SWISH: a->kind = ERT_ACT_HARD_SWISH; return true;
    case ERT_OP_SILU: a->kind = ERT_ACT_SILU; return true;
    case ERT_OP_LEAKY_RELU:
        a->kind = ERT_ACT_LEAKY_RELU;
        a->alpha = n->src ? ert_attr_float(n->src, "alpha", 0.01f) : 0.01f;
        return true;
    case ERT_OP_HARD_SIGMOID:
        a->kind = ERT_ACT_HARD_SIGMOID;
        a->alpha = n->src ? ert_attr_float(n->src, "alpha", 0.2f) : 0.2f;
        a->beta = n->src ? ert_attr_float(n->src, "beta", 0.5f) : 0.5f;
        return true;
    case ERT_OP_GELU:
        if (n->src && strcmp(ert_attr_str(n->src, "approximate", "none"), "none") != 0) return false;
        a->kind = ERT_ACT_GELU;
        return true;
    case ERT_OP_CLIP: {
        a->kind = ERT_ACT_CLIP;
        a->alpha = -INFINITY;
        a->beta = INFINITY;
        for (int k = 1; k < n->n_in && k < 3; k++) {
            if (n->in[k] < 0) continue;
            if (!is_const(s, n->in[k]) || s->t[n->in[k]].dtype != ERT_DTYPE_F32) return false;
            float v = *(const float *)s->t[n->in[k]].cdata;
            if (k == 1) a->alpha = v;
            else a->beta = v;
        }
        return true;
    }
    default: return false;
    }
}

static bool same_shape(const stensor *a, const stensor *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim && memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof a->dims[0]) == 0;
}

static ert_status fuse(ert_session *s) {
    int32_t *producer = malloc((size_t)s->nt * sizeof *producer);
    if (!producer) return oom(s);
    count_uses(s, producer);
    /* Mul(x, Sigmoid(x)) -> Silu(x) */
    for (int i = 0; i < s->nn; i++) {
        snode *sg = &s->n[i];
        if (sg->dead || sg->op != ERT_OP_SIGMOID) continue;
        snode *mul = sole_consumer(s, sg->out[0], i);
        if (!mul || mul->op != ERT_OP_MUL) continue;
        int other = mul->in[0] == sg->out[0] ? 1 : 0;
        if (mul->in[other] != sg->in[0] || !same_shape(&s->t[sg->in[0]], &s->t[mul->out[0]])) continue;
        sg->op = ERT_OP_SILU;
        memset(&sg->params, 0, sizeof sg->params);
        sg->params.unary.act.kind = ERT_ACT_SILU;
        sg->src = NULL;
        sg->out[0] = mul->out[0];
        mul->dead = true;
        count_uses(s, producer);
    }
    for (int i = 0; i < s->nn; i++) {
        snode *c = &s->n[i];
        if (c->dead || (c->op != ERT_OP_CONV && c->op != ERT_OP_GEMM)) continue;
        /* residual: Conv -> Add(y, z) with z ready before the Conv runs */
        if (c->op == ERT_OP_CONV && !c->params.conv.has_residual && c->params.conv.act.kind == ERT_ACT_NONE) {
            snode *add = sole_consumer(s, c->out[0], i);
            if (add && add->op == ERT_OP_ADD) {
                int other = add->in[0] == c->out[0] ? 1 : 0;
                int32_t z = add->in[other];
                if (z != c->out[0] && same_shape(&s->t[z], &s->t[add->out[0]]) &&
                    same_shape(&s->t[c->out[0]], &s->t[add->out[0]]) && (producer[z] < i)) {
                    if (c->n_in == 2) c->in[2] = -1;
                    c->in[3] = z;
                    c->n_in = 4;
                    c->params.conv.has_residual = true;
                    c->out[0] = add->out[0];
                    add->dead = true;
                    count_uses(s, producer);
                }
            }
        }
        ert_act_params *act = c->op == ERT_OP_CONV ? &c->params.conv.act : &c->params.gemm.act;
        if (act->kind != ERT_ACT_NONE) continue;
        snode *u = sole_consumer(s, c->out[0], i);
        ert_act_params a;
        if (u && u->in[0] == c->out[0] && act_of(s, u, &a) && same_shape(&s->t[c->out[0]], &s->t[u->out[0]])) {
            *act = a;
            c->out[0] = u->out[0];
            u->dead = true;
            count_uses(s, producer);
        }
    }
    free(producer);
    return ERT_OK;
}

static void remove_dead(ert_session *s) {
    count_uses(s, NULL);
    for (int i = s->nn - 1; i >= 0; i--) {
        snode *n = &s->n[i];
        if (n->dead) continue;
        bool used = false;
        for (int k = 0; k < n->n_out; k++) used = used || s->t[n->out[k]].n_uses > 0 || is_graph_out(s, n->out[k]);
        if (used) continue;
        n->dead = true;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) s->t[n->in[k]].n_uses--;
    }
}

/* ------------------------------------------------------------------ step 4b */

static bool is_io(const ert_session *s, int32_t t) {
    for (int i = 0; i < s->n_in; i++)
        if (s->in_t[i] == t) return true;
    return is_graph_out(s, t);
}

/* Retype a copy of tensor `from` as dt (a planned activation). */
static int32_t retyped_copy(ert_session *s, int32_t from, ert_dtype dt) {
    int32_t c = add_tensor(s, s->t[from].name);
    if (c < 0) return -1;
    stensor *t = &s->t[c];
    *t = s->t[from];
    t->mem = MEM_NONE;
    t->owned = NULL;
    t->cdata = NULL;
    t->dtype = t->orig_dtype = dt;
    t->alias = t->block = -1;
    t->first = t->last = -1;
    set_nbytes(t);
    return c;
}

static ert_status lower_precision(ert_session *s, ert_dtype dt) {
    count_uses(s, NULL);
    /* A backend may rewrite a conv's f16/bf16 filter in place once at create
     * (CUDA stores it (K, R, S, C) for the tensor cores). A filter read by
     * more than one node gets one private copy per conv, so no reader ever
     * sees another node's layout (this failed on the GPU when two convs
     * shared one filter). */
    for (int i = 0; i < s->nn; i++) {
        snode *n = &s->n[i];
        if (n->dead || n->op != ERT_OP_CONV || n->n_in < 2) continue;
        int32_t w = n->in[1];
        if (!is_const(s, w) || s->t[w].dtype != ERT_DTYPE_F32 || s->t[w].n_uses < 2) continue;
        size_t nb = s->t[w].nbytes;
        int64_t dims[ERT_MAX_DIMS];
        int nd = s->t[w].ndim;
        const char *name = s->t[w].name;
        memcpy(dims, s->t[w].dims, sizeof dims);
        void *copy = malloc(nb ? nb : 1);
        if (!copy) return oom(s);
        memcpy(copy, s->t[w].cdata, nb);
        int32_t id = -1;
        ert_status st = new_const(s, name, ERT_DTYPE_F32, nd, dims, copy, &id);
        if (st != ERT_OK) return st;
        s->t[w].n_uses--;
        s->t[id].n_uses = 1;
        s->n[i].in[1] = id;
    }
    count_uses(s, NULL);
    /* weights */
    for (int i = 0; i < s->nt; i++) {
        stensor *t = &s->t[i];
        if (!is_const(s, i) || t->dtype != ERT_DTYPE_F32 || t->n_uses == 0 || is_graph_out(s, i)) continue;
        int64_t ne = 0;
        ert_dims_nelems(t->ndim, t->dims, &ne);
        uint16_t *h = malloc((size_t)(ne ? ne : 1) * sizeof *h);
        if (!h) return oom(s);
        const float *f = t->cdata;
        for (int64_t k = 0; k < ne; k++) h[k] = dt == ERT_DTYPE_F16 ? ert_f32_to_f16(f[k]) : ert_f32_to_bf16(f[k]);
        free(t->owned);
        t->owned = h;
        t->cdata = h;
        t->mem = MEM_OWNED;
        t->dtype = dt;
        set_nbytes(t);
    }
    /* activations (inputs and outputs keep f32) */
    for (int i = 0; i < s->nt; i++) {
        stensor *t = &s->t[i];
        if (t->mem != MEM_NONE || t->dtype != ERT_DTYPE_F32 || !t->defined || is_io(s, i)) continue;
        t->dtype = dt;
        set_nbytes(t);
    }
    for (int i = 0; i < s->nn; i++)
        if (!s->n[i].dead && s->n[i].op == ERT_OP_CAST && s->n[i].params.cast.to == ERT_DTYPE_F32 &&
            !is_io(s, s->n[i].out[0]))
            s->n[i].params.cast.to = dt;
    /* f32 graph inputs: a Cast to dt at the front of the node list */
    for (int i = 0; i < s->n_in; i++) {
        int32_t ti = s->in_t[i];
        if (s->t[ti].dtype != ERT_DTYPE_F32 || s->t[ti].n_uses == 0) continue;
        int32_t c = retyped_copy(s, ti, dt);
        snode *n = c >= 0 ? add_node(s, ERT_OP_CAST, NULL, s->t[ti].name, 1, 1) : NULL;
        if (!n) return oom(s);
        for (int j = 0; j < s->nn - 1; j++)
            for (int k = 0; k < s->n[j].n_in; k++)
                if (s->n[j].in[k] == ti) s->n[j].in[k] = c;
        n->in[0] = ti;
        n->out[0] = c;
        n->params.cast.to = dt;
        snode tmp = *n;
        memmove(&s->n[1], &s->n[0], (size_t)(s->nn - 1) * sizeof *s->n);
        s->n[0] = tmp;
    }
    /* f32 graph outputs a node makes: the node writes a dt activation, a Cast
     * at the end writes the f32 output */
    for (int i = 0; i < s->n_out; i++) {
        int32_t to = s->out_t[i];
        if (s->t[to].dtype != ERT_DTYPE_F32 || is_const(s, to)) continue;
        bool skip = false; /* a graph input, or an output listed twice (done already) */
        for (int k = 0; k < s->n_in; k++) skip = skip || s->in_t[k] == to;
        for (int k = 0; k < i; k++) skip = skip || s->out_t[k] == to;
        if (skip) continue;
        int32_t c = retyped_copy(s, to, dt);
        if (c < 0) return oom(s);
        for (int j = 0; j < s->nn; j++) {
            snode *m = &s->n[j];
            for (int k = 0; k < m->n_in; k++)
                if (m->in[k] == to) m->in[k] = c;
            for (int k = 0; k < m->n_out; k++)
                if (m->out[k] == to) m->out[k] = c;
        }
        snode *n = add_node(s, ERT_OP_CAST, NULL, s->t[to].name, 1, 1);
        if (!n) return oom(s);
        n->in[0] = c;
        n->out[0] = to;
        n->params.cast.to = ERT_DTYPE_F32;
    }
    return ERT_OK;
}

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
 * Limits: ops outside the list end the region (an unfolded BatchNorm,
 * Resize, Pad, Slice...), and so does a binary op with a constant of rank < 4
 * holding more than one value (it would need re-broadcasting).
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

static int64_t n_elems_of(const stensor *t) {
    int64_t n = 0;
    return ert_dims_nelems(t->ndim, t->dims, &n) ? n : -1;
}

/* Step 1 for node n: may it run channels-last, given which tensors are? */
static bool nhwc_node_ok(const ert_session *s, const snode *n, const bool *nh) {
    if (n->n_out < 1 || n->out[0] < 0 || n->host) return false;
    const stensor *y = &s->t[n->out[0]];
    if (!is_float16ish(y->dtype) || y->ndim != 4) return false;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && (k > 0 || is_io(s, n->out[k]))) return false; /* MaxPool's Indices too */
    bool any = false;
    for (int k = 0; k < n->n_in; k++) {
        int32_t t = n->in[k];
        if (t < 0 || (n->op == ERT_OP_CONV && (k == 1 || k == 2))) continue; /* filter, bias */
        if (nh[t]) any = true;
        else if (s->t[t].ndim != 4 && n_elems_of(&s->t[t]) != 1) return false;
        if (s->t[t].dtype != y->dtype) return false;
    }
    switch (n->op) {
    case ERT_OP_CONV: {
        const ert_conv_params *p = &n->params.conv;
        if (p->nsp != 2 || s->t[n->in[0]].ndim != 4) return false;
        for (int i = 0; i < 2; i++)
            if (p->pad_begin[i] != p->pad_end[i]) return false; /* cuDNN's condition; the rest is slow anyway */
        return true;
    }
    case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL: return any && n->params.pool.nsp == 2 && s->t[n->in[0]].ndim == 4;
    case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_GLOBAL_MAXPOOL: return any && s->t[n->in[0]].ndim == 4;
    case ERT_OP_CONCAT:
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && s->t[n->in[k]].ndim != 4) return false;
        return any;
    default: return any && (nhwc_unary(n->op) || nhwc_binary(n->op)) && n->n_out == 1;
    }
}

/* A planned copy of tensor t with dims permuted by perm (4-D). */
static int32_t permuted_copy(ert_session *s, int32_t t, const int *perm) {
    int32_t c = retyped_copy(s, t, s->t[t].dtype);
    if (c < 0) return -1;
    for (int d = 0; d < 4; d++) s->t[c].dims[d] = s->t[t].dims[perm[d]];
    return c;
}

/* A Transpose (or Reshape: same bytes) from -> to, to be scheduled before node
 * `anchor` (anchors[] is indexed by the new node's position past nn0). */
static ert_status layout_node(ert_session *s, int32_t from, int32_t to, const int *perm, bool same_bytes, int anchor,
                              int nn0, int **anchors, int *cap) {
    snode *n = add_node(s, same_bytes ? ERT_OP_RESHAPE : ERT_OP_TRANSPOSE, NULL, s->t[to].name, 1, 1);
    if (!n) return oom(s);
    n->in[0] = from;
    n->out[0] = to;
    for (int d = 0; d < 4; d++) n->params.transpose.perm[d] = perm[d];
    int k = s->nn - 1 - nn0;
    if (k >= *cap) {
        int c2 = *cap ? *cap * 2 : 64;
        int *a = realloc(*anchors, (size_t)c2 * sizeof *a);
        if (!a) return oom(s);
        *anchors = a;
        *cap = c2;
    }
    (*anchors)[k] = anchor;
    return ERT_OK;
}

/* Does the graph run faster channels-last? The backend measures every conv
 * both ways (cuDNN's times of the picked algorithms: for NCHW they include
 * cuDNN's own transposes); each layout edge costs a transpose, taken as
 * EDGE_MS. One graph-wide answer. Measured on an H200 (f16, batch 1, p50):
 * ResNet-18 0.378 -> 0.239 ms and ResNet-50 0.691 -> 0.471 ms NHWC, while
 * MobileNetV2 ran 0.329 NCHW vs 0.420 NHWC (cuDNN's NHWC 1x1 convs are slower
 * there; this picks NCHW for it), hence a measurement rather than a rule
 * (bench/RESULTS.md). Without conv_time the answer is yes. */
#define EDGE_MS 0.003
static bool nhwc_pays(ert_session *s, const bool *nh, const bool *node_nh, int nn0) {
    if (!s->be->conv_time) return true;
    double t[2][2] = {{0}}; /* [nchw, nhwc][dense, grouped] */
    int edges = 0, n_conv = 0;
    for (int i = 0; i < nn0; i++) {
        const snode *n = &s->n[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            int32_t x = n->in[k];
            if (x < 0 || (n->op == ERT_OP_CONV && (k == 1 || k == 2))) continue;
            if (node_nh[i] != nh[x] && s->t[x].ndim == 4 && n_elems_of(&s->t[x]) != 1 &&
                !(nh[x] && s->t[x].dims[2] == 1 && s->t[x].dims[3] == 1))
                edges++; /* counted per use: an upper bound */
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
                fill_view(&v[l][k], &s->t[id], NULL);
                bool act = k == 0 || k == 3 || k >= n->n_in; /* x, residual, y */
                if (l == 1 && act && v[l][k].ndim == 4) {
                    int64_t c = v[l][k].dims[1];
                    v[l][k].dims[1] = v[l][k].dims[2], v[l][k].dims[2] = v[l][k].dims[3], v[l][k].dims[3] = c;
                }
            }
            ert_kargs a = {.op = n->op, .params = &prm[l], .n_in = n->n_in, .n_out = n->n_out, .in = v[l],
                           .out = v[l] + n->n_in, .name = n->name};
            if (s->be->conv_time(s->bctx, &a, &ms[l]) != ERT_OK) ms[l] = -1;
        }
        if (ms[0] < 0 || ms[1] < 0) continue;
        int g = n->params.conv.group > 1;
        t[0][g] += ms[0];
        t[1][g] += ms[1];
        n_conv++;
    }
    double nchw = t[0][0] + t[0][1], nhwc = t[1][0] + t[1][1] + edges * EDGE_MS;
    bool yes = nhwc < nchw;
    ert_log(s->ctx, ERT_LOG_INFO,
            "channels-last: %d convs measured NCHW %.3f ms (dense %.3f, grouped %.3f), NHWC %.3f ms (dense %.3f, "
            "grouped %.3f) + %d layout edges: %s",
            n_conv, nchw, t[0][0], t[0][1], t[1][0] + t[1][1], t[1][0], t[1][1], edges, yes ? "NHWC" : "NCHW kept");
    return yes;
}

static ert_status to_channels_last(ert_session *s) {
    static const int to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};
    /* NCHW axis -> its position in (N, H, W, C) */
    static const int64_t axis_nhwc[4] = {0, 3, 1, 2};
    int nn0 = s->nn, nt0 = s->nt, cap = 0, *anchors = NULL;
    bool *nh = calloc((size_t)nt0 + 1, sizeof *nh), *node_nh = calloc((size_t)nn0 + 1, sizeof *node_nh);
    int32_t *twin = malloc(((size_t)nt0 + 1) * sizeof *twin), *fwd = malloc(((size_t)nt0 + 1) * sizeof *fwd);
    bool *back = calloc((size_t)nt0 + 1, sizeof *back);
    snode *order = NULL;
    ert_status st = ERT_OK;
    if (!nh || !node_nh || !twin || !fwd || !back) {
        st = oom(s);
        goto done;
    }
    for (int i = 0; i < nt0; i++) twin[i] = fwd[i] = -1;
    int n_nh = 0;
    for (int i = 0; i < nn0; i++) {
        if (s->n[i].dead || !nhwc_node_ok(s, &s->n[i], nh)) continue;
        node_nh[i] = true;
        n_nh++;
        nh[s->n[i].out[0]] = true;
    }
    if (!n_nh || (!(s->flags & ERT_SESSION_NHWC) && !nhwc_pays(s, nh, node_nh, nn0))) goto done;
    for (int t = 0; t < nt0; t++)
        if (nh[t] && (twin[t] = permuted_copy(s, t, to_nhwc)) < 0) {
            st = oom(s);
            goto done;
        }
    for (int i = 0; i < nn0 && st == ERT_OK; i++) {
        if (s->n[i].dead) continue;
        if (!node_nh[i]) {
            for (int k = 0; k < s->n[i].n_in && st == ERT_OK; k++) {
                int32_t t = s->n[i].in[k];
                if (t < 0 || t >= nt0 || !nh[t] || back[t]) continue;
                back[t] = true;
                bool same = s->t[t].dims[2] == 1 && s->t[t].dims[3] == 1;
                st = layout_node(s, twin[t], t, to_nchw, same, i, nn0, &anchors, &cap);
            }
            continue;
        }
        for (int k = 0; k < s->n[i].n_in && st == ERT_OK; k++) {
            int32_t t = s->n[i].in[k];
            if (t < 0 || (s->n[i].op == ERT_OP_CONV && (k == 1 || k == 2))) continue;
            if (t < nt0 && nh[t]) {
                s->n[i].in[k] = twin[t];
            } else if (s->t[t].ndim == 4 && n_elems_of(&s->t[t]) != 1) {
                if (fwd[t] < 0) {
                    if ((fwd[t] = permuted_copy(s, t, to_nhwc)) < 0) st = oom(s);
                    else st = layout_node(s, t, fwd[t], to_nhwc, false, i, nn0, &anchors, &cap);
                }
                s->n[i].in[k] = fwd[t];
            }
        }
        snode *n = &s->n[i];
        n->out[0] = twin[n->out[0]];
        if (n->op == ERT_OP_CONV) n->params.conv.nhwc = true;
        else if (n->op == ERT_OP_MAXPOOL || n->op == ERT_OP_AVGPOOL || n->op == ERT_OP_GLOBAL_AVGPOOL ||
                 n->op == ERT_OP_GLOBAL_MAXPOOL)
            n->params.pool.nhwc = true;
        else if (n->op == ERT_OP_CONCAT)
            n->params.axis.axis = axis_nhwc[n->params.axis.axis & 3];
    }
    if (st != ERT_OK) goto done;
    /* schedule each new node right before its anchor */
    order = malloc((size_t)s->nn * sizeof *order);
    if (!order) {
        st = oom(s);
        goto done;
    }
    int m = 0;
    for (int i = 0; i < nn0; i++) {
        for (int j = nn0; j < s->nn; j++)
            if (anchors[j - nn0] == i) order[m++] = s->n[j];
        order[m++] = s->n[i];
    }
    memcpy(s->n, order, (size_t)m * sizeof *order);
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

/* ------------------------------------------------------------------ step 5-6 */

static bool is_copy_op(ert_op op) {
    return op == ERT_OP_IDENTITY || op == ERT_OP_DROPOUT || op == ERT_OP_FLATTEN || op == ERT_OP_RESHAPE ||
           op == ERT_OP_SQUEEZE || op == ERT_OP_UNSQUEEZE;
}

static int32_t root_of(const ert_session *s, int32_t t) {
    while (s->t[t].alias >= 0) t = s->t[t].alias;
    return t;
}

/* Kernel arguments of n with concrete shapes and no data (v holds cap
 * views), for the backend's create-time questions; false if n has more
 * operands than cap. */
static bool shape_args(const ert_session *s, snode *n, ert_tview *v, int cap, ert_kargs *a) {
    if (n->n_in + n->n_out > cap) return false;
    for (int j = 0; j < n->n_in; j++) {
        memset(&v[j], 0, sizeof v[j]);
        if (n->in[j] >= 0) fill_view(&v[j], &s->t[n->in[j]], NULL);
    }
    for (int j = 0; j < n->n_out; j++) fill_view(&v[n->n_in + j], &s->t[n->out[j]], NULL);
    *a = (ert_kargs){.op = n->op, .params = &n->params, .n_in = n->n_in, .n_out = n->n_out, .in = v,
                     .out = v + n->n_in, .name = n->name};
    return true;
}

static ert_status plan(ert_session *s) {
    count_uses(s, NULL);
    s->sched = malloc((size_t)(s->nn + 1) * sizeof *s->sched);
    if (!s->sched) return oom(s);
    s->n_sched = 0;
    for (int i = 0; i < s->nn; i++)
        if (!s->n[i].dead) s->sched[s->n_sched++] = i;
    /* memory kinds */
    for (int i = 0; i < s->nt; i++) {
        stensor *t = &s->t[i];
        if (t->mem == MEM_NONE) t->mem = MEM_ACT;
    }
    for (int i = 0; i < s->n_in; i++) s->t[s->in_t[i]].mem = MEM_IO;
    for (int i = 0; i < s->n_out; i++) {
        stensor *t = &s->t[s->out_t[i]];
        /* a constant output is copied into the io region once, at create */
        t->mem = MEM_IO;
    }
    /* lifetimes over the schedule */
    for (int k = 0; k < s->n_sched; k++) {
        snode *n = &s->n[s->sched[k]];
        for (int j = 0; j < n->n_out; j++) {
            stensor *t = &s->t[n->out[j]];
            if (t->first < 0) t->first = k;
            if (t->last < k) t->last = k; /* an unused output still needs a home at its step */
        }
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && s->t[n->in[j]].last < k) s->t[n->in[j]].last = k;
    }
    /* aliasing: a Reshape-like op's output shares its input's storage when the
     * input is a planned activation that dies at this op */
    for (int k = 0; k < s->n_sched; k++) {
        snode *n = &s->n[s->sched[k]];
        if (!is_copy_op(n->op) || n->n_out != 1) continue;
        stensor *in = &s->t[n->in[0]], *out = &s->t[n->out[0]];
        if (in->mem != MEM_ACT || out->mem != MEM_ACT || in->last != k || in->nbytes != out->nbytes) continue;
        int32_t r = root_of(s, n->in[0]);
        out->alias = r;
        if (out->last > s->t[r].last) s->t[r].last = out->last;
    }
    /* propagate extended lifetimes along alias chains (chains point backwards in schedule order) */
    for (int i = 0; i < s->nt; i++) {
        if (s->t[i].alias < 0) continue;
        int32_t r = root_of(s, i);
        if (s->t[i].last > s->t[r].last) s->t[r].last = s->t[i].last;
    }
    /* backend scratch (e.g. cuDNN workspace) from concrete shapes */
    if (s->be->node_workspace) {
        for (int k = 0; k < s->n_sched; k++) {
            snode *n = &s->n[s->sched[k]];
            ert_tview v[64];
            ert_kargs a;
            if (n->host || !shape_args(s, n, v, 64, &a)) continue;
            size_t extra = 0;
            ert_status st = s->be->node_workspace(s->bctx, &a, &extra);
            if (st != ERT_OK) return st;
            n->ws_bytes += extra;
        }
    }
    /* blocks: activation roots, then workspaces */
    int nb = 0;
    for (int i = 0; i < s->nt; i++)
        if (s->t[i].mem == MEM_ACT && s->t[i].alias < 0 && s->t[i].first >= 0) nb++;
    for (int k = 0; k < s->n_sched; k++)
        if (s->n[s->sched[k]].ws_bytes) nb++;
    s->blocks = calloc((size_t)(nb ? nb : 1), sizeof *s->blocks);
    if (!s->blocks) return oom(s);
    nb = 0;
    for (int i = 0; i < s->nt; i++) {
        stensor *t = &s->t[i];
        if (t->mem != MEM_ACT || t->alias >= 0 || t->first < 0) continue;
        t->block = nb;
        s->blocks[nb++] = (ert_plan_block){.size = t->nbytes ? t->nbytes : 1, .first = t->first, .last = t->last};
    }
    size_t ws_max = 0;
    for (int k = 0; k < s->n_sched; k++) {
        snode *n = &s->n[s->sched[k]];
        if (!n->ws_bytes) continue;
        n->ws_block = nb;
        s->blocks[nb++] = (ert_plan_block){.size = n->ws_bytes, .first = k, .last = k};
        if (n->ws_bytes > ws_max) ws_max = n->ws_bytes;
    }
    s->n_blocks = nb;
    size_t peak, lb;
    ert_status st = ert_plan_offsets(s->blocks, nb, ERT_ALIGN, &peak, &lb);
    if (st) return st == ERT_E_NOMEM ? oom(s) : ert_set_error(s->ctx, st, "activation sizes overflow");
    /* weights region: constants the session made that live nodes still read */
    size_t w = 0, io = 0, mapped = 0;
    count_uses(s, NULL);
    for (int i = 0; i < s->nt; i++) {
        stensor *t = &s->t[i];
        if (t->mem == MEM_OWNED && t->n_uses > 0) {
            t->offset = w;
            w = ert_align_up(w + t->nbytes, ERT_ALIGN);
        } else if (t->mem == MEM_CONST && t->n_uses > 0) {
            if (s->be->weights_in_arena) { /* device memory: weights are copied in */
                t->offset = w;
                w = ert_align_up(w + t->nbytes, ERT_ALIGN);
            } else {
                mapped += t->nbytes;
            }
        }
    }
    /* io region: graph inputs and outputs (the same tensor once) */
    for (int i = 0; i < s->nt; i++) {
        stensor *t = &s->t[i];
        if (t->mem != MEM_IO) continue;
        t->offset = io;
        io = ert_align_up(io + (t->nbytes ? t->nbytes : 1), ERT_ALIGN);
    }
    s->w_bytes = w;
    s->io_bytes = io;
    s->act_bytes = ert_align_up(peak, ERT_ALIGN);
    ert_memory_report *r = &s->mem;
    memset(r, 0, sizeof *r);
    r->weights_bytes = w;
    r->io_bytes = io;
    r->activations_bytes = s->act_bytes;
    r->activations_lower_bound = lb;
    r->workspace_bytes = ws_max;
    r->mapped_weights_bytes = mapped;
    r->total_bytes = w + io + s->act_bytes;
    return ERT_OK;
}

/* ------------------------------------------------------------------ step 7 */

static ert_status bind(ert_session *s, const ert_session_options *o) {
    size_t total = s->mem.total_bytes;
    const ert_backend *be = s->be;
    ert_status st;
    if (o->arena) {
        if ((uintptr_t)o->arena % ERT_HOST_ALIGN)
            return ert_set_error(s->ctx, ERT_E_ARG, "arena must be %d-byte aligned", ERT_HOST_ALIGN);
        if (o->arena_bytes < total)
            return ert_set_error(s->ctx, ERT_E_ARENA,
                                 "arena too small: %zu bytes given, %zu needed (weights %zu, io %zu, activations %zu)",
                                 o->arena_bytes, total, s->w_bytes, s->io_bytes, s->act_bytes);
        s->arena = o->arena;
        s->arena_bytes = o->arena_bytes;
    } else {
        void *p = NULL;
        s->ctx->err[0] = 0; /* a backend that fails without a message leaves it empty */
        if ((st = be->arena_alloc(s->bctx, total, &p)) != ERT_OK) {
            char why[ERT_ERRMSG_SIZE / 2]; /* the backend's reason, kept: ert_set_error overwrites it */
            snprintf(why, sizeof why, "%.200s", s->ctx->err[0] ? s->ctx->err : "out of memory");
            return ert_set_error(s->ctx, st,
                                 "cannot allocate the %zu-byte arena on %s (weights %zu, io %zu, activations %zu): %s",
                                 total, be->name, s->w_bytes, s->io_bytes, s->act_bytes, why);
        }
        s->arena = p;
        s->arena_owned = true;
        s->arena_bytes = total;
    }
    uint8_t *wbase = s->arena, *iobase = s->arena + s->w_bytes, *abase = iobase + s->io_bytes;
    void *ioh = NULL;
    if ((st = be->io_host(s->bctx, iobase, s->io_bytes, &ioh)) != ERT_OK)
        return ert_set_error(s->ctx, st, "cannot allocate %zu bytes of host memory for inputs/outputs", s->io_bytes);
    s->io_host = ioh;
    for (int i = 0; i < s->nt; i++) {
        stensor *t = &s->t[i];
        switch (t->mem) {
        case MEM_CONST:
            if (be->weights_in_arena && t->n_uses > 0) {
                t->data = wbase + t->offset;
                if ((st = be->upload(s->bctx, t->data, t->cdata, t->nbytes)) != ERT_OK)
                    return ert_set_error(s->ctx, st, "cannot upload weight '%s'", t->name);
            } else {
                t->data = (void *)t->cdata;
            }
            break;
        case MEM_OWNED:
            if (t->n_uses > 0) {
                t->data = wbase + t->offset;
                if ((st = be->upload(s->bctx, t->data, t->cdata, t->nbytes)) != ERT_OK)
                    return ert_set_error(s->ctx, st, "cannot upload weight '%s'", t->name);
            }
            break;
        case MEM_IO:
            t->data = iobase + t->offset;
            t->host = s->io_host + t->offset;
            break;
        case MEM_ACT:
            if (t->alias < 0 && t->block >= 0) t->data = abase + s->blocks[t->block].offset;
            break;
        default: break;
        }
    }
    for (int i = 0; i < s->nt; i++)
        if (s->t[i].mem == MEM_ACT && s->t[i].alias >= 0) s->t[i].data = s->t[root_of(s, i)].data;
    /* constant graph outputs: written once, on both sides */
    for (int i = 0; i < s->n_out; i++) {
        stensor *t = &s->t[s->out_t[i]];
        if (!t->cdata) continue;
        memcpy(t->host, t->cdata, t->nbytes);
        if (t->host != t->data && (st = be->upload(s->bctx, t->data, t->cdata, t->nbytes)) != ERT_OK)
            return ert_set_error(s->ctx, st, "cannot upload constant output '%s'", t->name);
    }
    for (int i = 0; i < s->nt; i++) {
        free(s->t[i].owned);
        s->t[i].owned = NULL;
        if (s->t[i].mem == MEM_OWNED) s->t[i].cdata = NULL; /* may be device memory now */
    }
    /* kernel arguments, resolved once */
    s->kptr = calloc((size_t)(s->n_sched + 1), sizeof *s->kptr);
    if (!s->kptr) return oom(s);
    for (int k = 0; k < s->n_sched; k++) {
        snode *n = &s->n[s->sched[k]];
        n->views = calloc((size_t)(n->n_in + n->n_out), sizeof *n->views);
        if (!n->views) return oom(s);
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) fill_view(&n->views[j], &s->t[n->in[j]], s->t[n->in[j]].data);
        for (int j = 0; j < n->n_out; j++) fill_view(&n->views[n->n_in + j], &s->t[n->out[j]], s->t[n->out[j]].data);
        n->args = (ert_kargs){.op = n->op, .params = &n->params, .n_in = n->n_in, .n_out = n->n_out, .in = n->views,
                              .out = n->views + n->n_in, .pool = s->pool, .name = n->name,
                              .workspace = n->ws_block >= 0 ? abase + s->blocks[n->ws_block].offset : NULL,
                              .workspace_bytes = n->ws_bytes};
        if (n->host) st = be->bind_host_node(s->bctx, &n->args, ert_cpu_run_node);
        else st = be->bind_node ? be->bind_node(s->bctx, &n->args) : ERT_OK;
        if (st != ERT_OK) {
            if (!ert_last_error(s->ctx)[0]) ert_set_error(s->ctx, st, "node '%s' (%s): backend setup failed", n->name, op_name(n->op));
            return st;
        }
        s->kptr[k] = &n->args;
    }
    if (be->bind_io && s->io_host != iobase) {
        ert_io_copy *ins = calloc((size_t)s->n_in + 1, sizeof *ins), *outs = calloc((size_t)s->n_out + 1, sizeof *outs);
        if (!ins || !outs) {
            free(ins);
            free(outs);
            return oom(s);
        }
        /* ERT_SESSION_DEVICE_INPUTS: the caller writes the inputs on the GPU */
        int n_in_copy = (s->flags & ERT_SESSION_DEVICE_INPUTS) ? 0 : s->n_in;
        for (int i = 0; i < n_in_copy; i++) {
            const stensor *t = &s->t[s->in_t[i]];
            ins[i] = (ert_io_copy){.host = t->host, .dev = t->data, .bytes = t->nbytes};
        }
        for (int i = 0; i < s->n_out; i++) {
            const stensor *t = &s->t[s->out_t[i]];
            outs[i] = (ert_io_copy){.host = t->host, .dev = t->data, .bytes = t->nbytes};
        }
        st = be->bind_io(s->bctx, ins, n_in_copy, outs, s->n_out);
        free(ins);
        free(outs);
        if (st != ERT_OK) return st;
    }
    return ERT_OK;
}

/* Can the session's backend run n (concrete shapes, dtypes and params)? */
static bool node_supported(const ert_session *s, snode *n) {
    ert_dtype dt = n->n_in > 0 && n->in[0] >= 0 ? s->t[n->in[0]].dtype : ERT_DTYPE_UNDEFINED;
    ert_tview v[64];
    ert_kargs a;
    if (!s->be->supports_node || !shape_args(s, n, v, 64, &a)) return s->be->supports(n->op, dt);
    return s->be->supports_node(&a);
}

/* ------------------------------------------------------------------ public */

static void session_free(ert_session *s) {
    if (!s) return;
    const ert_backend *be = s->be;
    for (int i = 0; i < s->nt; i++) free(s->t[i].owned);
    for (int i = 0; i < s->nn; i++) {
        if (be && be->release_node && s->n[i].views) be->release_node(s->bctx, &s->n[i].args);
        free(s->n[i].in);
        free(s->n[i].views);
    }
    free(s->t);
    free(s->n);
    free(s->sched);
    free(s->kptr);
    free(s->in_t);
    free(s->out_t);
    free(s->blocks);
    if (be && s->io_host && be->io_host_free) be->io_host_free(s->bctx, s->io_host, s->arena + s->w_bytes);
    if (be && s->arena_owned) be->arena_free(s->bctx, s->arena);
    if (be && s->bctx_live) be->release(s->bctx);
    ert_threadpool_free(s->pool);
    free(s);
}

void ert_session_free(ert_session *s) { session_free(s); }

static ert_status build(const ert_model *m, const ert_session_options *opts, bool plan_only, ert_session **out) {
    ert_session_options dflt = {0};
    const ert_session_options *o = opts ? opts : &dflt;
    ert_context *ctx = m->ctx;
    if (o->n_input_shapes < 0 || (o->n_input_shapes && !o->input_shapes) || o->n_input_values < 0 ||
        (o->n_input_values && !o->input_values) || o->batch < 0 || o->n_threads < 0 ||
        o->n_threads > 256)
        return ert_set_error(ctx, ERT_E_ARG, "invalid session options");
    if (o->precision != ERT_DTYPE_UNDEFINED && o->precision != ERT_DTYPE_F32 && o->precision != ERT_DTYPE_F16 &&
        o->precision != ERT_DTYPE_BF16)
        return ert_set_error(ctx, ERT_E_ARG, "precision must be f32, f16 or bf16 (got %d)", (int)o->precision);
    ert_session *s = calloc(1, sizeof *s);
    if (!s) return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
    s->ctx = ctx;
    s->model = m;
    ert_status st = ERT_OK;
    if (o->device == ERT_DEVICE_CUDA || o->device == ERT_DEVICE_AUTO) {
        s->be = ert_cuda_backend_get();
        if (s->be) {
            if ((st = s->be->init(ctx, o, &s->bctx)) == ERT_OK) s->bctx_live = true;
            else if (o->device == ERT_DEVICE_CUDA) goto fail; /* init set the message */
        } else if (o->device == ERT_DEVICE_CUDA) {
            st = ert_set_error(ctx, ERT_E_UNSUPPORTED, "this build of edgert has no CUDA backend (built with ERT_CUDA=OFF)");
            goto fail;
        }
    }
    if (!s->bctx_live) {
        if (o->device != ERT_DEVICE_CPU && o->device != ERT_DEVICE_AUTO && o->device != ERT_DEVICE_CUDA) {
            st = ert_set_error(ctx, ERT_E_ARG, "unknown device %d", (int)o->device);
            goto fail;
        }
        s->be = &ert_cpu_backend;
        if ((st = s->be->init(ctx, o, &s->bctx)) != ERT_OK) goto fail;
        s->bctx_live = true;
    }
    s->flags = o->flags;
    s->n_threads = o->n_threads > 0 ? o->n_threads : 1;
    s->planned_only = plan_only;
    for (int i = 0; i < m->n_tensors; i++) {
        int32_t id = add_tensor(s, m->tensors[i].name);
        if (id < 0) {
            st = oom(s);
            goto fail;
        }
        stensor *t = &s->t[id];
        const ert_tensor *mt = &m->tensors[i];
        t->dtype = t->orig_dtype = mt->dtype;
        t->ndim = mt->ndim;
        memcpy(t->dims, mt->dims, sizeof t->dims);
        if (mt->role == ERT_ROLE_WEIGHT) {
            t->mem = MEM_CONST;
            t->cdata = mt->data;
            t->defined = true;
            if (!set_nbytes(t)) {
                st = ert_set_error(ctx, ERT_E_FORMAT, "weight '%s': invalid size", t->name);
                goto fail;
            }
        }
    }
    for (int i = 0; i < m->n_inputs; i++) s->t[m->inputs[i]].defined = true;
    if ((st = fix_inputs(s, o))) goto fail;
    if ((st = freeze_inputs(s, o))) goto fail;
    if ((st = infer(s))) goto fail;
    if (!(o->flags & ERT_SESSION_NO_FOLD)) {
        count_uses(s, NULL);
        if ((st = fold_batchnorm(s))) goto fail;
    }
    if (!(o->flags & ERT_SESSION_NO_FUSE) && (st = fuse(s))) goto fail;
    remove_dead(s);
    /* A node the backend has no kernel for runs on the CPU inside the
     * session where the backend can do that (bind_host_node) and the CPU
     * has the op, logged once per op type; otherwise one backend runs every
     * node: refuse a graph it cannot run (AUTO falls back to the CPU
     * instead). */
    bool logged[ERT_OP_COUNT] = {0};
    for (int i = 0; i < s->nn && s->be->supports; i++) {
        snode *n = &s->n[i];
        ert_dtype dt = n->n_in > 0 && n->in[0] >= 0 ? s->t[n->in[0]].dtype : ERT_DTYPE_UNDEFINED;
        if (n->dead || node_supported(s, n)) continue;
        if (s->be->bind_host_node && ert_cpu_backend.supports(n->op, dt)) {
            n->host = true;
            s->n_host++;
            if (!logged[n->op])
                ert_log(ctx, ERT_LOG_INFO, "%s (first: node '%s', %s): no %s kernel, runs on the CPU inside the session",
                        op_name(n->op), n->name, ert_dtype_name(dt), s->be->name);
            logged[n->op] = true;
            continue;
        }
        if (o->device == ERT_DEVICE_AUTO && s->be != &ert_cpu_backend) {
            ert_log(ctx, ERT_LOG_INFO, "node '%s' (%s): no %s kernel, using the CPU", n->name, op_name(n->op), s->be->name);
            s->be->release(s->bctx);
            s->be = &ert_cpu_backend;
            if ((st = s->be->init(ctx, o, &s->bctx)) != ERT_OK) {
                s->bctx_live = false;
                goto fail;
            }
            continue;
        }
        st = ert_set_error(ctx, ERT_E_UNSUPPORTED, "node '%s' (%s, %s): the %s backend does not implement it yet",
                           n->name, op_name(n->op), ert_dtype_name(dt), s->be->name);
        goto fail;
    }
    if ((o->precision == ERT_DTYPE_F16 || o->precision == ERT_DTYPE_BF16) && s->be->device == ERT_DEVICE_CUDA &&
        (st = lower_precision(s, o->precision)))
        goto fail;
    if ((o->precision == ERT_DTYPE_F16 || o->precision == ERT_DTYPE_BF16) && s->be->device == ERT_DEVICE_CUDA &&
        !(o->flags & ERT_SESSION_NO_NHWC) && (st = to_channels_last(s)))
        goto fail;
    if ((st = plan(s))) goto fail;
    if (!plan_only) {
        if (s->n_threads > 1 && (st = ert_threadpool_create(s->n_threads, &s->pool)) != ERT_OK) {
            ert_set_error(ctx, st, "cannot start %d worker threads", s->n_threads);
            goto fail;
        }
        if ((st = bind(s, o))) goto fail;
    }
    ert_log(ctx, ERT_LOG_INFO,
            "session on %s: %d of %d nodes scheduled (%d on the CPU fallback); arena %zu bytes (weights %zu, io %zu, activations %zu "
            "= lower bound %zu + %zu planner gap), %zu bytes of weights used in place",
            s->be->name, s->n_sched, m->n_nodes, s->n_host, s->mem.total_bytes, s->mem.weights_bytes, s->mem.io_bytes,
            s->mem.activations_bytes, s->mem.activations_lower_bound,
            s->mem.activations_bytes - (s->mem.activations_lower_bound < s->mem.activations_bytes
                                            ? s->mem.activations_lower_bound
                                            : s->mem.activations_bytes),
            s->mem.mapped_weights_bytes);
    *out = s;
    return ERT_OK;
fail:
    session_free(s);
    return st;
}

ert_status ert_session_plan(const ert_model *m, const ert_session_options *o, ert_memory_report *out) {
    if (!m || !out) return ERT_E_ARG;
    ert_session *s;
    ert_status st = build(m, o, true, &s);
    if (st) return st;
    *out = s->mem;
    session_free(s);
    return ERT_OK;
}

ert_status ert_session_create(const ert_model *m, const ert_session_options *o, ert_session **out) {
    if (!m || !out) return m ? ert_set_error(m->ctx, ERT_E_ARG, "ert_session_create: NULL out") : ERT_E_ARG;
    return build(m, o, false, out);
}

ert_status ert_session_run(ert_session *s) {
    if (!s) return ERT_E_ARG;
    int failed = -1;
    s->ctx->err[0] = 0; /* a backend may leave a detail (a CUDA error string) */
    ert_status st = s->be->run(s->bctx, s->kptr, s->n_sched, &failed);
    if (st != ERT_OK) {
        char detail[ERT_ERRMSG_SIZE];
        snprintf(detail, sizeof detail, "%s", ert_last_error(s->ctx));
        const snode *n = failed >= 0 && failed < s->n_sched ? &s->n[s->sched[failed]] : NULL;
        int64_t pos, val, dim;
        if (n && st == ERT_E_ARG && s->be->device == ERT_DEVICE_CPU &&
            ert_gather_bad_index(s->kptr[failed], &pos, &val, &dim))
            return ert_set_error(s->ctx, st, "node '%s' (Gather): index %lld (at position %lld) out of range [-%lld, %lld)",
                                 n->name, (long long)val, (long long)pos, (long long)dim, (long long)dim);
        return ert_set_error(s->ctx, st, "node '%s' (%s) failed on %s: %s", n ? n->name : "?", n ? op_name(n->op) : "?",
                             s->be->name,
                             detail[0] ? detail
                             : st == ERT_E_UNSUPPORTED ? "the backend does not implement it for these inputs"
                                                       : ert_status_str(st));
    }
    return ERT_OK;
}

ert_status ert_session_memory(const ert_session *s, ert_memory_report *out) {
    if (!s || !out) return ERT_E_ARG;
    *out = s->mem;
    return ERT_OK;
}

int ert_session_n_inputs(const ert_session *s) { return s ? s->n_in : 0; }
int ert_session_n_outputs(const ert_session *s) { return s ? s->n_out : 0; }

static ert_status tinfo(const ert_session *s, const int32_t *list, int n, int i, ert_tensor_info *out) {
    if (!s || !out) return ERT_E_ARG;
    if (i < 0 || i >= n) return ert_set_error(s->ctx, ERT_E_ARG, "index %d out of range [0, %d)", i, n);
    const stensor *t = &s->t[list[i]];
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    memcpy(out->dims, t->dims, sizeof out->dims);
    return ERT_OK;
}

ert_status ert_session_input_info(const ert_session *s, int i, ert_tensor_info *out) {
    return tinfo(s, s ? s->in_t : NULL, s ? s->n_in : 0, i, out);
}
ert_status ert_session_output_info(const ert_session *s, int i, ert_tensor_info *out) {
    return tinfo(s, s ? s->out_t : NULL, s ? s->n_out : 0, i, out);
}

static ert_status find(const ert_session *s, const int32_t *list, int n, const char *name, int *index) {
    if (!s || !name || !index) return ERT_E_ARG;
    for (int i = 0; i < n; i++)
        if (strcmp(s->t[list[i]].name, name) == 0) {
            *index = i;
            return ERT_OK;
        }
    return ert_set_error(s->ctx, ERT_E_NOT_FOUND, "no tensor named '%s'", name);
}

ert_status ert_session_find_input(const ert_session *s, const char *name, int *index) {
    return find(s, s ? s->in_t : NULL, s ? s->n_in : 0, name, index);
}
ert_status ert_session_find_output(const ert_session *s, const char *name, int *index) {
    return find(s, s ? s->out_t : NULL, s ? s->n_out : 0, name, index);
}

ert_status ert_session_input_data(ert_session *s, int i, void **data) {
    if (!s || !data) return ERT_E_ARG;
    if (i < 0 || i >= s->n_in) return ert_set_error(s->ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, s->n_in);
    *data = s->t[s->in_t[i]].host;
    return ERT_OK;
}

ert_status ert_session_input_device(ert_session *s, int i, void **dev) {
    if (!s || !dev) return ERT_E_ARG;
    if (i < 0 || i >= s->n_in) return ert_set_error(s->ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, s->n_in);
    if (!s->be->weights_in_arena) /* the CPU backend: no device memory */
        return ert_set_error(s->ctx, ERT_E_UNSUPPORTED, "ert_session_input_device: a %s session has no GPU memory",
                             s->be->name);
    *dev = s->t[s->in_t[i]].data;
    return ERT_OK;
}

ert_status ert_session_sync_inputs(ert_session *s) {
    if (!s) return ERT_E_ARG;
    if (!(s->flags & ERT_SESSION_DEVICE_INPUTS) || !s->be->weights_in_arena) return ERT_OK;
    for (int i = 0; i < s->n_in; i++) {
        const stensor *t = &s->t[s->in_t[i]];
        if (t->host == t->data) continue; /* host-visible arena: nothing to copy */
        ert_status st = s->be->upload(s->bctx, t->data, t->host, t->nbytes);
        if (st != ERT_OK) return ert_set_error(s->ctx, st, "cannot copy input '%s' to the GPU", t->name);
    }
    return ERT_OK;
}

ert_status ert_session_set_input(ert_session *s, int i, const void *data, size_t bytes) {
    if (!s || !data) return ERT_E_ARG;
    if (i < 0 || i >= s->n_in) return ert_set_error(s->ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, s->n_in);
    const stensor *t = &s->t[s->in_t[i]];
    if (bytes != t->nbytes)
        return ert_set_error(s->ctx, ERT_E_SHAPE, "input '%s' holds %zu bytes, %zu given", t->name, t->nbytes, bytes);
    memcpy(t->host, data, bytes);
    return ERT_OK;
}

ert_status ert_session_output_data(ert_session *s, int i, const void **data) {
    if (!s || !data) return ERT_E_ARG;
    if (i < 0 || i >= s->n_out)
        return ert_set_error(s->ctx, ERT_E_ARG, "output index %d out of range [0, %d)", i, s->n_out);
    *data = s->t[s->out_t[i]].host;
    return ERT_OK;
}

ert_status ert_session_get_output(ert_session *s, int i, void *data, size_t bytes) {
    if (!s || !data) return ERT_E_ARG;
    if (i < 0 || i >= s->n_out)
        return ert_set_error(s->ctx, ERT_E_ARG, "output index %d out of range [0, %d)", i, s->n_out);
    const stensor *t = &s->t[s->out_t[i]];
    if (bytes != t->nbytes)
        return ert_set_error(s->ctx, ERT_E_SHAPE, "output '%s' holds %zu bytes, %zu asked", t->name, t->nbytes, bytes);
    memcpy(data, t->host, bytes);
    return ERT_OK;
}

/* ------------------------------------------------------------------ introspection (tests, CLI internals) */

bool ert_session_plan_check(const ert_session *s, char *why, size_t cap) {
    if (!ert_plan_check(s->blocks, s->n_blocks, why, cap)) return false;
    for (int i = 0; i < s->nt; i++) {
        const stensor *t = &s->t[i];
        if (!t->data || t->mem == MEM_CONST || t->first < 0) continue;
        const uint8_t *p = t->data;
        if (p < s->arena || p + t->nbytes > s->arena + s->mem.total_bytes) {
            snprintf(why, cap, "tensor '%s' [%p,+%zu) outside the arena", t->name, t->data, t->nbytes);
            return false;
        }
    }
    return true;
}

int ert_session_n_scheduled(const ert_session *s) { return s ? s->n_sched : 0; }

int ert_session_n_cpu_fallback(const ert_session *s) { return s ? s->n_host : 0; }

ert_op ert_session_scheduled_op(const ert_session *s, int k) {
    return (s && k >= 0 && k < s->n_sched) ? s->n[s->sched[k]].op : ERT_OP_INVALID;
}

ert_status ert_session_output_shapes(const ert_model *m, int batch, ert_tensor_info *out) {
    ert_session_options o = {.batch = batch};
    ert_session *s = NULL;
    ert_status st = build(m, &o, true, &s);
    if (st != ERT_OK) return st;
    for (int i = 0; i < s->n_out && st == ERT_OK; i++) st = tinfo(s, s->out_t, s->n_out, i, &out[i]);
    session_free(s);
    return st;
}

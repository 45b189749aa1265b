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
 *   4. Passes: Q/DQ patterns folded into integer ops (passes/qdq.c);
 *      BatchNorm folded into the preceding Conv; Mul(x, Sigmoid(x)) ->
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
#include "session_internal.h"
#include "graph.h"
#include "busy_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ helpers */

ert_status ert_s_oom(ert_session *s) { return ert_set_error(s->ctx, ERT_E_NOMEM, "out of memory creating the session"); }

int32_t ert_s_add_tensor(ert_session *s, const char *name) {
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

snode *ert_s_add_node(ert_session *s, ert_op op, const ert_node *src, const char *name, int n_in, int n_out) {
    if (s->nn == s->cap_n) {
        int cap = s->cap_n ? s->cap_n * 2 : 64;
        snode *n = realloc(s->n, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        s->n = n;
        s->cap_n = cap;
    }
    snode *n = &s->n[s->nn];
    memset(n, 0, sizeof *n);
    n->in = malloc((size_t)(n_in + ERT_S_EXTRA_IN + n_out) * sizeof(int32_t));
    if (!n->in) return NULL;
    n->out = n->in + n_in + ERT_S_EXTRA_IN;
    n->op = op;
    n->src = src;
    n->name = name;
    n->n_in = n_in;
    n->n_out = n_out;
    n->ws_block = -1;
    s->nn++;
    return n;
}

bool ert_s_is_float16ish(ert_dtype d) { return d == ERT_DTYPE_F16 || d == ERT_DTYPE_BF16; }

bool ert_s_set_nbytes(stensor *t) { return ert_graph_nbytes(t->dtype, t->ndim, t->dims, &t->nbytes); }


/* Convert n f16/bf16 values to a new f32 buffer. */
static float *widen(const void *src, int64_t n, ert_dtype dt) {
    float *d = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!d) return NULL;
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) d[i] = dt == ERT_DTYPE_F16 ? ert_f16_to_f32(h[i]) : ert_bf16_to_f32(h[i]);
    return d;
}

void ert_s_fill_view(ert_tview *v, const stensor *t, void *data) { ert_graph_view(v, t->dtype, t->ndim, t->dims, data); }

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
        if (!ert_s_set_nbytes(t)) return ert_set_error(s->ctx, ERT_E_SHAPE, "input '%s': size overflows", t->name);
        int64_t ne = 0;
        ert_dims_nelems(t->ndim, t->dims, &ne);
        if (ert_s_is_float16ish(t->dtype)) {
            t->owned = widen(iv->data, ne, t->dtype);
            t->orig_dtype = t->dtype;
            t->dtype = ERT_DTYPE_F32;
            ert_s_set_nbytes(t);
        } else {
            t->owned = malloc(t->nbytes ? t->nbytes : 1);
            if (t->owned) memcpy(t->owned, iv->data, t->nbytes);
        }
        if (!t->owned) return ert_s_oom(s);
        t->cdata = t->owned;
        t->mem = MEM_OWNED;
        t->defined = true;
    }
    return ERT_OK;
}

static ert_status fix_inputs(ert_session *s, const ert_session_options *o) {
    const ert_model *m = s->model;
    ert_status st = ert_graph_check_input_shapes(s->ctx, m, o);
    if (st != ERT_OK) return st;
    for (int i = 0; i < m->n_inputs; i++) {
        stensor *t = &s->t[m->inputs[i]];
        if ((st = ert_graph_input_dims(s->ctx, o, t->name, t->ndim, t->dims)) != ERT_OK) return st;
        if (!ert_s_set_nbytes(t)) return ert_set_error(s->ctx, ERT_E_SHAPE, "input '%s': size overflows", t->name);
    }
    return ERT_OK;
}

/* Run one node on the CPU now; its outputs become session-owned constants. */
ert_status ert_s_fold_node(ert_session *s, snode *n) {
    ert_tview views[2 * ERT_MAX_NODE_IO];
    ert_tview *v = n->n_in + n->n_out <= 2 * ERT_MAX_NODE_IO ? views : malloc((size_t)(n->n_in + n->n_out) * sizeof *v);
    if (!v) return ert_s_oom(s);
    ert_status st = ERT_OK;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) {
            memset(&v[k], 0, sizeof v[k]);
            continue;
        }
        stensor *t = &s->t[n->in[k]];
        ert_s_fill_view(&v[k], t, (void *)t->cdata);
    }
    for (int k = 0; k < n->n_out; k++) {
        stensor *t = &s->t[n->out[k]];
        t->owned = malloc(t->nbytes ? t->nbytes : 1);
        if (!t->owned) {
            st = ert_s_oom(s);
            goto done;
        }
        ert_s_fill_view(&v[n->n_in + k], t, t->owned);
    }
    st = ert_graph_fold(s->ctx, n->name, n->op, &n->params, n->n_in, n->n_out, v, n->ws_bytes);
    if (st != ERT_OK) goto done;
    for (int k = 0; k < n->n_out; k++) {
        stensor *t = &s->t[n->out[k]];
        t->mem = MEM_OWNED;
        t->cdata = t->owned;
    }
done:
    if (v != views) free(v);
    return st;
}

/* Shape inference + folding over the model's nodes, with the precision
 * rewrites of step 2. map[] turns model tensor ids into session ids. */
static ert_status infer(ert_session *s) {
    const ert_model *m = s->model;
    int32_t *map = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *map);
    if (!map) return ert_s_oom(s);
    for (int i = 0; i < m->n_tensors; i++) map[i] = i;
    ert_status st = ERT_OK;
    /* f16/bf16 weights -> f32 constants */
    for (int i = 0; i < m->n_tensors; i++) {
        stensor *t = &s->t[i];
        if (t->mem != MEM_CONST || !ert_s_is_float16ish(t->dtype)) continue;
        int64_t ne;
        ert_dims_nelems(t->ndim, t->dims, &ne);
        t->owned = widen(t->cdata, ne, t->dtype);
        if (!t->owned) {
            st = ert_s_oom(s);
            goto done;
        }
        t->cdata = t->owned;
        t->mem = MEM_OWNED;
        t->orig_dtype = t->dtype;
        t->dtype = ERT_DTYPE_F32;
        ert_s_set_nbytes(t);
    }
    /* f16/bf16 graph inputs: Cast to f32 in front */
    for (int i = 0; i < m->n_inputs; i++) {
        int32_t ti = m->inputs[i];
        if (!ert_s_is_float16ish(s->t[ti].dtype) || s->t[ti].mem != MEM_NONE) continue; /* frozen: a constant */
        int32_t c = ert_s_add_tensor(s, s->t[ti].name);
        snode *n = c >= 0 ? ert_s_add_node(s, ERT_OP_CAST, NULL, s->t[ti].name, 1, 1) : NULL;
        if (!n) {
            st = ert_s_oom(s);
            goto done;
        }
        stensor *ct = &s->t[c];
        *ct = s->t[ti];
        ct->mem = MEM_NONE;
        ct->dtype = ERT_DTYPE_F32;
        ct->alias = ct->block = -1;
        ert_s_set_nbytes(ct);
        n->in[0] = ti;
        n->out[0] = c;
        n->params.cast.to = ERT_DTYPE_F32;
        map[ti] = c;
    }
    ert_tinfo tin[ERT_GRAPH_MAX_IO], tout[ERT_GRAPH_MAX_IO];
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *mn = &m->nodes[i];
        if ((st = ert_graph_check_node_io(s->ctx, mn)) != ERT_OK) goto done;
        snode *n = ert_s_add_node(s, mn->op, mn, mn->name, mn->n_in, mn->n_out);
        if (!n) {
            st = ert_s_oom(s);
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
            ert_graph_tinfo(&tin[k], t->dtype, t->ndim, t->dims,
                            (t->mem == MEM_CONST || t->mem == MEM_OWNED) ? t->cdata : NULL);
            if (!tin[k].const_data) all_const = false;
        }
        for (int k = 0; k < mn->n_out; k++) n->out[k] = map[mn->out[k]];
        bool fold_ok;
        st = ert_graph_prepare(s->ctx, mn, s->n_threads, tin, tout, &n->params, &n->ws_bytes, &fold_ok);
        if (st != ERT_OK) goto done;
        for (int k = 0; k < mn->n_out; k++) {
            stensor *t = &s->t[n->out[k]];
            t->dtype = t->orig_dtype = tout[k].dtype;
            t->ndim = tout[k].ndim;
            memcpy(t->dims, tout[k].dims, sizeof t->dims);
            t->defined = true;
            if (ert_s_is_float16ish(t->dtype)) t->dtype = ERT_DTYPE_F32; /* CPU computes in f32 */
            if (!ert_s_set_nbytes(t)) {
                st = ert_set_error(s->ctx, ERT_E_SHAPE, "node '%s' (%s): output %d size overflows or is invalid",
                                   mn->name, ert_graph_op_name(mn->op), k);
                goto done;
            }
        }
        if (n->op == ERT_OP_CAST && ert_s_is_float16ish(n->params.cast.to)) n->params.cast.to = ERT_DTYPE_F32;
        if (fold_ok && (all_const || n->op == ERT_OP_SHAPE || n->op == ERT_OP_SIZE)) {
            if ((st = ert_s_fold_node(s, n)) != ERT_OK) goto done;
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
        st = ert_s_oom(s);
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
        if (!ert_s_is_float16ish(want)) want = s->t[ti].orig_dtype;
        if (!ert_s_is_float16ish(want) || s->t[ti].dtype != ERT_DTYPE_F32) continue;
        s->t[ti].orig_dtype = want;
        int32_t c = ert_s_add_tensor(s, s->t[ti].name);
        snode *n = c >= 0 ? ert_s_add_node(s, ERT_OP_CAST, NULL, s->t[ti].name, 1, 1) : NULL;
        if (!n) {
            st = ert_s_oom(s);
            goto done;
        }
        stensor *ct = &s->t[c];
        *ct = s->t[ti];
        ct->mem = MEM_NONE;
        ct->owned = NULL;
        ct->cdata = NULL;
        ct->dtype = ct->orig_dtype;
        ct->alias = ct->block = -1;
        ert_s_set_nbytes(ct);
        n->in[0] = ti;
        n->out[0] = c;
        n->params.cast.to = ct->dtype;
        s->out_t[i] = c;
    }
done:
    free(map);
    return st;
}

/* ------------------------------------------------------------------ step 5-6 */

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
        if (n->in[j] >= 0) ert_s_fill_view(&v[j], &s->t[n->in[j]], NULL);
    }
    for (int j = 0; j < n->n_out; j++) ert_s_fill_view(&v[n->n_in + j], &s->t[n->out[j]], NULL);
    *a = (ert_kargs){.op = n->op, .params = &n->params, .n_in = n->n_in, .n_out = n->n_out, .in = v,
                     .out = v + n->n_in, .name = n->name};
    return true;
}

/* Product of t's dims before axis (1: the parts along axis are contiguous
 * blocks side by side). */
static int64_t outer_of(const stensor *t, int64_t axis) {
    int64_t o = 1;
    for (int64_t d = 0; d < axis && d < t->ndim; d++) o *= t->dims[d];
    return o;
}

/* Tensor t may become a view at byte offset off: a planned activation that
 * owns its storage, written by a scheduled node, offset aligned for every
 * kernel (cuDNN/cuBLAS want 16 bytes; ERT_ALIGN is more). */
static bool view_ok(const stensor *t, size_t off) {
    return t->mem == MEM_ACT && t->alias < 0 && t->first >= 0 && off % ERT_ALIGN == 0;
}

/* Layout ops as views. With every dim before the axis of size 1 (batch 1
 * and a channel axis, NCHW), a Concat's output is its inputs side by side:
 * each input is planned as a slice of the output (its producer writes
 * there) and the Concat is elided; a Split's outputs are slices of its
 * input and the Split is elided. Channels-last tensors (axis last, H*W
 * outer) and misaligned slices keep their copies. */
static void plan_views(ert_session *s) {
    for (int k = 0; k < s->n_sched; k++) {
        snode *n = &s->n[s->sched[k]];
        if (n->op == ERT_OP_CONCAT && n->n_out == 1 && n->n_in > 1) {
            stensor *o = &s->t[n->out[0]];
            if (o->mem != MEM_ACT || o->alias >= 0 || outer_of(o, n->params.axis.axis) != 1) continue;
            bool ok = true;
            size_t off = 0;
            for (int j = 0; ok && j < n->n_in; j++) {
                int32_t u = n->in[j];
                ok = u >= 0 && u != n->out[0] && view_ok(&s->t[u], off) && s->t[u].dtype == o->dtype;
                for (int i = 0; ok && i < j; i++) ok = n->in[i] != u;
                if (ok) off += s->t[u].nbytes;
            }
            if (!ok || off != o->nbytes) continue;
            off = 0;
            for (int j = 0; j < n->n_in; j++) {
                stensor *u = &s->t[n->in[j]];
                u->alias = n->out[0];
                u->alias_off = off;
                off += u->nbytes;
                if (u->first < o->first) o->first = u->first;
                if (u->last > o->last) o->last = u->last;
            }
            n->elided = true;
        } else if (n->op == ERT_OP_SPLIT && n->n_in >= 1 && n->n_out > 1) {
            stensor *x = &s->t[n->in[0]];
            if (x->mem != MEM_ACT || outer_of(x, n->params.split.axis) != 1) continue;
            bool ok = true;
            size_t off = 0;
            for (int j = 0; ok && j < n->n_out; j++) {
                int32_t y = n->out[j];
                ok = y >= 0 && y != n->in[0] && view_ok(&s->t[y], off) && s->t[y].dtype == x->dtype;
                if (ok) off += s->t[y].nbytes;
            }
            if (!ok || off != x->nbytes) continue;
            off = 0;
            for (int j = 0; j < n->n_out; j++) {
                stensor *y = &s->t[n->out[j]];
                y->alias = n->in[0];
                y->alias_off = off;
                off += y->nbytes;
                if (y->last > x->last) x->last = y->last;
            }
            n->elided = true;
        }
    }
}

/* Storage of tensor t: its root's plus the offsets along its alias chain. */
static void *alias_data(const ert_session *s, int32_t t) {
    size_t off = 0;
    while (s->t[t].alias >= 0) {
        off += s->t[t].alias_off;
        t = s->t[t].alias;
    }
    return s->t[t].data ? (char *)s->t[t].data + off : NULL;
}

static ert_status plan(ert_session *s) {
    ert_s_count_uses(s, NULL);
    s->sched = malloc((size_t)(s->nn + 1) * sizeof *s->sched);
    if (!s->sched) return ert_s_oom(s);
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
        if (!ert_graph_is_copy_op(n->op) || n->n_out != 1) continue;
        stensor *in = &s->t[n->in[0]], *out = &s->t[n->out[0]];
        if (in->mem != MEM_ACT || out->mem != MEM_ACT || in->last != k || in->nbytes != out->nbytes) continue;
        int32_t r = root_of(s, n->in[0]);
        out->alias = r;
        if (out->last > s->t[r].last) s->t[r].last = out->last;
    }
    if (!(s->flags & ERT_SESSION_NO_FUSE)) plan_views(s);
    /* propagate extended lifetimes along alias chains */
    for (int i = 0; i < s->nt; i++) {
        if (s->t[i].alias < 0) continue;
        int32_t r = root_of(s, i);
        if (s->t[i].last > s->t[r].last) s->t[r].last = s->t[i].last;
        if (s->t[i].first >= 0 && s->t[i].first < s->t[r].first) s->t[r].first = s->t[i].first;
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
    if (!s->blocks) return ert_s_oom(s);
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
    if (st) return st == ERT_E_NOMEM ? ert_s_oom(s) : ert_set_error(s->ctx, st, "activation sizes overflow");
    /* weights region: constants the session made that live nodes still read */
    size_t w = 0, io = 0, mapped = 0;
    ert_s_count_uses(s, NULL);
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
    /* weights the backend repacks for its kernels (a node's constant input 1) */
    for (int k = 0; s->be->node_packed_bytes && !(s->flags & ERT_SESSION_NO_PACK) && k < s->n_sched; k++) {
        snode *n = &s->n[s->sched[k]];
        ert_tview v[64];
        ert_kargs a;
        n->pk_bytes = 0;
        if (n->host || n->n_in < 2 || !ert_s_is_const(s, n->in[1]) || !shape_args(s, n, v, 64, &a)) continue;
        size_t b = s->be->node_packed_bytes(&a);
        if (!b) continue;
        if (b > SIZE_MAX / 2 - w) return ert_set_error(s->ctx, ERT_E_ARENA, "node '%s': packed weights too large", n->name);
        n->pk_bytes = b;
        n->pk_offset = w;
        w = ert_align_up(w + b, ERT_ALIGN);
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
    /* elided views leave the schedule (the plan above is final) */
    int ns = 0;
    for (int k = 0; k < s->n_sched; k++)
        if (!s->n[s->sched[k]].elided) s->sched[ns++] = s->sched[k];
    s->n_sched = ns;
    return ERT_OK;
}

/* ------------------------------------------------------------------ step 7 */

static ert_status bind(ert_session *s, const ert_session_options *o) {
    size_t total = s->mem.total_bytes;
    const ert_backend *be = s->be;
    ert_status st;
    char parts[160];
    snprintf(parts, sizeof parts, "weights %zu, io %zu, activations %zu", s->w_bytes, s->io_bytes, s->act_bytes);
    st = ert_graph_arena(s->ctx, be, s->bctx, o, total, parts, &s->arena, &s->arena_bytes, &s->arena_owned);
    if (st != ERT_OK) return st;
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
        if (s->t[i].mem == MEM_ACT && s->t[i].alias >= 0) s->t[i].data = alias_data(s, i);
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
    s->prof_ms = calloc((size_t)(s->n_sched + 1), sizeof *s->prof_ms);
    if (!s->kptr || !s->prof_ms) return ert_s_oom(s);
    for (int k = 0; k < s->n_sched; k++) {
        snode *n = &s->n[s->sched[k]];
        n->views = calloc((size_t)(n->n_in + n->n_out), sizeof *n->views);
        if (!n->views) return ert_s_oom(s);
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) ert_s_fill_view(&n->views[j], &s->t[n->in[j]], s->t[n->in[j]].data);
        for (int j = 0; j < n->n_out; j++) ert_s_fill_view(&n->views[n->n_in + j], &s->t[n->out[j]], s->t[n->out[j]].data);
        n->args = (ert_kargs){.op = n->op, .params = &n->params, .n_in = n->n_in, .n_out = n->n_out, .in = n->views,
                              .out = n->views + n->n_in, .pool = s->pool, .name = n->name,
                              .workspace = n->ws_block >= 0 ? abase + s->blocks[n->ws_block].offset : NULL,
                              .workspace_bytes = n->ws_bytes,
                              .packed = n->pk_bytes ? wbase + n->pk_offset : NULL, .packed_bytes = n->pk_bytes};
        if (n->host) st = be->bind_host_node(s->bctx, &n->args, ert_graph_cpu_run);
        else st = be->bind_node ? be->bind_node(s->bctx, &n->args) : ERT_OK;
        if (st != ERT_OK) {
            if (!ert_last_error(s->ctx)[0]) ert_set_error(s->ctx, st, "node '%s' (%s): backend setup failed", n->name, ert_graph_op_name(n->op));
            return st;
        }
        s->kptr[k] = &n->args;
    }
    if (be->bind_io && s->io_host != iobase) {
        ert_io_copy *ins = calloc((size_t)s->n_in + 1, sizeof *ins), *outs = calloc((size_t)s->n_out + 1, sizeof *outs);
        if (!ins || !outs) {
            free(ins);
            free(outs);
            return ert_s_oom(s);
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
    free(s->prof_ms);
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
    if (o->create_mode != ERT_CREATE_TUNED && o->create_mode != ERT_CREATE_FAST)
        return ert_set_error(ctx, ERT_E_ARG, "create_mode must be ERT_CREATE_TUNED or ERT_CREATE_FAST (got %d)",
                             (int)o->create_mode);
    if (o->precision != ERT_DTYPE_UNDEFINED && o->precision != ERT_DTYPE_F32 && o->precision != ERT_DTYPE_F16 &&
        o->precision != ERT_DTYPE_BF16)
        return ert_set_error(ctx, ERT_E_ARG, "precision must be f32, f16 or bf16 (got %d)", (int)o->precision);
    ert_session *s = calloc(1, sizeof *s);
    if (!s) return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
    atomic_init(&s->running, false);
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
    if (o->plan_cache_dir && s->be->plan_cache_open && !plan_only)
        s->be->plan_cache_open(s->bctx, o->plan_cache_dir, ert_plan_signature(m, o));
    s->flags = o->flags;
    s->n_threads = o->n_threads > 0 ? o->n_threads : 1;
    s->planned_only = plan_only;
    for (int i = 0; i < m->n_tensors; i++) {
        int32_t id = ert_s_add_tensor(s, m->tensors[i].name);
        if (id < 0) {
            st = ert_s_oom(s);
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
            if (!ert_s_set_nbytes(t)) {
                st = ert_set_error(ctx, ERT_E_FORMAT, "weight '%s': invalid size", t->name);
                goto fail;
            }
        }
    }
    for (int i = 0; i < m->n_inputs; i++) s->t[m->inputs[i]].defined = true;
    if ((st = fix_inputs(s, o))) goto fail;
    if ((st = freeze_inputs(s, o))) goto fail;
    if ((st = infer(s))) goto fail;
    if ((st = ert_s_fold_qdq(s, !(o->flags & ERT_SESSION_NO_FUSE)))) goto fail;
    if (!(o->flags & ERT_SESSION_NO_FOLD)) {
        ert_s_count_uses(s, NULL);
        if ((st = ert_s_fold_batchnorm(s))) goto fail;
    }
    if (!(o->flags & ERT_SESSION_NO_FUSE) && (st = ert_s_fuse(s))) goto fail;
    ert_s_remove_dead(s);
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
                        ert_graph_op_name(n->op), n->name, ert_dtype_name(dt), s->be->name);
            logged[n->op] = true;
            continue;
        }
        if (o->device == ERT_DEVICE_AUTO && s->be != &ert_cpu_backend) {
            ert_log(ctx, ERT_LOG_INFO, "node '%s' (%s): no %s kernel, using the CPU", n->name, ert_graph_op_name(n->op), s->be->name);
            s->be->release(s->bctx);
            s->be = &ert_cpu_backend;
            if ((st = s->be->init(ctx, o, &s->bctx)) != ERT_OK) {
                s->bctx_live = false;
                goto fail;
            }
            continue;
        }
        st = ert_set_error(ctx, ERT_E_UNSUPPORTED, "node '%s' (%s, %s): the %s backend does not implement it yet",
                           n->name, ert_graph_op_name(n->op), ert_dtype_name(dt), s->be->name);
        goto fail;
    }
    if ((o->precision == ERT_DTYPE_F16 || o->precision == ERT_DTYPE_BF16) && s->be->device == ERT_DEVICE_CUDA &&
        (st = ert_s_lower_precision(s, o->precision)))
        goto fail;
    if ((o->precision == ERT_DTYPE_F16 || o->precision == ERT_DTYPE_BF16) && s->be->device == ERT_DEVICE_CUDA &&
        !(o->flags & ERT_SESSION_NO_NHWC) && (st = ert_s_to_channels_last(s)))
        goto fail;
    if ((st = plan(s))) goto fail;
    if (!plan_only) {
        if (s->n_threads > 1 && (st = ert_threadpool_create(s->n_threads, &s->pool)) != ERT_OK) {
            ert_set_error(ctx, st, "cannot start %d worker threads", s->n_threads);
            goto fail;
        }
        if ((st = bind(s, o))) goto fail;
        if (s->be->plan_cache_save) s->be->plan_cache_save(s->bctx);
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
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ert_status st = build(m, o, false, out);
    if (st) return st;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ert_session *s = *out;
    s->stats.mode = o ? o->create_mode : ERT_CREATE_TUNED;
    if (s->be->create_stats) s->be->create_stats(s->bctx, &s->stats);
    s->stats.create_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    return ERT_OK;
}

ert_status ert_session_create_stats(const ert_session *s, ert_create_stats *out) {
    if (!s || !out) return ERT_E_ARG;
    *out = s->stats;
    return ERT_OK;
}

static ert_status session_run(ert_session *s) {
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
        return ert_set_error(s->ctx, st, "node '%s' (%s) failed on %s: %s", n ? n->name : "?", n ? ert_graph_op_name(n->op) : "?",
                             s->be->name,
                             detail[0] ? detail
                             : st == ERT_E_UNSUPPORTED ? "the backend does not implement it for these inputs"
                                                       : ert_status_str(st));
    }
    return ERT_OK;
}

/* Non-finite values of a float tensor: count, first index and value. f16 and
 * bf16 by their bits (exponent all ones). */
static int64_t count_nonfinite(const stensor *t, int64_t *first, float *first_value) {
    int64_t n = (int64_t)(t->nbytes / ert_dtype_size(t->dtype)), cnt = 0;
    *first = -1;
    for (int64_t i = 0; i < n; i++) {
        float v;
        if (t->dtype == ERT_DTYPE_F32) {
            v = ((const float *)t->data)[i];
            if (isfinite(v)) continue;
        } else {
            uint16_t h = ((const uint16_t *)t->data)[i];
            uint16_t e = t->dtype == ERT_DTYPE_F16 ? 0x7C00 : 0x7F80, m = t->dtype == ERT_DTYPE_F16 ? 0x03FF : 0x007F;
            if ((h & e) != e) continue;
            v = (h & m) ? NAN : (h & 0x8000) ? -INFINITY : INFINITY;
        }
        if (cnt++ == 0) {
            *first = i;
            *first_value = v;
        }
    }
    return cnt;
}

static ert_status session_run_check_finite(ert_session *s, ert_nonfinite *out) {
    memset(out, 0, sizeof *out);
    out->node_index = -1;
    if (s->be->device != ERT_DEVICE_CPU)
        return ert_set_error(s->ctx, ERT_E_UNSUPPORTED, "the finite check runs CPU sessions only (this one is %s)",
                             s->be->name);
    for (int k = 0; k < s->n_sched; k++) {
        int failed = -1;
        ert_status st = s->be->run(s->bctx, s->kptr + k, 1, &failed);
        const snode *n = &s->n[s->sched[k]];
        if (st != ERT_OK) {
            char detail[ERT_ERRMSG_SIZE];
            snprintf(detail, sizeof detail, "%s", ert_last_error(s->ctx));
            return ert_set_error(s->ctx, st, "node '%s' (%s) failed: %s", n->name, ert_graph_op_name(n->op), detail);
        }
        for (int j = 0; j < n->n_out; j++) {
            const stensor *t = &s->t[n->out[j]];
            if (t->dtype != ERT_DTYPE_F32 && t->dtype != ERT_DTYPE_F16 && t->dtype != ERT_DTYPE_BF16) continue;
            int64_t first;
            float v = 0;
            int64_t cnt = count_nonfinite(t, &first, &v);
            if (!cnt) continue;
            *out = (ert_nonfinite){.node_index = k, .node = n->name, .op = ert_graph_op_name(n->op), .output = t->name,
                                   .count = cnt, .first_index = first, .first_value = v};
            return ert_set_error(s->ctx, ERT_E_NUMERIC,
                                 "node '%s' (%s, #%d in run order): output '%s' has %lld non-finite value%s, the first "
                                 "(%g) at index %lld",
                                 n->name, ert_graph_op_name(n->op), k, t->name, (long long)cnt, cnt == 1 ? "" : "s", (double)v,
                                 (long long)first);
        }
    }
    return ERT_OK;
}

/* Calls that read or write the arena run with the session's running flag
 * held; a second thread gets ERT_E_STATE (busy_internal.h). */
ert_status ert_session_run(ert_session *s) {
    if (!s) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->ctx, "session", session_run(s));
}

ert_status ert_session_run_check_finite(ert_session *s, ert_nonfinite *out) {
    if (!s || !out) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->ctx, "session", session_run_check_finite(s, out));
}

/* Node by node with each node's time: the backend's device time between
 * events where it has them (run_timed), else the wall time of the node run
 * alone. Nothing is allocated (prof_ms is sized at create). */
static ert_status session_profile(ert_session *s, ert_profile_entry *out, int cap, int *n) {
    int failed = -1;
    ert_status st = ERT_OK;
    s->ctx->err[0] = 0;
    if (s->be->run_timed) {
        st = s->be->run_timed(s->bctx, s->kptr, s->n_sched, &failed, s->prof_ms);
    } else {
        for (int k = 0; st == ERT_OK && k < s->n_sched; k++) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            st = s->be->run(s->bctx, s->kptr + k, 1, &failed);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            s->prof_ms[k] = (float)((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6);
            if (st) failed = k;
        }
    }
    if (st != ERT_OK) {
        char detail[ERT_ERRMSG_SIZE];
        snprintf(detail, sizeof detail, "%s", ert_last_error(s->ctx));
        const snode *nd = failed >= 0 && failed < s->n_sched ? &s->n[s->sched[failed]] : NULL;
        return ert_set_error(s->ctx, st, "node '%s' (%s) failed on %s: %s", nd ? nd->name : "?",
                             nd ? ert_graph_op_name(nd->op) : "?", s->be->name, detail[0] ? detail : ert_status_str(st));
    }
    *n = s->n_sched;
    for (int k = 0; k < s->n_sched && k < cap; k++) {
        const snode *nd = &s->n[s->sched[k]];
        out[k].node = nd->name;
        out[k].op = ert_graph_op_name(nd->op);
        out[k].ms = s->prof_ms[k];
    }
    return ERT_OK;
}

ert_status ert_session_profile(ert_session *s, ert_profile_entry *out, int cap, int *n) {
    if (!s || !n || (cap > 0 && !out)) return ERT_E_ARG;
    *n = 0;
    ERT_BUSY_RETURN(&s->running, s->ctx, "session", session_profile(s, out, cap, n));
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

ert_status ert_session_output_device(ert_session *s, int i, void **dev) {
    if (!s || !dev) return ERT_E_ARG;
    if (i < 0 || i >= s->n_out) return ert_set_error(s->ctx, ERT_E_ARG, "output index %d out of range [0, %d)", i, s->n_out);
    if (!s->be->weights_in_arena)
        return ert_set_error(s->ctx, ERT_E_UNSUPPORTED, "ert_session_output_device: a %s session has no GPU memory",
                             s->be->name);
    *dev = s->t[s->out_t[i]].data;
    return ERT_OK;
}

static ert_status session_sync_inputs(ert_session *s) {
    if (!(s->flags & ERT_SESSION_DEVICE_INPUTS) || !s->be->weights_in_arena) return ERT_OK;
    for (int i = 0; i < s->n_in; i++) {
        const stensor *t = &s->t[s->in_t[i]];
        if (t->host == t->data) continue; /* host-visible arena: nothing to copy */
        ert_status st = s->be->upload(s->bctx, t->data, t->host, t->nbytes);
        if (st != ERT_OK) return ert_set_error(s->ctx, st, "cannot copy input '%s' to the GPU", t->name);
    }
    return ERT_OK;
}

ert_status ert_session_sync_inputs(ert_session *s) {
    if (!s) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->ctx, "session", session_sync_inputs(s));
}

static ert_status session_set_input(ert_session *s, int i, const void *data, size_t bytes) {
    if (i < 0 || i >= s->n_in) return ert_set_error(s->ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, s->n_in);
    const stensor *t = &s->t[s->in_t[i]];
    if (bytes != t->nbytes)
        return ert_set_error(s->ctx, ERT_E_SHAPE, "input '%s' holds %zu bytes, %zu given", t->name, t->nbytes, bytes);
    memcpy(t->host, data, bytes);
    return ERT_OK;
}

ert_status ert_session_set_input(ert_session *s, int i, const void *data, size_t bytes) {
    if (!s || !data) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->ctx, "session", session_set_input(s, i, data, bytes));
}

ert_status ert_session_output_data(ert_session *s, int i, const void **data) {
    if (!s || !data) return ERT_E_ARG;
    if (i < 0 || i >= s->n_out)
        return ert_set_error(s->ctx, ERT_E_ARG, "output index %d out of range [0, %d)", i, s->n_out);
    *data = s->t[s->out_t[i]].host;
    return ERT_OK;
}

static ert_status session_get_output(ert_session *s, int i, void *data, size_t bytes) {
    if (i < 0 || i >= s->n_out)
        return ert_set_error(s->ctx, ERT_E_ARG, "output index %d out of range [0, %d)", i, s->n_out);
    const stensor *t = &s->t[s->out_t[i]];
    if (bytes != t->nbytes)
        return ert_set_error(s->ctx, ERT_E_SHAPE, "output '%s' holds %zu bytes, %zu asked", t->name, t->nbytes, bytes);
    memcpy(data, t->host, bytes);
    return ERT_OK;
}

ert_status ert_session_get_output(ert_session *s, int i, void *data, size_t bytes) {
    if (!s || !data) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->ctx, "session", session_get_output(s, i, data, bytes));
}

/* ------------------------------------------------------------------ introspection (tests, CLI internals) */

const ert_plan_block *ert_session_plan_blocks(const ert_session *s, int *n) {
    *n = s->n_blocks;
    return s->blocks;
}

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

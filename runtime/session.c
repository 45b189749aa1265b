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
 *      In CUDA f32 sessions the int8 nodes alone (passes/layout.c).
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

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Convert n f16/bf16 values to a new f32 buffer. */
static float *widen(const void *src, int64_t n, ert_dtype dt) {
    float *d = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!d) return NULL;
    const uint16_t *h = src;
    if (dt == ERT_DTYPE_F16) ert_f16_to_f32_n(d, h, (size_t)n);
    else
        for (int64_t i = 0; i < n; i++) d[i] = ert_bf16_to_f32(h[i]);
    return d;
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
            return ert_set_error(s->g.ctx, ERT_E_NOT_FOUND, "input_values[%d]: the model has no input '%s'", k,
                                 iv->name ? iv->name : "(null)");
        ert_gtensor *t = &s->g.t[ti];
        if (t->mem != ERT_MEM_NONE)
            return ert_set_error(s->g.ctx, ERT_E_ARG, "input '%s' is given a value twice", t->name);
        if (!iv->data || iv->dtype != t->dtype || iv->ndim != t->ndim)
            return ert_set_error(s->g.ctx, ERT_E_SHAPE, "input '%s': value given as %s rank %d, the model says %s rank %d",
                                 t->name, ert_dtype_name(iv->dtype), iv->ndim, ert_dtype_name(t->dtype), t->ndim);
        for (int d = 0; d < t->ndim; d++)
            if (iv->dims[d] < 0 || (t->dims[d] >= 0 && t->dims[d] != iv->dims[d]))
                return ert_set_error(s->g.ctx, ERT_E_SHAPE, "input '%s': value dim %d is %lld, the model says %lld", t->name,
                                     d, (long long)iv->dims[d], (long long)t->dims[d]);
        memcpy(t->dims, iv->dims, sizeof t->dims);
        if (!ert_graph_set_nbytes(t)) return ert_set_error(s->g.ctx, ERT_E_SHAPE, "input '%s': size overflows", t->name);
        int64_t ne = 0;
        ert_dims_nelems(t->ndim, t->dims, &ne);
        if (ert_graph_is_float16ish(t->dtype)) {
            t->owned = widen(iv->data, ne, t->dtype);
            t->orig_dtype = t->dtype;
            t->dtype = ERT_DTYPE_F32;
            ert_graph_set_nbytes(t);
        } else {
            t->owned = malloc(t->nbytes ? t->nbytes : 1);
            if (t->owned) memcpy(t->owned, iv->data, t->nbytes);
        }
        if (!t->owned) return ert_graph_oom(&s->g);
        t->cdata = t->owned;
        t->mem = ERT_MEM_OWNED;
        t->defined = true;
    }
    return ERT_OK;
}

/* Shape inference + folding over the model's nodes, with the precision
 * rewrites of step 2. map[] turns model tensor ids into session ids. */
static ert_status infer(ert_session *s) {
    const ert_model *m = s->model;
    int32_t *map = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *map);
    if (!map) return ert_graph_oom(&s->g);
    for (int i = 0; i < m->n_tensors; i++) map[i] = i;
    ert_status st = ERT_OK;
    /* f16/bf16 weights -> f32 constants */
    for (int i = 0; i < m->n_tensors; i++) {
        ert_gtensor *t = &s->g.t[i];
        if (t->mem != ERT_MEM_CONST || !ert_graph_is_float16ish(t->dtype)) continue;
        int64_t ne;
        ert_dims_nelems(t->ndim, t->dims, &ne);
        t->owned = widen(t->cdata, ne, t->dtype);
        if (!t->owned) {
            st = ert_graph_oom(&s->g);
            goto done;
        }
        t->cdata = t->owned;
        t->mem = ERT_MEM_OWNED;
        t->orig_dtype = t->dtype;
        t->dtype = ERT_DTYPE_F32;
        ert_graph_set_nbytes(t);
    }
    /* f16/bf16 graph inputs: Cast to f32 in front */
    for (int i = 0; i < m->n_inputs; i++) {
        int32_t ti = m->inputs[i];
        if (!ert_graph_is_float16ish(s->g.t[ti].dtype) || s->g.t[ti].mem != ERT_MEM_NONE) continue; /* frozen: a constant */
        int32_t c = ert_graph_add_tensor(&s->g, s->g.t[ti].name);
        ert_gnode *n = c >= 0 ? ert_graph_add_node(&s->g, ERT_OP_CAST, NULL, s->g.t[ti].name, 1, 1) : NULL;
        if (!n) {
            st = ert_graph_oom(&s->g);
            goto done;
        }
        ert_gtensor *ct = &s->g.t[c];
        *ct = s->g.t[ti];
        ct->mem = ERT_MEM_NONE;
        ct->dtype = ERT_DTYPE_F32;
        ct->alias = ct->block = -1;
        ert_graph_set_nbytes(ct);
        n->in[0] = ti;
        n->out[0] = c;
        n->params.cast.to = ERT_DTYPE_F32;
        map[ti] = c;
    }
    for (int i = 0; i < m->n_nodes; i++) {
        ert_gnode *n;
        if ((st = ert_graph_infer_node(&s->g, &m->nodes[i], map, &n)) != ERT_OK) goto done;
    }
    /* graph outputs declared f16/bf16: Cast back */
    s->g.n_outputs = m->n_outputs;
    s->g.outputs = malloc((size_t)(m->n_outputs + 1) * sizeof *s->g.outputs);
    s->g.n_inputs = m->n_inputs;
    s->g.inputs = malloc((size_t)(m->n_inputs + 1) * sizeof *s->g.inputs);
    if (!s->g.outputs || !s->g.inputs) {
        st = ert_graph_oom(&s->g);
        goto done;
    }
    s->g.n_inputs = 0;
    for (int i = 0; i < m->n_inputs; i++)
        if (s->g.t[m->inputs[i]].mem == ERT_MEM_NONE) s->g.inputs[s->g.n_inputs++] = m->inputs[i]; /* frozen ones are constants */
    for (int i = 0; i < m->n_outputs; i++) {
        int32_t ti = map[m->outputs[i]];
        s->g.outputs[i] = ti;
        /* The model's declared dtype wins: a node fed by inputs already
         * widened to f32 infers f32 although the model promises f16. */
        ert_dtype want = m->tensors[m->outputs[i]].dtype;
        if (!ert_graph_is_float16ish(want)) want = s->g.t[ti].orig_dtype;
        if (!ert_graph_is_float16ish(want) || s->g.t[ti].dtype != ERT_DTYPE_F32) continue;
        s->g.t[ti].orig_dtype = want;
        int32_t c = ert_graph_add_tensor(&s->g, s->g.t[ti].name);
        ert_gnode *n = c >= 0 ? ert_graph_add_node(&s->g, ERT_OP_CAST, NULL, s->g.t[ti].name, 1, 1) : NULL;
        if (!n) {
            st = ert_graph_oom(&s->g);
            goto done;
        }
        ert_gtensor *ct = &s->g.t[c];
        *ct = s->g.t[ti];
        ct->mem = ERT_MEM_NONE;
        ct->owned = NULL;
        ct->cdata = NULL;
        ct->dtype = ct->orig_dtype;
        ct->alias = ct->block = -1;
        ert_graph_set_nbytes(ct);
        n->in[0] = ti;
        n->out[0] = c;
        n->params.cast.to = ct->dtype;
        s->g.outputs[i] = c;
    }
done:
    free(map);
    return st;
}

/* ------------------------------------------------------------------ step 5-6 */

/* the input a backend's packing replaces (node_packed_bytes): the weight, QLinearConv's input 3 */
static int packed_input(const ert_gnode *n) { return n->op == ERT_OP_QLINEAR_CONV ? 3 : 1; }

/* a constant weight whose every reader runs from the backend's packed copy
 * (plan: node_packed_only): the arena holds no copy of it */
static bool pk_only(const ert_gtensor *t) {
    return t->n_uses > 0 && t->n_packed_uses == t->n_uses && (t->mem == ERT_MEM_CONST || t->mem == ERT_MEM_OWNED);
}

static ert_status plan(ert_session *s) {
    ert_graph_count_uses(&s->g, NULL);
    s->sched = malloc((size_t)(s->g.nn + 1) * sizeof *s->sched);
    if (!s->sched) return ert_graph_oom(&s->g);
    s->n_sched = 0;
    for (int i = 0; i < s->g.nn; i++)
        if (!s->g.n[i].dead) s->sched[s->n_sched++] = i;
    /* lifetimes over the schedule; graph inputs and outputs (a constant
     * output is copied into the io region once, at create) are io */
    ert_graph_lifetimes(&s->g, s->sched, s->n_sched);
    for (int i = 0; i < s->g.n_inputs; i++) s->g.t[s->g.inputs[i]].mem = ERT_MEM_IO;
    for (int i = 0; i < s->g.n_outputs; i++) s->g.t[s->g.outputs[i]].mem = ERT_MEM_IO;
    ert_graph_alias_copies(&s->g, s->sched, s->n_sched);
    if (!(s->g.flags & ERT_SESSION_NO_FUSE)) ert_graph_plan_views(&s->g, s->sched, s->n_sched);
    ert_graph_alias_extend(&s->g);
    /* backend scratch (e.g. cuDNN workspace) from concrete shapes */
    if (s->g.be->node_workspace) {
        for (int k = 0; k < s->n_sched; k++) {
            ert_gnode *n = &s->g.n[s->sched[k]];
            ert_tview v[64];
            ert_kargs a;
            if (n->host || !ert_graph_shape_args(&s->g, n, v, 64, &a)) continue;
            size_t extra = 0;
            ert_status st = s->g.be->node_workspace(s->g.bctx, &a, &extra);
            if (st != ERT_OK) return st;
            n->ws_bytes += extra;
        }
    }
    /* blocks: activation roots, then workspaces */
    size_t peak, lb, ws_max;
    /* CPU sessions of a batch > 1: batch strips where they pay (strips.c) */
    const int64_t N = s->g.n_inputs > 0 && s->g.t[s->g.inputs[0]].ndim > 0 ? s->g.t[s->g.inputs[0]].dims[0] : 1;
    s->strip_n = s->g.be->device == ERT_DEVICE_CPU && !(s->g.flags & ERT_SESSION_NO_STRIPS) ? N : 1;
    ert_status st = ert_strips_plan(&s->g, s->sched, s->n_sched, s->strip_n, &s->strips, &s->n_strips, &s->strip_in,
                                    &peak, &lb, &ws_max);
    if (st) return st;
    /* weights the backend repacks for its kernels (a node's constant weight:
     * input 1, QLinearConv's input 3). Where the backend's kernel then reads
     * only the packed copy (node_packed_only: the int8 tensor-core convs),
     * the weight itself stays out of device memory once every live reader
     * is such a node: the packed copy is the one the GPU holds. */
    ert_graph_count_uses(&s->g, NULL);
    for (int i = 0; i < s->g.nt; i++) s->g.t[i].n_packed_uses = 0;
    for (int k = 0; s->g.be->node_packed_bytes && !(s->g.flags & ERT_SESSION_NO_PACK) && k < s->n_sched; k++) {
        ert_gnode *n = &s->g.n[s->sched[k]];
        ert_tview v[64];
        ert_kargs a;
        const int wi = packed_input(n);
        n->pk_bytes = 0;
        n->pk_only = false;
        if (n->host || n->n_in <= wi || !ert_graph_is_const(&s->g, n->in[wi]) ||
            !ert_graph_shape_args(&s->g, n, v, 64, &a))
            continue;
        size_t b = s->g.be->node_packed_bytes(&a);
        if (!b) continue;
        n->pk_bytes = a.packed_bytes = b;
        if (s->g.be->weights_in_arena && s->g.be->node_packed_only) {
            for (int j = 0; j < n->n_in; j++) /* the constants' values, for a backend that checks them */
                if (n->in[j] >= 0 && ert_graph_is_const(&s->g, n->in[j])) v[j].data = (void *)s->g.t[n->in[j]].cdata;
            n->pk_only = s->g.be->node_packed_only(s->g.bctx, &a);
            if (n->pk_only) s->g.t[n->in[wi]].n_packed_uses++;
        }
    }
    /* weights region: constants the session made that live nodes still read */
    size_t w = 0, io = 0, mapped = 0, pk_only_bytes = 0;
    for (int i = 0; i < s->g.nt; i++) {
        ert_gtensor *t = &s->g.t[i];
        if (pk_only(t)) {
            pk_only_bytes += t->nbytes; /* bind packs it from its host copy */
        } else if (t->mem == ERT_MEM_OWNED && t->n_uses > 0) {
            t->offset = w;
            w = ert_align_up(w + t->nbytes, ERT_ALIGN);
        } else if (t->mem == ERT_MEM_CONST && t->n_uses > 0) {
            if (s->g.be->weights_in_arena) { /* device memory: weights are copied in */
                t->offset = w;
                w = ert_align_up(w + t->nbytes, ERT_ALIGN);
            } else {
                mapped += t->nbytes;
            }
        }
    }
    for (int k = 0; k < s->n_sched; k++) {
        ert_gnode *n = &s->g.n[s->sched[k]];
        if (!n->pk_bytes) continue;
        if (n->pk_bytes > SIZE_MAX / 2 - w) return ert_set_error(s->g.ctx, ERT_E_ARENA, "node '%s': packed weights too large", n->name);
        n->pk_offset = w;
        w = ert_align_up(w + n->pk_bytes, ERT_ALIGN);
    }
    if (pk_only_bytes)
        ert_log(s->g.ctx, ERT_LOG_INFO, "%.1f MiB of weights held on the device only in their kernels' packed form",
                (double)pk_only_bytes / (1 << 20));
    /* io region: graph inputs and outputs (the same tensor once) */
    for (int i = 0; i < s->g.nt; i++) {
        ert_gtensor *t = &s->g.t[i];
        if (t->mem != ERT_MEM_IO) continue;
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
    /* elided views leave the schedule (the plan above is final); strips hold none, so each keeps its
     * length */
    int ns = 0, si = 0;
    for (int k = 0; k < s->n_sched; k++) {
        if (s->g.n[s->sched[k]].elided) continue;
        for (; si < s->n_strips && s->strips[si].a == k; si++) {
            s->strips[si].b += ns - k;
            s->strips[si].a = ns;
        }
        s->sched[ns++] = s->sched[k];
    }
    s->n_sched = ns;
    return ERT_OK;
}

/* ------------------------------------------------------------------ step 7 */

static ert_status bind(ert_session *s, const ert_session_options *o) {
    double t0 = now_ms();
    size_t total = s->mem.total_bytes;
    const ert_backend *be = s->g.be;
    ert_status st;
    char parts[160];
    snprintf(parts, sizeof parts, "weights %zu, io %zu, activations %zu", s->w_bytes, s->io_bytes, s->act_bytes);
    st = ert_graph_arena(s->g.ctx, be, s->g.bctx, o, total, parts, &s->arena, &s->arena_bytes, &s->arena_owned);
    if (st != ERT_OK) return st;
    uint8_t *wbase = s->arena, *iobase = s->arena + s->w_bytes, *abase = iobase + s->io_bytes;
    void *ioh = NULL;
    if ((st = be->io_host(s->g.bctx, iobase, s->io_bytes, &ioh)) != ERT_OK)
        return ert_set_error(s->g.ctx, st, "cannot allocate %zu bytes of host memory for inputs/outputs", s->io_bytes);
    s->io_host = ioh;
    for (int i = 0; i < s->g.nt; i++) {
        ert_gtensor *t = &s->g.t[i];
        if (pk_only(t)) { /* not in the arena: its readers' bind_node packs it from the host copy */
            t->data = (void *)t->cdata;
            continue;
        }
        switch (t->mem) {
        case ERT_MEM_CONST:
            if (be->weights_in_arena && t->n_uses > 0) {
                t->data = wbase + t->offset;
                if ((st = be->upload(s->g.bctx, t->data, t->cdata, t->nbytes)) != ERT_OK)
                    return ert_set_error(s->g.ctx, st, "cannot upload weight '%s'", t->name);
            } else {
                t->data = (void *)t->cdata;
            }
            break;
        case ERT_MEM_OWNED:
            if (t->n_uses > 0) {
                t->data = wbase + t->offset;
                if ((st = be->upload(s->g.bctx, t->data, t->cdata, t->nbytes)) != ERT_OK)
                    return ert_set_error(s->g.ctx, st, "cannot upload weight '%s'", t->name);
            }
            break;
        case ERT_MEM_IO:
            t->data = iobase + t->offset;
            t->host = s->io_host + t->offset;
            break;
        case ERT_MEM_ACT:
            if (t->alias < 0 && t->block >= 0) t->data = abase + s->g.blocks[t->block].offset;
            break;
        default: break;
        }
    }
    ert_graph_resolve_aliases(&s->g);
    /* constant graph outputs: written once, on both sides */
    for (int i = 0; i < s->g.n_outputs; i++) {
        ert_gtensor *t = &s->g.t[s->g.outputs[i]];
        if (!t->cdata) continue;
        memcpy(t->host, t->cdata, t->nbytes);
        if (t->host != t->data && (st = be->upload(s->g.bctx, t->data, t->cdata, t->nbytes)) != ERT_OK)
            return ert_set_error(s->g.ctx, st, "cannot upload constant output '%s'", t->name);
    }
    for (int i = 0; i < s->g.nt; i++) {
        if (pk_only(&s->g.t[i])) continue; /* freed once bound */
        free(s->g.t[i].owned);
        s->g.t[i].owned = NULL;
        if (s->g.t[i].mem == ERT_MEM_OWNED) s->g.t[i].cdata = NULL; /* may be device memory now */
    }
    double t1 = now_ms();
    s->stats.upload_ms = t1 - t0;
    /* kernel arguments, resolved once */
    s->kptr = calloc((size_t)(s->n_sched + 1), sizeof *s->kptr);
    s->prof_ms = calloc((size_t)(s->n_sched + 1), sizeof *s->prof_ms);
    if (!s->kptr || !s->prof_ms) return ert_graph_oom(&s->g);
    for (int k = 0; k < s->n_sched; k++) {
        ert_gnode *n = &s->g.n[s->sched[k]];
        if ((st = ert_graph_node_args(&s->g, n, s->g.pool, abase)) != ERT_OK) return st;
        n->args.packed = n->pk_bytes ? wbase + n->pk_offset : NULL;
        n->args.packed_bytes = n->pk_bytes;
        n->args.packed_only = n->pk_only;
        if (n->host) st = be->bind_host_node(s->g.bctx, &n->args, ert_graph_cpu_run);
        else st = be->bind_node ? be->bind_node(s->g.bctx, &n->args) : ERT_OK;
        if (st != ERT_OK) {
            if (!ert_last_error(s->g.ctx)[0]) ert_set_error(s->g.ctx, st, "node '%s' (%s): backend setup failed", n->name, ert_graph_op_name(n->op));
            return st;
        }
        s->kptr[k] = &n->args;
    }
    /* the weights only their packed copies hold: no pointer to the host copy stays */
    for (int k = 0; k < s->n_sched; k++) {
        ert_gnode *n = &s->g.n[s->sched[k]];
        if (n->pk_only) n->views[packed_input(n)].data = NULL;
    }
    for (int i = 0; i < s->g.nt; i++) {
        ert_gtensor *t = &s->g.t[i];
        if (!pk_only(t)) continue;
        free(t->owned);
        t->owned = NULL;
        t->data = NULL;
        if (t->mem == ERT_MEM_OWNED) t->cdata = NULL;
    }
    if (s->n_strips) {
        if ((st = ert_strips_bind(&s->g, s->sched, s->n_sched, s->strip_n, s->strips, s->n_strips, s->strip_in,
                                  &s->srun)))
            return ert_graph_oom(&s->g);
        int in = 0;
        for (int i = 0; i < s->n_strips; i++) in += s->strips[i].b - s->strips[i].a + 1;
        ert_log(s->g.ctx, ERT_LOG_INFO, "batch %lld: %d of %d nodes in %d strip%s run image by image",
                (long long)s->strip_n, in, s->n_sched, s->n_strips, s->n_strips == 1 ? "" : "s");
        for (int i = 0; i < s->n_strips; i++)
            ert_log(s->g.ctx, ERT_LOG_DEBUG, "strip %d: nodes %d..%d ('%s' .. '%s')", i, s->strips[i].a, s->strips[i].b,
                    s->g.n[s->sched[s->strips[i].a]].name, s->g.n[s->sched[s->strips[i].b]].name);
    }
    s->stats.bind_ms = now_ms() - t1;
    if (be->bind_io && s->io_host != iobase) {
        ert_io_copy *ins = calloc((size_t)s->g.n_inputs + 1, sizeof *ins), *outs = calloc((size_t)s->g.n_outputs + 1, sizeof *outs);
        if (!ins || !outs) {
            free(ins);
            free(outs);
            return ert_graph_oom(&s->g);
        }
        /* ERT_SESSION_DEVICE_INPUTS: the caller writes the inputs on the GPU */
        int n_in_copy = (s->g.flags & ERT_SESSION_DEVICE_INPUTS) ? 0 : s->g.n_inputs;
        for (int i = 0; i < n_in_copy; i++) {
            const ert_gtensor *t = &s->g.t[s->g.inputs[i]];
            ins[i] = (ert_io_copy){.host = t->host, .dev = t->data, .bytes = t->nbytes};
        }
        /* ERT_SESSION_DEVICE_OUTPUTS: the outputs stay on the GPU, copied down on demand */
        int n_out_copy = (s->g.flags & ERT_SESSION_DEVICE_OUTPUTS) ? 0 : s->g.n_outputs;
        for (int i = 0; i < n_out_copy; i++) {
            const ert_gtensor *t = &s->g.t[s->g.outputs[i]];
            outs[i] = (ert_io_copy){.host = t->host, .dev = t->data, .bytes = t->nbytes};
        }
        st = be->bind_io(s->g.bctx, ins, n_in_copy, outs, n_out_copy);
        free(ins);
        free(outs);
        if (st != ERT_OK) return st;
    }
    return ERT_OK;
}

/* Can the session's backend run n (concrete shapes, dtypes and params)? */
static bool node_supported(const ert_session *s, ert_gnode *n) {
    ert_dtype dt = n->n_in > 0 && n->in[0] >= 0 ? s->g.t[n->in[0]].dtype : ERT_DTYPE_UNDEFINED;
    ert_tview v[64];
    ert_kargs a;
    if (!s->g.be->supports_node || !ert_graph_shape_args(&s->g, n, v, 64, &a)) return s->g.be->supports(n->op, dt);
    return s->g.be->supports_node(&a);
}

/* ------------------------------------------------------------------ public */

static void session_free(ert_session *s) {
    if (!s) return;
    const ert_backend *be = s->g.be;
    for (int i = 0; i < s->g.nn; i++)
        if (be && be->release_node && s->g.n[i].views) be->release_node(s->g.bctx, &s->g.n[i].args);
    free(s->sched);
    free(s->kptr);
    free(s->prof_ms);
    free(s->strips);
    free(s->strip_in);
    ert_strips_free(&s->srun);
    if (be && s->io_host && be->io_host_free) be->io_host_free(s->g.bctx, s->io_host, s->arena + s->w_bytes);
    if (be && s->arena_owned) be->arena_free(s->g.bctx, s->arena);
    if (be && s->bctx_live) be->release(s->g.bctx);
    ert_threadpool_free(s->g.pool);
    ert_graph_release(&s->g);
    free(s);
}

void ert_session_free(ert_session *s) { session_free(s); }

/* Create steps 1..6 (plan_only) or all; passes_only: stop after step 4
 * (before the precision, layout and planning steps: ert_session_build_passed). */
static ert_status build_upto(const ert_model *m, const ert_session_options *opts, bool plan_only, bool passes_only,
                             ert_session **out) {
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
    s->g.ctx = ctx;
    s->g.kc = ert_kernel_choice_of(ctx ? &ctx->kc : NULL);
    s->g.what = "session";
    s->g.widen_half = true;
    s->model = m;
    ert_status st = ERT_OK;
    double t_init = now_ms();
    if (o->device == ERT_DEVICE_CUDA || o->device == ERT_DEVICE_AUTO) {
        s->g.be = ert_cuda_backend_get();
        if (s->g.be) {
            if ((st = s->g.be->init(ctx, o, &s->g.bctx)) == ERT_OK) s->bctx_live = true;
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
        s->g.be = &ert_cpu_backend;
        if ((st = s->g.be->init(ctx, o, &s->g.bctx)) != ERT_OK) goto fail;
        s->bctx_live = true;
    }
    s->stats.init_ms = now_ms() - t_init;
    double t_graph = now_ms();
    if (o->plan_cache_dir && s->g.be->plan_cache_open && !plan_only)
        s->g.be->plan_cache_open(s->g.bctx, o->plan_cache_dir, ert_plan_signature(m, o));
    s->g.flags = o->flags;
    s->g.n_threads = o->n_threads > 0 ? o->n_threads : 1;
    s->planned_only = plan_only;
    if ((st = ert_graph_from_model(&s->g, m))) goto fail;
    if ((st = ert_graph_fix_inputs(&s->g, m, o))) goto fail;
    if ((st = freeze_inputs(s, o))) goto fail;
    if ((st = infer(s))) goto fail;
    if ((st = ert_pass_fold_qdq(&s->g, !(o->flags & ERT_SESSION_NO_FUSE)))) goto fail;
    if (!(o->flags & ERT_SESSION_NO_FOLD)) {
        ert_graph_count_uses(&s->g, NULL);
        if ((st = ert_pass_fold_batchnorm(&s->g))) goto fail;
    }
    if (!(o->flags & ERT_SESSION_NO_FUSE) && (st = ert_pass_fuse(&s->g))) goto fail;
    ert_pass_remove_dead(&s->g);
    /* A node the backend has no kernel for runs on the CPU inside the
     * session where the backend can do that (bind_host_node) and the CPU
     * has the op, logged once per op type; otherwise one backend runs every
     * node: refuse a graph it cannot run (AUTO falls back to the CPU
     * instead). */
    bool logged[ERT_OP_COUNT] = {0};
    for (int i = 0; i < s->g.nn && s->g.be->supports; i++) {
        ert_gnode *n = &s->g.n[i];
        ert_dtype dt = n->n_in > 0 && n->in[0] >= 0 ? s->g.t[n->in[0]].dtype : ERT_DTYPE_UNDEFINED;
        if (n->dead || node_supported(s, n)) continue;
        if (s->g.be->bind_host_node && ert_cpu_backend.supports(n->op, dt)) {
            n->host = true;
            s->n_host++;
            if (!logged[n->op])
                ert_log(ctx, ERT_LOG_INFO, "%s (first: node '%s', %s): no %s kernel, runs on the CPU inside the session",
                        ert_graph_op_name(n->op), n->name, ert_dtype_name(dt), s->g.be->name);
            logged[n->op] = true;
            continue;
        }
        if (o->device == ERT_DEVICE_AUTO && s->g.be != &ert_cpu_backend) {
            ert_log(ctx, ERT_LOG_INFO, "node '%s' (%s): no %s kernel, using the CPU", n->name, ert_graph_op_name(n->op), s->g.be->name);
            s->g.be->release(s->g.bctx);
            s->g.be = &ert_cpu_backend;
            if ((st = s->g.be->init(ctx, o, &s->g.bctx)) != ERT_OK) {
                s->bctx_live = false;
                goto fail;
            }
            continue;
        }
        st = ert_set_error(ctx, ERT_E_UNSUPPORTED, "node '%s' (%s, %s): the %s backend does not implement it yet",
                           n->name, ert_graph_op_name(n->op), ert_dtype_name(dt), s->g.be->name);
        goto fail;
    }
    if (passes_only) {
        *out = s;
        return ERT_OK;
    }
    if ((o->precision == ERT_DTYPE_F16 || o->precision == ERT_DTYPE_BF16) && s->g.be->device == ERT_DEVICE_CUDA &&
        (st = ert_pass_lower_precision(&s->g, o->precision)))
        goto fail;
    /* channels-last: the whole graph in f16/bf16, the int8 nodes alone in f32 */
    if (s->g.be->device == ERT_DEVICE_CUDA && !(o->flags & ERT_SESSION_NO_NHWC) &&
        (st = ert_pass_channels_last(&s->g, o->precision != ERT_DTYPE_F16 && o->precision != ERT_DTYPE_BF16)))
        goto fail;
    if ((st = plan(s))) goto fail;
    s->stats.graph_ms = now_ms() - t_graph; /* the AUTO fallback's CPU init (rare) counts here */
    if (!plan_only) {
        if (s->g.n_threads > 1 && (st = ert_threadpool_create(s->g.n_threads, &s->g.pool)) != ERT_OK) {
            ert_set_error(ctx, st, "cannot start %d worker threads", s->g.n_threads);
            goto fail;
        }
        if ((st = bind(s, o))) goto fail;
        if (s->g.be->plan_cache_save) s->g.be->plan_cache_save(s->g.bctx);
    }
    ert_log(ctx, ERT_LOG_INFO,
            "session on %s: %d of %d nodes scheduled (%d on the CPU fallback); arena %zu bytes (weights %zu, io %zu, activations %zu "
            "= lower bound %zu + %zu planner gap), %zu bytes of weights used in place",
            s->g.be->name, s->n_sched, m->n_nodes, s->n_host, s->mem.total_bytes, s->mem.weights_bytes, s->mem.io_bytes,
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

static ert_status build(const ert_model *m, const ert_session_options *o, bool plan_only, ert_session **out) {
    return build_upto(m, o, plan_only, false, out);
}

ert_status ert_session_build_passed(const ert_model *m, const ert_session_options *o, ert_session **out) {
    if (!m || !out) return ERT_E_ARG;
    return build_upto(m, o, true, true, out);
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
    double t0 = now_ms();
    ert_status st = build(m, o, false, out);
    if (st) return st;
    ert_session *s = *out;
    s->stats.create_ms = now_ms() - t0;
    s->stats.mode = o ? o->create_mode : ERT_CREATE_TUNED;
    if (s->g.be->create_stats) s->g.be->create_stats(s->g.bctx, &s->stats);
    return ERT_OK;
}

ert_status ert_session_create_stats(const ert_session *s, ert_create_stats *out) {
    if (!s || !out) return ERT_E_ARG;
    *out = s->stats;
    return ERT_OK;
}

/* The next node in run order from it (start at {0, 0}): its arguments, schedule step and image (-1: the
 * whole batch; batch strips run a strip's nodes once per image). */
static bool next_node(ert_session *s, ert_strip_it *it, ert_kargs **a, int *k, int64_t *img) {
    if (s->srun.n_entries) return ert_strips_next(&s->srun, it, s->kptr, a, k, img);
    if (it->k >= s->n_sched) return false;
    *a = s->kptr[it->k];
    *k = it->k++;
    *img = -1;
    return true;
}

static ert_status session_run(ert_session *s) {
    int failed = -1;
    s->g.ctx->err[0] = 0; /* a backend may leave a detail (a CUDA error string) */
    ert_status st = ERT_OK;
    if (s->srun.n_entries) { /* batch strips: node by node, a strip's nodes once per image */
        ert_strip_it it = {0};
        ert_kargs *a;
        int k, f;
        int64_t img;
        while (st == ERT_OK && next_node(s, &it, &a, &k, &img))
            if ((st = s->g.be->run(s->g.bctx, &a, 1, &f)) != ERT_OK) failed = k;
    } else {
        st = s->g.be->run(s->g.bctx, s->kptr, s->n_sched, &failed);
    }
    if (st != ERT_OK) {
        char detail[ERT_ERRMSG_SIZE];
        snprintf(detail, sizeof detail, "%s", ert_last_error(s->g.ctx));
        const ert_gnode *n = failed >= 0 && failed < s->n_sched ? &s->g.n[s->sched[failed]] : NULL;
        int64_t pos, val, dim;
        if (n && st == ERT_E_ARG && s->g.be->device == ERT_DEVICE_CPU &&
            ert_gather_bad_index(s->kptr[failed], &pos, &val, &dim))
            return ert_set_error(s->g.ctx, st, "node '%s' (Gather): index %lld (at position %lld) out of range [-%lld, %lld)",
                                 n->name, (long long)val, (long long)pos, (long long)dim, (long long)dim);
        return ert_set_error(s->g.ctx, st, "node '%s' (%s) failed on %s: %s", n ? n->name : "?", n ? ert_graph_op_name(n->op) : "?",
                             s->g.be->name,
                             detail[0] ? detail
                             : st == ERT_E_UNSUPPORTED ? "the backend does not implement it for these inputs"
                                                       : ert_status_str(st));
    }
    return ERT_OK;
}

/* Non-finite values of a float tensor: count, first index and value. f16 and
 * bf16 by their bits (exponent all ones). */
static int64_t count_nonfinite(ert_dtype dt, const void *data, int64_t n, int64_t *first, float *first_value) {
    int64_t cnt = 0;
    *first = -1;
    for (int64_t i = 0; i < n; i++) {
        float v;
        if (dt == ERT_DTYPE_F32) {
            v = ((const float *)data)[i];
            if (isfinite(v)) continue;
        } else {
            uint16_t h = ((const uint16_t *)data)[i];
            uint16_t e = dt == ERT_DTYPE_F16 ? 0x7C00 : 0x7F80, m = dt == ERT_DTYPE_F16 ? 0x03FF : 0x007F;
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
    if (s->g.be->device != ERT_DEVICE_CPU)
        return ert_set_error(s->g.ctx, ERT_E_UNSUPPORTED, "the finite check runs CPU sessions only (this one is %s)",
                             s->g.be->name);
    /* in run order (batch strips: a strip's nodes once per image, each checked on its image) */
    ert_strip_it it = {0};
    ert_kargs *a;
    int k;
    int64_t img;
    while (next_node(s, &it, &a, &k, &img)) {
        int failed = -1;
        ert_status st = s->g.be->run(s->g.bctx, &a, 1, &failed);
        const ert_gnode *n = &s->g.n[s->sched[k]];
        if (st != ERT_OK) {
            char detail[ERT_ERRMSG_SIZE];
            snprintf(detail, sizeof detail, "%s", ert_last_error(s->g.ctx));
            return ert_set_error(s->g.ctx, st, "node '%s' (%s) failed: %s", n->name, ert_graph_op_name(n->op), detail);
        }
        for (int j = 0; j < n->n_out; j++) {
            const ert_gtensor *t = &s->g.t[n->out[j]];
            if (t->dtype != ERT_DTYPE_F32 && t->dtype != ERT_DTYPE_F16 && t->dtype != ERT_DTYPE_BF16) continue;
            int64_t first;
            float v = 0;
            int64_t cnt = count_nonfinite(t->dtype, a->out[j].data, a->out[j].n_elems, &first, &v);
            if (!cnt) continue;
            if (img > 0 && t->ndim > 0 && t->dims[0] > 1 && a->out[j].dims[0] == 1)
                first += img * a->out[j].n_elems; /* a sliced output: an index into the whole tensor */
            *out = (ert_nonfinite){.node_index = k, .node = n->name, .op = ert_graph_op_name(n->op), .output = t->name,
                                   .count = cnt, .first_index = first, .first_value = v};
            return ert_set_error(s->g.ctx, ERT_E_NUMERIC,
                                 "node '%s' (%s, #%d in run order): output '%s' has %lld non-finite value%s%s, the first "
                                 "(%g) at index %lld",
                                 n->name, ert_graph_op_name(n->op), k, t->name, (long long)cnt, cnt == 1 ? "" : "s",
                                 img >= 0 ? " in the first image that has any" : "", (double)v, (long long)first);
        }
    }
    return ERT_OK;
}

/* Calls that read or write the arena run with the session's running flag
 * held; a second thread gets ERT_E_STATE (busy_internal.h). */
ert_status ert_session_run(ert_session *s) {
    if (!s) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->g.ctx, "session", session_run(s));
}

ert_status ert_session_run_check_finite(ert_session *s, ert_nonfinite *out) {
    if (!s || !out) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->g.ctx, "session", session_run_check_finite(s, out));
}

/* Node by node with each node's time: the backend's device time between
 * events where it has them (run_timed), else the wall time of the node run
 * alone. Nothing is allocated (prof_ms is sized at create). */
static ert_status session_profile(ert_session *s, ert_profile_entry *out, int cap, int *n) {
    int failed = -1;
    ert_status st = ERT_OK;
    s->g.ctx->err[0] = 0;
    if (s->g.be->run_timed) {
        st = s->g.be->run_timed(s->g.bctx, s->kptr, s->n_sched, &failed, s->prof_ms);
    } else {
        /* in run order (batch strips: a strip node's time summed over its images) */
        for (int k = 0; k < s->n_sched; k++) s->prof_ms[k] = 0;
        ert_strip_it it = {0};
        ert_kargs *a;
        int k;
        int64_t img;
        while (st == ERT_OK && next_node(s, &it, &a, &k, &img)) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            st = s->g.be->run(s->g.bctx, &a, 1, &failed);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            s->prof_ms[k] += (float)((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6);
            if (st) failed = k;
        }
    }
    if (st != ERT_OK) {
        char detail[ERT_ERRMSG_SIZE];
        snprintf(detail, sizeof detail, "%s", ert_last_error(s->g.ctx));
        const ert_gnode *nd = failed >= 0 && failed < s->n_sched ? &s->g.n[s->sched[failed]] : NULL;
        return ert_set_error(s->g.ctx, st, "node '%s' (%s) failed on %s: %s", nd ? nd->name : "?",
                             nd ? ert_graph_op_name(nd->op) : "?", s->g.be->name, detail[0] ? detail : ert_status_str(st));
    }
    *n = s->n_sched;
    for (int k = 0; k < s->n_sched && k < cap; k++) {
        const ert_gnode *nd = &s->g.n[s->sched[k]];
        out[k].node = nd->name;
        out[k].op = ert_graph_op_name(nd->op);
        out[k].ms = s->prof_ms[k];
    }
    return ERT_OK;
}

ert_status ert_session_profile(ert_session *s, ert_profile_entry *out, int cap, int *n) {
    if (!s || !n || (cap > 0 && !out)) return ERT_E_ARG;
    *n = 0;
    ERT_BUSY_RETURN(&s->running, s->g.ctx, "session", session_profile(s, out, cap, n));
}

ert_status ert_session_memory(const ert_session *s, ert_memory_report *out) {
    if (!s || !out) return ERT_E_ARG;
    *out = s->mem;
    return ERT_OK;
}

int ert_session_n_inputs(const ert_session *s) { return s ? s->g.n_inputs : 0; }
int ert_session_n_outputs(const ert_session *s) { return s ? s->g.n_outputs : 0; }

static ert_status tinfo(const ert_session *s, const int32_t *list, int n, int i, ert_tensor_info *out) {
    if (!s || !out) return ERT_E_ARG;
    if (i < 0 || i >= n) return ert_set_error(s->g.ctx, ERT_E_ARG, "index %d out of range [0, %d)", i, n);
    const ert_gtensor *t = &s->g.t[list[i]];
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    memcpy(out->dims, t->dims, sizeof out->dims);
    return ERT_OK;
}

ert_status ert_session_input_info(const ert_session *s, int i, ert_tensor_info *out) {
    return tinfo(s, s ? s->g.inputs : NULL, s ? s->g.n_inputs : 0, i, out);
}
ert_status ert_session_output_info(const ert_session *s, int i, ert_tensor_info *out) {
    return tinfo(s, s ? s->g.outputs : NULL, s ? s->g.n_outputs : 0, i, out);
}

static ert_status find(const ert_session *s, const int32_t *list, int n, const char *name, int *index) {
    if (!s || !name || !index) return ERT_E_ARG;
    for (int i = 0; i < n; i++)
        if (strcmp(s->g.t[list[i]].name, name) == 0) {
            *index = i;
            return ERT_OK;
        }
    return ert_set_error(s->g.ctx, ERT_E_NOT_FOUND, "no tensor named '%s'", name);
}

ert_status ert_session_find_input(const ert_session *s, const char *name, int *index) {
    return find(s, s ? s->g.inputs : NULL, s ? s->g.n_inputs : 0, name, index);
}
ert_status ert_session_find_output(const ert_session *s, const char *name, int *index) {
    return find(s, s ? s->g.outputs : NULL, s ? s->g.n_outputs : 0, name, index);
}

ert_status ert_session_input_data(ert_session *s, int i, void **data) {
    if (!s || !data) return ERT_E_ARG;
    if (i < 0 || i >= s->g.n_inputs) return ert_set_error(s->g.ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, s->g.n_inputs);
    *data = s->g.t[s->g.inputs[i]].host;
    return ERT_OK;
}

ert_status ert_session_input_device(ert_session *s, int i, void **dev) {
    if (!s || !dev) return ERT_E_ARG;
    if (i < 0 || i >= s->g.n_inputs) return ert_set_error(s->g.ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, s->g.n_inputs);
    if (!s->g.be->weights_in_arena) /* the CPU backend: no device memory */
        return ert_set_error(s->g.ctx, ERT_E_UNSUPPORTED, "ert_session_input_device: a %s session has no GPU memory",
                             s->g.be->name);
    *dev = s->g.t[s->g.inputs[i]].data;
    return ERT_OK;
}

ert_status ert_session_output_device(ert_session *s, int i, void **dev) {
    if (!s || !dev) return ERT_E_ARG;
    if (i < 0 || i >= s->g.n_outputs) return ert_set_error(s->g.ctx, ERT_E_ARG, "output index %d out of range [0, %d)", i, s->g.n_outputs);
    if (!s->g.be->weights_in_arena)
        return ert_set_error(s->g.ctx, ERT_E_UNSUPPORTED, "ert_session_output_device: a %s session has no GPU memory",
                             s->g.be->name);
    *dev = s->g.t[s->g.outputs[i]].data;
    return ERT_OK;
}

static ert_status session_sync_inputs(ert_session *s) {
    if (!(s->g.flags & ERT_SESSION_DEVICE_INPUTS) || !s->g.be->weights_in_arena) return ERT_OK;
    for (int i = 0; i < s->g.n_inputs; i++) {
        const ert_gtensor *t = &s->g.t[s->g.inputs[i]];
        if (t->host == t->data) continue; /* host-visible arena: nothing to copy */
        ert_status st = s->g.be->upload(s->g.bctx, t->data, t->host, t->nbytes);
        if (st != ERT_OK) return ert_set_error(s->g.ctx, st, "cannot copy input '%s' to the GPU", t->name);
    }
    return ERT_OK;
}

ert_status ert_session_sync_inputs(ert_session *s) {
    if (!s) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->g.ctx, "session", session_sync_inputs(s));
}

static ert_status session_set_input(ert_session *s, int i, const void *data, size_t bytes) {
    if (i < 0 || i >= s->g.n_inputs) return ert_set_error(s->g.ctx, ERT_E_ARG, "input index %d out of range [0, %d)", i, s->g.n_inputs);
    const ert_gtensor *t = &s->g.t[s->g.inputs[i]];
    if (bytes != t->nbytes)
        return ert_set_error(s->g.ctx, ERT_E_SHAPE, "input '%s' holds %zu bytes, %zu given", t->name, t->nbytes, bytes);
    memcpy(t->host, data, bytes);
    return ERT_OK;
}

ert_status ert_session_set_input(ert_session *s, int i, const void *data, size_t bytes) {
    if (!s || !data) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->g.ctx, "session", session_set_input(s, i, data, bytes));
}

/* Does output t live only on the GPU after a run (ERT_SESSION_DEVICE_OUTPUTS)? */
static bool output_on_device(const ert_session *s, const ert_gtensor *t) {
    return (s->g.flags & ERT_SESSION_DEVICE_OUTPUTS) && s->g.be->weights_in_arena && t->host != t->data;
}

static ert_status session_output_data(ert_session *s, int i, const void **data) {
    if (i < 0 || i >= s->g.n_outputs)
        return ert_set_error(s->g.ctx, ERT_E_ARG, "output index %d out of range [0, %d)", i, s->g.n_outputs);
    const ert_gtensor *t = &s->g.t[s->g.outputs[i]];
    if (output_on_device(s, t)) {
        ert_status st = s->g.be->download(s->g.bctx, t->host, t->data, t->nbytes);
        if (st != ERT_OK) return ert_set_error(s->g.ctx, st, "cannot copy output '%s' from the GPU", t->name);
    }
    *data = t->host;
    return ERT_OK;
}

ert_status ert_session_output_data(ert_session *s, int i, const void **data) {
    if (!s || !data) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->g.ctx, "session", session_output_data(s, i, data));
}

static ert_status session_get_output(ert_session *s, int i, void *data, size_t bytes) {
    if (i < 0 || i >= s->g.n_outputs)
        return ert_set_error(s->g.ctx, ERT_E_ARG, "output index %d out of range [0, %d)", i, s->g.n_outputs);
    const ert_gtensor *t = &s->g.t[s->g.outputs[i]];
    if (bytes != t->nbytes)
        return ert_set_error(s->g.ctx, ERT_E_SHAPE, "output '%s' holds %zu bytes, %zu asked", t->name, t->nbytes, bytes);
    if (output_on_device(s, t)) {
        ert_status st = s->g.be->download(s->g.bctx, data, t->data, bytes);
        if (st != ERT_OK) return ert_set_error(s->g.ctx, st, "cannot copy output '%s' from the GPU", t->name);
        return ERT_OK;
    }
    memcpy(data, t->host, bytes);
    return ERT_OK;
}

ert_status ert_session_get_output(ert_session *s, int i, void *data, size_t bytes) {
    if (!s || !data) return ERT_E_ARG;
    ERT_BUSY_RETURN(&s->running, s->g.ctx, "session", session_get_output(s, i, data, bytes));
}

/* ------------------------------------------------------------------ introspection (tests, CLI internals) */

const ert_plan_block *ert_session_plan_blocks(const ert_session *s, int *n) {
    *n = s->g.n_blocks;
    return s->g.blocks;
}

bool ert_session_plan_check(const ert_session *s, char *why, size_t cap) {
    return ert_graph_plan_check(&s->g, s->arena, s->mem.total_bytes, why, cap) && ert_graph_view_check(&s->g, why, cap);
}

int ert_session_n_scheduled(const ert_session *s) { return s ? s->n_sched : 0; }

int ert_session_n_cpu_fallback(const ert_session *s) { return s ? s->n_host : 0; }

ert_op ert_session_scheduled_op(const ert_session *s, int k) {
    return (s && k >= 0 && k < s->n_sched) ? s->g.n[s->sched[k]].op : ERT_OP_INVALID;
}

ert_status ert_session_output_shapes(const ert_model *m, int batch, ert_tensor_info *out) {
    ert_session_options o = {.batch = batch};
    ert_session *s = NULL;
    ert_status st = build(m, &o, true, &s);
    if (st != ERT_OK) return st;
    for (int i = 0; i < s->g.n_outputs && st == ERT_OK; i++) st = tinfo(s, s->g.outputs, s->g.n_outputs, i, &out[i]);
    session_free(s);
    return st;
}

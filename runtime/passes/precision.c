/* Session step 4b: reduced precision (CUDA sessions, options.precision
 * F16/BF16). Called from build() in session.c.
 *
 * Every float activation is planned in dt and every float weight converted
 * to it, except in f32 islands, where nodes keep computing in f32:
 *   - a model file that is itself mixed precision (it holds f16/bf16
 *     activations, e.g. onnxconverter-common's float16 conversion or
 *     Paddle2ONNX's fp16 export) keeps f32 wherever the file computes in f32:
 *     exporters leave ops there on purpose (PP-OCRv3's detector keeps one
 *     BatchNormalization in f32 because its running variance reaches 2.2e7,
 *     which is inf in f16; lowering it anyway gave an all-zero map). Such
 *     files are widened to f32 at load, so which tensors were f32 is
 *     recomputed here: a Cast's output has the file's `to` (orig_dtype),
 *     every other node's output the file dtype of its first float
 *     activation input;
 *   - a node reading a constant with finite values beyond f16's range
 *     (|v| > 65504) computes in f32 (f16 sessions only; bf16 has f32's
 *     range): converting the constant would make it inf. Clip, Min, Max and
 *     Where are exempt: a saturated bound or mask means the same in f16.
 * Where an island meets dt tensors a Cast is inserted before the reading
 * node (none are needed at a mixed file's own boundaries: its Casts are
 * there and become real conversions). A constant read by island and dt
 * nodes alike is copied: the island keeps the f32 one. Graph inputs and
 * outputs stay f32: a Cast to dt in front of the first dt reader of each
 * input, and a Cast back at the end for outputs a dt node writes. */
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Retype a copy of tensor `from` as dt (a planned activation). */
int32_t ert_pass_retyped_copy(ert_graph *g, int32_t from, ert_dtype dt) {
    int32_t c = ert_graph_add_tensor(g, g->t[from].name);
    if (c < 0) return -1;
    ert_gtensor *t = &g->t[c];
    *t = g->t[from];
    t->name_owned = NULL; /* the name stays from's */
    t->mem = ERT_MEM_NONE;
    t->owned = NULL;
    t->cdata = NULL;
    t->dtype = t->orig_dtype = dt;
    t->alias = t->block = -1;
    t->first = t->last = -1;
    ert_graph_set_nbytes(t);
    return c;
}

static bool is_float(ert_dtype d) { return d == ERT_DTYPE_F32 || ert_graph_is_float16ish(d); }

/* A planned (non-constant) tensor with a float dtype. */
static bool float_act(const ert_graph *g, int32_t t) {
    return t >= 0 && !ert_graph_is_const(g, t) && g->t[t].defined && is_float(g->t[t].dtype);
}

/* The first float output of n, or -1. */
static int32_t first_float_out(const ert_graph *g, const ert_gnode *n) {
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && is_float(g->t[n->out[k]].dtype)) return n->out[k];
    return -1;
}

/* The dtype each tensor has in the model file (see the header): fdt[nt]. */
static void file_dtypes(const ert_graph *g, ert_dtype *fdt) {
    for (int i = 0; i < g->nt; i++) {
        const ert_gtensor *t = &g->t[i];
        fdt[i] = ert_graph_is_float16ish(t->orig_dtype) ? t->orig_dtype : t->dtype;
    }
    for (int i = 0; i < g->nn; i++) {
        const ert_gnode *n = &g->n[i];
        if (n->dead || n->op == ERT_OP_CAST) continue; /* a Cast's output has the file's `to` already */
        ert_dtype d = ERT_DTYPE_UNDEFINED;
        for (int k = 0; k < n->n_in && d == ERT_DTYPE_UNDEFINED; k++)
            if (float_act(g, n->in[k])) d = fdt[n->in[k]];
        if (d == ERT_DTYPE_UNDEFINED) continue;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && is_float(g->t[n->out[k]].dtype)) fdt[n->out[k]] = d;
    }
}

/* Largest finite |v| of an f32 constant. */
static double const_absmax(const ert_gtensor *t) {
    int64_t ne = 0;
    if (!t->cdata || !ert_dims_nelems(t->ndim, t->dims, &ne)) return 0;
    /* on the bits: |x| of a finite float orders as its magnitude bits, and
     * inf/NaN (>= 0x7f800000) are left out; a loop the compiler vectorises */
    const uint32_t *u = t->cdata;
    uint32_t m = 0;
    for (int64_t k = 0; k < ne; k++) {
        uint32_t a = u[k] & 0x7fffffffu;
        a = a < 0x7f800000u ? a : 0u;
        m = a > m ? a : m;
    }
    float f;
    memcpy(&f, &m, sizeof f);
    return (double)f;
}

static bool is_graph_input(const ert_graph *g, int32_t t) {
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] == t) return true;
    return false;
}

static bool overflow_exempt(ert_op op) {
    return op == ERT_OP_CLIP || op == ERT_OP_MIN || op == ERT_OP_MAX || op == ERT_OP_WHERE;
}

/* Insert node `n` (just appended, the last one) at index `at`; returns it. */
static ert_gnode *move_last_to(ert_graph *g, int at) {
    ert_gnode tmp = g->n[g->nn - 1];
    memmove(&g->n[at + 1], &g->n[at], (size_t)(g->nn - 1 - at) * sizeof *g->n);
    g->n[at] = tmp;
    return &g->n[at];
}

/* A Cast of t to dt placed before node index `at`; its output id, or -1. */
static int32_t cast_before(ert_graph *g, int at, int32_t t, ert_dtype dt) {
    int32_t c = ert_pass_retyped_copy(g, t, dt);
    if (c < 0) return -1;
    ert_gnode *n = ert_graph_add_node(g, ERT_OP_CAST, NULL, g->t[t].name, 1, 1);
    if (!n) return -1;
    n->in[0] = t;
    n->out[0] = c;
    n->params.cast.to = dt;
    move_last_to(g, at);
    return c;
}

ert_status ert_pass_lower_precision(ert_graph *g, ert_dtype dt) {
    ert_graph_count_uses(g, NULL);
    /* A backend may rewrite a conv's f16/bf16 filter in place once at create
     * (CUDA stores it (K, R, S, C) for the tensor cores). A filter read by
     * more than one node gets one private copy per conv, so no reader ever
     * sees another node's layout (this failed on the GPU when two convs
     * shared one filter). */
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *n = &g->n[i];
        if (n->dead || n->op != ERT_OP_CONV || n->n_in < 2) continue;
        int32_t w = n->in[1];
        if (!ert_graph_is_const(g, w) || g->t[w].dtype != ERT_DTYPE_F32 || g->t[w].n_uses < 2) continue;
        size_t nb = g->t[w].nbytes;
        int64_t dims[ERT_MAX_DIMS];
        int nd = g->t[w].ndim;
        const char *name = g->t[w].name;
        memcpy(dims, g->t[w].dims, sizeof dims);
        void *copy = malloc(nb ? nb : 1);
        if (!copy) return ert_graph_oom(g);
        memcpy(copy, g->t[w].cdata, nb);
        int32_t id = -1;
        ert_status st = ert_graph_new_const(g, name, ERT_DTYPE_F32, nd, dims, copy, &id);
        if (st != ERT_OK) return st;
        g->t[w].n_uses--;
        g->t[id].n_uses = 1;
        g->n[i].in[1] = id;
    }
    ert_graph_count_uses(g, NULL);

    /* 1. The f32 islands: island[node] (see the header). */
    ert_status st = ERT_OK;
    int nt0 = g->nt;
    ert_dtype *fdt = malloc((size_t)(nt0 ? nt0 : 1) * sizeof *fdt);
    bool *island = calloc((size_t)(g->nn ? g->nn : 1), sizeof *island);
    bool *keep = calloc((size_t)(nt0 ? nt0 : 1), sizeof *keep); /* activation stays f32 */
    if (!fdt || !island || !keep) {
        st = ert_graph_oom(g);
        goto done;
    }
    file_dtypes(g, fdt);
    /* A mixed file: f16/bf16 activations, and most weight values stored
     * f16/bf16 (an f32 model with one autocast block is lowered whole). */
    bool half_acts = false;
    int64_t n_half_w = 0, n_f32_w = 0;
    for (int i = 0; i < nt0; i++) {
        const ert_gtensor *t = &g->t[i];
        half_acts = half_acts || (t->n_uses > 0 && float_act(g, i) && ert_graph_is_float16ish(fdt[i]));
        int64_t ne = 0; /* the file's own weights, folded away or not */
        if (t->model_id >= 0 && ert_graph_is_const(g, i) && is_float(t->dtype) && ert_dims_nelems(t->ndim, t->dims, &ne)) {
            if (ert_graph_is_float16ish(t->orig_dtype)) n_half_w += ne;
            else n_f32_w += ne;
        }
    }
    bool mixed = half_acts && n_half_w > n_f32_w;
    int n_islands = 0;
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *n = &g->n[i];
        int32_t y = n->dead ? -1 : first_float_out(g, n);
        if (y < 0) continue;
        if (mixed && fdt[y] == ERT_DTYPE_F32) island[i] = true;
        if (dt == ERT_DTYPE_F16 && n->op != ERT_OP_CAST && !overflow_exempt(n->op))
            for (int k = 0; k < n->n_in; k++) {
                int32_t c = n->in[k];
                if (!ert_graph_is_const(g, c) || g->t[c].dtype != ERT_DTYPE_F32) continue;
                double m = const_absmax(&g->t[c]);
                if (m > 65504.0) {
                    if (!island[i])
                        ert_log(g->ctx, ERT_LOG_INFO,
                                "node '%s' (%s) runs in f32 in this f16 session: constant '%s' holds %g, beyond f16's range",
                                n->name, ert_graph_op_name(n->op), g->t[c].name, m);
                    island[i] = true;
                    break;
                }
            }
        if (!island[i]) continue;
        n_islands++;
        for (int k = 0; k < n->n_out; k++)
            if (float_act(g, n->out[k])) keep[n->out[k]] = true;
    }
    if (n_islands)
        ert_log(g->ctx, ERT_LOG_DEBUG, "%d node(s) keep f32 in this %s session%s", n_islands, ert_dtype_name(dt),
                mixed ? " (the model file is mixed precision: its f32 ops stay f32)" : "");

    /* 2. Weights: to dt when a dt node reads them; an island reader keeps f32
     * (its own copy when dt nodes read the constant too). */
    for (int i = 0; i < nt0; i++) {
        ert_gtensor *t = &g->t[i];
        if (!ert_graph_is_const(g, i) || t->dtype != ERT_DTYPE_F32 || t->n_uses == 0 || ert_graph_is_output(g, i))
            continue;
        int n_island = 0, n_low = 0;
        for (int j = 0; j < g->nn; j++) {
            if (g->n[j].dead) continue;
            for (int k = 0; k < g->n[j].n_in; k++)
                if (g->n[j].in[k] == i) {
                    if (island[j]) n_island++;
                    else n_low++;
                    break;
                }
        }
        if (n_low == 0) continue; /* islands only: stays f32 */
        if (n_island > 0) {       /* both: the islands get an f32 copy */
            size_t nb = t->nbytes;
            void *copy = malloc(nb ? nb : 1);
            if (!copy) {
                st = ert_graph_oom(g);
                goto done;
            }
            memcpy(copy, t->cdata, nb);
            int64_t dims[ERT_MAX_DIMS];
            memcpy(dims, t->dims, sizeof dims);
            int32_t id = -1;
            if ((st = ert_graph_new_const(g, t->name, ERT_DTYPE_F32, t->ndim, dims, copy, &id)) != ERT_OK) goto done;
            t = &g->t[i]; /* the tensor array may have moved */
            for (int j = 0; j < g->nn; j++)
                if (!g->n[j].dead && island[j])
                    for (int k = 0; k < g->n[j].n_in; k++)
                        if (g->n[j].in[k] == i) g->n[j].in[k] = id;
        }
        int64_t ne = 0;
        ert_dims_nelems(t->ndim, t->dims, &ne);
        uint16_t *h = malloc((size_t)(ne ? ne : 1) * sizeof *h);
        if (!h) {
            st = ert_graph_oom(g);
            goto done;
        }
        const float *f = t->cdata;
        if (dt == ERT_DTYPE_F16) ert_f32_to_f16_n(h, f, (size_t)ne);
        else ert_f32_to_bf16_n(h, f, (size_t)ne);
        free(t->owned);
        t->owned = h;
        t->cdata = h;
        t->mem = ERT_MEM_OWNED;
        t->dtype = dt;
        ert_graph_set_nbytes(t);
    }
    /* 3. Activations (graph inputs and outputs keep f32; islands' outputs too) */
    for (int i = 0; i < nt0; i++) {
        ert_gtensor *t = &g->t[i];
        if (t->mem != ERT_MEM_NONE || t->dtype != ERT_DTYPE_F32 || !t->defined || ert_graph_is_io(g, i) || keep[i])
            continue;
        t->dtype = dt;
        ert_graph_set_nbytes(t);
    }
    /* A Cast converts to whatever its output now is. */
    for (int i = 0; i < g->nn; i++)
        if (!g->n[i].dead && g->n[i].op == ERT_OP_CAST && g->n[i].out[0] >= 0 && is_float(g->t[g->n[i].out[0]].dtype))
            g->n[i].params.cast.to = g->t[g->n[i].out[0]].dtype;

    /* 4. f32 graph outputs a dt node makes: the node writes a dt activation, a
     * Cast at the end writes the f32 output (a Cast or an island writes the
     * output itself). */
    for (int i = 0; i < g->n_outputs; i++) {
        int32_t to = g->outputs[i];
        if (g->t[to].dtype != ERT_DTYPE_F32 || ert_graph_is_const(g, to)) continue;
        bool skip = false; /* a graph input, or an output listed twice (done already) */
        for (int k = 0; k < g->n_inputs; k++) skip = skip || g->inputs[k] == to;
        for (int k = 0; k < i; k++) skip = skip || g->outputs[k] == to;
        for (int j = 0; j < g->nn && !skip; j++) {
            const ert_gnode *m = &g->n[j];
            if (m->dead) continue;
            for (int k = 0; k < m->n_out; k++)
                if (m->out[k] == to) skip = m->op == ERT_OP_CAST || island[j]; /* no node inserted yet */
        }
        if (skip) continue;
        int32_t c = ert_pass_retyped_copy(g, to, dt);
        if (c < 0) {
            st = ert_graph_oom(g);
            goto done;
        }
        for (int j = 0; j < g->nn; j++) {
            ert_gnode *m = &g->n[j];
            for (int k = 0; k < m->n_in; k++)
                if (m->in[k] == to) m->in[k] = c;
            for (int k = 0; k < m->n_out; k++)
                if (m->out[k] == to) m->out[k] = c;
        }
        ert_gnode *n = ert_graph_add_node(g, ERT_OP_CAST, NULL, g->t[to].name, 1, 1);
        if (!n) {
            st = ert_graph_oom(g);
            goto done;
        }
        n->in[0] = c;
        n->out[0] = to;
        n->params.cast.to = ERT_DTYPE_F32;
    }
    /* 5. Where an island and dt tensors meet without a Cast of the file's:
     * a Cast in front of the reader, to the dtype it computes in (its first
     * float output's). Constants were settled in step 2. */
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *n = &g->n[i];
        int32_t y = n->dead || n->op == ERT_OP_CAST ? -1 : first_float_out(g, n);
        if (y < 0) continue;
        ert_dtype want = g->t[y].dtype; /* dt, or f32 in an island (outputs are settled: step 4) */
        for (int k = 0; k < n->n_in; k++) {
            int32_t x = n->in[k];
            if (!float_act(g, x) || g->t[x].dtype == want || is_graph_input(g, x)) continue;
            int32_t c = cast_before(g, i, x, want);
            if (c < 0) {
                st = ert_graph_oom(g);
                goto done;
            }
            n = &g->n[++i]; /* the reader moved one down */
            n->in[k] = c;
        }
    }

    /* 6. f32 graph inputs: one Cast to dt in front of the schedule, read by
     * every node that computes in dt (Casts and islands read the input). */
    for (int i = 0; i < g->n_inputs; i++) {
        int32_t ti = g->inputs[i];
        if (g->t[ti].dtype != ERT_DTYPE_F32) continue;
        bool low_reader = false;
        for (int j = 0; j < g->nn && !low_reader; j++) {
            const ert_gnode *n = &g->n[j];
            if (n->dead || n->op == ERT_OP_CAST) continue;
            int32_t y = first_float_out(g, n);
            for (int k = 0; k < n->n_in && !low_reader; k++)
                low_reader = n->in[k] == ti && (y < 0 || g->t[y].dtype != ERT_DTYPE_F32);
        }
        if (!low_reader) continue;
        int32_t c = ert_pass_retyped_copy(g, ti, dt);
        ert_gnode *n = c >= 0 ? ert_graph_add_node(g, ERT_OP_CAST, NULL, g->t[ti].name, 1, 1) : NULL;
        if (!n) {
            st = ert_graph_oom(g);
            goto done;
        }
        for (int j = 0; j < g->nn - 1; j++) {
            ert_gnode *m = &g->n[j];
            int32_t y = m->dead || m->op == ERT_OP_CAST ? -1 : first_float_out(g, m);
            if (m->op == ERT_OP_CAST || (y >= 0 && g->t[y].dtype == ERT_DTYPE_F32)) continue;
            for (int k = 0; k < m->n_in; k++)
                if (m->in[k] == ti) m->in[k] = c;
        }
        n->in[0] = ti;
        n->out[0] = c;
        n->params.cast.to = dt;
        move_last_to(g, 0);
    }
done:
    free(fdt);
    free(island);
    free(keep);
    return st;
}

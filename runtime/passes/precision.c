/* Session step 4b: reduced precision (CUDA sessions, options.precision
 * F16/BF16). Called from build() in session.c. */
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ step 4b */

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
    /* weights */
    for (int i = 0; i < g->nt; i++) {
        ert_gtensor *t = &g->t[i];
        if (!ert_graph_is_const(g, i) || t->dtype != ERT_DTYPE_F32 || t->n_uses == 0 || ert_graph_is_output(g, i)) continue;
        int64_t ne = 0;
        ert_dims_nelems(t->ndim, t->dims, &ne);
        uint16_t *h = malloc((size_t)(ne ? ne : 1) * sizeof *h);
        if (!h) return ert_graph_oom(g);
        const float *f = t->cdata;
        for (int64_t k = 0; k < ne; k++) h[k] = dt == ERT_DTYPE_F16 ? ert_f32_to_f16(f[k]) : ert_f32_to_bf16(f[k]);
        free(t->owned);
        t->owned = h;
        t->cdata = h;
        t->mem = ERT_MEM_OWNED;
        t->dtype = dt;
        ert_graph_set_nbytes(t);
    }
    /* activations (inputs and outputs keep f32) */
    for (int i = 0; i < g->nt; i++) {
        ert_gtensor *t = &g->t[i];
        if (t->mem != ERT_MEM_NONE || t->dtype != ERT_DTYPE_F32 || !t->defined || ert_graph_is_io(g, i)) continue;
        t->dtype = dt;
        ert_graph_set_nbytes(t);
    }
    for (int i = 0; i < g->nn; i++)
        if (!g->n[i].dead && g->n[i].op == ERT_OP_CAST && g->n[i].params.cast.to == ERT_DTYPE_F32 &&
            !ert_graph_is_io(g, g->n[i].out[0]))
            g->n[i].params.cast.to = dt;
    /* f32 graph inputs: a Cast to dt at the front of the node list */
    for (int i = 0; i < g->n_inputs; i++) {
        int32_t ti = g->inputs[i];
        if (g->t[ti].dtype != ERT_DTYPE_F32 || g->t[ti].n_uses == 0) continue;
        int32_t c = ert_pass_retyped_copy(g, ti, dt);
        ert_gnode *n = c >= 0 ? ert_graph_add_node(g, ERT_OP_CAST, NULL, g->t[ti].name, 1, 1) : NULL;
        if (!n) return ert_graph_oom(g);
        for (int j = 0; j < g->nn - 1; j++)
            for (int k = 0; k < g->n[j].n_in; k++)
                if (g->n[j].in[k] == ti) g->n[j].in[k] = c;
        n->in[0] = ti;
        n->out[0] = c;
        n->params.cast.to = dt;
        ert_gnode tmp = *n;
        memmove(&g->n[1], &g->n[0], (size_t)(g->nn - 1) * sizeof *g->n);
        g->n[0] = tmp;
    }
    /* f32 graph outputs a node makes: the node writes a dt activation, a Cast
     * at the end writes the f32 output */
    for (int i = 0; i < g->n_outputs; i++) {
        int32_t to = g->outputs[i];
        if (g->t[to].dtype != ERT_DTYPE_F32 || ert_graph_is_const(g, to)) continue;
        bool skip = false; /* a graph input, or an output listed twice (done already) */
        for (int k = 0; k < g->n_inputs; k++) skip = skip || g->inputs[k] == to;
        for (int k = 0; k < i; k++) skip = skip || g->outputs[k] == to;
        if (skip) continue;
        int32_t c = ert_pass_retyped_copy(g, to, dt);
        if (c < 0) return ert_graph_oom(g);
        for (int j = 0; j < g->nn; j++) {
            ert_gnode *m = &g->n[j];
            for (int k = 0; k < m->n_in; k++)
                if (m->in[k] == to) m->in[k] = c;
            for (int k = 0; k < m->n_out; k++)
                if (m->out[k] == to) m->out[k] = c;
        }
        ert_gnode *n = ert_graph_add_node(g, ERT_OP_CAST, NULL, g->t[to].name, 1, 1);
        if (!n) return ert_graph_oom(g);
        n->in[0] = c;
        n->out[0] = to;
        n->params.cast.to = ERT_DTYPE_F32;
    }
    return ERT_OK;
}

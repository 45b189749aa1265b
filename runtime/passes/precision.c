/* Session step 4b: reduced precision (CUDA sessions, options.precision
 * F16/BF16). Called from build() in session.c. */
#include "session_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ step 4b */

bool ert_s_is_io(const ert_session *s, int32_t t) {
    for (int i = 0; i < s->n_in; i++)
        if (s->in_t[i] == t) return true;
    return ert_s_is_graph_out(s, t);
}

/* Retype a copy of tensor `from` as dt (a planned activation). */
int32_t ert_s_retyped_copy(ert_session *s, int32_t from, ert_dtype dt) {
    int32_t c = ert_s_add_tensor(s, s->t[from].name);
    if (c < 0) return -1;
    stensor *t = &s->t[c];
    *t = s->t[from];
    t->mem = MEM_NONE;
    t->owned = NULL;
    t->cdata = NULL;
    t->dtype = t->orig_dtype = dt;
    t->alias = t->block = -1;
    t->first = t->last = -1;
    ert_s_set_nbytes(t);
    return c;
}

ert_status ert_s_lower_precision(ert_session *s, ert_dtype dt) {
    ert_s_count_uses(s, NULL);
    /* A backend may rewrite a conv's f16/bf16 filter in place once at create
     * (CUDA stores it (K, R, S, C) for the tensor cores). A filter read by
     * more than one node gets one private copy per conv, so no reader ever
     * sees another node's layout (this failed on the GPU when two convs
     * shared one filter). */
    for (int i = 0; i < s->nn; i++) {
        snode *n = &s->n[i];
        if (n->dead || n->op != ERT_OP_CONV || n->n_in < 2) continue;
        int32_t w = n->in[1];
        if (!ert_s_is_const(s, w) || s->t[w].dtype != ERT_DTYPE_F32 || s->t[w].n_uses < 2) continue;
        size_t nb = s->t[w].nbytes;
        int64_t dims[ERT_MAX_DIMS];
        int nd = s->t[w].ndim;
        const char *name = s->t[w].name;
        memcpy(dims, s->t[w].dims, sizeof dims);
        void *copy = malloc(nb ? nb : 1);
        if (!copy) return ert_s_oom(s);
        memcpy(copy, s->t[w].cdata, nb);
        int32_t id = -1;
        ert_status st = ert_s_new_const(s, name, ERT_DTYPE_F32, nd, dims, copy, &id);
        if (st != ERT_OK) return st;
        s->t[w].n_uses--;
        s->t[id].n_uses = 1;
        s->n[i].in[1] = id;
    }
    ert_s_count_uses(s, NULL);
    /* weights */
    for (int i = 0; i < s->nt; i++) {
        stensor *t = &s->t[i];
        if (!ert_s_is_const(s, i) || t->dtype != ERT_DTYPE_F32 || t->n_uses == 0 || ert_s_is_graph_out(s, i)) continue;
        int64_t ne = 0;
        ert_dims_nelems(t->ndim, t->dims, &ne);
        uint16_t *h = malloc((size_t)(ne ? ne : 1) * sizeof *h);
        if (!h) return ert_s_oom(s);
        const float *f = t->cdata;
        for (int64_t k = 0; k < ne; k++) h[k] = dt == ERT_DTYPE_F16 ? ert_f32_to_f16(f[k]) : ert_f32_to_bf16(f[k]);
        free(t->owned);
        t->owned = h;
        t->cdata = h;
        t->mem = MEM_OWNED;
        t->dtype = dt;
        ert_s_set_nbytes(t);
    }
    /* activations (inputs and outputs keep f32) */
    for (int i = 0; i < s->nt; i++) {
        stensor *t = &s->t[i];
        if (t->mem != MEM_NONE || t->dtype != ERT_DTYPE_F32 || !t->defined || ert_s_is_io(s, i)) continue;
        t->dtype = dt;
        ert_s_set_nbytes(t);
    }
    for (int i = 0; i < s->nn; i++)
        if (!s->n[i].dead && s->n[i].op == ERT_OP_CAST && s->n[i].params.cast.to == ERT_DTYPE_F32 &&
            !ert_s_is_io(s, s->n[i].out[0]))
            s->n[i].params.cast.to = dt;
    /* f32 graph inputs: a Cast to dt at the front of the node list */
    for (int i = 0; i < s->n_in; i++) {
        int32_t ti = s->in_t[i];
        if (s->t[ti].dtype != ERT_DTYPE_F32 || s->t[ti].n_uses == 0) continue;
        int32_t c = ert_s_retyped_copy(s, ti, dt);
        snode *n = c >= 0 ? ert_s_add_node(s, ERT_OP_CAST, NULL, s->t[ti].name, 1, 1) : NULL;
        if (!n) return ert_s_oom(s);
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
        if (s->t[to].dtype != ERT_DTYPE_F32 || ert_s_is_const(s, to)) continue;
        bool skip = false; /* a graph input, or an output listed twice (done already) */
        for (int k = 0; k < s->n_in; k++) skip = skip || s->in_t[k] == to;
        for (int k = 0; k < i; k++) skip = skip || s->out_t[k] == to;
        if (skip) continue;
        int32_t c = ert_s_retyped_copy(s, to, dt);
        if (c < 0) return ert_s_oom(s);
        for (int j = 0; j < s->nn; j++) {
            snode *m = &s->n[j];
            for (int k = 0; k < m->n_in; k++)
                if (m->in[k] == to) m->in[k] = c;
            for (int k = 0; k < m->n_out; k++)
                if (m->out[k] == to) m->out[k] = c;
        }
        snode *n = ert_s_add_node(s, ERT_OP_CAST, NULL, s->t[to].name, 1, 1);
        if (!n) return ert_s_oom(s);
        n->in[0] = c;
        n->out[0] = to;
        n->params.cast.to = ERT_DTYPE_F32;
    }
    return ERT_OK;
}

/* Trainer step 3c: the frozen prefix in channels-last layout, and the
 * frozen stem run in batch chunks (prefix_channels_last, chunk_stem). Called
 * from build() in trainer.c. */
#include "trainer_internal.h"
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ step 3c: channels-last frozen prefix */

/* CUDA mixed precision: the frozen prefix (no input needs a gradient) runs
 * channels-last like an inference session's convs (session.c step 4c):
 * cuDNN's tensor-core convs read and write (N, H, W, C) directly instead of
 * transposing x and y through a workspace (up to 64 MiB a conv at batch 32),
 * and the backend may rewrite the constant filters and fuse the conv
 * epilogue (ert_conv_params.const_w). Region: 4-D half-type Conv (2-D,
 * symmetric pads), MaxPool/AveragePool (2-D), GlobalAveragePool, Relu and
 * same-shape Add nodes fed by it; a Transpose brings an outside input in,
 * and a Transpose (a Reshape when H = W = 1) takes a tensor back to
 * (N, C, H, W) for a reader outside. Measured on an H200, ResNet-18 head-only
 * batch 32 f16: see bench/RESULTS.md. */
static bool cl_node_ok(const ert_trainer *t, const ert_gnode *n, const bool *need, const bool *nh) {
    if (n->phase != ERT_PHASE_FWD || n->n_out < 1 || n->out[0] < 0) return false;
    for (int k = 1; k < n->n_out; k++)
        if (n->out[k] >= 0) return false; /* MaxPool indices */
    const ert_gtensor *y = &t->g.t[n->out[0]];
    if (y->dtype != t->amp || y->ndim != 4 || need[n->out[0]]) return false;
    bool any = false;
    for (int k = 0; k < n->n_in; k++) {
        int32_t x = n->in[k];
        if (x < 0) continue;
        if (need[x]) return false;
        if (n->op == ERT_OP_CONV && (k == 1 || k == 2)) {
            if (!ert_tr_frozen_w(&t->g.t[x])) return false;
            continue;
        }
        if (t->g.t[x].dtype != y->dtype || t->g.t[x].ndim != 4) return false;
        any = any || nh[x];
    }
    switch (n->op) {
    case ERT_OP_CONV: return n->n_in <= 4 && ert_graph_nhwc_op_ok(n->op, &n->params);
    case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL: return any && ert_graph_nhwc_op_ok(n->op, &n->params);
    case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_RELU: return any;
    case ERT_OP_ADD:
        return any && n->n_in == 2 && n->in[0] >= 0 && n->in[1] >= 0 &&
               !memcmp(t->g.t[n->in[0]].dims, y->dims, sizeof y->dims[0] * 4) &&
               !memcmp(t->g.t[n->in[1]].dims, y->dims, sizeof y->dims[0] * 4);
    default: return false;
    }
}

/* A Transpose (Reshape when same_bytes) from -> to, appended to t->g.n. */
static ert_status cl_layout(ert_trainer *t, int32_t from, int32_t to, const int *perm, bool same_bytes) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s.%s", t->g.t[to].name, same_bytes ? "reshape" : "transpose");
    ert_gnode *n = ert_graph_new_node(&t->g, same_bytes ? ERT_OP_RESHAPE : ERT_OP_TRANSPOSE, nm, 1, 1, ERT_PHASE_FWD);
    if (!n) return ert_graph_oom(&t->g);
    n->in[0] = from;
    n->out[0] = to;
    for (int d = 0; d < 4; d++) n->params.transpose.perm[d] = perm[d];
    return ERT_OK;
}

static int32_t cl_twin(ert_trainer *t, int32_t x, const int *perm) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s.nhwc", t->g.t[x].name);
    int64_t d[4];
    for (int i = 0; i < 4; i++) d[i] = t->g.t[x].dims[perm[i]];
    int32_t y = ert_graph_new_tensor(&t->g, nm, t->g.t[x].dtype, 4, d);
    if (y >= 0) t->g.t[y].fwd = true;
    return y;
}

/* A frozen conv's filter (K, C, R, S) as (K, cp, R, S), the channels past C
 * zero (a folded constant of the filter's dtype); -1 when out of memory. */
static int32_t pad_filter(ert_trainer *t, int32_t w, int64_t cp) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s.pad%lld", t->g.t[w].name, (long long)cp);
    int64_t d[4] = {t->g.t[w].dims[0], cp, t->g.t[w].dims[2], t->g.t[w].dims[3]};
    int32_t id = ert_graph_new_tensor(&t->g, nm, t->g.t[w].dtype, 4, d);
    if (id < 0) return -1;
    ert_gtensor *x = &t->g.t[id];
    const ert_gtensor *W = &t->g.t[w];
    x->owned = calloc(1, x->nbytes ? x->nbytes : 1);
    if (!x->owned) return -1;
    x->mem = ERT_MEM_OWNED;
    x->cdata = x->owned;
    const int64_t K = W->dims[0], C = W->dims[1];
    const size_t rs = (size_t)(W->dims[2] * W->dims[3]) * ert_dtype_size(W->dtype);
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < C; c++)
            memcpy((char *)x->owned + (size_t)(k * cp + c) * rs, (const char *)W->cdata + (size_t)(k * C + c) * rs, rs);
    return id;
}

/* Channels-last input of a frozen conv with fewer than 8 channels (an image's
 * 3): padded with zero channels to 8 (Pad node after the layout transpose),
 * the filter likewise. cuDNN then runs ResNet-18's first conv (batch 32,
 * f16) as a fused graph with a 256-byte workspace in 0.163 ms instead of an
 * algorithm needing a 64 MB workspace (bench/RESULTS.md). */
static ert_status cl_pad8(ert_trainer *t, int32_t from, int32_t *to) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s.pad8", t->g.t[from].name);
    int64_t d[4] = {t->g.t[from].dims[0], t->g.t[from].dims[1], t->g.t[from].dims[2], 8};
    int32_t y = ert_graph_new_tensor(&t->g, nm, t->g.t[from].dtype, 4, d);
    if (y < 0) return ert_graph_oom(&t->g);
    t->g.t[y].fwd = true;
    ert_gnode *n = ert_graph_new_node(&t->g, ERT_OP_PAD, nm, 1, 1, ERT_PHASE_FWD);
    if (!n) return ert_graph_oom(&t->g);
    n->in[0] = from;
    n->out[0] = y;
    n->params.pad.mode = 0;
    n->params.pad.pad_end[3] = 8 - t->g.t[from].dims[3];
    *to = y;
    return ERT_OK;
}

ert_status ert_tr_prefix_channels_last(ert_trainer *t) {
    static const int to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};
    if (!t->g.be || t->amp == ERT_DTYPE_F32 || t->o.amp_conv_only) return ERT_OK;
    int nold = t->g.nn, n0 = t->g.nt;
    bool *need = calloc((size_t)n0 + 1, 1), *nh = calloc((size_t)n0 + 1, 1), *node_nh = calloc((size_t)nold + 1, 1);
    int32_t *twin = malloc(((size_t)n0 + 1) * sizeof *twin), *fwd = malloc(((size_t)n0 + 1) * sizeof *fwd),
            *fwd8 = malloc(((size_t)n0 + 1) * sizeof *fwd8);
    bool *back = calloc((size_t)n0 + 1, 1);
    ert_gnode *nw = NULL, *old = t->g.n;
    ert_status st = ERT_OK;
    if (!need || !nh || !node_nh || !twin || !fwd || !fwd8 || !back) {
        st = ert_graph_oom(&t->g);
        goto done;
    }
    for (int i = 0; i < n0; i++) need[i] = t->g.t[i].trainable, twin[i] = fwd[i] = fwd8[i] = -1;
    int n_conv = 0;
    for (int k = 0; k < nold; k++) {
        const ert_gnode *n = &old[k];
        bool any = false;
        for (int j = 0; j < n->n_in; j++) any = any || (n->in[j] >= 0 && need[n->in[j]]);
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) need[n->out[j]] = need[n->out[j]] || any;
        if (!cl_node_ok(t, n, need, nh)) continue;
        node_nh[k] = true;
        nh[n->out[0]] = true;
        n_conv += n->op == ERT_OP_CONV;
    }
    if (!n_conv) goto done;
    /* a tensor a trainable node also reads (need[] above saw them all) keeps
     * its NCHW twin via the back transpose below */
    int cap = nold + 3 * n0 + 16;
    nw = malloc((size_t)cap * sizeof *nw);
    if (!nw) {
        st = ert_graph_oom(&t->g);
        goto done;
    }
    for (int i = 0; i < n0 && st == ERT_OK; i++)
        if (nh[i] && (twin[i] = cl_twin(t, i, to_nhwc)) < 0) st = ert_graph_oom(&t->g);
    if (st) {
        free(nw);
        goto done;
    }
    /* the new list never reallocates (cap: every old node once, at most one
     * layout node in, one Pad and one layout node out per tensor), so a failure can still hand
     * every old node over to be freed */
    t->g.n = nw;
    t->g.nn = 0;
    t->g.cap_n = cap;
    int k = 0;
    for (; k < nold && st == ERT_OK; k++) {
        ert_gnode f = old[k];
        if (!node_nh[k]) {
            for (int j = 0; j < f.n_in && st == ERT_OK; j++) {
                int32_t x = f.in[j];
                if (x < 0 || x >= n0 || !nh[x] || back[x]) continue;
                back[x] = true;
                st = cl_layout(t, twin[x], x, to_nchw, t->g.t[x].dims[2] == 1 && t->g.t[x].dims[3] == 1);
            }
            t->g.n[t->g.nn++] = f;
            continue;
        }
        for (int j = 0; j < f.n_in && st == ERT_OK; j++) {
            int32_t x = f.in[j];
            if (x < 0 || (f.op == ERT_OP_CONV && (j == 1 || j == 2))) continue;
            if (nh[x]) {
                f.in[j] = twin[x];
                continue;
            }
            if (fwd[x] < 0) {
                if ((fwd[x] = cl_twin(t, x, to_nhwc)) < 0) st = ert_graph_oom(&t->g);
                else st = cl_layout(t, x, fwd[x], to_nhwc, false);
            }
            f.in[j] = fwd[x];
            const int64_t C = t->g.t[x].dims[1];
            if (st == ERT_OK && f.op == ERT_OP_CONV && j == 0 && C < 8 && f.params.conv.group == 1 && f.n_in > 1 &&
                f.in[1] >= 0 && t->g.t[f.in[1]].dims[1] == C) {
                int32_t wp = pad_filter(t, f.in[1], 8);
                if (wp < 0) st = ert_graph_oom(&t->g);
                else if (fwd8[x] < 0) st = cl_pad8(t, fwd[x], &fwd8[x]);
                if (st == ERT_OK) f.in[0] = fwd8[x], f.in[1] = wp;
            }
        }
        f.out[0] = twin[f.out[0]];
        if (f.op == ERT_OP_CONV) {
            f.params.conv.nhwc = true;
            f.params.conv.const_w = true;
        } else if (f.op == ERT_OP_MAXPOOL || f.op == ERT_OP_AVGPOOL || f.op == ERT_OP_GLOBAL_AVGPOOL) {
            f.params.pool.nhwc = true;
        }
        t->g.n[t->g.nn++] = f;
    }
    for (; k < nold; k++) t->g.n[t->g.nn++] = old[k];
    free(old);
    if (st == ERT_OK) ert_log(t->g.ctx, ERT_LOG_DEBUG, "trainer: %d frozen-prefix convs channels-last", n_conv);
done:
    free(need);
    free(nh);
    free(node_nh);
    free(twin);
    free(fwd);
    free(fwd8);
    free(back);
    return st;
}

/* Frozen stem in batch chunks: the chain from a graph input through frozen
 * Cast/Transpose/Pad/Conv/Relu to the first MaxPool (each link read only by
 * the next) keeps nothing for the backward, yet its activations are the
 * largest of the network (ResNet-18's stem output at batch 32 in f16: 51 MB,
 * next to its 8-channel padded input). Run it on batch slices instead: a
 * Slice of the input per chunk, the chain cloned on the chunk, the pooled
 * chunks concatenated into the original output, so only one chunk's
 * activations are live at a time. Only where it matters (a chain tensor of
 * 4 MiB or more) and the batch splits evenly (4 chunks, else 2). */
static bool stem_op(ert_op op) {
    return op == ERT_OP_CAST || op == ERT_OP_TRANSPOSE || op == ERT_OP_PAD || op == ERT_OP_CONV || op == ERT_OP_RELU;
}

ert_status ert_tr_chunk_stem(ert_trainer *t) {
    const ert_model *m = t->model;
    if (m->n_inputs < 1 || t->o.session.batch < 2) return ERT_OK;
    const int32_t x = m->inputs[0];
    if (x < 0 || t->g.t[x].ndim < 2) return ERT_OK;
    const int64_t B = t->g.t[x].dims[0];
    const int k_chunks = B % 4 == 0 ? 4 : B % 2 == 0 ? 2 : 1;
    if (k_chunks < 2) return ERT_OK;
    int chain[16], len = 0;
    int32_t cur = x;
    size_t biggest = 0;
    for (;;) {
        if (len == 16 || ert_tr_n_uses(t, cur) != 1) return ERT_OK;
        int u = ert_tr_find_user(t, cur, 0);
        if (u < 0) return ERT_OK;
        const ert_gnode *n = &t->g.n[u];
        if (n->phase != ERT_PHASE_FWD || n->n_out != 1 || n->out[0] < 0 || n->in[0] != cur ||
            (!stem_op(n->op) && n->op != ERT_OP_MAXPOOL))
            return ERT_OK;
        for (int j = 1; j < n->n_in; j++) /* weights and the like: constants, never a gradient */
            if (n->in[j] >= 0 && (!(ert_graph_is_imm(&t->g.t[n->in[j]]) || t->g.t[n->in[j]].mem == ERT_MEM_PARAM) ||
                                  t->g.t[n->in[j]].trainable))
                return ERT_OK;
        if (n->op == ERT_OP_CONV && n->params.conv.has_residual) return ERT_OK;
        const ert_gtensor *y = &t->g.t[n->out[0]];
        if (y->ndim < 2 || y->dims[0] != B || y->trainable) return ERT_OK;
        if (y->nbytes > biggest) biggest = y->nbytes;
        chain[len++] = u;
        cur = n->out[0];
        if (n->op == ERT_OP_MAXPOOL) break;
    }
    if (biggest < ((size_t)4 << 20)) return ERT_OK;
    for (int i = 1; i < len; i++)
        if (chain[i] < chain[i - 1]) return ERT_OK; /* schedule order assumed below */
    const int at = chain[0], n_new = k_chunks * (len + 1) + 1;
    const int32_t out = t->g.n[chain[len - 1]].out[0];
    ert_gnode *made = calloc((size_t)n_new, sizeof *made);
    if (!made) return ert_graph_oom(&t->g);
    int nm_ = 0;
    ert_status st = ERT_OK;
    int32_t *parts = malloc((size_t)k_chunks * sizeof *parts);
    if (!parts) st = ert_graph_oom(&t->g);
    const int64_t b = B / k_chunks;
    for (int c = 0; c < k_chunks && st == ERT_OK; c++) {
        char nm[256];
        int64_t d[ERT_MAX_DIMS];
        memcpy(d, t->g.t[x].dims, sizeof d);
        d[0] = b;
        snprintf(nm, sizeof nm, "%s.chunk%d", t->g.t[x].name, c);
        int32_t in = ert_graph_new_tensor(&t->g, nm, t->g.t[x].dtype, t->g.t[x].ndim, d);
        ert_gnode *sl = in >= 0 ? ert_graph_new_node(&t->g, ERT_OP_SLICE, nm, 1, 1, ERT_PHASE_FWD) : NULL;
        if (!sl) {
            st = ert_graph_oom(&t->g);
            break;
        }
        t->g.t[in].fwd = true;
        sl->in[0] = x;
        sl->out[0] = in;
        sl->params.slice.start[0] = c * b;
        for (int q = 0; q < ERT_MAX_DIMS; q++) sl->params.slice.step[q] = 1;
        made[nm_++] = *sl;
        t->g.nn--; /* parked in made[] until the list is rebuilt */
        for (int i = 0; i < len && st == ERT_OK; i++) {
            const ert_gnode *f = &t->g.n[chain[i]];
            const ert_gtensor *fy = &t->g.t[f->out[0]];
            memcpy(d, fy->dims, sizeof d);
            d[0] = b;
            snprintf(nm, sizeof nm, "%s.chunk%d", fy->name, c);
            int32_t o = ert_graph_new_tensor(&t->g, nm, fy->dtype, fy->ndim, d);
            f = &t->g.n[chain[i]];
            ert_gnode *n = o >= 0 ? ert_graph_new_node(&t->g, f->op, nm, f->n_in, 1, ERT_PHASE_FWD) : NULL;
            if (!n) {
                st = ert_graph_oom(&t->g);
                break;
            }
            f = &t->g.n[chain[i]];
            t->g.t[o].fwd = true;
            for (int j = 0; j < f->n_in; j++) n->in[j] = f->in[j];
            n->in[0] = in;
            n->out[0] = o;
            n->params = f->params;
            n->ws_bytes = f->ws_bytes; /* the CPU's (from the whole batch: enough); a device's is asked later */
            n->src = f->src;
            made[nm_++] = *n;
            t->g.nn--;
            in = o;
        }
        parts[c] = in;
    }
    if (st == ERT_OK) {
        ert_gnode *cc = ert_graph_new_node(&t->g, ERT_OP_CONCAT, "stem.concat", k_chunks, 1, ERT_PHASE_FWD);
        if (!cc) st = ert_graph_oom(&t->g);
        else {
            for (int c = 0; c < k_chunks; c++) cc->in[c] = parts[c];
            cc->out[0] = out;
            cc->params.axis.axis = 0;
            made[nm_++] = *cc;
            t->g.nn--;
        }
    }
    if (st == ERT_OK && t->g.nn + nm_ > t->g.cap_n) { /* room for the new nodes */
        ert_gnode *g = realloc(t->g.n, (size_t)(t->g.nn + nm_) * sizeof *g);
        if (!g) st = ert_graph_oom(&t->g);
        else t->g.n = g, t->g.cap_n = t->g.nn + nm_;
    }
    if (st != ERT_OK) {
        for (int i = 0; i < nm_; i++) free(made[i].in), free(made[i].name_owned);
        free(made);
        free(parts);
        return st;
    }
    for (int i = len - 1; i >= 0; i--) ert_tr_drop_node(t, chain[i]); /* the originals (chain[] ascending) */
    memmove(&t->g.n[at + nm_], &t->g.n[at], (size_t)(t->g.nn - at) * sizeof *t->g.n);
    memcpy(&t->g.n[at], made, (size_t)nm_ * sizeof *made);
    t->g.nn += nm_;
    ert_log(t->g.ctx, ERT_LOG_DEBUG, "trainer: frozen stem (%d nodes to '%s') in %d batch chunks", len, t->g.t[out].name,
            k_chunks);
    free(made);
    free(parts);
    return ERT_OK;
}


/* A pass on the graph, run by ert_pass_fuse after its MatMul fusions: scaled dot-product
 * attention as exporters write it -> one ert.Attention node
 * (core/ops/attention.c) reading q, k and v as strided views of the tensors
 * they were carved from and writing y where the node after the block reads it.
 *
 * Pattern, from each f32 Softmax on the last axis:
 *   s = MatMul(q, kt)         kt = Transpose(k) or k with trans_b (fuse.c);
 *                             alpha (a scalar Mul on q or k, fuse.c) is the scale
 *   s = s * c | s / c         optional, c a scalar constant
 *   s = s + bias              optional, bias broadcast to s (or the MatMul's
 *                             residual input, which fuse.c made of that Add)
 *   p = Softmax(g, axis -1)
 *   y = MatMul(p, v)
 * with q (.., nq, D), k (.., nk, D), v (.., nk, D), rank 3 (heads, t, D) or 4
 * (batch, heads, t, D), one leading shape for all three. Every intermediate
 * is read by the next node only.
 *
 * Views. Each operand is followed back through the nodes that only move data
 * (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Transpose, Gather of one
 * constant index, Split, Slice with step 1) and through a scalar Mul/Div
 * (folded into the scale), as long as the view stays an affine map of
 * (batch, head, token, dim) into the tensor reached: timm's
 * qkv.reshape(B, N, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0), the dynamo
 * exporter's Split + Squeeze spelling, torchvision's MultiheadAttention
 * (Reshape to (N, B * H, D), Transpose) all end at the qkv Linear's output.
 * y is followed forward the same way through a sole-consumer
 * Transpose(0, 2, 1, 3) and Reshape to (B, N, H * D). Nodes left without
 * readers are removed by ert_pass_remove_dead.
 *
 * What is not fused (left as it is): a mask that depends on the batch modulo
 * the windows (Swin's shifted-window mask is fused only where it folds to a
 * constant broadcast over batch and heads), Dv != D, head_dim or token
 * counts the views cannot express, any intermediate read twice. The trainer
 * runs none of the fusion passes (ert.Attention has no backward rule). */
#include "graph.h"

#include <string.h>

/* A view of (batch, head, token, dim) in tensor t, dense C order, in elements. */
typedef struct aview {
    int32_t t;
    int64_t off, s[4], n[4];
} aview;

static void dense_strides(const ert_gtensor *t, int64_t *st) {
    int64_t a = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        st[d] = a;
        a *= t->dims[d];
    }
}

/* The view's index along each dim of its tensor: base[] plus, for each view
 * axis a with n[a] > 1, m[a] steps along dim ax[a]; false where the flat
 * form does not split into whole dims without carries. */
static bool split_dims(const ert_gtensor *t, const aview *v, int64_t *base, int *ax, int64_t *m) {
    int64_t st[ERT_MAX_DIMS], nel = 0, off = v->off;
    if (!ert_dims_nelems(t->ndim, t->dims, &nel) || off < 0 || off >= nel) return false;
    dense_strides(t, st);
    for (int d = 0; d < t->ndim; d++) {
        base[d] = off / st[d];
        off %= st[d];
    }
    int64_t reach[ERT_MAX_DIMS];
    memcpy(reach, base, sizeof(int64_t) * (size_t)t->ndim);
    for (int a = 0; a < 4; a++) {
        ax[a] = -1;
        m[a] = 0;
        if (v->n[a] <= 1) continue;
        int d = 0;
        while (d < t->ndim && st[d] > v->s[a]) d++;
        if (d == t->ndim || v->s[a] < 1 || v->s[a] % st[d]) return false;
        ax[a] = d;
        m[a] = v->s[a] / st[d];
        reach[d] += m[a] * (v->n[a] - 1);
    }
    for (int d = 0; d < t->ndim; d++)
        if (reach[d] >= t->dims[d]) return false;
    return true;
}

/* The inverse of split_dims in tensor t (dims possibly renumbered). */
static void join_dims(const ert_gtensor *t, aview *v, const int64_t *base, const int *ax, const int64_t *m) {
    int64_t st[ERT_MAX_DIMS];
    dense_strides(t, st);
    v->off = 0;
    for (int d = 0; d < t->ndim; d++) v->off += base[d] * st[d];
    for (int a = 0; a < 4; a++) v->s[a] = ax[a] < 0 ? 0 : m[a] * st[ax[a]];
}

static bool is_reshape_like(ert_op op) {
    return op == ERT_OP_RESHAPE || op == ERT_OP_FLATTEN || op == ERT_OP_SQUEEZE || op == ERT_OP_UNSQUEEZE ||
           op == ERT_OP_IDENTITY;
}

/* A constant integer scalar (or one-element) tensor's value. */
static bool const_index(const ert_graph *g, int32_t t, int64_t *v) {
    if (!ert_graph_is_const(g, t) || !g->t[t].cdata) return false;
    int64_t n = 0;
    if (!ert_dims_nelems(g->t[t].ndim, g->t[t].dims, &n) || n != 1) return false;
    if (g->t[t].dtype == ERT_DTYPE_I64) *v = *(const int64_t *)g->t[t].cdata;
    else if (g->t[t].dtype == ERT_DTYPE_I32) *v = *(const int32_t *)g->t[t].cdata;
    else return false;
    return true;
}

/* A scalar f32 constant's value. */
static bool const_scalar(const ert_graph *g, int32_t t, float *v) {
    if (!ert_graph_is_const(g, t) || g->t[t].dtype != ERT_DTYPE_F32 || !g->t[t].cdata) return false;
    int64_t n = 0;
    if (!ert_dims_nelems(g->t[t].ndim, g->t[t].dims, &n) || n != 1) return false;
    *v = *(const float *)g->t[t].cdata;
    return true;
}

/* The live node writing t (and which of its outputs t is), or NULL. */
static ert_gnode *writer(ert_graph *g, const int32_t *producer, int32_t t, int *which) {
    if (t < 0 || producer[t] < 0) return NULL;
    ert_gnode *n = &g->n[producer[t]];
    if (n->dead) return NULL;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] == t) *which = k;
    return n;
}

/* One step of v back through the node that wrote v->t; false: stop here. */
static bool step_back(ert_graph *g, const int32_t *producer, aview *v, float *scale) {
    int which = 0;
    ert_gnode *n = writer(g, producer, v->t, &which);
    if (!n || n->n_in < 1 || n->in[0] < 0) return false;
    const ert_gtensor *y = &g->t[v->t], *x = &g->t[n->in[0]];
    if (x->dtype != y->dtype || g->t[v->t].mem == ERT_MEM_CONST) return false;
    int64_t base[ERT_MAX_DIMS], m[4], ub[ERT_MAX_DIMS];
    int ax[4], uax[4];
    if (is_reshape_like(n->op) && n->n_out == 1) {
        if (x->nbytes != y->nbytes) return false;
        v->t = n->in[0]; /* C order both sides: the flat index is the same */
        return true;
    }
    if ((n->op == ERT_OP_MUL || n->op == ERT_OP_DIV) && n->n_in == 2 && scale && g->t[v->t].n_uses == 1) {
        float c;
        for (int k = 0; k < 2; k++) {
            if (n->op == ERT_OP_DIV && k == 0) continue; /* c / x is not a scale */
            if (!const_scalar(g, n->in[k], &c) || g->t[n->in[1 - k]].nbytes != y->nbytes ||
                g->t[n->in[1 - k]].dtype != y->dtype || c == 0.0f)
                continue;
            const ert_gtensor *u = &g->t[n->in[1 - k]];
            if (u->ndim != y->ndim || memcmp(u->dims, y->dims, sizeof(int64_t) * (size_t)y->ndim)) continue;
            *scale *= n->op == ERT_OP_MUL ? c : 1.0f / c;
            v->t = n->in[1 - k];
            return true;
        }
        return false;
    }
    if (x->ndim != (n->op == ERT_OP_GATHER && n->n_in == 2 && g->t[n->in[1]].ndim == 0 ? y->ndim + 1 : y->ndim))
        return false;
    if (!split_dims(y, v, base, ax, m)) return false;
    memset(ub, 0, sizeof ub);
    switch (n->op) {
    case ERT_OP_TRANSPOSE: { /* y dim d is x dim perm[d] */
        const int64_t *perm = n->params.transpose.perm;
        for (int d = 0; d < y->ndim; d++) ub[perm[d]] = base[d];
        for (int a = 0; a < 4; a++) uax[a] = ax[a] < 0 ? -1 : (int)perm[ax[a]];
        break;
    }
    case ERT_OP_GATHER: {
        int64_t ga = n->params.gather.axis, c;
        const ert_gtensor *ind = &g->t[n->in[1]];
        if (n->n_in != 2 || !const_index(g, n->in[1], &c) || ind->ndim > 1) return false;
        if (c < 0) c += x->dims[ga];
        if (c < 0 || c >= x->dims[ga]) return false;
        /* 0-d index: y has x's dims without g; 1-element index: y's dim g has extent 1 */
        int drop = ind->ndim == 0;
        for (int d = 0; d < x->ndim; d++) {
            int yd = drop && d > ga ? d - 1 : d;
            ub[d] = d == ga ? c : base[yd];
        }
        for (int a = 0; a < 4; a++) uax[a] = ax[a] < 0 ? -1 : (drop && ax[a] >= ga) ? ax[a] + 1 : ax[a];
        break;
    }
    case ERT_OP_SPLIT: {
        int64_t ga = n->params.split.axis, o = 0;
        if (which >= ERT_MAX_NODE_IO) return false;
        for (int k = 0; k < which; k++) o += n->params.split.sizes[k];
        memcpy(ub, base, sizeof(int64_t) * (size_t)y->ndim);
        ub[ga] += o;
        memcpy(uax, ax, sizeof ax);
        break;
    }
    case ERT_OP_SLICE:
        for (int d = 0; d < x->ndim; d++) {
            if (n->params.slice.step[d] != 1) return false;
            ub[d] = base[d] + n->params.slice.start[d];
        }
        memcpy(uax, ax, sizeof ax);
        break;
    default: return false;
    }
    v->t = n->in[0];
    join_dims(x, v, ub, uax, m);
    return true;
}

/* Follow v back as far as the data-moving nodes go. */
static void trace_back(ert_graph *g, const int32_t *producer, aview *v, float *scale) {
    for (int guard = 0; guard < 32 && step_back(g, producer, v, scale); guard++) {
    }
}

/* Follow y (written by node `at`) forward through sole-reader Transposes and
 * Reshape-like nodes; the nodes passed are marked in pass[] (n_pass). */
static void trace_forward(ert_graph *g, aview *v, int at, ert_gnode **pass, int *n_pass) {
    for (int guard = 0; guard < 8; guard++) {
        ert_gnode *c = ert_graph_sole_consumer(g, v->t, at);
        if (!c || c->n_out != 1 || c->in[0] != v->t) return;
        const ert_gtensor *x = &g->t[v->t], *y = &g->t[c->out[0]];
        if (x->dtype != y->dtype) return;
        if (is_reshape_like(c->op)) {
            if (x->nbytes != y->nbytes) return;
        } else if (c->op == ERT_OP_TRANSPOSE) {
            int64_t base[ERT_MAX_DIMS], m[4], ub[ERT_MAX_DIMS];
            int ax[4], uax[4], inv[ERT_MAX_DIMS];
            if (!split_dims(x, v, base, ax, m)) return;
            for (int d = 0; d < y->ndim; d++) inv[c->params.transpose.perm[d]] = d;
            for (int d = 0; d < x->ndim; d++) ub[inv[d]] = base[d];
            for (int a = 0; a < 4; a++) uax[a] = ax[a] < 0 ? -1 : inv[ax[a]];
            join_dims(y, v, ub, uax, m);
        } else {
            return;
        }
        v->t = c->out[0];
        pass[(*n_pass)++] = c;
        at = (int)(c - g->n);
    }
}

/* View of a dense (lead..., rows, cols) operand: rank 3 is (heads, rows, cols),
 * rank 4 (batch, heads, rows, cols); transposed: the last two dims swapped. */
static void operand_view(const ert_gtensor *t, int32_t id, bool transposed, aview *v) {
    int r = t->ndim;
    v->t = id;
    v->off = 0;
    int64_t rows = transposed ? t->dims[r - 1] : t->dims[r - 2], cols = transposed ? t->dims[r - 2] : t->dims[r - 1];
    v->n[0] = r == 4 ? t->dims[0] : 1;
    v->n[1] = t->dims[r - 3];
    v->n[2] = rows;
    v->n[3] = cols;
    v->s[0] = r == 4 ? t->dims[1] * rows * cols : 0;
    v->s[1] = rows * cols;
    v->s[2] = transposed ? 1 : cols;
    v->s[3] = transposed ? rows : 1;
}

static bool lead_same(const ert_gtensor *a, const ert_gtensor *b) {
    if (a->ndim != b->ndim || (a->ndim != 3 && a->ndim != 4)) return false;
    for (int d = 0; d < a->ndim - 2; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

static bool is_scalar_scale(ert_graph *g, ert_gnode *n, int32_t x, float *c) {
    if (!n || n->dead || (n->op != ERT_OP_MUL && n->op != ERT_OP_DIV) || n->n_in != 2) return false;
    int k = n->in[0] == x ? 1 : n->in[1] == x ? 0 : -1;
    if (k < 0 || (n->op == ERT_OP_DIV && k == 0) || !const_scalar(g, n->in[k], c) || *c == 0.0f) return false;
    if (n->op == ERT_OP_DIV) *c = 1.0f / *c;
    return true;
}

/* Try the pattern ending at Softmax node sm; true if it was fused. */
static bool fuse_at(ert_graph *g, int32_t *producer, ert_gnode *sm) {
    const ert_gtensor *st = &g->t[sm->in[0]];
    if (st->dtype != ERT_DTYPE_F32 || (st->ndim != 3 && st->ndim != 4) || sm->params.axis.axis != st->ndim - 1 ||
        sm->n_out != 1)
        return false;
    float scale = 1.0f, c;
    int32_t bias = -1, x = sm->in[0];
    ert_gnode *chain[2] = {NULL, NULL}; /* the Add and the scalar Mul/Div between the MatMul and the Softmax */
    int which = 0;
    ert_gnode *n = g->t[x].n_uses == 1 ? writer(g, producer, x, &which) : NULL;
    if (n && n->op == ERT_OP_ADD && n->n_in == 2) {
        for (int k = 0; k < 2 && bias < 0; k++) {
            const ert_gtensor *z = &g->t[n->in[1 - k]], *w = &g->t[n->in[k]];
            int nd = 0;
            int64_t bd[ERT_MAX_DIMS];
            ert_gnode *p = g->t[n->in[k]].n_uses == 1 ? writer(g, producer, n->in[k], &which) : NULL;
            if (!p || (p->op != ERT_OP_MATMUL && p->op != ERT_OP_MUL && p->op != ERT_OP_DIV) || z->ndim > w->ndim ||
                z->dtype != ERT_DTYPE_F32 || !ert_broadcast_shape(w->ndim, w->dims, z->ndim, z->dims, &nd, bd) ||
                nd != w->ndim || memcmp(bd, w->dims, sizeof(int64_t) * (size_t)nd))
                continue;
            bias = n->in[1 - k];
            x = n->in[k];
            chain[0] = n;
        }
        if (bias < 0) return false;
        n = writer(g, producer, x, &which);
    }
    if (n && (n->op == ERT_OP_MUL || n->op == ERT_OP_DIV) && n->n_in == 2 && g->t[x].n_uses == 1) {
        int32_t u = -1;
        for (int k = 0; k < 2 && u < 0; k++)
            if (is_scalar_scale(g, n, n->in[k], &c)) u = n->in[k];
        if (u < 0) return false;
        scale *= c;
        chain[1] = n;
        x = u;
        n = g->t[x].n_uses == 1 ? writer(g, producer, x, &which) : NULL;
    }
    ert_gnode *mm1 = n;
    if (!mm1 || mm1->op != ERT_OP_MATMUL || mm1->params.gemm.has_c || mm1->params.gemm.trans_a ||
        mm1->params.gemm.act.kind != ERT_ACT_NONE || mm1->out[0] != x)
        return false;
    if (mm1->n_in > 3 && mm1->in[3] >= 0) { /* fuse.c made the bias Add the MatMul's residual */
        if (bias >= 0 || chain[1]) return false;
        bias = mm1->in[3];
    }
    scale *= mm1->params.gemm.alpha;
    ert_gnode *mm2 = ert_graph_sole_consumer(g, sm->out[0], (int)(sm - g->n));
    if (!mm2 || mm2->op != ERT_OP_MATMUL || mm2->n_in != 2 || mm2->in[0] != sm->out[0] || mm2->params.gemm.trans_a ||
        mm2->params.gemm.trans_b || mm2->params.gemm.alpha != 1.0f || mm2->params.gemm.act.kind != ERT_ACT_NONE)
        return false;
    const ert_gtensor *q = &g->t[mm1->in[0]], *kt = &g->t[mm1->in[1]], *v = &g->t[mm2->in[1]], *y = &g->t[mm2->out[0]];
    bool tb = mm1->params.gemm.trans_b;
    if (!lead_same(q, kt) || !lead_same(q, v) || !lead_same(q, y) || !lead_same(q, st)) return false;
    int r = q->ndim;
    int64_t D = q->dims[r - 1], nq = q->dims[r - 2], nk = tb ? kt->dims[r - 2] : kt->dims[r - 1];
    if ((tb ? kt->dims[r - 1] : kt->dims[r - 2]) != D || v->dims[r - 2] != nk || v->dims[r - 1] != D ||
        y->dims[r - 1] != D || y->dims[r - 2] != nq)
        return false;
    aview vq, vk, vv, vo;
    operand_view(q, mm1->in[0], false, &vq);
    operand_view(kt, mm1->in[1], !tb, &vk);
    operand_view(v, mm2->in[1], false, &vv);
    operand_view(y, mm2->out[0], false, &vo);
    trace_back(g, producer, &vq, &scale);
    trace_back(g, producer, &vk, &scale);
    trace_back(g, producer, &vv, NULL);
    ert_gnode *pass[8];
    int n_pass = 0;
    trace_forward(g, &vo, (int)(mm2 - g->n), pass, &n_pass);
    ert_attn_params ap;
    memset(&ap, 0, sizeof ap);
    ap.batch = vq.n[0], ap.heads = vq.n[1], ap.nq = nq, ap.nk = nk, ap.head_dim = D;
    ap.scale = scale;
    const aview *views[4] = {&vq, &vk, &vv, &vo};
    int64_t *dst[4] = {ap.q, ap.k, ap.v, ap.o};
    for (int k = 0; k < 4; k++) {
        dst[k][ERT_ATTN_OFF] = views[k]->off;
        for (int a = 0; a < 4; a++) dst[k][1 + a] = views[k]->s[a];
    }
    if (bias >= 0) { /* numpy broadcast of the bias to the scores (lead..., nq, nk) */
        const ert_gtensor *z = &g->t[bias];
        int64_t zst[ERT_MAX_DIMS];
        dense_strides(z, zst);
        for (int a = 0; a < 4; a++) {
            int sd = r == 4 ? a : a - 1; /* scores dim of view axis a (rank 3: no batch dim) */
            int zd = sd - (r - z->ndim);
            ap.bias[1 + a] = zd >= 0 && z->dims[zd] != 1 ? zst[zd] : 0;
        }
        ap.has_bias = true;
    }
    ert_tinfo tin[4], tout;
    const int32_t ids[4] = {vq.t, vk.t, vv.t, bias};
    for (int k = 0; k < 4; k++) {
        memset(&tin[k], 0, sizeof tin[k]);
        if (ids[k] < 0) continue;
        tin[k].dtype = g->t[ids[k]].dtype;
        tin[k].ndim = g->t[ids[k]].ndim;
        memcpy(tin[k].dims, g->t[ids[k]].dims, sizeof tin[k].dims);
    }
    memset(&tout, 0, sizeof tout);
    tout.dtype = g->t[vo.t].dtype;
    tout.ndim = g->t[vo.t].ndim;
    memcpy(tout.dims, g->t[vo.t].dims, sizeof tout.dims);
    char saved[ERT_ERRMSG_SIZE];
    memcpy(saved, g->ctx->err, sizeof saved);
    size_t ws = 0;
    ert_status chk = ert_attn_check(g->ctx, &ap, tin, bias >= 0 ? 4 : 3, &tout, g->n_threads, &ws);
    memcpy(g->ctx->err, saved, sizeof saved); /* a refusal only means "not fused" */
    if (chk != ERT_OK) return false;
    size_t gws = ert_attn_gemm_workspace(&ap, g->n_threads, ert_cpu_backend.gemm_workspace);
    if (gws > ws) ws = gws;
    /* mm2 becomes the attention node: it runs after every operand is written */
    mm1->dead = sm->dead = true;
    for (int k = 0; k < 2; k++)
        if (chain[k]) chain[k]->dead = true;
    for (int k = 0; k < n_pass; k++) pass[k]->dead = true;
    mm2->op = ERT_OP_ATTENTION;
    mm2->src = NULL;
    memset(&mm2->params, 0, sizeof mm2->params);
    mm2->params.attn = ap;
    mm2->in[0] = vq.t;
    mm2->in[1] = vk.t;
    mm2->in[2] = vv.t;
    mm2->in[3] = bias;
    mm2->n_in = bias >= 0 ? 4 : 3;
    mm2->out[0] = vo.t;
    mm2->ws_bytes = ws;
    ert_graph_count_uses(g, producer);
    return true;
}

void ert_pass_fuse_attention(ert_graph *g, int32_t *producer) {
    ert_graph_count_uses(g, producer);
    for (int i = 0; i < g->nn; i++) {
        ert_gnode *sm = &g->n[i];
        if (!sm->dead && sm->op == ERT_OP_SOFTMAX && fuse_at(g, producer, sm) && g->ctx)
            ert_log(g->ctx, ERT_LOG_DEBUG, "attention fused at '%s'", sm->name ? sm->name : "?");
    }
}

/* ert.Attention: shape inference and the checks of its strided views.
 * Inputs q, k, v and an optional additive bias (f32, f16 or bf16, one dtype);
 * per (batch, head): y = softmax(scale * q k^T + bias) v over the keys.
 * The attention pass (runtime/passes/attention.c) makes it with params
 * filled directly; a model (or a test) may write it with attributes:
 *   scale      float, default 1/sqrt(head_dim)
 *   ert_dims   ints (batch, heads, nq, nk, head_dim); default from q
 *              (batch, heads, nq, head_dim) and k's dim 2
 *   ert_q, ert_k, ert_v, ert_o, ert_bias   ints (offset, batch, head, token,
 *              dim strides) in elements; default: q, k, v and y contiguous
 *              (batch, heads, tokens, head_dim), the bias numpy-broadcast to
 *              (batch, heads, nq, nk)
 *   ert_out_shape  ints, y's shape; default (batch, heads, nq, head_dim)
 * Every view must stay inside its tensor, and y's view must cover y exactly
 * once (its strides a permutation of a dense layout), so the kernels neither
 * read out of bounds nor leave an element unwritten. */
#include "ert_internal.h"

#include <math.h>
#include <string.h>

static bool is_float(ert_dtype d) { return d == ERT_DTYPE_F32 || d == ERT_DTYPE_F16 || d == ERT_DTYPE_BF16; }

/* Largest element index a view reaches + 1 (false on overflow or a negative stride/offset). */
static bool view_extent(const int64_t *v, const int64_t *n, int64_t *end) {
    int64_t e = v[ERT_ATTN_OFF];
    if (e < 0) return false;
    for (int d = 0; d < 4; d++) {
        int64_t s = v[1 + d], t;
        if (s < 0 || n[d] < 1 || __builtin_mul_overflow(n[d] - 1, s, &t) || __builtin_add_overflow(e, t, &e)) return false;
    }
    *end = e + 1;
    return true;
}

/* The view visits n[0]*...*n[3] distinct elements filling [off, off + count):
 * its dims sorted by stride are dense (each stride the product of the
 * smaller extents; extent-1 dims ignored). */
static bool view_dense(const int64_t *v, const int64_t *n) {
    int64_t st[4], ex[4];
    int m = 0;
    for (int d = 0; d < 4; d++)
        if (n[d] > 1) {
            st[m] = v[1 + d];
            ex[m++] = n[d];
        }
    for (int i = 1; i < m; i++) /* insertion sort by stride */
        for (int j = i; j > 0 && st[j] < st[j - 1]; j--) {
            int64_t a = st[j], b = ex[j];
            st[j] = st[j - 1], ex[j] = ex[j - 1];
            st[j - 1] = a, ex[j - 1] = b;
        }
    int64_t want = 1;
    for (int i = 0; i < m; i++) {
        if (st[i] != want) return false;
        want *= ex[i];
    }
    return true;
}

ert_status ert_attn_check(ert_context *ctx, const ert_attn_params *ap, const ert_tinfo *in, int n_in, const ert_tinfo *out,
                          int n_threads, size_t *ws_bytes) {
    if (n_in < 3 || n_in > 4) return ert_set_error(ctx, ERT_E_ARG, "attention takes q, k, v and an optional bias (%d inputs)", n_in);
    bool bias = n_in > 3 && in[3].dtype != ERT_DTYPE_UNDEFINED;
    if (bias != ap->has_bias) return ert_set_error(ctx, ERT_E_ARG, "attention: the bias input and params disagree");
    for (int k = 0; k < n_in; k++) {
        if (k == 3 && !bias) continue;
        if (!is_float(in[k].dtype) || in[k].dtype != in[0].dtype)
            return ert_set_error(ctx, ERT_E_UNSUPPORTED, "attention: input %d has dtype %s (every input f32, f16 or bf16, as q's %s)",
                                 k, ert_dtype_name(in[k].dtype), ert_dtype_name(in[0].dtype));
    }
    if (out->dtype != in[0].dtype) return ert_set_error(ctx, ERT_E_ARG, "attention: y's dtype differs from q's");
    if (ap->batch < 1 || ap->heads < 1 || ap->nq < 1 || ap->nk < 1 || ap->head_dim < 1)
        return ert_set_error(ctx, ERT_E_SHAPE, "attention: batch %lld, heads %lld, nq %lld, nk %lld, head_dim %lld must be >= 1",
                             (long long)ap->batch, (long long)ap->heads, (long long)ap->nq, (long long)ap->nk,
                             (long long)ap->head_dim);
    if (!isfinite(ap->scale)) return ert_set_error(ctx, ERT_E_ARG, "attention: scale is not finite");
    const int64_t nqd[4] = {ap->batch, ap->heads, ap->nq, ap->head_dim}, nkd[4] = {ap->batch, ap->heads, ap->nk, ap->head_dim},
                  nb[4] = {ap->batch, ap->heads, ap->nq, ap->nk};
    const int64_t *views[5] = {ap->q, ap->k, ap->v, ap->bias, ap->o};
    const int64_t *ext[5] = {nqd, nkd, nkd, nb, nqd};
    static const char *names[5] = {"q", "k", "v", "bias", "y"};
    for (int k = 0; k < 5; k++) {
        if (k == 3 && !bias) continue;
        const ert_tinfo *t = k == 4 ? out : &in[k];
        int64_t have = 0, end = 0;
        if (!ert_dims_nelems(t->ndim, t->dims, &have) || !view_extent(views[k], ext[k], &end) || end > have)
            return ert_set_error(ctx, ERT_E_SHAPE, "attention: the %s view (offset %lld) reaches past its tensor's %lld elements",
                                 names[k], (long long)views[k][ERT_ATTN_OFF], (long long)have);
        if (k == 4 && (views[k][ERT_ATTN_OFF] != 0 || end != have || !view_dense(views[k], ext[k])))
            return ert_set_error(ctx, ERT_E_SHAPE, "attention: the y view does not cover y's %lld elements exactly once",
                                 (long long)have);
    }
    /* the CPU kernel: one row of scores and one output row per worker */
    size_t per = 0, ws = 0;
    if (ert_add_ovf((size_t)ap->nk, (size_t)ap->head_dim, &per) || ert_mul_ovf(per, sizeof(float), &per) ||
        ert_mul_ovf(per, (size_t)(n_threads > 0 ? n_threads : 1), &ws))
        return ert_set_error(ctx, ERT_E_SHAPE, "attention: workspace size overflows");
    *ws_bytes = ws;
    return ERT_OK;
}

/* Contiguous (batch, heads, tokens, dim) view. */
static void dense_view(int64_t *v, int64_t h, int64_t n, int64_t d) {
    v[ERT_ATTN_OFF] = 0;
    v[ERT_ATTN_SD] = 1;
    v[ERT_ATTN_ST] = d;
    v[ERT_ATTN_SH] = n * d;
    v[ERT_ATTN_SB] = h * n * d;
}

/* An optional 5-int view attribute into v (kept when absent). */
static ert_status view_attr(ert_prep *p, const char *name, int64_t *v) {
    int64_t t[ERT_ATTN_VIEW + 1];
    int c = p->node ? ert_attr_ints(p->node, name, t, ERT_ATTN_VIEW + 1) : -1;
    if (c < 0) return ERT_OK;
    if (c != ERT_ATTN_VIEW) return ert_prep_error(p, ERT_E_FORMAT, "attribute %s must hold 5 ints (got %d)", name, c);
    memcpy(v, t, sizeof t[0] * ERT_ATTN_VIEW);
    return ERT_OK;
}

ert_status ert_prepare_attention(ert_prep *p) {
    ert_attn_params *ap = &p->params->attn;
    memset(ap, 0, sizeof *ap);
    const ert_tinfo *q = &p->in[0], *k = &p->in[1];
    int64_t d5[6];
    int nd = p->node ? ert_attr_ints(p->node, "ert_dims", d5, 6) : -1;
    if (nd >= 0 && nd != 5) return ert_prep_error(p, ERT_E_FORMAT, "attribute ert_dims must hold 5 ints (got %d)", nd);
    if (nd < 0) {
        if (q->ndim != 4 || k->ndim != 4)
            return ert_prep_error(p, ERT_E_SHAPE, "without ert_dims, q and k must be (batch, heads, tokens, head_dim) (ranks %d, %d)",
                                  q->ndim, k->ndim);
        d5[0] = q->dims[0], d5[1] = q->dims[1], d5[2] = q->dims[2], d5[3] = k->dims[2], d5[4] = q->dims[3];
    }
    ap->batch = d5[0], ap->heads = d5[1], ap->nq = d5[2], ap->nk = d5[3], ap->head_dim = d5[4];
    for (int i = 0; i < 5; i++)
        if (d5[i] < 1 || d5[i] > ((int64_t)1 << 31))
            return ert_prep_error(p, ERT_E_SHAPE, "attention dims (%lld, %lld, %lld, %lld, %lld) must be in [1, 2^31]",
                                  (long long)d5[0], (long long)d5[1], (long long)d5[2], (long long)d5[3], (long long)d5[4]);
    ap->scale = p->node ? ert_attr_float(p->node, "scale", 0.0f) : 0.0f;
    if (ap->scale == 0.0f) ap->scale = (float)(1.0 / sqrt((double)ap->head_dim));
    ap->has_bias = p->n_in > 3 && p->in[3].dtype != ERT_DTYPE_UNDEFINED;
    dense_view(ap->q, ap->heads, ap->nq, ap->head_dim);
    dense_view(ap->k, ap->heads, ap->nk, ap->head_dim);
    dense_view(ap->v, ap->heads, ap->nk, ap->head_dim);
    dense_view(ap->o, ap->heads, ap->nq, ap->head_dim);
    if (ap->has_bias) { /* numpy broadcast of the bias's shape to (batch, heads, nq, nk) */
        const ert_tinfo *b = &p->in[3];
        const int64_t full[4] = {ap->batch, ap->heads, ap->nq, ap->nk};
        if (b->ndim > 4) return ert_prep_error(p, ERT_E_SHAPE, "the bias has rank %d (at most 4)", b->ndim);
        int64_t stride = 1;
        for (int d = 3; d >= 0; d--) {
            int bd = d - (4 - b->ndim);
            int64_t n = bd >= 0 ? b->dims[bd] : 1;
            if (n != 1 && n != full[d])
                return ert_prep_error(p, ERT_E_SHAPE, "the bias's dim %d (%lld) does not broadcast to %lld", bd, (long long)n,
                                      (long long)full[d]);
            ap->bias[1 + d] = n == 1 ? 0 : stride;
            stride *= n;
        }
    }
    ert_status st;
    if ((st = view_attr(p, "ert_q", ap->q)) || (st = view_attr(p, "ert_k", ap->k)) || (st = view_attr(p, "ert_v", ap->v)) ||
        (st = view_attr(p, "ert_o", ap->o)) || (st = view_attr(p, "ert_bias", ap->bias)))
        return st;
    ert_tinfo *y = &p->out[0];
    y->dtype = q->dtype;
    int no = p->node ? ert_attr_ints(p->node, "ert_out_shape", y->dims, ERT_MAX_DIMS + 1) : -1;
    if (no > ERT_MAX_DIMS || no == 0) return ert_prep_error(p, ERT_E_FORMAT, "attribute ert_out_shape must hold 1 to %d ints", ERT_MAX_DIMS);
    if (no < 0) {
        y->ndim = 4;
        y->dims[0] = ap->batch, y->dims[1] = ap->heads, y->dims[2] = ap->nq, y->dims[3] = ap->head_dim;
    } else {
        y->ndim = no;
        for (int d = 0; d < no; d++)
            if (y->dims[d] < 0) return ert_prep_error(p, ERT_E_SHAPE, "ert_out_shape has a negative dim");
    }
    st = ert_attn_check(p->ctx, ap, p->in, p->n_in, y, p->n_threads, &p->workspace_bytes);
    size_t g = ert_attn_gemm_workspace(ap, p->n_threads, p->gemm_workspace);
    if (st == ERT_OK && g > p->workspace_bytes) p->workspace_bytes = g;
    return st;
}

size_t ert_attn_gemm_workspace(const ert_attn_params *ap, int n_threads,
                               size_t (*gemm_ws)(int64_t M, int64_t N, int64_t K, int n_threads)) {
    if (ap->o[ERT_ATTN_SD] != 1 || !gemm_ws) return 0;
    if (n_threads < 1) n_threads = 1;
    /* one slot per worker (kernels/cpu/attention.c runs (batch, head, query
     * block) tasks, each with single-worker SGEMMs): S (nq x nk) and the
     * SGEMM's one-worker scratch */
    size_t sc, slot, total, g1 = gemm_ws(ap->nq, ap->nk, ap->head_dim, 1), g2 = gemm_ws(ap->nq, ap->head_dim, ap->nk, 1);
    size_t g = g1 > g2 ? g1 : g2;
    if (ert_mul_ovf((size_t)ap->nq, (size_t)ap->nk * sizeof(float), &sc) || g == SIZE_MAX || sc > SIZE_MAX / 4 ||
        g > SIZE_MAX / 4)
        return 0; /* too big for it: the row kernel */
    slot = ert_align_up(sc, 64) + ert_align_up(g, 64);
    if (ert_mul_ovf(slot, (size_t)n_threads, &total) || total > SIZE_MAX / 2) return 0;
    return total;
}

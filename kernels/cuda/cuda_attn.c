/* ert.Attention on CUDA through cuBLAS: S = scale q k^T (strided-batched
 * GEMM over the heads, f32 scores), P = softmax(S + bias) (attention.cu,
 * one warp per row, written in the data type), y = P v (a second GEMM that
 * writes y's strided view). At batch 1 the fused flash kernel of
 * attention.cu has one block per (head, 64 queries): 12 blocks for
 * ViT-Tiny on a GPU of 132 SMs, 68 us a layer where these three launches
 * take a fraction of that; the scores cost B H nq nk * (4 + 2) bytes of node
 * workspace (ViT-B/16: 2.8 MB), so past ATTN_BLAS_MAX the flash kernel
 * (no workspace) runs instead.
 *
 * cuBLAS takes each of q, k, v, y as a column-major matrix: a view whose
 * dims are contiguous (stride 1) is (head_dim x tokens) with ld = the token
 * stride; one whose tokens are contiguous (a transposed k) is (tokens x
 * head_dim) with ld = the dim stride. Any other view (or an ld cuBLAS would
 * refuse) leaves the node to the flash kernel. The GEMMs batch over heads
 * and batch together where the views allow, else over the larger of the two
 * with a loop over the smaller. */
#include "cuda_backend.h"
#include "cuda_internal.h"

#define ATTN_BLAS_MAX ((size_t)256 << 20) /* scores + probabilities beyond this: the flash kernel */

/* One operand as cuBLAS sees it: ld, and whether it is stored transposed
 * relative to (tokens x head_dim) column-major. */
typedef struct attn_mat {
    int64_t ld;
    bool dims_contig; /* (head_dim x tokens) column-major: the usual row-major view */
} attn_mat;

static bool mat_of(const int64_t *v, int64_t tokens, int64_t dim, attn_mat *m) {
    if (v[ERT_ATTN_SD] == 1 && v[ERT_ATTN_ST] >= dim && v[ERT_ATTN_ST] <= INT32_MAX) {
        *m = (attn_mat){v[ERT_ATTN_ST], true};
        return true;
    }
    if (v[ERT_ATTN_ST] == 1 && v[ERT_ATTN_SD] >= tokens && v[ERT_ATTN_SD] <= INT32_MAX) {
        *m = (attn_mat){v[ERT_ATTN_SD], false};
        return true;
    }
    return false;
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* Workspace of the cuBLAS path: cuBLAS's own, the f32 scores, the
 * probabilities; 0 where the path does not apply. */
size_t ert_cuda_attn_workspace(const cuda_ctx *c, const ert_kargs *a) {
    const ert_attn_params *p = &a->params->attn;
    attn_mat m;
    if (a->n_in > 0 && c->fast && ert_cuda_attn_mma_can(a->in[0].dtype, p, c->cc_major)) return 0;
    if (a->n_in < 3 || a->n_out < 1 || p->nq > INT32_MAX || p->nk > INT32_MAX || p->head_dim > INT32_MAX) return 0;
    if (!mat_of(p->q, p->nq, p->head_dim, &m) || !mat_of(p->k, p->nk, p->head_dim, &m) ||
        !mat_of(p->v, p->nk, p->head_dim, &m) || !mat_of(p->o, p->nq, p->head_dim, &m))
        return 0;
    size_t es = ert_dtype_size(a->in[0].dtype), n = (size_t)(p->batch * p->heads) * (size_t)p->nq * (size_t)p->nk;
    if (!es || n == 0 || n > ATTN_BLAS_MAX / (4 + es)) return 0;
    return BLAS_WS + align256(n * 4) + align256(n * es);
}

static cudaDataType_t cuda_type(ert_dtype dt) {
    return dt == ERT_DTYPE_F16 ? CUDA_R_16F : dt == ERT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* false: not this path (the caller runs the flash kernel); else *st. */
bool ert_cuda_attn_blas(cuda_ctx *c, const ert_kargs *a, ert_status *st) {
    const ert_attn_params *p = &a->params->attn;
    const size_t need = ert_cuda_attn_workspace(c, a);
    if (!need || !a->workspace || a->workspace_bytes < need) return false;
    attn_mat mq, mk, mv, mo; /* all four exist: ert_cuda_attn_workspace said so */
    if (!mat_of(p->q, p->nq, p->head_dim, &mq) || !mat_of(p->k, p->nk, p->head_dim, &mk) ||
        !mat_of(p->v, p->nk, p->head_dim, &mv) || !mat_of(p->o, p->nq, p->head_dim, &mo))
        return false;
    const ert_dtype dt = a->in[0].dtype;
    const cudaDataType_t t = cuda_type(dt);
    const size_t es = ert_dtype_size(dt);
    const int nq = (int)p->nq, nk = (int)p->nk, D = (int)p->head_dim;
    const long long per = (long long)nq * nk;
    char *ws = a->workspace;
    float *S = (float *)(void *)(ws + BLAS_WS);
    char *P = ws + BLAS_WS + align256((size_t)(p->batch * p->heads) * (size_t)per * 4);
    cublasStatus_t bs = cublasSetWorkspace(c->blas, ws, BLAS_WS);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        *st = blas_err(c, bs, "cublasSetWorkspace");
        return true;
    }
    /* The GEMMs batch over heads and batch in one call where every view
     * steps uniformly (batch stride = heads x head stride); otherwise they
     * batch over the larger of the two and loop over the smaller (Swin's 64
     * windows of 3 heads: 3 calls of 64, not 64 of 3). */
    const int64_t *views[4] = {p->q, p->k, p->v, p->o};
    bool fold = p->batch == 1;
    if (!fold) {
        fold = true;
        for (int i = 0; i < 4; i++) fold = fold && views[i][ERT_ATTN_SB] == p->heads * views[i][ERT_ATTN_SH];
    }
    const bool over_heads = !fold && p->heads < p->batch; /* loop over the heads, batch over the batch */
    const int loop_ax = over_heads ? ERT_ATTN_SH : ERT_ATTN_SB, bat_ax = over_heads ? ERT_ATTN_SB : ERT_ATTN_SH;
    const int64_t calls = fold ? 1 : over_heads ? p->heads : p->batch;
    const int64_t nbatch = fold ? p->batch * p->heads : over_heads ? p->batch : p->heads;
    const long long s_step = over_heads ? per : (long long)p->heads * per, s_bat = over_heads ? (long long)p->heads * per : per;
    if (nbatch > INT32_MAX) return false;
    const float zero = 0.0f, one = 1.0f;
    const char *q0 = a->in[0].data, *k0 = a->in[1].data, *v0 = a->in[2].data;
    char *y0 = a->out[0].data;
#define ATTN_AT(base, view, it) ((base) + (size_t)((view)[ERT_ATTN_OFF] + (it) * (view)[loop_ax]) * es)
    for (int64_t it = 0; it < calls; it++) {
        /* S^T (nk x nq, column-major, ld nk) = scale K Q^T */
        bs = cublasGemmStridedBatchedEx(c->blas, mk.dims_contig ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        mq.dims_contig ? CUBLAS_OP_N : CUBLAS_OP_T, nk, nq, D, &p->scale,
                                        ATTN_AT(k0, p->k, it), t, (int)mk.ld, p->k[bat_ax], ATTN_AT(q0, p->q, it), t,
                                        (int)mq.ld, p->q[bat_ax], &zero, S + it * s_step, CUDA_R_32F, nk, s_bat,
                                        (int)nbatch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            *st = blas_err(c, bs, "attention: cublasGemmStridedBatchedEx (q k^T)");
            return true;
        }
    }
    cudaError_t e = ert_cuda_attn_softmax_launch(dt, S, P, p->has_bias && a->n_in > 3 ? a->in[3].data : NULL, p, c->stream);
    if (e != cudaSuccess) {
        *st = cuda_err(c, e, "attention softmax");
        return true;
    }
    for (int64_t it = 0; it < calls; it++) {
        const char *v = ATTN_AT(v0, p->v, it), *Pb = P + (size_t)(it * s_step) * es;
        char *y = ATTN_AT(y0, p->o, it);
        if (mo.dims_contig) /* y^T (D x nq, ld) = V^T (D x nk) P^T (nk x nq, ld nk) */
            bs = cublasGemmStridedBatchedEx(c->blas, mv.dims_contig ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, D, nq, nk,
                                            &one, v, t, (int)mv.ld, p->v[bat_ax], Pb, t, nk, s_bat, &zero, y, t,
                                            (int)mo.ld, p->o[bat_ax], (int)nbatch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT);
        else /* y (nq x D, ld) = P (nq x nk) V (nk x D) */
            bs = cublasGemmStridedBatchedEx(c->blas, CUBLAS_OP_T, mv.dims_contig ? CUBLAS_OP_T : CUBLAS_OP_N, nq, D, nk,
                                            &one, Pb, t, nk, s_bat, v, t, (int)mv.ld, p->v[bat_ax], &zero, y, t,
                                            (int)mo.ld, p->o[bat_ax], (int)nbatch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            *st = blas_err(c, bs, "attention: cublasGemmStridedBatchedEx (P v)");
            return true;
        }
    }
#undef ATTN_AT
    *st = ERT_OK;
    return true;
}

/* ------------------------------------------------------------------ choice at bind */

static ert_status run_mma(cuda_ctx *c, const ert_kargs *a, bool split) {
    cudaError_t e = ert_cuda_attention_mma_launch(a->in[0].dtype, a->in[0].data, a->in[1].data, a->in[2].data,
                                                  a->n_in > 3 ? a->in[3].data : NULL, a->out[0].data,
                                                  &a->params->attn, c->sm_count, split, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "attention (mma flash kernel)");
}

typedef enum { ATTN_MMA_SPLIT, ATTN_MMA, ATTN_BLAS } attn_path;
typedef struct attn_timed {
    const ert_kargs *a;
    attn_path path;
} attn_timed;
static ert_status attn_timed_run(cuda_ctx *c, void *u) {
    const attn_timed *t = u;
    ert_status st = ERT_E_INTERNAL;
    if (t->path != ATTN_BLAS) return run_mma(c, t->a, t->path == ATTN_MMA_SPLIT);
    return ert_cuda_attn_blas(c, t->a, &st) ? st : ERT_E_INTERNAL;
}

/* ms per run of one path on the real buffers (ert_cuda_time_ms); < 0: failed. */
static float time_attn(cuda_ctx *c, const ert_kargs *a, attn_path path) {
    attn_timed t = {a, path};
    return ert_cuda_time_ms(c, attn_timed_run, &t);
}

/* The choice key: shapes, views (as a hash), dtype, bias, whether the
 * cuBLAS path has its workspace. */
static void attn_key(const ert_kargs *a, bool blas, int *key) {
    const ert_attn_params *p = &a->params->attn;
    memset(key, 0, CHOICE_KEY * sizeof *key);
    int64_t v[5 * ERT_ATTN_VIEW];
    memcpy(v, p->q, sizeof p->q);
    memcpy(v + ERT_ATTN_VIEW, p->k, sizeof p->k);
    memcpy(v + 2 * ERT_ATTN_VIEW, p->v, sizeof p->v);
    memcpy(v + 3 * ERT_ATTN_VIEW, p->o, sizeof p->o);
    memcpy(v + 4 * ERT_ATTN_VIEW, p->bias, sizeof p->bias);
    uint64_t h = ert_fnv64(ERT_FNV64_INIT, v, sizeof v);
    int64_t d[5] = {p->batch, p->heads, p->nq, p->nk, p->head_dim};
    for (int i = 0; i < 5; i++) {
        key[2 * i] = (int)(d[i] & 0x7fffffff);
        key[2 * i + 1] = (int)(d[i] >> 31);
    }
    key[10] = (int)a->in[0].dtype;
    key[11] = p->has_bias && a->n_in > 3;
    key[12] = blas;
    key[13] = (int)(h & 0xffffffffu);
    key[14] = (int)(h >> 32);
}

ert_status ert_cuda_attn_bind(cuda_ctx *c, ert_kargs *a) {
    a->state = NULL;
    if (a->n_in < 3 || a->n_out < 1) return ERT_OK;
    const ert_attn_params *p = &a->params->attn;
    const size_t need = ert_cuda_attn_workspace(c, a);
    const bool blas = need && a->workspace && a->workspace_bytes >= need;
    const bool mma = ert_cuda_attn_mma_can(a->in[0].dtype, p, c->cc_major);
    /* the mma kernel as its launcher picks it (keys split over a block's
     * warps where the query tiles are few), with a warp per query tile, and
     * the cuBLAS path: the fastest, measured once per shape (or taken from
     * the plan cache). ERT_CREATE_FAST: the launcher's pick. */
    float t_split = -1, t_mma = -1, t_blas = -1, best = -1;
    int key[CHOICE_KEY];
    attn_key(a, blas, key);
    const choice_entry *ch = mma && !c->fast ? ert_cuda_choice_find(c, CHOICE_ATTN, key) : NULL;
    if (ch && ch->pick == ATTN_BLAS && !blas) ch = NULL;
    if (ch) {
        best = ch->ms;
        a->state = ch->pick == ATTN_BLAS ? &c->attn_blas_tag : ch->pick == ATTN_MMA ? &c->attn_nosplit_tag : NULL;
    } else if (mma && !c->fast) {
        t_split = time_attn(c, a, ATTN_MMA_SPLIT);
        t_mma = time_attn(c, a, ATTN_MMA);
        if (blas) t_blas = time_attn(c, a, ATTN_BLAS);
        c->n_searches++;
        best = t_split;
        attn_path pick = ATTN_MMA_SPLIT;
        if (t_mma >= 0 && (best < 0 || t_mma < best)) best = t_mma, a->state = &c->attn_nosplit_tag, pick = ATTN_MMA;
        if (t_blas >= 0 && (best < 0 || t_blas < best)) best = t_blas, a->state = &c->attn_blas_tag, pick = ATTN_BLAS;
        if (best >= 0) ert_cuda_choice_put(c, CHOICE_ATTN, key, (int)pick, 0, best);
    } else if (!mma && blas) {
        a->state = &c->attn_blas_tag;
    }
    const char *path = a->state == &c->attn_blas_tag      ? "cuBLAS GEMMs + softmax"
                       : a->state == &c->attn_nosplit_tag ? "mma flash kernel, a warp per query tile"
                       : mma                              ? "mma flash kernel"
                                                          : "flash kernel (WMMA or rows)";
    if (best >= 0)
        ert_log(c->ctx, ERT_LOG_DEBUG,
                "attention '%s' (%s, %lld x %lld heads, %lld x %lld tokens, dim %lld): %s (%.4f ms; mma %.4f, "
                "mma without key split %.4f, cuBLAS %.4f)",
                a->name ? a->name : "?", ert_dtype_name(a->in[0].dtype), (long long)p->batch, (long long)p->heads,
                (long long)p->nq, (long long)p->nk, (long long)p->head_dim, path, best, t_split, t_mma, t_blas);
    else
        ert_log(c->ctx, ERT_LOG_DEBUG, "attention '%s' (%s, %lld x %lld heads, %lld x %lld tokens, dim %lld): %s",
                a->name ? a->name : "?", ert_dtype_name(a->in[0].dtype), (long long)p->batch, (long long)p->heads,
                (long long)p->nq, (long long)p->nk, (long long)p->head_dim, path);
    return ERT_OK;
}

ert_status ert_cuda_attn_run(cuda_ctx *c, const ert_kargs *a) {
    ert_status st;
    if (a->state == &c->attn_blas_tag) {
        if (ert_cuda_attn_blas(c, a, &st)) return st;
        return ert_set_error(c->ctx, ERT_E_INTERNAL, "node '%s': attention bound to cuBLAS without its workspace",
                             a->name ? a->name : "?");
    }
    if (ert_cuda_attn_mma_can(a->in[0].dtype, &a->params->attn, c->cc_major))
        return run_mma(c, a, a->state != &c->attn_nosplit_tag);
    cudaError_t e = ert_cuda_attention_launch(a->in[0].dtype, a->in[0].data, a->in[1].data, a->in[2].data,
                                              a->n_in > 3 ? a->in[3].data : NULL, a->out[0].data, &a->params->attn,
                                              true, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "attention");
}

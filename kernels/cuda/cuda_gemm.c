/* CUDA backend: GEMMs through cuBLAS (Gemm, MatMul) and cuBLASLt (channels-last
 * 1x1 and patchify convs, and MatMuls that are one GEMM with a fused bias or
 * residual, with their epilogue in the GEMM).
 * (kernels/cuda/cuda_backend.h: the backend as a whole and what the files share.) */
#include "cuda_backend.h"

#ifdef ERT_HAVE_CUDNN
/* ------------------------------------------------------------------ 1x1 conv (cuBLASLt) */

/* Channels-last f16/bf16 2-D 1x1 convs with stride 1, no pad and one group
 * are a plain GEMM: x (N, H, W, C) is a row-major [N*H*W, C] matrix, y
 * (N, H, W, K) a row-major [N*H*W, K] one and the filter (K, C, 1, 1) a
 * row-major [K, C] one, so y = x W^T. cuBLASLt fuses bias + ReLU into that
 * GEMM and adds the residual as its C matrix (beta = 1); cuDNN's NHWC 1x1
 * convs plus our epilogue kernel were slower (MobileNetV2 stayed NCHW:
 * 4.955 vs 3.766 ms summed, bench/RESULTS.md). Trainer sessions keep cuDNN
 * (their filters are recast from master weights each step; untested here).
 * The filter bytes are the same in (K, C, R, S) and (K, R, S, C) for 1x1, so
 * a shared filter rewritten by filter_to_krsc does not matter. Only in
 * sessions created with ERT_SESSION_GEMM_1X1 (off by default: measured
 * slower end to end on MobileNetV2, see edgert.h).
 * Patchify convs (kernel == stride > 1, no pad, no dilation, one group: the
 * patch embedding of ViT/DeiT/Swin, ConvNeXt's stem and downsampling) are
 * the same GEMM on their im2col matrix, [N*OH*OW, R*S*C], which for them is
 * a gather of contiguous runs (ert_cuda_patch_gather_launch), with the
 * filter stored (K, R, S, C). cuDNN's implicit GEMM gave them few thread
 * blocks (M = 196 output pixels, K = 768-1536: ViT-B/16's patch conv took
 * 0.11 ms, ConvNeXt-T's 2x2 downsampling 0.12-0.14 ms, per-node profile on
 * an H100), cuBLASLt splits K. They are GEMMs whenever conv_describe
 * measures the GEMM faster than cuDNN (always with ERT_SESSION_GEMM_1X1). */
static bool conv_patchify(const ert_conv_params *p, const ert_tview *w) {
    if (p->nsp != 2 || w->ndim != 4 || (w->dims[2] == 1 && w->dims[3] == 1)) return false;
    for (int i = 0; i < 2; i++)
        if (p->stride[i] != w->dims[2 + i] || p->pad_begin[i] != 0 || p->pad_end[i] != 0 || p->dilation[i] != 1)
            return false;
    return true;
}

bool ert_cuda_gemm_can(const cuda_ctx *c, const ert_kargs *a) {
#ifdef ERT_CUDA_NO_GEMM1X1 /* build-time switch for measurements: cuDNN for every conv */
    (void)c, (void)a;
    return false;
#else
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    if (!c->lt || c->trainer || !p->nhwc || p->nsp != 2 || p->group != 1) return false;
    if (x->dtype != ERT_DTYPE_F16 && x->dtype != ERT_DTYPE_BF16) return false;
    if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4) return false;
    bool patch = conv_patchify(p, w);
    if (patch) {
        if (y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1] / w->dims[2] || y->dims[2] != x->dims[2] / w->dims[3])
            return false;
    } else {
        if (!c->gemm1x1 || w->dims[2] != 1 || w->dims[3] != 1) return false;
        for (int i = 0; i < 2; i++)
            if (p->stride[i] != 1 || p->pad_begin[i] != 0 || p->pad_end[i] != 0) return false;
        for (int i = 0; i < 3; i++)
            if (y->dims[i] != x->dims[i]) return false;
    }
    if (y->dims[3] != w->dims[0] || x->dims[3] != w->dims[1]) return false;
    int64_t M = y->dims[0] * y->dims[1] * y->dims[2], C = w->dims[1] * w->dims[2] * w->dims[3];
    return M > 0 && M <= INT32_MAX && w->dims[0] > 0 && w->dims[0] <= INT32_MAX && C > 0 && C <= INT32_MAX &&
           (!patch || (uint64_t)M * (uint64_t)C * 2 <= CONV_WS_MAX);
#endif
}

static bool gemm_bias(const ert_kargs *a) { return a->params->conv.has_bias && a->n_in > 2; }
static bool gemm_res(const ert_kargs *a) { return a->params->conv.has_residual && a->n_in > 3; }

/* ReLU (and none) run in cuBLASLt's epilogue; any other activation (ReLU6 =
 * Clip(0, 6): cuBLASLt has no clamp) in the epilogue kernel after it. */
static cublasLtEpilogue_t gemm_epilogue(const ert_kargs *a, bool *post) {
    ert_act k = a->params->conv.act.kind;
    *post = k != ERT_ACT_NONE && k != ERT_ACT_RELU;
    if (k == ERT_ACT_RELU) return gemm_bias(a) ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    return gemm_bias(a) ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

/* Column-major, as cuBLASLt takes it: y^T [K, M] = (W as [C, K])^T x^T [C, M]
 * (a patchify conv: x is its im2col matrix, C = R*S*C_in). */
static ert_status gemm_descs(cuda_ctx *c, const ert_kargs *a, conv_state *s, int *key) {
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    uint64_t M = (uint64_t)(y->dims[0] * y->dims[1] * y->dims[2]), C = (uint64_t)(w->dims[1] * w->dims[2] * w->dims[3]),
             K = (uint64_t)w->dims[0];
    cudaDataType_t t = x->dtype == ERT_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
    cublasLtEpilogue_t epi = gemm_epilogue(a, &s->gemm_post);
    cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    int32_t bt = (int32_t)t;
    cublasStatus_t bs;
    if ((bs = cublasLtMatmulDescCreate(&s->md, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
        (bs = cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT)) ||
        (bs = cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN)) ||
        (bs = cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi)) ||
        (gemm_bias(a) && (bs = cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt))) ||
        (bs = cublasLtMatrixLayoutCreate(&s->la, t, C, K, (int64_t)C)) ||
        (bs = cublasLtMatrixLayoutCreate(&s->lb, t, C, M, (int64_t)C)) ||
        (bs = cublasLtMatrixLayoutCreate(&s->lc, t, K, M, (int64_t)K)))
        return blas_err(c, bs, "cuBLASLt 1x1 conv descriptors");
    int k[8] = {(int)M, (int)C, (int)K, (int)x->dtype, (int)epi, gemm_res(a), 0, 0};
    memcpy(key, k, sizeof k);
    return ERT_OK;
}

/* One GEMM (+ the epilogue kernel when needed) on the given buffers; the
 * bias pointer is the descriptor's. */
cublasStatus_t ert_cuda_gemm_call(cuda_ctx *c, const conv_state *s, const cublasLtMatmulAlgo_t *algo, const void *w,
                                const void *x, const void *res, void *y, void *ws, size_t ws_bytes) {
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(c->lt, s->md, &one, w, s->la, x, s->lb, res ? &one : &zero, res ? res : y, s->lc, y, s->lc,
                          algo, ws, ws_bytes, c->stream);
}

/* cuBLASLt's heuristic candidates for this shape, each timed on zeroed
 * scratch buffers (create time only); the fastest, or one needing less
 * workspace within 5% of it, cached in c->lts. Its time is the GEMM's alone
 * (like cudnnFind's for cuDNN's convs, which also leave out the epilogue). */
static ert_status gemm_find(cuda_ctx *c, conv_state *s, const int *key, const lt_entry **out) {
    for (int i = 0; i < c->n_lts; i++)
        if (!memcmp(c->lts[i].key, key, sizeof c->lts[i].key)) {
            *out = &c->lts[i];
            return ERT_OK;
        }
    if (c->n_lts == c->cap_lts) {
        int cap = c->cap_lts ? 2 * c->cap_lts : 32;
        lt_entry *n = realloc(c->lts, (size_t)cap * sizeof *n);
        if (!n) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
        c->lts = n;
        c->cap_lts = cap;
    }
    lt_entry *e = &c->lts[c->n_lts];
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, sizeof e->key);
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t r[LT_ALGOS];
    int got = 0;
    size_t wsmax = key[7] ? BLAS_WS : LT_WS_MAX;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsmax, sizeof wsmax) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoGetHeuristic(c->lt, s->md, s->la, s->lb, s->lc, s->lc, pref, LT_ALGOS, r, &got) !=
            CUBLAS_STATUS_SUCCESS)
        got = 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    int ckey[CHOICE_KEY] = {0};
    memcpy(ckey, key, sizeof e->key);
    const choice_entry *ch = c->fast || got <= 0 ? NULL : ert_cuda_choice_find(c, CHOICE_LT, ckey);
    if (ch && ch->pick >= 0 && (ch->pick >= got || r[ch->pick].state != CUBLAS_STATUS_SUCCESS ||
                                r[ch->pick].workspaceSize != (size_t)ch->aux || r[ch->pick].workspaceSize > wsmax)) {
        ert_log(c->ctx, ERT_LOG_INFO, "plan cache: cuBLASLt's heuristics no longer hold the cached GEMM algorithm; measuring");
        ch = NULL;
    }
    if (ch) { /* the plan cache's (or this create's) answer, untimed */
        if (ch->pick >= 0) {
            e->ok = true;
            e->algo = r[ch->pick].algo;
            e->ws = r[ch->pick].workspaceSize;
            e->ms = ch->ms;
        }
        got = 0;
    } else if (c->fast) { /* cuBLASLt's first usable heuristic answer, untimed */
        for (int i = 0; i < got && !e->ok; i++)
            if (r[i].state == CUBLAS_STATUS_SUCCESS && r[i].workspaceSize <= wsmax) {
                e->ok = true;
                e->algo = r[i].algo;
                e->ws = r[i].workspaceSize;
                e->ms = -1;
            }
        got = 0;
    } else if (got > 0) {
        c->n_searches++;
    }
    bool measured = false; /* the timing loop ran (a failed one is not kept) */
    int pick = -1;
    size_t M = (size_t)key[0], C = (size_t)key[1], K = (size_t)key[2], es = ert_dtype_size((ert_dtype)key[3]);
    void *bx = NULL, *bw = NULL, *by = NULL, *bb = NULL, *br = NULL, *bws = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    const int reps = 20;
    double t0 = ert_cuda_now_ms();
    if (got > 0 && cudaMalloc(&bx, M * C * es) == cudaSuccess && cudaMalloc(&bw, K * C * es) == cudaSuccess &&
        cudaMalloc(&by, M * K * es) == cudaSuccess && cudaMalloc(&bb, K * es) == cudaSuccess &&
        (!key[5] || cudaMalloc(&br, M * K * es) == cudaSuccess) && cudaMalloc(&bws, wsmax) == cudaSuccess &&
        cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
        cudaMemsetAsync(bx, 0, M * C * es, c->stream) == cudaSuccess &&
        cudaMemsetAsync(bw, 0, K * C * es, c->stream) == cudaSuccess &&
        cudaMemsetAsync(bb, 0, K * es, c->stream) == cudaSuccess &&
        (!br || cudaMemsetAsync(br, 0, M * K * es, c->stream) == cudaSuccess) &&
        cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bb, sizeof bb) ==
            CUBLAS_STATUS_SUCCESS) {
        float ts[LT_ALGOS], best = -1;
        measured = true;
        for (int i = 0; i < got; i++) {
            ts[i] = -1;
            if (r[i].state != CUBLAS_STATUS_SUCCESS || r[i].workspaceSize > wsmax) continue;
            cublasStatus_t bs = ert_cuda_gemm_call(c, s, &r[i].algo, bw, bx, br, by, bws, r[i].workspaceSize);
            if (bs != CUBLAS_STATUS_SUCCESS || cudaEventRecord(e0, c->stream) != cudaSuccess) continue;
            for (int k = 0; k < reps && bs == CUBLAS_STATUS_SUCCESS; k++)
                bs = ert_cuda_gemm_call(c, s, &r[i].algo, bw, bx, br, by, bws, r[i].workspaceSize);
            float t = 0;
            if (bs != CUBLAS_STATUS_SUCCESS || cudaEventRecord(e1, c->stream) != cudaSuccess ||
                cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&t, e0, e1) != cudaSuccess)
                continue;
            ts[i] = t / reps;
            if (best < 0 || ts[i] < best) best = ts[i];
        }
        for (int i = 0; i < got; i++) {
            if (ts[i] < 0 || ts[i] > best * 1.05f) continue;
            if (!e->ok || r[i].workspaceSize < e->ws || (r[i].workspaceSize == e->ws && ts[i] < e->ms)) {
                e->ok = true;
                e->algo = r[i].algo;
                e->ws = r[i].workspaceSize;
                e->ms = ts[i];
                pick = i;
            }
        }
    }
    if (measured) ert_cuda_choice_put(c, CHOICE_LT, ckey, pick, e->ok ? (int64_t)e->ws : 0, e->ok ? e->ms : -1.0f);
    cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(bx);
    cudaFree(bw);
    cudaFree(by);
    cudaFree(bb);
    cudaFree(br);
    cudaFree(bws);
    if (got > 0) c->t_measure += ert_cuda_now_ms() - t0;
    c->n_lts++;
    *out = e;
    return ERT_OK;
}

/* The GEMM state for a conv ert_cuda_gemm_can accepts; NULL (and ERT_OK) when
 * cuBLASLt has nothing that runs or its pick needs more than ws_limit. */
ert_status ert_cuda_gemm_describe(cuda_ctx *c, const ert_kargs *a, size_t ws_limit, conv_state **out, float *ms) {
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
    s->gemm = true;
    int key[8];
    const lt_entry *e = NULL;
    ert_status st = gemm_descs(c, a, s, key);
    if (st == ERT_OK) st = gemm_find(c, s, key, &e);
    const ert_tview *w = &a->in[1];
    if (conv_patchify(&a->params->conv, w)) /* M x C elements of 2 bytes */
        s->col_bytes = ((size_t)key[0] * (size_t)key[1] * 2 + 255) & ~(size_t)255;
    if (st != ERT_OK || !e->ok || s->col_bytes + e->ws > ws_limit) {
        ert_cuda_conv_state_free(s);
        return st;
    }
    s->lalgo = e->algo;
    s->lws = e->ws;
    s->ws_bytes = s->col_bytes + s->lws; /* what the node's workspace must hold */
    *ms = e->ms;
    *out = s;
    return ERT_OK;
}

/* bind_node: point the descriptor at the real bias and run the GEMM once on
 * the real buffers (values do not matter yet); false: cuBLASLt refused them. */
bool ert_cuda_gemm_bind(cuda_ctx *c, const ert_kargs *a, conv_state *s) {
    const void *bias = gemm_bias(a) ? a->in[2].data : NULL;
    if (gemm_bias(a) && (!bias || cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                                 sizeof bias) != CUBLAS_STATUS_SUCCESS))
        return false;
    if (!a->workspace ? s->ws_bytes > 0 : a->workspace_bytes < s->ws_bytes) return false;
    cublasStatus_t bs = ert_cuda_gemm_run(c, a, s);
    cudaError_t e = cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    return bs == CUBLAS_STATUS_SUCCESS && e == cudaSuccess;
}

/* The GEMM of a bound conv: the gather first for a patchify conv. */
cublasStatus_t ert_cuda_gemm_run(cuda_ctx *c, const ert_kargs *a, const conv_state *s) {
    const void *x = a->in[0].data;
    char *ws = a->workspace;
    if (s->col_bytes) {
        const ert_tview *xv = &a->in[0], *w = &a->in[1], *y = &a->out[0];
        if (ert_cuda_patch_gather_launch(x, ws, ert_dtype_size(xv->dtype), xv->dims[0], xv->dims[1], xv->dims[2],
                                         xv->dims[3], w->dims[2], w->dims[3], y->dims[1], y->dims[2],
                                         c->stream) != cudaSuccess)
            return CUBLAS_STATUS_EXECUTION_FAILED;
        x = ws;
        ws += s->col_bytes;
    }
    return ert_cuda_gemm_call(c, s, &s->lalgo, a->in[1].data, x, gemm_res(a) ? a->in[3].data : NULL, a->out[0].data, ws,
                              s->lws);
}

/* ------------------------------------------------------------------ MatMul + epilogue (cuBLASLt) */

/* A MatMul that is one GEMM (A (..., M, K) with its batch folded into rows,
 * B a (K, N) or, trans_b, (N, K) matrix) and carries a fused bias over the
 * last axis or a residual (runtime/passes/fuse.c: a transformer's Linear
 * layers, its residual stream) is one cuBLASLt call: bias and ReLU in its
 * epilogue, the residual as its C matrix with beta = 1, GELU there too in
 * f16/bf16 (cuBLASLt's tanh form, within 4.8e-4 of erf: edgert.h,
 * ERT_SESSION_EXACT_GELU), any other activation (and GELU in f32) in the
 * epilogue kernel after it. cuBLAS + the epilogue kernel was
 * two launches per Linear: ViT-Tiny ran 48 conv_epi_kernel launches per
 * inference beside its 49 GEMMs (ncu, H100, 2026-11-25). Inference sessions
 * only (a trainer's MatMul keeps cuBLAS + the epilogue kernel); the
 * algorithm is timed at create like the 1x1-conv GEMM's, within the node's
 * BLAS_WS workspace, and kept only where it measures faster than cuBLAS +
 * the epilogue kernel on the node's own buffers. */
typedef struct mm_shape {
    int64_t M, K, N;
    bool tb, bias, res;
} mm_shape;

static bool mm_lt_shape(const cuda_ctx *c, const ert_kargs *a, mm_shape *sh) {
    const ert_tview *A = &a->in[0], *B = &a->in[1], *Y = &a->out[0];
    const ert_gemm_params *gp = &a->params->gemm;
    if (!c->lt || c->trainer || A->ndim < 2 || B->ndim != 2 || Y->ndim != A->ndim) return false;
    if (Y->dtype != ERT_DTYPE_F16 && Y->dtype != ERT_DTYPE_BF16 && Y->dtype != ERT_DTYPE_F32) return false;
    sh->bias = gp->has_c && a->n_in > 2 && a->in[2].data;
    sh->res = a->n_in > 3 && a->in[3].data;
    if (!sh->bias && !sh->res) return false;
    sh->tb = gp->trans_b;
    sh->K = A->dims[A->ndim - 1];
    sh->N = B->dims[sh->tb ? 0 : 1];
    if (B->dims[sh->tb ? 1 : 0] != sh->K || Y->dims[Y->ndim - 1] != sh->N) return false;
    sh->M = 1;
    for (int d = 0; d < A->ndim - 1; d++) {
        if (Y->dims[d] != A->dims[d]) return false;
        sh->M *= A->dims[d];
    }
    if (sh->M <= 0 || sh->K <= 0 || sh->N <= 0 || sh->M > INT32_MAX || sh->K > INT32_MAX || sh->N > INT32_MAX)
        return false;
    if (B->dtype != Y->dtype || A->dtype != Y->dtype || (sh->bias && (a->in[2].dtype != Y->dtype ||
                                                                     a->in[2].n_elems != sh->N)))
        return false;
    return !sh->res || (a->in[3].dtype == Y->dtype && a->in[3].n_elems == Y->n_elems);
}

static ert_status matmul_lt_run(cuda_ctx *c, const ert_kargs *a, const conv_state *s);

/* ms per run of the MatMul on its real buffers, through cuBLASLt (s) or
 * cuBLAS + the epilogue kernel (s NULL); -1 when it does not run (create
 * time only: the error it set is cleared by the caller's fallback). */
static float matmul_time(cuda_ctx *c, const ert_kargs *a, const conv_state *s) {
    enum { REPS = 10 };
    cudaEvent_t e0 = NULL, e1 = NULL;
    float t = -1;
    ert_status st = s ? matmul_lt_run(c, a, s) : ert_cuda_run_matmul(c, a);
    if (st == ERT_OK && cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
        cudaEventRecord(e0, c->stream) == cudaSuccess) {
        for (int k = 0; k < REPS && st == ERT_OK; k++) st = s ? matmul_lt_run(c, a, s) : ert_cuda_run_matmul(c, a);
        if (st != ERT_OK || cudaEventRecord(e1, c->stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&t, e0, e1) != cudaSuccess)
            t = -1;
        else
            t /= REPS;
    }
    if (cudaStreamSynchronize(c->stream) != cudaSuccess) t = -1;
    cudaGetLastError();
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    return t;
}

/* bind_node for a MatMul: a->state is the cuBLASLt state when the MatMul
 * takes that path, else NULL (cuBLAS + the epilogue kernel). */
ert_status ert_cuda_matmul_bind(cuda_ctx *c, ert_kargs *a) {
    mm_shape sh;
    a->state = NULL;
    if (!mm_lt_shape(c, a, &sh)) return ERT_OK;
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
    s->gemm = true;
    ert_act k = a->params->gemm.act.kind;
    const ert_dtype dt = a->out[0].dtype;
    /* GELU in cuBLASLt's epilogue is its tanh form: half types only, unless
     * the session asked for the erf form (ERT_SESSION_EXACT_GELU, edgert.h) */
    bool lt_gelu = k == ERT_ACT_GELU && !c->exact_gelu && (dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16);
    s->gemm_post = k != ERT_ACT_NONE && k != ERT_ACT_RELU && !lt_gelu;
    cublasLtEpilogue_t epi = k == ERT_ACT_RELU ? (sh.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                             : lt_gelu       ? (sh.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                                             : (sh.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    cudaDataType_t t = dt == ERT_DTYPE_F16 ? CUDA_R_16F : dt == ERT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasOperation_t opa = sh.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opN = CUBLAS_OP_N;
    int32_t bt = (int32_t)t;
    /* column-major: Y^T [N, M] = op(B^T) [N, K] A^T [K, M] */
    cublasStatus_t bs;
    if ((bs = cublasLtMatmulDescCreate(&s->md, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
        (bs = cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa)) ||
        (bs = cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN)) ||
        (bs = cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi)) ||
        (sh.bias && (bs = cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt))) ||
        (bs = sh.tb ? cublasLtMatrixLayoutCreate(&s->la, t, (uint64_t)sh.K, (uint64_t)sh.N, sh.K)
                    : cublasLtMatrixLayoutCreate(&s->la, t, (uint64_t)sh.N, (uint64_t)sh.K, sh.N)) ||
        (bs = cublasLtMatrixLayoutCreate(&s->lb, t, (uint64_t)sh.K, (uint64_t)sh.M, sh.K)) ||
        (bs = cublasLtMatrixLayoutCreate(&s->lc, t, (uint64_t)sh.N, (uint64_t)sh.M, sh.N))) {
        ert_cuda_conv_state_free(s);
        return blas_err(c, bs, "cuBLASLt MatMul descriptors");
    }
    /* key as the 1x1 conv's (M, inner, out, dtype, epilogue, residual), then
     * B's orientation (0: (N, K) as a conv filter) and the BLAS_WS cap */
    int key[8] = {(int)sh.M, (int)sh.K, (int)sh.N, (int)dt, (int)epi, sh.res, sh.tb ? 0 : 1, 1};
    const lt_entry *e = NULL;
    ert_status st = gemm_find(c, s, key, &e);
    const void *bias = sh.bias ? a->in[2].data : NULL;
    if (st != ERT_OK || !e->ok || (!a->workspace ? e->ws > 0 : a->workspace_bytes < e->ws) ||
        (sh.bias && cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) !=
                        CUBLAS_STATUS_SUCCESS)) {
        ert_cuda_conv_state_free(s);
        return st;
    }
    s->lalgo = e->algo;
    s->lws = e->ws;
    /* both ways on the real buffers (their values do not matter yet): a
     * refusal, or cuBLAS + the epilogue kernel measured faster (ConvNeXt-T's
     * MLP ran 5% slower end to end with every Linear in cuBLASLt, H100),
     * leaves the node to cuBLAS. ERT_CREATE_FAST: cuBLASLt whenever it runs
     * (cuBLAS is not timed). */
    float t_lt = matmul_time(c, a, s), t_blas = c->fast || t_lt < 0 ? -1 : matmul_time(c, a, NULL);
    bool lt = t_lt >= 0 && (t_blas < 0 || t_lt <= t_blas);
    ert_log(c->ctx, ERT_LOG_DEBUG, "node '%s' (MatMul %lldx%lldx%lld): cuBLASLt with its epilogue%s %.4f ms, cuBLAS + "
            "epilogue kernel %.4f ms: %s", a->name ? a->name : "?", (long long)sh.M, (long long)sh.K, (long long)sh.N,
            lt_gelu ? " (tanh-form GELU)" : "", t_lt, t_blas, lt ? "cuBLASLt" : "cuBLAS");
    if (!lt) {
        ert_cuda_conv_state_free(s);
        return ERT_OK;
    }
    a->state = s;
    return ERT_OK;
}

static ert_status matmul_lt_run(cuda_ctx *c, const ert_kargs *a, const conv_state *s) {
    const ert_tview *Y = &a->out[0];
    const float zero = 0.0f, one = 1.0f;
    const void *res = a->n_in > 3 && a->in[3].data ? a->in[3].data : NULL;
    cublasStatus_t bs = cublasLtMatmul(c->lt, s->md, &a->params->gemm.alpha, a->in[1].data, s->la, a->in[0].data,
                                       s->lb, res ? &one : &zero, res ? res : Y->data, s->lc, Y->data, s->lc,
                                       &s->lalgo, a->workspace, s->lws, c->stream);
    if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasLtMatmul (MatMul)");
    if (!s->gemm_post) return ERT_OK;
    ert_cuda_map m;
    map_out(&m, Y);
    cudaError_t e = ert_cuda_epilogue_launch(Y->dtype, Y->data, NULL, 0.0f, NULL, &m, Y->n_elems, &a->params->gemm.act,
                                             c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "matmul epilogue");
}
#endif

/* ------------------------------------------------------------------ Gemm, MatMul (cuBLAS) */

static ert_status blas_ws(cuda_ctx *c, const ert_kargs *a) {
    if (!a->workspace) return ERT_OK;
    cublasStatus_t bs = cublasSetWorkspace(c->blas, a->workspace, a->workspace_bytes);
    return bs == CUBLAS_STATUS_SUCCESS ? ERT_OK : blas_err(c, bs, "cublasSetWorkspace");
}

/* cublasGemmStridedBatchedEx for every dtype: data f32/f16/bf16, f32
 * accumulation (CUBLAS_COMPUTE_32F: no TF32 under the default math mode, the
 * tensor cores for f16/bf16). Column-major arguments, as cuBLAS takes them. */
static cublasStatus_t gemm_ex(cuda_ctx *c, ert_dtype dt, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                              int k, const float *alpha, const void *A, int lda, long long sa, const void *B, int ldb,
                              long long sb, void *C, int ldc, long long sc, int batch) {
    cudaDataType_t t = dt == ERT_DTYPE_F16 ? CUDA_R_16F : dt == ERT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    const float zero = 0.0f;
    return cublasGemmStridedBatchedEx(c->blas, ta, tb, m, n, k, alpha, A, t, lda, sa, B, t, ldb, sb, &zero, C, t, ldc,
                                      sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/* Row-major C (M,N) = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: call
 * cuBLAS with the operands swapped and nothing transposed in memory. */
ert_status ert_cuda_run_gemm(cuda_ctx *c, const ert_kargs *a) {
    const ert_gemm_params *p = &a->params->gemm;
    const ert_tview *A = &a->in[0], *B = &a->in[1], *Y = &a->out[0];
    const ert_tview *C = a->n_in > 2 && a->in[2].data ? &a->in[2] : NULL;
    if (A->ndim != 2 || B->ndim != 2 || Y->ndim != 2) return ERT_E_UNSUPPORTED;
    int64_t M = Y->dims[0], N = Y->dims[1], K = p->trans_a ? A->dims[0] : A->dims[1];
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return ERT_E_UNSUPPORTED;
    if (M == 0 || N == 0) return ERT_OK;
    ert_status st = blas_ws(c, a);
    if (st) return st;
    cublasStatus_t bs = gemm_ex(c, Y->dtype, p->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                (int)N, (int)M, (int)K, &p->alpha, B->data, (int)(p->trans_b ? K : N), 0, A->data,
                                (int)(p->trans_a ? M : K), 0, Y->data, (int)N, 0, 1);
    if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasGemmEx");
    ert_cuda_map m;
    map_out(&m, Y);
    const void *add = NULL;
    if (C && p->beta != 0.0f) {
        ert_cuda_bcast_strides(2, Y->dims, C->ndim, C->dims, m.s[0]);
        add = C->data;
    }
    cudaError_t e = ert_cuda_epilogue_launch(Y->dtype, Y->data, add, p->beta, NULL, &m, Y->n_elems, &p->act, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "gemm epilogue");
}

/* ------------------------------------------------------------------ NCHW patchify conv */

/* A patchify conv (kernel == stride, no pad, dilation 1, one group, 2-D)
 * that stays channels-first (ViT/Swin's patch embedding reads a 3-channel
 * image: the layout pass keeps it NCHW) as x gathered into its im2col
 * matrix col (N, C*R*S, OH*OW) by one strided copy, then one
 * strided-batched GEMM y (K, OH*OW) = W (K, C*R*S) col per image, written
 * NCHW, then bias/residual/activation in the conv epilogue kernel. cuDNN
 * refused cudnnFind's best algorithm for ViT-B/16's 16x16/16 conv on the
 * real buffers and ran algorithm 0 (0.113 ms, H100 per-node profile); the
 * GEMM is a few microseconds. f16/bf16 inference sessions; the bind step
 * times it against what cuDNN (or the direct kernel) would run and keeps the
 * faster (ERT_CREATE_FAST: the GEMM, untimed). Workspace: cuBLAS's, then col. */
bool ert_cuda_patch_nchw_can(const cuda_ctx *c, const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    if (c->trainer || a->op != ERT_OP_CONV || a->n_in < 2 || p->nhwc || p->nsp != 2 || p->group != 1 ||
        p->has_in_scale || p->has_scale)
        return false;
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 || (x->dtype != ERT_DTYPE_F16 && x->dtype != ERT_DTYPE_BF16) ||
        w->dtype != x->dtype || y->dtype != x->dtype)
        return false;
    for (int i = 0; i < 2; i++)
        if (p->stride[i] != w->dims[2 + i] || p->stride[i] < 2 || p->pad_begin[i] != 0 || p->pad_end[i] != 0 ||
            p->dilation[i] != 1)
            return false;
    if (y->dims[0] != x->dims[0] || y->dims[1] != w->dims[0] || w->dims[1] != x->dims[1] ||
        y->dims[2] != x->dims[2] / w->dims[2] || y->dims[3] != x->dims[3] / w->dims[3])
        return false;
    int64_t J = w->dims[1] * w->dims[2] * w->dims[3], P = y->dims[2] * y->dims[3];
    return J > 0 && P > 0 && J <= INT32_MAX && P <= INT32_MAX && w->dims[0] <= INT32_MAX && y->dims[0] <= INT32_MAX &&
           (uint64_t)(y->dims[0] * J) * (uint64_t)P * ert_dtype_size(x->dtype) <= CONV_WS_MAX;
}

static size_t patch_col_offset(void) { return (BLAS_WS + 255) & ~(size_t)255; }

size_t ert_cuda_patch_nchw_ws(const ert_kargs *a) {
    const ert_tview *w = &a->in[1], *y = &a->out[0];
    return patch_col_offset() + (size_t)(y->dims[0] * w->dims[1] * w->dims[2] * w->dims[3] * y->dims[2] * y->dims[3]) *
                                    ert_dtype_size(y->dtype);
}

ert_status ert_cuda_run_patch_nchw(cuda_ctx *c, const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    if (!a->workspace || a->workspace_bytes < ert_cuda_patch_nchw_ws(a))
        return ert_set_error(c->ctx, ERT_E_INTERNAL, "node '%s': patchify GEMM without its workspace", a->name ? a->name : "?");
    const int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = w->dims[2], S = w->dims[3];
    const int64_t K = w->dims[0], OH = y->dims[2], OW = y->dims[3], J = C * R * S, P = OH * OW;
    const size_t es = ert_dtype_size(x->dtype);
    void *col = (char *)a->workspace + patch_col_offset();
    /* col (N, C, R, S, OH, OW) <- x viewed as (N, C, OH, R, OW, S) */
    ert_cuda_map m;
    memset(&m, 0, sizeof m);
    m.ndim = 6;
    const int64_t d[6] = {N, C, R, S, OH, OW}, xs[6] = {C * H * W, H * W, W, 1, R * W, S};
    for (int i = 0; i < 6; i++) m.dims[i] = d[i], m.s[0][i] = xs[i];
    ert_cuda_contig_strides(6, m.dims, m.s[1]);
    cudaError_t e = ert_cuda_strided_copy_launch(x->data, 0, col, 0, es, &m, N * J * P, c->stream);
    if (e != cudaSuccess) return cuda_err(c, e, "patchify gather");
    cublasStatus_t bs = cublasSetWorkspace(c->blas, a->workspace, BLAS_WS);
    if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasSetWorkspace");
    const float one = 1.0f;
    /* column-major: y^T (P x K, ld P) = col^T (P x J, ld P) (W^T: J x K, ld J) */
    bs = gemm_ex(c, y->dtype, CUBLAS_OP_N, CUBLAS_OP_N, (int)P, (int)K, (int)J, &one, col, (int)P, (long long)(J * P),
                 w->data, (int)J, 0, y->data, (int)P, (long long)(K * P), (int)N);
    if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasGemmStridedBatchedEx (patchify conv)");
    const void *bias = p->has_bias && a->n_in > 2 ? a->in[2].data : NULL;
    const void *res = p->has_residual && a->n_in > 3 ? a->in[3].data : NULL;
    if (!bias && !res && p->act.kind == ERT_ACT_NONE) return ERT_OK;
    e = ert_cuda_conv_epilogue_launch(y->dtype, y->data, bias, res, N, K, P, false, &p->act, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "conv epilogue");
}

/* ------------------------------------------------------------------ ConvTranspose, kernel == stride */

/* A ConvTranspose whose kernel equals its stride (no pads, no output
 * padding, dilation 1, one group, 2-D, NCHW: YOLOv8-seg's proto upsample,
 * PP-OCR's DB head) gives every output pixel exactly one filter tap, so it
 * is one GEMM and a scatter: z (N, K*sh*sw, H*W) = W^T x per image (x is a
 * (C, H*W) matrix, W a (C, K*sh*sw) one; f32 result), then
 * ert_cuda_convt_scatter_launch adds the bias, applies the activation and
 * moves each element to (h*sh + i, w*sw + j). The direct kernel loops over
 * the taps per output pixel and took 0.175 ms for YOLOv8n-seg's 64-channel
 * 80x80 -> 160x160 upsample (H100, per-node profile, f16). Inference
 * sessions in f16/bf16 only: f32 sessions and trainers keep cuDNN's
 * backward-data convolution (cuda_train.c). Workspace: cuBLAS's, then z. */
static bool convt_shape(const ert_kargs *a, int64_t *N, int64_t *C, int64_t *K, int64_t *H, int64_t *W) {
    const ert_conv_params *p = &a->params->conv;
    if (a->op != ERT_OP_CONV_TRANSPOSE || a->n_in < 2 || a->n_out < 1 || p->nsp != 2 || p->group != 1 || p->nhwc)
        return false;
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4) return false;
    if ((x->dtype != ERT_DTYPE_F16 && x->dtype != ERT_DTYPE_BF16) || w->dtype != x->dtype || y->dtype != x->dtype)
        return false;
    if (p->has_bias && (a->n_in < 3 || a->in[2].dtype != x->dtype)) return false;
    for (int i = 0; i < 2; i++)
        if (p->kernel[i] != p->stride[i] || p->kernel[i] != w->dims[2 + i] || p->kernel[i] < 1 || p->dilation[i] != 1 ||
            p->pad_begin[i] != 0 || p->pad_end[i] != 0 || p->out_pad[i] != 0)
            return false;
    *N = x->dims[0], *C = x->dims[1], *H = x->dims[2], *W = x->dims[3], *K = w->dims[1];
    if (w->dims[0] != *C || y->dims[0] != *N || y->dims[1] != *K || y->dims[2] != *H * p->stride[0] ||
        y->dims[3] != *W * p->stride[1])
        return false;
    int64_t rows = *K * p->stride[0] * p->stride[1], P = *H * *W;
    return *N > 0 && *C > 0 && rows > 0 && P > 0 && rows <= INT32_MAX && P <= INT32_MAX && *C <= INT32_MAX &&
           *N <= INT32_MAX && (uint64_t)(*N * rows) * (uint64_t)P * 4u <= CONV_WS_MAX;
}

static size_t convt_z_offset(void) { return (BLAS_WS + 255) & ~(size_t)255; }

size_t ert_cuda_convt_gemm_ws(const cuda_ctx *c, const ert_kargs *a) {
    int64_t N, C, K, H, W;
    if (c->trainer || !convt_shape(a, &N, &C, &K, &H, &W)) return 0;
    const ert_conv_params *p = &a->params->conv;
    return convt_z_offset() + (size_t)(N * K * p->stride[0] * p->stride[1] * H * W) * 4u;
}

/* false: not this path (the caller runs the direct kernel); else *st. */
bool ert_cuda_run_convt_gemm(cuda_ctx *c, const ert_kargs *a, ert_status *st) {
    size_t need = ert_cuda_convt_gemm_ws(c, a);
    if (!need || !a->workspace || a->workspace_bytes < need) return false;
    int64_t N, C, K, H, W;
    convt_shape(a, &N, &C, &K, &H, &W);
    const ert_conv_params *p = &a->params->conv;
    const int sh = (int)p->stride[0], sw = (int)p->stride[1];
    const int64_t rows = K * sh * sw, P = H * W;
    float *z = (float *)(void *)((char *)a->workspace + convt_z_offset());
    cublasStatus_t bs = cublasSetWorkspace(c->blas, a->workspace, BLAS_WS);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        *st = blas_err(c, bs, "cublasSetWorkspace");
        return true;
    }
    cudaDataType_t t = a->in[0].dtype == ERT_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
    const float one = 1.0f, zero = 0.0f;
    /* column-major: z^T (P x rows, ld P) = x^T (P x C, ld P) (W as rows x C, ld rows)^T */
    bs = cublasGemmStridedBatchedEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)P, (int)rows, (int)C, &one, a->in[0].data,
                                    t, (int)P, (long long)(C * P), a->in[1].data, t, (int)rows, 0, &zero, z, CUDA_R_32F,
                                    (int)P, (long long)(rows * P), (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        *st = blas_err(c, bs, "cublasGemmStridedBatchedEx (ConvTranspose)");
        return true;
    }
    cudaError_t e = ert_cuda_convt_scatter_launch(a->out[0].dtype, z, p->has_bias ? a->in[2].data : NULL,
                                                  a->out[0].data, N, K, H, W, sh, sw, &p->act, c->stream);
    *st = e == cudaSuccess ? ERT_OK : cuda_err(c, e, "ConvTranspose scatter");
    return true;
}

/* MatMul (numpy): A (..., M, K) @ B (..., K, N), batch dims broadcast; a 1-D
 * A is (1, K), a 1-D B is (K, 1). One strided-batched call when each
 * operand's batch is either whole or a single matrix, else one call per batch. */
ert_status ert_cuda_run_matmul(cuda_ctx *c, const ert_kargs *a) {
    const ert_tview *A = &a->in[0], *B = &a->in[1], *Y = &a->out[0];
    int an = A->ndim, bn = B->ndim;
    if (an < 1 || bn < 1) return ERT_E_UNSUPPORTED;
#ifdef ERT_HAVE_CUDNN
    if (a->state) return matmul_lt_run(c, a, a->state);
#endif
    /* What the session's passes fuse (runtime/passes/fuse.c): trans_b (B
     * given as (..., N, K)), alpha, a bias (N) over the last axis (in[2])
     * and a residual of Y's shape (in[3]), added before the activation. */
    const ert_gemm_params *gp = &a->params->gemm;
    const bool tb = gp->trans_b && bn >= 2;
    const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int64_t M = an >= 2 ? A->dims[an - 2] : 1, K = A->dims[an - 1], N = bn >= 2 ? B->dims[bn - (tb ? 2 : 1)] : 1;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return ERT_E_UNSUPPORTED;
    const int ldb = (int)(tb ? K : N);
    int abn = an > 2 ? an - 2 : 0, bbn = bn > 2 ? bn - 2 : 0, obn = abn > bbn ? abn : bbn;
    int64_t odims[ERT_MAX_DIMS], sa[ERT_MAX_DIMS], sb[ERT_MAX_DIMS], batch = 1, pa = 1, pb = 1;
    for (int d = 0; d < obn; d++) {
        int ja = d - (obn - abn), jb = d - (obn - bbn);
        int64_t da = ja >= 0 ? A->dims[ja] : 1, db = jb >= 0 ? B->dims[jb] : 1;
        odims[d] = da > db ? da : db;
        batch *= odims[d];
    }
    for (int d = 0; d < abn; d++) pa *= A->dims[d];
    for (int d = 0; d < bbn; d++) pb *= B->dims[d];
    if (batch == 0 || M == 0 || N == 0) return ERT_OK;
    /* One weight matrix for every batch: the batches are rows of one GEMM
     * (A and Y contiguous). torchvision's sequence-first attention has x
     * (197, 1, 768) @ W: 197 batched 1-row GEMMs each read all of W (ViT-B's
     * in-projection took 80 us, a fifth of the model), one GEMM of 197 rows
     * reads it once. */
    if (pb == 1 && pa == batch && batch > 1 && M * batch <= INT32_MAX) {
        M *= batch;
        batch = pa = 1;
    }
    ert_status st = blas_ws(c, a);
    if (st) return st;
    const size_t es = ert_dtype_size(Y->dtype);
    cublasStatus_t bs;
    bool a_ok = pa == batch || pa == 1, b_ok = pb == batch || pb == 1;
    if (a_ok && b_ok) {
        bs = gemm_ex(c, Y->dtype, opb, CUBLAS_OP_N, (int)N, (int)M, (int)K, &gp->alpha, B->data, ldb,
                     pb == 1 ? 0 : K * N, A->data, (int)K, pa == 1 ? 0 : M * K, Y->data, (int)N, M * N, (int)batch);
        if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasGemmStridedBatchedEx");
    } else {
        /* general broadcast: per-batch offsets from the broadcast strides */
        ert_cuda_bcast_strides(obn, odims, abn, A->dims, sa);
        ert_cuda_bcast_strides(obn, odims, bbn, B->dims, sb);
        for (int64_t i = 0; i < batch; i++) {
            int64_t r = i, oa = 0, ob = 0;
            for (int d = obn - 1; d >= 0; d--) {
                int64_t k = r % odims[d];
                r /= odims[d];
                oa += k * sa[d];
                ob += k * sb[d];
            }
            bs = gemm_ex(c, Y->dtype, opb, CUBLAS_OP_N, (int)N, (int)M, (int)K, &gp->alpha,
                         (const char *)B->data + (size_t)(ob * K * N) * es, ldb, 0,
                         (const char *)A->data + (size_t)(oa * M * K) * es, (int)K, 0,
                         (char *)Y->data + (size_t)(i * M * N) * es, (int)N, 0, 1);
            if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasGemmEx");
        }
    }
    const ert_act_params *act = &gp->act;
    /* bias and residual: the channels-last conv epilogue with C = N */
    const void *bias = gp->has_c && a->n_in > 2 ? a->in[2].data : NULL;
    const void *res = a->n_in > 3 ? a->in[3].data : NULL;
    cudaError_t e;
    if (bias || res) {
        e = ert_cuda_conv_epilogue_launch(Y->dtype, Y->data, bias, res, 1, N, Y->n_elems / N, true, act, c->stream);
        return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "matmul bias epilogue");
    }
    if (act->kind == ERT_ACT_NONE) return ERT_OK;
    ert_cuda_map m;
    map_out(&m, Y);
    e = ert_cuda_epilogue_launch(Y->dtype, Y->data, NULL, 0.0f, NULL, &m, Y->n_elems, act, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "matmul epilogue");
}

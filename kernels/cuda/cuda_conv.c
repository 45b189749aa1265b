/* CUDA backend: convolutions through cuDNN (descriptors, algorithm search,
 * KRSC filters, the legacy fused call), bind and run of a Conv node.
 * (kernels/cuda/cuda_backend.h: the backend as a whole and what the files share.) */
#include "cuda_backend.h"

/* ------------------------------------------------------------------ conv (cuDNN) */

#ifdef ERT_HAVE_CUDNN
void ert_cuda_conv_state_free(conv_state *s) {
    if (!s) return;
    if (s->md) cublasLtMatmulDescDestroy(s->md);
    if (s->la) cublasLtMatrixLayoutDestroy(s->la);
    if (s->lb) cublasLtMatrixLayoutDestroy(s->lb);
    if (s->lc) cublasLtMatrixLayoutDestroy(s->lc);
    if (s->xd) cudnnDestroyTensorDescriptor(s->xd);
    if (s->yd) cudnnDestroyTensorDescriptor(s->yd);
    if (s->bd) cudnnDestroyTensorDescriptor(s->bd);
    if (s->wd) cudnnDestroyFilterDescriptor(s->wd);
    if (s->cd) cudnnDestroyConvolutionDescriptor(s->cd);
    if (s->ad) cudnnDestroyActivationDescriptor(s->ad);
    if (s->vpack) cudnnBackendDestroyDescriptor(s->vpack);
    free(s);
}

/* cuDNN takes 1-D and 2-D convs with symmetric pads; the rest goes to the
 * direct kernel. Descriptors are 4-D (a 1-D conv is 2-D with H = 1). */
bool ert_cuda_dnn_can(const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    if (p->nsp < 1 || p->nsp > 2 || a->in[0].ndim != p->nsp + 2) return false;
    if (a->in[0].dtype != a->in[1].dtype || a->in[0].dtype != a->out[0].dtype) return false;
    for (int i = 0; i < p->nsp; i++)
        if (p->pad_begin[i] != p->pad_end[i]) return false;
    for (int i = 0; i < a->in[0].ndim; i++)
        if (a->in[0].dims[i] > INT32_MAX || a->out[0].dims[i] > INT32_MAX) return false;
    return true;
}

/* A plan-cache entry's algorithm, asked of cuDNN for these descriptors: it
 * must accept it with no more workspace than the entry says. */
static bool cached_algo_ok(cuda_ctx *c, const conv_state *s, const algo_entry *e) {
    if (!e->ok) return true; /* "no usable algorithm": the direct kernel, always safe */
    size_t need = 0;
    cudnnStatus_t ds = cudnnGetConvolutionForwardWorkspaceSize(c->dnn, s->xd, s->wd, s->cd, s->yd,
                                                               (cudnnConvolutionFwdAlgo_t)e->algo, &need);
    return ds == CUDNN_STATUS_SUCCESS && need <= e->ws;
}

/* FFT and Winograd convs transform the input tile with +-1 coefficients, so
 * an inf input gives inf - inf = NaN where the CPU (and every
 * sum-of-products algorithm) gives +-inf (H200, f32: a 3x3/2 conv + Clip
 * gave NaN for all 1536 outputs on +inf inputs, CPU 0.5). Taken in f32
 * only, where measured fastest, unless ERT_SESSION_NO_CONV_TRANSFORMS:
 * with them excluded, the CNNs of the zoo ran 1.2-1.6x PyTorch's f32 time
 * (cudnn.benchmark takes them; H200, 2026-12-02). f16/bf16 keep the
 * tensor-core GEMM algorithms (find_algo's first pass). */
static bool transform_algo(cudnnConvolutionFwdAlgo_t a) {
    return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
           a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}

/* The fastest algorithm cudnnFind measures for this shape whose workspace
 * fits CONV_WS_MAX (f32: FMA math only), cached in c->algos (and the plan
 * cache). ERT_CREATE_FAST: cuDNN's heuristic order instead, nothing timed. */
static ert_status find_algo(cuda_ctx *c, const conv_state *s, const int *key, bool f32, const algo_entry **out) {
    algo_entry *e = NULL;
    for (int i = 0; i < c->n_algos; i++)
        if (!memcmp(c->algos[i].key, key, sizeof c->algos[i].key)) {
            e = &c->algos[i];
            if (e->cached) { /* from the plan cache: checked once, then trusted like a measured one */
                e->cached = false;
                if (!cached_algo_ok(c, s, e)) {
                    ert_log(c->ctx, ERT_LOG_INFO, "plan cache: cuDNN refuses a cached conv algorithm (%d); measuring",
                            e->algo);
                    break;
                }
                c->n_cached++;
            }
            *out = e;
            return ERT_OK;
        }
    if (!e && c->n_algos == c->cap_algos) {
        int cap = c->cap_algos ? 2 * c->cap_algos : 32;
        algo_entry *n = realloc(c->algos, (size_t)cap * sizeof *n);
        if (!n) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
        c->algos = n;
        c->cap_algos = cap;
    }
    bool fresh = !e; /* else a refused cache entry, measured again in place */
    if (fresh) e = &c->algos[c->n_algos];
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, sizeof e->key);
    e->direct_ms = -1;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    cudnnStatus_t ds = CUDNN_STATUS_NOT_SUPPORTED;
    if (!c->fast) {
        double t0 = ert_cuda_now_ms();
        ds = cudnnFindConvolutionForwardAlgorithm(c->dnn, s->xd, s->wd, s->cd, s->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                  &got, perf);
        c->n_searches++;
        c->t_measure += ert_cuda_now_ms() - t0;
    }
    if (ds != CUDNN_STATUS_SUCCESS) /* measuring failed (memory?) or fast mode: the heuristics' order */
        ds = cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, s->xd, s->wd, s->cd, s->yd,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf);
    if (ds != CUDNN_STATUS_SUCCESS) return dnn_err(c, ds, "cudnnFindConvolutionForwardAlgorithm");
    /* The fastest usable one, or one needing less workspace within 5% of its
     * time. f16/bf16 without groups: IMPLICIT_PRECOMP_GEMM (cuDNN's
     * tensor-core path) when it runs. cudnnFind times each call alone and
     * noisily: run to run it picked FMA algorithms (implicit_convolve_sgemm,
     * non-fused Winograd with an f32 GEMM) that are 2-5x slower inside the
     * graph (ncu, H200: ResNet-18 b1 f16 0.70 vs 0.38 ms for the same build);
     * perf.mathType does not tell them apart (it echoes the descriptor's). */
    for (int pass = f32 || key[14] != 1 ? 1 : 0; pass < 2 && !e->ok; pass++) {
        float best = -1;
        for (int i = 0; i < got; i++) {
            bool tc = perf[i].mathType == CUDNN_TENSOR_OP_MATH ||
                      perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
            if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > CONV_WS_MAX || (f32 && tc) ||
                (transform_algo(perf[i].algo) && !key[18]) ||
                (pass == 0 && perf[i].algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM))
                continue;
            if (best < 0) best = perf[i].time;
            if (!e->ok || (perf[i].time <= best * 1.05f && perf[i].memory < e->ws)) {
                e->ok = true;
                e->algo = (int)perf[i].algo;
                e->ws = perf[i].memory;
                e->ms = perf[i].time;
            }
        }
    }
    for (int i = 0; i < got && e->ok && e->n_alt < 8; i++) {
        bool tc = perf[i].mathType == CUDNN_TENSOR_OP_MATH || perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > CONV_WS_MAX || (f32 && tc) ||
            (transform_algo(perf[i].algo) && !key[18]) || (int)perf[i].algo == e->algo)
            continue;
        bool dup = false;
        for (int k = 0; k < e->n_alt; k++) dup |= e->alt[k] == (int)perf[i].algo;
        if (dup) continue;
        e->alt[e->n_alt] = (int)perf[i].algo;
        e->alt_ms[e->n_alt] = perf[i].time;
        e->alt_ws[e->n_alt++] = perf[i].memory;
    }
    if (fresh) c->n_algos++;
    *out = e;
    return ERT_OK;
}


/* Describe the conv and pick the algorithm (find_algo); NULL state: cuDNN
 * cannot do it, its algorithm needs more workspace than ws_limit, or (a
 * channels-last grouped conv) the direct kernel measured faster. *ms: the
 * measured time of what will run (< 0: unknown), for session step 4c.
 * gemm_ok: a 1x1 conv ert_cuda_gemm_can accepts runs as a cuBLASLt GEMM when it can. */
static ert_status conv_describe_dnn(cuda_ctx *c, const ert_kargs *a, size_t ws_limit, conv_state **out, float *ms);

static ert_status conv_describe(cuda_ctx *c, const ert_kargs *a, size_t ws_limit, bool gemm_ok, conv_state **out,
                                float *ms) {
    *out = NULL;
    *ms = -1;
    conv_state *g = NULL;
    float gms = -1;
    if (gemm_ok && ert_cuda_gemm_can(c, a)) {
        ert_status st = ert_cuda_gemm_describe(c, a, ws_limit, &g, &gms);
        if (st != ERT_OK) return st;
        /* a 1x1 GEMM (ERT_SESSION_GEMM_1X1), a forced or untimed patchify one */
        if (g && (!g->col_bytes || c->gemm1x1 || c->fast || gms < 0)) {
            *out = g, *ms = gms;
            return ERT_OK;
        }
    }
    ert_status st = conv_describe_dnn(c, a, ws_limit, out, ms);
    if (st != ERT_OK || !g) {
        ert_cuda_conv_state_free(g);
        return st;
    }
    /* a patchify conv: the GEMM unless cuDNN measured faster; the gather
     * (one pass over x, not in gms) counted at 1.5 TB/s plus 3 us */
    float gather = (float)(3e-3 + (double)g->col_bytes * 2 / 1.5e9);
    if (*ms < 0 || gms + gather < *ms) {
        ert_cuda_conv_state_free(*out);
        *out = g, *ms = gms + gather;
    } else {
        ert_cuda_conv_state_free(g);
    }
    return ERT_OK;
}

/* conv_describe's cuDNN half: descriptors, algorithm, fused graph, or the
 * direct kernel (NULL state). */
static ert_status conv_describe_dnn(cuda_ctx *c, const ert_kargs *a, size_t ws_limit, conv_state **out, float *ms) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    *out = NULL;
    *ms = -1;
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
    int two = p->nsp == 2;
    /* channels-last x, y (session step 4c, 2-D only): dims (N, H, W, C) */
    int sd = p->nhwc ? 1 : 2, cd = p->nhwc ? 3 : 1;
    int xh = two ? (int)x->dims[sd] : 1, xw = (int)x->dims[sd + two], yh = two ? (int)y->dims[sd] : 1,
        yw = (int)y->dims[sd + two];
    int xc = (int)x->dims[cd], yc = (int)y->dims[cd];
    cudnnTensorFormat_t fmt = p->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    int kh = two ? (int)w->dims[2] : 1, kw = (int)w->dims[2 + two];
    int ph = two ? (int)p->pad_begin[0] : 0, pw = (int)p->pad_begin[two];
    int sh = two ? (int)p->stride[0] : 1, sw = (int)p->stride[two];
    int dh = two ? (int)p->dilation[0] : 1, dw = (int)p->dilation[two];
    bool f32 = x->dtype == ERT_DTYPE_F32;
    cudnnDataType_t dt = dnn_type(x->dtype);
    cudnnStatus_t ds;
    if ((ds = cudnnCreateTensorDescriptor(&s->xd)) || (ds = cudnnCreateTensorDescriptor(&s->yd)) ||
        (ds = cudnnCreateFilterDescriptor(&s->wd)) || (ds = cudnnCreateConvolutionDescriptor(&s->cd)) ||
        (ds = cudnnSetTensor4dDescriptor(s->xd, fmt, dt, (int)x->dims[0], xc, xh, xw)) ||
        (ds = cudnnSetTensor4dDescriptor(s->yd, fmt, dt, (int)y->dims[0], yc, yh, yw)) ||
        (ds = cudnnSetFilter4dDescriptor(s->wd, dt, CUDNN_TENSOR_NCHW, (int)w->dims[0], (int)w->dims[1], kh, kw)) ||
        (ds = cudnnSetConvolution2dDescriptor(s->cd, ph, pw, sh, sw, dh, dw, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT)) ||
        (ds = cudnnSetConvolutionGroupCount(s->cd, (int)p->group)) ||
        (ds = cudnnSetConvolutionMathType(s->cd, f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH))) {
        ert_cuda_conv_state_free(s);
        return dnn_err(c, ds, "cuDNN conv descriptors");
    }
    int on, oc, oh, ow;
    if (cudnnGetConvolution2dForwardOutputDim(s->cd, s->xd, s->wd, &on, &oc, &oh, &ow) != CUDNN_STATUS_SUCCESS ||
        on != (int)y->dims[0] || oc != yc || oh != yh || ow != yw) {
        ert_cuda_conv_state_free(s); /* cuDNN sees another shape (ceil effects): direct kernel */
        return ERT_OK;
    }
    /* key[18]: FFT/Winograd allowed (f32 without ERT_SESSION_NO_CONV_TRANSFORMS; 0 in plan caches of
     * before, which excluded them) */
    int key[20] = {(int)x->dims[0], xc, xh, xw, (int)w->dims[0], (int)w->dims[1], kh, kw,
                   ph, pw, sh, sw, dh, dw, (int)p->group, (int)x->dtype, 0, p->nhwc, f32 && !c->no_transforms, 0};
    const algo_entry *e = NULL;
    ert_status st = find_algo(c, s, key, f32, &e);
    if (st != ERT_OK) {
        ert_cuda_conv_state_free(s);
        return st;
    }
#ifndef ERT_CUDA_NO_KRSC_FILTERS
    /* f16/bf16: the tensor-core kernels want the filter as (K, R, S, C); given
     * (K, C, R, S) cuDNN transposes it on every call. Measure the filter
     * stored that way too and keep the faster (bind_node rewrites it). */
    if (!f32 && p->group == 1 && !(c->trainer && !p->const_w)) { /* trainer: only constant filters */
        cudnnFilterDescriptor_t wd2 = NULL;
        const algo_entry *e2 = NULL;
        if (cudnnCreateFilterDescriptor(&wd2) == CUDNN_STATUS_SUCCESS &&
            cudnnSetFilter4dDescriptor(wd2, dt, CUDNN_TENSOR_NHWC, (int)w->dims[0], (int)w->dims[1], kh, kw) ==
                CUDNN_STATUS_SUCCESS) {
            cudnnFilterDescriptor_t keep = s->wd;
            s->wd = wd2;
            key[16] = 1;
            /* find_algo may grow (realloc) c->algos: e is found again by index */
            ptrdiff_t ei = e - c->algos;
            st = find_algo(c, s, key, f32, &e2);
            e = &c->algos[ei];
            s->wd = keep;
            if (st == ERT_OK && e2->ok && e2->ws <= ws_limit && (!e->ok || e->ws > ws_limit || e2->ms < e->ms)) {
                cudnnDestroyFilterDescriptor(s->wd);
                s->wd = wd2;
                wd2 = NULL;
                s->w_krsc = true;
                e = e2;
            }
        }
        if (wd2) cudnnDestroyFilterDescriptor(wd2);
        if (st != ERT_OK) {
            ert_cuda_conv_state_free(s);
            return st;
        }
    }
#endif
    if (p->nhwc && p->group > 1 && e->direct_ms < 0) {
        algo_entry *m = (algo_entry *)e; /* the cache owns it */
        /* fast: the direct kernel, untimed (MobileNetV2's depthwise convs ran
         * 3.8x faster on it than on cuDNN channels-last) */
        m->direct_ms = c->fast ? 0 : ert_cuda_time_direct(c, a);
        if (!c->fast) c->n_searches++;
        if (m->direct_ms < 0) m->direct_ms = 0x1p30f;
    }
    /* channels-last grouped: the direct kernel unless cuDNN's conv + epilogue
     * measures faster in the same graph timing (below) */
    bool direct_ok = p->nhwc && p->group > 1 && e->direct_ms < 0x1p30f;
    int algo = e->algo;
    size_t ws = e->ws;
    /* over the limit (a trainer's budget under its peak): cudnnFind's next
     * fastest that fits, unless it is over ERT_WS_SLOWER times slower (then
     * the conv keeps its workspace and the peak grows) */
    for (int k = 0; e->ok && ws > ws_limit && k < e->n_alt; k++)
        if (e->alt_ws[k] <= ws_limit && (e->ms <= 0 || e->alt_ms[k] <= e->ms * ERT_WS_SLOWER))
            algo = e->alt[k], ws = e->alt_ws[k];
    if (!e->ok || ws > ws_limit) {
        if (direct_ok) *ms = e->direct_ms;
        ert_cuda_conv_state_free(s);
        return ERT_OK;
    }
    *ms = e->ms;
    s->use_dnn = true;
    s->algo = (cudnnConvolutionFwdAlgo_t)algo;
    s->ws_bytes = ws;
    s->n_alt = e->n_alt;
    memcpy(s->alt, e->alt, sizeof s->alt);
    memcpy(s->alt_ws, e->alt_ws, sizeof s->alt_ws);
    const fuse_entry *f = NULL;
    st = ert_cuda_fuse_find(c, a, s, key, &f);
    if (st != ERT_OK) {
        ert_cuda_conv_state_free(s);
        return st;
    }
    *ms = f->ms_unfused;
    if (f->ok && f->ws <= ws_limit && (c->conv_graph_force || f->ms_fused < f->ms_unfused)) {
        s->plan = f->plan;
        if (f->ws > s->ws_bytes) s->ws_bytes = f->ws; /* the unfused fallback fits in it too */
        *ms = f->ms_fused;
    }
    if (direct_ok && (*ms < 0 || e->direct_ms < *ms)) {
        *ms = e->direct_ms;
        ert_cuda_conv_state_free(s);
        return ERT_OK;
    }
    *out = s;
    return ERT_OK;
}

/* Rewrite an f16/bf16 filter (K, C, R, S) in place as (K, R, S, C), once per
 * buffer (two convs may share a filter). Create time only; a filter shared
 * with an op other than Conv would see the new order (no model we know does
 * that; TODO(#4): check it when the backend sees the whole graph). */
static bool krsc_done(const cuda_ctx *c, const void *w) {
    for (int i = 0; i < c->n_krsc; i++)
        if (c->krsc[i] == w) return true;
    return false;
}

static ert_status filter_to_krsc(cuda_ctx *c, const ert_tview *w, int kh, int kw) {
    if (krsc_done(c, w->data)) return ERT_OK;
    if (c->n_krsc == c->cap_krsc) {
        int cap = c->cap_krsc ? 2 * c->cap_krsc : 32;
        void **n = realloc(c->krsc, (size_t)cap * sizeof *n);
        if (!n) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
        c->krsc = n;
        c->cap_krsc = cap;
    }
    int64_t K = w->dims[0], C = w->dims[1], R = kh, S = kw;
    size_t es = ert_dtype_size(w->dtype), bytes = (size_t)w->n_elems * es;
    ert_cuda_map m;
    memset(&m, 0, sizeof m);
    m.ndim = 4;
    m.dims[0] = K, m.dims[1] = R, m.dims[2] = S, m.dims[3] = C;
    m.s[0][0] = C * R * S, m.s[0][1] = S, m.s[0][2] = 1, m.s[0][3] = R * S;
    m.s[1][0] = R * S * C, m.s[1][1] = S * C, m.s[1][2] = C, m.s[1][3] = 1;
    void *tmp = NULL;
    cudaError_t e = cudaMalloc(&tmp, bytes);
    if (e == cudaSuccess) e = ert_cuda_strided_copy_launch(w->data, 0, tmp, 0, es, &m, w->n_elems, c->stream);
    if (e == cudaSuccess) e = cudaMemcpyAsync(w->data, tmp, bytes, cudaMemcpyDefault, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (tmp) cudaFree(tmp);
    if (e != cudaSuccess) return cuda_err(c, e, "filter to (K, R, S, C)");
    c->krsc[c->n_krsc++] = w->data;
    return ERT_OK;
}

/* Try the fused call (conv + bias + residual + ReLU/ReLU6/identity in one
 * cuDNN call) once at create, on the real buffers; keep it if cuDNN runs it,
 * else the conv is followed by the epilogue kernel. Identity is only offered
 * by cuDNN for IMPLICIT_PRECOMP_GEMM. */
static void conv_try_fuse(cuda_ctx *c, const ert_kargs *a, conv_state *s) {
#ifdef ERT_CUDA_NO_FUSED_CONV /* build-time switch for measurements: conv + epilogue kernel always */
    return;
#endif
    const ert_conv_params *p = &a->params->conv;
    cudnnActivationMode_t mode;
    double coef = 0;
    /* f16/bf16: cuDNN runs the legacy fused call on its FMA kernel
     * (implicit_convolve_sgemm), 5-10x slower than the tensor-core conv plus
     * our epilogue (measured, H200, cuDNN 9): f32 only. */
    if (a->in[0].dtype != ERT_DTYPE_F32) return;
    if (!p->has_bias || a->n_in < 3 || !a->in[2].data) return;
    if (p->act.kind == ERT_ACT_RELU) mode = CUDNN_ACTIVATION_RELU;
    else if (p->act.kind == ERT_ACT_CLIP && p->act.alpha == 0.0f && p->act.beta > 0.0f && p->act.beta < 1e30f) {
        mode = CUDNN_ACTIVATION_CLIPPED_RELU;
        coef = p->act.beta;
    } else if (p->act.kind == ERT_ACT_NONE && s->algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
        mode = CUDNN_ACTIVATION_IDENTITY;
    else return;
    const ert_tview *y = &a->out[0];
    if (cudnnCreateTensorDescriptor(&s->bd) || cudnnCreateActivationDescriptor(&s->ad) ||
        cudnnSetTensor4dDescriptor(s->bd, CUDNN_TENSOR_NCHW, dnn_type(y->dtype), 1, (int)y->dims[1], 1, 1) ||
        cudnnSetActivationDescriptor(s->ad, mode, CUDNN_PROPAGATE_NAN, coef))
        return;
    const float one = 1.0f, zero = 0.0f;
    bool res = p->has_residual && a->n_in > 3 && a->in[3].data;
    cudnnStatus_t ds = cudnnConvolutionBiasActivationForward(
        c->dnn, &one, s->xd, a->in[0].data, s->wd, a->in[1].data, s->cd, s->algo, a->workspace, s->ws_bytes,
        res ? &one : &zero, s->yd, res ? a->in[3].data : y->data, s->bd, a->in[2].data, s->ad, s->yd, y->data);
    cudaError_t e = cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    s->fused = ds == CUDNN_STATUS_SUCCESS && e == cudaSuccess;
}

/* node_workspace for a Conv ert_cuda_dnn_can accepts: the cuDNN (or cuBLASLt) workspace of
 * what it will run. */
ert_status ert_cuda_conv_workspace(cuda_ctx *c, const ert_kargs *a, size_t *bytes) {
    conv_state *s = NULL;
    float ms;
    /* a->workspace_bytes: a trainer's budget (0: none) */
    size_t limit = a->workspace_bytes && a->workspace_bytes < CONV_WS_MAX ? a->workspace_bytes : CONV_WS_MAX;
    ert_status st = conv_describe(c, a, limit, true, &s, &ms);
    if (st != ERT_OK) return st;
    if (!s && limit < CONV_WS_MAX) { /* nothing fits the budget: what it would take without one */
        if ((st = conv_describe(c, a, CONV_WS_MAX, true, &s, &ms)) != ERT_OK) return st;
    }
    if (s) *bytes = s->ws_bytes;
    ert_cuda_conv_state_free(s);
    if (ert_cuda_patch_nchw_can(c, a) && ert_cuda_patch_nchw_ws(a) > *bytes) *bytes = ert_cuda_patch_nchw_ws(a);
    return ERT_OK;
}

typedef struct conv_timed {
    ert_kargs *a;
    bool patch;
} conv_timed;
static ert_status conv_timed_run(cuda_ctx *c, void *u) {
    const conv_timed *t = u;
    return t->patch ? ert_cuda_run_patch_nchw(c, t->a) : ert_cuda_run_conv(c, t->a);
}

/* ms per run of a bound conv (its state as bind has it, or the patchify
 * GEMM), on the real buffers (ert_cuda_time_ms); < 0: failed. */
static float time_conv(cuda_ctx *c, ert_kargs *a, conv_state *s, bool patch) {
    void *keep = a->state;
    a->state = s;
    conv_timed t = {a, patch};
    float ms = ert_cuda_time_ms(c, conv_timed_run, &t);
    a->state = keep;
    return ms;
}

/* bind_node for a Conv ert_cuda_dnn_can accepts. */
ert_status ert_cuda_conv_bind(cuda_ctx *c, ert_kargs *a) {
    conv_state *s = NULL;
    float ms;
    size_t ws_limit = a->workspace ? a->workspace_bytes : 0;
    ert_status st = conv_describe(c, a, ws_limit, true, &s, &ms);
    if (st != ERT_OK) return st;
    if (s && s->gemm) {
        if (ert_cuda_gemm_bind(c, a, s)) {
            a->state = s;
            if (s->col_bytes) { /* the patch rows are (i, j, c): the filter must be (K, R, S, C) */
                st = filter_to_krsc(c, &a->in[1], (int)a->in[1].dims[2], (int)a->in[1].dims[3]);
                if (st != ERT_OK) return st;
            }
            ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s' (%s): cuBLASLt GEMM (%s), workspace %zu%s",
                    a->name ? a->name : "?", ert_dtype_name(a->in[0].dtype),
                    s->col_bytes ? "patchify, im2col gather" : "1x1", s->ws_bytes,
                    s->gemm_post ? ", epilogue kernel" : "");
            return ERT_OK;
        }
        ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s': cuBLASLt refused the real buffers: cuDNN",
                a->name ? a->name : "?");
        ert_cuda_conv_state_free(s);
        s = NULL;
        if ((st = conv_describe(c, a, ws_limit, false, &s, &ms)) != ERT_OK) return st;
    }
    /* cudnnFind measured the algorithm on its own buffers; run it once on
     * the real ones (values do not matter yet) before the filter is
     * rewritten. cuDNN 9.14 on an H200 refused a pinned
     * IMPLICIT_PRECOMP_GEMM with BAD_PARAM for one of two identical f16
     * convs; what cuDNN refuses tries the next algorithms, then runs on
     * the direct kernel. */
    if (s && s->use_dnn) {
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t ds = cudnnConvolutionForward(c->dnn, &one, s->xd, a->in[0].data, s->wd, a->in[1].data,
                                                   s->cd, s->algo, a->workspace, s->ws_bytes, &zero, s->yd,
                                                   a->out[0].data);
        cudaError_t e = cudaStreamSynchronize(c->stream);
        cudaGetLastError();
        /* refused (cuDNN 9.14, H200: BAD_PARAM for ResNet's first conv,
         * 7x7 C = 3 channels-last, in some processes, and the direct
         * kernel then cost 0.2 ms): cudnnFind's next usable algorithms
         * that fit the planned workspace */
        for (int k = 0; k < s->n_alt && (ds != CUDNN_STATUS_SUCCESS || e != cudaSuccess); k++) {
            if (s->alt_ws[k] > ws_limit) continue;
            ds = cudnnConvolutionForward(c->dnn, &one, s->xd, a->in[0].data, s->wd, a->in[1].data, s->cd,
                                         (cudnnConvolutionFwdAlgo_t)s->alt[k], a->workspace, ws_limit, &zero,
                                         s->yd, a->out[0].data);
            e = cudaStreamSynchronize(c->stream);
            cudaGetLastError();
            if (ds == CUDNN_STATUS_SUCCESS && e == cudaSuccess) {
                ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s': cuDNN refused algo %d on the real buffers: algo %d",
                        a->name ? a->name : "?", (int)s->algo, s->alt[k]);
                s->algo = (cudnnConvolutionFwdAlgo_t)s->alt[k];
                s->ws_bytes = ws_limit;
                s->fused = false;
            }
        }
        if (ds != CUDNN_STATUS_SUCCESS || e != cudaSuccess) {
            ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s': cuDNN refused algo %d on the real buffers (%s): direct kernel",
                    a->name ? a->name : "?", (int)s->algo, cudnnGetErrorString(ds));
            ert_cuda_conv_state_free(s);
            s = NULL;
        }
    }
    /* the fused plan likewise (refused: conv + epilogue kernel) */
    if (s && s->plan) {
        const ert_conv_params *p = &a->params->conv;
        void *bias = p->has_bias && a->n_in > 2 ? a->in[2].data : NULL;
        void *res = p->has_residual && a->n_in > 3 ? a->in[3].data : NULL;
        s->vpack = ert_cuda_fuse_vpack(a, a->in[0].data, a->in[1].data, a->out[0].data, bias, res, a->workspace);
        cudnnStatus_t ds = s->vpack ? cudnnBackendExecute(c->dnn, s->plan, s->vpack) : CUDNN_STATUS_BAD_PARAM;
        cudaError_t e = cudaStreamSynchronize(c->stream);
        cudaGetLastError();
        if (ds != CUDNN_STATUS_SUCCESS || e != cudaSuccess) {
            ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s': cuDNN refused the fused graph on the real buffers (%s): "
                    "conv + epilogue kernel", a->name ? a->name : "?", cudnnGetErrorString(ds));
            if (s->vpack) cudnnBackendDestroyDescriptor(s->vpack);
            s->vpack = NULL;
            s->plan = NULL;
        }
    }
    /* a channels-first patchify conv: the gather + GEMM when it times faster
     * than what cuDNN (or the direct kernel) would run, on these buffers (the
     * filter is still (K, C, R, S): a KRSC cuDNN path is timed on the wrong
     * values, at the same speed) */
    if (ert_cuda_patch_nchw_can(c, a) && a->workspace && a->workspace_bytes >= ert_cuda_patch_nchw_ws(a)) {
        /* measured once per shape and epilogue (or taken from the plan cache) */
        const ert_conv_params *cp = &a->params->conv;
        int pkey[CHOICE_KEY] = {(int)a->in[0].dtype, (int)cp->has_bias, (int)cp->has_residual, (int)cp->act.kind,
                                s ? (int)s->use_dnn + 2 * (int)s->gemm : -1};
        for (int d = 0; d < 4; d++) {
            pkey[5 + d] = (int)a->in[0].dims[d];
            pkey[9 + d] = (int)a->in[1].dims[d];
        }
        memcpy(&pkey[13], &cp->act.alpha, sizeof(float));
        memcpy(&pkey[14], &cp->act.beta, sizeof(float));
        const choice_entry *ch = c->fast ? NULL : ert_cuda_choice_find(c, CHOICE_PATCH, pkey);
        float t_patch, t_cur;
        if (ch) {
            t_patch = ch->pick ? 0.0f : 1.0f;
            t_cur = ch->pick ? 1.0f : 0.0f;
        } else {
            t_patch = c->fast ? 0.0f : time_conv(c, a, NULL, true);
            t_cur = c->fast || t_patch < 0 ? 1.0f : time_conv(c, a, s, false);
            if (!c->fast) c->n_searches++;
            if (!c->fast && t_patch >= 0)
                ert_cuda_choice_put(c, CHOICE_PATCH, pkey, t_cur < 0 || t_patch < t_cur, 0, t_patch);
        }
        if (t_patch >= 0 && (t_cur < 0 || t_patch < t_cur)) {
            conv_state *g = calloc(1, sizeof *g);
            if (!g) {
                ert_cuda_conv_state_free(s);
                return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
            }
            g->patch_nchw = true;
            ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s' (%s): patchify gather + GEMM, channels-first (%.4f ms against %.4f)",
                    a->name ? a->name : "?", ert_dtype_name(a->in[0].dtype), t_patch, t_cur);
            ert_cuda_conv_state_free(s);
            a->state = g;
            return ERT_OK;
        }
    }
    a->state = s;
    if (s && s->w_krsc) {
        const ert_conv_params *p = &a->params->conv;
        int two = p->nsp == 2;
        st = filter_to_krsc(c, &a->in[1], two ? (int)a->in[1].dims[2] : 1, (int)a->in[1].dims[2 + two]);
        if (st != ERT_OK) return st;
    } else if (krsc_done(c, a->in[1].data)) {
        return ert_set_error(c->ctx, ERT_E_UNSUPPORTED,
                             "node '%s': its filter is shared with a conv that stores it as (K, R, S, C)",
                             a->name ? a->name : "?");
    }
    if (s) conv_try_fuse(c, a, s);
    if (s && s->vpack)
        ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s' (%s): cuDNN graph (conv + epilogue fused)%s, workspace %zu",
                a->name ? a->name : "?", ert_dtype_name(a->in[0].dtype), s->w_krsc ? " (KRSC filter)" : "",
                s->ws_bytes);
    else if (s) ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s' (%s): cuDNN algo %d%s, workspace %zu, %s", a->name ? a->name : "?",
                   ert_dtype_name(a->in[0].dtype), (int)s->algo, s->w_krsc ? " (KRSC filter)" : "", s->ws_bytes,
                   s->fused ? "fused" : "unfused");
    else ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s': direct kernel", a->name ? a->name : "?");
    return ERT_OK;
}
#endif

/* ERT_CREATE_FAST's stand-in for a measured conv time: FLOPs at a nominal
 * 100 TFLOP/s, NHWC counted 0.6x for dense f16/bf16 convs whose channel
 * counts are multiples of 8 (the tensor-core kernels' own layout: in NCHW
 * cuDNN transposes around them; ResNet-18/50 measured 0.63-0.68x), grouped
 * and f32 convs equal. A rule, not a measurement: MobileNetV2, which measured
 * NCHW faster, goes channels-last under it. */
static float conv_estimate(const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *w = &a->in[1], *y = &a->out[0];
    double flops = 2.0 * (double)y->n_elems * (double)(w->n_elems / w->dims[0]);
    int cd = p->nhwc ? y->ndim - 1 : 1;
    bool tc = a->in[0].dtype != ERT_DTYPE_F32 && p->group == 1 && y->dims[cd] % 8 == 0 && w->dims[1] % 8 == 0;
    return (float)(flops / 1e8 * (p->nhwc && tc ? 0.6 : 1.0)); /* ms at 1e11 flop/s */
}

/* Session step 4c weighs NCHW against NHWC with these. */
ert_status ert_cuda_conv_time(void *bctx, const ert_kargs *a, float *ms) {
    *ms = -1;
#ifdef ERT_HAVE_CUDNN
    cuda_ctx *c = bctx;
    if (a->op != ERT_OP_CONV || !ert_cuda_dnn_can(a)) return ERT_OK;
    if (c->fast) {
        *ms = conv_estimate(a);
        return ERT_OK;
    }
    conv_state *s = NULL;
    ert_status st = conv_describe(c, a, CONV_WS_MAX, true, &s, ms);
    ert_cuda_conv_state_free(s);
    return st;
#else
    (void)bctx, (void)a;
    return ERT_OK;
#endif
}

ert_status ert_cuda_run_conv(cuda_ctx *c, const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    const void *bias = p->has_bias && a->n_in > 2 ? a->in[2].data : NULL;
    const void *res = p->has_residual && a->n_in > 3 ? a->in[3].data : NULL;
    const ert_tview *y = &a->out[0];
    cudaError_t e;
#ifdef ERT_HAVE_CUDNN
    const conv_state *s = a->state;
    if (s && s->patch_nchw) return ert_cuda_run_patch_nchw(c, a);
    if (s && s->gemm) {
        cublasStatus_t bs = ert_cuda_gemm_run(c, a, s);
        if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasLtMatmul (conv as a GEMM)");
        if (!s->gemm_post) return ERT_OK;
        e = ert_cuda_conv_epilogue_launch(y->dtype, y->data, NULL, NULL, y->dims[0], y->dims[3],
                                          y->dims[1] * y->dims[2], true, &p->act, c->stream);
        return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "conv epilogue");
    }
    if (s && s->vpack) {
        cudnnStatus_t ds = cudnnBackendExecute(c->dnn, s->plan, s->vpack);
        return ds == CUDNN_STATUS_SUCCESS ? ERT_OK : dnn_err(c, ds, "cudnnBackendExecute (conv + epilogue)");
    }
    if (s && s->fused) {
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t ds = cudnnConvolutionBiasActivationForward(
            c->dnn, &one, s->xd, a->in[0].data, s->wd, a->in[1].data, s->cd, s->algo, a->workspace, s->ws_bytes,
            res ? &one : &zero, s->yd, res ? res : y->data, s->bd, bias, s->ad, s->yd, y->data);
        return ds == CUDNN_STATUS_SUCCESS ? ERT_OK : dnn_err(c, ds, "cudnnConvolutionBiasActivationForward");
    }
    if (s && s->use_dnn) {
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t ds = cudnnConvolutionForward(c->dnn, &one, s->xd, a->in[0].data, s->wd, a->in[1].data, s->cd,
                                                   s->algo, a->workspace, s->ws_bytes, &zero, s->yd, y->data);
        if (ds != CUDNN_STATUS_SUCCESS) return dnn_err(c, ds, "cudnnConvolutionForward");
        /* bias (per channel), residual (like y), activation: one pass */
        int64_t sp = 1;
        for (int i = 1; i < y->ndim; i++) sp *= i == (p->nhwc ? y->ndim - 1 : 1) ? 1 : y->dims[i];
        e = ert_cuda_conv_epilogue_launch(y->dtype, y->data, bias, res, y->dims[0],
                                          y->dims[p->nhwc ? y->ndim - 1 : 1], sp, p->nhwc, &p->act, c->stream);
        return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "conv epilogue");
    }
#endif
    e = ert_cuda_conv_direct_launch(p, &a->in[0], a->in[1].data, a->packed, bias, res, y, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "conv kernel");
}

/* ------------------------------------------------------------------ depthwise filters as (KH, KW, C) */

/* node_packed_bytes: a channels-last 2-D depthwise conv (group = C = M) with
 * a constant square 3x3, 5x5 or 7x7 filter (C, 1, K, K) gets a copy of it
 * as (K, K, C) in the weights region (filled by ert_cuda_dw_pack), which
 * conv.cu's unrolled kernel reads V channels per load. Its size, or 0. The
 * kernel also needs C % (16 / element size) == 0. */
size_t ert_cuda_dw_rsc_bytes(const ert_kargs *a) {
    if (a->op != ERT_OP_CONV || a->n_in < 2) return 0;
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    if (!p->nhwc || p->nsp != 2 || x->ndim != 4 || w->ndim != 4 || y->ndim != 4) return 0;
    if (x->dtype != ERT_DTYPE_F16 && x->dtype != ERT_DTYPE_BF16 && x->dtype != ERT_DTYPE_F32) return 0;
    const int64_t C = x->dims[3], K = w->dims[2];
    const size_t es = ert_dtype_size(x->dtype);
    if (w->dtype != x->dtype || p->group != C || y->dims[3] != C || w->dims[0] != C || w->dims[1] != 1 ||
        w->dims[3] != K || (K != 3 && K != 5 && K != 7) || C % (int64_t)(16 / es))
        return 0;
    return (size_t)w->n_elems * es;
}

/* bind: fill a->packed with the filter as (K, K, C), or clear it where the
 * session does not pack (a trainer, ERT_SESSION_NO_PACK) so the run reads
 * the filter as it is. */
ert_status ert_cuda_dw_pack(cuda_ctx *c, ert_kargs *a) {
    if (!a->packed) return ERT_OK;
    size_t bytes = ert_cuda_dw_rsc_bytes(a);
    if (!c->dw_rsc || !bytes || a->packed_bytes < bytes) {
        a->packed = NULL;
        return ERT_OK;
    }
    const ert_tview *w = &a->in[1];
    const int64_t C = w->dims[0], K = w->dims[2];
    ert_cuda_map m;
    memset(&m, 0, sizeof m);
    m.ndim = 3; /* element (kh, kw, c): w[c][0][kh][kw] -> packed[kh][kw][c] */
    m.dims[0] = K, m.dims[1] = K, m.dims[2] = C;
    m.s[0][0] = K, m.s[0][1] = 1, m.s[0][2] = K * K;
    m.s[1][0] = K * C, m.s[1][1] = C, m.s[1][2] = 1;
    cudaError_t e = ert_cuda_strided_copy_launch(w->data, 0, a->packed, 0, ert_dtype_size(w->dtype), &m, w->n_elems,
                                                 c->stream);
    if (e != cudaSuccess) return cuda_err(c, e, "depthwise filter to (K, K, C)");
    ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s' (%lldx%lld, %lld channels): depthwise filter packed as (K, K, C)",
            a->name ? a->name : "?", (long long)K, (long long)K, (long long)C);
    return ERT_OK;
}

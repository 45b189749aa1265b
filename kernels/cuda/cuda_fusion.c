/* CUDA backend: conv + epilogue as one cuDNN operation graph (runtime fusion).
 * (kernels/cuda/cuda_backend.h: the backend as a whole and what the files share.) */
#include "cuda_backend.h"

#ifdef ERT_HAVE_CUDNN
/* ------------------------------------------------------------------ conv + epilogue as one cuDNN graph */

/* Channels-last f16/bf16 convs with an epilogue (bias, residual, ReLU/Clip)
 * as one cuDNN operation graph: conv -> +bias -> +residual -> relu/clamp,
 * intermediates virtual (f32, never stored), so the epilogue costs no extra
 * kernel and no extra pass over y. cuDNN's engines for such graphs (runtime
 * fusion: compiled at create) are measured against cuDNN's conv followed by
 * our epilogue kernel, on scratch buffers, with the same timing loop; the
 * faster one runs (ERT_SESSION_CONV_GRAPH: the graph whenever cuDNN runs it;
 * ERT_SESSION_NO_CONV_GRAPH: never). Plans are cached per shape and
 * epilogue; each node has its own variant pack (its pointers never change
 * after create). */
#ifndef ERT_FUSE_CANDIDATES /* build-time override, for measurements */
#define ERT_FUSE_CANDIDATES 4
#endif
#define FUSE_CANDIDATES ERT_FUSE_CANDIDATES /* engine configs (heuristics order) finalised and timed per shape */
#ifndef ERT_PLAN_JSON /* build-time: keep fused plans serialised in the plan cache (see plan_serialise) */
#define ERT_PLAN_JSON 1
#endif
#define FUSE_KEEP 48      /* descriptors a plan keeps alive (fuse_entry.keep) */
#define FUSE_REPS 20

/* tensor ids of the graph; HI is a by-value f32 scalar (Clip(0, hi)'s bound) */
enum { UID_X = 1, UID_W, UID_Y, UID_B, UID_R, UID_HI, UID_T0 };

static bool fuse_can(const cuda_ctx *c, const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    if (c->conv_graph_off || (c->trainer && !p->const_w) || !p->nhwc || p->nsp != 2 || p->group != 1) return false;
    if (a->in[0].dtype != ERT_DTYPE_F16 && a->in[0].dtype != ERT_DTYPE_BF16) return false;
    /* channel counts the tensor cores take whole: cuDNN 9.14 (H200) ran a
     * bf16 graph with C = 3 and returned wrong values (test_cuda) */
    if (a->in[0].dims[3] % 8 || a->out[0].dims[3] % 8) return false;
    bool bias = p->has_bias && a->n_in > 2, res = p->has_residual && a->n_in > 3;
    /* Clip as MAX/MIN would lose NaN: those pointwise steps return the
     * bound for a NaN input on cuDNN 9.14 (H100, test_cuda's NaN cases),
     * whatever NAN_PROPAGATION says, and Clip(NaN) must be NaN; RELU_FWD
     * keeps NaN. So only Clip(0, hi) (ReLU6) enters the graph, written with
     * ReLU, SUB and NEG alone (fuse_graph); other bounds take cuDNN's conv +
     * our epilogue kernel. */
    bool act = p->act.kind == ERT_ACT_RELU ||
               (p->act.kind == ERT_ACT_CLIP && p->act.alpha == 0.0f && p->act.beta > 0.0f && p->act.beta < 1e30f);
    if (p->act.kind != ERT_ACT_NONE && !act) return false;
    return bias || res || act;
}

void ert_cuda_fuse_entry_clear(fuse_entry *f) {
    for (int i = f->n_keep - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(f->keep[i]);
    if (f->plan) cudnnBackendDestroyDescriptor(f->plan);
    f->n_keep = 0;
    f->plan = NULL;
    free(f->json);
    f->json = NULL;
    f->json_len = 0;
}

/* f->plan serialised into f->json (for the plan cache); left NULL where
 * cuDNN cannot serialise the plan's engine (only its runtime-compiled
 * engines can) or the text is over PLAN_JSON_MAX. */
static void plan_serialise(fuse_entry *f) {
    int64_t n = 0, got = 0;
    if (cudnnBackendGetAttribute(f->plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n,
                                 NULL) != CUDNN_STATUS_SUCCESS ||
        n <= 0 || n > (int64_t)PLAN_JSON_MAX)
        return;
    /* room past the n characters asked for (cuDNN's own samples allocate
     * count + 1, for a terminating NUL) and zeroed, so the text is always
     * terminated */
    char *j = calloc((size_t)n + 64, 1);
    if (!j) return;
    if (cudnnBackendGetAttribute(f->plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, n, &got,
                                 j) != CUDNN_STATUS_SUCCESS ||
        got <= 0 || got > n) {
        free(j);
        return;
    }
    f->json = j;
    f->json_len = (uint32_t)got;
}

/* A plan from its serialised form (NULL: cuDNN refused it). */
static cudnnBackendDescriptor_t plan_deserialise(cuda_ctx *c, const plan_json *pj, int64_t *ws) {
    cudnnBackendDescriptor_t pl = NULL;
    int64_t got = 0;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &pl) != CUDNN_STATUS_SUCCESS) return NULL;
    if (cudnnBackendSetAttribute(pl, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->dnn) ||
        cudnnBackendSetAttribute(pl, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                                 (int64_t)pj->len, pj->json) ||
        cudnnBackendFinalize(pl) ||
        cudnnBackendGetAttribute(pl, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, ws) ||
        *ws < 0 || (size_t)*ws > CONV_WS_MAX) {
        cudnnBackendDestroyDescriptor(pl);
        cudaGetLastError();
        return NULL;
    }
    return pl;
}

/* A descriptor kept alive as long as the plan (cuDNN's graph objects refer
 * to each other). NULL when out of slots or cuDNN refuses. */
static cudnnBackendDescriptor_t fuse_new(fuse_entry *f, cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = NULL;
    if (f->n_keep == FUSE_KEEP || cudnnBackendCreateDescriptor(type, &d) != CUDNN_STATUS_SUCCESS) return NULL;
    f->keep[f->n_keep++] = d;
    return d;
}

#define BSET(d, attr, type, n, ptr)                                                   \
    do {                                                                              \
        if (cudnnBackendSetAttribute((d), (attr), (type), (n), (ptr)) != CUDNN_STATUS_SUCCESS) \
            return NULL;                                                              \
    } while (0)

/* Tensor (N, C, H, W) dims stored channels-last; virtual: f32, never stored. */
static cudnnBackendDescriptor_t fuse_tensor(fuse_entry *f, int64_t uid, cudnnDataType_t dt, const int64_t *dims,
                                            const int64_t *strides, bool virt) {
    cudnnBackendDescriptor_t d = fuse_new(f, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t align = 16, one[4] = {1, 1, 1, 1};
    bool by_value = uid == UID_HI;
    if (!d) return NULL;
    if (by_value) {
        dims = strides = one;
        align = 4;
        BSET(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    }
    BSET(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    BSET(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    BSET(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    BSET(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    BSET(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    if (virt) BSET(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
    return cudnnBackendFinalize(d) == CUDNN_STATUS_SUCCESS ? d : NULL;
}

/* y = x (op) b, or y = relu/clamp(x) (b NULL). */
static cudnnBackendDescriptor_t fuse_pointwise(fuse_entry *f, cudnnPointwiseMode_t mode,
                                               cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                               cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t pw = fuse_new(f, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    if (!pw) return NULL;
    BSET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    BSET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (mode == CUDNN_POINTWISE_RELU_FWD) {
        /* ReLU keeps NaN (Relu(NaN) = NaN as in PyTorch): cuDNN 8.x
         * defaults to NOT_PROPAGATE; 9.x deprecates the attribute (NaN kept),
         * so a refusal is ignored rather than losing the fused graph.
         * tests/test_cuda.c checks NaN through every fused path. */
        cudnnNanPropagation_t nan = CUDNN_PROPAGATE_NAN;
        (void)cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_NAN_PROPAGATION, CUDNN_TYPE_NAN_PROPOGATION, 1, &nan);
    }
    /* plain ReLU: cuDNN 9.14 has no engine for conv + RELU_FWD with an upper
     * clip, so Clip(0, hi) is a chain of ReLU, SUB and NEG (fuse_graph) */
    if (cudnnBackendFinalize(pw) != CUDNN_STATUS_SUCCESS) return NULL;
    cudnnBackendDescriptor_t op = fuse_new(f, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    if (!op) return NULL;
    BSET(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    BSET(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b) BSET(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    BSET(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    return cudnnBackendFinalize(op) == CUDNN_STATUS_SUCCESS ? op : NULL;
}

/* The operation graph of node a (filter (K, R, S, C) when krsc); NULL when
 * cuDNN refuses any part of it. */
static cudnnBackendDescriptor_t fuse_graph(cuda_ctx *c, fuse_entry *f, const ert_kargs *a, bool krsc) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    cudnnDataType_t dt = dnn_type(x->dtype), f32 = CUDNN_DATA_FLOAT;
    int64_t N = x->dims[0], H = x->dims[1], W = x->dims[2], C = x->dims[3];
    int64_t OH = y->dims[1], OW = y->dims[2], K = y->dims[3], R = w->dims[2], S = w->dims[3];
    int64_t xd[4] = {N, C, H, W}, xs[4] = {H * W * C, 1, W * C, C};
    int64_t yd[4] = {N, K, OH, OW}, ys[4] = {OH * OW * K, 1, OW * K, K};
    int64_t wd[4] = {K, C, R, S}, wkrsc[4] = {R * S * C, 1, S * C, C}, wkcrs[4] = {C * R * S, R * S, S, 1};
    int64_t bd[4] = {1, K, 1, 1}, bs[4] = {K, 1, K, K};
    bool bias = p->has_bias && a->n_in > 2, res = p->has_residual && a->n_in > 3;
    bool act = p->act.kind != ERT_ACT_NONE;
    cudnnBackendDescriptor_t tx = fuse_tensor(f, UID_X, dt, xd, xs, false);
    cudnnBackendDescriptor_t tw = fuse_tensor(f, UID_W, dt, wd, krsc ? wkrsc : wkcrs, false);
    cudnnBackendDescriptor_t ty = fuse_tensor(f, UID_Y, dt, yd, ys, false);
    if (!tx || !tw || !ty) return NULL;
    /* conv -> t0 (virtual f32) */
    cudnnBackendDescriptor_t cd = fuse_new(f, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    if (!cd) return NULL;
    int64_t nsp = 2, pre[2] = {p->pad_begin[0], p->pad_begin[1]}, post[2] = {p->pad_end[0], p->pad_end[1]};
    int64_t dil[2] = {p->dilation[0], p->dilation[1]}, str[2] = {p->stride[0], p->stride[1]};
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    BSET(cd, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp);
    BSET(cd, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    BSET(cd, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    BSET(cd, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre);
    BSET(cd, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post);
    BSET(cd, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
    BSET(cd, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str);
    if (cudnnBackendFinalize(cd) != CUDNN_STATUS_SUCCESS) return NULL;
    cudnnBackendDescriptor_t ops[10];
    int n_ops = 0;
    int64_t uid = UID_T0;
    cudnnBackendDescriptor_t cur = fuse_tensor(f, uid++, f32, yd, ys, true);
    cudnnBackendDescriptor_t conv = fuse_new(f, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    float one = 1.0f, zero = 0.0f;
    if (!cur || !conv) return NULL;
    BSET(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tx);
    BSET(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tw);
    BSET(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cur);
    BSET(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd);
    BSET(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one);
    BSET(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
    if (cudnnBackendFinalize(conv) != CUDNN_STATUS_SUCCESS) return NULL;
    ops[n_ops++] = conv;
    /* the epilogue, each step into the next virtual tensor, the last into y:
     * + bias, + residual, then ReLU, or Clip(0, hi) (fuse_can admits no
     * other Clip) as hi - relu(hi - relu(x)): NaN stays NaN (RELU_FWD keeps
     * it, MIN would not), +inf gives hi, -inf 0; values in [0, hi] come back
     * within an f32 rounding of hi (2.4e-7 for ReLU6), under f16's step
     * above 4e-4. Steps: ADD b, ADD r, RELU, SUB hi, NEG, RELU, SUB hi, NEG. */
    bool clip = p->act.kind == ERT_ACT_CLIP;
    bool step_on[8] = {bias, res, act, clip, clip, clip, clip, clip};
    static const cudnnPointwiseMode_t mode_of[8] = {CUDNN_POINTWISE_ADD, CUDNN_POINTWISE_ADD,
                                                    CUDNN_POINTWISE_RELU_FWD, CUDNN_POINTWISE_SUB,
                                                    CUDNN_POINTWISE_NEG, CUDNN_POINTWISE_RELU_FWD,
                                                    CUDNN_POINTWISE_SUB, CUDNN_POINTWISE_NEG};
    cudnnBackendDescriptor_t thi = clip ? fuse_tensor(f, UID_HI, f32, NULL, NULL, false) : NULL;
    if (clip && !thi) return NULL;
    int steps = 0;
    for (int k = 0; k < 8; k++) steps += step_on[k];
    for (int k = 0; k < 8; k++) {
        if (!step_on[k]) continue;
        cudnnBackendDescriptor_t out = --steps == 0 ? ty : fuse_tensor(f, uid++, f32, yd, ys, true), in2 = NULL;
        if (!out) return NULL;
        if (k == 0) in2 = fuse_tensor(f, UID_B, dt, bd, bs, false);
        else if (k == 1) in2 = fuse_tensor(f, UID_R, dt, yd, ys, false);
        else if (mode_of[k] == CUDNN_POINTWISE_SUB) in2 = thi;
        if (k < 2 && !in2) return NULL;
        cudnnBackendDescriptor_t op = fuse_pointwise(f, mode_of[k], cur, in2, out);
        if (!op) return NULL;
        ops[n_ops++] = op;
        cur = out;
    }
    cudnnBackendDescriptor_t g = fuse_new(f, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (!g) return NULL;
    BSET(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n_ops, ops);
    BSET(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->dnn);
    return cudnnBackendFinalize(g) == CUDNN_STATUS_SUCCESS ? g : NULL;
}

/* A variant pack binding the graph's tensors to buffers (b, r may be NULL
 * when the graph has none). NULL if cuDNN refuses. */
cudnnBackendDescriptor_t ert_cuda_fuse_vpack(const ert_kargs *a, void *x, void *w, void *y, void *b, void *r, void *ws) {
    const ert_act_params *act = &a->params->conv.act;
    int64_t uids[7] = {UID_X, UID_W, UID_Y};
    void *ptrs[7] = {x, w, y};
    int n = 3;
    if (b) uids[n] = UID_B, ptrs[n++] = b;
    if (r) uids[n] = UID_R, ptrs[n++] = r;
    if (act->kind == ERT_ACT_CLIP) /* Clip(0, hi): by value, read at enqueue (and captured with the graph) */
        uids[n] = UID_HI, ptrs[n++] = (void *)&act->beta;
    cudnnBackendDescriptor_t vp = NULL;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp) != CUDNN_STATUS_SUCCESS) return NULL;
    if (cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids) ||
        cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs) ||
        cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws) ||
        cudnnBackendFinalize(vp)) {
        cudnnBackendDestroyDescriptor(vp);
        return NULL;
    }
    return vp;
}

/* One call of what is timed, enqueued on c->stream (graph_time). */
typedef struct timed_call {
    cuda_ctx *c;
    const ert_kargs *a;
    const conv_state *s;           /* cuDNN conv + epilogue kernel (plan NULL) */
    cudnnBackendDescriptor_t plan; /* or the fused graph with its variant pack */
    cudnnBackendDescriptor_t vp;
    void *const *buf; /* x, w, y, bias, residual (scratch) */
    void *ws;
    size_t ws_bytes;
    bool direct; /* or the direct conv kernel */
} timed_call;

static cudaError_t timed_enqueue(const timed_call *t) {
    cuda_ctx *c = t->c;
    const ert_kargs *a = t->a;
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *y = &a->out[0];
    bool bias = p->has_bias && a->n_in > 2, res = p->has_residual && a->n_in > 3;
    if (t->direct) {
        ert_tview xv = a->in[0], yv = *y;
        xv.data = t->buf[0];
        yv.data = t->buf[2];
        /* the filter layout the run will read: (KH, KW, C) where bind packs it */
        return ert_cuda_conv_direct_launch(p, &xv, t->buf[1], c->dw_rsc ? t->buf[1] : NULL, NULL, NULL, &yv, c->stream);
    }
    if (t->plan) return cudnnBackendExecute(c->dnn, t->plan, t->vp) == CUDNN_STATUS_SUCCESS ? cudaSuccess
                                                                                          : cudaErrorUnknown;
    const float one = 1.0f, zero = 0.0f;
    const conv_state *s = t->s;
    if (cudnnConvolutionForward(c->dnn, &one, s->xd, t->buf[0], s->wd, t->buf[1], s->cd, s->algo, t->ws, t->ws_bytes,
                                &zero, s->yd, t->buf[2]) != CUDNN_STATUS_SUCCESS)
        return cudaErrorUnknown;
    int cd = p->nhwc ? y->ndim - 1 : 1;
    return ert_cuda_conv_epilogue_launch(y->dtype, t->buf[2], bias ? t->buf[3] : NULL, res ? t->buf[4] : NULL,
                                         y->dims[0], y->dims[cd], y->n_elems / (y->dims[0] * y->dims[cd]), p->nhwc,
                                         &p->act, c->stream);
}

/* ms per call: TIME_REPS calls captured in one CUDA graph, replayed (once to
 * warm up, then best of two), as the session's graph will run them; eager
 * back-to-back calls measured cuDNN's host overhead instead (about 20 us a
 * legacy conv call, 5 us a graph plan: the faster kernel lost). < 0 on any
 * failure (the stream is left usable). Create time only. */
#define TIME_REPS 20
static float graph_time(const timed_call *t) {
    cuda_ctx *c = t->c;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float best = -1;
    double t0 = ert_cuda_now_ms();
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
    for (int i = 0; i < TIME_REPS && e == cudaSuccess; i++) e = timed_enqueue(t);
    cudaError_t e2 = cudaStreamEndCapture(c->stream, &g);
    if (e == cudaSuccess) e = e2;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&ge, g, 0);
    if (e == cudaSuccess) e = cudaEventCreate(&e0);
    if (e == cudaSuccess) e = cudaEventCreate(&e1);
    if (e == cudaSuccess) e = cudaGraphLaunch(ge, c->stream);
    for (int round = 0; round < 2 && e == cudaSuccess; round++) {
        float ms = 0;
        e = cudaEventRecord(e0, c->stream);
        if (e == cudaSuccess) e = cudaGraphLaunch(ge, c->stream);
        if (e == cudaSuccess) e = cudaEventRecord(e1, c->stream);
        if (e == cudaSuccess) e = cudaEventSynchronize(e1);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, e0, e1);
        if (e == cudaSuccess && (best < 0 || ms / TIME_REPS < best)) best = ms / TIME_REPS;
    }
    if (e != cudaSuccess) best = -1;
    cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    c->t_measure += ert_cuda_now_ms() - t0;
    return best;
}

/* The conv + epilogue (plan NULL) or the fused plan on scratch buffers. */
static float fuse_time(cuda_ctx *c, const ert_kargs *a, const conv_state *s, cudnnBackendDescriptor_t plan,
                       void *const *buf, void *ws, size_t ws_bytes) {
    const ert_conv_params *p = &a->params->conv;
    bool bias = p->has_bias && a->n_in > 2, res = p->has_residual && a->n_in > 3;
    timed_call t = {.c = c, .a = a, .s = s, .plan = plan, .buf = buf, .ws = ws, .ws_bytes = ws_bytes};
    if (plan && !(t.vp = ert_cuda_fuse_vpack(a, buf[0], buf[1], buf[2], bias ? buf[3] : NULL, res ? buf[4] : NULL, ws)))
        return -1;
    float ms = graph_time(&t);
    if (t.vp) cudnnBackendDestroyDescriptor(t.vp);
    return ms;
}

/* The direct kernel's time on zeroed scratch buffers (create time only), ms;
 * < 0 if it could not be measured. For channels-last depthwise convs it is
 * conv.cu's vector kernel (with the packed-filter copy where the session
 * packs: c->dw_rsc), which also fuses the epilogue; cuDNN's time is set
 * against it. */
float ert_cuda_time_direct(cuda_ctx *c, const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    size_t es = ert_dtype_size(x->dtype);
    void *buf[3] = {0};
    float ms = -1;
    if (cudaMalloc(&buf[0], (size_t)x->n_elems * es) == cudaSuccess &&
        cudaMalloc(&buf[1], (size_t)w->n_elems * es) == cudaSuccess &&
        cudaMalloc(&buf[2], (size_t)y->n_elems * es) == cudaSuccess &&
        cudaMemsetAsync(buf[0], 0, (size_t)x->n_elems * es, c->stream) == cudaSuccess &&
        cudaMemsetAsync(buf[1], 0, (size_t)w->n_elems * es, c->stream) == cudaSuccess) {
        timed_call t = {.c = c, .a = a, .buf = buf, .direct = true};
        ms = graph_time(&t);
    }
    cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    for (int i = 0; i < 3; i++) cudaFree(buf[i]);
    return ms;
}

/* Fill n half values (f16 or bf16) at dev with uniform [-scale, scale)
 * (a stateless hash of seed and index, on the GPU, on c->stream where the
 * check reads it: no host pass over large activations). Create time only. */
static cudaError_t fill_random(cuda_ctx *c, void *dev, size_t n, bool bf16, float scale, uint64_t seed) {
    return ert_cuda_fill_uniform_launch(bf16 ? ERT_DTYPE_BF16 : ERT_DTYPE_F16, dev, n, scale, seed, c->stream);
}

/* Does the fused plan compute what cuDNN's conv + the epilogue kernel
 * compute (ref: y of that, on the host) on the random scratch data? cuDNN
 * 9.14 on an H200 had engines for these graphs that returned wrong values
 * (bf16 with C = 3, some f16/bf16 residual and Clip graphs: test_cuda), and
 * which engine wins the timing changes from run to run, so every plan is
 * checked before it is used. Tolerance: two roundings of the dtype. */
static bool fuse_check(cuda_ctx *c, const ert_kargs *a, cudnnBackendDescriptor_t plan, void *const *buf, void *ws,
                       const uint16_t *ref, uint16_t *got, size_t n) {
    const ert_conv_params *p = &a->params->conv;
    bool bf16 = a->out[0].dtype == ERT_DTYPE_BF16;
    bool bias = p->has_bias && a->n_in > 2, res = p->has_residual && a->n_in > 3;
    cudnnBackendDescriptor_t vp = ert_cuda_fuse_vpack(a, buf[0], buf[1], buf[2], bias ? buf[3] : NULL, res ? buf[4] : NULL, ws);
    bool ok = vp && cudaMemsetAsync(buf[2], 0xff, n * 2, c->stream) == cudaSuccess &&
              cudnnBackendExecute(c->dnn, plan, vp) == CUDNN_STATUS_SUCCESS &&
              cudaMemcpyAsync(got, buf[2], n * 2, cudaMemcpyDeviceToHost, c->stream) == cudaSuccess &&
              cudaStreamSynchronize(c->stream) == cudaSuccess;
    if (vp) cudnnBackendDestroyDescriptor(vp);
    cudaGetLastError();
    if (!ok) return false;
    float amax = 0, emax = 0;
    for (size_t i = 0; i < n; i++) {
        float r = bf16 ? ert_bf16_to_f32(ref[i]) : ert_f16_to_f32(ref[i]);
        float g = bf16 ? ert_bf16_to_f32(got[i]) : ert_f16_to_f32(got[i]);
        float d = fabsf(g - r);
        if (!(d <= emax)) emax = d; /* NaN too */
        if (fabsf(r) > amax) amax = fabsf(r);
    }
    return emax <= (bf16 ? 0x1p-6f : 0x1p-9f) * (amax + 1e-3f);
}

/* Node a's conv + epilogue timed in one loop (conv state s with its legacy
 * algorithm, conv_key its shape), once per shape and epilogue (cached in
 * c->fuses): ms_unfused is cuDNN's conv followed by the epilogue kernel, as
 * ert_cuda_run_conv runs them; when fuse_can, up to FUSE_CANDIDATES engine configs of
 * cuDNN's heuristics for the fused graph are finalised and timed too, and
 * the fastest is kept (plan, ms_fused). Step 4c compares layouts with these
 * loop times: cudnnFind's times of single calls (launch overhead included)
 * summed to 2.9 ms for MobileNetV2's convs where the graph ran in 0.33. */
static ert_status fuse_find(cuda_ctx *c, const ert_kargs *a, const conv_state *s, const int *conv_key,
                            const fuse_entry **out) {
    const ert_conv_params *p = &a->params->conv;
    int key[FUSE_KEY];
    memset(key, 0, sizeof key);
    memcpy(key, conv_key, 20 * sizeof *key);
    key[16] = s->w_krsc;
    key[20] = p->has_bias && a->n_in > 2;
    key[21] = p->has_residual && a->n_in > 3;
    key[22] = (int)p->act.kind;
    memcpy(&key[23], &p->act.alpha, sizeof(float));
    memcpy(&key[24], &p->act.beta, sizeof(float));
    key[25] = s->algo;
    for (int i = 0; i < c->n_fuses; i++)
        if (!memcmp(c->fuses[i].key, key, sizeof key)) {
            *out = &c->fuses[i];
            return ERT_OK;
        }
    if (c->n_fuses == c->cap_fuses) {
        int cap = c->cap_fuses ? 2 * c->cap_fuses : 16;
        fuse_entry *n = realloc(c->fuses, (size_t)cap * sizeof *n);
        if (!n) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
        c->fuses = n;
        c->cap_fuses = cap;
    }
    fuse_entry *f = &c->fuses[c->n_fuses++];
    ert_status st = ERT_OK;
    int best_i = -1; /* the plan used, in heuristics order (logged) */
    memset(f, 0, sizeof *f);
    memcpy(f->key, key, sizeof key);
    f->ms_fused = f->ms_unfused = -1;
    f->cfg = -1;
    *out = f;
    /* the plan cache's answer: only its engine config is finalised (and
     * checked below), nothing is timed */
    const fuse_hint *h = NULL;
    for (int i = 0; i < c->n_hints && !h; i++)
        if (!memcmp(c->hints[i].key, key, sizeof key)) h = &c->hints[i];
    if (h) c->n_cached++;
    if (c->fast || (h && h->cfg < 0)) { /* fast: conv + epilogue kernel, untimed; cached: no fused plan won */
        if (h) f->ms_unfused = h->ms_unfused;
        return ERT_OK;
    }

    bool fuse = fuse_can(c, a);
    cudnnBackendDescriptor_t cfg[FUSE_CANDIDATES * 2] = {0}, plans[FUSE_CANDIDATES] = {0};
    int64_t n_cfg = 0, pws[FUSE_CANDIDATES] = {0};
    int n_plans = 0, pcfg[FUSE_CANDIDATES] = {0};
    /* the cache's serialised plan: no graph, heuristics or compilation
     * (still checked below); refused: its engine config is finalised */
    bool from_json = false;
    for (int i = 0; ERT_PLAN_JSON && h && fuse && i < c->n_pjs && !from_json; i++) {
        if (!c->pjs[i].json || memcmp(c->pjs[i].key, key, sizeof key)) continue;
        if ((plans[0] = plan_deserialise(c, &c->pjs[i], &pws[0]))) {
            from_json = true;
            n_plans = 1;
            pcfg[0] = h->cfg;
            f->json = c->pjs[i].json; /* kept for a rewrite of the file */
            f->json_len = c->pjs[i].len;
            c->pjs[i].json = NULL;
        } else {
            ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s': cuDNN refused the cached serialised plan: finalising its "
                    "engine config", a->name ? a->name : "?");
        }
    }
    cudnnBackendDescriptor_t g = fuse && !from_json ? fuse_graph(c, f, a, s->w_krsc) : NULL, heur = NULL;
    cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
    if (g && (heur = fuse_new(f, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)) &&
        !cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g) &&
        !cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm) &&
        !cudnnBackendFinalize(heur)) {
        int want = FUSE_CANDIDATES * 2;
        for (int i = 0; i < want; i++)
            if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i])) {
                want = i;
                break;
            }
        if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, want, &n_cfg,
                                     cfg))
            n_cfg = 0;
        if (n_cfg > want) n_cfg = want;
        for (int i = 0; i < n_cfg && n_plans < FUSE_CANDIDATES; i++) {
            if (h && i != h->cfg) continue;
            cudnnBackendDescriptor_t pl = NULL;
            int64_t got = 0, ws = 0;
            if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &pl)) continue;
            if (cudnnBackendSetAttribute(pl, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->dnn) ||
                cudnnBackendSetAttribute(pl, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         1, &cfg[i]) ||
                cudnnBackendFinalize(pl) ||
                cudnnBackendGetAttribute(pl, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                         &ws) ||
                ws < 0 || (size_t)ws > CONV_WS_MAX) {
                cudnnBackendDestroyDescriptor(pl);
                continue;
            }
            pws[n_plans] = ws;
            pcfg[n_plans] = i;
            plans[n_plans++] = pl;
        }
    }
    cudaGetLastError();
    {
        /* scratch x, w, y, bias, residual, workspace (create time only) */
        const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
        size_t es = ert_dtype_size(x->dtype), wsb = s->ws_bytes;
        for (int i = 0; i < n_plans; i++)
            if ((size_t)pws[i] > wsb) wsb = (size_t)pws[i];
        size_t sz[6] = {(size_t)x->n_elems * es, (size_t)w->n_elems * es, (size_t)y->n_elems * es,
                        (size_t)y->dims[p->nhwc ? y->ndim - 1 : 1] * es, (size_t)y->n_elems * es, wsb};
        void *buf[6] = {0};
        bool ok = true;
        size_t off[7] = {0};
        for (int i = 0; i < 6; i++) off[i + 1] = off[i] + (((sz[i] ? sz[i] : 256) + 255) & ~(size_t)255);
        cudaError_t se = cudaSuccess;
        uint8_t *base = ert_cuda_scratch(c, off[6], &se);
        if (!base) {
            st = alloc_err(c, se, "scratch to time a convolution", off[6]);
            ok = false;
        }
        for (int i = 0; i < 6 && ok; i++) {
            buf[i] = base + off[i];
            if ((se = cudaMemsetAsync(buf[i], 0, off[i + 1] - off[i], c->stream)) != cudaSuccess) {
                st = cuda_err(c, se, "scratch to time a convolution");
                ok = false;
            }
        }
        int best = -1;
        float pt[FUSE_CANDIDATES];
        for (int i = 0; i < n_plans && ok; i++) pt[i] = h ? h->ms_fused : fuse_time(c, a, s, plans[i], buf, buf[5], wsb);
        if (ok) f->ms_unfused = h ? h->ms_unfused : fuse_time(c, a, s, NULL, buf, buf[5], wsb);
        if (ok && !h) c->n_searches++;
        if (ok && n_plans) {
            /* random data, the reference from conv + epilogue kernel, then the
             * plans fastest first until one agrees */
            bool bf16 = x->dtype == ERT_DTYPE_BF16;
            size_t ny = (size_t)y->n_elems;
            uint16_t *ref = malloc(ny * 2), *got = malloc(ny * 2);
            timed_call t = {.c = c, .a = a, .s = s, .buf = buf, .ws = buf[5], .ws_bytes = wsb};
            bool ready = ref && got && fill_random(c, buf[0], (size_t)x->n_elems, bf16, 1.0f, 1) == cudaSuccess &&
                         fill_random(c, buf[1], (size_t)w->n_elems, bf16,
                                     1.0f / sqrtf((float)(w->n_elems / w->dims[0])), 2) == cudaSuccess &&
                         fill_random(c, buf[3], sz[3] / es, bf16, 0.5f, 3) == cudaSuccess &&
                         fill_random(c, buf[4], ny, bf16, 1.0f, 4) == cudaSuccess && timed_enqueue(&t) == cudaSuccess &&
                         cudaMemcpyAsync(ref, buf[2], ny * 2, cudaMemcpyDeviceToHost, c->stream) == cudaSuccess &&
                         cudaStreamSynchronize(c->stream) == cudaSuccess;
            cudaGetLastError();
            for (int k = 0; k < n_plans && ready; k++) {
                int pick = -1;
                for (int i = 0; i < n_plans; i++)
                    if (plans[i] && pt[i] >= 0 && (pick < 0 || pt[i] < pt[pick])) pick = i;
                if (pick < 0) break;
                if (fuse_check(c, a, plans[pick], buf, buf[5], ref, got, ny)) {
                    best = best_i = pick;
                    f->ms_fused = pt[pick];
                    break;
                }
                ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s': a fused cuDNN plan computed wrong values: not used",
                        a->name ? a->name : "?");
                cudnnBackendDestroyDescriptor(plans[pick]);
                plans[pick] = NULL;
            }
            free(ref);
            free(got);
        }
        cudaGetLastError();
        if (best >= 0 && f->n_keep < FUSE_KEEP) {
            f->plan = plans[best];
            plans[best] = NULL;
            if (!from_json) {
                f->keep[f->n_keep++] = cfg[pcfg[best]]; /* the plan may refer to its config */
                cfg[pcfg[best]] = NULL;
                if (ERT_PLAN_JSON && c->cache_path) plan_serialise(f);
            }
            f->ws = (size_t)pws[best];
            f->cfg = pcfg[best];
            f->ok = true;
        }
    }
    for (int i = 0; i < n_plans; i++)
        if (plans[i]) cudnnBackendDestroyDescriptor(plans[i]);
    for (int i = 0; i < FUSE_CANDIDATES * 2; i++)
        if (cfg[i]) cudnnBackendDestroyDescriptor(cfg[i]);
    if (!f->ok) {
        if (fuse)
            ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s': no fused cuDNN graph (%s; %d engine configs, %d plans)",
                    a->name ? a->name : "?", !g ? "graph refused" : !n_cfg ? "no engine" : "no plan ran", (int)n_cfg,
                    n_plans);
        ert_cuda_fuse_entry_clear(f);
    } else {
        ert_log(c->ctx, ERT_LOG_DEBUG,
                "conv '%s': fused cuDNN graph %.4f ms vs conv + epilogue %.4f ms (plan %d of %d, heuristics order)",
                a->name ? a->name : "?", f->ms_fused, f->ms_unfused, best_i + 1, n_plans);
    }
    if (st != ERT_OK) c->n_fuses--; /* measure again next time */
    return st;
}

ert_status ert_cuda_fuse_find(cuda_ctx *c, const ert_kargs *a, const conv_state *s, const int *conv_key,
                            const fuse_entry **out) {
    double t0 = ert_cuda_now_ms(), m0 = c->t_measure;
    ert_status st = fuse_find(c, a, s, conv_key, out);
    c->t_finalize += (ert_cuda_now_ms() - t0) - (c->t_measure - m0);
    return st;
}
#undef BSET
#endif

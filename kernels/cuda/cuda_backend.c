/*
 * CUDA backend: the ert_backend table for NVIDIA GPUs (discrete and Jetson).
 *
 * Create (ert_session_create drives these, in this order):
 *   init          device 0: integrated?, concurrent managed access, pageable
 *                 access, compute capability; resolve the placement policy;
 *                 one stream, a cuBLAS handle and a cuDNN handle bound to it.
 *   node_workspace  scratch each node needs on top of prepare's: the cuDNN
 *                 workspace of the algorithm it will use (heuristics, capped
 *                 at CONV_WS_MAX), a cuBLAS workspace for GEMMs. The planner
 *                 puts it in the arena (a->workspace at bind time).
 *   arena_alloc   one allocation: cudaMalloc (DEVICE), cudaMallocManaged
 *                 (UNIFIED, attached to the stream when the GPU cannot share
 *                 managed memory with the CPU concurrently), cudaHostAlloc
 *                 mapped (MAPPED).
 *   io_host       DEVICE: a pinned host mirror of the io region; otherwise the
 *                 io region itself.
 *   upload        cudaMemcpy (weights).
 *   bind_node     cuDNN descriptors and the algorithm, chosen once with the
 *                 workspace the planner gave the node.
 *   bind_io       remember the host<->device copies (DEVICE placement only).
 * Run: inputs H2D, every node on the stream, outputs D2H. The first run
 *   captures that sequence into a CUDA graph and later runs replay it (the
 *   pointers never change after create); if capture is refused the backend
 *   runs eagerly from then on. Then the stream is synchronised, so outputs
 *   are readable when ert_session_run returns.
 * Nothing is allocated after create. Handles live here, never in globals.
 * FP32 only; f32 convolutions and GEMMs are kept off TF32 (FMA math in cuDNN,
 * default math in cuBLAS), so results match the CPU reference closely.
 */
#include "cuda_internal.h"

#include <cublas_v2.h>
#ifdef ERT_HAVE_CUDNN
#include <cudnn.h>
#endif

#include <stdlib.h>
#include <string.h>

#define CONV_WS_MAX ((size_t)64 << 20) /* largest cuDNN workspace a conv may plan */
#define BLAS_WS ((size_t)4 << 20)      /* cuBLAS workspace per GEMM node (transient) */

typedef struct cuda_ctx {
    ert_context *ctx;
    int device, cc_major, cc_minor;
    bool integrated, concurrent_managed, pageable_access;
    ert_placement placement; /* resolved: never AUTO */
    cudaStream_t stream;
    cublasHandle_t blas;
#ifdef ERT_HAVE_CUDNN
    cudnnHandle_t dnn;
#endif
    /* MAPPED: host and device addresses of the arena (equal under UVA) */
    void *map_host, *map_dev;
    /* the arena this backend allocated (a caller's arena is anything else) */
    uint8_t *own_arena;
    size_t own_bytes;
    void *mirror; /* pinned io mirror made by io_host, if any */
    ert_io_copy *in, *out;
    int n_in, n_out;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    bool graph_off; /* capture failed once: run eagerly */
} cuda_ctx;

/* Per-node state (bind_node). */
typedef struct conv_state {
    bool use_dnn;
#ifdef ERT_HAVE_CUDNN
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo;
    size_t ws_bytes;
#endif
} conv_state;

static ert_status cuda_err(cuda_ctx *c, cudaError_t e, const char *what) {
    return ert_set_error(c->ctx, ERT_E_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

static ert_status blas_err(cuda_ctx *c, cublasStatus_t s, const char *what) {
    return ert_set_error(c->ctx, ERT_E_CUDA, "%s: cuBLAS status %d", what, (int)s);
}

#ifdef ERT_HAVE_CUDNN
static ert_status dnn_err(cuda_ctx *c, cudnnStatus_t s, const char *what) {
    return ert_set_error(c->ctx, ERT_E_CUDA, "%s: %s", what, cudnnGetErrorString(s));
}
#endif

/* ------------------------------------------------------------------ init */

static void cuda_release(void *bctx) {
    cuda_ctx *c = bctx;
    if (!c) return;
    if (c->exec) cudaGraphExecDestroy(c->exec);
    if (c->graph) cudaGraphDestroy(c->graph);
#ifdef ERT_HAVE_CUDNN
    if (c->dnn) cudnnDestroy(c->dnn);
#endif
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c->in);
    free(c->out);
    free(c);
}

static ert_status cuda_init(ert_context *ctx, const ert_session_options *o, void **bctx) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        const char *why = e != cudaSuccess ? cudaGetErrorString(e) : "no device";
        cudaGetLastError();
        if (o->device == ERT_DEVICE_AUTO) { /* not an error: the session falls back to the CPU */
            ert_log(ctx, ERT_LOG_INFO, "no CUDA device (%s): using the CPU", why);
            return ERT_E_CUDA;
        }
        return ert_set_error(ctx, ERT_E_CUDA, "no CUDA device: %s", why);
    }
    if ((unsigned)o->placement > ERT_PLACEMENT_MAPPED)
        return ert_set_error(ctx, ERT_E_ARG, "unknown placement %d", (int)o->placement);
    cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
    c->ctx = ctx;
    c->device = 0;
    ert_status st = ERT_OK;
    int v = 0;
    if ((e = cudaSetDevice(c->device)) != cudaSuccess) {
        st = cuda_err(c, e, "cudaSetDevice(0)");
        goto fail;
    }
    cudaDeviceGetAttribute(&v, cudaDevAttrIntegrated, c->device);
    c->integrated = v != 0;
    cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, c->device);
    c->concurrent_managed = v != 0;
    cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, c->device);
    c->pageable_access = v != 0;
    cudaDeviceGetAttribute(&c->cc_major, cudaDevAttrComputeCapabilityMajor, c->device);
    cudaDeviceGetAttribute(&c->cc_minor, cudaDevAttrComputeCapabilityMinor, c->device);
    c->placement = o->placement;
    if (c->placement == ERT_PLACEMENT_AUTO) c->placement = c->integrated ? ERT_PLACEMENT_UNIFIED : ERT_PLACEMENT_DEVICE;
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        st = cuda_err(c, e, "cudaStreamCreate");
        goto fail;
    }
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        st = blas_err(c, bs, "cublasCreate");
        goto fail;
    }
    /* f32 stays f32 (no TF32): the CPU reference is the oracle. */
    if ((bs = cublasSetStream(c->blas, c->stream)) != CUBLAS_STATUS_SUCCESS ||
        (bs = cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS) {
        st = blas_err(c, bs, "cublasSetStream/SetMathMode");
        goto fail;
    }
#ifdef ERT_HAVE_CUDNN
    cudnnStatus_t ds = cudnnCreate(&c->dnn);
    if (ds != CUDNN_STATUS_SUCCESS) {
        c->dnn = NULL;
        st = dnn_err(c, ds, "cudnnCreate");
        goto fail;
    }
    if ((ds = cudnnSetStream(c->dnn, c->stream)) != CUDNN_STATUS_SUCCESS) {
        st = dnn_err(c, ds, "cudnnSetStream");
        goto fail;
    }
#endif
    ert_log(ctx, ERT_LOG_INFO, "CUDA device 0: sm_%d%d, %s, concurrent managed access %d, pageable access %d, placement %d",
            c->cc_major, c->cc_minor, c->integrated ? "integrated" : "discrete", c->concurrent_managed,
            c->pageable_access, (int)c->placement);
    *bctx = c;
    return ERT_OK;
fail:
    cuda_release(c);
    return st;
}

/* ------------------------------------------------------------------ memory */

static ert_status cuda_arena_alloc(void *bctx, size_t bytes, void **ptr) {
    cuda_ctx *c = bctx;
    cudaError_t e;
    void *p = NULL;
    if (!bytes) bytes = ERT_ALIGN;
    switch (c->placement) {
    case ERT_PLACEMENT_UNIFIED:
        if ((e = cudaMallocManaged(&p, bytes, cudaMemAttachGlobal)) != cudaSuccess)
            return cuda_err(c, e, "cudaMallocManaged(arena)");
        if (!c->concurrent_managed) {
            /* Without concurrent access, a kernel running anywhere would fence
             * the CPU off every global managed allocation: tie it to our
             * stream so the CPU may use it whenever this stream is idle. */
            if ((e = cudaStreamAttachMemAsync(c->stream, p, 0, cudaMemAttachSingle)) != cudaSuccess ||
                (e = cudaStreamSynchronize(c->stream)) != cudaSuccess) {
                cudaFree(p);
                return cuda_err(c, e, "cudaStreamAttachMemAsync(arena)");
            }
        }
        break;
    case ERT_PLACEMENT_MAPPED: {
        void *d = NULL;
        if ((e = cudaHostAlloc(&p, bytes, cudaHostAllocMapped)) != cudaSuccess)
            return cuda_err(c, e, "cudaHostAlloc(arena, mapped)");
        if ((e = cudaHostGetDevicePointer(&d, p, 0)) != cudaSuccess) {
            cudaFreeHost(p);
            return cuda_err(c, e, "cudaHostGetDevicePointer(arena)");
        }
        c->map_host = p;
        c->map_dev = d;
        p = d;
        break;
    }
    default:
        if ((e = cudaMalloc(&p, bytes)) != cudaSuccess) return cuda_err(c, e, "cudaMalloc(arena)");
        break;
    }
    c->own_arena = p;
    c->own_bytes = bytes;
    *ptr = p;
    return ERT_OK;
}

static void cuda_arena_free(void *bctx, void *ptr) {
    cuda_ctx *c = bctx;
    if (!ptr) return;
    cudaStreamSynchronize(c->stream);
    if (c->placement == ERT_PLACEMENT_MAPPED && ptr == c->map_dev) {
        cudaFreeHost(c->map_host);
        c->map_host = c->map_dev = NULL;
    } else {
        cudaFree(ptr);
    }
}

/* How the CPU reaches the io region at `dev`: 0 through a pinned mirror,
 * 1 at `dev` itself, 2 at a mapped host address (*h). Our own arena follows
 * the placement; a caller's arena is judged by what the memory is. */
static ert_status io_access(cuda_ctx *c, void *dev, void **h, int *how) {
    uint8_t *d = dev;
    if (c->own_arena && d >= c->own_arena && d <= c->own_arena + c->own_bytes) {
        if (c->placement == ERT_PLACEMENT_DEVICE) *how = 0;
        else if (c->placement == ERT_PLACEMENT_MAPPED) {
            *how = 2;
            *h = (uint8_t *)c->map_host + (d - (uint8_t *)c->map_dev);
        } else *how = 1;
        return ERT_OK;
    }
    struct cudaPointerAttributes at;
    cudaError_t e = cudaPointerGetAttributes(&at, dev);
    if (e != cudaSuccess) return cuda_err(c, e, "cudaPointerGetAttributes(caller arena)");
    switch (at.type) {
    case cudaMemoryTypeDevice: *how = 0; return ERT_OK;
    case cudaMemoryTypeManaged: *how = 1; return ERT_OK;
    case cudaMemoryTypeHost:
        *how = 2;
        *h = at.hostPointer;
        return ERT_OK;
    default:
        if (c->pageable_access) { /* the GPU reads pageable host memory (HMM/ATS) */
            *how = 1;
            return ERT_OK;
        }
        return ert_set_error(c->ctx, ERT_E_ARG,
                             "the caller's arena is plain host memory, which this GPU cannot access: give device "
                             "(cudaMalloc), managed (cudaMallocManaged) or mapped pinned (cudaHostAlloc) memory");
    }
}

static ert_status cuda_io_host(void *bctx, void *dev, size_t bytes, void **host) {
    cuda_ctx *c = bctx;
    void *h = NULL;
    int how = 1;
    ert_status st = io_access(c, dev, &h, &how);
    if (st != ERT_OK) return st;
    if (how == 0) {
        cudaError_t e = cudaHostAlloc(&h, bytes ? bytes : ERT_ALIGN, cudaHostAllocDefault);
        if (e != cudaSuccess) return cuda_err(c, e, "cudaHostAlloc(io mirror)");
        c->mirror = h;
        *host = h;
    } else {
        *host = how == 2 ? h : dev;
    }
    return ERT_OK;
}

static void cuda_io_host_free(void *bctx, void *host, void *dev) {
    cuda_ctx *c = bctx;
    (void)dev;
    if (host && host == c->mirror) {
        cudaStreamSynchronize(c->stream);
        cudaFreeHost(host);
        c->mirror = NULL;
    }
}

static ert_status cuda_upload(void *bctx, void *dst, const void *src, size_t n) {
    cuda_ctx *c = bctx;
    if (!n) return ERT_OK;
    cudaError_t e = cudaMemcpy(dst, src, n, cudaMemcpyDefault);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "cudaMemcpy(upload)");
}

static ert_status cuda_bind_io(void *bctx, const ert_io_copy *in, int n_in, const ert_io_copy *out, int n_out) {
    cuda_ctx *c = bctx;
    free(c->in);
    free(c->out);
    c->in = calloc((size_t)n_in + 1, sizeof *c->in);
    c->out = calloc((size_t)n_out + 1, sizeof *c->out);
    if (!c->in || !c->out) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
    if (n_in) memcpy(c->in, in, (size_t)n_in * sizeof *in);
    if (n_out) memcpy(c->out, out, (size_t)n_out * sizeof *out);
    c->n_in = n_in;
    c->n_out = n_out;
    return ERT_OK;
}

/* ------------------------------------------------------------------ conv (cuDNN) */

#ifdef ERT_HAVE_CUDNN
static void conv_state_free(conv_state *s) {
    if (!s) return;
    if (s->xd) cudnnDestroyTensorDescriptor(s->xd);
    if (s->yd) cudnnDestroyTensorDescriptor(s->yd);
    if (s->wd) cudnnDestroyFilterDescriptor(s->wd);
    if (s->cd) cudnnDestroyConvolutionDescriptor(s->cd);
    free(s);
}

/* cuDNN takes 1-D and 2-D f32 convs with symmetric pads; the rest goes to the
 * direct kernel. Descriptors are 4-D (a 1-D conv is 2-D with H = 1). */
static bool dnn_can(const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    if (p->nsp < 1 || p->nsp > 2 || a->in[0].ndim != p->nsp + 2) return false;
    for (int i = 0; i < p->nsp; i++)
        if (p->pad_begin[i] != p->pad_end[i]) return false;
    for (int i = 0; i < a->in[0].ndim; i++)
        if (a->in[0].dims[i] > INT32_MAX || a->out[0].dims[i] > INT32_MAX) return false;
    return true;
}

/* Describe the conv and pick the algorithm: the heuristics' best FMA-math
 * algorithm whose workspace fits `ws_limit`. */
static ert_status conv_describe(cuda_ctx *c, const ert_kargs *a, size_t ws_limit, conv_state **out) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
    int two = p->nsp == 2;
    int xh = two ? (int)x->dims[2] : 1, xw = (int)x->dims[2 + two], yh = two ? (int)y->dims[2] : 1,
        yw = (int)y->dims[2 + two];
    int kh = two ? (int)w->dims[2] : 1, kw = (int)w->dims[2 + two];
    int ph = two ? (int)p->pad_begin[0] : 0, pw = (int)p->pad_begin[two];
    int sh = two ? (int)p->stride[0] : 1, sw = (int)p->stride[two];
    int dh = two ? (int)p->dilation[0] : 1, dw = (int)p->dilation[two];
    cudnnStatus_t ds;
    if ((ds = cudnnCreateTensorDescriptor(&s->xd)) || (ds = cudnnCreateTensorDescriptor(&s->yd)) ||
        (ds = cudnnCreateFilterDescriptor(&s->wd)) || (ds = cudnnCreateConvolutionDescriptor(&s->cd)) ||
        (ds = cudnnSetTensor4dDescriptor(s->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)x->dims[0], (int)x->dims[1],
                                         xh, xw)) ||
        (ds = cudnnSetTensor4dDescriptor(s->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)y->dims[0], (int)y->dims[1],
                                         yh, yw)) ||
        (ds = cudnnSetFilter4dDescriptor(s->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)w->dims[0], (int)w->dims[1],
                                         kh, kw)) ||
        (ds = cudnnSetConvolution2dDescriptor(s->cd, ph, pw, sh, sw, dh, dw, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT)) ||
        (ds = cudnnSetConvolutionGroupCount(s->cd, (int)p->group)) ||
        (ds = cudnnSetConvolutionMathType(s->cd, CUDNN_FMA_MATH))) {
        conv_state_free(s);
        return dnn_err(c, ds, "cuDNN conv descriptors");
    }
    int on, oc, oh, ow;
    if (cudnnGetConvolution2dForwardOutputDim(s->cd, s->xd, s->wd, &on, &oc, &oh, &ow) != CUDNN_STATUS_SUCCESS ||
        on != (int)y->dims[0] || oc != (int)y->dims[1] || oh != yh || ow != yw) {
        conv_state_free(s);
        *out = NULL; /* cuDNN sees another shape (ceil effects): direct kernel */
        return ERT_OK;
    }
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    ds = cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, s->xd, s->wd, s->cd, s->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                &got, perf);
    if (ds != CUDNN_STATUS_SUCCESS) {
        conv_state_free(s);
        return dnn_err(c, ds, "cudnnGetConvolutionForwardAlgorithm_v7");
    }
    int pick = -1;
    for (int i = 0; i < got && pick < 0; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_limit &&
            perf[i].mathType != CUDNN_TENSOR_OP_MATH && perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
            pick = i;
    if (pick < 0) {
        conv_state_free(s);
        *out = NULL;
        return ERT_OK;
    }
    s->use_dnn = true;
    s->algo = perf[pick].algo;
    s->ws_bytes = perf[pick].memory;
    *out = s;
    return ERT_OK;
}
#endif

/* ------------------------------------------------------------------ node hooks */

static bool is_blas_op(ert_op op) { return op == ERT_OP_GEMM || op == ERT_OP_MATMUL; }

static ert_status cuda_node_workspace(void *bctx, const ert_kargs *a, size_t *bytes) {
    cuda_ctx *c = bctx;
    (void)c;
    *bytes = 0;
    if (is_blas_op(a->op)) {
        *bytes = BLAS_WS;
        return ERT_OK;
    }
#ifdef ERT_HAVE_CUDNN
    if (a->op == ERT_OP_CONV && a->in[0].dtype == ERT_DTYPE_F32 && dnn_can(a)) {
        conv_state *s = NULL;
        ert_status st = conv_describe(c, a, CONV_WS_MAX, &s);
        if (st != ERT_OK) return st;
        if (s) *bytes = s->ws_bytes;
        conv_state_free(s);
    }
#endif
    return ERT_OK;
}

static ert_status cuda_bind_node(void *bctx, ert_kargs *a) {
    cuda_ctx *c = bctx;
    a->state = NULL;
    /* supports() saw input 0's dtype only */
    if (a->op == ERT_OP_WHERE && (a->in[1].dtype != ERT_DTYPE_F32 || a->in[2].dtype != ERT_DTYPE_F32))
        return ert_set_error(c->ctx, ERT_E_UNSUPPORTED, "node '%s' (Where): the cuda backend does not implement it yet for %s data",
                             a->name ? a->name : "?", ert_dtype_name(a->in[1].dtype));
#ifdef ERT_HAVE_CUDNN
    if (a->op == ERT_OP_CONV && dnn_can(a)) {
        conv_state *s = NULL;
        ert_status st = conv_describe(c, a, a->workspace ? a->workspace_bytes : 0, &s);
        if (st != ERT_OK) return st;
        a->state = s;
    }
#endif
    return ERT_OK;
}

static void cuda_release_node(void *bctx, ert_kargs *a) {
    (void)bctx;
#ifdef ERT_HAVE_CUDNN
    if (a->op == ERT_OP_CONV) conv_state_free(a->state);
#endif
    a->state = NULL;
}

/* ------------------------------------------------------------------ dispatch */

/* Output-shaped map with operand strides: 0 contiguous output, 1.. operands. */
static void map_out(ert_cuda_map *m, const ert_tview *y) {
    memset(m, 0, sizeof *m);
    m->ndim = y->ndim;
    memcpy(m->dims, y->dims, sizeof m->dims);
}

static ert_status run_conv(cuda_ctx *c, const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    const float *bias = p->has_bias && a->n_in > 2 ? a->in[2].data : NULL;
    const float *res = p->has_residual && a->n_in > 3 ? a->in[3].data : NULL;
    const ert_tview *y = &a->out[0];
    cudaError_t e;
#ifdef ERT_HAVE_CUDNN
    const conv_state *s = a->state;
    if (s && s->use_dnn) {
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t ds = cudnnConvolutionForward(c->dnn, &one, s->xd, a->in[0].data, s->wd, a->in[1].data, s->cd,
                                                   s->algo, a->workspace, s->ws_bytes, &zero, s->yd, y->data);
        if (ds != CUDNN_STATUS_SUCCESS) return dnn_err(c, ds, "cudnnConvolutionForward");
        /* bias (per channel), residual (like y), activation: one pass */
        ert_cuda_map m;
        memset(&m, 0, sizeof m);
        int64_t sp = 1;
        for (int i = 2; i < y->ndim; i++) sp *= y->dims[i];
        m.ndim = 3;
        m.dims[0] = y->dims[0];
        m.dims[1] = y->dims[1];
        m.dims[2] = sp;
        m.s[0][1] = 1; /* bias[c] */
        m.s[1][0] = y->dims[1] * sp;
        m.s[1][1] = sp;
        m.s[1][2] = 1;
        e = ert_cuda_epilogue_launch(y->data, bias, 1.0f, res, &m, y->n_elems, &p->act, c->stream);
        return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "conv epilogue");
    }
#endif
    e = ert_cuda_conv_direct_launch(p, &a->in[0], a->in[1].data, bias, res, y, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "conv kernel");
}

static ert_status blas_ws(cuda_ctx *c, const ert_kargs *a) {
    if (!a->workspace) return ERT_OK;
    cublasStatus_t bs = cublasSetWorkspace(c->blas, a->workspace, a->workspace_bytes);
    return bs == CUBLAS_STATUS_SUCCESS ? ERT_OK : blas_err(c, bs, "cublasSetWorkspace");
}

/* Row-major C (M,N) = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: call
 * cuBLAS with the operands swapped and nothing transposed in memory. */
static ert_status run_gemm(cuda_ctx *c, const ert_kargs *a) {
    const ert_gemm_params *p = &a->params->gemm;
    const ert_tview *A = &a->in[0], *B = &a->in[1], *Y = &a->out[0];
    const ert_tview *C = a->n_in > 2 && a->in[2].data ? &a->in[2] : NULL;
    if (A->ndim != 2 || B->ndim != 2 || Y->ndim != 2) return ERT_E_UNSUPPORTED;
    int64_t M = Y->dims[0], N = Y->dims[1], K = p->trans_a ? A->dims[0] : A->dims[1];
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return ERT_E_UNSUPPORTED;
    if (M == 0 || N == 0) return ERT_OK;
    ert_status st = blas_ws(c, a);
    if (st) return st;
    const float zero = 0.0f;
    cublasStatus_t bs = cublasSgemm(c->blas, p->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    (int)N, (int)M, (int)K, &p->alpha, B->data, (int)(p->trans_b ? K : N), A->data,
                                    (int)(p->trans_a ? M : K), &zero, Y->data, (int)N);
    if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasSgemm");
    ert_cuda_map m;
    map_out(&m, Y);
    const float *add = NULL;
    if (C && p->beta != 0.0f) {
        ert_cuda_bcast_strides(2, Y->dims, C->ndim, C->dims, m.s[0]);
        add = C->data;
    }
    cudaError_t e = ert_cuda_epilogue_launch(Y->data, add, p->beta, NULL, &m, Y->n_elems, &p->act, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "gemm epilogue");
}

/* MatMul (numpy): A (..., M, K) @ B (..., K, N), batch dims broadcast; a 1-D
 * A is (1, K), a 1-D B is (K, 1). One strided-batched call when each
 * operand's batch is either whole or a single matrix, else one call per batch. */
static ert_status run_matmul(cuda_ctx *c, const ert_kargs *a) {
    const ert_tview *A = &a->in[0], *B = &a->in[1], *Y = &a->out[0];
    int an = A->ndim, bn = B->ndim;
    if (an < 1 || bn < 1) return ERT_E_UNSUPPORTED;
    int64_t M = an >= 2 ? A->dims[an - 2] : 1, K = A->dims[an - 1], N = bn >= 2 ? B->dims[bn - 1] : 1;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return ERT_E_UNSUPPORTED;
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
    ert_status st = blas_ws(c, a);
    if (st) return st;
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t bs;
    bool a_ok = pa == batch || pa == 1, b_ok = pb == batch || pb == 1;
    if (a_ok && b_ok) {
        bs = cublasSgemmStridedBatched(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B->data,
                                       (int)N, pb == 1 ? 0 : K * N, A->data, (int)K, pa == 1 ? 0 : M * K, &zero,
                                       Y->data, (int)N, M * N, (int)batch);
        if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasSgemmStridedBatched");
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
            bs = cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one,
                             (const float *)B->data + ob * K * N, (int)N, (const float *)A->data + oa * M * K, (int)K,
                             &zero, (float *)Y->data + i * M * N, (int)N);
            if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasSgemm");
        }
    }
    const ert_act_params *act = &a->params->gemm.act;
    if (act->kind == ERT_ACT_NONE) return ERT_OK;
    ert_cuda_map m;
    map_out(&m, Y);
    cudaError_t e = ert_cuda_epilogue_launch(Y->data, NULL, 0.0f, NULL, &m, Y->n_elems, act, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "matmul epilogue");
}

static ert_status run_binary(cuda_ctx *c, const ert_kargs *a) {
    const ert_tview *y = &a->out[0];
    ert_cuda_map m;
    map_out(&m, y);
    cudaError_t e;
    if (a->op == ERT_OP_WHERE) {
        for (int k = 0; k < 3; k++) ert_cuda_bcast_strides(y->ndim, y->dims, a->in[k].ndim, a->in[k].dims, m.s[k]);
        e = ert_cuda_where_launch(a->in[0].data, a->in[1].data, a->in[2].data, y->data, &m, y->n_elems, c->stream);
    } else {
        for (int k = 0; k < 2; k++) ert_cuda_bcast_strides(y->ndim, y->dims, a->in[k].ndim, a->in[k].dims, m.s[k]);
        e = ert_cuda_binary_launch(a->op, a->in[0].data, a->in[1].data, y->data, &m, y->n_elems, c->stream);
    }
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "element-wise kernel");
}

/* Data movement: everything is one strided copy (or a plain memcpy). */
static ert_status run_copy(cuda_ctx *c, const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    size_t es = ert_dtype_size(x->dtype);
    int64_t xs[ERT_MAX_DIMS], ys[ERT_MAX_DIMS];
    ert_cuda_map m;
    cudaError_t e = cudaSuccess;
    switch (a->op) {
    case ERT_OP_IDENTITY: case ERT_OP_DROPOUT: case ERT_OP_FLATTEN: case ERT_OP_RESHAPE:
    case ERT_OP_SQUEEZE: case ERT_OP_UNSQUEEZE:
        if (y->data != x->data && y->n_elems)
            e = cudaMemcpyAsync(y->data, x->data, (size_t)y->n_elems * es, cudaMemcpyDeviceToDevice, c->stream);
        if (e == cudaSuccess && a->op == ERT_OP_DROPOUT && a->n_out > 1 && a->out[1].data && a->out[1].n_elems)
            e = cudaMemsetAsync(a->out[1].data, 1, (size_t)a->out[1].n_elems, c->stream); /* mask: all kept */
        break;
    case ERT_OP_TRANSPOSE:
        map_out(&m, y);
        ert_cuda_contig_strides(x->ndim, x->dims, xs);
        for (int d = 0; d < y->ndim; d++) m.s[0][d] = xs[a->params->transpose.perm[d]];
        ert_cuda_contig_strides(y->ndim, y->dims, m.s[1]);
        e = ert_cuda_strided_copy_launch(x->data, 0, y->data, 0, es, &m, y->n_elems, c->stream);
        break;
    case ERT_OP_EXPAND:
        map_out(&m, y);
        ert_cuda_bcast_strides(y->ndim, y->dims, x->ndim, x->dims, m.s[0]);
        ert_cuda_contig_strides(y->ndim, y->dims, m.s[1]);
        e = ert_cuda_strided_copy_launch(x->data, 0, y->data, 0, es, &m, y->n_elems, c->stream);
        break;
    case ERT_OP_SLICE: {
        const ert_slice_params *p = &a->params->slice;
        map_out(&m, y);
        ert_cuda_contig_strides(x->ndim, x->dims, xs);
        int64_t off = 0;
        for (int d = 0; d < x->ndim; d++) {
            off += p->start[d] * xs[d];
            m.s[0][d] = p->step[d] * xs[d];
        }
        ert_cuda_contig_strides(y->ndim, y->dims, m.s[1]);
        e = ert_cuda_strided_copy_launch(x->data, off, y->data, 0, es, &m, y->n_elems, c->stream);
        break;
    }
    case ERT_OP_CONCAT: {
        int64_t axis = a->params->axis.axis, pos = 0;
        ert_cuda_contig_strides(y->ndim, y->dims, ys);
        for (int k = 0; k < a->n_in && e == cudaSuccess; k++) {
            const ert_tview *xk = &a->in[k];
            if (!xk->data) continue;
            map_out(&m, xk);
            ert_cuda_contig_strides(xk->ndim, xk->dims, m.s[0]);
            memcpy(m.s[1], ys, sizeof ys);
            e = ert_cuda_strided_copy_launch(xk->data, 0, y->data, pos * ys[axis], es, &m, xk->n_elems, c->stream);
            pos += xk->dims[axis];
        }
        break;
    }
    case ERT_OP_SPLIT: {
        int64_t axis = a->params->split.axis, pos = 0;
        ert_cuda_contig_strides(x->ndim, x->dims, xs);
        for (int k = 0; k < a->n_out && e == cudaSuccess; k++) {
            const ert_tview *yk = &a->out[k];
            if (!yk->data) continue;
            map_out(&m, yk);
            memcpy(m.s[0], xs, sizeof xs);
            ert_cuda_contig_strides(yk->ndim, yk->dims, m.s[1]);
            e = ert_cuda_strided_copy_launch(x->data, pos * xs[axis], yk->data, 0, es, &m, yk->n_elems, c->stream);
            pos += yk->dims[axis];
        }
        break;
    }
    default: return ERT_E_UNSUPPORTED;
    }
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "copy kernel");
}

static ert_status run_node(cuda_ctx *c, const ert_kargs *a) {
    cudaError_t e;
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    switch (a->op) {
    case ERT_OP_CONV: return run_conv(c, a);
    case ERT_OP_GEMM: return run_gemm(c, a);
    case ERT_OP_MATMUL: return run_matmul(c, a);
    case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL:
        e = ert_cuda_pool_launch(a->op == ERT_OP_MAXPOOL, &a->params->pool, x, y, c->stream);
        break;
    case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_GLOBAL_MAXPOOL: {
        int64_t sz = 1;
        for (int i = 2; i < x->ndim; i++) sz *= x->dims[i];
        e = ert_cuda_global_pool_launch(a->op == ERT_OP_GLOBAL_MAXPOOL, x->data, y->data,
                                        x->ndim >= 2 ? x->dims[0] * x->dims[1] : 1, sz, c->stream);
        break;
    }
    case ERT_OP_BATCHNORM: {
        int64_t sz = 1;
        for (int i = 2; i < x->ndim; i++) sz *= x->dims[i];
        e = ert_cuda_batchnorm_launch(x->data, a->in[1].data, a->in[2].data, a->in[3].data, a->in[4].data, y->data,
                                      a->params->norm.epsilon, x->dims[0], x->ndim > 1 ? x->dims[1] : 1, sz,
                                      c->stream);
        break;
    }
    case ERT_OP_LAYERNORM: {
        const ert_tview *S = &a->in[1], *B = a->n_in > 2 && a->in[2].data ? &a->in[2] : NULL;
        int64_t axis = a->params->norm.axis, inner = 1, outer = 1;
        for (int i = 0; i < x->ndim; i++) {
            if (i < axis) outer *= x->dims[i];
            else inner *= x->dims[i];
        }
        e = ert_cuda_layernorm_launch(x->data, S->data, B ? B->data : NULL, y->data, a->params->norm.epsilon, outer,
                                      inner, S->n_elems == 1, B && B->n_elems == 1, c->stream);
        break;
    }
    case ERT_OP_SOFTMAX: case ERT_OP_LOGSOFTMAX: {
        int64_t axis = a->params->axis.axis, outer = 1, inner = 1;
        for (int i = 0; i < x->ndim; i++) {
            if (i < axis) outer *= x->dims[i];
            else if (i > axis) inner *= x->dims[i];
        }
        e = ert_cuda_softmax_launch(a->op == ERT_OP_LOGSOFTMAX, x->data, y->data, outer, x->ndim ? x->dims[axis] : 1,
                                    inner, c->stream);
        break;
    }
    case ERT_OP_PAD: e = ert_cuda_pad_launch(&a->params->pad, x, y, c->stream); break;
    case ERT_OP_RESIZE: e = ert_cuda_resize_launch(&a->params->resize, x, y, c->stream); break;
    case ERT_OP_REDUCE_MEAN: case ERT_OP_REDUCE_SUM: case ERT_OP_REDUCE_MAX:
        e = ert_cuda_reduce_launch(a->op, &a->params->axis, x, y, c->stream);
        break;
    case ERT_OP_RELU: case ERT_OP_LEAKY_RELU: case ERT_OP_CLIP: case ERT_OP_SIGMOID: case ERT_OP_TANH:
    case ERT_OP_HARD_SIGMOID: case ERT_OP_HARD_SWISH: case ERT_OP_SILU: case ERT_OP_GELU: case ERT_OP_ERF:
    case ERT_OP_SQRT: case ERT_OP_EXP: case ERT_OP_LOG: case ERT_OP_NEG: case ERT_OP_ABS: case ERT_OP_RECIPROCAL:
    case ERT_OP_FLOOR: case ERT_OP_CEIL:
        e = ert_cuda_unary_launch(a->op, &a->params->unary, x->data, y->data, y->n_elems, c->stream);
        break;
    case ERT_OP_ADD: case ERT_OP_SUB: case ERT_OP_MUL: case ERT_OP_DIV: case ERT_OP_POW: case ERT_OP_MIN:
    case ERT_OP_MAX: case ERT_OP_EQUAL: case ERT_OP_LESS: case ERT_OP_GREATER: case ERT_OP_WHERE:
        return run_binary(c, a);
    default: return run_copy(c, a);
    }
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "kernel launch");
}

/* ------------------------------------------------------------------ run */

static ert_status enqueue_all(cuda_ctx *c, ert_kargs *const *nodes, int n, int *failed) {
    cudaError_t e;
    for (int i = 0; i < c->n_in; i++)
        if ((e = cudaMemcpyAsync(c->in[i].dev, c->in[i].host, c->in[i].bytes, cudaMemcpyHostToDevice, c->stream)))
            return cuda_err(c, e, "input copy");
    for (int k = 0; k < n; k++) {
        ert_status st = run_node(c, nodes[k]);
        if (st != ERT_OK) {
            *failed = k;
            return st;
        }
    }
    for (int i = 0; i < c->n_out; i++)
        if ((e = cudaMemcpyAsync(c->out[i].host, c->out[i].dev, c->out[i].bytes, cudaMemcpyDeviceToHost, c->stream)))
            return cuda_err(c, e, "output copy");
    return ERT_OK;
}

/* Capture the whole run into a graph. On failure the graph is dropped and the
 * backend runs eagerly from then on (the eager run reports real errors). */
static void capture(cuda_ctx *c, ert_kargs *const *nodes, int n) {
    int failed = -1;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
    if (e == cudaSuccess) {
        ert_status st = enqueue_all(c, nodes, n, &failed);
        e = cudaStreamEndCapture(c->stream, &g);
        if (st != ERT_OK && e == cudaSuccess) e = cudaErrorStreamCaptureInvalidated;
    }
    if (e == cudaSuccess) e = cudaGraphInstantiate(&c->exec, g, 0);
    if (e != cudaSuccess) {
        if (g) cudaGraphDestroy(g);
        c->exec = NULL;
        c->graph_off = true;
        cudaGetLastError(); /* clear a non-sticky capture error */
        c->ctx->err[0] = 0;
        ert_log(c->ctx, ERT_LOG_INFO, "CUDA graph capture not possible (%s): running eagerly", cudaGetErrorString(e));
        return;
    }
    c->graph = g;
}

static ert_status cuda_run(void *bctx, ert_kargs *const *nodes, int n, int *failed) {
    cuda_ctx *c = bctx;
    cudaError_t e;
    if (!c->exec && !c->graph_off) capture(c, nodes, n);
    if (c->exec) {
        if ((e = cudaGraphLaunch(c->exec, c->stream)) != cudaSuccess) return cuda_err(c, e, "cudaGraphLaunch");
    } else {
        ert_status st = enqueue_all(c, nodes, n, failed);
        if (st != ERT_OK) {
            cudaStreamSynchronize(c->stream);
            return st;
        }
    }
    if ((e = cudaStreamSynchronize(c->stream)) != cudaSuccess) return cuda_err(c, e, "run");
    return ERT_OK;
}

static bool cuda_supports(ert_op op, ert_dtype dt) {
    switch (op) {
    case ERT_OP_IDENTITY: case ERT_OP_DROPOUT: case ERT_OP_FLATTEN: case ERT_OP_RESHAPE: case ERT_OP_SQUEEZE:
    case ERT_OP_UNSQUEEZE: case ERT_OP_TRANSPOSE: case ERT_OP_EXPAND: case ERT_OP_SLICE: case ERT_OP_CONCAT:
    case ERT_OP_SPLIT:
        return ert_dtype_size(dt) == 1 || ert_dtype_size(dt) == 2 || ert_dtype_size(dt) == 4 ||
               ert_dtype_size(dt) == 8;
    case ERT_OP_WHERE: return dt == ERT_DTYPE_BOOL;
    case ERT_OP_CONV: case ERT_OP_GEMM: case ERT_OP_MATMUL: case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL:
    case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_GLOBAL_MAXPOOL: case ERT_OP_BATCHNORM: case ERT_OP_LAYERNORM:
    case ERT_OP_SOFTMAX: case ERT_OP_LOGSOFTMAX: case ERT_OP_PAD: case ERT_OP_RESIZE:
    case ERT_OP_REDUCE_MEAN: case ERT_OP_REDUCE_SUM: case ERT_OP_REDUCE_MAX:
    case ERT_OP_RELU: case ERT_OP_LEAKY_RELU: case ERT_OP_CLIP: case ERT_OP_SIGMOID: case ERT_OP_TANH:
    case ERT_OP_HARD_SIGMOID: case ERT_OP_HARD_SWISH: case ERT_OP_SILU: case ERT_OP_GELU: case ERT_OP_ERF:
    case ERT_OP_SQRT: case ERT_OP_EXP: case ERT_OP_LOG: case ERT_OP_NEG: case ERT_OP_ABS: case ERT_OP_RECIPROCAL:
    case ERT_OP_FLOOR: case ERT_OP_CEIL:
    case ERT_OP_ADD: case ERT_OP_SUB: case ERT_OP_MUL: case ERT_OP_DIV: case ERT_OP_POW: case ERT_OP_MIN:
    case ERT_OP_MAX: case ERT_OP_EQUAL: case ERT_OP_LESS: case ERT_OP_GREATER:
        return dt == ERT_DTYPE_F32;
    default: return false; /* TODO(#4): Gather, Cast, Where on non-f32, ConvTranspose, f16/bf16 */
    }
}

const ert_backend ert_cuda_backend = {
    .name = "cuda",
    .device = ERT_DEVICE_CUDA,
    .weights_in_arena = true,
    .init = cuda_init,
    .release = cuda_release,
    .node_workspace = cuda_node_workspace,
    .arena_alloc = cuda_arena_alloc,
    .arena_free = cuda_arena_free,
    .io_host = cuda_io_host,
    .io_host_free = cuda_io_host_free,
    .upload = cuda_upload,
    .bind_node = cuda_bind_node,
    .release_node = cuda_release_node,
    .bind_io = cuda_bind_io,
    .run = cuda_run,
    .supports = cuda_supports,
};

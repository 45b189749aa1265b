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
 * Data f32, f16 or bf16 (a session's `precision`: session.c converts the
 * weights and plans the activations in it; graph inputs/outputs stay f32 and
 * Casts at the edges run inside the graph). f32 convolutions and GEMMs are
 * kept off TF32 (FMA math in cuDNN, COMPUTE_32F under the default math mode
 * in cuBLAS), so results match the CPU reference closely; f16/bf16 use the
 * tensor cores with f32 accumulation. Convolutions: cudnnFind picks the
 * algorithm once per shape at create (cached; f16/bf16 without groups take
 * IMPLICIT_PRECOMP_GEMM, the tensor-core path, when it runs). f32: conv + bias (+ residual) + ReLU/identity run as one
 * cudnnConvolutionBiasActivationForward where cuDNN accepts it (tried once at
 * create). f16/bf16: channels-last convs whose channel counts are multiples
 * of 8 run with their bias, residual and ReLU/Clip as one cuDNN operation
 * graph (runtime fusion) where that measures faster than the conv followed by
 * our epilogue kernel (fuse_find: timed in CUDA-graph replay, each plan
 * checked numerically first); the rest run conv + one epilogue kernel
 * (cuDNN's legacy fused call runs on its slow FMA kernel there), and the filter is rewritten at create
 * as (K, R, S, C) when cuDNN measures that faster (it saves a filter
 * transpose per call). Activations: f16/bf16 sessions keep conv activations
 * channels-last (session.c step 4c marks those convs and pools nhwc; their
 * tensors carry dims (N, H, W, C)) when conv_time's measurements say the
 * graph's convs run faster that way, so cuDNN's tensor-core kernels read and
 * write them directly instead of transposing x and y around each conv; the
 * conv epilogue, pools and global pools have channels-last variants, and a
 * channels-last grouped conv runs on the direct kernel when that measures
 * faster than cuDNN (MobileNetV2's depthwise convs: 3.8x). With
 * ERT_SESSION_GEMM_1X1, channels-last f16/bf16 1x1 stride-1 ungrouped convs
 * run as one cuBLASLt GEMM (bias + ReLU fused in its epilogue, the residual
 * as its C matrix; algorithm timed among cuBLASLt's heuristic candidates at
 * create, workspace planned like cuDNN's) and conv_time reports its time.
 */
#include "cuda_internal.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#ifdef ERT_HAVE_CUDNN
#include <cudnn.h>
#endif
#include "cuda_libs.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CONV_WS_MAX ((size_t)64 << 20) /* largest cuDNN workspace a conv may plan */
#define BLAS_WS ((size_t)4 << 20)      /* cuBLAS workspace per GEMM node (transient) */
#define LT_WS_MAX ((size_t)16 << 20)   /* largest cuBLASLt workspace a 1x1 conv GEMM may plan */
#define LT_ALGOS 8                     /* cuBLASLt heuristic candidates timed per 1x1 conv shape */

/* cudnnFind's answer for one conv shape, measured once per session (shapes
 * repeat: ResNet-50 has 53 convs of 20 shapes). */
typedef struct algo_entry {
    int key[20];
    int algo;
    size_t ws;
    float ms; /* cudnnFind's time of the pick */
    bool ok;  /* false: no usable algorithm, use the direct kernel */
    float direct_ms; /* channels-last grouped convs: the direct kernel's time (< 0: not measured) */
    int n_alt;       /* the other usable algorithms, fastest first (bind_node's fallbacks) */
    int alt[8];
    size_t alt_ws[8];
    float alt_ms[8]; /* cudnnFind's times of the others */
} algo_entry;

#ifdef ERT_HAVE_CUDNN
/* One conv + epilogue cuDNN graph per shape and epilogue (fuse_find). */
#define FUSE_KEY 26
typedef struct fuse_entry {
    int key[FUSE_KEY];
    cudnnBackendDescriptor_t plan; /* the fastest engine config's plan; NULL: none runs */
    cudnnBackendDescriptor_t keep[32]; /* what the plan refers to */
    int n_keep;
    size_t ws;
    float ms_fused, ms_unfused; /* per call, one timing loop (< 0: not measured) */
    bool ok;
} fuse_entry;
static void fuse_entry_clear(fuse_entry *f);
#endif

/* cuBLASLt's pick for one channels-last 1x1 conv GEMM shape (gemm_find). */
typedef struct lt_entry {
    int key[8]; /* M, C, K, dtype, epilogue, residual */
    cublasLtMatmulAlgo_t algo;
    size_t ws;
    float ms;
    bool ok;
} lt_entry;

typedef struct cuda_ctx {
    ert_context *ctx;
    int device, cc_major, cc_minor;
    bool integrated, concurrent_managed, pageable_access;
    ert_placement placement; /* resolved: never AUTO */
    cudaStream_t stream;
    cublasHandle_t blas;
    cublasLtHandle_t lt; /* channels-last 1x1 convs as GEMMs with a fused epilogue */
    lt_entry *lts;       /* their algorithm cache (create time only) */
    int n_lts, cap_lts;
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
    algo_entry *algos; /* conv algorithm cache (create time only) */
    int n_algos, cap_algos;
    void **krsc; /* f16/bf16 filters already rewritten in place as (K, R, S, C) */
    int n_krsc, cap_krsc;
    bool trainer; /* ERT_SESSION_TRAINER_: filters are activations (cast from master weights each step) */
    bool gemm1x1; /* ERT_SESSION_GEMM_1X1: channels-last 1x1 convs as cuBLASLt GEMMs */
    bool conv_graph_off, conv_graph_force; /* ERT_SESSION_NO_CONV_GRAPH / ERT_SESSION_CONV_GRAPH */
#ifdef ERT_HAVE_CUDNN
    fuse_entry *fuses; /* conv + epilogue graph plans (fuse_find), freed at release */
    int n_fuses, cap_fuses;
#endif
    ert_kargs **hosts; /* nodes bound to a CPU kernel (bind_host_node); their state is an ert_cuda_host_node */
    int n_hosts, cap_hosts;
} cuda_ctx;

/* Per-node state (bind_node). */
typedef struct conv_state {
    bool use_dnn;
    /* channels-last f16/bf16 1x1 stride-1 ungrouped conv as one cuBLASLt GEMM:
     * y[N*H*W, K] = x[N*H*W, C] W[K, C]^T (+ bias, + residual as C with
     * beta = 1, ReLU in its epilogue); other activations: the epilogue kernel
     * after it (gemm_post). */
    bool gemm, gemm_post;
    cublasLtMatmulDesc_t md;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t lalgo;
    size_t lws;
#ifdef ERT_HAVE_CUDNN
    bool fused; /* one cudnnConvolutionBiasActivationForward does bias, residual and activation */
    bool w_krsc; /* the filter is stored (K, R, S, C) (cuDNN "NHWC" filter format) */
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnActivationDescriptor_t ad;
    cudnnConvolutionFwdAlgo_t algo;
    size_t ws_bytes;
    /* conv + epilogue as one cuDNN graph: the cached plan (not owned) and this
     * node's variant pack (bind_node) */
    cudnnBackendDescriptor_t plan, vpack;
    int n_alt; /* find_algo's other algorithms, tried when cuDNN refuses `algo` on the real buffers */
    int alt[8];
    size_t alt_ws[8];
#endif
} conv_state;



static ert_status cuda_err(cuda_ctx *c, cudaError_t e, const char *what) {
    return ert_set_error(c->ctx, ERT_E_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* An allocation that failed: out of memory is ERT_E_NOMEM with the bytes
 * asked and the device's free memory (the error is not sticky: cleared so
 * the next call on this thread does not see it); anything else ERT_E_CUDA. */
static ert_status alloc_err(cuda_ctx *c, cudaError_t e, const char *what, size_t bytes) {
    if (e != cudaErrorMemoryAllocation) return cuda_err(c, e, what);
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
    return ert_set_error(c->ctx, ERT_E_NOMEM, "%s: out of memory for %zu bytes (device: %zu of %zu bytes free)", what,
                         bytes, free_b, total_b);
}

static ert_status blas_err(cuda_ctx *c, cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_ALLOC_FAILED) /* e.g. cublasCreate when the GPU is full */
        return ert_set_error(c->ctx, ERT_E_NOMEM, "%s: cuBLAS could not allocate its resources (GPU out of memory)", what);
    return ert_set_error(c->ctx, ERT_E_CUDA, "%s: cuBLAS status %d", what, (int)s);
}

#ifdef ERT_HAVE_CUDNN
static ert_status dnn_err(cuda_ctx *c, cudnnStatus_t s, const char *what) {
    return ert_set_error(c->ctx, ERT_E_CUDA, "%s: %s", what, cudnnGetErrorString(s));
}
#endif

static ert_cuda_env env_of(cuda_ctx *c) {
    ert_cuda_env e = {.ctx = c->ctx, .stream = c->stream, .blas = c->blas, .dnn = NULL, .trainer = c->trainer};
#ifdef ERT_HAVE_CUDNN
    e.dnn = c->dnn;
#endif
    return e;
}

/* ------------------------------------------------------------------ init */

static void cuda_release(void *bctx) {
    cuda_ctx *c = bctx;
    if (!c) return;
    if (c->exec) cudaGraphExecDestroy(c->exec);
    if (c->graph) cudaGraphDestroy(c->graph);
#ifdef ERT_HAVE_CUDNN
    for (int i = 0; i < c->n_fuses; i++) fuse_entry_clear(&c->fuses[i]);
    free(c->fuses);
    if (c->dnn) cudnnDestroy(c->dnn);
#endif
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c->in);
    free(c->out);
    free(c->algos);
    free(c->lts);
    free(c->krsc);
    free(c->hosts);
    free(c);
}

static ert_status cuda_init(ert_context *ctx, const ert_session_options *o, void **bctx) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        char why_buf[256];
        const char *why = ert_cuda_no_device_reason(e, why_buf, sizeof why_buf);
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
    c->trainer = (o->flags & ERT_SESSION_TRAINER_) != 0;
    c->gemm1x1 = (o->flags & ERT_SESSION_GEMM_1X1) != 0;
    c->conv_graph_off = (o->flags & ERT_SESSION_NO_CONV_GRAPH) != 0;
    c->conv_graph_force = !c->conv_graph_off && (o->flags & ERT_SESSION_CONV_GRAPH) != 0;
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
    /* cuBLAS/cuDNN when they are not linked in (cuda_libs.h): now, not at start-up */
    if ((st = ert_cuda_libs_load(ctx)) != ERT_OK) {
        if (o->device == ERT_DEVICE_AUTO) ert_log(ctx, ERT_LOG_INFO, "%s: using the CPU", ert_last_error(ctx));
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
    if ((bs = cublasLtCreate(&c->lt)) != CUBLAS_STATUS_SUCCESS) {
        c->lt = NULL;
        st = blas_err(c, bs, "cublasLtCreate");
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
            return alloc_err(c, e, "cudaMallocManaged(arena)", bytes);
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
            return alloc_err(c, e, "cudaHostAlloc(arena, mapped)", bytes);
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
        if ((e = cudaMalloc(&p, bytes)) != cudaSuccess) return alloc_err(c, e, "cudaMalloc(arena)", bytes);
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
        if (e != cudaSuccess) return alloc_err(c, e, "cudaHostAlloc(io mirror)", bytes);
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

static ert_status cuda_download(void *bctx, void *dst, const void *src, size_t n) {
    cuda_ctx *c = bctx;
    if (!n) return ERT_OK;
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e == cudaSuccess) e = cudaMemcpy(dst, src, n, cudaMemcpyDefault);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "cudaMemcpy(download)");
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
static bool dnn_can(const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    if (p->nsp < 1 || p->nsp > 2 || a->in[0].ndim != p->nsp + 2) return false;
    if (a->in[0].dtype != a->in[1].dtype || a->in[0].dtype != a->out[0].dtype) return false;
    for (int i = 0; i < p->nsp; i++)
        if (p->pad_begin[i] != p->pad_end[i]) return false;
    for (int i = 0; i < a->in[0].ndim; i++)
        if (a->in[0].dims[i] > INT32_MAX || a->out[0].dims[i] > INT32_MAX) return false;
    return true;
}

/* f32 data stays f32 (FMA math, no TF32: the CPU is the oracle); f16 and
 * bf16 data use the tensor cores with f32 accumulation. */
static cudnnDataType_t dnn_type(ert_dtype dt) {
    return dt == ERT_DTYPE_F16 ? CUDNN_DATA_HALF : dt == ERT_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

/* The fastest algorithm cudnnFind measures for this shape whose workspace
 * fits CONV_WS_MAX (f32: FMA math only), cached in c->algos. */
static ert_status find_algo(cuda_ctx *c, const conv_state *s, const int *key, bool f32, const algo_entry **out) {
    for (int i = 0; i < c->n_algos; i++)
        if (!memcmp(c->algos[i].key, key, sizeof c->algos[i].key)) {
            *out = &c->algos[i];
            return ERT_OK;
        }
    if (c->n_algos == c->cap_algos) {
        int cap = c->cap_algos ? 2 * c->cap_algos : 32;
        algo_entry *n = realloc(c->algos, (size_t)cap * sizeof *n);
        if (!n) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
        c->algos = n;
        c->cap_algos = cap;
    }
    algo_entry *e = &c->algos[c->n_algos];
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, sizeof e->key);
    e->direct_ms = -1;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    cudnnStatus_t ds = cudnnFindConvolutionForwardAlgorithm(c->dnn, s->xd, s->wd, s->cd, s->yd,
                                                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf);
    if (ds != CUDNN_STATUS_SUCCESS) /* measuring failed (memory?): the heuristics' order */
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
            (int)perf[i].algo == e->algo)
            continue;
        bool dup = false;
        for (int k = 0; k < e->n_alt; k++) dup |= e->alt[k] == (int)perf[i].algo;
        if (dup) continue;
        e->alt[e->n_alt] = (int)perf[i].algo;
        e->alt_ms[e->n_alt] = perf[i].time;
        e->alt_ws[e->n_alt++] = perf[i].memory;
    }
    c->n_algos++;
    *out = e;
    return ERT_OK;
}


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
 * slower end to end on MobileNetV2, see edgert.h). */
static bool gemm_can(const cuda_ctx *c, const ert_kargs *a) {
#ifdef ERT_CUDA_NO_GEMM1X1 /* build-time switch for measurements: cuDNN for every conv */
    (void)c, (void)a;
    return false;
#else
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    if (!c->gemm1x1 || !c->lt || c->trainer || !p->nhwc || p->nsp != 2 || p->group != 1) return false;
    if (x->dtype != ERT_DTYPE_F16 && x->dtype != ERT_DTYPE_BF16) return false;
    if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 || w->dims[2] != 1 || w->dims[3] != 1) return false;
    for (int i = 0; i < 2; i++)
        if (p->stride[i] != 1 || p->pad_begin[i] != 0 || p->pad_end[i] != 0) return false;
    for (int i = 0; i < 3; i++)
        if (y->dims[i] != x->dims[i]) return false;
    if (y->dims[3] != w->dims[0] || x->dims[3] != w->dims[1]) return false;
    int64_t M = x->dims[0] * x->dims[1] * x->dims[2];
    return M > 0 && M <= INT32_MAX && w->dims[0] > 0 && w->dims[0] <= INT32_MAX && w->dims[1] > 0 &&
           w->dims[1] <= INT32_MAX;
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

/* Column-major, as cuBLASLt takes it: y^T [K, M] = (W as [C, K])^T x^T [C, M]. */
static ert_status gemm_descs(cuda_ctx *c, const ert_kargs *a, conv_state *s, int *key) {
    const ert_tview *x = &a->in[0], *w = &a->in[1];
    uint64_t M = (uint64_t)(x->dims[0] * x->dims[1] * x->dims[2]), C = (uint64_t)w->dims[1], K = (uint64_t)w->dims[0];
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
static cublasStatus_t gemm_call(cuda_ctx *c, const conv_state *s, const cublasLtMatmulAlgo_t *algo, const void *w,
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
    size_t wsmax = LT_WS_MAX;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsmax, sizeof wsmax) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoGetHeuristic(c->lt, s->md, s->la, s->lb, s->lc, s->lc, pref, LT_ALGOS, r, &got) !=
            CUBLAS_STATUS_SUCCESS)
        got = 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    size_t M = (size_t)key[0], C = (size_t)key[1], K = (size_t)key[2], es = 2;
    void *bx = NULL, *bw = NULL, *by = NULL, *bb = NULL, *br = NULL, *bws = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    const int reps = 20;
    if (got > 0 && cudaMalloc(&bx, M * C * es) == cudaSuccess && cudaMalloc(&bw, K * C * es) == cudaSuccess &&
        cudaMalloc(&by, M * K * es) == cudaSuccess && cudaMalloc(&bb, K * es) == cudaSuccess &&
        (!key[5] || cudaMalloc(&br, M * K * es) == cudaSuccess) && cudaMalloc(&bws, LT_WS_MAX) == cudaSuccess &&
        cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
        cudaMemsetAsync(bx, 0, M * C * es, c->stream) == cudaSuccess &&
        cudaMemsetAsync(bw, 0, K * C * es, c->stream) == cudaSuccess &&
        cudaMemsetAsync(bb, 0, K * es, c->stream) == cudaSuccess &&
        (!br || cudaMemsetAsync(br, 0, M * K * es, c->stream) == cudaSuccess) &&
        cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bb, sizeof bb) ==
            CUBLAS_STATUS_SUCCESS) {
        float ts[LT_ALGOS], best = -1;
        for (int i = 0; i < got; i++) {
            ts[i] = -1;
            if (r[i].state != CUBLAS_STATUS_SUCCESS || r[i].workspaceSize > LT_WS_MAX) continue;
            cublasStatus_t bs = gemm_call(c, s, &r[i].algo, bw, bx, br, by, bws, r[i].workspaceSize);
            if (bs != CUBLAS_STATUS_SUCCESS || cudaEventRecord(e0, c->stream) != cudaSuccess) continue;
            for (int k = 0; k < reps && bs == CUBLAS_STATUS_SUCCESS; k++)
                bs = gemm_call(c, s, &r[i].algo, bw, bx, br, by, bws, r[i].workspaceSize);
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
            }
        }
    }
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
    c->n_lts++;
    *out = e;
    return ERT_OK;
}

/* The GEMM state for a conv gemm_can accepts; NULL (and ERT_OK) when
 * cuBLASLt has nothing that runs or its pick needs more than ws_limit. */
static ert_status gemm_describe(cuda_ctx *c, const ert_kargs *a, size_t ws_limit, conv_state **out, float *ms) {
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
    s->gemm = true;
    int key[8];
    const lt_entry *e = NULL;
    ert_status st = gemm_descs(c, a, s, key);
    if (st == ERT_OK) st = gemm_find(c, s, key, &e);
    if (st != ERT_OK || !e->ok || e->ws > ws_limit) {
        conv_state_free(s);
        return st;
    }
    s->lalgo = e->algo;
    s->lws = e->ws;
    *ms = e->ms;
    *out = s;
    return ERT_OK;
}

/* bind_node: point the descriptor at the real bias and run the GEMM once on
 * the real buffers (values do not matter yet); false: cuBLASLt refused them. */
static bool gemm_bind(cuda_ctx *c, const ert_kargs *a, conv_state *s) {
    const void *bias = gemm_bias(a) ? a->in[2].data : NULL;
    if (gemm_bias(a) && (!bias || cublasLtMatmulDescSetAttribute(s->md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                                 sizeof bias) != CUBLAS_STATUS_SUCCESS))
        return false;
    cublasStatus_t bs = gemm_call(c, s, &s->lalgo, a->in[1].data, a->in[0].data, gemm_res(a) ? a->in[3].data : NULL,
                                  a->out[0].data, a->workspace, s->lws);
    cudaError_t e = cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    return bs == CUBLAS_STATUS_SUCCESS && e == cudaSuccess;
}

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
#define FUSE_KEEP 32      /* descriptors a plan keeps alive */
#define FUSE_REPS 20

/* tensor ids of the graph; LO/HI are by-value f32 scalars (Clip bounds) */
enum { UID_X = 1, UID_W, UID_Y, UID_B, UID_R, UID_LO, UID_HI, UID_T0 };

static bool fuse_can(const cuda_ctx *c, const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    if (c->conv_graph_off || (c->trainer && !p->const_w) || !p->nhwc || p->nsp != 2 || p->group != 1) return false;
    if (a->in[0].dtype != ERT_DTYPE_F16 && a->in[0].dtype != ERT_DTYPE_BF16) return false;
    /* channel counts the tensor cores take whole: cuDNN 9.14 (H200) ran a
     * bf16 graph with C = 3 and returned wrong values (test_cuda) */
    if (a->in[0].dims[3] % 8 || a->out[0].dims[3] % 8) return false;
    bool bias = p->has_bias && a->n_in > 2, res = p->has_residual && a->n_in > 3;
    /* Clip stays out of the graph: its MAX/MIN pointwise steps return the
     * bound for a NaN input on cuDNN 9.14 (H100, test_cuda's NaN cases),
     * whatever NAN_PROPAGATION says, and Clip(NaN) must be NaN; RELU_FWD
     * keeps NaN. Clip convs take cuDNN's conv + our epilogue kernel.
     * TODO(#12): Clip(0, hi) as relu(x) - relu(relu(x) - hi) in the graph. */
    bool act = p->act.kind == ERT_ACT_RELU;
    if (p->act.kind != ERT_ACT_NONE && !act) return false;
    return bias || res || act;
}

static void fuse_entry_clear(fuse_entry *f) {
    for (int i = f->n_keep - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(f->keep[i]);
    if (f->plan) cudnnBackendDestroyDescriptor(f->plan);
    f->n_keep = 0;
    f->plan = NULL;
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
    bool by_value = uid == UID_LO || uid == UID_HI;
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
    if (mode != CUDNN_POINTWISE_ADD) {
        /* ReLU/MAX/MIN keep NaN (Relu(NaN) = NaN as in PyTorch): cuDNN 8.x
         * defaults to NOT_PROPAGATE; 9.x deprecates the attribute (NaN kept),
         * so a refusal is ignored rather than losing the fused graph.
         * tests/test_cuda.c checks NaN through every fused path. */
        cudnnNanPropagation_t nan = CUDNN_PROPAGATE_NAN;
        (void)cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_NAN_PROPAGATION, CUDNN_TYPE_NAN_PROPOGATION, 1, &nan);
    }
    /* plain ReLU: cuDNN 9.14 has no engine for conv + RELU_FWD with an upper
     * clip, so Clip is ReLU/MAX then MIN with by-value bounds (fuse_graph) */
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
    cudnnBackendDescriptor_t ops[6];
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
     * + bias, + residual, then ReLU, or Clip as ReLU (lower bound 0) or
     * MAX(lo), then MIN(hi) */
    bool clip = p->act.kind == ERT_ACT_CLIP, clip0 = clip && p->act.alpha == 0.0f;
    bool step_on[5] = {bias, res, act && (!clip || clip0), clip && !clip0, clip};
    int steps = 0;
    for (int k = 0; k < 5; k++) steps += step_on[k];
    for (int k = 0; k < 5; k++) {
        if (!step_on[k]) continue;
        cudnnBackendDescriptor_t out = --steps == 0 ? ty : fuse_tensor(f, uid++, f32, yd, ys, true), in2 = NULL;
        if (!out) return NULL;
        static const int64_t in2_uid[5] = {UID_B, UID_R, 0, UID_LO, UID_HI};
        static const cudnnPointwiseMode_t mode_of[5] = {CUDNN_POINTWISE_ADD, CUDNN_POINTWISE_ADD,
                                                        CUDNN_POINTWISE_RELU_FWD, CUDNN_POINTWISE_MAX,
                                                        CUDNN_POINTWISE_MIN};
        if (k == 0) in2 = fuse_tensor(f, UID_B, dt, bd, bs, false);
        else if (k == 1) in2 = fuse_tensor(f, UID_R, dt, yd, ys, false);
        else if (k > 2) in2 = fuse_tensor(f, in2_uid[k], f32, NULL, NULL, false);
        if (k != 2 && !in2) return NULL;
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
static cudnnBackendDescriptor_t fuse_vpack(const ert_kargs *a, void *x, void *w, void *y, void *b, void *r, void *ws) {
    const ert_act_params *act = &a->params->conv.act;
    int64_t uids[7] = {UID_X, UID_W, UID_Y};
    void *ptrs[7] = {x, w, y};
    int n = 3;
    if (b) uids[n] = UID_B, ptrs[n++] = b;
    if (r) uids[n] = UID_R, ptrs[n++] = r;
    if (act->kind == ERT_ACT_CLIP) { /* by value: read at enqueue (and captured with the graph) */
        if (act->alpha != 0.0f) uids[n] = UID_LO, ptrs[n++] = (void *)&act->alpha;
        uids[n] = UID_HI, ptrs[n++] = (void *)&act->beta;
    }
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
        return ert_cuda_conv_direct_launch(p, &xv, t->buf[1], NULL, NULL, &yv, c->stream);
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
    return best;
}

/* The conv + epilogue (plan NULL) or the fused plan on scratch buffers. */
static float fuse_time(cuda_ctx *c, const ert_kargs *a, const conv_state *s, cudnnBackendDescriptor_t plan,
                       void *const *buf, void *ws, size_t ws_bytes) {
    const ert_conv_params *p = &a->params->conv;
    bool bias = p->has_bias && a->n_in > 2, res = p->has_residual && a->n_in > 3;
    timed_call t = {.c = c, .a = a, .s = s, .plan = plan, .buf = buf, .ws = ws, .ws_bytes = ws_bytes};
    if (plan && !(t.vp = fuse_vpack(a, buf[0], buf[1], buf[2], bias ? buf[3] : NULL, res ? buf[4] : NULL, ws)))
        return -1;
    float ms = graph_time(&t);
    if (t.vp) cudnnBackendDestroyDescriptor(t.vp);
    return ms;
}

/* The direct kernel's time on zeroed scratch buffers (create time only), ms;
 * < 0 if it could not be measured. Channels-last depthwise convs at batch 1
 * are memory-bound, and one thread per output reading adjacent channels is
 * as fast as it gets there; it also fuses the epilogue. */
static float time_direct(cuda_ctx *c, const ert_kargs *a) {
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
 * (xorshift, seeded per call: no global state). Create time only. */
static cudaError_t fill_random(cuda_ctx *c, void *dev, size_t n, bool bf16, float scale, uint64_t seed) {
    uint16_t *h = malloc(n * sizeof *h);
    if (!h) return cudaErrorMemoryAllocation;
    uint64_t r = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        float v = scale * ((float)(r >> 40) / (float)(1u << 24) * 2.0f - 1.0f);
        h[i] = bf16 ? ert_f32_to_bf16(v) : ert_f32_to_f16(v);
    }
    cudaError_t e = cudaMemcpy(dev, h, n * sizeof *h, cudaMemcpyHostToDevice);
    free(h);
    return e;
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
    cudnnBackendDescriptor_t vp = fuse_vpack(a, buf[0], buf[1], buf[2], bias ? buf[3] : NULL, res ? buf[4] : NULL, ws);
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
 * run_conv runs them; when fuse_can, up to FUSE_CANDIDATES engine configs of
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
    *out = f;

    bool fuse = fuse_can(c, a);
    cudnnBackendDescriptor_t g = fuse ? fuse_graph(c, f, a, s->w_krsc) : NULL, heur = NULL;
    cudnnBackendDescriptor_t cfg[FUSE_CANDIDATES * 2] = {0}, plans[FUSE_CANDIDATES] = {0};
    int64_t n_cfg = 0, pws[FUSE_CANDIDATES] = {0};
    int n_plans = 0, pcfg[FUSE_CANDIDATES] = {0};
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
        for (int i = 0; i < 6 && ok; i++) {
            cudaError_t e = cudaMalloc(&buf[i], sz[i] ? sz[i] : 256);
            if (e == cudaSuccess) e = cudaMemsetAsync(buf[i], 0, sz[i] ? sz[i] : 256, c->stream);
            if (e != cudaSuccess) {
                buf[i] = e == cudaErrorMemoryAllocation ? NULL : buf[i];
                st = alloc_err(c, e, "scratch to time a convolution", sz[i]);
                ok = false;
            }
        }
        int best = -1;
        float pt[FUSE_CANDIDATES];
        for (int i = 0; i < n_plans && ok; i++) pt[i] = fuse_time(c, a, s, plans[i], buf, buf[5], wsb);
        if (ok) f->ms_unfused = fuse_time(c, a, s, NULL, buf, buf[5], wsb);
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
        for (int i = 0; i < 6; i++)
            if (buf[i]) cudaFree(buf[i]);
        cudaGetLastError();
        if (best >= 0 && f->n_keep < FUSE_KEEP) {
            f->plan = plans[best];
            plans[best] = NULL;
            f->keep[f->n_keep++] = cfg[pcfg[best]]; /* the plan may refer to its config */
            cfg[pcfg[best]] = NULL;
            f->ws = (size_t)pws[best];
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
        fuse_entry_clear(f);
    } else {
        ert_log(c->ctx, ERT_LOG_DEBUG,
                "conv '%s': fused cuDNN graph %.4f ms vs conv + epilogue %.4f ms (plan %d of %d, heuristics order)",
                a->name ? a->name : "?", f->ms_fused, f->ms_unfused, best_i + 1, n_plans);
    }
    if (st != ERT_OK) c->n_fuses--; /* measure again next time */
    return st;
}
#undef BSET

/* Describe the conv and pick the algorithm (find_algo); NULL state: cuDNN
 * cannot do it, its algorithm needs more workspace than ws_limit, or (a
 * channels-last grouped conv) the direct kernel measured faster. *ms: the
 * measured time of what will run (< 0: unknown), for session step 4c.
 * gemm_ok: a 1x1 conv gemm_can accepts runs as a cuBLASLt GEMM when it can. */
static ert_status conv_describe(cuda_ctx *c, const ert_kargs *a, size_t ws_limit, bool gemm_ok, conv_state **out,
                                float *ms) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
    *out = NULL;
    *ms = -1;
    if (gemm_ok && gemm_can(c, a)) {
        ert_status st = gemm_describe(c, a, ws_limit, out, ms);
        if (st != ERT_OK || *out) return st;
    }
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
        conv_state_free(s);
        return dnn_err(c, ds, "cuDNN conv descriptors");
    }
    int on, oc, oh, ow;
    if (cudnnGetConvolution2dForwardOutputDim(s->cd, s->xd, s->wd, &on, &oc, &oh, &ow) != CUDNN_STATUS_SUCCESS ||
        on != (int)y->dims[0] || oc != yc || oh != yh || ow != yw) {
        conv_state_free(s); /* cuDNN sees another shape (ceil effects): direct kernel */
        return ERT_OK;
    }
    int key[20] = {(int)x->dims[0], xc, xh, xw, (int)w->dims[0], (int)w->dims[1], kh, kw,
                   ph, pw, sh, sw, dh, dw, (int)p->group, (int)x->dtype, 0, p->nhwc, 0, 0};
    const algo_entry *e = NULL;
    ert_status st = find_algo(c, s, key, f32, &e);
    if (st != ERT_OK) {
        conv_state_free(s);
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
            st = find_algo(c, s, key, f32, &e2);
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
            conv_state_free(s);
            return st;
        }
    }
#endif
    if (p->nhwc && p->group > 1 && e->direct_ms < 0) {
        algo_entry *m = (algo_entry *)e; /* the cache owns it */
        m->direct_ms = time_direct(c, a);
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
        conv_state_free(s);
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
    st = fuse_find(c, a, s, key, &f);
    if (st != ERT_OK) {
        conv_state_free(s);
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
        conv_state_free(s);
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
#endif

/* ------------------------------------------------------------------ node hooks */

static bool is_blas_op(ert_op op) { return op == ERT_OP_GEMM || op == ERT_OP_MATMUL; }
static bool is_float(ert_dtype dt) { return dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16; }

static ert_status cuda_node_workspace(void *bctx, const ert_kargs *a, size_t *bytes) {
    cuda_ctx *c = bctx;
    (void)c;
    *bytes = 0;
    if (ert_cuda_train_op(a->op) || a->op == ERT_OP_CONV_TRANSPOSE) {
        ert_cuda_env env = env_of(c);
        return ert_cuda_train_workspace(&env, a, bytes);
    }
    if (is_blas_op(a->op)) {
        *bytes = BLAS_WS;
        return ERT_OK;
    }
#ifdef ERT_HAVE_CUDNN
    if (a->op == ERT_OP_CONV && dnn_can(a)) {
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
        conv_state_free(s);
    }
#endif
    return ERT_OK;
}

/* Session step 4c weighs NCHW against NHWC with these. */
static ert_status cuda_conv_time(void *bctx, const ert_kargs *a, float *ms) {
    *ms = -1;
#ifdef ERT_HAVE_CUDNN
    cuda_ctx *c = bctx;
    if (a->op != ERT_OP_CONV || !dnn_can(a)) return ERT_OK;
    conv_state *s = NULL;
    ert_status st = conv_describe(c, a, CONV_WS_MAX, true, &s, ms);
    conv_state_free(s);
    return st;
#else
    (void)bctx, (void)a;
    return ERT_OK;
#endif
}

static ert_status cuda_bind_node(void *bctx, ert_kargs *a) {
    cuda_ctx *c = bctx;
    a->state = NULL;
    if (ert_cuda_train_op(a->op) || a->op == ERT_OP_CONV_TRANSPOSE) {
        ert_cuda_env env = env_of(c);
        return ert_cuda_train_bind(&env, a);
    }
    /* supports() saw input 0's dtype only */
    if (a->op == ERT_OP_WHERE && (!is_float(a->in[1].dtype) || a->in[2].dtype != a->in[1].dtype))
        return ert_set_error(c->ctx, ERT_E_UNSUPPORTED, "node '%s' (Where): the cuda backend does not implement it yet for %s data",
                             a->name ? a->name : "?", ert_dtype_name(a->in[1].dtype));
    /* the CUDA resize kernel implements nearest and linear without tf_crop_and_resize; cubic and
     * tf_crop_and_resize run on the CPU backend only */
    if (a->op == ERT_OP_RESIZE && a->params->resize.mode != 0 && a->params->resize.mode != 1)
        return ert_set_error(c->ctx, ERT_E_UNSUPPORTED, "node '%s' (Resize): the cuda backend does not implement mode \"cubic\" yet",
                             a->name ? a->name : "?");
    if (a->op == ERT_OP_RESIZE && a->params->resize.coord == 4)
        return ert_set_error(c->ctx, ERT_E_UNSUPPORTED,
                             "node '%s' (Resize): the cuda backend does not implement coordinate_transformation_mode "
                             "\"tf_crop_and_resize\" yet", a->name ? a->name : "?");
    /* the CUDA norm kernels implement inference only: no batch statistics,
     * no LayerNorm Mean/InvStdDev outputs (the CPU kernels do) */
    if ((a->op == ERT_OP_BATCHNORM && a->params->norm.training) || (a->op == ERT_OP_LAYERNORM && a->n_out > 1))
        return ert_set_error(c->ctx, ERT_E_UNSUPPORTED, "node '%s': the cuda backend does not implement %s yet",
                             a->name ? a->name : "?",
                             a->op == ERT_OP_BATCHNORM ? "BatchNormalization training_mode=1"
                                                       : "LayerNormalization Mean/InvStdDev outputs");
    /* every float operand of a node has one dtype (a reduced-precision
     * session converts them all); a model mixing them needs a Cast */
    for (int k = 0; k < a->n_in + a->n_out && a->op != ERT_OP_CAST; k++) {
        const ert_tview *v = k < a->n_in ? &a->in[k] : &a->out[k - a->n_in];
        if (v->data && is_float(v->dtype) && is_float(a->in[0].dtype) && v->dtype != a->in[0].dtype)
            return ert_set_error(c->ctx, ERT_E_UNSUPPORTED, "node '%s': the cuda backend needs one float dtype per node (%s and %s)",
                                 a->name ? a->name : "?", ert_dtype_name(a->in[0].dtype), ert_dtype_name(v->dtype));
    }
#ifdef ERT_HAVE_CUDNN
    if (a->op == ERT_OP_CONV && dnn_can(a)) {
        conv_state *s = NULL;
        float ms;
        size_t ws_limit = a->workspace ? a->workspace_bytes : 0;
        ert_status st = conv_describe(c, a, ws_limit, true, &s, &ms);
        if (st != ERT_OK) return st;
        if (s && s->gemm) {
            if (gemm_bind(c, a, s)) {
                a->state = s;
                ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s' (%s): cuBLASLt GEMM (1x1), workspace %zu%s",
                        a->name ? a->name : "?", ert_dtype_name(a->in[0].dtype), s->lws,
                        s->gemm_post ? ", epilogue kernel" : "");
                return ERT_OK;
            }
            ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s': cuBLASLt refused the real buffers: cuDNN",
                    a->name ? a->name : "?");
            conv_state_free(s);
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
                conv_state_free(s);
                s = NULL;
            }
        }
        /* the fused plan likewise (refused: conv + epilogue kernel) */
        if (s && s->plan) {
            const ert_conv_params *p = &a->params->conv;
            void *bias = p->has_bias && a->n_in > 2 ? a->in[2].data : NULL;
            void *res = p->has_residual && a->n_in > 3 ? a->in[3].data : NULL;
            s->vpack = fuse_vpack(a, a->in[0].data, a->in[1].data, a->out[0].data, bias, res, a->workspace);
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
    }
#endif
    return ERT_OK;
}

/* ------------------------------------------------------------------ CPU fallback (cuda_fallback.c) */

static ert_cuda_host_node *host_of(const cuda_ctx *c, const ert_kargs *a) {
    for (int i = 0; i < c->n_hosts; i++)
        if (c->hosts[i] == a) return a->state;
    return NULL;
}

static ert_status cuda_bind_host_node(void *bctx, ert_kargs *a, ert_kernel_fn cpu) {
    cuda_ctx *c = bctx;
    a->state = NULL;
    if (c->n_hosts == c->cap_hosts) {
        int cap = c->cap_hosts ? 2 * c->cap_hosts : 8;
        ert_kargs **h = realloc(c->hosts, (size_t)cap * sizeof *h);
        if (!h) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
        c->hosts = h;
        c->cap_hosts = cap;
    }
    ert_cuda_host_node *h = NULL;
    ert_status st = ert_cuda_host_bind(c->ctx, a, cpu, &h);
    if (st != ERT_OK) return st;
    a->state = h;
    c->hosts[c->n_hosts++] = a;
    return ERT_OK;
}

/* After the stream is synchronised: the first host node that failed, as the
 * run's status (*failed its index in nodes); every status reset. */
static ert_status host_check(cuda_ctx *c, ert_kargs *const *nodes, int n, int *failed) {
    ert_status first = ERT_OK;
    for (int i = 0; i < c->n_hosts; i++) {
        ert_cuda_host_node *h = c->hosts[i]->state;
        ert_status st = ert_cuda_host_status(h);
        ert_cuda_host_reset(h);
        if (st == ERT_OK || first != ERT_OK) continue;
        first = st;
        for (int k = 0; k < n; k++)
            if (nodes[k] == c->hosts[i]) *failed = k;
        ert_set_error(c->ctx, st, "its CPU kernel (the CPU fallback: no CUDA kernel) failed: %s", ert_status_str(st));
    }
    return first;
}

static void cuda_release_node(void *bctx, ert_kargs *a) {
    cuda_ctx *c = bctx;
    for (int i = 0; i < c->n_hosts; i++)
        if (c->hosts[i] == a) {
            ert_cuda_host_free(a->state);
            a->state = NULL;
            c->hosts[i] = c->hosts[--c->n_hosts];
            return;
        }
    if (ert_cuda_train_op(a->op) || a->op == ERT_OP_CONV_TRANSPOSE) {
        ert_cuda_train_release(a);
        return;
    }
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
    const void *bias = p->has_bias && a->n_in > 2 ? a->in[2].data : NULL;
    const void *res = p->has_residual && a->n_in > 3 ? a->in[3].data : NULL;
    const ert_tview *y = &a->out[0];
    cudaError_t e;
#ifdef ERT_HAVE_CUDNN
    const conv_state *s = a->state;
    if (s && s->gemm) {
        cublasStatus_t bs = gemm_call(c, s, &s->lalgo, a->in[1].data, a->in[0].data, res, y->data, a->workspace,
                                      s->lws);
        if (bs != CUBLAS_STATUS_SUCCESS) return blas_err(c, bs, "cublasLtMatmul (1x1 conv)");
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
    e = ert_cuda_conv_direct_launch(p, &a->in[0], a->in[1].data, bias, res, y, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "conv kernel");
}

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

/* MatMul (numpy): A (..., M, K) @ B (..., K, N), batch dims broadcast; a 1-D
 * A is (1, K), a 1-D B is (K, 1). One strided-batched call when each
 * operand's batch is either whole or a single matrix, else one call per batch. */
static ert_status run_matmul(cuda_ctx *c, const ert_kargs *a) {
    const ert_tview *A = &a->in[0], *B = &a->in[1], *Y = &a->out[0];
    int an = A->ndim, bn = B->ndim;
    if (an < 1 || bn < 1) return ERT_E_UNSUPPORTED;
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

static ert_status run_binary(cuda_ctx *c, const ert_kargs *a) {
    const ert_tview *y = &a->out[0];
    ert_cuda_map m;
    map_out(&m, y);
    cudaError_t e;
    if (a->op == ERT_OP_WHERE) {
        for (int k = 0; k < 3; k++) ert_cuda_bcast_strides(y->ndim, y->dims, a->in[k].ndim, a->in[k].dims, m.s[k]);
        e = ert_cuda_where_launch(y->dtype, a->in[0].data, a->in[1].data, a->in[2].data, y->data, &m, y->n_elems,
                                  c->stream);
    } else {
        for (int k = 0; k < 2; k++) ert_cuda_bcast_strides(y->ndim, y->dims, a->in[k].ndim, a->in[k].dims, m.s[k]);
        e = ert_cuda_binary_launch(a->op, a->in[0].dtype, a->in[0].data, a->in[1].data, y->data, &m, y->n_elems,
                                   c->stream);
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
    ert_cuda_host_node *h = c->n_hosts ? host_of(c, a) : NULL;
    if (h) return (e = ert_cuda_host_enqueue(h, c->stream)) == cudaSuccess ? ERT_OK : cuda_err(c, e, "CPU fallback copies");
    if (ert_cuda_train_op(a->op) || (a->op == ERT_OP_CONV_TRANSPOSE && a->state)) {
        ert_cuda_env env = env_of(c);
        return ert_cuda_train_run(&env, a);
    }
    switch (a->op) {
    case ERT_OP_CONV: return run_conv(c, a);
    case ERT_OP_CONV_TRANSPOSE:
        e = ert_cuda_conv_transpose_launch(&a->params->conv, x, a->in[1].data,
                                           a->params->conv.has_bias && a->n_in > 2 ? a->in[2].data : NULL, y,
                                           c->stream);
        break;
    case ERT_OP_CAST: e = ert_cuda_cast_launch(x, y, c->stream); break;
    case ERT_OP_GATHER: e = ert_cuda_gather_launch(a->params->gather.axis, x, &a->in[1], y, c->stream); break;
    case ERT_OP_GEMM: return run_gemm(c, a);
    case ERT_OP_MATMUL: return run_matmul(c, a);
    case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL:
        e = ert_cuda_pool_launch(a->op == ERT_OP_MAXPOOL, &a->params->pool, x, y, c->stream);
        break;
    case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_GLOBAL_MAXPOOL: {
        /* channels-last (pool.nhwc): x (N, H, W, C) -> y (N, 1, 1, C) */
        bool nh = a->params->pool.nhwc && x->ndim > 2;
        int64_t sz = 1;
        for (int i = nh ? 1 : 2; i < (nh ? x->ndim - 1 : x->ndim); i++) sz *= x->dims[i];
        int64_t C = x->ndim >= 2 ? x->dims[nh ? x->ndim - 1 : 1] : 1;
        e = ert_cuda_global_pool_launch(a->op == ERT_OP_GLOBAL_MAXPOOL, x->dtype, x->data, y->data,
                                        x->ndim >= 2 ? x->dims[0] * C : 1, sz, nh ? C : 0, c->stream);
        break;
    }
    case ERT_OP_BATCHNORM: {
        int64_t sz = 1;
        for (int i = 2; i < x->ndim; i++) sz *= x->dims[i];
        e = ert_cuda_batchnorm_launch(x->dtype, x->data, a->in[1].data, a->in[2].data, a->in[3].data, a->in[4].data, y->data,
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
        e = ert_cuda_layernorm_launch(x->dtype, x->data, S->data, B ? B->data : NULL, y->data, a->params->norm.epsilon, outer,
                                      inner, S->n_elems == 1, B && B->n_elems == 1, c->stream);
        break;
    }
    case ERT_OP_INSTANCENORM: {
        int64_t sz = 1;
        for (int i = 2; i < x->ndim; i++) sz *= x->dims[i];
        e = ert_cuda_instancenorm_launch(x->dtype, x->data, a->in[1].data, a->in[2].data, y->data,
                                         a->params->norm.epsilon, x->dims[0], x->dims[1], sz, c->stream);
        break;
    }
    case ERT_OP_CUMSUM: {
        int64_t axis = a->params->cumsum.axis, outer = 1, inner = 1;
        for (int i = 0; i < x->ndim; i++) {
            if (i < axis) outer *= x->dims[i];
            else if (i > axis) inner *= x->dims[i];
        }
        e = ert_cuda_cumsum_launch(x->dtype, x->data, y->data, outer, x->dims[axis], inner, a->params->cumsum.exclusive,
                                   a->params->cumsum.reverse, c->stream);
        break;
    }
    case ERT_OP_SOFTMAX: case ERT_OP_LOGSOFTMAX: {
        int64_t axis = a->params->axis.axis, outer = 1, inner = 1;
        for (int i = 0; i < x->ndim; i++) {
            if (i < axis) outer *= x->dims[i];
            else if (i > axis) inner *= x->dims[i];
        }
        e = ert_cuda_softmax_launch(a->op == ERT_OP_LOGSOFTMAX, x->dtype, x->data, y->data, outer, x->ndim ? x->dims[axis] : 1,
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
        e = ert_cuda_unary_launch(a->op, &a->params->unary, x->dtype, x->data, y->data, y->n_elems, c->stream);
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
    return c->n_hosts ? host_check(c, nodes, n, failed) : ERT_OK;
}

/* Every node enqueued directly, no graph: a trainer's eval (other node
 * flags than the captured step) and runs that must not replace the graph. */
static ert_status cuda_run_eager(void *bctx, ert_kargs *const *nodes, int n, int *failed) {
    cuda_ctx *c = bctx;
    ert_status st = enqueue_all(c, nodes, n, failed);
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (st != ERT_OK) return st;
    if (e != cudaSuccess) return cuda_err(c, e, "run");
    return c->n_hosts ? host_check(c, nodes, n, failed) : ERT_OK;
}

/* Eager, with a pair of events around every node (profiling only). */
static ert_status cuda_run_timed(void *bctx, ert_kargs *const *nodes, int n, int *failed, float *ms) {
    cuda_ctx *c = bctx;
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaError_t e = cudaEventCreate(&ev[0]);
    if (e == cudaSuccess) e = cudaEventCreate(&ev[1]);
    ert_status st = e == cudaSuccess ? ERT_OK : cuda_err(c, e, "cudaEventCreate");
    for (int i = 0; st == ERT_OK && i < c->n_in; i++)
        if ((e = cudaMemcpyAsync(c->in[i].dev, c->in[i].host, c->in[i].bytes, cudaMemcpyHostToDevice, c->stream)))
            st = cuda_err(c, e, "input copy");
    for (int k = 0; st == ERT_OK && k < n; k++) {
        cudaEventRecord(ev[0], c->stream);
        if ((st = run_node(c, nodes[k])) != ERT_OK) {
            *failed = k;
            break;
        }
        cudaEventRecord(ev[1], c->stream);
        if ((e = cudaEventSynchronize(ev[1])) != cudaSuccess) {
            st = cuda_err(c, e, "run");
            *failed = k;
            break;
        }
        ms[k] = 0.0f;
        cudaEventElapsedTime(&ms[k], ev[0], ev[1]);
    }
    for (int i = 0; st == ERT_OK && i < c->n_out; i++)
        if ((e = cudaMemcpyAsync(c->out[i].host, c->out[i].dev, c->out[i].bytes, cudaMemcpyDeviceToHost, c->stream)))
            st = cuda_err(c, e, "output copy");
    e = cudaStreamSynchronize(c->stream);
    if (st == ERT_OK && e != cudaSuccess) st = cuda_err(c, e, "run");
    if (st == ERT_OK && c->n_hosts) st = host_check(c, nodes, n, failed);
    for (int i = 0; i < 2; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    return st;
}

static bool cuda_supports(ert_op op, ert_dtype dt) {
    if (ert_cuda_train_op(op)) return ert_cuda_train_supports(op, dt);
    switch (op) {
    case ERT_OP_IDENTITY: case ERT_OP_DROPOUT: case ERT_OP_FLATTEN: case ERT_OP_RESHAPE: case ERT_OP_SQUEEZE:
    case ERT_OP_UNSQUEEZE: case ERT_OP_TRANSPOSE: case ERT_OP_EXPAND: case ERT_OP_SLICE: case ERT_OP_CONCAT:
    case ERT_OP_SPLIT:
        return ert_dtype_size(dt) == 1 || ert_dtype_size(dt) == 2 || ert_dtype_size(dt) == 4 ||
               ert_dtype_size(dt) == 8;
    case ERT_OP_WHERE: return dt == ERT_DTYPE_BOOL;
    case ERT_OP_CUMSUM: return is_float(dt) || dt == ERT_DTYPE_I32 || dt == ERT_DTYPE_I64;
    case ERT_OP_CAST: return ert_dtype_size(dt) != 0;
    case ERT_OP_GATHER: return ert_dtype_size(dt) == 1 || ert_dtype_size(dt) == 2 || ert_dtype_size(dt) == 4 ||
                               ert_dtype_size(dt) == 8;
    case ERT_OP_CONV_TRANSPOSE:
    case ERT_OP_CONV: case ERT_OP_GEMM: case ERT_OP_MATMUL: case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL:
    case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_GLOBAL_MAXPOOL: case ERT_OP_BATCHNORM: case ERT_OP_LAYERNORM:
    case ERT_OP_INSTANCENORM:
    case ERT_OP_SOFTMAX: case ERT_OP_LOGSOFTMAX: case ERT_OP_PAD: case ERT_OP_RESIZE:
    case ERT_OP_REDUCE_MEAN: case ERT_OP_REDUCE_SUM: case ERT_OP_REDUCE_MAX:
    case ERT_OP_RELU: case ERT_OP_LEAKY_RELU: case ERT_OP_CLIP: case ERT_OP_SIGMOID: case ERT_OP_TANH:
    case ERT_OP_HARD_SIGMOID: case ERT_OP_HARD_SWISH: case ERT_OP_SILU: case ERT_OP_GELU: case ERT_OP_ERF:
    case ERT_OP_SQRT: case ERT_OP_EXP: case ERT_OP_LOG: case ERT_OP_NEG: case ERT_OP_ABS: case ERT_OP_RECIPROCAL:
    case ERT_OP_FLOOR: case ERT_OP_CEIL:
    case ERT_OP_ADD: case ERT_OP_SUB: case ERT_OP_MUL: case ERT_OP_DIV: case ERT_OP_POW: case ERT_OP_MIN:
    case ERT_OP_MAX: case ERT_OP_EQUAL: case ERT_OP_LESS: case ERT_OP_GREATER:
        return is_float(dt);
    default: return false; /* Shape, ConstantOfShape, Range: folded at create (constant inputs) */
    }
}

/* What bind_node would refuse for a supported op (Resize modes, training
 * BatchNorm, LayerNorm's extra outputs, Where on non-float data): the
 * session sends such nodes to the CPU instead. */
static bool cuda_supports_node(const ert_kargs *a) {
    if (!cuda_supports(a->op, a->n_in > 0 ? a->in[0].dtype : ERT_DTYPE_UNDEFINED)) return false;
    const ert_op_params *p = a->params;
    switch (a->op) {
    case ERT_OP_WHERE: return a->n_in > 2 && is_float(a->in[1].dtype) && a->in[2].dtype == a->in[1].dtype;
    case ERT_OP_RESIZE: return (p->resize.mode == 0 || p->resize.mode == 1) && p->resize.coord != 4;
    case ERT_OP_BATCHNORM: return !p->norm.training;
    case ERT_OP_LAYERNORM: return a->n_out == 1;
    default: return true;
    }
}

const ert_backend ert_cuda_backend = {
    .name = "cuda",
    .device = ERT_DEVICE_CUDA,
    .weights_in_arena = true,
    .init = cuda_init,
    .release = cuda_release,
    .node_workspace = cuda_node_workspace,
    .conv_time = cuda_conv_time,
    .arena_alloc = cuda_arena_alloc,
    .arena_free = cuda_arena_free,
    .io_host = cuda_io_host,
    .io_host_free = cuda_io_host_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .bind_node = cuda_bind_node,
    .release_node = cuda_release_node,
    .bind_io = cuda_bind_io,
    .run = cuda_run,
    .run_eager = cuda_run_eager,
    .run_timed = cuda_run_timed,
    .supports = cuda_supports,
    .supports_node = cuda_supports_node,
    .bind_host_node = cuda_bind_host_node,
};

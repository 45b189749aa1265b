/* CUDA backend: init and release, memory and placements, the run (CUDA-graph
 * capture and replay) and the backend table.
 * (kernels/cuda/cuda_backend.h: the backend as a whole and what the files share.) */
#include "cuda_backend.h"

/* ------------------------------------------------------------------ init */

static void cuda_release(void *bctx) {
    cuda_ctx *c = bctx;
    if (!c) return;
    if (c->exec) cudaGraphExecDestroy(c->exec);
    if (c->graph) cudaGraphDestroy(c->graph);
    ert_cuda_scratch_free(c);
#ifdef ERT_HAVE_CUDNN
    for (int i = 0; i < c->n_fuses; i++) ert_cuda_fuse_entry_clear(&c->fuses[i]);
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
    ert_cuda_plan_free(c);
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
    c->exact_gelu = (o->flags & ERT_SESSION_EXACT_GELU) != 0;
    c->no_transforms = (o->flags & ERT_SESSION_NO_CONV_TRANSFORMS) != 0;
    /* a trainer recasts its filters from master weights every step: a packed copy would go stale */
    c->dw_rsc = !c->trainer && !(o->flags & ERT_SESSION_NO_PACK);
    c->fast = o->create_mode == ERT_CREATE_FAST;
    cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, c->device);
    c->concurrent_managed = v != 0;
    cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, c->device);
    c->pageable_access = v != 0;
    cudaDeviceGetAttribute(&c->cc_major, cudaDevAttrComputeCapabilityMajor, c->device);
    cudaDeviceGetAttribute(&c->cc_minor, cudaDevAttrComputeCapabilityMinor, c->device);
    cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, c->device);
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
    /* On the session's stream, not cudaMemcpy: from pageable memory that
     * returns once the bytes are staged, before the DMA lands, and the
     * stream is non-blocking, so the first run's kernels (and its output
     * copies) could read the arena before the copy reached it. Under load a
     * constant graph output came back as zeros (op_harness_cuda's Range).
     * Stream-ordered, every later kernel sees the bytes; a pageable source
     * is staged before this returns, so the caller may free it. */
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, c->stream);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "cudaMemcpyAsync(upload)");
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

/* ------------------------------------------------------------------ run */

static ert_status enqueue_all(cuda_ctx *c, ert_kargs *const *nodes, int n, int *failed) {
    cudaError_t e;
    for (int i = 0; i < c->n_in; i++)
        if ((e = cudaMemcpyAsync(c->in[i].dev, c->in[i].host, c->in[i].bytes, cudaMemcpyHostToDevice, c->stream)))
            return cuda_err(c, e, "input copy");
    for (int k = 0; k < n; k++) {
        ert_status st = ert_cuda_run_node(c, nodes[k]);
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
    return c->n_hosts ? ert_cuda_host_check(c, nodes, n, failed) : ERT_OK;
}

/* Every node enqueued directly, no graph: a trainer's eval (other node
 * flags than the captured step) and runs that must not replace the graph. */
static ert_status cuda_run_eager(void *bctx, ert_kargs *const *nodes, int n, int *failed) {
    cuda_ctx *c = bctx;
    ert_status st = enqueue_all(c, nodes, n, failed);
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (st != ERT_OK) return st;
    if (e != cudaSuccess) return cuda_err(c, e, "run");
    return c->n_hosts ? ert_cuda_host_check(c, nodes, n, failed) : ERT_OK;
}

/* Eager, with a pair of events around every node (profiling only). Before
 * each start event a spin kernel holds the GPU for SPIN_NS while the host
 * enqueues the node (cuDNN graph executes take tens of microseconds of host
 * time), so the pair measures the node's device time; a host (CPU fallback)
 * node's time is its host time, which the events span. */
#define SPIN_NS 300000ull
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
        if ((e = ert_cuda_spin_launch(SPIN_NS, c->stream)) != cudaSuccess) {
            st = cuda_err(c, e, "profiling spin");
            break;
        }
        cudaEventRecord(ev[0], c->stream);
        if ((st = ert_cuda_run_node(c, nodes[k])) != ERT_OK) {
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
    if (st == ERT_OK && c->n_hosts) st = ert_cuda_host_check(c, nodes, n, failed);
    for (int i = 0; i < 2; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    return st;
}

const ert_backend ert_cuda_backend = {
    .name = "cuda",
    .device = ERT_DEVICE_CUDA,
    .weights_in_arena = true,
    .init = cuda_init,
    .release = cuda_release,
    .node_workspace = ert_cuda_node_workspace,
    .node_packed_bytes = ert_cuda_packed_bytes,
    .node_packed_only = ert_cuda_qconv_packed_only,
    .conv_time = ert_cuda_conv_time,
    .arena_alloc = cuda_arena_alloc,
    .arena_free = cuda_arena_free,
    .io_host = cuda_io_host,
    .io_host_free = cuda_io_host_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .bind_node = ert_cuda_bind_node,
    .release_node = ert_cuda_release_node,
    .bind_io = cuda_bind_io,
    .run = cuda_run,
    .run_eager = cuda_run_eager,
    .run_timed = cuda_run_timed,
    .supports = ert_cuda_supports,
    .supports_node = ert_cuda_supports_node,
    .bind_host_node = ert_cuda_bind_host_node,
    .plan_cache_open = ert_cuda_plan_cache_open,
    .plan_cache_save = ert_cuda_plan_cache_save,
    .create_stats = ert_cuda_create_stats,
};

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
 * our epilogue kernel (ert_cuda_fuse_find: timed in CUDA-graph replay, each plan
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
 *
 * Files (one job each; this header is their shared, private contract):
 *   cuda_init.c      init/release (device, stream, cuBLAS/cuDNN handles),
 *                    memory and placements (arena, io mirrors, upload/download,
 *                    bind_io), the run (input/output copies, CUDA-graph capture
 *                    and replay, eager and timed runs) and the backend table.
 *   cuda_dispatch.c  the per-op hooks: node_workspace, bind_node, release_node,
 *                    the CPU fallback nodes, supports/supports_node, and
 *                    ert_cuda_run_node (one node onto the stream, per op).
 *   cuda_conv.c      cuDNN convolution: descriptors, algorithm search (cudnnFind,
 *                    cached per shape), KRSC filters, the legacy fused call,
 *                    bind and run of a Conv node.
 *   cuda_fusion.c    conv + epilogue as one cuDNN operation graph (runtime
 *                    fusion): graph, plans, timing in CUDA-graph replay, the
 *                    numeric check of every plan.
 *   cuda_gemm.c      cuBLAS Gemm/MatMul and cuBLASLt 1x1 convs.
 *   cuda_plan.c      the plan cache (what create measured, kept between
 *                    processes) and ert_create_stats. ERT_CREATE_FAST
 *                    (c->fast) is honoured where the measuring happens:
 *                    find_algo and the direct-kernel time (cuda_conv.c),
 *                    ert_cuda_fuse_find, gemm_find, ert_cuda_conv_time.
 */
#ifndef ERT_CUDA_BACKEND_H
#define ERT_CUDA_BACKEND_H

#include "cuda_internal.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#ifdef ERT_HAVE_CUDNN
#include <cudnn.h>
#endif
#include "cuda_libs.h"
#include "cuda_quant.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    bool cached;     /* read from the plan cache: checked against cuDNN at its first use (find_algo) */
} algo_entry;

#ifdef ERT_HAVE_CUDNN
/* One conv + epilogue cuDNN graph per shape and epilogue (ert_cuda_fuse_find). */
#define FUSE_KEY 26
typedef struct fuse_entry {
    int key[FUSE_KEY];
    cudnnBackendDescriptor_t plan; /* the fastest engine config's plan; NULL: none runs */
    cudnnBackendDescriptor_t keep[48]; /* what the plan refers to (FUSE_KEEP) */
    int n_keep;
    size_t ws;
    float ms_fused, ms_unfused; /* per call, one timing loop (< 0: not measured) */
    bool ok;
    int cfg; /* the plan's engine config in cuDNN's heuristics order (-1: none); the plan cache keeps it */
    char *json; /* the plan as cuDNN serialises it (plan cache on only; freed once written); NULL: none */
    uint32_t json_len;
} fuse_entry;

/* A fused plan serialised by cuDNN (CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION)
 * as the plan cache keeps it: finalising it skips the runtime compilation that
 * finalising its engine config costs. Checked numerically like any plan. */
#define PLAN_JSON_MAX ((uint32_t)8 << 20)
typedef struct plan_json {
    int key[FUSE_KEY];
    char *json;
    uint32_t len;
} plan_json;

/* A fuse_entry's answer as the plan cache keeps it (cuda_plan.c): which
 * engine config won and the two times; ert_cuda_fuse_find finalises that
 * config alone, checks it numerically and times nothing. */
typedef struct fuse_hint {
    int key[FUSE_KEY];
    int cfg;        /* -1: no fused plan */
    float ms_fused, ms_unfused;
} fuse_hint;
#endif

/* cuBLASLt's pick for one channels-last 1x1 conv GEMM shape (gemm_find). */
typedef struct lt_entry {
    int key[8]; /* M, C (inner), K (out), dtype, epilogue, residual, 1: B is (C, K) (a MatMul), 1: BLAS_WS cap */
    cublasLtMatmulAlgo_t algo;
    size_t ws;
    float ms;
    bool ok;
} lt_entry;

/* One answer create measured that the plan cache keeps besides conv
 * algorithms and fused plans (REC_CHOICE, cuda_plan.c): which cuBLASLt
 * algorithm (its place in cuBLASLt's heuristics list for the shape, which
 * the key's library versions fix), which attention path, whether a patchify
 * conv runs as gather + GEMM. Also the session's own table, so equal shapes
 * are measured once (ViT-B's 12 attention blocks). */
enum { CHOICE_LT = 1, CHOICE_ATTN = 2, CHOICE_PATCH = 3 };
#define CHOICE_KEY 24
typedef struct choice_entry {
    int kind;
    int key[CHOICE_KEY];
    int pick;    /* LT: index in the heuristics list (-1: none usable); ATTN: attn path; PATCH: 1 = gather + GEMM */
    int64_t aux; /* LT: the algorithm's workspace */
    float ms;
    bool cached; /* read from the plan cache, not yet used (counted in n_cached at its first use) */
} choice_entry;

typedef struct cuda_ctx {
    ert_context *ctx;
    int device, cc_major, cc_minor, sm_count;
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
    bool exact_gelu; /* ERT_SESSION_EXACT_GELU: no tanh-form GELU in cuBLASLt's f16/bf16 epilogue */
    bool no_transforms; /* ERT_SESSION_NO_CONV_TRANSFORMS: no FFT/Winograd conv algorithm in f32 either */
    bool dw_rsc;     /* depthwise filters packed (KH, KW, C) at bind: not a trainer, not ERT_SESSION_NO_PACK */
#ifdef ERT_HAVE_CUDNN
    fuse_entry *fuses; /* conv + epilogue graph plans (ert_cuda_fuse_find), freed at release */
    int n_fuses, cap_fuses;
#endif
    ert_kargs **hosts; /* nodes bound to a CPU kernel (bind_host_node); their state is an ert_cuda_host_node */
    int n_hosts, cap_hosts;
    /* create mode and plan cache (cuda_plan.c) */
    bool fast;            /* ERT_CREATE_FAST: heuristics only, nothing timed */
    int n_searches;       /* measurements made: cudnnFind calls, timing loops */
    char attn_blas_tag;   /* an ert.Attention node's state is &attn_blas_tag: it runs the cuBLAS path */
    char attn_nosplit_tag; /* ... &attn_nosplit_tag: the mma kernel with a warp per query tile (no key split) */
    int n_cached;         /* answers taken from the plan cache */
    void *scratch;         /* create-time scratch for timing and checks (ert_cuda_scratch), freed at its end */
    size_t scratch_bytes;
    choice_entry *choices; /* measured answers (cuda_plan.c: ert_cuda_choice_find / _put) */
    int n_choices, cap_choices;
    double t_measure;     /* ms create spent in timing loops and cudnnFind (ert_create_stats.measure_ms) */
    double t_finalize;    /* ms in cuDNN fused-plan finalisation and checks (finalize_ms) */
    char *cache_path;     /* the plan cache file (NULL: off) */
    char *cache_key;
    ert_plan_cache_state cache_state;
#ifdef ERT_HAVE_CUDNN
    fuse_hint *hints;     /* fuse answers read from the plan cache */
    int n_hints;
    plan_json *pjs;       /* serialised plans read from the plan cache */
    int n_pjs;
#endif
} cuda_ctx;

/* Monotonic wall clock in ms (create's phase times). */
static inline double ert_cuda_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

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
    /* a patchify conv (kernel == stride > 1, no pad) as that GEMM: x gathered
     * into its im2col matrix (col_bytes at the start of the node's
     * workspace, cuBLASLt's lws after it), filter stored (K, R, S, C) */
    size_t col_bytes;
    /* a channels-first patchify conv as gather + GEMM (ert_cuda_run_patch_nchw);
     * nothing else of the state is used */
    bool patch_nchw;
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

/* cuda_attn.c: ert.Attention as two cuBLAS GEMMs around a softmax kernel.
 * The node workspace it needs (0: the path does not apply); run: false if
 * it does not apply to a (the flash kernel of attention.cu runs), else *st. */
size_t ert_cuda_attn_workspace(const cuda_ctx *c, const ert_kargs *a);
bool ert_cuda_attn_blas(cuda_ctx *c, const ert_kargs *a, ert_status *st);
/* Bind an ert.Attention node: where both the mma flash kernel and the
 * cuBLAS path can run it, the faster on the real buffers (a tuned create;
 * a fast one takes the flash kernel). */
ert_status ert_cuda_attn_bind(cuda_ctx *c, ert_kargs *a);
/* Run it as bound. */
ert_status ert_cuda_attn_run(cuda_ctx *c, const ert_kargs *a);

/* ms per call of run(c, u) on c's stream: events around 10 calls after 2
 * warm-up ones; < 0: a call or the timing failed. Create time only
 * (nothing is being captured); the stream is synchronised and any sticky
 * launch error cleared after. */
float ert_cuda_time_ms(cuda_ctx *c, ert_status (*run)(cuda_ctx *c, void *u), void *u);

static inline ert_status cuda_err(cuda_ctx *c, cudaError_t e, const char *what) {
    return ert_set_error(c->ctx, ERT_E_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* An allocation that failed: out of memory is ERT_E_NOMEM with the bytes
 * asked and the device's free memory (the error is not sticky: cleared so
 * the next call on this thread does not see it); anything else ERT_E_CUDA. */
static inline ert_status alloc_err(cuda_ctx *c, cudaError_t e, const char *what, size_t bytes) {
    if (e != cudaErrorMemoryAllocation) return cuda_err(c, e, what);
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
    return ert_set_error(c->ctx, ERT_E_NOMEM, "%s: out of memory for %zu bytes (device: %zu of %zu bytes free)", what,
                         bytes, free_b, total_b);
}

static inline ert_status blas_err(cuda_ctx *c, cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_ALLOC_FAILED) /* e.g. cublasCreate when the GPU is full */
        return ert_set_error(c->ctx, ERT_E_NOMEM, "%s: cuBLAS could not allocate its resources (GPU out of memory)", what);
    return ert_set_error(c->ctx, ERT_E_CUDA, "%s: cuBLAS status %d", what, (int)s);
}

#ifdef ERT_HAVE_CUDNN
static inline ert_status dnn_err(cuda_ctx *c, cudnnStatus_t s, const char *what) {
    return ert_set_error(c->ctx, ERT_E_CUDA, "%s: %s", what, cudnnGetErrorString(s));
}
#endif

static inline ert_cuda_env env_of(cuda_ctx *c) {
    ert_cuda_env e = {.ctx = c->ctx, .stream = c->stream, .blas = c->blas, .dnn = NULL, .trainer = c->trainer};
#ifdef ERT_HAVE_CUDNN
    e.dnn = c->dnn;
#endif
    return e;
}

#ifdef ERT_HAVE_CUDNN
/* f32 data stays f32 (FMA math, no TF32: the CPU is the oracle); f16 and
 * bf16 data use the tensor cores with f32 accumulation. */
static inline cudnnDataType_t dnn_type(ert_dtype dt) {
    return dt == ERT_DTYPE_F16 ? CUDNN_DATA_HALF : dt == ERT_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}
#endif

/* Output-shaped map with operand strides: 0 contiguous output, 1.. operands. */
static inline void map_out(ert_cuda_map *m, const ert_tview *y) {
    memset(m, 0, sizeof *m);
    m->ndim = y->ndim;
    memcpy(m->dims, y->dims, sizeof m->dims);
}

/* ------------------------------------------------------------------ between the files */

/* cuda_dispatch.c: the per-node hooks of the backend table */
ert_status ert_cuda_node_workspace(void *bctx, const ert_kargs *a, size_t *bytes);
ert_status ert_cuda_bind_node(void *bctx, ert_kargs *a);
void ert_cuda_release_node(void *bctx, ert_kargs *a);
ert_status ert_cuda_bind_host_node(void *bctx, ert_kargs *a, ert_kernel_fn cpu);
bool ert_cuda_supports(ert_op op, ert_dtype dt);
bool ert_cuda_supports_node(const ert_kargs *a);
/* One node enqueued on c->stream (cuda_init.c's run loops). */
ert_status ert_cuda_run_node(cuda_ctx *c, const ert_kargs *a);
/* After the stream is synchronised: the first CPU fallback node that failed. */
ert_status ert_cuda_host_check(cuda_ctx *c, ert_kargs *const *nodes, int n, int *failed);

/* cuda_plan.c: the plan cache hooks of the backend table, and cleanup */
void ert_cuda_plan_cache_open(void *bctx, const char *dir, uint64_t signature);
void ert_cuda_plan_cache_save(void *bctx);
void ert_cuda_create_stats(void *bctx, ert_create_stats *out);
/* n bytes of device scratch for create's timing loops and checks, reused
 * across nodes (one cudaMalloc per growth instead of several per conv
 * shape); NULL if it cannot grow (the cudaError is left in *e). Valid until
 * the next call; freed at the end of create (ert_cuda_plan_cache_save) and
 * at release. */
void *ert_cuda_scratch(cuda_ctx *c, size_t n, cudaError_t *e);
void ert_cuda_scratch_free(cuda_ctx *c);
/* The answer for (kind, key[CHOICE_KEY]) measured earlier in this create or
 * read from the plan cache; NULL: none. */
const choice_entry *ert_cuda_choice_find(cuda_ctx *c, int kind, const int *key);
/* Keep an answer (out of memory: not kept, measured again next time). */
void ert_cuda_choice_put(cuda_ctx *c, int kind, const int *key, int pick, int64_t aux, float ms);
void ert_cuda_plan_free(cuda_ctx *c);

/* cuda_conv.c */
ert_status ert_cuda_conv_time(void *bctx, const ert_kargs *a, float *ms);
ert_status ert_cuda_run_conv(cuda_ctx *c, const ert_kargs *a);

/* cuda_quant.c: an int8 node ert_cuda_quant_node_ok accepts, onto the stream */
ert_status ert_cuda_run_quant(cuda_ctx *c, const ert_kargs *a);
/* cuda_quant.c: bind a QLinearConv / ConvInteger: fill a->packed for the
 * tensor-core kernel (cuda_quant.h), or clear it (sm < 80, a filter whose
 * zero point shifts it out of int8) so the CUDA-core kernel runs it. */
ert_status ert_cuda_qconv_pack(cuda_ctx *c, ert_kargs *a);
/* node_packed_only: an int8 conv the tensor cores will run from its packing alone */
bool ert_cuda_qconv_packed_only(void *bctx, const ert_kargs *a);
/* node_packed_bytes of the whole backend (depthwise filters, int8 convs) */
size_t ert_cuda_packed_bytes(const ert_kargs *a);

/* cuda_gemm.c: Gemm and MatMul nodes (cuBLAS) */
ert_status ert_cuda_run_gemm(cuda_ctx *c, const ert_kargs *a);
/* A kernel == stride ConvTranspose (f16/bf16 inference) as a GEMM + scatter:
 * its workspace (0: not this path), and the run (false: not this path, the
 * direct kernel runs; else *st). */
size_t ert_cuda_convt_gemm_ws(const cuda_ctx *c, const ert_kargs *a);
/* A channels-first f16/bf16 patchify conv (kernel == stride, no pad) as an
 * im2col gather + one strided-batched GEMM + the epilogue kernel: can it,
 * its workspace, the run (conv_state.patch_nchw says bind chose it). */
bool ert_cuda_patch_nchw_can(const cuda_ctx *c, const ert_kargs *a);
size_t ert_cuda_patch_nchw_ws(const ert_kargs *a);
ert_status ert_cuda_run_patch_nchw(cuda_ctx *c, const ert_kargs *a);
bool ert_cuda_run_convt_gemm(cuda_ctx *c, const ert_kargs *a, ert_status *st);
ert_status ert_cuda_run_matmul(cuda_ctx *c, const ert_kargs *a);
#ifdef ERT_HAVE_CUDNN
ert_status ert_cuda_matmul_bind(cuda_ctx *c, ert_kargs *a);
#endif

#ifdef ERT_HAVE_CUDNN
/* cuda_conv.c: a Conv node ert_cuda_dnn_can accepts: its workspace, its bind */
bool ert_cuda_dnn_can(const ert_kargs *a);
void ert_cuda_conv_state_free(conv_state *s);
ert_status ert_cuda_conv_workspace(cuda_ctx *c, const ert_kargs *a, size_t *bytes);
ert_status ert_cuda_conv_bind(cuda_ctx *c, ert_kargs *a);

/* cuda_gemm.c: channels-last 1x1 convs as one cuBLASLt GEMM */
bool ert_cuda_gemm_can(const cuda_ctx *c, const ert_kargs *a);
ert_status ert_cuda_gemm_describe(cuda_ctx *c, const ert_kargs *a, size_t ws_limit, conv_state **out, float *ms);
bool ert_cuda_gemm_bind(cuda_ctx *c, const ert_kargs *a, conv_state *s);
cublasStatus_t ert_cuda_gemm_call(cuda_ctx *c, const conv_state *s, const cublasLtMatmulAlgo_t *algo, const void *w,
                                  const void *x, const void *res, void *y, void *ws, size_t ws_bytes);
cublasStatus_t ert_cuda_gemm_run(cuda_ctx *c, const ert_kargs *a, const conv_state *s);

/* cuda_fusion.c: conv + epilogue as one cuDNN graph, and the direct kernel's time */
void ert_cuda_fuse_entry_clear(fuse_entry *f);
ert_status ert_cuda_fuse_find(cuda_ctx *c, const ert_kargs *a, const conv_state *s, const int *conv_key,
                              const fuse_entry **out);
cudnnBackendDescriptor_t ert_cuda_fuse_vpack(const ert_kargs *a, void *x, void *w, void *y, void *b, void *r,
                                             void *ws);
float ert_cuda_time_direct(cuda_ctx *c, const ert_kargs *a);
#endif

/* cuda_conv.c: channels-last depthwise filters packed as (KH, KW, C) (node_packed_bytes, bind) */
size_t ert_cuda_dw_rsc_bytes(const ert_kargs *a);
ert_status ert_cuda_dw_pack(cuda_ctx *c, ert_kargs *a);

#endif /* ERT_CUDA_BACKEND_H */

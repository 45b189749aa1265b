/*
 * CUDA backend, training ops: dispatch of the backward, loss and optimizer
 * nodes the trainer (runtime/train/) emits: f32, plus the
 * f16/bf16 convolution gradients of mixed precision (tensor cores, f32
 * accumulation) and the f16 loss scaler (LOSS slot 3, GRAD_NORM's last two
 * inputs).
 *
 * Convolutions: CONV_GRAD_WEIGHT is cudnnConvolutionBackwardFilter and the
 * data gradient (a ConvTranspose(dy, W) node with the forward's geometry) is
 * cudnnConvolutionBackwardData; the algorithm is measured once at create
 * (cudnnFind, FMA math for f32: no TF32, the CPU is the oracle) and its
 * workspace planned by the trainer (node_workspace). A ConvTranspose cuDNN
 * cannot describe (asymmetric pads, 3-D, bias, fused activation) keeps the
 * backend's direct kernel; a CONV_GRAD_WEIGHT it cannot describe is refused
 * at create. MatMul gradients: cuBLAS per batch entry, accumulating where
 * a batch dim was broadcast. Everything else: kernels in train.cu.
 * LayerNorm's gradient: one block per row (train.cu), like the CPU kernel.
 */
#include "cuda_internal.h"

#include <cublas_v2.h>
#ifdef ERT_HAVE_CUDNN
#include <cudnn.h>
#endif
#include "cuda_libs.h"

#include <stdlib.h>
#include <string.h>

#define TRAIN_WS_MAX ((size_t)256 << 20) /* largest cuDNN backward workspace a node may plan */
#define BLAS_WS ((size_t)4 << 20)

/* CUDA's training-op table (ert_cuda_supports in cuda_dispatch.c has the
 * inference ops; ert.QLinearAdd and ert.QLut are among them). */
_Static_assert(ERT_OP_COUNT == 119, "ERT_OP_COUNT changed: say here whether the new op is a CUDA training op");
bool ert_cuda_train_op(ert_op op) {
    switch (op) {
    case ERT_OP_CONV_GRAD_WEIGHT: case ERT_OP_REDUCE_TO: case ERT_OP_ACT_GRAD: case ERT_OP_BINARY_GRAD:
    case ERT_OP_MATMUL_GRAD: case ERT_OP_MAXPOOL_GRAD: case ERT_OP_AVGPOOL_GRAD: case ERT_OP_GLOBAL_AVGPOOL_GRAD:
    case ERT_OP_BATCHNORM_TRAIN: case ERT_OP_BATCHNORM_GRAD: case ERT_OP_LAYERNORM_GRAD: case ERT_OP_SOFTMAX_GRAD:
    case ERT_OP_LOGSOFTMAX_GRAD: case ERT_OP_SLICE_GRAD: case ERT_OP_FILL_ZERO: case ERT_OP_LOSS:
    case ERT_OP_GRAD_NORM: case ERT_OP_OPTIM: case ERT_OP_BROADCAST_TO: case ERT_OP_GATHER_GRAD:
    case ERT_OP_DROPOUT_TRAIN:
        return true;
    default: return false;
    }
}

bool ert_cuda_train_supports(ert_op op, ert_dtype dt) {
#ifndef ERT_HAVE_CUDNN
    if (op == ERT_OP_CONV_GRAD_WEIGHT) return false;
#else
    /* mixed precision: the weight gradient of a half conv, on the tensor cores */
    if (op == ERT_OP_CONV_GRAD_WEIGHT) return dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16;
#endif
    if (op == ERT_OP_FILL_ZERO) return ert_dtype_size(dt) != 0;
    /* mixed precision: these run on f16/bf16 activations too */
    bool half = dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16;
    if (half && (op == ERT_OP_ACT_GRAD || op == ERT_OP_MAXPOOL_GRAD || op == ERT_OP_AVGPOOL_GRAD ||
                 op == ERT_OP_GLOBAL_AVGPOOL_GRAD || op == ERT_OP_BATCHNORM_TRAIN || op == ERT_OP_BATCHNORM_GRAD))
        return true;
    return dt == ERT_DTYPE_F32;
}

static ert_status cuda_fail(const ert_cuda_env *env, const ert_kargs *a, cudaError_t e) {
    return ert_set_error(env->ctx, ERT_E_CUDA, "node '%s': %s (%s)", a->name ? a->name : "?", cudaGetErrorString(e),
                         cudaGetErrorName(e));
}

/* ------------------------------------------------------------------ cuDNN */

#ifdef ERT_HAVE_CUDNN
typedef struct bwd_state {
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    int algo;
    size_t ws;
    bool half; /* f16/bf16 data: tensor-core algorithms allowed */
    int n_cand; /* cudnnFind's usable answers, fastest first (tried on the real buffers at bind) */
    int cand_algo[16];
    size_t cand_ws[16];
    float cand_ms_best; /* cudnnFind's time of cand 0, the fastest */
} bwd_state;

static void bwd_free(bwd_state *s) {
    if (!s) return;
    if (s->xd) cudnnDestroyTensorDescriptor(s->xd);
    if (s->yd) cudnnDestroyTensorDescriptor(s->yd);
    if (s->wd) cudnnDestroyFilterDescriptor(s->wd);
    if (s->cd) cudnnDestroyConvolutionDescriptor(s->cd);
    free(s);
}

/* x: the forward conv's input, y: its output, w: its filter (dims only). */
static ert_status bwd_describe(const ert_cuda_env *env, const ert_conv_params *p, const ert_tview *x,
                               const ert_tview *w, const ert_tview *y, bwd_state **out) {
    *out = NULL;
    if (p->nsp < 1 || p->nsp > 2 || x->ndim != p->nsp + 2 || y->ndim != x->ndim || w->ndim != x->ndim) return ERT_OK;
    for (int i = 0; i < p->nsp; i++)
        if (p->pad_begin[i] != p->pad_end[i]) return ERT_OK;
    for (int i = 0; i < x->ndim; i++)
        if (x->dims[i] > INT32_MAX || y->dims[i] > INT32_MAX || w->dims[i] > INT32_MAX) return ERT_OK;
    bwd_state *s = calloc(1, sizeof *s);
    if (!s) return ert_set_error(env->ctx, ERT_E_NOMEM, "out of memory");
    int two = p->nsp == 2;
    int xh = two ? (int)x->dims[2] : 1, xw = (int)x->dims[2 + two], yh = two ? (int)y->dims[2] : 1,
        yw = (int)y->dims[2 + two], kh = two ? (int)w->dims[2] : 1, kw = (int)w->dims[2 + two];
    int ph = two ? (int)p->pad_begin[0] : 0, pw = (int)p->pad_begin[two];
    int sh = two ? (int)p->stride[0] : 1, sw = (int)p->stride[two];
    int dh = two ? (int)p->dilation[0] : 1, dw = (int)p->dilation[two];
    /* f32: FMA math (the CPU is the oracle); f16/bf16 (mixed precision): the
     * tensor cores, f32 accumulation (compute type FLOAT) */
    bool half = x->dtype == ERT_DTYPE_F16 || x->dtype == ERT_DTYPE_BF16;
    if ((x->dtype != ERT_DTYPE_F32 && !half) || y->dtype != x->dtype || w->dtype != x->dtype) {
        free(s);
        *out = NULL;
        return ERT_OK;
    }
    cudnnDataType_t dt = x->dtype == ERT_DTYPE_F16    ? CUDNN_DATA_HALF
                         : x->dtype == ERT_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16
                                                      : CUDNN_DATA_FLOAT;
    s->half = half;
    cudnnStatus_t ds;
    if ((ds = cudnnCreateTensorDescriptor(&s->xd)) || (ds = cudnnCreateTensorDescriptor(&s->yd)) ||
        (ds = cudnnCreateFilterDescriptor(&s->wd)) || (ds = cudnnCreateConvolutionDescriptor(&s->cd)) ||
        (ds = cudnnSetTensor4dDescriptor(s->xd, CUDNN_TENSOR_NCHW, dt, (int)x->dims[0], (int)x->dims[1], xh, xw)) ||
        (ds = cudnnSetTensor4dDescriptor(s->yd, CUDNN_TENSOR_NCHW, dt, (int)y->dims[0], (int)y->dims[1], yh, yw)) ||
        (ds = cudnnSetFilter4dDescriptor(s->wd, dt, CUDNN_TENSOR_NCHW, (int)w->dims[0], (int)w->dims[1], kh, kw)) ||
        (ds = cudnnSetConvolution2dDescriptor(s->cd, ph, pw, sh, sw, dh, dw, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT)) ||
        (ds = cudnnSetConvolutionGroupCount(s->cd, (int)p->group)) ||
        (ds = cudnnSetConvolutionMathType(s->cd, half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH))) {
        bwd_free(s);
        return ert_set_error(env->ctx, ERT_E_CUDA, "cuDNN backward descriptors: %s", cudnnGetErrorString(ds));
    }
    int on, oc, oh, ow;
    if (cudnnGetConvolution2dForwardOutputDim(s->cd, s->xd, s->wd, &on, &oc, &oh, &ow) != CUDNN_STATUS_SUCCESS ||
        on != (int)y->dims[0] || oc != (int)y->dims[1] || oh != yh || ow != yw) {
        bwd_free(s);
        return ERT_OK;
    }
    *out = s;
    return ERT_OK;
}

/* The fastest measured algorithm whose workspace fits `limit` (f32: FMA
 * math), unless none does or it is over ERT_WS_SLOWER times slower than the
 * fastest one: then the fastest. */
static ert_status bwd_pick(const ert_cuda_env *env, bwd_state *s, bool filter, size_t limit, bool *ok) {
    cudnnHandle_t h = env->dnn;
    int got = 0;
    *ok = false;
    float best = -1;
    if (filter) {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        cudnnStatus_t ds = cudnnFindConvolutionBackwardFilterAlgorithm(h, s->xd, s->yd, s->cd, s->wd,
                                                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf);
        if (ds != CUDNN_STATUS_SUCCESS)
            ds = cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, s->xd, s->yd, s->cd, s->wd,
                                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf);
        if (ds != CUDNN_STATUS_SUCCESS)
            return ert_set_error(env->ctx, ERT_E_CUDA, "cudnnFindConvolutionBackwardFilterAlgorithm: %s",
                                 cudnnGetErrorString(ds));
        for (int i = 0; i < got; i++) {
            if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > TRAIN_WS_MAX ||
                (!s->half && (perf[i].mathType == CUDNN_TENSOR_OP_MATH ||
                              perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)))
                continue;
            if (s->n_cand == 0) s->cand_ms_best = perf[i].time;
            if (s->n_cand < 16) {
                s->cand_algo[s->n_cand] = (int)perf[i].algo;
                s->cand_ws[s->n_cand++] = perf[i].memory;
            }
            if (perf[i].memory <= limit && (!*ok || perf[i].time < best)) {
                *ok = true;
                best = perf[i].time;
                s->algo = (int)perf[i].algo;
                s->ws = perf[i].memory;
            }
        }
    } else {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        cudnnStatus_t ds = cudnnFindConvolutionBackwardDataAlgorithm(h, s->wd, s->yd, s->cd, s->xd,
                                                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf);
        if (ds != CUDNN_STATUS_SUCCESS)
            ds = cudnnGetConvolutionBackwardDataAlgorithm_v7(h, s->wd, s->yd, s->cd, s->xd,
                                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf);
        if (ds != CUDNN_STATUS_SUCCESS)
            return ert_set_error(env->ctx, ERT_E_CUDA, "cudnnFindConvolutionBackwardDataAlgorithm: %s",
                                 cudnnGetErrorString(ds));
        for (int i = 0; i < got; i++) {
            if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > TRAIN_WS_MAX ||
                (!s->half && (perf[i].mathType == CUDNN_TENSOR_OP_MATH ||
                              perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)))
                continue;
            if (s->n_cand == 0) s->cand_ms_best = perf[i].time;
            if (s->n_cand < 16) {
                s->cand_algo[s->n_cand] = (int)perf[i].algo;
                s->cand_ws[s->n_cand++] = perf[i].memory;
            }
            if (perf[i].memory <= limit && (!*ok || perf[i].time < best)) {
                *ok = true;
                best = perf[i].time;
                s->algo = (int)perf[i].algo;
                s->ws = perf[i].memory;
            }
        }
    }
    /* nothing fits, or what fits is over ERT_WS_SLOWER times slower than the
     * fastest: the fastest (the trainer's peak grows) */
    bool timed = best > 0 && s->cand_ms_best > 0; /* Find's times (the heuristics' fallback has none) */
    if ((!*ok || (timed && best > s->cand_ms_best * ERT_WS_SLOWER)) && s->n_cand > 0) {
        *ok = true;
        s->algo = s->cand_algo[0];
        s->ws = s->cand_ws[0];
    }
    cudaGetLastError();
    return ERT_OK;
}

/* The forward conv's (x, w, y) views of a node: CONV_GRAD_WEIGHT (dy, x) ->
 * dW; ConvTranspose as data gradient (dy, W) -> dx. */
static bool conv_views(const ert_kargs *a, ert_tview *x, ert_tview *w, ert_tview *y) {
    if (a->op == ERT_OP_CONV_GRAD_WEIGHT) {
        *x = a->in[1], *w = a->out[0], *y = a->in[0];
        return true;
    }
    const ert_conv_params *p = &a->params->conv;
    if (p->has_bias || p->act.kind != ERT_ACT_NONE || p->has_residual) return false;
    for (int i = 0; i < p->nsp; i++)
        if (p->out_pad[i]) return false;
    *x = a->out[0], *w = a->in[1], *y = a->in[0];
    return true;
}

static ert_status conv_state(const ert_cuda_env *env, const ert_kargs *a, size_t limit, bwd_state **out) {
    ert_tview x, w, y;
    *out = NULL;
    if (!env->dnn || !conv_views(a, &x, &w, &y)) return ERT_OK;
    /* an inference session's f16/bf16 ConvTranspose keeps the backend's kernel */
    if (a->op == ERT_OP_CONV_TRANSPOSE && x.dtype != ERT_DTYPE_F32 && !env->trainer) return ERT_OK;
    bwd_state *s = NULL;
    ert_status st = bwd_describe(env, &a->params->conv, &x, &w, &y, &s);
    if (st != ERT_OK || !s) return st;
    bool ok = false;
    if ((st = bwd_pick(env, s, a->op == ERT_OP_CONV_GRAD_WEIGHT, limit, &ok)) != ERT_OK || !ok) {
        bwd_free(s);
        return st;
    }
    *out = s;
    return ERT_OK;
}
#endif

ert_status ert_cuda_train_workspace(const ert_cuda_env *env, const ert_kargs *a, size_t *bytes) {
    *bytes = 0;
    switch (a->op) {
    case ERT_OP_MATMUL_GRAD: *bytes = BLAS_WS; return ERT_OK;
    case ERT_OP_GRAD_NORM: *bytes = sizeof(double); return ERT_OK;
    case ERT_OP_BATCHNORM_TRAIN: case ERT_OP_BATCHNORM_GRAD: /* per-channel sums in double (train.cu) */
        if (a->in[0].ndim >= 2) /* dy and x have the same shape */
            *bytes = 2 * sizeof(double) * (size_t)a->in[0].dims[1];
        return ERT_OK;
    case ERT_OP_CONV_GRAD_WEIGHT: case ERT_OP_CONV_TRANSPOSE: {
#ifdef ERT_HAVE_CUDNN
        bwd_state *s = NULL;
        /* a->workspace_bytes: the trainer's budget (0: none) */
        size_t limit = a->workspace_bytes && a->workspace_bytes < TRAIN_WS_MAX ? a->workspace_bytes : TRAIN_WS_MAX;
        ert_status st = conv_state(env, a, limit, &s);
        if (st != ERT_OK) return st;
        if (s) *bytes = s->ws;
        bwd_free(s);
#else
        (void)env;
#endif
        return ERT_OK;
    }
    default: return ERT_OK;
    }
}

#ifdef ERT_HAVE_CUDNN
/* cudnnFind measures on its own scratch buffers; the algorithm it ranks first
 * can still refuse the bound ones (seen once on an H200 under ctest -j8: a
 * bf16 backward-data conv failed every step with CUDNN_STATUS_BAD_PARAM).
 * So each candidate that fits the planned workspace is run once on the real
 * buffers, fastest first, and the first cuDNN accepts is kept; the output
 * (computed from whatever the buffers hold now) is zeroed again after. */
/* When every cudnnFind answer refused the buffers (seen under ctest -j4 with
 * other processes on the GPU: Find then lists a single algorithm), the
 * heuristic list adds every other algorithm whose workspace (asked of cuDNN
 * for these descriptors) fits. */
static bool bwd_seen(const bwd_state *s, int algo) {
    for (int k = 0; k < s->n_cand; k++)
        if (s->cand_algo[k] == algo) return true;
    return false;
}

static int bwd_more(const ert_cuda_env *env, bwd_state *s, bool filter, size_t have) {
    int got = 0, added = 0, algos[16];
    cudnnStatus_t st[16];
    if (filter) {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(env->dnn, s->xd, s->yd, s->cd, s->wd,
                                                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                          perf) != CUDNN_STATUS_SUCCESS)
            got = 0;
        for (int i = 0; i < got && i < 16; i++) algos[i] = (int)perf[i].algo, st[i] = perf[i].status;
    } else {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        if (cudnnGetConvolutionBackwardDataAlgorithm_v7(env->dnn, s->wd, s->yd, s->cd, s->xd,
                                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                        perf) != CUDNN_STATUS_SUCCESS)
            got = 0;
        for (int i = 0; i < got && i < 16; i++) algos[i] = (int)perf[i].algo, st[i] = perf[i].status;
    }
    for (int i = 0; i < got && i < 16 && s->n_cand < 16; i++) {
        size_t ws = 0;
        cudnnStatus_t q = filter ? cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                       env->dnn, s->xd, s->yd, s->cd, s->wd, (cudnnConvolutionBwdFilterAlgo_t)algos[i], &ws)
                                 : cudnnGetConvolutionBackwardDataWorkspaceSize(
                                       env->dnn, s->wd, s->yd, s->cd, s->xd, (cudnnConvolutionBwdDataAlgo_t)algos[i], &ws);
        if (bwd_seen(s, algos[i]) || st[i] != CUDNN_STATUS_SUCCESS || q != CUDNN_STATUS_SUCCESS || ws > have) continue;
        s->cand_algo[s->n_cand] = algos[i], s->cand_ws[s->n_cand++] = ws, added++;
    }
    cudaGetLastError();
    return added;
}

static ert_status bwd_try(const ert_cuda_env *env, const ert_kargs *a, bwd_state *s) {
    const ert_tview *in = a->in, *out = a->out;
    if (!out[0].data || !in[0].data || !in[1].data) return ERT_OK;
    const float one = 1.0f, zero = 0.0f;
    size_t have = a->workspace ? a->workspace_bytes : 0;
    cudnnStatus_t ds = CUDNN_STATUS_NOT_SUPPORTED;
    const int n_find = s->n_cand;
    bool more = false;
    for (int k = 0; k < s->n_cand || (!more && ds != CUDNN_STATUS_SUCCESS); k++) {
        if (k == s->n_cand) { /* every Find answer refused: add the heuristics' */
            more = true;
            if (bwd_more(env, s, a->op == ERT_OP_CONV_GRAD_WEIGHT, have) == 0) break;
            ert_log(env->ctx, ERT_LOG_INFO, "node '%s': cuDNN refused Find's %d backward algorithms on the real "
                    "buffers; trying %d more from its heuristics", a->name ? a->name : "?", n_find, s->n_cand - n_find);
        }
        if (s->cand_ws[k] > have) continue;
        if (a->op == ERT_OP_CONV_GRAD_WEIGHT)
            ds = cudnnConvolutionBackwardFilter(env->dnn, &one, s->xd, in[1].data, s->yd, in[0].data, s->cd,
                                                (cudnnConvolutionBwdFilterAlgo_t)s->cand_algo[k], a->workspace,
                                                s->cand_ws[k], &zero, s->wd, out[0].data);
        else
            ds = cudnnConvolutionBackwardData(env->dnn, &one, s->wd, in[1].data, s->yd, in[0].data, s->cd,
                                              (cudnnConvolutionBwdDataAlgo_t)s->cand_algo[k], a->workspace,
                                              s->cand_ws[k], &zero, s->xd, out[0].data);
        if (ds == CUDNN_STATUS_SUCCESS) {
            s->algo = s->cand_algo[k];
            s->ws = s->cand_ws[k];
            break;
        }
    }
    cudaError_t e = cudaStreamSynchronize(env->stream);
    if (ds != CUDNN_STATUS_SUCCESS)
        return ert_set_error(env->ctx, ERT_E_CUDA, "node '%s': no cuDNN backward algorithm (of %d) accepts its buffers: %s",
                             a->name ? a->name : "?", s->n_cand, cudnnGetErrorString(ds));
    if (e == cudaSuccess)
        e = cudaMemsetAsync(out[0].data, 0, (size_t)out[0].n_elems * ert_dtype_size(out[0].dtype), env->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(env->stream);
    if (e != cudaSuccess)
        return ert_set_error(env->ctx, ERT_E_CUDA, "node '%s': trying the cuDNN backward algorithm: %s",
                             a->name ? a->name : "?", cudaGetErrorString(e));
    return ERT_OK;
}
#endif

ert_status ert_cuda_train_bind(const ert_cuda_env *env, ert_kargs *a) {
    a->state = NULL;
    if (a->op != ERT_OP_CONV_GRAD_WEIGHT && a->op != ERT_OP_CONV_TRANSPOSE) return ERT_OK;
#ifdef ERT_HAVE_CUDNN
    bwd_state *s = NULL;
    ert_status st = conv_state(env, a, a->workspace ? a->workspace_bytes : 0, &s);
    if (st == ERT_OK && s) st = bwd_try(env, a, s);
    if (st != ERT_OK) {
        bwd_free(s);
        return st;
    }
    a->state = s;
#endif
    if (a->op == ERT_OP_CONV_GRAD_WEIGHT && !a->state)
        return ert_set_error(env->ctx, ERT_E_UNSUPPORTED,
                             "node '%s' (ConvGradWeight): cuDNN cannot compute this weight gradient on CUDA "
                             "(3-D, asymmetric pads, or no cuDNN in this build)",
                             a->name ? a->name : "?");
    return ERT_OK;
}

void ert_cuda_train_release(ert_kargs *a) {
#ifdef ERT_HAVE_CUDNN
    if (a->op == ERT_OP_CONV_GRAD_WEIGHT || a->op == ERT_OP_CONV_TRANSPOSE) bwd_free(a->state);
#endif
    a->state = NULL;
}

/* ------------------------------------------------------------------ run */

/* Row-major C (M,N) = op(X) (M,K) op(Y) (K,N) + beta C; ldx/ldy: row lengths
 * of X and Y as stored. Column-major cuBLAS sees C^T = op(Y)^T op(X)^T. */
static cublasStatus_t rm_gemm(cublasHandle_t h, bool tx, bool ty, int64_t M, int64_t N, int64_t K, const float *X,
                              int64_t ldx, const float *Y, int64_t ldy, float *C, float beta) {
    const float one = 1.0f;
    return cublasSgemm(h, ty ? CUBLAS_OP_T : CUBLAS_OP_N, tx ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K, &one,
                       Y, (int)ldy, X, (int)ldx, &beta, C, (int)N);
}

static ert_status matmul_grad(const ert_cuda_env *env, const ert_kargs *a) {
    const ert_tview *DY = &a->in[0], *A = &a->in[1], *B = &a->in[2];
    const ert_tview *O = &a->out[0];
    int which = a->params->grad.which;
    if (A->ndim < 2 || B->ndim < 2) return ERT_E_UNSUPPORTED;
    int64_t M = A->dims[A->ndim - 2], K = A->dims[A->ndim - 1], N = B->dims[B->ndim - 1];
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return ERT_E_UNSUPPORTED;
    int na = A->ndim - 2, nb = B->ndim - 2, nbd = DY->ndim - 2;
    int64_t n_batch = 1;
    for (int i = 0; i < nbd; i++) n_batch *= DY->dims[i];
    cudaError_t e = cudaMemsetAsync(O->data, 0, (size_t)O->n_elems * sizeof(float), env->stream);
    if (e != cudaSuccess) return cuda_fail(env, a, e);
    if (a->workspace && cublasSetWorkspace(env->blas, a->workspace, a->workspace_bytes) != CUBLAS_STATUS_SUCCESS)
        return ert_set_error(env->ctx, ERT_E_CUDA, "node '%s': cublasSetWorkspace failed", a->name ? a->name : "?");
    for (int64_t bi = 0; bi < n_batch; bi++) {
        int64_t rem = bi, oa = 0, ob = 0, sa = M * K, sb = K * N;
        for (int d = nbd - 1; d >= 0; d--) {
            int64_t idx = rem % DY->dims[d];
            rem /= DY->dims[d];
            int da = d - (nbd - na), db = d - (nbd - nb);
            if (da >= 0) {
                if (A->dims[da] != 1) oa += idx * sa;
                sa *= A->dims[da];
            }
            if (db >= 0) {
                if (B->dims[db] != 1) ob += idx * sb;
                sb *= B->dims[db];
            }
        }
        const float *dy = (const float *)DY->data + bi * M * N;
        cublasStatus_t bs;
        if (which == 0) /* dA (M,K) += dY (M,N) B^T (N,K) */
            bs = rm_gemm(env->blas, false, true, M, K, N, dy, N, (const float *)B->data + ob, N,
                         (float *)O->data + oa, 1.0f);
        else /* dB (K,N) += A^T (K,M) dY (M,N) */
            bs = rm_gemm(env->blas, true, false, K, N, M, (const float *)A->data + oa, K, dy, N,
                         (float *)O->data + ob, 1.0f);
        if (bs != CUBLAS_STATUS_SUCCESS)
            return ert_set_error(env->ctx, ERT_E_CUDA, "node '%s': cublasSgemm status %d", a->name ? a->name : "?",
                                 (int)bs);
    }
    return ERT_OK;
}

static void map_of(ert_cuda_map *m, int ndim, const int64_t *dims) {
    memset(m, 0, sizeof *m);
    m->ndim = ndim;
    memcpy(m->dims, dims, (size_t)ndim * sizeof *dims);
}

static cudaError_t reduce_to(const ert_kargs *a, cudaStream_t st) {
    const ert_grad_params *p = &a->params->grad;
    const ert_tview *DY = &a->in[0];
    const ert_tview *O = &a->out[0];
    int n = DY->ndim, a0 = -1, b0 = -1;
    bool block = p->ndim == n;
    for (int d = 0; d < n && block; d++) { /* kept dims one contiguous range: the block kernel */
        if (p->shape[d] == 1 && DY->dims[d] != 1) continue;
        if (p->shape[d] != DY->dims[d]) block = false;
        else if (DY->dims[d] != 1) {
            if (a0 < 0) a0 = d;
            else if (b0 != d - 1) block = false;
            b0 = d;
        }
    }
    if (block && a0 >= 0) {
        int64_t outer = 1, mid = 1, inner = 1;
        for (int d = 0; d < n; d++) *(d < a0 ? &outer : d <= b0 ? &mid : &inner) *= DY->dims[d];
        return ert_cuda_reduce_to_launch(DY->data, O->data, O->n_elems, outer, mid, inner, NULL, DY->n_elems, p->scale,
                                         st);
    }
    ert_cuda_map m;
    map_of(&m, n, DY->dims);
    ert_cuda_bcast_strides(n, DY->dims, p->ndim, p->shape, m.s[0]);
    return ert_cuda_reduce_to_launch(DY->data, O->data, O->n_elems, 0, 0, 0, &m, DY->n_elems, p->scale, st);
}

static cudaError_t slice_grad(const ert_kargs *a, cudaStream_t st) {
    const ert_slice_params *p = &a->params->slice;
    const ert_tview *DY = &a->in[0], *DX = &a->out[0];
    cudaError_t e = cudaMemsetAsync(DX->data, 0, (size_t)DX->n_elems * sizeof(float), st);
    if (e != cudaSuccess || !DY->n_elems) return e;
    ert_cuda_map m;
    int64_t xs[ERT_MAX_DIMS], off = 0;
    map_of(&m, DY->ndim, DY->dims);
    ert_cuda_contig_strides(DY->ndim, DY->dims, m.s[0]);
    ert_cuda_contig_strides(DX->ndim, DX->dims, xs);
    for (int d = 0; d < DX->ndim; d++) {
        off += p->start[d] * xs[d];
        m.s[1][d] = p->step[d] * xs[d];
    }
    return ert_cuda_strided_copy_launch(DY->data, 0, DX->data, off, sizeof(float), &m, DY->n_elems, st);
}

static int64_t spatial(const ert_tview *x) {
    int64_t sz = 1;
    for (int i = 2; i < x->ndim; i++) sz *= x->dims[i];
    return sz;
}

ert_status ert_cuda_train_run(const ert_cuda_env *env, const ert_kargs *a) {
    cudaStream_t st = env->stream;
    const ert_tview *in = a->in;
    ert_tview *out = a->out;
    cudaError_t e = cudaSuccess;
    switch (a->op) {
#ifdef ERT_HAVE_CUDNN
    case ERT_OP_CONV_GRAD_WEIGHT: case ERT_OP_CONV_TRANSPOSE: {
        const bwd_state *s = a->state;
        if (!s) return ERT_E_UNSUPPORTED;
        if (!out[0].data) return ERT_OK;
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t ds;
        if (a->op == ERT_OP_CONV_GRAD_WEIGHT)
            ds = cudnnConvolutionBackwardFilter(env->dnn, &one, s->xd, in[1].data, s->yd, in[0].data, s->cd,
                                                (cudnnConvolutionBwdFilterAlgo_t)s->algo, a->workspace, s->ws, &zero,
                                                s->wd, out[0].data);
        else
            ds = cudnnConvolutionBackwardData(env->dnn, &one, s->wd, in[1].data, s->yd, in[0].data, s->cd,
                                              (cudnnConvolutionBwdDataAlgo_t)s->algo, a->workspace, s->ws, &zero,
                                              s->xd, out[0].data);
        if (ds != CUDNN_STATUS_SUCCESS)
            return ert_set_error(env->ctx, ERT_E_CUDA, "node '%s': cuDNN backward: %s", a->name ? a->name : "?",
                                 cudnnGetErrorString(ds));
        return ERT_OK;
    }
#endif
    case ERT_OP_FILL_ZERO:
        if (out[0].data && out[0].n_elems)
            e = cudaMemsetAsync(out[0].data, 0, (size_t)out[0].n_elems * ert_dtype_size(out[0].dtype), st);
        break;
    case ERT_OP_ACT_GRAD:
        if (out[0].data && in[0].dtype != ERT_DTYPE_F32)
            e = ert_cuda_act_grad_h_launch(in[0].dtype, &a->params->unary, in[0].data, in[1].data, out[0].data,
                                           out[0].n_elems, st);
        else if (out[0].data)
            e = ert_cuda_act_grad_launch(&a->params->unary, in[0].data, in[1].data, out[0].data, out[0].n_elems, st);
        break;
    case ERT_OP_BINARY_GRAD: {
        if (!out[0].data) break;
        const ert_tview *DY = &in[0];
        ert_cuda_map m;
        map_of(&m, DY->ndim, DY->dims);
        ert_cuda_bcast_strides(DY->ndim, DY->dims, in[1].ndim, in[1].dims, m.s[0]);
        ert_cuda_bcast_strides(DY->ndim, DY->dims, in[2].ndim, in[2].dims, m.s[1]);
        memcpy(m.s[2], a->params->grad.which == 0 ? m.s[0] : m.s[1], sizeof m.s[2]);
        e = ert_cuda_binary_grad_launch(a->params->grad.fwd_op, a->params->grad.which, DY->data, in[1].data,
                                        in[2].data, out[0].data, out[0].n_elems, &m, DY->n_elems, st);
        break;
    }
    case ERT_OP_REDUCE_TO: if (out[0].data) e = reduce_to(a, st); break;
    case ERT_OP_BROADCAST_TO: {
        if (!out[0].data) break;
        const ert_grad_params *p = &a->params->grad;
        ert_cuda_map m;
        map_of(&m, out[0].ndim, out[0].dims);
        ert_cuda_bcast_strides(out[0].ndim, out[0].dims, p->ndim, p->shape, m.s[0]);
        e = ert_cuda_broadcast_to_launch(in[0].data, out[0].data, &m, out[0].n_elems, p->scale, st);
        break;
    }
    case ERT_OP_MATMUL_GRAD: return out[0].data ? matmul_grad(env, a) : ERT_OK;
    case ERT_OP_MAXPOOL_GRAD: case ERT_OP_AVGPOOL_GRAD:
        if (out[0].data)
            e = ert_cuda_pool_grad_launch(a->op == ERT_OP_MAXPOOL_GRAD, &a->params->pool, &in[1], in[0].data, &in[0],
                                          out[0].data, st);
        break;
    case ERT_OP_GLOBAL_AVGPOOL_GRAD:
        if (out[0].data && in[0].dtype != ERT_DTYPE_F32)
            e = ert_cuda_gap_grad_h_launch(in[0].dtype, in[0].data, out[0].data, in[1].dims[0] * in[1].dims[1],
                                           spatial(&in[1]), st);
        else if (out[0].data) e = ert_cuda_gap_grad_launch(in[0].data, out[0].data, in[1].dims[0] * in[1].dims[1],
                                                      spatial(&in[1]), st);
        break;
    case ERT_OP_BATCHNORM_TRAIN: {
        const ert_grad_params *p = &a->params->grad;
        e = ert_cuda_bn_train_h_launch(in[0].dtype, in[0].data, in[1].data, in[2].data, in[3].data, in[4].data,
                                       out[0].data, a->n_out > 1 ? out[1].data : NULL,
                                       a->n_out > 2 ? out[2].data : NULL, in[0].dims[0], in[0].dims[1],
                                       spatial(&in[0]), p->eps, p->momentum, p->training, p->relu, p->replay, a->workspace,
                                       st);
        break;
    }
    case ERT_OP_BATCHNORM_GRAD: {
        const ert_grad_params *p = &a->params->grad;
        e = ert_cuda_bn_grad_h_launch(in[0].dtype, in[0].data, in[1].data, in[2].data, in[3].data, in[4].data,
                                      p->relu && a->n_in > 5 ? (const float *)in[5].data : NULL, out[0].data, a->n_out > 1 ? out[1].data : NULL,
                                      a->n_out > 2 ? out[2].data : NULL, in[1].dims[0], in[1].dims[1],
                                      spatial(&in[1]), p->eps, p->frozen, a->workspace, st);
        break;
    }
    case ERT_OP_SOFTMAX_GRAD: case ERT_OP_LOGSOFTMAX_GRAD: {
        if (!out[0].data) break;
        const ert_tview *Y = &in[1];
        int64_t axis = a->params->axis.axis, outer = 1, inner = 1;
        for (int i = 0; i < Y->ndim; i++) {
            if (i < axis) outer *= Y->dims[i];
            else if (i > axis) inner *= Y->dims[i];
        }
        e = ert_cuda_softmax_grad_launch(a->op == ERT_OP_LOGSOFTMAX_GRAD, in[0].data, Y->data, out[0].data, outer,
                                         Y->ndim ? Y->dims[axis] : 1, inner, st);
        break;
    }
    case ERT_OP_LAYERNORM_GRAD: { /* (dy, x, scale) -> (dx, dscale, dB), like ert_cpu_layernorm_grad */
        const ert_tview *X = &in[1];
        int64_t axis = a->params->norm.axis, inner = 1, outer = 1;
        for (int i = 0; i < X->ndim; i++) *(i < axis ? &outer : &inner) *= X->dims[i];
        e = ert_cuda_layernorm_grad_launch(in[0].data, X->data, in[2].data, in[2].n_elems, out[0].data,
                                           a->n_out > 1 ? out[1].data : NULL, a->n_out > 1 ? out[1].n_elems : 0,
                                           a->n_out > 2 ? out[2].data : NULL, a->n_out > 2 ? out[2].n_elems : 0, outer,
                                           inner, a->params->norm.epsilon, st);
        break;
    }
    case ERT_OP_SLICE_GRAD: if (out[0].data) e = slice_grad(a, st); break;
    case ERT_OP_GATHER_GRAD: {
        if (!out[0].data) break;
        const ert_tview *DX = &out[0], *I = &in[1];
        if (I->dtype != ERT_DTYPE_I64 && I->dtype != ERT_DTYPE_I32) return ERT_E_UNSUPPORTED;
        int64_t axis = a->params->gather.axis, outer = 1, inner = 1;
        for (int d = 0; d < axis; d++) outer *= DX->dims[d];
        for (int d = (int)axis + 1; d < DX->ndim; d++) inner *= DX->dims[d];
        /* in[2] (trainer on a device): the step's status, where an index out of range is reported */
        int64_t *status = a->n_in > 2 && in[2].dtype == ERT_DTYPE_I64 && in[2].n_elems >= 2 ? in[2].data : NULL;
        if (a->n_in > 2 && !status) return ERT_E_INTERNAL;
        e = ert_cuda_gather_grad_launch(in[0].data, I->data, I->dtype == ERT_DTYPE_I64, DX->data, DX->n_elems, outer,
                                        DX->dims[axis], I->n_elems, inner, status, a->params->gather.tag, st);
        break;
    }
    case ERT_OP_DROPOUT_TRAIN: {
        const ert_grad_params *p = &a->params->grad;
        e = ert_cuda_dropout_train_launch(in[0].data, in[1].data, out[0].data, out[1].data, in[0].n_elems, p->ratio,
                                          p->training, st);
        break;
    }
    case ERT_OP_LOSS: {
        const ert_tview *Z = &in[0];
        e = ert_cuda_loss_launch(a->params->loss.kind, Z->data, in[1].data, a->n_in > 2 ? in[2].data : NULL,
                                 out[0].data, out[1].data, Z->ndim > 0 ? Z->dims[0] : 1, Z->ndim > 1 ? Z->dims[1] : 1,
                                 Z->n_elems, a->params->loss.label_smoothing, a->n_in > 3 ? in[3].data : NULL, st);
        break;
    }
    case ERT_OP_GRAD_NORM: {
        /* the inputs' pointers and sizes, from the kargs (host) at enqueue time */
        enum { CHUNK = 64 };
        const float *g[CHUNK];
        int64_t n[CHUNK];
        if (!a->workspace || a->workspace_bytes < sizeof(double)) return ERT_E_INTERNAL;
        /* with a loss scaler (mixed precision f16): + (loss, scaler) after the gradients */
        /* and the trainer's status last (a device trainer always adds it) */
        bool has_status = a->params->optim.status_in;
        int interval = a->params->optim.scale_interval,
            ng = a->n_in - (interval > 0 ? 2 : 0) - (has_status ? 1 : 0);
        if (ng < 0) return ERT_E_INTERNAL;
        const float *ls = interval > 0 ? in[ng].data : NULL;
        float *sc = interval > 0 ? in[ng + 1].data : NULL;
        const int64_t *status = has_status ? in[a->n_in - 1].data : NULL;
        if (has_status && (in[a->n_in - 1].dtype != ERT_DTYPE_I64 || !status)) return ERT_E_INTERNAL;
        for (int k0 = 0; k0 < ng || k0 == 0; k0 += CHUNK) {
            int c = ng - k0 < CHUNK ? ng - k0 : CHUNK;
            for (int k = 0; k < c; k++) g[k] = in[k0 + k].data, n[k] = in[k0 + k].n_elems;
            bool last = k0 + c >= ng;
            e = ert_cuda_grad_norm_launch(g, n, c, a->workspace, k0 == 0, last ? out[0].data : NULL,
                                          a->params->optim.clip, ls, sc, interval, status, st);
            if (e != cudaSuccess || last) break;
        }
        break;
    }
    case ERT_OP_OPTIM:
        if (a->n_in < 7) return ERT_E_INTERNAL; /* the CUDA trainer adds hyper and loss */
        e = ert_cuda_optim_launch(&a->params->optim, in[0].data, in[1].data, in[2].data, in[3].data, in[4].data,
                                  in[5].data, in[6].data, in[0].n_elems, st);
        break;
    default: return ERT_E_UNSUPPORTED;
    }
    return e == cudaSuccess ? ERT_OK : cuda_fail(env, a, e);
}

/*
 * ert_internal.h - core/'s contracts (floor 1), seen by kernels/, loaders/
 * and runtime/: context and errors, the op enum and typed params, the IR,
 * the op table and shape inference, kernel arguments, the thread pool and
 * the backend table. Floors: docs/architecture.md.
 *
 * Graph IR
 *   A model is a list of tensors and a list of nodes (topologically sorted at
 *   finish). Tensors are referred to by index. Node attributes are kept in the
 *   generic ONNX-like form (ert_attr_val) so loaders and the .ert format only
 *   copy them; at session create each op's `prepare` parses them into a typed
 *   params struct (ert_op_params) and infers output shapes.
 *
 * Session pipeline (runtime/session.c, passes in runtime/passes/)
 *   copy graph -> fix dynamic dims -> for each node in order: prepare (shape
 *   inference) and fold it if all inputs are constant -> passes (BN fold,
 *   fusion, dead nodes) -> memory plan -> arena -> run.
 *
 * Trainer pipeline (runtime/train/: trainer.c, autodiff.c, ...)
 *   copy graph -> fix dims -> pick parameters -> prepare (parameters never
 *   fold; BN/Dropout in training form) -> loss node -> backward nodes (the
 *   training-only ops at the end of ert_op) -> gradient norm + optimizer
 *   nodes -> one memory plan over the whole schedule -> arena -> step.
 */
#ifndef ERT_INTERNAL_H
#define ERT_INTERNAL_H

#include "edgert.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The library is C: its functions keep C linkage for the CUDA (C++) files. */
#ifdef __cplusplus
extern "C" {
#endif

#define ERT_ALIGN 256          /* arena alignment of every planned block */
/* Internal session flag (never in edgert.h): the backend serves a trainer,
 * whose conv filters are recomputed every step (no create-time rewrites). */
#define ERT_SESSION_TRAINER_ (1u << 31)
#define ERT_HOST_ALIGN 64      /* alignment of weights in .ert and host blocks */
#define ERT_MAX_NODE_IO 16     /* not a hard limit of the IR: Concat/Sum may have more; see ert_node */
#define ERT_ERRMSG_SIZE 512

#if defined(__GNUC__)
#define ERT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ERT_PRINTF(a, b)
#endif

/* Internal invariants, compiled out in release builds. Never aborts. */
#ifndef NDEBUG
#define ERT_ASSERT(c) do { if (!(c)) __builtin_trap(); } while (0)
#else
#define ERT_ASSERT(c) ((void)0)
#endif

/* ------------------------------------------------------------------ context */

/* Which CPU kernel variants may run. The defaults take the fastest copy
 * the CPU runs (its ISA is read at run time: cpuid, HWCAP) and each fast
 * kernel's cost rule; tests lower them to run the slower variants beside
 * the fast ones on one machine. It lives in the context
 * (ert_context_set_kernel_choice), a session or trainer copies it at create
 * (ert_graph.kc), and kernels read it from their arguments
 * (ert_kargs.choice, ert_sgemm_args.choice, ert_dw2d.choice), where NULL
 * means the defaults: no process-wide switch. */
typedef struct ert_kernel_choice {
    int gemm_cap;  /* the fastest SGEMM micro-kernel allowed (an ert_cpu_gemm_kernel, kernels/cpu/cpu_gemm.h;
                    * ERT_KC_GEMM_ANY: no cap); the depthwise and Winograd ISA copies follow it too */
    bool dw_plain; /* every depthwise conv takes conv.c's plain loops, never the direct kernel */
    int wino;      /* Winograd F(4x4,3x3): 0 = its cost rule, 1 = every eligible conv, -1 = none */
    bool norm_plain; /* LayerNorm takes norm.c's plain rows, never its vector ones */
} ert_kernel_choice;
#define ERT_KC_GEMM_ANY 127
static inline ert_kernel_choice ert_kernel_choice_of(const ert_kernel_choice *kc) {
    return kc ? *kc : (ert_kernel_choice){.gemm_cap = ERT_KC_GEMM_ANY, .dw_plain = false, .wino = 0, .norm_plain = false};
}

struct ert_context {
    ert_log_fn log;
    void *log_user;
    ert_log_level log_level;
    ert_kernel_choice kc; /* copied by each session and trainer made on it */
    char err[ERT_ERRMSG_SIZE];
};

/* Internal, for tests (not in edgert.h): the kernel choice of the sessions
 * and trainers created on ctx from now on (kc NULL: the defaults); those
 * made before keep theirs. Not thread-safe against a create on ctx. */
void ert_context_set_kernel_choice(ert_context *ctx, const ert_kernel_choice *kc);

/* Record a detailed message on ctx (may be NULL) and return `st`. Also logs it
 * at ERROR level. */
ert_status ert_set_error(ert_context *ctx, ert_status st, const char *fmt, ...) ERT_PRINTF(3, 4);
ert_status ert_set_errorv(ert_context *ctx, ert_status st, const char *fmt, va_list ap);
void ert_log(ert_context *ctx, ert_log_level lvl, const char *fmt, ...) ERT_PRINTF(3, 4);

/* core/fileio.c: open `path` for reading, a regular file only (a FIFO, device,
 * socket or folder is refused with ERT_E_IO naming what it is), without
 * blocking: opening a FIFO with no writer would wait forever. *fd (O_CLOEXEC,
 * blocking reads) and *size on success; the caller closes *fd. */
ert_status ert_file_open_read(ert_context *ctx, const char *path, int *fd, uint64_t *size);

/* Overflow-checked size arithmetic: return false on overflow. */
static inline bool ert_mul_ovf(size_t a, size_t b, size_t *r) { return __builtin_mul_overflow(a, b, r); }
static inline bool ert_add_ovf(size_t a, size_t b, size_t *r) { return __builtin_add_overflow(a, b, r); }
static inline size_t ert_align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ------------------------------------------------------------------ ops */

/* Internal op codes. Append-only: stored (by name, not number) in .ert, but
 * keep order stable anyway. ONNX names are in ert_op_table. */
typedef enum ert_op {
    ERT_OP_INVALID = 0,
    /* nn */
    ERT_OP_CONV, ERT_OP_CONV_TRANSPOSE, ERT_OP_BATCHNORM,
    ERT_OP_MATMUL, ERT_OP_GEMM,
    ERT_OP_MAXPOOL, ERT_OP_AVGPOOL, ERT_OP_GLOBAL_AVGPOOL, ERT_OP_GLOBAL_MAXPOOL,
    ERT_OP_LAYERNORM, ERT_OP_SOFTMAX, ERT_OP_LOGSOFTMAX,
    /* unary element-wise (one kernel, ert_unary_kind) */
    ERT_OP_RELU, ERT_OP_LEAKY_RELU, ERT_OP_CLIP, ERT_OP_SIGMOID, ERT_OP_TANH,
    ERT_OP_HARD_SIGMOID, ERT_OP_HARD_SWISH, ERT_OP_SILU, ERT_OP_GELU, ERT_OP_ERF,
    ERT_OP_SQRT, ERT_OP_EXP, ERT_OP_LOG, ERT_OP_NEG, ERT_OP_ABS, ERT_OP_RECIPROCAL,
    ERT_OP_FLOOR, ERT_OP_CEIL,
    /* binary element-wise with broadcasting (one kernel, ert_binary_kind) */
    ERT_OP_ADD, ERT_OP_SUB, ERT_OP_MUL, ERT_OP_DIV, ERT_OP_POW,
    ERT_OP_MIN, ERT_OP_MAX, ERT_OP_EQUAL, ERT_OP_LESS, ERT_OP_GREATER,
    ERT_OP_WHERE,
    /* reductions */
    ERT_OP_REDUCE_MEAN, ERT_OP_REDUCE_SUM, ERT_OP_REDUCE_MAX,
    /* data movement / shape */
    ERT_OP_IDENTITY, ERT_OP_DROPOUT, ERT_OP_FLATTEN, ERT_OP_RESHAPE, ERT_OP_SQUEEZE,
    ERT_OP_UNSQUEEZE, ERT_OP_TRANSPOSE, ERT_OP_CONCAT, ERT_OP_SPLIT, ERT_OP_SLICE,
    ERT_OP_GATHER, ERT_OP_PAD, ERT_OP_RESIZE, ERT_OP_EXPAND, ERT_OP_CAST,
    ERT_OP_SHAPE, ERT_OP_CONSTANT_OF_SHAPE, ERT_OP_RANGE,
    /* training (made by the trainer only: their prepare refuses them in model
     * files). Forward ops in training mode, backward ops, loss, optimizer. */
    ERT_OP_BATCHNORM_TRAIN,  /* (x, scale, B, rmean, rvar) -> (y, mean, invstd); updates rmean/rvar in place */
    ERT_OP_DROPOUT_TRAIN,    /* (x, rng u64[1]) -> (y, mask f32 = 0 or 1/(1-ratio)); advances rng */
    ERT_OP_CONV_GRAD_WEIGHT, /* (dy, x) -> dw; conv params */
    ERT_OP_REDUCE_TO,        /* (dy) -> sum of dy over broadcast dims * scale; grad params shape */
    ERT_OP_ACT_GRAD,         /* (dy, x) -> dx; unary params of the forward op */
    ERT_OP_BINARY_GRAD,      /* (dy, a, b) -> d(a or b); grad params which, fwd_op */
    ERT_OP_MATMUL_GRAD,      /* (dy, a, b) -> d(a or b), batch broadcast reduced; grad params which */
    ERT_OP_MAXPOOL_GRAD,     /* (dy, x) -> dx; pool params */
    ERT_OP_AVGPOOL_GRAD,     /* (dy, x) -> dx; pool params */
    ERT_OP_GLOBAL_AVGPOOL_GRAD, /* (dy, x) -> dx */
    ERT_OP_BATCHNORM_GRAD,   /* (dy, x, scale, mean, invstd | rmean, rvar) -> (dx, dscale, dB); grad params */
    ERT_OP_LAYERNORM_GRAD,   /* (dy, x, scale) -> (dx, dscale, dB); norm params */
    ERT_OP_SOFTMAX_GRAD,     /* (dy, y) -> dx; axis params */
    ERT_OP_LOGSOFTMAX_GRAD,  /* (dy, y) -> dx; axis params */
    ERT_OP_SLICE_GRAD,       /* (dy) -> dx (zero outside the slice); slice params */
    ERT_OP_FILL_ZERO,        /* () -> zeros */
    ERT_OP_LOSS,             /* (logits, target, [class weights]) -> (loss f32[1], dlogits); loss params */
    ERT_OP_GRAD_NORM,        /* (grads...) -> f32[2] {global L2 norm, clip scale}; optim params */
    ERT_OP_OPTIM,            /* (w, g, [m], [v], f32[2] norm) -> (); updates w, m, v in place; optim params */
    ERT_OP_BROADCAST_TO,     /* (dy) -> dy broadcast to the output's shape * scale (ReduceMean/Sum backward); grad params shape = dy's shape with the output's rank */
    ERT_OP_GATHER_GRAD,      /* (dy, indices) -> d data (zeros, then dy rows added at the indices); gather params */
    /* inference ops added after the training block (the enum is append-only) */
    ERT_OP_SIZE,             /* shape op: folded at create like Shape */
    ERT_OP_ARGMAX, ERT_OP_ARGMIN,
    ERT_OP_ELU, ERT_OP_SELU, ERT_OP_SOFTPLUS, ERT_OP_MISH, /* unary (ert_cpu_unary) */
    ERT_OP_MEAN,             /* variadic, broadcasting (ert_cpu_binary) */
    ERT_OP_PRELU,            /* (x, slope), slope broadcast to x (ert_cpu_binary) */
    ERT_OP_INSTANCENORM,     /* (x (N, C, D1...), scale[C], B[C]) -> y; norm params (epsilon) */
    ERT_OP_TILE,             /* (x, repeats i64[rank], constant) -> x repeated along each dim; no params */
    ERT_OP_CUMSUM,           /* (x, axis i32/i64 scalar, constant) -> running sums along axis; cumsum params */
    ERT_OP_NOT,              /* (x bool) -> y bool, element-wise logical not; no params */
    ERT_OP_SIN, ERT_OP_COS,  /* (x f32) -> y; no params */
    ERT_OP_MOD,              /* (a, b) broadcast -> remainder; mod params */
    /* ReduceMin/Prod/L1/L2/SumSquare/LogSum/LogSumExp: like ReduceSum (axis params) */
    ERT_OP_REDUCE_MIN, ERT_OP_REDUCE_PROD, ERT_OP_REDUCE_L1, ERT_OP_REDUCE_L2,
    ERT_OP_REDUCE_SUM_SQUARE, ERT_OP_REDUCE_LOG_SUM, ERT_OP_REDUCE_LOG_SUM_EXP,
    ERT_OP_SCATTER_ND,       /* (data, indices i64 (..., k), updates) -> data with updates written at the indices; scatter params */
    ERT_OP_SCATTER_ELEMENTS, /* (data, indices, updates), one rank -> data with updates[i] at indices[i] on axis; scatter params */
    ERT_OP_GATHER_ELEMENTS,  /* (data, indices), one rank -> y[i] = data[i with indices[i] on axis]; scatter params */
    /* quantization (core/ops/quant.c, kernels/cpu/quant.c; quant params) */
    ERT_OP_QUANTIZE_LINEAR,  /* (x f32, scale f32, [zp i8/u8]) -> y i8/u8 */
    ERT_OP_DEQUANTIZE_LINEAR, /* (x i8/u8/i32, scale f32, [zp]) -> y f32 */
    ERT_OP_QLINEAR_CONV,     /* (x, xs, xzp, w, ws, wzp, ys, yzp, [B i32]) -> y i8/u8; quant params (conv) */
    ERT_OP_QLINEAR_MATMUL,   /* (a, as, azp, b, bs, bzp, ys, yzp, [bias i32, ert extension]) -> y i8/u8 */
    ERT_OP_MATMUL_INTEGER,   /* (a, b, [azp], [bzp]) -> y i32 */
    ERT_OP_CONV_INTEGER,     /* (x, w, [xzp], [wzp]) -> y i32; quant params (conv) */
    ERT_OP_ATTENTION,        /* ert.Attention (q, k, v, [bias]) -> softmax(scale q k^T + bias) v; attn params
                              * (core/ops/attention.c); made by the attention pass, or from a model with attributes */
    ERT_OP_QLINEAR_ADD,      /* ert.QLinearAdd (a, as, [azp], b, bs, [bzp], ys, [yzp]) -> y i8/u8: the Q/DQ pass's
                              * Q([Relu](DQ(a) + DQ(b))), a, b, y of one shape, per tensor; quant params (conv.act) */
    ERT_OP_QLUT,             /* ert.QLut (x i8/u8, table[256] i8/u8) -> y[i] = table[(uint8_t)x[i]], x's shape, the
                              * table's dtype: the Q/DQ pass's Q(f(DQ(x))) for an element-wise f; quant params (qdt) */
    ERT_OP_COUNT
} ert_op;

/* Activation fused into Conv/Gemm/MatMul epilogues (and used by the unary kernel). */
typedef enum ert_act {
    ERT_ACT_NONE = 0, ERT_ACT_RELU, ERT_ACT_LEAKY_RELU, ERT_ACT_CLIP, ERT_ACT_SIGMOID,
    ERT_ACT_TANH, ERT_ACT_HARD_SIGMOID, ERT_ACT_HARD_SWISH, ERT_ACT_SILU, ERT_ACT_GELU,
} ert_act;

typedef struct ert_act_params {
    ert_act kind;
    float alpha, beta; /* LeakyRelu alpha; Clip min=alpha max=beta; HardSigmoid alpha, beta */
} ert_act_params;

/* Typed params, filled by each op's prepare from the generic attributes. */
typedef struct ert_conv_params {
    int nsp;                 /* spatial dims: 1, 2 or 3 */
    int64_t kernel[3], stride[3], dilation[3];
    int64_t pad_begin[3], pad_end[3];
    int64_t out_pad[3];      /* ConvTranspose */
    int64_t group;
    bool has_bias;           /* input 2 present */
    bool has_residual;       /* fused Add: input 3 is added before the activation */
    ert_act_params act;      /* fused activation */
    bool nhwc;               /* CUDA f16/bf16 sessions (session.c step 4c): x, y and the residual are stored
                                channels-last, their dims are (N, H, W, C); the filter stays (K, C/group, R, S) */
    bool const_w;            /* trainer: filter and bias are constants (frozen prefix), so the CUDA backend may
                                treat the conv like an inference one (filter rewritten, epilogue fused) */
    bool has_in_scale;       /* fused squeeze-excitation Mul (sessions on a backend with ERT_FUSE_CONV_IN_SCALE):
                                input 5, (N, C) floats, multiplies input channel c of image n; group 1 only */
    bool has_scale;          /* CPU trainer only: input 4 (M) multiplies each output channel before the bias
                                (a frozen BatchNorm folded in while the filter stays the model's own) */
} ert_conv_params;
/* Fused epilogues are expressed as extra attributes so fused graphs survive
 * .ert round trips and can be tested directly: Conv/ConvTranspose/Gemm/MatMul
 * prepare reads "ert_act" (INT, an ert_act), "ert_act_alpha", "ert_act_beta"
 * (FLOAT); a 4th Conv input is a residual added before the activation. */

typedef struct ert_pool_params {
    int nsp;
    int64_t kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
    bool ceil_mode;
    bool count_include_pad;  /* AveragePool */
    bool nhwc;               /* x and y stored channels-last, dims (N, H, W, C) (2-D only; also set on
                                GlobalAverage/MaxPool, whose other fields are unused) */
} ert_pool_params;

typedef struct ert_gemm_params {
    float alpha, beta;
    bool trans_a, trans_b;
    bool has_c;
    ert_act_params act;      /* fused activation */
} ert_gemm_params;

typedef struct ert_norm_params {
    float epsilon;
    float momentum;          /* BatchNorm (training) */
    int64_t axis;            /* LayerNorm: normalised dims are [axis, ndim) (already made positive) */
    bool training;           /* BatchNorm training_mode=1: batch statistics, outputs 1, 2 are running mean/var */
} ert_norm_params;

typedef struct ert_axis_params {
    int64_t axis;            /* made positive by prepare */
    int64_t n_axes;          /* Reduce/Squeeze/Unsqueeze */
    int64_t axes[ERT_MAX_DIMS];
    bool keepdims;
    bool noop_with_empty_axes;
    bool select_last_index;  /* ArgMax/ArgMin: ties give the last index */
} ert_axis_params;

typedef struct ert_unary_params {
    ert_act_params act;      /* activation-like unary ops */
    float alpha;             /* LeakyRelu alpha, Elu alpha, Selu alpha... */
    float gamma;             /* Selu gamma */
    int64_t ilo, ihi;        /* Clip on integer dtypes: exact bounds (lo <= hi) */
} ert_unary_params;

typedef struct ert_transpose_params {
    int64_t perm[ERT_MAX_DIMS];
} ert_transpose_params;

typedef struct ert_slice_params {
    /* fully resolved per dim of the input (defaults: start 0, step 1, whole dim) */
    int64_t start[ERT_MAX_DIMS], step[ERT_MAX_DIMS];
} ert_slice_params;

typedef struct ert_pad_params {
    int mode;                /* 0 constant, 1 reflect, 2 edge, 3 wrap */
    int64_t pad_begin[ERT_MAX_DIMS], pad_end[ERT_MAX_DIMS];
    double value;
} ert_pad_params;

/* Resize workspace per output coordinate of each dim: 4 int64 source indices + 4 double weights. */
#define ERT_RESIZE_WS_PER_COORD 64

typedef struct ert_resize_params {
    int mode;                /* 0 nearest, 1 linear, 2 cubic */
    float cubic_a;           /* cubic_coeff_a (default -0.75) */
    bool exclude_outside;    /* cubic: taps outside the input get weight 0, the rest renormalised */
    int coord;               /* 0 half_pixel, 1 asymmetric, 2 align_corners, 3 pytorch_half_pixel, 4 tf_crop_and_resize (CPU only), 5 half_pixel_symmetric */
    int nearest_mode;        /* 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil */
    double scale[ERT_MAX_DIMS]; /* output/input per dim */
    /* tf_crop_and_resize only: the crop box per dim, normalised to the input (0 and 1 on dims outside
     * "axes"), and the value of output elements whose source coordinate falls outside the input */
    double roi_start[ERT_MAX_DIMS], roi_end[ERT_MAX_DIMS];
    float extrapolation;
} ert_resize_params;

typedef struct ert_cast_params {
    ert_dtype to;
} ert_cast_params;

typedef struct ert_split_params {
    int64_t axis;
    int64_t n_out;
    int64_t sizes[ERT_MAX_NODE_IO];
} ert_split_params;

typedef struct ert_gather_params {
    int64_t axis;
    int32_t tag;             /* GATHER_GRAD on a device: trainer node index + 1, written to the status input
                              * (in[2]) with the first index out of range */
} ert_gather_params;

typedef struct ert_cumsum_params {
    int64_t axis;            /* made positive by prepare */
    bool exclusive;          /* y[j] sums x[..j) (j excluded) */
    bool reverse;            /* sums run from the end of the axis */
} ert_cumsum_params;

/* ScatterND / ScatterElements reduction attribute (opset 16/18). */
typedef enum ert_scatter_red {
    ERT_SCATTER_NONE = 0, ERT_SCATTER_ADD, ERT_SCATTER_MUL, ERT_SCATTER_MAX, ERT_SCATTER_MIN,
} ert_scatter_red;

typedef struct ert_scatter_params {
    int64_t axis;            /* Scatter/GatherElements: made positive by prepare */
    ert_scatter_red reduction;
} ert_scatter_params;

typedef struct ert_mod_params {
    bool fmod;               /* 1: C fmod (sign of the dividend); 0: integer mod with the divisor's sign */
} ert_mod_params;

/* QuantizeLinear / DequantizeLinear and the integer ops (core/ops/quant.c). */
typedef struct ert_quant_params {
    int64_t axis;            /* Q/DQ per-axis: the dim of x the scales run along (made positive); -1 per-tensor */
    ert_dtype qdt;           /* Q: the output's integer dtype; DQ: the input's */
    /* QLinearConv / ConvInteger: the geometry as Conv's (nhwc, residual, scale unused); conv.act.kind
     * RELU on QLinearConv/QLinearMatMul (a Relu folded in by the Q/DQ pass) clamps y at its zero point */
    ert_conv_params conv;
} ert_quant_params;

/* ert.Attention: per (batch b, head h), y = softmax(scale * q k^T + bias) v
 * with q (nq, head_dim), k and v (nk, head_dim), bias (nq, nk). Every
 * operand is a strided view of its tensor's storage, in elements:
 * {offset, batch stride, head stride, token stride, dim stride} (bias: the
 * last two are query and key strides; 0 broadcasts). So q, k and v can be
 * read straight out of a fused qkv Linear's output and y written in the
 * (batch, token, head * head_dim) layout the output projection reads. */
enum { ERT_ATTN_OFF = 0, ERT_ATTN_SB, ERT_ATTN_SH, ERT_ATTN_ST, ERT_ATTN_SD, ERT_ATTN_VIEW };
typedef struct ert_attn_params {
    int64_t batch, heads, nq, nk, head_dim;
    int64_t q[ERT_ATTN_VIEW], k[ERT_ATTN_VIEW], v[ERT_ATTN_VIEW], o[ERT_ATTN_VIEW], bias[ERT_ATTN_VIEW];
    bool has_bias;           /* input 3 */
    float scale;
} ert_attn_params;

typedef struct ert_range_params {
    int dummy;
} ert_range_params;

/* Training ops (see ert_op). */
typedef struct ert_grad_params {
    int which;               /* BINARY_GRAD/MATMUL_GRAD: input (0 or 1) whose gradient is made */
    ert_op fwd_op;           /* BINARY_GRAD: ADD/SUB/MUL/DIV */
    int ndim;                /* REDUCE_TO: output shape aligned to dy's rank (1 on reduced dims); BROADCAST_TO: dy's shape at the output's rank */
    int64_t shape[ERT_MAX_DIMS];
    float scale;             /* REDUCE_TO/BROADCAST_TO: result multiplier */
    float eps, momentum;     /* BATCHNORM_*: ONNX momentum (running = running*m + batch*(1-m)) */
    float ratio;             /* DROPOUT_TRAIN */
    bool training;           /* BATCHNORM_TRAIN/DROPOUT_TRAIN: false in eval (running stats, no dropout) */
    bool frozen;             /* BATCHNORM_GRAD: inputs 3, 4 are running mean/var (stats are constants) */
    bool relu;               /* BATCHNORM_TRAIN: y = max(bn(x), 0) (a Relu fused); BATCHNORM_GRAD: in[0] is the
                              * gradient of that y, in[5] is the BatchNorm's bias B (dy counts where
                              * (x - mean) * invstd * scale + B > 0, y recomputed as the forward did) */
    bool replay;             /* BATCHNORM_TRAIN: recompute y from x and the step's saved statistics (in[3]
                              * mean, in[4] invstd), nothing updated, one output (the trainer's backward) */
} ert_grad_params;

typedef struct ert_loss_params {
    int kind;                /* ert_loss_kind */
    float label_smoothing;
} ert_loss_params;

typedef struct ert_optim_params {
    int kind;                /* ert_optim_kind */
    float lr, momentum, weight_decay, beta1, beta2, eps, clip;
    bool nesterov;
    int64_t step;            /* steps taken before this one (Adam bias correction) */
    int scale_interval;      /* GRAD_NORM with a loss scaler input: good steps before the scale doubles */
    bool status_in;          /* GRAD_NORM on a device: the last input is the trainer's status (i64 {tag, value});
                              * when set, the norm is NaN (every update skipped) and the scaler kept */
} ert_optim_params;

typedef union ert_op_params {
    ert_grad_params grad;
    ert_loss_params loss;
    ert_optim_params optim;
    ert_conv_params conv;
    ert_pool_params pool;
    ert_gemm_params gemm;
    ert_norm_params norm;
    ert_axis_params axis;
    ert_unary_params unary;
    ert_transpose_params transpose;
    ert_slice_params slice;
    ert_pad_params pad;
    ert_resize_params resize;
    ert_cast_params cast;
    ert_split_params split;
    ert_gather_params gather;
    ert_cumsum_params cumsum;
    ert_mod_params mod;
    ert_scatter_params scatter;
    ert_quant_params quant;
    ert_attn_params attn;
} ert_op_params;

/* ------------------------------------------------------------------ IR */

typedef enum ert_role {
    ERT_ROLE_ACTIVATION = 0,
    ERT_ROLE_WEIGHT = 1,      /* constant data */
    ERT_ROLE_INPUT = 2,
    ERT_ROLE_OUTPUT = 3,      /* graph output (may also be produced by a node, always) */
    ERT_ROLE_GRAD = 4,
    ERT_ROLE_OPT_STATE = 5,
} ert_role;

typedef struct ert_tensor {
    char *name;               /* owned (or points into an mmap'd string table if ert_model.strings_mapped) */
    ert_dtype dtype;
    ert_role role;
    int ndim;
    int64_t dims[ERT_MAX_DIMS]; /* -1: dynamic (model only; sessions are concrete) */
    const void *data;         /* WEIGHT: C-order little-endian bytes */
    bool data_owned;          /* data was malloc'd by the model/session */
} ert_tensor;

typedef struct ert_attr_val {
    char *name;
    ert_attr_type type;
    int64_t i;
    float f;
    int n;
    int64_t *ints;
    float *floats;
    char *s;
} ert_attr_val;

typedef struct ert_node {
    ert_op op;
    char *name;
    int n_in, n_out;
    int32_t *in;              /* tensor indices; -1 = omitted optional input */
    int32_t *out;
    int n_attrs;
    ert_attr_val *attrs;
} ert_node;

struct ert_model {
    ert_context *ctx;
    int n_tensors, cap_tensors;
    ert_tensor *tensors;
    int n_nodes, cap_nodes;
    ert_node *nodes;
    int n_inputs, n_outputs;
    int32_t *inputs;          /* tensor indices of graph inputs, in order */
    int32_t *outputs;
    /* backing storage of weights when mapped or loaded from a blob */
    void *map_base;           /* munmap on free if map_size > 0 */
    size_t map_size;
    void *blob;               /* free() on free */
    int opset;                /* informational */
    void *name_index;         /* tensor-name hash (model.c) */
};

/* Model building helpers used by the builder and by loaders (core/model.c).
 * All return -1 / an error status on allocation failure, with ctx's message set. */
ert_model *ert_model_new(ert_context *ctx);
int32_t ert_model_add_tensor(ert_model *m, const char *name, ert_dtype dt, ert_role role,
                             int ndim, const int64_t *dims);
ert_status ert_model_add_node(ert_model *m, ert_op op, const char *name,
                              const int32_t *in, int n_in, const int32_t *out, int n_out,
                              const ert_attr *attrs, int n_attrs);
/* Append to the graph's input / output lists. */
ert_status ert_model_add_graph_input(ert_model *m, int32_t id);
ert_status ert_model_add_graph_output(ert_model *m, int32_t id);
/* Topologically sort, check every tensor is defined once, no cycles (iterative,
 * no recursion). */
ert_status ert_model_validate(ert_model *m);
int32_t ert_model_find_tensor(const ert_model *m, const char *name);
/* Rebuild the name hash after renaming tensors. */
ert_status ert_model_reindex(ert_model *m);
/* Total bytes of a tensor with concrete dims; false on overflow / dynamic dim. */
bool ert_tensor_nbytes(const ert_tensor *t, size_t *out);
bool ert_dims_nelems(int ndim, const int64_t *dims, int64_t *out);

/* Attribute lookup on a node (NULL if absent). */
const ert_attr_val *ert_node_attr(const ert_node *n, const char *name);

/* ------------------------------------------------------------------ op registry */

/* What prepare sees of a tensor. */
typedef struct ert_tinfo {
    ert_dtype dtype;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    const void *const_data;   /* non-NULL if the tensor is a known constant (weight or folded) */
} ert_tinfo;

/* prepare(): parse attributes into *params, check input dtypes/shapes, fill
 * every output's dtype/ndim/dims, and set *workspace_bytes (CPU scratch the
 * kernel needs, planned into the arena). On error, set the message with
 * ert_set_error(ctx, ...) naming the problem; the caller prefixes the node. */
typedef struct ert_prep {
    ert_context *ctx;
    const ert_node *node;
    int n_in, n_out;
    const ert_tinfo *in;      /* n_in entries; an omitted input has dtype UNDEFINED */
    ert_tinfo *out;           /* n_out entries to fill */
    ert_op_params *params;    /* to fill */
    size_t workspace_bytes;   /* to fill (0 default); size it for n_threads workers if the kernel splits scratch per thread */
    int n_threads;            /* workers the kernel may use (>= 1) */
    bool fold_ok;             /* set false to forbid constant folding (default true) */
    /* Scratch bytes of the CPU SGEMM that Conv/ConvTranspose/MatMul/Gemm
     * kernels call, C(M,N) = A(M,K) B(K,N) on n_threads workers. The caller
     * (runtime/) passes ert_cpu_backend.gemm_workspace, so core/ never sees
     * kernels/; NULL counts as 0 bytes. */
    size_t (*gemm_workspace)(int64_t M, int64_t N, int64_t K, int n_threads);
} ert_prep;

typedef ert_status (*ert_prepare_fn)(ert_prep *p);

typedef struct ert_op_def {
    ert_op op;
    const char *name;         /* ONNX op type */
    int min_in, max_in;       /* max_in -1: unbounded */
    int min_out, max_out;
    ert_prepare_fn prepare;
} ert_op_def;

const ert_op_def *ert_op_get(ert_op op);
const ert_op_def *ert_op_find(const char *name); /* NULL if unknown */

/* prepare helpers shared by op files (core/ops/op_table.c). */
ert_status ert_prep_error(ert_prep *p, ert_status st, const char *fmt, ...) ERT_PRINTF(3, 4);
int64_t ert_attr_int(const ert_node *n, const char *name, int64_t dflt);
float ert_attr_float(const ert_node *n, const char *name, float dflt);
/* Copies up to max ints; returns count, or -1 if absent. */
int ert_attr_ints(const ert_node *n, const char *name, int64_t *out, int max);
const char *ert_attr_str(const ert_node *n, const char *name, const char *dflt);
/* numpy-style broadcast of two shapes; false if incompatible. */
bool ert_broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out);
/* Read a constant integer tensor (i32 or i64) into out (max entries); returns count or -1. */
int ert_tinfo_ints(const ert_tinfo *t, int64_t *out, int max);

/* ONNX TensorProto.DataType code -> ert_dtype, UNDEFINED if unsupported (core/ops/tensor.c). */
ert_dtype ert_onnx_dtype(int code);

/* prepare functions, one file per op family in core/ops/ (conv.c, matmul.c,
 * norm.c, pool.c, softmax.c, eltwise.c, tensor.c, resize.c, ...; op_table.c
 * maps each op to its own) */
ert_status ert_prepare_conv(ert_prep *p);
ert_status ert_prepare_conv_transpose(ert_prep *p);
ert_status ert_prepare_batchnorm(ert_prep *p);
ert_status ert_prepare_matmul(ert_prep *p);
ert_status ert_prepare_gemm(ert_prep *p);
ert_status ert_prepare_pool(ert_prep *p);
ert_status ert_prepare_global_pool(ert_prep *p);
ert_status ert_prepare_layernorm(ert_prep *p);
ert_status ert_prepare_instancenorm(ert_prep *p);
ert_status ert_prepare_softmax(ert_prep *p);
ert_status ert_prepare_unary(ert_prep *p);
ert_status ert_prepare_binary(ert_prep *p);
ert_status ert_prepare_where(ert_prep *p);
ert_status ert_prepare_reduce(ert_prep *p);
ert_status ert_prepare_identity(ert_prep *p);
ert_status ert_prepare_flatten(ert_prep *p);
ert_status ert_prepare_reshape(ert_prep *p);
ert_status ert_prepare_squeeze(ert_prep *p);
ert_status ert_prepare_unsqueeze(ert_prep *p);
ert_status ert_prepare_transpose(ert_prep *p);
ert_status ert_prepare_concat(ert_prep *p);
ert_status ert_prepare_split(ert_prep *p);
ert_status ert_prepare_slice(ert_prep *p);
ert_status ert_prepare_gather(ert_prep *p);
ert_status ert_prepare_pad(ert_prep *p);
ert_status ert_prepare_resize(ert_prep *p);
ert_status ert_prepare_expand(ert_prep *p);
ert_status ert_prepare_tile(ert_prep *p);
ert_status ert_prepare_cast(ert_prep *p);
ert_status ert_prepare_shape(ert_prep *p);
ert_status ert_prepare_constant_of_shape(ert_prep *p);
ert_status ert_prepare_range(ert_prep *p);
ert_status ert_prepare_size(ert_prep *p);
ert_status ert_prepare_arg(ert_prep *p);
ert_status ert_prepare_cumsum(ert_prep *p); /* core/ops/cumsum.c */
ert_status ert_prepare_not(ert_prep *p);    /* core/ops/logic.c */
ert_status ert_prepare_trig(ert_prep *p);   /* core/ops/math.c: Sin, Cos */
ert_status ert_prepare_mod(ert_prep *p);    /* core/ops/math.c */
ert_status ert_prepare_scatter_nd(ert_prep *p);       /* core/ops/scatter.c */
ert_status ert_prepare_scatter_elements(ert_prep *p); /* core/ops/scatter.c */
ert_status ert_prepare_gather_elements(ert_prep *p);  /* core/ops/scatter.c */
ert_status ert_prepare_quantize(ert_prep *p);   /* core/ops/quant.c: QuantizeLinear */
ert_status ert_prepare_dequantize(ert_prep *p); /* core/ops/quant.c: DequantizeLinear */
ert_status ert_prepare_qlinear_conv(ert_prep *p);   /* core/ops/quant.c: QLinearConv, ConvInteger */
ert_status ert_prepare_qlinear_matmul(ert_prep *p); /* core/ops/quant.c: QLinearMatMul, MatMulInteger */
ert_status ert_prepare_attention(ert_prep *p);  /* core/ops/attention.c: ert.Attention */
ert_status ert_prepare_qlinear_add(ert_prep *p); /* core/ops/quant.c: ert.QLinearAdd */
ert_status ert_prepare_qlut(ert_prep *p);        /* core/ops/quant.c: ert.QLut */
/* The attention pass's check of params it built (dtypes, every view inside
 * its tensor, y written exactly once): ERT_OK and the CPU kernel's workspace
 * bytes, or a status with the message on ctx (core/ops/attention.c). */
ert_status ert_attn_check(ert_context *ctx, const ert_attn_params *ap, const ert_tinfo *in, int n_in, const ert_tinfo *out,
                          int n_threads, size_t *ws_bytes);
/* The CPU kernel's GEMM path (kernels/cpu/attention.c): per worker of
 * n_threads, a slot of the scores (nq x nk floats, 64-byte aligned) and the
 * SGEMM's one-worker scratch (gemm_ws: ert_cpu_backend.gemm_workspace),
 * total = n_threads * slot; 0 where the path does not apply (y's
 * head_dim strided) or its size overflows. A workspace at least this big
 * lets the kernel take it. */
size_t ert_attn_gemm_workspace(const ert_attn_params *ap, int n_threads,
                               size_t (*gemm_ws)(int64_t M, int64_t N, int64_t K, int n_threads));
/* Load-time checks of a quantized node's constant scales and zero points
 * (finite, positive scales; zero points of the quantized dtype; no opset-21
 * blocks), named after the node; ERT_OK for every other op (core/ops/quant.c). */
ert_status ert_quant_check_node(const ert_model *m, const ert_node *n);
/* Output 0 gets input 0's dtype and shape (its size checked) (core/ops/math.c). */
ert_status ert_prep_out_as_in0(ert_prep *p);
/* Training-only ops: refused when they appear in a model (core/ops/op_table.c). */
ert_status ert_prepare_internal_only(ert_prep *p);


/* ------------------------------------------------------------------ kernels */

/* A concrete tensor as a kernel sees it. Contiguous, C order. */
typedef struct ert_tview {
    void *data;
    ert_dtype dtype;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    int64_t n_elems;
} ert_tview;

struct ert_threadpool;

/* Everything a kernel needs for one node. in[k].data == NULL for an omitted
 * optional input. */
typedef struct ert_kargs {
    ert_op op;
    const ert_op_params *params;
    int n_in, n_out;
    const ert_tview *in;
    ert_tview *out;
    void *workspace;          /* workspace_bytes from prepare, 64-byte aligned */
    size_t workspace_bytes;
    struct ert_threadpool *pool; /* may be NULL: run single-threaded */
    void *state;              /* backend's per-node state (bind_node) */
    void *packed;             /* packed_bytes of the weights region for this node (the backend's
                               * node_packed_bytes), filled by its bind_node; NULL when none */
    size_t packed_bytes;
    bool packed_only;         /* the weight is not in device memory (node_packed_only): bind_node
                               * sees its host copy, the kernels only packed */
    const char *name;         /* node name, for messages */
    const ert_kernel_choice *choice; /* the session's or trainer's (ert_graph.kc); NULL: the defaults */
    int n_threads;            /* the session's worker threads (also where pool is not made yet: a
                               * backend's node_workspace); 0: ert_threadpool_size(pool) */
} ert_kargs;

typedef ert_status (*ert_kernel_fn)(const ert_kargs *a);

/* Thread pool (core/threadpool.c): fixed workers made at session create;
 * parallel_for never allocates. fn(arg, begin, end) is called on disjoint
 * chunks covering [0, n); the caller thread takes part. */
typedef void (*ert_par_fn)(void *arg, int64_t begin, int64_t end);
ert_status ert_threadpool_create(int n_threads, struct ert_threadpool **out);
void ert_threadpool_free(struct ert_threadpool *tp);
int ert_threadpool_size(const struct ert_threadpool *tp);
/* grain: minimum chunk size. tp may be NULL. */
void ert_parallel_for(struct ert_threadpool *tp, int64_t n, int64_t grain, ert_par_fn fn, void *arg);

/* ------------------------------------------------------------------ backends */

/* A backend is a table of function pointers (runtime never includes CUDA
 * headers). Entries marked optional may be NULL.
 *
 * Session create calls, in order: init -> node_workspace (each node, before
 * planning) -> arena_alloc ([weights | io | activations]; unless the caller
 * gave an arena) -> io_host -> upload (weights) -> bind_node (each node,
 * pointers final) -> bind_io. ert_session_run calls run. Free: release_node,
 * io_host_free, arena_free, release. */
typedef struct ert_io_copy {
    void *host;               /* what the user reads/writes */
    void *dev;                /* what kernels read/write */
    size_t bytes;
} ert_io_copy;

/* ert_backend.fusions bits */
#define ERT_FUSE_CONV_IN_SCALE 1u /* Conv reads Mul(x, s) with s (N, C, 1, 1) as x and input 5 = s */

typedef struct ert_backend {
    const char *name;
    ert_device device;
    bool weights_in_arena;    /* must every weight be copied into the arena (device memory)? */
    ert_status (*init)(ert_context *ctx, const ert_session_options *o, void **bctx);
    void (*release)(void *bctx);
    /* optional: extra scratch a node needs on this backend (e.g. cuDNN workspace),
     * from concrete shapes (data pointers are NULL). Adds to prepare's bytes.
     * a->workspace_bytes > 0 is a budget (the trainer's room under its
     * activation peak): where the backend can choose (cuDNN convs), it
     * answers its fastest choice within it, or its unconstrained choice if
     * none fits or the one that fits is much slower (ERT_WS_SLOWER). */
    ert_status (*node_workspace)(void *bctx, const ert_kargs *a, size_t *bytes);
    /* optional: measured time (ms) of a Conv in the layout its params say
     * (data pointers NULL); *ms < 0: unknown. Session step 4c compares NCHW
     * with NHWC. */
    ert_status (*conv_time)(void *bctx, const ert_kargs *a, float *ms);
    ert_status (*arena_alloc)(void *bctx, size_t bytes, void **ptr);
    void (*arena_free)(void *bctx, void *ptr);
    /* The io region (graph inputs and outputs) lives in the arena at `dev`;
     * io_host returns the pointer the user reads and writes: `dev` itself on
     * CPU and unified memory, a pinned host mirror on a discrete GPU. */
    ert_status (*io_host)(void *bctx, void *dev, size_t bytes, void **host);
    void (*io_host_free)(void *bctx, void *host, void *dev);
    /* copy host bytes to arena memory, at create */
    ert_status (*upload)(void *bctx, void *dst, const void *src, size_t n);
    /* optional: copy arena bytes to host memory (synchronous; tests, checkpoints) */
    ert_status (*download)(void *bctx, void *dst, const void *src, size_t n);
    /* optional: per-node state once pointers are final (descriptors, algorithms) */
    ert_status (*bind_node)(void *bctx, ert_kargs *a);
    void (*release_node)(void *bctx, ert_kargs *a);
    /* optional: the input copies (host->dev before run) and output copies
     * (dev->host after) when host != dev */
    ert_status (*bind_io)(void *bctx, const ert_io_copy *in, int n_in, const ert_io_copy *out, int n_out);
    /* run every node in order; on failure return the status and write the
     * index of the failing node to *failed. */
    ert_status (*run)(void *bctx, ert_kargs *const *nodes, int n, int *failed);
    /* optional: like run, without a CUDA graph (and leaving any captured one
     * alone): nodes whose parameters differ from the captured run */
    ert_status (*run_eager)(void *bctx, ert_kargs *const *nodes, int n, int *failed);
    /* optional: like run_eager, with each node's device time in ms[k] */
    ert_status (*run_timed)(void *bctx, ert_kargs *const *nodes, int n, int *failed, float *ms);
    bool (*supports)(ert_op op, ert_dtype dt);
    /* optional: like supports, from the node's concrete shapes, dtypes and
     * params (data NULL): also refuses the variants the backend lacks (a
     * Resize mode...). Session create asks it before lowering the precision. */
    bool (*supports_node)(const ert_kargs *a);
    /* optional: bind a node this backend has no kernel for, to run `cpu` (a
     * CPU kernel: f32 float data, host memory) in order with the others;
     * pointers final, like bind_node, and release_node frees it. A backend
     * that has it never makes a session fail for a missing op. */
    ert_status (*bind_host_node)(void *bctx, ert_kargs *a, ert_kernel_fn cpu);
    /* optional: bytes of kernel-ready constant data for a node whose weight
     * (input 1; QLinearConv's input 3) is a constant, e.g. the CPU's GEMM operands packed in the
     * micro-kernel's layout; from concrete shapes (data NULL). Session create
     * plans them in the weights region and passes them as a->packed to
     * bind_node, which fills them. 0: none. */
    size_t (*node_packed_bytes)(const ert_kargs *a);
    /* optional, for a node with packed bytes on a weights_in_arena backend: will
     * its kernel read only the packed copy, never the weight itself? Then
     * a weight whose every reader says so takes no room in the arena: bind
     * passes it to bind_node as its host copy (a->in[wi].data, with
     * a->packed_only set) and clears that pointer afterwards, so bind_node
     * must pack from it or fail (never fall back to a kernel that reads the
     * weight). Asked at plan time with the constants' host data in a->in. */
    bool (*node_packed_only)(void *bctx, const ert_kargs *a);
    /* fusions the kernels implement beyond the common ones (ERT_FUSE_*):
     * the shared passes (runtime/passes/fuse.c) ask, never guess */
    unsigned fusions;
    /* optional: the CPU SGEMM's scratch bytes (see ert_prep.gemm_workspace) */
    size_t (*gemm_workspace)(int64_t M, int64_t N, int64_t K, int n_threads);
    /* optional: the CPU ERT_OP_CONV_GRAD_WEIGHT kernel's scratch bytes for
     * x and dy of these dims (the trainer's autodiff sizes the node with it) */
    size_t (*conv_grad_weight_workspace)(const ert_conv_params *p, const int64_t *x_dims, const int64_t *dy_dims,
                                         int n_threads);
    /* optional: the plan cache (ert_session_options.plan_cache_dir). open:
     * right after init (before node_workspace and conv_time) with the folder
     * and the model's shape signature (runtime/plan_sig.c); reads the file.
     * save: once every node is bound (sessions and trainers); writes the
     * file if create measured, and frees what only create needed (timing
     * scratch). Neither fails a create (problems are logged). */
    void (*plan_cache_open)(void *bctx, const char *dir, uint64_t signature);
    void (*plan_cache_save)(void *bctx);
    /* optional: the backend's part of ert_create_stats (mode, plan_cache,
     * n_searches, n_cached, measure_ms, finalize_ms) */
    void (*create_stats)(void *bctx, ert_create_stats *out);
} ert_backend;



/* fp16 / bf16 conversion: public (edgert.h), in core/fp16.c. The portable
 * fp16 versions below are what the public ones use where the CPU has no
 * conversion instruction, and the oracle for the aarch64 FCVT path. */
float ert_f16_to_f32_plain(uint16_t h);
uint16_t ert_f32_to_f16_plain(float f);
/* Arrays (dst and src do not overlap): the bits of the scalar functions, F16C
 * on x86 where the CPU has it. */
void ert_f32_to_f16_n(uint16_t *dst, const float *src, size_t n);
void ert_f16_to_f32_n(float *dst, const uint16_t *src, size_t n);
void ert_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n);

/* Plan cache file (core/plan_cache.c: format and rules at its top). A read
 * that is not a HIT is a miss, logged with the reason, never an error. */
#define ERT_PLAN_CACHE_VERSION 1
#define ERT_PLAN_CACHE_KEY_MAX 4096
#define ERT_PLAN_CACHE_FILE_MAX ((uint64_t)64 << 20)
typedef enum ert_plan_cache_result {
    ERT_PLAN_CACHE_HIT = 0,
    ERT_PLAN_CACHE_ABSENT,      /* no file */
    ERT_PLAN_CACHE_STALE_KEY,   /* another GPU, driver, library version or model */
    ERT_PLAN_CACHE_BAD_VERSION, /* another file format */
    ERT_PLAN_CACHE_CORRUPT,     /* magic, sizes or CRC wrong */
    ERT_PLAN_CACHE_TRUNCATED,
    ERT_PLAN_CACHE_UNREADABLE,  /* permissions, not a regular file */
} ert_plan_cache_result;
const char *ert_plan_cache_result_str(ert_plan_cache_result r);
/* FNV-1a 64: start with ERT_FNV64_INIT, chain calls (names, signatures). */
#define ERT_FNV64_INIT 0xcbf29ce484222325ull
uint64_t ert_fnv64(uint64_t h, const void *data, size_t n);
/* dir/<16 hex digits of the key's hash>.ertplan into out (cap bytes). */
ert_status ert_plan_cache_path(const char *dir, const char *key, char *out, size_t cap);
/* On HIT *payload is malloc'd (free()) with *n bytes; otherwise NULL and 0.
 * Returns ERT_OK whatever the file holds (ERT_E_ARG for NULL arguments). */
ert_status ert_plan_cache_read(ert_context *ctx, const char *path, const char *key, void **payload, size_t *n,
                               ert_plan_cache_result *res);
/* Atomic write, folders made as needed; failures logged (WARN) and returned. */
ert_status ert_plan_cache_write(ert_context *ctx, const char *path, const char *key, const void *payload, size_t n);
/* Payload records: (u32 tag, u32 len, len bytes)... A growing buffer for
 * writing (create time only) and a bounds-checked reader: 1 a record, 0 the
 * end, -1 malformed (stop trusting the payload). */
typedef struct ert_plan_buf {
    uint8_t *p;
    size_t n, cap;
    bool failed;
} ert_plan_buf;
ert_status ert_plan_rec_put(ert_plan_buf *b, uint32_t tag, const void *data, uint32_t len);
void ert_plan_buf_free(ert_plan_buf *b);
int ert_plan_rec_next(const void *payload, size_t n, size_t *pos, uint32_t *tag, const void **data, uint32_t *len);

/* CRC-32 (IEEE 802.3, as zlib) (core/crc32.c) */
uint32_t ert_crc32(uint32_t crc, const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* ERT_INTERNAL_H */

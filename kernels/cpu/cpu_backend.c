/* CPU backend table: op -> kernel. */
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <stdlib.h>
#include <string.h>

/* Indexed by ert_op (core/ops/op_table.c has the same guard). */
_Static_assert(ERT_OP_COUNT == 119, "ERT_OP_COUNT changed: add the new op's CPU kernel to KERNELS");
static const ert_kernel_fn KERNELS[ERT_OP_COUNT] = {
    [ERT_OP_CONV] = ert_cpu_conv,
    [ERT_OP_CONV_TRANSPOSE] = ert_cpu_conv_transpose,
    [ERT_OP_BATCHNORM] = ert_cpu_batchnorm,
    [ERT_OP_MATMUL] = ert_cpu_matmul,
    [ERT_OP_GEMM] = ert_cpu_gemm,
    [ERT_OP_MAXPOOL] = ert_cpu_pool,
    [ERT_OP_AVGPOOL] = ert_cpu_pool,
    [ERT_OP_GLOBAL_AVGPOOL] = ert_cpu_global_pool,
    [ERT_OP_GLOBAL_MAXPOOL] = ert_cpu_global_pool,
    [ERT_OP_LAYERNORM] = ert_cpu_layernorm,
    [ERT_OP_SOFTMAX] = ert_cpu_softmax,
    [ERT_OP_LOGSOFTMAX] = ert_cpu_softmax,
    [ERT_OP_RELU] = ert_cpu_unary, [ERT_OP_LEAKY_RELU] = ert_cpu_unary, [ERT_OP_CLIP] = ert_cpu_unary,
    [ERT_OP_SIGMOID] = ert_cpu_unary, [ERT_OP_TANH] = ert_cpu_unary, [ERT_OP_HARD_SIGMOID] = ert_cpu_unary,
    [ERT_OP_HARD_SWISH] = ert_cpu_unary, [ERT_OP_SILU] = ert_cpu_unary, [ERT_OP_GELU] = ert_cpu_unary,
    [ERT_OP_ERF] = ert_cpu_unary, [ERT_OP_SQRT] = ert_cpu_unary, [ERT_OP_EXP] = ert_cpu_unary,
    [ERT_OP_LOG] = ert_cpu_unary, [ERT_OP_NEG] = ert_cpu_unary, [ERT_OP_ABS] = ert_cpu_unary,
    [ERT_OP_RECIPROCAL] = ert_cpu_unary, [ERT_OP_FLOOR] = ert_cpu_unary, [ERT_OP_CEIL] = ert_cpu_unary,
    [ERT_OP_ADD] = ert_cpu_binary, [ERT_OP_SUB] = ert_cpu_binary, [ERT_OP_MUL] = ert_cpu_binary,
    [ERT_OP_DIV] = ert_cpu_binary, [ERT_OP_POW] = ert_cpu_binary, [ERT_OP_MIN] = ert_cpu_binary,
    [ERT_OP_MAX] = ert_cpu_binary, [ERT_OP_EQUAL] = ert_cpu_binary, [ERT_OP_LESS] = ert_cpu_binary,
    [ERT_OP_GREATER] = ert_cpu_binary,
    [ERT_OP_WHERE] = ert_cpu_where,
    [ERT_OP_REDUCE_MEAN] = ert_cpu_reduce, [ERT_OP_REDUCE_SUM] = ert_cpu_reduce, [ERT_OP_REDUCE_MAX] = ert_cpu_reduce,
    [ERT_OP_IDENTITY] = ert_cpu_copy, [ERT_OP_DROPOUT] = ert_cpu_copy, [ERT_OP_FLATTEN] = ert_cpu_copy,
    [ERT_OP_RESHAPE] = ert_cpu_copy, [ERT_OP_SQUEEZE] = ert_cpu_copy, [ERT_OP_UNSQUEEZE] = ert_cpu_copy,
    [ERT_OP_TRANSPOSE] = ert_cpu_transpose,
    [ERT_OP_CONCAT] = ert_cpu_concat,
    [ERT_OP_SPLIT] = ert_cpu_split,
    [ERT_OP_SLICE] = ert_cpu_slice,
    [ERT_OP_GATHER] = ert_cpu_gather,
    [ERT_OP_PAD] = ert_cpu_pad,
    [ERT_OP_RESIZE] = ert_cpu_resize,
    [ERT_OP_EXPAND] = ert_cpu_expand,
    [ERT_OP_CAST] = ert_cpu_cast,
    [ERT_OP_SHAPE] = ert_cpu_shape,
    [ERT_OP_CONSTANT_OF_SHAPE] = ert_cpu_constant_of_shape,
    [ERT_OP_RANGE] = ert_cpu_range,
    /* training */
    [ERT_OP_BATCHNORM_TRAIN] = ert_cpu_batchnorm_train,
    [ERT_OP_DROPOUT_TRAIN] = ert_cpu_dropout_train,
    [ERT_OP_CONV_GRAD_WEIGHT] = ert_cpu_conv_grad_weight,
    [ERT_OP_REDUCE_TO] = ert_cpu_reduce_to,
    [ERT_OP_ACT_GRAD] = ert_cpu_act_grad,
    [ERT_OP_BINARY_GRAD] = ert_cpu_binary_grad,
    [ERT_OP_MATMUL_GRAD] = ert_cpu_matmul_grad,
    [ERT_OP_MAXPOOL_GRAD] = ert_cpu_pool_grad,
    [ERT_OP_AVGPOOL_GRAD] = ert_cpu_pool_grad,
    [ERT_OP_GLOBAL_AVGPOOL_GRAD] = ert_cpu_global_avgpool_grad,
    [ERT_OP_BATCHNORM_GRAD] = ert_cpu_batchnorm_grad,
    [ERT_OP_LAYERNORM_GRAD] = ert_cpu_layernorm_grad,
    [ERT_OP_SOFTMAX_GRAD] = ert_cpu_softmax_grad,
    [ERT_OP_LOGSOFTMAX_GRAD] = ert_cpu_softmax_grad,
    [ERT_OP_SLICE_GRAD] = ert_cpu_slice_grad,
    [ERT_OP_FILL_ZERO] = ert_cpu_fill_zero,
    [ERT_OP_LOSS] = ert_cpu_loss,
    [ERT_OP_GRAD_NORM] = ert_cpu_grad_norm,
    [ERT_OP_OPTIM] = ert_cpu_optim,
    [ERT_OP_BROADCAST_TO] = ert_cpu_broadcast_to,
    [ERT_OP_GATHER_GRAD] = ert_cpu_gather_grad,
    [ERT_OP_SIZE] = ert_cpu_size,
    [ERT_OP_ARGMAX] = ert_cpu_arg, [ERT_OP_ARGMIN] = ert_cpu_arg,
    [ERT_OP_ELU] = ert_cpu_unary, [ERT_OP_SELU] = ert_cpu_unary, [ERT_OP_SOFTPLUS] = ert_cpu_unary,
    [ERT_OP_MISH] = ert_cpu_unary,
    [ERT_OP_MEAN] = ert_cpu_binary, [ERT_OP_PRELU] = ert_cpu_binary,
    [ERT_OP_INSTANCENORM] = ert_cpu_instancenorm,
    [ERT_OP_TILE] = ert_cpu_tile,
    [ERT_OP_CUMSUM] = ert_cpu_cumsum,
    [ERT_OP_NOT] = ert_cpu_not,
    [ERT_OP_SIN] = ert_cpu_trig, [ERT_OP_COS] = ert_cpu_trig,
    [ERT_OP_MOD] = ert_cpu_mod,
    [ERT_OP_REDUCE_MIN] = ert_cpu_reduce, [ERT_OP_REDUCE_PROD] = ert_cpu_reduce, [ERT_OP_REDUCE_L1] = ert_cpu_reduce,
    [ERT_OP_REDUCE_L2] = ert_cpu_reduce, [ERT_OP_REDUCE_SUM_SQUARE] = ert_cpu_reduce,
    [ERT_OP_REDUCE_LOG_SUM] = ert_cpu_reduce, [ERT_OP_REDUCE_LOG_SUM_EXP] = ert_cpu_reduce,
    [ERT_OP_SCATTER_ND] = ert_cpu_scatter_nd,
    [ERT_OP_SCATTER_ELEMENTS] = ert_cpu_scatter_elements,
    [ERT_OP_GATHER_ELEMENTS] = ert_cpu_gather_elements,
    [ERT_OP_QUANTIZE_LINEAR] = ert_cpu_quantize,
    [ERT_OP_DEQUANTIZE_LINEAR] = ert_cpu_dequantize,
    [ERT_OP_QLINEAR_CONV] = ert_cpu_qconv, [ERT_OP_CONV_INTEGER] = ert_cpu_qconv,
    [ERT_OP_QLINEAR_ADD] = ert_cpu_qlinear_add, [ERT_OP_QLUT] = ert_cpu_qlut,
    [ERT_OP_QLINEAR_MATMUL] = ert_cpu_qmatmul, [ERT_OP_MATMUL_INTEGER] = ert_cpu_qmatmul,
    [ERT_OP_ATTENTION] = ert_cpu_attention,
};

ert_status ert_cpu_run_node(const ert_kargs *a) {
    if (a->op <= ERT_OP_INVALID || a->op >= ERT_OP_COUNT || !KERNELS[a->op]) return ERT_E_UNSUPPORTED;
    return KERNELS[a->op](a);
}

/* Host memory: the io region is the arena's own memory (host == dev). */
static ert_status cpu_init(ert_context *ctx, const ert_session_options *o, void **bctx) {
    (void)ctx; (void)o;
    *bctx = NULL;
    return ERT_OK;
}

static void cpu_release(void *bctx) { (void)bctx; }

static ert_status cpu_arena_alloc(void *bctx, size_t bytes, void **ptr) {
    (void)bctx;
    *ptr = aligned_alloc(ERT_ALIGN, ert_align_up(bytes ? bytes : 1, ERT_ALIGN));
    return *ptr ? ERT_OK : ERT_E_NOMEM;
}

static void cpu_arena_free(void *bctx, void *ptr) { (void)bctx; free(ptr); }

static ert_status cpu_io_host(void *bctx, void *dev, size_t bytes, void **host) {
    (void)bctx; (void)bytes;
    *host = dev;
    return ERT_OK;
}

static ert_status cpu_upload(void *bctx, void *dst, const void *src, size_t n) {
    (void)bctx;
    memcpy(dst, src, n);
    return ERT_OK;
}

static ert_status cpu_run(void *bctx, ert_kargs *const *nodes, int n, int *failed) {
    (void)bctx;
    for (int k = 0; k < n; k++) {
        ert_status st = ert_cpu_run_node(nodes[k]);
        if (st != ERT_OK) {
            *failed = k;
            return st;
        }
    }
    return ERT_OK;
}

/* Constant weights packed for the SGEMM micro-kernel, once, in the arena. */
static size_t cpu_node_packed_bytes(const ert_kargs *a) {
    switch (a->op) {
    case ERT_OP_CONV: return ert_cpu_conv_packed_bytes(a);
    case ERT_OP_GEMM:
    case ERT_OP_MATMUL: return ert_cpu_matmul_packed_bytes(a);
    default: return 0;
    }
}

/* Scratch beyond prepare's: Winograd's buffers (winograd.c), or the padded
 * planes of a grouped conv (conv.c); never both (Winograd is for group 1) */
static ert_status cpu_node_workspace(void *bctx, const ert_kargs *a, size_t *bytes) {
    (void)bctx;
    *bytes = 0;
    if (a->op == ERT_OP_CONV) {
        size_t w = ert_cpu_wino_workspace(a);
        *bytes = w ? w : ert_cpu_conv_padg_workspace(a);
        if (!w) *bytes += ert_cpu_pw_workspace(a); /* 0 unless pwconv.c takes it (then padg's is 0) */
    }
    return *bytes == SIZE_MAX ? ERT_E_SHAPE : ERT_OK;
}

static ert_status cpu_bind_node(void *bctx, ert_kargs *a) {
    (void)bctx;
    if (!a->packed) return ERT_OK;
    ert_status st = a->op == ERT_OP_CONV ? ert_cpu_conv_pack(a) : ert_cpu_matmul_pack(a);
    if (st) a->packed = NULL; /* unpacked weights still work: pack per call */
    return ERT_OK;
}

static bool cpu_supports(ert_op op, ert_dtype dt) {
    (void)dt;
    return op > ERT_OP_INVALID && op < ERT_OP_COUNT && KERNELS[op] != NULL;
}

const ert_backend ert_cpu_backend = {
    .name = "cpu",
    .device = ERT_DEVICE_CPU,
    .weights_in_arena = false,
    .init = cpu_init,
    .release = cpu_release,
    .node_workspace = cpu_node_workspace,
    .arena_alloc = cpu_arena_alloc,
    .arena_free = cpu_arena_free,
    .io_host = cpu_io_host,
    .upload = cpu_upload,
    .run = cpu_run,
    .node_packed_bytes = cpu_node_packed_bytes,
    .fusions = ERT_FUSE_CONV_IN_SCALE,
    .bind_node = cpu_bind_node,
    .supports = cpu_supports,
    .gemm_workspace = ert_cpu_sgemm_workspace,
    .conv_grad_weight_workspace = ert_cpu_conv_grad_weight_workspace,
};

/* Op registry: ONNX name -> internal op, input/output counts, prepare. Also
 * the attribute and shape helpers every prepare uses. */
#include "ert_internal.h"

#include <stdio.h>
#include <string.h>

#define U (-1)
/* Indexed by ert_op: a new op does not compile until this table (and every
 * other per-op table: CPU kernels, CUDA support, backward rules) has its row. */
_Static_assert(ERT_OP_COUNT == 119, "ERT_OP_COUNT changed: add the new op's row to OPS");
static const ert_op_def OPS[ERT_OP_COUNT] = {
    [ERT_OP_CONV] = {ERT_OP_CONV, "Conv", 2, 4, 1, 1, ert_prepare_conv}, /* 4th input: fused residual */
    [ERT_OP_CONV_TRANSPOSE] = {ERT_OP_CONV_TRANSPOSE, "ConvTranspose", 2, 3, 1, 1, ert_prepare_conv_transpose},
    [ERT_OP_BATCHNORM] = {ERT_OP_BATCHNORM, "BatchNormalization", 5, 5, 1, 3, ert_prepare_batchnorm},
    [ERT_OP_MATMUL] = {ERT_OP_MATMUL, "MatMul", 2, 2, 1, 1, ert_prepare_matmul},
    [ERT_OP_GEMM] = {ERT_OP_GEMM, "Gemm", 2, 3, 1, 1, ert_prepare_gemm},
    [ERT_OP_MAXPOOL] = {ERT_OP_MAXPOOL, "MaxPool", 1, 1, 1, 1, ert_prepare_pool},
    [ERT_OP_AVGPOOL] = {ERT_OP_AVGPOOL, "AveragePool", 1, 1, 1, 1, ert_prepare_pool},
    [ERT_OP_GLOBAL_AVGPOOL] = {ERT_OP_GLOBAL_AVGPOOL, "GlobalAveragePool", 1, 1, 1, 1, ert_prepare_global_pool},
    [ERT_OP_GLOBAL_MAXPOOL] = {ERT_OP_GLOBAL_MAXPOOL, "GlobalMaxPool", 1, 1, 1, 1, ert_prepare_global_pool},
    [ERT_OP_LAYERNORM] = {ERT_OP_LAYERNORM, "LayerNormalization", 2, 3, 1, 3, ert_prepare_layernorm},
    [ERT_OP_SOFTMAX] = {ERT_OP_SOFTMAX, "Softmax", 1, 1, 1, 1, ert_prepare_softmax},
    [ERT_OP_LOGSOFTMAX] = {ERT_OP_LOGSOFTMAX, "LogSoftmax", 1, 1, 1, 1, ert_prepare_softmax},
    [ERT_OP_RELU] = {ERT_OP_RELU, "Relu", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_LEAKY_RELU] = {ERT_OP_LEAKY_RELU, "LeakyRelu", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_CLIP] = {ERT_OP_CLIP, "Clip", 1, 3, 1, 1, ert_prepare_unary}, /* min/max inputs must be constant */
    [ERT_OP_SIGMOID] = {ERT_OP_SIGMOID, "Sigmoid", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_TANH] = {ERT_OP_TANH, "Tanh", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_HARD_SIGMOID] = {ERT_OP_HARD_SIGMOID, "HardSigmoid", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_HARD_SWISH] = {ERT_OP_HARD_SWISH, "HardSwish", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_SILU] = {ERT_OP_SILU, "Silu", 1, 1, 1, 1, ert_prepare_unary}, /* not ONNX: made by fusion or the builder */
    [ERT_OP_GELU] = {ERT_OP_GELU, "Gelu", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_ERF] = {ERT_OP_ERF, "Erf", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_SQRT] = {ERT_OP_SQRT, "Sqrt", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_EXP] = {ERT_OP_EXP, "Exp", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_LOG] = {ERT_OP_LOG, "Log", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_NEG] = {ERT_OP_NEG, "Neg", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_ABS] = {ERT_OP_ABS, "Abs", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_RECIPROCAL] = {ERT_OP_RECIPROCAL, "Reciprocal", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_FLOOR] = {ERT_OP_FLOOR, "Floor", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_CEIL] = {ERT_OP_CEIL, "Ceil", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_ADD] = {ERT_OP_ADD, "Add", 2, 2, 1, 1, ert_prepare_binary},
    [ERT_OP_SUB] = {ERT_OP_SUB, "Sub", 2, 2, 1, 1, ert_prepare_binary},
    [ERT_OP_MUL] = {ERT_OP_MUL, "Mul", 2, 2, 1, 1, ert_prepare_binary},
    [ERT_OP_DIV] = {ERT_OP_DIV, "Div", 2, 2, 1, 1, ert_prepare_binary},
    [ERT_OP_POW] = {ERT_OP_POW, "Pow", 2, 2, 1, 1, ert_prepare_binary},
    [ERT_OP_MIN] = {ERT_OP_MIN, "Min", 1, U, 1, 1, ert_prepare_binary}, /* variadic */
    [ERT_OP_MAX] = {ERT_OP_MAX, "Max", 1, U, 1, 1, ert_prepare_binary}, /* variadic */
    [ERT_OP_EQUAL] = {ERT_OP_EQUAL, "Equal", 2, 2, 1, 1, ert_prepare_binary},
    [ERT_OP_LESS] = {ERT_OP_LESS, "Less", 2, 2, 1, 1, ert_prepare_binary},
    [ERT_OP_GREATER] = {ERT_OP_GREATER, "Greater", 2, 2, 1, 1, ert_prepare_binary},
    [ERT_OP_WHERE] = {ERT_OP_WHERE, "Where", 3, 3, 1, 1, ert_prepare_where},
    [ERT_OP_REDUCE_MEAN] = {ERT_OP_REDUCE_MEAN, "ReduceMean", 1, 2, 1, 1, ert_prepare_reduce},
    [ERT_OP_REDUCE_SUM] = {ERT_OP_REDUCE_SUM, "ReduceSum", 1, 2, 1, 1, ert_prepare_reduce},
    [ERT_OP_REDUCE_MAX] = {ERT_OP_REDUCE_MAX, "ReduceMax", 1, 2, 1, 1, ert_prepare_reduce},
    [ERT_OP_IDENTITY] = {ERT_OP_IDENTITY, "Identity", 1, 1, 1, 1, ert_prepare_identity},
    [ERT_OP_DROPOUT] = {ERT_OP_DROPOUT, "Dropout", 1, 3, 1, 2, ert_prepare_identity},
    [ERT_OP_FLATTEN] = {ERT_OP_FLATTEN, "Flatten", 1, 1, 1, 1, ert_prepare_flatten},
    [ERT_OP_RESHAPE] = {ERT_OP_RESHAPE, "Reshape", 2, 2, 1, 1, ert_prepare_reshape},
    [ERT_OP_SQUEEZE] = {ERT_OP_SQUEEZE, "Squeeze", 1, 2, 1, 1, ert_prepare_squeeze},
    [ERT_OP_UNSQUEEZE] = {ERT_OP_UNSQUEEZE, "Unsqueeze", 2, 2, 1, 1, ert_prepare_unsqueeze},
    [ERT_OP_TRANSPOSE] = {ERT_OP_TRANSPOSE, "Transpose", 1, 1, 1, 1, ert_prepare_transpose},
    [ERT_OP_CONCAT] = {ERT_OP_CONCAT, "Concat", 1, U, 1, 1, ert_prepare_concat},
    [ERT_OP_SPLIT] = {ERT_OP_SPLIT, "Split", 1, 2, 1, U, ert_prepare_split},
    [ERT_OP_SLICE] = {ERT_OP_SLICE, "Slice", 3, 5, 1, 1, ert_prepare_slice},
    [ERT_OP_GATHER] = {ERT_OP_GATHER, "Gather", 2, 2, 1, 1, ert_prepare_gather},
    [ERT_OP_PAD] = {ERT_OP_PAD, "Pad", 2, 4, 1, 1, ert_prepare_pad},
    [ERT_OP_RESIZE] = {ERT_OP_RESIZE, "Resize", 1, 4, 1, 1, ert_prepare_resize},
    [ERT_OP_EXPAND] = {ERT_OP_EXPAND, "Expand", 2, 2, 1, 1, ert_prepare_expand},
    [ERT_OP_CAST] = {ERT_OP_CAST, "Cast", 1, 1, 1, 1, ert_prepare_cast},
    [ERT_OP_SHAPE] = {ERT_OP_SHAPE, "Shape", 1, 1, 1, 1, ert_prepare_shape},
    [ERT_OP_CONSTANT_OF_SHAPE] = {ERT_OP_CONSTANT_OF_SHAPE, "ConstantOfShape", 1, 1, 1, 1, ert_prepare_constant_of_shape},
    [ERT_OP_RANGE] = {ERT_OP_RANGE, "Range", 3, 3, 1, 1, ert_prepare_range},
    /* training-only ops: the trainer makes them with typed params; names are
     * not ONNX and their prepare refuses them in model files */
    [ERT_OP_BATCHNORM_TRAIN] = {ERT_OP_BATCHNORM_TRAIN, "ert.BatchNormTrain", 5, 5, 3, 3, ert_prepare_internal_only},
    [ERT_OP_DROPOUT_TRAIN] = {ERT_OP_DROPOUT_TRAIN, "ert.DropoutTrain", 2, 2, 2, 2, ert_prepare_internal_only},
    [ERT_OP_CONV_GRAD_WEIGHT] = {ERT_OP_CONV_GRAD_WEIGHT, "ert.ConvGradWeight", 2, 2, 1, 1, ert_prepare_internal_only},
    [ERT_OP_REDUCE_TO] = {ERT_OP_REDUCE_TO, "ert.ReduceTo", 1, 1, 1, 1, ert_prepare_internal_only},
    [ERT_OP_ACT_GRAD] = {ERT_OP_ACT_GRAD, "ert.ActGrad", 2, 2, 1, 1, ert_prepare_internal_only},
    [ERT_OP_BINARY_GRAD] = {ERT_OP_BINARY_GRAD, "ert.BinaryGrad", 3, 3, 1, 1, ert_prepare_internal_only},
    [ERT_OP_MATMUL_GRAD] = {ERT_OP_MATMUL_GRAD, "ert.MatMulGrad", 3, 3, 1, 1, ert_prepare_internal_only},
    [ERT_OP_MAXPOOL_GRAD] = {ERT_OP_MAXPOOL_GRAD, "ert.MaxPoolGrad", 2, 2, 1, 1, ert_prepare_internal_only},
    [ERT_OP_AVGPOOL_GRAD] = {ERT_OP_AVGPOOL_GRAD, "ert.AveragePoolGrad", 2, 2, 1, 1, ert_prepare_internal_only},
    [ERT_OP_GLOBAL_AVGPOOL_GRAD] = {ERT_OP_GLOBAL_AVGPOOL_GRAD, "ert.GlobalAveragePoolGrad", 2, 2, 1, 1, ert_prepare_internal_only},
    [ERT_OP_BATCHNORM_GRAD] = {ERT_OP_BATCHNORM_GRAD, "ert.BatchNormGrad", 5, 6, 3, 3, ert_prepare_internal_only},
    [ERT_OP_LAYERNORM_GRAD] = {ERT_OP_LAYERNORM_GRAD, "ert.LayerNormGrad", 3, 3, 3, 3, ert_prepare_internal_only},
    [ERT_OP_SOFTMAX_GRAD] = {ERT_OP_SOFTMAX_GRAD, "ert.SoftmaxGrad", 2, 2, 1, 1, ert_prepare_internal_only},
    [ERT_OP_LOGSOFTMAX_GRAD] = {ERT_OP_LOGSOFTMAX_GRAD, "ert.LogSoftmaxGrad", 2, 2, 1, 1, ert_prepare_internal_only},
    [ERT_OP_SLICE_GRAD] = {ERT_OP_SLICE_GRAD, "ert.SliceGrad", 1, 1, 1, 1, ert_prepare_internal_only},
    [ERT_OP_FILL_ZERO] = {ERT_OP_FILL_ZERO, "ert.FillZero", 0, 0, 1, 1, ert_prepare_internal_only},
    [ERT_OP_LOSS] = {ERT_OP_LOSS, "ert.Loss", 2, 3, 2, 2, ert_prepare_internal_only},
    [ERT_OP_GRAD_NORM] = {ERT_OP_GRAD_NORM, "ert.GradNorm", 0, U, 1, 1, ert_prepare_internal_only},
    [ERT_OP_OPTIM] = {ERT_OP_OPTIM, "ert.Optim", 5, 5, 0, 0, ert_prepare_internal_only},
    [ERT_OP_BROADCAST_TO] = {ERT_OP_BROADCAST_TO, "ert.BroadcastTo", 1, 1, 1, 1, ert_prepare_internal_only},
    [ERT_OP_GATHER_GRAD] = {ERT_OP_GATHER_GRAD, "ert.GatherGrad", 2, 2, 1, 1, ert_prepare_internal_only},
    /* inference ops appended after the training block (enum order) */
    [ERT_OP_SIZE] = {ERT_OP_SIZE, "Size", 1, 1, 1, 1, ert_prepare_size},
    [ERT_OP_ARGMAX] = {ERT_OP_ARGMAX, "ArgMax", 1, 1, 1, 1, ert_prepare_arg},
    [ERT_OP_ARGMIN] = {ERT_OP_ARGMIN, "ArgMin", 1, 1, 1, 1, ert_prepare_arg},
    [ERT_OP_ELU] = {ERT_OP_ELU, "Elu", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_SELU] = {ERT_OP_SELU, "Selu", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_SOFTPLUS] = {ERT_OP_SOFTPLUS, "Softplus", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_MISH] = {ERT_OP_MISH, "Mish", 1, 1, 1, 1, ert_prepare_unary},
    [ERT_OP_MEAN] = {ERT_OP_MEAN, "Mean", 1, U, 1, 1, ert_prepare_binary}, /* variadic */
    [ERT_OP_PRELU] = {ERT_OP_PRELU, "PRelu", 2, 2, 1, 1, ert_prepare_binary},
    [ERT_OP_INSTANCENORM] = {ERT_OP_INSTANCENORM, "InstanceNormalization", 3, 3, 1, 1, ert_prepare_instancenorm},
    [ERT_OP_TILE] = {ERT_OP_TILE, "Tile", 2, 2, 1, 1, ert_prepare_tile}, /* repeats must be constant */
    [ERT_OP_CUMSUM] = {ERT_OP_CUMSUM, "CumSum", 2, 2, 1, 1, ert_prepare_cumsum}, /* axis must be constant */
    [ERT_OP_NOT] = {ERT_OP_NOT, "Not", 1, 1, 1, 1, ert_prepare_not},
    [ERT_OP_SIN] = {ERT_OP_SIN, "Sin", 1, 1, 1, 1, ert_prepare_trig},
    [ERT_OP_COS] = {ERT_OP_COS, "Cos", 1, 1, 1, 1, ert_prepare_trig},
    [ERT_OP_MOD] = {ERT_OP_MOD, "Mod", 2, 2, 1, 1, ert_prepare_mod},
    [ERT_OP_REDUCE_MIN] = {ERT_OP_REDUCE_MIN, "ReduceMin", 1, 2, 1, 1, ert_prepare_reduce},
    [ERT_OP_REDUCE_PROD] = {ERT_OP_REDUCE_PROD, "ReduceProd", 1, 2, 1, 1, ert_prepare_reduce},
    [ERT_OP_REDUCE_L1] = {ERT_OP_REDUCE_L1, "ReduceL1", 1, 2, 1, 1, ert_prepare_reduce},
    [ERT_OP_REDUCE_L2] = {ERT_OP_REDUCE_L2, "ReduceL2", 1, 2, 1, 1, ert_prepare_reduce},
    [ERT_OP_REDUCE_SUM_SQUARE] = {ERT_OP_REDUCE_SUM_SQUARE, "ReduceSumSquare", 1, 2, 1, 1, ert_prepare_reduce},
    [ERT_OP_REDUCE_LOG_SUM] = {ERT_OP_REDUCE_LOG_SUM, "ReduceLogSum", 1, 2, 1, 1, ert_prepare_reduce},
    [ERT_OP_REDUCE_LOG_SUM_EXP] = {ERT_OP_REDUCE_LOG_SUM_EXP, "ReduceLogSumExp", 1, 2, 1, 1, ert_prepare_reduce},
    [ERT_OP_SCATTER_ND] = {ERT_OP_SCATTER_ND, "ScatterND", 3, 3, 1, 1, ert_prepare_scatter_nd},
    [ERT_OP_SCATTER_ELEMENTS] = {ERT_OP_SCATTER_ELEMENTS, "ScatterElements", 3, 3, 1, 1, ert_prepare_scatter_elements},
    [ERT_OP_GATHER_ELEMENTS] = {ERT_OP_GATHER_ELEMENTS, "GatherElements", 2, 2, 1, 1, ert_prepare_gather_elements},
    [ERT_OP_QUANTIZE_LINEAR] = {ERT_OP_QUANTIZE_LINEAR, "QuantizeLinear", 2, 3, 1, 1, ert_prepare_quantize},
    [ERT_OP_DEQUANTIZE_LINEAR] = {ERT_OP_DEQUANTIZE_LINEAR, "DequantizeLinear", 2, 3, 1, 1, ert_prepare_dequantize},
    [ERT_OP_QLINEAR_CONV] = {ERT_OP_QLINEAR_CONV, "QLinearConv", 8, 9, 1, 1, ert_prepare_qlinear_conv},
    [ERT_OP_QLINEAR_MATMUL] = {ERT_OP_QLINEAR_MATMUL, "QLinearMatMul", 8, 9, 1, 1, ert_prepare_qlinear_matmul}, /* 9th: int32 bias (folded Gemm) */
    [ERT_OP_MATMUL_INTEGER] = {ERT_OP_MATMUL_INTEGER, "MatMulInteger", 2, 4, 1, 1, ert_prepare_qlinear_matmul},
    [ERT_OP_CONV_INTEGER] = {ERT_OP_CONV_INTEGER, "ConvInteger", 2, 4, 1, 1, ert_prepare_qlinear_conv},
    [ERT_OP_ATTENTION] = {ERT_OP_ATTENTION, "ert.Attention", 3, 4, 1, 1, ert_prepare_attention}, /* not ONNX: the attention pass */
    [ERT_OP_QLINEAR_ADD] = {ERT_OP_QLINEAR_ADD, "ert.QLinearAdd", 8, 8, 1, 1, ert_prepare_qlinear_add}, /* not ONNX: the Q/DQ pass */
    [ERT_OP_QLUT] = {ERT_OP_QLUT, "ert.QLut", 2, 2, 1, 1, ert_prepare_qlut}, /* not ONNX: the Q/DQ pass */
};
#undef U

const ert_op_def *ert_op_get(ert_op op) {
    if (op <= ERT_OP_INVALID || op >= ERT_OP_COUNT || !OPS[op].name) return NULL;
    return &OPS[op];
}

const ert_op_def *ert_op_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (OPS[i].name && strcmp(OPS[i].name, name) == 0) return &OPS[i];
    return NULL;
}

ert_status ert_prepare_internal_only(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "internal training op: not valid in a model");
}

ert_status ert_prep_error(ert_prep *p, ert_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ert_status r = ert_set_errorv(p->ctx, st, fmt, ap);
    va_end(ap);
    return r;
}

const ert_attr_val *ert_node_attr(const ert_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t ert_attr_int(const ert_node *n, const char *name, int64_t dflt) {
    const ert_attr_val *a = ert_node_attr(n, name);
    if (!a) return dflt;
    if (a->type == ERT_ATTR_INT) return a->i;
    if (a->type == ERT_ATTR_FLOAT) return (int64_t)a->f;
    return dflt;
}

float ert_attr_float(const ert_node *n, const char *name, float dflt) {
    const ert_attr_val *a = ert_node_attr(n, name);
    if (!a) return dflt;
    if (a->type == ERT_ATTR_FLOAT) return a->f;
    if (a->type == ERT_ATTR_INT) return (float)a->i;
    return dflt;
}

int ert_attr_ints(const ert_node *n, const char *name, int64_t *out, int max) {
    const ert_attr_val *a = ert_node_attr(n, name);
    if (!a) return -1;
    if (a->type == ERT_ATTR_INT) {
        if (max >= 1) out[0] = a->i;
        return 1;
    }
    if (a->type != ERT_ATTR_INTS) return -1;
    int k = a->n < max ? a->n : max;
    for (int i = 0; i < k; i++) out[i] = a->ints[i];
    return a->n;
}

const char *ert_attr_str(const ert_node *n, const char *name, const char *dflt) {
    const ert_attr_val *a = ert_node_attr(n, name);
    if (!a || a->type != ERT_ATTR_STRING || !a->s) return dflt;
    return a->s;
}

bool ert_broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out) {
    int n = na > nb ? na : nb;
    if (n > ERT_MAX_DIMS) return false;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da == db || db == 1) out[i] = da;
        else if (da == 1) out[i] = db;
        else return false;
    }
    *nout = n;
    return true;
}

int ert_tinfo_ints(const ert_tinfo *t, int64_t *out, int max) {
    if (!t->const_data) return -1;
    int64_t n;
    if (!ert_dims_nelems(t->ndim, t->dims, &n) || n > max) return -1;
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == ERT_DTYPE_I64) out[i] = ((const int64_t *)t->const_data)[i];
        else if (t->dtype == ERT_DTYPE_I32) out[i] = ((const int32_t *)t->const_data)[i];
        else return -1;
    }
    return (int)n;
}

/* CUDA backend: which int8 nodes run on the GPU (kernels/cuda/quant.cu) and
 * the op entry the dispatcher calls. The kernels reproduce the CPU integer
 * reference bit for bit; what they do not cover keeps the per-node CPU
 * fallback (counted by ert_session_n_cpu_fallback):
 *   - channels-last (nhwc) convs and pools;
 *   - tensors of 2^31 elements or more (the kernels index in int);
 *   - QLinearMatMul / MatMulInteger with a 1-D B or broadcast batch dims
 *     (a 2-D B, or A and B of equal batch dims, run here);
 *   - MaxPool with an Indices output. */
#include "cuda_backend.h"

static bool is_q8(ert_dtype dt) { return dt == ERT_DTYPE_I8 || dt == ERT_DTYPE_U8; }
static bool is_fl(ert_dtype dt) { return dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16; }

bool ert_cuda_quant_claims(ert_op op, ert_dtype dt) {
    switch (op) {
    case ERT_OP_QUANTIZE_LINEAR: return is_fl(dt);
    case ERT_OP_DEQUANTIZE_LINEAR: return is_q8(dt) || dt == ERT_DTYPE_I32;
    case ERT_OP_QLINEAR_CONV: case ERT_OP_CONV_INTEGER: case ERT_OP_QLINEAR_MATMUL: case ERT_OP_MATMUL_INTEGER:
    case ERT_OP_MAXPOOL:
        return is_q8(dt);
    default: return false;
    }
}

static bool small(const ert_kargs *a) {
    for (int k = 0; k < a->n_in + a->n_out; k++) {
        const ert_tview *v = k < a->n_in ? &a->in[k] : &a->out[k - a->n_in];
        if (v->n_elems >= ((int64_t)1 << 31)) return false;
    }
    return true;
}

bool ert_cuda_quant_node_ok(const ert_kargs *a) {
    if (a->n_in < 1 || a->n_out < 1 || !ert_cuda_quant_claims(a->op, a->in[0].dtype) || !small(a)) return false;
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    switch (a->op) {
    case ERT_OP_QUANTIZE_LINEAR: return a->n_in > 1 && a->in[1].dtype == x->dtype && is_q8(y->dtype);
    case ERT_OP_DEQUANTIZE_LINEAR: return a->n_in > 1 && is_fl(a->in[1].dtype) && a->in[1].dtype == y->dtype;
    case ERT_OP_QLINEAR_CONV: case ERT_OP_CONV_INTEGER: {
        const ert_conv_params *cp = &a->params->quant.conv;
        if (cp->nhwc || cp->nsp < 1 || cp->nsp > 3 || x->ndim != cp->nsp + 2) return false;
        const ert_tview *w = &a->in[a->op == ERT_OP_CONV_INTEGER ? 1 : 3];
        /* the GEMM tiles' grid: (Mg + 63) / 64 rows of blocks at most 65535 */
        if (w->ndim != x->ndim || cp->group < 1 || w->dims[0] % cp->group || (w->dims[0] / cp->group + 63) / 64 > 65535)
            return false;
        if (a->op == ERT_OP_CONV_INTEGER) return y->dtype == ERT_DTYPE_I32 && is_q8(a->in[1].dtype);
        return a->n_in >= 8 && is_q8(a->in[3].dtype) && is_q8(y->dtype) && is_fl(a->in[1].dtype) &&
               a->in[4].dtype == a->in[1].dtype && a->in[6].dtype == a->in[1].dtype;
    }
    case ERT_OP_QLINEAR_MATMUL: case ERT_OP_MATMUL_INTEGER: {
        bool ql = a->op == ERT_OP_QLINEAR_MATMUL;
        const ert_tview *B = &a->in[ql ? 3 : 1];
        if (!is_q8(B->dtype) || B->ndim < 2 || x->ndim < 1) return false;
        int64_t K = x->dims[x->ndim - 1], rows = K ? x->n_elems / K : 0, batch = 1;
        if (K < 1 || B->dims[B->ndim - 2] != K) return false; /* K = 0: the tiles' grid would be empty */
        if (B->ndim > 2) { /* batched: equal batch dims, no broadcasting */
            if (x->ndim != B->ndim) return false;
            for (int d = 0; d < x->ndim - 2; d++)
                if (x->dims[d] != B->dims[d]) return false;
            rows = x->dims[x->ndim - 2];
            batch = rows > 0 ? x->n_elems / (rows * K) : 0;
        }
        if ((rows + 63) / 64 > 65535 || batch > 65535) return false; /* the tiles' grid (y, z) */
        if (!ql) return y->dtype == ERT_DTYPE_I32;
        return a->n_in >= 8 && is_q8(y->dtype) && is_fl(a->in[1].dtype) && a->in[4].dtype == a->in[1].dtype &&
               a->in[6].dtype == a->in[1].dtype;
    }
    case ERT_OP_MAXPOOL:
        return !a->params->pool.nhwc && a->params->pool.nsp >= 1 && a->params->pool.nsp <= 3 &&
               y->dtype == x->dtype && (a->n_out < 2 || !a->out[1].data);
    default: return false;
    }
}

ert_status ert_cuda_run_quant(cuda_ctx *c, const ert_kargs *a) {
    cudaError_t e;
    switch (a->op) {
    case ERT_OP_QUANTIZE_LINEAR: e = ert_cuda_quantize_launch(a, c->stream); break;
    case ERT_OP_DEQUANTIZE_LINEAR: e = ert_cuda_dequantize_launch(a, c->stream); break;
    case ERT_OP_QLINEAR_CONV: case ERT_OP_CONV_INTEGER: e = ert_cuda_qconv_launch(a, c->stream); break;
    case ERT_OP_QLINEAR_MATMUL: case ERT_OP_MATMUL_INTEGER: e = ert_cuda_qmatmul_launch(a, c->stream); break;
    case ERT_OP_MAXPOOL: e = ert_cuda_maxpool_q8_launch(a, c->stream); break;
    default: e = cudaErrorInvalidValue;
    }
    if (e == cudaSuccess) return ERT_OK;
    return ert_set_error(c->ctx, e == cudaErrorInvalidValue ? ERT_E_UNSUPPORTED : ERT_E_CUDA,
                         "node '%s' (%s): int8 kernel: %s", a->name ? a->name : "?", ert_op_get(a->op)->name,
                         cudaGetErrorString(e));
}

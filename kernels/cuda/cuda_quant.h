/* CUDA int8 path: QuantizeLinear, DequantizeLinear, QLinearConv,
 * ConvInteger, QLinearMatMul, MatMulInteger and MaxPool on int8/uint8 data,
 * as kernels/cpu/quant.c and quant_int.c compute them, bit for bit.
 *
 *   kernels/cuda/quant.cu       the kernels and their launchers (one launcher
 *                               per op, taking the node's views and a stream);
 *   kernels/cuda/cuda_quant.c   which nodes the backend claims (supports_node)
 *                               and the op entry the dispatcher calls.
 *
 * Exactness: the integer sums are exact in int32 whatever the order, so the
 * GEMM tiles may add in any order; the requantisation repeats the CPU's f32
 * operations one by one with IEEE round-to-nearest intrinsics (mult =
 * xs * ws[m] / ys, v = (float)acc * mult, clamp, round half to even, + zp),
 * which nvcc may not contract or reorder. Scales may be f32, f16 or bf16 (an
 * f16 session lowers every float constant; widened to f32 when read, as the
 * CPU fallback did). Layout NCHW (the Q/DQ pass folds only NCHW convs).
 * Nothing is allocated; every launch is capturable in a CUDA graph. */
#ifndef ERT_CUDA_QUANT_H
#define ERT_CUDA_QUANT_H

#include "cuda_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launchers (quant.cu): a is the node as the CPU kernel sees it (views on
 * device memory). cudaErrorInvalidValue for what ert_cuda_quant_node_ok refuses. */
cudaError_t ert_cuda_quantize_launch(const ert_kargs *a, cudaStream_t st);
cudaError_t ert_cuda_dequantize_launch(const ert_kargs *a, cudaStream_t st);
cudaError_t ert_cuda_qconv_launch(const ert_kargs *a, cudaStream_t st);
cudaError_t ert_cuda_qmatmul_launch(const ert_kargs *a, cudaStream_t st);
cudaError_t ert_cuda_maxpool_q8_launch(const ert_kargs *a, cudaStream_t st);

/* cuda_quant.c: does the int8 path own (op, dtype of input 0)? */
bool ert_cuda_quant_claims(ert_op op, ert_dtype dt);
/* Can it run this node exactly (shapes, dtypes, params)? Everything else
 * keeps the per-node CPU fallback. */
bool ert_cuda_quant_node_ok(const ert_kargs *a);

#ifdef __cplusplus
}
#endif

#endif /* ERT_CUDA_QUANT_H */

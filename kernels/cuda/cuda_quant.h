/* CUDA int8 path: QuantizeLinear, DequantizeLinear, QLinearConv,
 * ConvInteger, QLinearMatMul, MatMulInteger, ert.QLinearAdd, ert.QLut and MaxPool on int8/uint8 data,
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
 * CPU fallback did). Layout NCHW, or NHWC for 2-D convs and MaxPool where
 * the channels-last pass (passes/layout.c) puts the int8 region.
 * Nothing is allocated; every launch is capturable in a CUDA graph. */
#ifndef ERT_CUDA_QUANT_H
#define ERT_CUDA_QUANT_H

#include "cuda_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ tensor-core convs (sm_80+)
 *
 * A QLinearConv / ConvInteger with int8 weights, 1-D or 2-D NCHW or 2-D
 * NHWC (passes/layout.c makes a quantized model's int8 region NHWC), at least
 * 16 output channels per group, runs as an implicit GEMM on the int8 tensor
 * cores (mma.sync m16n8k32, s8 x s8 -> s32): rows = output channels, columns
 * = output pixels of every image (N * OH * OW), depth K = Cg * KH * KW. Its
 * constant data is packed once at bind (ert_cuda_qconv_pack) into the node's
 * packed region (node_packed_bytes):
 *
 *   [ w: M rows of Kp int8 | wsum: M int32 | ktab: Kp int2 ]
 *
 *   w     (w - w_zero_point) per output channel, K zero-padded to Kp (a
 *         multiple of 32); a filter whose shifted values leave int8 is not
 *         packed (the CUDA-core kernel runs it);
 *   wsum  the sum of each row of w, for the input zero point: the kernel
 *         multiplies s8 values xs = x (int8) or x - 128 (uint8), fills the
 *         padding with xzs = x_zero_point (- 128 for uint8), and subtracts
 *         xzs * wsum, so acc = sum (x - xzp)(w - wzp) exactly in int32;
 *   ktab  per k = (c, kh, kw): {c*H*W + dh*W + dw, dh | dw << 16} with
 *         dh = kh * dilation_h, dw = kw * dilation_w ({0, 0} for k >= Kg);
 *         NHWC: k = (kh, kw, c) (w's columns in that order too) and
 *         {(dh*W + dw)*C + c, dh | dw << 16}, so with Cg and C multiples of
 *         16 a thread's 16 consecutive k are one 16-byte load of one tap.
 *
 * Where the tiles alone would leave the GPU idle (deep layers at batch 1),
 * K is split over `split` blocks per tile (qmma_split): each adds its int32
 * sums into the node's workspace with atomics (exact, any order), and the
 * last block of a tile, counted in the same workspace, runs the epilogue. */
#define ERT_QMMA_TM 64 /* tile rows (output channels) */
#define ERT_QMMA_TN 64 /* tile columns (output pixels) */
#define ERT_QMMA_TK 32 /* depth of one step (one m16n8k32) */

typedef struct ert_qmma_layout {
    int Kp;                         /* Kg rounded up to ERT_QMMA_TK */
    size_t sum_off, tab_off, bytes; /* offsets of wsum and ktab, total bytes */
} ert_qmma_layout;

static inline ert_qmma_layout ert_qmma_layout_of(int64_t M, int64_t Kg) {
    ert_qmma_layout l;
    l.Kp = (int)((Kg + ERT_QMMA_TK - 1) / ERT_QMMA_TK * ERT_QMMA_TK);
    l.sum_off = (size_t)M * (size_t)l.Kp; /* a multiple of 32 */
    l.tab_off = l.sum_off + ((size_t)M * 4 + 15) / 16 * 16;
    l.bytes = l.tab_off + (size_t)l.Kp * 8;
    return l;
}

/* Blocks per tile along K: enough blocks for ERT_QMMA_WAVES per SM, each at
 * least ERT_QMMA_MIN_STEPS steps deep, at most 32. (Both may be set at build
 * time, -D in the C and CUDA flags alike, for bench/int8/ab_build.sh.) */
#ifndef ERT_QMMA_WAVES
#define ERT_QMMA_WAVES 2
#endif
#ifndef ERT_QMMA_MIN_STEPS
#define ERT_QMMA_MIN_STEPS 8
#endif
static inline int ert_qmma_split(int64_t tiles, int64_t steps, int sm_count) {
    int64_t want = tiles > 0 ? (ERT_QMMA_WAVES * (int64_t)sm_count + tiles - 1) / tiles : 1,
            most = steps / ERT_QMMA_MIN_STEPS;
    if (want > most) want = most;
    if (want > 32) want = 32;
    return want < 1 ? 1 : (int)want;
}

/* Workspace of a split conv: tiles x 64 x 64 int32 sums + one counter per tile. */
static inline size_t ert_qmma_ws_bytes(int64_t tiles, int split) {
    return split > 1 ? (size_t)tiles * (ERT_QMMA_TM * ERT_QMMA_TN * 4 + 4) : 0;
}

/* Launchers (quant.cu): a is the node as the CPU kernel sees it (views on
 * device memory). cudaErrorInvalidValue for what ert_cuda_quant_node_ok refuses.
 * The conv runs on the tensor cores when a->packed holds its packing
 * (sm_count: the device's, for the K split), else on the CUDA cores. */
cudaError_t ert_cuda_quantize_launch(const ert_kargs *a, cudaStream_t st);
cudaError_t ert_cuda_dequantize_launch(const ert_kargs *a, cudaStream_t st);
cudaError_t ert_cuda_qconv_launch(const ert_kargs *a, int sm_count, cudaStream_t st);
cudaError_t ert_cuda_qmatmul_launch(const ert_kargs *a, cudaStream_t st);
cudaError_t ert_cuda_maxpool_q8_launch(const ert_kargs *a, cudaStream_t st);
cudaError_t ert_cuda_qadd_launch(const ert_kargs *a, cudaStream_t st);
cudaError_t ert_cuda_qlut_launch(const ert_kargs *a, cudaStream_t st);
/* n bytes of a hash of seed at p (the self-check's inputs) */
cudaError_t ert_cuda_fill_bytes_launch(void *p, int64_t n, unsigned seed, cudaStream_t st);

/* cuda_quant.c: does the int8 path own (op, dtype of input 0)? */
bool ert_cuda_quant_claims(ert_op op, ert_dtype dt);
/* Can it run this node exactly (shapes, dtypes, params)? Everything else
 * keeps the per-node CPU fallback. */
bool ert_cuda_quant_node_ok(const ert_kargs *a);

/* The tensor-core conv's geometry from the node's shapes (data may be NULL):
 * false where it does not apply. *M, *Mg, *Kg, *tiles, *steps as the
 * kernel's grid sees them (tiles over every group). */
bool ert_cuda_qmma_geom(const ert_kargs *a, int64_t *M, int64_t *Kg, int64_t *tiles, int64_t *steps);
/* node_packed_bytes for it (0: none). */
size_t ert_cuda_qmma_packed_bytes(const ert_kargs *a);
/* node_workspace for it on a device of sm_count SMs (0: no split). */
size_t ert_cuda_qmma_ws(const ert_kargs *a, int sm_count);

#ifdef __cplusplus
}
#endif

#endif /* ERT_CUDA_QUANT_H */

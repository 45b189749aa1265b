/* Contracts inside the CUDA backend: the launchers (layer 2 of STYLE rule 3)
 * that kernels/cuda/<op>.cu export to the backend (cuda_backend.c).
 *
 * Every launcher enqueues on `st`, never synchronises, never allocates, and
 * returns cudaSuccess or the error (cudaErrorInvalidValue for shapes it
 * cannot handle; otherwise cudaGetLastError after the launch). All tensors
 * are contiguous, C order. Float data is f32, f16 or bf16 (`dt`, or the
 * views' dtype; every float operand of one call has that dtype), computed in
 * f32 (kernels/cuda/cuda_types.cuh). */
#ifndef ERT_CUDA_INTERNAL_H
#define ERT_CUDA_INTERNAL_H

#include "ert_internal.h"

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Index map for element-wise kernels over an output of `ndim` dims: operand
 * k's element for output index (i0..in) is at sum(i_d * s[k][d]) (stride 0 on
 * broadcast dims). Passed to kernels by value. */
#define ERT_CUDA_MAX_OPS 3
typedef struct ert_cuda_map {
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    int64_t s[ERT_CUDA_MAX_OPS][ERT_MAX_DIMS];
} ert_cuda_map;

/* Contiguous strides of dims (elements). */
void ert_cuda_contig_strides(int ndim, const int64_t *dims, int64_t *strides);
/* Strides of an operand of (nd, d) broadcast to the output shape (right-aligned,
 * numpy rules; 0 on broadcast dims). */
void ert_cuda_bcast_strides(int out_nd, const int64_t *out_dims, int nd, const int64_t *d, int64_t *strides);

/* eltwise.cu */
cudaError_t ert_cuda_unary_launch(ert_op op, const ert_unary_params *p, ert_dtype dt, const void *x, void *y,
                                  int64_t n, cudaStream_t st);
/* Add..Max write dt; Equal/Less/Greater write bool (one byte). */
cudaError_t ert_cuda_binary_launch(ert_op op, ert_dtype dt, const void *a, const void *b, void *y,
                                   const ert_cuda_map *m, int64_t n, cudaStream_t st);
/* y = where(cond, x, z); cond is bool (bytes). Operands 0,1,2 of m. */
cudaError_t ert_cuda_where_launch(ert_dtype dt, const uint8_t *cond, const void *x, const void *z, void *y,
                                  const ert_cuda_map *m, int64_t n, cudaStream_t st);
/* Epilogue in place: y = act(y + scale0 * add0[map0] + add1[map1]); add0/add1
 * may be NULL. Used after cuDNN/cuBLAS for bias, residual, Gemm's C. */
cudaError_t ert_cuda_epilogue_launch(ert_dtype dt, void *y, const void *add0, float scale0, const void *add1,
                                     const ert_cuda_map *m, int64_t n, const ert_act_params *act, cudaStream_t st);
/* The conv epilogue in place, y (N, C, HW): y = act(y + bias[c] + res);
 * bias (C) and res (like y) may be NULL. Faster than the general one. */
cudaError_t ert_cuda_conv_epilogue_launch(ert_dtype dt, void *y, const void *bias, const void *res, int64_t N,
                                          int64_t C, int64_t HW, const ert_act_params *act, cudaStream_t st);
/* out[map1] = in[in_off + map0] for every index of m->dims; esize 1, 2, 4 or 8
 * bytes. Transpose, Slice, Expand, Concat and Split are all this. */
cudaError_t ert_cuda_strided_copy_launch(const void *in, int64_t in_off, void *out, int64_t out_off, size_t esize,
                                         const ert_cuda_map *m, int64_t n, cudaStream_t st);

/* pool.cu: x (N, C, spatial...) with nsp spatial dims; y likewise. */
cudaError_t ert_cuda_pool_launch(bool is_max, const ert_pool_params *p, const ert_tview *x, const ert_tview *y,
                                 cudaStream_t st);
cudaError_t ert_cuda_global_pool_launch(bool is_max, ert_dtype dt, const void *x, void *y, int64_t planes,
                                        int64_t plane_sz, cudaStream_t st);

/* norm.cu */
/* x (N, C, sz...): y = (x - mean[c]) * scale[c] / sqrt(var[c] + eps) + bias[c] */
cudaError_t ert_cuda_batchnorm_launch(ert_dtype dt, const void *x, const void *scale, const void *bias,
                                      const void *mean, const void *var, void *y, float eps, int64_t N, int64_t C,
                                      int64_t sz, cudaStream_t st);
/* x (outer, inner): per row normalise, then * scale + bias (inner elements, or
 * one broadcast element when *_bcast). bias may be NULL. */
cudaError_t ert_cuda_layernorm_launch(ert_dtype dt, const void *x, const void *scale, const void *bias, void *y,
                                      float eps, int64_t outer, int64_t inner, bool scale_bcast, bool bias_bcast,
                                      cudaStream_t st);
/* x (outer, n, inner), along n. */
cudaError_t ert_cuda_softmax_launch(bool log, ert_dtype dt, const void *x, void *y, int64_t outer, int64_t n,
                                    int64_t inner, cudaStream_t st);

/* tensor.cu: same shapes/params as the CPU kernels (kernels/cpu/shape.c,
 * reduce.c, resize.c, shape_gen.c). */
cudaError_t ert_cuda_pad_launch(const ert_pad_params *p, const ert_tview *x, const ert_tview *y, cudaStream_t st);
cudaError_t ert_cuda_reduce_launch(ert_op op, const ert_axis_params *p, const ert_tview *x, const ert_tview *y,
                                   cudaStream_t st);
cudaError_t ert_cuda_resize_launch(const ert_resize_params *p, const ert_tview *x, const ert_tview *y,
                                   cudaStream_t st);
/* Any dtype to any dtype (the CPU's Cast rules). */
cudaError_t ert_cuda_cast_launch(const ert_tview *x, const ert_tview *y, cudaStream_t st);
/* Gather along axis; any element size; indices i32/i64 (negative wrap; out
 * of range gives zeros). */
cudaError_t ert_cuda_gather_launch(int64_t axis, const ert_tview *x, const ert_tview *ind, const ert_tview *y,
                                   cudaStream_t st);

/* conv.cu: direct convolution with fused epilogue (used without cuDNN and for
 * what cuDNN is not asked to do). x (N, C, in...), w (M, C/group, k...),
 * y (N, M, out...); bias (M) and res (like y) may be NULL. */
cudaError_t ert_cuda_conv_direct_launch(const ert_conv_params *p, const ert_tview *x, const void *w,
                                        const void *bias, const void *res, const ert_tview *y, cudaStream_t st);
/* ConvTranspose: x (N, C, in...), w (C, M/group, k...), y (N, M, out...);
 * bias (M) may be NULL; fused activation from p. */
cudaError_t ert_cuda_conv_transpose_launch(const ert_conv_params *p, const ert_tview *x, const void *w,
                                           const void *bias, const ert_tview *y, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif /* ERT_CUDA_INTERNAL_H */

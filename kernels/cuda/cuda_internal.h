/* Contracts inside the CUDA backend: the launchers (layer 2 of STYLE rule 3)
 * that kernels/cuda/<op>.cu export to the backend (cuda_dispatch.c, cuda_conv.c, cuda_gemm.c).
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
/* A trainer's workspace budget (runtime/train/trainer.c ws_budget) makes a conv
 * take an algorithm needing less workspace only if cudnnFind timed it at
 * most this many times slower than the fastest; otherwise the conv keeps the
 * fastest and the arena's peak grows (ResNet-18's first conv: the 64 MB
 * algorithm is about twice as fast as any that fits in less). */
#define ERT_WS_SLOWER 1.25f

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
/* The conv epilogue in place, y (N, C, HW), stored (N, HW, C) when nhwc:
 * y = act(y + bias[c] + res); bias (C) and res (like y) may be NULL. Faster
 * than the general one. */
/* conv.cu: the im2col matrix of a channels-last patchify conv (kernel ==
 * stride, no pad): col[(n, oh, ow)][(i, j, c)] = x[n][oh * kh + i][ow * kw + j][c],
 * elements of es bytes (2: f16/bf16). */
cudaError_t ert_cuda_patch_gather_launch(const void *x, void *col, size_t es, int64_t N, int64_t H, int64_t W,
                                         int64_t C, int64_t kh, int64_t kw, int64_t OH, int64_t OW, cudaStream_t st);
cudaError_t ert_cuda_conv_epilogue_launch(ert_dtype dt, void *y, const void *bias, const void *res, int64_t N,
                                          int64_t C, int64_t HW, bool nhwc, const ert_act_params *act,
                                          cudaStream_t st);
/* out[map1] = in[in_off + map0] for every index of m->dims; esize 1, 2, 4 or 8
 * bytes. Transpose, Slice, Expand, Concat and Split are all this. */
cudaError_t ert_cuda_strided_copy_launch(const void *in, int64_t in_off, void *out, int64_t out_off, size_t esize,
                                         const ert_cuda_map *m, int64_t n, cudaStream_t st);

/* pool.cu: x (N, C, spatial...) with nsp spatial dims; y likewise; with
 * p->nhwc (2-D only) x and y are (N, H, W, C). */
cudaError_t ert_cuda_pool_launch(bool is_max, const ert_pool_params *p, const ert_tview *x, const ert_tview *y,
                                 cudaStream_t st);
/* x (planes, plane_sz) -> y (planes); channels-last (channels > 0): x is
 * (N, plane_sz, channels) -> y (N, channels), planes = N * channels. */
cudaError_t ert_cuda_global_pool_launch(bool is_max, ert_dtype dt, const void *x, void *y, int64_t planes,
                                        int64_t plane_sz, int64_t channels, cudaStream_t st);

/* norm.cu */
/* x (N, C, sz...): y = (x - mean[c]) * scale[c] / sqrt(var[c] + eps) + bias[c] */
cudaError_t ert_cuda_batchnorm_launch(ert_dtype dt, const void *x, const void *scale, const void *bias,
                                      const void *mean, const void *var, void *y, float eps, int64_t N, int64_t C,
                                      int64_t sz, cudaStream_t st);
/* Workspace bytes with which rows x inner normalisation (LayerNorm,
 * InstanceNorm) splits each row over several blocks; 0: it does not. */
size_t ert_cuda_norm_split_ws(int64_t rows, int64_t inner);
/* x (outer, inner): per row normalise, then * scale + bias (inner elements, or
 * one broadcast element when *_bcast). bias may be NULL. ws/ws_bytes: the
 * node's workspace (ert_cuda_norm_split_ws; NULL/0: one block per row). */
cudaError_t ert_cuda_layernorm_launch(ert_dtype dt, const void *x, const void *scale, const void *bias, void *y,
                                      float eps, int64_t outer, int64_t inner, bool scale_bcast, bool bias_bcast,
                                      void *ws, size_t ws_bytes, cudaStream_t st);
/* x (N, C, sz): each (n, c) plane normalised (biased variance), then
 * * scale[c] + bias[c]. ws as for LayerNorm, rows = N * C. */
cudaError_t ert_cuda_instancenorm_launch(ert_dtype dt, const void *x, const void *scale, const void *bias, void *y,
                                         float eps, int64_t N, int64_t C, int64_t sz, void *ws, size_t ws_bytes,
                                         cudaStream_t st);
/* x (outer, n, inner), along n. */
cudaError_t ert_cuda_softmax_launch(bool log, ert_dtype dt, const void *x, void *y, int64_t outer, int64_t n,
                                    int64_t inner, cudaStream_t st);

/* attention.cu: ert.Attention (kernels/cpu/attention.c), every operand a
 * strided view (ert_attn_params), head_dim <= 128, bias NULL unless
 * p->has_bias. tensor_cores: f16/bf16 on the WMMA flash kernel where the chip
 * has it (else one warp per query row, as f32 always). */
cudaError_t ert_cuda_attention_launch(ert_dtype dt, const void *q, const void *k, const void *v, const void *bias, void *y,
                                      const ert_attn_params *p, bool tensor_cores, cudaStream_t st);

/* attention.cu: the mma.sync flash kernel (f16/bf16, sm_80+, head_dim <=
 * 128), the fast path; ert_cuda_attn_mma_can says whether it runs. sms: the
 * device's SM count (the warps per block are picked to cover them). split:
 * where the query tiles are few, a block's warps may split the keys (and
 * merge their partial softmaxes); false keeps a warp per query tile. */
bool ert_cuda_attn_mma_can(ert_dtype dt, const ert_attn_params *p, int cc_major);
cudaError_t ert_cuda_attention_mma_launch(ert_dtype dt, const void *q, const void *k, const void *v, const void *bias,
                                          void *y, const ert_attn_params *p, int sms, bool split, cudaStream_t st);

/* attention.cu, for the cuBLAS path of cuda_attn.c: p (T, rows of nk) =
 * softmax(s + bias) per row of the f32 scores s ((batch, heads, nq) rows). */
cudaError_t ert_cuda_attn_softmax_launch(ert_dtype dt, const float *s, void *p, const void *bias, const ert_attn_params *a,
                                         cudaStream_t st);

/* cumsum.cu: x and y (outer, n, inner), running sums along n (kernels/cpu/cumsum.c);
 * f32/f16/bf16 (f32 accumulation), i32, i64. */
cudaError_t ert_cuda_cumsum_launch(ert_dtype dt, const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                                   bool exclusive, bool reverse, cudaStream_t st);
/* cuda_fallback.c: a node without a CUDA kernel run by a CPU kernel `fn` in
 * stream order (pinned staging made at bind; see the file's comment). */
typedef struct ert_cuda_host_node ert_cuda_host_node;
ert_status ert_cuda_host_bind(ert_context *ctx, const ert_kargs *a, ert_kernel_fn fn, ert_cuda_host_node **out);
cudaError_t ert_cuda_host_enqueue(ert_cuda_host_node *h, cudaStream_t st);
ert_status ert_cuda_host_status(const ert_cuda_host_node *h); /* the last run's, once the stream is synchronised */
void ert_cuda_host_reset(ert_cuda_host_node *h);
void ert_cuda_host_free(ert_cuda_host_node *h);
/* tensor.cu: same shapes/params as the CPU kernels (kernels/cpu/shape.c,
 * reduce.c, resize.c, shape_gen.c). */
cudaError_t ert_cuda_pad_launch(const ert_pad_params *p, const ert_tview *x, const ert_tview *y, cudaStream_t st);
cudaError_t ert_cuda_reduce_launch(ert_op op, const ert_axis_params *p, const ert_tview *x, const ert_tview *y,
                                   cudaStream_t st);
cudaError_t ert_cuda_resize_launch(const ert_resize_params *p, const ert_tview *x, const ert_tview *y,
                                   cudaStream_t st);
/* Any dtype to any dtype (the CPU's Cast rules). */
cudaError_t ert_cuda_cast_launch(const ert_tview *x, const ert_tview *y, cudaStream_t st);
/* a single thread busy for ns nanoseconds (the profiler's queue filler) */
cudaError_t ert_cuda_spin_launch(unsigned long long ns, cudaStream_t st);
/* n elements of dt (f32/f16/bf16) at y: uniform in [-scale, scale), a
 * stateless hash of (seed, index); create-time test data. */
cudaError_t ert_cuda_fill_uniform_launch(ert_dtype dt, void *y, size_t n, float scale, unsigned long long seed,
                                         cudaStream_t st);
/* Gather along axis; any element size; indices i32/i64 (negative wrap; out
 * of range gives zeros). */
cudaError_t ert_cuda_gather_launch(int64_t axis, const ert_tview *x, const ert_tview *ind, const ert_tview *y,
                                   cudaStream_t st);

/* conv.cu: direct convolution with fused epilogue (used without cuDNN and for
 * what cuDNN is not asked to do). x (N, C, in...), w (M, C/group, k...),
 * y (N, M, out...); bias (M) and res (like y) may be NULL. w_rsc (may be
 * NULL): a channels-last depthwise conv's filter as (KH, KW, C)
 * (ert_cuda_dw_rsc_bytes), read instead of w by the kernel for 3x3, 5x5
 * and 7x7 filters. */
cudaError_t ert_cuda_conv_direct_launch(const ert_conv_params *p, const ert_tview *x, const void *w,
                                        const void *w_rsc, const void *bias, const void *res, const ert_tview *y,
                                        cudaStream_t st);
/* ConvTranspose: x (N, C, in...), w (C, M/group, k...), y (N, M, out...);
 * bias (M) may be NULL; fused activation from p. */
cudaError_t ert_cuda_conv_transpose_launch(const ert_conv_params *p, const ert_tview *x, const void *w,
                                           const void *bias, const ert_tview *y, cudaStream_t st);

/* conv.cu: the scatter after a kernel == stride ConvTranspose's GEMM:
 * z (N, K*sh*sw, H*W) f32 -> y (N, K, H*sh, W*sw) + bias (K, may be NULL),
 * activation act; y of dtype dt. */
cudaError_t ert_cuda_convt_scatter_launch(ert_dtype dt, const float *z, const void *bias, void *y, int64_t N,
                                          int64_t K, int64_t H, int64_t W, int sh, int sw,
                                          const ert_act_params *act, cudaStream_t st);

/* train.cu: training kernels, f32 (the CPU's kernels/cpu/grad_*.c, loss.c,
 * optim.c). Maps as above: binary_grad s[0] a, s[1] b, s[2] the gradient's
 * operand (all over dy's shape; o_elems == n writes directly, else zeroes and
 * adds); reduce_to either blocks (m NULL: dy (outer, mid, inner) summed to
 * (mid)) or s[0] = strides into the output over dy's shape; broadcast_to s[0]
 * = strides into dy over the output's shape. */
cudaError_t ert_cuda_act_grad_launch(const ert_unary_params *u, const float *dy, const float *x, float *dx, int64_t n,
                                     cudaStream_t st);
cudaError_t ert_cuda_binary_grad_launch(ert_op fwd, int which, const float *dy, const float *a, const float *b,
                                        float *o, int64_t o_elems, const ert_cuda_map *m, int64_t n, cudaStream_t st);
cudaError_t ert_cuda_reduce_to_launch(const float *dy, float *o, int64_t o_elems, int64_t outer, int64_t mid,
                                      int64_t inner, const ert_cuda_map *m, int64_t n, float scale, cudaStream_t st);
cudaError_t ert_cuda_broadcast_to_launch(const float *dy, float *o, const ert_cuda_map *m, int64_t n, float scale,
                                         cudaStream_t st);
/* Max/AveragePool gradient, dx (x's shape) of x's dtype (f32/f16/bf16) */
cudaError_t ert_cuda_pool_grad_launch(bool is_max, const ert_pool_params *p, const ert_tview *x, const void *dy,
                                      const ert_tview *dy_v, void *dx, cudaStream_t st);
cudaError_t ert_cuda_gap_grad_launch(const float *dy, float *dx, int64_t planes, int64_t sz, cudaStream_t st);
cudaError_t ert_cuda_softmax_grad_launch(bool log, const float *dy, const float *y, float *dx, int64_t outer, int64_t n,
                                         int64_t inner, cudaStream_t st);
/* status (may be NULL): i64 {tag, value} in device memory; the first index
 * outside [-dim, dim) sets it to {tag, that index} if it is still {0, ..}
 * (its row is left out of dx). */
cudaError_t ert_cuda_gather_grad_launch(const float *dy, const void *idx, bool i64, float *dx, int64_t dx_elems,
                                        int64_t outer, int64_t dim, int64_t n_idx, int64_t inner, int64_t *status,
                                        int64_t tag, cudaStream_t st);
/* rng: the u64 splitmix64 state in device memory, advanced by n. */
cudaError_t ert_cuda_dropout_train_launch(const float *x, uint64_t *rng, float *y, float *mask, int64_t n, float ratio,
                                          bool training, cudaStream_t st);
/* CE: z (N, C), target i64 (N), w (C) or NULL; MSE/BCE: n elements. A CE
 * target outside [0, C) gives a NaN loss (the step is then skipped). */
/* Mixed precision: the same gradients with f16/bf16 activations (x, y, dy,
 * dx of dtype dt), f32 parameters and statistics. BatchNorm (any float dt,
 * f32 included) needs ws: 2*C doubles (the trainer plans it as the node's
 * workspace). */
cudaError_t ert_cuda_act_grad_h_launch(ert_dtype dt, const ert_unary_params *u, const void *dy, const void *x,
                                       void *dx, int64_t n, cudaStream_t st);
cudaError_t ert_cuda_gap_grad_h_launch(ert_dtype dt, const void *dy, void *dx, int64_t planes, int64_t sz,
                                       cudaStream_t st);
cudaError_t ert_cuda_bn_train_h_launch(ert_dtype dt, const void *x, const float *scale, const float *bias, float *rmean,
                                       float *rvar, void *y, float *mean, float *invstd, int64_t N, int64_t C,
                                       int64_t sz, float eps, float momentum, bool training, bool relu, bool replay, double *ws,
                                       cudaStream_t st);
cudaError_t ert_cuda_bn_grad_h_launch(ert_dtype dt, const void *dy, const void *x, const float *scale,
                                      const float *mean, const float *istd, const float *relu_bias, void *dx,
                                      float *dscale, float *dbias, int64_t N, int64_t C, int64_t sz, float eps,
                                      bool frozen, double *ws, cudaStream_t st);
/* LayerNorm backward over rows (outer, inner): dx, dscale (ds_n = inner or
 * 1), dB (db_n = inner or 1); any output may be NULL. */
cudaError_t ert_cuda_layernorm_grad_launch(const float *dy, const float *x, const float *scale, int64_t scale_n,
                                           float *dx, float *ds, int64_t ds_n, float *db, int64_t db_n, int64_t outer,
                                           int64_t inner, float eps, cudaStream_t st);
/* scale: NULL, or the loss scaler {S, ...}: dz is multiplied by S (the loss is not) */
cudaError_t ert_cuda_loss_launch(int kind, const float *z, const void *target, const float *w, float *loss, float *dz,
                                 int64_t N, int64_t C, int64_t n, float label_smoothing, const float *scale,
                                 cudaStream_t st);
/* Adds the squares of count gradients into acc (one double of scratch,
 * zeroed first when `first`); then, when out is not NULL, out = {norm, clip
 * scale}. */
/* out: {norm, clip factor}; with a scaler sc = {S, good steps, skipped} (and
 * the loss): the gradients are scaled by S, so out gets {norm / S, clip
 * factor / S, next S, skipped}, and sc is updated (inf/NaN: S/2 and a skip;
 * `interval` good steps in a row: 2S). */
/* status (may be NULL): the trainer's i64 {tag, value}; non-zero tag: out
 * gets a NaN norm (every optimizer update skips) and the scaler is kept. */
cudaError_t ert_cuda_grad_norm_launch(const float *const *g, const int64_t *n, int count, double *acc, bool first,
                                      float *out, float clip, const float *loss, float *sc, int interval,
                                      const int64_t *status, cudaStream_t st);
/* hyper {lr, 1 - beta1^t, 1 - beta2^t}, gn {norm, scale}: device memory;
 * nothing is written when *loss or gn[0] is not finite. */
cudaError_t ert_cuda_optim_launch(const ert_optim_params *p, float *w, const float *g, float *m, float *v,
                                  const float *gn, const float *hyper, const float *loss, int64_t n, cudaStream_t st);

/* cuda_train.c: the training ops for the backend (cuda_dispatch.c calls these
 * for ert_cuda_train_op(op) and for ConvTranspose, which is the trainer's
 * conv data gradient: cuDNN backward-data when it can). */
typedef struct ert_cuda_env {
    ert_context *ctx;
    cudaStream_t stream;
    struct cublasContext *blas;
    void *dnn;                  /* cudnnHandle_t, or NULL without cuDNN */
    bool trainer;               /* serving a trainer (half ConvTranspose = an AMP data gradient) */
} ert_cuda_env;
bool ert_cuda_train_op(ert_op op);
bool ert_cuda_train_supports(ert_op op, ert_dtype dt);
ert_status ert_cuda_train_workspace(const ert_cuda_env *env, const ert_kargs *a, size_t *bytes);
ert_status ert_cuda_train_bind(const ert_cuda_env *env, ert_kargs *a);
void ert_cuda_train_release(ert_kargs *a);
/* ERT_E_UNSUPPORTED: not handled here (ConvTranspose without state). */
ert_status ert_cuda_train_run(const ert_cuda_env *env, const ert_kargs *a);

#ifdef __cplusplus
}
#endif
#endif /* ERT_CUDA_INTERNAL_H */

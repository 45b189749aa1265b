/* CPU kernel entry points (one per op family). Each takes the node's
 * ert_kargs: typed params from prepare, concrete input/output views, planned
 * workspace, and the session's thread pool (may be NULL). Outputs never alias
 * inputs unless the op says so. Float ops compute in f32; the session converts
 * f16/bf16 tensors to f32 for the CPU backend. */
#ifndef ERT_CPU_KERNELS_H
#define ERT_CPU_KERNELS_H
#include "cpu_backend.h"

/* conv.c */
ert_status ert_cpu_conv(const ert_kargs *a);
ert_status ert_cpu_conv_transpose(const ert_kargs *a);
/* matmul.c */
ert_status ert_cpu_matmul(const ert_kargs *a);
ert_status ert_cpu_gemm(const ert_kargs *a);
/* MatMul batch dims (broadcast) and batch index -> offsets into a and b */
int64_t ert_cpu_matmul_rows(const ert_tview *A, const ert_tview *B);
bool ert_cpu_batch_shape(const ert_tview *A, const ert_tview *B, int64_t *bd, int *nbd, int64_t *n_batch);
void ert_cpu_batch_offsets(const ert_tview *A, const ert_tview *B, const int64_t *bd, int nbd, int64_t bi,
                           int64_t a_mat, int64_t b_mat, int64_t *oa, int64_t *ob);
/* pool.c: MaxPool/AveragePool, GlobalAveragePool/GlobalMaxPool (by a->op) */
ert_status ert_cpu_pool(const ert_kargs *a);
ert_status ert_cpu_global_pool(const ert_kargs *a);
/* norm.c */
ert_status ert_cpu_batchnorm(const ert_kargs *a);
ert_status ert_cpu_layernorm(const ert_kargs *a);
ert_status ert_cpu_instancenorm(const ert_kargs *a);
/* softmax.c: Softmax/LogSoftmax (by a->op) */
ert_status ert_cpu_softmax(const ert_kargs *a);
/* eltwise.c: every unary op (by a->op), every binary op (by a->op), Where */
ert_status ert_cpu_unary(const ert_kargs *a);
ert_status ert_cpu_binary(const ert_kargs *a);
ert_status ert_cpu_where(const ert_kargs *a);
/* reduce.c */
ert_status ert_cpu_reduce(const ert_kargs *a);
ert_status ert_cpu_arg(const ert_kargs *a); /* ArgMax/ArgMin */
/* shape.c: data movement */
ert_status ert_cpu_copy(const ert_kargs *a); /* Identity, Dropout, Flatten, Reshape, Squeeze, Unsqueeze */
ert_status ert_cpu_transpose(const ert_kargs *a);
ert_status ert_cpu_concat(const ert_kargs *a);
ert_status ert_cpu_split(const ert_kargs *a);
ert_status ert_cpu_slice(const ert_kargs *a);
ert_status ert_cpu_gather(const ert_kargs *a);
ert_status ert_cpu_pad(const ert_kargs *a);
ert_status ert_cpu_tile(const ert_kargs *a);
/* attention.c: ert.Attention (strided q, k, v, bias, y) */
ert_status ert_cpu_attention(const ert_kargs *a);
/* cumsum.c */
ert_status ert_cpu_cumsum(const ert_kargs *a);
/* logic.c */
ert_status ert_cpu_not(const ert_kargs *a);
/* math.c: Sin/Cos (by a->op), Mod */
ert_status ert_cpu_trig(const ert_kargs *a);
ert_status ert_cpu_mod(const ert_kargs *a);
/* scatter.c */
ert_status ert_cpu_scatter_nd(const ert_kargs *a);
ert_status ert_cpu_scatter_elements(const ert_kargs *a);
ert_status ert_cpu_gather_elements(const ert_kargs *a);
ert_status ert_cpu_expand(const ert_kargs *a);
ert_status ert_cpu_cast(const ert_kargs *a);
ert_status ert_cpu_shape(const ert_kargs *a);
ert_status ert_cpu_size(const ert_kargs *a);
ert_status ert_cpu_constant_of_shape(const ert_kargs *a);
ert_status ert_cpu_range(const ert_kargs *a);
/* quant.c: QuantizeLinear, DequantizeLinear */
ert_status ert_cpu_quantize(const ert_kargs *a);
ert_status ert_cpu_dequantize(const ert_kargs *a);
/* quant_int.c: QLinearConv and ConvInteger; QLinearMatMul and MatMulInteger (by a->op) */
ert_status ert_cpu_qconv(const ert_kargs *a);
ert_status ert_cpu_qmatmul(const ert_kargs *a);
ert_status ert_cpu_qlinear_add(const ert_kargs *a); /* kernels/cpu/quant.c */
ert_status ert_cpu_qlut(const ert_kargs *a);       /* kernels/cpu/quant.c */
/* MaxPool on int8/uint8 data (pool params, NCHW; ert_cpu_pool sends it here) */
ert_status ert_cpu_maxpool_q8(const ert_kargs *a);
/* One value: clamp(round_half_even(x / scale) + zp, qmin, qmax), NaN -> zp. */
int32_t ert_cpu_quantize1(float x, float scale, int32_t zp, int32_t qmin, int32_t qmax);
/* resize.c */
ert_status ert_cpu_resize(const ert_kargs *a);

/* Training (grad_*.c, loss.c, optim.c): see ert_op for each op's inputs and
 * outputs. A backward op whose output view has data == NULL skips it. */
ert_status ert_cpu_conv_grad_weight(const ert_kargs *a);   /* grad_conv.c */
ert_status ert_cpu_reduce_to(const ert_kargs *a);          /* grad_eltwise.c */
ert_status ert_cpu_broadcast_to(const ert_kargs *a);
ert_status ert_cpu_act_grad(const ert_kargs *a);
ert_status ert_cpu_binary_grad(const ert_kargs *a);
ert_status ert_cpu_fill_zero(const ert_kargs *a);
ert_status ert_cpu_matmul_grad(const ert_kargs *a);        /* grad_nn.c */
ert_status ert_cpu_pool_grad(const ert_kargs *a);
ert_status ert_cpu_global_avgpool_grad(const ert_kargs *a);
ert_status ert_cpu_softmax_grad(const ert_kargs *a);
ert_status ert_cpu_slice_grad(const ert_kargs *a);
ert_status ert_cpu_gather_grad(const ert_kargs *a);
ert_status ert_cpu_batchnorm_train(const ert_kargs *a);    /* grad_norm.c */
ert_status ert_cpu_batchnorm_grad(const ert_kargs *a);
ert_status ert_cpu_layernorm_grad(const ert_kargs *a);
ert_status ert_cpu_dropout_train(const ert_kargs *a);
ert_status ert_cpu_loss(const ert_kargs *a);               /* loss.c */
ert_status ert_cpu_grad_norm(const ert_kargs *a);          /* optim.c */
ert_status ert_cpu_optim(const ert_kargs *a);
/* Workspace of CONV_GRAD_WEIGHT (im2col of one image group + SGEMM scratch)
 * and MATMUL_GRAD, for the trainer's planner. */
size_t ert_cpu_conv_grad_weight_workspace(const ert_conv_params *p, const int64_t *x_dims, const int64_t *dy_dims,
                                          int n_threads);

/* dwconv.c: direct 2-D depthwise conv (any channel multiplier), the fast twin
 * of conv.c's plain depthwise loops. x (N,C,H,W), w (M,1,KH,KW), y (N,M,OH,OW);
 * b, res (N,M,OH,OW), scale (M) and act optional (NULL). */
typedef struct ert_dw2d {
    const float *x, *w, *b, *res, *scale;
    float *y;
    int64_t N, C, M, mult;
    int64_t H, W, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw;
    const ert_act_params *act;
    const ert_kernel_choice *choice; /* the conv's ert_kargs.choice; NULL: the defaults */
} ert_dw2d;
/* Constant weights packed for the SGEMM at session create (conv.c, matmul.c;
 * the CPU backend's node_packed_bytes / bind_node): bytes for a->packed (0:
 * this node has nothing to pack), and the packing into a->packed. */
size_t ert_cpu_conv_packed_bytes(const ert_kargs *a);
ert_status ert_cpu_conv_pack(const ert_kargs *a);
size_t ert_cpu_matmul_packed_bytes(const ert_kargs *a); /* MatMul and Gemm */
ert_status ert_cpu_matmul_pack(const ert_kargs *a);

/* pwconv.c: one-group convs by a kernel with output channels as the vector
 * dimension, where the SGEMM would run its AVX2 or NEON kernel: 1x1 stride-1
 * ones (x read in place) and 1-D/2-D ones whose windows do not overlap with
 * C*KH*KW <= 576 (a per-task im2col). Its weight panels (bytes 0 where it
 * does not apply; conv.c's packed_bytes/pack call these), and the conv,
 * with *done false (y untouched) where it does not run (prepare's
 * workspace too short for a task's copy and, unpacked, a block's panel). */
size_t ert_cpu_pw_packed_bytes(const ert_kargs *a);
#if defined(__x86_64__) && defined(__GNUC__)
/* x[0..n) through activation a, 16 lanes of AVX-512F (eltwise.c; call only
 * where the CPU has AVX-512F): act_vec.h's kinds in 512-bit instructions
 * (ert_av_act_z), the others one element at a time */
void ert_cpu_act_row_avx512(float *x, int64_t n, const ert_act_params *a);
#endif
/* pwconv.c's scratch on top of prepare's (one worker slot at least), 0 where it does not take the conv */
size_t ert_cpu_pw_workspace(const ert_kargs *a);
ert_status ert_cpu_pw_pack(const ert_kargs *a);
ert_status ert_cpu_pw_conv(const ert_kargs *a, bool *done);

/* conv.c: scratch for the padded-plane path of grouped stride-1 convs, on
 * top of prepare's (the backend's node_workspace); 0 where it does not apply.
 * Without it (a short workspace) the conv takes the im2col SGEMM. */
size_t ert_cpu_conv_padg_workspace(const ert_kargs *a);

/* grpconv.c: one group of a grouped 2-D conv straight from conv.c's
 * zero-padded phase planes (x86-64 AVX2/AVX-512; conv.c keeps its SGEMM
 * elsewhere). Its packed filter: per group (K, ldw), ldw = Mg rounded up to
 * 16, channel m times scale[m] (NULL: 1); ert_cpu_gc_packed gives the
 * floats of group 0 if `packed` holds that layout for (G, Mg, K), else
 * NULL (groups K * *ldw floats apart). */
size_t ert_cpu_gc_packed_bytes(int64_t G, int64_t Mg, int64_t K);
ert_status ert_cpu_gc_pack(const float *w, const float *scale, int64_t G, int64_t Mg, int64_t K, void *dst,
                           size_t bytes);
const float *ert_cpu_gc_packed(const void *packed, size_t bytes, int64_t G, int64_t Mg, int64_t K, int64_t *ldw);
/* Floats past the planes' last that ert_cpu_gc_cols_run may read (and
 * drop): its vectors run past the last output column of a row, up to j1. */
#define ERT_GC_SLACK 32
typedef struct ert_gc_cols {
    const float *P;     /* the group's phase planes */
    const int64_t *off; /* (K): B row k is P + off[k], column j = oh * Wq + ow */
    const float *wp;    /* the group's packed filter (K, ldw) */
    const float *bias;  /* (Mg) or NULL */
    float *y;           /* the group's output rows (Mg, ldy) */
    const float *res;   /* or NULL: added before the activation, rows as y's; only where Wq == OW, isa 2 */
    int64_t K, Mg, ldw, Wq, OW, ldy;
    const ert_act_params *act; /* or NULL */
} ert_gc_cols;
/* The copy the kernel cap kc allows on this CPU: 2 AVX-512F, 1 AVX2+FMA,
 * 0 none (conv.c takes the SGEMM). */
int ert_cpu_gc_isa(const ert_kernel_choice *kc);
/* Rows [r0, r0 + nr) of a group's phase planes from its input x (Cg, H,
 * W), by copy isa (0: plain C): plane (c, pa, pb) (row phase pa of sh,
 * column phase pb of sw) at P + ((c * sh + pa) * sw + pb) * Hp * Wq, its
 * row r at + (r - r0) * Wq holding input row r * sh + pa - ph, column qq
 * input pixel qq * sw + pb - pw. Only the columns that hold pixels are
 * written; pad_rows: rows of the padding zeroed. Row phases whose bit in
 * used_r is clear are skipped. */
typedef struct ert_gc_fill {
    const float *x;
    float *P;
    int64_t Cg, H, W, Wq, Hp, sh, sw, ph, pw, r0, nr;
    uint64_t used_r;
    bool pad_rows;
} ert_gc_fill;
void ert_cpu_gc_fill(const ert_gc_fill *f, int isa);
/* Columns [j0, j1) of the plane grid (those with j % Wq < OW: output
 * (j / Wq, j % Wq)) of every channel of the group, by copy isa (> 0).
 * Nothing at or past column j1 of a B row is read, so with Wq == OW a
 * pointwise conv's x can be the "planes" (off[k] = k * pixels). */
void ert_cpu_gc_cols_run(const ert_gc_cols *g, int64_t j0, int64_t j1, int isa);

/* Whether the direct kernel takes this case (and p->choice allows it). */
bool ert_cpu_dw2d_fits(const ert_dw2d *p);
void ert_cpu_dw2d(const ert_dw2d *p, struct ert_threadpool *pool);
/* Whether the direct kernel takes p channel-blocked (dwconv_cb.h: small
 * planes, multiplier 1, dilation 1); for the tests. */
bool ert_cpu_dw2d_cblocked(const ert_dw2d *p);

/* winograd.c: F(4x4, 3x3) for 3x3 stride-1 dense 2-D convs, chosen at
 * create by a cost rule from shapes, or as a->choice->wino says
 * (ert_cpu_wino_chosen); its transformed
 * filter is the conv's packed weights (ert_cpu_conv_packed_bytes/pack call
 * these) and its scratch comes on top of prepare's (the backend's
 * node_workspace: ert_cpu_wino_workspace). ert_cpu_wino_conv sets *done
 * false, and leaves y untouched, where it cannot run (no or stale packed
 * filter, short workspace): conv.c then takes the im2col SGEMM. */
bool ert_cpu_wino_chosen(const ert_kargs *a);
size_t ert_cpu_wino_packed_bytes(const ert_kargs *a);
ert_status ert_cpu_wino_pack(const ert_kargs *a);
size_t ert_cpu_wino_workspace(const ert_kargs *a);
ert_status ert_cpu_wino_conv(const ert_kargs *a, bool *done);

/* act.c: apply an activation in place on n floats (Conv/Gemm epilogues, unary ops). */
void ert_cpu_act_inplace(float *x, int64_t n, const ert_act_params *act);
float ert_cpu_act1(float x, const ert_act_params *act);

#endif

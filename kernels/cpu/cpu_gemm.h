/* Internal SGEMM shared by Conv, ConvTranspose, MatMul and Gemm (matmul.c).
 *
 *   C(M,N) [+]= alpha * A(M,K) * B(K,N), then per element:
 *   v += bias_row[i] + residual(i,j) + bias_col[j]; v = act(v)
 *
 * A and B are read through strides, so transposed operands cost nothing
 * extra: A(i,k) = a[i*a_rs + k*a_cs]. B is either such a strided matrix or,
 * when `conv` is set, the implicit im2col matrix of a convolution input (the
 * column matrix is never materialised: it is built panel by panel while
 * packing). C is row-major with row stride ldc; residual uses the same ldc.
 *
 * Scratch: ert_cpu_sgemm_workspace() bytes; the kernel uses as many worker
 * slots as the pool and the given workspace allow (at least one). */
#ifndef ERT_CPU_GEMM_H
#define ERT_CPU_GEMM_H
#include "ert_internal.h"

/* Geometry of an implicit im2col B for one group of one image. Spatial dims
 * are always 3 (leading dims of 1-D/2-D convs are 1, stride 1, pad 0).
 * x is (C,D,H,W) contiguous; B row k = (c, kd, kh, kw), column j = (od, oh, ow). */
typedef struct ert_conv_geom {
    const float *x;
    int64_t in[3];           /* D, H, W */
    int64_t out[3];          /* OD, OH, OW */
    int64_t kernel[3], stride[3], dilation[3], pad[3];
} ert_conv_geom;

typedef struct ert_sgemm_args {
    int64_t M, N, K;
    const float *a;
    int64_t a_rs, a_cs;
    float alpha;
    const float *b;          /* ignored when conv != NULL */
    int64_t b_rs, b_cs;
    const int64_t *b_row_off; /* (K) or NULL: dense B row k starts at b + b_row_off[k] instead of
                              * b + k * b_rs (conv.c's padded-plane im2col: every row a shifted
                              * view of the zero-padded input) */
    const ert_conv_geom *conv;
    float *c;
    int64_t ldc;
    bool accumulate;         /* C += result (C prefilled by the caller) */
    const float *a_row_scale; /* (M) or NULL: row i of A times a_row_scale[i], applied while packing (a
                              * frozen BatchNorm folded into a conv without copying its filter) */
    const float *b_row_scale; /* or NULL: B row k times b_row_scale[k] (dense B), times b_row_scale[c] of its
                              * input channel (conv B), applied while packing (a fused squeeze-excitation) */
    const float *bias_row;   /* (M) or NULL */
    const float *bias_col;   /* (N) or NULL: MatMul's bias over its last axis, Gemm's C of (N) */
    const float *residual;   /* (M, ldc) or NULL */
    const ert_act_params *act; /* NULL: none */
    /* A or B packed once at session create (ert_cpu_sgemm_pack), or NULL:
     * packed block by block on every call. Used only when it was packed for
     * the micro-kernel this call picks (else packed on the fly, as NULL). */
    const void *a_packed, *b_packed;
    const ert_kernel_choice *choice; /* the caller's ert_kargs.choice (micro-kernel cap); NULL: the defaults */
} ert_sgemm_args;

/* The store epilogue of one micro-kernel tile, applied in registers before
 * the single store (the kernels that have it: AVX2, AVX-512, NEON): row i,
 * column j of the tile get v += bias_row[i] + res[i*ldr + j] + bias_col[j],
 * then v = act(v); each part optional (NULL), kind ERT_ACT_NONE or one of
 * the activations act_vec.h vectorises. */
typedef struct ert_ukr_epi {
    const float *bias_row, *res, *bias_col;
    int64_t ldr;
    int kind;
    float alpha, beta;
} ert_ukr_epi;

/* Micro-kernels, slowest first. */
typedef enum ert_cpu_gemm_kernel {
    ERT_CPU_GEMM_PORTABLE = 0, /* 6x16, GNU vector types or plain C */
    ERT_CPU_GEMM_AVX2 = 1,     /* 6x16, x86-64 AVX2+FMA */
    ERT_CPU_GEMM_AVX512 = 2,   /* 8x32, x86-64 AVX-512F */
    ERT_CPU_GEMM_NEON = 3,     /* 6x16, aarch64 ASIMD FMLA by lane (gemm_neon.c) */
} ert_cpu_gemm_kernel;
/* The x86 and Arm kernels never meet on one CPU, so one order serves both. */
#define ERT_CPU_GEMM_FASTEST ERT_CPU_GEMM_NEON

/* The micro-kernel SGEMMs (and packing) take under kc (NULL: the defaults):
 * the fastest the CPU supports that is not above kc->gemm_cap. The
 * workspace and packed sizes do not depend on it. */
ert_cpu_gemm_kernel ert_cpu_sgemm_kernel(const ert_kernel_choice *kc);
/* The cap of kc as a kernel (ERT_CPU_GEMM_FASTEST when none): the depthwise
 * (dwconv.c) and Winograd (winograd.c) ISA copies follow it too, so a test
 * covers the AVX2 and baseline copies on an AVX-512 machine. */
ert_cpu_gemm_kernel ert_cpu_kernel_cap(const ert_kernel_choice *kc);

/* A whole operand (g's A, or its dense B; alpha and a_row_scale applied to
 * A) in the micro-kernel's panel layout, made once when the operand is a
 * constant weight: the per-call packing of weights was a third of the
 * SGEMM time on MobileNet-sized 1x1 convs. packed_bytes is the size for any
 * kernel; pack returns ERT_E_INTERNAL if `bytes` is short. */
size_t ert_cpu_sgemm_packed_bytes(int64_t M, int64_t N, int64_t K, bool b_side);
ert_status ert_cpu_sgemm_pack(const ert_sgemm_args *g, bool b_side, void *dst, size_t bytes);

/* Whether a packed operand (rows = M for A, N for B) fits the micro-kernel
 * SGEMMs pick under kc: a caller that keeps no unpacked copy checks first. */
bool ert_cpu_sgemm_packed_fits(const void *packed, int64_t rows, int64_t K, const ert_kernel_choice *kc);

size_t ert_cpu_sgemm_workspace(int64_t M, int64_t N, int64_t K, int n_threads);
/* One worker slot's scratch of an M x N x K product (a single-threaded call
 * with pool NULL needs this much), and the tasks ert_cpu_sgemm splits such
 * a product into on `slots` workers (fewer than about two per worker: the
 * caller may do better running several products side by side). */
size_t ert_cpu_sgemm_slot_bytes(int64_t M, int64_t N, int64_t K);
int64_t ert_cpu_sgemm_tasks(int64_t M, int64_t N, int64_t slots);
/* Returns ERT_E_INTERNAL if ws is smaller than the one-worker size. */
ert_status ert_cpu_sgemm(const ert_sgemm_args *g, void *ws, size_t ws_bytes, struct ert_threadpool *pool);

#endif

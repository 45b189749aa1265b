/* The CUDA int8 kernels (kernels/cuda/cuda_quant.h says what and why):
 *   quantize / dequantize   one thread per element, grid-stride;
 *   qconv_gemm              QLinearConv / ConvInteger as an implicit GEMM per
 *                           (image, group): acc (Mg, out) = (w - wzp) (Mg, Kg)
 *                           x im2col(x - xzp) (Kg, out), 64x64 tiles, 16 deep,
 *                           each of 256 threads 4x4 int32 sums, the im2col
 *                           gathered straight from x (NCHW) into shared memory;
 *   qconv_direct            the same sums one output per thread, for the
 *                           convs with few output channels per group
 *                           (depthwise), where a 64-row tile would idle;
 *   qmm_gemm                QLinearMatMul / MatMulInteger: the same tiles over
 *                           (rows of A) x (columns of B), one batch per z;
 *   maxpool_q8              the largest integer of each window.
 * The requantisation epilogue (requant1) is quant_int.c's, op for op. */
#include "cuda_quant.h"
#include "cuda_types.cuh"

#include <stdint.h>

#define TM 64  /* tile rows (output channels / rows of A) */
#define TN 64  /* tile columns (output pixels / columns of B) */
#define TK 16  /* depth of one tile step */
#define TPB 256

/* ------------------------------------------------------------------ operands */

/* dtype codes the kernels branch on (uniformly per launch) */
enum { Q_I8 = 0, Q_U8 = 1, Q_I32 = 2 };
enum { S_F32 = 0, S_F16 = 1, S_BF16 = 2 };

static int qcode(ert_dtype dt) { return dt == ERT_DTYPE_U8 ? Q_U8 : dt == ERT_DTYPE_I32 ? Q_I32 : Q_I8; }
static int scode(ert_dtype dt) { return dt == ERT_DTYPE_F16 ? S_F16 : dt == ERT_DTYPE_BF16 ? S_BF16 : S_F32; }

static __device__ __forceinline__ int ldq(const void *p, int code, int64_t i) {
    return code == Q_U8 ? (int)((const uint8_t *)p)[i]
         : code == Q_I8 ? (int)((const int8_t *)p)[i]
                        : ((const int32_t *)p)[i];
}

static __device__ __forceinline__ float lds(const void *p, int code, int64_t i) {
    return code == S_F16 ? ert_ld(((const __half *)p)[i])
         : code == S_BF16 ? ert_ld(((const __nv_bfloat16 *)p)[i])
                          : ((const float *)p)[i];
}

static __device__ __forceinline__ void stq(void *p, int code, int64_t i, int v) {
    if (code == Q_U8) ((uint8_t *)p)[i] = (uint8_t)v;
    else if (code == Q_I8) ((int8_t *)p)[i] = (int8_t)v;
    else ((int32_t *)p)[i] = v;
}

/* An optional zero point (NULL: 0); n > 1: element i, else the only one. */
typedef struct qzp {
    const void *p;
    int code;
    int64_t n;
} qzp;

static __device__ __forceinline__ int zp_at(const qzp &z, int64_t i) { return z.p ? ldq(z.p, z.code, z.n > 1 ? i : 0) : 0; }

static qzp zp_of(const ert_kargs *a, int in) {
    qzp z = {NULL, Q_I8, 0};
    if (in < a->n_in && a->in[in].data) z = {a->in[in].data, qcode(a->in[in].dtype), a->in[in].n_elems};
    return z;
}

/* Everything an integer op's epilogue reads. requant false: y = acc (int32). */
typedef struct qepi {
    bool requant, relu;
    const void *xs, *ws, *ys; /* scales, code sc; ws has nws elements */
    int sc;
    int64_t nws;
    qzp yzp;
    const int32_t *bias;
    const uint8_t *lut; /* a fused ert.QLut (QLinearConv's input 9): y = lut[(uint8_t)requantised] */
    void *y;
    int ycode;
} qepi;

/* quant_int.c's requant_of + requant1 for channel ch: mult = xs * ws[ch] / ys
 * in f32, v = (float)acc * mult, clamped to [lo - yzp, hi - yzp] (a fused
 * Relu raises lo to yzp), rounded half to even, + yzp. */
static __device__ __forceinline__ float mult_of(const qepi &e, int64_t ch) {
    return __fdiv_rn(__fmul_rn(lds(e.xs, e.sc, 0), lds(e.ws, e.sc, e.nws == 1 ? 0 : ch)), lds(e.ys, e.sc, 0));
}

/* y's zero point and the clamp bounds [flo, fhi] of v = acc * mult */
typedef struct qrange {
    int yzp;
    float flo, fhi;
} qrange;
static __device__ __forceinline__ qrange range_of(const qepi &e) {
    qrange r;
    r.yzp = zp_at(e.yzp, 0);
    int lo = e.ycode == Q_U8 ? 0 : -128, hi = e.ycode == Q_U8 ? 255 : 127;
    if (e.relu && r.yzp > lo) lo = r.yzp;
    r.flo = (float)(lo - r.yzp), r.fhi = (float)(hi - r.yzp);
    return r;
}
static __device__ __forceinline__ int requant_with(const qrange &r, float mult, int acc) {
    float v = __fmul_rn(__int2float_rn(acc), mult);
    v = v < r.flo ? r.flo : v > r.fhi ? r.fhi : v;
    return __float2int_rn(v) + r.yzp;
}
/* the fused table's byte for a requantised v (stq stores it as y's type), or v */
static __device__ __forceinline__ int lut_of(const qepi &e, int v) { return e.lut ? (int)__ldg(&e.lut[(uint8_t)v]) : v; }
static __device__ __forceinline__ int requant1(const qepi &e, int acc, int64_t ch) {
    return requant_with(range_of(e), mult_of(e, ch), acc);
}

/* y[i] from the exact sum acc of channel ch */
static __device__ __forceinline__ void epilogue1(const qepi &e, int acc, int64_t ch, int64_t i) {
    if (!e.requant) {
        stq(e.y, Q_I32, i, acc);
        return;
    }
    if (e.bias) acc += e.bias[ch];
    stq(e.y, e.ycode, i, lut_of(e, requant1(e, acc, ch)));
}

static qepi epi_of(const ert_kargs *a, bool ql) {
    qepi e;
    memset(&e, 0, sizeof e);
    e.requant = ql;
    e.y = a->out[0].data;
    e.ycode = qcode(a->out[0].dtype);
    if (!ql) return e;
    e.relu = a->params->quant.conv.act.kind == ERT_ACT_RELU;
    e.xs = a->in[1].data;
    e.ws = a->in[4].data;
    e.ys = a->in[6].data;
    e.sc = scode(a->in[1].dtype);
    e.nws = a->in[4].n_elems;
    e.yzp = zp_of(a, 7);
    e.bias = a->n_in > 8 && a->params->quant.conv.has_bias ? (const int32_t *)a->in[8].data : NULL;
    e.lut = a->op == ERT_OP_QLINEAR_CONV && a->n_in > 9 ? (const uint8_t *)a->in[9].data : NULL;
    return e;
}

/* One TK step of a 64x64 tile: thread (ty, tx) adds its 4x4 block. */
static __device__ __forceinline__ void tile_mac(const int (*As)[TM], const int (*Bs)[TN], int ty, int tx, int acc[4][4]) {
#pragma unroll
    for (int kk = 0; kk < TK; kk++) {
        int4 a = *(const int4 *)&As[kk][ty * 4];
        int4 b = *(const int4 *)&Bs[kk][tx * 4];
        int av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] += av[i] * bv[j];
    }
}

/* The end of a tile: store(row, column in the 64x64 tile, sum) for each of
 * the thread's 4x4 sums. */
template <typename F>
static __device__ __forceinline__ void tile_store(const int acc[4][4], int ty, int tx, F store) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) store(ty * 4 + i, tx * 4 + j, acc[i][j]);
}

/* ------------------------------------------------------------------ Q / DQ */

/* x (outer, d, inner) around the per-axis dim (d = 1 per tensor) */
static void split_axis(const ert_tview *x, int64_t axis, int64_t *d, int64_t *inner) {
    *d = 1;
    *inner = x->n_elems;
    if (axis < 0) return;
    *d = x->dims[axis];
    *inner = 1;
    for (int k = (int)axis + 1; k < x->ndim; k++) *inner *= x->dims[k];
}

/* y = clamp(round_half_even(x / s[c]) + zp[c]); NaN -> zp (quant.c) */
static __global__ void quantize_kernel(const void *x, int xc, const void *s, qzp z, void *y, int yc, int64_t n, int64_t d,
                                int64_t inner) {
    int qmin = yc == Q_U8 ? 0 : -128, qmax = yc == Q_U8 ? 255 : 127;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = (i / inner) % d;
        int zp = zp_at(z, c);
        float q = __fdiv_rn(lds(x, xc, i), lds(s, xc, c));
        if (q != q) q = 0.0f;
        float lo = (float)(qmin - zp), hi = (float)(qmax - zp);
        q = q < lo ? lo : q > hi ? hi : q;
        stq(y, yc, i, __float2int_rn(q) + zp);
    }
}

/* y = (float)(x - zp[c]) * s[c] */
template <typename T>
static __global__ void dequantize_kernel(const void *x, int xc, const void *s, int sc, qzp z, T *y, int64_t n, int64_t d,
                                  int64_t inner) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = (i / inner) % d;
        ert_put(&y[i], __fmul_rn(__int2float_rn(ldq(x, xc, i) - zp_at(z, c)), lds(s, sc, c)));
    }
}

static unsigned grid_of(int64_t n) {
    int64_t b = (n + TPB - 1) / TPB;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

extern "C" cudaError_t ert_cuda_quantize_launch(const ert_kargs *a, cudaStream_t st) {
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    int64_t d, inner;
    split_axis(x, a->params->quant.axis, &d, &inner);
    if (!x->n_elems) return cudaSuccess;
    if (x->dtype != a->in[1].dtype) return cudaErrorInvalidValue;
    quantize_kernel<<<grid_of(x->n_elems), TPB, 0, st>>>(x->data, scode(x->dtype), a->in[1].data, zp_of(a, 2), y->data,
                                                         qcode(y->dtype), x->n_elems, d, inner);
    return cudaGetLastError();
}

extern "C" cudaError_t ert_cuda_dequantize_launch(const ert_kargs *a, cudaStream_t st) {
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    int64_t d, inner;
    split_axis(x, a->params->quant.axis, &d, &inner);
    if (!x->n_elems) return cudaSuccess;
    ERT_CUDA_FLOAT_SWITCH(y->dtype, T,
                          dequantize_kernel<T><<<grid_of(x->n_elems), TPB, 0, st>>>(
                              x->data, qcode(x->dtype), a->in[1].data, scode(a->in[1].dtype), zp_of(a, 2), (T *)y->data,
                              x->n_elems, d, inner));
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ convolution */

/* quant_int.c's geometry: spatial dims padded to 3 (leading ones of size 1).
 * Every index fits in int (ert_cuda_quant_node_ok: tensors under 2^31 elements).
 * nhwc: x (N, H, W, C) and y (N, OH, OW, M), channels-last (2-D only). */
typedef struct qgeo {
    int in[3], od[3], k[3], s[3], d[3], pb[3];
    int N, C, M, G, Cg, Mg, in_sz, out_sz, k_sz, Kg;
    bool nhwc;
    /* element strides of a channel and of a pixel in x and y (strides_of):
     * the layout as arithmetic, not as a branch, which nvcc would unswitch
     * the tiled kernels' unrolled loops on (4 minutes of cicc per arch) */
    int xcs, xps, ycs, yps;
} qgeo;

/* g.xcs .. g.yps once C and M are set */
static void strides_of(qgeo *g) {
    g->xcs = g->nhwc ? 1 : g->in_sz, g->xps = g->nhwc ? g->C : 1;
    g->ycs = g->nhwc ? 1 : g->out_sz, g->yps = g->nhwc ? g->M : 1;
}

/* The spatial part of qgeo from nsp (1..3) dims of x and y ((N, C, ...), or
 * (N, ..., C) when nhwc) and the attributes (a dilation of 0 counts as 1);
 * the rest zero. */
static qgeo geo_of(int nsp, const ert_tview *x, const ert_tview *y, const int64_t *k, const int64_t *s,
                   const int64_t *d, const int64_t *pb, bool nhwc) {
    qgeo g;
    memset(&g, 0, sizeof g);
    g.nhwc = nhwc;
    const int sp = nhwc ? 1 : 2; /* the first spatial dim */
    for (int i = 0; i < 3; i++) g.in[i] = g.od[i] = g.k[i] = g.s[i] = g.d[i] = 1;
    for (int i = 0; i < nsp; i++) {
        int j = 3 - nsp + i;
        g.in[j] = (int)x->dims[sp + i], g.od[j] = (int)y->dims[sp + i], g.k[j] = (int)k[i];
        g.s[j] = (int)s[i], g.d[j] = d[i] ? (int)d[i] : 1, g.pb[j] = (int)pb[i];
    }
    g.in_sz = g.in[0] * g.in[1] * g.in[2], g.out_sz = g.od[0] * g.od[1] * g.od[2], g.k_sz = g.k[0] * g.k[1] * g.k[2];
    return g;
}

/* x's element index of channel c (of the whole tensor) of image n at pixel
 * sp (a flat spatial index), and y's of channel m at output pixel p */
static __device__ __forceinline__ int64_t xidx(const qgeo &g, int n, int c, int sp) {
    return (int64_t)n * g.C * g.in_sz + (int64_t)c * g.xcs + (int64_t)sp * g.xps;
}
static __device__ __forceinline__ int64_t yidx(const qgeo &g, int n, int m, int p) {
    return (int64_t)n * g.M * g.out_sz + (int64_t)m * g.ycs + (int64_t)p * g.yps;
}

typedef struct qconv_ops {
    const void *x, *w;
    int xc, wc;
    qzp xzp, wzp;
} qconv_ops;

/* (x - xzp) at tap k = (c, q0, q1, q2) of output pixel (b0, b1, b2) = its
 * window origin in image n; 0 in the padding. c0: the group's first channel. */
static __device__ __forceinline__ int tap(const qconv_ops &o, const qgeo &g, int n, int c0, int k, int b0, int b1,
                                          int b2, int xzp) {
    int c = k / g.k_sz, q = k - c * g.k_sz;
    int q0 = q / (g.k[1] * g.k[2]), r = q - q0 * g.k[1] * g.k[2], q1 = r / g.k[2], q2 = r - q1 * g.k[2];
    int i0 = b0 + q0 * g.d[0], i1 = b1 + q1 * g.d[1], i2 = b2 + q2 * g.d[2];
    if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1] || i2 < 0 || i2 >= g.in[2]) return 0;
    return ldq(o.x, o.xc, xidx(g, n, c0 + c, (i0 * g.in[1] + i1) * g.in[2] + i2)) - xzp;
}

/* window origin of output pixel p */
static __device__ __forceinline__ void origin(const qgeo &g, int p, int *b0, int *b1, int *b2) {
    int o0 = p / (g.od[1] * g.od[2]), r = p - o0 * g.od[1] * g.od[2], o1 = r / g.od[2], o2 = r - o1 * g.od[2];
    *b0 = o0 * g.s[0] - g.pb[0];
    *b1 = o1 * g.s[1] - g.pb[1];
    *b2 = o2 * g.s[2] - g.pb[2];
}

/* grid (out tiles, Mg tiles, N * G); y (N, M, out) */
static __global__ void __launch_bounds__(TPB) qconv_gemm(qgeo g, qconv_ops o, qepi e) {
    __shared__ __align__(16) int As[TK][TM];
    __shared__ __align__(16) int Bs[TK][TN];
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int p0 = blockIdx.x * TN, m0 = blockIdx.y * TM;
    int n = blockIdx.z / g.G, gi = blockIdx.z % g.G;
    int xzp = zp_at(o.xzp, 0), c0 = gi * g.Cg;
    /* the B pixel this thread gathers is fixed: tid % 64 (TPB is a multiple of TN) */
    int pp = tid % TN, p = p0 + pp, b0 = 0, b1 = 0, b2 = 0;
    bool p_ok = p < g.out_sz;
    if (p_ok) origin(g, p, &b0, &b1, &b2);
    int acc[4][4] = {{0}};
    for (int k0 = 0; k0 < g.Kg; k0 += TK) {
#pragma unroll
        for (int r = 0; r < TM * TK / TPB; r++) {
            int idx = tid + r * TPB, mm = idx / TK, kk = idx % TK, m = m0 + mm, k = k0 + kk, v = 0;
            if (m < g.Mg && k < g.Kg) {
                int mc = gi * g.Mg + m;
                v = ldq(o.w, o.wc, (int64_t)mc * g.Kg + k) - zp_at(o.wzp, mc);
            }
            As[kk][mm] = v;
        }
#pragma unroll
        for (int r = 0; r < TN * TK / TPB; r++) {
            int kk = tid / TN + r * (TPB / TN), k = k0 + kk;
            Bs[kk][pp] = p_ok && k < g.Kg ? tap(o, g, n, c0, k, b0, b1, b2, xzp) : 0;
        }
        __syncthreads();
        tile_mac(As, Bs, ty, tx, acc);
        __syncthreads();
    }
    tile_store(acc, ty, tx, [&](int r, int col, int v) {
        int m = m0 + r, pj = p0 + col, mc = gi * g.Mg + m;
        if (m < g.Mg && pj < g.out_sz) epilogue1(e, v, mc, yidx(g, n, mc, pj));
    });
}

/* one output per thread: y (N, M, out) or (N, out, M) flattened */
static __global__ void qconv_direct(qgeo g, qconv_ops o, qepi e, int64_t n_out) {
    int xzp = zp_at(o.xzp, 0);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_out; i += (int64_t)gridDim.x * blockDim.x) {
        int p, mc, n = (int)(i / ((int64_t)g.out_sz * g.M));
        if (g.nhwc) mc = (int)(i % g.M), p = (int)(i / g.M % g.out_sz);
        else p = (int)(i % g.out_sz), mc = (int)(i / g.out_sz % g.M);
        int gi = mc / g.Mg;
        int64_t wb = (int64_t)mc * g.Kg;
        int wz = zp_at(o.wzp, mc), b0, b1, b2, acc = 0;
        origin(g, p, &b0, &b1, &b2);
        for (int k = 0; k < g.Kg; k++) {
            int t = tap(o, g, n, gi * g.Cg, k, b0, b1, b2, xzp);
            if (t) acc += t * (ldq(o.w, o.wc, wb + k) - wz);
        }
        epilogue1(e, acc, mc, i);
    }
}

/* ------------------------------------------------------------------ convolution on the int8 tensor cores */

/* The packed conv (cuda_quant.h) as an implicit GEMM over 64 x 64 tiles of
 * (output channels of one group) x (output pixels of every image), 32 deep
 * per step, on 4 warps each owning a 32 x 32 quarter (2 x 4 m16n8k32).
 * Shared memory holds both operands K-contiguous, A as [row][k] and B as
 * [pixel][k], rows QROW bytes apart: 32 used, 48 so that a warp's fragment
 * loads (rows g = 0..7 at 4-byte column tig = 0..3: word 12 g + tig) fall in
 * 32 distinct banks. Two shared buffers; the next QDEPTH steps' operands are
 * on their way from global memory into registers while the tensor cores
 * work on this one. */
#define QROW 48
#define QCS 72 /* words per row of the int32 tile: a warp's 8-byte stores in two conflict-free phases */
#define QTHREADS 128
#define QDEPTH 3 /* steps loaded ahead (registers: 8 a step) */
static_assert(ERT_QMMA_TM * QCS * 4 >= 2 * (ERT_QMMA_TM + ERT_QMMA_TN) * QROW, "the tile reuses the operand buffers");

typedef struct qmma_geo {
    int H, W, OW, out_sz, P; /* input plane, output row, pixels per image, N * out_sz */
    int sh, sw, ph, pw;      /* strides and leading pads (1-D: H = 1, sh = 1, ph = 0) */
    int C, Cg, M, Mg, Kp, in_sz; /* in_sz = H * W */
    int tiles_p, tiles_m, split, steps_per; /* grid: x tiles_p, y tiles_m, z group * split */
    int cs;    /* elements from one pixel to the next: 1 (NCHW) or C (NHWC) */
    bool nhwc; /* x (N, H, W, C), y (N, OH, OW, M) */
    bool vec;  /* NHWC, Cg and C multiples of 16, x 16-byte aligned: 16 taps = one load */
} qmma_geo;

static __device__ __forceinline__ void mma_s8(int (&c)[4], const int (&a)[4], int b0, int b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c, (void)a, (void)b0, (void)b1; /* never launched below sm_80 (ert_cuda_qconv_pack) */
#endif
}

/* four 8 x 8 b16 matrices from shared memory (one 16-byte row address per lane) */
static __device__ __forceinline__ void ldsm_x4(int &r0, int &r1, int &r2, int &r3, const uint8_t *p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
#else
    (void)p, r0 = r1 = r2 = r3 = 0;
#endif
}

/* step s's operands into registers: ra, 16 bytes of the thread's filter row
 * (zeros past Mg); rb, 16 taps of its pixel (the padding value pad outside
 * the image), as s8: with g.vec 16 channels of one tap, one 16-byte load */
static __device__ __forceinline__ void qmma_load(const qmma_geo &g, int s, const int8_t *ap, bool a_ok,
                                                 const int2 *__restrict__ ktab, const uint8_t *__restrict__ xp,
                                                 bool p_ok, int b1, int b2, int bhalf, uint8_t flip, uint8_t pad,
                                                 int4 &ra, int4 &rb) {
    const int k0 = s * ERT_QMMA_TK;
    ra = a_ok ? *(const int4 *)(ap + k0) : make_int4(0, 0, 0, 0);
    const int pix = (b1 * g.W + b2) * g.cs; /* the window origin's offset (negative in the padding) */
    if (g.vec) {
        const int2 t = __ldg(&ktab[k0 + bhalf]);
        const int ih = b1 + (t.y & 0xffff), iw = b2 + (t.y >> 16);
        if (p_ok && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W) {
            const int4 v = __ldg((const int4 *)(xp + t.x + pix));
            const int f = (int)(flip * 0x01010101u);
            rb = make_int4(v.x ^ f, v.y ^ f, v.z ^ f, v.w ^ f);
        } else {
            const int pv = (int)(pad * 0x01010101u);
            rb = make_int4(pv, pv, pv, pv);
        }
        return;
    }
    unsigned v0 = 0, v1 = 0, v2 = 0, v3 = 0;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const int2 t = __ldg(&ktab[k0 + bhalf + j]);
        const int ih = b1 + (t.y & 0xffff), iw = b2 + (t.y >> 16);
        unsigned b = pad;
        if (p_ok && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W) b = xp[t.x + pix] ^ flip;
        b <<= 8 * (j & 3);
        if (j < 4) v0 |= b;
        else if (j < 8) v1 |= b;
        else if (j < 12) v2 |= b;
        else v3 |= b;
    }
    rb = make_int4((int)v0, (int)v1, (int)v2, (int)v3);
}

static __device__ __forceinline__ void qmma_store(uint8_t *As, uint8_t *Bs, int arow, int ahalf, int bcol, int bhalf,
                                                  int4 ra, int4 rb) {
    *(int4 *)&As[arow * QROW + ahalf] = ra;
    *(int4 *)&Bs[bcol * QROW + bhalf] = rb;
}

/* grid (tiles_p, tiles_m, G * split); x (N, C, H, W) or (N, H, W, C) int8,
 * or uint8 read as x - 128 (xu8) with its zero point shifted alike (xzs); y
 * (N, M, out) or (N, out, M) as epilogue1 writes it; ws: the split's sums,
 * then one counter per tile */
static __global__ void __launch_bounds__(QTHREADS) qconv_mma(qmma_geo g, const uint8_t *__restrict__ x, bool xu8,
                                                             qzp xzp, const int8_t *__restrict__ pw,
                                                             const int32_t *__restrict__ wsum,
                                                             const int2 *__restrict__ ktab, qepi e, int *ws) {
    /* two buffers of A then two of B; after the loop, the int32 tile (QCS words a row) */
    __shared__ __align__(16) uint8_t smem[ERT_QMMA_TM * QCS * 4];
    uint8_t(*As)[ERT_QMMA_TM * QROW] = (uint8_t(*)[ERT_QMMA_TM * QROW])smem;
    uint8_t(*Bs)[ERT_QMMA_TN * QROW] = (uint8_t(*)[ERT_QMMA_TN * QROW])(smem + 2 * ERT_QMMA_TM * QROW);
    __shared__ int last;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
    const int wm = (warp & 1) * 32, wn = (warp >> 1) * 32;
    const int gi = blockIdx.z / g.split, part = blockIdx.z % g.split;
    const int p0 = blockIdx.x * ERT_QMMA_TN, m0 = blockIdx.y * ERT_QMMA_TM;
    const int s_begin = part * g.steps_per, s_end = min(s_begin + g.steps_per, g.Kp / ERT_QMMA_TK);
    /* A: thread t loads 16 bytes of row t / 2 (zero rows past Mg) */
    const int arow = tid >> 1, ahalf = (tid & 1) * 16;
    const bool a_ok = m0 + arow < g.Mg;
    const int8_t *ap = pw + (int64_t)(gi * g.Mg + m0 + (a_ok ? arow : 0)) * g.Kp + ahalf;
    /* B: thread t gathers 16 taps (k half t / 64) of pixel t % 64 */
    const int bcol = tid & 63, bhalf = (tid >> 6) * 16, p = p0 + bcol;
    const bool p_ok = p < g.P;
    int b1 = 0, b2 = 0;
    const uint8_t *xp = x; /* the image's first channel of the group (ktab's c counts from it) */
    if (p_ok) {
        int n = p / g.out_sz, q = p - n * g.out_sz, oh = q / g.OW, ow = q - oh * g.OW;
        b1 = oh * g.sh - g.ph, b2 = ow * g.sw - g.pw;
        xp = x + (g.nhwc ? (int64_t)n * g.in_sz * g.C + (int64_t)gi * g.Cg
                         : ((int64_t)n * g.C + (int64_t)gi * g.Cg) * g.in_sz);
    }
    const int xzs = zp_at(xzp, 0) - (xu8 ? 128 : 0);
    const uint8_t flip = xu8 ? 0x80 : 0, pad = (uint8_t)xzs;
    int acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0;
    /* QDEPTH steps in flight: while the tensor cores work on step i (shared
     * buffer i & 1), steps i + 1 .. i + QDEPTH sit in registers or are on
     * their way from memory; register set t % QDEPTH holds step t. At batch 1
     * a conv has one block per SM (4 warps) and few steps per block, so with
     * one step in flight every step waited a whole memory round trip (ncu:
     * 4% SM throughput). The inner loop is unrolled QDEPTH times so that the
     * register sets are indexed by constants. */
    /* per row of the tile, once: what the sums need added (the bias, minus
     * xzs * wsum: sum (x - xzp) w = sum xs w - xzs sum w, in wrapping int32
     * as the CPU's sums) and the requantisation multiplier (requant1's
     * operations); read before the main loop so that their chain of global
     * loads (bias, filter sums, scales) is hidden behind it, published by
     * the loop's first barrier */
    __shared__ int radd[ERT_QMMA_TM];
    __shared__ float rmult[ERT_QMMA_TM];
    if (tid < ERT_QMMA_TM && m0 + tid < g.Mg) {
        const int mc = gi * g.Mg + m0 + tid;
        const unsigned b = e.requant && e.bias ? (unsigned)e.bias[mc] : 0u;
        radd[tid] = (int)(b - (unsigned)xzs * (unsigned)wsum[mc]);
        rmult[tid] = e.requant ? mult_of(e, mc) : 0.0f;
    }
    /* ldmatrix row addresses (lane q * 8 + r gives row r of 8 x 16-byte matrix q):
     * A: matrices (rows 0-7 | 8-15) x (k bytes 0-15 | 16-31) = a0..a3 of
     * m16n8k32; B: (pixels 0-7, k 0-15 | 16-31), then pixels 8-15 = b0, b1 of
     * two n8 sub-tiles */
    const int lq = lane >> 3, lr = lane & 7;
    const int a_ld = (wm + (lq & 1) * 8 + lr) * QROW + (lq >> 1) * 16;
    const int b_ld = (wn + (lq >> 1) * 8 + lr) * QROW + (lq & 1) * 16;
    const int n_steps = s_end > s_begin ? s_end - s_begin : 0;
    int4 ra[QDEPTH], rb[QDEPTH];
    if (n_steps > 0) {
        qmma_load(g, s_begin, ap, a_ok, ktab, xp, p_ok, b1, b2, bhalf, flip, pad, ra[0], rb[0]);
        qmma_store(As[0], Bs[0], arow, ahalf, bcol, bhalf, ra[0], rb[0]);
#pragma unroll
        for (int t = 1; t <= QDEPTH; t++)
            if (t < n_steps)
                qmma_load(g, s_begin + t, ap, a_ok, ktab, xp, p_ok, b1, b2, bhalf, flip, pad, ra[t % QDEPTH],
                          rb[t % QDEPTH]);
    }
    __syncthreads();
    for (int i0 = 0; i0 < n_steps; i0 += QDEPTH) {
#pragma unroll
        for (int j = 0; j < QDEPTH; j++) {
            const int i = i0 + j;
            if (i >= n_steps) break;
            const uint8_t *A = As[i & 1], *B = Bs[i & 1];
            int af[2][4], bf[4][2];
#pragma unroll
            for (int u = 0; u < 2; u++)
                ldsm_x4(af[u][0], af[u][1], af[u][2], af[u][3], A + a_ld + u * 16 * QROW);
#pragma unroll
            for (int w = 0; w < 2; w++)
                ldsm_x4(bf[2 * w][0], bf[2 * w][1], bf[2 * w + 1][0], bf[2 * w + 1][1], B + b_ld + w * 16 * QROW);
#pragma unroll
            for (int u = 0; u < 2; u++)
#pragma unroll
                for (int v = 0; v < 4; v++) mma_s8(acc[u][v], af[u], bf[v][0], bf[v][1]);
            const int nx = (j + 1) % QDEPTH; /* step i + 1's register set (i0 is a multiple of QDEPTH) */
            if (i + 1 < n_steps) {
                qmma_store(As[(i + 1) & 1], Bs[(i + 1) & 1], arow, ahalf, bcol, bhalf, ra[nx], rb[nx]);
                if (i + 1 + QDEPTH < n_steps)
                    qmma_load(g, s_begin + i + 1 + QDEPTH, ap, a_ok, ktab, xp, p_ok, b1, b2, bhalf, flip, pad,
                              ra[nx], rb[nx]);
            }
            __syncthreads();
        }
    }
    /* element (i, j, r) of acc: row wm + 16 i + gid + 8 (r >= 2), column wn + 8 j + 2 tig + (r & 1).
     * The tile's sums go to shared memory (one split) or the workspace (the
     * last block of a split reads them there), then the epilogue walks the
     * tile so that consecutive threads write consecutive bytes of y: a
     * channel row at a time (NCHW: consecutive pixels), or a pixel column at
     * a time (NHWC: consecutive channels; the tile is stored column-major). */
    const int tile = (gi * g.tiles_m + blockIdx.y) * g.tiles_p + blockIdx.x;
    const bool cm = g.nhwc;
    const int *src;
    int stride;
    static_assert(ERT_QMMA_TM == ERT_QMMA_TN, "one stride serves the tile both ways");
    if (g.split > 1) {
        int *sums = ws + (int64_t)tile * (ERT_QMMA_TM * ERT_QMMA_TN);
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const int row = wm + i * 16 + gid + (r >> 1) * 8, col = wn + j * 8 + tig * 2 + (r & 1);
                    atomicAdd(&sums[cm ? col * ERT_QMMA_TM + row : row * ERT_QMMA_TN + col], acc[i][j][r]);
                }
        __threadfence();
        __syncthreads();
        if (tid == 0) {
            int *count = ws + (int64_t)g.tiles_p * g.tiles_m * (gridDim.z / g.split) * (ERT_QMMA_TM * ERT_QMMA_TN);
            last = atomicAdd(&count[tile], 1) == g.split - 1;
        }
        __syncthreads();
        if (!last) return;
        __threadfence();
        src = sums, stride = ERT_QMMA_TN;
    } else {
        int *cs = (int *)smem; /* the operand buffers are done with (the loop's last barrier) */
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int r2 = 0; r2 < 2; r2++) {
                    const int row = wm + i * 16 + gid + r2 * 8, col = wn + j * 8 + tig * 2;
                    if (cm) {
                        cs[col * QCS + row] = acc[i][j][2 * r2];
                        cs[(col + 1) * QCS + row] = acc[i][j][2 * r2 + 1];
                    } else {
                        *(int2 *)&cs[row * QCS + col] = make_int2(acc[i][j][2 * r2], acc[i][j][2 * r2 + 1]);
                    }
                }
        __syncthreads();
        src = cs, stride = QCS;
    }
    const qrange rr = e.requant ? range_of(e) : qrange{0, 0.0f, 0.0f};
    /* Each thread owns one line of the tile: channel row tid % 64 (NHWC:
     * consecutive threads write consecutive channels of a pixel) or pixel
     * column tid % 64 (NCHW: consecutive pixels of a channel), at every
     * second place of the other dim. All its sums are read first, then
     * requantised and stored: one after another, each read waited for the
     * store before it, and 32 L2 round trips (split) or dependent shared
     * reads made the epilogue most of a batch-1 conv (ncu: 15-20 us). */
    constexpr int PER = ERT_QMMA_TM * ERT_QMMA_TN / QTHREADS, STEP = QTHREADS / ERT_QMMA_TM;
    const int fixed = tid % ERT_QMMA_TM, first = tid / ERT_QMMA_TM;
    int sv[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) { /* (line place first + STEP k, fixed): column-major when cm */
        const int at = (first + STEP * k) * stride + fixed;
        sv[k] = g.split > 1 ? __ldcg(&src[at]) : src[at];
    }
    const int ycode = e.requant ? e.ycode : Q_I32;
    if (cm) { /* row fixed: one channel, pixels p0 + first + STEP k */
        const int m = m0 + fixed;
        if (m >= g.Mg) return;
        const int mc = gi * g.Mg + m;
        const unsigned ad = (unsigned)radd[fixed];
        const float mu = rmult[fixed];
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int pj = p0 + first + STEP * k;
            if (pj >= g.P) break;
            const int acc = (int)((unsigned)sv[k] + ad);
            stq(e.y, ycode, (int64_t)pj * g.M + mc, e.requant ? lut_of(e, requant_with(rr, mu, acc)) : acc);
        }
    } else { /* column fixed: one pixel, channels m0 + first + STEP k */
        const int pj = p0 + fixed;
        if (pj >= g.P) return;
        const int n = pj / g.out_sz;
        const int64_t base = (int64_t)n * g.M * g.out_sz + (pj - n * g.out_sz);
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int row = first + STEP * k, m = m0 + row;
            if (m >= g.Mg) break;
            const int acc = (int)((unsigned)sv[k] + (unsigned)radd[row]);
            stq(e.y, ycode, base + (int64_t)(gi * g.Mg + m) * g.out_sz,
                e.requant ? lut_of(e, requant_with(rr, rmult[row], acc)) : acc);
        }
    }
}

/* the packed conv's launch (a->packed filled by ert_cuda_qconv_pack) */
static cudaError_t qconv_mma_launch(const ert_kargs *a, const qgeo &q, const qconv_ops &o, int sm_count,
                                    cudaStream_t st) {
    qmma_geo g;
    memset(&g, 0, sizeof g);
    /* qgeo pads the spatial dims to 3 with leading ones: [1] and [2] are H and W (1-D: H = 1) */
    g.H = q.in[1], g.W = q.in[2], g.OW = q.od[2], g.out_sz = q.out_sz, g.P = q.N * q.out_sz;
    g.sh = q.s[1], g.sw = q.s[2], g.ph = q.pb[1], g.pw = q.pb[2];
    g.C = q.C, g.Cg = q.Cg, g.M = q.M, g.Mg = q.Mg, g.in_sz = q.in_sz;
    g.nhwc = q.nhwc, g.cs = q.nhwc ? q.C : 1;
    g.vec = q.nhwc && q.Cg % 16 == 0 && q.C % 16 == 0 && ((uintptr_t)o.x & 15) == 0;
    const ert_qmma_layout l = ert_qmma_layout_of(q.M, q.Kg);
    g.Kp = l.Kp;
    g.tiles_p = (g.P + ERT_QMMA_TN - 1) / ERT_QMMA_TN, g.tiles_m = (q.Mg + ERT_QMMA_TM - 1) / ERT_QMMA_TM;
    const int64_t tiles = (int64_t)g.tiles_p * g.tiles_m * q.G, steps = l.Kp / ERT_QMMA_TK;
    int split = ert_qmma_split(tiles, steps, sm_count);
    size_t ws_bytes = ert_qmma_ws_bytes(tiles, split);
    if (split > 1 && (!a->workspace || a->workspace_bytes < ws_bytes)) split = 1, ws_bytes = 0;
    g.steps_per = (int)((steps + split - 1) / split);
    g.split = (int)((steps + g.steps_per - 1) / g.steps_per); /* no empty part */
    if (g.split > 1) {
        cudaError_t e = cudaMemsetAsync(a->workspace, 0, ert_qmma_ws_bytes(tiles, g.split), st);
        if (e != cudaSuccess) return e;
    }
    const int8_t *pw = (const int8_t *)a->packed;
    dim3 grid((unsigned)g.tiles_p, (unsigned)g.tiles_m, (unsigned)(q.G * g.split));
    qconv_mma<<<grid, QTHREADS, 0, st>>>(g, (const uint8_t *)o.x, o.xc == Q_U8, o.xzp, pw,
                                         (const int32_t *)(pw + l.sum_off), (const int2 *)(pw + l.tab_off),
                                         epi_of(a, a->op == ERT_OP_QLINEAR_CONV), (int *)a->workspace);
    return cudaGetLastError();
}

extern "C" cudaError_t ert_cuda_qconv_launch(const ert_kargs *a, int sm_count, cudaStream_t st) {
    const ert_conv_params *cp = &a->params->quant.conv;
    bool ql = a->op == ERT_OP_QLINEAR_CONV;
    int iw = ql ? 3 : 1, iwz = ql ? 5 : 3;
    const ert_tview *x = &a->in[0], *w = &a->in[iw], *y = &a->out[0];
    if ((cp->nhwc && cp->nsp != 2) || cp->nsp < 1 || cp->nsp > 3 || cp->group < 1) return cudaErrorInvalidValue;
    qgeo g = geo_of(cp->nsp, x, y, cp->kernel, cp->stride, cp->dilation, cp->pad_begin, cp->nhwc);
    g.N = (int)x->dims[0], g.C = (int)x->dims[cp->nhwc ? 3 : 1], g.M = (int)w->dims[0], g.G = (int)cp->group;
    g.Cg = g.C / g.G, g.Mg = g.M / g.G;
    g.Kg = g.Cg * g.k_sz;
    strides_of(&g);
    if (!y->n_elems) return cudaSuccess;
    qconv_ops o = {x->data, w->data, qcode(x->dtype), qcode(w->dtype), zp_of(a, 2), zp_of(a, iwz)};
    if (a->packed) return qconv_mma_launch(a, g, o, sm_count, st);
    qepi e = epi_of(a, ql);
    if (g.Mg < 16 || (int64_t)g.N * g.G > 65535) {
        qconv_direct<<<grid_of(y->n_elems), TPB, 0, st>>>(g, o, e, y->n_elems);
    } else {
        dim3 grid((unsigned)((g.out_sz + TN - 1) / TN), (unsigned)((g.Mg + TM - 1) / TM), (unsigned)(g.N * g.G));
        if (grid.y > 65535) return cudaErrorInvalidValue;
        qconv_gemm<<<grid, TPB, 0, st>>>(g, o, e);
    }
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ matrix product */

/* acc (rows, N) = (A - azp) (rows, K) x (B - bzp[j]) (K, N); z: batch
 * (A, B and y advance by sa, sb, sy elements; sb = 0 for a 2-D B). */
typedef struct qmm {
    const void *A, *B;
    int ac, bc;
    qzp azp, bzp;
    int rows, K, N;
    int64_t sa, sb, sy;
} qmm;

static __global__ void __launch_bounds__(TPB) qmm_gemm(qmm q, qepi e) {
    __shared__ __align__(16) int As[TK][TM];
    __shared__ __align__(16) int Bs[TK][TN];
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int n0 = blockIdx.x * TN, m0 = blockIdx.y * TM;
    int64_t ab = blockIdx.z * q.sa, bb = blockIdx.z * q.sb, yb = blockIdx.z * q.sy;
    int azp = zp_at(q.azp, 0);
    int acc[4][4] = {{0}};
    for (int k0 = 0; k0 < q.K; k0 += TK) {
#pragma unroll
        for (int r = 0; r < TM * TK / TPB; r++) {
            int idx = tid + r * TPB, mm = idx / TK, kk = idx % TK, m = m0 + mm, k = k0 + kk;
            As[kk][mm] = m < q.rows && k < q.K ? ldq(q.A, q.ac, ab + (int64_t)m * q.K + k) - azp : 0;
        }
#pragma unroll
        for (int r = 0; r < TN * TK / TPB; r++) {
            int idx = tid + r * TPB, kk = idx / TN, nn = idx % TN, j = n0 + nn, k = k0 + kk;
            Bs[kk][nn] = j < q.N && k < q.K ? ldq(q.B, q.bc, bb + (int64_t)k * q.N + j) - zp_at(q.bzp, j) : 0;
        }
        __syncthreads();
        tile_mac(As, Bs, ty, tx, acc);
        __syncthreads();
    }
    tile_store(acc, ty, tx, [&](int r, int c, int v) {
        int m = m0 + r, col = n0 + c;
        if (m < q.rows && col < q.N) epilogue1(e, v, col, yb + (int64_t)m * q.N + col);
    });
}

extern "C" cudaError_t ert_cuda_qmatmul_launch(const ert_kargs *a, cudaStream_t st) {
    bool ql = a->op == ERT_OP_QLINEAR_MATMUL;
    int ib = ql ? 3 : 1, ibz = ql ? 5 : 3;
    const ert_tview *A = &a->in[0], *B = &a->in[ib], *y = &a->out[0];
    if (B->ndim < 2 || A->ndim < 1) return cudaErrorInvalidValue;
    qmm q;
    q.A = A->data, q.B = B->data, q.ac = qcode(A->dtype), q.bc = qcode(B->dtype);
    q.azp = zp_of(a, 2), q.bzp = zp_of(a, ibz);
    q.K = (int)A->dims[A->ndim - 1], q.N = (int)B->dims[B->ndim - 1];
    int64_t batch = 1;
    if (B->ndim == 2) { /* every row of A against one B */
        q.rows = (int)(A->n_elems / (q.K ? q.K : 1));
        q.sa = q.sb = q.sy = 0;
    } else { /* equal batch dims (ert_cuda_quant_node_ok) */
        q.rows = (int)A->dims[A->ndim - 2];
        for (int d = 0; d < A->ndim - 2; d++) batch *= A->dims[d];
        q.sa = (int64_t)q.rows * q.K, q.sb = (int64_t)q.K * q.N, q.sy = (int64_t)q.rows * q.N;
    }
    if (!y->n_elems) return cudaSuccess;
    dim3 grid((unsigned)((q.N + TN - 1) / TN), (unsigned)((q.rows + TM - 1) / TM), (unsigned)batch);
    if (grid.y > 65535 || grid.z > 65535) return cudaErrorInvalidValue;
    qmm_gemm<<<grid, TPB, 0, st>>>(q, epi_of(a, ql));
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ max pooling */

/* quant_int.c's ert_cpu_maxpool_q8: x (N, C, D1..Dn) NCHW or (N, H, W, C)
 * NHWC, the largest value of each window, padding ignored, the lowest value
 * for an empty window. */
static __global__ void maxpool_q8_kernel(qgeo g, const void *x, void *y, int code, int64_t n_out) {
    int lowest = code == Q_U8 ? 0 : -128;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_out; i += (int64_t)gridDim.x * blockDim.x) {
        int o, n, c;
        if (g.nhwc) c = (int)(i % g.C), o = (int)(i / g.C % g.out_sz), n = (int)(i / ((int64_t)g.C * g.out_sz));
        else o = (int)(i % g.out_sz), c = (int)(i / g.out_sz % g.C), n = (int)(i / ((int64_t)g.C * g.out_sz));
        int b0, b1, b2, best = lowest;
        origin(g, o, &b0, &b1, &b2);
        for (int q0 = 0; q0 < g.k[0]; q0++) {
            int i0 = b0 + q0 * g.d[0];
            if (i0 < 0 || i0 >= g.in[0]) continue;
            for (int q1 = 0; q1 < g.k[1]; q1++) {
                int i1 = b1 + q1 * g.d[1];
                if (i1 < 0 || i1 >= g.in[1]) continue;
                for (int q2 = 0; q2 < g.k[2]; q2++) {
                    int i2 = b2 + q2 * g.d[2];
                    if (i2 < 0 || i2 >= g.in[2]) continue;
                    int v = ldq(x, code, xidx(g, n, c, (i0 * g.in[1] + i1) * g.in[2] + i2));
                    best = v > best ? v : best;
                }
            }
        }
        stq(y, code, i, best);
    }
}

extern "C" cudaError_t ert_cuda_maxpool_q8_launch(const ert_kargs *a, cudaStream_t st) {
    const ert_pool_params *p = &a->params->pool;
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    if ((p->nhwc && p->nsp != 2) || p->nsp < 1 || p->nsp > 3 || x->dtype != y->dtype) return cudaErrorInvalidValue;
    qgeo g = geo_of(p->nsp, x, y, p->kernel, p->stride, p->dilation, p->pad_begin, p->nhwc);
    g.C = g.M = (int)x->dims[p->nhwc ? 3 : 1];
    strides_of(&g);
    if (!y->n_elems) return cudaSuccess;
    maxpool_q8_kernel<<<grid_of(y->n_elems), TPB, 0, st>>>(g, x->data, y->data, qcode(x->dtype), y->n_elems);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ residual join */

/* ert.QLinearAdd: y = Q([relu](DQ(a) + DQ(b))) element by element with
 * kernels/cpu/quant.c's f32 operations in its order (each product rounded,
 * then the sum, then the quotient: no contraction into FMAs). */
/* one element of QLinearAdd: (a - za) sa + (b - zb) sb, relu, / sy, clamp,
 * + zy (the CPU reference's operations in its order) */
typedef struct qadd_c {
    float sa, sb, sy, lo, hi;
    int za, zb, zy;
} qadd_c;
static __device__ __forceinline__ int qadd1(const qadd_c &c, bool relu, int qa, int qb) {
    float v = __fadd_rn(__fmul_rn(__int2float_rn(qa - c.za), c.sa), __fmul_rn(__int2float_rn(qb - c.zb), c.sb));
    if (relu) v = v > 0.0f ? v : 0.0f;
    float q = __fdiv_rn(v, c.sy);
    if (q != q) q = 0.0f;
    q = q < c.lo ? c.lo : q > c.hi ? c.hi : q;
    return __float2int_rn(q) + c.zy;
}
static __device__ __forceinline__ int byte_of(unsigned w, int k, bool u8) {
    const unsigned b = (w >> (8 * k)) & 0xffu;
    return u8 ? (int)b : (int)(int8_t)b;
}

/* vec: a, b and y 8-bit and 4-byte aligned, n a multiple of 4: each thread
 * four elements through 32-bit loads and stores (byte by byte the kernel
 * moved 0.3 TB/s: 16 us for ResNet-18's batch-8 56x56 joins) */
static __global__ void qadd_kernel(const void *a, int ac, const void *b, int bc, void *y, int yc, const void *as,
                                   const void *bs, const void *ys, int sc, qzp az, qzp bz, qzp yz, bool relu,
                                   int64_t n, bool vec) {
    qadd_c c;
    c.sa = lds(as, sc, 0), c.sb = lds(bs, sc, 0), c.sy = lds(ys, sc, 0);
    c.za = zp_at(az, 0), c.zb = zp_at(bz, 0), c.zy = zp_at(yz, 0);
    const int qmin = yc == Q_U8 ? 0 : -128, qmax = yc == Q_U8 ? 255 : 127;
    c.lo = (float)(qmin - c.zy), c.hi = (float)(qmax - c.zy);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (vec) {
        const bool au = ac == Q_U8, bu = bc == Q_U8;
        for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n / 4; i += stride) {
            const unsigned wa = __ldg((const unsigned *)a + i), wb = __ldg((const unsigned *)b + i);
            unsigned w = 0;
#pragma unroll
            for (int k = 0; k < 4; k++)
                w |= ((unsigned)qadd1(c, relu, byte_of(wa, k, au), byte_of(wb, k, bu)) & 0xffu) << (8 * k);
            ((unsigned *)y)[i] = w;
        }
        return;
    }
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride)
        stq(y, yc, i, qadd1(c, relu, ldq(a, ac, i), ldq(b, bc, i)));
}

extern "C" cudaError_t ert_cuda_qadd_launch(const ert_kargs *a, cudaStream_t st) {
    const ert_tview *y = &a->out[0];
    if (a->n_in != 8 || a->in[0].n_elems != y->n_elems || a->in[3].n_elems != y->n_elems) return cudaErrorInvalidValue;
    if (!y->n_elems) return cudaSuccess;
    const int ac = qcode(a->in[0].dtype), bc = qcode(a->in[3].dtype), yc = qcode(y->dtype);
    const bool vec = ac != Q_I32 && bc != Q_I32 && yc != Q_I32 && y->n_elems % 4 == 0 &&
                     (((uintptr_t)a->in[0].data | (uintptr_t)a->in[3].data | (uintptr_t)y->data) & 3) == 0;
    qadd_kernel<<<grid_of(vec ? y->n_elems / 4 : y->n_elems), TPB, 0, st>>>(
        a->in[0].data, ac, a->in[3].data, bc, y->data, yc, a->in[1].data, a->in[4].data, a->in[6].data,
        scode(a->in[1].dtype), zp_of(a, 2), zp_of(a, 5), zp_of(a, 7), a->params->quant.conv.act.kind == ERT_ACT_RELU,
        y->n_elems, vec);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ create-time check data */

/* p[i] = bytes of a hash of (seed, i): the int8 inputs of the tensor-core
 * conv's self-check (every value, both signs, no pattern the tiles could
 * line up with) */
static __global__ void fill_bytes_kernel(uint8_t *p, int64_t n, unsigned seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
        p[i] = (uint8_t)h;
    }
}

extern "C" cudaError_t ert_cuda_fill_bytes_launch(void *p, int64_t n, unsigned seed, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    fill_bytes_kernel<<<grid_of(n), TPB, 0, st>>>((uint8_t *)p, n, seed);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ lookup table */

/* ert.QLut: y[i] = table[(uint8_t)x[i]] (x, y int8/uint8 of n elements, the
 * table 256 bytes, kernels/cpu/quant.c's ert_cpu_qlut). The table is staged
 * in shared memory; a thread maps four bytes per 32-bit word, the n % 4 tail
 * bytes go to the first threads. x and y are 4-byte aligned (arena blocks
 * are 256-byte aligned; the launcher checks and falls back to bytes). */
static __global__ void qlut_kernel(const uint8_t *x, const uint8_t *table, uint8_t *y, int64_t n, bool words) {
    __shared__ uint8_t t[256];
    for (int k = threadIdx.x; k < 256; k += blockDim.x) t[k] = table[k];
    __syncthreads();
    const int64_t stride = (int64_t)gridDim.x * blockDim.x, first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t done = 0;
    if (words) {
        const int64_t nw = n / 4;
        for (int64_t i = first; i < nw; i += stride) {
            const uint32_t v = ((const uint32_t *)x)[i];
            ((uint32_t *)y)[i] = (uint32_t)t[v & 0xff] | (uint32_t)t[(v >> 8) & 0xff] << 8 |
                                 (uint32_t)t[(v >> 16) & 0xff] << 16 | (uint32_t)t[v >> 24] << 24;
        }
        done = nw * 4;
    }
    for (int64_t i = done + first; i < n; i += stride) y[i] = t[x[i]];
}

extern "C" cudaError_t ert_cuda_qlut_launch(const ert_kargs *a, cudaStream_t st) {
    const ert_tview *x = &a->in[0], *t = &a->in[1], *y = &a->out[0];
    if (a->n_in != 2 || t->n_elems != 256 || x->n_elems != y->n_elems) return cudaErrorInvalidValue;
    if (!y->n_elems) return cudaSuccess;
    const bool words = ((uintptr_t)x->data | (uintptr_t)y->data) % 4 == 0;
    qlut_kernel<<<grid_of(words ? (y->n_elems + 3) / 4 : y->n_elems), TPB, 0, st>>>(
        (const uint8_t *)x->data, (const uint8_t *)t->data, (uint8_t *)y->data, y->n_elems, words);
    return cudaGetLastError();
}

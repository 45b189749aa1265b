/* Direct convolution and ConvTranspose, f32/f16/bf16 (f32 accumulation), NCHW, 1-D/2-D/3-D, groups, strides, dilations,
 * pads, with the fused epilogue (bias, residual, activation) of
 * kernels/cpu/conv.c. One thread per output element; every rank is handled
 * as 3-D (missing leading spatial dims: size 1, kernel 1, stride 1, no pad).
 * This is the path without cuDNN (and for 3-D convs); it is plain, not fast.
 * The cuDNN path lives in cuda_conv.c. ConvTranspose gathers: output o
 * reads input i = (o + pad - k * dil) / stride wherever that divides. */
#include "cuda_internal.h"
#include "cuda_types.cuh"

#include <math.h>
#include <stdint.h>

struct cgeom {
    int64_t N, C, M, group;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
    bool nhwc; /* x, y, res channels-last: x (N, in..., C), y (N, out..., M) */
};

static __device__ __forceinline__ float act1(float x, int kind, float alpha, float beta) {
    switch (kind) {
    case ERT_ACT_RELU: return ert_relu_nan(x);
    case ERT_ACT_LEAKY_RELU: return x >= 0.0f ? x : alpha * x;
    case ERT_ACT_CLIP: return x < alpha ? alpha : (x > beta ? beta : x);
    case ERT_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ERT_ACT_TANH: return tanhf(x);
    case ERT_ACT_HARD_SIGMOID: {
        float y = alpha * x + beta;
        return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
    }
    case ERT_ACT_HARD_SWISH: {
        float y = x / 6.0f + 0.5f;
        return x * (y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y));
    }
    case ERT_ACT_SILU: return x / (1.0f + expf(-x));
    case ERT_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    default: return x;
    }
}

template <typename T>
static __global__ void conv_kernel(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ bias,
                            const T *__restrict__ res, T *__restrict__ y, cgeom g, int64_t total, int kind,
                            float alpha, float beta) {
    const int64_t out_sz = g.out[0] * g.out[1] * g.out[2], in_sz = g.in[0] * g.in[1] * g.in[2];
    const int64_t Cg = g.C / g.group, Mg = g.M / g.group, k_sz = g.k[0] * g.k[1] * g.k[2];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r, m, n;
        if (g.nhwc) {
            m = i % g.M, r = (i / g.M) % out_sz, n = i / (out_sz * g.M);
        } else {
            r = i % out_sz, m = (i / out_sz) % g.M, n = i / (out_sz * g.M);
        }
        int64_t ow = r % g.out[2], oh = (r / g.out[2]) % g.out[1], od = r / (g.out[2] * g.out[1]);
        int64_t gi = m / Mg;
        /* NCHW: channel c's plane is contiguous (stride in_sz, pixel stride 1);
         * NHWC: channel stride 1, pixel stride C */
        const T *xg = g.nhwc ? x + n * in_sz * g.C + gi * Cg : x + (n * g.C + gi * Cg) * in_sz;
        const int64_t cs = g.nhwc ? 1 : in_sz, ps = g.nhwc ? g.C : 1;
        const T *wm = w + m * Cg * k_sz;
        float acc = 0.0f;
        for (int64_t c = 0; c < Cg; c++) {
            const T *xc = xg + c * cs;
            const T *wc = wm + c * k_sz;
            for (int64_t kd = 0; kd < g.k[0]; kd++) {
                int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
                if (id < 0 || id >= g.in[0]) continue;
                for (int64_t kh = 0; kh < g.k[1]; kh++) {
                    int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
                    if (ih < 0 || ih >= g.in[1]) continue;
                    for (int64_t kw = 0; kw < g.k[2]; kw++) {
                        int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
                        if (iw < 0 || iw >= g.in[2]) continue;
                        acc += ert_ld(xc[((id * g.in[1] + ih) * g.in[2] + iw) * ps]) * ert_ld(wc[(kd * g.k[1] + kh) * g.k[2] + kw]);
                    }
                }
            }
        }
        if (bias) acc += ert_ld(bias[m]);
        if (res) acc += ert_ld(res[i]);
        ert_put(y + i, act1(acc, kind, alpha, beta));
    }
}

/* Channels-last depthwise convs (the two kernels below): thread i computes
 * V adjacent channels, from c0, of output pixel (n, oh, ow). */
struct dw_pos {
    int n, oh, ow, c0;
};
static __device__ __forceinline__ dw_pos dw_position(unsigned i, int C, int V, int OH, int OW) {
    unsigned CV = (unsigned)C / V, cv = i % CV, pix = i / CV;
    dw_pos p;
    p.ow = (int)(pix % (unsigned)OW);
    p.oh = (int)((pix / (unsigned)OW) % (unsigned)OH);
    p.n = (int)(pix / ((unsigned)OW * (unsigned)OH));
    p.c0 = (int)cv * V;
    return p;
}

/* ... and its epilogue: + bias, + residual, activation, one vector store of
 * U (V elements of T) at y + i * V. */
template <typename T, typename U, int V>
static __device__ __forceinline__ void dw_store(const float *acc, const T *__restrict__ bias,
                                                const T *__restrict__ res, T *__restrict__ y, unsigned i, int c0,
                                                int kind, float alpha, float beta) {
    union vec {
        U u;
        T e[V];
    } out, rv;
    if (res) rv.u = *(const U *)(res + (size_t)i * V);
#pragma unroll
    for (int v = 0; v < V; v++) {
        float a = acc[v];
        if (bias) a += ert_ld(bias[c0 + v]);
        if (res) a += ert_ld(rv.e[v]);
        ert_put(&out.e[v], act1(a, kind, alpha, beta));
    }
    *(U *)(y + (size_t)i * V) = out.u;
}

/* x (N, C, in...), w (C, M/group, k...), y (N, M, out...). */
/* Channels-last 2-D depthwise conv (group = C = M): each thread computes V =
 * 16 / sizeof(T) adjacent channels of one output pixel with 16-byte loads of
 * x and the residual and one 16-byte store, in 32-bit index arithmetic (the
 * general kernel's 64-bit divisions per output made MobileNetV2's depthwise
 * convs cost 10 us each at batch 1). The filter (C, 1, KH, KW) is read per
 * channel from the cache. */
template <typename T>
static __global__ void dw_nhwc_kernel(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ bias,
                                      const T *__restrict__ res, T *__restrict__ y, int H, int W, int C, int OH,
                                      int OW, int KH, int KW, int sh, int sw, int dh, int dw, int ph, int pw,
                                      unsigned total, int kind, float alpha, float beta) {
    constexpr int V = 16 / sizeof(T);
    union vec {
        uint4 u;
        T e[V];
    };
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const dw_pos q = dw_position(i, C, V, OH, OW);
    const int n = q.n, oh = q.oh, ow = q.ow, c0 = q.c0;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; v++) acc[v] = 0.0f;
    const T *xn = x + (size_t)n * H * W * C + c0;
    for (int kh = 0; kh < KH; kh++) {
        int ih = oh * sh - ph + kh * dh;
        if (ih < 0 || ih >= H) continue;
        for (int kw = 0; kw < KW; kw++) {
            int iw = ow * sw - pw + kw * dw;
            if (iw < 0 || iw >= W) continue;
            vec xv;
            xv.u = *(const uint4 *)(xn + ((size_t)ih * W + iw) * C);
            const T *wk = w + (size_t)c0 * KH * KW + kh * KW + kw;
#pragma unroll
            for (int v = 0; v < V; v++) acc[v] += ert_ld(xv.e[v]) * ert_ld(wk[v * KH * KW]);
        }
    }
    dw_store<T, uint4, V>(acc, bias, res, y, i, c0, kind, alpha, beta);
}

/* The same conv with the filter taken as (K, K, C) (ert_cuda_dw_rsc_bytes:
 * packed once at bind into the weights region) and the K x K taps known at
 * compile time (3, 5, 7): every tap's two vector loads (V channels of x, V
 * of the filter) are independent and issued together instead of one
 * dependent round trip per tap, and the filter is one vector load per tap
 * instead of V scalar ones. VB (16 or 8 bytes per thread) halves the
 * channels per thread where 16 would leave too few threads to hide the
 * loads' latency (small maps: 7x7x768 at batch 1 is 4,704 threads of 16
 * bytes). ConvNeXt-T's 7x7 convs were 0.40 of its 1.08 ms (per-node
 * profile, H200) on the kernel above. */
template <int VB> struct vec_bits;
template <> struct vec_bits<16> { typedef uint4 type; };
template <> struct vec_bits<8> { typedef uint2 type; };

template <typename T, int K, int VB>
static __global__ void __launch_bounds__(128)
dw_nhwc_rsc_kernel(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ bias,
                   const T *__restrict__ res, T *__restrict__ y, int H, int W, int C, int OH, int OW, int sh, int sw,
                   int dh, int dw, int ph, int pw, unsigned total, int kind, float alpha, float beta) {
    constexpr int V = VB / sizeof(T);
    typedef typename vec_bits<VB>::type U;
    union vec {
        U u;
        T e[V];
    };
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const dw_pos q = dw_position(i, C, V, OH, OW);
    const int n = q.n, c0 = q.c0, ih0 = q.oh * sh - ph, iw0 = q.ow * sw - pw;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; v++) acc[v] = 0.0f;
    const T *xn = x + (size_t)n * H * W * C + c0;
#pragma unroll
    for (int kh = 0; kh < K; kh++) {
        const int ih = ih0 + kh * dh;
        const bool hin = (unsigned)ih < (unsigned)H;
#pragma unroll
        for (int kw = 0; kw < K; kw++) {
            const int iw = iw0 + kw * dw;
            if (hin && (unsigned)iw < (unsigned)W) {
                vec xv, wv;
                xv.u = __ldg((const U *)(xn + ((size_t)ih * W + iw) * C));
                wv.u = __ldg((const U *)(w + (size_t)(kh * K + kw) * C + c0));
#pragma unroll
                for (int v = 0; v < V; v++) acc[v] = fmaf(ert_ld(xv.e[v]), ert_ld(wv.e[v]), acc[v]);
            }
        }
    }
    dw_store<T, U, V>(acc, bias, res, y, i, c0, kind, alpha, beta);
}

template <typename T, int K>
static cudaError_t dw_rsc_launch(const T *x, const T *w, const T *bias, const T *res, T *y, const cgeom &g,
                                 int64_t n_out, const ert_act_params *act, cudaStream_t st) {
    constexpr int V16 = 16 / sizeof(T);
    /* fewer than ~4 blocks of 128 per SM (132 on an H100/H200) at 16 bytes: 8 */
    bool narrow = n_out / V16 < 132 * 4 * 128 && g.C % (V16 / 2) == 0;
    unsigned total = (unsigned)(n_out / (narrow ? V16 / 2 : V16));
#define ERT_DW_RSC(VB)                                                                                           \
    dw_nhwc_rsc_kernel<T, K, VB><<<(total + 127) / 128, 128, 0, st>>>(                                           \
        x, w, bias, res, y, (int)g.in[1], (int)g.in[2], (int)g.C, (int)g.out[1], (int)g.out[2], (int)g.s[1],      \
        (int)g.s[2], (int)g.d[1], (int)g.d[2], (int)g.pb[1], (int)g.pb[2], total, (int)act->kind, act->alpha,     \
        act->beta)
    if (narrow) ERT_DW_RSC(8);
    else ERT_DW_RSC(16);
#undef ERT_DW_RSC
    return cudaGetLastError();
}

template <typename T>
static __global__ void convt_kernel(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ bias,
                                    T *__restrict__ y, cgeom g, int64_t total, int kind, float alpha, float beta) {
    const int64_t out_sz = g.out[0] * g.out[1] * g.out[2], in_sz = g.in[0] * g.in[1] * g.in[2];
    const int64_t Cg = g.C / g.group, Mg = g.M / g.group, k_sz = g.k[0] * g.k[1] * g.k[2];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i % out_sz, m = (i / out_sz) % g.M, n = i / (out_sz * g.M);
        int64_t o[3] = {r / (g.out[2] * g.out[1]), (r / g.out[2]) % g.out[1], r % g.out[2]};
        int64_t gi = m / Mg, mg = m % Mg;
        float acc = 0.0f;
        for (int64_t kd = 0; kd < g.k[0]; kd++) {
            int64_t td = o[0] + g.pb[0] - kd * g.d[0];
            if (td < 0 || td % g.s[0]) continue;
            int64_t id = td / g.s[0];
            if (id >= g.in[0]) continue;
            for (int64_t kh = 0; kh < g.k[1]; kh++) {
                int64_t th = o[1] + g.pb[1] - kh * g.d[1];
                if (th < 0 || th % g.s[1]) continue;
                int64_t ih = th / g.s[1];
                if (ih >= g.in[1]) continue;
                for (int64_t kw = 0; kw < g.k[2]; kw++) {
                    int64_t tw = o[2] + g.pb[2] - kw * g.d[2];
                    if (tw < 0 || tw % g.s[2]) continue;
                    int64_t iw = tw / g.s[2];
                    if (iw >= g.in[2]) continue;
                    int64_t xo = (id * g.in[1] + ih) * g.in[2] + iw, ko = (kd * g.k[1] + kh) * g.k[2] + kw;
                    for (int64_t c = 0; c < Cg; c++) {
                        int64_t cc = gi * Cg + c;
                        acc += ert_ld(x[(n * g.C + cc) * in_sz + xo]) * ert_ld(w[(cc * Mg + mg) * k_sz + ko]);
                    }
                }
            }
        }
        if (bias) acc += ert_ld(bias[m]);
        ert_put(y + i, act1(acc, kind, alpha, beta));
    }
}

static bool make_geom(const ert_conv_params *p, const ert_tview *x, const ert_tview *y, cgeom *g) {
    /* channels-last: dims (N, spatial..., C) */
    const int cd = p->nhwc ? x->ndim - 1 : 1, sd = p->nhwc ? 1 : 2;
    if (p->nsp < 1 || p->nsp > 3 || x->ndim != p->nsp + 2 || y->ndim != x->ndim || p->group < 1 ||
        x->dims[cd] % p->group || y->dims[cd] % p->group)
        return false;
    g->N = x->dims[0];
    g->C = x->dims[cd];
    g->M = y->dims[cd];
    g->nhwc = p->nhwc;
    g->group = p->group;
    int off = 3 - p->nsp;
    for (int i = 0; i < 3; i++) {
        int s = i - off;
        bool real = s >= 0;
        g->in[i] = real ? x->dims[sd + s] : 1;
        g->out[i] = real ? y->dims[sd + s] : 1;
        g->k[i] = real ? p->kernel[s] : 1;
        g->s[i] = real ? p->stride[s] : 1;
        g->d[i] = real ? p->dilation[s] : 1;
        g->pb[i] = real ? p->pad_begin[s] : 0;
    }
    return true;
}

extern "C" cudaError_t ert_cuda_conv_transpose_launch(const ert_conv_params *p, const ert_tview *x, const void *w,
                                                      const void *bias, const ert_tview *y, cudaStream_t st) {
    cgeom g;
    if (!make_geom(p, x, y, &g) || x->dtype != y->dtype) return cudaErrorInvalidValue;
    if (y->n_elems <= 0) return cudaSuccess;
    int64_t blocks = (y->n_elems + 127) / 128;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
        convt_kernel<T><<<(unsigned)blocks, 128, 0, st>>>((const T *)x->data, (const T *)w, (const T *)bias,
                                                         (T *)y->data, g, y->n_elems, (int)p->act.kind, p->act.alpha,
                                                         p->act.beta))
    return cudaGetLastError();
}

/* ConvTranspose with kernel == stride (cuda_gemm.c, ert_cuda_run_convt_gemm):
 * z (N, K*sh*sw, H*W) holds every tap's contribution in f32; output pixel
 * (n, k, h*sh + i, w*sw + j) is z[n, (k*sh + i)*sw + j, h*W + w] + bias[k],
 * then the activation. y is NCHW (N, K, H*sh, W*sw). */
template <typename T>
static __global__ void convt_scatter_kernel(const float *__restrict__ z, const T *__restrict__ bias,
                                            T *__restrict__ y, int64_t total, int K, int H, int W, int sh, int sw,
                                            int kind, float alpha, float beta) {
    const int OW = W * sw, OH = H * sh;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = t;
        const int ow = (int)(r % OW);
        r /= OW;
        const int oh = (int)(r % OH);
        r /= OH;
        const int k = (int)(r % K);
        const int64_t n = r / K;
        const int h = oh / sh, i = oh - h * sh, w = ow / sw, j = ow - w * sw;
        float v = z[((n * K + k) * sh * sw + i * sw + j) * (int64_t)H * W + (int64_t)h * W + w];
        if (bias) v += ert_ld(bias[k]);
        ert_put(y + t, act1(v, kind, alpha, beta));
    }
}

extern "C" cudaError_t ert_cuda_convt_scatter_launch(ert_dtype dt, const float *z, const void *bias, void *y,
                                                     int64_t N, int64_t K, int64_t H, int64_t W, int sh, int sw,
                                                     const ert_act_params *act, cudaStream_t st) {
    const int64_t total = N * K * H * sh * W * sw;
    if (total <= 0) return cudaSuccess;
    if (K > INT32_MAX || H * sh > INT32_MAX || W * sw > INT32_MAX) return cudaErrorInvalidValue;
    int64_t blocks = (total + 255) / 256;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        convt_scatter_kernel<T><<<(unsigned)blocks, 256, 0, st>>>(z, (const T *)bias, (T *)y, total, (int)K, (int)H,
                                                                 (int)W, sh, sw, (int)act->kind, act->alpha,
                                                                 act->beta))
    return cudaGetLastError();
}

extern "C" cudaError_t ert_cuda_conv_direct_launch(const ert_conv_params *p, const ert_tview *x, const void *w,
                                                   const void *w_rsc, const void *bias, const void *res,
                                                   const ert_tview *y, cudaStream_t st) {
    cgeom g;
    if (!make_geom(p, x, y, &g) || x->dtype != y->dtype) return cudaErrorInvalidValue;
    if (y->n_elems <= 0) return cudaSuccess;
    int V = 16 / (int)ert_dtype_size(x->dtype);
    bool aligned = !(((uintptr_t)x->data | (uintptr_t)y->data | (uintptr_t)res) & 15);
    if (g.nhwc && p->nsp == 2 && g.group == g.C && g.M == g.C && g.C % V == 0 && aligned &&
        y->n_elems / V < (int64_t)1 << 31 && x->n_elems < (int64_t)1 << 31) {
        const int K = (int)g.k[1];
        if (w_rsc && !((uintptr_t)w_rsc & 15) && g.k[2] == K && (K == 3 || K == 5 || K == 7)) {
            ERT_CUDA_FLOAT_SWITCH(x->dtype, T, {
                const T *xs = (const T *)x->data, *ws = (const T *)w_rsc, *bs = (const T *)bias, *rs = (const T *)res;
                T *ys = (T *)y->data;
                return K == 3   ? dw_rsc_launch<T, 3>(xs, ws, bs, rs, ys, g, y->n_elems, &p->act, st)
                       : K == 5 ? dw_rsc_launch<T, 5>(xs, ws, bs, rs, ys, g, y->n_elems, &p->act, st)
                                : dw_rsc_launch<T, 7>(xs, ws, bs, rs, ys, g, y->n_elems, &p->act, st);
            })
        }
        unsigned total = (unsigned)(y->n_elems / V);
        ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
            dw_nhwc_kernel<T><<<(total + 127) / 128, 128, 0, st>>>(
                (const T *)x->data, (const T *)w, (const T *)bias, (const T *)res, (T *)y->data, (int)g.in[1],
                (int)g.in[2], (int)g.C, (int)g.out[1], (int)g.out[2], (int)g.k[1], (int)g.k[2], (int)g.s[1],
                (int)g.s[2], (int)g.d[1], (int)g.d[2], (int)g.pb[1], (int)g.pb[2], total, (int)p->act.kind,
                p->act.alpha, p->act.beta))
        return cudaGetLastError();
    }
    int64_t blocks = (y->n_elems + 127) / 128;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
        conv_kernel<T><<<(unsigned)blocks, 128, 0, st>>>((const T *)x->data, (const T *)w, (const T *)bias,
                                                        (const T *)res, (T *)y->data, g, y->n_elems,
                                                        (int)p->act.kind, p->act.alpha, p->act.beta))
    return cudaGetLastError();
}

/* Patchify conv (kernel == stride, no pad, channels-last) as a GEMM: the
 * im2col matrix col[M][kh * kw * C], M = (n, oh, ow), whose row is the
 * patch in the (i, j, c) order of a (K, R, S, C) filter. Per (m, i) it is
 * one contiguous run of kw * C elements of x's row oh * kh + i, copied in
 * units of V (16, 8, 4 or 2 bytes: the widest that divides the run, the
 * image row and both base addresses). */
template <typename V>
static __global__ void patch_gather_kernel(const V *__restrict__ x, V *__restrict__ col, int64_t total, int64_t run,
                                           int64_t kh, int64_t OH, int64_t OW, int64_t H, int64_t wrow) {
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t v = t % run, r = t / run;
        int64_t i = r % kh, m = r / kh;
        int64_t ow = m % OW, q = m / OW;
        int64_t oh = q % OH, n = q / OH;
        col[t] = x[(n * H + oh * kh + i) * wrow + ow * run + v];
    }
}

extern "C" cudaError_t ert_cuda_patch_gather_launch(const void *x, void *col, size_t es, int64_t N, int64_t H,
                                                    int64_t W, int64_t C, int64_t kh, int64_t kw, int64_t OH,
                                                    int64_t OW, cudaStream_t st) {
    int64_t run_b = kw * C * (int64_t)es, row_b = W * C * (int64_t)es;
    int64_t rows = N * OH * OW * kh;
    if (rows <= 0 || run_b <= 0) return cudaSuccess;
    uintptr_t al = (uintptr_t)x | (uintptr_t)col;
    int64_t vb = 16;
    while (vb > (int64_t)es && (run_b % vb || row_b % vb || al % (uintptr_t)vb)) vb /= 2;
    int64_t run = run_b / vb, wrow = row_b / vb, total = rows * run;
    unsigned blocks = (unsigned)((total + 255) / 256 < (1 << 20) ? (total + 255) / 256 : (1 << 20));
    switch (vb) {
    case 16: patch_gather_kernel<uint4><<<blocks, 256, 0, st>>>((const uint4 *)x, (uint4 *)col, total, run, kh, OH, OW, H, wrow); break;
    case 8: patch_gather_kernel<uint2><<<blocks, 256, 0, st>>>((const uint2 *)x, (uint2 *)col, total, run, kh, OH, OW, H, wrow); break;
    case 4: patch_gather_kernel<uint32_t><<<blocks, 256, 0, st>>>((const uint32_t *)x, (uint32_t *)col, total, run, kh, OH, OW, H, wrow); break;
    default: patch_gather_kernel<uint16_t><<<blocks, 256, 0, st>>>((const uint16_t *)x, (uint16_t *)col, total, run, kh, OH, OW, H, wrow); break;
    }
    return cudaGetLastError();
}

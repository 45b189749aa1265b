/* BatchNormalization (inference), LayerNormalization, Softmax/LogSoftmax,
 * f32/f16/bf16 data (all operands of one dtype), f32 arithmetic.
 * Semantics of kernels/cpu/norm.c and softmax.c.
 * BatchNorm: one thread per element, y = x * k + b with k, b per channel.
 * LayerNorm: x viewed as (outer, inner); two passes (mean, then the sum of
 *   squared deviations). Rows up to 1024: a warp per row in registers
 *   (ln_warp_kernel); longer: one block per row, shared-memory reductions.
 * InstanceNorm: the same kernel with one block per (n, c) plane, scale[c] and
 *   B[c] broadcast over the plane.
 * Few long rows (GroupNorm(1) exported as Reshape -> InstanceNorm over one
 *   (1, 1, C*H*W) plane: MobileViTv2 had 21 such nodes at 77 us each, one
 *   block streaming the tensor) split each row over `chunks` blocks: pass 1
 *   writes each chunk's (mean, M2) to the node's workspace, pass 2 merges a
 *   row's partials (Chan et al.) in every block and normalises its chunk.
 *   ert_cuda_norm_split_ws() sizes that workspace; without it the one-block
 *   path runs.
 * Softmax: along n of x viewed as (outer, n, inner); inner == 1 (the last
 *   axis, the common case) uses a warp per row up to n = 1024 and one block
 *   per row beyond, otherwise one thread per (outer, inner) line walks n with
 *   stride inner. */
#include "cuda_internal.h"
#include "cuda_types.cuh"

#include <math.h>

constexpr int kThreads = 256;

template <typename T>
static __global__ void bn_kernel(const T *__restrict__ x, const T *__restrict__ scale,
                          const T *__restrict__ bias, const T *__restrict__ mean,
                          const T *__restrict__ var, T *__restrict__ y, float eps, int64_t C, int64_t sz,
                          int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = (i / sz) % C;
        float k = ert_ld(scale[c]) / sqrtf(ert_ld(var[c]) + eps);
        float b = ert_ld(bias[c]) - ert_ld(mean[c]) * k;
        ert_put(y + i, ert_ld(x[i]) * k + b);
    }
}

/* Block-wide sum (or max) of v; every thread gets the result. */
static __device__ float block_reduce(float v, bool is_max, float *red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) {
            float a = red[threadIdx.x], b = red[threadIdx.x + w];
            red[threadIdx.x] = is_max ? ert_max_nan(a, b) : a + b;
        }
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

/* Row blockIdx.x of x (rows, inner). LayerNorm: scale/bias per element of
 * the row (or one broadcast value). InstanceNorm (channels > 0): row r is
 * plane (n, c = r % channels), scale[c] and bias[c] for the whole row. */
template <typename T>
static __global__ void ln_kernel(const T *__restrict__ x, const T *__restrict__ scale,
                          const T *__restrict__ bias, T *__restrict__ y, float eps, int64_t inner,
                          bool scale_bcast, bool bias_bcast, int64_t channels) {
    __shared__ float red[kThreads];
    const T *xp = x + blockIdx.x * inner;
    T *yp = y + blockIdx.x * inner;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) s += ert_ld(xp[i]);
    float mean = block_reduce(s, false, red) / (float)inner;
    float v = 0.0f;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
        float d = ert_ld(xp[i]) - mean;
        v += d * d;
    }
    float inv = rsqrtf(block_reduce(v, false, red) / (float)inner + eps);
    int64_t c = channels > 0 ? (int64_t)blockIdx.x % channels : 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
        float sc = ert_ld(scale[channels > 0 ? c : scale_bcast ? 0 : i]);
        float bi = bias ? ert_ld(bias[channels > 0 ? c : bias_bcast ? 0 : i]) : 0.0f;
        ert_put(yp + i, (ert_ld(xp[i]) - mean) * inv * sc + bi);
    }
}

/* Pass 1 of the split path: block (chunk, row) writes its chunk's mean and
 * sum of squared deviations (two passes over the chunk, the second from L2). */
template <typename T>
static __global__ void ln_part_kernel(const T *__restrict__ x, float2 *__restrict__ part, int64_t inner,
                                      int64_t chunk) {
    __shared__ float red[kThreads];
    const int64_t lo = (int64_t)blockIdx.x * chunk, hi = lo + chunk < inner ? lo + chunk : inner;
    const T *xp = x + (int64_t)blockIdx.y * inner;
    float s = 0.0f;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += ert_ld(xp[i]);
    float mean = block_reduce(s, false, red) / (float)(hi - lo);
    float v = 0.0f;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float d = ert_ld(xp[i]) - mean;
        v += d * d;
    }
    v = block_reduce(v, false, red);
    if (threadIdx.x == 0) part[(int64_t)blockIdx.y * gridDim.x + blockIdx.x] = make_float2(mean, v);
}

/* Pass 2: every block merges its row's gridDim.x partials (each thread the
 * same, in the same order: the result is identical across blocks), then
 * normalises its chunk like ln_kernel. */
template <typename T>
static __global__ void ln_apply_kernel(const T *__restrict__ x, const float2 *__restrict__ part,
                                       const T *__restrict__ scale, const T *__restrict__ bias, T *__restrict__ y,
                                       float eps, int64_t inner, int64_t chunk, bool scale_bcast, bool bias_bcast,
                                       int64_t channels) {
    const int64_t row = blockIdx.y, lo = (int64_t)blockIdx.x * chunk, hi = lo + chunk < inner ? lo + chunk : inner;
    const float2 *pp = part + row * gridDim.x;
    double n = 0, mean = 0, m2 = 0;
    for (unsigned k = 0; k < gridDim.x; k++) {
        int64_t klo = (int64_t)k * chunk, khi = klo + chunk < inner ? klo + chunk : inner;
        double nb = (double)(khi - klo), d = (double)pp[k].x - mean, nt = n + nb;
        mean += d * nb / nt;
        m2 += (double)pp[k].y + d * d * n * nb / nt;
        n = nt;
    }
    const float fm = (float)mean, inv = rsqrtf((float)(m2 / n) + eps);
    const T *xp = x + row * inner;
    T *yp = y + row * inner;
    int64_t c = channels > 0 ? row % channels : 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float sc = ert_ld(scale[channels > 0 ? c : scale_bcast ? 0 : i]);
        float bi = bias ? ert_ld(bias[channels > 0 ? c : bias_bcast ? 0 : i]) : 0.0f;
        ert_put(yp + i, (ert_ld(xp[i]) - fm) * inv * sc + bi);
    }
}

/* How many blocks share one row (1: the one-block path). Enough blocks to
 * fill the GPU (a few per SM of the largest parts), at least 2048 elements a
 * block, at most 1024 chunks. */
static int64_t norm_chunks(int64_t rows, int64_t inner) {
    const int64_t want_blocks = 512, min_chunk = 2048;
    if (rows <= 0 || inner <= 0 || rows >= want_blocks / 2 || rows > 65535) return 1;
    int64_t ch = (want_blocks + rows - 1) / rows, by_len = inner / min_chunk;
    if (ch > by_len) ch = by_len;
    if (ch > 1024) ch = 1024;
    return ch < 2 ? 1 : ch;
}

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = ert_max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Rows of at most 32 * NPL elements (every LayerNorm of the zoo: 96-1024):
 * a warp per row, the row held in registers, warp-shuffle sums, so a row is
 * read once and no block-wide barrier is waited on. The block kernel gave
 * each row 256 threads (ConvNeXt-T's 3136 rows of 96: 160 of them idle) and
 * two shared-memory tree reductions (ViT-B/16's 25 LayerNorms took 6.4 us
 * each, H100 per-node profile). Same two-pass arithmetic as ln_kernel. */
template <typename T, int NPL>
static __global__ void __launch_bounds__(128)
ln_warp_kernel(const T *__restrict__ x, const T *__restrict__ scale, const T *__restrict__ bias, T *__restrict__ y,
               float eps, int rows, int inner, bool scale_bcast, bool bias_bcast, int64_t channels) {
    const int row = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const T *xp = x + (int64_t)row * inner;
    T *yp = y + (int64_t)row * inner;
    /* x, scale and bias all loaded here, before any reduction, so every load
     * of the row is in flight at once: the first version loaded scale and
     * bias in the store loop, behind its `break`, one dependent global
     * latency per 32 elements (ViT-B/16's 768-wide rows: ~11 us a node on
     * an H200; loads past the row end read a clamped address). */
    const int64_t c = channels > 0 ? (int64_t)row % channels : 0;
    float v[NPL], sc[NPL], bi[NPL], s = 0.0f;
#pragma unroll
    for (int k = 0; k < NPL; k++) {
        const int i = k * 32 + lane, ic = i < inner ? i : inner - 1;
        const float xv = ert_ld(xp[ic]);
        sc[k] = ert_ld(scale[channels > 0 ? c : scale_bcast ? 0 : ic]);
        bi[k] = bias ? ert_ld(bias[channels > 0 ? c : bias_bcast ? 0 : ic]) : 0.0f;
        v[k] = i < inner ? xv : 0.0f;
        s += v[k];
    }
    const float mean = warp_sum(s) / (float)inner;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < NPL; k++) {
        float d = v[k] - mean;
        if (k * 32 + lane < inner) q += d * d;
    }
    const float inv = rsqrtf(warp_sum(q) / (float)inner + eps);
#pragma unroll
    for (int k = 0; k < NPL; k++) {
        int i = k * 32 + lane;
        if (i < inner) ert_put(yp + i, (v[k] - mean) * inv * sc[k] + bi[k]);
    }
}

/* Softmax (or LogSoftmax) over rows of at most 32 * NPL elements, a warp per
 * row held in registers (Swin's window attention: rows of 49 under the
 * 256-thread block kernel). NaN propagates as in softmax_row_kernel. */
template <typename T, int NPL>
static __global__ void __launch_bounds__(128)
softmax_warp_kernel(const T *__restrict__ x, T *__restrict__ y, int rows, int n, bool log) {
    const int row = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const T *xp = x + (int64_t)row * n;
    T *yp = y + (int64_t)row * n;
    float v[NPL], m = -INFINITY;
#pragma unroll
    for (int k = 0; k < NPL; k++) {
        int i = k * 32 + lane;
        v[k] = i < n ? ert_ld(xp[i]) : -INFINITY;
        m = ert_max_nan(v[k], m);
    }
    m = warp_max(m);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NPL; k++)
        if (k * 32 + lane < n) s += expf(v[k] - m);
    s = warp_sum(s);
    const float ls = logf(s), inv = 1.0f / s;
#pragma unroll
    for (int k = 0; k < NPL; k++) {
        int i = k * 32 + lane;
        if (i >= n) break;
        ert_put(yp + i, log ? v[k] - m - ls : expf(v[k] - m) * inv);
    }
}

/* The warp-per-row kernels for rows up to 1024 elements; false: longer rows
 * or too many of them for int. */
template <typename T>
static bool ln_warp(const T *x, const T *scale, const T *bias, T *y, float eps, int64_t rows, int64_t inner,
                    bool scale_bcast, bool bias_bcast, int64_t channels, cudaStream_t st) {
    if (inner > 1024 || rows > 0x7fffffff - 3) return false;
    unsigned g = (unsigned)((rows + 3) / 4);
    int r = (int)rows, n = (int)inner;
    if (inner <= 128)
        ln_warp_kernel<T, 4><<<g, 128, 0, st>>>(x, scale, bias, y, eps, r, n, scale_bcast, bias_bcast, channels);
    else if (inner <= 256)
        ln_warp_kernel<T, 8><<<g, 128, 0, st>>>(x, scale, bias, y, eps, r, n, scale_bcast, bias_bcast, channels);
    else if (inner <= 512)
        ln_warp_kernel<T, 16><<<g, 128, 0, st>>>(x, scale, bias, y, eps, r, n, scale_bcast, bias_bcast, channels);
    else
        ln_warp_kernel<T, 32><<<g, 128, 0, st>>>(x, scale, bias, y, eps, r, n, scale_bcast, bias_bcast, channels);
    return true;
}

template <typename T>
static bool softmax_warp(const T *x, T *y, int64_t rows, int64_t n, bool log, cudaStream_t st) {
    if (n > 1024 || rows > 0x7fffffff - 3) return false;
    unsigned g = (unsigned)((rows + 3) / 4);
    int r = (int)rows, m = (int)n;
    if (n <= 128) softmax_warp_kernel<T, 4><<<g, 128, 0, st>>>(x, y, r, m, log);
    else if (n <= 256) softmax_warp_kernel<T, 8><<<g, 128, 0, st>>>(x, y, r, m, log);
    else if (n <= 512) softmax_warp_kernel<T, 16><<<g, 128, 0, st>>>(x, y, r, m, log);
    else softmax_warp_kernel<T, 32><<<g, 128, 0, st>>>(x, y, r, m, log);
    return true;
}

/* rows x inner normalisation: the split path when it pays and ws holds its
 * partials, else one block per row. */
template <typename T>
static void ln_rows(const T *x, const T *scale, const T *bias, T *y, float eps, int64_t rows, int64_t inner,
                    bool scale_bcast, bool bias_bcast, int64_t channels, void *ws, size_t ws_bytes, cudaStream_t st) {
    int64_t ch = norm_chunks(rows, inner);
    if (ch > 1 && ws && ws_bytes >= (size_t)(rows * ch) * sizeof(float2)) {
        int64_t chunk = (inner + ch - 1) / ch;
        ch = (inner + chunk - 1) / chunk; /* no empty chunk */
        dim3 g((unsigned)ch, (unsigned)rows);
        ln_part_kernel<T><<<g, kThreads, 0, st>>>(x, (float2 *)ws, inner, chunk);
        ln_apply_kernel<T><<<g, kThreads, 0, st>>>(x, (const float2 *)ws, scale, bias, y, eps, inner, chunk,
                                                   scale_bcast, bias_bcast, channels);
        return;
    }
    if (ln_warp<T>(x, scale, bias, y, eps, rows, inner, scale_bcast, bias_bcast, channels, st)) return;
    ln_kernel<T><<<(unsigned)rows, kThreads, 0, st>>>(x, scale, bias, y, eps, inner, scale_bcast, bias_bcast, channels);
}

template <typename T>
static __global__ void softmax_row_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t n, bool log) {
    __shared__ float red[kThreads];
    const T *xp = x + blockIdx.x * n;
    T *yp = y + blockIdx.x * n;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = ert_max_nan(ert_ld(xp[i]), m);
    m = block_reduce(m, true, red);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += expf(ert_ld(xp[i]) - m);
    s = block_reduce(s, false, red);
    if (log) {
        float ls = logf(s);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ert_put(yp + i, ert_ld(xp[i]) - m - ls);
    } else {
        float inv = 1.0f / s;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ert_put(yp + i, expf(ert_ld(xp[i]) - m) * inv);
    }
}

template <typename T>
static __global__ void softmax_line_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t outer, int64_t n,
                                    int64_t inner, bool log) {
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < outer * inner;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = t / inner, in = t % inner;
        const T *xp = x + o * n * inner + in;
        T *yp = y + o * n * inner + in;
        float m = -INFINITY;
        for (int64_t i = 0; i < n; i++) m = ert_max_nan(ert_ld(xp[i * inner]), m);
        float s = 0.0f;
        for (int64_t i = 0; i < n; i++) s += expf(ert_ld(xp[i * inner]) - m);
        if (log) {
            float ls = logf(s);
            for (int64_t i = 0; i < n; i++) ert_put(yp + i * inner, ert_ld(xp[i * inner]) - m - ls);
        } else {
            float inv = 1.0f / s;
            for (int64_t i = 0; i < n; i++) ert_put(yp + i * inner, expf(ert_ld(xp[i * inner]) - m) * inv);
        }
    }
}

static unsigned grid_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

extern "C" {

cudaError_t ert_cuda_batchnorm_launch(ert_dtype dt, const void *x, const void *scale, const void *bias,
                                      const void *mean, const void *var, void *y, float eps, int64_t N, int64_t C, int64_t sz,
                                      cudaStream_t st) {
    int64_t n = N * C * sz;
    if (n <= 0) return cudaSuccess;
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        bn_kernel<T><<<grid_for(n), kThreads, 0, st>>>((const T *)x, (const T *)scale, (const T *)bias,
                                                      (const T *)mean, (const T *)var, (T *)y, eps, C, sz, n))
    return cudaGetLastError();
}

size_t ert_cuda_norm_split_ws(int64_t rows, int64_t inner) {
    int64_t ch = norm_chunks(rows, inner);
    return ch > 1 ? (size_t)(rows * ch) * sizeof(float2) : 0;
}

cudaError_t ert_cuda_layernorm_launch(ert_dtype dt, const void *x, const void *scale, const void *bias, void *y,
                                      float eps,
                                      int64_t outer, int64_t inner, bool scale_bcast, bool bias_bcast,
                                      void *ws, size_t ws_bytes, cudaStream_t st) {
    if (outer <= 0 || inner <= 0) return cudaSuccess;
    if (outer > 0x7fffffff) return cudaErrorInvalidValue;
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        ln_rows<T>((const T *)x, (const T *)scale, (const T *)bias, (T *)y, eps, outer, inner, scale_bcast,
                   bias_bcast, 0, ws, ws_bytes, st))
    return cudaGetLastError();
}

cudaError_t ert_cuda_instancenorm_launch(ert_dtype dt, const void *x, const void *scale, const void *bias, void *y,
                                         float eps, int64_t N, int64_t C, int64_t sz, void *ws, size_t ws_bytes,
                                         cudaStream_t st) {
    if (N <= 0 || C <= 0 || sz <= 0) return cudaSuccess;
    if (N * C > 0x7fffffff) return cudaErrorInvalidValue;
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        ln_rows<T>((const T *)x, (const T *)scale, (const T *)bias, (T *)y, eps, N * C, sz, false, false, C, ws,
                   ws_bytes, st))
    return cudaGetLastError();
}

cudaError_t ert_cuda_softmax_launch(bool log, ert_dtype dt, const void *x, void *y, int64_t outer, int64_t n,
                                    int64_t inner, cudaStream_t st) {
    if (outer <= 0 || n <= 0 || inner <= 0) return cudaSuccess;
    if (inner == 1) {
        if (outer > 0x7fffffff) return cudaErrorInvalidValue;
        ERT_CUDA_FLOAT_SWITCH(dt, T,
            if (!softmax_warp<T>((const T *)x, (T *)y, outer, n, log, st))
                softmax_row_kernel<T><<<(unsigned)outer, kThreads, 0, st>>>((const T *)x, (T *)y, n, log))
    } else {
        ERT_CUDA_FLOAT_SWITCH(dt, T,
            softmax_line_kernel<T><<<grid_for(outer * inner), kThreads, 0, st>>>((const T *)x, (T *)y, outer, n,
                                                                                inner, log))
    }
    return cudaGetLastError();
}

} // extern "C"

/* BatchNormalization (inference), LayerNormalization, Softmax/LogSoftmax,
 * f32/f16/bf16 data (all operands of one dtype), f32 arithmetic.
 * Semantics of kernels/cpu/norm.c and softmax.c.
 * BatchNorm: one thread per element, y = x * k + b with k, b per channel.
 * LayerNorm: one block per row (x viewed as (outer, inner)); two passes (mean,
 *   then the sum of squared deviations) through a shared-memory reduction.
 * Softmax: along n of x viewed as (outer, n, inner); inner == 1 (the last
 *   axis, the common case) uses one block per row, otherwise one thread per
 *   (outer, inner) line walks n with stride inner. */
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

template <typename T>
static __global__ void ln_kernel(const T *__restrict__ x, const T *__restrict__ scale,
                          const T *__restrict__ bias, T *__restrict__ y, float eps, int64_t inner,
                          bool scale_bcast, bool bias_bcast) {
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
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
        float sc = ert_ld(scale[scale_bcast ? 0 : i]);
        float bi = bias ? ert_ld(bias[bias_bcast ? 0 : i]) : 0.0f;
        ert_put(yp + i, (ert_ld(xp[i]) - mean) * inv * sc + bi);
    }
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

cudaError_t ert_cuda_layernorm_launch(ert_dtype dt, const void *x, const void *scale, const void *bias, void *y,
                                      float eps,
                                      int64_t outer, int64_t inner, bool scale_bcast, bool bias_bcast,
                                      cudaStream_t st) {
    if (outer <= 0 || inner <= 0) return cudaSuccess;
    if (outer > 0x7fffffff) return cudaErrorInvalidValue;
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        ln_kernel<T><<<(unsigned)outer, kThreads, 0, st>>>((const T *)x, (const T *)scale, (const T *)bias, (T *)y,
                                                          eps, inner, scale_bcast, bias_bcast))
    return cudaGetLastError();
}

cudaError_t ert_cuda_softmax_launch(bool log, ert_dtype dt, const void *x, void *y, int64_t outer, int64_t n,
                                    int64_t inner, cudaStream_t st) {
    if (outer <= 0 || n <= 0 || inner <= 0) return cudaSuccess;
    if (inner == 1) {
        if (outer > 0x7fffffff) return cudaErrorInvalidValue;
        ERT_CUDA_FLOAT_SWITCH(dt, T,
            softmax_row_kernel<T><<<(unsigned)outer, kThreads, 0, st>>>((const T *)x, (T *)y, n, log))
    } else {
        ERT_CUDA_FLOAT_SWITCH(dt, T,
            softmax_line_kernel<T><<<grid_for(outer * inner), kThreads, 0, st>>>((const T *)x, (T *)y, outer, n,
                                                                                inner, log))
    }
    return cudaGetLastError();
}

} // extern "C"

/* BatchNormalization (inference), LayerNormalization, Softmax/LogSoftmax, f32.
 * Semantics of kernels/cpu/norm.c and softmax.c.
 * BatchNorm: one thread per element, y = x * k + b with k, b per channel.
 * LayerNorm: one block per row (x viewed as (outer, inner)); two passes (mean,
 *   then the sum of squared deviations) through a shared-memory reduction.
 * Softmax: along n of x viewed as (outer, n, inner); inner == 1 (the last
 *   axis, the common case) uses one block per row, otherwise one thread per
 *   (outer, inner) line walks n with stride inner. */
#include "cuda_internal.h"

#include <math.h>

constexpr int kThreads = 256;

static __global__ void bn_kernel(const float *__restrict__ x, const float *__restrict__ scale,
                          const float *__restrict__ bias, const float *__restrict__ mean,
                          const float *__restrict__ var, float *__restrict__ y, float eps, int64_t C, int64_t sz,
                          int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = (i / sz) % C;
        float k = scale[c] / sqrtf(var[c] + eps);
        float b = bias[c] - mean[c] * k;
        y[i] = x[i] * k + b;
    }
}

/* Block-wide sum (or max) of v; every thread gets the result. */
static __device__ float block_reduce(float v, bool is_max, float *red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) {
            float a = red[threadIdx.x], b = red[threadIdx.x + w];
            red[threadIdx.x] = is_max ? fmaxf(a, b) : a + b;
        }
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

static __global__ void ln_kernel(const float *__restrict__ x, const float *__restrict__ scale,
                          const float *__restrict__ bias, float *__restrict__ y, float eps, int64_t inner,
                          bool scale_bcast, bool bias_bcast) {
    __shared__ float red[kThreads];
    const float *xp = x + blockIdx.x * inner;
    float *yp = y + blockIdx.x * inner;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) s += xp[i];
    float mean = block_reduce(s, false, red) / (float)inner;
    float v = 0.0f;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
        float d = xp[i] - mean;
        v += d * d;
    }
    float inv = rsqrtf(block_reduce(v, false, red) / (float)inner + eps);
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
        float sc = scale[scale_bcast ? 0 : i];
        float bi = bias ? bias[bias_bcast ? 0 : i] : 0.0f;
        yp[i] = (xp[i] - mean) * inv * sc + bi;
    }
}

static __global__ void softmax_row_kernel(const float *__restrict__ x, float *__restrict__ y, int64_t n, bool log) {
    __shared__ float red[kThreads];
    const float *xp = x + blockIdx.x * n;
    float *yp = y + blockIdx.x * n;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, xp[i]);
    m = block_reduce(m, true, red);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += expf(xp[i] - m);
    s = block_reduce(s, false, red);
    if (log) {
        float ls = logf(s);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yp[i] = xp[i] - m - ls;
    } else {
        float inv = 1.0f / s;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yp[i] = expf(xp[i] - m) * inv;
    }
}

static __global__ void softmax_line_kernel(const float *__restrict__ x, float *__restrict__ y, int64_t outer, int64_t n,
                                    int64_t inner, bool log) {
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < outer * inner;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = t / inner, in = t % inner;
        const float *xp = x + o * n * inner + in;
        float *yp = y + o * n * inner + in;
        float m = -INFINITY;
        for (int64_t i = 0; i < n; i++) m = fmaxf(m, xp[i * inner]);
        float s = 0.0f;
        for (int64_t i = 0; i < n; i++) s += expf(xp[i * inner] - m);
        if (log) {
            float ls = logf(s);
            for (int64_t i = 0; i < n; i++) yp[i * inner] = xp[i * inner] - m - ls;
        } else {
            float inv = 1.0f / s;
            for (int64_t i = 0; i < n; i++) yp[i * inner] = expf(xp[i * inner] - m) * inv;
        }
    }
}

static unsigned grid_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

extern "C" {

cudaError_t ert_cuda_batchnorm_launch(const float *x, const float *scale, const float *bias, const float *mean,
                                      const float *var, float *y, float eps, int64_t N, int64_t C, int64_t sz,
                                      cudaStream_t st) {
    int64_t n = N * C * sz;
    if (n <= 0) return cudaSuccess;
    bn_kernel<<<grid_for(n), kThreads, 0, st>>>(x, scale, bias, mean, var, y, eps, C, sz, n);
    return cudaGetLastError();
}

cudaError_t ert_cuda_layernorm_launch(const float *x, const float *scale, const float *bias, float *y, float eps,
                                      int64_t outer, int64_t inner, bool scale_bcast, bool bias_bcast,
                                      cudaStream_t st) {
    if (outer <= 0 || inner <= 0) return cudaSuccess;
    if (outer > 0x7fffffff) return cudaErrorInvalidValue;
    ln_kernel<<<(unsigned)outer, kThreads, 0, st>>>(x, scale, bias, y, eps, inner, scale_bcast, bias_bcast);
    return cudaGetLastError();
}

cudaError_t ert_cuda_softmax_launch(bool log, const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
                                    cudaStream_t st) {
    if (outer <= 0 || n <= 0 || inner <= 0) return cudaSuccess;
    if (inner == 1) {
        if (outer > 0x7fffffff) return cudaErrorInvalidValue;
        softmax_row_kernel<<<(unsigned)outer, kThreads, 0, st>>>(x, y, n, log);
    } else {
        softmax_line_kernel<<<grid_for(outer * inner), kThreads, 0, st>>>(x, y, outer, n, inner, log);
    }
    return cudaGetLastError();
}

} // extern "C"

/* CumSum: semantics of kernels/cpu/cumsum.c. x and y are (outer, n, inner)
 * around the axis; one thread per (outer, inner) line walks n in order (from
 * the end when reverse), so neighbouring threads read neighbouring elements
 * when inner > 1. Float types accumulate in f32 (the CPU oracle in double:
 * the tests allow for it); integers wrap (unsigned arithmetic). The models
 * that use CumSum run it on small position tables, where one pass per line
 * is plenty; a long single line (inner = outer = 1) would want a block scan. */
#include "cuda_internal.h"
#include "cuda_types.cuh"

constexpr int kThreads = 256;

template <typename T, typename A>
static __device__ __forceinline__ A cs_load(const T *p) { return (A)ert_ld(*p); }
template <> __device__ __forceinline__ uint64_t cs_load<int32_t, uint64_t>(const int32_t *p) {
    return (uint64_t)(int64_t)*p;
}
template <> __device__ __forceinline__ uint64_t cs_load<int64_t, uint64_t>(const int64_t *p) { return (uint64_t)*p; }
template <typename T> static __device__ __forceinline__ void cs_store(T *p, float v) { ert_put(p, v); }
static __device__ __forceinline__ void cs_store(int32_t *p, uint64_t v) { *p = (int32_t)(uint32_t)v; }
static __device__ __forceinline__ void cs_store(int64_t *p, uint64_t v) { *p = (int64_t)v; }

template <typename T, typename A>
static __global__ void cumsum_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t outer, int64_t n,
                                     int64_t inner, bool exclusive, bool reverse) {
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < outer * inner;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t base = (t / inner) * n * inner + t % inner;
        A s = 0;
        for (int64_t k = 0; k < n; k++) {
            int64_t j = base + (reverse ? n - 1 - k : k) * inner;
            A v = cs_load<T, A>(x + j);
            if (!exclusive) s += v;
            cs_store(y + j, s);
            if (exclusive) s += v;
        }
    }
}

static unsigned grid_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

extern "C" cudaError_t ert_cuda_cumsum_launch(ert_dtype dt, const void *x, void *y, int64_t outer, int64_t n,
                                              int64_t inner, bool exclusive, bool reverse, cudaStream_t st) {
    if (outer <= 0 || n <= 0 || inner <= 0) return cudaSuccess;
    unsigned g = grid_for(outer * inner);
    switch (dt) {
    case ERT_DTYPE_I32:
        cumsum_kernel<int32_t, uint64_t><<<g, kThreads, 0, st>>>((const int32_t *)x, (int32_t *)y, outer, n, inner,
                                                                  exclusive, reverse);
        break;
    case ERT_DTYPE_I64:
        cumsum_kernel<int64_t, uint64_t><<<g, kThreads, 0, st>>>((const int64_t *)x, (int64_t *)y, outer, n, inner,
                                                                  exclusive, reverse);
        break;
    default:
        ERT_CUDA_FLOAT_SWITCH(dt, T,
            cumsum_kernel<T, float><<<g, kThreads, 0, st>>>((const T *)x, (T *)y, outer, n, inner, exclusive, reverse))
    }
    return cudaGetLastError();
}

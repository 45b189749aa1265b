/* Element types of the CUDA kernels: f32, f16 (__half) and bf16
 * (__nv_bfloat16). Every kernel loads through ert_ld (to float), computes in
 * f32 and stores through ert_put (rounding to nearest even), so one template
 * serves the three precisions; FP32 accumulation everywhere.
 * ERT_CUDA_FLOAT_SWITCH(dt, T, code) instantiates `code` with T bound to the
 * C type of dt, and returns cudaErrorInvalidValue for any other dtype. */
#ifndef ERT_CUDA_TYPES_CUH
#define ERT_CUDA_TYPES_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

static __device__ __forceinline__ float ert_ld(float v) { return v; }
static __device__ __forceinline__ float ert_ld(__half v) { return __half2float(v); }
static __device__ __forceinline__ float ert_ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ void ert_put(float *p, float v) { *p = v; }
static __device__ __forceinline__ void ert_put(__half *p, float v) { *p = __float2half_rn(v); }
static __device__ __forceinline__ void ert_put(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* NaN rules, as kernels/cpu/nan_rules.h: NaN propagates through Relu, Max,
 * Min and Clip (fmaxf/fminf would drop it). */
static __device__ __forceinline__ float ert_relu_nan(float x) { return (x > 0.0f || x != x) ? x : 0.0f; }
static __device__ __forceinline__ float ert_max_nan(float a, float b) { return (a > b || a != a) ? a : b; }
static __device__ __forceinline__ float ert_min_nan(float a, float b) { return (a < b || a != a) ? a : b; }

/* V consecutive elements in one load/store (8 or 16 bytes for V = 4): the
 * 16-bit types move 4x more data per memory instruction than scalar loads,
 * which is what keeps a memory-bound kernel near the bandwidth. The caller
 * guarantees alignment to V * sizeof(T) bytes. */
template <typename T, int V> struct ert_vec { T e[V]; };
template <typename T> struct __align__(4 * sizeof(T)) ert_vec<T, 4> { T e[4]; };
template <typename T> struct __align__(8 * sizeof(T)) ert_vec<T, 8> { T e[8]; };

template <int V, typename T> static __device__ __forceinline__ void ert_ldv(const T *p, float *o) {
    ert_vec<T, V> u = *(const ert_vec<T, V> *)p;
#pragma unroll
    for (int k = 0; k < V; k++) o[k] = ert_ld(u.e[k]);
}
template <int V, typename T> static __device__ __forceinline__ void ert_stv(T *p, const float *v) {
    ert_vec<T, V> u;
#pragma unroll
    for (int k = 0; k < V; k++) ert_put(&u.e[k], v[k]);
    *(ert_vec<T, V> *)p = u;
}
/* Can pointer p carry V-element vectors of `es`-byte elements? */
static inline bool ert_vec_ok(const void *p, int V, size_t es) {
    return ((size_t)p % ((size_t)V * es)) == 0;
}

#define ERT_CUDA_FLOAT_SWITCH(dt, T, ...)                                                                              \
    switch (dt) {                                                                                                      \
    case ERT_DTYPE_F32: {                                                                                              \
        typedef float T;                                                                                               \
        __VA_ARGS__;                                                                                                   \
    } break;                                                                                                           \
    case ERT_DTYPE_F16: {                                                                                              \
        typedef __half T;                                                                                              \
        __VA_ARGS__;                                                                                                   \
    } break;                                                                                                           \
    case ERT_DTYPE_BF16: {                                                                                             \
        typedef __nv_bfloat16 T;                                                                                       \
        __VA_ARGS__;                                                                                                   \
    } break;                                                                                                           \
    default: return cudaErrorInvalidValue;                                                                             \
    }

#endif /* ERT_CUDA_TYPES_CUH */

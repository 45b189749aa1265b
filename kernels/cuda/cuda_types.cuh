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

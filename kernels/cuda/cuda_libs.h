/*
 * cuda_libs.h: how the CUDA backend reaches cuBLAS/cuBLASLt and cuDNN.
 *
 * A library linked statically (the toolkit ships libcublas_static.a, a cuDNN
 * with static archives) is called directly and this header adds nothing.
 * A library that exists only as a shared object (ERT_CUBLAS_LAZY,
 * ERT_CUDNN_LAZY: set by cmake/ert_cuda_link.cmake) is not a link-time
 * dependency at all: ert_cuda_libs_load() dlopen()s it the first time a CUDA
 * session is created, so a program that never creates one (a CPU run,
 * `edgert --version`, a machine without a GPU) never maps its hundreds of
 * megabytes. Every call site keeps the library's own spelling: below, each
 * name becomes a call through a table of pointers filled by dlsym(), the
 * pointer types taken from the library's own prototypes (__typeof__), so a
 * signature cannot drift.
 *
 * Include this (it includes cublas_v2.h, cublasLt.h and cudnn.h) from C files
 * only, before any use of those libraries.
 * Nothing may call into a lazy library before ert_cuda_libs_load() returned
 * ERT_OK (cuda_init does it before creating the handles).
 */
#ifndef ERT_CUDA_LIBS_H
#define ERT_CUDA_LIBS_H

#include "ert_internal.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#ifdef ERT_HAVE_CUDNN
#include <cudnn.h>
#endif

/* cuBLAS names are the exported ones (cublas_v2.h maps cublasCreate to
 * cublasCreate_v2 and so on); the last argument of X says "cuBLAS" or "cuBLASLt". */
#define ERT_CUBLAS_FUNCS(X)                                                                            \
    X(cublasCreate_v2, blas) X(cublasDestroy_v2, blas) X(cublasSetStream_v2, blas)                     \
    X(cublasSetMathMode, blas) X(cublasSetWorkspace_v2, blas) X(cublasSgemm_v2, blas)                  \
    X(cublasGemmStridedBatchedEx, blas)                                                                \
    X(cublasLtCreate, lt) X(cublasLtDestroy, lt) X(cublasLtMatmul, lt) X(cublasLtMatmulAlgoGetHeuristic, lt) \
    X(cublasLtMatmulDescCreate, lt) X(cublasLtMatmulDescDestroy, lt) X(cublasLtMatmulDescSetAttribute, lt) \
    X(cublasLtMatmulPreferenceCreate, lt) X(cublasLtMatmulPreferenceDestroy, lt)                       \
    X(cublasLtMatmulPreferenceSetAttribute, lt) X(cublasLtMatrixLayoutCreate, lt)                      \
    X(cublasLtMatrixLayoutDestroy, lt) X(cublasLtGetVersion, lt)

#define ERT_CUDNN_FUNCS(X)                                                                             \
    X(cudnnBackendCreateDescriptor, dnn) X(cudnnBackendDestroyDescriptor, dnn) X(cudnnBackendExecute, dnn) \
    X(cudnnBackendFinalize, dnn) X(cudnnBackendGetAttribute, dnn) X(cudnnBackendSetAttribute, dnn)     \
    X(cudnnConvolutionBackwardData, dnn) X(cudnnConvolutionBackwardFilter, dnn)                        \
    X(cudnnConvolutionBiasActivationForward, dnn) X(cudnnConvolutionForward, dnn) X(cudnnCreate, dnn)  \
    X(cudnnCreateActivationDescriptor, dnn) X(cudnnCreateConvolutionDescriptor, dnn)                   \
    X(cudnnCreateFilterDescriptor, dnn) X(cudnnCreateTensorDescriptor, dnn) X(cudnnDestroy, dnn)       \
    X(cudnnDestroyActivationDescriptor, dnn) X(cudnnDestroyConvolutionDescriptor, dnn)                 \
    X(cudnnDestroyFilterDescriptor, dnn) X(cudnnDestroyTensorDescriptor, dnn)                          \
    X(cudnnFindConvolutionBackwardDataAlgorithm, dnn) X(cudnnFindConvolutionBackwardFilterAlgorithm, dnn) \
    X(cudnnFindConvolutionForwardAlgorithm, dnn) X(cudnnGetConvolution2dForwardOutputDim, dnn)         \
    X(cudnnGetConvolutionBackwardDataAlgorithm_v7, dnn) X(cudnnGetConvolutionBackwardDataWorkspaceSize, dnn) \
    X(cudnnGetConvolutionBackwardFilterAlgorithm_v7, dnn)                                              \
    X(cudnnGetConvolutionBackwardFilterWorkspaceSize, dnn) X(cudnnGetConvolutionForwardAlgorithm_v7, dnn) \
    X(cudnnGetErrorString, dnn) X(cudnnSetActivationDescriptor, dnn) X(cudnnSetConvolution2dDescriptor, dnn) \
    X(cudnnSetConvolutionGroupCount, dnn) X(cudnnSetConvolutionMathType, dnn)                          \
    X(cudnnSetFilter4dDescriptor, dnn) X(cudnnSetStream, dnn) X(cudnnSetTensor4dDescriptor, dnn)       \
    X(cudnnGetVersion, dnn) X(cudnnGetConvolutionForwardWorkspaceSize, dnn)

/* The pointers of every lazily loaded library; fields named as the functions. */
typedef struct ert_cuda_libs {
#define ERT_CUDA_LIBS_FIELD(f, lib) __typeof__(f) *f;
#ifdef ERT_CUBLAS_LAZY
    ERT_CUBLAS_FUNCS(ERT_CUDA_LIBS_FIELD)
#endif
#if defined(ERT_CUDNN_LAZY) && defined(ERT_HAVE_CUDNN)
    ERT_CUDNN_FUNCS(ERT_CUDA_LIBS_FIELD)
#endif
#undef ERT_CUDA_LIBS_FIELD
    int unused; /* keeps the struct non-empty when nothing is lazy */
} ert_cuda_libs;

/* Loads (once per process; later calls are a check) every library this build
 * reaches lazily. ERT_E_CUDA with "cuBLAS/cuDNN: <file>: <dlerror>" naming
 * what is missing, set on ctx. Thread-safe. Cheap and always ERT_OK in a build
 * that links them statically. */
ert_status ert_cuda_libs_load(ert_context *ctx);
/* The table, valid after ert_cuda_libs_load() returned ERT_OK. */
const ert_cuda_libs *ert_cuda_libs_get(void);
/* What this build does for each library, e.g. "cuBLAS static, cuDNN loaded
 * at first CUDA session (libcudnn.so.9)": for logs and `edgert info`. */
const char *ert_cuda_libs_describe(void);

/* Why cudaGetDeviceCount() found no device, for people: e (its status; ignored
 * when it succeeded with 0 devices) turned into "no NVIDIA driver/GPU found"
 * when the driver library (libcuda.so.1) cannot be loaded at all, which the
 * CUDA runtime reports as "driver version is insufficient". Written into buf. */
const char *ert_cuda_no_device_reason(cudaError_t e, char *buf, size_t n);

/* Call sites: `cublasCreate(&h)` -> `(ert_cuda_libs_get()->cublasCreate_v2)(&h)`.
 * (A macro's own name is not expanded again inside its replacement, so the
 * field name stays as written.) Not in cuda_libs.c, which fills the table. */
#ifndef ERT_CUDA_LIBS_IMPL
#ifdef ERT_CUBLAS_LAZY
#define cublasCreate_v2 (ert_cuda_libs_get()->cublasCreate_v2)
#define cublasDestroy_v2 (ert_cuda_libs_get()->cublasDestroy_v2)
#define cublasSetStream_v2 (ert_cuda_libs_get()->cublasSetStream_v2)
#define cublasSetMathMode (ert_cuda_libs_get()->cublasSetMathMode)
#define cublasSetWorkspace_v2 (ert_cuda_libs_get()->cublasSetWorkspace_v2)
#define cublasSgemm_v2 (ert_cuda_libs_get()->cublasSgemm_v2)
#define cublasGemmStridedBatchedEx (ert_cuda_libs_get()->cublasGemmStridedBatchedEx)
#define cublasLtCreate (ert_cuda_libs_get()->cublasLtCreate)
#define cublasLtDestroy (ert_cuda_libs_get()->cublasLtDestroy)
#define cublasLtMatmul (ert_cuda_libs_get()->cublasLtMatmul)
#define cublasLtMatmulAlgoGetHeuristic (ert_cuda_libs_get()->cublasLtMatmulAlgoGetHeuristic)
#define cublasLtMatmulDescCreate (ert_cuda_libs_get()->cublasLtMatmulDescCreate)
#define cublasLtMatmulDescDestroy (ert_cuda_libs_get()->cublasLtMatmulDescDestroy)
#define cublasLtMatmulDescSetAttribute (ert_cuda_libs_get()->cublasLtMatmulDescSetAttribute)
#define cublasLtMatmulPreferenceCreate (ert_cuda_libs_get()->cublasLtMatmulPreferenceCreate)
#define cublasLtMatmulPreferenceDestroy (ert_cuda_libs_get()->cublasLtMatmulPreferenceDestroy)
#define cublasLtMatmulPreferenceSetAttribute (ert_cuda_libs_get()->cublasLtMatmulPreferenceSetAttribute)
#define cublasLtMatrixLayoutCreate (ert_cuda_libs_get()->cublasLtMatrixLayoutCreate)
#define cublasLtMatrixLayoutDestroy (ert_cuda_libs_get()->cublasLtMatrixLayoutDestroy)
#define cublasLtGetVersion (ert_cuda_libs_get()->cublasLtGetVersion)
#endif
#if defined(ERT_CUDNN_LAZY) && defined(ERT_HAVE_CUDNN)
#define cudnnBackendCreateDescriptor (ert_cuda_libs_get()->cudnnBackendCreateDescriptor)
#define cudnnBackendDestroyDescriptor (ert_cuda_libs_get()->cudnnBackendDestroyDescriptor)
#define cudnnBackendExecute (ert_cuda_libs_get()->cudnnBackendExecute)
#define cudnnBackendFinalize (ert_cuda_libs_get()->cudnnBackendFinalize)
#define cudnnBackendGetAttribute (ert_cuda_libs_get()->cudnnBackendGetAttribute)
#define cudnnBackendSetAttribute (ert_cuda_libs_get()->cudnnBackendSetAttribute)
#define cudnnConvolutionBackwardData (ert_cuda_libs_get()->cudnnConvolutionBackwardData)
#define cudnnConvolutionBackwardFilter (ert_cuda_libs_get()->cudnnConvolutionBackwardFilter)
#define cudnnConvolutionBiasActivationForward (ert_cuda_libs_get()->cudnnConvolutionBiasActivationForward)
#define cudnnConvolutionForward (ert_cuda_libs_get()->cudnnConvolutionForward)
#define cudnnCreate (ert_cuda_libs_get()->cudnnCreate)
#define cudnnCreateActivationDescriptor (ert_cuda_libs_get()->cudnnCreateActivationDescriptor)
#define cudnnCreateConvolutionDescriptor (ert_cuda_libs_get()->cudnnCreateConvolutionDescriptor)
#define cudnnCreateFilterDescriptor (ert_cuda_libs_get()->cudnnCreateFilterDescriptor)
#define cudnnCreateTensorDescriptor (ert_cuda_libs_get()->cudnnCreateTensorDescriptor)
#define cudnnDestroy (ert_cuda_libs_get()->cudnnDestroy)
#define cudnnDestroyActivationDescriptor (ert_cuda_libs_get()->cudnnDestroyActivationDescriptor)
#define cudnnDestroyConvolutionDescriptor (ert_cuda_libs_get()->cudnnDestroyConvolutionDescriptor)
#define cudnnDestroyFilterDescriptor (ert_cuda_libs_get()->cudnnDestroyFilterDescriptor)
#define cudnnDestroyTensorDescriptor (ert_cuda_libs_get()->cudnnDestroyTensorDescriptor)
#define cudnnFindConvolutionBackwardDataAlgorithm (ert_cuda_libs_get()->cudnnFindConvolutionBackwardDataAlgorithm)
#define cudnnFindConvolutionBackwardFilterAlgorithm (ert_cuda_libs_get()->cudnnFindConvolutionBackwardFilterAlgorithm)
#define cudnnFindConvolutionForwardAlgorithm (ert_cuda_libs_get()->cudnnFindConvolutionForwardAlgorithm)
#define cudnnGetConvolution2dForwardOutputDim (ert_cuda_libs_get()->cudnnGetConvolution2dForwardOutputDim)
#define cudnnGetConvolutionBackwardDataAlgorithm_v7 (ert_cuda_libs_get()->cudnnGetConvolutionBackwardDataAlgorithm_v7)
#define cudnnGetConvolutionBackwardDataWorkspaceSize (ert_cuda_libs_get()->cudnnGetConvolutionBackwardDataWorkspaceSize)
#define cudnnGetConvolutionBackwardFilterAlgorithm_v7 (ert_cuda_libs_get()->cudnnGetConvolutionBackwardFilterAlgorithm_v7)
#define cudnnGetConvolutionBackwardFilterWorkspaceSize (ert_cuda_libs_get()->cudnnGetConvolutionBackwardFilterWorkspaceSize)
#define cudnnGetConvolutionForwardAlgorithm_v7 (ert_cuda_libs_get()->cudnnGetConvolutionForwardAlgorithm_v7)
#define cudnnGetErrorString (ert_cuda_libs_get()->cudnnGetErrorString)
#define cudnnSetActivationDescriptor (ert_cuda_libs_get()->cudnnSetActivationDescriptor)
#define cudnnSetConvolution2dDescriptor (ert_cuda_libs_get()->cudnnSetConvolution2dDescriptor)
#define cudnnSetConvolutionGroupCount (ert_cuda_libs_get()->cudnnSetConvolutionGroupCount)
#define cudnnSetConvolutionMathType (ert_cuda_libs_get()->cudnnSetConvolutionMathType)
#define cudnnSetFilter4dDescriptor (ert_cuda_libs_get()->cudnnSetFilter4dDescriptor)
#define cudnnSetStream (ert_cuda_libs_get()->cudnnSetStream)
#define cudnnSetTensor4dDescriptor (ert_cuda_libs_get()->cudnnSetTensor4dDescriptor)
#define cudnnGetVersion (ert_cuda_libs_get()->cudnnGetVersion)
#define cudnnGetConvolutionForwardWorkspaceSize (ert_cuda_libs_get()->cudnnGetConvolutionForwardWorkspaceSize)
#endif
#endif /* ERT_CUDA_LIBS_IMPL */

#endif /* ERT_CUDA_LIBS_H */

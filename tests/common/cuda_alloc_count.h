/* Counting every CUDA allocation libedgert.a makes: the test's link wraps the
 * public runtime entry points (ert_cuda_alloc_counted() in tests/common/CMakeLists.txt:
 * -Wl,--wrap=cudaMalloc,cudaMallocManaged,cudaHostAlloc,cudaMallocHost,
 * cudaMallocAsync), so n_allocs grows by one per call from any object
 * linked. Allocations a library makes through the driver API are not seen.
 * Include once per test program, in a CUDA build only. */
#ifndef ERT_CUDA_ALLOC_COUNT_H
#define ERT_CUDA_ALLOC_COUNT_H
#include <cuda_runtime_api.h>

static long n_allocs __attribute__((unused)); /* not every test asserts on it */
cudaError_t __real_cudaMalloc(void **p, size_t n);
cudaError_t __real_cudaMallocManaged(void **p, size_t n, unsigned flags);
cudaError_t __real_cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t __real_cudaMallocHost(void **p, size_t n);
cudaError_t __real_cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t __wrap_cudaMalloc(void **p, size_t n);
cudaError_t __wrap_cudaMallocManaged(void **p, size_t n, unsigned flags);
cudaError_t __wrap_cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t __wrap_cudaMallocHost(void **p, size_t n);
cudaError_t __wrap_cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t __wrap_cudaMalloc(void **p, size_t n) { n_allocs++; return __real_cudaMalloc(p, n); }
cudaError_t __wrap_cudaMallocManaged(void **p, size_t n, unsigned f) { n_allocs++; return __real_cudaMallocManaged(p, n, f); }
cudaError_t __wrap_cudaHostAlloc(void **p, size_t n, unsigned f) { n_allocs++; return __real_cudaHostAlloc(p, n, f); }
cudaError_t __wrap_cudaMallocHost(void **p, size_t n) { n_allocs++; return __real_cudaMallocHost(p, n); }
cudaError_t __wrap_cudaMallocAsync(void **p, size_t n, cudaStream_t s) { n_allocs++; return __real_cudaMallocAsync(p, n, s); }
#endif

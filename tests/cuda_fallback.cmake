# test_cuda_fallback: GPU label, CUDA allocations counted (tests/cuda.cmake).
# Without a GPU it returns 77: ctest reports it SKIPPED.
ert_cuda_alloc_counted(test_cuda_fallback cuda_fallback)

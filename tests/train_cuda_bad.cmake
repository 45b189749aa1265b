# test_train_cuda_bad (tests/test_train_cuda_bad.c): the CUDA trainer on bad
# input (Gather index, cross-entropy target out of range) and with a caller
# arena. GPU label; in a CUDA build the CUDA headers and the wrapped
# allocation entry points (as tests/train_cuda.cmake) so it can count the
# allocations made during steps. Without a GPU it returns 77: ctest reports
# it SKIPPED.
if(TARGET test_train_cuda_bad)
  set_tests_properties(train_cuda_bad PROPERTIES LABELS gpu)
  if(ERT_HAVE_CUDA)
    target_compile_definitions(test_train_cuda_bad PRIVATE ERT_TEST_HAVE_CUDA)
    target_link_libraries(test_train_cuda_bad PRIVATE CUDA::toolkit)
    target_link_options(test_train_cuda_bad PRIVATE
      -Wl,--wrap=cudaMalloc -Wl,--wrap=cudaMallocManaged -Wl,--wrap=cudaHostAlloc
      -Wl,--wrap=cudaMallocHost -Wl,--wrap=cudaMallocAsync)
  endif()
endif()

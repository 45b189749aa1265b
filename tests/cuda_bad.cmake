# test_cuda_bad (tests/test_cuda_bad.c): the CUDA backend on bad input, label
# gpu. In a CUDA build it gets the CUDA headers and wraps the allocation and
# run entry points (cudaMalloc, cudaMallocManaged, cudaHostAlloc,
# cudaGraphLaunch, cudaStreamSynchronize) so it can make them fail on
# purpose. Without a GPU it returns 77: ctest reports it SKIPPED.
if(TARGET test_cuda_bad)
  # RUN_SERIAL: it compares free GPU memory before and after, which other GPU
  # tests running at the same time (ctest -j) would move.
  set_tests_properties(cuda_bad PROPERTIES LABELS gpu RUN_SERIAL TRUE)
  if(ERT_HAVE_CUDA)
    target_compile_definitions(test_cuda_bad PRIVATE ERT_TEST_HAVE_CUDA)
    target_link_libraries(test_cuda_bad PRIVATE CUDA::toolkit)
    target_link_options(test_cuda_bad PRIVATE
      -Wl,--wrap=cudaMalloc -Wl,--wrap=cudaMallocManaged -Wl,--wrap=cudaHostAlloc
      -Wl,--wrap=cudaGraphLaunch -Wl,--wrap=cudaStreamSynchronize)
  endif()
endif()

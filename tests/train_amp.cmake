# test_train_amp (from test_train_amp.c): mixed-precision training on CUDA
# against the f32 CPU trainer. GPU label; in a CUDA build the allocation entry
# points are wrapped (as tests/train_cuda.cmake) to count allocations during
# steps. Without a GPU it returns 77: ctest reports it SKIPPED.
if(TARGET test_train_amp)
  set_tests_properties(train_amp PROPERTIES LABELS gpu)
  if(ERT_HAVE_CUDA)
    target_compile_definitions(test_train_amp PRIVATE ERT_TEST_HAVE_CUDA)
    target_link_libraries(test_train_amp PRIVATE CUDA::toolkit)
    target_link_options(test_train_amp PRIVATE
      -Wl,--wrap=cudaMalloc -Wl,--wrap=cudaMallocManaged -Wl,--wrap=cudaHostAlloc
      -Wl,--wrap=cudaMallocHost -Wl,--wrap=cudaMallocAsync)
  endif()
endif()

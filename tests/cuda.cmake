# test_cuda (made by tests/CMakeLists.txt from test_cuda.c): GPU label, and in
# a CUDA build the CUDA headers plus wrapped allocation entry points so the
# test can count every cudaMalloc/cudaMallocManaged/cudaHostAlloc/
# cudaMallocHost/cudaMallocAsync that libedgert.a makes (see test_cuda.c).
# Without a GPU the test returns 77: ctest reports it SKIPPED.
if(TARGET test_cuda)
  set_tests_properties(cuda PROPERTIES LABELS gpu)
  if(ERT_HAVE_CUDA)
    target_compile_definitions(test_cuda PRIVATE ERT_TEST_HAVE_CUDA)
    target_link_libraries(test_cuda PRIVATE CUDA::toolkit)
    target_link_options(test_cuda PRIVATE
      -Wl,--wrap=cudaMalloc -Wl,--wrap=cudaMallocManaged -Wl,--wrap=cudaHostAlloc
      -Wl,--wrap=cudaMallocHost -Wl,--wrap=cudaMallocAsync)
  endif()
endif()

# test_train_ckpt_cuda (from test_train_ckpt_cuda.c): CUDA trainer checkpoints against the CPU
# trainer. GPU label; in a CUDA build the CUDA headers and the wrapped
# allocation entry points (as tests/cuda.cmake) so it can count every
# cudaMalloc/cudaHostAlloc/... libedgert.a makes during steps. Without a GPU
# it returns 77: ctest reports it SKIPPED.
if(TARGET test_train_ckpt_cuda)
  set_tests_properties(train_ckpt_cuda PROPERTIES LABELS gpu)
  if(ERT_HAVE_CUDA)
    target_compile_definitions(test_train_ckpt_cuda PRIVATE ERT_TEST_HAVE_CUDA)
    target_link_libraries(test_train_ckpt_cuda PRIVATE CUDA::toolkit)
    target_link_options(test_train_ckpt_cuda PRIVATE
      -Wl,--wrap=cudaMalloc -Wl,--wrap=cudaMallocManaged -Wl,--wrap=cudaHostAlloc
      -Wl,--wrap=cudaMallocHost -Wl,--wrap=cudaMallocAsync)
  endif()
endif()

# test_cuda (made by tests/CMakeLists.txt from test_cuda.c): GPU label, and in
# a CUDA build the CUDA headers plus wrapped allocation entry points so the
# test can count every cudaMalloc/cudaMallocManaged/cudaHostAlloc/
# cudaMallocHost/cudaMallocAsync that libedgert.a makes (see test_cuda.c).
# Without a GPU the test returns 77: ctest reports it SKIPPED.
# ert_cuda_alloc_counted(TARGET TEST): the same for any GPU test that includes
# tests/cuda_alloc_count.h (later .cmake files of this folder use it).
function(ert_cuda_alloc_counted target test)
  if(TARGET ${target})
    set_tests_properties(${test} PROPERTIES LABELS gpu)
    if(ERT_HAVE_CUDA)
      target_compile_definitions(${target} PRIVATE ERT_TEST_HAVE_CUDA)
      target_link_libraries(${target} PRIVATE CUDA::toolkit)
      target_link_options(${target} PRIVATE
        -Wl,--wrap=cudaMalloc -Wl,--wrap=cudaMallocManaged -Wl,--wrap=cudaHostAlloc
        -Wl,--wrap=cudaMallocHost -Wl,--wrap=cudaMallocAsync)
    endif()
  endif()
endfunction()
ert_cuda_alloc_counted(test_cuda cuda)

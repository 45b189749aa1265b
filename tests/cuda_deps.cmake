# ctest `cuda_deps` (CUDA builds): the CUDA-built `edgert` CLI needs no CUDA
# shared library to start. readelf -d lists what the dynamic loader will map;
# allowed are libc and friends and, with ERT_CUDA_STATIC=OFF, libcudart. The
# driver (libcuda.so.1) is opened by the CUDA runtime, cuBLAS/cuDNN by
# kernels/cuda/cuda_libs.c at the first CUDA session (cmake/ert_cuda_link.cmake),
# so none of them may appear here. A host tool: no emulator needed.
if(ERT_HAVE_CUDA AND TARGET edgert_cli)
  find_program(ERT_READELF NAMES ${CMAKE_READELF} readelf)
  set(_ert_deps_allowed "")
  if(NOT ERT_CUDA_STATIC)
    set(_ert_deps_allowed "libcudart\\.so")
  endif()
  add_test(NAME cuda_deps
    COMMAND ${CMAKE_COMMAND} -DREADELF=${ERT_READELF} -DBIN=$<TARGET_FILE:edgert_cli>
            "-DALLOWED=${_ert_deps_allowed}" -P ${CMAKE_CURRENT_SOURCE_DIR}/cuda_deps/check.cmake)
  set_tests_properties(cuda_deps PROPERTIES TIMEOUT 60)
endif()

# ctest `cuda_libs` (tests/cuda_libs_main.c): what cuda_deps shows is not
# linked is found at run time, function by function (no GPU needed).
if(ERT_HAVE_CUDA)
  add_executable(test_cuda_libs_lazy ${CMAKE_CURRENT_SOURCE_DIR}/cuda_libs_main.c)
  target_link_libraries(test_cuda_libs_lazy PRIVATE ert_testutil CUDA::toolkit)
  target_include_directories(test_cuda_libs_lazy PRIVATE ${PROJECT_SOURCE_DIR}/kernels/cuda)
  if(ERT_CUDNN_INCLUDE)
    target_include_directories(test_cuda_libs_lazy PRIVATE ${ERT_CUDNN_INCLUDE})
  endif()
  target_compile_options(test_cuda_libs_lazy PRIVATE ${ERT_WARN})
  get_target_property(_ert_defs edgert COMPILE_DEFINITIONS)
  target_compile_definitions(test_cuda_libs_lazy PRIVATE ${_ert_defs})
  add_test(NAME cuda_libs COMMAND test_cuda_libs_lazy)
  set_tests_properties(cuda_libs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

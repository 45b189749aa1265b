# test_zoo_cuda (tests/test_zoo_cuda.c): every generated zoo model and the
# real models of ../shared/models on the GPU against the CPU backend, f32 and
# f16 sessions, every placement policy; label gpu. The test itself generates
# the zoo (scripts/zoo/make_models.py run by ERT_ZOO_PYTHON, which zoo.cmake,
# included before this file, defines) into build/zoo/cuda, and only once it
# has found a GPU, so CPU-only runs pay nothing. Told through the
# environment (tests/CMakeLists.txt made the test without arguments).
# Without a GPU it returns 77: ctest reports it SKIPPED.
if(TARGET test_zoo_cuda)
  set_tests_properties(zoo_cuda PROPERTIES LABELS gpu)
  if(ERT_HAVE_CUDA)
    target_compile_definitions(test_zoo_cuda PRIVATE ERT_TEST_HAVE_CUDA)
  endif()
  set(_zc_env "ERT_SHARED_DIR=${CMAKE_SOURCE_DIR}/../shared")
  if(ERT_ZOO_PYTHON)
    list(APPEND _zc_env "ERT_ZOO_PYTHON=${ERT_ZOO_PYTHON}"
         "ERT_ZOO_MAKE_MODELS=${PROJECT_SOURCE_DIR}/scripts/zoo/make_models.py"
         "ERT_ZOO_WORK=${CMAKE_BINARY_DIR}/zoo/cuda")
  endif()
  set_tests_properties(zoo_cuda PROPERTIES ENVIRONMENT "${_zc_env}" TIMEOUT 900)
  # The harness itself (model list, shapes, inputs, comparisons) with CPU
  # sessions in place of the CUDA ones: runs without a GPU, so CI checks it.
  if(ERT_HAVE_CUDA)
    add_test(NAME zoo_cuda_selfcheck COMMAND test_zoo_cuda --cpu-selfcheck)
    string(REPLACE "zoo/cuda" "zoo/cuda_selfcheck" _zc_env_self "${_zc_env}")
    set_tests_properties(zoo_cuda_selfcheck PROPERTIES ENVIRONMENT "${_zc_env_self}" LABELS zoo
                         SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
endif()

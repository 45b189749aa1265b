# ONNX conformance: ert_conformance runs the ONNX backend node tests and the
# PyTorch-converted tests from ../shared against the CPU session. Passing today
# means: no crash and no wrong number among tests whose ops all ran;
# unsupported ops and other statuses are listed in the report
# (build/conformance_<suite>.tsv). scripts/conformance.sh writes docs/conformance.md.
set(ERT_CONFORMANCE_DIR "${CMAKE_SOURCE_DIR}/../shared/conformance" CACHE PATH
  "Directory holding onnx-node/ and onnx-pytorch-converted/ (tests skip when absent)")
add_executable(ert_conformance ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c)
target_link_libraries(ert_conformance PRIVATE edgert_internal m)
target_compile_options(ert_conformance PRIVATE ${ERT_WARN})
target_compile_definitions(ert_conformance PRIVATE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
foreach(suite node pytorch)
  if(suite STREQUAL "node")
    set(dir onnx-node)
  else()
    set(dir onnx-pytorch-converted)
  endif()
  add_test(NAME conformance_${suite}
    COMMAND ert_conformance ${ERT_CONFORMANCE_DIR}/${dir}
            --report ${CMAKE_BINARY_DIR}/conformance_${suite}.tsv
            --xfail ${CMAKE_CURRENT_SOURCE_DIR}/conformance_xfail.txt)
  set_tests_properties(conformance_${suite} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS conformance)
endforeach()
# Real models with reference outputs (mnist_8, super_resolution_10). Under an
# emulator (qemu-aarch64, 10-30x slower, beside other tests) super_resolution
# needs more than the runner's default 60 s per model.
if(CMAKE_CROSSCOMPILING)
  set(_ert_model_timeout 400)
else()
  set(_ert_model_timeout 60)
endif()
add_test(NAME conformance_models
  COMMAND ert_conformance ${ERT_CONFORMANCE_DIR}/../models --models --timeout ${_ert_model_timeout}
          --report ${CMAKE_BINARY_DIR}/conformance_models.tsv
          --xfail ${CMAKE_CURRENT_SOURCE_DIR}/conformance_xfail.txt)
set_tests_properties(conformance_models PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS conformance)

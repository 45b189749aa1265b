# `edgert quantize` end to end (tests/quantize_cli.c): the CLI, onnxruntime on
# its QDQ ONNX output (SKIPPED without a Python that has it), Fashion-MNIST top-1.
if(TARGET edgert_cli AND TARGET ert_testutil)
  add_executable(quantize_cli quantize_cli.c ${PROJECT_SOURCE_DIR}/apps/npy.c)
  target_include_directories(quantize_cli PRIVATE ${PROJECT_SOURCE_DIR}/apps)
  target_link_libraries(quantize_cli PRIVATE ert_testutil)
  set(_q_py "${PROJECT_SOURCE_DIR}/.deps/venv/bin/python")
  add_test(NAME quantize_cli COMMAND quantize_cli cli $<TARGET_FILE:edgert_cli>)
  add_test(NAME quantize_ort COMMAND quantize_cli ort $<TARGET_FILE:edgert_cli> ${_q_py} ${CMAKE_CURRENT_LIST_DIR}/quantize_ort.py)
  add_test(NAME quantize_fmnist COMMAND quantize_cli fmnist $<TARGET_FILE:edgert_cli>)
  set_tests_properties(quantize_cli quantize_ort quantize_fmnist PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                       ENVIRONMENT "ERT_SHARED_DIR=${CMAKE_SOURCE_DIR}/../shared")
  set_tests_properties(quantize_fmnist PROPERTIES LABELS "train")
endif()

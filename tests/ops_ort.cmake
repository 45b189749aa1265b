# tests/ops_ort.py: the zoo's extra ops (reductions, ScatterND, Scatter/GatherElements) against onnxruntime on random
# graphs. Any python3 starts it (it re-executes under .deps/venv, or reports SKIPPED without onnxruntime).
find_program(ERT_OPS_ORT_PY NAMES python3)
if(TARGET edgert_cli AND ERT_OPS_ORT_PY)
  add_test(NAME ops_ort COMMAND ${ERT_OPS_ORT_PY} ${CMAKE_CURRENT_SOURCE_DIR}/ops_ort.py --edgert $<TARGET_FILE:edgert_cli> --work ${CMAKE_BINARY_DIR}/ops_ort)
  set_tests_properties(ops_ort PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# Quantized ops against onnxruntime on random graphs tests/quant_ort.py builds
# (Q/DQ exactness, hostile Q/DQ files refused naming the node). SKIPPED (77)
# without onnx/onnxruntime/numpy; the script re-executes itself with
# .deps/venv/bin/python when the first python3 lacks them.
find_program(ERT_QUANT_PYTHON NAMES python3)
if(TARGET edgert_cli AND ERT_QUANT_PYTHON AND NOT CMAKE_CROSSCOMPILING)
  foreach(_s qdq hostile)
    add_test(NAME quant_${_s} COMMAND ${ERT_QUANT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/quant_ort.py --suite ${_s}
             --edgert $<TARGET_FILE:edgert_cli> --work ${CMAKE_BINARY_DIR}/quant/${_s})
    set_tests_properties(quant_${_s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS quant)
  endforeach()
endif()

# ONNX node tests through the command line (issue 13, item 10):
# scripts/conformance_cli.py runs `edgert run model.onnx -i ... --expect ...`
# on every test of ../shared/conformance/onnx-node and requires that at least
# 95% of the tests the C harness passes (conformance_node's report) also pass
# through the CLI. Host builds only (the driver runs edgert directly).
if(TARGET edgert_cli AND TEST conformance_node AND NOT CMAKE_CROSSCOMPILING)
  find_program(ERT_PYTHON3 python3)
  if(ERT_PYTHON3)
    set_tests_properties(conformance_node PROPERTIES FIXTURES_SETUP conformance_node_report)
    add_test(NAME conformance_cli
      COMMAND ${ERT_PYTHON3} ${PROJECT_SOURCE_DIR}/scripts/conformance_cli.py $<TARGET_FILE:edgert_cli>
              ${ERT_CONFORMANCE_DIR}/onnx-node --harness ${CMAKE_BINARY_DIR}/conformance_node.tsv --min 95
              --report ${CMAKE_BINARY_DIR}/conformance_cli.tsv)
    set_tests_properties(conformance_cli PROPERTIES FIXTURES_REQUIRED conformance_node_report SKIP_RETURN_CODE 77
      TIMEOUT 900 LABELS "conformance;cli")
  endif()
endif()

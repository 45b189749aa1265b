# NaN propagation and `edgert run --check-finite` (issue 13 item 5). test_nan
# itself is a plain test program (tests/test_nan.c); it also writes the model
# and input of the CLI check here, so it needs the apps' .npy writer.
if(TARGET test_nan)
  target_sources(test_nan PRIVATE ${PROJECT_SOURCE_DIR}/apps/npy.c)
  target_include_directories(test_nan PRIVATE ${PROJECT_SOURCE_DIR}/apps)
  target_compile_definitions(test_nan PRIVATE _POSIX_C_SOURCE=200809L)
endif()
# cli.cmake (included before this file) defines ert_cli_test when the CLI is built
if(NOT TARGET edgert_cli OR NOT COMMAND ert_cli_test)
  return()
endif()
add_test(NAME cli_nan_files COMMAND test_nan --write ${ERT_CLI_WORK})
set_tests_properties(cli_nan_files PROPERTIES FIXTURES_SETUP cli_nan LABELS cli)
# Relu -> Sub 1 -> Log -> Exp on (-2, 0.5, 3, 4, 1.5, -1, 2, 5, 3...): Log is
# the first node with a non-finite output (3 values, the first at index 0)
ert_cli_test(cli_check_finite CMD $<TARGET_FILE:edgert_cli> run ${ERT_CLI_WORK}/nan_chain.ert
  --input x=${ERT_CLI_WORK}/nan_x.npy --check-finite RC 1
  STDOUT "not finite: node 'log2' \\(Log, #2 in run order\\), output '[^']+': 3 non-finite values, the first \\(nan\\) at index 0"
  REQUIRES cli_nan NEEDS ${ERT_CLI_WORK}/nan_chain.ert)
ert_cli_test(cli_check_finite_json CMD $<TARGET_FILE:edgert_cli> run ${ERT_CLI_WORK}/nan_chain.ert
  --input x=${ERT_CLI_WORK}/nan_x.npy --check-finite --json RC 1
  JSON finite node op output node_index count first_index first_value
  REQUIRES cli_nan NEEDS ${ERT_CLI_WORK}/nan_chain.ert)

# train_eval runs the `edgert` CLI (issue 13 item 4: held-out sets smaller
# than one batch).
if(TARGET test_train_eval)
  if(TARGET edgert_cli)
    target_compile_definitions(test_train_eval PRIVATE ERT_CLI_BIN="$<TARGET_FILE:edgert_cli>")
    add_dependencies(test_train_eval edgert_cli)
    if(CMAKE_CROSSCOMPILING) # the test execs the CLI: not possible from inside qemu-user
      target_compile_definitions(test_train_eval PRIVATE ERT_TEST_CROSS=1)
    endif()
    set_tests_properties(train_eval PROPERTIES LABELS "cli;train" TIMEOUT 300)
  else()
    set_target_properties(test_train_eval PROPERTIES EXCLUDE_FROM_ALL TRUE)
    set_tests_properties(train_eval PROPERTIES DISABLED TRUE)
  endif()
endif()

# ctest `symbols`: every defined global symbol of libedgert.a starts with ert_
# (tests/check_symbols.sh). CMAKE_NM is the toolchain's nm, so the cross build
# checks its aarch64 archive with aarch64-linux-gnu-nm. The test runs on the
# host (a script, not a target: no emulator).
find_program(ERT_BASH bash)
if(NOT CMAKE_NM OR NOT ERT_BASH)
  add_test(NAME symbols COMMAND ${CMAKE_COMMAND} -E echo "disabled: no nm or bash")
  set_tests_properties(symbols PROPERTIES DISABLED TRUE)
else()
  # Sanitizer instrumentation adds its own globals (ASan's ODR indicators
  # __odr_asan.<global>, module constructors and global registration); only
  # those are let through, and only in sanitizer builds.
  set(_ert_sym_allowed "")
  if(ERT_SANITIZE)
    set(_ert_sym_allowed "^(__asan_|___asan_|__odr_asan[._]|__ubsan_|__sanitizer_|asan\\.module_)")
  endif()
  add_test(NAME symbols
    COMMAND ${ERT_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/check_symbols.sh
            ${CMAKE_NM} $<TARGET_FILE:edgert> "${_ert_sym_allowed}")
  set_tests_properties(symbols PROPERTIES TIMEOUT 60)
endif()

# ctest `install_consumer`: `cmake --install` into a scratch prefix, then build
# and run two tiny consumers of the installed package, one through
# find_package(edgert) and one through pkg-config (tests/install_consumer/).
# Each creates and runs a session on CUDA and on AUTO and checks the answer;
# in a CUDA build the CUDA one must run or be refused for want of a GPU.
# This is what users of the library do; it catches a broken export set, a
# missing header or a wrong .pc file before they do.
#
# Disabled in sanitizer builds: the installed library then needs the
# sanitizer flags at link time, which the package files (rightly) don't carry.
if(ERT_SANITIZE)
  add_test(NAME install_consumer COMMAND ${CMAKE_COMMAND} -E echo "disabled: sanitizer build")
  set_tests_properties(install_consumer PROPERTIES DISABLED TRUE)
else()
  find_program(ERT_PKG_CONFIG NAMES pkgconf pkg-config)
  add_test(NAME install_consumer
    COMMAND ${CMAKE_COMMAND}
      -DBUILD_DIR=${PROJECT_BINARY_DIR}
      -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/install_consumer
      -DSRC_DIR=${CMAKE_CURRENT_SOURCE_DIR}/install_consumer
      -DGENERATOR=${CMAKE_GENERATOR}
      -DTOOLCHAIN=${CMAKE_TOOLCHAIN_FILE}
      -DC_COMPILER=${CMAKE_C_COMPILER}
      "-DC_FLAGS=${CMAKE_C_FLAGS}"
      "-DEMULATOR=${CMAKE_CROSSCOMPILING_EMULATOR}"
      -DPKG_CONFIG=${ERT_PKG_CONFIG}
      -DSYSROOT=${CMAKE_SYSROOT}
      -DCONSUMER_CUDA=$<IF:$<BOOL:${ERT_HAVE_CUDA}>,built,none>
      -P ${CMAKE_CURRENT_SOURCE_DIR}/install_consumer/run.cmake)
  set_tests_properties(install_consumer PROPERTIES TIMEOUT 300)
endif()

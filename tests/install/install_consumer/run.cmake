# Driven by tests/install/CMakeLists.txt (cmake -P): install, then build and run a
# find_package consumer and a pkg-config consumer against the install.
# CONSUMER_CUDA (built|none) tells consumer.c what its CUDA session must do.
set(prefix ${WORK_DIR}/prefix)
set(ENV{ERT_CONSUMER_CUDA} "${CONSUMER_CUDA}")
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok\n${out}")
endfunction()

run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# 1. find_package(edgert), same toolchain and generator as the main build.
set(cfg -S ${SRC_DIR} -B ${WORK_DIR}/cmake-consumer -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
if(TOOLCHAIN)
  # The cross toolchain confines find_package to the sysroot: let it see the prefix.
  list(APPEND cfg -DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN} -DCMAKE_FIND_ROOT_PATH=${prefix})
endif()
run_step("find_package consumer: configure" ${CMAKE_COMMAND} ${cfg})
run_step("find_package consumer: build" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-consumer)
run_step("find_package consumer: run" ${EMULATOR} ${WORK_DIR}/cmake-consumer/consumer)

# 2. pkg-config: flags from the installed edgert.pc, any compiler.
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "install_consumer: no pkg-config/pkgconf (Debian: pkgconf)")
endif()
file(GLOB pcdir LIST_DIRECTORIES true ${prefix}/lib*/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
set(ENV{PKG_CONFIG_LIBDIR} "${pcdir}")   # only ours: never the host's .pc files
unset(ENV{PKG_CONFIG_SYSROOT_DIR})
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs --static edgert
  RESULT_VARIABLE rc OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install_consumer: pkg-config --cflags --libs edgert failed: ${err}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
separate_arguments(cflags UNIX_COMMAND "${C_FLAGS}")
set(cc_sysroot "")
if(SYSROOT)
  set(cc_sysroot --sysroot=${SYSROOT})
endif()
run_step("pkg-config consumer: build" ${C_COMPILER} ${cc_sysroot} ${cflags}
  ${SRC_DIR}/consumer.c -o ${WORK_DIR}/pc-consumer ${flags})
run_step("pkg-config consumer: run" ${EMULATOR} ${WORK_DIR}/pc-consumer)

message("install_consumer: ok")

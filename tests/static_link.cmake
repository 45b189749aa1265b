# ctest `static_link`: a program using only edgert.h (install_consumer/consumer.c), linked with -static
# against libedgert.a (firmware-style), is built like any target and run (under
# qemu-aarch64 in the cross build: CMAKE_CROSSCOMPILING_EMULATOR applies).
#
# Not run (shown as Disabled, with the reason) when a -static link cannot work:
# sanitizer builds (their runtimes are shared-only), or a toolchain without a
# static libc.
include(CheckCSourceCompiles)

set(_ert_static_why "")
if(ERT_SANITIZE)
  set(_ert_static_why "sanitizer runtimes cannot be linked -static")
elseif(ERT_HAVE_JPEG AND ERT_TURBOJPEG_LIBRARY AND NOT ERT_TURBOJPEG_LIBRARY MATCHES "\\.a$")
  set(_ert_static_why "TurboJPEG is linked shared (${ERT_TURBOJPEG_LIBRARY}; ERT_JPEG_STATIC=OFF or no libturbojpeg.a)")
elseif(ERT_HAVE_CUDA AND NOT ERT_CUDA_FULLY_STATIC)
  set(_ert_static_why "ERT_CUDA_STATIC=OFF links the shared CUDA runtime (cmake/ert_cuda_link.cmake)")
else()
  set(CMAKE_REQUIRED_LINK_OPTIONS -static)
  set(CMAKE_REQUIRED_LIBRARIES Threads::Threads m)
  check_c_source_compiles("#include <math.h>\n#include <pthread.h>\nint main(void){pthread_t t=pthread_self();(void)t;return (int)sqrt(4.0)-2;}" ERT_HAVE_STATIC_LIBC)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  unset(CMAKE_REQUIRED_LIBRARIES)
  if(NOT ERT_HAVE_STATIC_LIBC)
    set(_ert_static_why "no static libc for this toolchain (Debian: libc6-dev / libc6-dev-arm64-cross)")
  endif()
endif()

if(_ert_static_why)
  message(STATUS "static_link test disabled: ${_ert_static_why}")
  add_test(NAME static_link COMMAND ${CMAKE_COMMAND} -E echo "disabled: ${_ert_static_why}")
  set_tests_properties(static_link PROPERTIES DISABLED TRUE)
else()
  # The install test's consumer: a session on CUDA and AUTO, checked against
  # float64 (in a CUDA build: the static CUDA runtime, cuBLAS/cuDNN dlopen()ed).
  add_executable(static_link_main ${CMAKE_CURRENT_SOURCE_DIR}/install_consumer/consumer.c)
  # Only the public target: no internal headers, no test harness.
  target_link_libraries(static_link_main PRIVATE edgert)
  target_link_options(static_link_main PRIVATE -static)
  target_compile_options(static_link_main PRIVATE ${ERT_WARN})
  add_test(NAME static_link COMMAND static_link_main)
  set_tests_properties(static_link PROPERTIES TIMEOUT 120
    ENVIRONMENT "ERT_CONSUMER_CUDA=$<IF:$<BOOL:${ERT_HAVE_CUDA}>,built,none>")
endif()

# Images (loaders/image): PNM always; JPEG through TurboJPEG (libjpeg-turbo 2.1
# or 3.x) per ERT_JPEG:
#   AUTO  use it when turbojpeg.h and a library that links are found, else off
#         (e.g. the aarch64 cross build without libturbojpeg0-dev:arm64);
#   ON    required: configure fails without it;
#   OFF   not used: ert_jpeg_create returns ERT_E_UNSUPPORTED.
# With it, ERT_HAVE_JPEG is defined (PRIVATE to edgert and PUBLIC as a variable
# for tests/apps: ERT_HAVE_JPEG in CMake).
#
# Static vs shared: libturbojpeg.a is preferred when present
# (ERT_JPEG_STATIC=ON, the default): firmware is linked as one static binary
# and a robot should not depend on the distribution's .so. Its objects are
# linked into the final program, not merged into libedgert.a, so libedgert.a
# keeps only ert_* globals. -DERT_JPEG_STATIC=OFF links libturbojpeg.so.
option(ERT_JPEG_STATIC "Prefer libturbojpeg.a over the shared library" ON)

target_sources(edgert PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/pnm.c
  ${CMAKE_CURRENT_LIST_DIR}/jpeg.c)

set(ERT_HAVE_JPEG OFF)
set(ERT_PC_JPEG_LIBS "")
if(NOT ERT_JPEG STREQUAL "OFF")
  find_path(ERT_TURBOJPEG_INCLUDE_DIR turbojpeg.h)
  if(ERT_JPEG_STATIC)
    find_library(ERT_TURBOJPEG_LIBRARY NAMES libturbojpeg.a turbojpeg)
  else()
    find_library(ERT_TURBOJPEG_LIBRARY NAMES turbojpeg)
  endif()
  set(_ert_jpeg_why "")
  if(NOT ERT_TURBOJPEG_INCLUDE_DIR OR NOT ERT_TURBOJPEG_LIBRARY)
    set(_ert_jpeg_why "turbojpeg.h or libturbojpeg not found (Debian: libturbojpeg0-dev)")
  else()
    # The header and library may be the host's in a cross build: link a
    # program to be sure they are usable for this target.
    include(CheckCSourceCompiles)
    set(CMAKE_REQUIRED_INCLUDES ${ERT_TURBOJPEG_INCLUDE_DIR})
    set(CMAKE_REQUIRED_LIBRARIES ${ERT_TURBOJPEG_LIBRARY})
    check_c_source_compiles("#include <stddef.h>\n#include <stdio.h>\n#include <turbojpeg.h>\nint main(void){tjhandle h=tjInitDecompress();return tjDestroy(h);}"
      ERT_TURBOJPEG_LINKS)
    unset(CMAKE_REQUIRED_INCLUDES)
    unset(CMAKE_REQUIRED_LIBRARIES)
    if(NOT ERT_TURBOJPEG_LINKS)
      set(_ert_jpeg_why "${ERT_TURBOJPEG_LIBRARY} does not link for this target")
    endif()
  endif()
  if(_ert_jpeg_why)
    if(ERT_JPEG STREQUAL "ON")
      message(FATAL_ERROR "ERT_JPEG=ON: ${_ert_jpeg_why}")
    endif()
    message(STATUS "JPEG support: off (${_ert_jpeg_why})")
  else()
    set(ERT_HAVE_JPEG ON)
    message(STATUS "JPEG support: on (${ERT_TURBOJPEG_LIBRARY})")
    target_compile_definitions(edgert PRIVATE ERT_HAVE_JPEG=1)
    target_include_directories(edgert PRIVATE ${ERT_TURBOJPEG_INCLUDE_DIR})
    target_link_libraries(edgert PUBLIC ${ERT_TURBOJPEG_LIBRARY})
    if(ERT_TURBOJPEG_LIBRARY MATCHES "\\.a$")
      set(ERT_PC_JPEG_LIBS "${ERT_TURBOJPEG_LIBRARY}")
    else()
      set(ERT_PC_JPEG_LIBS "-lturbojpeg")
    endif()
  endif()
endif()

# Cross-compile edgert for NVIDIA Jetson (aarch64 Linux) from an x86_64 host.
#
#   cmake -S . -B build/aarch64 -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-jetson.cmake \
#         [-DERT_JETSON_SYSROOT=/opt/jetson-rootfs]          # JetPack rootfs copy
#         [-DERT_CUDA_TARGET_ROOT=<aarch64 CUDA target tree>]   # cross CUDA (below; default:
#                                                              # the sysroot's, if it has one;
#                                                              # a JetPack sysroot works too)
#         [-DERT_CUDA_ARCHS="87-real"]                         # override the chip list
#
# Without ERT_JETSON_SYSROOT it builds against Debian's multiarch cross libc
# (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross): enough for the CPU backend
# and for running the tests under qemu-aarch64. See README.md and
# docs/building.md for the JetPack sysroot steps.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

# Let the compilers be overridden (e.g. a Linaro/Bootlin toolchain), but
# default to Debian's cross gcc.
if(NOT CMAKE_C_COMPILER)
  set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
endif()
if(NOT CMAKE_CXX_COMPILER)
  set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
endif()

# try_compile() projects re-read this file in a fresh scope: pass our knobs on,
# or the sysroot would silently be missing from every configure check.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES
  ERT_JETSON_SYSROOT ERT_CUDA_TARGET_ROOT ERT_CUDA_ARCHS ERT_HOST_NVCC ERT_CUDA_CROSS_TREE ERT_CUDA)

# ---------------------------------------------------------------- one variable
# ERT_CUDA_TARGET_ROOT may name either source of the aarch64 CUDA target: a
# target tree (the merged wheels: include/, lib/) or a whole JetPack sysroot
# (usr/local/cuda/targets/aarch64-linux inside it), which then also serves as
# ERT_JETSON_SYSROOT. Conversely ERT_JETSON_SYSROOT alone takes CUDA from the
# sysroot (below).
if(ERT_CUDA_TARGET_ROOT AND NOT ERT_JETSON_SYSROOT
   AND NOT EXISTS "${ERT_CUDA_TARGET_ROOT}/include/cuda_runtime.h"
   AND EXISTS "${ERT_CUDA_TARGET_ROOT}/usr/local/cuda/targets/aarch64-linux/include/cuda_runtime.h")
  set(ERT_JETSON_SYSROOT "${ERT_CUDA_TARGET_ROOT}")
  set(ERT_CUDA_TARGET_ROOT "${ERT_CUDA_TARGET_ROOT}/usr/local/cuda/targets/aarch64-linux")
  if(NOT CMAKE_IN_TRY_COMPILE)
    message(STATUS "edgert: ERT_CUDA_TARGET_ROOT is a JetPack sysroot: ERT_JETSON_SYSROOT=${ERT_JETSON_SYSROOT}, "
      "CUDA target tree ${ERT_CUDA_TARGET_ROOT}")
  endif()
endif()

# ---------------------------------------------------------------- sysroot
# A JetPack rootfs (copied off the device or from the L4T sample rootfs): its
# libc, libstdc++ and /usr/lib/aarch64-linux-gnu/* libraries (libjpeg-turbo,
# tegra libs) are what the binary will meet on the robot.
if(ERT_JETSON_SYSROOT)
  set(CMAKE_SYSROOT "${ERT_JETSON_SYSROOT}")
  list(APPEND CMAKE_FIND_ROOT_PATH "${ERT_JETSON_SYSROOT}")
  set(_ert_qemu_prefix "${ERT_JETSON_SYSROOT}")
else()
  # Debian's cross libc lives here (multiarch cross layout).
  list(APPEND CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
  set(_ert_qemu_prefix /usr/aarch64-linux-gnu)
endif()
# (APPEND: a -DCMAKE_FIND_ROOT_PATH=<staging prefix> given by the user, e.g.
# where edgert itself was installed, is kept.)
# Host programs (nvcc, python), target libraries and headers (never the host's).
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# ---------------------------------------------------------------- tests
# ctest runs the aarch64 test binaries through qemu-user when the host is not
# aarch64 (-L: where the target's dynamic loader and libc are).
if(NOT CMAKE_HOST_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  find_program(ERT_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
  if(ERT_QEMU_AARCH64)
    set(CMAKE_CROSSCOMPILING_EMULATOR "${ERT_QEMU_AARCH64};-L;${_ert_qemu_prefix}")
  endif()
endif()

# ---------------------------------------------------------------- CUDA
# Cross CUDA = the host's x86_64 nvcc + the aarch64 target tree of the same
# CUDA version. ERT_CUDA_TARGET_ROOT names that tree (include/, lib/), one of:
#   <JetPack sysroot>/usr/local/cuda/targets/aarch64-linux   (copied off the device; the
#                               default when ERT_JETSON_SYSROOT is given and has it)
#   .deps/cuda-aarch64/target   NVIDIA's aarch64 CUDA 13 wheels from PyPI, merged by
#                               scripts/check_cuda_aarch64.sh (the tested recipe)
#   <x86 toolkit>/targets/aarch64-linux   NVIDIA's cross packages install it there
# CMake (CMakeDetermineCUDACompiler, FindCUDAToolkit) and nvcc look for the
# target only at <toolkit>/targets/aarch64-linux next to the nvcc that runs.
# When the tree is not already there, it is paired with the host nvcc
# (ERT_HOST_NVCC, else nvcc on PATH or /usr/local/cuda/bin) in a toolkit made
# of links, <build>/ert-cuda-cross: bin/nvcc and nvcc.profile copied (nvcc
# finds both and its TOP through /proc/self/exe), the other tools and nvvm/
# linked, targets/aarch64-linux/{include,lib} linking the given tree's
# entries, plus nvcc's own fatbinary_section.h when the tree lacks it (the
# wheels do). nvcc compiles host code with the cross g++.
# With a JetPack sysroot the target tree is where JetPack puts it, so
# ERT_JETSON_SYSROOT alone is enough (ERT_CUDA_TARGET_ROOT given explicitly
# wins; -DERT_CUDA=OFF, or no x86_64 nvcc on the host, keeps the build CPU-only).
set(_ert_tgt_from_sysroot FALSE)
if(ERT_JETSON_SYSROOT AND NOT ERT_CUDA_TARGET_ROOT AND NOT "${ERT_CUDA}" STREQUAL "OFF"
   AND EXISTS "${ERT_JETSON_SYSROOT}/usr/local/cuda/targets/aarch64-linux/include/cuda_runtime.h")
  if(NOT ERT_HOST_NVCC)
    find_program(ERT_HOST_NVCC nvcc PATHS /usr/local/cuda/bin NO_CMAKE_FIND_ROOT_PATH)
  endif()
  if(ERT_HOST_NVCC)
    set(ERT_CUDA_TARGET_ROOT "${ERT_JETSON_SYSROOT}/usr/local/cuda/targets/aarch64-linux")
    set(_ert_tgt_from_sysroot TRUE)
  elseif(NOT CMAKE_IN_TRY_COMPILE)
    message(STATUS "edgert: ${ERT_JETSON_SYSROOT} has CUDA, but the host has no x86_64 nvcc "
      "(-DERT_HOST_NVCC=...): CPU only")
  endif()
endif()
if(ERT_CUDA_TARGET_ROOT)
  get_filename_component(_ert_tgt "${ERT_CUDA_TARGET_ROOT}" ABSOLUTE)
  if(_ert_tgt_from_sysroot AND NOT CMAKE_IN_TRY_COMPILE)
    message(STATUS "edgert: CUDA target tree from the sysroot: ${_ert_tgt}")
  endif()
  if(NOT EXISTS "${_ert_tgt}/include/cuda_runtime.h")
    message(FATAL_ERROR "ERT_CUDA_TARGET_ROOT=${ERT_CUDA_TARGET_ROOT}: no include/cuda_runtime.h there: "
      "expected an aarch64 CUDA target tree (see README.md, Cross-compiling for Jetson)")
  endif()
  get_filename_component(_ert_cuda_root "${_ert_tgt}/../.." ABSOLUTE)
  get_filename_component(_ert_cuda_tgt "${_ert_tgt}" NAME)
  set(_ert_nvcc_runs FALSE)
  if(_ert_cuda_tgt STREQUAL "aarch64-linux" AND EXISTS "${_ert_cuda_root}/bin/nvcc")
    execute_process(COMMAND "${_ert_cuda_root}/bin/nvcc" --version RESULT_VARIABLE _ert_rc
                    OUTPUT_QUIET ERROR_QUIET)
    if(_ert_rc EQUAL 0)
      set(_ert_nvcc_runs TRUE)   # an x86_64 toolkit with its target tree in place
    endif()
  endif()
  if(NOT _ert_nvcc_runs)
    if(NOT ERT_CUDA_CROSS_TREE)  # try_compile projects get the main build's
      set(ERT_CUDA_CROSS_TREE "${CMAKE_BINARY_DIR}/ert-cuda-cross")
    endif()
    if(NOT ERT_HOST_NVCC)
      find_program(ERT_HOST_NVCC nvcc PATHS /usr/local/cuda/bin NO_CMAKE_FIND_ROOT_PATH)
    endif()
    if(NOT ERT_HOST_NVCC)
      message(FATAL_ERROR "ERT_CUDA_TARGET_ROOT is set but no x86_64 nvcc was found: "
        "install a CUDA toolkit of the same version or set -DERT_HOST_NVCC=<path>/nvcc")
    endif()
    get_filename_component(_ert_hb "${ERT_HOST_NVCC}" REALPATH)
    get_filename_component(_ert_hb "${_ert_hb}" DIRECTORY)
    if(NOT EXISTS "${_ert_hb}/nvcc.profile")
      # A wrapper script (e.g. /usr/local/bin/nvcc = exec .../cuda-13.0/bin/nvcc):
      # nvcc's dry run names the directory it really runs from.
      execute_process(COMMAND "${ERT_HOST_NVCC}" -dryrun -E -x cu /dev/null
                      OUTPUT_VARIABLE _ert_dry ERROR_VARIABLE _ert_dry)
      if(_ert_dry MATCHES "#\\$ _HERE_=([^\r\n]+)")
        get_filename_component(_ert_hb "${CMAKE_MATCH_1}" REALPATH)
      endif()
      if(NOT EXISTS "${_ert_hb}/nvcc.profile")
        message(FATAL_ERROR "${ERT_HOST_NVCC}: no nvcc.profile next to the nvcc it runs (${_ert_hb}); "
          "set -DERT_HOST_NVCC=<toolkit>/bin/nvcc")
      endif()
    endif()
    set(_ert_x "${ERT_CUDA_CROSS_TREE}")
    set(_ert_stamp "${_ert_tgt}|${_ert_hb}")
    set(_ert_old "")
    if(EXISTS "${_ert_x}/.stamp")
      file(READ "${_ert_x}/.stamp" _ert_old)
    endif()
    if(NOT _ert_old STREQUAL _ert_stamp)
      file(REMOVE_RECURSE "${_ert_x}")
      file(MAKE_DIRECTORY "${_ert_x}/bin" "${_ert_x}/targets/aarch64-linux/include")
      file(COPY "${_ert_hb}/nvcc" "${_ert_hb}/nvcc.profile" DESTINATION "${_ert_x}/bin")
      file(GLOB _ert_tools LIST_DIRECTORIES true "${_ert_hb}/*")
      foreach(_t IN LISTS _ert_tools)
        get_filename_component(_n "${_t}" NAME)
        if(NOT EXISTS "${_ert_x}/bin/${_n}")
          file(CREATE_LINK "${_t}" "${_ert_x}/bin/${_n}" SYMBOLIC)
        endif()
      endforeach()
      get_filename_component(_ert_nvvm "${_ert_hb}/../nvvm" REALPATH)
      file(CREATE_LINK "${_ert_nvvm}" "${_ert_x}/nvvm" SYMBOLIC)
      file(GLOB _ert_inc LIST_DIRECTORIES true "${_ert_tgt}/include/*")
      foreach(_t IN LISTS _ert_inc)
        get_filename_component(_n "${_t}" NAME)
        file(CREATE_LINK "${_t}" "${_ert_x}/targets/aarch64-linux/include/${_n}" SYMBOLIC)
      endforeach()
      if(NOT EXISTS "${_ert_tgt}/include/fatbinary_section.h")
        find_file(_ert_fsh fatbinary_section.h PATHS "${_ert_hb}/../include"
                  "${_ert_hb}/../targets/x86_64-linux/include" NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH NO_CACHE)
        if(NOT _ert_fsh)
          message(FATAL_ERROR "no fatbinary_section.h next to ${ERT_HOST_NVCC} (nvcc's own header)")
        endif()
        file(CREATE_LINK "${_ert_fsh}" "${_ert_x}/targets/aarch64-linux/include/fatbinary_section.h" SYMBOLIC)
      endif()
      foreach(_l lib lib64)
        if(EXISTS "${_ert_tgt}/${_l}")
          file(CREATE_LINK "${_ert_tgt}/${_l}" "${_ert_x}/targets/aarch64-linux/${_l}" SYMBOLIC)
        endif()
      endforeach()
      file(WRITE "${_ert_x}/.stamp" "${_ert_stamp}")
    endif()
    set(_ert_cuda_root "${_ert_x}")
  endif()
  set(CUDAToolkit_ROOT "${_ert_cuda_root}")
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER "${_ert_cuda_root}/bin/nvcc")
  endif()
  set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")  # Debian: g++-aarch64-linux-gnu
  if(ERT_JETSON_SYSROOT)
    # CMake does not hand the sysroot to nvcc's host compiler by itself.
    string(APPEND CMAKE_CUDA_FLAGS_INIT " -Xcompiler=--sysroot=${ERT_JETSON_SYSROOT}")
  endif()
endif()

# Chips, listed explicitly (never detected from the build machine's GPU).
# SASS for each; PTX only for the newest, so a future chip can still JIT.
#   87  = Orin (AGX/NX/Nano Orin; JetPack 5 and 6)
#   110 = Thor (JetPack 7; CUDA 13 numbering, was sm_101 in CUDA 12.8/12.9)
#   72  = Xavier: CUDA 13 dropped sm_72, so only with nvcc < 13 (JetPack 5),
#         where 110 does not exist yet.
# The toolkit version comes from CMAKE_CUDA_COMPILER_VERSION when known, else
# from asking the nvcc that will be used; unknown means "assume CUDA 13".
if(DEFINED ERT_CUDA_ARCHS AND NOT ERT_CUDA_ARCHS STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES "${ERT_CUDA_ARCHS}")
elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(_ert_nvcc_version "${CMAKE_CUDA_COMPILER_VERSION}")
  if(NOT _ert_nvcc_version)
    if(CMAKE_CUDA_COMPILER)
      set(_ert_nvcc "${CMAKE_CUDA_COMPILER}")
    elseif(DEFINED ENV{CUDACXX})
      set(_ert_nvcc "$ENV{CUDACXX}")
    else()
      find_program(_ert_nvcc NAMES nvcc PATHS /usr/local/cuda/bin NO_CACHE)
    endif()
    if(_ert_nvcc)
      execute_process(COMMAND "${_ert_nvcc}" --version OUTPUT_VARIABLE _ert_out ERROR_QUIET)
      if(_ert_out MATCHES "release ([0-9]+\\.[0-9]+)")
        set(_ert_nvcc_version "${CMAKE_MATCH_1}")
      endif()
    endif()
  endif()
  if(_ert_nvcc_version AND _ert_nvcc_version VERSION_LESS 13)
    set(CMAKE_CUDA_ARCHITECTURES "72-real;87-real;87-virtual")
  else()
    set(CMAKE_CUDA_ARCHITECTURES "87-real;110-real;110-virtual")
  endif()
endif()

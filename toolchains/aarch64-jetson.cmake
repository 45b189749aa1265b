# Cross-compile edgert for NVIDIA Jetson (aarch64 Linux) from an x86_64 host.
#
#   cmake -S . -B build/aarch64 -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-jetson.cmake \
#         [-DERT_JETSON_SYSROOT=/opt/jetson-rootfs]          # JetPack rootfs copy
#         [-DERT_CUDA_TARGET_ROOT=/usr/local/cuda/targets/aarch64-linux]  # cross CUDA
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
  ERT_JETSON_SYSROOT ERT_CUDA_TARGET_ROOT ERT_CUDA_ARCHS)

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
# CUDA version, which must sit at <toolkit>/targets/aarch64-linux: that is
# where CMake (CMakeDetermineCUDACompiler, FindCUDAToolkit) and nvcc look for
# the target's headers and libraries. NVIDIA's cross packages install it
# there; a copy from the device's /usr/local/cuda/targets/aarch64-linux can be
# put there too. nvcc compiles host code with the cross g++.
if(ERT_CUDA_TARGET_ROOT)
  get_filename_component(_ert_cuda_root "${ERT_CUDA_TARGET_ROOT}/../.." ABSOLUTE)
  get_filename_component(_ert_cuda_tgt "${ERT_CUDA_TARGET_ROOT}" NAME)
  if(NOT _ert_cuda_tgt STREQUAL "aarch64-linux" OR NOT EXISTS "${_ert_cuda_root}/bin/nvcc")
    message(FATAL_ERROR "ERT_CUDA_TARGET_ROOT=${ERT_CUDA_TARGET_ROOT}: expected "
      "<CUDA toolkit>/targets/aarch64-linux with the toolkit's x86_64 nvcc in "
      "<CUDA toolkit>/bin (see docs/building.md, cross CUDA)")
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

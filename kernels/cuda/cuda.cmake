# CUDA backend (included from the top-level CMakeLists.txt).
#
# ERT_CUDA: AUTO builds it when a CUDA compiler and cuBLAS are found, ON
# requires them, OFF skips it. cuDNN is optional: without it convolutions use
# edgert's own kernels (ERT_HAVE_CUDNN is defined when it is found).
#
# Architectures: a toolchain file (toolchains/*.cmake) may set
# CMAKE_CUDA_ARCHITECTURES and is respected; otherwise ERT_CUDA_ARCHS (cache)
# gives them. Never detected from the build machine's GPU (STYLE rule 27).
# Entries the nvcc in use cannot build (CUDA 12 has no 110, < 12.8 no 100/120;
# CUDA 13 has nothing before 75) are dropped with a warning: see
# _ert_cuda_supported_archs below.
#
# Linking: cmake/ert_cuda_link.cmake (static CUDA runtime and, where the
# toolkit has them, static cuBLAS; whatever is only shared is dlopen()ed at
# the first CUDA session, see kernels/cuda/cuda_libs.h).

if(NOT ERT_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  set(_ert_cuda_ok FALSE)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND AND (TARGET CUDA::cublas OR TARGET CUDA::cublas_static))
      set(_ert_cuda_ok TRUE)
    endif()
  endif()
  if(NOT _ert_cuda_ok)
    if(ERT_CUDA STREQUAL "ON")
      message(FATAL_ERROR "ERT_CUDA=ON but no CUDA compiler or no cuBLAS was found "
                          "(set CMAKE_CUDA_COMPILER / CUDAToolkit_ROOT)")
    endif()
    message(STATUS "edgert: CUDA backend OFF (ERT_CUDA=AUTO: no CUDA compiler or no cuBLAS found)")
  endif()
else()
  message(STATUS "edgert: CUDA backend OFF (ERT_CUDA=OFF)")
endif()

# The chip lists (toolchains/*.cmake, ERT_CUDA_ARCHS) name chips of the newest
# CUDA: 100/120 need nvcc >= 12.8, 110 (Thor) nvcc >= 13, while 13 dropped
# everything before 75. Keep the entries this nvcc can build (asked with
# --list-gpu-code / --list-gpu-arch, not guessed from its version), say which
# were dropped, and when the PTX entry was among them give the newest kept
# chip PTX as well, so a newer GPU can still JIT. Must run before
# enable_language(CUDA): CMake's compiler check builds for the list.
macro(_ert_cuda_supported_archs)
  execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-code OUTPUT_VARIABLE _ert_codes
                  RESULT_VARIABLE _ert_rc1 ERROR_QUIET)
  execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-arch OUTPUT_VARIABLE _ert_virts
                  RESULT_VARIABLE _ert_rc2 ERROR_QUIET)
  if(_ert_rc1 EQUAL 0 AND _ert_rc2 EQUAL 0)
    string(REGEX MATCHALL "sm_[0-9]+[af]?" _ert_codes "${_ert_codes}")
    string(REGEX MATCHALL "compute_[0-9]+[af]?" _ert_virts "${_ert_virts}")
    set(_ert_kept "")
    set(_ert_dropped "")
    set(_ert_lost_ptx FALSE)
    set(_ert_has_ptx FALSE)
    foreach(_a IN LISTS CMAKE_CUDA_ARCHITECTURES)
      if(NOT _a MATCHES "^([0-9]+[af]?)(-real|-virtual)?$")
        list(APPEND _ert_kept "${_a}")   # all, all-major, native: CMake's own
        continue()
      endif()
      set(_n "${CMAKE_MATCH_1}")
      set(_kind "${CMAKE_MATCH_2}")
      set(_ok TRUE)
      if(NOT _kind STREQUAL "-virtual" AND NOT "sm_${_n}" IN_LIST _ert_codes)
        set(_ok FALSE)
      endif()
      if(NOT _kind STREQUAL "-real" AND NOT "compute_${_n}" IN_LIST _ert_virts)
        set(_ok FALSE)
      endif()
      if(_ok)
        list(APPEND _ert_kept "${_a}")
        if(NOT _kind STREQUAL "-real")
          set(_ert_has_ptx TRUE)
        endif()
      else()
        list(APPEND _ert_dropped "${_a}")
        if(NOT _kind STREQUAL "-real")
          set(_ert_lost_ptx TRUE)
        endif()
      endif()
    endforeach()
    if(_ert_dropped)
      if(_ert_lost_ptx AND NOT _ert_has_ptx)
        # the highest kept N-real becomes N (SASS + PTX)
        set(_ert_top "")
        foreach(_a IN LISTS _ert_kept)
          if(_a MATCHES "^([0-9]+)-real$" AND (_ert_top STREQUAL "" OR CMAKE_MATCH_1 GREATER _ert_top))
            set(_ert_top "${CMAKE_MATCH_1}")
          endif()
        endforeach()
        if(NOT _ert_top STREQUAL "")
          list(TRANSFORM _ert_kept REPLACE "^${_ert_top}-real$" "${_ert_top}")
        endif()
      endif()
      if(NOT _ert_kept)
        message(FATAL_ERROR "edgert: nvcc ${CMAKE_CUDA_COMPILER} supports none of the CUDA "
                            "architectures ${CMAKE_CUDA_ARCHITECTURES} (it knows ${_ert_codes})")
      endif()
      message(WARNING "edgert: nvcc ${CMAKE_CUDA_COMPILER} cannot build for ${_ert_dropped}: "
                      "dropped; building for ${_ert_kept}")
      set(CMAKE_CUDA_ARCHITECTURES "${_ert_kept}")
    endif()
  endif()
endmacro()

if(NOT ERT_CUDA STREQUAL "OFF" AND _ert_cuda_ok)
  set(ERT_CUDA_ARCHS "75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual" CACHE STRING
      "CUDA architectures when no toolchain file sets CMAKE_CUDA_ARCHITECTURES")
  option(ERT_CUDA_STATIC "Link the static CUDA runtime and cuBLAS" ON)
  set(ERT_CUDNN_ROOT "" CACHE PATH "Where cuDNN is installed (optional)")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "${ERT_CUDA_ARCHS}")
  endif()
  _ert_cuda_supported_archs()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)

  file(GLOB ERT_CUDA_SRC CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda/*.cu
                                           ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda/*.c)
  target_sources(edgert PRIVATE ${ERT_CUDA_SRC})
  target_include_directories(edgert PRIVATE kernels/cuda ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(edgert PRIVATE ERT_HAVE_CUDA)
  # The options the top level gave edgert are gcc's C options (-Wpedantic,
  # -O3, -ffp-contract=fast...): keep them to the C sources, nvcc rejects some.
  get_target_property(_ert_opts edgert COMPILE_OPTIONS)
  set(_ert_c_opts "")
  foreach(_o IN LISTS _ert_opts)
    list(APPEND _ert_c_opts "$<$<COMPILE_LANGUAGE:C>:${_o}>")
  endforeach()
  set_property(TARGET edgert PROPERTY COMPILE_OPTIONS "${_ert_c_opts}")
  # No C++ exceptions or RTTI in library code; host-side warnings as for C.
  set(_ert_xc -Wall,-Wextra,-Wshadow,-Wno-unused-parameter,-fno-exceptions,-fno-rtti)
  if(ERT_WERROR)
    set(_ert_xc "${_ert_xc},-Werror")
  endif()
  target_compile_options(edgert PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_ert_xc} --expt-relaxed-constexpr -lineinfo>)
  # edgert was made before enable_language(CUDA): give it the architectures now.
  set_target_properties(edgert PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
                        CUDA_VISIBILITY_PRESET hidden CUDA_RUNTIME_LIBRARY None)

  # Linking (CUDA runtime, cuBLAS, cuDNN; the installed package's lists):
  # cmake/ert_cuda_link.cmake.
  include(${PROJECT_SOURCE_DIR}/cmake/ert_cuda_link.cmake)

  find_path(ERT_CUDNN_INCLUDE cudnn.h
    HINTS ${ERT_CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_ROOT PATH_SUFFIXES include)
  find_library(ERT_CUDNN_LIB NAMES cudnn libcudnn.so.9
    HINTS ${ERT_CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} ENV CUDNN_ROOT PATH_SUFFIXES lib lib64)
  if(CMAKE_CROSSCOMPILING AND NOT (ERT_CUDNN_INCLUDE AND ERT_CUDNN_LIB))
    # cuDNN inside the CUDA target tree (e.g. the aarch64 wheels): those paths
    # are already the target's, not to be re-rooted into a sysroot.
    find_path(ERT_CUDNN_INCLUDE cudnn.h PATHS ${CUDAToolkit_INCLUDE_DIRS}
              NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
    find_library(ERT_CUDNN_LIB NAMES cudnn libcudnn.so.9 PATHS ${CUDAToolkit_LIBRARY_DIR}
                 NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  endif()
  if(ERT_CUDNN_INCLUDE AND ERT_CUDNN_LIB)
    # Not linked: kernels/cuda/cuda_libs.c opens it at the first CUDA session.
    target_include_directories(edgert PRIVATE ${ERT_CUDNN_INCLUDE})
    target_compile_definitions(edgert PRIVATE ERT_HAVE_CUDNN)
    get_filename_component(_ert_dir "${ERT_CUDNN_LIB}" DIRECTORY)
    set_property(SOURCE ${PROJECT_SOURCE_DIR}/kernels/cuda/cuda_libs.c APPEND PROPERTY
                 COMPILE_DEFINITIONS "ERT_CUDNN_DIR=\"${_ert_dir}\"")
    set(ERT_CUDNN_HOW "cuDNN loaded at the first CUDA session (found ${ERT_CUDNN_LIB})")
  else()
    set(ERT_CUDNN_HOW "no cuDNN: own conv kernels")
  endif()
  message(STATUS "edgert: CUDA backend ON (ERT_CUDA=${ERT_CUDA}), archs ${CMAKE_CUDA_ARCHITECTURES}; "
                 "CUDA runtime ${_ert_cudart_how}; cuBLAS ${ERT_CUBLAS_HOW}; ${ERT_CUDNN_HOW}")
  set(ERT_HAVE_CUDA ON)
endif()

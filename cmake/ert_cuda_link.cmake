# How the CUDA backend's libraries are linked (included from
# kernels/cuda/cuda.cmake once `edgert` has its CUDA sources).
#
#   CUDA runtime      libcudart_static.a (ERT_CUDA_STATIC=ON, the default), else
#                     libcudart.so. The driver (libcuda.so.1) is never linked:
#                     the runtime opens it when the first CUDA call is made.
#   cuBLAS/cuBLASLt   libcublas_static.a + libcublasLt_static.a + libculibos.a
#                     where the toolkit has them (ERT_CUDA_STATIC=ON); else not
#                     linked at all: dlopen()ed when the first CUDA session is
#                     created (kernels/cuda/cuda_libs.h, ERT_CUBLAS_LAZY).
#   cuDNN             always dlopen()ed at the first CUDA session (ERT_CUDNN_LAZY):
#                     cuDNN 9 ships as shared libraries that load their engine
#                     sub-libraries at run time anyway; static cuDNN is not
#                     supported.
# So a CUDA build of `edgert` needs no CUDA shared library to start; a CPU
# run never maps cuBLAS/cuDNN (tests/cuda/CMakeLists.txt checks this with readelf).
#
# Consumers of the installed libedgert.a get the same list two ways:
#   edgertTargets.cmake  the library files by absolute path (no find_package(CUDAToolkit))
#   edgert.pc            Libs.private: ERT_PC_CUDA_LIBS (-L<toolkit lib> -lcudart_static ...)

set(_ert_cuda_libs "")          # this build: the toolkit's imported targets
set(_ert_cuda_files "")         # installed package: files and system libraries
if(ERT_CUDA_STATIC)
  set(_ert_rt cudart_static)
  set(_ert_cudart_how "static")
else()
  set(_ert_rt cudart)
  set(_ert_cudart_how "shared (ERT_CUDA_STATIC=OFF)")
endif()
list(APPEND _ert_cuda_libs CUDA::${_ert_rt})
list(APPEND _ert_cuda_files ${CUDA_${_ert_rt}_LIBRARY})
get_filename_component(_ert_libdir "${CUDA_${_ert_rt}_LIBRARY}" DIRECTORY)
set(ERT_PC_CUDA_LIBS "-L${_ert_libdir} -l${_ert_rt}")
if(ERT_CUDA_STATIC AND TARGET CUDA::cublas_static)
  list(APPEND _ert_cuda_libs CUDA::cublas_static)
  list(APPEND _ert_cuda_files ${CUDA_cublas_static_LIBRARY} ${CUDA_cublasLt_static_LIBRARY}
                              ${CUDA_culibos_LIBRARY})
  string(APPEND ERT_PC_CUDA_LIBS " -lcublas_static -lcublasLt_static -lculibos")
  set(ERT_CUBLAS_HOW "static (${CUDA_cublas_static_LIBRARY})")
else()
  set(ERT_CUBLAS_LAZY ON)
  set(ERT_CUBLAS_HOW "loaded at the first CUDA session (dlopen libcublas.so.${CUDAToolkit_VERSION_MAJOR})")
  if(ERT_CUDA_STATIC)
    string(APPEND ERT_CUBLAS_HOW ": this toolkit has no libcublas_static.a")
  endif()
endif()
set(ERT_CUDNN_LAZY ON)
# libstdc++: nvcc's registration code uses __cxa_guard_*; libdl: dlopen
# (cudart_static's own, and ours); librt: cudart_static's shm_open/clock_gettime.
list(APPEND _ert_cuda_files stdc++ ${CMAKE_DL_LIBS} rt)
list(APPEND _ert_cuda_libs stdc++ ${CMAKE_DL_LIBS} rt)
string(APPEND ERT_PC_CUDA_LIBS " -lstdc++")
foreach(_l IN LISTS CMAKE_DL_LIBS)
  string(APPEND ERT_PC_CUDA_LIBS " -l${_l}")
endforeach()
string(APPEND ERT_PC_CUDA_LIBS " -lrt")

foreach(_l IN LISTS _ert_cuda_libs)
  target_link_libraries(edgert PUBLIC $<BUILD_INTERFACE:${_l}>)
endforeach()
foreach(_l IN LISTS _ert_cuda_files)
  target_link_libraries(edgert PUBLIC $<INSTALL_INTERFACE:${_l}>)
endforeach()
# C files only: the .cu objects (the slow ones) keep their command line, so
# ccache still hits them whatever the link choice.
if(ERT_CUBLAS_LAZY)
  target_compile_definitions(edgert PRIVATE $<$<COMPILE_LANGUAGE:C>:ERT_CUBLAS_LAZY>)
  # tried after the loader's own search, as an RPATH would be
  if(CUDA_cublas_LIBRARY)
    get_filename_component(_ert_dir "${CUDA_cublas_LIBRARY}" DIRECTORY)
    set_property(SOURCE ${PROJECT_SOURCE_DIR}/kernels/cuda/cuda_libs.c APPEND PROPERTY
                 COMPILE_DEFINITIONS "ERT_CUBLAS_DIR=\"${_ert_dir}\"")
  endif()
endif()
target_compile_definitions(edgert PRIVATE $<$<COMPILE_LANGUAGE:C>:ERT_CUDNN_LAZY>)

# Nothing shared is linked (the runtime opens the driver itself): a program
# can be linked -static (tests/install/CMakeLists.txt).
if(ERT_CUDA_STATIC)
  set(ERT_CUDA_FULLY_STATIC TRUE)
else()
  set(ERT_CUDA_FULLY_STATIC FALSE)
endif()

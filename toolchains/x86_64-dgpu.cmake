# Native x86_64 build with a discrete NVIDIA GPU. It sets no compilers; it
# only pins the CUDA chips the fat binary carries, so that a build never
# depends on which GPU (if any) the build machine has.
#
#   cmake -S . -B build/cuda -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchains/x86_64-dgpu.cmake \
#         -DERT_CUDA=ON [-DERT_CUDA_ARCHS="75-real;120"]   # CI: a short list
#
# 100 and 120 need CUDA >= 12.8 (CUDA 13's oldest is 75): with an older
# toolkit kernels/cuda/cuda.cmake drops what its nvcc cannot build, says so,
# and gives the newest kept chip PTX (CUDA 12.4: 75-real ... 89-real;90).

list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ERT_CUDA_ARCHS)

# SASS for each, PTX for the newest only (a future GPU JITs from it):
#   75  = Turing (T4, RTX 20xx): the oldest CUDA 13 still supports
#   80  = Ampere A100 / A30
#   86  = Ampere RTX 30xx, A10, A40, RTX A-series
#   89  = Ada (L4, L40, RTX 40xx)
#   90  = Hopper (H100, H200)
#   100 = Blackwell datacenter (B200, GB200)
#   120 = Blackwell consumer/workstation (RTX 50xx, RTX PRO 6000)
#   120-virtual = PTX of the newest, for chips newer than this list
if(DEFINED ERT_CUDA_ARCHS AND NOT ERT_CUDA_ARCHS STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES "${ERT_CUDA_ARCHS}")
elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES
      "75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual")
endif()

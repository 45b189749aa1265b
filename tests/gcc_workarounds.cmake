# Compiler bugs that break a test build, worked around per target here so the
# tests' own .cmake files stay about the tests.
#
# Debian's aarch64-linux-gnu-gcc 12.2 (the cuda-aarch64 phase) dies with an
# internal compiler error (vect_transform_reduction) vectorizing the softmax
# reference of test_cuda.c at -O3; that code is compiled only in CUDA builds
# (ERT_TEST_HAVE_CUDA), so only the CUDA aarch64 build meets it.
if(TARGET test_cuda AND ERT_HAVE_CUDA AND CMAKE_C_COMPILER_ID STREQUAL "GNU"
   AND CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64" AND CMAKE_C_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(test_cuda PRIVATE -fno-tree-vectorize)
endif()

# test_train_frozen (made by tests/CMakeLists.txt). Debian 12's aarch64 cross
# GCC 12 crashes (internal compiler error in vect_transform_reduction) on its
# max-reduction loops at -O3; the loops are not what the test measures, so
# the vectorizer is off for this one file with GCC.
if(TARGET test_train_frozen AND CMAKE_C_COMPILER_ID STREQUAL "GNU")
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/test_train_frozen.c PROPERTIES COMPILE_OPTIONS -fno-tree-vectorize)
endif()

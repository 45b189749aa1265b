# test_fmnist reads the gzip'd IDX files with apps/idx.c, which needs zlib.
# Without zlib the test is not built (and ctest lists it as not run).
if(TARGET test_fmnist)
  find_package(ZLIB)
  if(ZLIB_FOUND)
    target_sources(test_fmnist PRIVATE ${PROJECT_SOURCE_DIR}/apps/idx.c)
    target_include_directories(test_fmnist PRIVATE ${PROJECT_SOURCE_DIR}/apps)
    target_link_libraries(test_fmnist PRIVATE ZLIB::ZLIB)
    set_tests_properties(fmnist PROPERTIES LABELS "train" TIMEOUT 900)
  else()
    set_target_properties(test_fmnist PROPERTIES EXCLUDE_FROM_ALL TRUE)
    set_tests_properties(fmnist PROPERTIES DISABLED TRUE)
  endif()
endif()

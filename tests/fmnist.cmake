# test_fmnist reads the gzip'd IDX files with apps/idx.c, which needs zlib
# (and unit-tests the PGM/PPM parser of apps/imgfolder.c).
# Without zlib the test is not built (and ctest lists it as not run).
if(TARGET test_fmnist)
  find_package(ZLIB)
  if(ZLIB_FOUND)
    target_sources(test_fmnist PRIVATE ${PROJECT_SOURCE_DIR}/apps/idx.c ${PROJECT_SOURCE_DIR}/apps/imgfolder.c)
    target_include_directories(test_fmnist PRIVATE ${PROJECT_SOURCE_DIR}/apps)
    target_link_libraries(test_fmnist PRIVATE ZLIB::ZLIB)
    set_tests_properties(fmnist PROPERTIES LABELS "train" TIMEOUT 900)
  else()
    set_target_properties(test_fmnist PROPERTIES EXCLUDE_FROM_ALL TRUE)
    set_tests_properties(fmnist PROPERTIES DISABLED TRUE)
  endif()
endif()

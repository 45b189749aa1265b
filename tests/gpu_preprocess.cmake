# test_gpu_preprocess (made by tests/CMakeLists.txt): GPU label; compares with
# the camera app's CPU preprocessing, so it links ert_camera (disabled when
# the apps are not built). Without CUDA or a GPU it returns 77 (SKIPPED).
if(TARGET test_gpu_preprocess)
  set_tests_properties(gpu_preprocess PROPERTIES LABELS gpu)
  if(TARGET ert_camera)
    target_link_libraries(test_gpu_preprocess PRIVATE ert_camera)
  else()
    set_target_properties(test_gpu_preprocess PROPERTIES EXCLUDE_FROM_ALL TRUE)
    set_tests_properties(gpu_preprocess PROPERTIES DISABLED TRUE)
  endif()
endif()

# Tests of the camera pipeline (apps/camera) link its internal library; they
# are disabled when the apps are not built.
foreach(t test_camera_source test_camera_proc test_camera_e2e)
  if(TARGET ${t})
    if(TARGET ert_camera)
      target_link_libraries(${t} PRIVATE ert_camera)
    else()
      string(REGEX REPLACE "^test_" "" _mod ${t})
      set_target_properties(${t} PROPERTIES EXCLUDE_FROM_ALL TRUE)
      set_tests_properties(${_mod} PROPERTIES DISABLED TRUE)
    endif()
  endif()
endforeach()

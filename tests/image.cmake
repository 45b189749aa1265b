# test_image_ref compares with djpeg (Debian: libjpeg-turbo-progs); without it
# the test reports SKIPPED. djpeg runs on the host, so in a cross build it is
# not looked for (the cross build has no JPEG support anyway).
if(TEST image_ref)
  set(_ert_djpeg "")
  if(NOT CMAKE_CROSSCOMPILING)
    find_program(ERT_DJPEG djpeg)
    if(ERT_DJPEG)
      set(_ert_djpeg "${ERT_DJPEG}")
    endif()
  endif()
  set_tests_properties(image_ref PROPERTIES ENVIRONMENT
    "ERT_SHARED_DIR=${CMAKE_SOURCE_DIR}/../shared;ERT_DJPEG=${_ert_djpeg}")
endif()

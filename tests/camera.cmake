# Tests of the camera pipeline (apps/camera) link its internal library; they
# are disabled when the apps are not built.
foreach(t test_camera_source test_camera_proc test_camera_e2e test_camera_ppocr test_camera_app)
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
if(TARGET test_camera_e2e AND TARGET edgert_camera)
  target_compile_definitions(test_camera_e2e PRIVATE ERT_CAMERA_BIN="$<TARGET_FILE:edgert_camera>")
  add_dependencies(test_camera_e2e edgert_camera)
  set_tests_properties(camera_e2e PROPERTIES TIMEOUT 120)
endif()
# camera_app: usage errors, checked writes, "no frames", signals (runs the app)
if(TARGET test_camera_app AND TARGET edgert_camera)
  target_compile_definitions(test_camera_app PRIVATE ERT_CAMERA_BIN="$<TARGET_FILE:edgert_camera>")
  add_dependencies(test_camera_app edgert_camera)
  if(CMAKE_CROSSCOMPILING) # the test execs the app: not possible from inside qemu-user
    target_compile_definitions(test_camera_app PRIVATE ERT_TEST_CROSS=1)
  endif()
  set_tests_properties(camera_app PROPERTIES TIMEOUT 300 LABELS camera)
endif()

# test_camera_ppocr compares with onnxruntime: a Python that has it
# (scripts/setup.sh makes .deps/venv); without one the test reports SKIPPED.
if(TARGET test_camera_ppocr AND TARGET ert_camera)
  target_link_libraries(test_camera_ppocr PRIVATE ert_apps_util)
  set(_ert_py_default "")
  if(EXISTS ${PROJECT_SOURCE_DIR}/.deps/venv/bin/python AND NOT CMAKE_CROSSCOMPILING)
    set(_ert_py_default ${PROJECT_SOURCE_DIR}/.deps/venv/bin/python)
  endif()
  set(ERT_TEST_PYTHON "${_ert_py_default}" CACHE FILEPATH "Python with onnxruntime + numpy for reference tests")
  set_tests_properties(camera_ppocr PROPERTIES TIMEOUT 120 ENVIRONMENT
    "ERT_SHARED_DIR=${CMAKE_SOURCE_DIR}/../shared;ERT_TEST_PYTHON=${ERT_TEST_PYTHON};ERT_TEST_SRC_DIR=${CMAKE_CURRENT_SOURCE_DIR}")
endif()

# Scripts that drive the built apps: a 10,000-frame soak (exit 0, counts,
# flat RSS; under the ASan phase also no LeakSanitizer report) and a headless
# Chromium screenshot of the HTTP MJPEG preview (scripts/setup.sh installs
# Debian's chromium; without it the test reports SKIPPED). Native builds only:
# bash cannot run cross-built binaries without binfmt.
if(TARGET edgert_camera AND TARGET edgert_mjpeg_gen AND NOT CMAKE_CROSSCOMPILING)
  add_test(NAME camera_soak COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/camera_soak.sh ${CMAKE_BINARY_DIR})
  add_test(NAME camera_http_screenshot
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/camera_http_screenshot.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(camera_soak camera_http_screenshot PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
    LABELS camera ENVIRONMENT "ERT_SHARED_DIR=${CMAKE_SOURCE_DIR}/../shared")
endif()

# ctest `camera_install`: `cmake --install` puts both camera apps in bin/
# (the README's examples need edgert-mjpeg-gen beside edgert-camera), and the
# generator's --help lists every option it takes (--from-idx, --idx-labels,
# --labels-out were missing from its usage).
# Run as a script by that test (tests/camera/CMakeLists.txt):
#   cmake -DERT_CAM_INSTALL_SCRIPT=1 -DBUILD_DIR=... -DPREFIX=... -P camera_install.cmake
if(DEFINED ERT_CAM_INSTALL_SCRIPT)
  file(REMOVE_RECURSE "${PREFIX}")
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cmake --install failed (${rc}): ${err}")
  endif()
  file(GLOB_RECURSE installed RELATIVE ${PREFIX} ${PREFIX}/*/edgert-*)
  foreach(app edgert-camera edgert-mjpeg-gen)
    if(NOT EXISTS ${PREFIX}/bin/${app})
      message(FATAL_ERROR "${app} not installed into ${PREFIX}/bin (installed: ${installed})")
    endif()
  endforeach()
  execute_process(COMMAND ${PREFIX}/bin/edgert-mjpeg-gen --help RESULT_VARIABLE rc OUTPUT_VARIABLE help)
  foreach(opt --width --height --frames --from --from-idx --idx-labels --labels-out --idx-class --corrupt-every --quality --seed)
    if(NOT help MATCHES " ${opt} ")
      message(FATAL_ERROR "edgert-mjpeg-gen --help (exit ${rc}) does not list ${opt}:\n${help}")
    endif()
  endforeach()
  file(REMOVE_RECURSE "${PREFIX}")
  message("installed: ${installed}")
  return()
endif()

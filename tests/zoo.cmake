# Model tests against onnxruntime (docs/models.md): scripts/zoo/run_zoo.py
# builds the zoo models (scripts/zoo/make_models.py), writes random inputs and
# onnxruntime's outputs under build/zoo, runs `edgert run` / `edgert convert`
# on them and compares (relative L2). Nothing generated is committed.
#   zoo        ResNet, MobileNetV2/V3, EfficientNet, YOLO neck, ViT, U-Net, an
#              opset-11 model; batch 1 and 3; .ert and .ert --fp16
#   zoo_ppocr  PaddleOCR classifier and detector, fp32 and fp16 exports
# The Python side (onnx, onnxruntime, numpy) runs on the host: the venv of
# scripts/setup.sh (.deps/venv) if there is one, else python3; without those
# modules the tests report SKIPPED (exit 77) with the reason. In a cross build
# the edgert binary runs under CMAKE_CROSSCOMPILING_EMULATOR (prefixed by the
# script: add_test only applies the emulator to a target-name COMMAND).
if(NOT TARGET edgert_cli)
  return()
endif()

# `convert --fp16` without Python: the demo model (tests/cli.cmake makes it)
# converted and run; the numbers are checked by zoo / zoo_fp16.
if(COMMAND ert_cli_test AND DEFINED ERT_CLI_WORK)
  set(_w ${ERT_CLI_WORK})
  add_test(NAME zoo_cli_clean COMMAND ${CMAKE_COMMAND} -E rm -f ${_w}/demo_fp16.ert)
  set_tests_properties(zoo_cli_clean PROPERTIES FIXTURES_SETUP zoo_cli_clean LABELS cli)
  ert_cli_test(cli_convert_fp16 CMD $<TARGET_FILE:edgert_cli> convert ${_w}/demo.ert ${_w}/demo_fp16.ert --fp16
    STDOUT "wrote .*demo_fp16.ert" REQUIRES cli_model zoo_cli_clean SETUP cli_fp16 NEEDS ${_w}/demo.ert)
  ert_cli_test(cli_run_fp16 CMD $<TARGET_FILE:edgert_cli> run ${_w}/demo_fp16.ert --input input=${_w}/input.npy
    STDOUT "probs +f32 +\\(2, 10\\)" REQUIRES cli_fp16 cli_input NEEDS ${_w}/demo_fp16.ert)
endif()

# Any python3 will do to start: run_zoo.py re-executes itself with
# <source>/.deps/venv/bin/python when its own interpreter lacks onnx (so a
# venv made by scripts/setup.sh after configuring is still used).
set(_venv_py ${PROJECT_SOURCE_DIR}/.deps/venv/bin/python)
if(EXISTS ${_venv_py})
  set(_zoo_py_default ${_venv_py})
else()
  find_program(_zoo_py_found NAMES python3)
  set(_zoo_py_default ${_zoo_py_found})
endif()
set(ERT_ZOO_PYTHON "${_zoo_py_default}" CACHE FILEPATH "Python that starts the zoo tests")
if(NOT ERT_ZOO_PYTHON)
  message(STATUS "zoo tests: no python3, not added")
  return()
endif()

set(_zoo_emu "")
if(CMAKE_CROSSCOMPILING AND CMAKE_CROSSCOMPILING_EMULATOR)
  list(JOIN CMAKE_CROSSCOMPILING_EMULATOR "|" _zoo_emu)
endif()
set(_zoo_work ${CMAKE_BINARY_DIR}/zoo)
set(_zoo_script ${PROJECT_SOURCE_DIR}/scripts/zoo/run_zoo.py)

add_test(NAME zoo
  COMMAND ${ERT_ZOO_PYTHON} ${_zoo_script} --suite zoo --edgert $<TARGET_FILE:edgert_cli>
          --emulator "${_zoo_emu}" --work ${_zoo_work}/zoo --report ${_zoo_work}/zoo.tsv)
add_test(NAME zoo_ppocr
  COMMAND ${ERT_ZOO_PYTHON} ${_zoo_script} --suite ppocr --edgert $<TARGET_FILE:edgert_cli>
          --emulator "${_zoo_emu}" --work ${_zoo_work}/ppocr --report ${_zoo_work}/ppocr.tsv
          --ppocr-dir ${PROJECT_SOURCE_DIR}/../shared/models/ppocr)
set_tests_properties(zoo zoo_ppocr PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS zoo)

# Under an emulator these are the heaviest tests next to conformance_models,
# whose runner gives each model 60 s (alarm): run side by side on 2 busy
# cores, super_resolution_10 went past that once (a "timeout" failure).
# Keep the three from overlapping there.
if(_zoo_emu)
  set_tests_properties(zoo zoo_ppocr PROPERTIES RESOURCE_LOCK ert_heavy_emulated)
  if(TEST conformance_models)
    set_property(TEST conformance_models APPEND PROPERTY RESOURCE_LOCK ert_heavy_emulated)
  endif()
endif()

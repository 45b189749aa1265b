# End-to-end tests of the apps (edgert CLI, edgert-demo) and the .npy helper.
#
# This file has two roles:
# - included by tests/CMakeLists.txt: defines the tests;
# - run as a script (cmake -P tests/cli.cmake -DERT_CMD=...) by those tests:
#   runs one command and checks its exit status, its output against regexes,
#   and that stdout is a JSON object with the given keys (parsed with
#   string(JSON), so "valid JSON" is really checked).
# While the library is being written, its stubs fail with "... not implemented
# yet": such tests are reported SKIPPED (SKIP_REGULAR_EXPRESSION), not failed,
# and so are tests whose input file that a skipped test should have made is
# missing (NEEDS). Real failures still fail.
# Cross builds (qemu in CI): ctest applies CMAKE_CROSSCOMPILING_EMULATOR only
# when add_test's COMMAND is a target *name* (not $<TARGET_FILE:...>, in CMake
# 3.25), so C helpers are named that way; the -P checker gets
# $<TARGET_FILE:...> with the emulator prefixed explicitly.

if(CMAKE_SCRIPT_MODE_FILE)
  # A prerequisite file missing means its producer failed: fail too, with the reason.
  string(REPLACE "|" ";" _needs "${ERT_NEEDS}")
  foreach(_f ${_needs})
    if(NOT EXISTS "${_f}")
      message(FATAL_ERROR "${_f} is missing: the test that makes it failed")
    endif()
  endforeach()
  string(REPLACE "|" ";" _cmd "${ERT_CMD}")
  execute_process(COMMAND ${_cmd} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  message("$ ${_cmd}\n--- exit ${_rc}\n--- stdout\n${_out}--- stderr\n${_err}---")
  if(NOT "${_rc}" MATCHES "^(${ERT_EXPECT_RC})$")
    message(FATAL_ERROR "exit status ${_rc}, expected ${ERT_EXPECT_RC}")
  endif()
  if(DEFINED ERT_EXPECT_STDOUT AND NOT "${_out}" MATCHES "${ERT_EXPECT_STDOUT}")
    message(FATAL_ERROR "stdout does not match '${ERT_EXPECT_STDOUT}'")
  endif()
  if(DEFINED ERT_EXPECT_STDERR AND NOT "${_err}" MATCHES "${ERT_EXPECT_STDERR}")
    message(FATAL_ERROR "stderr does not match '${ERT_EXPECT_STDERR}'")
  endif()
  if(ERT_JSON_KEYS)
    string(JSON _t ERROR_VARIABLE _jerr TYPE "${_out}")
    if(_jerr OR NOT _t STREQUAL "OBJECT")
      message(FATAL_ERROR "stdout is not one JSON object: ${_jerr}")
    endif()
    string(REPLACE "|" ";" _keys "${ERT_JSON_KEYS}")
    foreach(_k ${_keys})
      string(REPLACE "." ";" _path "${_k}") # nested keys as a.b
      string(JSON _v ERROR_VARIABLE _jerr GET "${_out}" ${_path})
      if(_jerr)
        message(FATAL_ERROR "JSON key '${_k}' missing: ${_jerr}")
      endif()
    endforeach()
  endif()
  return()
endif()

set(_apps ${PROJECT_SOURCE_DIR}/apps)
foreach(t test_cli_npy test_cli_run test_cli_io)
  if(TARGET ${t})
    target_sources(${t} PRIVATE ${_apps}/npy.c ${_apps}/cli_util.c)
    target_include_directories(${t} PRIVATE ${_apps})
    target_compile_definitions(${t} PRIVATE _POSIX_C_SOURCE=200809L)
  endif()
endforeach()
if(TARGET test_cli_io) # cli_io.c shares the camera's CPU preprocessing
  target_sources(test_cli_io PRIVATE ${_apps}/cli_io.c ${_apps}/camera/proc.c)
  target_include_directories(test_cli_io PRIVATE ${_apps}/camera)
  set_tests_properties(cli_io PROPERTIES LABELS cli)
endif()

if(NOT TARGET edgert_cli)
  # apps not built (ERT_APPS=OFF, or runtime still incomplete): test_cli_run
  # needs the session API and is only meaningful next to the CLI.
  if(TARGET test_cli_run)
    set_target_properties(test_cli_run PROPERTIES EXCLUDE_FROM_ALL TRUE)
    set_tests_properties(cli_run PROPERTIES DISABLED TRUE)
  endif()
  return()
endif()

set(ERT_CLI_SCRIPT ${CMAKE_CURRENT_LIST_FILE})
set(ERT_CLI_WORK ${CMAKE_CURRENT_BINARY_DIR}/cli_work)
file(MAKE_DIRECTORY ${ERT_CLI_WORK})
set(_emu "")
if(CMAKE_CROSSCOMPILING AND CMAKE_CROSSCOMPILING_EMULATOR)
  set(_emu ${CMAKE_CROSSCOMPILING_EMULATOR})
endif()

# ert_cli_test(NAME [HOST] CMD target-or-genex args... [RC regex] [STDOUT regex]
#              [STDERR regex] [JSON key...] [SETUP fixture] [REQUIRES fixture...])
function(ert_cli_test name)
  cmake_parse_arguments(T "HOST" "RC;STDOUT;STDERR;SETUP" "CMD;JSON;REQUIRES;NEEDS" ${ARGN})
  if(NOT DEFINED T_RC)
    set(T_RC 0)
  endif()
  if(T_HOST) # CMD is a host program (sh) that runs the emulator itself
    set(_cmd ${T_CMD})
  else()
    set(_cmd ${_emu} ${T_CMD})
  endif()
  list(JOIN _cmd "|" _cmdj)
  set(_args "-DERT_CMD=${_cmdj}" "-DERT_EXPECT_RC=${T_RC}")
  if(DEFINED T_STDOUT)
    list(APPEND _args "-DERT_EXPECT_STDOUT=${T_STDOUT}")
  endif()
  if(DEFINED T_STDERR)
    list(APPEND _args "-DERT_EXPECT_STDERR=${T_STDERR}")
  endif()
  if(T_JSON)
    list(JOIN T_JSON "|" _keys)
    list(APPEND _args "-DERT_JSON_KEYS=${_keys}")
  endif()
  if(T_NEEDS)
    list(JOIN T_NEEDS "|" _needs)
    list(APPEND _args "-DERT_NEEDS=${_needs}")
  endif()
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} ${_args} -P ${ERT_CLI_SCRIPT})
  set_tests_properties(${name} PROPERTIES LABELS cli TIMEOUT 300)
  if(T_SETUP)
    set_tests_properties(${name} PROPERTIES FIXTURES_SETUP ${T_SETUP})
  endif()
  if(T_REQUIRES)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "${T_REQUIRES}")
  endif()
endfunction()

set(_cli $<TARGET_FILE:edgert_cli>)
set(_w ${ERT_CLI_WORK})

# no stale files from an earlier run stand in for ones this run failed to make
add_test(NAME cli_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${_w}/demo.ert ${_w}/converted.ert ${_w}/mnist.ert ${_w}/out ${_w}/add
  ${_w}/img_out ${_w}/demo_export.onnx ${_w}/input_f8.npy ${_w}/cut.onnx)
set_tests_properties(cli_clean PROPERTIES FIXTURES_SETUP cli_clean LABELS cli)
# the demo builds, saves, reloads and runs the model the other tests use
ert_cli_test(cli_demo CMD $<TARGET_FILE:edgert_demo> ${_w}/demo.ert
  STDOUT "outputs identical.*top-1.*refused as expected.*demo ok" SETUP cli_model REQUIRES cli_clean)
ert_cli_test(cli_help CMD ${_cli} --help STDOUT "usage: edgert.*info MODEL.*run MODEL.*convert IN.*bench MODEL")
ert_cli_test(cli_version CMD ${_cli} --version STDOUT "^edgert [0-9]+\\.[0-9]+\\.[0-9]+")

ert_cli_test(cli_info CMD ${_cli} info ${_w}/demo.ert --batch 4
  STDOUT "inputs \\(1\\).*input.*f32.*nodes: [0-9]+.*parameters: [0-9]+.*Conv x2.*arena plan \\(batch 4.*activations \\(peak\\).*lower bound.*total \\(arena\\) +[1-9]"
  REQUIRES cli_model NEEDS ${_w}/demo.ert)
ert_cli_test(cli_info_json CMD ${_cli} info ${_w}/demo.ert --json
  JSON inputs outputs nodes parameters ops.Conv arena.total_bytes arena.activations_lower_bound
  REQUIRES cli_model NEEDS ${_w}/demo.ert)

ert_cli_test(cli_convert CMD ${_cli} convert ${_w}/demo.ert ${_w}/converted.ert
  STDOUT "wrote .*converted.ert" REQUIRES cli_model SETUP cli_converted NEEDS ${_w}/demo.ert)
ert_cli_test(cli_info_converted CMD ${_cli} info ${_w}/converted.ert STDOUT "Conv x2" REQUIRES cli_converted NEEDS ${_w}/converted.ert)

# run: input written by the C helper, outputs compared with an API run (cli_run)
add_test(NAME cli_input COMMAND test_cli_npy write ${_w}/input.npy 2 3 32 32)
set_tests_properties(cli_input PROPERTIES FIXTURES_SETUP cli_input LABELS cli)
ert_cli_test(cli_run_cli CMD ${_cli} run ${_w}/demo.ert --input input=${_w}/input.npy --output-dir ${_w}/out
  STDOUT "probs +f32 +\\(2, 10\\).*out/probs.npy" SETUP cli_out REQUIRES cli_model cli_input NEEDS ${_w}/demo.ert)
set_property(TEST cli_run APPEND PROPERTY ENVIRONMENT
  ERT_CLI_MODEL=${_w}/demo.ert ERT_CLI_INPUT=${_w}/input.npy ERT_CLI_OUTDIR=${_w}/out)
set_tests_properties(cli_run PROPERTIES FIXTURES_REQUIRED "cli_out;cli_model;cli_input" LABELS cli)
ert_cli_test(cli_run_json CMD ${_cli} run ${_w}/demo.ert --input ${_w}/input.npy --json
  JSON run_ms outputs outputs.0.shape outputs.0.first_values REQUIRES cli_model cli_input NEEDS ${_w}/demo.ert)

ert_cli_test(cli_bench_json CMD ${_cli} bench ${_w}/demo.ert --iters 5 --warmup 1 --batch 2 --json
  JSON p50_ms p90_ms mean_ms min_ms throughput_items_per_s arena_bytes memory.activations_lower_bound
  REQUIRES cli_model NEEDS ${_w}/demo.ert)
ert_cli_test(cli_bench CMD ${_cli} bench ${_w}/demo.ert --iters 3 --threads 2
  STDOUT "latency ms: p50 [0-9.]+ +p90.*throughput.*arena: [1-9]" REQUIRES cli_model NEEDS ${_w}/demo.ert)
# before the CUDA backend exists: a clear error, not a crash; with it: success
ert_cli_test(cli_bench_cuda CMD ${_cli} bench ${_w}/demo.ert --iters 2 --device cuda
  RC "0|1" STDERR "^$|CUDA|cuda" REQUIRES cli_model NEEDS ${_w}/demo.ert)

# bad usage: exit 2 with the usage text
ert_cli_test(cli_usage_none CMD ${_cli} RC 2 STDERR "usage: edgert")
ert_cli_test(cli_usage_command CMD ${_cli} frobnicate RC 2 STDERR "unknown command 'frobnicate'.*see `edgert --help`")
ert_cli_test(cli_usage_flag CMD ${_cli} bench x.ert --bogus RC 2 STDERR "unknown option '--bogus'")
ert_cli_test(cli_usage_value CMD ${_cli} bench x.ert --iters abc RC 2 STDERR "expected an integer")
ert_cli_test(cli_usage_args CMD ${_cli} info RC 2 STDERR "needs 1 argument")
ert_cli_test(cli_usage_device CMD ${_cli} bench x.ert --device tpu RC 2 STDERR "expected one of cpu, cuda, auto")
# failures: exit 1 with the reason
ert_cli_test(cli_missing_model CMD ${_cli} info ${_w}/does-not-exist.ert RC 1
  STDERR "edgert: error: cannot load model .*does-not-exist.ert")
ert_cli_test(cli_missing_input CMD ${_cli} run ${_w}/demo.ert --input input=${_w}/nope.npy RC 1
  STDERR "input file .*nope.npy': No such file" REQUIRES cli_model NEEDS ${_w}/demo.ert)
ert_cli_test(cli_wrong_name CMD ${_cli} run ${_w}/demo.ert --input image=${_w}/input.npy RC 1
  STDERR "no input named 'image' \\(its inputs: input\\)" REQUIRES cli_model cli_input NEEDS ${_w}/demo.ert)
ert_cli_test(cli_not_npy CMD ${_cli} run ${_w}/demo.ert --input input=${_w}/demo.ert RC 1
  STDERR "neither .npy nor" REQUIRES cli_model NEEDS ${_w}/demo.ert)
add_test(NAME cli_input_bad_shape COMMAND test_cli_npy write ${_w}/bad_shape.npy 2 3 16 16)
set_tests_properties(cli_input_bad_shape PROPERTIES FIXTURES_SETUP cli_bad_input LABELS cli)
ert_cli_test(cli_wrong_shape CMD ${_cli} run ${_w}/demo.ert --input input=${_w}/bad_shape.npy RC 1
  STDERR "input 'input' has shape \\(\\?, 3, 32, 32\\), file .* holds \\(2, 3, 16, 16\\)" REQUIRES cli_model cli_bad_input NEEDS ${_w}/demo.ert)

# .npy files the CLI must refuse, with the reason
foreach(kind fortran bigendian truncated)
  add_test(NAME cli_input_${kind} COMMAND test_cli_npy write-bad ${_w}/${kind}.npy ${kind})
  set_tests_properties(cli_input_${kind} PROPERTIES FIXTURES_SETUP cli_bad_${kind} LABELS cli)
endforeach()
ert_cli_test(cli_reject_fortran CMD ${_cli} run ${_w}/demo.ert --input input=${_w}/fortran.npy RC 1
  STDERR "fortran_order=True is not supported" REQUIRES cli_model cli_bad_fortran NEEDS ${_w}/demo.ert)
ert_cli_test(cli_reject_bigendian CMD ${_cli} run ${_w}/demo.ert --input input=${_w}/bigendian.npy RC 1
  STDERR "big-endian dtype '>f4' is not supported" REQUIRES cli_model cli_bad_bigendian NEEDS ${_w}/demo.ert)
ert_cli_test(cli_reject_truncated CMD ${_cli} run ${_w}/demo.ert --input input=${_w}/truncated.npy RC 1
  STDERR "truncated .npy data" REQUIRES cli_model cli_bad_truncated NEEDS ${_w}/demo.ert)

# an ONNX model from ../shared with its TensorProto test input (.pb path of `run`)
set(_mnist ${PROJECT_SOURCE_DIR}/../shared/models/mnist_8)
if(EXISTS ${_mnist}/model.onnx AND EXISTS ${_mnist}/test_data_set_0/input_0.pb)
  ert_cli_test(cli_run_onnx_pb CMD ${_cli} run ${_mnist}/model.onnx --input ${_mnist}/test_data_set_0/input_0.pb
    --output-dir ${_w}/mnist STDOUT "Plus214_Output_0 +f32 +\\(1, 10\\)")
  # a model that fixes its batch: --batch is said to be ignored, the plan is for batch 1
  ert_cli_test(cli_info_batch_fixed CMD ${_cli} info ${_mnist}/model.onnx --batch 4
    STDOUT "arena plan \\(batch 1," STDERR "--batch 4 ignored for input 'Input3': the model file fixes its shape \\(1, 1, 28, 28\\)")
  ert_cli_test(cli_bench_batch_fixed CMD ${_cli} bench ${_mnist}/model.onnx --batch 4 --iters 2 --warmup 0 --json
    STDOUT "\"batch\": 1," STDERR "--batch 4 ignored for input 'Input3'")
  ert_cli_test(cli_convert_onnx CMD ${_cli} convert ${_mnist}/model.onnx ${_w}/mnist.ert
    STDOUT "wrote .*mnist.ert" SETUP cli_mnist_ert REQUIRES cli_clean)
  ert_cli_test(cli_run_converted CMD ${_cli} run ${_w}/mnist.ert --input ${_mnist}/test_data_set_0/input_0.pb
    STDOUT "Plus214_Output_0 +f32 +\\(1, 10\\)" REQUIRES cli_mnist_ert NEEDS ${_w}/mnist.ert)
endif()

# a two-input ONNX node test: inputs matched by the names inside the .pb files,
# output compared with the test's reference
set(_add ${PROJECT_SOURCE_DIR}/../shared/conformance/onnx-node/test_add)
if(EXISTS ${_add}/model.onnx AND EXISTS ${_add}/test_data_set_0/output_0.pb)
  ert_cli_test(cli_run_two_pb CMD ${_cli} run ${_add}/model.onnx --input ${_add}/test_data_set_0/input_0.pb
    --input ${_add}/test_data_set_0/input_1.pb --output-dir ${_w}/add STDOUT "sum +f32 +\\(3, 4, 5\\)"
    SETUP cli_add_out REQUIRES cli_clean)
  ert_cli_test(cli_expect_pb CMD ${_cli} run ${_add}/model.onnx --input ${_add}/test_data_set_0/input_0.pb
    --input ${_add}/test_data_set_0/input_1.pb --expect ${_add}/test_data_set_0/output_0.pb STDOUT "expect sum: ok: 60 values")
  set(_rs ${PROJECT_SOURCE_DIR}/../shared/conformance/onnx-node/test_resize_upsample_scales_linear)
  if(EXISTS ${_rs}/model.onnx)
    # Resize's scales is a graph input: info says run fixes it; run does, and matches the reference
    ert_cli_test(cli_info_shape_like CMD ${_cli} info ${_rs}/model.onnx RC 1 STDERR "scales must be a constant.*edgert run. fixes")
    ert_cli_test(cli_run_shape_like CMD ${_cli} -v run ${_rs}/model.onnx -i X=${_rs}/test_data_set_0/input_0.pb
      -i scales=${_rs}/test_data_set_0/input_1.pb --expect Y=${_rs}/test_data_set_0/output_0.pb
      STDOUT "expect Y: ok" STDERR "input 'scales' fixed at session create")
  endif()
  add_test(NAME cli_run_two_pb_check COMMAND test_cli_run compare-pb ${_w}/add/sum.npy ${_add}/test_data_set_0/output_0.pb)
  set_tests_properties(cli_run_two_pb_check PROPERTIES FIXTURES_REQUIRED cli_add_out LABELS cli
    SKIP_RETURN_CODE 77)
endif()

# ---- issue 13: what a new user expects of the CLI ----
set(_ppocr ${PROJECT_SOURCE_DIR}/../shared/models/ppocr)

# stdout write errors are failures (exit 1), not a silent exit 0 (through a
# shell for the redirection; the emulator of a cross build goes in front)
list(JOIN _emu " " _emu_sh)
ert_cli_test(cli_stdout_full_info HOST CMD sh -c "${_emu_sh} $<TARGET_FILE:edgert_cli> info ${_w}/demo.ert > /dev/full"
  RC 1 STDERR "cannot write to standard output: No space left" REQUIRES cli_model NEEDS ${_w}/demo.ert)
ert_cli_test(cli_stdout_full_run HOST CMD sh -c "${_emu_sh} $<TARGET_FILE:edgert_cli> run ${_w}/demo.ert -i ${_w}/input.npy --json > /dev/full"
  RC 1 STDERR "cannot write to standard output" REQUIRES cli_model cli_input NEEDS ${_w}/demo.ert)

# per-command help (with the defaults) and one-line usage errors naming option, value and range
foreach(cmd info run convert bench)
  ert_cli_test(cli_help_${cmd} CMD ${_cli} ${cmd} --help STDOUT "^usage: edgert ${cmd} .*default")
endforeach()
get_target_property(_cli_defs edgert_cli COMPILE_DEFINITIONS)
if("${_cli_defs}" MATCHES "EDGERT_HAVE_TRAIN_CMD")
  ert_cli_test(cli_help_train CMD ${_cli} train --help STDOUT "^usage: edgert train .*--shape.*default cpu")
  ert_cli_test(cli_usage_train CMD ${_cli} train small-cnn --data x --epochs 0 RC 2
    STDERR "^edgert train: --epochs '0': expected an integer in \\[1, 1000\\].see `edgert train --help`")
  # --shape reaches the trainer: the built-in CNN's input is fixed, so a
  # different size is refused naming the declared shape
  set(_fm ${PROJECT_SOURCE_DIR}/../shared/data/fashion-mnist)
  if(EXISTS ${_fm}/train-images-idx3-ubyte.gz)
    ert_cli_test(cli_train_shape CMD ${_cli} train small-cnn --data ${_fm} --limit 300 --batch 32 --shape image=32x1x28x30
      RC 2 STDERR "--shape 'image=32x1x28x30': input 'image' is declared \\(\\?, 1, 28, 28\\)")
    ert_cli_test(cli_train_shape_ok CMD ${_cli} train small-cnn --data ${_fm} --limit 300 --batch 32 --max-steps 2
      --shape image=32x1x28x28 --json STDOUT "\"event\":\"stopped\"")
  endif()
  ert_cli_test(cli_usage_train_device CMD ${_cli} train small-cnn --data x --device tpu RC 2
    STDERR "--device 'tpu': expected one of cpu, cuda, auto")
endif()
ert_cli_test(cli_usage_line CMD ${_cli} bench x.ert --warmup -1 RC 2
  STDERR "^edgert bench: --warmup '-1': expected an integer in \\[0, 100000000\\].see `edgert bench --help`")
ert_cli_test(cli_usage_run_device CMD ${_cli} run x.ert --device gpu RC 2 STDERR "--device 'gpu': expected one of cpu, cuda, auto")

# the wrong kind of file says what it looks like; a cut ONNX file says where it ends
set(_jpg ${PROJECT_SOURCE_DIR}/../shared/images/254.jpg)
if(EXISTS ${_jpg})
  ert_cli_test(cli_model_is_jpeg CMD ${_cli} info ${_jpg} RC 1 STDERR "looks like a JPEG image, not a model")
endif()
ert_cli_test(cli_model_is_npy CMD ${_cli} info ${_w}/input.npy RC 1 STDERR "looks like a NumPy .npy array, not a model"
  REQUIRES cli_input NEEDS ${_w}/input.npy)
if(EXISTS ${_mnist}/model.onnx)
  add_test(NAME cli_cut_onnx COMMAND sh -c "head -c 5000 '${_mnist}/model.onnx' > '${_w}/cut.onnx'")
  set_tests_properties(cli_cut_onnx PROPERTIES FIXTURES_SETUP cli_cut LABELS cli)
  ert_cli_test(cli_model_truncated CMD ${_cli} info ${_w}/cut.onnx RC 1
    STDERR "is truncated at byte 5000 of at least [0-9]+" REQUIRES cli_cut NEEDS ${_w}/cut.onnx)
endif()

# --shape: dynamic-shape models (the shipped PaddleOCR ones) through info and bench
if(EXISTS ${_ppocr}/en_PP-OCRv3_det_infer.onnx)
  ert_cli_test(cli_shape_needed CMD ${_cli} info ${_ppocr}/en_PP-OCRv3_det_infer.onnx RC 1
    STDOUT "x +f32 +\\(\\?, 3, \\?, \\?\\)" STDERR "give|fix them with --shape x=1x3xNxN")
  ert_cli_test(cli_shape_info CMD ${_cli} info ${_ppocr}/en_PP-OCRv3_det_infer.onnx --shape x=1x3x736x1280
    STDOUT "arena plan \\(batch 1, 1 thread, cpu, x \\(1, 3, 736, 1280\\)\\).*total \\(arena\\) +[1-9]")
  ert_cli_test(cli_shape_info_json CMD ${_cli} info ${_ppocr}/en_PP-OCRv3_det_infer.onnx --shape=x=1x3x64x96 --json
    JSON arena.total_bytes shapes.x)
  ert_cli_test(cli_shape_bench CMD ${_cli} bench ${_ppocr}/ch_ppocr_mobile_v2.0_cls_infer.onnx --shape x=1x3x48x192
    --iters 2 --warmup 0 --json JSON p50_ms arena_bytes)
  ert_cli_test(cli_shape_bad CMD ${_cli} info ${_ppocr}/en_PP-OCRv3_det_infer.onnx --shape x=1x4x64x64 RC 2
    STDERR "--shape 'x=1x4x64x64': input 'x' is declared \\(\\?, 3, \\?, \\?\\).*see `edgert info --help`")
  ert_cli_test(cli_shape_unknown CMD ${_cli} bench ${_ppocr}/en_PP-OCRv3_det_infer.onnx --shape img=1x3x64x64 RC 2
    STDERR "no such input \\(its inputs: x\\)")
endif()

# run: device, precision, iterations; the effective precision is reported
ert_cli_test(cli_run_iters CMD ${_cli} run ${_w}/demo.ert -i ${_w}/input.npy --iters 5 --device auto
  STDOUT "on (cpu|cuda) \\((f32)\\) 5 times: p50 [0-9.]+ ms" REQUIRES cli_model cli_input NEEDS ${_w}/demo.ert)
ert_cli_test(cli_run_precision_cpu CMD ${_cli} run ${_w}/demo.ert -i ${_w}/input.npy --precision f16 --json
  JSON p50_ms iters STDOUT "\"device\": \"cpu\", \"precision\": \"f32\"" STDERR "the CPU.*computes in f32"
  REQUIRES cli_model cli_input NEEDS ${_w}/demo.ert)
ert_cli_test(cli_run_batch_note CMD ${_cli} run ${_w}/demo.ert -i ${_w}/input.npy --batch 4
  STDERR "--batch 4 ignored for input 'input': its shape \\(2, 3, 32, 32\\) comes from a file"
  REQUIRES cli_model cli_input NEEDS ${_w}/demo.ert)
ert_cli_test(cli_bench_auto CMD ${_cli} bench ${_w}/demo.ert --device auto --iters 2 --warmup 0 --json
  JSON device precision p50_ms REQUIRES cli_model NEEDS ${_w}/demo.ert)
# bench --input: the file's shape (batch 2) is what runs, and throughput counts it
ert_cli_test(cli_bench_input CMD ${_cli} bench ${_w}/demo.ert --input input=${_w}/input.npy --iters 2 --warmup 0
  STDOUT "batch: 2 " REQUIRES cli_model cli_input NEEDS ${_w}/demo.ert)

# --expect: the output matches the API run's file exactly; a wrong reference fails
ert_cli_test(cli_expect_ok CMD ${_cli} run ${_w}/demo.ert -i ${_w}/input.npy --expect probs=${_w}/out/probs.npy --tol 0,0
  STDOUT "expect probs: ok: 20 values match" REQUIRES cli_model cli_input cli_out NEEDS ${_w}/out/probs.npy)
ert_cli_test(cli_expect_json CMD ${_cli} run ${_w}/demo.ert -i ${_w}/input.npy --topk 2 --expect probs=${_w}/out/probs.npy --json
  JSON expect.0.ok outputs.0.topk.1.0.class STDOUT "\"ok\": true" REQUIRES cli_model cli_input cli_out NEEDS ${_w}/out/probs.npy)
ert_cli_test(cli_help_full HOST CMD sh -c "${_emu_sh} $<TARGET_FILE:edgert_cli> run --help > /dev/full" RC 1
  STDERR "cannot write to standard output")
add_test(NAME cli_wrong_ref COMMAND test_cli_npy write ${_w}/wrong_probs.npy 2 10)
set_tests_properties(cli_wrong_ref PROPERTIES FIXTURES_SETUP cli_wrong_ref LABELS cli)
ert_cli_test(cli_expect_mismatch CMD ${_cli} run ${_w}/demo.ert -i ${_w}/input.npy --expect ${_w}/wrong_probs.npy RC 1
  STDOUT "expect probs: MISMATCH: 20 of 20 values differ" STDERR "--expect probs: .*worst at .[0-9]"
  REQUIRES cli_model cli_input cli_wrong_ref NEEDS ${_w}/wrong_probs.npy)
ert_cli_test(cli_expect_shape CMD ${_cli} run ${_w}/demo.ert -i ${_w}/input.npy --expect probs=${_w}/input.npy RC 1
  STDERR "shape \\(2, 10\\), reference .* is \\(2, 3, 32, 32\\)" REQUIRES cli_model cli_input NEEDS ${_w}/demo.ert)

# an '<f8' input is cast to f32 with a note, and gives the f32 input's outputs
add_test(NAME cli_input_f8 COMMAND test_cli_npy write-f8 ${_w}/input.npy ${_w}/input_f8.npy)
set_tests_properties(cli_input_f8 PROPERTIES FIXTURES_SETUP cli_input_f8 FIXTURES_REQUIRED cli_input LABELS cli)
ert_cli_test(cli_run_f8 CMD ${_cli} run ${_w}/demo.ert -i ${_w}/input_f8.npy --expect probs=${_w}/out/probs.npy --tol 0,0
  STDOUT "expect probs: ok" STDERR "holds float64 \\(<f8\\): cast to f32"
  REQUIRES cli_model cli_input_f8 cli_out NEEDS ${_w}/input_f8.npy ${_w}/out/probs.npy)

# image input: a PPM whose preprocessing the helper computes independently in
# double; the run on the image must match the run on that tensor
add_test(NAME cli_image_make COMMAND test_cli_npy write-image ${_w}/img.ppm ${_w}/img_ref.npy 32 32 bgr 0.5 0.25)
set_tests_properties(cli_image_make PROPERTIES FIXTURES_SETUP cli_image LABELS cli)
ert_cli_test(cli_image_ref CMD ${_cli} run ${_w}/demo.ert -i ${_w}/img_ref.npy --output-dir ${_w}/img_out
  STDOUT "probs" SETUP cli_image_out REQUIRES cli_model cli_image NEEDS ${_w}/img_ref.npy)
ert_cli_test(cli_image_run CMD ${_cli} run ${_w}/demo.ert -i input=${_w}/img.ppm --bgr --mean 0.5 --std 0.25
  --expect probs=${_w}/img_out/probs.npy --tol 1e-5,1e-4 STDOUT "expect probs: ok"
  REQUIRES cli_model cli_image_out NEEDS ${_w}/img.ppm ${_w}/img_out/probs.npy)
# without --bgr the channels are swapped: the same check must fail
ert_cli_test(cli_image_rgb_differs CMD ${_cli} run ${_w}/demo.ert -i input=${_w}/img.ppm --mean 0.5 --std 0.25
  --expect probs=${_w}/img_out/probs.npy --tol 1e-5,1e-4 RC 1 STDOUT "MISMATCH"
  REQUIRES cli_model cli_image_out NEEDS ${_w}/img.ppm ${_w}/img_out/probs.npy)
if(EXISTS ${_jpg} AND ERT_HAVE_JPEG)
  # a JPEG of another size, resized to the model's 32x32, with top-k and labels
  file(WRITE ${_w}/labels.txt "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n")
  ert_cli_test(cli_image_jpeg_topk CMD ${_cli} run ${_w}/demo.ert -i ${_jpg} --size 32x32 --fit letterbox --topk 3
    --labels ${_w}/labels.txt STDOUT "probs +f32 +\\(1, 10\\).*top-3 of row 0: [0-9] \\([a-z]+\\) [0-9.e-]+, [0-9] \\([a-z]+\\)"
    REQUIRES cli_model NEEDS ${_w}/demo.ert)
  ert_cli_test(cli_image_size_fixed CMD ${_cli} run ${_w}/demo.ert -i ${_jpg} --size 64x64 RC 1
    STDERR "input 'input': --size 64x64, but the model fixes it at 32x32" REQUIRES cli_model NEEDS ${_w}/demo.ert)
endif()

# convert: the format follows the extension
ert_cli_test(cli_convert_onnx_out CMD ${_cli} convert ${_w}/demo.ert ${_w}/demo_export.onnx
  STDOUT "wrote .*demo_export.onnx \\(ONNX" SETUP cli_onnx_out REQUIRES cli_model NEEDS ${_w}/demo.ert)
ert_cli_test(cli_run_exported CMD ${_cli} run ${_w}/demo_export.onnx -i ${_w}/input.npy --expect probs=${_w}/out/probs.npy
  STDOUT "expect probs: ok" REQUIRES cli_onnx_out cli_input cli_out NEEDS ${_w}/demo_export.onnx ${_w}/out/probs.npy)
ert_cli_test(cli_convert_fp16_onnx CMD ${_cli} convert ${_w}/demo.ert ${_w}/demo16.onnx --fp16 RC 2
  STDERR "--fp16 applies to .ert output")
ert_cli_test(cli_convert_bad_ext CMD ${_cli} convert ${_w}/demo.ert ${_w}/demo.bin RC 2
  STDERR "extension '.bin' names no format; use .ert or .onnx")

# an output the file does not declare: info shows the shape a session infers
find_program(ERT_PYTHON3 python3)
if(ERT_PYTHON3)
  add_test(NAME cli_undeclared_make COMMAND ${ERT_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/make_undeclared_onnx.py ${_w}/undeclared.onnx)
  set_tests_properties(cli_undeclared_make PROPERTIES FIXTURES_SETUP cli_undeclared LABELS cli)
  ert_cli_test(cli_info_undeclared CMD ${_cli} info ${_w}/undeclared.onnx --batch 5
    STDOUT "y +f32 +\\(5, 3\\) +\\(not declared in the file: inferred" REQUIRES cli_undeclared NEEDS ${_w}/undeclared.onnx)
  ert_cli_test(cli_info_undeclared_json CMD ${_cli} info ${_w}/undeclared.onnx --json
    JSON outputs.0.inferred STDOUT "\"shape\": \\[1, 3\\], \"inferred\": true" REQUIRES cli_undeclared NEEDS ${_w}/undeclared.onnx)
endif()

# `edgert train` end to end on Fashion-MNIST (2000 images, 2 epochs):
# an uninterrupted run and a run stopped at step 70 (--max-steps, with a
# checkpoint) then resumed must report the same test loss and accuracy, and
# the accuracy must reach 0.70 (measured 0.79).
# Run as a script by ctest `cli_train_resume` (tests/train/CMakeLists.txt):
#   cmake -DERT_TRAIN_SCRIPT=1 -DEXE=... -DDATA=... -DWORK=... -P train_resume.cmake
if(DEFINED ERT_TRAIN_SCRIPT)
  if(NOT EXISTS "${DATA}/train-images-idx3-ubyte.gz")
    message("SKIPPED: no Fashion-MNIST at ${DATA}")
    return()
  endif()
  file(MAKE_DIRECTORY "${WORK}")
  set(common small-cnn --data ${DATA} --limit 2000 --epochs 2 --threads 2 --json)
  execute_process(COMMAND ${EXE} train ${common} RESULT_VARIABLE rc1 OUTPUT_VARIABLE out1)
  file(REMOVE "${WORK}/resume.ert")
  execute_process(COMMAND ${EXE} train ${common} --max-steps 70 --checkpoint ${WORK}/resume.ert
                  RESULT_VARIABLE rc2 OUTPUT_VARIABLE out2)
  execute_process(COMMAND ${EXE} train ${common} --resume ${WORK}/resume.ert RESULT_VARIABLE rc3 OUTPUT_VARIABLE out3)
  if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0 OR NOT rc3 EQUAL 0)
    message(FATAL_ERROR "edgert train failed: ${rc1} ${rc2} ${rc3}\n${out1}\n${out2}\n${out3}")
  endif()
  string(REGEX MATCH "\"test_loss\":[0-9.]+,\"test_acc\":([0-9.]+)" full "${out1}")
  set(acc ${CMAKE_MATCH_1})
  string(REGEX MATCH "\"test_loss\":[0-9.]+,\"test_acc\":[0-9.]+" resumed "${out3}")
  if(NOT out2 MATCHES "\"event\":\"stopped\",\"step\":70")
    message(FATAL_ERROR "the interrupted run did not stop at step 70:\n${out2}")
  endif()
  if(full STREQUAL "" OR NOT full STREQUAL resumed)
    message(FATAL_ERROR "resumed run differs: '${resumed}' vs uninterrupted '${full}'")
  endif()
  if(acc LESS 0.70)
    message(FATAL_ERROR "test accuracy ${acc} < 0.70")
  endif()
  message("uninterrupted and resumed: ${full}")
  return()
endif()

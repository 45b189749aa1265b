# demo_pipeline: the README demo (scripts/demo.sh steps 1-3, i.e.
# scripts/demo_pipeline.sh) at a reduced size: train the small CNN for 1
# epoch on 6000 Fashion-MNIST images, render 200 test images into an MJPEG
# stream with 8 corrupt frames, classify it with edgert-camera. Asserts (the
# script's exit status): exit 0, every good frame classified, the corrupt
# frames counted exactly as inserted, pipeline top-1 accuracy >= 0.65
# (measured 0.80-0.81 on the 10,000 test images for seeds 1-3, 0.83 on these
# 200 frames; chance is 0.10). Skips (77) without ../shared/data/fashion-mnist
# or without JPEG support (the cross build: ERT_JPEG off, so under qemu it
# always skips; the sizes are halved there anyway should JPEG come on).
if(TARGET edgert_cli AND TARGET edgert_camera AND TARGET edgert_mjpeg_gen)
  set(_fm ${PROJECT_SOURCE_DIR}/../shared/data/fashion-mnist)
  set(_demo_env ERT_DEMO_TRAIN=6000 ERT_DEMO_FRAMES=200 ERT_DEMO_THREADS=1 ERT_DEMO_MIN_ACC=0.65)
  if(CMAKE_CROSSCOMPILING)
    string(REPLACE ";" " " _demo_emu "${CMAKE_CROSSCOMPILING_EMULATOR}")
    set(_demo_env ERT_DEMO_TRAIN=3000 ERT_DEMO_FRAMES=100 ERT_DEMO_THREADS=1 ERT_DEMO_MIN_ACC=0.55
                  "ERT_DEMO_EMU=${_demo_emu}")
  endif()
  add_test(NAME demo_pipeline COMMAND sh -c
    "if [ ! -f \"$1/t10k-images-idx3-ubyte.gz\" ]; then echo \"SKIP: $1 missing (Fashion-MNIST)\"; exit 77; fi; exec bash \"$2\" \"$3\" \"$1\" \"$4\""
    demo_pipeline ${_fm} ${PROJECT_SOURCE_DIR}/scripts/demo_pipeline.sh
    $<TARGET_FILE_DIR:edgert_cli> ${CMAKE_CURRENT_BINARY_DIR}/demo_pipeline)
  set_tests_properties(demo_pipeline PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "demo;train"
    ENVIRONMENT "${_demo_env}")
endif()

# demo_finetune: scripts/demo_finetune.sh at a reduced size (factory model on
# 6000 images of classes 0-7, 60 collected frames per class, 6 epochs of
# head-only fine-tuning, 300 test frames). Asserts (the script's exit status):
# every good frame classified by both models, and the fine-tuned model beats
# the base one overall and by >= 0.5 on the two classes the base never saw
# (measured at this size: base 0.00 -> fine-tuned ~0.9 on them). Native builds
# only (the script runs the binaries directly).
if(TARGET edgert_cli AND TARGET edgert_camera AND TARGET edgert_mjpeg_gen AND NOT CMAKE_CROSSCOMPILING)
  add_test(NAME demo_finetune COMMAND sh -c
    "if [ ! -f \"$1/t10k-images-idx3-ubyte.gz\" ]; then echo \"SKIP: $1 missing (Fashion-MNIST)\"; exit 77; fi; exec bash \"$2\" \"$3\" \"$1\" \"$4\""
    demo_finetune ${PROJECT_SOURCE_DIR}/../shared/data/fashion-mnist ${PROJECT_SOURCE_DIR}/scripts/demo_finetune.sh
    $<TARGET_FILE_DIR:edgert_cli> ${CMAKE_CURRENT_BINARY_DIR}/demo_finetune)
  set_tests_properties(demo_finetune PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "demo;train"
    ENVIRONMENT "ERT_FT_BASE=6000;ERT_FT_COLLECT=60;ERT_FT_EPOCHS=6;ERT_FT_FRAMES=300;ERT_DEMO_THREADS=1;ERT_FT_DEVICE=cpu")
endif()

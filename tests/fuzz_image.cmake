# libFuzzer target for the image loaders and the MJPEG splitter (needs JPEG
# support and the apps' camera library): with ERT_FUZZ=ON and clang.
#   cmake -S . -B build/fuzz-image -G Ninja -DCMAKE_C_COMPILER=clang \
#     -DERT_SANITIZE=address,undefined -DERT_FUZZ=ON -DERT_JPEG=ON -DERT_CUDA=OFF \
#     -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   ninja -C build/fuzz-image fuzz_image && build/fuzz-image/tests/fuzz_image -max_total_time=60 DIR
# (scripts/fuzz.sh configures without JPEG, so it does not run this one.)
if(ERT_FUZZ AND ERT_HAVE_JPEG AND TARGET ert_camera)
  add_executable(fuzz_image ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_image.c)
  target_link_libraries(fuzz_image PRIVATE ert_camera)
  target_compile_options(fuzz_image PRIVATE ${ERT_WARN} -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_image PRIVATE -fsanitize=fuzzer,address,undefined)
endif()

# Fuzzing (included by tests/CMakeLists.txt).
#
# Always: fuzz_regress, a plain main() that replays every file under
# tests/fuzz/corpus/*/ through the .ert fuzz entry point (no libFuzzer needed;
# run it under ERT_SANITIZE=address,undefined to catch memory errors).
#
# With ERT_FUZZ=ON and clang: the libFuzzer targets fuzz_ert and fuzz_onnx.
# The whole library must carry the fuzzer's coverage instrumentation, so
# configure a separate build like this (scripts/fuzz.sh does):
#   cmake -S . -B build/test-fuzz -G Ninja -DCMAKE_C_COMPILER=clang \
#         -DERT_SANITIZE=address,undefined -DERT_FUZZ=ON \
#         -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DCMAKE_BUILD_TYPE=RelWithDebInfo
# (ERT_FUZZ also adds -fsanitize=fuzzer-no-link to the library itself, so the
# CMAKE_C_FLAGS part is belt and braces for other targets.)
option(ERT_FUZZ "Build the libFuzzer targets (clang only)" OFF)

set(ERT_FUZZ_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

add_executable(fuzz_regress ${ERT_FUZZ_DIR}/fuzz_regress.c ${ERT_FUZZ_DIR}/fuzz_ert.c)
target_link_libraries(fuzz_regress PRIVATE edgert_internal)
target_compile_options(fuzz_regress PRIVATE ${ERT_WARN})
add_test(NAME fuzz_regress COMMAND fuzz_regress ${ERT_FUZZ_DIR}/corpus)
set_tests_properties(fuzz_regress PROPERTIES TIMEOUT 600)

if(ERT_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ERT_FUZZ needs clang (libFuzzer); configure with -DCMAKE_C_COMPILER=clang")
  endif()
  target_compile_options(edgert PRIVATE -fsanitize=fuzzer-no-link)
  foreach(t ert onnx)
    add_executable(fuzz_${t} ${ERT_FUZZ_DIR}/fuzz_${t}.c)
    target_link_libraries(fuzz_${t} PRIVATE edgert_internal)
    target_compile_options(fuzz_${t} PRIVATE ${ERT_WARN} -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer,address,undefined)
  endforeach()
endif()

# Seed generator (scripts/gen_fuzz_seeds.sh); not a test.
add_executable(fuzz_gen_seeds ${ERT_FUZZ_DIR}/gen_seeds.c)
target_link_libraries(fuzz_gen_seeds PRIVATE edgert)
target_compile_options(fuzz_gen_seeds PRIVATE ${ERT_WARN})

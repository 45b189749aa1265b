#!/bin/sh
# Regenerate the committed fuzz seeds (tests/fuzz/corpus/{ert,onnx}/seed_*)
# from tests/fuzz/gen_seeds.c. Run after a format change; commit the result
# (keep the corpus small: < 50 KB in all).
#   scripts/gen_fuzz_seeds.sh [BUILD_DIR]   (default: build)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ -f "$build/build.ninja" ] || [ -f "$build/Makefile" ] || cmake -S "$root" -B "$build" -G Ninja
cmake --build "$build" --target fuzz_gen_seeds -j2
mkdir -p "$root/tests/fuzz/corpus/ert" "$root/tests/fuzz/corpus/onnx"
rm -f "$root"/tests/fuzz/corpus/ert/seed_*.ert "$root"/tests/fuzz/corpus/onnx/seed_*.onnx
"$build/tests/fuzz_gen_seeds" "$root/tests/fuzz/corpus"
du -sh "$root/tests/fuzz/corpus"

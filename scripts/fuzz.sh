#!/bin/sh
# Build the libFuzzer targets (clang, ASan+UBSan, library instrumented) and run
# each for N seconds, starting from the committed corpus.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGETS...]   (default: 60, ert onnx)
# Environment: FUZZ_SECONDS (default for SECONDS_PER_TARGET; scripts/test.sh
# sets it), BUILD (default build/test-fuzz), ERT_JOBS or JOBS (build jobs,
# default 2), WORK (scratch corpus + artifacts, default $BUILD/fuzz-work).
# New corpus entries go to $WORK/<target>/corpus (not the repo). A crash leaves
# $WORK/<target>/crash-*; the script exits non-zero. To keep a reproducer:
#   cp $WORK/ert/crash-XXXX tests/fuzz/corpus/ert/  (fuzz_regress replays it)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-${FUZZ_SECONDS:-60}}
[ $# -gt 0 ] && shift
targets=${*:-ert onnx}
build=${BUILD:-$root/build/test-fuzz}
jobs=${ERT_JOBS:-${JOBS:-2}}
work=${WORK:-$build/fuzz-work}

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DERT_SANITIZE=address,undefined -DERT_FUZZ=ON -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link \
  -DERT_APPS=OFF -DERT_CUDA=OFF -DERT_JPEG=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done)

status=0
for t in $targets; do
  mkdir -p "$work/$t/corpus"
  echo "== fuzz_$t for ${secs}s"
  # -max_len: models bigger than 64 KB add little coverage and slow each run.
  if ! (cd "$work/$t" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$build/tests/fuzz_$t" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
          -print_final_stats=1 corpus "$root/tests/fuzz/corpus/$t"); then
    echo "!! fuzz_$t found a problem: see $work/$t/crash-* / leak-* / timeout-* / oom-*"
    # the reproducer in the log too (CI keeps only its output): base64 -d > f; fuzz_$t f
    for f in "$work/$t"/crash-* "$work/$t"/leak-* "$work/$t"/timeout-* "$work/$t"/oom-*; do
      [ -f "$f" ] || continue
      echo "reproducer $(basename "$f") ($(wc -c < "$f") bytes, base64):"
      head -c 8192 "$f" | base64 -w 0; echo
    done
    status=1
  fi
done
exit $status

#!/usr/bin/env bash
# Model load time and host memory, ONNX vs .ert, for a ResNet-18-sized model
# (the C-builder ResNet-18 of bench_cpu_resnet18.c exported to ONNX with the
# same weights, then `edgert convert` to .ert).
#
#   bench/run_load_bench.sh [BUILD_DIR]      (default: build)
#   env: PYTHON (numpy + onnx), ITERS (default 9)
#
# bench_load reports warm and cold (page cache dropped with posix_fadvise)
# median load times and, in a fresh child process, the peak resident memory
# during the load and the heap vs file-backed pages after it. Writes
# bench/results/load_<format>_<date>.json and prints a table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
py=${PYTHON:-python3}
iters=${ITERS:-9}
for f in apps/bench/bench_cpu_resnet18 apps/bench/bench_load apps/edgert; do
  [[ -x $build/$f ]] || { echo "run_load_bench: $build/$f not built" >&2; exit 1; }
done
"$py" -c 'import numpy, onnx' 2>/dev/null || { echo "run_load_bench: $py lacks numpy/onnx" >&2; exit 1; }
stamp=$(date -u +%Y%m%dT%H%M%SZ)
work=$(mktemp -d "${TMPDIR:-/tmp}/ert_load_bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$build/apps/bench/bench_cpu_resnet18" --iters 1 --warmup 0 --threads 1 --dump-weights "$work/w" >/dev/null
"$py" "$here/export_resnet18_onnx.py" --weights "$work/w" --out "$work/resnet18.onnx" >/dev/null
"$build/apps/edgert" convert "$work/resnet18.onnx" "$work/resnet18.ert" >/dev/null
mkdir -p "$here/results"
for f in onnx ert; do
  "$build/apps/bench/bench_load" "$work/resnet18.$f" --iters "$iters" --json "$here/results/load_${f}_$stamp.json"
done
echo "results in $here/results/load_*_$stamp.json"

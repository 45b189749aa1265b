#!/usr/bin/env bash
# GPU benchmark in one go: build edgert (Release, CUDA, sm_90), export
# torchvision ResNet-18 / MobileNetV2 / ResNet-50 to ONNX, check edgert's CUDA
# outputs against PyTorch and time edgert, PyTorch eager and PyTorch CUDA
# Graphs at batch 1 and 8 in f32 and f16 (bench/gpu/bench_gpu.py).
#
#   bench/gpu/run_gpu_bench.sh [BUILD_DIR] [RESULTS_DIR]
#     BUILD_DIR    default build-gpu (configured here if it has no build.ninja)
#     RESULTS_DIR  default bench/results: gpu_<date>.json and gpu_<date>.txt
#   env: PYTHON (default python3: torch, torchvision, onnx, numpy),
#        ITERS (300), WARMUP (50), MODELS, BATCHES, PRECISIONS (see bench_gpu.py),
#        ERT_CUDA_ARCHS (90), SKIP_BUILD=1 (use BUILD_DIR as it is)
# cuDNN: the one PyTorch's pip wheels bring (nvidia-cudnn-cu13) unless
# CUDNN_ROOT is set; its lib folder is put on LD_LIBRARY_PATH (cuDNN 9 loads
# its engine libraries at run time).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-build-gpu}
results=${2:-$src/bench/results}
py=${PYTHON:-python3}
mkdir -p "$results"
stamp=$(date -u +%Y%m%dT%H%M%SZ)

if [[ -z ${CUDNN_ROOT:-} ]]; then
  CUDNN_ROOT=$("$py" -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)
fi
if [[ -n ${CUDNN_ROOT:-} ]]; then
  export LD_LIBRARY_PATH=$CUDNN_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  echo "== build ($build, cuDNN ${CUDNN_ROOT:-from the toolkit})"
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DERT_CUDA=ON \
    -DERT_CUDA_ARCHS="${ERT_CUDA_ARCHS:-90}" ${CUDNN_ROOT:+-DERT_CUDNN_ROOT="$CUDNN_ROOT"} >/dev/null
  ninja -C "$build"
fi
cli=$build/apps/edgert
check=$build/apps/bench/bench_gpu_check
for f in "$cli" "$check"; do
  [[ -x $f ]] || { echo "run_gpu_bench: $f not built" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/ert_gpu_bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv || true

echo "== benchmark"
"$py" "$here/bench_gpu.py" --cli "$cli" --check "$check" --work "$work" \
  --json "$results/gpu_$stamp.json" --iters "${ITERS:-300}" --warmup "${WARMUP:-50}" \
  ${MODELS:+--models "$MODELS"} ${BATCHES:+--batches "$BATCHES"} ${PRECISIONS:+--precisions "$PRECISIONS"} \
  | tee "$results/gpu_$stamp.txt"

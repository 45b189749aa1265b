#!/usr/bin/env bash
# The INT8 benchmark in one command on a GPU machine (CUDA, PyTorch,
# torchvision, numpy): build edgert's CLI and the zoo driver if missing, then
# bench/int8/bench_int8.py (ResNet-18/50: export, `edgert quantize`, edgert
# int8 vs edgert f16 vs PyTorch f16 CUDA graph at batch 1 and 8, file sizes).
#
#   bash bench/int8/run_int8_bench.sh [OUT_DIR]        (default ./int8-out)
#   env: BUILD (a CUDA build dir; default build-int8, configured here if it
#        has no driver), MODELS (resnet18,resnet50,mobilenet_v2), ITERS (50), WARMUP (10),
#        CALIB (16 random calibration samples), ERT_CUDA_ARCHS (90), INT8_ARGS
#        (more bench_int8.py options: --ab, --profile, --io host)
# Results: OUT_DIR/int8_gpu.json and int8_gpu.md; the models stay in
# OUT_DIR/models (a second call reuses them).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${1:-int8-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${BUILD:-build-int8}
CUDNN_ROOT=${CUDNN_ROOT:-$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)}
[[ -n $CUDNN_ROOT ]] && export LD_LIBRARY_PATH=$CUDNN_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
driver=$build/apps/bench/bench_zoo_edgert
cli=$build/apps/edgert
if [[ ! -x $driver || ! -x $cli ]]; then
  if [[ ! -f $build/build.ninja ]]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DERT_CUDA=ON -DERT_CUDA_ARCHS="${ERT_CUDA_ARCHS:-90}" \
      ${CUDNN_ROOT:+-DERT_CUDNN_ROOT="$CUDNN_ROOT"} > "$out/int8_configure.log" 2>&1 || {
      tail -20 "$out/int8_configure.log"
      exit 1
    }
  fi
  ninja -C "$build" bench_zoo_edgert edgert_cli > "$out/int8_build.log" 2>&1 || { tail -20 "$out/int8_build.log"; exit 1; }
fi
python3 bench/int8/bench_int8.py --driver "$driver" --edgert "$cli" --work "$out/models" --out "$out/int8_gpu.json" \
  --md "$out/int8_gpu.md" --models "${MODELS:-resnet18,resnet50}" --iters "${ITERS:-50}" --warmup "${WARMUP:-10}" \
  --calib "${CALIB:-16}" ${INT8_ARGS:-}

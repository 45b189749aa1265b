#!/usr/bin/env bash
# The zoo benchmark in one command on a GPU machine (CUDA, cuDNN, PyTorch,
# torchvision; timm and ultralytics for their models): build edgert's driver,
# export the zoo once (bench/zoo/export_zoo.py), run bench/zoo/run_zoo_gpu.py.
#
#   bash bench/zoo/run_zoo_gpu.sh [OUT_DIR]        (default ./zoo-out)
#   env: ZOO_DIR (default OUT_DIR/zoo), BUILD (default build-zoo), ONLY=a,b,
#        ITERS (50), WARMUP (10), COMPILE=1 (torch.compile f16 batch 1),
#        BUDGET_S (start no model after this many seconds), CONFIGS=f16:1,f32:1
#        (default all of f32/f16 x batch 1/8), ERT_CUDA_ARCHS (90), FAST=1 (also
#        f16 b1 with fast create), PROFILE=1 (per-op time of each config),
#        IO=host|device|both (edgert I/O copied every run, left on the GPU, or both: default)
# Results: OUT_DIR/zoo_gpu.json and zoo_gpu.md; a second call with the same
# OUT_DIR keeps the models already measured and runs the rest.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${1:-zoo-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
zoo=${ZOO_DIR:-$out/zoo}
build=${BUILD:-build-zoo}
CUDNN_ROOT=${CUDNN_ROOT:-$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)}
[[ -n $CUDNN_ROOT ]] && export LD_LIBRARY_PATH=$CUDNN_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUDNN_ROOT
driver=$build/apps/bench/bench_zoo_edgert
if [[ ! -x $driver ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DERT_CUDA=ON -DERT_CUDA_ARCHS="${ERT_CUDA_ARCHS:-90}" \
    ${CUDNN_ROOT:+-DERT_CUDNN_ROOT="$CUDNN_ROOT"} > "$out/zoo_configure.log" 2>&1 &&
    ninja -C "$build" bench_zoo_edgert > "$out/zoo_build.log" 2>&1 || { tail -20 "$out/zoo_build.log"; exit 1; }
fi
python3 bench/zoo/export_zoo.py "$zoo" ${ONLY:+--only "$ONLY"} 2>&1 | tee -a "$out/zoo_export.log"
python3 bench/zoo/run_zoo_gpu.py --zoo "$zoo" --driver "$driver" --out "$out/zoo_gpu.json" --md "$out/zoo_gpu.md" \
  --resume "$out/zoo_gpu.json" --iters "${ITERS:-50}" --warmup "${WARMUP:-10}" ${ONLY:+--only "$ONLY"} \
  ${COMPILE:+--compile} ${FAST:+--fast} ${IO:+--io "$IO"} ${PROFILE:+--profile} ${BUDGET_S:+--budget-s "$BUDGET_S"} ${CONFIGS:+--configs "$CONFIGS"}

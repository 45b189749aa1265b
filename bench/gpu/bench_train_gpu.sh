#!/usr/bin/env bash
# Training step time on the GPU, edgert next to PyTorch in one run:
#   small-cnn (the network of `edgert train small-cnn`, Fashion-MNIST-sized
#     28x28 inputs) batch 64 f32, Adam;
#   ResNet-18 batch 32 224x224 f32 full training, SGD momentum 0.9;
#   ResNet-18 head-only fine-tuning (fc only, BatchNorm frozen), same SGD;
#   ResNet-18 full and head-only again in mixed precision f16 (edgert
#     session.precision F16 with dynamic loss scaling; PyTorch torch.autocast
#     + GradScaler, eager: GradScaler is not capturable).
# Each: edgert (bench/gpu/train_gpu.c: wall clock per step, inputs written
# through the trainer's pinned staging, loss back on the host), PyTorch eager
# and PyTorch CUDA-graph'd (bench_train_gpu_torch.py, the same per-step
# work). STEPS timed steps after WARMUP; p50 reported. Memory: edgert's
# arena bytes (everything the trainer allocates on the device, cuDNN/cuBLAS
# handles aside) vs torch.cuda.max_memory_allocated (the tensors' peak) and
# max_memory_reserved (what its caching allocator held from the device: the
# GPU memory no one else could use, the figure comparable to an arena).
#
#   bench/gpu/bench_train_gpu.sh [BUILD_DIR] [RESULTS_DIR]
#   env: PYTHON (torch, torchvision, onnx), STEPS (200), WARMUP (20),
#        SKIP_BUILD=1 (use BUILD_DIR as it is), ERT_CUDA_ARCHS (90),
#        CASES (an extended regex on the case labels; default all),
#        TORCH_MODES ("eager graph"; the AMP cases run eager only)
# Writes RESULTS_DIR/train_gpu_<date>.json and prints a table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-build-gpu}
results=${2:-$src/bench/results}
py=${PYTHON:-python3}
steps=${STEPS:-200}
warmup=${WARMUP:-20}
mkdir -p "$results"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DERT_CUDA=ON \
    -DERT_CUDA_ARCHS="${ERT_CUDA_ARCHS:-90}" >/dev/null
  ninja -C "$build" bench_train_gpu
fi
drv=$build/apps/bench/bench_train_gpu
[[ -x $drv ]] || { echo "bench_train_gpu: $drv not built" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ert_train_gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown)
echo "== $gpu"
"$py" "$here/bench_train_gpu_torch.py" --export-resnet18 "$work/resnet18_train.onnx" --batch 32

lines=()
run() { # label, command...
  local label=$1; shift
  local out
  if out=$("$@" 2>"$work/err.txt" | tail -1) && [[ $out == \{* ]]; then
    lines+=("{\"case\":\"$label\",\"result\":$out}")
  else
    local why
    why=$(tail -3 "$work/err.txt" | tr '\n"' ' \047')
    lines+=("{\"case\":\"$label\",\"result\":{\"error\":\"$why\"}}")
  fi
  echo "${lines[-1]}"
}
r18=$work/resnet18_train.onnx
cases=("small-cnn b64|small-cnn|64|adam||" "resnet18 b32 full|$r18|32|sgd||"
       "resnet18 b32 head-only|$r18|32|sgd|fc.*|" "resnet18 b32 AMP f16 full|$r18|32|sgd||f16"
       "resnet18 b32 AMP f16 head-only|$r18|32|sgd|fc.*|f16"
       "resnet18 b32 AMP f16 full, convs only|$r18|32|sgd||f16-convs")
for c in "${cases[@]}"; do
  IFS='|' read -r label model batch optim head amp <<<"$c"
  [[ -n ${CASES:-} && ! $label =~ $CASES ]] && continue
  tmodel=$([[ $model == small-cnn ]] && echo small-cnn || echo resnet18)
  run "$label/edgert" "$drv" "$model" --batch "$batch" --optim "$optim" --steps "$steps" --warmup "$warmup" \
    ${head:+--head "$head"} ${amp:+--precision "${amp%-convs}"} $([[ $amp == *-convs ]] && echo --amp-conv-only 1)
  [[ $amp == *-convs ]] && continue # an edgert variant: PyTorch's AMP is measured in the case above
  for mode in ${TORCH_MODES:-eager graph}; do
    [[ -n $amp && $mode == graph ]] && continue
    run "$label/pytorch-$mode" "$py" "$here/bench_train_gpu_torch.py" --model "$tmodel" --batch "$batch" \
      --optim "$optim" --mode "$mode" --steps "$steps" --warmup "$warmup" ${head:+--head} ${amp:+--amp "$amp"}
  done
done
json=$results/train_gpu_$stamp.json
{
  printf '{"bench":"train_gpu","date":"%s","gpu":"%s","steps":%s,"warmup":%s,"cases":[\n' "$stamp" "$gpu" "$steps" "$warmup"
  for i in "${!lines[@]}"; do printf '%s%s\n' "${lines[$i]}" "$([[ $i -lt $((${#lines[@]} - 1)) ]] && echo ,)"; done
  printf ']}\n'
} >"$json"
"$py" - "$json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"\n{'case':<48}{'p50 ms':>9}{'p90 ms':>9}{'memory MiB':>12}{'reserved':>10}  loss first -> last")
for c in d["cases"]:
    r = c["result"]
    if "error" in r:
        print(f"{c['case']:<48}  error: {r['error'][:90]}")
        continue
    mem = r.get("arena_bytes", r.get("peak_bytes", 0)) / 2**20
    res = r.get("peak_reserved_bytes", r.get("arena_bytes", 0)) / 2**20
    print(f"{c['case']:<48}{r['p50_ms']:>9.3f}{r['p90_ms']:>9.3f}{mem:>12.1f}{res:>10.1f}  {r['loss_first']:.4f} -> {r['loss_last']:.4f}")
print("memory: edgert = trainer arena bytes (both columns); pytorch = torch.cuda.max_memory_allocated, reserved = max_memory_reserved")
PY
echo "wrote $json"

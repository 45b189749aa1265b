#!/usr/bin/env bash
# Training throughput on the CPU: `edgert train small-cnn` (2 conv + 2 FC,
# 106k parameters, batch 32) on Fashion-MNIST, next to PyTorch CPU running
# the same network and recipe (bench_train_cpu_torch.py) when `import torch`
# works; otherwise the PyTorch column says why it is missing.
#
#   bench/bench_train_cpu.sh [BUILD_DIR] [DATA_DIR]
#   env: THREADS (default 2), LIMIT (default 10000), EPOCHS (default 1), PYTHON
#
# Writes bench/results/train_cpu_small_cnn_<date>.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
data=${2:-$here/../../shared/data/fashion-mnist}
threads=${THREADS:-2}
limit=${LIMIT:-10000}
epochs=${EPOCHS:-1}
py=${PYTHON:-python3}
cli=$build/apps/edgert
[[ -x $cli ]] || { echo "bench_train_cpu: $cli not built" >&2; exit 1; }
[[ -f $data/train-images-idx3-ubyte.gz ]] || { echo "bench_train_cpu: no Fashion-MNIST in $data" >&2; exit 1; }
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$here/results"
out=$here/results/train_cpu_small_cnn_$stamp.json

echo "== edgert ($threads threads, $limit images, $epochs epoch(s))"
ert=$("$cli" train small-cnn --data "$data" --limit "$limit" --epochs "$epochs" --threads "$threads" --json | tail -1)
echo "$ert"
if "$py" -c 'import torch' 2>/dev/null; then
  echo "== pytorch"
  pt=$("$py" "$here/bench_train_cpu_torch.py" "$data" --limit "$limit" --epochs "$epochs" --threads "$threads")
  echo "$pt"
else
  pt='{"skipped":"torch is not importable here (pip install torch --index-url https://download.pytorch.org/whl/cpu failed or was not run)"}'
  echo "== pytorch: skipped (no torch)"
fi
printf '{"bench":"train_cpu_small_cnn","date":"%s","host":"%s","cpus":%s,"threads":%s,"limit":%s,"epochs":%s,\n "edgert":%s,\n "pytorch":%s}\n' \
  "$stamp" "$(uname -n)" "$(nproc)" "$threads" "$limit" "$epochs" "$ert" "$pt" > "$out"
echo "wrote $out"

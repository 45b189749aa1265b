#!/usr/bin/env bash
# The training issue's accuracy goal, both sides in one run: the small CNN of
# `edgert train small-cnn` for EPOCHS (default 10) epochs on Fashion-MNIST
# (54k images, 6k held out, Adam 2e-3 + cosine, batch 32), edgert and the same
# recipe in PyTorch (bench/fmnist_torch.py), test accuracy on the 10k test
# images. Writes RESULTS_DIR/fmnist_accuracy_<date>.json and prints both.
#
#   bench/fmnist_accuracy.sh BUILD_DIR FASHION_MNIST_DIR [RESULTS_DIR]
#   env: DEVICE (cuda|cpu, default cuda when nvidia-smi works), EPOCHS, PYTHON, SEED (1)
set -euo pipefail
build=$1 data=$2 out=${3:-bench/results}
epochs=${EPOCHS:-10} seed=${SEED:-1} py=${PYTHON:-python3}
dev=${DEVICE:-$(nvidia-smi >/dev/null 2>&1 && echo cuda || echo cpu)}
mkdir -p "$out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
t0=$(date +%s.%N)
"$build/apps/edgert" train small-cnn --data "$data" --epochs "$epochs" --seed "$seed" --device "$dev" \
    --threads 2 --json >"$out/fmnist_edgert_$stamp.jsonl"
t1=$(date +%s.%N)
ert=$(grep '"event":"done"' "$out/fmnist_edgert_$stamp.jsonl")
tor=$("$py" "$(dirname "$0")/fmnist_torch.py" --data "$data" --epochs "$epochs" --device "$dev" --seed "$seed")
python3 - "$ert" "$tor" "$out/fmnist_accuracy_$stamp.json" "$dev" "$t0" "$t1" <<'PY'
import json, sys
e, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
r = {"device": sys.argv[4], "edgert": e, "edgert_wall_s": round(float(sys.argv[6]) - float(sys.argv[5]), 2), "pytorch": t}
json.dump(r, open(sys.argv[3], "w"), indent=1)
ea, ta = e["test_acc"] if "test_acc" in e else e.get("test_accuracy"), t["test_accuracy"]
print("small CNN, %d epochs, %s: edgert test accuracy %.4f, PyTorch %.4f (PyTorch - edgert = %+.2f points; goal: edgert >= 0.915 and the gap <= +0.30)"
      % (t["epochs"], sys.argv[4], ea, ta, 100 * (ta - ea)))
print("wrote", sys.argv[3])
PY

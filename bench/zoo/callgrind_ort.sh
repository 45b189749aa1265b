#!/bin/sh
# Instructions onnxruntime executes in one session.run, per model of a
# folder: the peer's side of callgrind_zoo.sh. The onnxruntime wheel is
# stripped (no symbol to toggle collection on) and callgrind does not see
# ctypes' calls into a marker library, so the figure is a difference: the
# whole process (create + one warm-up run + R runs) with R = 2 minus R = 1.
# It includes the Python binding's own work for one run (numpy input to
# OrtValue, output back), a few hundred thousand instructions.
# PYTHONHASHSEED is fixed so both processes do the same Python work. valgrind
# has no AVX-512, so MLAS takes its AVX2/FMA path.
#   bench/zoo/callgrind_ort.sh PYTHON MODELS_DIR [THREADS] [BATCH] [OUT_DIR]
# Prints one "model instructions" line per .onnx file; OUT_DIR (optional)
# keeps the two callgrind outputs per model, for callgrind_annotate.
set -eu
PY=$1 DIR=$2 T=${3:-1} B=${4:-1} KEEP=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/run.py" <<'PYEOF'
import sys
import numpy as np
import onnxruntime as ort
path, threads, batch, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
i = s.get_inputs()[0]
shape = [d if isinstance(d, int) else batch for d in i.shape]
feed = {i.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
for _ in range(1 + runs):
    s.run(None, feed)
PYEOF
for m in "$DIR"/*.onnx; do
    n=$(basename "$m" .onnx)
    for r in 1 2; do
        PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file="$tmp/$n.$r.out" \
            "$PY" "$tmp/run.py" "$m" "$T" "$B" "$r" >/dev/null 2>"$tmp/$n.$r.log"
    done
    a=$(grep '^summary:' "$tmp/$n.1.out" | awk '{print $2}')
    b=$(grep '^summary:' "$tmp/$n.2.out" | awk '{print $2}')
    echo "$n $((b - a))"
    if [ -n "$KEEP" ]; then mkdir -p "$KEEP" && cp "$tmp/$n.1.out" "$tmp/$n.2.out" "$KEEP/"; fi
done

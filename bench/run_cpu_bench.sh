#!/usr/bin/env bash
# ResNet-18 CPU benchmark: edgert next to onnxruntime, 1 and 2 threads,
# batch 1, 224x224 f32, the same weights and the same input on both sides.
#
#   bench/run_cpu_bench.sh [BUILD_DIR]      (default: build)
#   env: PYTHON (default python3; needs numpy onnx onnxruntime),
#        ITERS (default 20), WARMUP (default 3), THREADS (default 1,2)
#
# Steps: bench_cpu_resnet18 builds the network with the C builder, dumps its
# weights and times it; export_resnet18_onnx.py writes the same network (same
# weights) as ONNX; bench_cpu_ort.py times onnxruntime on it. When edgert can
# load ONNX (`edgert info` succeeds on the file), `edgert bench` is also run
# on the ONNX file. Prints one side-by-side table, checks that the outputs
# agree, and writes bench/results/<runtime>_cpu_resnet18_<date>.json.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
py=${PYTHON:-python3}
iters=${ITERS:-20}
warmup=${WARMUP:-3}
threads=${THREADS:-1,2}
bench_bin=$build/apps/bench/bench_cpu_resnet18
cli=$build/apps/edgert
for f in "$bench_bin" "$cli"; do
  [[ -x $f ]] || { echo "run_cpu_bench: $f not built (cmake -S . -B $build -G Ninja && ninja -C $build)" >&2; exit 1; }
done
"$py" -c 'import numpy, onnx, onnxruntime' 2>/dev/null ||
  { echo "run_cpu_bench: $py lacks numpy/onnx/onnxruntime (pip install numpy onnx onnxruntime)" >&2; exit 1; }

stamp=$(date -u +%Y%m%dT%H%M%SZ)
results=$here/results
mkdir -p "$results"
work=$(mktemp -d "${TMPDIR:-/tmp}/ert_cpu_bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== edgert (C builder network)"
"$bench_bin" --iters "$iters" --warmup "$warmup" --threads "$threads" \
  --dump-weights "$work/resnet18.weights" --json "$results/edgert_cpu_resnet18_$stamp.json"

echo "== export to ONNX (same weights)"
"$py" "$here/export_resnet18_onnx.py" --weights "$work/resnet18.weights" --out "$work/resnet18.onnx"

echo "== onnxruntime"
"$py" "$here/bench_cpu_ort.py" --model "$work/resnet18.onnx" --iters "$iters" --warmup "$warmup" \
  --threads "$threads" --json "$results/ort_cpu_resnet18_$stamp.json"

onnx_json=""
if "$cli" info "$work/resnet18.onnx" >/dev/null 2>&1; then
  echo "== edgert on the ONNX file"
  onnx_json=$results/edgert_onnx_cpu_resnet18_$stamp.json
  IFS=, read -ra tlist <<<"$threads"
  {
    echo '{"runtime": "edgert (ONNX file)", "results": ['
    sep=""
    for t in "${tlist[@]}"; do
      printf '%s' "$sep"
      "$cli" bench "$work/resnet18.onnx" --threads "$t" --iters "$iters" --warmup "$warmup" --json
      sep=","
    done
    echo ']}'
  } >"$onnx_json"
else
  echo "== edgert cannot load the ONNX file yet: compared on the C-built network only"
fi

"$py" - "$results/edgert_cpu_resnet18_$stamp.json" "$results/ort_cpu_resnet18_$stamp.json" "$onnx_json" <<'EOF'
import json, sys
e, o = (json.load(open(p)) for p in sys.argv[1:3])
x = json.load(open(sys.argv[3])) if sys.argv[3] else None
print(f"\nResNet-18, batch {e['batch']}, 224x224 f32, {e['iters']} iterations; host: {e['host']['cpu']}, "
      f"{e['host']['online_cpus']} CPUs")
head = f"{'threads':<8}{'edgert p50':>12}{'p90':>9}{'ort p50':>10}{'p90':>9}{'edgert/ort':>12}"
if x:
    head += f"{'edgert(onnx) p50':>18}"
print(head + f"{'arena MiB':>11}{'act. lower bd MiB':>19}")
for i, r in enumerate(e["results"]):
    q = next((q for q in o["results"] if q["threads"] == r["threads"]), None)
    line = f"{r['threads']:<8}{r['p50_ms']:12.2f}{r['p90_ms']:9.2f}"
    line += f"{q['p50_ms']:10.2f}{q['p90_ms']:9.2f}{r['p50_ms'] / q['p50_ms']:12.2f}" if q else " " * 40
    if x:
        line += f"{x['results'][i]['p50_ms']:18.2f}" if i < len(x["results"]) else " " * 18
    line += f"{r['arena_bytes'] / 2**20:11.1f}{r['activations_lower_bound'] / 2**20:19.1f}"
    print(line)
a, b = e["results"][0]["logits_first"], o["results"][0]["logits_first"]
d = max(abs(u - v) for u, v in zip(a, b))
scale = max(1e-6, max(abs(v) for v in b))
print(f"logits[0:4] edgert {a}\n            ort    {b}\nmax abs diff {d:.3g} (relative {d / scale:.3g})"
      + ("" if d / scale < 1e-3 else "  <-- outputs disagree"))
EOF
echo "results in $results/*_$stamp.json"

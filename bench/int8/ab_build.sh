#!/usr/bin/env bash
# A/B of a build-time variant of the CUDA int8 path (issue 14), on a GPU
# machine, after bench_int8.py (or device_round.sh's int8 step) has made the
# int8 models: builds bench_zoo_edgert again with DEFINES in the C and CUDA
# flags (e.g. "-DERT_QMMA_WAVES=4 -DERT_QMMA_MIN_STEPS=4") into build-ab,
# then runs each WORK/NAME/NAME_int8.ert on the base driver and the variant,
# alternating ROUNDS (default 3) times, batch 1 and 8 with device I/O, and
# prints per model and batch the p50 of each side (median over the rounds)
# and variant / base.
#
#   DEFINES="-DERT_QMMA_WAVES=4" bash bench/int8/ab_build.sh BASE_BUILD WORK [NAME,NAME...] [OUT.json]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
base=$1 work=$2 models=${3:-resnet18,resnet50,mobilenet_v2} out=${4:-}
ab=build-ab
cmake -S . -B $ab -G Ninja -DCMAKE_BUILD_TYPE=Release -DERT_CUDA=ON -DERT_CUDA_ARCHS="${ERT_CUDA_ARCHS:-90}" \
  ${CUDNN_ROOT:+-DERT_CUDNN_ROOT="$CUDNN_ROOT"} -DCMAKE_C_FLAGS="${DEFINES:-}" -DCMAKE_CUDA_FLAGS="${DEFINES:-}" \
  > /tmp/ab_configure.log 2>&1 && ninja -C $ab bench_zoo_edgert > /tmp/ab_build.log 2>&1 ||
  { tail -20 /tmp/ab_build.log; exit 1; }
python3 - "$base/apps/bench/bench_zoo_edgert" "$ab/apps/bench/bench_zoo_edgert" "$work" "$models" \
  "${ROUNDS:-3}" "${ITERS:-30}" "${DEFINES:-}" "$out" <<'PY'
import json, statistics, subprocess, sys
base, var, work, models, rounds, iters, defines, out = sys.argv[1:9]
res = {}
for name in models.split(","):
    hw = 640 if name.startswith("yolo") else 224
    for r in range(int(rounds)):
        for side, drv in (("base", base), ("variant", var)) if r % 2 == 0 else (("variant", var), ("base", base)):
            p = subprocess.run([drv, "%s/%s/%s_int8.ert" % (work, name, name), "%s/%s/x.f32" % (work, name),
                                "/tmp/ab-run", iters, "5", "--input-dims", "1x3x%dx%d" % (hw, hw), "f16:1d", "f16:8d"],
                               capture_output=True, text=True, timeout=300)
            for line in p.stdout.splitlines():
                if line.startswith("{"):
                    j = json.loads(line)
                    res.setdefault((name, j["batch"], side), []).append(j.get("p50_ms") or float("nan"))
rows = []
print("DEFINES: %s" % defines)
print("| model | batch | base p50 ms | variant p50 ms | variant / base |")
print("|---|---|---|---|---|")
for (name, b, side) in sorted(res):
    if side != "base":
        continue
    bm, vm = statistics.median(res[(name, b, "base")]), statistics.median(res.get((name, b, "variant"), [float("nan")]))
    rows.append({"model": name, "batch": b, "base": bm, "variant": vm, "ratio": vm / bm})
    print("| %s | %d | %.3f | %.3f | %.3f |" % (name, b, bm, vm, vm / bm))
if out:
    json.dump({"defines": defines, "rounds": int(rounds), "iters": int(iters), "rows": rows}, open(out, "w"), indent=1)
PY

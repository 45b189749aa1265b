#!/usr/bin/env bash
# Camera pipeline benchmark: FPS and per-stage latency of edgert-camera on
# generated MJPEG streams at 640x480 and 1280x720 for a ResNet-18-shaped
# classifier (the C-builder network, builtin:resnet18: the same shape and
# cost as torchvision's, random weights), CPU fp32, with decode-only FPS
# alongside so it shows which stage bounds the pipeline.
#
#   bench/bench_camera.sh [BUILD_DIR]          (default: build)
#   env: FRAMES (default 60), THREADS (default "1 2"), SIZES (default "640x480 1280x720"),
#        REPEAT (default 3: each configuration runs REPEAT times, the fastest
#        run is reported; the machine this was written on is shared and noisy)
#
# Streams are made by edgert-mjpeg-gen from ../shared/images when present
# (photographs resized: realistic JPEG sizes), else synthetic. Each
# configuration runs REPEAT times after a short warm-up run (fastest kept); the output includes the
# annotation + JPEG encode of every frame (--mjpeg-out /dev/null), as the demo
# does. Writes bench/results/camera_cpu_<date>.json and prints a table.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-build}
frames=${FRAMES:-60}
repeat=${REPEAT:-3}
threads_list=${THREADS:-1 2}
sizes=${SIZES:-640x480 1280x720}
cam=$build/apps/camera/edgert-camera
gen=$build/apps/camera/edgert-mjpeg-gen
for f in "$cam" "$gen"; do
  [[ -x $f ]] || { echo "bench_camera: $f not built (cmake -S . -B $build -G Ninja && ninja -C $build)" >&2; exit 1; }
done
shared=${ERT_SHARED_DIR:-$root/../shared}
from=()
[[ -d $shared/images ]] && from=(--from "$shared/images")

stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$here/results"
out=$here/results/camera_cpu_$stamp.json
work=$(mktemp -d "${TMPDIR:-/tmp}/ert_cam_bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

runs=()
# best CMD...: run CMD (which prints a --json summary) REPEAT times, print the
# summary of the fastest run with every run's FPS added as "fps_runs".
best() {
  local out=() i
  for ((i = 0; i < repeat; i++)); do out+=("$("$@" 2>/dev/null)"); done
  python3 -c 'import json, sys
runs = [json.loads(a) for a in sys.argv[1:]]
b = max(runs, key=lambda d: d["fps"]); b["fps_runs"] = [round(d["fps"], 2) for d in runs]
print(json.dumps(b))' "${out[@]}"
}
# row SIZE MODE THREADS JSON: one table line from a run's --json summary.
row() {
  python3 -c 'import json, sys
d = json.loads(sys.argv[4]); s = d["stages_ms"]
print("%-9s %-8s %4s %8.1f | %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f" % (sys.argv[1], sys.argv[2], sys.argv[3], d["fps"],
      s["capture"]["mean"], s["decode"]["mean"], s["preprocess"]["mean"], s["infer"]["mean"], s["postprocess"]["mean"], s["encode"]["mean"]))' "$@"
}
printf '%-9s %-8s %4s %8s | %8s %8s %8s %8s %8s %8s ms\n' size mode thr fps capture decode preproc infer post encode
for size in $sizes; do
  w=${size%x*} h=${size#*x}
  stream=$work/s_$size.mjpeg
  "$gen" --width "$w" --height "$h" --frames "$frames" "${from[@]}" "$stream" >/dev/null
  # Decode only: the bound the pipeline can reach, at full size and at the
  # 1/2 IDCT scale the pipeline picks for a 224x224 input from these sizes
  # (--decode-scale auto).
  for d in 1 2; do
    j=$(best "$cam" --decode-only --decode-scale $d --source "$stream" --json --quiet)
    runs+=("{\"size\":\"$size\",\"mode\":\"decode_only\",\"decode_scale\":$d,\"result\":$j}")
    row "$size" "decode/$d" 1 "$j"
  done
  for t in $threads_list; do
    "$cam" --model builtin:resnet18 --source "$stream" --threads "$t" --max-frames 5 --quiet >/dev/null 2>&1 || true
    j=$(best "$cam" --model builtin:resnet18 --source "$stream" --threads "$t" --mjpeg-out /dev/null --json --quiet)
    runs+=("{\"size\":\"$size\",\"mode\":\"pipeline\",\"threads\":$t,\"result\":$j}")
    row "$size" pipeline "$t" "$j"
  done
done
{
  printf '{"bench":"camera_cpu","model":"builtin:resnet18 (C builder, 224x224, fp32)","frames":%s,' "$frames"
  printf '"host":{"cpu":"%s","cores":%s,"load_avg":"%s"},' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
  printf '"date":"%s","runs":[' "$stamp"
  (IFS=,; printf '%s' "${runs[*]}")
  printf ']}\n'
} >"$out"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out"
echo "bench_camera: wrote $out"

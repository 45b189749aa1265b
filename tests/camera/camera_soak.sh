#!/usr/bin/env bash
# Soak run of edgert-camera (not run by ctest: ~10-60 s): 10,000 frames of a
# generated MJPEG stream with a corrupt frame after every 50th, through the
# tiny classifier with annotation + JPEG encode. Checks: exit 0, every good
# frame processed, every corrupt one counted, no LeakSanitizer report (use an
# ERT_SANITIZE=address build), and flat memory: the peak RSS after 10,000
# frames within 8 MiB of the peak after 1,000 (16 MiB in an ASan build, whose
# allocator metadata and fake stacks grow too: +6 MiB measured; a per-frame leak
# of even one 2 KiB JPEG would add 18 MiB).
#
#   tests/camera/camera_soak.sh [BUILD_DIR]     (default: build; an ASan build is best)
set -euo pipefail
build=${1:-build}
cam=$build/apps/camera/edgert-camera gen=$build/apps/camera/edgert-mjpeg-gen
[[ -x $cam && -x $gen ]] || { echo "camera_soak: SKIPPED: edgert-camera not built in $build"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ert_soak.XXXXXX")
trap 'rm -rf "$work"' EXIT
# A small quarantine keeps ASan's own memory from hiding the app's.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:quarantine_size_mb=4"
declare -A rss
for n in 1000 10000; do
  "$gen" --width 64 --height 48 --frames $n --corrupt-every 50 "$work/s$n.mjpeg" >/dev/null ||
    { echo "camera_soak: SKIPPED: no JPEG support"; exit 77; }
  rc=0
  "$cam" --model builtin:tiny --source "$work/s$n.mjpeg" --mjpeg-out /dev/null --json --quiet \
    >"$work/j$n" 2>"$work/e$n" || rc=$?
  if [[ $rc -ne 0 ]] || grep -q LeakSanitizer "$work/e$n"; then
    echo "camera_soak: FAILED: $n frames: exit $rc"; tail -20 "$work/e$n"; exit 1
  fi
  read -r frames corrupt r < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["frames"], d["corrupt"], d["max_rss_kb"])' "$work/j$n")
  echo "camera_soak: $n frames: $frames processed, $corrupt corrupt counted, max RSS $r KiB"
  [[ $frames -eq $n && $corrupt -eq $((n / 50)) ]] || { echo "camera_soak: FAILED: frame counts"; exit 1; }
  rss[$n]=$r
done
grow=$(( ${rss[10000]} - ${rss[1000]} ))
limit=8192
ldd "$cam" 2>/dev/null | grep -q libasan && limit=16384
nm "$cam" 2>/dev/null | grep -q __asan_init && limit=16384
[[ $grow -lt $limit ]] || { echo "camera_soak: FAILED: memory grew by $grow KiB from 1,000 to 10,000 frames"; exit 1; }
echo "camera_soak: ok: no leak report, memory flat (+$grow KiB from 1,000 to 10,000 frames)"

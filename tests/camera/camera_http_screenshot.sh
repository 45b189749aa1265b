#!/usr/bin/env bash
# Headless Chromium looks at edgert-camera's HTTP preview (not run by ctest:
# needs Debian's chromium, ~130 packages). Streams a generated MJPEG file
# through `edgert-camera --serve 127.0.0.1:PORT`, takes a screenshot of
# http://127.0.0.1:PORT/ with `chromium --headless`, and checks that the page
# shows a picture (many distinct colours where the <img> is), not a broken
# image or a blank page.
#
#   tests/camera/camera_http_screenshot.sh [BUILD_DIR] [OUT.png]     (default: build, a temp file)
# Exit 0 ok, 1 failed, 77 skipped (no chromium / no JPEG build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cam=$build/apps/camera/edgert-camera gen=$build/apps/camera/edgert-mjpeg-gen
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[[ -n $chrome ]] || { echo "camera_http_screenshot: SKIPPED: no chromium (apt-get install chromium)"; exit 77; }
[[ -x $cam && -x $gen ]] || { echo "camera_http_screenshot: SKIPPED: edgert-camera not built"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ert_shot.XXXXXX")
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
shot=${2:-$work/shot.png}

shared=${ERT_SHARED_DIR:-$root/../shared}
from=(); [[ -d $shared/images ]] && from=(--from "$shared/images")
"$gen" --width 320 --height 240 --frames 200 "${from[@]}" "$work/s.mjpeg" >/dev/null || {
  echo "camera_http_screenshot: SKIPPED: this build has no JPEG support"; exit 77; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$cam" --model builtin:tiny --source "$work/s.mjpeg" --serve "127.0.0.1:$port" --serve-wait 30000 \
  --fps-limit 20 --quiet >"$work/cam.log" 2>&1 &
pid=$!
for _ in $(seq 50); do  # until the server listens (bounded: 5 s)
  python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.1)" 2>/dev/null && break
  sleep 0.1
done
timeout 60 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=480,360 \
  --virtual-time-budget=4000 --screenshot="$shot" "http://127.0.0.1:$port/" >"$work/chrome.log" 2>&1 || true
[[ -s $shot ]] || { echo "camera_http_screenshot: FAILED: no screenshot"; tail -5 "$work/chrome.log"; exit 1; }

# Decode the PNG (8-bit RGB/RGBA, filters 0-4) and count colours in the
# picture's area: the page background and text are a handful of colours.
rc=0
python3 - "$shot" <<'PY' || rc=$?
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n"
i, idat = 8, b""
while i < len(d):
    n, t = struct.unpack(">I4s", d[i:i + 8])
    if t == b"IHDR": w, h, depth, ctype = struct.unpack(">IIBB", d[i + 8:i + 18])
    if t == b"IDAT": idat += d[i + 8:i + 8 + n]
    i += 12 + n
bpp = {2: 3, 6: 4}[ctype]
raw, rows, prev = zlib.decompress(idat), [], bytearray(w * bpp)
for y in range(h):
    f, line = raw[y * (w * bpp + 1)], bytearray(raw[y * (w * bpp + 1) + 1:(y + 1) * (w * bpp + 1)])
    for x in range(len(line)):
        a = line[x - bpp] if x >= bpp else 0
        b, c = prev[x], prev[x - bpp] if x >= bpp else 0
        p = a + b - c
        pr = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
        line[x] = (line[x] + [0, a, b, (a + b) // 2, pr][f]) & 255
    rows.append(line); prev = line
colours = {bytes(rows[y][x * bpp:x * bpp + 3]) for y in range(60, min(h, 300)) for x in range(10, min(w, 330))}
print("camera_http_screenshot: %dx%d screenshot, %d distinct colours in the picture area" % (w, h, len(colours)))
sys.exit(0 if len(colours) > 500 else 1)
PY
[[ $rc -eq 0 ]] && echo "camera_http_screenshot: ok ($shot)" || echo "camera_http_screenshot: FAILED: the page shows no picture"
exit $rc

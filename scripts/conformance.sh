#!/bin/sh
# Regenerate docs/conformance.md: run ert_conformance over both ONNX suites in
# ../shared/conformance and summarise pass / fail / unsupported per suite and
# per op. Usage: scripts/conformance.sh [BUILD_DIR]   (default: build)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shared=${ERT_SHARED_DIR:-$root/../shared}
bin=$build/tests/ert_conformance
[ -x "$bin" ] || { echo "no $bin: build first (ninja -C $build ert_conformance)" >&2; exit 1; }
[ -d "$shared/conformance" ] || { echo "no $shared/conformance" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in onnx-node onnx-pytorch-converted; do
  "$bin" "$shared/conformance/$s" --report "$tmp/$s.tsv" --xfail "$root/tests/ops/conformance_xfail.txt" >"$tmp/$s.log" || true
done
"$bin" "$shared/models" --models --report "$tmp/models.tsv" --xfail "$root/tests/ops/conformance_xfail.txt" >"$tmp/models.log" || true
python3 "$root/scripts/conformance_report.py" "$shared/conformance" "$tmp" \
  "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" >"$root/docs/conformance.md"
echo "wrote docs/conformance.md"
grep -E '^\| (onnx-node|onnx-pytorch-converted|models) ' "$root/docs/conformance.md" || true

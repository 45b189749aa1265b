#!/usr/bin/env bash
# The cp39-abi3 wheel under the oldest Python it claims: build it here (with
# this machine's Python 3.11), then run python/tests with Debian 11's
# python3.9 (apt-get download with a private state dir under build/py39: the
# host's apt/dpkg configuration is untouched; dpkg -x, no root) and numpy 2.0.2,
# pytest 8.3, onnx 1.17 and onnxruntime 1.19 for cp39 from PyPI (pip
# download, ~55 MB), so every CPU test runs.
#
#   bash scripts/python_py39_check.sh
#
# Exit status: pytest's (0 ok, 1 failures), 77 when the downloads fail (offline).
# Knobs: ERT_PY_CROSS_PYTHON (the Python with scikit-build-core that builds
# the wheel; default .deps/venv/bin/python), ERT_CLI (for the CLI comparisons).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/build/py39"
py=${ERT_PY_CROSS_PYTHON:-$root/.deps/venv/bin/python}
mkdir -p "$out/apt/lists/partial" "$out/apt/cache/archives/partial" "$out/debs" "$out/wheels"
if [[ ! -x "$out/root/usr/bin/python3.9" ]]; then
    echo "deb http://deb.debian.org/debian bullseye main" >"$out/apt/sources.list"
    apt_opts=(-o APT::Architectures::=amd64 -o Dir::Etc::SourceList="$out/apt/sources.list"
              -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$out/apt/lists"
              -o Dir::Cache="$out/apt/cache" -o Dir::State::status=/dev/null)
    if ! apt-get "${apt_opts[@]}" update >"$out/apt.log" 2>&1 ||
        ! (cd "$out/debs" && apt-get "${apt_opts[@]}" download python3.9-minimal libpython3.9-minimal \
            libpython3.9-stdlib libssl1.1 libffi7 libmpdec3 >>"$out/apt.log" 2>&1); then
        echo "[py39] cannot download Debian 11's python3.9 (offline?): skipped; see $out/apt.log"
        exit 77
    fi
    rm -rf "$out/root" && mkdir -p "$out/root"
    for d in "$out"/debs/*.deb; do dpkg -x "$d" "$out/root"; done
fi
# pytest's own needs below Python 3.11 (exceptiongroup, tomli) are named:
# pip's resolver, run by a newer Python, does not always fetch them
if ! compgen -G "$out/wheels/onnxruntime-*.whl" >/dev/null || ! compgen -G "$out/wheels/exceptiongroup-*.whl" >/dev/null; then
    "$py" -m pip download -q "numpy==2.0.2" "pytest==8.3.5" "onnx==1.17.0" "onnxruntime==1.19.2" \
        "exceptiongroup>=1.0.0rc8" "tomli>=1" "typing_extensions>=4.6" \
        --python-version 3.9 --only-binary=:all: --platform manylinux2014_x86_64 \
        --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 -d "$out/wheels" >>"$out/apt.log" 2>&1 ||
        { echo "[py39] cannot download numpy/pytest/onnx/onnxruntime for cp39 (offline?): skipped"; exit 77; }
fi
rm -f "$out"/edgert-*.whl
"$py" -m pip wheel "$root" --no-build-isolation --no-deps -w "$out" \
    --config-settings=build-dir="$out/skbuild" --config-settings=cmake.define.ERT_CUDA=OFF \
    >"$out/wheel.log" 2>&1 || { echo "[py39] pip wheel FAILED; from $out/wheel.log:"; tail -n 30 "$out/wheel.log"; exit 1; }
whl=$(ls "$out"/edgert-*.whl)
rm -rf "$out/site" && mkdir -p "$out/site"
"$py" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
    "$out/site" "$whl" "$out"/wheels/*.whl
echo "[py39] $(basename "$whl") under $("$out/root/usr/bin/python3.9" -V 2>&1 || true) (Debian 11), numpy 2.0.2, onnxruntime 1.19.2"
cd "$root/python/tests"
LD_LIBRARY_PATH="$out/root/usr/lib/x86_64-linux-gnu" PYTHONHOME="$out/root/usr" PYTHONPATH="$out/site" \
    "$out/root/usr/bin/python3.9" -m pytest -q -rs -p no:cacheprovider ${ERT_PY_JUNIT:+--junitxml="$ERT_PY_JUNIT"} .

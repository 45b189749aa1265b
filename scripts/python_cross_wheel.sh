#!/usr/bin/env bash
# Cross-build the edgert Python wheel for aarch64 (Jetson) on an x86_64 host
# and prove it imports and runs under qemu-aarch64:
#
#   bash scripts/python_cross_wheel.sh   # -> build/py-aarch64/edgert-*-cp39-abi3-linux_aarch64.whl
#
# Steps:
#   1. apt-get download (with a private state dir under build/py-aarch64/apt,
#      so the host's dpkg/apt configuration is not touched) Debian's arm64
#      python3.11, its stdlib, headers (libpython3.11-dev), numpy and their
#      libraries; dpkg -x them into build/py-aarch64/sysroot (no root needed);
#   2. pip wheel . with scikit-build-core, the project's CMake and
#      toolchains/aarch64-jetson.cmake (CPU only, no TurboJPEG: the cross
#      build has no arm64 libjpeg-turbo), the target's Python headers given in
#      ERT_PYTHON_INCLUDE_DIRS and the wheel tagged linux_aarch64
#      (_PYTHON_HOST_PLATFORM);
#   3. unzip it and, under qemu-aarch64 -L sysroot with the arm64 python3.11,
#      import edgert, check the wheel's tag and run mnist_8 (../shared) against
#      the model zoo's reference output;
#   4. with pytest, onnx and onnxruntime for cp311 aarch64 (pip download; the
#      step is skipped with a note when that fails), run the python/tests that
#      take seconds under qemu (DLPack, images, checkpoints, losses, bad
#      input, reference outputs; ~30 s): the 10,000-run, GIL, threads and
#      training-vs-CLI tests are left to the native phases (minutes under qemu).
# Exit status: 0 ok, 1 failure, 77 skipped (no qemu-aarch64 or cross gcc, or
# the arm64 packages cannot be downloaded: offline).
# Knobs: ERT_PY_CROSS_PYTHON (host python with scikit-build-core; default
# .deps/venv/bin/python).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/build/py-aarch64"
py=${ERT_PY_CROSS_PYTHON:-$root/.deps/venv/bin/python}
qemu=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
if [[ -z "$qemu" ]] || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
    echo "[py-aarch64] needs qemu-aarch64 and aarch64-linux-gnu-gcc (Debian: qemu-user gcc-aarch64-linux-gnu): skipped"
    exit 77
fi
"$py" -c 'import scikit_build_core' 2>/dev/null || { echo "[py-aarch64] $py has no scikit-build-core"; exit 1; }

# 1. the arm64 sysroot
pkgs=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libpython3.11-dev python3-numpy libc6
      zlib1g libexpat1 libffi8 libblas3 liblapack3 libgfortran5 libgcc-s1 libstdc++6 libssl3 libbz2-1.0
      liblzma5 libncursesw6 libtinfo6 libsqlite3-0 libuuid1 libcrypt1)
sysroot="$out/sysroot"
if [[ ! -x "$sysroot/usr/bin/python3.11" ]]; then
    mkdir -p "$out/apt/lists/partial" "$out/apt/cache/archives/partial" "$out/debs"
    apt_opts=(-o APT::Architectures::=arm64 -o APT::Architecture=arm64 -o Dir::State::Lists="$out/apt/lists"
              -o Dir::Cache="$out/apt/cache" -o Dir::State::status=/dev/null)
    if ! apt-get "${apt_opts[@]}" update >"$out/apt.log" 2>&1 ||
        ! (cd "$out/debs" && apt-get "${apt_opts[@]}" download "${pkgs[@]}" >>"$out/apt.log" 2>&1); then
        echo "[py-aarch64] cannot download the arm64 packages (offline?): skipped; see $out/apt.log"
        exit 77
    fi
    rm -rf "$sysroot.tmp" && mkdir -p "$sysroot.tmp"
    for d in "$out"/debs/*.deb; do dpkg -x "$d" "$sysroot.tmp"; done
    # the alternatives symlinks dpkg -x does not make
    ln -sf blas/libblas.so.3 "$sysroot.tmp/usr/lib/aarch64-linux-gnu/libblas.so.3"
    ln -sf lapack/liblapack.so.3 "$sysroot.tmp/usr/lib/aarch64-linux-gnu/liblapack.so.3"
    rm -rf "$sysroot" && mv "$sysroot.tmp" "$sysroot"
fi
echo "[py-aarch64] sysroot: $("$qemu" -L "$sysroot" "$sysroot/usr/bin/python3.11" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null) arm64 python in $sysroot"

# 2. the wheel
rm -f "$out"/edgert-*.whl
_PYTHON_HOST_PLATFORM=linux-aarch64 "$py" -m pip wheel "$root" --no-build-isolation --no-deps -w "$out" \
    --config-settings=build-dir="$out/skbuild" \
    --config-settings=cmake.define.CMAKE_TOOLCHAIN_FILE="$root/toolchains/aarch64-jetson.cmake" \
    --config-settings=cmake.define.ERT_CUDA=OFF --config-settings=cmake.define.ERT_JPEG=OFF \
    --config-settings=cmake.define.ERT_WERROR=ON \
    --config-settings=cmake.define.ERT_PYTHON_INCLUDE_DIRS="$sysroot/usr/include/python3.11;$sysroot/usr/include" \
    >"$out/wheel.log" 2>&1 || { echo "[py-aarch64] pip wheel FAILED; from $out/wheel.log:"; tail -n 40 "$out/wheel.log"; exit 1; }
whl=$(ls "$out"/edgert-*.whl)
echo "[py-aarch64] built $(basename "$whl")"
[[ $whl == *-cp39-abi3-linux_aarch64.whl ]] || { echo "[py-aarch64] wrong wheel tag"; exit 1; }

# 3. import and run it under qemu
rm -rf "$out/site" && mkdir -p "$out/site"
"$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$out/site"
file "$out/site/edgert/_edgert.abi3.so" | grep -q "ARM aarch64" || { echo "[py-aarch64] the module is not aarch64"; exit 1; }
PYTHONHOME="$sysroot/usr" PYTHONPATH="$out/site:$sysroot/usr/lib/python3/dist-packages" \
    "$qemu" -L "$sysroot" "$sysroot/usr/bin/python3.11" - "$root/../shared/models/mnist_8" <<'PY'
import os, platform, sys
import numpy as np
import edgert
print(f"[py-aarch64] import edgert {edgert.__version__} (C {edgert.version()}) on {platform.machine()}, "
      f"Python {platform.python_version()}, numpy {np.__version__}")
assert platform.machine() == "aarch64"
d = sys.argv[1]
if not os.path.isdir(d):
    print(f"[py-aarch64] {d} missing: import checked, no model run")
    sys.exit(0)
def pb(path):  # a float TensorProto: dims (1), data_type (2), raw_data (9); enough for the zoo's files
    data = open(path, "rb").read()
    i, dims, raw = 0, [], b""
    def varint():
        nonlocal i
        v = s = 0
        while True:
            b = data[i]; i += 1
            v |= (b & 0x7F) << s; s += 7
            if b < 0x80: return v
    while i < len(data):
        key = varint(); f, wt = key >> 3, key & 7
        if wt == 0: v = varint(); dims += [v] if f == 1 else []
        elif wt == 2:
            n = varint(); chunk = data[i:i + n]; i += n
            if f == 1:  # packed dims
                j = 0
                while j < len(chunk):
                    v = s = 0
                    while True:
                        b = chunk[j]; j += 1; v |= (b & 0x7F) << s; s += 7
                        if b < 0x80: break
                    dims.append(v)
            elif f == 9: raw = chunk
        elif wt == 5: i += 4
        elif wt == 1: i += 8
    return np.frombuffer(raw, np.float32).reshape(dims)
s = edgert.load(os.path.join(d, "model.onnx")).session(device="cpu")
x, want = pb(os.path.join(d, "test_data_set_0", "input_0.pb")), pb(os.path.join(d, "test_data_set_0", "output_0.pb"))
got = s.run(x)[s.outputs[0].name]
err = float(np.abs(got - want).max())
assert err < 1e-3 * float(np.abs(want).max()), err
try:
    s.run(x.astype(np.float64))
    raise SystemExit("a float64 input was not refused")
except edgert.ShapeError:
    pass
print(f"[py-aarch64] mnist_8 on aarch64: max |diff| vs the zoo's reference {err:.2e}; ok")
PY

# 4. part of the test suite under qemu
wheels="$out/wheels"
mkdir -p "$wheels"
if ! compgen -G "$wheels/onnxruntime-*.whl" >/dev/null &&
    ! "$py" -m pip download -q "onnx==1.17.0" "onnxruntime==1.19.2" "pytest==8.3.5" "numpy==1.24.2" \
        --python-version 3.11 --only-binary=:all: --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 \
        --platform manylinux_2_17_aarch64 -d "$wheels" >"$out/pip.log" 2>&1; then
    echo "[py-aarch64] no aarch64 pytest/onnx/onnxruntime wheels (offline?): pytest under qemu skipped"
    exit 0
fi
"$py" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
    "$out/site" "$wheels"/*.whl
echo "[py-aarch64] pytest under qemu-aarch64 (a subset: see step 4)"
cd "$root/python/tests"
PYTHONHOME="$sysroot/usr" PYTHONPATH="$out/site" ERT_CLI=/nonexistent \
    "$qemu" -L "$sysroot" "$sysroot/usr/bin/python3.11" -m pytest -q -rs -p no:cacheprovider ${ERT_PY_JUNIT:+--junitxml="$ERT_PY_JUNIT"} \
    -k "dlpack or image or checkpoint or losses or bad or several or reference or out_buffers or closed or api" .

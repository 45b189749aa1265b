#!/usr/bin/env bash
# check_cuda_aarch64.sh - the build a Jetson user ships, produced on an x86_64
# Debian machine without a Jetson, a GPU or root: aarch64 host code + CUDA
# device code for Orin (sm_87) and Thor (sm_110), linked into one binary.
#
#   bash scripts/check_cuda_aarch64.sh          # fetch once (~1 GB), build, check
#   ERT_JOBS=2                                  # build parallelism
#   ERT_CUDA_AARCH64_BUILD_ONLY=1               # stop after the build checks
#                                               # (scripts/test.sh runs ctest itself)
#   ERT_PRUNE=1                                 # delete the wheels once unpacked
#                                               # (scripts/test.sh sets it in CI)
#
# Where the aarch64 CUDA target comes from: NVIDIA's manylinux aarch64 (SBSA)
# CUDA 13 wheels on PyPI, the target JetPack 7 uses on Orin and Thor (pinned
# below, sha256 checked, cached in .deps/cuda-aarch64/dl). The compiler is the
# host's x86_64 nvcc of the same CUDA 13.0 (-ccbin aarch64-linux-gnu-g++).
# The wheels' include/ and lib/ are merged into one target tree,
# .deps/cuda-aarch64/target, and toolchains/aarch64-jetson.cmake gets it as
# ERT_CUDA_TARGET_ROOT (it pairs the tree with the host nvcc, see there).
#
# The wheels have no static cuBLAS: cuBLAS and cuDNN are not linked but
# dlopen()ed at the first CUDA session (cmake/ert_cuda_link.cmake), so only
# their headers matter to this build; their 540 + 430 MB wheels are still
# fetched (once, then cached) so the tree is a complete target for a device.
#
# Checks: `file`/readelf say aarch64; cuobjdump lists sm_87 and sm_110 SASS in
# the linked `edgert` binary; readelf finds no CUDA shared library among its
# NEEDED entries (cudart linked statically, cuBLAS/cuDNN lazy); a sysroot of
# JetPack's layout (made of links) configures with ERT_JETSON_SYSROOT alone. Then (unless
# BUILD_ONLY) the whole ctest under qemu-aarch64: every `gpu` test SKIPPED,
# since there is no NVIDIA driver there.
#
# Exit status: 0 ok, 1 failed, 2 could not fetch (offline).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${ERT_JOBS:-2}
base="$root/.deps/cuda-aarch64"
dl="$base/dl"
tgt="$base/target"
build="$root/build/test-cuda-aarch64"

# ---------------------------------------------------------------- pins
# CUDA 13.0 (the host nvcc's release), cuBLAS 13.1.0.3 = CUDA 13.0 update 2,
# cuDNN 9.19.0 (the versions of the x86 toolkit in CI).
wheels=(
    "nvidia-cuda-runtime==13.0.96 --hash=sha256:ef9bcbe90493a2b9d810e43d249adb3d02e98dd30200d86607d8d02687c43f55"
    "nvidia-cuda-crt==13.0.88 --hash=sha256:ee2ea2a97073e02ee62bb27841f437332be2c248e3eac013df07997ada39c003"
    "nvidia-cuda-cccl==13.0.85 --hash=sha256:6f0203e29fed809ee2b7fe9b1344df66ecab990c37d6a2e0e189b26d6c97ed7c"
    "nvidia-cuda-profiler-api==13.0.85 --hash=sha256:b307d61f574ab60666d0b2cb204738338dbd0e05a9fa609eaab198222f0a13c2"
    "nvidia-cublas==13.1.0.3 --hash=sha256:c86fc7f7ae36d7528288c5d88098edcb7b02c633d262e7ddbb86b0ad91be5df2"
    "nvidia-cudnn-cu13==9.19.0.56 --hash=sha256:6ed29ffaee1176c612daf442e4dd6cfeb6a0caa43ddcbeb59da94953030b1be4"
)
archs="87-real;110-real;110-virtual"

say() { echo "[cuda-aarch64] $*"; }
t0=$SECONDS

nvcc_host=${ERT_HOST_NVCC:-$(command -v nvcc || true)}
[[ -z "$nvcc_host" && -x /usr/local/cuda/bin/nvcc ]] && nvcc_host=/usr/local/cuda/bin/nvcc
if [[ -z "$nvcc_host" ]]; then say "no x86_64 nvcc (CUDA 13.0)"; exit 2; fi
# nvcc on PATH may be a wrapper script (CI's /usr/local/bin/nvcc is
# `exec /usr/local/cuda-13.0/bin/nvcc "$@"`): ask nvcc where it really lives.
nvcc_here=$("$nvcc_host" -dryrun -E -x cu /dev/null 2>&1 | sed -n 's/^#\$ _HERE_=//p' | head -n1)
if [[ -n "$nvcc_here" && -x "$nvcc_here/nvcc" ]]; then nvcc_host=$nvcc_here/nvcc; fi
nvcc_host=$(readlink -f "$nvcc_host")
host_ver=$("$nvcc_host" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
if [[ "$host_ver" != 13.0 ]]; then
    say "host nvcc is CUDA $host_ver; the pinned aarch64 wheels are CUDA 13.0"; exit 1
fi
for t in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++; do
    command -v $t >/dev/null || { say "no $t (Debian: g++-aarch64-linux-gnu)"; exit 1; }
done

# ---------------------------------------------------------------- fetch
stamp_text="${wheels[*]}"
mkdir -p "$dl"
if [[ ! -f "$dl/.complete" || "$(cat "$dl/.complete")" != "$stamp_text" ]]; then
    say "downloading the aarch64 CUDA 13 wheels (~1 GB, once)"
    printf '%s\n' "${wheels[@]}" >"$base/requirements.txt"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --require-hashes -r "$base/requirements.txt" --python-version 3.11 \
        --platform manylinux_2_28_aarch64 --platform manylinux_2_27_aarch64 \
        --platform manylinux_2_17_aarch64 --platform manylinux2014_aarch64 \
        --timeout 60 --retries 3 -d "$dl" || { say "pip download failed (offline?)"; exit 2; }
    echo "$stamp_text" >"$dl/.complete"
fi
# pip checked the hashes when it fetched; check the cache too (a truncated or
# edited file must not be used)
python3 - "$dl" "${wheels[@]}" <<'PY' || { say "a cached wheel does not match its sha256: rm -rf $dl"; exit 1; }
import glob, hashlib, os, sys
dl, pins = sys.argv[1], sys.argv[2:]
for pin in pins:
    spec, want = pin.split(" --hash=sha256:")
    name, ver = spec.split("==")
    files = glob.glob(os.path.join(dl, f"{name.replace('-', '_')}-{ver}-*.whl"))
    if len(files) != 1:
        sys.exit(f"{spec}: {len(files)} files in {dl}")
    h = hashlib.sha256()
    with open(files[0], "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if h.hexdigest() != want:
        sys.exit(f"{files[0]}: sha256 {h.hexdigest()}, pinned {want}")
PY
say "download: $(du -shc "$dl"/*.whl | tail -n1 | cut -f1) in $dl (sha256 ok)"

# ---------------------------------------------------------------- target tree
if [[ ! -f "$tgt/.complete" || "$(cat "$tgt/.complete")" != "$stamp_text" ]]; then
    say "unpacking into $tgt"
    rm -rf "$tgt"
    mkdir -p "$tgt/include" "$tgt/lib"
    # headers of every wheel; of the libraries what a build links or a
    # device loads first (cuDNN's engine libraries are loaded by cuDNN itself)
    python3 - "$tgt" "$dl"/*.whl <<'PY'
import os, sys, zipfile
dest, wheels = sys.argv[1], sys.argv[2:]
libs = ("libcudart_static.a", "libcudadevrt.a", "libcudart.so.13", "libcublas.so.13",
        "libcublasLt.so.13", "libcudnn.so.9")
for w in wheels:
    with zipfile.ZipFile(w) as z:
        for i in z.infolist():
            parts = i.filename.split("/")
            if len(parts) > 3 and parts[0] == "nvidia" and parts[2] == "include" and not i.is_dir():
                out = os.path.join(dest, "include", *parts[3:])
            elif len(parts) == 4 and parts[2] == "lib" and parts[3] in libs:
                out = os.path.join(dest, "lib", parts[3])
            else:
                continue
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(i) as src, open(out, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
PY
    rm -f "$tgt/include/__init__.py"
    for f in "$tgt"/lib/lib*.so.*; do
        n=$(basename "$f")
        ln -sf "$n" "$tgt/lib/${n%%.so.*}.so"
    done
    echo "$stamp_text" >"$tgt/.complete"
fi
if [[ "${ERT_PRUNE:-0}" == 1 ]]; then
    # the target tree is all a build reads; the ~1 GB of wheels go (a later
    # run downloads them again)
    rm -rf "$dl"
    say "ERT_PRUNE=1: removed the downloaded wheels ($dl)"
fi
say "target tree: $(du -sh "$tgt" | cut -f1) in $tgt; host nvcc $("$nvcc_host" --version | sed -n 's/^Cuda compilation.*, \(V[0-9.]*\)$/\1/p') ($nvcc_host)"

# ---------------------------------------------------------------- build
say "configure + build $build (archs $archs)"
rm -f "$build/CMakeCache.txt"   # a fresh configure; the objects stay (ninja rebuilds what changed)
t1=$SECONDS
launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
              -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$build" -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release -DERT_WERROR=ON \
    -DCMAKE_TOOLCHAIN_FILE="$root/toolchains/aarch64-jetson.cmake" \
    -DERT_CUDA_TARGET_ROOT="$tgt" -DERT_HOST_NVCC="$nvcc_host" -DERT_CUDA=ON -DERT_CUDA_ARCHS="$archs" \
    >"$base/configure.log" 2>&1 || { tail -n 40 "$base/configure.log"; say "configure FAILED"; exit 1; }
grep -E "edgert: CUDA|edgert: nvcc" "$base/configure.log" | sed 's/^/    /' || true
cmake --build "$build" -j "$jobs" >"$base/build.log" 2>&1 || {
    grep -E -A12 "FAILED:|error" "$base/build.log" | head -n 80; say "build FAILED"; exit 1; }
say "build: ok ($((SECONDS - t1)) s)"

# ---------------------------------------------------------------- checks
fail=0
bins=("$build/apps/edgert" "$build/apps/camera/edgert-camera" "$build/tests/test_session")
for b in "${bins[@]}"; do
    if [[ ! -f "$b" ]]; then say "missing $b"; fail=1; continue; fi
    if grep -q "ARM aarch64" <<<"$(file -b "$b")" && grep -q "Machine:.*AArch64" <<<"$(readelf -h "$b")"; then
        say "aarch64: ok: ${b#"$build"/}"
    else
        say "not aarch64: $b: $(file -b "$b")"; fail=1
    fi
done
cuobj=$(compgen -G "$root/.deps/venv/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump" | head -1 || true)
[[ -z "$cuobj" ]] && cuobj=$(command -v cuobjdump || true)
[[ -z "$cuobj" && -x "$(dirname "$nvcc_host")/cuobjdump" ]] && cuobj=$(dirname "$nvcc_host")/cuobjdump
if [[ -z "$cuobj" ]]; then
    say "no cuobjdump (scripts/setup.sh installs it into .deps/venv)"; fail=1
else
    listing=$("$cuobj" --list-elf "$build/apps/edgert" 2>&1 || true)
    for sm in sm_87 sm_110; do
        n=$(grep -c "\.$sm\." <<<"$listing" || true)
        if ((n > 0)); then say "SASS $sm: $n cubins in apps/edgert"; else say "no $sm SASS in apps/edgert"; fail=1; fi
    done
    ptx=$("$cuobj" --list-ptx "$build/apps/edgert" 2>&1 || true)
    if grep -q "\.sm_110\.ptx" <<<"$ptx"; then
        say "PTX compute_110: present"
    else
        say "no compute_110 PTX in apps/edgert"; fail=1
    fi
fi
needed=$(readelf -d "$build/apps/edgert" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')
say "apps/edgert needs: $needed"
if grep -Eq "lib(cuda|cudart|cublas|cudnn|nv)" <<<"$needed"; then
    say "a CUDA shared library is linked: cudart must be static, cuBLAS/cuDNN lazy"; fail=1
fi
if ! grep -q "cudart_static" "$build/build.ninja"; then
    say "the link line has no libcudart_static.a"; fail=1
fi
say "apps/edgert: $(du -h "$build/apps/edgert" | cut -f1)"
((fail == 0)) || { say "checks FAILED"; exit 1; }
say "checks: ok ($((SECONDS - t0)) s so far)"

# ---------------------------------------------------------------- JetPack sysroot layout
# The README's other recipe: a sysroot copied off a Jetson, CUDA at
# usr/local/cuda/targets/aarch64-linux inside it, and ERT_JETSON_SYSROOT the
# only variable (or ERT_CUDA_TARGET_ROOT naming the sysroot). Without a
# Jetson, a sysroot of that layout is made of links (Debian's cross libc as
# usr/include + usr/lib/aarch64-linux-gnu, the wheel tree as the CUDA target)
# and configured: CMake's CUDA ABI detection compiles and links a CUDA program
# through it (nvcc -Xcompiler=--sysroot), FindCUDAToolkit must take
# cudart_static from the sysroot's tree, and one of the library's kernels is
# compiled with it.
# (links only, so it lives in this worktree's build/, not in the shared cache)
fake="$root/build/jetpack-layout-sysroot"
slog="$root/build/jetpack-layout-sysroot.log"
rm -rf "$fake"
mkdir -p "$fake/usr/lib" "$fake/usr/local/cuda/targets"
ln -s /usr/aarch64-linux-gnu/include "$fake/usr/include"
ln -s /usr/aarch64-linux-gnu/lib "$fake/usr/lib/aarch64-linux-gnu"
ln -s /usr/aarch64-linux-gnu "$fake/usr/aarch64-linux-gnu"  # Debian's libc.so script and C++ headers name this path
ln -s usr/lib "$fake/lib"
ln -s "$tgt" "$fake/usr/local/cuda/targets/aarch64-linux"
# Either variable alone: ERT_JETSON_SYSROOT=<sysroot>, or ERT_CUDA_TARGET_ROOT
# naming the sysroot instead of a target tree (the wheel recipe's variable).
ctgt="$fake/usr/local/cuda/targets/aarch64-linux"
for var in ERT_JETSON_SYSROOT ERT_CUDA_TARGET_ROOT; do
    sbuild="$root/build/test-cuda-aarch64-sysroot-$var"
    rm -rf "$sbuild"
    if [[ $var == ERT_JETSON_SYSROOT ]]; then says="CUDA target tree from the sysroot: $ctgt"
    else says="ERT_CUDA_TARGET_ROOT is a JetPack sysroot: ERT_JETSON_SYSROOT=$fake, CUDA target tree $ctgt"; fi
    if cmake -S "$root" -B "$sbuild" -G Ninja -DCMAKE_BUILD_TYPE=Release -DERT_TESTS=OFF -DERT_APPS=OFF \
        -DCMAKE_TOOLCHAIN_FILE="$root/toolchains/aarch64-jetson.cmake" -D"$var=$fake" \
        -DERT_HOST_NVCC="$nvcc_host" -DERT_CUDA=ON -DERT_CUDA_ARCHS=87-real >"$slog" 2>&1 &&
        grep -qF "$says" "$slog" &&
        grep -qF -- "--sysroot=$fake " "$sbuild/build.ninja" &&
        cudart=$(sed -n 's/^CUDA_cudart_static_LIBRARY:FILEPATH=//p' "$sbuild/CMakeCache.txt") &&
        [[ -n "$cudart" && "$(readlink -f "$cudart")" == "$(readlink -f "$ctgt/lib/libcudart_static.a")" ]] &&
        cuo=CMakeFiles/edgert.dir/kernels/cuda/cumsum.cu.o && ninja -C "$sbuild" "$cuo" >>"$slog" 2>&1 &&
        grep -q "ARM aarch64" <<<"$(file -b "$sbuild/$cuo")" &&
        { [[ -z "$cuobj" ]] || grep -q "\.sm_87\." <<<"$("$cuobj" --list-elf "$sbuild/$cuo" 2>&1)"; }; then
        say "JetPack sysroot layout: configures with $var=<sysroot> alone (CUDA from its usr/local/cuda);" \
            "a kernel compiles through it (aarch64 object, sm_87 SASS)"
    else
        tail -n 30 "$slog"; grep "cudart_static_LIBRARY" "$sbuild/CMakeCache.txt" || true
        say "JetPack sysroot layout with $var: FAILED (log: $slog)"; exit 1
    fi
done
[[ "${ERT_CUDA_AARCH64_BUILD_ONLY:-0}" == 1 ]] && exit 0
# zoo_cuda_selfcheck runs natively in the cuda phase; emulated it outlasts its 600 s
ctest --test-dir "$build" -j "$jobs" --output-on-failure --no-tests=error -E "^zoo_cuda_selfcheck$"
say "done in $((SECONDS - t0)) s"

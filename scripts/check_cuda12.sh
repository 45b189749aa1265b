#!/usr/bin/env bash
# check_cuda12.sh - build the whole CUDA backend with a CUDA 12 toolkit (the
# issue: "must also build with CUDA 12.x") and run the CPU ctest of that
# build (GPU tests report SKIPPED without a GPU). No GPU, no root, nothing
# installed outside the clone:
#
#   bash scripts/check_cuda12.sh            # downloads once (~1.2 GB), then builds
#   ERT_CUDA12_ARCHS="87-real;90" ...       # chips (default: 87 Orin, 90 Hopper + PTX)
#   ERT_JOBS=2                              # build/test parallelism
#   ERT_CUDA12_BUILD_ONLY=1                 # stop after the build (scripts/test.sh
#                                           # runs the ctest itself, to count it)
#
# Where the toolkit comes from (everything pinned, all from CUDA 12.4.1):
# PyPI's nvidia-*-cu12 wheels carry headers and shared libraries but no nvcc
# driver (nvidia-cuda-nvcc-cu12 has only ptxas, libnvvm and the crt headers),
# so the compiler binaries (nvcc, cicc, cudafe++, fatbinary, nvlink) come from
# Debian's nvidia-cuda-toolkit 12.4.131 (trixie, non-free), fetched with
# `apt-get download` against a private list directory (the machine's apt
# sources are not touched) and unpacked with `dpkg -x`. 12.4 is the newest
# CUDA 12 with a full nvcc in either registry. cuDNN is the CUDA 12 wheel of
# cuDNN 9. Everything lands in .deps/cuda12 (git-ignored):
#   dl/       the wheels and .debs as downloaded (reused by later runs)
#   toolkit/  a CUDA tree merged from them: bin/ (nvcc + its nvcc.profile),
#             nvvm/, include/, lib64/ (shared libraries and their .so links)
# The wheels ship no libcudart_static.a or static cuBLAS, so this build links
# the shared CUDA libraries (ERT_CUDA_STATIC=OFF): it checks that edgert
# compiles and links against the CUDA 12 API, not the static packaging.
#
# Exit status: 0 built and ctest passed, 1 failed, 2 could not fetch.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${ERT_JOBS:-2}
archs=${ERT_CUDA12_ARCHS:-87-real;90}
base="$root/.deps/cuda12"
dl="$base/dl"
tk="$base/toolkit"
build="$root/build/test-cuda12"

# ---------------------------------------------------------------- pins
deb_release=trixie
debs=(nvidia-cuda-toolkit=12.4.131~12.4.1-2)
wheels=(nvidia-cuda-nvcc-cu12==12.4.131 nvidia-cuda-runtime-cu12==12.4.127
        nvidia-cublas-cu12==12.4.5.8 nvidia-cuda-cccl-cu12==12.4.127
        nvidia-cudnn-cu12==9.10.2.21)
stamp_text="${debs[*]} ${wheels[*]}"

say() { echo "[cuda12] $*"; }
t0=$SECONDS

# ---------------------------------------------------------------- fetch
mkdir -p "$dl"
if [[ ! -f "$dl/.complete" || "$(cat "$dl/.complete")" != "$stamp_text" ]]; then
    say "downloading ${wheels[*]} and ${debs[*]}"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --timeout 60 --retries 3 -d "$dl" "${wheels[@]}" || {
        say "pip download failed (offline?)"; exit 2; }
    apt="$dl/apt"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
    : >"$apt/status"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $deb_release non-free" \
        >"$apt/sources.list"
    aopts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
           -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "Dir::State::status=$apt/status"
           -o APT::Architecture=amd64 -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
    (cd "$dl" && apt-get -qq "${aopts[@]}" update && apt-get -qq "${aopts[@]}" download "${debs[@]}") || {
        say "apt-get download of ${debs[*]} failed (offline?)"; exit 2; }
    echo "$stamp_text" >"$dl/.complete"
    rm -rf "$tk"
fi
say "download: $(du -shc "$dl"/*.whl "$dl"/*.deb | tail -n1 | cut -f1)"

# ---------------------------------------------------------------- toolkit tree
if [[ ! -f "$tk/.complete" ]]; then
    say "unpacking into $tk"
    rm -rf "$tk" "$base/x"
    mkdir -p "$tk"/{bin,include,lib64,nvvm/bin} "$base/x"
    for d in "$dl"/*.deb; do dpkg -x "$d" "$base/x/deb"; done
    # only what a build needs of the wheels (cuDNN's engine libraries are
    # loaded at run time, not linked)
    # (Python's zipfile: unzip is not on every Debian image)
    python3 - "$base/x/whl" "$dl"/*.whl <<'PY'
import fnmatch, sys, zipfile
dest, wheels = sys.argv[1], sys.argv[2:]
keep = ("nvidia/*/include/*", "nvidia/*/lib/*.so*")
drop = ("nvidia/cudnn/lib/libcudnn_*", "nvidia/cublas/lib/libnvblas*")
for w in wheels:
    with zipfile.ZipFile(w) as z:
        for n in z.namelist():
            if any(fnmatch.fnmatch(n, k) for k in keep) and not any(fnmatch.fnmatch(n, d) for d in drop):
                z.extract(n, dest)
PY
    nt="$base/x/deb/usr/lib/nvidia-cuda-toolkit"
    # the real nvcc and the tools it calls, copied (nvcc finds nvcc.profile and
    # its tools next to /proc/self/exe: a symlink would point back into x/)
    cp "$nt/bin/nvcc" "$nt/bin/cicc" "$tk/bin/"
    cp -r "$nt/bin/crt" "$tk/bin/"
    for b in cudafe++ fatbinary nvlink bin2c ptxas cuobjdump nvprune; do
        cp "$base/x/deb/usr/bin/$b" "$tk/bin/"
    done
    mv "$tk/bin/cicc" "$tk/nvvm/bin/"
    cp -r "$nt/libdevice" "$tk/nvvm/libdevice"
    cat >"$tk/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF
    for p in "$base"/x/whl/nvidia/*/; do
        [[ -d "$p/include" ]] && cp -r "$p/include/." "$tk/include/"
        [[ -d "$p/lib" ]] && cp -r "$p/lib/." "$tk/lib64/"
    done
    rm -f "$tk/include/__init__.py" "$tk/lib64/__init__.py"
    # the wheels have only the versioned names; the linker wants libX.so
    for f in "$tk"/lib64/lib*.so.*; do
        n=$(basename "$f")
        ln -sf "$n" "$tk/lib64/${n%%.so.*}.so"
    done
    rm -rf "$base/x"
    echo ok >"$tk/.complete"
fi
nvcc="$tk/bin/nvcc"
ver=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 (\2)/p')
say "nvcc $ver, $(grep -h '#define CUBLAS_VER_\(MAJOR\|MINOR\|PATCH\)' "$tk/include/cublas_api.h" | awk '{print $3}' | paste -sd. | sed 's/^/cuBLAS /'), $(grep -h '#define CUDNN_\(MAJOR\|MINOR\|PATCHLEVEL\) ' "$tk/include/cudnn_version.h" | awk '{print $3}' | paste -sd. | sed 's/^/cuDNN /')"

# ---------------------------------------------------------------- build + test
say "configure + build $build (archs $archs)"
rm -rf "$build"
t1=$SECONDS
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DERT_WERROR=ON \
    -DERT_CUDA=ON -DERT_CUDA_STATIC=OFF -DCMAKE_CUDA_RUNTIME_LIBRARY=Shared \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCUDAToolkit_ROOT="$tk" -DERT_CUDNN_ROOT="$tk" \
    -DERT_CUDA_ARCHS="$archs" >"$base/configure.log" 2>&1 || {
    tail -n 40 "$base/configure.log"; say "configure FAILED"; exit 1; }
grep -E "edgert: CUDA|edgert: nvcc" "$base/configure.log" | sed 's/^/    /' || true
grep -q "ERT_HAVE_CUDNN" "$build/build.ninja" || { say "cuDNN not found by the build"; exit 1; }
cmake --build "$build" -j "$jobs" >"$base/build.log" 2>&1 || {
    grep -E -A12 "FAILED:|error" "$base/build.log" | head -n 80; say "build FAILED"; exit 1; }
say "build: ok ($((SECONDS - t1)) s)"
[[ "${ERT_CUDA12_BUILD_ONLY:-0}" == 1 ]] && exit 0
# the test binaries load the CUDA 12 shared libraries from the toolkit tree
export LD_LIBRARY_PATH="$tk/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ctest --test-dir "$build" -j "$jobs" --output-on-failure --no-tests=error
say "done in $((SECONDS - t0)) s"

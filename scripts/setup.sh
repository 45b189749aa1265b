#!/usr/bin/env bash
# Install what edgert's build, demo and tests need on a Debian 12 machine.
#
#   bash scripts/setup.sh            # everything the whole test suite needs
#   bash scripts/setup.sh --minimal  # only what the native build + demo need
#
# Idempotent: only missing Debian packages are installed (apt-get update runs
# once, and only when something is missing), and the Python venv under
# .deps/venv is only touched when an import fails. Python tooling (onnx,
# onnxruntime, numpy: used to make and check reference models) is best effort:
# offline, the script warns and goes on, and tests that need it skip.
#
# Output: one line per step; the details go to .deps/setup.log.
# Knobs: ERT_SETUP_DATASETS=1 also installs dataset-fashion-mnist (not needed
# when ../shared/data has it; demo.sh sets it otherwise); ERT_PYTHON picks the interpreter for the venv.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$root/.deps"
log="$root/.deps/setup.log"
: >"$log"

minimal=0
[[ "${1:-}" == "--minimal" ]] && minimal=1

step() { printf 'setup: %s\n' "$*"; }
warn() { printf 'setup: WARNING: %s (see %s)\n' "$*" "$log" >&2; }

# Root in CI and containers; a developer's machine goes through sudo.
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: not root and no sudo: cannot install packages" >&2; exit 1; }
    SUDO=(sudo)
fi

# ------------------------------------------------------------ Debian packages
# Native build: compiler, CMake >= 3.24 (Debian 12 has 3.25), Ninja, ccache
# (CI rebuilds four configurations; the cache keeps re-runs short), pkgconf
# (the install test builds a pkg-config consumer).
pkgs=(build-essential cmake ninja-build ccache pkgconf
      zlib1g-dev        # gzip'd IDX datasets: `edgert train` and the Fashion-MNIST training test
      libturbojpeg0-dev) # image I/O (ERT_JPEG=AUTO picks it up): the demo's MJPEG stream
if [[ $minimal -eq 0 ]]; then
    pkgs+=(
        gcc-aarch64-linux-gnu libc6-dev-arm64-cross # Jetson cross build (static libc incl.)
        g++-aarch64-linux-gnu     # nvcc -ccbin for the CUDA aarch64 build (cuda-aarch64 phase)
        qemu-user                 # qemu-aarch64 runs the cross-built tests; the
                                  # dynamic build needs no binfmt setup (unlike -static's)
        clang libclang-rt-14-dev  # libFuzzer + sanitizer runtimes for scripts/fuzz.sh
        python3-venv python3-pip  # venv for the ONNX reference tooling
        libjpeg-turbo-progs       # djpeg: reference decoder for the image_ref test
        chromium                  # headless screenshot of edgert-camera's HTTP preview
    )
fi
# Fashion-MNIST in /usr/share/datasets/fashion-mnist: demo.sh sets this when
# ../shared/data has no copy.
[[ "${ERT_SETUP_DATASETS:-0}" == 1 ]] && pkgs+=(dataset-fashion-mnist)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
    step "Debian packages: all ${#pkgs[@]} present"
else
    step "Debian packages: installing ${missing[*]}"
    # env: sudo would drop DEBIAN_FRONTEND (no stdin in CI: never prompt)
    # Lock timeout: another apt (unattended-upgrades, a colleague) may hold the lock.
    apt=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300)
    if ! "${apt[@]}" update >>"$log" 2>&1; then
        warn "apt-get update failed"; exit 1
    fi
    if ! "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
        tail -n 20 "$log" >&2
        warn "apt-get install failed"; exit 1
    fi
fi

[[ $minimal -eq 1 ]] && { step "done (minimal)"; exit 0; }

# ------------------------------------------------------------ Python tooling
# Debian's interpreter by default: it is what a fresh Debian 12 machine has
# (a pyenv shim on PATH may point elsewhere). The venv keeps pip off the
# system site-packages (PEP 668 forbids that on Debian 12 anyway).
py=${ERT_PYTHON:-/usr/bin/python3}
[[ -x "$py" ]] || py=$(command -v python3 || echo python3)
venv="$root/.deps/venv"
# pytest, scikit-build-core, abi3audit: the python phase of test.sh (pip install . without network)
pymods="import onnx, onnxruntime, numpy, pytest, scikit_build_core"
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "$pymods" >>"$log" 2>&1; then
    step "python venv: onnx, onnxruntime, numpy, pytest, scikit-build-core present ($venv)"
else
    step "python venv: installing onnx onnxruntime numpy pytest scikit-build-core abi3audit into $venv"
    if "$py" -m venv "$venv" >>"$log" 2>&1 &&
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            --timeout 30 --retries 2 onnx onnxruntime numpy pytest scikit-build-core abi3audit >>"$log" 2>&1 &&
        "$venv/bin/python" -c "$pymods" >>"$log" 2>&1; then
        step "python venv: ready"
    else
        # Offline or PyPI down: only the tests that generate ONNX references
        # need these, and they skip without them.
        warn "pip install failed (offline?): continuing without onnx/onnxruntime"
    fi
fi

# cuobjdump (not in the Debian CUDA install here): the CUDA phase of test.sh
# lists the SASS of the Jetson chips (sm_87, sm_110) with it. PyPI's wheel
# ships only the binary; any 13.x reads CUDA 13.0 objects.
cuobj_glob="$venv/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump"
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
    if compgen -G "$cuobj_glob" >/dev/null || command -v cuobjdump >/dev/null 2>&1 ||
        [[ -x /usr/local/cuda/bin/cuobjdump ]]; then
        step "cuobjdump present"
    elif [[ -x "$venv/bin/python" ]] &&
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --timeout 30 --retries 2 \
            "nvidia-cuda-cuobjdump>=13,<14" >>"$log" 2>&1; then
        step "cuobjdump installed into $venv"
    else
        warn "cuobjdump not available: the sm_87/sm_110 SASS listing will be skipped"
    fi
fi

step "done"

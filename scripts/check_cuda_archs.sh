#!/usr/bin/env bash
# check_cuda_archs.sh [NVCC] - the Jetson chips compile: every kernels/cuda/*.cu
# is built for sm_87 (Orin) and sm_110 (Thor, CUDA 13), and cuobjdump must list
# an ELF (SASS) for both in each object. Usage: scripts/check_cuda_archs.sh [NVCC];
# CUOBJDUMP=path overrides where cuobjdump is found. Exits non-zero, naming the file and
# chip, if a compile fails or an ELF is missing. For CI (no GPU needed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${1:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x "$nvcc" ]] || { echo "check_cuda_archs: no nvcc ($nvcc)" >&2; exit 2; }
# cuobjdump: $CUOBJDUMP, next to nvcc, or on PATH (pip: nvidia-cuda-cuobjdump)
cuobjdump=${CUOBJDUMP:-$(dirname "$nvcc")/cuobjdump}
[[ -x "$cuobjdump" ]] || cuobjdump=$(command -v cuobjdump || true)
[[ -n "$cuobjdump" ]] || { echo "check_cuda_archs: no cuobjdump (set CUOBJDUMP)" >&2; exit 2; }
archs=(87 110)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gencode=()
for a in "${archs[@]}"; do gencode+=("-gencode=arch=compute_$a,code=sm_$a"); done
fail=0
shopt -s nullglob
srcs=("$root"/kernels/cuda/*.cu)
[[ ${#srcs[@]} -gt 0 ]] || { echo "check_cuda_archs: no kernels/cuda/*.cu" >&2; exit 2; }
for src in "${srcs[@]}"; do
    obj="$tmp/$(basename "$src").o"
    if ! "$nvcc" -std=c++17 -O2 "${gencode[@]}" -DERT_HAVE_CUDA \
        -I"$root/include" -I"$root/core" -I"$root/kernels/cuda" \
        -Xcompiler=-Wall,-Wextra,-Werror,-fno-exceptions -c "$src" -o "$obj"; then
        echo "FAIL: $(basename "$src") does not compile for sm_${archs[*]}" >&2
        fail=1
        continue
    fi
    elfs=$("$cuobjdump" --list-elf "$obj")
    for a in "${archs[@]}"; do
        if ! grep -q "sm_$a\b" <<<"$elfs"; then
            echo "FAIL: $(basename "$src"): no sm_$a ELF in cuobjdump --list-elf" >&2
            fail=1
        fi
    done
    echo "ok: $(basename "$src"): $(grep -o 'sm_[0-9]*' <<<"$elfs" | sort -u | tr '\n' ' ')"
done
exit $fail

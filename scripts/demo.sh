#!/usr/bin/env bash
# Install what is missing, build edgert (Release) and run the main demo:
#
#   bash scripts/demo.sh [demo arguments...]
#
# The demo (apps/, `edgert-demo`) builds a small CNN with the C API, saves it
# as .ert, reloads it, runs it and prints the arena report. The build dir is
# build/release (scripts/test.sh uses build/test-*).
# ERT_JOBS (default 2) sets the build's parallelism.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# Only the native toolchain is needed here (no cross compiler, qemu, python).
bash scripts/setup.sh --minimal

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)

echo "demo: building build/release"
mkdir -p build/logs
log=build/logs/demo-build.log
if ! { cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" &&
       cmake --build build/release -j "${ERT_JOBS:-2}"; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "demo: build failed (full log: $log)" >&2
    exit 1
fi

demo=build/release/apps/edgert-demo
if [[ ! -x "$demo" ]]; then
    echo "demo: $demo was not built (apps/ has no edgert-demo yet, or ERT_APPS=OFF in build/release)" >&2
    exit 1
fi
echo "demo: running $demo $*"
exec "$demo" "$@"

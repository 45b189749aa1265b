#!/usr/bin/env bash
# Install what is missing, build edgert (Release) and run the main demo:
#
#   bash scripts/demo.sh
#
# The demo, offline, in about 35 s on 2 CPU cores after the build (README "The two commands"):
#   0. edgert-demo: a small CNN built with the C API, saved as .ert, reloaded,
#      run; prints the arena report (a second; kept as the library's smoke test)
#   1. `edgert train small-cnn` on part of Fashion-MNIST (1 epoch on
#      ERT_DEMO_TRAIN images, default 30000), prints the test accuracy and
#      exports the trained model as .ert
#   2. edgert-mjpeg-gen renders the first ERT_DEMO_FRAMES (default 500)
#      Fashion-MNIST *test* images into an MJPEG stream file, a corrupt frame
#      after every 25th, and writes the true labels of the good frames in order
#   3. edgert-camera classifies the stream (--device auto: the GPU when there
#      is one) and writes one JSON line per frame; the script then prints the
#      pipeline's top-1 accuracy against the true labels, the corrupt frames
#      skipped (and checks both counts), FPS and the per-stage latency.
#   4. fine-tune on the device (scripts/demo_finetune.sh): a factory model
#      that never saw two of the classes, camera frames of each class
#      collected into an ImageFolder (edgert-camera --collect), the head
#      fine-tuned (edgert train --last-n 2), and both models served by
#      edgert-camera: accuracy before/after, overall and on the new classes.
# Data: ../shared/data/fashion-mnist when present, else Debian's
# dataset-fashion-mnist (installed by setup.sh --minimal when ../shared has
# no copy). Outputs in build/demo/. The build dir is build/release
# (scripts/test.sh uses build/test-*). ERT_JOBS (default 2) sets the build's
# parallelism.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
t0=$SECONDS

shared_fm="$root/../shared/data/fashion-mnist"
deb_fm=/usr/share/datasets/fashion-mnist # dpkg -L dataset-fashion-mnist
if [[ -f "$shared_fm/t10k-images-idx3-ubyte.gz" ]]; then
    data=$shared_fm
else
    data=$deb_fm
    export ERT_SETUP_DATASETS=1 # setup.sh --minimal then installs dataset-fashion-mnist
fi

# Only the native toolchain (and the data set when ../shared lacks it) is
# needed here: no cross compiler, qemu, python. libturbojpeg0-dev: JPEG.
bash scripts/setup.sh --minimal

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)

echo "demo: building build/release (the apps only)"
mkdir -p build/logs
log=build/logs/demo-build.log
if ! { cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" &&
       cmake --build build/release -j "${ERT_JOBS:-2}" \
             --target edgert_demo edgert_cli edgert_camera edgert_mjpeg_gen; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "demo: build failed (full log: $log)" >&2
    exit 1
fi
bin=build/release/apps
for b in edgert-demo edgert camera/edgert-camera camera/edgert-mjpeg-gen; do
    [[ -x $bin/$b ]] || { echo "demo: $bin/$b was not built (ERT_APPS=OFF in build/release?)" >&2; exit 1; }
done
echo "demo: built in $((SECONDS - t0)) s"

if [[ ! -f "$data/t10k-images-idx3-ubyte.gz" ]]; then
    echo "demo: no Fashion-MNIST in $shared_fm or $deb_fm" >&2
    exit 1
fi

echo
echo "== 0. edgert-demo: C builder API -> .ert -> reload -> run"
"$bin/edgert-demo"

# Steps 1-3 (also what the demo_pipeline test runs, smaller: tests/camera/CMakeLists.txt).
ERT_DEMO_THREADS=${ERT_DEMO_THREADS:-$(nproc 2>/dev/null || echo 2)}
if ((ERT_DEMO_THREADS > 4)); then ERT_DEMO_THREADS=4; fi
export ERT_DEMO_THREADS
bash scripts/demo_pipeline.sh "$bin" "$data" build/demo
echo
echo "== 4. fine-tune demo: learn two new objects from camera frames (scripts/demo_finetune.sh)"
bash scripts/demo_finetune.sh "$bin" "$data" build/demo/finetune
echo "demo: done in $((SECONDS - t0)) s (outputs in build/demo/)"

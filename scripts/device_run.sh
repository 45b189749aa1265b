#!/usr/bin/env bash
# One batched run on a GPU machine (the workplace's lent H100/H200, or any
# x86_64 + NVIDIA box with CUDA, cuDNN, PyTorch, torchvision, onnx and
# onnxruntime installed): build with CUDA (and TurboJPEG when found), run the
# whole ctest suite including the `gpu`-labelled tests, the GPU benchmark
# against PyTorch (bench/gpu/run_gpu_bench.sh) and the camera pipeline on the
# GPU. Everything lands in $OUT (default ./device-out).
#
#   bash scripts/device_run.sh
#   env: OUT, ERT_CUDA_ARCHS (default 90), SKIP_BENCH=1, SKIP_CAMERA=1,
#        FRAMES (camera frames per size, default 300)
# A TurboJPEG unpacked with `dpkg -x` into .deps/tj (git-ignored) is used when
# the machine has none (see README, "GPU runs").
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/device-out}
mkdir -p "$out"
export ERT_CUDA_ARCHS=${ERT_CUDA_ARCHS:-90}
if [[ -d .deps/tj/usr ]]; then
  export CMAKE_PREFIX_PATH=$root/.deps/tj/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
fi
# The cuDNN that PyTorch's wheels bring, as the GPU benchmark uses (one cuDNN per process).
CUDNN_ROOT=${CUDNN_ROOT:-$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)}
[[ -n $CUDNN_ROOT ]] && export LD_LIBRARY_PATH=$CUDNN_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUDNN_ROOT
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvcc --version | tail -1;
  echo "cuDNN: ${CUDNN_ROOT:-system}"; } 2>&1 | tee "$out/device.txt"

build=build-gpu
t0=$SECONDS
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DERT_CUDA=ON -DERT_CUDA_ARCHS="$ERT_CUDA_ARCHS" \
  ${CUDNN_ROOT:+-DERT_CUDNN_ROOT="$CUDNN_ROOT"} > "$out/configure.log" 2>&1 &&
  ninja -C $build > "$out/build.log" 2>&1
rc_build=$?
echo "build: rc $rc_build ($((SECONDS - t0)) s)"; grep -E "ERT_HAVE|JPEG|cuDNN" "$out/configure.log" | head -5
[[ $rc_build == 0 ]] || { tail -30 "$out/build.log"; exit 1; }

(cd $build && ctest -j8 --output-on-failure) > "$out/ctest.log" 2>&1
rc_test=$?
grep -E "tests passed|Failed |\(Failed\)|\*\*\*|Skipped" "$out/ctest.log" | head -20
(cd $build && ctest -L gpu -V) > "$out/ctest_gpu.log" 2>&1
grep -E "passed, .* failed|SKIPPED" "$out/ctest_gpu.log" | tail -3

if [[ ${SKIP_BENCH:-0} != 1 ]]; then
  SKIP_BUILD=1 bash bench/gpu/run_gpu_bench.sh $build "$out" > "$out/bench.log" 2>&1
  echo "gpu bench: rc $?"; tail -22 "$out/bench.log"
fi

if [[ ${SKIP_CAMERA:-0} != 1 && -x $build/apps/camera/edgert-camera ]]; then
  frames=${FRAMES:-300}
  for size in 640x480 1280x720; do
    w=${size%x*} h=${size#*x}
    $build/apps/camera/edgert-mjpeg-gen --width "$w" --height "$h" --frames "$frames" \
      ${ERT_SHARED_DIR:+--from "$ERT_SHARED_DIR/images"} "$out/s_$size.mjpeg" > /dev/null 2>&1
    $build/apps/camera/edgert-camera --model builtin:resnet18 --source "$out/s_$size.mjpeg" --decode-only \
      --json --quiet > "$out/camera_decode_$size.json" 2> /dev/null
    for prec in "" "--fp16"; do
      tag=gpu${prec:+_fp16}
      $build/apps/camera/edgert-camera --model builtin:resnet18 --source "$out/s_$size.mjpeg" --device cuda $prec \
        --mjpeg-out /dev/null --json --quiet > "$out/camera_${tag}_$size.json" 2> "$out/camera_${tag}_$size.err"
      echo "camera $size $tag: rc $?"
    done
    rm -f "$out/s_$size.mjpeg"
  done
  head -c 1500 "$out/camera_gpu_fp16_640x480.json"; echo
fi
exit $rc_test

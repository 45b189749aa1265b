#!/usr/bin/env bash
# One batched call on a GPU machine (the lent H100/H200): build the CUDA
# targets the GPU checks and benchmarks need, then run the named steps, each
# logged under OUT. Meant for one device call of at most 10 minutes, so the
# build is limited to what the steps use.
#
#   STEPS="quant cuda int8" bash bench/device_round.sh OUT
#
# Steps (in this order, whichever are named):
#   quant   ctest quant_cuda: every CUDA int8 kernel bit-exact against the CPU
#   cuda    ctest cuda: every CUDA op against the CPU (test_cuda)
#   zoot    ctest zoo_cuda: the zoo models on CUDA against the CPU
#   gpu     the whole ctest -L gpu (builds everything: slower)
#   int8    bench/int8/bench_int8.py --ab --profile (MODELS, default
#           resnet18,resnet50,mobilenet_v2; AB=0 drops --ab)
#   ncu     Nsight Compute on the int8 kernels of one int8 model that the
#           int8 step made (NCU_MODEL, default resnet18; NCU_CONFIG, default
#           f16:1d; several, space-separated, e.g. "f16:1d f16:8d"): duration, grid, occupancy, throughput and warp stalls per
#           launch, the create-time self-check's launches included (ncu.csv)
#   zoo     bench/zoo/run_zoo_gpu.sh with ZOO_CONFIGS (default f16:8) on ONLY
#           (default: every model); YOLO needs the ultralytics wheels in .whl
#           (carry .whl)
#   cpuzoo  the CPU zoo on this host's cores (issue 15): make_cpu_zoo.py's
#           torch-free models, bench_cpu_zoo.py edgert vs onnxruntime at
#           CPU_THREADS (default 1,2,4,8,16) and CPU_BATCH (default 1,8);
#           CPU_ALT: edgert bench options timed once more per row
#           (bench_cpu_zoo.py --alt-args, e.g. --no-strips)
# env: ITERS (30), WARMUP (5), DEADLINE_S (570: every step runs under
# `timeout` with what is left of it, so the call returns with its logs).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dest=${1:-device-out}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
# logs and results gather in a work folder; at exit they go to DEST as one
# archive (round.tgz) plus the result tables (the device tool returns 8 files)
out=$(mktemp -d /tmp/round.XXXX)
finish() {
  tar czf "$dest/round.tgz" -C "$out" . 2>/dev/null
  cp "$out"/*.md "$dest/" 2>/dev/null
}
trap finish EXIT
steps=" ${STEPS:-quant cuda int8} "
has() { [[ $steps == *" $1 "* ]]; }
deadline=$((SECONDS + ${DEADLINE_S:-570}))
left() { local l=$((deadline - SECONDS)); echo $((l > 5 ? l : 5)); }
CUDNN_ROOT=${CUDNN_ROOT:-$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)}
[[ -n $CUDNN_ROOT ]] && export LD_LIBRARY_PATH=$CUDNN_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUDNN_ROOT
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; git log -1 --format='%h %s' | cut -c1-80; } |
  tee "$out/device.txt"

build=build-gpu
# TARGETS (space-separated) narrows the build, e.g. TARGETS=test_cuda for STEPS=cuda alone
read -r -a targets <<< "${TARGETS:-bench_zoo_edgert edgert_cli qdq_run test_cuda test_zoo_cuda}"
has gpu && targets=()
t0=$SECONDS
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DERT_CUDA=ON -DERT_CUDA_ARCHS="${ERT_CUDA_ARCHS:-90}" \
  ${CUDNN_ROOT:+-DERT_CUDNN_ROOT="$CUDNN_ROOT"} > "$out/configure.log" 2>&1 &&
  timeout "$(left)" ninja -C $build "${targets[@]}" > "$out/build.log" 2>&1
rc=$?
echo "build: rc $rc ($((SECONDS - t0)) s)"
[[ $rc == 0 ]] || { grep -E -A8 "error|FAILED" "$out/build.log" | head -40; exit 1; }

for t in quant cuda zoot; do
  has $t || continue
  name=$t; [[ $t == quant ]] && name=quant_cuda; [[ $t == zoot ]] && name=zoo_cuda
  t0=$SECONDS
  (cd $build && timeout "$(left)" ctest -R "^${name}\$" --output-on-failure) > "$out/ctest_$name.log" 2>&1
  echo "ctest $name: rc $? ($((SECONDS - t0)) s): $(grep -E 'tests passed|checks|passed' "$out/ctest_$name.log" | tail -2 | tr '\n' ' ' | cut -c1-200)"
done
if has gpu; then
  (cd $build && timeout "$(left)" ctest -L gpu --output-on-failure) > "$out/ctest_gpu.log" 2>&1
  echo "ctest -L gpu: rc $?"; grep -E "tests passed|\(Failed\)|SKIPPED|Not Run" "$out/ctest_gpu.log" | head -20
fi
if has int8; then
  t0=$SECONDS
  timeout "$(left)" python3 bench/int8/bench_int8.py --driver $build/apps/bench/bench_zoo_edgert --edgert $build/apps/edgert \
    --work /tmp/int8 --out "$out/int8_gpu.json" --md "$out/int8_gpu.md" --models "${MODELS:-resnet18,resnet50,mobilenet_v2}" \
    --iters "${ITERS:-30}" --warmup "${WARMUP:-5}" $([[ ${AB:-1} == 1 ]] && echo --ab) --profile > "$out/int8.log" 2>&1
  echo "int8 bench: rc $? ($((SECONDS - t0)) s)"
  sed -n '/^| model | batch/,/^$/p' "$out/int8_gpu.md"
fi
if has ncu; then
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  nm=${NCU_MODEL:-resnet18}
  if [[ -z $ncu || ! -f /tmp/int8/$nm/${nm}_int8.ert ]]; then
    echo "ncu: skipped (ncu '${ncu}', model /tmp/int8/$nm/${nm}_int8.ert: run the int8 step first)"
  else
    for cfg in ${NCU_CONFIG:-f16:1d}; do
      t0=$SECONDS
      f=ncu_${cfg//:/_}
      timeout "$(left)" "$ncu" --csv --page details -k 'regex:qconv|qadd|qlut|quantize' --launch-count "${NCU_COUNT:-120}" \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        $build/apps/bench/bench_zoo_edgert /tmp/int8/$nm/${nm}_int8.ert /tmp/int8/$nm/x.f32 /tmp/ncu-run 2 1 \
        --input-dims 1x3x224x224 "$cfg" > "$out/$f.csv" 2> "$out/$f.log"
      echo "ncu $cfg: rc $? ($((SECONDS - t0)) s), $(grep -c 'gpu__time_duration\|Duration' "$out/$f.csv") duration rows"
    done
  fi
fi
if has zoo; then
  BUILD=$build ZOO_DIR=/tmp/zoo ITERS=${ITERS:-30} WARMUP=${WARMUP:-5} CONFIGS=${ZOO_CONFIGS:-f16:8} IO=device \
    BUDGET_S=$(($(left) - 60)) timeout "$(left)" bash bench/zoo/run_zoo_gpu.sh /tmp/zoo-out > "$out/zoo.log" 2>&1
  echo "zoo: rc $?"
  cp /tmp/zoo-out/zoo_gpu.json /tmp/zoo-out/zoo_gpu.md "$out/" 2>/dev/null
  grep -A8 "^| config" "$out/zoo_gpu.md"
fi
if has cpuzoo; then
  t0=$SECONDS
  { lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|MHz|L[123]" | cut -c1-200; nproc
    grep -m3 -E "^(cpu family|model|stepping)\s" /proc/cpuinfo
    echo "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512.*|amx.*|avx_vnni)$' | tr '\n' ' ')"
  } > "$out/cpu.txt"
  cat "$out/cpu.txt"
  python3 bench/zoo/make_cpu_zoo.py /tmp/czoo > "$out/cpuzoo_make.log" 2>&1 &&
    timeout "$(left)" python3 bench/zoo/bench_cpu_zoo.py /tmp/czoo --edgert $build/apps/edgert \
      --threads "${CPU_THREADS:-1,2,4,8,16}" --batch "${CPU_BATCH:-1,8}" --iters "${CPU_ITERS:-20}" --warmup 3 \
      ${CPU_ALT:+--alt-args="$CPU_ALT"} --out "$out" > "$out/cpuzoo.log" 2>&1
  echo "cpuzoo: rc $? ($((SECONDS - t0)) s)"
  grep -i -A12 "geomean" "$out"/cpu_zoo_*.md 2>/dev/null | head -30
fi

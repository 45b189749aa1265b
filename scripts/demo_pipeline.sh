#!/usr/bin/env bash
# Steps 1-3 of the README demo (scripts/demo.sh), also run by the
# demo_pipeline test (tests/camera/CMakeLists.txt) with smaller sizes:
#
#   bash scripts/demo_pipeline.sh APPS_BIN_DIR FASHION_MNIST_DIR OUT_DIR
#
#   1. `edgert train small-cnn`: 1 epoch on the first ERT_DEMO_TRAIN training
#      images (default 30000); exports OUT/fmnist.ert
#   2. edgert-mjpeg-gen: the first ERT_DEMO_FRAMES test images (default 500)
#      -> OUT/stream.mjpeg, a corrupt frame after every 25th; the true labels
#      of the good frames in stream order -> OUT/truth.txt
#   3. edgert-camera --device auto on the stream: OUT/results.jsonl (one line
#      per classified frame), OUT/summary.json (FPS, per-stage latency)
# then prints the pipeline's top-1 accuracy against the true labels, the
# corrupt frames skipped, FPS (the per-stage table is edgert-camera's summary).
# Exit 1 unless every good frame was classified, exactly the inserted corrupt
# frames were counted and the accuracy is >= ERT_DEMO_MIN_ACC (default 0);
# 77 when the build has no JPEG support (the cross build) or no zlib.
# ERT_DEMO_THREADS (default 2): training and inference threads.
# ERT_DEMO_EMU: a command prefix for the binaries (qemu-aarch64 ...).
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 APPS_BIN_DIR FASHION_MNIST_DIR OUT_DIR" >&2; exit 2; }
bin=$1 data=$2 out=$3
n_train=${ERT_DEMO_TRAIN:-30000}
n_frames=${ERT_DEMO_FRAMES:-500}
threads=${ERT_DEMO_THREADS:-2}
min_acc=${ERT_DEMO_MIN_ACC:-0}
emu=()
[[ -n ${ERT_DEMO_EMU:-} ]] && read -r -a emu <<<"$ERT_DEMO_EMU"
every=25
norm=(--mean 0.286 --std 0.353) # what `edgert train` standardises with (apps/train_cmd.c)
mkdir -p "$out"

# Probe first (one frame): a build without JPEG (the cross build) or zlib
# cannot run the demo; say so and skip before training.
rc=0
"${emu[@]}" "$bin/camera/edgert-mjpeg-gen" --from-idx "$data/t10k-images-idx3-ubyte.gz" --frames 1 \
    "$out/probe.mjpeg" >/dev/null 2>"$out/gen.err" || rc=$?
if [[ $rc -ne 0 ]]; then
    cat "$out/gen.err" >&2
    grep -q "no JPEG support" "$out/gen.err" && { echo "SKIP: this build has no JPEG support (ERT_JPEG)"; exit 77; }
    grep -q "needs a build with zlib" "$out/gen.err" && { echo "SKIP: this build has no zlib for the gzip'd IDX files (the qemu cross build: no arm64 zlib, and ERT_JPEG off)"; exit 77; }
    exit 1
fi

echo
echo "== 1. edgert train: small CNN, 1 epoch on $n_train Fashion-MNIST training images ($data)"
"${emu[@]}" "$bin/edgert" train small-cnn --data "$data" --limit "$n_train" --epochs 1 --batch 32 \
    --threads "$threads" --export "$out/fmnist.ert"

echo
echo "== 2. edgert-mjpeg-gen: $n_frames test images -> $out/stream.mjpeg, a corrupt frame after every ${every}th"
rc=0
"${emu[@]}" "$bin/camera/edgert-mjpeg-gen" --from-idx "$data/t10k-images-idx3-ubyte.gz" \
    --idx-labels "$data/t10k-labels-idx1-ubyte.gz" --labels-out "$out/truth.txt" \
    --frames "$n_frames" --corrupt-every "$every" --quality 90 "$out/stream.mjpeg" 2>"$out/gen.err" || rc=$?
cat "$out/gen.err" >&2
if [[ $rc -ne 0 ]]; then
    grep -q "no JPEG support" "$out/gen.err" && { echo "SKIP: this build has no JPEG support (ERT_JPEG)"; exit 77; }
    exit 1
fi
printf '%s\n' T-shirt/top Trouser Pullover Dress Coat Sandal Shirt Sneaker Bag "Ankle boot" >"$out/classes.txt"

echo
echo "== 3. edgert-camera: classify the stream (--device auto)"
"${emu[@]}" "$bin/camera/edgert-camera" --model "$out/fmnist.ert" --source "$out/stream.mjpeg" \
    --labels "$out/classes.txt" "${norm[@]}" --topk 1 --device auto --threads "$threads" --quiet \
    --frames-jsonl "$out/results.jsonl" --json >"$out/summary.json"

# Score: the k-th result line is the k-th good frame (corrupt ones produce none).
sed -n 's/.*"top":\[\[\([0-9]*\),.*/\1/p' "$out/results.jsonl" >"$out/predicted.txt"
good=$(wc -l <"$out/truth.txt")
got=$(wc -l <"$out/predicted.txt")
lines=$(wc -l <"$out/results.jsonl")
corrupt=$(sed -n 's/.*"corrupt":\([0-9]*\).*/\1/p' "$out/summary.json")
want_corrupt=$((n_frames / every))
fps=$(sed -n 's/.*"fps":\([0-9.]*\).*/\1/p' "$out/summary.json")
ok=$(paste -d' ' "$out/truth.txt" "$out/predicted.txt" | awk '$1 == $2 { n++ } END { print n + 0 }')
echo
echo "== result"
awk -v ok="$ok" -v good="$good" -v got="$got" 'BEGIN {
    printf "accuracy (pipeline top-1 vs true labels): %.2f%% (%d of %d good frames right; %d classified)\n",
           100 * ok / good, ok, good, got }'
echo "corrupt frames: $corrupt counted and skipped (inserted: $want_corrupt)"
echo "throughput: $fps frames/s (28x28 frames, batch 1; per-stage latency: edgert-camera's table above)"
fail=()
[[ $got -eq $good && $lines -eq $good ]] || fail+=("$got of $good good frames classified")
[[ $corrupt -eq $want_corrupt ]] || fail+=("$corrupt corrupt frames counted, $want_corrupt inserted")
awk -v ok="$ok" -v good="$good" -v m="$min_acc" 'BEGIN { exit !(ok >= m * good) }' ||
    fail+=("accuracy below $min_acc")
if [[ ${#fail[@]} -gt 0 ]]; then
    printf 'demo: FAILED: %s\n' "${fail[@]}" >&2
    exit 1
fi

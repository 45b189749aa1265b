#!/usr/bin/env bash
# Fine-tune demo: a robot learns two new objects from its camera, on the
# device, and serves the result with the camera pipeline.
#
#   bash scripts/demo_finetune.sh APPS_BIN_DIR FASHION_MNIST_DIR OUT_DIR
#
#   1. The "factory" model: `edgert train small-cnn --classes 0-7` on
#      Fashion-MNIST without Bag (8) and Ankle boot (9): its 10-way head has
#      never seen those two. -> OUT/base.ert
#   2. Collect: for each class, a camera stream of that kind of object
#      (edgert-mjpeg-gen --idx-class K over *training* images, with corrupt
#      frames) goes through `edgert-camera --collect OUT/collected/K_name`:
#      an ImageFolder of JPEG frames as the camera delivered them. The known
#      classes are collected too (a small replay set, so they are not
#      forgotten).
#   3. Fine-tune the head only: `edgert train OUT/base.ert --data
#      OUT/collected --last-n 2` (the two FC layers; the convolutions stay
#      frozen), checkpointed (atomic) -> OUT/finetuned.ert
#   4. Serve: edgert-camera classifies a stream of *test* images (all ten
#      classes, corrupt frames in it) with the base and the fine-tuned model;
#      the script prints both accuracies, overall and on the two new
#      classes, and the fine-tuned model's frame rate and stage table.
# Exit 1 unless the fine-tuned model beats the base one on the new classes by
# ERT_FT_MIN_GAIN (default 0.5) and overall; 77 without JPEG/zlib support.
# Sizes (env): ERT_FT_BASE (training images for step 1, default 20000),
# ERT_FT_COLLECT (frames per class, default 150), ERT_FT_EPOCHS (default 8),
# ERT_FT_FRAMES (test frames, default 500), ERT_DEMO_THREADS (default 2),
# ERT_FT_DEVICE (edgert-camera --device, default auto).
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 APPS_BIN_DIR FASHION_MNIST_DIR OUT_DIR" >&2; exit 2; }
bin=$1 data=$2 out=$3
n_base=${ERT_FT_BASE:-20000}
n_collect=${ERT_FT_COLLECT:-150}
epochs=${ERT_FT_EPOCHS:-8}
n_frames=${ERT_FT_FRAMES:-500}
threads=${ERT_DEMO_THREADS:-2}
device=${ERT_FT_DEVICE:-auto}
min_gain=${ERT_FT_MIN_GAIN:-0.5}
norm=(--mean 0.286 --std 0.353) # what `edgert train` standardises with
names=(T-shirt Trouser Pullover Dress Coat Sandal Shirt Sneaker Bag Ankle-boot)
gen=$bin/camera/edgert-mjpeg-gen cam=$bin/camera/edgert-camera
rm -rf "$out/collected"
mkdir -p "$out"
rc=0
"$gen" --from-idx "$data/t10k-images-idx3-ubyte.gz" --frames 1 "$out/probe.mjpeg" >/dev/null 2>"$out/gen.err" || rc=$?
if [[ $rc -ne 0 ]]; then
    cat "$out/gen.err" >&2
    grep -q -E "no JPEG support|needs a build with zlib" "$out/gen.err" && { echo "SKIP: no JPEG/zlib support in this build"; exit 77; }
    exit 1
fi

echo "== 1. factory model: small CNN on $n_base Fashion-MNIST images of classes 0-7 (no ${names[8]}, no ${names[9]})"
"$bin/edgert" train small-cnn --data "$data" --classes 0-7 --limit "$n_base" --epochs 1 --batch 32 \
    --threads "$threads" --export "$out/base.ert" 2>&1 | grep -v '^\[' | tail -n 3

echo
echo "== 2. collect: $n_collect camera frames of each class -> $out/collected/<class>/ (edgert-camera --collect)"
for k in $(seq 0 9); do
    "$gen" --from-idx "$data/train-images-idx3-ubyte.gz" --idx-labels "$data/train-labels-idx1-ubyte.gz" \
        --idx-class "$k" --frames $((n_collect + 10)) --corrupt-every 40 --quality 90 "$out/cam_$k.mjpeg" >/dev/null
    "$cam" --source "$out/cam_$k.mjpeg" --collect "$out/collected/${k}_${names[$k]}" --collect-max "$n_collect" \
        --quiet 2>"$out/collect_$k.log" || { cat "$out/collect_$k.log" >&2; exit 1; }
    printf '  %-12s %s\n' "${names[$k]}" "$(grep -o 'collected [0-9]* frames' "$out/collect_$k.log")"
done

echo
echo "== 3. fine-tune the head (last 2 layers) on the collected frames, $epochs epochs"
"$bin/edgert" train "$out/base.ert" --data "$out/collected" --last-n 2 --epochs "$epochs" --batch 32 \
    --lr 0.003 --val-split 0.15 --threads "$threads" --checkpoint "$out/finetune.ckpt" \
    --export "$out/finetuned.ert" 2>&1 | grep -v '^\[' | grep -E -v '^epoch [1-5]:' 

echo
echo "== 4. serve: edgert-camera on $n_frames test frames (all ten classes), base vs fine-tuned (--device $device)"
"$gen" --from-idx "$data/t10k-images-idx3-ubyte.gz" --idx-labels "$data/t10k-labels-idx1-ubyte.gz" \
    --labels-out "$out/truth.txt" --frames "$n_frames" --corrupt-every 25 --quality 90 "$out/test.mjpeg" >/dev/null
printf '%s\n' "${names[@]}" >"$out/classes.txt"
for m in base finetuned; do
    "$cam" --model "$out/$m.ert" --source "$out/test.mjpeg" --labels "$out/classes.txt" "${norm[@]}" --topk 1 \
        --device "$device" --threads "$threads" --quiet --frames-jsonl "$out/$m.jsonl" --json \
        >"$out/$m.summary.json" 2>"$out/$m.camera.log"
    sed -n 's/.*"top":\[\[\([0-9]*\),.*/\1/p' "$out/$m.jsonl" >"$out/$m.pred"
done
[[ $(wc -l <"$out/base.pred") -eq $(wc -l <"$out/truth.txt") && $(wc -l <"$out/finetuned.pred") -eq $(wc -l <"$out/truth.txt") ]] ||
    { echo "demo_finetune: FAILED: not every good frame was classified" >&2; exit 1; }
score() { # PRED -> "overall new" accuracies
    paste -d' ' "$out/truth.txt" "$1" | awk '{ n++; ok += $1 == $2; if ($1 >= 8) { nn++; nok += $1 == $2 } }
        END { printf "%.4f %.4f\n", ok / n, nn ? nok / nn : 0 }'
}
read -r base_all base_new < <(score "$out/base.pred")
read -r ft_all ft_new < <(score "$out/finetuned.pred")
corrupt=$(sed -n 's/.*"corrupt":\([0-9]*\).*/\1/p' "$out/finetuned.summary.json")
fps=$(sed -n 's/.*"fps":\([0-9.]*\).*/\1/p' "$out/finetuned.summary.json")
echo
echo "== result"
awk -v a="$base_all" -v b="$base_new" -v c="$ft_all" -v d="$ft_new" 'BEGIN {
    printf "                 all classes   new classes (Bag, Ankle boot)\n"
    printf "  base model     %6.2f%%       %6.2f%%\n", 100 * a, 100 * b
    printf "  fine-tuned     %6.2f%%       %6.2f%%\n", 100 * c, 100 * d }'
echo "  corrupt frames skipped: $corrupt; fine-tuned pipeline: $fps frames/s; stages:"
grep -E '^  (decode|preprocess|infer) ' "$out/finetuned.camera.log" || true
awk -v a="$base_all" -v b="$base_new" -v c="$ft_all" -v d="$ft_new" -v g="$min_gain" \
    'BEGIN { exit !(d >= b + g && c > a) }' ||
    { echo "demo_finetune: FAILED: fine-tuning did not learn the new classes (gain below $min_gain)" >&2; exit 1; }
echo "demo_finetune: ok (serve it live: $cam --model $out/finetuned.ert --source v4l2:/dev/video0 --labels $out/classes.txt ${norm[*]} --serve 8080)"

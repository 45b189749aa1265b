#!/bin/sh
# Instructions executed inside ert_session_run, per model of a folder
# (valgrind callgrind; valgrind has no AVX-512, so this counts the AVX2/FMA
# path). Deterministic, so usable for A/B on a shared, noisy machine.
#   bench/zoo/callgrind_zoo.sh EDGERT MODELS_DIR [THREADS] [BATCH]
# Prints one "model instructions" line per .onnx file.
set -eu
E=$1 DIR=$2 T=${3:-1} B=${4:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in "$DIR"/*.onnx; do
    n=$(basename "$m" .onnx)
    valgrind --tool=callgrind --toggle-collect=ert_session_run --callgrind-out-file="$tmp/$n.out" \
        "$E" bench "$m" --threads "$T" --batch "$B" --iters 1 --warmup 0 >/dev/null 2>"$tmp/$n.log"
    ir=$(grep '^summary:' "$tmp/$n.out" | awk '{print $2}')
    echo "$n $ir"
done

#!/usr/bin/env bash
# Fashion-MNIST small CNN in int8: top-1 on the 10,000 test images, float vs
# each quantizer variant (issue 14's target: a drop of at most 0.5 points).
#
#   bash bench/int8/fmnist_int8.sh EDGERT [OUT_DIR]     (default ./fmnist-int8)
#   env: DATA (../shared/data/fashion-mnist), LIMIT (30000 training images),
#        EPOCHS (1), CALIB (500 calibration images, the first of the
#        training set, with their labels)
# The model is `edgert train small-cnn` on the first LIMIT training images
# (trained once, kept in OUT_DIR/fm.ert); each variant's `edgert quantize
# --json` goes to OUT_DIR/<variant>.json and one line per variant to stdout
# and OUT_DIR/fmnist_int8.tsv.
set -uo pipefail
cli=${1:?usage: fmnist_int8.sh EDGERT [OUT_DIR]}
out=${2:-fmnist-int8}
root=$(cd "$(dirname "$0")/../.." && pwd)
data=${DATA:-$root/../shared/data/fashion-mnist}
mkdir -p "$out"
if [[ ! -f $out/fm.ert ]]; then
  "$cli" train small-cnn --data "$data" --epochs "${EPOCHS:-1}" --limit "${LIMIT:-30000}" --export "$out/fm.ert" \
    > "$out/train.log" 2>&1 || { tail -5 "$out/train.log"; exit 1; }
fi
variants=(
  "minmax=--method minmax"
  "minmax-no-equalisation=--method minmax --no-equalize"
  "percentile=--method percentile"
  "entropy=--method entropy"
  "mse=--method mse"
  "mse-u8-asym=--method mse --asymmetric"
  "percentile-u8-asym=--method percentile --asymmetric"
  "minmax-bias-correction=--method minmax --bias-correct"
  "mse-u8-asym-bias-correction=--method mse --asymmetric --bias-correct"
)
printf 'variant\tfloat_top1\tint8_top1\tdrop\n' > "$out/fmnist_int8.tsv"
for v in "${variants[@]}"; do
  name=${v%%=*}
  # shellcheck disable=SC2086
  "$cli" quantize "$out/fm.ert" --calib "$data/train-images-idx3-ubyte.gz" \
    --calib-labels "$data/train-labels-idx1-ubyte.gz" --limit "${CALIB:-500}" --mean 0.286 --std 0.353 \
    --eval "$data/t10k-images-idx3-ubyte.gz" --eval-labels "$data/t10k-labels-idx1-ubyte.gz" --json \
    --out "$out/$name.ert" ${v#*=} > "$out/$name.json" 2> "$out/$name.log" || { tail -3 "$out/$name.log"; exit 1; }
  python3 - "$out/$name.json" "$name" <<'EOF' | tee -a "$out/fmnist_int8.tsv"
import json, sys
e = json.load(open(sys.argv[1]))["eval"]
print(f"{sys.argv[2]}\t{e['float_top1']:.2f}\t{e['quant_top1']:.2f}\t{e['float_top1'] - e['quant_top1']:.2f}")
EOF
done

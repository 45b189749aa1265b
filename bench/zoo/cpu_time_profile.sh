#!/bin/sh
# CPU time of one `edgert bench` run, split by function, from perf's
# cpu-clock samples (4 kHz): only the process's own running time counts, so
# unlike wall clock it stays comparable on a shared, loaded machine (cache
# contention from other load still leaks in). Prints the top symbols and
# the total, in ms per run.
#   bench/zoo/cpu_time_profile.sh EDGERT MODEL.onnx [ITERS] [THREADS]
set -eu
E=$1 M=$2 N=${3:-40} T=${4:-1}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
perf record -q -F 4000 -o "$d/p.data" "$E" bench "$M" --iters "$N" --warmup 2 --threads "$T" >/dev/null 2>&1
perf report -i "$d/p.data" --no-children --stdio -n --sort symbol 2>/dev/null | awk -v n="$N" '
    /^ +[0-9.]+%/ { t += $2; if (c < 7) { printf "%s %.2f | ", $4, $2 / 4 / (n + 2); c++ } }
    END { printf "\ntotal ms/run %.2f\n", t / 4 / (n + 2) }'

#!/usr/bin/env python3
"""onnxruntime (CPU) side of the ResNet-18 CPU benchmark.

    bench_cpu_ort.py --model resnet18.onnx [--threads 1,2] [--iters 10]
                     [--warmup 2] [--batch 1] [--json FILE]

Same protocol as bench_cpu_resnet18.c: one session per thread count
(intra_op_num_threads = N, inter_op 1, sequential, all graph optimisations),
the same input numbers (splitmix64 seed 224, uniform [-1, 1), as apps/cli_util.c
draws them), warm-up runs, then per-run wall time; p50/p90 by nearest rank.
Writes JSON with the same keys as the C benchmark, including logits_first so
the two outputs can be compared when the weights are the same.
Needs: pip install onnxruntime numpy
"""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np
import onnxruntime as ort

def splitmix_uniform(seed, n, lo=-1.0, hi=1.0):
    """The exact float32 numbers cli_rng_uniform() draws (apps/cli_util.c):
    state_i = seed + i * golden (mod 2^64), mixed, top 24 bits / 2^24."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return np.float32(lo) + np.float32(hi - lo) * u


def nearest_rank(sorted_v, p):
    k = max(0, -(-p * len(sorted_v) // 100) - 1)
    return sorted_v[k]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "Hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()

    x = splitmix_uniform(224, a.batch * 3 * 224 * 224).reshape(a.batch, 3, 224, 224)
    results = []
    for t in [int(v) for v in a.threads.split(",")]:
        so = ort.SessionOptions()
        so.intra_op_num_threads = t
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        t0 = time.perf_counter()
        sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
        create_ms = (time.perf_counter() - t0) * 1e3
        feed = {sess.get_inputs()[0].name: x}
        times = []
        for k in range(a.warmup + a.iters):
            t0 = time.perf_counter()
            out = sess.run(None, feed)[0]
            dt = (time.perf_counter() - t0) * 1e3
            if k >= a.warmup:
                times.append(dt)
            if sys.stderr.isatty():
                print(f"\r  ort {t} thread(s): {k + 1}/{a.warmup + a.iters}", end="", file=sys.stderr)
        if sys.stderr.isatty():
            print("\r\033[K", end="", file=sys.stderr)
        times.sort()
        mean = sum(times) / len(times)
        results.append({
            "threads": t, "p50_ms": nearest_rank(times, 50), "p90_ms": nearest_rank(times, 90), "mean_ms": mean,
            "min_ms": times[0], "max_ms": times[-1], "throughput_items_per_s": a.batch * 1e3 / mean,
            "session_create_ms": create_ms, "logits_first": [float(v) for v in out.reshape(-1)[:4]],
        })

    print(f"onnxruntime {ort.__version__} CPU, batch {a.batch}, {a.iters} iterations after {a.warmup} warm-up")
    print(f"{'threads':<8} {'p50 ms':>10} {'p90 ms':>10} {'mean ms':>10} {'min ms':>10} {'items/s':>12}")
    for r in results:
        print(f"{r['threads']:<8} {r['p50_ms']:10.2f} {r['p90_ms']:10.2f} {r['mean_ms']:10.2f} {r['min_ms']:10.2f}"
              f" {r['throughput_items_per_s']:12.2f}")
    if a.json:
        doc = {
            "benchmark": "resnet18_cpu", "runtime": "onnxruntime", "version": ort.__version__,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": {"uname": " ".join(platform.uname()), "cpu": cpu_model(), "online_cpus": os.cpu_count()},
            "command": " ".join(sys.argv), "model": os.path.basename(a.model), "batch": a.batch,
            "input": [a.batch, 3, 224, 224], "iters": a.iters, "warmup": a.warmup, "results": results,
        }
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""edgert from Python vs onnxruntime from Python, CPU, side by side.

    bench_python.py [--models DIR] [--threads 1] [--iters 200] [--warmup 20] [--json FILE]

For each shared model (mnist_8, super_resolution_10, ppocr's cls net at
(1, 3, 48, 192)): one edgert session and one onnxruntime session
(intra_op_num_threads = --threads, inter_op 1, sequential, all graph
optimisations), the same random input, warm-up runs, then the wall time of
each Python call: edgert `run(x)` (new output arrays), edgert `run(x, out=)`
(preallocated outputs) and onnxruntime `run(None, feeds)`; p50/p90 by
nearest rank, in microseconds. For small models this is mostly the cost of
the Python layer, which is what it is for; the outputs are checked to agree
(max |diff|) so a fast wrong answer cannot pass unnoticed.
Needs: the edgert package (pip install .), onnxruntime, numpy.
"""
import argparse
import json
import os
import platform
import time

import numpy as np
import onnxruntime as ort

import edgert


def nearest_rank(v, p):
    v = sorted(v)
    return v[max(0, -(-p * len(v) // 100) - 1)]


def timed(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    t = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e6)
    return {"p50_us": round(nearest_rank(t, 50), 1), "p90_us": round(nearest_rank(t, 90), 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--models", default=os.path.join(here, "..", "..", "shared", "models"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    models = [("mnist_8", "mnist_8/model.onnx", None),
              ("super_resolution_10", "super_resolution_10/model.onnx", None),
              ("ppocr_cls", "ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x": (1, 3, 48, 192)})]
    rows = []
    for name, rel, shapes in models:
        path = os.path.join(a.models, rel)
        if not os.path.exists(path):
            print(f"{name}: {path} missing, skipped")
            continue
        s = edgert.load(path).session(device="cpu", threads=a.threads, shapes=shapes)
        x = {t.name: np.random.default_rng(7).standard_normal(t.shape).astype(np.float32) for t in s.inputs}
        out = {t.name: np.empty(t.shape, t.np_dtype) for t in s.outputs}
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = a.threads, 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3  # the zoo models list initializers as inputs: a warning per weight
        o = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        diff = max(float(np.abs(s.run(x)[k] - v).max())
                   for k, v in zip([t.name for t in o.get_outputs()], o.run(None, x)))
        row = {"model": name, "threads": a.threads, "max_abs_diff": diff,
               "edgert_run": timed(lambda: s.run(x), a.iters, a.warmup),
               "edgert_run_out": timed(lambda: s.run(x, out=out), a.iters, a.warmup),
               "onnxruntime_run": timed(lambda: o.run(None, x), a.iters, a.warmup)}
        rows.append(row)
        print(f"{name:20s} edgert run p50 {row['edgert_run']['p50_us']:9.1f} us, with out= "
              f"{row['edgert_run_out']['p50_us']:9.1f} us; onnxruntime p50 {row['onnxruntime_run']['p50_us']:9.1f} us"
              f" (max |diff| {diff:.1e})")
    res = {"bench": "python_cpu", "machine": platform.machine(), "cpus": os.cpu_count(),
           "python": platform.python_version(), "edgert": edgert.version(), "onnxruntime": ort.__version__,
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

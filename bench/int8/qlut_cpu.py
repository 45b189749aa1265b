#!/usr/bin/env python3
"""ert.QLut on the CPU (issue 14): a MobileNetV2 built here (torchvision's
layer table: 3x3 stem, 17 inverted residual blocks with Relu6 = Clip(0, 6),
1x1 head of 1280, GlobalAveragePool, Gemm 1000; no BatchNorm, random He
weights with a fixed seed, opset 13, 1x3x224x224), quantized by `edgert
quantize` (int8 symmetric, what bench/int8 runs), then `edgert bench` on
the CPU with --profile: p50 ms and the scheduled ops by name, so a build
with and one without the Q/DQ pass's table step can be compared.

    python3 bench/int8/qlut_cpu.py --edgert BUILD/apps/edgert --work DIR [--before OTHER/apps/edgert]
        [--iters 50] [--threads 1]

--before: a second edgert (e.g. the commit before ert.QLut) benched on the
same int8 file, alternating runs with the first so machine noise hits both.
Needs numpy and onnx (.deps/venv)."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# (expansion t, out channels c, repeats n, first stride s): torchvision's MobileNetV2
BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def mobilenetv2(rng):
    inits, nodes = {}, []
    k = [0]

    def conv(x, cin, cout, ksize, stride, group=1, relu6=True):
        k[0] += 1
        w, b, y = "w%d" % k[0], "b%d" % k[0], "c%d" % k[0]
        fan_in = cin // group * ksize * ksize
        inits[w] = (rng.standard_normal([cout, cin // group, ksize, ksize]) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        inits[b] = (rng.standard_normal(cout) * 0.05).astype(np.float32)
        p = ksize // 2
        nodes.append(helper.make_node("Conv", [x, w, b], [y], name="conv%d" % k[0], strides=[stride, stride],
                                      pads=[p, p, p, p], group=group))
        if not relu6:
            return y
        nodes.append(helper.make_node("Clip", [y, "zero", "six"], [y + "r"], name="relu6_%d" % k[0]))
        return y + "r"
    inits["zero"], inits["six"] = np.array(0, np.float32), np.array(6, np.float32)
    x, cin = conv("x", 3, 32, 3, 2), 32
    for t, c, n, s in BLOCKS:
        for i in range(n):
            stride = s if i == 0 else 1
            h = conv(x, cin, cin * t, 1, 1) if t != 1 else x
            h = conv(h, cin * t, cin * t, 3, stride, group=cin * t)
            h = conv(h, cin * t, c, 1, 1, relu6=False)
            if stride == 1 and cin == c:
                nodes.append(helper.make_node("Add", [h, x], [h + "a"], name="add_" + h))
                h = h + "a"
            x, cin = h, c
    x = conv(x, cin, 1280, 1, 1)
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat"))
    inits["fcw"] = (rng.standard_normal([1000, 1280]) * np.sqrt(1.0 / 1280)).astype(np.float32)
    inits["fcb"] = np.zeros(1000, np.float32)
    nodes.append(helper.make_node("Gemm", ["flat", "fcw", "fcb"], ["y"], name="fc", transB=1))
    g = helper.make_graph(nodes, "mobilenetv2", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])],
                          [numpy_helper.from_array(v, n) for n, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def bench(edgert, model, iters, threads):
    r = subprocess.run([edgert, "bench", model, "--iters", str(iters), "--warmup", "5", "--threads", str(threads),
                        "--profile", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("edgert bench failed: %s" % r.stderr[-500:])
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgert", required=True)
    ap.add_argument("--before", default="")
    ap.add_argument("--work", required=True)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rng = np.random.default_rng(14)
    f32 = os.path.join(a.work, "mobilenetv2.onnx")
    onnx.save(mobilenetv2(rng), f32)
    calib = os.path.join(a.work, "calib.npy")
    np.save(calib, rng.standard_normal([8, 3, 224, 224]).astype(np.float32))
    q = os.path.join(a.work, "mobilenetv2_int8.onnx")
    r = subprocess.run([a.edgert, "quantize", f32, "--calib", calib, "--out", q], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("edgert quantize failed: %s" % r.stderr[-500:])
    runs = {"after": a.edgert}
    if a.before:
        runs["before"] = a.before
    res = {k: [] for k in runs}
    for _ in range(a.rounds):
        for k, exe in runs.items():
            res[k].append(bench(exe, q, a.iters, a.threads))
    for k, v in res.items():
        p50 = sorted(x["p50_ms"] for x in v)
        print("%-6s %s: p50 %s ms (rounds), median %.3f" % (k, runs[k], ", ".join("%.3f" % t for t in p50),
                                                              p50[len(p50) // 2]))
        prof = v[-1]["profile"]  # the last round's node-by-node run: ms and count per op
        print("       %d nodes, %.3f ms profiled: %s" % (prof["nodes"], prof["total_ms"], ", ".join(
            "%s %.3f (%d)" % (op, ms, n) for op, ms, n in prof["ops"])))


if __name__ == "__main__":
    main()

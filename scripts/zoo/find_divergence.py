#!/usr/bin/env python3
"""Find the first node where edgert and onnxruntime disagree (debugging aid).

    python scripts/zoo/find_divergence.py --edgert build/apps/edgert MODEL.onnx N,C,H,W [--tol 1e-4]

Makes a copy of the model whose graph outputs are every float node output,
runs it with onnxruntime and `edgert run` on one random input (fixed seed),
and prints, in graph order, each node output's relative L2 error until the
first one past --tol (and a few after it). Making intermediates outputs
stops edgert fusing across them, so a bug inside a fusion may hide here:
compare with the plain run.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_zoo import Runner, ort_run, input_of  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgert", required=True)
    ap.add_argument("model")
    ap.add_argument("shape")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--after", type=int, default=5)
    a = ap.parse_args()
    m = onnx.shape_inference.infer_shapes(onnx.load(a.model))
    types = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.value_info) + list(m.graph.output)}
    have = {o.name for o in m.graph.output}
    order = []
    for n in m.graph.node:
        for o in n.output:
            if o and types.get(o) in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
                order.append((n.op_type, n.name, o))
                if o not in have:
                    m.graph.output.append(helper.make_tensor_value_info(o, types[o], None))
    work = tempfile.mkdtemp(prefix="ert_div_")
    path = os.path.join(work, "all_outputs.onnx")
    onnx.save(m, path)
    iname, _ = input_of(a.model)
    x = np.random.default_rng(0).uniform(-1, 1, [int(v) for v in a.shape.split(",")]).astype(np.float32)
    ref = ort_run(path, {iname: x})
    r = Runner(argparse.Namespace(edgert=a.edgert, emulator="", work=work))
    got = r.edgert_run(path, {iname: x}, "all")
    bad = None
    for i, (op, name, o) in enumerate(order):
        g, e = got.get(o), ref[o].astype(np.float64)
        if g is None:
            print("%4d %-20s %-30s (not an edgert output)" % (i, op, o))
            continue
        if g.shape != e.shape:
            err = float("inf")
        else:
            err = np.linalg.norm(g - e) / max(np.linalg.norm(e), 1e-30)
        print("%4d %-20s %-30s %-30s %s %.2e" % (i, op, name[:30], o[:30], g.shape, err))
        if err > a.tol and bad is None:
            bad = i
        if bad is not None and i >= bad + a.after:
            break
    return 1 if bad is not None else 0


if __name__ == "__main__":
    sys.exit(main())

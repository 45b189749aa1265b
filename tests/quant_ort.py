#!/usr/bin/env python3
"""Quantized ops: edgert against onnxruntime on random graphs this script builds.

    python tests/quant_ort.py --edgert build/apps/edgert --work build/quant --suite qdq|hostile [--seed N]

Every case is a small ONNX model made here with onnx.helper (random shapes,
scales, zero points and data, numpy seed fixed per run: --seed, default 1),
run by onnxruntime (CPU, graph optimisations off: the plain reference) and by
`edgert run` from the .npy inputs this script writes. Suites:
  qdq      QuantizeLinear / DequantizeLinear, opset 10, 13 and 19 forms;
           per-tensor and per-axis (positive and negative axis); int8 and
           uint8; with and without zero points; int32 data (bias); data that
           saturates and exact .5 ties (round half to even). Integer outputs
           must equal onnxruntime's exactly, float outputs bit for bit (the
           same f32 arithmetic).
  hostile  files edgert must refuse at load, naming the node: scales 0,
           negative, NaN, inf; a zero point of another dtype than the data;
           an i32 zero point that is not 0; opset 21 block_size; int4 and
           float8 zero points.
Exit status: 0 every check passed, 1 a check failed, 77 skipped (no
onnx/onnxruntime/numpy), with the reason on stdout.
"""
import argparse
import json
import os
import subprocess
import sys

SKIP = 77
try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    venv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".deps", "venv", "bin", "python")
    if os.path.exists(venv) and not os.environ.get("ERT_QUANT_REEXEC"):
        os.environ["ERT_QUANT_REEXEC"] = "1"
        os.execv(venv, [venv] + sys.argv)
    print("SKIP: this Python (%s) cannot import onnx/onnxruntime/numpy (%s)" % (sys.executable, e))
    sys.exit(SKIP)

sys.dont_write_bytecode = True
NP2ONNX = {np.float32: TensorProto.FLOAT, np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8,
           np.int32: TensorProto.INT32}


class Runner:
    def __init__(self, args):
        self.edgert = [t for t in args.emulator.split("|") if t] + [args.edgert]
        self.work = args.work
        self.failed = self.passed = 0
        os.makedirs(self.work, exist_ok=True)

    def save(self, model, tag):
        path = os.path.join(self.work, tag + ".onnx")
        onnx.save(model, path)
        return path

    def ort_run(self, path, feeds):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))

    def edgert_run(self, path, feeds, tag, extra=()):
        d = os.path.join(self.work, "run", tag)
        os.makedirs(d, exist_ok=True)
        args = ["run", path, "--json", "--output-dir", os.path.join(d, "out")] + list(extra)
        for name, arr in feeds.items():
            p = os.path.join(d, "in_%s.npy" % name)
            np.save(p, arr)
            args += ["--input", "%s=%s" % (name, p)]
        r = subprocess.run(self.edgert + args, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("edgert %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()[-400:]))
        res = json.loads(r.stdout)
        return {o["name"]: np.load(o["file"]) for o in res["outputs"]}

    def report(self, ok, tag, why):
        print("%-5s %-40s %s" % ("ok" if ok else "FAIL", tag, why), flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1

    def compare(self, tag, path, feeds, max_steps=0, extra=()):
        """Every output equal to onnxruntime's (integer outputs within max_steps)."""
        ref = self.ort_run(path, feeds)
        try:
            got = self.edgert_run(path, feeds, tag, extra)
        except RuntimeError as e:
            self.report(False, tag, str(e))
            return
        for name, r in ref.items():
            g = got.get(name)
            if g is None or g.shape != r.shape or g.dtype != r.dtype:
                self.report(False, tag, "%s: got %s, expected %s %s" % (
                    name, None if g is None else (g.dtype, g.shape), r.dtype, r.shape))
                return
            if r.dtype.kind in "iu":
                diff = np.abs(g.astype(np.int64) - r.astype(np.int64))
                worst = int(diff.max()) if diff.size else 0
                if worst > max_steps:
                    i = np.unravel_index(int(diff.argmax()), diff.shape)
                    self.report(False, tag, "%s: %d steps off at %s (got %d, onnxruntime %d); %d of %d differ" % (
                        name, worst, i, g[i], r[i], int((diff > 0).sum()), diff.size))
                    return
                why = "%s %s %s exact" % (name, r.dtype, r.shape) if worst == 0 else \
                    "%s %s: %d of %d within %d step" % (name, r.dtype, int((diff > 0).sum()), diff.size, worst)
            else:
                if not np.array_equal(g, r):
                    err = np.abs(g.astype(np.float64) - r).max()
                    self.report(False, tag, "%s: max abs difference %g (bit-exact expected)" % (name, err))
                    return
                why = "%s %s %s bit-exact" % (name, r.dtype, r.shape)
        self.report(True, tag, why)

    def refuse(self, tag, model, node, words):
        """edgert must refuse the file at load with a message naming node and saying words."""
        path = self.save(model, "hostile_" + tag)
        r = subprocess.run(self.edgert + ["info", path], capture_output=True, text=True)
        msg = (r.stdout + r.stderr).strip()
        ok = r.returncode != 0 and ("'%s'" % node) in msg and all(w in msg for w in words)
        self.report(ok, "hostile " + tag, msg.splitlines()[-1][:160] if msg else "(no message) rc %d" % r.returncode)


def qtype_range(dt):
    return (-128, 127) if dt == np.int8 else (0, 255)


def rand_qparams(rng, n, dt, with_zp):
    scale = (rng.uniform(0.01, 0.2, size=n)).astype(np.float32)
    lo, hi = qtype_range(dt)
    zp = rng.integers(lo // 2 if lo < 0 else 0, hi // 2 + 1, size=n).astype(dt) if with_zp else None
    return scale, zp


def qdq_model(opset, op, x_dt, shape, scale, zp, axis, out_dt, attrs=None, zp_type=None, scale_type=TensorProto.FLOAT):
    inits = [numpy_helper.from_array(scale, "s")]
    ins = ["x", "s"]
    if zp is not None:
        t = numpy_helper.from_array(zp, "z")
        if zp_type is not None:
            t = helper.make_tensor("z", zp_type, zp.shape, zp.flatten().tolist())
        inits.append(t)
        ins.append("z")
    kw = dict(attrs or {})
    if axis is not None:
        kw["axis"] = axis
    node = helper.make_node(op, ins, ["y"], name="q0" if op == "QuantizeLinear" else "dq0", **kw)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", NP2ONNX[x_dt], shape)],
                          [helper.make_tensor_value_info("y", NP2ONNX[out_dt] if out_dt else TensorProto.FLOAT, shape)],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7 if opset < 21 else 10
    return m


def suite_qdq(R, rng):
    n = 0
    for opset in (10, 13, 19):
        for dt in (np.int8, np.uint8):
            for per_axis in ((False, True) if opset >= 13 else (False,)):
                for with_zp in (True, False):
                    rank = int(rng.integers(1, 5))
                    shape = [int(v) for v in rng.integers(1, 7, size=rank)]
                    axis = None
                    nsc = 1
                    if per_axis:
                        a = int(rng.integers(0, rank))
                        nsc = shape[a]
                        axis = a - rank if rng.integers(0, 2) else a
                    scale, zp = rand_qparams(rng, nsc, dt, with_zp or dt == np.int8)
                    if not per_axis:
                        scale, zp = scale.reshape(()), None if zp is None else zp.reshape(())
                        if opset == 13:  # a power of two: every k + 0.5 step below is an exact tie
                            scale = np.array(0.25, np.float32)
                    if not with_zp and dt == np.uint8:
                        zp = None
                    # data that saturates at both ends, plus exact ties k + 0.5 steps
                    x = (rng.standard_normal(shape) * 200 * float(scale.max())).astype(np.float32)
                    flat = x.reshape(-1)
                    sc_b = np.broadcast_to(scale.reshape([-1] + [1] * (rank - 1 - (axis % rank)))
                                           if per_axis else scale, shape).reshape(-1)
                    ties = rng.random(flat.size) < 0.3
                    flat[ties] = ((rng.integers(-40, 40, size=int(ties.sum())) + 0.5) * sc_b[ties]).astype(np.float32)
                    tag = "Q op%d %s %s%s" % (opset, np.dtype(dt).name, "axis%s" % axis if per_axis else "tensor",
                                              "" if zp is not None else " nozp")
                    m = qdq_model(opset, "QuantizeLinear", np.float32, shape, scale, zp, axis, dt)
                    R.compare(tag, R.save(m, "case%d" % n), {"x": x})
                    n += 1
                    xq = rng.integers(*qtype_range(dt), size=shape, endpoint=True).astype(dt)
                    tag = "DQ op%d %s %s%s" % (opset, np.dtype(dt).name, "axis%s" % axis if per_axis else "tensor",
                                               "" if zp is not None else " nozp")
                    m = qdq_model(opset, "DequantizeLinear", dt, shape, scale, zp, axis, None)
                    R.compare(tag, R.save(m, "case%d" % n), {"x": xq})
                    n += 1
    # int32 data (a quantized bias), per-axis, no zero point / zero point 0
    for zp0 in (False, True):
        shape = [2, 5]
        scale = rng.uniform(1e-4, 1e-2, size=5).astype(np.float32)
        xq = rng.integers(-2**20, 2**20, size=shape).astype(np.int32)
        m = qdq_model(13, "DequantizeLinear", np.int32, shape, scale, np.zeros(5, np.int32) if zp0 else None, 1, None)
        R.compare("DQ op13 int32 axis1%s" % (" zp0" if zp0 else ""), R.save(m, "case%d" % n), {"x": xq})
        n += 1
    # Q -> DQ chain with a shared per-channel scale, 4-D NCHW data
    shape = [2, 3, 4, 5]
    scale, zp = rand_qparams(rng, 3, np.int8, True)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q", axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq", axis=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                          [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    x = (rng.standard_normal(shape) * 10).astype(np.float32)
    R.compare("Q->DQ op13 int8 axis1 chain", R.save(m, "chain"), {"x": x})


def suite_hostile(R, rng):
    shape = [2, 3]
    s3 = np.full(3, 0.1, np.float32)
    for what, bad in (("scale0", 0.0), ("scale_neg", -0.5), ("scale_nan", float("nan")), ("scale_inf", float("inf"))):
        s = s3.copy()
        s[1] = bad
        m = qdq_model(13, "DequantizeLinear", np.int8, shape, s, np.zeros(3, np.int8), 1, None)
        R.refuse(what, m, "dq0", ["scale[1]"])
        m = qdq_model(13, "QuantizeLinear", np.float32, shape, s, np.zeros(3, np.uint8), 1, np.uint8)
        R.refuse(what + "_q", m, "q0", ["scale[1]"])
    m = qdq_model(13, "DequantizeLinear", np.int8, shape, s3, np.zeros(3, np.uint8), 1, None)
    R.refuse("zp_dtype", m, "dq0", ["zero point", "u8"])
    m = qdq_model(13, "DequantizeLinear", np.int32, shape, s3, np.array([0, 7, 0], np.int32), 1, None)
    R.refuse("zp_i32_nonzero", m, "dq0", ["must be 0"])
    m = qdq_model(13, "QuantizeLinear", np.float32, shape, s3, np.zeros(3, np.int32), 1, np.int8)
    R.refuse("zp_i32_q", m, "q0", ["zero point"])
    sb = np.full((2, 1), 0.1, np.float32)
    m = qdq_model(21, "DequantizeLinear", np.int8, shape, sb, np.zeros((2, 1), np.int8), 1, None,
                  attrs={"block_size": 3})
    R.refuse("block_size", m, "dq0", ["block"])
    m = qdq_model(21, "QuantizeLinear", np.float32, shape, s3, np.zeros(3, np.int8), 1, None,
                  zp_type=TensorProto.INT4)
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.INT4
    R.refuse("int4", m, "q0", ["INT4"])
    m = qdq_model(19, "QuantizeLinear", np.float32, shape, s3, np.zeros(3, np.int8), 1, None,
                  zp_type=TensorProto.FLOAT8E4M3FN)
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT8E4M3FN
    R.refuse("float8", m, "q0", ["FLOAT8"])


SUITES = {"qdq": suite_qdq, "hostile": suite_hostile}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgert", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--suite", choices=sorted(SUITES), required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--emulator", default="")
    args = ap.parse_args()
    R = Runner(args)
    SUITES[args.suite](R, np.random.default_rng(args.seed))
    print("%s: %d passed, %d failed" % (args.suite, R.passed, R.failed))
    sys.exit(1 if R.failed else 0)


if __name__ == "__main__":
    main()

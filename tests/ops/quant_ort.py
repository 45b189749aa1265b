#!/usr/bin/env python3
"""Quantized ops: edgert against onnxruntime on random graphs this script builds.

    python tests/ops/quant_ort.py --edgert build/apps/edgert --work build/quant --suite qdq|hostile [--seed N]

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
  integer  QLinearConv (1-D and 2-D; odd channel counts, groups, depthwise,
           strides, asymmetric pads, dilations; u8/u8, u8/s8, s8/s8; per-tensor
           and per-channel weight scales; with and without an int32 bias),
           ConvInteger, QLinearMatMul (batched, broadcast, per-column b) and
           MatMulInteger (per-column b zero points), non-zero zero points,
           outputs that saturate at both ends (checked to happen). Integer
           outputs within one step of an exact int64 numpy reference of
           ONNX's semantics (ref_*) and of onnxruntime's (measured: exact).
  fold     quantize_static (QDQ) CNNs: the Q/DQ folding pass against
           onnxruntime and against the unfolded graph (tests/ops/qdq_run).
  ert      a QDQ model as .ert: size, round trip, vs onnxruntime.
Which onnxruntime is the oracle: on x86 CPUs without VNNI its u8 x s8
integer kernels saturate (ort_u8s8_probe), so there the integer suite checks
u8/s8 cases with full-range weights against the int64 reference alone and
adds copies with 7-bit weights checked against onnxruntime as well, and
fold / ert compare with onnxruntime's float-simulated QDQ (optimisations
off) instead of its fused integer graph (ort_qdq_oracle). Each line says
which oracle it used; ERT_ORT_U8S8_EXACT=0/1 overrides the CPU probe.
  pool     DQ -> MaxPool -> Q of one scale: MaxPool on the integers.
  gpu      (label gpu) a QDQ CNN on a CUDA session (int8 kernels, no CPU
           fallback) vs the CPU session.
  hostile  files edgert must refuse at load, naming the node: scales 0,
           negative, NaN, inf; a zero point of another dtype than the data;
           an i32 zero point that is not 0; opset 21 block_size; int4 and
           float8 zero points.
Exit status: 0 every check passed, 1 a check failed, 77 skipped (no
onnx/onnxruntime/numpy), with the reason on stdout.
"""
import argparse
import logging
import json
import os
import platform
import subprocess
import sys

SKIP = 77
try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    venv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".deps", "venv", "bin", "python")
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
        self.qdq_run = args.qdq_run
        self.work = args.work
        self.failed = self.passed = 0
        self.sat_lo = self.sat_hi = 0  # cases whose reference output reaches the lowest / highest value
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

    def compare(self, tag, path, feeds, max_steps=0, extra=(), exact=None, ort_oracle=True):
        """Every output equal to each oracle's (integer outputs within
        max_steps): onnxruntime's unless ort_oracle is False, and exact's
        (the int64 reference's outputs by name) when given. onnxruntime
        always runs: where it is not an oracle the line says how far it is
        from the reference, and why."""
        ort_out = self.ort_run(path, feeds)
        try:
            got = self.edgert_run(path, feeds, tag, extra)
        except RuntimeError as e:
            self.report(False, tag, str(e))
            return
        oracles = ([("onnxruntime", ort_out)] if ort_oracle else []) + \
            ([("the int64 reference", exact)] if exact is not None else [])
        whys = []
        for name, r in ort_out.items():
            g = got.get(name)
            if g is None or g.shape != r.shape or g.dtype != r.dtype:
                self.report(False, tag, "%s: got %s, expected %s %s" % (
                    name, None if g is None else (g.dtype, g.shape), r.dtype, r.shape))
                return
            if r.dtype in (np.int8, np.uint8):
                lo, hi = qtype_range(r.dtype.type)
                first = oracles[0][1][name]
                self.sat_lo += int((first == lo).any())
                self.sat_hi += int((first == hi).any())
            frags = []
            for who, out in oracles:
                if name not in out:
                    continue
                r = out[name]
                if r.dtype.kind in "iu":
                    diff = np.abs(g.astype(np.int64) - r.astype(np.int64))
                    worst = int(diff.max()) if diff.size else 0
                    if worst > max_steps:
                        i = np.unravel_index(int(diff.argmax()), diff.shape)
                        self.report(False, tag, "%s: %d steps off %s at %s (got %d, %s %d); %d of %d differ" % (
                            name, worst, who, i, g[i], who, r[i], int((diff > 0).sum()), diff.size))
                        return
                    frags.append("exact vs %s" % who if worst == 0 else "%d of %d within %d step of %s" % (
                        int((diff > 0).sum()), diff.size, worst, who))
                elif not np.array_equal(g, r):
                    err = np.abs(g.astype(np.float64) - r).max()
                    self.report(False, tag, "%s: max abs difference %g from %s (bit-exact expected)" % (name, err, who))
                    return
                else:
                    frags.append("bit-exact vs %s" % who)
            if not ort_oracle and exact is not None and name in exact:
                d = np.abs(ort_out[name].astype(np.int64) - exact[name].astype(np.int64))
                frags.append("onnxruntime not an oracle here (%s: its u8s8 sums can saturate; %d steps off the "
                             "reference)" % (ORT_U8S8_WHY, int(d.max()) if d.size else 0))
            whys.append("%s %s %s %s" % (name, g.dtype, g.shape, ", ".join(frags)))
        self.report(True, tag, "; ".join(whys))

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


def int_model(op, inputs, inits, out_dt, out_shape, attrs=None, opset=13, name="n0"):
    """One node op over graph inputs [(name, np dtype, shape)] and initializers {name: array}."""
    names = [n for n, _, _ in inputs]
    ins = []
    for nm in op[1]:
        ins.append(nm)
    node = helper.make_node(op[0], ins, ["y"], name=name, **(attrs or {}))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, NP2ONNX[dt], sh) for n, dt, sh in inputs],
                          [helper.make_tensor_value_info("y", NP2ONNX[out_dt], out_shape)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items() if k not in names])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m


def conv_out_shape(x_shape, w_shape, strides, pads, dil):
    nsp = len(x_shape) - 2
    return [x_shape[0], w_shape[0]] + [
        (x_shape[2 + i] + pads[i] + pads[nsp + i] - dil[i] * (w_shape[2 + i] - 1) - 1) // strides[i] + 1
        for i in range(nsp)]


def rq(rng, dt, shape):
    return rng.integers(*qtype_range(dt), size=shape, endpoint=True).astype(dt)


def zp_of(rng, dt, n=None):
    lo, hi = qtype_range(dt)
    v = rng.integers(lo + 20 if lo < 0 else 20, hi - 20, size=n if n else ()).astype(dt)
    return v


CONV_GEOMS = [  # (x shape, M, kernel, group, strides, pads, dilations)
    ([1, 3, 7, 6], 5, [3, 3], 1, [1, 1], [1, 1, 1, 1], [1, 1]),
    ([2, 5, 9, 8], 7, [3, 2], 1, [2, 1], [0, 1, 2, 0], [1, 1]),
    ([1, 6, 8, 8], 4, [3, 3], 2, [1, 2], [1, 0, 1, 1], [2, 1]),
    ([2, 7, 6, 5], 7, [3, 3], 7, [1, 1], [1, 1, 1, 1], [1, 1]),     # depthwise, odd C
    ([1, 4, 5, 5], 8, [1, 1], 1, [1, 1], [0, 0, 0, 0], [1, 1]),     # 1x1
    ([2, 3, 11], 5, [3], 1, [2], [1, 2], [1]),                     # 1-D
]


# ------------------------------------------------- which oracle for integers

def ort_u8s8_probe():
    """(exact, why): whether onnxruntime's integer GEMM/conv kernels (MLAS)
    sum u8 x s8 products exactly on this CPU. On x86-64 without VNNI (AVX2,
    or AVX-512 without VNNI) they use VPMADDUBSW, which adds each pair of
    u8*s8 products in int16 with saturation: once two adjacent products pass
    32767 (x near 255, |w| above 64) the sum is wrong, so onnxruntime's own
    QLinearConv / QLinearMatMul / MatMulInteger with u8 activations and int8
    weights, and its QDQ fusions (which also turn int8 activations into uint8
    on x86), are off by many steps there; its docs advise reduce_range (7-bit
    weights) on such CPUs. With VNNI (VPDPBUSD sums in int32) and off x86
    (ARM's dot products) they are exact; so are u8 x u8, s8 x s8 (a plain
    int32 kernel) and weights within [-64, 64] everywhere.
    ERT_ORT_U8S8_EXACT=0 or 1 overrides the probe (to run the other kind of
    machine's path)."""
    env = os.environ.get("ERT_ORT_U8S8_EXACT")
    if env in ("0", "1"):
        return env == "1", "ERT_ORT_U8S8_EXACT=%s" % env
    mach = platform.machine().lower()
    if mach not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return True, "%s, not x86" % mach
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        flags = set()
    vnni = sorted(flags & {"avx512_vnni", "avx_vnni"})
    if vnni:
        return True, "x86 with %s" % "/".join(vnni)
    return False, "x86 without VNNI (%s)" % ("no CPU flags readable" if not flags else
                                             "AVX-512" if "avx512bw" in flags else "AVX2" if "avx2" in flags else "SSE")


ORT_U8S8_EXACT, ORT_U8S8_WHY = ort_u8s8_probe()


def ort_int_exact(x_dt, w):
    """Whether onnxruntime's explicit integer ops are exact for activations
    of dtype x_dt and weights (or B) w on this CPU (ort_u8s8_probe)."""
    return ORT_U8S8_EXACT or x_dt != np.uint8 or w.dtype != np.int8 or \
        (int(w.min(initial=0)) >= -64 and int(w.max(initial=0)) <= 64)


def ort_qdq_oracle(path, feeds):
    """onnxruntime's output 0 on a QDQ model as the oracle for edgert's
    folded integer graph. Where its u8s8 kernels are exact: with its QDQ
    fusions on (DQ -> Conv -> Q becomes its QLinearConv, integer like
    edgert's). Elsewhere its fused kernels saturate, so the oracle is the
    same model with optimisations off: DequantizeLinear -> float op ->
    QuantizeLinear, float-simulated QDQ, within one step of the integer
    semantics. Returns (oracle output, fused output, words naming the
    oracle)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    fused = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    if ORT_U8S8_EXACT:
        return fused, fused, "onnxruntime (its QDQ fusions on: %s)" % ORT_U8S8_WHY
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    return plain, fused, "onnxruntime with optimisations off (float-simulated QDQ; %s: its fused u8s8 kernels can " \
        "saturate)" % ORT_U8S8_WHY


def oracle_words(got, ref, fused, who, step):
    """How far got is from the oracle ref, naming it; where the oracle is
    not onnxruntime's fused graph, how far that one is (not checked)."""
    w = "%.2f steps off %s" % (steps_off(got, ref, step), who)
    if fused is not ref:
        w += "; its fused graph (not the oracle here) %.2f steps off" % steps_off(got, fused, step)
    return w


# ------------------------------------------------- exact integer reference
# ONNX's integer ops in numpy int64, independent of onnxruntime: the oracle
# where onnxruntime's integer kernels are not exact (ort_u8s8_probe).

def ref_requant(acc, mult, y_dt, y_zp):
    """y = saturate(round_half_even(acc * mult) + y_zp), the product in f32
    as ONNX's reference and onnxruntime's MlasRequantizeOutput compute it
    (acc int64 below 2^24 here, exact in f32)."""
    lo, hi = qtype_range(y_dt)
    v = acc.astype(np.float32) * mult
    return np.clip(np.rint(v).astype(np.int64) + int(y_zp), lo, hi).astype(y_dt)


def ref_mult(x_s, w_s, y_s):
    """The requantisation multiplier x_s * w_s / y_s in f32, in that order."""
    return (np.float32(x_s) * np.asarray(w_s, np.float32)) / np.float32(y_s)


def ref_conv_acc(x, x_zp, w, w_zp, strides, pads, dil, group):
    """The exact sums of (x - x_zp)(w - w_zp) over each window: x (N, C, D..),
    w (M, C/group, k..), w_zp scalar or (M,); the padding is x_zp (0 once
    shifted). Returns (N, M, out..) int64."""
    nsp = x.ndim - 2
    xd = np.pad(x.astype(np.int64) - int(x_zp), [(0, 0), (0, 0)] + [(pads[i], pads[nsp + i]) for i in range(nsp)])
    wd = w.astype(np.int64) - np.asarray(w_zp, np.int64).reshape([-1] + [1] * (w.ndim - 1))
    M, Cg, k = w.shape[0], w.shape[1], w.shape[2:]
    Mg = M // group
    out = [(xd.shape[2 + i] - dil[i] * (k[i] - 1) - 1) // strides[i] + 1 for i in range(nsp)]
    acc = np.zeros([x.shape[0], M] + out, np.int64)
    for off in np.ndindex(*k):
        win = xd[(slice(None), slice(None)) + tuple(
            slice(off[i] * dil[i], off[i] * dil[i] + strides[i] * (out[i] - 1) + 1, strides[i]) for i in range(nsp))]
        for g in range(group):
            acc[:, g * Mg:(g + 1) * Mg] += np.einsum("nc...,mc->nm...", win[:, g * Cg:(g + 1) * Cg],
                                                     wd[(slice(g * Mg, (g + 1) * Mg), slice(None)) + off])
    return acc


def ref_qlinearconv(x, i, attrs):
    """QLinearConv on x with the initializers i (xs, xz, w, ws, wz, ys, yz, B)."""
    acc = ref_conv_acc(x, i["xz"], i["w"], i["wz"], attrs["strides"], attrs["pads"], attrs["dilations"],
                       attrs["group"])
    if "B" in i:
        acc += i["B"].astype(np.int64).reshape([1, -1] + [1] * (x.ndim - 2))
    mult = ref_mult(i["xs"], i["ws"], i["ys"]).reshape([1, -1] + [1] * (x.ndim - 2))
    return ref_requant(acc, mult, i["yz"].dtype.type, i["yz"])


def ref_matmul_acc(a, a_zp, b, b_zp):
    """The exact sums of (a - a_zp)(b - b_zp) with MatMul's broadcasting;
    b_zp scalar or (N,) per column."""
    return np.matmul(a.astype(np.int64) - int(a_zp), b.astype(np.int64) - np.asarray(b_zp, np.int64))


def ref_qlinearmatmul(a, i):
    """QLinearMatMul on a with the initializers i (as, az, b, bs, bz, ys, yz)."""
    return ref_requant(ref_matmul_acc(a, i["az"], i["b"], i["bz"]), ref_mult(i["as"], i["bs"], i["ys"]),
                       i["yz"].dtype.type, i["yz"])


def w7(w):
    """int8 weights halved (arithmetic shift) into [-64, 63], what
    reduce_range gives: onnxruntime's u8s8 kernels are exact on them."""
    return (w.astype(np.int16) >> 1).astype(np.int8)


def variants(x_dt, inits, wname):
    """The case's initializers, plus where onnxruntime's kernels are not
    exact for them (ort_int_exact) the same with 7-bit weights (tag " w7"),
    so that onnxruntime stays an oracle there too; the full-range case is
    checked against the int64 reference. Yields (inits, tag suffix)."""
    yield inits, ""
    if not ort_int_exact(x_dt, inits[wname]):
        yield dict(inits, **{wname: w7(inits[wname])}), " w7"


def suite_integer(R, rng):
    """Every case against the exact int64 reference (ref_*) and, where its
    kernels are exact on this CPU (ort_int_exact), onnxruntime; where not,
    also with 7-bit weights against both (variants)."""
    print("integer: oracles the int64 reference and onnxruntime; onnxruntime's u8 x s8 sums %s (%s)" % (
        "exact" if ORT_U8S8_EXACT else "can saturate: full-range u8/s8 cases vs the reference alone, plus w7 "
        "copies (7-bit weights) vs both", ORT_U8S8_WHY), flush=True)
    n = 0
    combos = ((np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8))
    for gi, (xs, M, k, group, strides, pads, dil) in enumerate(CONV_GEOMS):
        for xdt, wdt in combos:
            for per_channel in (False, True):
                C = xs[1]
                ws_shape = [M, C // group] + k
                x = rq(rng, xdt, xs)
                w = rq(rng, wdt, ws_shape)
                x_s = np.float32(rng.uniform(0.01, 0.05))
                w_s = rng.uniform(0.005, 0.05, size=M).astype(np.float32) if per_channel else np.float32(0.02)
                w_z = zp_of(rng, wdt) if wdt == np.uint8 else np.array(0, wdt)
                if per_channel:
                    w_z = np.full(M, w_z, wdt)  # onnxruntime wants one filter zero point
                y_dt = xdt
                # y_scale small enough that a share of the outputs saturates at both ends
                y_s = np.float32(rng.uniform(0.1, 0.8))
                with_bias = bool(n % 2)
                inits = {"xs": np.array(x_s, np.float32), "xz": zp_of(rng, xdt), "w": w, "ws": np.asarray(w_s, np.float32),
                         "wz": np.asarray(w_z, wdt), "ys": np.array(y_s, np.float32), "yz": zp_of(rng, y_dt)}
                ins = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
                if with_bias:
                    inits["B"] = rng.integers(-5000, 5000, size=M).astype(np.int32)
                    ins.append("B")
                attrs = {"strides": strides, "pads": pads, "dilations": dil, "group": group, "kernel_shape": k}
                oshape = conv_out_shape(xs, ws_shape, strides, pads, dil)
                tag = "QLinearConv g%d %s/%s %s%s" % (gi, np.dtype(xdt).name, np.dtype(wdt).name,
                                                    "perchan" if per_channel else "tensor", " B" if with_bias else "")
                for i, t in variants(xdt, inits, "w"):
                    m = int_model(("QLinearConv", ins), [("x", xdt, xs)], i, y_dt, oshape, attrs)
                    R.compare(tag + t, R.save(m, "int%d%s" % (n, t.replace(" ", "_"))), {"x": x}, max_steps=1,
                              exact={"y": ref_qlinearconv(x, i, attrs)}, ort_oracle=ort_int_exact(xdt, i["w"]))
                n += 1
        # ConvInteger (onnxruntime: uint8 x and w) on the same geometry
        C = xs[1]
        ws_shape = [M, C // group] + k
        x, w = rq(rng, np.uint8, xs), rq(rng, np.uint8, ws_shape)
        inits = {"w": w, "xz": zp_of(rng, np.uint8), "wz": zp_of(rng, np.uint8)}
        attrs = {"strides": strides, "pads": pads, "dilations": dil, "group": group}
        m = int_model(("ConvInteger", ["x", "w", "xz", "wz"]), [("x", np.uint8, xs)], inits, np.int32,
                      conv_out_shape(xs, ws_shape, strides, pads, dil), attrs)
        acc = ref_conv_acc(x, inits["xz"], w, inits["wz"], strides, pads, dil, group)
        R.compare("ConvInteger g%d uint8/uint8" % gi, R.save(m, "int%d" % n), {"x": x},
                  exact={"y": acc.astype(np.int32)})
        n += 1
    R.report(R.sat_lo > 5 and R.sat_hi > 5, "saturation exercised",
             "%d convs reach the lowest value, %d the highest" % (R.sat_lo, R.sat_hi))
    R.sat_lo = R.sat_hi = 0
    MM_SHAPES = [([5, 7], [7, 3]), ([2, 4, 9], [9, 6]), ([3, 1, 4, 5], [2, 5, 3]), ([6], [6, 4]), ([1, 33], [33, 17])]
    for si, (ash, bsh) in enumerate(MM_SHAPES):
        out_shape = list(np.matmul(np.zeros(ash), np.zeros(bsh)).shape)
        N = bsh[-1]
        for adt, bdt in combos:
            for per_col in ((False, True) if len(bsh) == 2 else (False,)):
                a, b = rq(rng, adt, ash), rq(rng, bdt, bsh)
                inits = {"as": np.array(rng.uniform(0.01, 0.05), np.float32), "az": zp_of(rng, adt), "b": b,
                         "bs": (rng.uniform(0.005, 0.05, size=N) if per_col else np.array(0.02)).astype(np.float32),
                         "bz": (np.full(N, zp_of(rng, bdt), bdt) if per_col else zp_of(rng, bdt)),
                         "ys": np.array(rng.uniform(0.1, 0.6), np.float32), "yz": zp_of(rng, adt)}
                tag = "QLinearMatMul s%d %s/%s %s" % (si, np.dtype(adt).name, np.dtype(bdt).name,
                                                      "percol" if per_col else "tensor")
                for i, t in variants(adt, inits, "b"):
                    m = int_model(("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]),
                                  [("a", adt, ash)], i, adt, out_shape)
                    R.compare(tag + t, R.save(m, "int%d%s" % (n, t.replace(" ", "_"))), {"a": a}, max_steps=1,
                              exact={"y": ref_qlinearmatmul(a, i)}, ort_oracle=ort_int_exact(adt, i["b"]))
                n += 1
            a, b = rq(rng, adt, ash), rq(rng, bdt, bsh)
            bz = rng.integers(*qtype_range(bdt), size=N).astype(bdt) if len(bsh) == 2 else zp_of(rng, bdt)
            tag = "MatMulInteger s%d %s/%s%s" % (si, np.dtype(adt).name, np.dtype(bdt).name,
                                                 " percol-zp" if len(bsh) == 2 else "")
            for i, t in variants(adt, {"b": b, "az": zp_of(rng, adt), "bz": bz}, "b"):
                m = int_model(("MatMulInteger", ["a", "b", "az", "bz"]), [("a", adt, ash)], i, np.int32, out_shape)
                R.compare(tag + t, R.save(m, "int%d%s" % (n, t.replace(" ", "_"))), {"a": a},
                          exact={"y": ref_matmul_acc(a, i["az"], i["b"], i["bz"]).astype(np.int32)},
                          ort_oracle=ort_int_exact(adt, i["b"]))
            n += 1
    R.report(R.sat_lo > 5 and R.sat_hi > 5, "saturation exercised",
             "%d matmuls reach the lowest value, %d the highest" % (R.sat_lo, R.sat_hi))


def suite_hostile(R, rng):
    shape = [2, 3]
    s3 = np.full(3, 0.1, np.float32)
    for what, bad in (("scale0", 0.0), ("scale_neg", -0.5), ("scale_nan", float("nan")), ("scale_inf", float("inf"))):
        s = s3.copy()
        s[1] = bad
        m = qdq_model(13, "DequantizeLinear", np.int8, shape, s, np.zeros(3, np.int8), 1, None)
        R.refuse(what, m, "dq0", ["finite and positive"])
        m = qdq_model(13, "QuantizeLinear", np.float32, shape, s, np.zeros(3, np.uint8), 1, np.uint8)
        R.refuse(what + "_q", m, "q0", ["finite and positive"])
    m = qdq_model(13, "DequantizeLinear", np.int8, shape, s3, np.zeros(3, np.uint8), 1, None)
    R.refuse("zp_dtype", m, "dq0", ["zero point", "u8"])
    m = qdq_model(13, "DequantizeLinear", np.int32, shape, s3, np.array([0, 7, 0], np.int32), 1, None)
    R.refuse("zp_i32_nonzero", m, "dq0", ["must be 0"])
    m = qdq_model(13, "QuantizeLinear", np.float32, shape, s3, np.zeros(3, np.int32), 1, np.int8)
    R.refuse("zp_i32_q", m, "q0", ["zero point"])
    # integer ops: a NaN weight scale, a zero point of the wrong dtype
    w = np.ones((2, 3, 1, 1), np.int8)
    inits = {"xs": np.array(0.1, np.float32), "xz": np.array(0, np.uint8), "w": w,
             "ws": np.array([0.1, float("nan")], np.float32), "wz": np.array(0, np.int8),
             "ys": np.array(0.1, np.float32), "yz": np.array(0, np.uint8)}
    m = int_model(("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]), [("x", np.uint8, [1, 3, 2, 2])],
                  inits, np.uint8, [1, 2, 2, 2], name="qc")
    R.refuse("qlinearconv_nan", m, "qc", ["input 4", "finite and positive"])
    m = int_model(("MatMulInteger", ["a", "b", "az"]), [("a", np.uint8, [2, 3])],
                  {"b": np.ones((3, 2), np.int8), "az": np.array(0, np.int8)}, np.int32, [2, 2], name="mmi")
    R.refuse("matmulinteger_zp", m, "mmi", ["zero point (input 2)", "i8"])
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


# ------------------------------------------------------------------ fold / gpu

def small_cnn(rng, kind):
    """A float CNN with random weights: convs (odd channels, stride, depthwise),
    Relu, a residual Add, MaxPool, LeakyRelu, GlobalAveragePool, Flatten,
    Gemm (transB)."""
    inits, nodes = {}, []

    def w(name, shape, scale):
        inits[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
        return name
    nodes.append(helper.make_node("Conv", ["x", w("w1", [8, 3, 3, 3], 0.3), w("b1", [8], 0.1)], ["c1"], name="conv1",
                                  pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"], name="relu1"))
    nodes.append(helper.make_node("Conv", ["r1", w("w2", [5, 8, 3, 3], 0.2), w("b2", [5], 0.1)], ["c2"], name="conv2",
                                  pads=[1, 0, 1, 1], strides=[2, 2]))
    nodes.append(helper.make_node("Relu", ["c2"], ["r2"], name="relu2"))
    nodes.append(helper.make_node("Conv", ["r2", w("w3", [5, 1, 3, 3], 0.4), w("b3", [5], 0.1)], ["c3"], name="dw3",
                                  pads=[1, 1, 1, 1], group=5))
    nodes.append(helper.make_node("Add", ["c3", "r2"], ["a3"], name="add3"))
    nodes.append(helper.make_node("MaxPool", ["a3"], ["p3"], name="pool3", kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("Conv", ["p3", w("w4", [7, 5, 1, 1], 0.4)], ["c4"], name="conv4"))
    nodes.append(helper.make_node("LeakyRelu", ["c4"], ["l4"], name="leaky4", alpha=0.1))
    nodes.append(helper.make_node("GlobalAveragePool", ["l4"], ["g4"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["g4"], ["f4"], name="flat"))
    if kind == "gemm":
        nodes.append(helper.make_node("Gemm", ["f4", w("wf", [10, 7], 0.4), w("bf", [10], 0.1)], ["y"], name="fc",
                                      transB=1))
    else:
        nodes.append(helper.make_node("MatMul", ["f4", w("wf", [7, 10], 0.4)], ["y"], name="fc"))
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 15])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def quantized_cnn(R, rng, kind, per_channel, act_type, tag):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": rng.standard_normal([2, 3, 16, 15]).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.data, None)
    fp = R.save(small_cnn(rng, kind), tag + "_f32")
    qp = os.path.join(R.work, tag + "_qdq.onnx")
    quantize_static(fp, qp, Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=act_type, weight_type=QuantType.QInt8)
    return qp


def out_step(path):
    """The scale of the DequantizeLinear that makes graph output 'y'."""
    m = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] == "y":
            return float(inits[n.input[1]])
    return None


def qdq_run(R, path, feeds, tag, flags=()):
    d = os.path.join(R.work, "run", tag)
    os.makedirs(d, exist_ok=True)
    args = [R.qdq_run, path, d] + list(flags)
    for name, arr in feeds.items():
        f = os.path.join(d, "in_%s.bin" % name)
        np.ascontiguousarray(arr).tofile(f)
        args.append("%s=%s" % (name, f))
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode == SKIP:
        print(r.stdout.strip())
        sys.exit(SKIP)
    if r.returncode != 0:
        raise RuntimeError("qdq_run exited %d: %s" % (r.returncode, r.stderr.strip()[-400:]))
    res = json.loads(r.stdout)
    dt = {"f32": np.float32, "i8": np.int8, "u8": np.uint8, "i32": np.int32}
    outs = {o["name"]: np.fromfile(o["file"], dt[o["dtype"]]).reshape(o["shape"]) for o in res["outputs"]}
    return outs, res


def run_folded_unfolded(R, path, feeds, run_tag, tag):
    """onnxruntime's y, then the session's outputs with the Q/DQ pass (folded) and
    with ERT_SESSION_NO_FUSE (unfolded): (want, got, res, unf, res_u), or None
    with the failure reported."""
    want = R.ort_run(path, feeds)["y"]
    try:
        got, res = qdq_run(R, path, feeds, run_tag)
        unf, res_u = qdq_run(R, path, feeds, run_tag + "_nf", ["--no-fuse"])
    except RuntimeError as e:
        R.report(False, tag, str(e))
        return None
    return want, got, res, unf, res_u


def steps_off(got, ref, step):
    return float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max() / step)


def suite_fold(R, rng):
    """quantize_static (QDQ) CNNs: folded edgert vs onnxruntime within one
    output step (its own QDQ fusions on, or off where its fused u8s8 kernels
    saturate: ort_qdq_oracle), unfolded edgert vs onnxruntime with
    optimisations off within one step, folded vs unfolded, and the folded
    graph really holds integer ops (3 QLinearConv + the depthwise one, a
    QLinearMatMul for the Gemm/MatMul head, the residual Add as
    ert.QLinearAdd, the LeakyRelu as ert.QLut, MaxPool and Flatten on
    int8)."""
    from onnxruntime.quantization import QuantType
    n = 0
    for kind in ("gemm", "matmul"):
        for per_channel in (True, False):
            for act in (QuantType.QUInt8, QuantType.QInt8):
                tag = "%s_%s_%s" % (kind, "perchan" if per_channel else "tensor", "u8" if act == QuantType.QUInt8 else "s8")
                qp = quantized_cnn(R, rng, kind, per_channel, act, tag)
                step = out_step(qp)
                x = rng.standard_normal([2, 3, 16, 15]).astype(np.float32)
                ref, fused, who = ort_qdq_oracle(qp, {"x": x})
                ref_plain = R.ort_run(qp, {"x": x})["y"]
                try:
                    got, res = qdq_run(R, qp, {"x": x}, tag)
                    unf, res_u = qdq_run(R, qp, {"x": x}, tag + "_nofuse", ["--no-fuse"])
                except RuntimeError as e:
                    R.report(False, "fold " + tag, str(e))
                    continue
                ops = res["ops"]
                n_int = ops.get("QLinearConv", 0) + ops.get("QLinearMatMul", 0)
                # 5 integer ops, the residual Add (ert.QLinearAdd), the LeakyRelu (an ert.QLut, then fused
                # into the conv before it: its input 9), the MaxPool and the Flatten on int8 each remove one
                # QuantizeLinear
                ok_ops = ops.get("QLinearConv", 0) == 4 and ops.get("QLinearMatMul", 0) == 1 and \
                    ops.get("ert.QLinearAdd", 0) == 1 and "Add" not in ops and \
                    "ert.QLut" not in ops and "LeakyRelu" not in ops and \
                    "QLinearConv" not in res_u["ops"] and "ert.QLinearAdd" not in res_u["ops"] and \
                    "ert.QLut" not in res_u["ops"] and \
                    ops.get("QuantizeLinear", 0) == res_u["ops"].get("QuantizeLinear", 0) - 9
                R.report(ok_ops, "fold %s ops" % tag, "folded: %s" % json.dumps(ops))
                a, b, c = steps_off(got["y"], ref, step), steps_off(unf["y"], ref_plain, step), \
                    steps_off(got["y"], unf["y"], step)
                R.report(a <= 1.0001, "fold %s vs onnxruntime" % tag, "%s; %d integer ops" % (
                    oracle_words(got["y"], ref, fused, who, step), n_int))
                R.report(b <= 1.0001, "fold %s unfolded vs onnxruntime" % tag,
                         "%.2f steps off onnxruntime (optimisations off)" % b)
                R.report(c <= 2.0001, "fold %s folded vs unfolded" % tag, "%.2f steps apart" % c)
                n += 1


def suite_gpu(R, rng):
    """A QDQ CNN on a CUDA session: the integer ops run on the GPU's int8
    kernels (no CPU fallback node) and the output equals the CPU session's
    (tests/cuda/quant_cuda.py checks the kernels one by one)."""
    from onnxruntime.quantization import QuantType
    qp = quantized_cnn(R, rng, "gemm", True, QuantType.QUInt8, "gpu")
    x = rng.standard_normal([2, 3, 16, 15]).astype(np.float32)
    cpu, rc = qdq_run(R, qp, {"x": x}, "gpu_cpu")
    gpu, rg = qdq_run(R, qp, {"x": x}, "gpu_cuda", ["--device", "cuda"])
    n_int = rc["ops"].get("QLinearConv", 0) + rc["ops"].get("QLinearMatMul", 0)
    R.report(rg["n_cpu_fallback"] == 0 and n_int == 5, "gpu fallback count",
             "%d nodes on the CPU fallback, %d integer ops" % (rg["n_cpu_fallback"], n_int))
    step = out_step(qp)
    d = steps_off(gpu["y"], cpu["y"], step)
    R.report(d <= 1.0001, "gpu vs cpu", "%.2f steps apart (float ops between the integer ones run on the GPU)" % d)


def suite_ert(R, rng):
    """A QDQ model saved as .ert: int8 weights stay int8 (the file about 4x
    smaller than the f32 model's .ert), and the .ert runs exactly like the
    ONNX file (folded) on the same input."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    inits = {"w1": rng.standard_normal([128, 16, 3, 3]) * 0.1, "b1": rng.standard_normal(128) * 0.1,
             "w2": rng.standard_normal([128, 128, 3, 3]) * 0.03, "b2": rng.standard_normal(128) * 0.1,
             "wf": rng.standard_normal([100, 128]) * 0.1, "bf": rng.standard_normal(100) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)]
    g = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 100])],
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    fp = R.save(m, "wide_f32")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": rng.standard_normal([1, 16, 12, 12]).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.data, None)
    qp = os.path.join(R.work, "wide_qdq.onnx")
    quantize_static(fp, qp, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    fe, qe = os.path.join(R.work, "wide_f32.ert"), os.path.join(R.work, "wide_qdq.ert")
    for src, dst in ((fp, fe), (qp, qe)):
        r = subprocess.run(R.edgert + ["convert", src, dst], capture_output=True, text=True)
        if r.returncode != 0:
            R.report(False, "ert convert", r.stderr.strip()[-300:])
            return
    ratio = os.path.getsize(qe) / os.path.getsize(fe)
    R.report(ratio <= 0.3, "ert size", "QDQ .ert %d bytes / f32 .ert %d bytes = %.3f (max 0.3)" % (
        os.path.getsize(qe), os.path.getsize(fe), ratio))
    x = rng.standard_normal([1, 16, 12, 12]).astype(np.float32)
    from_onnx, _ = qdq_run(R, qp, {"x": x}, "wide_onnx")
    from_ert, res = qdq_run(R, qe, {"x": x}, "wide_ert")
    R.report(np.array_equal(from_onnx["y"], from_ert["y"]) and res["ops"].get("QLinearConv", 0) == 2,
             "ert round trip", "the .ert's output equals the ONNX file's; folded ops %s" % json.dumps(res["ops"]))
    ref, fused, who = ort_qdq_oracle(qp, {"x": x})
    step = out_step(qp)
    R.report(steps_off(from_ert["y"], ref, step) <= 1.0001, "ert vs onnxruntime",
             oracle_words(from_ert["y"], ref, fused, who, step))


def suite_pool(R, rng):
    """DQ -> MaxPool -> Q of one scale and zero point (what quantize_static
    writes): the pass runs MaxPool on the int8/uint8 data itself; output
    equal to onnxruntime's, and no QuantizeLinear left in the schedule."""
    geoms = [([1, 3, 7, 8], dict(kernel_shape=[2, 2], strides=[2, 2])),
             ([2, 5, 9, 7], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
             ([1, 4, 8, 8], dict(kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 1, 0], ceil_mode=1)),
             ([1, 2, 9, 9], dict(kernel_shape=[2, 2], strides=[1, 1], dilations=[2, 2])),
             ([2, 3, 10], dict(kernel_shape=[3], strides=[2], pads=[1, 1]))]
    for gi, (xs, attrs) in enumerate(geoms):
        for dt in (np.uint8, np.int8):
            sc, zp = np.array(0.05, np.float32), zp_of(rng, dt)
            nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["d"], name="dq"),
                     helper.make_node("MaxPool", ["d"], ["p"], name="pool", **attrs),
                     helper.make_node("QuantizeLinear", ["p", "s", "z"], ["y"], name="q")]
            ref = onnx.shape_inference.infer_shapes(helper.make_model(helper.make_graph(
                nodes[:2], "g", [helper.make_tensor_value_info("x", NP2ONNX[dt], xs)],
                [helper.make_tensor_value_info("p", TensorProto.FLOAT, None)],
                [numpy_helper.from_array(sc, "s"), numpy_helper.from_array(zp, "z")])))
            oshape = [d.dim_value for d in ref.graph.output[0].type.tensor_type.shape.dim]
            g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", NP2ONNX[dt], xs)],
                                  [helper.make_tensor_value_info("y", NP2ONNX[dt], oshape)],
                                  [numpy_helper.from_array(sc, "s"), numpy_helper.from_array(zp, "z")])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
            m.ir_version = 7
            path = R.save(m, "pool%d_%s" % (gi, np.dtype(dt).name))
            x = rq(rng, dt, xs)
            want = R.ort_run(path, {"x": x})["y"]
            tag = "MaxPool int8 g%d %s" % (gi, np.dtype(dt).name)
            try:
                got, res = qdq_run(R, path, {"x": x}, tag.replace(" ", "_"))
            except RuntimeError as e:
                R.report(False, tag, str(e))
                continue
            ok = np.array_equal(got["y"], want) and "QuantizeLinear" not in res["ops"]
            R.report(ok, tag, "%s %s equal: %s; ops %s" % (want.dtype, want.shape, np.array_equal(got["y"], want),
                                                           json.dumps(res["ops"])))


    add_cases(R, rng)
    lut_cases(R, rng)
    conv_lut_cases(R, rng)


def conv_lut_model(rng, xdt, ydt, x_shape, M, k, group, stride, act, bias, extra_conv_output=False):
    """QLinearConv (int8 or uint8 y) -> DQ -> LUT_ACTS[act]'s float nodes -> Q (y of ydt): the
    chain the Q/DQ pass folds to ert.QLut and then into the conv (input 9) when ydt is the conv's
    type and only the DQ reads the conv. extra_conv_output: the conv's output also a graph output."""
    name, build, fn, approx = LUT_ACTS[act]
    C = x_shape[1]
    w_shape = [M, C // group, k, k]
    pads = [k // 2] * 4
    cdt = xdt  # the conv's y: the type of its zero point
    w = rq(rng, np.int8, w_shape)
    inits = {"xs": np.array(rng.uniform(0.01, 0.05), np.float32), "xz": zp_of(rng, xdt), "w": w,
             "ws": rng.uniform(0.005, 0.03, size=M).astype(np.float32), "wz": np.zeros(M, np.int8),
             "cs": np.array(rng.uniform(0.1, 0.4) * np.sqrt(C // group * k * k / 27.0), np.float32),
             "cz": zp_of(rng, cdt)}
    cin = ["x", "xs", "xz", "w", "ws", "wz", "cs", "cz"]
    if bias:
        inits["B"] = rng.integers(-3000, 3000, size=M).astype(np.int32)
        cin.append("B")
    clo, chi = qtype_range(cdt)
    v = (np.arange(clo, chi + 1) - int(inits["cz"])).astype(np.float64) * float(inits["cs"])
    y_s, y_z = lut_y_quant(rng, fn(v), ydt)
    body, binits = build()
    inits.update(binits)
    inits["ys"], inits["yz"] = np.array(y_s, np.float32), y_z
    out_shape = conv_out_shape(x_shape, w_shape, [stride] * 2, pads, [1, 1])
    nodes = [helper.make_node("QLinearConv", cin, ["c"], name="conv", strides=[stride] * 2, pads=pads, group=group,
                              kernel_shape=[k, k]),
             helper.make_node("DequantizeLinear", ["c", "cs", "cz"], ["d"], name="dq")] + body + \
        [helper.make_node("QuantizeLinear", ["f", "ys", "yz"], ["y"], name="q")]
    outs = [helper.make_tensor_value_info("y", NP2ONNX[ydt], out_shape)]
    if extra_conv_output:
        outs.append(helper.make_tensor_value_info("c", NP2ONNX[cdt], out_shape))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", NP2ONNX[xdt], x_shape)], outs,
                          [numpy_helper.from_array(np.asarray(v), k2) for k2, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 7
    return m, approx


CONV_LUT_CASES = [  # (x shape, M, k, group, stride, LUT_ACTS index, bias, y the conv's type)
    ([1, 5, 9, 11], 7, 3, 1, 1, 0, True, True),      # Relu
    ([2, 16, 12, 12], 32, 3, 1, 2, 5, False, True),  # SiLU x*Sigmoid(x), strided
    ([1, 24, 10, 10], 24, 3, 24, 1, 6, True, True),  # depthwise, HardSwish
    ([1, 40, 7, 7], 64, 1, 1, 1, 1, True, True),     # 1x1, Relu6
    ([1, 32, 8, 8], 48, 3, 1, 1, 8, False, True),    # Tanh
    ([1, 6, 8, 8], 9, 3, 1, 1, 7, True, False),      # HardSigmoid, y of the other type: stays an ert.QLut
]


def conv_lut_cases(R, rng):
    """QLinearConv -> DQ -> element-wise float nodes -> Q: the pass folds the
    chain into an ert.QLut and that into the conv (its input 9: the conv's
    epilogue looks its requantised byte up). Checked against onnxruntime
    (exact, or one step where its own exp/x/6 rounds otherwise) and the
    unfolded session (bit for bit), int8 and uint8, with the schedule: one
    QLinearConv and no QLut; not fused (and still right) where y is of the
    other integer type or the conv's output is also a graph output."""
    for ci, (xs, M, k, group, stride, act, bias, same) in enumerate(CONV_LUT_CASES):
        for xdt in (np.int8, np.uint8):
            ydt = xdt if same else (np.uint8 if xdt == np.int8 else np.int8)
            for extra in ((False, True) if ci == 0 else (False,)):
                m, approx = conv_lut_model(rng, xdt, ydt, xs, M, k, group, stride, act, bias, extra)
                fused = same and not extra
                tag = "conv+QLut %s c%d %s->%s%s" % (LUT_ACTS[act][0], ci, np.dtype(xdt).name, np.dtype(ydt).name,
                                                    " (conv output also a graph output)" if extra else "")
                run_tag = "convlut%d_%d_%d" % (ci, xdt == np.int8, extra)
                path = R.save(m, run_tag)
                x = rq(rng, xdt, xs)
                r = run_folded_unfolded(R, path, {"x": x}, run_tag, tag)
                if r is None:
                    continue
                want, got, res, unf, _ = r
                d = np.abs(got["y"].astype(np.int64) - want.astype(np.int64))
                ops_ok = res["ops"] == {"QLinearConv": 1} if fused else \
                    (res["ops"].get("QLinearConv") == 1 and res["ops"].get("ert.QLut") == 1)
                ok = np.array_equal(got["y"], unf["y"]) and int(d.max()) <= (1 if approx else 0) and ops_ok
                R.report(ok, tag, "%s: equal to the unfolded session: %s; vs onnxruntime: %s; ops %s" % (
                    "fused" if fused else "not fused", np.array_equal(got["y"], unf["y"]),
                    "exact" if d.max() == 0 else "%d of %d one step off" % (int((d > 0).sum()), d.size),
                    json.dumps(res["ops"])))


def add_cases(R, rng):
    """DQ(a) + DQ(b) -> [Relu] -> Q, the residual join of quantize_static's
    QDQ ResNets: the pass makes it one ert.QLinearAdd on the integers; its
    output is bit-exact with the unfolded session (the same f32 operations)
    and with onnxruntime (optimisations off: DQ, Add, Q as written); int8 and
    uint8 in every mix, zero points absent or not, odd shapes, outputs that
    saturate at both ends."""
    shapes = [[1, 7, 5, 3], [2, 16, 9, 9], [3, 33], [1, 1, 1, 1]]
    combos = [(np.int8, np.int8, np.int8), (np.uint8, np.uint8, np.uint8), (np.uint8, np.int8, np.int8),
              (np.int8, np.uint8, np.uint8)]
    for si, shape in enumerate(shapes):
        for ci, (at, bt, yt) in enumerate(combos):
            relu = (si + ci) % 2 == 1
            no_zp = ci == 0 and si % 2 == 0  # zero points omitted: 0
            inits = {"as": np.array(rng.uniform(0.01, 0.1), np.float32),
                     "bs": np.array(rng.uniform(0.01, 0.1), np.float32),
                     # a y scale below the inputs' range so a share saturates at both ends
                     "ys": np.array(rng.uniform(0.02, 0.12), np.float32)}
            if not no_zp:
                inits.update({"az": zp_of(rng, at), "bz": zp_of(rng, bt), "yz": zp_of(rng, yt)})
            dq = lambda x, s, z: helper.make_node("DequantizeLinear", [x, s] + ([] if no_zp else [z]), ["f" + x],
                                                 name="dq_" + x)
            nodes = [dq("a", "as", "az"), dq("b", "bs", "bz"),
                     helper.make_node("Add", ["fa", "fb"], ["s"], name="add")]
            if relu:
                nodes.append(helper.make_node("Relu", ["s"], ["r"], name="relu"))
            nodes.append(helper.make_node("QuantizeLinear", ["r" if relu else "s", "ys"] + ([] if no_zp else ["yz"]),
                                          ["y"], name="q"))
            if no_zp:
                yt = np.uint8  # QuantizeLinear without a zero point writes uint8
            g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", NP2ONNX[at], shape),
                                               helper.make_tensor_value_info("b", NP2ONNX[bt], shape)],
                                  [helper.make_tensor_value_info("y", NP2ONNX[yt], shape)],
                                  [numpy_helper.from_array(v, k) for k, v in inits.items()])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
            m.ir_version = 7
            tag = "QLinearAdd s%d %s+%s->%s%s%s" % (si, np.dtype(at).name, np.dtype(bt).name, np.dtype(yt).name,
                                                  " relu" if relu else "", " no zp" if no_zp else "")
            path = R.save(m, "qadd%d_%d" % (si, ci))
            feeds = {"a": rq(rng, at, shape), "b": rq(rng, bt, shape)}
            r = run_folded_unfolded(R, path, feeds, tag.replace(" ", "_").replace("+", "_").replace(">", ""), tag)
            if r is None:
                continue
            want, got, res, unf, res_u = r
            sat = int(np.sum(want == np.iinfo(yt).min) + np.sum(want == np.iinfo(yt).max))
            ok = np.array_equal(got["y"], want) and np.array_equal(got["y"], unf["y"]) and \
                res["ops"].get("ert.QLinearAdd", 0) == 1 and "QuantizeLinear" not in res["ops"]
            R.report(ok, tag, "equal to onnxruntime: %s, to the unfolded session: %s; %d saturated; ops %s" % (
                np.array_equal(got["y"], want), np.array_equal(got["y"], unf["y"]), sat, json.dumps(res["ops"])))


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


# (name, nodes of y = f(d) over the DQ output "d" with constants {name: value}, numpy f, approx): approx
# marks ops whose onnxruntime CPU kernel evaluates exp/tanh or x/6 by its own approximation, so a value
# that lands next to a rounding boundary may quantize one step away (edgert's table is its unfolded f32
# path; that equality is checked exactly)
LUT_ACTS = [
    ("Relu", lambda: ([helper.make_node("Relu", ["d"], ["f"])], {}), lambda v: np.maximum(v, 0), False),
    ("Clip 0..6", lambda: ([helper.make_node("Clip", ["d", "lo", "hi"], ["f"])],
                           {"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}),
     lambda v: np.clip(v, 0, 6), False),
    ("Clip -1..1.5", lambda: ([helper.make_node("Clip", ["d", "lo", "hi"], ["f"])],
                              {"lo": np.array(-1, np.float32), "hi": np.array(1.5, np.float32)}),
     lambda v: np.clip(v, -1, 1.5), False),
    ("LeakyRelu", lambda: ([helper.make_node("LeakyRelu", ["d"], ["f"], alpha=0.1)], {}),
     lambda v: np.where(v >= 0, v, 0.1 * v), False),
    ("Sigmoid", lambda: ([helper.make_node("Sigmoid", ["d"], ["f"])], {}), _sigmoid, True),
    ("SiLU x*Sigmoid(x)", lambda: ([helper.make_node("Sigmoid", ["d"], ["s"]), helper.make_node("Mul", ["d", "s"], ["f"])],
                                   {}), lambda v: v * _sigmoid(v), True),
    ("HardSwish", lambda: ([helper.make_node("HardSwish", ["d"], ["f"])], {}),
     lambda v: v * np.clip(v / 6 + 0.5, 0, 1), True),
    ("HardSigmoid", lambda: ([helper.make_node("HardSigmoid", ["d"], ["f"], alpha=0.3, beta=0.4)], {}),
     lambda v: np.clip(0.3 * v + 0.4, 0, 1), True),
    ("Tanh", lambda: ([helper.make_node("Tanh", ["d"], ["f"])], {}), np.tanh, True),
    ("Relu(x*0.5+0.25)", lambda: ([helper.make_node("Mul", ["d", "c1"], ["m"]), helper.make_node("Add", ["m", "c2"], ["a"]),
                                   helper.make_node("Relu", ["a"], ["f"])],
                                  {"c1": np.array(0.5, np.float32), "c2": np.array([0.25], np.float32)}),
     lambda v: np.maximum(v * 0.5 + 0.25, 0), False),
    ("(x-1)/3", lambda: ([helper.make_node("Sub", ["d", "c1"], ["m"]), helper.make_node("Div", ["m", "c2"], ["f"])],
                         {"c1": np.array(1, np.float32), "c2": np.array(3, np.float32)}),
     lambda v: (v - 1) / 3, False),
]


def lut_model(xdt, ydt, shape, x_s, x_z, y_s, y_z, body, inits, extra_outputs=(), dq2=False):
    """DQ(x) -> body (reads "d", writes "f") -> Q -> y, opset 14 (HardSwish).
    dq2: "s"-reading nodes get a second DequantizeLinear of x with the same
    scale and zero point (two DQs of one tensor are one input)."""
    inits = dict(inits)
    inits["xs"], inits["ys"] = np.array(x_s, np.float32), np.array(y_s, np.float32)
    if x_z is not None:
        inits["xz"] = x_z
    if y_z is not None:
        inits["yz"] = y_z
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs"] + (["xz"] if x_z is not None else []), ["d"], name="dq")]
    if dq2:
        nodes.append(helper.make_node("DequantizeLinear", ["x", "xs"] + (["xz"] if x_z is not None else []), ["d2"],
                                      name="dq2"))
        body = [helper.make_node(n.op_type, [("d2" if (i == 0 and k == 0) else v) for k, v in enumerate(n.input)],
                                 list(n.output), **{a.name: helper.get_attribute_value(a) for a in n.attribute})
                for i, n in enumerate(body)]
    nodes += body
    nodes.append(helper.make_node("QuantizeLinear", ["f", "ys"] + (["yz"] if y_z is not None else []), ["y"], name="q"))
    outs = [helper.make_tensor_value_info("y", NP2ONNX[ydt], shape)] + \
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, shape) for o in extra_outputs]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", NP2ONNX[xdt], shape)], outs,
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 7
    return m


def lut_y_quant(rng, f, ydt):
    """y scale and zero point for outputs f: 150 to 400 steps over f's range,
    centred (give or take 20 steps), so over half the cases saturate at both
    ends."""
    lo, hi = qtype_range(ydt)
    y_s = max(float(f.max() - f.min()), 1e-3) / float(rng.uniform(150, 400))
    z = (lo + hi) / 2 - (float(f.max()) + float(f.min())) / 2 / y_s + float(rng.uniform(-20, 20))
    return y_s, np.array(int(np.clip(round(z), lo, hi)), ydt)


def lut_cases(R, rng):
    """DQ(x) -> element-wise float nodes -> Q becomes one ert.QLut (a
    256-entry table the pass computes by running those nodes): Relu, Clip,
    LeakyRelu, Sigmoid, x*Sigmoid(x), HardSwish, HardSigmoid, Tanh and
    chains with scalar constants; int8/uint8 in and out in every mix, zero
    points absent or not, odd shapes, every one of the 256 input bytes
    present, y scales that saturate. Folded equals the unfolded session bit
    for bit and onnxruntime (optimisations off) exactly, or within one step
    where onnxruntime's own exp/tanh approximation or x/6 rounds otherwise
    (the line counts the differing values). Then patterns that must stay
    unfolded (and still be right): an intermediate also read as a graph
    output, a per-axis DQ, a second integer input."""
    shapes = [[1, 7, 11, 5], [2, 129], [3, 5, 9, 7], [257]]
    combos = [(np.int8, np.int8), (np.uint8, np.uint8), (np.int8, np.uint8), (np.uint8, np.int8)]
    n = 0
    sat_lo = sat_hi = 0
    for ai, (name, build, fn, approx) in enumerate(LUT_ACTS):
        for ci, (xdt, ydt) in enumerate(combos):
            shape = shapes[(ai + ci) % len(shapes)]
            no_zp = (ai + ci) % 5 == 0
            x_s = float(rng.uniform(0.02, 0.08))
            x_z = None if no_zp else zp_of(rng, xdt)
            if no_zp:
                ydt = np.uint8  # QuantizeLinear without a zero point writes uint8
            lo, hi = qtype_range(xdt)
            v = (np.arange(lo, hi + 1) - (0 if x_z is None else int(x_z))).astype(np.float32) * np.float32(x_s)
            f = fn(v.astype(np.float64))
            y_s, y_z = lut_y_quant(rng, f, ydt)
            if no_zp:
                y_z = None
            body, inits = build()
            dq2 = name.startswith("SiLU") and ci == 1
            m = lut_model(xdt, ydt, shape, x_s, x_z, y_s, y_z, body, inits, dq2=dq2)
            x = rq(rng, xdt, shape)
            flat = x.reshape(-1)
            flat[:256] = np.arange(lo, hi + 1).astype(xdt)[rng.permutation(256)]  # every byte
            tag = "QLut %s %s->%s s%d%s%s" % (name, np.dtype(xdt).name, np.dtype(ydt).name, (ai + ci) % len(shapes),
                                             " no zp" if no_zp else "", " two DQs" if dq2 else "")
            run_tag = "qlut%d_%d" % (ai, ci)
            path = R.save(m, run_tag)
            r = run_folded_unfolded(R, path, {"x": x}, run_tag, tag)
            if r is None:
                continue
            want, got, res, unf, res_u = r
            n += 1
            qlo, qhi = qtype_range(ydt)
            sat_lo += int((want == qlo).any())
            sat_hi += int((want == qhi).any())
            d = np.abs(got["y"].astype(np.int64) - want.astype(np.int64))
            worst, n_diff = int(d.max()), int((d > 0).sum())
            ok = np.array_equal(got["y"], unf["y"]) and worst <= (1 if approx else 0) and \
                res["ops"] == {"ert.QLut": 1} and "ert.QLut" not in res_u["ops"]
            R.report(ok, tag, "equal to the unfolded session: %s; vs onnxruntime: %s; ops %s" % (
                np.array_equal(got["y"], unf["y"]),
                "exact" if worst == 0 else "%d of %d one step off (its %s)" % (
                    n_diff, d.size, "approximation" if approx else "arithmetic"), json.dumps(res["ops"])))
    R.report(sat_lo > 3 and sat_hi > 3, "QLut saturation exercised",
             "%d of %d cases reach the lowest value, %d the highest" % (sat_lo, n, sat_hi))
    # must stay unfolded: (1) the Sigmoid output of x*Sigmoid(x) is also a graph output
    shape = [2, 3, 5, 7]
    x_z, y_z = zp_of(rng, np.int8), zp_of(rng, np.int8)
    m = lut_model(np.int8, np.int8, shape, 0.05, x_z, 0.01, y_z,
                  [helper.make_node("Sigmoid", ["d"], ["s"]), helper.make_node("Mul", ["d", "s"], ["f"])], {},
                  extra_outputs=("s",))
    # (2) a per-axis DQ (a scale per channel): not one table
    m2 = lut_model(np.uint8, np.uint8, shape, 0.05, None, 0.02, zp_of(rng, np.uint8),
                   [helper.make_node("Relu", ["d"], ["f"])], {})
    for t in m2.graph.initializer:
        if t.name == "xs":
            t.CopyFrom(numpy_helper.from_array(rng.uniform(0.02, 0.08, size=3).astype(np.float32), "xs"))
    m2.graph.node[0].attribute.append(helper.make_attribute("axis", 1))
    # (3) a second integer input: DQ(x) * DQ(x2)
    m3 = lut_model(np.int8, np.int8, shape, 0.05, x_z, 0.01, y_z, [helper.make_node("Mul", ["d", "d3"], ["f"])], {})
    m3.graph.input.append(helper.make_tensor_value_info("x2", TensorProto.INT8, shape))
    m3.graph.node.insert(1, helper.make_node("DequantizeLinear", ["x2", "xs", "xz"], ["d3"], name="dq3"))
    for k, (mk, what, feeds) in enumerate(((m, "Sigmoid output also a graph output", {"x": rq(rng, np.int8, shape)}),
                                           (m2, "per-axis DQ", {"x": rq(rng, np.uint8, shape)}),
                                           (m3, "two integer inputs", {"x": rq(rng, np.int8, shape),
                                                                       "x2": rq(rng, np.int8, shape)}))):
        tag = "QLut not folded: %s" % what
        path = R.save(mk, "qlut_no%d" % k)
        want = R.ort_run(path, feeds)
        try:
            got, res = qdq_run(R, path, feeds, "qlut_no%d" % k)
        except RuntimeError as e:
            R.report(False, tag, str(e))
            continue
        ok = "ert.QLut" not in res["ops"] and "QuantizeLinear" in res["ops"] and \
            np.abs(got["y"].astype(np.int64) - want["y"].astype(np.int64)).max() <= 1
        R.report(ok, tag, "ops %s; y within %d step of onnxruntime" % (
            json.dumps(res["ops"]), int(np.abs(got["y"].astype(np.int64) - want["y"].astype(np.int64)).max())))


SUITES = {"qdq": suite_qdq, "integer": suite_integer, "hostile": suite_hostile, "fold": suite_fold,
          "ert": suite_ert, "pool": suite_pool, "gpu": suite_gpu}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgert", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--suite", choices=sorted(SUITES), required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--emulator", default="")
    ap.add_argument("--qdq-run", default="", help="tests/ops/qdq_run (fold and gpu suites)")
    args = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # quantize_static's advice to pre-process the toy models
    R = Runner(args)
    SUITES[args.suite](R, np.random.default_rng(args.seed))
    print("%s: %d passed, %d failed" % (args.suite, R.passed, R.failed))
    sys.exit(1 if R.failed else 0)


if __name__ == "__main__":
    main()

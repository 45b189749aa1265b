#!/usr/bin/env python3
"""CUDA int8 kernels against the CPU integer reference (label gpu).

    python tests/cuda/quant_cuda.py --qdq-run build/tests/qdq_run --work build/quant/cuda [--edgert build/apps/edgert]
        [--seed N] [--jobs N] [--selfcheck]

Every case is a small ONNX model built here (tests/ops/quant_ort.py's
helpers; numpy seed fixed per run), run by tests/ops/qdq_run once on a CPU
session (the integer reference, itself checked against onnxruntime by the
quant_* tests) and once on a CUDA session, on the same random inputs:
  Q / DQ         QuantizeLinear / DequantizeLinear, per-tensor and per-axis,
                 int8 and uint8, with and without zero points, int32 DQ;
                 data that saturates and exact .5 ties. Bit-exact.
  QLinearConv    1-D, 2-D, 3-D; odd channel counts; 1x1, 3x3, strided,
  ConvInteger    asymmetric pads, dilations, groups, depthwise; u8/u8,
                 u8/s8, s8/s8; per-tensor and per-channel; with and without
                 bias; non-zero zero points; outputs saturating at both ends
                 (checked to happen); every kernel: the int8 tensor cores
                 (int8 filters with zero or small zero points; K split over
                 blocks; pixel tiles across images; groups), the CUDA-core
                 GEMM tiles (uint8 filters, shifted filters that leave int8)
                 and the direct one for few channels per group. Bit-exact.
                 2-D convs twice: channels-last (the CUDA session's
                 default; a DequantizeLinear after the conv keeps its
                 output inside the graph) and NCHW (--no-nhwc), each
                 asserting which layout ran; every fourth also with
                 ERT_SESSION_NO_PACK (--no-pack: the CUDA-core kernel).
                 Every tensor-core conv must hold its filter only in its
                 packing (no copy in the arena: qdq_run's n_packed_only).
  QLinearMatMul  2-D B (any A rank), equal batch dims; per-column B; the
  MatMulInteger  broadcast case stays on the CPU fallback (counted).
  MaxPool int8   DQ -> MaxPool -> Q folded to MaxPool on the integers.
  QLinearAdd     DQ + DQ -> [Relu] -> Q folded to ert.QLinearAdd: int8/uint8
                 mixes, sizes of whole 4-byte words and not. Bit-exact.
  QLut           DQ -> element-wise float nodes (Relu, Clip, Sigmoid,
                 x*Sigmoid(x), HardSwish, ...) -> Q folded to ert.QLut (a
                 256-entry table): int8/uint8 mixes, sizes with and without
                 a tail of 1-3 bytes past the 4-byte words, several blocks.
                 Bit-exact, the one node on the GPU.
  conv+QLut      QLinearConv -> DQ -> float activation -> Q: the table
                 fused into the conv's epilogue (tensor cores, CUDA cores,
                 both layouts). Bit-exact.
  CNN            quantize_static (QDQ) CNNs: every node on the GPU (no CPU
                 fallback), output within one output step of the CPU
                 session's (the float Add / GlobalAveragePool between the
                 integer ops sum in another order on the GPU); with --edgert
                 also CNNs quantized by `edgert quantize` (int8 symmetric,
                 what bench/int8 runs), within 1e-2 relative L2 (their last
                 Gemm stays float).
Every other case must run with no CPU fallback node. Exit 0 all passed,
1 a check failed, 77 skipped (no GPU / no CUDA backend / no onnx, onnxruntime,
numpy), with the reason on stdout.
"""
import argparse
import concurrent.futures
import json
import logging
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ops"))
import quant_ort as Q  # noqa: E402  (re-executes with .deps/venv when onnx is missing)
from quant_ort import helper, np, numpy_helper, TensorProto  # noqa: E402

CONV_GEOMS = Q.CONV_GEOMS + [  # (x shape, M, kernel, group, strides, pads, dilations); these reach the GEMM tiles
    ([2, 19, 13, 11], 37, [3, 3], 1, [1, 1], [1, 1, 1, 1], [1, 1]),
    ([1, 67, 9, 7], 96, [1, 1], 1, [1, 1], [0, 0, 0, 0], [1, 1]),        # 1x1, two row tiles
    ([2, 24, 15, 15], 70, [3, 3], 1, [2, 2], [1, 0, 1, 1], [1, 1]),      # strided, asymmetric pads
    ([1, 32, 10, 9], 48, [3, 3], 2, [1, 1], [1, 1, 1, 1], [1, 1]),       # two groups of 24
    ([3, 16, 12, 12], 16, [3, 3], 16, [2, 2], [1, 1, 1, 1], [1, 1]),     # depthwise, strided
    ([1, 130, 7, 7], 65, [3, 3], 1, [1, 1], [1, 1, 1, 1], [2, 2]),       # K = 1170, dilated
    ([2, 20, 40], 33, [5], 1, [2], [2, 2], [1]),                         # 1-D
    ([1, 5, 5, 6, 7], 17, [3, 3, 3], 1, [1, 1, 1], [1, 1, 1, 1, 1, 1], [1, 1, 1]),  # 3-D
    # int8 tensor cores (sm_80+): K split over blocks (few pixel tiles, deep K), tiles across images, groups
    ([1, 256, 7, 7], 128, [3, 3], 1, [1, 1], [1, 1, 1, 1], [1, 1]),     # K = 2304, 49 pixels: split K
    ([3, 40, 5, 5], 80, [3, 3], 1, [1, 1], [1, 1, 1, 1], [1, 1]),       # 75 pixels over 3 images
    ([2, 64, 9, 9], 64, [3, 3], 2, [2, 2], [1, 1, 1, 1], [1, 1]),       # two groups of 32, strided
    ([1, 300, 16], 48, [3], 1, [1], [1, 1], [1]),                       # 1-D, K = 900: split
    ([2, 96, 14, 14], 160, [1, 1], 1, [1, 1], [0, 0, 0, 0], [1, 1]),    # 1x1, 3 row tiles
]
MM_SHAPES = [([5, 7], [7, 3]), ([2, 4, 9], [9, 6]), ([6], [6, 4]), ([1, 33], [33, 17]), ([8, 100], [100, 70]),
             ([130, 64], [64, 65]), ([2, 3, 40, 50], [2, 3, 50, 90]),
             ([3, 1, 4, 5], [2, 5, 3])]  # the last broadcasts its batch: CPU fallback
COMBOS = ((np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8))


class Locked:
    """The Runner's report, safe from the worker threads."""

    def __init__(self, R):
        self.R, self.lock = R, threading.Lock()

    def report(self, ok, tag, why):
        with self.lock:
            self.R.report(ok, tag, why)


class Cuda:
    def __init__(self, R, jobs):
        self.R = Locked(R)
        self.runner = R
        self.sat_lo = self.sat_hi = 0
        self.n_mma = 0  # int8 convs the CUDA sessions ran on the tensor cores
        self.n_nhwc = 0  # and channels-last
        self.device = ["--device", "cuda"]
        # the cases are built in order on this thread (one random stream);
        # their two qdq_run processes run on `jobs` workers
        self.pool = concurrent.futures.ThreadPoolExecutor(jobs) if jobs > 1 else None
        self.pending = []
        self.seq = 0

    def check(self, tag, path, feeds, fallback=0, max_steps=0, step=None, then=None, rel=None, flags=(), nhwc=None):
        """Queue one case: CUDA outputs equal to the CPU session's (float
        outputs bit for bit; `step`: a float output compared in units of that
        step, within max_steps; `rel`: a float output within that relative L2),
        and `fallback` nodes on the CPU fallback; `flags`: qdq_run's options
        for the CUDA session; `nhwc`: the channels-last int8 convs it must have.
        then(qdq_run's summary) runs when it passed."""
        self.seq += 1
        run_dir = "%03d_%s" % (self.seq, tag.replace(" ", "_").replace("/", "_"))  # one per case: tags repeat

        def job():
            try:
                rg = self.check_now(tag, run_dir, path, feeds, fallback, max_steps, step, rel, list(flags), nhwc)
                if rg is not None and then is not None:
                    then(rg)
            except Exception as e:  # a broken case is a failed check, the others still run
                self.R.report(False, tag, "%s: %s" % (type(e).__name__, e))
        if self.pool is None:
            job()
        else:
            self.pending.append(self.pool.submit(job))

    def drain(self):
        """Wait for every queued case (re-raising a worker's exception)."""
        for f in self.pending:
            f.result()
        self.pending = []

    def check_now(self, tag, run_dir, path, feeds, fallback, max_steps, step, rel, flags, nhwc):
        R = self.R
        try:
            cpu, _ = Q.qdq_run(self.runner, path, feeds, run_dir + "_cpu")
            gpu, rg = Q.qdq_run(self.runner, path, feeds, run_dir + "_cuda", self.device + flags)
        except RuntimeError as e:
            R.report(False, tag, str(e))
            return None
        why = []
        for name, r in cpu.items():
            g = gpu.get(name)
            if g is None or g.shape != r.shape or g.dtype != r.dtype:
                R.report(False, tag, "%s: got %s, expected %s %s" % (name, None if g is None else (g.dtype, g.shape),
                                                                    r.dtype, r.shape))
                return None
            if r.dtype in (np.int8, np.uint8):
                lo, hi = Q.qtype_range(r.dtype.type)
                with R.lock:
                    self.sat_lo += int((r == lo).any())
                    self.sat_hi += int((r == hi).any())
            if rel is not None:
                r64 = r.astype(np.float64)
                e = float(np.linalg.norm(g.astype(np.float64) - r64) / max(np.linalg.norm(r64), 1e-30))
                if e > rel:
                    R.report(False, tag, "%s: relative L2 %.2e off the CPU session (limit %.0e)" % (name, e, rel))
                    return None
                why.append("%s within relative L2 %.1e (%d of %d differ)" % (name, e, int((g != r).sum()), r.size))
                continue
            if step is not None:
                d = Q.steps_off(g, r, step)
                n_diff = int((g != r).sum())
                if d > max_steps + 1e-4:
                    R.report(False, tag, "%s: %.2f steps off the CPU session" % (name, d))
                    return None
                why.append("%s within %.2f steps (%d of %d differ)" % (name, d, n_diff, r.size))
                continue
            same = np.array_equal(g.view(np.uint8), r.view(np.uint8))
            if not same:
                diff = np.abs(g.astype(np.float64) - r.astype(np.float64))
                i = np.unravel_index(int(diff.argmax()), diff.shape)
                R.report(False, tag, "%s %s: %d of %d differ, worst at %s (cuda %s, cpu %s)" % (
                    name, r.dtype, int((g != r).sum()), r.size, i, g[i], r[i]))
                return None
            why.append("%s %s %s bit-exact" % (name, r.dtype, list(r.shape)))
        if not self.device:
            fallback = 0  # --selfcheck: a CPU session has no fallback
            nhwc = None
        with R.lock:
            self.n_nhwc += rg.get("n_int8_nhwc", 0)
        if nhwc is not None and rg.get("n_int8_nhwc") != nhwc:
            R.report(False, tag, "%s channels-last int8 convs, expected %d" % (rg.get("n_int8_nhwc"), nhwc))
            return None
        with R.lock:
            self.n_mma += rg.get("n_int8_mma", 0)
        if rg.get("n_int8_mma_rejected", 0):
            R.report(False, tag, "%d int8 convs: the tensor-core kernel disagreed with the CUDA-core kernel at create"
                     % rg["n_int8_mma_rejected"])
            return None
        if self.device and not (rg.get("n_int8_mma_packed_only") == rg.get("n_int8_mma") == rg.get("n_packed_only")):
            # every tensor-core conv reads its packing alone, so the arena holds no copy of its filter
            R.report(False, tag, "%s tensor-core convs, %s of them with the filter only packed, %s weights not in the "
                     "arena" % (rg.get("n_int8_mma"), rg.get("n_int8_mma_packed_only"), rg.get("n_packed_only")))
            return None
        if rg["n_cpu_fallback"] != fallback:
            R.report(False, tag, "%d nodes on the CPU fallback, expected %d (ops %s)" % (
                rg["n_cpu_fallback"], fallback, json.dumps(rg["ops"])))
            return None
        R.report(True, tag, "; ".join(why) + ("; %d on the CPU fallback" % fallback if fallback else ""))
        return rg

    def saturation(self, what):
        self.drain()
        self.R.report(self.sat_lo > 3 and self.sat_hi > 3, "saturation exercised (%s)" % what,
                      "%d cases reach the lowest value, %d the highest" % (self.sat_lo, self.sat_hi))
        self.sat_lo = self.sat_hi = 0


def qdq_cases(C, rng):
    R = C.runner
    n = 0
    for dt in (np.int8, np.uint8):
        for per_axis in (False, True):
            for with_zp in (True, False):
                rank = int(rng.integers(1, 5))
                shape = [int(v) for v in rng.integers(1, 9, size=rank)]
                shape[-1] += 40  # a few thousand elements: several blocks
                axis, nsc = None, 1
                if per_axis:
                    axis = int(rng.integers(0, rank))
                    nsc = shape[axis]
                scale, zp = Q.rand_qparams(rng, nsc, dt, with_zp or dt == np.int8)
                if not per_axis:
                    scale, zp = np.array(0.25, np.float32), None if zp is None else zp.reshape(())
                if not with_zp and dt == np.uint8:
                    zp = None
                x = (rng.standard_normal(shape) * 200 * float(scale.max())).astype(np.float32)
                flat = x.reshape(-1)
                sc_b = np.broadcast_to(scale.reshape([-1] + [1] * (rank - 1 - axis)) if per_axis else scale,
                                       shape).reshape(-1)
                ties = rng.random(flat.size) < 0.3
                flat[ties] = ((rng.integers(-40, 40, size=int(ties.sum())) + 0.5) * sc_b[ties]).astype(np.float32)
                flat[:3] = [np.nan, np.inf, -np.inf]
                kind = "%s %s%s" % (np.dtype(dt).name, "axis%s" % axis if per_axis else "tensor",
                                    "" if zp is not None else " nozp")
                m = Q.qdq_model(13, "QuantizeLinear", np.float32, shape, scale, zp, axis, dt)
                C.check("Q " + kind, R.save(m, "q%d" % n), {"x": x})
                xq = Q.rq(rng, dt, shape)
                m = Q.qdq_model(13, "DequantizeLinear", dt, shape, scale, zp, axis, None)
                C.check("DQ " + kind, R.save(m, "dq%d" % n), {"x": xq})
                n += 1
    shape = [3, 50]
    scale = rng.uniform(1e-4, 1e-2, size=50).astype(np.float32)
    xq = rng.integers(-2**20, 2**20, size=shape).astype(np.int32)
    m = Q.qdq_model(13, "DequantizeLinear", np.int32, shape, scale, None, 1, None)
    C.check("DQ int32 axis1", R.save(m, "dq_i32"), {"x": xq})
    C.saturation("QuantizeLinear")


def dq_tail(m):
    """int_model's one-node QLinearConv with a DequantizeLinear of its y (scale
    ys, zero point yz) after it, so that the conv's output is an inner tensor
    (the channels-last pass leaves graph outputs NCHW); y becomes float, still
    compared bit for bit."""
    g = m.graph
    g.node[0].output[0] = "y_conv"
    g.node.append(helper.make_node("DequantizeLinear", ["y_conv", "ys", "yz"], ["y"], name="tail"))
    g.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    return m


def conv_cases(C, rng):
    R = C.runner
    n = 0
    for gi, (xs, M, k, group, strides, pads, dil) in enumerate(CONV_GEOMS):
        Cin = xs[1]
        ws_shape = [M, Cin // group] + k
        kg = Cin // group * int(np.prod(k))
        for xdt, wdt in COMBOS:
            for per_channel in (False, True):
                x, w = Q.rq(rng, xdt, xs), Q.rq(rng, wdt, ws_shape)
                w_s = rng.uniform(0.005, 0.05, size=M).astype(np.float32) if per_channel else np.float32(0.02)
                w_z = Q.zp_of(rng, wdt, M if per_channel else None)
                if wdt == np.int8 and n % 3 < 2:
                    # the tensor-core kernel takes int8 filters whose w - w_zero_point stays in int8:
                    # symmetric (0, as quantizers write them) and shifted within range; random ones
                    # (n % 3 == 2) mostly leave it and keep the CUDA-core kernel
                    w_z = np.zeros_like(w_z) if n % 3 == 0 else (w_z % 21 - 10).astype(np.int8)
                    if n % 3 == 1:
                        w = np.clip(w, -118, 117).astype(np.int8)
                # y scale grows with the sum's length so a share saturates at both ends
                y_s = np.float32(rng.uniform(0.1, 0.8) * np.sqrt(kg / 27.0))
                inits = {"xs": np.array(rng.uniform(0.01, 0.05), np.float32), "xz": Q.zp_of(rng, xdt), "w": w,
                         "ws": np.asarray(w_s, np.float32), "wz": np.asarray(w_z, wdt),
                         "ys": np.array(y_s, np.float32), "yz": Q.zp_of(rng, xdt)}
                ins = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
                if n % 2:
                    inits["B"] = rng.integers(-5000, 5000, size=M).astype(np.int32)
                    ins.append("B")
                attrs = {"strides": strides, "pads": pads, "dilations": dil, "group": group, "kernel_shape": k}
                m = Q.int_model(("QLinearConv", ins), [("x", xdt, xs)], inits, xdt,
                                Q.conv_out_shape(xs, ws_shape, strides, pads, dil), attrs)
                tag = "QLinearConv g%d %s/%s %s%s" % (gi, np.dtype(xdt).name, np.dtype(wdt).name,
                                                      "perchan" if per_channel else "tensor", " B" if n % 2 else "")
                if len(xs) == 4:  # 2-D: channels-last by default (the conv's y must not be the graph's output)
                    path = R.save(dq_tail(m), "qconv%d" % n)
                    C.check(tag + " nhwc", path, {"x": x}, nhwc=1)
                    C.check(tag + " nchw", path, {"x": x}, flags=["--no-nhwc"], nhwc=0)
                    if n % 4 == 0:  # ERT_SESSION_NO_PACK: the filter in the arena, the CUDA-core kernel
                        def unpacked(rg, tag=tag):
                            C.R.report(rg.get("n_int8_mma") == 0 and rg.get("n_packed_only") == 0, tag + " nopack",
                                       "%d tensor-core convs, %d weights held only packed (expected none)" % (
                                           rg.get("n_int8_mma"), rg.get("n_packed_only")))
                        C.check(tag + " nopack", path, {"x": x}, flags=["--no-pack"], nhwc=0, then=unpacked)
                else:
                    C.check(tag, R.save(m, "qconv%d" % n), {"x": x}, nhwc=0)
                n += 1
        xdt, wdt = COMBOS[n % 3]
        x, w = Q.rq(rng, xdt, xs), Q.rq(rng, wdt, ws_shape)
        wz = Q.zp_of(rng, wdt, M)
        inits = {"w": w, "xz": Q.zp_of(rng, xdt), "wz": np.zeros_like(wz) if wdt == np.int8 else wz}
        attrs = {"strides": strides, "pads": pads, "dilations": dil, "group": group}
        m = Q.int_model(("ConvInteger", ["x", "w", "xz", "wz"]), [("x", xdt, xs)], inits, np.int32,
                        Q.conv_out_shape(xs, ws_shape, strides, pads, dil), attrs)
        C.check("ConvInteger g%d %s/%s" % (gi, np.dtype(xdt).name, np.dtype(wdt).name), R.save(m, "cint%d" % n),
                {"x": x})
        n += 1
    C.saturation("QLinearConv")


def conv_lut_cases(C, rng):
    """QLinearConv -> DQ -> Relu/SiLU/HardSwish/... -> Q, which the Q/DQ pass
    folds into one QLinearConv whose epilogue looks its byte up in the
    ert.QLut table (input 9): quant_ort.py's cases plus tensor-core ones
    (16-channel taps, a K split, a 1x1), int8 and uint8 x, channels-last (a DQ
    after y keeps the conv's output inside the graph) and NCHW, every fourth
    also with --no-pack (the CUDA-core kernels' epilogue). Bit-exact with the
    CPU session, and the table fused where y keeps the conv's type."""
    R = C.runner
    cases = Q.CONV_LUT_CASES + [([1, 64, 14, 14], 64, 3, 1, 1, 5, True, True),   # SiLU, 16-channel taps
                                ([1, 256, 7, 7], 128, 3, 1, 1, 6, False, True),  # HardSwish, K split
                                ([2, 32, 16, 16], 64, 1, 1, 1, 1, True, True)]   # Relu6, 1x1
    n = 0
    for ci, (xs, M, k, group, stride, act, bias, same) in enumerate(cases):
        for xdt in (np.int8, np.uint8):
            ydt = xdt if same else (np.uint8 if xdt == np.int8 else np.int8)
            m, _ = Q.conv_lut_model(rng, xdt, ydt, xs, M, k, group, stride, act, bias)
            g = m.graph  # y -> DQ -> float y: the fused conv's output stays inside the graph (channels-last)
            g.node[-1].output[0] = "y_q"
            g.node.append(helper.make_node("DequantizeLinear", ["y_q", "ys", "yz"], ["y"], name="tail"))
            g.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
            tag = "conv+QLut %s c%d %s->%s" % (Q.LUT_ACTS[act][0], ci, np.dtype(xdt).name, np.dtype(ydt).name)
            path = R.save(m, "convlut%d_%d" % (ci, xdt == np.int8))
            x = Q.rq(rng, xdt, xs)

            def fused(rg, tag=tag, same=same):
                ops = rg["ops"]
                want = {"QLinearConv": 1, "DequantizeLinear": 1} if same else \
                    {"QLinearConv": 1, "ert.QLut": 1, "DequantizeLinear": 1}
                C.R.report({k2: v for k2, v in ops.items() if k2 != "Transpose"} == want, tag + " fused" if same
                           else tag + " not fused", "ops %s" % json.dumps(ops))
            C.check(tag + " nhwc", path, {"x": x}, nhwc=1 if len(xs) == 4 else 0, then=fused)
            C.check(tag + " nchw", path, {"x": x}, flags=["--no-nhwc"], nhwc=0)
            if n % 4 == 0:
                C.check(tag + " nopack", path, {"x": x}, flags=["--no-pack"], nhwc=0)
            n += 1


def matmul_cases(C, rng):
    R = C.runner
    n = 0
    for si, (ash, bsh) in enumerate(MM_SHAPES):
        out_shape = list(np.matmul(np.zeros(ash), np.zeros(bsh)).shape)
        N, K = bsh[-1], ash[-1]
        fb = 1 if si == len(MM_SHAPES) - 1 else 0
        for adt, bdt in COMBOS:
            for per_col in ((False, True) if len(bsh) == 2 else (False,)):
                a, b = Q.rq(rng, adt, ash), Q.rq(rng, bdt, bsh)
                inits = {"as": np.array(rng.uniform(0.01, 0.05), np.float32), "az": Q.zp_of(rng, adt), "b": b,
                         "bs": (rng.uniform(0.005, 0.05, size=N) if per_col else np.array(0.02)).astype(np.float32),
                         "bz": Q.zp_of(rng, bdt, N) if per_col else Q.zp_of(rng, bdt),
                         "ys": np.array(rng.uniform(0.1, 0.6) * np.sqrt(K / 9.0), np.float32), "yz": Q.zp_of(rng, adt)}
                m = Q.int_model(("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]), [("a", adt, ash)],
                                inits, adt, out_shape)
                C.check("QLinearMatMul s%d %s/%s %s" % (si, np.dtype(adt).name, np.dtype(bdt).name,
                                                        "percol" if per_col else "tensor"),
                        R.save(m, "qmm%d" % n), {"a": a}, fallback=fb)
                n += 1
            a, b = Q.rq(rng, adt, ash), Q.rq(rng, bdt, bsh)
            bz = Q.zp_of(rng, bdt, N) if len(bsh) == 2 else Q.zp_of(rng, bdt)
            m = Q.int_model(("MatMulInteger", ["a", "b", "az", "bz"]), [("a", adt, ash)],
                            {"b": b, "az": Q.zp_of(rng, adt), "bz": bz}, np.int32, out_shape)
            C.check("MatMulInteger s%d %s/%s" % (si, np.dtype(adt).name, np.dtype(bdt).name),
                    R.save(m, "mmi%d" % n), {"a": a}, fallback=fb)
            n += 1
    C.saturation("QLinearMatMul")


def pool_cases(C, rng):
    R = C.runner
    for gi, (xs, attrs) in enumerate([([2, 5, 9, 7], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
                                      ([1, 4, 8, 8], dict(kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 1, 0],
                                                          ceil_mode=1)),
                                      ([1, 2, 9, 9], dict(kernel_shape=[2, 2], dilations=[2, 2])),
                                      ([2, 3, 10], dict(kernel_shape=[3], strides=[2], pads=[1, 1]))]):
        for dt in (np.uint8, np.int8):
            sc, zp = np.array(0.05, np.float32), Q.zp_of(rng, dt)
            nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["d"], name="dq"),
                     helper.make_node("MaxPool", ["d"], ["p"], name="pool", **attrs),
                     helper.make_node("QuantizeLinear", ["p", "s", "z"], ["y"], name="q")]
            g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", Q.NP2ONNX[dt], xs)],
                                  [helper.make_tensor_value_info("y", Q.NP2ONNX[dt], None)],
                                  [numpy_helper.from_array(sc, "s"), numpy_helper.from_array(zp, "z")])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
            m.ir_version = 7
            def folded(rg, gi=gi):
                if "QuantizeLinear" in rg["ops"]:
                    C.R.report(False, "MaxPool int8 g%d folded" % gi, "ops %s" % json.dumps(rg["ops"]))
            C.check("MaxPool int8 g%d %s" % (gi, np.dtype(dt).name), R.save(m, "pool%d_%d" % (gi, dt == np.int8)),
                    {"x": Q.rq(rng, dt, xs)}, then=folded)


def lut_cases(C, rng):
    R = C.runner
    shapes = [[1, 7, 11, 5], [2, 3, 64, 65], [4099], [1, 16, 112, 112]]
    combos = [(np.int8, np.int8), (np.uint8, np.uint8), (np.int8, np.uint8), (np.uint8, np.int8)]
    for ai, (name, build, fn, _) in enumerate(Q.LUT_ACTS):
        xdt, ydt = combos[ai % len(combos)]
        shape = shapes[ai % len(shapes)]
        body, inits = build()
        x_s, x_z = float(rng.uniform(0.02, 0.08)), Q.zp_of(rng, xdt)
        lo, hi = Q.qtype_range(xdt)
        f = fn((np.arange(lo, hi + 1) - int(x_z)) * x_s)
        y_s, y_z = Q.lut_y_quant(rng, f, ydt)  # over half saturate at both ends
        m = Q.lut_model(xdt, ydt, shape, x_s, x_z, y_s, y_z, body, inits)

        def folded(rg, ai=ai, name=name):
            if rg["ops"] != {"ert.QLut": 1}:
                C.R.report(False, "QLut %s folded" % name, "ops %s" % json.dumps(rg["ops"]))
        x = Q.rq(rng, xdt, shape)
        x.reshape(-1)[:256] = np.arange(lo, hi + 1).astype(xdt)  # every byte
        C.check("QLut %s %s->%s %s" % (name, np.dtype(xdt).name, np.dtype(ydt).name, "x".join(map(str, shape))),
                R.save(m, "qlut%d" % ai), {"x": x}, then=folded)
    C.saturation("QLut")


def qadd_cases(C, rng):
    """DQ(a) + DQ(b) -> [Relu] -> Q folded to ert.QLinearAdd: bit-exact with
    the CPU session; sizes that are whole 4-byte words (the kernel's word
    path) and not (its byte path), int8/uint8 mixes, with and without Relu."""
    R = C.runner
    shapes = [[2, 16, 9, 9], [1, 7, 5, 3], [8, 64, 14, 14], [4099]]
    combos = [(np.int8, np.int8, np.int8), (np.uint8, np.uint8, np.uint8), (np.uint8, np.int8, np.int8),
              (np.int8, np.uint8, np.uint8)]
    for si, shape in enumerate(shapes):
        for ci, (at, bt, yt) in enumerate(combos):
            relu = (si + ci) % 2 == 1
            inits = {"as": np.array(rng.uniform(0.01, 0.1), np.float32), "bs": np.array(rng.uniform(0.01, 0.1), np.float32),
                     "ys": np.array(rng.uniform(0.02, 0.12), np.float32),
                     "az": Q.zp_of(rng, at), "bz": Q.zp_of(rng, bt), "yz": Q.zp_of(rng, yt)}
            nodes = [helper.make_node("DequantizeLinear", ["a", "as", "az"], ["fa"], name="dq_a"),
                     helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["fb"], name="dq_b"),
                     helper.make_node("Add", ["fa", "fb"], ["s"], name="add")]
            if relu:
                nodes.append(helper.make_node("Relu", ["s"], ["r"], name="relu"))
            nodes.append(helper.make_node("QuantizeLinear", ["r" if relu else "s", "ys", "yz"], ["y"], name="q"))
            g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", Q.NP2ONNX[at], shape),
                                               helper.make_tensor_value_info("b", Q.NP2ONNX[bt], shape)],
                                  [helper.make_tensor_value_info("y", Q.NP2ONNX[yt], shape)],
                                  [numpy_helper.from_array(v, k) for k, v in inits.items()])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
            m.ir_version = 7
            tag = "QLinearAdd %s %s+%s->%s%s" % ("x".join(map(str, shape)), np.dtype(at).name, np.dtype(bt).name,
                                                np.dtype(yt).name, " relu" if relu else "")

            def folded(rg, tag=tag):
                if rg["ops"] != {"ert.QLinearAdd": 1}:
                    C.R.report(False, tag + " folded", "ops %s" % json.dumps(rg["ops"]))
            C.check(tag, R.save(m, "qadd%d_%d" % (si, ci)), {"a": Q.rq(rng, at, shape), "b": Q.rq(rng, bt, shape)},
                    then=folded)
    C.saturation("QLinearAdd")


def cnn_cases(C, rng):
    from onnxruntime.quantization import QuantType
    R = C.runner
    for kind, per_channel, act in (("gemm", True, QuantType.QUInt8), ("matmul", False, QuantType.QInt8),
                                   ("gemm", False, QuantType.QInt8), ("matmul", True, QuantType.QUInt8)):
        tag = "cnn %s %s %s" % (kind, "perchan" if per_channel else "tensor", "u8" if act == QuantType.QUInt8 else "s8")
        qp = Q.quantized_cnn(R, rng, kind, per_channel, act, tag.replace(" ", "_"))
        x = rng.standard_normal([2, 3, 16, 15]).astype(np.float32)
        def folded(rg, tag=tag):
            ops = rg["ops"]
            C.R.report(ops.get("QLinearConv", 0) == 4 and ops.get("QLinearMatMul", 0) == 1, tag + " folded",
                       "ops on the GPU: %s" % json.dumps(ops))
        C.check(tag, qp, {"x": x}, max_steps=1, step=Q.out_step(qp), then=folded)


def edgert_cases(C, rng):
    """Small CNNs quantized by `edgert quantize` (int8 symmetric, per-channel
    weights: what bench/int8 runs): every conv folded and on the GPU, no CPU
    fallback node. The last Gemm stays float (edgert quantize leaves a graph
    output float), so after the float GlobalAveragePool, summed in another
    order on the GPU, the output is compared by relative L2."""
    import subprocess
    R = C.runner
    for kind in ("gemm", "matmul"):
        tag = "edgert quantize cnn %s" % kind
        m = Q.small_cnn(rng, kind)
        m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1  # samples are batch 1
        m.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 1
        fp, qp = R.save(m, "eq_%s_f32" % kind), os.path.join(R.work, "eq_%s_int8.onnx" % kind)
        calib = os.path.join(R.work, "eq_%s_calib.npy" % kind)
        np.save(calib, rng.standard_normal([8, 3, 16, 15]).astype(np.float32))
        p = subprocess.run([C.edgert, "quantize", fp, "--calib", calib, "--out", qp], capture_output=True, text=True)
        if p.returncode != 0:
            C.R.report(False, tag, "edgert quantize exited %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
            continue

        def folded(rg, tag=tag):
            ops = rg["ops"]
            C.R.report(ops.get("QLinearConv", 0) == 4, tag + " folded", "ops on the GPU: %s" % json.dumps(ops))
        C.check(tag, qp, {"x": rng.standard_normal([1, 3, 16, 15]).astype(np.float32)}, rel=1e-2, then=folded)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qdq-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--selfcheck", action="store_true", help="both sides on the CPU (checks the cases build and run)")
    ap.add_argument("--edgert", default="", help="the edgert CLI: also CNNs quantized by `edgert quantize`")
    ap.add_argument("--jobs", type=int, default=1, help="cases run at once (each runs two qdq_run processes)")
    args = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    R = Q.Runner(argparse.Namespace(edgert="", emulator="", qdq_run=args.qdq_run, work=args.work))
    C = Cuda(R, args.jobs)
    if args.selfcheck:
        C.device = []
    rng = np.random.default_rng(args.seed)
    C.edgert = args.edgert
    for f in (qdq_cases, conv_cases, conv_lut_cases, matmul_cases, pool_cases, lut_cases, qadd_cases, cnn_cases) + ((edgert_cases,) if args.edgert else ()):
        f(C, rng)
    C.drain()
    if C.device:  # the tensor-core kernel must have been taken (sm_80+; the quant_cuda ctest runs on an H100/H200)
        R.report(C.n_mma > 0, "int8 tensor cores exercised", "%d int8 convs ran on the tensor cores" % C.n_mma)
        R.report(C.n_nhwc > 0, "channels-last int8 convs exercised", "%d int8 convs ran channels-last" % C.n_nhwc)
    print("quant_cuda: %d passed, %d failed" % (R.passed, R.failed))
    sys.exit(1 if R.failed else 0)


if __name__ == "__main__":
    main()

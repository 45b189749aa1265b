#!/usr/bin/env python3
"""The ops the model zoo needed beyond the common families, against onnxruntime.

    python tests/ops/ops_ort.py --edgert build/apps/edgert --work build/ops_ort [--seed N] [--emulator ...]

Per case: a one-node (or small pattern) ONNX graph made here with onnx.helper
on random shapes (odd sizes, rank 1 to 4), random attributes and random
inputs; onnxruntime (CPU, optimisations off) gives the reference and
`edgert run` the answer (scripts/zoo/run_zoo.py's Runner: names, shapes,
finiteness, relative L2 error in float64). Integer outputs must match exactly
(tolerance 0); f32 <= 1e-5 (edgert accumulates in double, onnxruntime in
float).

Ops: ReduceMin/Prod/L1/L2/SumSquare/LogSum/LogSumExp (axes as attribute,
opset 17, and as input, opset 18; keepdims 0/1; empty axes), ScatterND
(reductions none/add/mul/max/min, constant and computed indices, negative
indices), ScatterElements and GatherElements (every axis, negative indices);
and the two exporter patterns that needed them: F.normalize (EdgeNeXt's XCA:
ReduceL2 -> Clip -> Expand -> Div) and slice assignment into a zeros mask
(Swin-T's shifted-window mask: ConstantOfShape -> ScatterND).

Exit status 0 all passed, 1 a check failed, 77 skipped (no onnx/onnxruntime).
"""
import argparse
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "zoo"))
import run_zoo  # noqa: E402 (re-executes under .deps/venv, or exits 77, without onnx)
from run_zoo import Runner, ort_run, np, onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

TOL = 1e-5
NP2ONNX = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.int32: TensorProto.INT32}
REDUCE = ["ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def vi(name, arr):
    return helper.make_tensor_value_info(name, NP2ONNX[arr.dtype.type], list(arr.shape))


def model(nodes, inputs, outputs, inits=(), opset=17):
    """inputs: name -> array (graph inputs), outputs: name -> (onnx dtype) with shapes left to inference."""
    g = helper.make_graph(nodes, "ops_ort", [vi(k, v) for k, v in inputs.items()],
                          [helper.make_tensor_value_info(k, t, None) for k, t in outputs.items()],
                          [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8

    return m


class Cases:
    def __init__(self, r, work, seed):
        self.r, self.work, self.rng = r, work, np.random.default_rng(seed)
        self.n = 0

    def run(self, tag, m, feeds, tol=TOL):
        self.n += 1
        path = os.path.join(self.work, "%03d_%s.onnx" % (self.n, tag))
        onnx.save(m, path)
        try:
            ref = ort_run(path, feeds)
        except Exception as e:  # the generator made a graph onnxruntime refuses: a bug here, not in edgert
            self.r.fail("ops", tag, "onnxruntime", str(e)[:300])
            return
        try:
            got = self.r.edgert_run(path, feeds, "%03d_%s" % (self.n, tag))
        except Exception as e:
            self.r.fail("ops", tag, "edgert run", str(e)[-600:])
            return
        self.r.check("ops", tag, os.path.basename(path), got, ref, tol)

    def shape(self, lo=1, hi=4, dmax=7):
        return [int(d) for d in self.rng.integers(1, dmax + 1, size=int(self.rng.integers(lo, hi + 1)))]

    def reductions(self):
        rng = self.rng
        for op in REDUCE:
            for rep in range(6):
                shp = self.shape()
                nd = len(shp)
                if rep == 5:
                    axes = []  # empty: every axis
                else:
                    axes = sorted(rng.choice(nd, size=int(rng.integers(1, nd + 1)), replace=False).tolist())
                    axes = [a - nd if rng.random() < 0.4 else a for a in axes]
                keep = int(rng.integers(0, 2))
                as_input = rep % 2 == 1  # opset 18: axes as an input
                i64 = op in ("ReduceMin", "ReduceProd") and rep == 4
                if i64:
                    x = rng.integers(-3, 4, size=shp).astype(np.int64)
                elif op == "ReduceProd":
                    x = rng.uniform(0.7, 1.4, size=shp).astype(np.float32)
                elif op == "ReduceLogSum":
                    x = rng.uniform(0.1, 2.0, size=shp).astype(np.float32)
                elif op == "ReduceLogSumExp":
                    x = (rng.standard_normal(shp) * 30).astype(np.float32)  # exp overflows f32 without care
                else:
                    x = rng.standard_normal(shp).astype(np.float32)
                attrs, ins, inits = {"keepdims": keep}, ["x"], []
                if axes and as_input:
                    ins.append("axes")
                    inits.append(("axes", np.array(axes, np.int64)))
                elif axes:
                    attrs["axes"] = axes
                m = model([helper.make_node(op, ins, ["y"], **attrs)], {"x": x},
                          {"y": NP2ONNX[x.dtype.type]}, inits, opset=18 if as_input else 17)
                self.run("%s_r%d" % (op, rep), m, {"x": x}, 0 if i64 else TOL)

    def unique_tuples(self, dims, n):
        """n distinct index tuples into dims (n <= prod(dims)), each value made negative at random."""
        flat = self.rng.choice(int(np.prod(dims)), size=n, replace=False)
        t = np.stack(np.unravel_index(flat, dims), axis=-1).astype(np.int64)
        neg = self.rng.random(t.shape) < 0.3
        return np.where(neg, t - np.array(dims, np.int64), t)

    def scatter_nd(self):
        rng = self.rng
        reds = ["none", "add", "mul", "max", "min"]
        for rep in range(15):
            shp = self.shape()
            r = len(shp)
            k = int(rng.integers(1, r + 1))
            n = int(rng.integers(1, int(np.prod(shp[:k])) + 1))
            lead = [n] if rep % 3 else [1, n]  # indices of rank 2 and 3
            ind = self.unique_tuples(shp[:k], n).reshape(lead + [k])
            red = reds[rep % 5]
            dt = np.int64 if rep == 7 else np.float32
            x = rng.standard_normal(shp).astype(np.float32)
            upd = rng.standard_normal(lead + shp[k:]).astype(np.float32)
            if dt == np.int64:
                x, upd = (x * 10).astype(np.int64), (upd * 10).astype(np.int64)
            attrs = {} if red == "none" else {"reduction": red}
            computed = rep % 2 == 0  # indices a graph input: checked by the kernel at run time
            feeds = {"x": x, "u": upd}
            inits = []
            if computed:
                feeds["i"] = ind
            else:
                inits.append(("i", ind))
            m = model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], **attrs)], feeds,
                      {"y": NP2ONNX[dt]}, inits, opset=18)
            self.run("ScatterND_%s_r%d" % (red, rep), m, feeds, 0 if dt == np.int64 else TOL)

    def elements(self):
        rng = self.rng
        reds = ["none", "add", "mul", "max", "min"]
        for rep in range(12):
            shp = self.shape()
            r = len(shp)
            axis = int(rng.integers(0, r))
            ishp = [int(rng.integers(1, d + 1)) for d in shp]
            x = rng.standard_normal(shp).astype(np.float32)
            # distinct along the axis for each line (duplicates are undefined without a reduction)
            n_ax = ishp[axis]
            lines = np.moveaxis(np.zeros(ishp, np.int64), axis, -1)
            for idx in np.ndindex(lines.shape[:-1]):
                lines[idx] = rng.permutation(shp[axis])[:n_ax]
            ind = np.ascontiguousarray(np.moveaxis(lines, -1, axis))
            ind = np.where(rng.random(ind.shape) < 0.3, ind - shp[axis], ind)
            if rep % 4 == 3:
                ind = ind.astype(np.int32)
            gather = rep % 2 == 1
            feeds = {"x": x, "i": ind}
            if gather:
                node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis - r if rep % 3 == 0 else axis)
                tag = "GatherElements_r%d" % rep
            else:
                red = reds[(rep // 2) % 5]
                feeds["u"] = rng.standard_normal(ishp).astype(np.float32)
                attrs = {"axis": axis} if red == "none" else {"axis": axis, "reduction": red}
                node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], **attrs)
                tag = "ScatterElements_%s_r%d" % (red, rep)
            self.run(tag, model([node], feeds, {"y": TensorProto.FLOAT}, opset=18), feeds)

    def patterns(self):
        rng = self.rng
        # F.normalize(q, dim=-1) as torch.onnx exports it (EdgeNeXt XCA), opset 17
        x = rng.standard_normal((2, 3, 8, 13)).astype(np.float32)
        nodes = [helper.make_node("ReduceL2", ["x"], ["n"], axes=[-1], keepdims=1),
                 helper.make_node("Clip", ["n", "eps"], ["c"]),
                 helper.make_node("Shape", ["x"], ["s"]),
                 helper.make_node("Expand", ["c", "s"], ["e"]),
                 helper.make_node("Div", ["x", "e"], ["y"])]
        m = model(nodes, {"x": x}, {"y": TensorProto.FLOAT}, [("eps", np.array(1e-12, np.float32))])
        self.run("normalize", m, {"x": x})
        # a shifted-window mask: zeros, windows numbered by slice assignment (Swin-T), then used
        h, w = 7, 9
        idx = np.stack(np.meshgrid(np.arange(h - 3, h), np.arange(w - 3, w), indexing="ij"), -1).reshape(-1, 2)
        nodes = [helper.make_node("ConstantOfShape", ["hw"], ["z"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
                 helper.make_node("ScatterND", ["z", "idx", "cnt"], ["mask"]),
                 helper.make_node("Add", ["x", "mask"], ["y"])]
        x = rng.standard_normal((h, w)).astype(np.float32)
        m = model(nodes, {"x": x}, {"y": TensorProto.FLOAT},
                  [("hw", np.array([h, w], np.int64)), ("idx", idx.astype(np.int64)),
                   ("cnt", np.full(len(idx), 3.0, np.float32))])
        self.run("swin_mask", m, {"x": x})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edgert", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000, help="default: fresh per run (printed)")
    ap.add_argument("--emulator", default="", help="command prefix for edgert, tokens separated by '|'")
    args = ap.parse_args()
    r = Runner(args)
    print("seed %d (rerun with --seed %d); onnxruntime %s" % (args.seed, args.seed, run_zoo.ort.__version__), flush=True)
    c = Cases(r, args.work, args.seed)
    c.reductions()
    c.scatter_nd()
    c.elements()
    c.patterns()
    print("ops_ort: %d checks, %d failed" % (len(r.rows), r.failed))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())

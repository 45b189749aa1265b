#!/usr/bin/env python3
"""Check edgert against onnxruntime on the model zoo and on PaddleOCR models.

    python scripts/zoo/run_zoo.py --edgert build/apps/edgert --work build/zoo [--suite zoo|ppocr]
                                  [--emulator 'qemu-aarch64|-L|/usr/aarch64-linux-gnu']
                                  [--ppocr-dir ../shared/models/ppocr] [--report FILE.tsv]

Everything it makes (models, .npy inputs, onnxruntime references, edgert
outputs, .ert conversions) goes under --work; nothing is committed. Per check:
onnxruntime (CPU, graph optimisations off: the plain reference) runs the model
on a random input (numpy, fixed seed), `edgert run` runs it from the .npy
files it writes, and the outputs are compared by relative L2 error,
||got - ref||_2 / ||ref||_2 in float64, after checking names, shapes and that
every value is finite.

Suites (tolerances and their reasons in docs/models.md):
  zoo    every model of make_models.py at batch 1 (1 thread) and batch 3
         (2 threads), fp32 <= 1e-4; `edgert convert` to .ert (batch 3, same
         tolerance) and to .ert --fp16: <= 1e-4 against onnxruntime on the
         model with the same weights rounded to f16 (same arithmetic),
         <= 1e-2 against the fp32 reference, file <= 0.85x the fp32 .ert.
  ppocr  PaddleOCR classifier (1x3x48x192) and text detector (1x3x224x320)
         on a synthetic text page, fp32 and fp16 exports: fp32 <= 1e-4;
         fp16 export <= 1e-4 against onnxruntime on the export widened to
         f32 (what edgert computes), <= 3e-2 against onnxruntime's fp16 run
         (f16 activation rounding), <= 0.15 against the fp32 export (sanity);
         fp32 export --fp16: <= 1e-4 against f16-rounded weights in
         onnxruntime, <= 5e-2 against fp32, file <= 0.6x the fp32 .ert.

Exit status: 0 all checks passed, 1 a check failed, 77 skipped (no
onnx/onnxruntime/numpy for this Python, or the PaddleOCR files are missing),
with the reason on stdout.
"""
import argparse
import json
import os
import subprocess
import sys
import time

SKIP = 77
TOL_F32 = 1e-4          # f32 arithmetic on both sides (also: f16 weights both sides, widened alike)
TOL_F16 = 1e-2          # f16 weights, f32 arithmetic vs the fp32 model (zoo: measured <= 1e-3)
TOL_F16_DEEP = 5e-2     # the same on the PaddleOCR detector, a deep net with a steep sigmoid map
TOL_F16_ORT = 3e-2      # edgert (f32 arithmetic) vs onnxruntime rounding every activation to f16
TOL_EXPORTS = 0.15      # fp16 export vs fp32 export: onnxruntime itself differs by ~9e-2 on the detector
F16_SIZE_RATIO = 0.6     # an --fp16 .ert against the fp32 one (metadata does not shrink)
F16_SIZE_RATIO_SMALL = 0.85  # the same for the zoo's tiny models (measured 0.56 to 0.76)

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
except ImportError as e:  # the generating side is optional: CI images without pip skip
    venv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".deps", "venv", "bin", "python")
    if os.path.exists(venv) and not os.environ.get("ERT_ZOO_REEXEC"):
        os.environ["ERT_ZOO_REEXEC"] = "1"  # once: a broken venv must not loop
        os.execv(venv, [venv] + sys.argv)
    print("SKIP: this Python (%s) cannot import onnx/onnxruntime/numpy (%s); run scripts/setup.sh" % (sys.executable, e))
    sys.exit(SKIP)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class Runner:
    def __init__(self, args):
        self.edgert = [t for t in args.emulator.split("|") if t] + [args.edgert]
        self.work = args.work
        self.rows = []       # (suite, model, check, rel_l2, tol, ok)
        self.failed = 0
        os.makedirs(self.work, exist_ok=True)

    def cli(self, *argv):
        r = subprocess.run(self.edgert + [str(a) for a in argv], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("%s exited %d\nstdout: %s\nstderr: %s"
                               % (" ".join(self.edgert + list(map(str, argv))), r.returncode, r.stdout, r.stderr))
        return r.stdout

    def edgert_run(self, model, feeds, tag, threads=1):
        """Run `edgert run` on the feeds (name -> array); outputs by name."""
        d = os.path.join(self.work, "run", tag)
        os.makedirs(d, exist_ok=True)
        args = ["run", model, "--json", "--threads", threads, "--output-dir", os.path.join(d, "out")]
        for name, arr in feeds.items():
            p = os.path.join(d, "in_%s.npy" % "".join(c if c.isalnum() else "_" for c in name))
            np.save(p, arr)
            args += ["--input", "%s=%s" % (name, p)]
        res = json.loads(self.cli(*args))
        return {o["name"]: np.load(o["file"]) for o in res["outputs"]}

    def check(self, suite, model, what, got, ref, tol):
        """Compare every output; record the worst relative L2 error."""
        worst, why = 0.0, ""
        if set(got) != set(ref):
            why = "outputs %s, expected %s" % (sorted(got), sorted(ref))
            worst = float("inf")
        else:
            for name, r in ref.items():
                g = got[name]
                if g.shape != r.shape:
                    why, worst = "%s: shape %s, expected %s" % (name, g.shape, r.shape), float("inf")
                    break
                g64, r64 = g.astype(np.float64), r.astype(np.float64)
                if not np.all(np.isfinite(g64)):
                    why, worst = "%s: non-finite values" % name, float("inf")
                    break
                err = np.linalg.norm(g64 - r64) / max(np.linalg.norm(r64), 1e-30)
                if err > worst:
                    worst, why = err, name
        ok = worst <= tol
        self.rows.append((suite, model, what, worst, tol, ok))
        print("%-5s %-17s %-40s rel L2 %.2e (tol %.2g)%s" % ("ok" if ok else "FAIL", model, what, worst, tol,
                                                             "" if ok else "  <- " + why), flush=True)
        if not ok:
            self.failed += 1
        return ok

    def size_check(self, suite, model, small, big, max_ratio):
        s16, s32 = os.path.getsize(small), os.path.getsize(big)
        ratio = s16 / s32
        ok = ratio <= max_ratio
        self.rows.append((suite, model, "--fp16 .ert size / .ert size", ratio, max_ratio, ok))
        print("%-5s %-17s %-40s %d / %d bytes = %.2f (max %.3g)" % ("ok" if ok else "FAIL", model,
              "--fp16 .ert size", s16, s32, ratio, max_ratio), flush=True)
        if not ok:
            self.failed += 1

    def fail(self, suite, model, what, msg):
        self.rows.append((suite, model, what, float("nan"), 0, False))
        self.failed += 1
        print("FAIL  %-14s %-34s %s" % (model, what, msg), flush=True)


def rel_l2(got, ref):
    return max(np.linalg.norm(got[k].astype(np.float64) - ref[k]) / max(np.linalg.norm(ref[k].astype(np.float64)), 1e-30)
               for k in ref)


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3  # no warning per initializer listed as an input (legacy_op11)
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feeds)))


def f16_candidate(a):
    """The rule of ert_model_save_opts(weights_dtype = f16): f32 weights of at
    least 16 elements, all finite and within f16's range."""
    return a.dtype == np.float32 and a.size >= 16 and bool(np.all(np.abs(a) <= 65504.0))


def weight_tensors(m):
    """Every TensorProto edgert loads as a weight: initializers and Constant values."""
    ts = list(m.graph.initializer)
    for n in m.graph.node:
        if n.op_type == "Constant":
            ts += [a.t for a in n.attribute if a.name == "value"]
    return ts


def rounded_f16_weights(path, out):
    """The fp32 model with each weight that `convert --fp16` stores as f16
    rounded to f16 and back: onnxruntime on it computes what edgert computes
    from the --fp16 .ert (f16 weights, f32 arithmetic)."""
    m = onnx.load(path)
    for t in weight_tensors(m):
        a = numpy_helper.to_array(t)
        if f16_candidate(a):
            t.CopyFrom(numpy_helper.from_array(a.astype(np.float16).astype(np.float32), t.name))
    onnx.save(m, out)
    return out


def widened_f16_model(path, out):
    """An fp16 export turned into the f32 model edgert runs on the CPU: f16
    weights widened exactly, Cast-to-f16 made Cast-to-f32, f16 types made
    f32. Only rounding inside the arithmetic is left to tell them apart."""
    m = onnx.load(path)
    F16, F32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    for t in weight_tensors(m):
        if t.data_type == F16:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
    for n in m.graph.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == F16:
                a.i = F32
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F16:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float32), a.t.name))
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type == F16:
            v.type.tensor_type.elem_type = F32
    onnx.save(m, out)
    return out


def input_of(path):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in inits]
    assert len(ins) == 1, path
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in ins[0].type.tensor_type.shape.dim]
    return ins[0].name, dims


def guarded(r, suite, model, what, fn):
    try:
        fn()
    except Exception as e:  # an edgert failure is a test failure, reported with its message
        r.fail(suite, model, what, str(e).strip().replace("\n", "\n      "))


def suite_zoo(r):
    import make_models
    d = os.path.join(r.work, "models")
    os.makedirs(d, exist_ok=True)
    for i, (name, fn) in enumerate(make_models.MODELS.items()):
        path = os.path.join(d, name + ".onnx")
        make_models.save(name, fn(), path)
        iname, dims = input_of(path)
        rng = np.random.default_rng(100 + i)
        refs = {}
        for batch in (1, 3):
            shape = make_models.SHAPES.get(name, {}).get(batch) or [batch if k < 0 else k for k in dims]
            x = rng.standard_normal(shape).astype(np.float32)
            refs[batch] = (x, ort_run(path, {iname: x}))

            # batch 3 also goes through the worker threads' split of the work
            threads = 1 if batch == 1 else 2
            what = "onnx fp32, batch %d, %d thread%s" % (batch, threads, "s" if threads > 1 else "")

            def one(batch=batch, threads=threads, what=what):
                x, ref = refs[batch]
                got = r.edgert_run(path, {iname: x}, "%s_b%d" % (name, batch), threads)
                r.check("zoo", name, what, got, ref, TOL_F32)
            guarded(r, "zoo", name, what, one)

        def converted():
            x, ref = refs[3]
            ert32, ert16 = os.path.join(d, name + ".ert"), os.path.join(d, name + "_fp16.ert")
            r.cli("convert", path, ert32)
            r.cli("convert", path, ert16, "--fp16")
            got = r.edgert_run(ert32, {iname: x}, name + "_ert")
            r.check("zoo", name, ".ert, batch 3", got, ref, TOL_F32)
            got = r.edgert_run(ert16, {iname: x}, name + "_ert16")
            rounded = ort_run(rounded_f16_weights(path, os.path.join(d, name + "_w16.onnx")), {iname: x})
            r.check("zoo", name, "--fp16 .ert vs ort f16-rounded weights", got, rounded, TOL_F32)
            r.check("zoo", name, "--fp16 .ert vs ort fp32", got, ref, TOL_F16)
            # small models: names, nodes and 64-byte alignment weigh about as
            # much as the weights, hence the looser ratio (0.6 on ppocr)
            r.size_check("zoo", name, ert16, ert32, F16_SIZE_RATIO_SMALL)
        guarded(r, "zoo", name, ".ert conversions", converted)

        if name.startswith("vit"):
            def fused():
                # every attention block (one Softmax each) became one ert.Attention node of the session
                # (runtime/passes/attention.c): `edgert bench --profile` lists the session's nodes by op
                want = sum(1 for n in onnx.load(path).graph.node if n.op_type == "Softmax")
                res = json.loads(r.cli("bench", path, "--iters", 1, "--warmup", 0, "--profile", "--json"))
                ops = {op: n for op, _ms, n in res["profile"]["ops"]}
                got = ops.get("ert.Attention", 0)
                ok = want > 0 and got == want and "Softmax" not in ops
                r.rows.append(("zoo", name, "attention fused", got, want, ok))
                print("%-5s %-17s %-40s %d ert.Attention nodes for %d Softmax (session ops: %s)"
                      % ("ok" if ok else "FAIL", name, "attention fused", got, want, sorted(ops)), flush=True)
                if not ok:
                    r.failed += 1
            guarded(r, "zoo", name, "attention fused", fused)


PPOCR = [  # (fp32 file; the fp16 one adds _fp16), input shape, another shape its dynamic dims allow
    ("ch_ppocr_mobile_v2.0_cls_infer", (1, 3, 48, 192), (3, 3, 48, 192)),
    ("en_PP-OCRv3_det_infer", (1, 3, 224, 320), (2, 3, 96, 160)),
]


def text_page(shape, seed):
    """A synthetic page: dark word-like stroke groups on a light, slightly
    noisy background, normalised as PaddleOCR does ((pixel - 0.5) / 0.5).
    Pure noise would not do: the detector then answers ~1e-7 everywhere, and
    onnxruntime's Sigmoid (MLAS) returns 0 below about -16.6, an absolute
    error of up to 6e-8 that becomes a relative L2 error of ~0.15 on such a
    map (edgert's sigmoid is the accurate one there)."""
    n, _, h, w = shape
    r = np.random.default_rng(seed)
    img = 0.9 + r.normal(0, 0.03, (n, h, w))
    for b in range(n):
        y = 4
        while y + 20 < h:
            th, x = int(r.integers(8, 14)), 4
            while x + 20 < w:
                step, length = int(r.integers(4, 10)), int(r.integers(20, 60))
                for k in range(x, min(x + length, w - 4), step):
                    img[b, y:y + th, k:k + max(2, step // 2)] = 0.1
                x += length + int(r.integers(8, 20))
            y += th + int(r.integers(8, 16))
    img = np.repeat(np.clip(img, 0, 1)[:, None], shape[1], 1)
    return ((img - 0.5) / 0.5).astype(np.float32)


def suite_ppocr(r, src):
    missing = [f for f, _, _ in PPOCR for suf in ("", "_fp16") if not os.path.exists(os.path.join(src, f + suf + ".onnx"))]
    if missing:
        print("SKIP: PaddleOCR models missing in %s: %s" % (src, ", ".join(missing)))
        sys.exit(SKIP)
    for i, (name, shape, shape2) in enumerate(PPOCR):
        short = "ppocr_cls" if "cls" in name else "ppocr_det"
        f32, f16 = os.path.join(src, name + ".onnx"), os.path.join(src, name + "_fp16.onnx")
        iname, _ = input_of(f32)
        x = text_page(shape, 200 + i)
        ref32 = ort_run(f32, {iname: x})
        ref16 = ort_run(f16, {iname: x})

        def fp32():
            r.check("ppocr", short, "fp32 export", r.edgert_run(f32, {iname: x}, short), ref32, TOL_F32)
            x2 = text_page(shape2, 300 + i)
            r.check("ppocr", short, "fp32 export, 2nd shape, 2 threads",
                    r.edgert_run(f32, {iname: x2}, short + "_2", 2), ort_run(f32, {iname: x2}), TOL_F32)

        def fp16():
            got = r.edgert_run(f16, {iname: x}, short + "_fp16")
            wide = ort_run(widened_f16_model(f16, os.path.join(r.work, short + "_fp16_widened.onnx")), {iname: x})
            r.check("ppocr", short, "fp16 export vs ort same in f32", got, wide, TOL_F32)
            r.check("ppocr", short, "fp16 export vs ort fp16", got, ref16, TOL_F16_ORT)
            r.check("ppocr", short, "fp16 export vs ort fp32 export", got, ref32, TOL_EXPORTS)
            # the fp16 export converted to .ert keeps its f16 weights as they are
            ert = os.path.join(r.work, short + "_fp16_export.ert")
            r.cli("convert", f16, ert)
            r.check("ppocr", short, "fp16 export .ert vs ort same in f32", r.edgert_run(ert, {iname: x}, short + "_e16"),
                    wide, TOL_F32)
            print("      %-17s %-40s rel L2 %.2e (f16 arithmetic alone)" % (short, "ort fp16 vs ort same in f32",
                                                                           rel_l2(ref16, wide)))
            print("      %-17s %-40s rel L2 %.2e" % (short, "ort fp16 export vs ort fp32", rel_l2(ref16, ref32)))

        def conv16():
            ert32, ert16 = os.path.join(r.work, short + ".ert"), os.path.join(r.work, short + "_fp16.ert")
            r.cli("convert", f32, ert32)
            r.cli("convert", f32, ert16, "--fp16")
            got = r.edgert_run(ert16, {iname: x}, short + "_ert16")
            rounded = ort_run(rounded_f16_weights(f32, os.path.join(r.work, short + "_w16.onnx")), {iname: x})
            r.check("ppocr", short, "--fp16 .ert vs ort f16-rounded weights", got, rounded, TOL_F32)
            r.check("ppocr", short, "--fp16 .ert vs ort fp32", got, ref32, TOL_F16_DEEP)
            r.size_check("ppocr", short, ert16, ert32, F16_SIZE_RATIO)

        guarded(r, "ppocr", short, "fp32 export", fp32)
        guarded(r, "ppocr", short, "fp16 export", fp16)
        guarded(r, "ppocr", short, "--fp16 conversion", conv16)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edgert", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--suite", choices=("zoo", "ppocr"), default="zoo")
    ap.add_argument("--emulator", default="", help="command prefix for edgert, tokens separated by '|'")
    ap.add_argument("--ppocr-dir", default=os.path.join(HERE, "..", "..", "..", "shared", "models", "ppocr"))
    ap.add_argument("--report", help="append 'suite model check rel_l2 tol ok' rows (TSV) here")
    args = ap.parse_args()
    r = Runner(args)
    t0 = time.time()
    print("onnx %s, onnxruntime %s, numpy %s; edgert: %s" % (onnx.__version__, ort.__version__, np.__version__,
                                                            " ".join(r.edgert)), flush=True)
    if args.suite == "zoo":
        suite_zoo(r)
    else:
        suite_ppocr(r, args.ppocr_dir)
    if args.report:
        with open(args.report, "w") as f:
            for row in r.rows:
                f.write("%s\t%s\t%s\t%.3e\t%.2g\t%s\n" % (row[0], row[1], row[2], row[3], row[4], "ok" if row[5] else "FAIL"))
    print("%s: %d checks, %d failed (%.1f s)" % (args.suite, len(r.rows), r.failed, time.time() - t0))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())

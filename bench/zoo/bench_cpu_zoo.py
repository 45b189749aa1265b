#!/usr/bin/env python3
"""CPU zoo benchmark: edgert vs onnxruntime on every .onnx of a folder.

    python bench/zoo/bench_cpu_zoo.py MODELS_DIR [--threads 1,2,4,8] [--batch 1,8]
        [--iters 20] [--warmup 3] [--edgert build/rel/apps/edgert]
        [--out bench/results] [--compare OLD.json] [--only NAME,...] [--alt-args=--no-strips]

MODELS_DIR is any folder of .onnx files with one float input whose only
dynamic dim is the batch (other dynamic dims are taken from the NAME.json
export_zoo.py writes beside each model): bench/zoo/export_zoo.py's
torchvision/timm/YOLO exports where torch exists, bench/zoo/make_cpu_zoo.py's
torch-free ones elsewhere. A model it cannot feed is listed as not measured
in the results. Thread counts above the machine's cores are dropped.

Per model, batch and thread count, in one run:
  edgert       `edgert bench MODEL --json --threads T --shape IN=DIMS` (its own
               process; p50 of --iters timed runs after --warmup);
  onnxruntime  one InferenceSession per thread count (intra_op T, inter_op 1,
               sequential, all graph optimisations), same iters and warm-up;
  outputs      `edgert run` and onnxruntime on the same random input
               (uniform [-1, 1), seeded per model), max |diff| / max |ref|
               reported, a mismatch above --tol flagged unless onnxruntime
               itself, with graph optimisations off, is at least a quarter as far
               from its optimised output (an input on which the model
               amplifies float32 rounding: reported with that figure).
Writes OUT/cpu_zoo_<UTC>.json and .md (p50 per side, ratio edgert/ort, and
the geomean of the ratios per thread count and batch). --compare OLD.json adds
the edgert p50 of an earlier run (another build: --edgert) as before/after;
--alt-args times edgert once more per row with those bench options (an A/B
of a session flag in the same run: --no-strips at batch > 1).
Timings on a shared machine are noisy: say so when quoting them.
Needs: pip install onnxruntime onnx numpy
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_cpu_ort import cpu_model  # noqa: E402  (bench/, one level up)


def input_spec(path, batch):
    """The input's name and dims at this batch: from the model, or, where it
    has dynamic dims besides the batch (Ultralytics' exports), from the
    NAME.json export_zoo.py writes beside it ("input": the batch-1 shape)."""
    side = path[:-5] + ".json"
    shape = None
    if os.path.exists(side):
        with open(side) as f:
            shape = json.load(f).get("input")
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in inits]
    if len(ins) != 1 or ins[0].type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
        raise ValueError("needs exactly one float input")
    dims = []
    for k, d in enumerate(ins[0].type.tensor_type.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(d.dim_value)
        elif k == 0:
            dims.append(batch)
        elif shape and len(shape) == len(ins[0].type.tensor_type.shape.dim) and int(shape[k]) > 0:
            dims.append(int(shape[k]))
        else:
            raise ValueError(f"dynamic dim {k} ({d.dim_param}) other than the batch, and no NAME.json input shape")
    return ins[0].name, dims


def p50(v):
    s = sorted(v)
    return s[(len(s) - 1) // 2]


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # errors only: old exports warn once per initializer listed as an input
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_self_spread(path, name, x, ref):
    """max |diff| / max |ref| of onnxruntime without graph optimisations against ref (its optimised run)"""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    out = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {name: x})))
    e = 0.0
    for k, v in ref.items():
        scale = float(np.max(np.abs(v))) or 1.0
        e = max(e, float(np.max(np.abs(out[k].astype(np.float64) - v))) / scale)
    return e


def ort_time(sess, name, x, iters, warmup):
    for _ in range(warmup):
        sess.run(None, {name: x})
    t = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(None, {name: x})
        t.append((time.perf_counter() - t0) * 1e3)
    return p50(t)


def shape_arg(name, dims):
    """edgert's --shape for the input as fed (batch and any dim taken from NAME.json)."""
    return ["--shape", f"{name}=" + "x".join(str(d) for d in dims)]


def edgert_bench(exe, path, name, dims, threads, iters, warmup, extra=()):
    r = subprocess.run([exe, "bench", path, "--json", "--threads", str(threads), *shape_arg(name, dims), "--iters",
                        str(iters), "--warmup", str(warmup), *extra], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip() or r.stdout.strip())
    return json.loads(r.stdout)["p50_ms"]


def edgert_outputs(exe, path, name, x, threads, tmp):
    inp = os.path.join(tmp, "in.npy")
    np.save(inp, x)
    od = os.path.join(tmp, "out")
    os.makedirs(od, exist_ok=True)
    r = subprocess.run([exe, "run", path, "--input", f"{name}={inp}", "--output-dir", od, "--threads",
                        str(threads), *shape_arg(name, x.shape)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip() or r.stdout.strip())
    return {f[:-4]: np.load(os.path.join(od, f)) for f in os.listdir(od) if f.endswith(".npy")}


def geomean(v):
    v = [x for x in v if x and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models_dir")
    ap.add_argument("--threads", default="1,2,4,8")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--edgert", default=os.path.join("build", "rel", "apps", "edgert"))
    ap.add_argument("--out", default=os.path.join("bench", "results"))
    ap.add_argument("--compare", help="an earlier cpu_zoo JSON: its edgert p50 shown as 'before'")
    ap.add_argument("--only", default="", help="comma-separated model names (file names without .onnx)")
    ap.add_argument("--tol", type=float, default=1e-3, help="max |diff| / max |ref| allowed")
    ap.add_argument("--alt-args", default="", help="edgert bench options (e.g. --no-strips): edgert timed once more "
                    "with them, right after the default run, as an 'alt' column (batch > 1 only for --no-strips)")
    a = ap.parse_args()
    alt = a.alt_args.split()

    ncpu = os.cpu_count() or 1
    threads = [t for t in (int(s) for s in a.threads.split(",")) if t <= ncpu] or [1]
    batches = [int(s) for s in a.batch.split(",")]
    only = {s for s in a.only.split(",") if s}
    models = sorted(f for f in os.listdir(a.models_dir) if f.endswith(".onnx") and (not only or f[:-5] in only))
    if not models:
        sys.exit(f"no .onnx files in {a.models_dir}")
    before = {}
    if a.compare:
        with open(a.compare) as f:
            for r in json.load(f)["rows"]:
                before[(r["model"], r["batch"], r["threads"])] = r.get("edgert_p50_ms")

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    rows, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for mi, mf in enumerate(models):
            path, name = os.path.join(a.models_dir, mf), mf[:-5]
            for b in batches:
                try:
                    in_name, dims = input_spec(path, b)
                except ValueError as e:  # reported in the results, never dropped silently
                    print(f"{name}: skipped ({e})", file=sys.stderr)
                    skipped.append({"model": name, "batch": b, "why": str(e)})
                    continue
                x = np.random.default_rng(1000 + mi).uniform(-1, 1, dims).astype(np.float32)
                for t in threads:
                    row = {"model": name, "batch": b, "threads": t}
                    try:
                        sess = ort_session(path, t)
                        ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {in_name: x})))
                        row["ort_p50_ms"] = ort_time(sess, in_name, x, a.iters, a.warmup)
                        del sess
                    except Exception as e:  # an op onnxruntime lacks: keep edgert's figure
                        row["ort_error"] = str(e).splitlines()[0][:200]
                        ref = None
                    try:
                        row["edgert_p50_ms"] = edgert_bench(a.edgert, path, in_name, dims, t, a.iters, a.warmup)
                        if alt and (b > 1 or "--no-strips" not in alt):
                            row["edgert_alt_p50_ms"] = edgert_bench(a.edgert, path, in_name, dims, t, a.iters,
                                                                    a.warmup, alt)
                        got = edgert_outputs(a.edgert, path, in_name, x, t, tmp)
                        if ref:
                            err = 0.0
                            for k, v in ref.items():
                                g = got.get(k)
                                if g is None or g.shape != v.shape:
                                    err = float("inf")
                                    break
                                scale = float(np.max(np.abs(v))) or 1.0
                                err = max(err, float(np.max(np.abs(g.astype(np.float64) - v))) / scale)
                            row["max_rel_diff"] = err
                            row["outputs_match"] = err <= a.tol
                            if err > a.tol:
                                # is the model this sensitive to float32 rounding on this input? onnxruntime
                                # against itself without graph optimisations (other fusions, other sums)
                                spread = ort_self_spread(path, in_name, x, ref)
                                row["ort_self_diff"] = spread
                                row["outputs_match"] = err <= 4.0 * spread
                                row["ill_conditioned"] = row["outputs_match"]
                    except Exception as e:
                        row["edgert_error"] = str(e).splitlines()[0][:200] if str(e) else "failed"
                    if row.get("edgert_p50_ms") and row.get("ort_p50_ms"):
                        row["ratio"] = row["edgert_p50_ms"] / row["ort_p50_ms"]
                    if (name, b, t) in before:
                        row["edgert_before_p50_ms"] = before[(name, b, t)]
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr)

    summary = []
    for b in batches:
        for t in threads:
            sel = [r for r in rows if r["batch"] == b and r["threads"] == t]
            s = {"batch": b, "threads": t, "geomean_ratio": geomean([r.get("ratio") for r in sel]),
                 "worst": max(sel, key=lambda r: r.get("ratio") or 0)["model"] if sel else None}
            bef = [(r["edgert_before_p50_ms"], r["edgert_p50_ms"]) for r in sel
                   if r.get("edgert_before_p50_ms") and r.get("edgert_p50_ms")]
            if bef:
                s["geomean_after_over_before"] = geomean([n / o for o, n in bef])
            alts = [(r["edgert_p50_ms"], r["edgert_alt_p50_ms"]) for r in sel
                    if r.get("edgert_alt_p50_ms") and r.get("edgert_p50_ms")]
            if alts:
                s["geomean_alt_over_default"] = geomean([n / o for o, n in alts])
            summary.append(s)
    res = {"stamp": stamp, "machine": {"cpu": cpu_model(), "cores": ncpu, "arch": platform.machine()},
           "onnxruntime": ort.__version__, "edgert": a.edgert, "models_dir": a.models_dir, "iters": a.iters,
           "warmup": a.warmup, "alt_args": a.alt_args, "rows": rows, "skipped": skipped, "summary": summary}
    os.makedirs(a.out, exist_ok=True)
    jpath = os.path.join(a.out, f"cpu_zoo_{stamp}.json")
    with open(jpath, "w") as f:
        json.dump(res, f, indent=1)

    def fmt(v, p=2):
        return "-" if v is None else f"{v:.{p}f}"

    md = [f"# CPU zoo {stamp}", "", f"{res['machine']['cpu']}, {ncpu} cores ({platform.machine()}), "
          f"onnxruntime {ort.__version__}, p50 of {a.iters} runs after {a.warmup} warm-up", "",
          "| model | batch | threads | edgert ms | ort ms | edgert/ort | outputs (max rel diff) |"
          + (" edgert before ms |" if before else "") + (f" edgert {a.alt_args} ms |" if alt else ""),
          "|---|---|---|---|---|---|---|" + ("---|" if before else "") + ("---|" if alt else "")]
    for r in rows:
        outs = "-" if "max_rel_diff" not in r else f"{'ok' if r['outputs_match'] else 'MISMATCH'} ({r['max_rel_diff']:.1e})"
        if "ort_self_diff" in r:
            outs += f", onnxruntime unoptimised vs optimised {r['ort_self_diff']:.1e}"
        line = (f"| {r['model']} | {r['batch']} | {r['threads']} | {fmt(r.get('edgert_p50_ms'))} | "
                f"{fmt(r.get('ort_p50_ms'))} | {fmt(r.get('ratio'))} | {outs} |")
        if before:
            line += f" {fmt(r.get('edgert_before_p50_ms'))} |"
        if alt:
            line += f" {fmt(r.get('edgert_alt_p50_ms'))} |"
        md.append(line)
    md += ["", "| batch | threads | geomean edgert/ort | worst |" + (" geomean after/before |" if before else "")
           + (f" geomean ({a.alt_args}) / default |" if alt else ""),
           "|---|---|---|---|" + ("---|" if before else "") + ("---|" if alt else "")]
    for s in summary:
        line = f"| {s['batch']} | {s['threads']} | {fmt(s['geomean_ratio'])} | {s['worst']} |"
        if before:
            line += f" {fmt(s.get('geomean_after_over_before'))} |"
        if alt:
            line += f" {fmt(s.get('geomean_alt_over_default'), 3)} |"
        md.append(line)
    if skipped:
        md += ["", "Not measured: " + "; ".join(f"{k['model']} batch {k['batch']} ({k['why']})" for k in skipped)]
    mpath = os.path.join(a.out, f"cpu_zoo_{stamp}.md")
    with open(mpath, "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"\nwrote {jpath} and {mpath}")
    bad = [r for r in rows if r.get("outputs_match") is False or "edgert_error" in r]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Instructions executed by one inference, edgert vs onnxruntime, per model of a folder.

    python bench/zoo/callgrind_zoo.py MODELS_DIR [--edgert build/rel/apps/edgert]
        [--only NAME,...] [--threads 1] [--compare OLD.json] [--out bench/results] [--tag TEXT]
        [--no-ort | --no-edgert | --ort-from OLD.json] [--keep DIR]

valgrind callgrind, batch 1. valgrind has no AVX-512, so both sides run their
AVX2/FMA path (onnxruntime's MLAS and edgert dispatch on cpuid, which valgrind
answers without AVX-512). Deterministic, so usable on a shared, noisy machine.
  edgert       `edgert bench MODEL --iters 1 --warmup 0` with
               --toggle-collect=ert_session_run: the instructions of one run.
  onnxruntime  one InferenceSession (intra_op --threads, inter_op 1, sequential,
               all graph optimisations), one warm-up run, then one run with
               collection on: the onnxruntime wheels are stripped, so there is
               no Run symbol to toggle on; cg_toggle.c's client requests turn
               instrumentation and collection on and off around sess.run (this
               adds the Python binding's input/output conversion, well under
               1% here); start-up and create run uninstrumented.
Writes OUT/cpu_zoo_callgrind_<UTC>.json and .md; --compare adds an earlier
JSON's edgert counts as "before".
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

HERE = os.path.dirname(os.path.abspath(__file__))

ORT_CHILD = r"""
import ctypes, sys
import numpy as np, onnx, onnxruntime as ort
lib = ctypes.CDLL(sys.argv[1])
path, threads = sys.argv[2], int(sys.argv[3])
m = onnx.load(path, load_external_data=False)
inits = {i.name for i in m.graph.initializer}
inp = [i for i in m.graph.input if i.name not in inits][0]
dims = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.log_severity_level = 3
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
x = np.random.default_rng(0).uniform(-1, 1, dims).astype(np.float32)
s.run(None, {inp.name: x})
lib.cg_on()
s.run(None, {inp.name: x})
lib.cg_off()
"""


def summary_ir(path):
    """The larger of summary: and totals: (with --instr-atstart=no, summary: is 0)."""
    v = []
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                v.append(int(line.split()[1]))
    if not v:
        raise RuntimeError(f"no summary in {path}")
    return max(v)


def cg(cmd, out, extra):
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + extra + cmd,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "valgrind failed")
    return summary_ir(out)


def geomean(v):
    v = [x for x in v if x]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models_dir")
    ap.add_argument("--edgert", default=os.path.join("build", "rel", "apps", "edgert"))
    ap.add_argument("--only", default="")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-ort", action="store_true", help="edgert only (A/B of two edgert builds)")
    ap.add_argument("--no-edgert", action="store_true", help="onnxruntime only")
    ap.add_argument("--ort-from", help="an earlier callgrind_zoo JSON: take the onnxruntime counts from it")
    ap.add_argument("--compare", help="an earlier callgrind_zoo JSON: its edgert counts shown as 'before'")
    ap.add_argument("--out", default=os.path.join("bench", "results"))
    ap.add_argument("--tag", default="", help="what the edgert build is (branch, commit)")
    ap.add_argument("--keep", help="keep the callgrind.out files in this folder (for callgrind_annotate)")
    a = ap.parse_args()
    only = {s for s in a.only.split(",") if s}
    models = sorted(f[:-5] for f in os.listdir(a.models_dir) if f.endswith(".onnx") and (not only or f[:-5] in only))
    before = {}
    if a.compare:
        with open(a.compare) as f:
            before = {r["model"]: r.get("edgert_ir") for r in json.load(f)["rows"]}
    ort_from = {}
    if a.ort_from:
        with open(a.ort_from) as f:
            ort_from = {r["model"]: r.get("ort_ir") for r in json.load(f)["rows"]}
        a.no_ort = True
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        keep = a.keep or tmp
        os.makedirs(keep, exist_ok=True)
        so = os.path.join(tmp, "cg_toggle.so")
        if not a.no_ort:
            subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so, os.path.join(HERE, "cg_toggle.c")], check=True)
        for n in models:
            path = os.path.join(a.models_dir, n + ".onnx")
            row = {"model": n}
            try:
                if a.no_edgert:
                    raise RuntimeError("not measured (--no-edgert)")
                row["edgert_ir"] = cg([a.edgert, "bench", path, "--threads", str(a.threads), "--batch", "1", "--iters", "1",
                                       "--warmup", "0"], os.path.join(keep, f"edgert_{n}.out"),
                                      ["--toggle-collect=ert_session_run"])
            except RuntimeError as e:
                row["edgert_error"] = str(e)[:200]
            if not a.no_ort:
                try:
                    row["ort_ir"] = cg([sys.executable, "-c", ORT_CHILD, so, path, str(a.threads)],
                                       os.path.join(keep, f"ort_{n}.out"), ["--collect-atstart=no", "--instr-atstart=no"])
                except RuntimeError as e:
                    row["ort_error"] = str(e)[:200]
            if ort_from.get(n):
                row["ort_ir"] = ort_from[n]
            if row.get("edgert_ir") and row.get("ort_ir"):
                row["ratio"] = row["edgert_ir"] / row["ort_ir"]
            if before.get(n):
                row["edgert_before_ir"] = before[n]
                if row.get("edgert_ir"):
                    row["after_over_before"] = row["edgert_ir"] / before[n]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    res = {"stamp": stamp, "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
           "method": "valgrind callgrind instruction counts, batch 1, AVX2/FMA path on both sides (valgrind has no "
                     "AVX-512); edgert: --toggle-collect=ert_session_run around one run; onnxruntime: client-request "
                     "toggle around one InferenceSession.run after one warm-up run",
           "machine": {"cpu": cpu, "cores": os.cpu_count(), "arch": platform.machine()}, "threads": a.threads,
           "edgert": a.edgert, "tag": a.tag, "models_dir": a.models_dir, "rows": rows,
           "geomean_ratio": geomean([r.get("ratio") for r in rows]),
           "geomean_after_over_before": geomean([r.get("after_over_before") for r in rows])}
    os.makedirs(a.out, exist_ok=True)
    jp = os.path.join(a.out, f"cpu_zoo_callgrind_{stamp}.json")
    with open(jp, "w") as f:
        json.dump(res, f, indent=1)

    def m(v):
        return "-" if not v else f"{v / 1e6:.1f} M"

    md = [f"# CPU zoo instruction counts {stamp}", "", f"`{res['command']}`", "", res["method"] + ".", "",
          f"{cpu}, {os.cpu_count()} cores; edgert {a.tag or a.edgert}; {a.threads} thread(s).", "",
          "| model | edgert | onnxruntime | edgert/ort |" + (" edgert before | after/before |" if before else ""),
          "|---|---|---|---|" + ("---|---|" if before else "")]
    for r in rows:
        line = f"| {r['model']} | {m(r.get('edgert_ir'))} | {m(r.get('ort_ir'))} | " + (
            f"{r['ratio']:.2f} |" if r.get("ratio") else "- |")
        if before:
            line += f" {m(r.get('edgert_before_ir'))} | " + (
                f"{r['after_over_before']:.3f} |" if r.get("after_over_before") else "- |")
        md.append(line)
    g = res["geomean_ratio"]
    md += ["", f"geomean edgert/onnxruntime: {g:.2f}" if g else "geomean edgert/onnxruntime: -"]
    if res["geomean_after_over_before"]:
        md.append(f"geomean after/before: {res['geomean_after_over_before']:.3f}")
    mp = os.path.join(a.out, f"cpu_zoo_callgrind_{stamp}.md")
    with open(mp, "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"\nwrote {jp} and {mp}")
    return 1 if any(("edgert_error" in r and not a.no_edgert) or "ort_error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

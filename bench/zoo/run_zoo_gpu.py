#!/usr/bin/env python3
"""Zoo benchmark on a GPU: edgert (CUDA) next to PyTorch on every model that
bench/zoo/export_zoo.py made.

    python3 bench/zoo/run_zoo_gpu.py --zoo ZOO_DIR --driver BUILD/apps/bench/bench_zoo_edgert \
        --out RESULT.json [--md RESULT.md] [--only NAMES] [--iters 50] [--warmup 10] \
        [--compile] [--configs f16:1,...] [--resume OLD.json] [--budget-s S] [--fast] [--no-plan-cache] [--profile]
        [--io host|device|both]

(bench/zoo/run_zoo_gpu.sh does export + build + this in one command.)
Per model, in a child process of its own (one crash or OOM costs one row):
  1. Reference: the exported module (ZOO_DIR/NAME.pt) on the GPU in f32 with
     TF32 off (cuBLAS and cuDNN), on one seeded random input at batch 1.
  2. edgert: bench_zoo_edgert runs the ONNX file for f32 and f16 at batch 1
     and 8 in one process: create time (first create; batch 1 also a second
     create in the same process, which with the plan cache (on unless
     --no-plan-cache: a fresh folder per model) takes create's answers from
     the file the first wrote: cold vs warm), measurements made by each create
     (ert_create_stats), with --fast also f16 batch 1 in ERT_CREATE_FAST
     (heuristics only: its create time and p50 against the tuned one), p50/p90 of
     ert_session_run (host clock: input copy in, CUDA-graph replay, output
     copy out, synchronise), arena bytes, CPU-fallback node count; its batch-1
     outputs against the reference (relative L2 of output 0). With --io device
     or both (the default) each config runs again with device I/O
     (ERT_SESSION_DEVICE_INPUTS | DEVICE_OUTPUTS: input uploaded once, output
     left on the GPU, so the timed run is the graph replay and its
     synchronisation alone, as PyTorch's is), key NAME_dev.
  3. PyTorch, same configs: eager, CUDA-graph replay NCHW, CUDA-graph replay
     channels_last (model and input converted), and with --compile
     torch.compile(mode="reduce-overhead") (f16 batch 1 only: compiling costs
     10-60 s per config); each timed per iteration with CUDA events after a
     warm-up (input already on the GPU, output left there),
     p50/p90 by nearest rank; peak memory of one f16 batch-1 inference
     (torch.cuda.max_memory_allocated, weights included).
Then the ratios edgert p50 / best PyTorch p50 (the fastest of graph NCHW,
graph channels_last and compile) per config, like for like (edgert's device-I/O
run where measured; the host-I/O ratios are summarised beside them), their geomeans against the goals
of issue 12, and a markdown table. Models or configs that fail are reported
with their error, never dropped silently.
"""
import argparse
import copy
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
from bench_gpu import pct, rel_l2, time_torch as time_fn  # noqa: E402  (the GPU benchmark's timing and metrics)

GOALS = {"f16_b1": 0.6, "f16_b8": 0.7, "f32_b1": 1.0, "f32_b8": 1.0}
CONFIGS = [("f32", 1), ("f16", 1), ("f32", 8), ("f16", 8)]


def main_tensor(y):
    """Output 0 as the ONNX export sees it (YOLO: the first of a tuple/list)."""
    import torch

    while isinstance(y, (tuple, list)):
        y = y[0]
    if isinstance(y, dict):
        y = y["out"]
    assert isinstance(y, torch.Tensor)
    return y


def graph_fn(m, x):
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            m(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        m(x)
    return g.replay


def one_model(a, name):
    import numpy as np
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    meta = json.load(open(os.path.join(a.zoo, name + ".json")))
    row = {"name": name, "family": meta["family"], "exporter": meta["exporter"], "input": meta["input"],
           "edgert": {}, "torch": {}}
    dev = torch.device("cuda")
    m = torch.load(os.path.join(a.zoo, name + ".pt"), weights_only=False, map_location="cpu").eval()
    for p in m.parameters():
        p.requires_grad_(False)
    g = torch.Generator().manual_seed(1234)
    x1 = torch.randn(*meta["input"], generator=g)
    m32 = copy.deepcopy(m).to(dev)
    with torch.no_grad():
        ref = main_tensor(m32(x1.to(dev))).float().cpu().numpy()
    row["output_shape"] = list(ref.shape)
    # edgert
    with tempfile.TemporaryDirectory() as td:
        xf = os.path.join(td, "x.f32")
        x1.numpy().astype(np.float32).tofile(xf)
        cmd = [a.driver, os.path.join(a.zoo, name + ".onnx"), xf, td, str(a.iters), str(a.warmup)]
        cmd += ["--input-dims", "x".join(str(d) for d in meta["input"])]
        if not a.no_plan_cache:
            cmd += ["--plan-cache", os.path.join(td, "plan")]
        if a.profile:
            cmd += ["--profile"]
        if a.io in ("host", "both"):
            cmd += ["%s:%d%s" % (c[0], c[1], "+" if c[1] == 1 else "") for c in configs(a)]
        if a.io in ("device", "both"):
            cmd += ["%s:%d%s" % (c[0], c[1], "+d" if c[1] == 1 and a.io == "device" else "d") for c in configs(a)]
        if a.fast:
            cmd += ["f16:1+f"]
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.edgert_timeout)
        row["edgert_wall_s"] = round(time.time() - t0, 1)
        for line in p.stdout.splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            fast = "_fast" if r.get("create_mode") == "fast" else ""
            dsuf = "_dev" if r.get("io") == "device" else ""
            key = "%s_b%d%s%s" % (r.get("precision"), r.get("batch", 0), fast, dsuf)
            if r.get("batch") == 1 and not r.get("error"):
                of = os.path.join(td, "out_%s_b1%s%s.f32" % (r["precision"], fast, dsuf))
                if os.path.exists(of):
                    got = np.fromfile(of, dtype=np.float32)
                    r["rel_l2"] = rel_l2(got, ref) if got.size == ref.size else None
            row["edgert"][key] = r
        if p.returncode != 0 and not row["edgert"]:
            row["edgert_error"] = (p.stderr or p.stdout)[-500:]
    # PyTorch
    for prec, batch in configs(a):
        key = "%s_b%d" % (prec, batch)
        r = {}
        try:
            dt = torch.float16 if prec == "f16" else torch.float32
            mm = copy.deepcopy(m).to(dev, dt)
            x = x1.repeat(batch, 1, 1, 1).to(dev, dt)
            with torch.no_grad():
                r["eager_p50"], r["eager_p90"] = time_fn(lambda: mm(x), a.iters, a.warmup)
                r["rel_l2"] = rel_l2(main_tensor(mm(x[:1])).float().cpu().numpy(), ref)
            if prec == "f16" and batch == 1:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                with torch.no_grad():
                    mm(x)
                torch.cuda.synchronize()
                row["torch_peak_bytes_f16_b1"] = torch.cuda.max_memory_allocated()
                row["torch_weights_bytes_f16"] = sum(t.numel() * t.element_size() for t in mm.state_dict().values())
                row["torch_activations_peak_f16_b1"] = torch.cuda.max_memory_allocated() - base
            try:
                r["graph_p50"], r["graph_p90"] = time_fn(graph_fn(mm, x), a.iters, a.warmup)
            except Exception as e:
                r["graph_error"] = str(e)[:200]
            try:
                mc = copy.deepcopy(mm).to(memory_format=torch.channels_last)
                xc = x.contiguous(memory_format=torch.channels_last)
                r["graph_cl_p50"], r["graph_cl_p90"] = time_fn(graph_fn(mc, xc), a.iters, a.warmup)
                del mc
            except Exception as e:
                r["graph_cl_error"] = str(e)[:200]
            if a.compile and prec == "f16" and batch == 1:
                try:
                    t0 = time.time()
                    mcomp = torch.compile(mm, mode="reduce-overhead")
                    with torch.no_grad():
                        for _ in range(3):
                            mcomp(x)
                        r["compile_s"] = round(time.time() - t0, 1)
                        r["compile_p50"], r["compile_p90"] = time_fn(lambda: mcomp(x), a.iters, a.warmup)
                except Exception as e:
                    r["compile_error"] = str(e)[:200]
            del mm
        except Exception as e:
            r["error"] = str(e)[:300]
        torch.cuda.empty_cache()
        row["torch"][key] = r
    return row


def configs(a):
    """--configs f16:1,f32:8 (default: all four)."""
    if not a.configs:
        return CONFIGS
    out = []
    for c in a.configs.split(","):
        p, b = c.split(":")
        out.append((p, int(b)))
    return out


def best_torch(t):
    c = [t.get(k) for k in ("graph_p50", "graph_cl_p50", "compile_p50") if t.get(k)]
    return min(c) if c else None


def edgert_like(r, k):
    """edgert's result for config k measured like PyTorch's (device I/O) where it
    exists, else the host-I/O one."""
    e = r.get("edgert", {})
    d = e.get(k + "_dev", {})
    return d if d.get("p50_ms") else e.get(k, {})


def summarise(rows):
    ratios = {k: [] for k in GOALS}
    host = {k: [] for k in GOALS}
    for r in rows:
        r["ratio"], r["ratio_host_io"] = {}, {}
        for k in GOALS:
            b = best_torch(r.get("torch", {}).get(k, {}))
            e = edgert_like(r, k)
            if e.get("p50_ms") and b:
                r["ratio"][k] = e["p50_ms"] / b
                ratios[k].append(r["ratio"][k])
            h = r.get("edgert", {}).get(k, {})
            if h.get("p50_ms") and b:
                r["ratio_host_io"][k] = h["p50_ms"] / b
                host[k].append(r["ratio_host_io"][k])
    gm = lambda v: math.exp(sum(math.log(x) for x in v) / len(v)) if v else None
    geo = {}
    for k, v in ratios.items():
        geo[k] = {"geomean": gm(v), "n": len(v), "goal": GOALS[k], "worst": max(v) if v else None,
                  "above_0.9": sum(x > 0.9 for x in v), "host_io_geomean": gm(host[k]), "host_io_n": len(host[k])}
    return geo


def fmt(x, f="%.2f"):
    return f % x if isinstance(x, (int, float)) and x is not None else "-"


def markdown(res):
    out = ["# Zoo benchmark (GPU)", "",
           "Device: %s; date %s; command: `%s`" % (res["device"], res["date"], res["command"]), "",
           "p50 ms; ratio = edgert / best PyTorch (fastest of CUDA graph NCHW, CUDA graph channels_last and "
           "torch.compile reduce-overhead where measured); rel L2 of output 0 against PyTorch f32 (TF32 off); "
           "create = first / second ert_session_create in one process (the second from the plan cache the first "
           "wrote, unless --no-plan-cache); fast = ERT_CREATE_FAST f16 b1: create ms and p50 / tuned p50 (--fast); "
           "arena vs PyTorch peak "
           "(f16, batch 1, weights included). edgert p50 is the device-I/O run (input on the GPU, output left "
           "there: the graph replay alone, as PyTorch's) where measured; 'host I/O' is the same session kind "
           "with the input copied in and the output copied out in every run, and its ratio.", "",
           "| model | exporter | fb | f16 b1 edgert | host I/O | ratio | graph | graph CL | compile | ratio | f16 b8 edgert | best | ratio "
           "| f32 b1 edgert | best | ratio | f32 b8 edgert | best | ratio | rel L2 f32 | rel L2 f16 | create f16 ms "
           "| fast create ms | fast p50 / tuned | arena MiB | torch peak MiB |",
           "|" + "---|" * 25]
    for r in res["models"]:
        e, t, q = r.get("edgert", {}), r.get("torch", {}), r.get("ratio", {})
        g = lambda k: e.get(k, {})
        like = lambda k: edgert_like(r, k)
        cells = [r["name"], r["exporter"], str(like("f16_b1").get("cpu_fallback_nodes", "-"))]
        cells += [fmt(like("f16_b1").get("p50_ms"), "%.3f") if not like("f16_b1").get("error") else "ERR",
                  fmt(g("f16_b1").get("p50_ms"), "%.3f"), fmt(r.get("ratio_host_io", {}).get("f16_b1")),
                  fmt(t.get("f16_b1", {}).get("graph_p50"), "%.3f"), fmt(t.get("f16_b1", {}).get("graph_cl_p50"), "%.3f"),
                  fmt(t.get("f16_b1", {}).get("compile_p50"), "%.3f"), fmt(q.get("f16_b1"))]
        for k in ("f16_b8", "f32_b1", "f32_b8"):
            cells += [fmt(like(k).get("p50_ms"), "%.3f") if not like(k).get("error") else "ERR",
                      fmt(best_torch(t.get(k, {})), "%.3f"), fmt(q.get(k))]
        # accuracy, create and arena of the like-for-like run (device I/O where measured: the same plan)
        cells += [fmt(like("f32_b1").get("rel_l2"), "%.1e"), fmt(like("f16_b1").get("rel_l2"), "%.1e"),
                  "%s / %s" % (fmt(like("f16_b1").get("create_first_ms"), "%.0f"),
                               fmt(like("f16_b1").get("create_second_ms"), "%.0f")),
                  fmt(g("f16_b1_fast").get("create_first_ms"), "%.0f"),
                  fmt(g("f16_b1_fast")["p50_ms"] / g("f16_b1")["p50_ms"]
                      if g("f16_b1_fast").get("p50_ms") and g("f16_b1").get("p50_ms") else None),
                  fmt(like("f16_b1").get("arena_bytes", 0) / 2**20 if like("f16_b1").get("arena_bytes") else None, "%.1f"),
                  fmt(r.get("torch_peak_bytes_f16_b1", 0) / 2**20 if r.get("torch_peak_bytes_f16_b1") else None, "%.1f")]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "| config | geomean edgert/best PyTorch | goal | models | worst | above 0.9x | host-I/O geomean |",
            "|---|---|---|---|---|---|---|"]
    for k, v in res["geomeans"].items():
        out.append("| %s | %s | <= %.1f | %d | %s | %s | %s (%s) |" % (
            k, fmt(v["geomean"]), v["goal"], v["n"], fmt(v["worst"]), v.get("above_0.9", "-"),
            fmt(v.get("host_io_geomean")), v.get("host_io_n", "-")))
    # where create's time went (ert_create_stats), f16 batch 1, like-for-like run
    rows = []
    for r in res["models"]:
        e = edgert_like(r, "f16_b1")
        for which in ("first", "second"):
            ph = e.get("create_%s_phases" % which)
            if not ph:
                continue
            rows.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["name"], "cold" if which == "first" else "warm (plan cache)",
                fmt(e.get("create_%s_ms" % which), "%.0f"), fmt(ph.get("init_ms"), "%.0f"),
                fmt(ph.get("graph_ms"), "%.0f"), fmt(ph.get("upload_ms"), "%.0f"), fmt(ph.get("bind_ms"), "%.0f"),
                fmt(ph.get("measure_ms"), "%.0f"), fmt(ph.get("finalize_ms"), "%.0f"),
                e.get("create_%s_searches" % which, "-"),
                e.get("create_second_cached", "-") if which == "second" else "-"))
    if rows:
        out += ["", "Create, f16 batch 1 (ms; the first create of the process pays the CUDA context and library "
                "start in init; measure and finalize are parts of graph + bind (the channels-last decision measures during "
                "the passes); the rest of create is the plan cache file):", "",
                "| model | create | total | init | graph | upload | bind | measure | finalize | searches | cached |",
                "|---|---|---|---|---|---|---|---|---|---|---|"] + rows
    if res.get("not_run"):
        out += ["", "Not run (time budget of this run): " + ", ".join(res["not_run"])]
    errs = [(r["name"], k, v.get("error")) for r in res["models"] for k, v in r.get("edgert", {}).items() if v.get("error")]
    errs += [(r["name"], "-", r.get("edgert_error") or r.get("error")) for r in res["models"]
             if r.get("edgert_error") or r.get("error")]
    if errs:
        out += ["", "Errors:", ""] + ["- %s %s: %s" % e for e in errs]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--md")
    ap.add_argument("--only", default="")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--configs", default="", help="PRECISION:BATCH,... (default f32:1,f16:1,f32:8,f16:8)")
    ap.add_argument("--edgert-timeout", type=int, default=240)
    ap.add_argument("--resume", help="an earlier result file: its models are kept, the others run")
    ap.add_argument("--budget-s", type=float, default=0, help="start no model after this many seconds (0: no limit)")
    ap.add_argument("--fast", action="store_true", help="also f16 batch 1 with ERT_CREATE_FAST")
    ap.add_argument("--profile", action="store_true",
                    help="each edgert config also reports one ert_session_profile run (time per op type, slowest nodes)")
    ap.add_argument("--no-plan-cache", action="store_true", help="every create measures (no plan cache folder)")
    ap.add_argument("--io", choices=("host", "device", "both"), default="both",
                    help="edgert's input/output: copied every run (host), left on the GPU as PyTorch's (device), or both")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print("ZOO_ROW " + json.dumps(one_model(a, a.one)), flush=True)
        return 0
    names = [n for n in a.only.split(",") if n] or sorted(
        f[:-5] for f in os.listdir(a.zoo) if f.endswith(".json") and f != "skipped.json")
    rows = []
    if a.resume and os.path.exists(a.resume):
        rows = [r for r in json.load(open(a.resume))["models"] if "edgert" in r]
    done = {r["name"] for r in rows}
    start = time.time()
    for n in names:
        if n in done:
            continue
        if a.budget_s and time.time() - start > a.budget_s:
            print("budget spent: %s and later models not run" % n, flush=True)
            break
        t0 = time.time()
        cmd = [sys.executable, os.path.abspath(__file__), "--one", n] + sys.argv[1:]
        p = subprocess.run(cmd, capture_output=True, text=True)
        row = None
        for line in p.stdout.splitlines():
            if line.startswith("ZOO_ROW "):
                row = json.loads(line[8:])
        if row is None:
            row = {"name": n, "exporter": "?", "error": (p.stderr or "no output")[-600:]}
        row["wall_s"] = round(time.time() - t0, 1)
        rows.append(row)
        # the rows so far, so that a run cut off (time limit, crash) keeps them for --resume
        json.dump({"models": rows, "partial": True}, open(a.out, "w"), indent=1)
        e = row.get("edgert", {}).get("f16_b1", {})
        print("%-32s %6.1fs  f16 b1 edgert %s ms, torch graph %s ms %s" % (
            n, row["wall_s"], e.get("p50_ms"), row.get("torch", {}).get("f16_b1", {}).get("graph_p50"),
            e.get("error") or row.get("error", "")[:200]), flush=True)
    import torch

    res = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "?",
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
           "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "host": platform.node(),
           "models": rows}
    res["not_run"] = [n for n in names if n not in {r["name"] for r in rows}]
    res["geomeans"] = summarise(rows)
    json.dump(res, open(a.out, "w"), indent=1)
    # f16 tolerances for the gpu test (tests/cuda/test_zoo_cuda.c, ERT_ZOO_BENCH_DIR): twice PyTorch's own f16 error
    with open(os.path.join(a.zoo, "f16_tol.txt"), "w") as f:
        for r in rows:
            e = r.get("torch", {}).get("f16_b1", {}).get("rel_l2")
            if e is not None and math.isfinite(e):
                f.write("%s %.3g\n" % (r["name"], max(2 * e, 2e-2)))
    md = markdown(res)
    if a.md:
        open(a.md, "w").write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

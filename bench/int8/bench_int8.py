#!/usr/bin/env python3
"""INT8 benchmark on a GPU (issue 14): edgert int8 next to edgert f16 and
PyTorch f16 (CUDA graph) on ResNet-18, ResNet-50 and MobileNetV2 (default;
--models takes any bench/zoo/export_zoo.py name, at its input size:
yolov8n and yolo11n need the ultralytics wheel).

    python3 bench/int8/bench_int8.py --driver BUILD/apps/bench/bench_zoo_edgert --edgert BUILD/apps/edgert \
        --work DIR --out RESULT.json [--md RESULT.md] [--models resnet18,resnet50] [--iters 50] [--warmup 10] \
        [--calib 16]

(bench/int8/run_int8_bench.sh builds what is missing and runs this.)
Per model:
  1. The float model as the zoo makes it (bench/zoo/export_zoo.py: torchvision,
     random weights seeded by name, 3 train-mode passes for the BatchNorm
     statistics, ONNX opset 17 with a dynamic batch; YOLO from its YAML through
     Ultralytics' exporter): DIR/NAME.onnx.
  2. `edgert quantize NAME.onnx --calib calib.npy --out NAME_int8.ert` on
     --calib random N(0, 1) samples (seeded): int8 weights per output channel,
     int8 activations (minmax), QDQ form; the Q/DQ pass folds it into
     QLinearConv / QLinearMatMul at session create.
  3. edgert (bench/zoo/zoo_edgert.c, one process per file): the float ONNX in
     f16 and the int8 file with f16 (--int8-f32: also f32) for the float ops
     left around the integer ones, batch 1 and 8: p50/p90 of ert_session_run (host clock;
     --io device (default): the input uploaded once and the output left on
     the GPU, so the run is the CUDA-graph replay, like for like with
     PyTorch's; --io host: input copy in, replay, output copy out), nodes on
     the CPU fallback, weight bytes on the device. --ab: the int8 file once
     more with ERT_SESSION_NO_PACK (its convs on the CUDA-core kernel instead
     of the tensor cores). --profile: per-op device time of the int8 runs.
  4. PyTorch f16, CUDA-graph replay NCHW and channels_last (input already on
     the GPU), CUDA events, p50/p90 by
     nearest rank (bench/gpu/bench_gpu.py's timing).
  5. Batch-1 outputs against PyTorch f32 (TF32 off): relative L2 and whether
     the top-1 class agrees (random weights: a sanity check, not accuracy).
Sizes: the f32 ONNX file, the int8 .ert file, the weight bytes each session
holds. Failures are reported in the row, never dropped.
"""
import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "zoo"))
sys.path.insert(0, os.path.join(HERE, "..", "gpu"))

EDGERT_CONFIGS = {"f16": ["f16:1", "f16:8"], "int8": ["f16:1", "f16:8"], "int8_cc": ["f16:1", "f16:8"]}
NO_PACK = 2048  # ERT_SESSION_NO_PACK: no packed filters, so the int8 convs run on the CUDA-core kernel


def driver_rows(a, model, x_file, out_dir, configs, flags=0, profile=False, hw=224):
    """bench_zoo_edgert's JSON lines, keyed PRECISION_bBATCH."""
    os.makedirs(out_dir, exist_ok=True)
    if a.io == "device":  # input uploaded once, output left on the GPU: the replay alone, as PyTorch's
        configs = [c + "d" for c in configs]
    extra = (["--flags", str(flags)] if flags else []) + (["--profile"] if profile else [])
    cmd = [a.driver, model, x_file, out_dir, str(a.iters), str(a.warmup), "--input-dims", "1x3x%dx%d" % (hw, hw)] + extra + configs
    rows = {}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.edgert_timeout)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %d s" % a.edgert_timeout}
    for line in p.stdout.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        rows["%s_b%d" % (r.get("precision"), r.get("batch", 0))] = r
    if not rows:
        rows["error"] = (p.stderr or p.stdout or "exit %d" % p.returncode)[-500:]
    return rows


def one_model(a, name):
    import numpy as np
    import torch

    import export_zoo
    from bench_gpu import rel_l2, time_torch
    from run_zoo_gpu import graph_fn, main_tensor

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    row = {"name": name, "edgert_f16": {}, "edgert_int8": {}, "torch_f16": {}}
    d = os.path.join(a.work, name)
    os.makedirs(d, exist_ok=True)
    f32_onnx, int8_ert = os.path.join(d, name + ".onnx"), os.path.join(d, name + "_int8.ert")
    family, _, hw, _ = export_zoo.ZOO[name]
    t0 = time.time()
    if family == export_zoo.YOLO:  # Ultralytics' own exporter writes d/NAME.onnx (the wheel: carry .whl)
        m = export_zoo.export_yolo(name, d)
    else:
        m = export_zoo.build(name)
        if not os.path.exists(f32_onnx):
            export_zoo.export_torch(name, m, f32_onnx)
    for p in m.parameters():
        p.requires_grad_(False)
    row["export_s"] = round(time.time() - t0, 1)
    rng = np.random.default_rng(export_zoo.seed_of(name))
    x1 = rng.standard_normal((1, 3, hw, hw)).astype(np.float32)
    x_file = os.path.join(d, "x.f32")
    x1.tofile(x_file)
    if not os.path.exists(int8_ert):
        calib = os.path.join(d, "calib.npy")
        np.save(calib, rng.standard_normal((a.calib, 3, hw, hw)).astype(np.float32))
        t0 = time.time()
        p = subprocess.run([a.edgert, "quantize", f32_onnx, "--calib", calib, "--out", int8_ert],
                           capture_output=True, text=True)
        row["quantize_s"] = round(time.time() - t0, 1)
        if p.returncode != 0:
            row["quantize_error"] = (p.stderr or p.stdout)[-500:]
    row["f32_onnx_bytes"] = os.path.getsize(f32_onnx)
    row["int8_ert_bytes"] = os.path.getsize(int8_ert) if os.path.exists(int8_ert) else None
    row["params"] = sum(p.numel() for p in m.parameters())
    dev = torch.device("cuda")
    m32 = m.to(dev)
    with torch.no_grad():
        ref = main_tensor(m32(torch.from_numpy(x1).to(dev))).float().cpu().numpy().ravel()
    # edgert
    kinds = [("f16", f32_onnx, 0), ("int8", int8_ert, 0)]
    if a.ab:  # the same int8 file on the CUDA-core kernels, in its own process
        kinds.append(("int8_cc", int8_ert, NO_PACK))
    for kind, path, flags in kinds:
        if not os.path.exists(path):
            continue
        configs = EDGERT_CONFIGS[kind] + (["f32:1", "f32:8"] if kind == "int8" and a.int8_f32 else [])
        rows = driver_rows(a, path, x_file, os.path.join(d, "out_" + kind), configs, flags,
                           a.profile and kind == "int8", hw)
        for key, r in rows.items():
            if not isinstance(r, dict):
                continue
            if key.endswith("_b1") and not r.get("error"):
                of = os.path.join(d, "out_" + kind, "out_%s%s.f32" % (key, "_dev" if a.io == "device" else ""))
                if os.path.exists(of):
                    got = np.fromfile(of, dtype=np.float32)
                    if got.size == ref.size:
                        r["rel_l2"] = rel_l2(got, ref)
                        r["top1_agrees"] = bool(int(got.argmax()) == int(ref.argmax()))
        row["edgert_" + kind] = rows
    # PyTorch f16, CUDA graph
    mh = m32.half()
    for batch in (1, 8):
        r = {}
        x = torch.from_numpy(np.repeat(x1, batch, axis=0)).to(dev, torch.float16)
        try:
            r["graph_p50"], r["graph_p90"] = time_torch(graph_fn(mh, x), a.iters, a.warmup)
            mc = copy.deepcopy(mh).to(memory_format=torch.channels_last)
            xc = x.contiguous(memory_format=torch.channels_last)
            r["graph_cl_p50"], r["graph_cl_p90"] = time_torch(graph_fn(mc, xc), a.iters, a.warmup)
            del mc
            if batch == 1:
                with torch.no_grad():
                    got = main_tensor(mh(x)).float().cpu().numpy().ravel()
                r["rel_l2"] = rel_l2(got, ref)
                r["top1_agrees"] = bool(int(got.argmax()) == int(ref.argmax()))
        except Exception as e:  # reported in the row
            r["error"] = str(e)[:300]
        row["torch_f16"]["b%d" % batch] = r
    return row


def best_torch(t):
    c = [t.get(k) for k in ("graph_p50", "graph_cl_p50") if t.get(k)]
    return min(c) if c else None


def fmt(x, f="%.3f"):
    return f % x if isinstance(x, (int, float)) and not isinstance(x, bool) and x is not None else "-"


def markdown(res):
    out = ["# INT8 benchmark (GPU)", "",
           "Device: %s; date %s; torch %s; command: `%s`" % (res["device"], res["date"], res["torch"], res["command"]),
           "",
           "p50 ms per run. edgert int8: the `edgert quantize` QDQ file, integer ops on the CUDA int8 kernels, the "
           "float ops around them (first Q, residual Adds, pooling, last DQ) in f32 (int8/f32) or f16 (int8/f16). "
           "edgert f16: the float ONNX in f16. PyTorch: f16 CUDA graph, the faster of NCHW and channels_last. "
           "edgert times include the input/output copies only with I/O host. fb: nodes on the CPU fallback. "
           "rel L2 / top-1: batch-1 output against PyTorch f32 (random weights).", "",
           "I/O: %s. int8 CUDA cores: the same file with ERT_SESSION_NO_PACK (no tensor-core packing), "
           "int8/f16." % res.get("io", "host"), "",
           "| model | batch | edgert int8/f32 | edgert int8/f16 | int8 CUDA cores | edgert f16 | PyTorch f16 graph "
           "| int8 / edgert f16 | int8 / PyTorch | fb int8 |",
           "|" + "---|" * 10]
    for r in res["models"]:
        for b in (1, 8):
            i32 = r.get("edgert_int8", {}).get("f32_b%d" % b, {})
            i16 = r.get("edgert_int8", {}).get("f16_b%d" % b, {})
            e16 = r.get("edgert_f16", {}).get("f16_b%d" % b, {})
            icc = r.get("edgert_int8_cc", {}).get("f16_b%d" % b, {})
            tb = best_torch(r.get("torch_f16", {}).get("b%d" % b, {}))
            best_int8 = min([v for v in (i32.get("p50_ms"), i16.get("p50_ms")) if v] or [None]) \
                if (i32.get("p50_ms") or i16.get("p50_ms")) else None
            out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["name"], b, fmt(i32.get("p50_ms")) if not i32.get("error") else "ERR",
                fmt(i16.get("p50_ms")) if not i16.get("error") else "ERR",
                fmt(icc.get("p50_ms")) if not icc.get("error") else "ERR",
                fmt(e16.get("p50_ms")) if not e16.get("error") else "ERR", fmt(tb),
                fmt(best_int8 / e16["p50_ms"] if best_int8 and e16.get("p50_ms") else None, "%.2f"),
                fmt(best_int8 / tb if best_int8 and tb else None, "%.2f"),
                str((i16 or i32).get("cpu_fallback_nodes", "-"))))
    out += ["", "| model | params | f32 ONNX MiB | int8 .ert MiB | device weights f16 MiB | device weights int8 MiB "
            "| rel L2 int8 | top-1 int8 | rel L2 edgert f16 | rel L2 PyTorch f16 | quantize s |",
            "|" + "---|" * 11]
    mib = lambda v: fmt(v / 2**20, "%.1f") if v else "-"
    for r in res["models"]:
        i32 = r.get("edgert_int8", {}).get("f32_b1") or r.get("edgert_int8", {}).get("f16_b1", {})
        e16 = r.get("edgert_f16", {}).get("f16_b1", {})
        t1 = r.get("torch_f16", {}).get("b1", {})
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["name"], fmt(r.get("params", 0) / 1e6, "%.1f M"), mib(r.get("f32_onnx_bytes")),
            mib(r.get("int8_ert_bytes")), mib(e16.get("weights_bytes")), mib(i32.get("weights_bytes")),
            fmt(i32.get("rel_l2"), "%.1e"), {True: "same", False: "differs"}.get(i32.get("top1_agrees"), "-"),
            fmt(e16.get("rel_l2"), "%.1e"), fmt(t1.get("rel_l2"), "%.1e"), fmt(r.get("quantize_s"), "%.1f")))
    prof = []
    for r in res["models"]:
        for key in ("f16_b1", "f16_b8"):
            v = r.get("edgert_int8", {}).get(key, {})
            if v.get("profile_ops"):
                prof.append("| %s | %s | %s | %s |" % (r["name"], key, fmt(v.get("profile_total_ms")), ", ".join(
                    "%s %.3f (%d)" % (o[0], o[1], o[2]) for o in v["profile_ops"][:8])))
    if prof:
        out += ["", "Profile of the int8/f16 sessions (eager, node by node, device ms per op type, nodes):", "",
                "| model | config | total ms | ops |", "|---|---|---|---|"] + prof
    errs = []
    for r in res["models"]:
        for k in ("error", "quantize_error"):
            if r.get(k):
                errs.append("- %s %s: %s" % (r["name"], k, r[k]))
        for side in ("edgert_f16", "edgert_int8", "edgert_int8_cc", "torch_f16"):
            for key, v in r.get(side, {}).items():
                e = v.get("error") if isinstance(v, dict) else v
                if e:
                    errs.append("- %s %s %s: %s" % (r["name"], side, key, e))
    if errs:
        out += ["", "Errors:", ""] + errs
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--driver", required=True, help="BUILD/apps/bench/bench_zoo_edgert")
    ap.add_argument("--edgert", required=True, help="BUILD/apps/edgert (for quantize)")
    ap.add_argument("--work", required=True, help="models, calibration data and outputs (kept between runs)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--md")
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--calib", type=int, default=16, help="random calibration samples")
    ap.add_argument("--edgert-timeout", type=int, default=300)
    ap.add_argument("--io", choices=("host", "device"), default="device",
                    help="device (default): input on the GPU, output left there, as PyTorch's replay; "
                         "host: every run copies the input in and the output out")
    ap.add_argument("--ab", action="store_true",
                    help="also run the int8 file with ERT_SESSION_NO_PACK (its convs on the CUDA-core kernel)")
    ap.add_argument("--profile", action="store_true", help="per-op device time of the int8 sessions")
    ap.add_argument("--int8-f32", action="store_true",
                    help="also the int8 file with f32 (not f16) for the float ops around the integer ones")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.work = os.path.abspath(a.work)
    if a.one:
        print("INT8_ROW " + json.dumps(one_model(a, a.one)), flush=True)
        return 0
    rows, md = [], ""
    for n in [n for n in a.models.split(",") if n]:
        t0 = time.time()
        # one child process per model: a crash or an OOM costs one row
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", n] + sys.argv[1:],
                           capture_output=True, text=True)
        row = None
        for line in p.stdout.splitlines():
            if line.startswith("INT8_ROW "):
                row = json.loads(line[9:])
        if row is None:
            row = {"name": n, "error": (p.stderr or "no output")[-800:]}
        row["wall_s"] = round(time.time() - t0, 1)
        rows.append(row)
        print("%-10s %6.1fs  int8 b1 %s ms, edgert f16 b1 %s ms %s" % (
            n, row["wall_s"], row.get("edgert_int8", {}).get("f32_b1", {}).get("p50_ms"),
            row.get("edgert_f16", {}).get("f16_b1", {}).get("p50_ms"), row.get("error", "")[:300]), flush=True)
        md = write(a, rows)  # after every model: a run cut short keeps what it measured
    print(md)
    return 0 if all(not r.get("error") for r in rows) else 1


def write(a, rows):
    import torch

    res = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "?",
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
           "torch": torch.__version__, "host": platform.node(), "iters": a.iters, "warmup": a.warmup, "io": a.io,
           "models": rows}
    json.dump(res, open(a.out, "w"), indent=1)
    md = markdown(res)
    if a.md:
        open(a.md, "w").write(md)
    return md


if __name__ == "__main__":
    sys.exit(main())

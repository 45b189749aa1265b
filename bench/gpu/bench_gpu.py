#!/usr/bin/env python3
"""GPU benchmark: edgert (CUDA backend) next to PyTorch eager and PyTorch with
CUDA Graphs on torchvision ResNet-18, MobileNetV2 and ResNet-50.

Run by bench/gpu/run_gpu_bench.sh (which builds edgert first); needs torch,
torchvision, onnx and numpy. Steps:
  1. Ceilings: fp16 and fp32 (TF32 off) GEMM rate (torch.matmul 8192^3) and
     device-to-device copy bandwidth (bytes read + written).
  2. Per model: torchvision, weights=None, eval, torch.manual_seed(0); ONNX
     export (opset 17, TorchScript exporter, dynamic batch); FLOPs counted
     with forward hooks on Conv2d/Linear (2 * MACs); weight bytes.
  3. Per model x batch (1, 8) x precision (f32, f16):
     - correctness: bench_gpu_check runs the ONNX file on edgert CUDA with the
       same input as PyTorch; relative L2 against PyTorch f32 with TF32 off
       (and, for f16, against PyTorch f16 too);
     - latency: `edgert bench --device cuda --precision P --iters N --warmup W
       --json` (host clock around ert_session_run, which synchronises);
       PyTorch eager and CUDA-Graph replay timed per iteration with CUDA
       events after a warm-up; p50 / p90 by nearest rank;
     - memory: edgert's arena bytes (weights + io + activations) against
       torch.cuda.max_memory_allocated over one inference (weights included).
  4. One table on stdout, everything as JSON (--json).
"""
import argparse
import copy
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torchvision


def pct(xs, p):
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(math.ceil(p / 100.0 * len(s))) - 1))
    return s[k]


def ceilings():
    dev = torch.device("cuda")
    out = {}
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, dt in (("f16", torch.float16), ("f32", torch.float32)):
        n = 8192 if dt == torch.float16 else 4096
        a = torch.randn(n, n, device=dev, dtype=dt)
        b = torch.randn(n, n, device=dev, dtype=dt)
        for _ in range(3):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        reps = 10
        e0.record()
        for _ in range(reps):
            torch.matmul(a, b)
        e1.record()
        torch.cuda.synchronize()
        ms = e0.elapsed_time(e1) / reps
        out["gemm_tflops_" + name] = 2.0 * n ** 3 / (ms * 1e-3) / 1e12
        del a, b
    x = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(10):
        y.copy_(x)
    e1.record()
    torch.cuda.synchronize()
    ms = e0.elapsed_time(e1) / 10
    out["copy_gbps"] = 2.0 * x.numel() / (ms * 1e-3) / 1e9  # read + write
    del x, y
    torch.cuda.empty_cache()
    return out


def make_model(name):
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None)
    return m.eval()


def count_flops(model):
    flops = [0]
    hooks = []

    def conv_hook(mod, inp, out):
        k = mod.kernel_size[0] * mod.kernel_size[1] * (mod.in_channels // mod.groups)
        flops[0] += 2 * out.numel() * k

    def lin_hook(mod, inp, out):
        flops[0] += 2 * out.numel() * mod.in_features

    for mod in model.modules():
        if isinstance(mod, torch.nn.Conv2d):
            hooks.append(mod.register_forward_hook(conv_hook))
        elif isinstance(mod, torch.nn.Linear):
            hooks.append(mod.register_forward_hook(lin_hook))
    with torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))
    for h in hooks:
        h.remove()
    return flops[0]  # per image


def export(model, path):
    x = torch.randn(1, 3, 224, 224)
    kw = dict(input_names=["input"], output_names=["output"], opset_version=17,
              dynamic_axes={"input": {0: "N"}, "output": {0: "N"}})
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kw)
    except TypeError:  # older torch without the dynamo argument
        torch.onnx.export(model, (x,), path, **kw)
    except Exception as e:  # TorchScript exporter gone: the dynamo one (needs onnxscript)
        print("TorchScript export failed (%s): using dynamo=True" % e, flush=True)
        torch.onnx.export(model, (x,), path, dynamo=True, **kw)


def time_torch(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return pct(ts, 50), pct(ts, 90)


def rel_l2(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    d = np.linalg.norm(a - b)
    n = np.linalg.norm(b)
    return float(d / n) if n > 0 else float(d)


def torch_row(model_cpu, x32, prec, iters, warmup):
    """Times a fresh GPU copy of the model (the CPU copy keeps f32 weights).
    Peak memory: one inference after 3 warm-up ones (cudnn.benchmark's
    algorithm search is not counted), weights included."""
    dev = torch.device("cuda")
    m = copy.deepcopy(model_cpu).to(dev)
    if prec != "f32":
        m = m.half()
    x = x32.to(dev) if prec == "f32" else x32.to(dev).half()
    with torch.inference_mode():
        for _ in range(3):
            m(x)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        out = m(x)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        eager = time_torch(lambda: m(x), iters, warmup)
        static_x = x.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                m(static_x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_out = m(static_x)
        graph = time_torch(lambda: g.replay(), iters, warmup)
        # the same replay with the input copied in from pinned host memory
        # first, as edgert's run does (its input lives in host memory)
        pinned = x.cpu().pin_memory()

        def replay_h2d():
            static_x.copy_(pinned, non_blocking=True)
            g.replay()

        graph_h2d = time_torch(replay_h2d, iters, warmup)
        del g, static_out
        # channels_last (NHWC) graph: what the layout would give PyTorch
        m_cl = m.to(memory_format=torch.channels_last)
        x_cl = x.contiguous(memory_format=torch.channels_last)
        with torch.cuda.stream(s):
            for _ in range(3):
                m_cl(x_cl)
        torch.cuda.current_stream().wait_stream(s)
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2):
            m_cl(x_cl)
        graph_cl = time_torch(lambda: g2.replay(), iters, warmup)
        del g2, m_cl, x_cl
    out = out.float().cpu().numpy()
    del m, x, static_x
    torch.cuda.empty_cache()
    return out, eager, graph, peak, graph_h2d, graph_cl


def edgert_bench(cli, onnx_path, batch, prec, iters, warmup):
    cmd = [cli, "bench", onnx_path, "--device", "cuda", "--batch", str(batch), "--precision", prec,
           "--iters", str(iters), "--warmup", str(warmup), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, " ".join(cmd) + ": " + (r.stderr.strip() or r.stdout.strip())[-400:]
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def edgert_check(check_bin, onnx_path, x, batch, prec, work):
    inp = os.path.join(work, "in_%d.f32" % batch)
    out = os.path.join(work, "out_%d_%s.f32" % (batch, prec))
    x.numpy().astype(np.float32).tofile(inp)
    r = subprocess.run([check_bin, onnx_path, inp, out, str(batch), prec], capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip() or r.stdout.strip())[-400:]
    return np.fromfile(out, dtype=np.float32), r.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--check", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--models", default="resnet18,mobilenet_v2,resnet50")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--precisions", default="f32,f16")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=50)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev_name = torch.cuda.get_device_name(0)
    res = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": dev_name,
           "torch": torch.__version__, "torchvision": torchvision.__version__, "iters": a.iters,
           "warmup": a.warmup, "command": " ".join(sys.argv)}
    res["ceilings"] = ceilings()
    print("ceilings:", json.dumps(res["ceilings"]), flush=True)
    rows = []
    for mname in a.models.split(","):
        model = make_model(mname)
        flops = count_flops(model)
        n_params = sum(p.numel() for p in model.parameters())
        onnx_path = os.path.join(a.work, mname + ".onnx")
        export(model, onnx_path)
        print("exported %s: %.3f GFLOP/image, %d params" % (mname, flops / 1e9, n_params), flush=True)
        for batch in [int(b) for b in a.batches.split(",")]:
            torch.manual_seed(1000 + batch)
            x = torch.randn(batch, 3, 224, 224)
            with torch.inference_mode():
                mg = copy.deepcopy(model).cuda()
                ref32 = mg(x.cuda()).float().cpu().numpy()
                del mg
            torch.cuda.empty_cache()
            for prec in a.precisions.split(","):
                row = {"model": mname, "batch": batch, "precision": prec, "gflop": flops * batch / 1e9,
                       "weight_bytes": n_params * (4 if prec == "f32" else 2)}
                rate = res["ceilings"]["gemm_tflops_" + ("f16" if prec != "f32" else "f32")] * 1e12
                row["floor_compute_ms"] = flops * batch / rate * 1e3
                row["floor_memory_ms"] = row["weight_bytes"] / (res["ceilings"]["copy_gbps"] * 1e9) * 1e3
                row["floor_ms"] = max(row["floor_compute_ms"], row["floor_memory_ms"])
                out, err = edgert_check(a.check, onnx_path, x, batch, prec, a.work)
                if out is None:
                    row["edgert_error"] = err
                else:
                    row["edgert_check"] = err
                    row["rel_l2_vs_torch_f32"] = rel_l2(out, ref32)
                t_out, eager, graph, peak, graph_h2d, graph_cl = torch_row(model, x, prec, a.iters, a.warmup)
                row["torch_graph_h2d_p50_ms"], row["torch_graph_h2d_p90_ms"] = graph_h2d
                row["torch_graph_nhwc_p50_ms"], row["torch_graph_nhwc_p90_ms"] = graph_cl
                row["torch_out_l2"] = float(np.linalg.norm(t_out.astype(np.float64)))
                row["ref_out_l2"] = float(np.linalg.norm(ref32.astype(np.float64)))
                if out is not None and prec != "f32":
                    row["rel_l2_vs_torch_same_precision"] = rel_l2(out, t_out)
                row["torch_rel_l2_vs_f32"] = rel_l2(t_out, ref32)
                row["torch_eager_p50_ms"], row["torch_eager_p90_ms"] = eager
                row["torch_graph_p50_ms"], row["torch_graph_p90_ms"] = graph
                row["torch_peak_bytes"] = int(peak)
                b, err = edgert_bench(a.cli, onnx_path, batch, prec, a.iters, a.warmup)
                if err:
                    row["edgert_bench_error"] = err
                else:
                    row["edgert_p50_ms"], row["edgert_p90_ms"] = b["p50_ms"], b["p90_ms"]
                    row["edgert_arena_bytes"] = b["arena_bytes"]
                    row["edgert_memory"] = b["memory"]
                rows.append(row)
                print(json.dumps(row), flush=True)
    res["rows"] = rows
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)
    # table
    hdr = ("| model | batch | prec | edgert p50/p90 ms | torch eager p50/p90 | torch graph p50/p90 | "
           "edgert/graph | torch graph+H2D p50 | torch graph NHWC p50 | floor ms (compute, weights) | "
           "edgert arena MiB | torch peak MiB | rel L2 vs torch f32 |")
    print()
    print("device: %s, torch %s, %s, %d iters after %d warm-up" % (dev_name, torch.__version__, res["date_utc"],
                                                                 a.iters, a.warmup))
    print("ceilings: GEMM f16 %.0f TFLOP/s, f32 (no TF32) %.1f TFLOP/s, copy %.0f GB/s (read+write)" % (
        res["ceilings"]["gemm_tflops_f16"], res["ceilings"]["gemm_tflops_f32"], res["ceilings"]["copy_gbps"]))
    print(hdr)
    print("|" + "---|" * 13)
    for r in rows:
        e = ("%.3f / %.3f" % (r["edgert_p50_ms"], r["edgert_p90_ms"])) if "edgert_p50_ms" in r else "error"
        ratio = ("%.2fx" % (r["edgert_p50_ms"] / r["torch_graph_p50_ms"])) if "edgert_p50_ms" in r else "-"
        arena = ("%.1f" % (r["edgert_arena_bytes"] / 2 ** 20)) if "edgert_arena_bytes" in r else "-"
        l2 = ("%.1e" % r["rel_l2_vs_torch_f32"]) if "rel_l2_vs_torch_f32" in r else "error"
        if r["precision"] != "f32" and r["torch_out_l2"] == 0:
            l2 += " (output underflows %s: PyTorch's is all zero too)" % r["precision"]
        print("| %s | %d | %s | %s | %.3f / %.3f | %.3f / %.3f | %s | %.3f | %.3f | %.3f (%.3f, %.3f) | %s | %.1f | %s |" % (
            r["model"], r["batch"], r["precision"], e, r["torch_eager_p50_ms"], r["torch_eager_p90_ms"],
            r["torch_graph_p50_ms"], r["torch_graph_p90_ms"], ratio, r["torch_graph_h2d_p50_ms"],
            r["torch_graph_nhwc_p50_ms"], r["floor_ms"], r["floor_compute_ms"], r["floor_memory_ms"], arena,
            r["torch_peak_bytes"] / 2 ** 20, l2))
    for r in rows:
        for k in ("edgert_error", "edgert_bench_error"):
            if k in r:
                print("%s b%d %s %s: %s" % (r["model"], r["batch"], r["precision"], k, r[k]))


if __name__ == "__main__":
    main()

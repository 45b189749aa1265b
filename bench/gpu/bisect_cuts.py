#!/usr/bin/env python3
"""Find where a CUDA session first departs from the CPU on one model.

    bisect_cuts.py MODEL.onnx GPU_CHECK WORKDIR [--shape 1x3x224x320] [--precision f16]
                   [--configs device:,auto:,device:fast,...] [--cuts 40] [--image JPEG]

GPU_CHECK is bench_gpu_check (bench/gpu/gpu_check.c). Step 1 runs the whole
model on every config (PLACEMENT:FLAGS, flags as GPU_CHECK_FLAGS takes them)
and on a CPU session, and prints rel L2 of output 0 per config. Step 2 cuts
the model after ~N evenly spaced node outputs (the prefix that computes the
tensor, with a Cast to f32 appended as the new graph output, so an f16 file's
cut ends the way the file does) and runs each cut on the first config that
failed (or the first config) and on the CPU: the first cut over the tolerance
names the node to look at. Prints one line per run; exit 0.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def run(gc, model, inp, out, shape, prec, device=None, placement=None, flags=None):
    env = dict(os.environ)
    env["GPU_CHECK_SHAPE"] = shape
    env.pop("GPU_CHECK_DEVICE", None)
    if device:
        env["GPU_CHECK_DEVICE"] = device
    if placement:
        env["GPU_CHECK_PLACEMENT"] = placement
    if flags:
        env["GPU_CHECK_FLAGS"] = flags
    batch = shape.split("x")[0]
    r = subprocess.run([gc, model, inp, out, batch, prec], env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, (r.stderr.strip() or r.stdout.strip())[-300:]
    return np.fromfile(out, dtype=np.float32), r.stdout.strip()


def rel_l2(a, b):
    if a is None or b is None or a.shape != b.shape:
        return float("nan")
    d = a.astype(np.float64) - b.astype(np.float64)
    r = np.linalg.norm(b.astype(np.float64))
    return float(np.linalg.norm(d) / (r if r > 0 else 1.0))


def make_input(shape, image, path):
    dims = [int(v) for v in shape.split("x")]
    n, c, h, w = dims
    if image:
        import cv2
        img = cv2.imread(image)[:, :, ::-1]
        img = cv2.resize(img, (w, h)).astype(np.float32) / 255.0
        x = ((img - 0.5) / 0.5).transpose(2, 0, 1)[None].repeat(n, 0)
    else:
        rng = np.random.default_rng(1)
        x = rng.uniform(-1, 1, size=dims).astype(np.float32)
    x.astype(np.float32).tofile(path)


def cut_model(m, tensor, path):
    g = m.graph
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    del m2.graph.output[:]
    cast = helper.make_node("Cast", [tensor], [tensor + "__cut_f32"], to=TensorProto.FLOAT, name="bisect_cut_cast")
    m2.graph.node.append(cast)
    m2.graph.output.append(helper.make_tensor_value_info(tensor + "__cut_f32", TensorProto.FLOAT, None))
    onnx.save(m2, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("gpu_check")
    ap.add_argument("work")
    ap.add_argument("--shape", default="1x3x224x320")
    ap.add_argument("--precision", default="f16")
    ap.add_argument("--configs", default="device:,auto:,unified:,mapped:,device:fast,device:no-nhwc,device:no-conv-graph,device:no-fuse")
    ap.add_argument("--cuts", type=int, default=40)
    ap.add_argument("--tol", type=float, default=0.05)
    ap.add_argument("--image")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    inp = os.path.join(a.work, "in.f32")
    make_input(a.shape, a.image, inp)
    ref, info = run(a.gpu_check, a.model, inp, os.path.join(a.work, "cpu.f32"), a.shape, "f32", device="cpu")
    if ref is None:
        print("cpu reference failed:", info)
        return 0
    print(f"whole model {os.path.basename(a.model)} {a.shape} {a.precision}: output 0 |ref| {np.linalg.norm(ref):.4g}")
    failing = []
    for cfg in a.configs.split(","):
        pl, _, fl = cfg.partition(":")
        got, info = run(a.gpu_check, a.model, inp, os.path.join(a.work, "gpu.f32"), a.shape, a.precision, placement=pl, flags=fl)
        e = rel_l2(got, ref)
        extra = ""
        if got is not None:
            extra = f"|got| {np.linalg.norm(got):.4g} nonfinite {int((~np.isfinite(got)).sum())} zeros {int((got == 0).sum())}/{got.size}"
        print(f"  {cfg:28s} rel L2 {e:.3e} {extra} {'FAIL' if not e <= a.tol else 'ok'} | {info.splitlines()[-1] if info else ''}")
        if not e <= a.tol:
            failing.append(cfg)
    cfg = failing[0] if failing else a.configs.split(",")[0]
    pl, _, fl = cfg.partition(":")
    m = onnx.load(a.model)
    outs = []
    for n in m.graph.node:
        if n.op_type in ("Constant",):
            continue
        outs.extend(o for o in n.output if o)
    step = max(1, len(outs) // a.cuts)
    picks = outs[step - 1 :: step]
    if outs and outs[-1] not in picks:
        picks.append(outs[-1])
    print(f"cuts on {cfg} ({len(picks)} of {len(outs)} tensors):")
    for t in picks:
        p = os.path.join(a.work, "cut.onnx")
        cut_model(m, t, p)
        r, ri = run(a.gpu_check, p, inp, os.path.join(a.work, "cpu_cut.f32"), a.shape, "f32", device="cpu")
        got, info = run(a.gpu_check, p, inp, os.path.join(a.work, "gpu_cut.f32"), a.shape, a.precision, placement=pl, flags=fl)
        e = rel_l2(got, r)
        prod = next((n for n in m.graph.node if t in n.output), None)
        tag = f"{prod.op_type} {prod.name}" if prod is not None else "?"
        bad = "" if e <= a.tol else "  <-- FAIL"
        msg = "" if got is not None and r is not None else f" ({ri if r is None else info})"
        print(f"  {t:44s} {tag:50s} rel L2 {e:.3e}{bad}{msg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

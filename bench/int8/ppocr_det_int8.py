#!/usr/bin/env python3
"""PaddleOCR detector in int8: do the text boxes survive quantization?

    python bench/int8/ppocr_det_int8.py --edgert build/rel/apps/edgert \
        [--model ../shared/models/ppocr/en_PP-OCRv3_det_infer.onnx] \
        [--images ../shared/images] [--work ppocr-int8] [--max-drop 5] \
        [--out RESULT.json] [--md RESULT.md]

Issue 14's accuracy goal for this model is "boxes IoU >= 0.9 with the f32
boxes". For each JPEG in --images (PNG files are skipped: edgert reads JPEG,
PPM and PGM) the script
  1. preprocesses it once, as the camera app does (640x640 stretch, BGR,
     ImageNet mean/std), through `edgert run` on an Identity model, so every
     variant below sees the same f32 tensor;
  2. runs the f32 model (edgert, CPU) for the reference probability map;
  3. quantizes with `edgert quantize` (minmax, percentile, entropy: every
     Conv/Add int8, activations int8 symmetric and, with --asymmetric, uint8
     with a zero point; and entropy with --max-drop, the
     sensitivity pass that returns the worst layers to float) and with
     onnxruntime's quantize_static (QDQ, per-channel int8 weights, activations
     int8 symmetric and uint8 asymmetric, minmax and entropy, after its
     quant_pre_process), all calibrated on the same tensors;
     edgert's variants also with cross-layer equalisation off (on by default),
     with --bias-correct, with --method mse, and with the depthwise convs float;
  4. runs each quantized model (edgert's int8 CPU kernels for ours,
     onnxruntime for its own), extracts boxes with the camera app's DB
     postprocessing (apps/camera/proc.c cam_db_boxes: threshold 0.3, 8-connected
     regions, mean score >= 0.6, area >= 16, unclip 1.5) and matches every f32
     box to its best int8 box.
Reported per variant and image: box counts, how many f32 boxes have a match
with IoU >= 0.9, the smallest best IoU, and the relative L2 error of the map.
Also the measure's floor: the f32 model on inputs with uniform noise of
+-0.25, 0.5 and 1 grey level (--noise-seeds seeds each) scored the same way.

Calibration and evaluation use the same images (../shared/images holds five
JPEGs): a favourable setting, so a variant that fails here fails in general.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

PRE = ["--size", "640x640", "--mean", "0.485,0.456,0.406", "--std", "0.229,0.224,0.225", "--bgr"]


def db_boxes(p, thresh=0.3, box_thresh=0.6, unclip=1.5, min_area=16):
    """apps/camera/proc.c cam_db_boxes in numpy (same order, same boxes)."""
    h, w = p.shape
    fg = p > thresh
    label = np.zeros((h, w), np.int32)
    out, nid = [], 0
    for sy, sx in zip(*np.nonzero(fg)):
        if label[sy, sx]:
            continue
        nid += 1
        label[sy, sx] = nid
        stack, area, psum = [(sy, sx)], 0, 0.0
        x0 = x1 = sx
        y0 = y1 = sy
        while stack:
            y, x = stack.pop()
            area += 1
            psum += float(p[y, x])
            x0, x1, y0, y1 = min(x0, x), max(x1, x), min(y0, y), max(y1, y)
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    qy, qx = y + dy, x + dx
                    if 0 <= qy < h and 0 <= qx < w and fg[qy, qx] and not label[qy, qx]:
                        label[qy, qx] = nid
                        stack.append((qy, qx))
        if area < min_area or psum / area < box_thresh:
            continue
        bw, bh = x1 - x0 + 1, y1 - y0 + 1
        d = bw * bh * unclip / (2 * (bw + bh))
        out.append((max(0.0, x0 - d), max(0.0, y0 - d), min(float(w), x1 + 1 + d), min(float(h), y1 + 1 + d)))
    return out


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    i = ix * iy
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - i
    return i / u if u > 0 else 0.0


def identity_model(path, shape=(1, 3, 640, 640)):
    """An ONNX Identity x -> y of `shape` at path (for `edgert run`'s preprocessing alone); returns path."""
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "id",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def sh(cmd, log):
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    shared = os.path.join(here, "..", "..", "..", "shared")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edgert", required=True, help="the edgert CLI")
    ap.add_argument("--model", default=os.path.join(shared, "models/ppocr/en_PP-OCRv3_det_infer.onnx"))
    ap.add_argument("--images", default=os.path.join(shared, "images"))
    ap.add_argument("--work", default="ppocr-int8")
    ap.add_argument("--max-drop", default="5", help="comma-separated --max-drop budgets (entropy); '' for none")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--noise-seeds", type=int, default=8, help="seeds of each noise-floor amplitude")
    ap.add_argument("--out", default=None)
    ap.add_argument("--md", default=None)
    ap.add_argument("--only", default=None,
                    help="comma-separated substrings: run only the variants whose name holds one (and skip "
                         "onnxruntime's unless one matches 'onnxruntime')")
    a = ap.parse_args()
    want = lambda tag: not a.only or any(w in tag for w in a.only.split(","))
    import logging

    import onnx
    import onnxruntime as ort
    logging.getLogger().setLevel(logging.ERROR)   # quantize_static's per-tensor warnings
    from onnx import TensorProto, helper
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    os.makedirs(a.work, exist_ok=True)
    log = os.path.join(a.work, "log.txt")
    t_start = time.time()
    imgs, skipped = [], []
    for f in sorted(glob.glob(os.path.join(a.images, "*"))):
        with open(f, "rb") as fh:
            head = fh.read(4)
        (imgs if head[:3] == b"\xff\xd8\xff" else skipped).append(f)
    if not imgs:
        sys.exit(f"ppocr_det_int8: no JPEG in {a.images}")
    # 1. one preprocessed tensor per image, through edgert's own preprocessing
    ident = identity_model(os.path.join(a.work, "identity.onnx"))
    names, xs = [], []
    for f in imgs:
        n = os.path.splitext(os.path.basename(f))[0]
        d = os.path.join(a.work, "in", n)
        os.makedirs(d, exist_ok=True)
        if sh([a.edgert, "run", ident, "--input", "x=" + f] + PRE + ["--output-dir", d], log):
            sys.exit(f"ppocr_det_int8: edgert cannot preprocess {f} (see {log})")
        names.append(n)
        xs.append(np.load(os.path.join(d, "y.npy")))
    calib = os.path.join(a.work, "calib.npy")
    np.save(calib, np.concatenate(xs, 0))

    def run_edgert(model, tag):
        maps = []
        for n in names:
            d = os.path.join(a.work, "out", tag, n)
            os.makedirs(d, exist_ok=True)
            if sh([a.edgert, "run", model, "--input", "x=" + os.path.join(a.work, "in", n, "y.npy"),
                   "--threads", str(a.threads), "--output-dir", d], log):
                sys.exit(f"ppocr_det_int8: edgert run {model} failed (see {log})")
            maps.append(np.load(glob.glob(os.path.join(d, "*.npy"))[0])[0, 0])
        return maps

    ref = run_edgert(a.model, "f32")
    ref_boxes = [db_boxes(p) for p in ref]
    variants = []

    def score(tag, tool, what, maps, seconds, extra=None):
        per = []
        for n, r, rb, q in zip(names, ref, ref_boxes, maps):
            qb = db_boxes(q)
            best = [max([iou(b, c) for c in qb] or [0.0]) for b in rb]
            per.append({"image": n, "boxes_f32": len(rb), "boxes_int8": len(qb),
                        "matched_iou_0_9": int(sum(b >= 0.9 for b in best)),
                        "min_best_iou": round(min(best), 4) if best else None,
                        "rel_l2": round(float(np.linalg.norm(q - r) / np.linalg.norm(r)), 4)})
        v = {"variant": tag, "tool": tool, "what": what, "images": per, "seconds": round(seconds, 1),
             "boxes_f32": sum(p["boxes_f32"] for p in per), "matched": sum(p["matched_iou_0_9"] for p in per),
             "all_matched": all(p["matched_iou_0_9"] == p["boxes_f32"] and p["boxes_int8"] == p["boxes_f32"]
                                for p in per)}
        if extra:
            v.update(extra)
        variants.append(v)
        print(f"{tag:28s} {v['matched']:3d} / {v['boxes_f32']} f32 boxes matched (IoU >= 0.9), "
              f"rel L2 {min(p['rel_l2'] for p in per):.3f}-{max(p['rel_l2'] for p in per):.3f}", flush=True)

    # 3-4. edgert's quantizer, run on edgert's int8 kernels
    # depthwise convs (group = input channels, one input channel per filter):
    # their input is quantized per tensor while its channels differ widely in
    # range, so they are the most sensitive layers (--json: alone, 5-15% each)
    mdl = onnx.load(a.model)
    wdims = {i.name: list(i.dims) for i in mdl.graph.initializer}
    for n in mdl.graph.node:
        if n.op_type == "Constant":
            wdims.update({n.output[0]: list(t.t.dims) for t in n.attribute if t.name == "value"})
    dw = [n.name for n in mdl.graph.node if n.op_type == "Conv" and len(n.input) > 1 and
          len(wdims.get(n.input[1], [])) > 1 and wdims[n.input[1]][1] == 1 and
          any(t.name == "group" and t.i > 1 for t in n.attribute)]
    # (method, asymmetric, max-drop budget, depthwise float, extra flags, tag suffix)
    plans = [(m, asym, None, False, [], "") for asym in (False, True) for m in ("minmax", "percentile", "entropy", "mse")]
    plans += [(m, True, None, False, ["--no-equalize"], " no equalisation") for m in ("percentile", "mse")]
    plans += [("mse", False, None, False, ["--no-equalize"], " no equalisation")]
    plans += [(m, True, None, False, ["--bias-correct"], " bias correction") for m in ("percentile", "mse")]
    plans += [(m, True, None, True, [], "") for m in ("percentile", "mse")]
    plans += [("entropy", True, d, False, ["--no-equalize"], " no equalisation") for d in a.max_drop.split(",") if d]
    plans += [("percentile", True, d, False, ["--bias-correct"], " bias correction") for d in a.max_drop.split(",") if d]
    for method, asym, drop, keep_dw, extra, suffix in plans:
        more = (["--asymmetric"] if asym else []) + (["--max-drop", drop] if drop else []) + \
            (["--keep-float", ",".join(dw)] if keep_dw else []) + extra
        tag = "edgert " + method + (" u8 asym" if asym else "") + (" max-drop " + drop if drop else "") + \
            (" depthwise float" if keep_dw else "") + suffix
        if not want(tag):
            continue
        out = os.path.join(a.work, tag.replace(" ", "_") + ".ert")
        rep = out + ".json"
        t0 = time.time()
        # --json measures every layer alone (a pass per layer): only where --max-drop does that anyway
        with open(rep, "w") as fh:
            rc = subprocess.run([a.edgert, "quantize", a.model, "--calib", calib, "--shape", "x=1x3x640x640",
                                 "--method", method, "--threads", str(a.threads), "--out", out] +
                                (["--json"] if drop else []) + more,
                                stdout=fh, stderr=open(log, "a")).returncode
        if rc:
            sys.exit(f"ppocr_det_int8: edgert quantize ({tag}) failed (see {log})")
        r = json.load(open(rep)) if drop else {"kept_float": dw if keep_dw else []}
        dt = time.time() - t0
        score(tag, "edgert", ("uint8 asymmetric" if asym else "int8 symmetric") + " activations, per-channel weights" +
              (", flags " + " ".join(extra) if extra else ""), run_edgert(out, tag.replace(" ", "_")),
              dt, {"layers": len(r.get("layers", [])) or None, "kept_float": len(r.get("kept_float", []))})

    # the floor of this measure: the f32 model itself on the same images with
    # uniform noise of +-A/255 / 0.226 added to the preprocessed tensor (A
    # grey levels of the 8-bit image, about; 0.226: the mean of the std) --
    # boxes move under perturbations far smaller than int8 rounding
    if want("noise"):
        for amp in (0.25, 0.5, 1.0):
            for seed in range(a.noise_seeds):
                rng = np.random.default_rng(seed)
                maps = []
                t0 = time.time()
                for n, x in zip(names, xs):
                    d = os.path.join(a.work, "noise", n)
                    os.makedirs(d, exist_ok=True)
                    xn = (x + rng.uniform(-amp, amp, x.shape) / 255 / 0.226).astype(np.float32)
                    np.save(os.path.join(d, "x.npy"), xn)
                    od = os.path.join(a.work, "out", f"noise_{amp}_{seed}", n)
                    os.makedirs(od, exist_ok=True)
                    if sh([a.edgert, "run", a.model, "--input", "x=" + os.path.join(d, "x.npy"), "--threads",
                           str(a.threads), "--output-dir", od], log):
                        sys.exit(f"ppocr_det_int8: edgert run on noisy input failed (see {log})")
                    maps.append(np.load(glob.glob(os.path.join(od, "*.npy"))[0])[0, 0])
                score(f"f32 + noise +-{amp} grey, seed {seed}", "edgert f32", "noise floor", maps, time.time() - t0)

    # onnxruntime's quantizer on the same tensors, run by onnxruntime
    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": x} for x in xs])

        def get_next(self):
            return next(self.it, None)

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    # onnxruntime's recommended first step: its graph optimisations (BatchNorm
    # folded into Conv, as edgert's quantizer does) and shape inference
    from onnxruntime.quantization.shape_inference import quant_pre_process
    pre = os.path.join(a.work, "ort_pre.onnx")
    quant_pre_process(a.model, pre, skip_symbolic_shape=True)
    for meth, mname in ((CalibrationMethod.MinMax, "minmax"), (CalibrationMethod.Entropy, "entropy")):
        for sym in (True, False):
            tag = f"onnxruntime {mname} {'s8 sym' if sym else 'u8 asym'}"
            if not want(tag):
                continue
            out = os.path.join(a.work, tag.replace(" ", "_") + ".onnx")
            t0 = time.time()
            quantize_static(pre, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QInt8 if sym else QuantType.QUInt8,
                            weight_type=QuantType.QInt8, calibrate_method=meth,
                            extra_options={"ActivationSymmetric": sym})
            s = ort.InferenceSession(out, so, providers=["CPUExecutionProvider"])
            maps = [s.run(None, {"x": x})[0][0, 0] for x in xs]
            score(tag, "onnxruntime " + ort.__version__,
                  "activations " + ("int8 symmetric" if sym else "uint8 asymmetric") + ", per-channel int8 weights",
                  maps, time.time() - t0)

    res = {"benchmark": "ppocr_det_int8", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores", "model": os.path.basename(a.model),
           "images": names, "skipped_not_jpeg": [os.path.basename(f) for f in skipped],
           "calibration": "the same images (see the docstring)",
           "goal": "every f32 box matched by an int8 box with IoU >= 0.9 (issue 14)",
           "seconds": round(time.time() - t_start, 1), "variants": variants}
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)
    if a.md:
        with open(a.md, "w") as fh:
            fh.write(f"# PaddleOCR detector, int8 vs f32 boxes — {res['date']}\n\n")
            fh.write(f"{res['model']}, {len(names)} images of ../shared/images (calibrated on the same), "
                     f"{res['machine']}; DB boxes as the camera app extracts them.\n\n")
            fh.write("| variant | f32 boxes matched (IoU >= 0.9) | layers kept float | rel L2 of the map (min-max) |\n"
                     "|---|---|---|---|\n")
            for v in variants:
                rl = [p["rel_l2"] for p in v["images"]]
                kf = v.get("kept_float")
                fh.write(f"| {v['variant']} | {v['matched']} / {v['boxes_f32']} | "
                         f"{'' if kf is None else kf} | {min(rl):.3f}-{max(rl):.3f} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

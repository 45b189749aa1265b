#!/usr/bin/env python3
"""PaddleOCR text-direction classifier in int8: does its top-1 stay the same?

    python bench/int8/ppocr_cls_int8.py --edgert build/rel/apps/edgert \
        [--cls ../shared/models/ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx] \
        [--det ../shared/models/ppocr/en_PP-OCRv3_det_infer.onnx] \
        [--images ../shared/images] [--work ppocr-cls-int8] [--out R.json] \
        [--variant 'NAME=FLAGS' ...]

Issue 14 asks the classifier to keep its top-1 after quantization. Its
inputs here are the text lines the detector finds on the JPEGs of --images:
  1. each image through `edgert run` on an Identity model (640x640 stretch,
     RGB, v/255), the f32 detector on the same image preprocessed as in
     ppocr_det_int8.py, its DB boxes (the camera app's postprocessing);
  2. each box cropped from the 640x640 image, resized (bilinear, aspect
     kept) to height 48 and at most width 192, padded right with zeros after
     PaddleOCR's normalisation (v - 0.5) / 0.5: one (3, 48, 192) sample per
     box, and the same crop turned 180 degrees (the class the classifier
     exists for), so both classes occur;
  3. `edgert quantize` per variant, calibrated on all those samples and
     evaluated on them (`--eval`: top-1 agreement of int8 with f32).
Calibration and evaluation use the same crops: a favourable setting.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ppocr_det_int8 import PRE, db_boxes, identity_model, sh  # noqa: E402

VARIANTS = [
    ("minmax", "--method minmax"),
    ("percentile u8 asym", "--method percentile --asymmetric"),
    ("entropy u8 asym", "--method entropy --asymmetric"),
    ("mse u8 asym", "--method mse --asymmetric"),
    ("percentile u8 asym, no equalisation", "--method percentile --asymmetric --no-equalize"),
    ("percentile u8 asym + bias correction", "--method percentile --asymmetric --bias-correct"),
]


def resize_bilinear(img, h, w):
    """img (C, H, W) -> (C, h, w), half-pixel centres, edges clamped."""
    c, H, W = img.shape
    ys = np.clip((np.arange(h) + 0.5) * H / h - 0.5, 0, H - 1)
    xs = np.clip((np.arange(w) + 0.5) * W / w - 0.5, 0, W - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, H - 1), np.minimum(x0 + 1, W - 1)
    fy, fx = (ys - y0)[None, :, None], (xs - x0)[None, None, :]
    a = img[:, y0][:, :, x0] * (1 - fx) + img[:, y0][:, :, x1] * fx
    b = img[:, y1][:, :, x0] * (1 - fx) + img[:, y1][:, :, x1] * fx
    return a * (1 - fy) + b * fy


def crop_sample(img, box):
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    c = img[:, max(0, y0):max(y0 + 1, y1), max(0, x0):max(x0 + 1, x1)]
    w = min(192, max(1, int(np.ceil(48 * c.shape[2] / c.shape[1]))))
    r = (resize_bilinear(c, 48, w) - 0.5) / 0.5
    out = np.zeros((3, 48, 192), np.float32)
    out[:, :, :w] = r
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    shared = os.path.join(here, "..", "..", "..", "shared")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edgert", required=True)
    ap.add_argument("--cls", default=os.path.join(shared, "models/ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx"))
    ap.add_argument("--det", default=os.path.join(shared, "models/ppocr/en_PP-OCRv3_det_infer.onnx"))
    ap.add_argument("--images", default=os.path.join(shared, "images"))
    ap.add_argument("--work", default="ppocr-cls-int8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variant", action="append", default=None, help="NAME=FLAGS (repeatable); default: a fixed list")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    log = os.path.join(a.work, "log.txt")
    imgs = [f for f in sorted(glob.glob(os.path.join(a.images, "*"))) if open(f, "rb").read(3) == b"\xff\xd8\xff"]
    ident = identity_model(os.path.join(a.work, "identity.onnx"))
    samples, per_image = [], []
    for f in imgs:
        n = os.path.splitext(os.path.basename(f))[0]
        d_rgb, d_det, d_map = (os.path.join(a.work, k, n) for k in ("rgb", "det_in", "det_out"))
        for d in (d_rgb, d_det, d_map):
            os.makedirs(d, exist_ok=True)
        if sh([a.edgert, "run", ident, "--input", "x=" + f, "--size", "640x640", "--output-dir", d_rgb], log) or \
                sh([a.edgert, "run", ident, "--input", "x=" + f] + PRE + ["--output-dir", d_det], log) or \
                sh([a.edgert, "run", a.det, "--input", "x=" + os.path.join(d_det, "y.npy"), "--threads",
                    str(a.threads), "--output-dir", d_map], log):
            sys.exit(f"ppocr_cls_int8: edgert failed on {f} (see {log})")
        rgb = np.load(os.path.join(d_rgb, "y.npy"))[0]
        boxes = db_boxes(np.load(glob.glob(os.path.join(d_map, "*.npy"))[0])[0, 0])
        for b in boxes:
            s = crop_sample(rgb, b)
            samples += [s, s[:, ::-1, ::-1].copy()]
        per_image.append({"image": n, "boxes": len(boxes)})
    x = np.stack(samples).astype(np.float32)
    xs = os.path.join(a.work, "crops.npy")
    np.save(xs, x)
    print(f"{len(x)} samples ({len(x) // 2} text boxes and their 180-degree turns)", flush=True)
    rows = []
    for spec in a.variant or [f"{k}={v}" for k, v in VARIANTS]:
        name, flags = spec.split("=", 1)
        out = os.path.join(a.work, name.replace(" ", "_").replace(",", "") + ".ert")
        r = subprocess.run([a.edgert, "quantize", a.cls, "--calib", xs, "--eval", xs, "--shape", "x=1x3x48x192",
                            "--threads", str(a.threads), "--out", out, "--json"] + flags.split(),
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"ppocr_cls_int8: edgert quantize ({name}) failed: {r.stderr}")
        ev = json.loads(r.stdout)["eval"]
        rows.append({"variant": name, "flags": flags, "n": ev.get("n"), "top1_agreement": ev.get("agreement"),
                     "rel_l2": ev.get("rel_l2")})
        print(f"{name:40s} top-1 agreement {ev.get('agreement')}% of {ev.get('n')}, rel L2 {ev.get('rel_l2')}",
              flush=True)
    res = {"benchmark": "ppocr_cls_int8",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores", "model": os.path.basename(a.cls),
           "images": per_image, "samples": len(x), "variants": rows}
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

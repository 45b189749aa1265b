#!/usr/bin/env python3
"""Export the zoo: the architectures the zoo benchmarks run, made the way users
make them, as ONNX files that the GPU runner (run_zoo_gpu.py) and the CPU
runner share.

    python3 bench/zoo/export_zoo.py OUT_DIR [--only NAME,NAME...] [--list] [--force]

Per model NAME, OUT_DIR gets:
  NAME.onnx   the model, batch dimension dynamic ("N"), opset 17;
  NAME.pt     the PyTorch module itself (torch.save of the eval-mode module,
              weights included) for the reference outputs;
  NAME.json   {"name", "family", "exporter", "input": [1, 3, H, W], "source"}.
Models OUT_DIR already has (NAME.json) are kept unless --force. A model that cannot be made here (package missing, exporter error) is skipped
with a line on stderr, and listed in OUT_DIR/skipped.json.

How each family is made:
  - torchvision: weights=None (random, torch.manual_seed(0)); timm: random
    weights (pretrained=False). Both get 3 train-mode forward passes on random
    batches of 8 first (no gradients), so BatchNorm running statistics are
    those of real activations rather than (0, 1); then eval().
  - torch.onnx.export with the TorchScript exporter (dynamo=False), and for a
    few models again with the dynamo exporter (dynamo=True): NAME_dynamo.
  - Ultralytics YOLOv8n, YOLO11n, YOLOv8n-seg: built from their YAML (random
    weights, the same BatchNorm warm-up on the inner module) and exported by
    Ultralytics' own exporter (format="onnx", dynamic=True, simplify=False),
    as a user would; needs the `ultralytics` package.
Deterministic: every model is seeded by its name.
"""
import argparse
import json
import os
import shutil
import sys
import zlib

import torch

# name -> (family, builder key, input H=W, exporter)
TV = "torchvision"
TIMM = "timm"
YOLO = "ultralytics"
ZOO = {
    "resnet18": (TV, "resnet18", 224, "torchscript"),
    "resnet50": (TV, "resnet50", 224, "torchscript"),
    "mobilenet_v2": (TV, "mobilenet_v2", 224, "torchscript"),
    "mobilenet_v3_large": (TV, "mobilenet_v3_large", 224, "torchscript"),
    "efficientnet_b0": (TV, "efficientnet_b0", 224, "torchscript"),
    "regnet_y_800mf": (TV, "regnet_y_800mf", 224, "torchscript"),
    "convnext_tiny": (TV, "convnext_tiny", 224, "torchscript"),
    "vit_b_16": (TV, "vit_b_16", 224, "torchscript"),
    "swin_t": (TV, "swin_t", 224, "torchscript"),
    "deeplabv3_mobilenet_v3_large": (TV, "deeplabv3_mobilenet_v3_large", 384, "torchscript"),
    "resnet18_dynamo": (TV, "resnet18", 224, "dynamo"),
    "mobilenet_v3_large_dynamo": (TV, "mobilenet_v3_large", 224, "dynamo"),
    "timm_efficientnet_b0": (TIMM, "efficientnet_b0", 224, "torchscript"),
    "timm_mobilenetv3_large_100": (TIMM, "mobilenetv3_large_100", 224, "torchscript"),
    "timm_convnext_atto": (TIMM, "convnext_atto", 224, "torchscript"),
    "timm_regnety_008": (TIMM, "regnety_008", 224, "torchscript"),
    "timm_vit_tiny_patch16_224": (TIMM, "vit_tiny_patch16_224", 224, "torchscript"),
    "timm_deit_small_patch16_224": (TIMM, "deit_small_patch16_224", 224, "torchscript"),
    "timm_mobilevitv2_050": (TIMM, "mobilevitv2_050", 256, "torchscript"),
    "timm_edgenext_xx_small": (TIMM, "edgenext_xx_small", 256, "torchscript"),
    "timm_ghostnet_100": (TIMM, "ghostnet_100", 224, "torchscript"),
    "yolov8n": (YOLO, "yolov8n.yaml", 640, "ultralytics"),
    "yolo11n": (YOLO, "yolo11n.yaml", 640, "ultralytics"),
    "yolov8n_seg": (YOLO, "yolov8n-seg.yaml", 640, "ultralytics"),
}


class FirstOutput(torch.nn.Module):
    """A model whose forward returns a dict or tuple, reduced to its main
    tensor (DeepLabV3: out["out"])."""

    def __init__(self, m, key):
        super().__init__()
        self.m = m
        self.key = key

    def forward(self, x):
        y = self.m(x)
        return y[self.key]


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def bn_warmup(m, hw, seed):
    """3 train-mode passes on random batches: realistic BatchNorm statistics."""
    g = torch.Generator().manual_seed(seed)
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(8, 3, hw, hw, generator=g))
    m.eval()


def randomise_zero_linears(m, seed):
    """torchvision's ViT initialises its head to zero: every input then gives
    the bias (zero) and the accuracy check against PyTorch passes vacuously
    (rel L2 0.0). Such all-zero Linear weights get N(0, 0.02) instead."""
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.Linear) and not bool(mod.weight.any()):
                mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) * 0.02)
                if mod.bias is not None:
                    mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.02)


def build(name):
    """The eval-mode torch module of a torchvision / timm zoo entry."""
    family, key, hw, _ = ZOO[name]
    torch.manual_seed(seed_of(name))
    if family == TV:
        import torchvision

        if key.startswith("deeplabv3"):
            m = FirstOutput(getattr(torchvision.models.segmentation, key)(weights=None, weights_backbone=None), "out")
        else:
            m = getattr(torchvision.models, key)(weights=None)
    else:
        import timm

        m = timm.create_model(key, pretrained=False)
    randomise_zero_linears(m, seed_of(name))
    bn_warmup(m, hw, seed_of(name))
    return m


def export_torch(name, m, path):
    _, _, hw, exporter = ZOO[name]
    x = torch.randn(1, 3, hw, hw)
    kw = dict(input_names=["input"], output_names=["output"], opset_version=17)
    if exporter == "dynamo":
        kw["dynamic_shapes"] = ({0: torch.export.Dim("N", min=1, max=64)},)
        torch.onnx.export(m, (x,), path, dynamo=True, external_data=False, **kw)
    else:
        kw["dynamic_axes"] = {"input": {0: "N"}, "output": {0: "N"}}
        torch.onnx.export(m, (x,), path, dynamo=False, **kw)


def export_yolo(name, out_dir):
    """Ultralytics: YAML -> random model -> BN warm-up -> its own exporter."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from ultralytics import YOLO as Y

    _, key, hw, _ = ZOO[name]
    torch.manual_seed(seed_of(name))
    y = Y(key)
    bn_warmup(y.model, hw, seed_of(name))
    for p in y.model.parameters():
        p.requires_grad_(False)
    f = y.export(format="onnx", imgsz=hw, dynamic=True, simplify=False, opset=17, device="cpu")
    shutil.move(str(f), os.path.join(out_dir, name + ".onnx"))
    m = y.model.eval()
    return m


def make(name, out_dir):
    family, key, hw, exporter = ZOO[name]
    onnx_path = os.path.join(out_dir, name + ".onnx")
    if family == YOLO:
        m = export_yolo(name, out_dir)
    else:
        m = build(name)
        export_torch(name, m, onnx_path)
    torch.save(m, os.path.join(out_dir, name + ".pt"))
    meta = {"name": name, "family": family, "exporter": exporter, "input": [1, 3, hw, hw],
            "source": "%s %s" % (family, key)}
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(meta, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", default="", help="comma-separated names (default: all)")
    ap.add_argument("--list", action="store_true", help="print the names and exit")
    ap.add_argument("--force", action="store_true", help="export again models OUT_DIR already has")
    a = ap.parse_args()
    if a.list:
        print("\n".join(ZOO))
        return 0
    names = [n for n in a.only.split(",") if n] or list(ZOO)
    bad = [n for n in names if n not in ZOO]
    if bad:
        print("unknown model(s): %s (--list names them)" % ", ".join(bad), file=sys.stderr)
        return 2
    os.makedirs(a.out_dir, exist_ok=True)
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    skipped = {}
    for n in names:
        if not a.force and os.path.exists(os.path.join(a.out_dir, n + ".json")):
            continue
        try:
            make(n, a.out_dir)
            print("exported %s" % n, flush=True)
        except Exception as e:  # a missing package or an exporter failure skips one model
            skipped[n] = "%s: %s" % (type(e).__name__, str(e)[:300])
            print("skipped %s: %s" % (n, skipped[n]), file=sys.stderr, flush=True)
    with open(os.path.join(a.out_dir, "skipped.json"), "w") as f:
        json.dump(skipped, f, indent=1)
    return 0


if __name__ == "__main__":
    # Classes pickled into NAME.pt (FirstOutput) must be importable as
    # export_zoo.*, not __main__.*, for the runners' torch.load.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import export_zoo

    sys.exit(export_zoo.main())

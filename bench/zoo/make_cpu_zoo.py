#!/usr/bin/env python3
"""Write ImageNet-sized CNNs as ONNX for the CPU zoo benchmark, without torch.

    python bench/zoo/make_cpu_zoo.py OUT_DIR [--only NAME,...]

For machines where torch is not installed (its PyPI wheel pulls GBs of CUDA
libraries): the graphs follow the published architectures and the node
patterns torch.onnx.export emits (Conv + BatchNormalization with running
statistics, Clip for ReLU6, Sigmoid*Mul for SiLU, HardSwish/HardSigmoid, SE
blocks GlobalAveragePool->Conv->act->Conv->gate->Mul, Flatten + Gemm
transB=1), 224x224 inputs, dynamic batch "N", opset 17. Weights are random
(He-normal, fixed seed per model) and BatchNorm statistics are realistic
(running var 0.5..1.5, mean +-0.1, gamma 0.5..1.5), so activations stay in
range through the depth. Where torch exists, bench/zoo/export_zoo.py writes the
real torchvision/timm/Ultralytics exports; bench_cpu_zoo.py runs either folder.

  resnet18         torchvision ResNet-18 (BasicBlock, 1x1 stride-2 shortcuts)
  mobilenetv2      torchvision MobileNetV2 1.0 (inverted residual, ReLU6)
  mobilenetv3_l    torchvision MobileNetV3-Large (HardSwish, SE + HardSigmoid, k5)
  efficientnet_b0  EfficientNet-B0 (MBConv k3/k5, SiLU, SE + Sigmoid)
  regnety_008      timm RegNetY-800MF (grouped 3x3 convs of group width 16, SE with ReLU + Sigmoid)
  convnext_atto    timm ConvNeXt-atto (7x7 depthwise, LayerNorm2d as Transpose+LayerNormalization+Transpose,
                   Erf GELU, layer-scale Mul, 2x2 stride-2 downsampling convs)
  yolov8n          Ultralytics YOLOv8n at 640x640 as its exporter writes it (BatchNorm fused into Conv, C2f
                   with Split/Concat, SPPF MaxPool k5, Resize nearest, DFL head with the box decode)
  deit_tiny        DeiT-Tiny / ViT-Ti/16 (patch Conv, cls token, 12 blocks of LayerNormalization,
                   MatMul+Add, 3-head attention with Softmax, Erf GELU; timm's export pattern)
  bert_mini        BERT-mini encoder (4 layers, 256 wide, 128 tokens, dynamic batch), LayerNorm
                   decomposed into ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class G:
    def __init__(self, name, seed):
        self.name, self.rng = name, np.random.default_rng(seed)
        self.nodes, self.inits, self.k = [], [], 0

    def t(self, p):
        self.k += 1
        return f"{p}_{self.k}"

    def init(self, p, arr):
        n = self.t(p)
        self.inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), n))
        return n

    def init_i64(self, p, v):
        n = self.t(p)
        self.inits.append(numpy_helper.from_array(np.asarray(v, np.int64), n))
        return n

    def node(self, op, ins, p, **attrs):
        out = self.t(p)
        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def conv_bn(self, x, cin, cout, k, s=1, groups=1, act=None):
        fan_in = cin // groups * k * k
        w = self.rng.normal(0, np.sqrt(2.0 / fan_in), (cout, cin // groups, k, k))
        y = self.node("Conv", [x, self.init("w", w)], "conv", kernel_shape=[k, k], strides=[s, s],
                      pads=[k // 2] * 4, group=groups)
        bn = [self.rng.uniform(0.5, 1.5, cout), self.rng.normal(0, 0.05, cout), self.rng.normal(0, 0.1, cout),
              self.rng.uniform(0.5, 1.5, cout)]
        y = self.node("BatchNormalization", [y] + [self.init(n, v) for n, v in zip(("g", "b", "m", "v"), bn)],
                      "bn", epsilon=1e-5)
        return self.act(y, act)

    def act(self, y, act):
        if act == "relu":
            return self.node("Relu", [y], "relu")
        if act == "relu6":
            return self.node("Clip", [y, self.init("lo", 0.0), self.init("hi", 6.0)], "relu6")
        if act == "silu":
            return self.node("Mul", [y, self.node("Sigmoid", [y], "sig")], "silu")
        if act == "hswish":
            return self.node("HardSwish", [y], "hswish")
        return y

    def se(self, x, c, cr, gate, inner=None):
        s = self.node("GlobalAveragePool", [x], "gap")
        w1 = self.rng.normal(0, np.sqrt(2.0 / c), (cr, c, 1, 1))
        s = self.node("Conv", [s, self.init("w", w1), self.init("b", np.zeros(cr))], "se1", kernel_shape=[1, 1])
        s = self.act(s, inner or ("silu" if gate == "sigmoid" else "relu"))
        w2 = self.rng.normal(0, np.sqrt(1.0 / cr), (c, cr, 1, 1))
        s = self.node("Conv", [s, self.init("w", w2), self.init("b", np.full(c, 1.0))], "se2", kernel_shape=[1, 1])
        s = self.node("Sigmoid" if gate == "sigmoid" else "HardSigmoid", [s], "gate")
        return self.node("Mul", [x, s], "scale")

    def residual_relu(self, x, y, cin, c, s):
        """ReLU(y + shortcut(x)): the shortcut a 1x1 conv + BN where the shape changes."""
        sc = self.conv_bn(x, cin, c, 1, s) if s != 1 or cin != c else x
        return self.node("Relu", [self.node("Add", [y, sc], "add")], "relu")

    def head(self, x, c, n_cls=1000):
        y = self.node("GlobalAveragePool", [x], "gap")
        y = self.node("Flatten", [y], "flat", axis=1)
        w = self.rng.normal(0, np.sqrt(1.0 / c), (n_cls, c))
        self.node("Gemm", [y, self.init("fc_w", w), self.init("fc_b", np.zeros(n_cls))], "fc", transB=1)
        self.nodes[-1].output[0] = "logits"

    def model(self, batch="N", inp=("input", 224), out=("logits", [1000])):
        x = helper.make_tensor_value_info(inp[0], TensorProto.FLOAT, [batch, 3, inp[1], inp[1]])
        y = helper.make_tensor_value_info(out[0], TensorProto.FLOAT, [batch] + list(out[1]))
        g = helper.make_graph(self.nodes, self.name, [x], [y], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="edgert-cpu-zoo")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def resnet18():
    g = G("resnet18", 18)
    x = g.conv_bn("input", 3, 64, 7, 2, act="relu")
    x = g.node("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for i, c in enumerate([64, 128, 256, 512]):
        for b in range(2):
            s = 2 if i > 0 and b == 0 else 1
            y = g.conv_bn(x, cin, c, 3, s, act="relu")
            y = g.conv_bn(y, c, c, 3)
            x, cin = g.residual_relu(x, y, cin, c, s), c
    g.head(x, 512)
    return g.model()


def block(g, x, cin, hid, c, s, k, act, se_c=0, gate="sigmoid"):
    """Inverted residual / MBConv: 1x1 expand (skipped when hid == cin), kxk
    depthwise, optional SE squeezing to se_c, 1x1 project, residual when the
    shape allows."""
    y = g.conv_bn(x, cin, hid, 1, act=act) if hid != cin else x
    y = g.conv_bn(y, hid, hid, k, s, groups=hid, act=act)
    if se_c:
        y = g.se(y, hid, se_c, gate)
    y = g.conv_bn(y, hid, c, 1)
    return g.node("Add", [x, y], "add") if s == 1 and cin == c else y


def inverted_residuals(g, x, cin, cfg, act, se):
    """MobileNetV2/EfficientNet stages: (expand t, out c, repeats n, stride s,
    kernel k) each; SE (EfficientNet) squeezes to a quarter of the block input."""
    for t, c, n, s, k in cfg:
        for i in range(n):
            x = block(g, x, cin, cin * t, c, s if i == 0 else 1, k, act, max(1, cin // 4) if se else 0)
            cin = c
    return x, cin


def inverted_residual_net(name, seed, act, se, cfg):
    g = G(name, seed)
    x = g.conv_bn("input", 3, 32, 3, 2, act=act)
    x, cin = inverted_residuals(g, x, 32, cfg, act, se)
    x = g.conv_bn(x, cin, 1280, 1, act=act)
    g.head(x, 1280)
    return g.model()


def mobilenetv2():
    return inverted_residual_net("mobilenetv2", 2, "relu6", False, [
        (1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 32, 3, 2, 3), (6, 64, 4, 2, 3), (6, 96, 3, 1, 3), (6, 160, 3, 2, 3),
        (6, 320, 1, 1, 3)])


def mobilenetv3_l():
    g = G("mobilenetv3_l", 3)
    x, cin = g.conv_bn("input", 3, 16, 3, 2, act="hswish"), 16
    cfg = [(3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1),
           (5, 72, 40, True, "relu", 2), (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
           (3, 240, 80, False, "hswish", 2), (3, 200, 80, False, "hswish", 1), (3, 184, 80, False, "hswish", 1),
           (3, 184, 80, False, "hswish", 1), (3, 480, 112, True, "hswish", 1), (3, 672, 112, True, "hswish", 1),
           (5, 672, 160, True, "hswish", 2), (5, 960, 160, True, "hswish", 1), (5, 960, 160, True, "hswish", 1)]
    for k, exp, c, se, act, s in cfg:
        x = block(g, x, cin, exp, c, s, k, act, (exp // 4 + 7) // 8 * 8 if se else 0, "hard")
        cin = c
    x = g.conv_bn(x, cin, 960, 1, act="hswish")
    g.head(x, 960)
    return g.model()


def efficientnet_b0():
    return inverted_residual_net("efficientnet_b0", 0, "silu", True, [
        (1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5), (6, 192, 4, 2, 5),
        (6, 320, 1, 1, 3)])


def deit_tiny(dim=192, depth=12, heads=3, mlp=768, patch=16):
    """The node pattern torch.onnx.export (opset 17) writes for timm's
    VisionTransformer: Conv patch embedding, Reshape+Transpose to tokens,
    Concat of the cls token, Add of the position embedding, pre-norm blocks
    (LayerNormalization; q/k/v from one MatMul+Add, Reshape/Transpose to
    heads, MatMul, Mul by 1/sqrt(d), Softmax, MatMul; GELU as x*0.5*(1+Erf(x/sqrt2))),
    final LayerNorm, Gather of the cls token, Gemm head."""
    g = G("deit_tiny", 5)
    n_tok, hd = (224 // patch) ** 2 + 1, dim // heads
    r = g.rng

    def lin(x, cin, cout, name):
        w = g.init(name + "_w", r.normal(0, np.sqrt(1.0 / cin), (cin, cout)))
        return g.node("Add", [g.node("MatMul", [x, w], name), g.init(name + "_b", r.normal(0, 0.02, cout))], name + "_add")

    def ln(x):
        return g.node("LayerNormalization", [x, g.init("ln_g", r.uniform(0.8, 1.2, dim)), g.init("ln_b", r.normal(0, 0.02, dim))],
                      "ln", axis=-1, epsilon=1e-6)

    def shape(*v):
        return g.init_i64("shape", v)

    x = g.node("Conv", ["input", g.init("pw", r.normal(0, np.sqrt(1.0 / (3 * patch * patch)), (dim, 3, patch, patch))),
                        g.init("pb", np.zeros(dim))], "patch", kernel_shape=[patch, patch], strides=[patch, patch])
    x = g.node("Reshape", [x, shape(1, dim, -1)], "flat")          # batch 1 export (timm's, with a fixed batch)
    x = g.node("Transpose", [x], "tok", perm=[0, 2, 1])            # (1, 196, dim)
    x = g.node("Concat", [g.init("cls", r.normal(0, 0.02, (1, 1, dim))), x], "cat", axis=1)
    x = g.node("Add", [x, g.init("pos", r.normal(0, 0.02, (1, n_tok, dim)))], "pos_add")
    for _ in range(depth):
        y = ln(x)
        qkv = lin(y, dim, 3 * dim, "qkv")
        qkv = g.node("Transpose", [g.node("Reshape", [qkv, shape(1, n_tok, 3, heads, hd)], "qkv_r")], "qkv_t",
                     perm=[2, 0, 3, 1, 4])                         # (3, 1, heads, n_tok, hd)
        q, k, v = (g.node("Gather", [qkv, g.init_i64("i", i)], "qkv_g", axis=0) for i in range(3))
        a = g.node("MatMul", [q, g.node("Transpose", [k], "kt", perm=[0, 1, 3, 2])], "qk")
        a = g.node("Softmax", [g.node("Mul", [a, g.init("scale", np.float32(hd ** -0.5))], "scaled")], "attn", axis=-1)
        o = g.node("Transpose", [g.node("MatMul", [a, v], "av")], "o_t", perm=[0, 2, 1, 3])
        o = lin(g.node("Reshape", [o, shape(1, n_tok, dim)], "o_r"), dim, dim, "proj")
        x = g.node("Add", [x, o], "res1")
        h = lin(ln(x), dim, mlp, "fc1")
        e = g.node("Erf", [g.node("Div", [h, g.init("sqrt2", np.float32(np.sqrt(2.0)))], "div")], "erf")
        h = g.node("Mul", [g.node("Mul", [h, g.node("Add", [e, g.init("one", np.float32(1.0))], "erf1")], "gm"),
                           g.init("half", np.float32(0.5))], "gelu")
        x = g.node("Add", [x, lin(h, mlp, dim, "fc2")], "res2")
    x = g.node("Gather", [ln(x), g.init_i64("cls_i", 0)], "cls_tok", axis=1)   # (1, dim)
    w = r.normal(0, np.sqrt(1.0 / dim), (1000, dim))
    g.node("Gemm", [x, g.init("fc_w", w), g.init("fc_b", np.zeros(1000))], "fc", transB=1)
    g.nodes[-1].output[0] = "logits"
    return g.model(batch=1)


def regnety_008():
    """timm regnety_008 (RegNetY-800MF): stem 3x3 s2 to 32, stages of widths
    64/128/320/768 and depths 1/3/8/2, group width 16; each block a 1x1 conv,
    a grouped 3x3 (stride 2 in the first block of a stage), SE squeezing to a
    quarter of the block's input channels (ReLU, Sigmoid), a 1x1 conv without
    activation, the shortcut (1x1 stride-2 conv + BN where the shape changes),
    Add and ReLU."""
    g = G("regnety_008", 8)
    x, cin = g.conv_bn("input", 3, 32, 3, 2, act="relu"), 32
    for w, d in zip((64, 128, 320, 768), (1, 3, 8, 2)):
        for i in range(d):
            s = 2 if i == 0 else 1
            y = g.conv_bn(x, cin, w, 1, act="relu")
            y = g.conv_bn(y, w, w, 3, s, groups=w // 16, act="relu")
            y = g.se(y, w, int(round(cin * 0.25)), "sigmoid", inner="relu")
            y = g.conv_bn(y, w, w, 1)
            x, cin = g.residual_relu(x, y, cin, w, s), w
    g.head(x, 768)
    return g.model()


def convnext_atto():
    """timm convnext_atto (depths 2/2/6/2, dims 40/80/160/320, conv_mlp): the
    4x4 stride-4 patch stem, LayerNorm2d as timm exports it (Transpose to
    NHWC, LayerNormalization over the channels, Transpose back), per block a
    7x7 depthwise conv with bias, LayerNorm2d, 1x1 conv to 4x, GELU (Erf
    pattern), 1x1 conv back, layer-scale Mul by a (1, C, 1, 1) constant,
    residual Add; LayerNorm2d + 2x2 stride-2 conv between stages; head
    GlobalAveragePool, LayerNorm2d, Flatten, Gemm."""
    g = G("convnext_atto", 7)
    r = g.rng

    def conv(x, cin, cout, k, s=1, groups=1):
        w = r.normal(0, np.sqrt(2.0 / (cin // groups * k * k)), (cout, cin // groups, k, k))
        return g.node("Conv", [x, g.init("w", w), g.init("b", r.normal(0, 0.02, cout))], "conv",
                      kernel_shape=[k, k], strides=[s, s], pads=[(k - 1) // 2] * 4 if s == 1 else [0] * 4,
                      group=groups)

    def ln2d(x, c):
        y = g.node("Transpose", [x], "nhwc", perm=[0, 2, 3, 1])
        y = g.node("LayerNormalization", [y, g.init("ln_g", r.uniform(0.5, 1.5, c)), g.init("ln_b", r.normal(0, 0.05, c))],
                   "ln", axis=-1, epsilon=1e-6)
        return g.node("Transpose", [y], "nchw", perm=[0, 3, 1, 2])

    def gelu(h):
        e = g.node("Erf", [g.node("Div", [h, g.init("sqrt2", np.float32(np.sqrt(2.0)))], "div")], "erf")
        return g.node("Mul", [g.node("Mul", [h, g.node("Add", [e, g.init("one", np.float32(1.0))], "erf1")], "gm"),
                              g.init("half", np.float32(0.5))], "gelu")

    dims = (40, 80, 160, 320)
    x = ln2d(conv("input", 3, dims[0], 4, 4), dims[0])
    cin = dims[0]
    for si, (c, d) in enumerate(zip(dims, (2, 2, 6, 2))):
        if si:
            x = conv(ln2d(x, cin), cin, c, 2, 2)
            cin = c
        for _ in range(d):
            y = ln2d(conv(x, c, c, 7, groups=c), c)
            y = conv(gelu(conv(y, c, 4 * c, 1)), 4 * c, c, 1)
            y = g.node("Mul", [y, g.init("ls", r.uniform(0.1, 1.0, (1, c, 1, 1)))], "ls")
            x = g.node("Add", [x, y], "add")
    y = ln2d(g.node("GlobalAveragePool", [x], "gap"), cin)
    y = g.node("Flatten", [y], "flat", axis=1)
    w = r.normal(0, np.sqrt(1.0 / cin), (1000, cin))
    g.node("Gemm", [y, g.init("fc_w", w), g.init("fc_b", np.zeros(1000))], "fc", transB=1)
    g.nodes[-1].output[0] = "logits"
    return g.model()


def yolov8n(size=640, nc=80, reg_max=16):
    """Ultralytics YOLOv8n (width 0.25, depth 0.33) as its exporter writes it
    (model.fuse() folds every BatchNorm into its Conv, so Conv with bias;
    SiLU as Sigmoid*Mul; opset 17, static batch 1, input "images", output
    "output0" (1, 84, 8400)): C2f blocks (1x1 conv, Split in two, n
    Bottlenecks on the last half, Concat of all, 1x1 conv), SPPF (three
    MaxPool k5 s1 p2 in a chain, Concat), Resize nearest x2 (scales input)
    and Concat in the FPN/PAN neck, the decoupled head (two 3x3 convs + 1x1
    per branch, box 64 = 4 x reg_max, cls 80), Reshape + Concat of the three
    levels, Split box/cls, DFL (Reshape, Transpose, Softmax, 1x1 Conv with
    arange weights, Reshape), dist2bbox on constant anchors (Split,
    Sub/Add/Div, Concat, Mul by strides), Sigmoid of the classes, Concat."""
    g = G("yolov8n", 88)
    r = g.rng

    def conv(x, cin, cout, k=1, s=1, act=True):
        w = r.normal(0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k)) * r.uniform(0.5, 1.5, (cout, 1, 1, 1))
        y = g.node("Conv", [x, g.init("w", w), g.init("b", r.normal(0, 0.1, cout))], "conv",
                   kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4, dilations=[1, 1], group=1)
        return g.node("Mul", [y, g.node("Sigmoid", [y], "sig")], "silu") if act else y

    def split(x, sizes, axis=1):
        outs = [g.t("split") for _ in sizes]
        g.nodes.append(helper.make_node("Split", [x, g.init_i64("sizes", sizes)], outs, name=outs[0], axis=axis))
        return outs

    def c2f(x, c1, c2, n, shortcut):
        c = c2 // 2
        y = split(conv(x, c1, 2 * c), [c, c])
        for _ in range(n):
            b = conv(conv(y[-1], c, c, 3), c, c, 3)
            y.append(g.node("Add", [y[-1], b], "add") if shortcut else b)
        return conv(g.node("Concat", y, "cat", axis=1), (2 + n) * c, c2)

    def sppf(x, c1, c2):
        y = [conv(x, c1, c1 // 2)]
        for _ in range(3):
            y.append(g.node("MaxPool", [y[-1]], "pool", kernel_shape=[5, 5], strides=[1, 1], pads=[2] * 4,
                            dilations=[1, 1], ceil_mode=0))
        return conv(g.node("Concat", y, "cat", axis=1), 2 * c1, c2)

    def up(x):
        return g.node("Resize", [x, "", g.init("scales", [1.0, 1.0, 2.0, 2.0])], "up", mode="nearest",
                      coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    x = conv(conv("images", 3, 16, 3, 2), 16, 32, 3, 2)
    x = c2f(x, 32, 32, 1, True)
    p3 = c2f(conv(x, 32, 64, 3, 2), 64, 64, 2, True)
    p4 = c2f(conv(p3, 64, 128, 3, 2), 128, 128, 2, True)
    p5 = sppf(c2f(conv(p4, 128, 256, 3, 2), 256, 256, 1, True), 256, 256)
    h4 = c2f(g.node("Concat", [up(p5), p4], "cat", axis=1), 384, 128, 1, False)
    o3 = c2f(g.node("Concat", [up(h4), p3], "cat", axis=1), 192, 64, 1, False)
    o4 = c2f(g.node("Concat", [conv(o3, 64, 64, 3, 2), h4], "cat", axis=1), 192, 128, 1, False)
    o5 = c2f(g.node("Concat", [conv(o4, 128, 128, 3, 2), p5], "cat", axis=1), 384, 256, 1, False)
    no, c2, c3 = 4 * reg_max + nc, max(16, 64 // 4, 4 * reg_max), max(64, min(nc, 100))
    levels, anchors, strides = [], [], []
    for x, ch, s in ((o3, 64, 8), (o4, 128, 16), (o5, 256, 32)):
        box = conv(conv(conv(x, ch, c2, 3), c2, c2, 3), c2, 4 * reg_max, 1, act=False)
        cls = conv(conv(conv(x, ch, c3, 3), c3, c3, 3), c3, nc, 1, act=False)
        y = g.node("Concat", [box, cls], "cat", axis=1)
        levels.append(g.node("Reshape", [y, g.init_i64("shape", [1, no, -1])], "flat"))
        h = size // s
        sy, sx = np.meshgrid(np.arange(h) + 0.5, np.arange(h) + 0.5, indexing="ij")
        anchors.append(np.stack((sx, sy), -1).reshape(-1, 2))
        strides.append(np.full(h * h, float(s)))
    a = sum(len(v) for v in anchors)
    box, cls = split(g.node("Concat", levels, "cat", axis=2), [4 * reg_max, nc])
    d = g.node("Reshape", [box, g.init_i64("shape", [1, 4, reg_max, a])], "dfl_r")
    d = g.node("Softmax", [g.node("Transpose", [d], "dfl_t", perm=[0, 2, 1, 3])], "dfl_sm", axis=1)
    d = g.node("Conv", [d, g.init("dfl_w", np.arange(reg_max).reshape(1, reg_max, 1, 1))], "dfl", kernel_shape=[1, 1])
    d = g.node("Reshape", [d, g.init_i64("shape", [1, 4, a])], "dfl_o")
    lt, rb = split(d, [2, 2])
    anc = g.init("anchors", np.concatenate(anchors).T[None])
    x1y1, x2y2 = g.node("Sub", [anc, lt], "x1y1"), g.node("Add", [anc, rb], "x2y2")
    cxy = g.node("Div", [g.node("Add", [x1y1, x2y2], "cxy2"), g.init("two", np.float32(2.0))], "cxy")
    wh = g.node("Sub", [x2y2, x1y1], "wh")
    dbox = g.node("Mul", [g.node("Concat", [cxy, wh], "cat", axis=1), g.init("strides", np.concatenate(strides)[None])],
                  "dbox")
    g.node("Concat", [dbox, g.node("Sigmoid", [cls], "cls_sig")], "out", axis=1)
    g.nodes[-1].output[0] = "output0"
    return g.model(batch=1, inp=("images", size), out=("output0", [4 + nc, a]))


MODELS = {"resnet18": resnet18, "mobilenetv2": mobilenetv2, "mobilenetv3_l": mobilenetv3_l,
          "efficientnet_b0": efficientnet_b0, "deit_tiny": deit_tiny, "regnety_008": regnety_008,
          "convnext_atto": convnext_atto, "yolov8n": yolov8n}


def bert_mini(dim=256, depth=4, heads=4, mlp=1024, seq=128):
    """A BERT-style encoder (BERT-mini: 4 layers, 256 wide, 4 heads) as older
    exporters write it: float input embeddings (batch N, 128 tokens, 256),
    post-norm blocks with LayerNorm decomposed into ReduceMean, Sub, Pow,
    ReduceMean, Add(eps), Sqrt, Div, Mul, Add (axes as attributes, opset
    17), separate q/k/v MatMul+Add, Reshape/Transpose to heads, Div by
    sqrt(d), an additive attention mask input-free constant (zeros), Softmax,
    Erf GELU; batch dim dynamic, so batch 8 runs (N*128, 256) GEMMs."""
    g = G("bert_mini", 7)
    r, hd = g.rng, dim // heads

    def lin(x, cin, cout, name):
        w = g.init(name + "_w", r.normal(0, np.sqrt(1.0 / cin), (cin, cout)))
        return g.node("Add", [g.node("MatMul", [x, w], name), g.init(name + "_b", r.normal(0, 0.02, cout))], name + "_add")

    def ln(x):
        m = g.node("ReduceMean", [x], "ln_mean", axes=[-1])
        d = g.node("Sub", [x, m], "ln_sub")
        v = g.node("ReduceMean", [g.node("Pow", [d, g.init("two", np.float32(2.0))], "ln_pow")], "ln_var", axes=[-1])
        s = g.node("Sqrt", [g.node("Add", [v, g.init("eps", np.float32(1e-12))], "ln_eps")], "ln_sqrt")
        y = g.node("Mul", [g.node("Div", [d, s], "ln_div"), g.init("ln_g", r.uniform(0.8, 1.2, dim))], "ln_mul")
        return g.node("Add", [y, g.init("ln_b", r.normal(0, 0.02, dim))], "ln_add")

    def shape(*v):
        return g.init_i64("shape", v)

    x = ln(g.node("Add", ["input", g.init("pos", r.normal(0, 0.02, (1, seq, dim)))], "pos_add"))
    mask = g.init("mask", np.zeros((1, 1, 1, seq)))
    for _ in range(depth):
        def heads_of(t):
            return g.node("Transpose", [g.node("Reshape", [t, shape(0, seq, heads, hd)], "h_r")], "h_t", perm=[0, 2, 1, 3])
        q, k, v = (heads_of(lin(x, dim, dim, n)) for n in ("q", "k", "v"))
        a = g.node("MatMul", [q, g.node("Transpose", [k], "kt", perm=[0, 1, 3, 2])], "qk")
        a = g.node("Add", [g.node("Div", [a, g.init("sqrt_d", np.float32(np.sqrt(hd)))], "scaled"), mask], "masked")
        o = g.node("Transpose", [g.node("MatMul", [g.node("Softmax", [a], "attn", axis=-1), v], "av")], "o_t",
                   perm=[0, 2, 1, 3])
        o = lin(g.node("Reshape", [o, shape(0, seq, dim)], "o_r"), dim, dim, "proj")
        x = ln(g.node("Add", [x, o], "res1"))
        h = lin(x, dim, mlp, "fc1")
        e = g.node("Erf", [g.node("Div", [h, g.init("sqrt2", np.float32(np.sqrt(2.0)))], "div")], "erf")
        h = g.node("Mul", [g.node("Mul", [h, g.node("Add", [e, g.init("one", np.float32(1.0))], "erf1")], "gm"),
                           g.init("half", np.float32(0.5))], "gelu")
        x = ln(g.node("Add", [x, lin(h, mlp, dim, "fc2")], "res2"))
    g.nodes[-1].output[0] = "hidden"
    xi = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", seq, dim])
    yo = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["N", seq, dim])
    m = helper.make_model(helper.make_graph(g.nodes, g.name, [xi], [yo], g.inits),
                          opset_imports=[helper.make_opsetid("", 17)], producer_name="edgert-cpu-zoo")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


MODELS["bert_mini"] = bert_mini


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", default="", help="comma-separated model names")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    names = [n for n in a.only.split(",") if n] or list(MODELS)
    for n in names:
        onnx.save(MODELS[n](), os.path.join(a.out_dir, n + ".onnx"))
        print(os.path.join(a.out_dir, n + ".onnx"))


if __name__ == "__main__":
    main()

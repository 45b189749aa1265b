#!/usr/bin/env python3
"""Build small test models shaped like the ones users export from PyTorch.

    python scripts/zoo/make_models.py OUT_DIR

writes OUT_DIR/<name>.onnx for every model in MODELS. Weights are random
(numpy, fixed seed per model), so the files are the same on every run; they
are generated at test time (tests/models/CMakeLists.txt), never committed.

What each model exercises (the graph patterns torch.onnx.export emits):
  resnet       Conv+BatchNormalization+Relu, BasicBlock residual Add, a
               stride-2 block with a 1x1 Conv+BN shortcut, MaxPool,
               GlobalAveragePool, flatten as Shape->Gather->Unsqueeze->Concat
               ->Reshape (dynamic batch), Gemm transB=1              (opset 13)
  mobilenetv2  Conv+BN+Clip(0, 6) (ReLU6, min/max as inputs), depthwise Conv
               (group = C), inverted residual, Flatten, Gemm          (opset 13)
  mobilenetv3  HardSwish, SE block GAP->Conv->Relu->Conv->HardSigmoid->Mul,
               ReduceMean(axes attribute, keepdims 0), Gemm           (opset 17)
  efficientnet MBConv: expand, SiLU as Sigmoid*x, depthwise, SE with
               Sigmoid+Mul, project, residual                         (opset 13)
  yolo_neck    Conv+SiLU, Split (sizes as input), Resize nearest x2 with
               scales, Concat, two heads                              (opset 13)
  vit          patch Conv, Reshape (shape sub-graph)/Transpose to tokens,
               cls token Expand(Shape sub-graph)+Concat, LayerNormalization,
               MatMul Q/K/V, multi-head attention with Softmax, Erf GELU
               (Div, Erf, Add, Mul), residuals, Gather of the cls token
               (opset 17; vit_op13: LayerNorm decomposed into ReduceMean,
               Sub, Pow, Add, Sqrt, Div, Mul, Add as exported before 17)
  unet         Conv, MaxPool, ConvTranspose 2x2 stride 2 up, Concat skip,
               Sigmoid head; an aux head upsampled by Resize linear
               (pytorch_half_pixel with scales, align_corners with sizes
               from a Shape->Slice->Concat sub-graph)                 (opset 13)
  legacy_op11  opset-11 attribute forms: Split 'split', Unsqueeze/Squeeze
               'axes', ReduceSum 'axes', Resize-11 (roi input, asymmetric
               floor nearest), Pad-11 (pads input), Softmax-11 (2-D);
               initializers also listed as graph inputs (IR 3 style)  (opset 11)
  odd_sizes    odd channel counts, dynamic H x W, dilation, 1x3/3x1 kernels,
               MaxPool ceil_mode, AvgPool count_include_pad=0, Resize to a
               Shape-derived size, GlobalMaxPool                      (opset 13)
resnet, efficientnet, yolo_neck and unet are also built at opset 17
(<name>_op17); mobilenetv3 and yolo_neck at opset 18 (ReduceMean axes as an
input, Split num_outputs). resnet_op17 and unet_op17 keep their weights in
ONNX external data files. Every model has one float input with a dynamic batch dim 'N'.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class G:
    """A graph under construction: nodes, initializers, fresh names."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.k = 0

    def fresh(self, base):
        self.k += 1
        return "%s_%d" % (base, self.k)

    def const(self, arr, base="c"):
        n = self.fresh(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def i64(self, vals, base="shape"):
        return self.const(np.array(vals, dtype=np.int64), base)

    def f32(self, vals, base="k"):
        return self.const(np.array(vals, dtype=np.float32), base)

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.fresh("n_" + op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def weight(self, shape, fan_in, base="w"):
        # He init keeps activations O(1) through the depth of these nets
        w = self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        return self.const(w.astype(np.float32), base)

    def bias(self, n):
        return self.const((self.rng.standard_normal(n) * 0.1).astype(np.float32), "b")

    # -- layers, named like their PyTorch modules
    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1, bias=True):
        pad = k // 2 if pad is None else pad
        w = self.weight((cout, cin // group, k, k), cin // group * k * k)
        ins = [x, w] + ([self.bias(cout)] if bias else [])
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
                       group=group, dilations=[1, 1])

    def bn(self, x, c):
        r = self.rng
        scale = self.const((1 + 0.1 * r.standard_normal(c)).astype(np.float32), "bn_g")
        b = self.const((0.1 * r.standard_normal(c)).astype(np.float32), "bn_b")
        mean = self.const((0.1 * r.standard_normal(c)).astype(np.float32), "bn_m")
        var = self.const((0.5 + r.random(c)).astype(np.float32), "bn_v")
        return self.op("BatchNormalization", [x, scale, b, mean, var], epsilon=1e-5, momentum=0.9)

    def conv_bn(self, x, cin, cout, k, stride=1, group=1):
        return self.bn(self.conv(x, cin, cout, k, stride, group=group, bias=False), cout)

    def relu6(self, x):
        return self.op("Clip", [x, self.f32(0.0, "min"), self.f32(6.0, "max")])

    def silu(self, x):
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def gemm(self, x, fin, fout):
        return self.op("Gemm", [x, self.weight((fout, fin), fin), self.bias(fout)], alpha=1.0, beta=1.0, transB=1)

    def flatten_exporter(self, x):
        # torch.flatten(x, 1) as the tracer emits it: (N, -1) from Shape
        n = self.op("Gather", [self.op("Shape", [x]), self.i64(0, "idx")], axis=0)
        shp = self.op("Concat", [self.op("Unsqueeze", [n, self.i64([0], "axes")]), self.i64([-1])], axis=0)
        return self.op("Reshape", [x, shp])

    def model(self, x_name, x_shape, outputs, opset):
        inp = helper.make_tensor_value_info(x_name, TensorProto.FLOAT, x_shape)
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        g = helper.make_graph(self.nodes, self.name, [inp], outs, initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="edgert-zoo")
        m.ir_version = 7 if opset <= 13 else 8
        # output shapes (dynamic batch 'N' included) as the exporter writes them
        m = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
        onnx.checker.check_model(m)
        return m


def rename_output(g, t, name):
    """Give the last node producing t the output name `name`."""
    for n in reversed(g.nodes):
        for i, o in enumerate(n.output):
            if o == t:
                n.output[i] = name
                return name
    raise KeyError(t)


def resnet(opset=13):
    g = G("resnet", 1)
    x = g.op("Relu", [g.conv_bn("input", 3, 8, 3)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    # BasicBlock, identity shortcut
    y = g.op("Relu", [g.conv_bn(x, 8, 8, 3)])
    y = g.conv_bn(y, 8, 8, 3)
    x = g.op("Relu", [g.op("Add", [y, x])])
    # BasicBlock, stride 2 with a 1x1 conv shortcut
    y = g.op("Relu", [g.conv_bn(x, 8, 16, 3, stride=2)])
    y = g.conv_bn(y, 16, 16, 3)
    sc = g.conv_bn(x, 8, 16, 1, stride=2)
    x = g.op("Relu", [g.op("Add", [y, sc])])
    x = g.flatten_exporter(g.op("GlobalAveragePool", [x]))
    out = rename_output(g, g.gemm(x, 16, 10), "logits")
    return g.model("input", ["N", 3, 64, 64], [out], opset)


def inverted_residual(g, x, cin, cout, expand, stride, act):
    hid = cin * expand
    y = act(g.conv_bn(x, cin, hid, 1))
    y = act(g.conv_bn(y, hid, hid, 3, stride=stride, group=hid))
    y = g.conv_bn(y, hid, cout, 1)
    return g.op("Add", [y, x]) if stride == 1 and cin == cout else y


def mobilenetv2():
    g = G("mobilenetv2", 2)
    x = g.relu6(g.conv_bn("input", 3, 8, 3, stride=2))
    x = inverted_residual(g, x, 8, 8, 4, 1, g.relu6)
    x = inverted_residual(g, x, 8, 16, 4, 2, g.relu6)
    x = inverted_residual(g, x, 16, 16, 4, 1, g.relu6)
    x = g.relu6(g.conv_bn(x, 16, 32, 1))
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    out = rename_output(g, g.gemm(x, 32, 10), "logits")
    return g.model("input", ["N", 3, 64, 64], [out], 13)


def se_block(g, x, c, r, gate):
    s = g.op("GlobalAveragePool", [x])
    s = g.op("Relu", [g.conv(s, c, c // r, 1)]) if gate == "hsig" else g.silu(g.conv(s, c, c // r, 1))
    s = g.conv(s, c // r, c, 1)
    s = g.op("HardSigmoid", [s], alpha=1.0 / 6, beta=0.5) if gate == "hsig" else g.op("Sigmoid", [s])
    return g.op("Mul", [x, s])


def mobilenetv3(opset=17):
    g = G("mobilenetv3", 3)
    hs = lambda t: g.op("HardSwish", [t])
    x = hs(g.conv_bn("input", 3, 8, 3, stride=2))
    # bneck: expand, depthwise, SE, project, residual
    y = hs(g.conv_bn(x, 8, 24, 1))
    y = hs(g.conv_bn(y, 24, 24, 3, group=24))
    y = se_block(g, y, 24, 4, "hsig")
    x = g.op("Add", [g.conv_bn(y, 24, 8, 1), x])
    y = hs(g.conv_bn(x, 8, 32, 1))
    y = hs(g.conv_bn(y, 32, 32, 3, stride=2, group=32))
    y = se_block(g, y, 32, 4, "hsig")
    x = hs(g.conv_bn(y, 32, 16, 1))
    if opset >= 18:                        # axes became an input in opset 18
        x = g.op("ReduceMean", [x, g.i64([2, 3], "axes")], keepdims=0)
    else:
        x = g.op("ReduceMean", [x], axes=[2, 3], keepdims=0)
    x = hs(g.gemm(x, 16, 32))
    out = rename_output(g, g.gemm(x, 32, 10), "logits")
    return g.model("input", ["N", 3, 64, 64], [out], opset)


def efficientnet(opset=13):
    g = G("efficientnet", 4)
    x = g.silu(g.conv_bn("input", 3, 8, 3, stride=2))
    for cin, cout, stride in ((8, 8, 1), (8, 16, 2), (16, 16, 1)):
        y = g.silu(g.conv_bn(x, cin, cin * 4, 1))
        y = g.silu(g.conv_bn(y, cin * 4, cin * 4, 3, stride=stride, group=cin * 4))
        y = se_block(g, y, cin * 4, 4, "sigmoid")
        y = g.conv_bn(y, cin * 4, cout, 1)
        x = g.op("Add", [y, x]) if stride == 1 and cin == cout else y
    x = g.silu(g.conv_bn(x, 16, 32, 1))
    x = g.flatten_exporter(g.op("GlobalAveragePool", [x]))
    out = rename_output(g, g.op("Softmax", [g.gemm(x, 32, 10)], axis=-1), "probs")
    return g.model("input", ["N", 3, 64, 64], [out], opset)


def yolo_neck(opset=13):
    g = G("yolo_neck", 5)
    c3 = g.silu(g.conv_bn("input", 3, 16, 3, stride=2))          # (N,16,32,32)
    c4 = g.silu(g.conv_bn(c3, 16, 32, 3, stride=2))               # (N,32,16,16)
    c5 = g.silu(g.conv_bn(c4, 32, 32, 3, stride=2))               # (N,32,8,8)
    # C2f-style: Split channels, conv one half, concat
    if opset >= 18:                        # torch.chunk(2, 1) at opset 18
        a, b = g.op("Split", [c5], n_out=2, axis=1, num_outputs=2)
    else:
        a, b = g.op("Split", [c5, g.i64([16, 16], "split")], n_out=2, axis=1)
    b = g.silu(g.conv_bn(b, 16, 16, 3))
    c5 = g.silu(g.conv_bn(g.op("Concat", [a, b], axis=1), 32, 32, 1))
    # top-down: upsample x2 (nn.Upsample(scale_factor=2) exports Resize with scales)
    up = g.op("Resize", [c5, "", g.f32([1, 1, 2, 2], "scales")], mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    p4 = g.silu(g.conv_bn(g.op("Concat", [up, c4], axis=1), 64, 32, 1))
    up = g.op("Resize", [p4, "", g.f32([1, 1, 2, 2], "scales")], mode="nearest")
    p3 = g.silu(g.conv_bn(g.op("Concat", [up, c3], axis=1), 48, 16, 3))
    h3 = rename_output(g, g.conv(p3, 16, 8, 1), "head_p3")
    h4 = rename_output(g, g.conv(p4, 32, 8, 1), "head_p4")
    return g.model("input", ["N", 3, 64, 64], [h3, h4], opset)


def vit(opset=17):
    g = G("vit", 6)
    D, H, T = 32, 4, 17                    # dim, heads, tokens (cls + 4x4 patches of 8x8)
    dh = D // H
    x = g.conv("input", 3, D, 8, stride=8, pad=0)                  # (N,D,4,4)
    # x.flatten(2).transpose(1, 2): shape sub-graph for (N, D, -1)
    n = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", [x]), g.i64(0, "idx")], axis=0), g.i64([0], "axes")])
    x = g.op("Reshape", [x, g.op("Concat", [n, g.i64([D, -1])], axis=0)])
    x = g.op("Transpose", [x], perm=[0, 2, 1])                     # (N,T-1,D)
    # cls_token.expand(N, -1, -1), concatenated in front
    cls = g.const((0.02 * g.rng.standard_normal((1, 1, D))).astype(np.float32), "cls")
    cls = g.op("Expand", [cls, g.op("Concat", [n, g.i64([1, D])], axis=0)])
    x = g.op("Concat", [cls, x], axis=1)                           # (N,T,D)
    x = g.op("Add", [x, g.const((0.02 * g.rng.standard_normal((1, T, D))).astype(np.float32), "pos")])

    def ln(t):
        gamma = g.const((1 + 0.1 * g.rng.standard_normal(D)).astype(np.float32), "ln_g")
        beta = g.bias(D)
        if opset >= 17:
            return g.op("LayerNormalization", [t, gamma, beta], axis=-1, epsilon=1e-5)
        # nn.LayerNorm as exported before opset 17
        mu = g.op("ReduceMean", [t], axes=[-1], keepdims=1)
        d = g.op("Sub", [t, mu])
        var = g.op("ReduceMean", [g.op("Pow", [d, g.f32(2.0, "two")])], axes=[-1], keepdims=1)
        y = g.op("Div", [d, g.op("Sqrt", [g.op("Add", [var, g.f32(1e-5, "eps")])])])
        return g.op("Add", [g.op("Mul", [y, gamma]), beta])

    def linear(t, fin, fout):              # nn.Linear on (N,T,fin): MatMul + Add
        return g.op("Add", [g.op("MatMul", [t, g.weight((fin, fout), fin)]), g.bias(fout)])

    def heads(t):                          # (N,T,D) -> (N,H,T,dh)
        return g.op("Transpose", [g.op("Reshape", [t, g.i64([0, T, H, dh])])], perm=[0, 2, 1, 3])

    for _ in range(2):
        h = ln(x)
        q, k, v = heads(linear(h, D, D)), heads(linear(h, D, D)), heads(linear(h, D, D))
        s = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
        s = g.op("Div", [s, g.f32(np.sqrt(dh), "sqrt_dh")])
        a = g.op("MatMul", [g.op("Softmax", [s], axis=-1), v])         # (N,H,T,dh)
        a = g.op("Reshape", [g.op("Transpose", [a], perm=[0, 2, 1, 3]), g.i64([-1, T, D])])
        x = g.op("Add", [x, linear(a, D, D)])
        h = linear(ln(x), D, 2 * D)
        # GELU (approximate='none') as exported at opset < 20
        gl = g.op("Mul", [g.op("Mul", [h, g.op("Add", [g.op("Erf", [g.op("Div", [h, g.f32(np.sqrt(2.0), "sqrt2")])]),
                                                   g.f32(1.0, "one")])]), g.f32(0.5, "half")])
        x = g.op("Add", [x, linear(gl, 2 * D, D)])
    x = g.op("Gather", [ln(x), g.i64(0, "cls_idx")], axis=1)       # x[:, 0]: (N,D)
    out = rename_output(g, g.gemm(x, D, 10), "logits")
    return g.model("input", ["N", 3, 32, 32], [out], opset)


def unet(opset=13):
    g = G("unet", 7)

    def block(t, cin, cout):
        t = g.op("Relu", [g.conv_bn(t, cin, cout, 3)])
        return g.op("Relu", [g.conv_bn(t, cout, cout, 3)])

    def up(t, c):                          # nn.ConvTranspose2d(c, c/2, 2, stride=2)
        w = g.weight((c, c // 2, 2, 2), c)
        return g.op("ConvTranspose", [t, w, g.bias(c // 2)], kernel_shape=[2, 2], strides=[2, 2])

    pool = lambda t: g.op("MaxPool", [t], kernel_shape=[2, 2], strides=[2, 2])
    e1 = block("input", 3, 8)                                      # (N,8,32,32)
    e2 = block(pool(e1), 8, 16)                                    # (N,16,16,16)
    b = block(pool(e2), 16, 32)                                    # (N,32,8,8)
    d2 = block(g.op("Concat", [up(b, 32), e2], axis=1), 32, 16)
    d1 = block(g.op("Concat", [up(d2, 16), e1], axis=1), 16, 8)
    out = rename_output(g, g.op("Sigmoid", [g.conv(d1, 8, 2, 1)]), "mask")
    # deep supervision head: F.interpolate(bilinear, align_corners=False) and
    # (align_corners=True) of the bottleneck, as segmentation nets export them
    lo = g.conv(b, 32, 2, 1)
    aux1 = g.op("Resize", [lo, "", g.f32([1, 1, 4, 4], "scales")], mode="linear",
                coordinate_transformation_mode="pytorch_half_pixel")
    # size=(32, 32) exports sizes = Concat(Shape(x)[0:2], [32, 32])
    nc = g.op("Slice", [g.op("Shape", [lo]), g.i64([0]), g.i64([2]), g.i64([0])])
    aux2 = g.op("Resize", [lo, "", "", g.op("Concat", [nc, g.i64([32, 32])], axis=0)], mode="linear",
                coordinate_transformation_mode="align_corners")
    aux = rename_output(g, g.op("Add", [aux1, aux2]), "aux")
    # 32x32: the full-resolution convs dominate the zoo's time under qemu
    return g.model("input", ["N", 3, 32, 32], [out, aux], opset)


def legacy_op11():
    g = G("legacy_op11", 8)
    x = g.op("Relu", [g.conv_bn("input", 3, 16, 3, stride=2)])    # (N,16,32,32)
    a, b = g.op("Split", [x], n_out=2, axis=1, split=[8, 8])
    b = g.op("Relu", [g.conv(b, 8, 8, 3)])
    x = g.op("Concat", [a, b], axis=1)
    x = g.op("Pad", [x, g.i64([0, 0, 1, 1, 0, 0, 1, 1], "pads"), g.f32(0.0, "pad_value")], mode="constant")
    x = g.op("Relu", [g.conv(x, 16, 16, 3, stride=2, pad=0)])     # (N,16,16,16)
    # Resize-11: roi input present (ignored for asymmetric), scales, sizes omitted
    x = g.op("Resize", [x, g.f32([], "roi"), g.f32([1, 1, 2, 2], "scales")], mode="nearest",
             coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    x = g.op("Clip", [g.conv(x, 16, 8, 3, stride=4), g.f32(0.0, "min"), g.f32(6.0, "max")])  # (N,8,8,8)
    s = g.op("ReduceSum", [x], axes=[2, 3], keepdims=1)           # (N,8,1,1)
    s = g.op("Mul", [s, g.f32(1.0 / 64, "inv_hw")])                # a mean: keeps Softmax off saturation
    s = g.op("Squeeze", [s], axes=[2, 3])                          # (N,8)
    s = g.op("Unsqueeze", [s], axes=[1])                           # (N,1,8)
    s = g.op("Squeeze", [s], axes=[1])
    out = rename_output(g, g.op("Softmax", [g.gemm(s, 8, 10)], axis=1), "probs")
    return g.model("input", ["N", 3, 64, 64], [out], 11)


def odd_sizes():
    """Odd channel counts and a dynamic H x W (remainder paths of tiled
    kernels): stride-2 convs on odd sizes, dilation 2, 1x3 / 3x1 kernels,
    MaxPool ceil_mode, AvgPool count_include_pad=0, a Resize to sizes taken
    from another tensor's Shape (F.interpolate(size=skip.shape[2:]))."""
    g = G("odd_sizes", 9)
    x = g.op("Relu", [g.conv_bn("input", 3, 13, 3, stride=2)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    skip = x
    y = g.op("Relu", [g.conv(x, 13, 13, 3, pad=2)])
    y = g.op("Conv", [y, g.weight((27, 13, 3, 3), 117), g.bias(27)], kernel_shape=[3, 3], pads=[2, 2, 2, 2],
             dilations=[2, 2])
    y = g.op("Conv", [g.op("Relu", [y]), g.weight((27, 27, 1, 3), 81), g.bias(27)], kernel_shape=[1, 3],
             pads=[0, 1, 0, 1])
    y = g.op("Conv", [y, g.weight((27, 27, 3, 1), 81), g.bias(27)], kernel_shape=[3, 1], pads=[1, 0, 1, 0],
             strides=[2, 1])
    y = g.op("AveragePool", [g.op("Relu", [y])], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0)
    hw = g.op("Slice", [g.op("Shape", [skip]), g.i64([2]), g.i64([4]), g.i64([0])])
    nc = g.op("Slice", [g.op("Shape", [y]), g.i64([0]), g.i64([2]), g.i64([0])])
    y = g.op("Resize", [y, "", "", g.op("Concat", [nc, hw], axis=0)], mode="nearest")
    y = g.op("Concat", [y, skip], axis=1)                          # 40 channels
    seg = rename_output(g, g.conv(y, 40, 5, 1), "seg")
    v = g.flatten_exporter(g.op("GlobalMaxPool", [y]))
    cls = rename_output(g, g.gemm(v, 40, 7), "cls")
    return g.model("input", ["N", 3, "H", "W"], [seg, cls], 13)


def with_initializers_as_inputs(m):
    """torch.onnx.export(keep_initializers_as_inputs=True), the default of
    old exporters (IR version 3): every weight is also a graph input."""
    m.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in m.graph.initializer)
    return m


# Input shapes by batch for models with more than a dynamic batch dim.
SHAPES = {"odd_sizes": {1: [1, 3, 67, 45], 3: [3, 3, 33, 50]}}

MODELS = {
    "resnet": resnet,
    "resnet_op17": lambda: resnet(17),
    "mobilenetv2": mobilenetv2,
    "mobilenetv3": mobilenetv3,
    "mobilenetv3_op18": lambda: mobilenetv3(18),
    "efficientnet": efficientnet,
    "efficientnet_op17": lambda: efficientnet(17),
    "yolo_neck": yolo_neck,
    "yolo_neck_op17": lambda: yolo_neck(17),
    "yolo_neck_op18": lambda: yolo_neck(18),
    "vit": vit,
    "vit_op13": lambda: vit(13),
    "unet": unet,
    "unet_op17": lambda: unet(17),
    "legacy_op11": lambda: with_initializers_as_inputs(legacy_op11()),
    "odd_sizes": odd_sizes,
}

# Saved with their weights in NAME.onnx.data beside the model (ONNX external
# data, as exports past 2 GiB must be): tensors of 256+ bytes, each at its
# own offset; small ones (shape constants) stay inline, as torch does.
EXTERNAL_DATA = {"resnet_op17", "unet_op17"}


def save(name, m, path):
    if name in EXTERNAL_DATA:
        onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=os.path.basename(path) + ".data", size_threshold=256)
    else:
        onnx.save(m, path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "zoo"
    os.makedirs(out, exist_ok=True)
    for name, fn in MODELS.items():
        m = fn()
        save(name, m, os.path.join(out, name + ".onnx"))
        print("%-13s opset %2d  %5d nodes" % (name, m.opset_import[0].version, len(m.graph.node)))


if __name__ == "__main__":
    main()

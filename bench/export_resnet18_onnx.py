#!/usr/bin/env python3
"""Write the ResNet-18-shaped network of bench_cpu_resnet18.c as ONNX.

    export_resnet18_onnx.py --weights resnet18.weights --out resnet18.onnx
    export_resnet18_onnx.py --seed 18 --out resnet18.onnx   # own random weights

With --weights (the file `bench_cpu_resnet18 --dump-weights` writes) the ONNX
model has exactly the C benchmark's weights, so both runtimes compute the same
function and their outputs can be compared. Without it, numpy draws He-uniform
weights of the same shapes (an equal-shaped, not an equal, network).

Graph: BatchNorm is folded (every Conv has a bias, no BatchNormalization
node), like the C build: Conv+Relu, residual Add, MaxPool 3x3/2,
GlobalAveragePool, Flatten, Gemm(transB=1). Opset 17. Input "input"
(N, 3, 224, 224) with N dynamic unless --static-batch; output "logits".
Needs: pip install onnx numpy
"""
import argparse
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STAGES = [64, 128, 256, 512]


def read_weights(path):
    """Parse the ERTW file: 'ERTW' u32 version u32 count, then per tensor
    u32 name_len, name, u32 ndim, i64 dims[ndim], f32 data (little-endian)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"ERTW":
        sys.exit(f"{path}: not a weights file (bad magic)")
    version, count = struct.unpack_from("<II", data, 4)
    if version != 1:
        sys.exit(f"{path}: weights file version {version} not supported")
    off, out = 12, {}
    for _ in range(count):
        (nl,) = struct.unpack_from("<I", data, off)
        off += 4
        name = data[off:off + nl].decode()
        off += nl
        (nd,) = struct.unpack_from("<I", data, off)
        off += 4
        dims = struct.unpack_from(f"<{nd}q", data, off)
        off += 8 * nd
        n = int(np.prod(dims)) if nd else 1
        out[name] = np.frombuffer(data, dtype="<f4", count=n, offset=off).reshape(dims).copy()
        off += 4 * n
    if off != len(data):
        sys.exit(f"{path}: {len(data) - off} trailing bytes")
    return out


def weight_shapes():
    """name -> shape, in the order the C benchmark creates them."""
    shapes = {}

    def conv(name, cin, cout, k):
        shapes[name + ".weight"] = (cout, cin, k, k)
        shapes[name + ".bias"] = (cout,)

    conv("conv1", 3, 64, 7)
    cin = 64
    for s, c in enumerate(STAGES):
        for b in range(2):
            stride = 2 if (b == 0 and s > 0) else 1
            p = f"layer{s + 1}.{b}"
            conv(p + ".conv1", cin, c, 3)
            conv(p + ".conv2", c, c, 3)
            if stride != 1 or cin != c:
                conv(p + ".downsample.0", cin, c, 1)
            cin = c
    shapes["fc.weight"] = (1000, 512)
    shapes["fc.bias"] = (1000,)
    return shapes


def random_weights(seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in weight_shapes().items():
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 0
        a = np.sqrt(6.0 / fan_in) if fan_in else 0.05
        out[name] = rng.uniform(-a, a, size=shape).astype(np.float32)
    return out


def build(weights, batch):
    nodes = []
    counter = [0]

    def fresh(prefix):
        counter[0] += 1
        return f"{prefix}_{counter[0]}"

    def conv(name, x, stride, relu):
        k = weights[name + ".weight"].shape[2]
        y = fresh(name)
        nodes.append(helper.make_node("Conv", [x, name + ".weight", name + ".bias"], [y], name=name,
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
        if relu:
            r = fresh(name + ".relu")
            nodes.append(helper.make_node("Relu", [y], [r], name=name + ".relu"))
            y = r
        return y

    h = conv("conv1", "input", 2, True)
    mp = fresh("maxpool")
    nodes.append(helper.make_node("MaxPool", [h], [mp], name="maxpool", kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))
    h, cin = mp, 64
    for s, c in enumerate(STAGES):
        for b in range(2):
            stride = 2 if (b == 0 and s > 0) else 1
            p = f"layer{s + 1}.{b}"
            t = conv(p + ".conv1", h, stride, True)
            t = conv(p + ".conv2", t, 1, False)
            skip = conv(p + ".downsample.0", h, stride, False) if (stride != 1 or cin != c) else h
            a = fresh(p + ".add")
            nodes.append(helper.make_node("Add", [t, skip], [a], name=p + ".add"))
            r = fresh(p + ".relu")
            nodes.append(helper.make_node("Relu", [a], [r], name=p + ".relu"))
            h, cin = r, c
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["pool"], name="avgpool"))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1))

    n = batch if batch else "N"
    graph = helper.make_graph(
        nodes, "resnet18_edgert_bench",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [n, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [n, 1000])],
        initializer=[numpy_helper.from_array(w, name) for name, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="edgert-bench")
    model.ir_version = 8  # readable by onnxruntime releases of the last years
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", help="ERTW file from bench_cpu_resnet18 --dump-weights")
    ap.add_argument("--seed", type=int, default=18, help="numpy seed when --weights is not given")
    ap.add_argument("--static-batch", type=int, default=0, help="fix the batch dim (default: dynamic)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    weights = read_weights(a.weights) if a.weights else random_weights(a.seed)
    expect = weight_shapes()
    if set(weights) != set(expect) or any(tuple(weights[k].shape) != v for k, v in expect.items()):
        sys.exit("weights do not match the ResNet-18 layout of bench_cpu_resnet18.c")
    model = build(weights, a.static_batch)
    onnx.save(model, a.out)
    n_params = sum(w.size for w in weights.values())
    print(f"wrote {a.out}: {len(model.graph.node)} nodes, {n_params} parameters"
          f" ({'weights from ' + a.weights if a.weights else 'numpy seed %d' % a.seed})")


if __name__ == "__main__":
    main()

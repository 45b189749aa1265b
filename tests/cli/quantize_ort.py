"""Run a QDQ ONNX file written by `edgert quantize` in onnxruntime (CPU).

usage: quantize_ort.py MODEL.onnx X.npy Y_OUT.npy
The file must pass onnx.checker and hold QuantizeLinear/DequantizeLinear
nodes; output 0 for the batch X is saved to Y_OUT (the C side compares).
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort


def main():
    path, x_path, y_path = sys.argv[1:4]
    m = onnx.load(path)
    onnx.checker.check_model(m)
    ops = [n.op_type for n in m.graph.node]
    if "QuantizeLinear" not in ops or "DequantizeLinear" not in ops:
        sys.exit(f"{path}: no Q/DQ nodes ({ops})")
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = np.load(x_path)
    y = s.run(None, {s.get_inputs()[0].name: x})[0]
    np.save(y_path, y.astype(np.float32))
    print(f"onnxruntime {ort.__version__}: {ops.count('QuantizeLinear')} Q, {ops.count('DequantizeLinear')} DQ, out {y.shape}")


if __name__ == "__main__":
    main()

"""Run a QDQ ONNX file written by `edgert quantize` in onnxruntime (CPU).

usage: quantize_ort.py MODEL.onnx X.npy Y_OUT.npy
The file must pass onnx.checker and hold QuantizeLinear/DequantizeLinear
nodes; output 0 for the batch X is saved to Y_OUT (the C side compares).
The output is the oracle tests/ops/quant_ort.py's ort_qdq_oracle picks:
onnxruntime with its QDQ fusions on where its u8s8 integer kernels are
exact on this CPU, with optimisations off (float-simulated QDQ) where they
saturate (x86 without VNNI); the line printed says which.
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree from the import below
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ops"))
from quant_ort import np, onnx, ort, ort_qdq_oracle  # noqa: E402


def main():
    path, x_path, y_path = sys.argv[1:4]
    m = onnx.load(path)
    onnx.checker.check_model(m)
    ops = [n.op_type for n in m.graph.node]
    if "QuantizeLinear" not in ops or "DequantizeLinear" not in ops:
        sys.exit(f"{path}: no Q/DQ nodes ({ops})")
    x = np.load(x_path)
    y, fused, who = ort_qdq_oracle(path, {m.graph.input[0].name: x})
    np.save(y_path, y.astype(np.float32))
    other = "" if fused is y else f"; its fused graph (not the oracle) max |diff| {np.abs(fused - y).max():.3g} from it"
    print(f"onnxruntime {ort.__version__}: {ops.count('QuantizeLinear')} Q, {ops.count('DequantizeLinear')} DQ, "
          f"out {y.shape}; oracle: {who}{other}")


if __name__ == "__main__":
    main()

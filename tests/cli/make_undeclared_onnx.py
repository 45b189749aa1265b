#!/usr/bin/env python3
"""Writes a one-node ONNX model (Relu, input x (N, 3) with N dynamic) whose
output y declares no type or shape, with the standard library only (the
protobuf wire format by hand): `edgert info` must infer y's shape.

    make_undeclared_onnx.py OUT.onnx
"""
import sys


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(num, payload):
    """A field: int -> varint (wire type 0), bytes/str -> length-delimited (2)."""
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


dims = field(1, field(2, "N")) + field(1, field(1, 3))           # TensorShapeProto: dim_param N, dim_value 3
x_type = field(1, field(1, 1) + field(2, dims))                  # TypeProto.tensor_type: FLOAT, shape
graph = (field(1, field(1, "x") + field(2, "y") + field(4, "Relu"))  # NodeProto
         + field(2, "g")
         + field(11, field(1, "x") + field(2, x_type))           # input ValueInfoProto
         + field(12, field(1, "y")))                             # output: a name only
model = field(1, 8) + field(7, graph) + field(8, field(1, "") + field(2, 17))
with open(sys.argv[1], "wb") as f:
    f.write(model)

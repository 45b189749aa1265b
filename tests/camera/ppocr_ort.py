"""Run a model with onnxruntime on one .npy input, save output 0 as .npy.

    python ppocr_ort.py MODEL.onnx INPUT.npy OUTPUT.npy

Used by test_camera_ppocr: the C side preprocesses the image and applies the
postprocessing to both our output and this one, so only the networks differ.
"""
import sys

import numpy as np
import onnxruntime as ort

model, inp, out = sys.argv[1:4]
so = ort.SessionOptions()
so.intra_op_num_threads = 2
sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
x = np.load(inp)
y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
np.save(out, np.ascontiguousarray(y, dtype=np.float32))

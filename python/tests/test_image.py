"""decode_jpeg against djpeg (libjpeg-turbo's own tool) and preprocess against
a float64 numpy bilinear reference written from the definition (half-pixel
centres, edges clamped: OpenCV INTER_LINEAR)."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import edgert
from conftest import IMAGES, MODELS, need


def read_ppm(data):
    parts = data.split(maxsplit=4)
    assert parts[0] in (b"P6", b"P5") and parts[3] == b"255"
    w, h = int(parts[1]), int(parts[2])
    return np.frombuffer(parts[4], np.uint8).reshape(h, w, -1)


def jpegs():
    d = need(IMAGES)
    paths = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".jpg"))
    # some shared "*.jpg" are PNGs inside: not JPEG, refused by decode_jpeg
    return [p for p in paths if open(p, "rb").read(2) == b"\xff\xd8"]


def not_jpegs():
    d = need(IMAGES)
    paths = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".jpg"))
    return [p for p in paths if open(p, "rb").read(2) != b"\xff\xd8"]


@pytest.mark.skipif(not edgert.jpeg_available(), reason="edgert built without TurboJPEG")
def test_decode_matches_djpeg():
    if not shutil.which("djpeg"):
        pytest.skip("djpeg (libjpeg-turbo-progs) is not installed")
    for path in jpegs():
        want = read_ppm(subprocess.run(["djpeg", "-ppm", path], check=True, capture_output=True).stdout)
        got = edgert.decode_jpeg(path)
        assert got.dtype == np.uint8 and got.shape == want.shape, path
        np.testing.assert_array_equal(got, want)
        with open(path, "rb") as f:
            data = f.read()
        np.testing.assert_array_equal(edgert.decode_jpeg(data, format="bgr"), want[..., ::-1])
        gray = edgert.decode_jpeg(data, format="gray")
        assert gray.shape == want.shape[:2] + (1,)
        half = edgert.decode_jpeg(data, scale=2)
        assert half.shape == ((want.shape[0] + 1) // 2, (want.shape[1] + 1) // 2, 3)
        assert abs(float(half.mean()) - float(want.mean())) < 3  # the same picture at half size


@pytest.mark.skipif(not edgert.jpeg_available(), reason="edgert built without TurboJPEG")
def test_decode_bad_data(rng):
    data = open(jpegs()[0], "rb").read()
    with pytest.raises(edgert.FormatError):
        edgert.decode_jpeg(b"")
    with pytest.raises(edgert.FormatError):
        edgert.decode_jpeg(rng.integers(0, 256, 2000, dtype=np.uint8).tobytes())
    for cut in (2, 100, len(data) // 3):
        with pytest.raises(edgert.FormatError):
            edgert.decode_jpeg(data[:cut])
    for p in not_jpegs():
        with pytest.raises(edgert.FormatError):
            edgert.decode_jpeg(p)
    with pytest.raises(edgert.ArgError):
        edgert.decode_jpeg(data, format="cmyk")
    with pytest.raises(edgert.ArgError):
        edgert.decode_jpeg(data, scale=3)


def reference(img, ow, oh, xf, mean, std, scale, pad):
    """float64 bilinear resize of the source rectangle of xf onto its
    destination rectangle, then (v * scale - mean) / std; (3, oh, ow)."""
    sx0, sy0, sw, sh, dx0, dy0, dw, dh = xf
    h, w, _ = img.shape
    out = np.full((3, oh, ow), float(pad), np.float64)
    ys = np.arange(int(dy0), int(dy0 + dh))
    xs = np.arange(int(dx0), int(dx0 + dw))
    syf = np.clip(sy0 + (ys - dy0 + 0.5) * sh / dh - 0.5, 0, h - 1)
    sxf = np.clip(sx0 + (xs - dx0 + 0.5) * sw / dw - 0.5, 0, w - 1)
    y0 = np.floor(syf).astype(int)
    x0 = np.floor(sxf).astype(int)
    y1 = np.minimum(y0 + 1, h - 1)
    x1 = np.minimum(x0 + 1, w - 1)
    wy = (syf - y0)[:, None, None]
    wx = (sxf - x0)[None, :, None]
    f = img.astype(np.float64)
    top = f[y0][:, x0] * (1 - wx) + f[y0][:, x1] * wx
    bot = f[y1][:, x0] * (1 - wx) + f[y1][:, x1] * wx
    out[:, ys[0]:ys[-1] + 1, xs[0]:xs[-1] + 1] = np.moveaxis(top * (1 - wy) + bot * wy, 2, 0)
    m = np.asarray(mean, np.float64)[:, None, None]
    s = np.asarray(std, np.float64)[:, None, None]
    return (out * scale - m) / s


@pytest.mark.parametrize("fit", ["stretch", "center_crop", "letterbox"])
def test_preprocess_matches_reference(fit, rng):
    h, w = int(rng.integers(20, 90)), int(rng.integers(20, 90))
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    ow, oh = int(rng.integers(8, 64)), int(rng.integers(8, 64))
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    got, xf = edgert.preprocess(img, (ow, oh), fit=fit, mean=mean, std=std, pad=114, return_transform=True)
    assert got.shape == (3, oh, ow) and got.dtype == np.float32
    # the transform from its definition
    sx, sy = ow / w, oh / h
    if fit == "stretch":
        assert xf == (0, 0, w, h, 0, 0, ow, oh)
    elif fit == "center_crop":
        s = max(sx, sy)
        np.testing.assert_allclose(xf, ((w - ow / s) / 2, (h - oh / s) / 2, ow / s, oh / s, 0, 0, ow, oh))
    else:
        s = min(sx, sy)
        dw, dh = max(1, np.floor(w * s + 0.5)), max(1, np.floor(h * s + 0.5))
        np.testing.assert_allclose(xf, (0, 0, w, h, (ow - dw) // 2, (oh - dh) // 2, dw, dh))
    want = reference(img, ow, oh, xf, mean, std, 1 / 255, 114)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 / min(std))
    # layouts and channel orders are the same numbers rearranged
    nhwc = edgert.preprocess(img, (ow, oh), fit=fit, mean=mean, std=std, pad=114, layout="nhwc")
    np.testing.assert_array_equal(nhwc, np.moveaxis(got, 0, 2))
    bgr = edgert.preprocess(img, (ow, oh), fit=fit, mean=mean, std=std, pad=114, bgr=True)
    np.testing.assert_allclose(bgr, got[::-1], atol=1e-6)
    gray = edgert.preprocess(img, (ow, oh), fit=fit, pad=114, gray=True)
    rgb01 = reference(img, ow, oh, xf, (0, 0, 0), (1, 1, 1), 1 / 255, 114)
    luma = 0.299 * rgb01[0] + 0.587 * rgb01[1] + 0.114 * rgb01[2]
    np.testing.assert_allclose(gray[0], luma, atol=1e-5)
    # a view with row padding (stride) gives the same as its contiguous copy
    padded = np.zeros((h, w + 7, 3), np.uint8)
    padded[:, :w] = img
    np.testing.assert_array_equal(edgert.preprocess(padded[:, :w], (ow, oh), fit=fit, mean=mean, std=std, pad=114),
                                  got)


def test_preprocess_bad_input():
    img = np.zeros((10, 10, 3), np.uint8)
    with pytest.raises(edgert.ShapeError):
        edgert.preprocess(img.astype(np.float32), (4, 4))
    with pytest.raises(edgert.ShapeError):
        edgert.preprocess(np.zeros((10, 10, 4), np.uint8), (4, 4))
    with pytest.raises(edgert.ArgError):
        edgert.preprocess(img, (0, 4))
    with pytest.raises(edgert.ArgError):
        edgert.preprocess(img, (4, 4), fit="zoom")
    with pytest.raises(edgert.ArgError):
        edgert.preprocess(img, (4, 4), layout="chwn")


@pytest.mark.skipif(not edgert.jpeg_available(), reason="edgert built without TurboJPEG")
def test_readme_example_runs():
    """The README's ten lines, on a shared photograph and a shared model."""
    model_path = need(os.path.join(MODELS, "ppocr", "ch_ppocr_mobile_v2.0_cls_infer.onnx"))
    photo = jpegs()[0]
    model = edgert.load(model_path)
    sess = model.session(device="cpu", shapes={"x": (1, 3, 48, 192)})
    x = edgert.preprocess(edgert.decode_jpeg(photo), (192, 48), mean=(0.5,) * 3, std=(0.5,) * 3)[None]
    probs = sess.run(x)[sess.outputs[0].name][0]
    top5 = np.argsort(probs)[::-1][:5]
    assert len(top5) == min(5, probs.size) and probs[top5[0]] == probs.max()


def test_gpu_preprocessor_refused_without_a_gpu():
    """Without CUDA in the build: UnsupportedError; without a GPU: CudaError;
    never a crash. Bad options are refused before any GPU work."""
    with pytest.raises(edgert.ArgError):
        edgert.Preprocessor((64, 64), (8, 8), layout="chwn")
    with pytest.raises(edgert.ArgError):
        edgert.Preprocessor((64, 64), (8, 8), fit="zoom")
    try:
        edgert.Preprocessor((64, 64), (8, 8))
    except edgert.UnsupportedError:
        assert not edgert.built_with_cuda()
    except edgert.CudaError:
        assert edgert.built_with_cuda()
    else:
        pytest.skip("a GPU is here: the gpu test below covers the preprocessor")


@pytest.mark.gpu
def test_gpu_preprocessor_matches_cpu(rng):
    try:
        pp = edgert.Preprocessor((96, 96), (24, 16), fit="letterbox", mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.4), pad=114)
    except (edgert.UnsupportedError, edgert.CudaError) as e:
        pytest.skip(f"no GPU preprocessing here: {e}")
    img = rng.integers(0, 256, (70, 90, 3), dtype=np.uint8)
    want = edgert.preprocess(img, (24, 16), fit="letterbox", mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.4), pad=114)
    np.testing.assert_allclose(pp.run(img), want, atol=1e-5)
    with pytest.raises(edgert.ArgError):
        pp.run(np.zeros((100, 100, 3), np.uint8))   # larger than max_size
    # straight into a CUDA session's input, then run() with no arguments
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    import tempfile
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "id",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 24])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 16, 24])])
    with tempfile.TemporaryDirectory() as d:
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(d, "relu.onnx"))
        s = edgert.load(os.path.join(d, "relu.onnx")).session(device="cuda")
    pp.run_into(s, "x", img)
    np.testing.assert_allclose(s.run()["y"][0], np.maximum(want, 0), atol=1e-5)

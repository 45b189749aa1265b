"""Models and sessions: results against onnxruntime, the shared models' own
reference outputs and the C CLI; the arena; out= buffers; bad input."""
import gc
import json
import os
import subprocess
import threading

import numpy as np
import pytest

import edgert
from conftest import MODELS, gil_free_ticks, need

MNIST = os.path.join(MODELS, "mnist_8", "model.onnx")
SUPER = os.path.join(MODELS, "super_resolution_10", "model.onnx")
OCR_CLS = os.path.join(MODELS, "ppocr", "ch_ppocr_mobile_v2.0_cls_infer.onnx")


def ort_run(path, feeds):
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feeds)))


def pb(path):
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def concrete(info, batch):
    return tuple(batch if d == -1 else d for d in info.shape)


@pytest.mark.parametrize("path,batch", [(MNIST, 1), (SUPER, 1), (OCR_CLS, 3)])
def test_run_matches_onnxruntime(path, batch, rng):
    need(path)
    m = edgert.load(path)
    s = m.session(device="cpu", batch=batch, threads=2,
                  shapes={"x": (batch, 3, 48, 192)} if path == OCR_CLS else None)
    feeds = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in s.inputs}
    got = s.run(feeds)
    ref = ort_run(path, feeds)
    assert set(got) == set(ref)
    for k in ref:
        assert got[k].shape == ref[k].shape and got[k].dtype == ref[k].dtype
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref[k]).max())))


@pytest.mark.parametrize("model", ["mnist_8", "super_resolution_10"])
def test_reference_outputs(model):
    """The model zoo's own test_data_set_* (inputs and expected outputs)."""
    d = need(os.path.join(MODELS, model))
    m = edgert.load(os.path.join(d, "model.onnx"))
    s = m.session(device="cpu")
    for ds in sorted(p for p in os.listdir(d) if p.startswith("test_data_set")):
        x = pb(os.path.join(d, ds, "input_0.pb"))
        want = pb(os.path.join(d, ds, "output_0.pb"))
        got = s.run(x)[s.outputs[0].name]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))


def test_equals_cli(cli, tmp_path, rng):
    """edgert run (the C CLI) on the same input gives the same bytes."""
    need(MNIST)
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([cli, "run", MNIST, "--input", f"Input3={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path)],
                   check=True, capture_output=True)
    want = np.load(tmp_path / "Plus214_Output_0.npy")
    got = edgert.load(MNIST).session(device="cpu").run(x)["Plus214_Output_0"]
    np.testing.assert_array_equal(got, want)


def test_model_info_and_bytes(tmp_path):
    need(MNIST)
    m = edgert.load(MNIST)
    assert [t.name for t in m.inputs] == ["Input3"] and m.inputs[0].dtype == "f32"
    assert m.inputs[0].np_dtype == np.float32 and len(m.outputs) == 1
    assert m.n_nodes > 0 and m.n_params > 1000
    with open(MNIST, "rb") as f:
        m2 = edgert.load(f.read())
    x = np.ones((1, 1, 28, 28), np.float32)
    a = m.session(device="cpu").run(x)
    b = m2.session(device="cpu").run(x)
    np.testing.assert_array_equal(a["Plus214_Output_0"], b["Plus214_Output_0"])
    # .ert round trip (f32 and f16 weights) and ONNX export
    m.save(tmp_path / "m.ert")
    m.save(tmp_path / "m16.ert", f16_weights=True)
    m.save_onnx(tmp_path / "m.onnx")
    for p, tol in [("m.ert", 0), ("m.onnx", 0), ("m16.ert", 2e-2)]:
        y = edgert.load(tmp_path / p).session(device="cpu").run(x)["Plus214_Output_0"]
        np.testing.assert_allclose(y, a["Plus214_Output_0"], rtol=tol, atol=tol)
    assert "Model" in repr(m) and edgert.version().count(".") == 2
    assert isinstance(edgert.built_with_cuda(), bool)


def test_bad_files(tmp_path):
    with pytest.raises(edgert.FileError):
        edgert.load(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(os.urandom(300))
    with pytest.raises((edgert.FormatError, edgert.UnsupportedError)) as e:
        edgert.load(tmp_path / "junk.onnx")
    assert str(e.value)  # the library's message, not empty
    with pytest.raises((edgert.FormatError, edgert.ArgError)):
        edgert.load(b"")
    need(MNIST)
    data = open(MNIST, "rb").read()
    for cut in (10, len(data) // 2, len(data) - 1):  # truncated files never crash
        with pytest.raises(edgert.Error):
            edgert.load(data[:cut])
    assert issubclass(edgert.ShapeError, ValueError) and issubclass(edgert.FileError, OSError)
    assert edgert.ArenaError.status == 4 and edgert.Error.status is None


def test_plan_and_arena():
    need(MNIST)
    m = edgert.load(MNIST)
    plan = m.plan(device="cpu")
    assert plan["total_bytes"] >= plan["activations_bytes"] > 0
    with pytest.raises(edgert.ArenaError) as e:
        m.session(device="cpu", arena=plan["total_bytes"] - 256)
    assert str(plan["total_bytes"]) in str(e.value)  # the message names the bytes needed
    s = m.session(device="cpu", arena=plan["total_bytes"])
    assert s.plan()["total_bytes"] == plan["total_bytes"]
    x = np.random.default_rng(1).standard_normal((1, 1, 28, 28)).astype(np.float32)
    np.testing.assert_array_equal(s.run(x)["Plus214_Output_0"],
                                  m.session(device="cpu").run(x)["Plus214_Output_0"])
    with pytest.raises(edgert.ArgError):
        m.session(device="cpu", arena=np.zeros(plan["total_bytes"] + 1, np.uint8)[1:])  # misaligned
    with pytest.raises(edgert.UnsupportedError):
        m.session(device="cuda", arena=plan["total_bytes"])   # host memory is no CUDA arena
    with pytest.raises(edgert.ArgError):
        m.session(device="tpu")
    with pytest.raises(edgert.ArgError):
        m.session(precision="f64")


def test_out_buffers_are_filled_in_place(rng):
    need(MNIST)
    s = edgert.load(MNIST).session(device="cpu")
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    buf = np.full((1, 10), np.nan, np.float32)
    r = s.run(x, out={"Plus214_Output_0": buf})
    assert r["Plus214_Output_0"] is buf
    np.testing.assert_array_equal(buf, s.run(x)["Plus214_Output_0"])
    with pytest.raises(edgert.ShapeError):
        s.run(x, out={"Plus214_Output_0": np.empty((1, 11), np.float32)})
    with pytest.raises(edgert.ShapeError):
        s.run(x, out={"Plus214_Output_0": np.empty((1, 10), np.float64)})
    with pytest.raises(edgert.ArgError):
        s.run(x, out={"Plus214_Output_0": np.empty((1, 20), np.float32)[:, ::2]})  # not C-contiguous
    with pytest.raises(edgert.NotFoundError):
        s.run(x, out={"nope": buf})


def test_out_buffers_allocate_nothing(rng):
    """With out= buffers a run allocates nothing that tracemalloc sees (numpy
    reports its array data to it); without, it allocates the outputs. The
    super-resolution model's output is 1.8 MB, so either is plain to see."""
    import tracemalloc
    need(SUPER)
    s = edgert.load(SUPER).session(device="cpu")
    x = rng.standard_normal(s.inputs[0].shape).astype(np.float32)
    name = s.outputs[0].name
    out = {name: np.empty(s.outputs[0].shape, np.float32)}
    s.run(x, out=out)                          # warm: first-call caches
    s.run(x)
    tracemalloc.start()
    try:
        peaks = []
        for kw in ({"out": out}, {}):
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            r = s.run(x, **kw)
            peaks.append(tracemalloc.get_traced_memory()[1] - base)
            del r
    finally:
        tracemalloc.stop()
    nbytes = out[name].nbytes
    assert peaks[0] < 16 * 1024, f"a run with out= allocated {peaks[0]} bytes"
    assert peaks[1] >= nbytes, f"a run without out= should allocate its {nbytes}-byte output: {peaks[1]}"


@pytest.mark.parametrize("precision", ["f16", "bf16"])
def test_precision_on_the_cpu(precision, rng):
    """precision= is accepted by CPU sessions, which compute in f32 (as
    documented): the same output as an f32 session, float32 in and out."""
    need(MNIST)
    m = edgert.load(MNIST)
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    s = m.session(device="cpu", precision=precision)
    assert s.inputs[0].dtype == "f32" and s.outputs[0].dtype == "f32"
    np.testing.assert_array_equal(s.run(x)["Plus214_Output_0"],
                                  m.session(device="cpu").run(x)["Plus214_Output_0"])


@pytest.mark.gpu
@pytest.mark.parametrize("precision,tol", [("f32", 1e-4), ("f16", 2e-2), ("bf16", 6e-2)])
def test_cuda_precisions(precision, tol, rng):
    """CUDA sessions in each precision against the CPU session (which
    test_run_matches_onnxruntime holds to onnxruntime) on fresh data: f32
    tight, f16/bf16 within their rounding; inputs and outputs stay f32."""
    need(SUPER)
    if not edgert.built_with_cuda():
        pytest.skip("this edgert was built without CUDA")
    m = edgert.load(SUPER)
    try:
        s = m.session(device="cuda", precision=precision)
    except edgert.CudaError as e:
        pytest.skip(f"no usable GPU: {e}")
    assert s.device == "cuda" and s.outputs[0].dtype == "f32"
    x = rng.standard_normal(s.inputs[0].shape).astype(np.float32)
    want = m.session(device="cpu").run(x)
    got = s.run(x)
    for k in want:
        assert got[k].dtype == np.float32
        np.testing.assert_allclose(got[k], want[k], rtol=tol, atol=tol * float(np.abs(want[k]).max()))


def test_bad_inputs(rng):
    need(MNIST)
    s = edgert.load(MNIST).session(device="cpu")
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    want = s.run(x)["Plus214_Output_0"]
    with pytest.raises(edgert.ShapeError, match="float64"):
        s.run(x.astype(np.float64))            # wrong dtype: refused, never cast
    with pytest.raises(edgert.ShapeError):
        s.run(x.reshape(1, 28, 28, 1))         # wrong shape
    with pytest.raises(edgert.ShapeError):
        s.run(np.zeros((2, 1, 28, 28), np.float32))
    with pytest.raises(edgert.NotFoundError):
        s.run({"nope": x})
    with pytest.raises(edgert.ShapeError):
        s.run("not an array")
    # non-contiguous: copied (documented), same result
    big = np.zeros((1, 1, 28, 56), np.float32)
    big[..., ::2] = x
    assert not big[..., ::2].flags.c_contiguous
    np.testing.assert_array_equal(s.run(big[..., ::2])["Plus214_Output_0"], want)
    # anything with the buffer protocol
    np.testing.assert_array_equal(s.run(memoryview(x))["Plus214_Output_0"], want)
    # run() with no inputs reuses what the input holds
    np.testing.assert_array_equal(s.run()["Plus214_Output_0"], want)


def test_closed_session_and_freed_model(rng):
    need(MNIST)
    m = edgert.load(MNIST)
    s = m.session(device="cpu")
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    want = s.run(x)["Plus214_Output_0"]
    with pytest.raises(edgert.StateError):
        m.close()                              # a session still uses it
    np.testing.assert_array_equal(s.run(x)["Plus214_Output_0"], want)
    del m                                      # the session keeps the model alive
    gc.collect()
    np.testing.assert_array_equal(s.run(x)["Plus214_Output_0"], want)
    model = s.model
    s.close()
    s.close()                                  # twice is harmless
    for call in (lambda: s.run(x), s.plan, lambda: s.input_dlpack("Input3")):
        with pytest.raises(edgert.StateError):
            call()
    model.close()
    for call in (lambda: model.inputs, lambda: model.session(device="cpu"), model.plan):
        with pytest.raises(edgert.StateError):
            call()
    model.close()


def test_gil_released_during_run():
    """Another Python thread runs while run() works in C (conftest.gil_free_ticks)."""
    need(SUPER)
    s = edgert.load(SUPER).session(device="cpu")
    x = np.random.default_rng(0).standard_normal(s.inputs[0].shape).astype(np.float32)
    s.run(x)
    ticks = gil_free_ticks(lambda: s.run(x))
    assert ticks >= 1000, ticks


def test_threads_share_a_model(rng):
    """Two sessions of one model driven from two threads (the model's context
    is serialised inside): both get the right answers."""
    need(MNIST)
    m = edgert.load(MNIST)
    xs = [rng.standard_normal((1, 1, 28, 28)).astype(np.float32) for _ in range(2)]
    want = [m.session(device="cpu").run(x)["Plus214_Output_0"] for x in xs]
    errors = []

    def work(k):
        s = m.session(device="cpu")
        for _ in range(300):
            if not np.array_equal(s.run(xs[k])["Plus214_Output_0"], want[k]):
                errors.append(k)

    ths = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    [t.start() for t in ths]
    [t.join() for t in ths]
    assert not errors


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_no_memory_growth_over_10000_runs():
    """Three windows of 10,000 runs each (half with out= buffers) after a
    warm-up: at least two of them show neither traced Python heap nor RSS
    growth. A leak grows in every window; a one-off step of an interpreter
    table (CPython/numpy grow one by a few hundred KiB to ~2 MiB once,
    somewhere in the first tens of thousands of calls: seen with numpy's
    __array_interface__ alone) lands in one window only."""
    import tracemalloc
    need(MNIST)
    s = edgert.load(MNIST).session(device="cpu")
    x = np.random.default_rng(2).standard_normal((1, 1, 28, 28)).astype(np.float32)
    out = {"Plus214_Output_0": np.empty((1, 10), np.float32)}

    def runs(n):
        for k in range(n):
            if k % 2:
                s.run(x, out=out)
            else:
                s.run({"Input3": x})

    tracemalloc.start()
    own = [tracemalloc.Filter(False, tracemalloc.__file__)]  # not the snapshots themselves
    try:
        runs(2000)
        heap, rss, worst = [], [], []
        for _ in range(3):
            gc.collect()
            rss0 = rss_bytes()
            snap0 = tracemalloc.take_snapshot().filter_traces(own)
            runs(10000)
            gc.collect()
            snap1 = tracemalloc.take_snapshot().filter_traces(own)
            rss.append(rss_bytes() - rss0)
            diff = snap1.compare_to(snap0, "lineno")
            heap.append(sum(st.size_diff for st in diff))
            worst.append(diff[:2])
            del snap0, snap1
    finally:
        tracemalloc.stop()
    assert sorted(heap)[1] < 64 * 1024, f"Python heap grew per 10,000 runs by {heap}: {worst}"
    assert sorted(rss)[1] < 1024 * 1024, f"RSS grew per 10,000 runs by {rss}"
    np.testing.assert_array_equal(out["Plus214_Output_0"], s.run(x)["Plus214_Output_0"])


def test_several_inputs_outputs_and_dtypes(tmp_path, rng):
    """Two inputs (f32 and i64), two outputs (f32 and bool), a dynamic batch:
    names, dtypes and shapes reach numpy intact; checked against numpy."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    g = helper.make_graph(
        [helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["a", "bf"], ["y"]),
         helper.make_node("Greater", ["a", "bf"], ["z"])],
        "two", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3]),
                helper.make_tensor_value_info("b", TensorProto.INT64, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("z", TensorProto.BOOL, ["N", 3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "two.onnx"))
    m = edgert.load(tmp_path / "two.onnx")
    assert [(t.name, t.dtype, t.shape) for t in m.inputs] == [("a", "f32", (-1, 3)), ("b", "i64", (-1, 3))]
    assert [(t.name, t.dtype) for t in m.outputs] == [("y", "f32"), ("z", "bool")]
    s = m.session(device="cpu", batch=5)
    a = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.integers(-3, 3, (5, 3))
    r = s.run({"a": a, "b": b})
    np.testing.assert_array_equal(r["y"], a + b.astype(np.float32))
    assert r["z"].dtype == np.bool_
    np.testing.assert_array_equal(r["z"], a > b)
    with pytest.raises(edgert.ArgError):
        s.run(a)                               # two inputs: a dict is needed
    with pytest.raises(edgert.ShapeError):
        s.run({"a": a, "b": b.astype(np.int32)})

"""DLPack: views of a session's buffers and DLPack inputs. On the CPU the
views are host memory (numpy's from_dlpack reads them); the refusal paths of
GPU tensors are tested here with a stand-in object; the torch round trip on
a GPU is marked `gpu` and skipped (with the reason) without one."""
import gc
import os

import numpy as np
import pytest

import edgert
from conftest import MODELS, need

MNIST = os.path.join(MODELS, "mnist_8", "model.onnx")


def test_cpu_views_round_trip(rng):
    need(MNIST)
    s = edgert.load(MNIST).session(device="cpu")
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    want = s.run(x)["Plus214_Output_0"]
    v = s.input_dlpack("Input3")
    assert v.__dlpack_device__() == (1, 0)
    inp = np.from_dlpack(v)
    assert inp.shape == (1, 1, 28, 28) and inp.dtype == np.float32
    if not inp.flags.writeable:
        # numpy < 2.1 asks for no DLPack version and imports the legacy form read-only
        assert tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 1)
        np.testing.assert_array_equal(inp, x)         # the input as run(x) left it
        np.testing.assert_array_equal(np.from_dlpack(s.output_dlpack("Plus214_Output_0")), want)
        return
    inp[...] = 0
    zero = s.run()["Plus214_Output_0"]          # run on what the view holds
    inp[...] = x                                 # written in place, zero-copy
    out = np.from_dlpack(s.output_dlpack("Plus214_Output_0"))
    np.testing.assert_array_equal(s.run()["Plus214_Output_0"], want)
    np.testing.assert_array_equal(out, want)     # the view follows the last run
    assert not np.array_equal(zero, want)
    with pytest.raises(edgert.NotFoundError):
        s.input_dlpack("nope")
    with pytest.raises(edgert.NotFoundError):
        s.output_dlpack("Input3")
    with pytest.raises(BufferError):
        s.input_dlpack("Input3").__dlpack__(copy=True)


def test_view_outlives_closed_session(rng):
    need(MNIST)
    s = edgert.load(MNIST).session(device="cpu")
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    want = s.run(x)["Plus214_Output_0"].copy()
    out = np.from_dlpack(s.output_dlpack("Plus214_Output_0"))
    unused = s.output_dlpack("Plus214_Output_0").__dlpack__()  # a capsule never consumed
    s.close()
    with pytest.raises(edgert.StateError):
        s.run(x)
    with pytest.raises(edgert.StateError):
        s.output_dlpack("Plus214_Output_0")
    gc.collect()
    np.testing.assert_array_equal(out, want)     # memory still valid: freed with the last view
    del out, unused
    gc.collect()


class FakeCudaTensor:
    """Claims to live on cuda:0; must be refused before its capsule is asked for."""

    def __init__(self):
        self.asked = False

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, **kw):
        self.asked = True
        raise AssertionError("a CPU session must not take a GPU tensor's capsule")


class FakeOtherDevice(FakeCudaTensor):
    def __dlpack_device__(self):
        return (8, 0)  # Metal


def test_gpu_tensors_refused_by_a_cpu_session():
    need(MNIST)
    s = edgert.load(MNIST).session(device="cpu")
    t = FakeCudaTensor()
    with pytest.raises(edgert.UnsupportedError, match="CPU session"):
        s.run(t)
    assert not t.asked
    with pytest.raises(edgert.UnsupportedError, match="device type 8"):
        s.run(FakeOtherDevice())


def test_cpu_dlpack_objects_are_read_through_numpy(rng):
    """Any object with __dlpack__ on the CPU works as an input (numpy's own here)."""
    need(MNIST)
    s = edgert.load(MNIST).session(device="cpu")
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)

    class Wrapped:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    np.testing.assert_array_equal(s.run(Wrapped(x))["Plus214_Output_0"], s.run(x)["Plus214_Output_0"])


def cuda_session(model, **kw):
    if not edgert.built_with_cuda():
        pytest.skip("this edgert was built without CUDA")
    try:
        return model.session(device="cuda", **kw)
    except edgert.CudaError as e:
        pytest.skip(f"no usable GPU: {e}")


@pytest.mark.gpu
def test_cuda_views_between_sessions(rng):
    """Without torch: a CUDA session's input view (device memory) is another
    CUDA session's DLPack input (copied on the GPU), against the CPU."""
    need(MNIST)
    m = edgert.load(MNIST)
    a = cuda_session(m)
    b = cuda_session(m, placement="unified")
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    want = m.session(device="cpu").run(x)["Plus214_Output_0"]
    np.testing.assert_allclose(a.run(x)["Plus214_Output_0"], want, rtol=1e-4, atol=1e-4)  # host input uploaded
    v = a.input_dlpack("Input3")
    assert v.__dlpack_device__()[0] == 2
    got = b.run(v)["Plus214_Output_0"]              # device-to-device from a's input storage
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    a.close()                                         # b keeps nothing of a: its copy is done
    np.testing.assert_allclose(b.run()["Plus214_Output_0"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_torch_cuda_round_trip(rng):
    """torch tensors in and out of a CUDA session through DLPack, against the
    CPU session: input_dlpack written by torch, run(torch tensor), output
    views read by torch without copies."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    need(MNIST)
    m = edgert.load(MNIST)
    cpu = m.session(device="cpu")
    for placement in ("device", "unified"):
        s = cuda_session(m, placement=placement)
        assert s.device == "cuda"
        x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
        want = cpu.run(x)["Plus214_Output_0"]
        xt = torch.from_numpy(x).cuda()
        got = s.run(xt)["Plus214_Output_0"]                 # device-to-device input copy
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        out_t = torch.from_dlpack(s.output_dlpack("Plus214_Output_0"))
        assert out_t.is_cuda and tuple(out_t.shape) == (1, 10)
        np.testing.assert_allclose(out_t.cpu().numpy(), want, rtol=1e-4, atol=1e-4)
        x2 = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
        in_t = torch.from_dlpack(s.input_dlpack("Input3"))  # zero-copy view of the input
        in_t.copy_(torch.from_numpy(x2).cuda())
        torch.cuda.synchronize()
        s.run()
        np.testing.assert_allclose(out_t.cpu().numpy(), cpu.run(x2)["Plus214_Output_0"], rtol=1e-4, atol=1e-4)
        with pytest.raises(edgert.ShapeError):
            s.run(torch.zeros((1, 1, 28, 28), dtype=torch.float64, device="cuda"))
        with pytest.raises(edgert.ShapeError):
            s.run(torch.zeros((1, 1, 28, 56), device="cuda")[..., ::2])  # strided: refused
        s.close()
        del in_t, out_t
        gc.collect()

"""Training from Python: the same run as `edgert train` (same model file,
data subset, seed, optimizer, schedule and batch order) reaches the same
accuracy and loss; checkpoints, export and bad input."""
import gzip
import json
import os
import subprocess

import numpy as np
import pytest

import edgert
from conftest import FMNIST, gil_free_ticks, need

M64 = (1 << 64) - 1


class SplitMix64:
    """apps/cli_util.c's cli_rng, which orders `edgert train`'s batches."""

    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)


def small_cnn(path, rng, classes=10):
    """conv3x3(1->8) relu maxpool2 conv3x3(8->16) relu maxpool2 flatten
    fc(784->32) relu fc(32->classes), He-uniform weights from rng, as ONNX."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    def w(name, shape, fan_in):
        s = np.sqrt(6.0 / fan_in) if fan_in else 0.0
        return numpy_helper.from_array(rng.uniform(-s, s, shape).astype(np.float32), name)

    inits = [w("conv1.w", (8, 1, 3, 3), 9), w("conv1.b", (8,), 0), w("conv2.w", (16, 8, 3, 3), 72),
             w("conv2.b", (16,), 0), w("fc1.w", (32, 784), 784), w("fc1.b", (32,), 0),
             w("fc2.w", (classes, 32), 32), w("fc2.b", (classes,), 0)]
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], **pool),
        helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], **pool),
        helper.make_node("Flatten", ["p2"], ["f"]),
        helper.make_node("Gemm", ["f", "fc1.w", "fc1.b"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["rh"]),
        helper.make_node("Gemm", ["rh", "fc2.w", "fc2.b"], ["logits"], transB=1),
    ]
    g = helper.make_graph(nodes, "small_cnn",
                          [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 28, 28])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(path))
    return str(path)


def idx(name):
    with gzip.open(os.path.join(need(FMNIST), name + ".gz")) as f:
        data = f.read()
    nd = data[3]
    dims = [int.from_bytes(data[4 + 4 * k:8 + 4 * k], "big") for k in range(nd)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * nd).reshape(dims)


def normalise(img):
    # the CLI's (v / 255.0f - 0.286f) / 0.353f in float32
    return ((img.astype(np.float32) / np.float32(255) - np.float32(0.286)) / np.float32(0.353))[:, None]


def test_fashion_mnist_equals_cli(cli, tmp_path, rng):
    """One epoch on a 3,000-image subset (10% held out), batch 32, Adam +
    cosine (the CLI's defaults), one thread: the Python run takes the same
    batches in the same order as `edgert train --seed S`, so the test
    accuracy and loss on the 10,000 test images come out the same."""
    model = small_cnn(tmp_path / "cnn.onnx", rng)
    seed = int(rng.integers(1, 1 << 30))
    limit, B = 3000, 32
    r = subprocess.run([cli, "train", model, "--data", need(FMNIST), "--limit", str(limit), "--epochs", "1",
                        "--batch", str(B), "--threads", "1", "--seed", str(seed), "--json"],
                       check=True, capture_output=True, text=True)
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    done = next(e for e in events if e["event"] == "done")
    epoch = next(e for e in events if e["event"] == "epoch")

    tr_x, tr_y = idx("train-images-idx3-ubyte")[:limit], idx("train-labels-idx1-ubyte")[:limit]
    te_x, te_y = idx("t10k-images-idx3-ubyte"), idx("t10k-labels-idx1-ubyte")
    n_val = int(limit * 0.1)
    n_train = limit - n_val
    spe = n_train // B
    t = edgert.Trainer(edgert.load(model), loss="cross_entropy", optimizer="adam", lr=2e-3, schedule="cosine",
                       total_steps=spe, batch=B, threads=1, seed=seed)
    g = SplitMix64(seed * 1000003 + 0)
    perm = list(range(n_train))
    for i in range(n_train - 1, 0, -1):
        j = g.next() % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    perm = np.array(perm)
    x_all = normalise(tr_x)
    logits = np.empty((B, 10), np.float32)
    ok = 0
    losses = []
    for s in range(spe):
        b = perm[s * B:(s + 1) * B]
        losses.append(t.step(x_all[b], tr_y[b], out=logits))
        ok += int((logits.argmax(1) == tr_y[b]).sum())
    assert t.step_count == spe
    np.testing.assert_allclose(np.mean(losses), epoch["train_loss"], rtol=0, atol=1e-5)
    assert round(ok / (spe * B), 4) == epoch["train_acc"]
    # the CLI's evaluation: every test image, the last batch padded with the
    # first one; loss = mean over images of -log softmax(z)[y] in float64
    tx = normalise(te_x)
    ok = 0
    ce = []
    for s in range(0, len(te_y), B):
        real = min(B, len(te_y) - s)
        sel = np.array([s + k if k < real else 0 for k in range(B)])
        t.eval(tx[sel], te_y[sel], out=logits)
        z = logits[:real].astype(np.float64)
        yk = te_y[s:s + real]
        ok += int((logits[:real].argmax(1) == yk).sum())
        mx = z.max(1)
        ce.extend(mx + np.log(np.exp(z - mx[:, None]).sum(1)) - z[np.arange(real), yk])
    acc = ok / len(te_y)
    tl = ce
    print(f"python test accuracy {acc:.4f} loss {np.mean(tl):.5f}; edgert train {done}")
    assert round(acc, 4) == done["test_acc"], (acc, done)
    np.testing.assert_allclose(np.mean(tl), done["test_loss"], rtol=0, atol=1e-5)
    # chance is 0.1; 84 steps from some random inits reach only ~0.55 (0.74 typical)
    assert acc > 0.3, f"one short epoch should learn something: {acc}"


@pytest.fixture
def trainer_setup(tmp_path, rng):
    model = edgert.load(small_cnn(tmp_path / "cnn.onnx", rng))
    x = rng.standard_normal((4, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 4)
    return model, x, y


def test_checkpoint_export_and_state(tmp_path, trainer_setup):
    model, x, y = trainer_setup
    # lr 0.001: on N(0,1) images with He weights, lr 0.05 (and even 0.01)
    # overshoots on ~2-10% of seeds, so "it learns the batch" failed at
    # random (CI, seed 2854703030); 0.001 passed on 1,001 of 1,001 seeds
    t = edgert.Trainer(model, optimizer="sgd", lr=0.001, momentum=0.9, batch=4, schedule="cosine", total_steps=10)
    assert t.inputs[0].shape == (4, 1, 28, 28) and t.target.dtype == "i64" and t.target.shape == (4,)
    assert t.output_info.shape == (4, 10)
    assert t.device == "cpu" and t.n_trainable == 8 and t.n_trainable_elems == model.n_params
    plan = t.plan()
    assert plan["gradients_bytes"] > 0 and plan["optimizer_bytes"] > 0
    lr0 = t.lr
    l0 = t.step(x, y)
    for _ in range(3):
        t.step(x, y)
    assert t.step_count == 4 and t.lr < lr0
    assert t.eval(x, y) < l0                   # it learns the batch
    t.save_checkpoint(tmp_path / "ck.ert")
    t2 = edgert.Trainer(model, optimizer="sgd", lr=0.001, momentum=0.9, batch=4, schedule="cosine", total_steps=10)
    t2.load_checkpoint(tmp_path / "ck.ert")
    assert t2.step_count == 4
    assert t.step(x, y) == t2.step(x, y)       # same weights, momentum and schedule
    # export: a model whose session gives the trainer's eval output
    logits = np.empty((4, 10), np.float32)
    t.eval(x, y, out=logits)
    for path in (tmp_path / "ft.ert", tmp_path / "ft.onnx"):
        m = t.export(path)
        np.testing.assert_allclose(m.session(device="cpu", batch=4).run(x)["logits"], logits, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(edgert.load(path).session(device="cpu", batch=4).run(x)["logits"], logits,
                                   rtol=1e-5, atol=1e-5)
    # a checkpoint of another optimizer is refused with a message, nothing changed
    t3 = edgert.Trainer(model, optimizer="adam", batch=4)
    with pytest.raises(edgert.ArgError):
        t3.load_checkpoint(tmp_path / "ck.ert")
    (tmp_path / "bad.ert").write_bytes(b"\0" * 100)
    with pytest.raises(edgert.FormatError):
        t3.load_checkpoint(tmp_path / "bad.ert")
    with pytest.raises(edgert.FileError):
        t3.load_checkpoint(tmp_path / "missing.ert")


def test_trainable_choices(trainer_setup):
    model, x, y = trainer_setup
    assert edgert.Trainer(model, trainable=1, batch=4).n_trainable == 2          # fc2.w, fc2.b
    assert edgert.Trainer(model, trainable="fc*", batch=4).n_trainable == 4
    with pytest.raises(edgert.NotFoundError):
        edgert.Trainer(model, trainable="nothing*", batch=4)
    with pytest.raises(edgert.ArgError):
        edgert.Trainer(model, trainable=True, batch=4)
    head = edgert.Trainer(model, trainable=1, batch=4, optimizer="sgd", lr=0.1)
    before = model.session(device="cpu", batch=4).run(x)["logits"]
    head.step(x, y)
    assert not np.array_equal(head.export().session(device="cpu", batch=4).run(x)["logits"], before)


def test_trainer_bad_input(trainer_setup):
    model, x, y = trainer_setup
    t = edgert.Trainer(model, batch=4)
    with pytest.raises(edgert.ArgError):       # class index out of range: refused, nothing updated
        t.step(x, np.array([0, 1, 2, 10]))
    assert t.step_count == 0
    with pytest.raises(edgert.ShapeError):
        t.step(x.astype(np.float64), y)
    with pytest.raises(edgert.ShapeError):
        t.step(x[:3], y[:3])
    with pytest.raises(edgert.ShapeError):
        t.step(x, y.astype(np.float32))        # CE needs class indices
    with pytest.raises(edgert.ShapeError):
        t.step(x, y, out=np.empty((4, 9), np.float32))
    with pytest.raises(edgert.ArgError):
        t.step(np.full_like(x, np.nan), y)     # NaN loss: the step is skipped
    assert t.step_count == 0
    t.step(x[:, :, ::-1, :], y)                # non-contiguous: copied
    assert t.step_count == 1
    with pytest.raises(edgert.StateError):
        model.close()                          # the trainer still needs it
    with pytest.raises(edgert.ArgError):
        edgert.Trainer(model, loss="hinge")
    with pytest.raises(edgert.UnsupportedError):
        edgert.Trainer(model, batch=4, device="cpu", precision="f16")   # AMP is CUDA only
    t.close()
    with pytest.raises(edgert.StateError):
        t.step(x, y)
    t.close()


def test_losses_against_numpy(trainer_setup, rng):
    """eval()'s loss against float64 numpy on the logits it reports, for the
    three losses (targets reach the C trainer intact: int64 indices from any
    integer dtype, float32 targets of the output's shape)."""
    model, x, y = trainer_setup
    logits = np.empty((4, 10), np.float32)
    t = edgert.Trainer(model, loss="cross_entropy", batch=4)
    loss = t.eval(x, y.astype(np.uint8), out=logits)
    z = logits.astype(np.float64)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    np.testing.assert_allclose(loss, np.mean(lse - z[np.arange(4), y]), rtol=1e-5)
    assert t.loss_scale == 1.0 and t.skipped_steps == 0   # no loss scaling on the CPU
    smooth = edgert.Trainer(model, loss="cross_entropy", label_smoothing=0.2, batch=4)
    logp = z - lse[:, None]
    want = np.mean(-(0.8 * logp[np.arange(4), y] + 0.2 * logp.mean(1)))
    np.testing.assert_allclose(smooth.eval(x, y), want, rtol=1e-5)
    target = rng.standard_normal((4, 10)).astype(np.float32)
    mse = edgert.Trainer(model, loss="mse", batch=4)
    np.testing.assert_allclose(mse.eval(x, target), np.mean((z - target) ** 2), rtol=1e-5)
    p = rng.uniform(0, 1, (4, 10)).astype(np.float32)
    bce = edgert.Trainer(model, loss="bce_logits", batch=4)
    want = np.mean(np.logaddexp(0, z) - p * z)
    np.testing.assert_allclose(bce.eval(x, p), want, rtol=1e-5)
    with pytest.raises(edgert.ShapeError):
        mse.eval(x, target.astype(np.float64))


def test_gil_released_during_step_and_eval(tmp_path, rng):
    """Another Python thread runs while step() and eval() work in C."""
    model = edgert.load(small_cnn(tmp_path / "cnn.onnx", rng))
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 64)
    t = edgert.Trainer(model, batch=64, threads=1)
    t.step(x, y)
    assert gil_free_ticks(lambda: t.step(x, y)) >= 1000
    assert gil_free_ticks(lambda: t.eval(x, y)) >= 1000
    assert t.step_count == 6

"""edgert: an embedded deep-learning runtime in C, from Python.

    import edgert, numpy as np
    model = edgert.load("net.onnx")                 # or a .ert file
    sess = model.session(device="auto", batch=1)    # every allocation happens here
    y = sess.run(np.zeros(sess.inputs[0].shape, np.float32))   # {"logits": array}

The package is thin: each call is one or a few calls of the C library
(``edgert.h``), whose documentation holds for it. Errors raise one exception
class per ``ert_status`` (``edgert.ArenaError``, ``edgert.ShapeError``, ...),
all subclasses of ``edgert.Error``, with the library's detailed message.
``Session.run`` and ``Trainer.step`` release the GIL. See docs/python.md.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _edgert as _c
from ._edgert import (  # noqa: F401  (re-exported)
    ArenaError,
    ArgError,
    CudaError,
    Error,
    FileError,
    FormatError,
    InternalError,
    NoMemoryError,
    NotFoundError,
    NumericError,
    ShapeError,
    StateError,
    UnsupportedError,
)

__all__ = [
    "load", "Model", "Session", "Trainer", "quantize", "TensorInfo", "DLPackView", "decode_jpeg", "preprocess", "Preprocessor",
    "jpeg_available", "built_with_cuda", "version", "Error", "ArgError", "FormatError", "UnsupportedError",
    "ArenaError", "NoMemoryError", "FileError", "CudaError", "ShapeError", "StateError", "InternalError",
    "NotFoundError", "NumericError",
]

__version__ = "0.1.0"

# ert_dtype names -> numpy dtypes. bf16 has no numpy dtype: its tensors are
# exchanged as uint16 bit patterns.
_NP = {
    "f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16),
    "i8": np.dtype(np.int8), "u8": np.dtype(np.uint8), "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64), "bool": np.dtype(np.bool_),
}
_DEVICE = {"cpu": 0, "cuda": 1, "auto": 2}
_PRECISION = {"f32": 1, "f16": 2, "bf16": 3}
_PLACEMENT = {"auto": 0, "device": 1, "unified": 2, "mapped": 3}
_NO_FOLD, _NO_FUSE, _DEVICE_INPUTS = 1, 2, 4
_DL_CPU, _DL_CUDA, _DL_CUDA_MANAGED = 1, 2, 13


def version() -> str:
    """The C library's version, "MAJOR.MINOR.PATCH"."""
    return _c.version()


def built_with_cuda() -> bool:
    """True when this build has the CUDA backend (a GPU may still be absent)."""
    return _c.built_with_cuda()


def jpeg_available() -> bool:
    """True when this build decodes JPEG (TurboJPEG)."""
    return _c.jpeg_available()


class TensorInfo(NamedTuple):
    """A graph input or output: name, ert dtype name ("f32", "i64", ...) and
    shape (-1 for a dimension that a session fixes)."""

    name: str
    dtype: str
    shape: Tuple[int, ...]

    @property
    def np_dtype(self) -> np.dtype:
        """The numpy dtype of this tensor's arrays (bf16: uint16 bit patterns)."""
        return _NP[self.dtype]


def _infos(raw: Iterable[Tuple[str, str, Tuple[int, ...]]]) -> List[TensorInfo]:
    return [TensorInfo(n, d, tuple(s)) for n, d, s in raw]


def _addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _choice(what: str, value: str, table: Mapping[str, int]) -> int:
    try:
        return table[value]
    except (KeyError, TypeError):
        raise ArgError(f"{what} must be one of {', '.join(repr(k) for k in table)}; got {value!r}") from None


def load(source: Union[str, os.PathLike, bytes, bytearray, memoryview]) -> "Model":
    """Load a model: a path to a ``.ert`` or ONNX file (the format is read from
    the content), or the file's bytes (copied). Raises FileError, FormatError,
    UnsupportedError (an op or dtype edgert lacks, naming the node)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf = np.frombuffer(source, dtype=np.uint8)
        return Model(_c.model_load(None, _addr(buf) if buf.size else 0, buf.size))
    return Model(_c.model_load(os.fspath(source)))


class Model:
    """An immutable graph and its weights (``ert_model``). Make sessions with
    :meth:`session` and trainers with :class:`Trainer`. A model stays alive
    while any session or trainer made from it is open; :meth:`close` frees it
    now and raises StateError while one is."""

    def __init__(self, _capsule: Any):
        self._cap = _capsule

    def _info(self) -> Tuple[list, list, int, int]:
        return _c.model_info(self._cap)

    @property
    def inputs(self) -> List[TensorInfo]:
        """Graph inputs (dynamic dims are -1)."""
        return _infos(self._info()[0])

    @property
    def outputs(self) -> List[TensorInfo]:
        """Graph outputs (dynamic dims are -1)."""
        return _infos(self._info()[1])

    @property
    def n_nodes(self) -> int:
        """Nodes in the graph (after the loader's passes)."""
        return self._info()[2]

    @property
    def n_params(self) -> int:
        """Elements in all weight tensors."""
        return self._info()[3]

    def _session_args(self, device: str, precision: str, batch: int, shapes: Optional[Mapping[str, Sequence[int]]],
                      threads: int, placement: str, fold: bool, fuse: bool) -> tuple:
        flags = (0 if fold else _NO_FOLD) | (0 if fuse else _NO_FUSE)
        if device != "cpu":
            # run() uploads the inputs it is given itself, so inputs written
            # through input_dlpack() views are never overwritten by stale host copies.
            flags |= _DEVICE_INPUTS
        sh = [(str(k).encode(), tuple(int(d) for d in v)) for k, v in (shapes or {}).items()]
        return (self._cap, _choice("device", device, _DEVICE), _choice("precision", precision, _PRECISION),
                int(batch), int(threads), sh, flags, _choice("placement", placement, _PLACEMENT))

    def plan(self, device: str = "auto", precision: str = "f32", batch: int = 1,
             shapes: Optional[Mapping[str, Sequence[int]]] = None, threads: int = 1, placement: str = "auto",
             fold: bool = True, fuse: bool = True) -> Dict[str, int]:
        """The arena bytes a session with these options needs, by category
        (``ert_session_plan``): weights_bytes, activations_bytes, ...,
        total_bytes (what an ``arena=`` buffer must hold)."""
        return _c.session_plan(*self._session_args(device, precision, batch, shapes, threads, placement, fold, fuse))

    def session(self, device: str = "auto", precision: str = "f32", batch: int = 1,
                shapes: Optional[Mapping[str, Sequence[int]]] = None, threads: int = 1,
                arena: Union[None, int, np.ndarray, bytearray] = None, placement: str = "auto",
                fold: bool = True, fuse: bool = True) -> "Session":
        """Plan the model for a device and create a session (all allocation
        happens here; ``run`` never allocates in the library).

        device: "auto" (CUDA when there is a GPU, else the CPU), "cpu" or "cuda".
        precision: "f32", "f16" or "bf16" (CUDA; the CPU computes in f32).
        batch: replaces a dynamic leading dim of every input.
        shapes: {input name: full shape} for inputs with other dynamic dims.
        threads: CPU worker threads including the caller.
        arena: None (the session allocates), an int (bytes: an aligned buffer
        is made here), or a writable buffer of at least ``plan()["total_bytes"]``
        bytes, 64-byte aligned, which the session keeps alive. Too small:
        ArenaError. CPU sessions only (UnsupportedError otherwise).
        placement: CUDA arena placement, "auto", "device", "unified" or "mapped".
        """
        args = self._session_args(device, precision, batch, shapes, threads, placement, fold, fuse)
        buf = None
        if arena is None:
            args += (None, 0)
        elif device != "cpu":
            # numpy memory is pageable host memory; a CUDA arena must be device,
            # managed or mapped memory, which Python cannot hand over here
            raise UnsupportedError("arena= is for device='cpu' sessions (a CUDA arena must be GPU memory)")
        else:
            if isinstance(arena, (int, np.integer)):
                buf = _aligned(int(arena))
            else:
                buf = np.frombuffer(arena, dtype=np.uint8) if not isinstance(arena, np.ndarray) else arena
                if not buf.flags.c_contiguous or not buf.flags.writeable:
                    raise ArgError("arena: a writable, contiguous buffer is needed")
                if _addr(buf) % 64:
                    raise ArgError("arena: the buffer must be 64-byte aligned (pass the size in bytes to get one)")
            args += (_addr(buf), buf.nbytes)
        return Session(self, _c.session_create(*args), buf)

    def save(self, path: Union[str, os.PathLike], f16_weights: bool = False) -> None:
        """Save as ``.ert`` atomically (f16_weights: store large f32 weights as f16)."""
        _c.model_save(self._cap, os.fspath(path), False, f16_weights)

    def save_onnx(self, path: Union[str, os.PathLike]) -> None:
        """Save as ONNX (opset 18/20), atomically; ops without a plain ONNX form raise UnsupportedError."""
        _c.model_save(self._cap, os.fspath(path), True, False)

    def close(self) -> None:
        """Free the model now. StateError while a session or trainer made from it is open."""
        _c.model_close(self._cap)

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        try:
            i, o, n, p = self._info()
        except StateError:
            return "<edgert.Model (closed)>"
        return f"<edgert.Model {len(i)} input(s), {len(o)} output(s), {n} nodes, {p} parameters>"


def _aligned(nbytes: int, align: int = 256) -> np.ndarray:
    """A zeroed uint8 array of nbytes whose data is `align`-byte aligned."""
    if nbytes < 0:
        raise ArgError("a negative size")
    raw = np.zeros(nbytes + align, dtype=np.uint8)
    off = (-_addr(raw)) % align
    return raw[off:off + nbytes]


class DLPackView:
    """A zero-copy DLPack view of one of a session's buffers (GPU memory for a
    CUDA session, host memory for a CPU one): ``torch.from_dlpack(view)``,
    ``cupy.from_dlpack(view)``, ``np.from_dlpack(view)`` (CPU). An input view
    may be written before ``run()``; an output view holds the last run's result
    and changes with the next run. The session's memory stays valid while any
    consumer of a view lives, even after ``Session.close()``."""

    def __init__(self, session: "Session", is_output: bool, index: int, info: TensorInfo):
        self._session, self._out, self._index, self.info = session, is_output, index, info

    def __dlpack__(self, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        if copy:
            raise BufferError("edgert DLPack views are never copies (copy=True was asked)")
        # run() is complete on return (its stream synchronised), so any
        # consumer stream may read the buffer without waiting.
        versioned = max_version is not None and tuple(max_version)[:1] >= (1,)
        return _c.dlpack_view(self._session._capsule(), self._out, self._index, versioned)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return _c.dlpack_device(self._session._capsule())

    def __repr__(self) -> str:
        return f"<edgert.DLPackView {'output' if self._out else 'input'} {self.info.name!r} {self.info.shape}>"


class Session:
    """A model planned for a device, batch and precision (``ert_session``).
    One thread at a time; ``run`` releases the GIL."""

    def __init__(self, model: Model, capsule: Any, arena: Optional[np.ndarray]):
        self.model = model          # keeps the model (and its context) alive
        self._cap = capsule
        self._arena = arena         # a caller arena must outlive the session
        ins, outs, cuda = _c.session_info(capsule)
        self.inputs: List[TensorInfo] = _infos(ins)
        self.outputs: List[TensorInfo] = _infos(outs)
        self.device: str = "cuda" if cuda else "cpu"
        self._in_index = {t.name: i for i, t in enumerate(self.inputs)}
        self._out_index = {t.name: i for i, t in enumerate(self.outputs)}

    def _capsule(self) -> Any:
        if self._cap is None:
            raise StateError("the session is closed")
        return self._cap

    def plan(self) -> Dict[str, int]:
        """The session's arena by category (``ert_session_memory``)."""
        return _c.session_memory(self._capsule())

    def _input(self, name: str, x: Any, host: list, dls: list, keep: list) -> None:
        i = self._in_index.get(name)
        if i is None:
            raise NotFoundError(f"no input named {name!r} (inputs: {', '.join(self._in_index)})")
        info = self.inputs[i]
        if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack_device__"):
            dev_type = int(x.__dlpack_device__()[0])
            if dev_type in (_DL_CUDA, _DL_CUDA_MANAGED):
                if self.device != "cuda":
                    raise UnsupportedError(f"input {name!r}: a CUDA tensor given to a CPU session "
                                           "(create it with device='cuda', or pass host memory)")
                # stream 1: the legacy default stream, which our copy uses
                dls.append((i, x.__dlpack__(stream=1)))
                return
            if dev_type == _DL_CPU:
                x = np.from_dlpack(x)
            else:
                raise UnsupportedError(f"input {name!r}: DLPack device type {dev_type} is neither CPU nor CUDA")
        a = np.asarray(x)
        if a.dtype != info.np_dtype:
            raise ShapeError(f"input {name!r} is {info.dtype} ({info.np_dtype}); got {a.dtype} "
                             f"(convert it, e.g. x.astype(np.{info.np_dtype}))")
        if a.shape != info.shape:
            raise ShapeError(f"input {name!r} has shape {info.shape}; got {a.shape}")
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)  # documented: non-contiguous inputs are copied
        keep.append(a)
        host.append((i, _addr(a), a.nbytes))

    def run(self, inputs: Union[None, Any, Mapping[str, Any]] = None,
            out: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, np.ndarray]:
        """Run the graph and return {output name: array}.

        inputs: {name: array}, or one array for a single-input model, or None
        (the inputs as they are, e.g. written through ``input_dlpack`` views).
        An array is anything numpy takes (buffer protocol) of exactly the
        input's dtype and shape (else ShapeError; nothing is converted
        silently); a non-contiguous one is copied. An object with
        ``__dlpack__`` on the session's GPU is copied on the GPU; on the CPU
        it is read through numpy.
        out: {name: array} to fill instead of allocating (C-contiguous,
        writable, exact dtype and shape); outputs not named there are
        returned as new arrays that own their memory.
        """
        cap = self._capsule()
        host: list = []
        dls: list = []
        keep: list = []
        if inputs is not None:
            if isinstance(inputs, Mapping):
                for name, x in inputs.items():
                    self._input(name, x, host, dls, keep)
            else:
                if len(self.inputs) != 1:
                    raise ArgError(f"this model has {len(self.inputs)} inputs: pass a dict {{name: array}}")
                self._input(self.inputs[0].name, inputs, host, dls, keep)
        res: Dict[str, np.ndarray] = {}
        slots = []
        for i, info in enumerate(self.outputs):
            a = out.get(info.name) if out else None
            if a is None:
                a = np.empty(info.shape, dtype=info.np_dtype)
            elif not isinstance(a, np.ndarray):
                raise ArgError(f"out[{info.name!r}]: a numpy array is needed")
            elif a.dtype != info.np_dtype or a.shape != info.shape:
                raise ShapeError(f"out[{info.name!r}]: needs {info.dtype} {info.shape}; got {a.dtype} {a.shape}")
            elif not a.flags.c_contiguous or not a.flags.writeable:
                raise ArgError(f"out[{info.name!r}]: needs a C-contiguous, writable array")
            res[info.name] = a
            slots.append((i, _addr(a), a.nbytes))
        if out:
            unknown = set(out) - set(self._out_index)
            if unknown:
                raise NotFoundError(f"out: no output named {sorted(unknown)[0]!r}")
        _c.session_run(cap, host, slots, self.device == "cuda", dls)
        return res

    def input_dlpack(self, name: str) -> DLPackView:
        """A DLPack view of input `name`'s storage, to write in place before
        ``run()`` (zero-copy: e.g. ``torch.from_dlpack(v).copy_(frame)``)."""
        i = self._in_index.get(name)
        if i is None:
            raise NotFoundError(f"no input named {name!r}")
        self._capsule()
        return DLPackView(self, False, i, self.inputs[i])

    def output_dlpack(self, name: str) -> DLPackView:
        """A DLPack view of output `name`'s storage (the last run's result)."""
        i = self._out_index.get(name)
        if i is None:
            raise NotFoundError(f"no output named {name!r}")
        self._capsule()
        return DLPackView(self, True, i, self.outputs[i])

    def close(self) -> None:
        """Free the session (later calls raise StateError). With DLPack views
        still held by consumers, the memory is freed after the last of them."""
        if self._cap is not None:
            _c.session_close(self._cap)
            self._cap = None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._cap is None else self.device
        return f"<edgert.Session {state}: {[(t.name, t.shape) for t in self.inputs]} -> {[(t.name, t.shape) for t in self.outputs]}>"


_LOSS = {"cross_entropy": 0, "mse": 1, "bce_logits": 2}
_OPTIM = {"sgd": 0, "adam": 1, "adamw": 2}
_SCHEDULE = {"constant": 0, "step": 1, "cosine": 2}
_BN = {"train": 0, "frozen": 1}


class Trainer:
    """Training on a model (``ert_trainer``): forward, loss, backward and the
    optimizer in one arena planned at create; ``step`` never allocates in the
    library and releases the GIL.

    loss: "cross_entropy" (targets: class indices, any integer dtype), "mse"
    or "bce_logits" (targets: float32 of the output's shape).
    optimizer: "sgd" (momentum, nesterov), "adam" or "adamw"; weight_decay,
    betas, eps, clip_grad_norm (> 0: global L2 norm clipping).
    schedule: "constant", "step" (step_size, gamma) or "cosine" (total_steps,
    min_lr), after ``warmup`` linear warm-up steps.
    trainable: "all", an int N (the last N nodes with weights) or a glob
    pattern of weight names ("fc*").
    bn: "train" (batch statistics) or "frozen".
    device/precision: "cpu" or "cuda"/"auto"; "f16"/"bf16" is mixed precision on CUDA.
    seed: Dropout's RNG. output: the output the loss reads (None: the first).
    """

    def __init__(self, model: Model, loss: str = "cross_entropy", optimizer: str = "adam", lr: float = 1e-3,
                 momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, clip_grad_norm: float = 0.0,
                 schedule: str = "constant", warmup: int = 0, total_steps: int = 0, step_size: int = 0,
                 gamma: float = 0.1, min_lr: float = 0.0, trainable: Union[str, int] = "all", bn: str = "train",
                 label_smoothing: float = 0.0, output: Optional[str] = None, batch: int = 1, device: str = "cpu",
                 precision: str = "f32", threads: int = 1, seed: int = 0, loss_scale: float = 0.0):
        if isinstance(trainable, bool) or not isinstance(trainable, (int, str)):
            raise ArgError("trainable must be 'all', an int (last N) or a name pattern")
        if isinstance(trainable, int):
            kind, pattern, last_n = 2, None, trainable
        elif trainable == "all":
            kind, pattern, last_n = 0, None, 0
        else:
            kind, pattern, last_n = 1, trainable, 0
        self._args = (model._cap, _choice("device", device, _DEVICE), _choice("precision", precision, _PRECISION),
                      int(batch), int(threads), output, _choice("loss", loss, _LOSS), float(label_smoothing),
                      float(lr), float(momentum), float(weight_decay), float(betas[0]), float(betas[1]), float(eps),
                      float(clip_grad_norm), float(gamma), bool(nesterov), _choice("optimizer", optimizer, _OPTIM),
                      _choice("schedule", schedule, _SCHEDULE), int(warmup), int(step_size), float(min_lr),
                      int(total_steps), pattern, kind, int(last_n), _choice("bn", bn, _BN), int(seed),
                      float(loss_scale))
        self.model = model
        self._cap = _c.trainer_create(*self._args)
        ins, tgt, outp, dev, n_tr, n_el = _c.trainer_info(self._cap)
        self.inputs: List[TensorInfo] = _infos(ins)
        self.target: TensorInfo = TensorInfo(tgt[0], tgt[1], tuple(tgt[2]))
        self.output_info: TensorInfo = TensorInfo(outp[0], outp[1], tuple(outp[2]))
        self.device: str = dev
        self.n_trainable: int = n_tr
        self.n_trainable_elems: int = n_el

    def _capsule(self) -> Any:
        if self._cap is None:
            raise StateError("the trainer is closed")
        return self._cap

    def _run(self, train: bool, x: Any, y: Any, out: Optional[np.ndarray]) -> float:
        cap = self._capsule()
        xs = x if isinstance(x, Mapping) else ({self.inputs[0].name: x} if len(self.inputs) == 1 else None)
        if xs is None:
            raise ArgError(f"this model has {len(self.inputs)} inputs: pass a dict {{name: array}}")
        index = {t.name: i for i, t in enumerate(self.inputs)}
        keep, slots = [], []
        for name, v in xs.items():
            if name not in index:
                raise NotFoundError(f"no input named {name!r}")
            info = self.inputs[index[name]]
            a = np.asarray(v)
            if a.dtype != info.np_dtype or a.shape != info.shape:
                raise ShapeError(f"input {name!r} needs {info.dtype} {info.shape}; got {a.dtype} {a.shape}")
            a = np.ascontiguousarray(a)
            keep.append(a)
            slots.append((index[name], _addr(a), a.nbytes))
        t = np.asarray(y)
        if self.target.dtype == "i64":
            if not np.issubdtype(t.dtype, np.integer):
                raise ShapeError(f"targets must be integer class indices; got {t.dtype}")
            t = t.astype(np.int64, copy=False)  # documented: any integer dtype is widened
        elif t.dtype != self.target.np_dtype:
            raise ShapeError(f"targets must be {self.target.dtype}; got {t.dtype}")
        if t.shape != self.target.shape:
            raise ShapeError(f"targets need shape {self.target.shape}; got {t.shape}")
        t = np.ascontiguousarray(t)
        oaddr, obytes = None, 0
        if out is not None:
            o = self.output_info
            if not isinstance(out, np.ndarray) or out.dtype != o.np_dtype or out.shape != o.shape \
                    or not out.flags.c_contiguous or not out.flags.writeable:
                raise ShapeError(f"out: needs a writable C-contiguous {o.dtype} array of shape {o.shape}")
            oaddr, obytes = _addr(out), out.nbytes
        return _c.trainer_step(cap, train, slots, _addr(t), t.nbytes, oaddr, obytes)

    def step(self, x: Any, y: Any, out: Optional[np.ndarray] = None) -> float:
        """One training step on a batch; returns the batch's loss (before the
        update). x: an array (one input) or {name: array}; y: targets. out:
        an array to receive the output the loss read (e.g. logits for accuracy).
        A NaN/inf loss or gradient skips the update and raises ArgError."""
        return self._run(True, x, y, out)

    def eval(self, x: Any, y: Any, out: Optional[np.ndarray] = None) -> float:
        """Forward and loss only (BatchNorm running statistics, Dropout off); no update."""
        return self._run(False, x, y, out)

    def plan(self) -> Dict[str, int]:
        """The training arena by category (gradients, optimizer state, saved activations...)."""
        return _c.trainer_memory(self._capsule())

    @property
    def step_count(self) -> int:
        """Optimizer steps taken (skipped ones not counted; restored by load_checkpoint)."""
        return _c.trainer_state(self._capsule())[0]

    @property
    def lr(self) -> float:
        """The learning rate the next step will use."""
        return _c.trainer_state(self._capsule())[1]

    @property
    def loss_scale(self) -> float:
        """The dynamic loss scale of mixed precision (1.0 without AMP)."""
        return _c.trainer_state(self._capsule())[2]

    @property
    def skipped_steps(self) -> int:
        """Steps skipped because of inf/NaN gradients (mixed precision)."""
        return _c.trainer_state(self._capsule())[3]

    def save_checkpoint(self, path: Union[str, os.PathLike]) -> None:
        """Weights, optimizer state, step and RNG, written atomically."""
        _c.trainer_checkpoint(self._capsule(), os.fspath(path), False)

    def load_checkpoint(self, path: Union[str, os.PathLike]) -> None:
        """Restore a checkpoint of a trainer of the same model and options
        (checked completely first: FormatError, ArgError naming what differs)."""
        _c.trainer_checkpoint(self._capsule(), os.fspath(path), True)

    def export(self, path: Union[None, str, os.PathLike] = None) -> Model:
        """The model with the trained weights; saved to `path` too when given
        (``.onnx``: ONNX, else ``.ert``)."""
        m = Model(_c.trainer_export(self._capsule()))
        if path is not None:
            p = os.fspath(path)
            m.save_onnx(p) if str(p).lower().endswith(".onnx") else m.save(p)
        return m

    def close(self) -> None:
        """Free the trainer (later calls raise StateError); closing twice is harmless."""
        if self._cap is not None:
            _c.trainer_close(self._cap)
            self._cap = None

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ------------------------------------------------------------------ quantization

_CALIB = {"minmax": 0, "percentile": 1, "entropy": 2, "mse": 3}


def _tri(v: Optional[bool]) -> int:
    """None -> 0 (the library's default), True -> 1, False -> -1."""
    return 0 if v is None else (1 if v else -1)


def quantize(model: Model, calib: Any, method: str = "minmax", percentile: Optional[float] = None,
             per_tensor: bool = False, keep_float: Union[None, str, Sequence[str]] = None, max_drop: float = 0.0,
             sensitivity: bool = False, labels: Any = None, shapes: Optional[Mapping[str, Sequence[int]]] = None,
             threads: int = 1, report: bool = False,
             asymmetric: bool = False, equalize: Optional[bool] = None,
             bias_correct: Optional[bool] = None) -> Union[Model, Tuple[Model, Dict[str, Any]]]:
    """Post-training int8 quantization (``ert_model_quantize``): a new model
    in QDQ form (int8 weights and activations around Conv/Gemm/MatMul/Add),
    which sessions run like any other and ``save``/``save_onnx`` store. The
    float model is not changed and may be closed afterwards. The GIL is
    released while the float model is calibrated (on the CPU).

    calib: the calibration set: one array for a single-input model, else
    {input name: array}. Each holds N samples stacked on axis 0: the input's
    shape at batch 1 (a dynamic leading dim is 1; other dynamic dims from
    ``shapes``) with its first dim multiplied by N, e.g. (N, 1, 28, 28) for a
    (batch, 1, 28, 28) input; exactly the input's dtype (ShapeError
    otherwise, never cast); every value finite (ArgError names the sample).
    method: "minmax", "percentile" (``percentile``, default 99.99),
    "entropy" (TensorRT's KL-divergence threshold) or "mse" (the range with
    the least squared quantization error).
    per_tensor: one weight scale per tensor instead of per output channel.
    asymmetric: activations uint8 with a zero point over the clipped
    [min, max] (onnxruntime's default form) instead of int8 symmetric.
    equalize: cross-layer equalisation of Conv -> [Relu] -> Conv pairs
    before calibration; None: the library's default (on).
    bias_correct: empirical bias correction of every quantized Conv/Gemm
    (one pass over the set per layer); None: the library's default (off).
    keep_float: node-name glob(s) left float (NotFoundError if one matches nothing).
    max_drop: > 0: return the worst layers to float until the drop on the
    calibration set is <= max_drop (top-1 points, or 100 x relative L2).
    sensitivity: measure every layer alone (in the report) without max_drop.
    labels: N class indices for output 0 (accuracies in the report).
    threads: CPU threads of the calibration runs.
    report: also return a dict: n_samples, float_top1, quant_top1, rel_l2,
    drop, ranges [{tensor, min, max, amax, scale, lo, hi, zero_point}], layers [{node, op,
    state ("int8", "keep_float", "max_drop"), rel_l2, drop}], kept_float
    (None where not measured).
    Same as ``edgert quantize MODEL --calib X.npy``: the same set gives the
    same model, bit for bit.
    """
    if not isinstance(model, Model):
        raise ArgError("quantize: the first argument must be an edgert.Model")
    m = _choice("method", method, _CALIB)
    if percentile is not None and method != "percentile":
        raise ArgError("percentile= is for method='percentile'")
    if isinstance(keep_float, (list, tuple)):
        keep_float = ",".join(keep_float)
    # the exact per-sample shapes the library reads: a CPU session at batch 1
    sh = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}
    with model.session(device="cpu", batch=1, shapes=sh or None) as probe:
        infos = probe.inputs
    if not isinstance(calib, Mapping):
        if len(infos) != 1:
            raise ArgError(f"the model has {len(infos)} inputs: give calib as {{name: array}} "
                           f"({', '.join(t.name for t in infos)})")
        calib = {infos[0].name: calib}
    unknown = set(calib) - {t.name for t in infos}
    if unknown:
        raise NotFoundError(f"calib: no input named {sorted(unknown)[0]!r} (inputs: {', '.join(t.name for t in infos)})")
    keep, addrs, n = [], [], None
    for t in infos:
        if t.name not in calib:
            raise ArgError(f"calib: no data for input {t.name!r}")
        a = np.asarray(calib[t.name])
        if a.dtype != t.np_dtype:
            raise ShapeError(f"calib {t.name!r}: the input is {t.dtype} ({t.np_dtype}); got {a.dtype}")
        lead = t.shape[0] if t.shape else 1
        if a.ndim != max(len(t.shape), 1) or a.shape[1:] != t.shape[1:] or lead < 1 or a.shape[0] % lead:
            raise ShapeError(f"calib {t.name!r}: expected (N*{lead}, {', '.join(map(str, t.shape[1:]))}) "
                             f"(N samples of {t.shape} stacked on axis 0); got {a.shape}")
        k = a.shape[0] // lead
        if n is not None and k != n:
            raise ShapeError(f"calib {t.name!r}: {k} samples; the other inputs have {n}")
        n = k
        a = np.ascontiguousarray(a)
        keep.append(a)
        addrs.append(_addr(a))
    if not n:
        raise ArgError("calib: the calibration set is empty")
    lab = None
    if labels is not None:
        lab = np.ascontiguousarray(np.asarray(labels))
        if lab.dtype.kind not in "iu" or lab.shape != (n,):
            raise ShapeError(f"labels: expected {n} integer class indices; got {lab.dtype} {lab.shape}")
        lab = lab.astype(np.int64)
        keep.append(lab)
    cap, rep = _c.quantize(model._cap, addrs, n, m, float(percentile or 0.0), bool(per_tensor), keep_float,
                           float(max_drop), bool(sensitivity), None if lab is None else _addr(lab),
                           [(k.encode(), v) for k, v in sh.items()], int(threads), bool(report), bool(asymmetric),
                           _tri(equalize), _tri(bias_correct))
    del keep
    q = Model(cap)
    return (q, rep) if report else q


# ------------------------------------------------------------------ images

_PIXEL = {"rgb": (0, 3), "bgr": (1, 3), "gray": (2, 1), "rgba": (3, 4), "bgra": (4, 4)}
_FIT = {"stretch": 0, "letterbox": 1, "center_crop": 2}


def decode_jpeg(data: Union[str, os.PathLike, bytes, bytearray, memoryview], format: str = "rgb",
                scale: int = 1) -> np.ndarray:
    """Decode a JPEG (a path or the file's bytes) with TurboJPEG into a new
    (H, W, C) uint8 array. format: "rgb", "bgr", "gray", "rgba", "bgra".
    scale: 1, 2, 4 or 8 decodes at 1/scale size inside the IDCT. Corrupt or
    truncated data raises FormatError; a build without JPEG UnsupportedError."""
    if isinstance(data, (str, os.PathLike)):
        with open(data, "rb") as f:
            data = f.read()
    buf = np.frombuffer(data, dtype=np.uint8)
    if format not in _PIXEL:
        raise ArgError(f"format must be one of {', '.join(repr(k) for k in _PIXEL)}; got {format!r}")
    fmt, ch = _PIXEL[format]
    if buf.size == 0:
        raise FormatError("empty JPEG data")
    w, h, _ = _c.jpeg_info(_addr(buf), buf.size)
    if scale not in (1, 2, 4, 8):
        raise ArgError("scale must be 1, 2, 4 or 8")
    sw, sh = -(-w // scale), -(-h // scale)
    out = np.empty((sh, sw, ch), dtype=np.uint8)
    _c.jpeg_decode(_addr(buf), buf.size, fmt, scale, _addr(out), out.nbytes)
    return out


def preprocess(rgb: Any, size: Tuple[int, int], fit: str = "stretch", mean: Sequence[float] = (0.0, 0.0, 0.0),
               std: Sequence[float] = (1.0, 1.0, 1.0), scale: float = 1.0 / 255.0, layout: str = "nchw",
               bgr: bool = False, gray: bool = False, pad: int = 0, return_transform: bool = False) -> Any:
    """The camera pipeline's CPU preprocessing (apps/camera/proc.c): an (H, W, 3)
    uint8 RGB image -> resize to size=(width, height) (bilinear, half-pixel
    centres, edges clamped, like OpenCV INTER_LINEAR), fit "stretch",
    "letterbox" (padded with `pad`) or "center_crop", then (v * scale - mean) /
    std per channel -> float32 (3, h, w) for layout "nchw" or (h, w, 3) for
    "nhwc" ((1, h, w) / (h, w, 1) with gray=True: BT.601 luma). Add the batch
    dim with ``[None]``. return_transform=True also returns the frame ->
    input mapping (sx0, sy0, sw, sh, dx0, dy0, dw, dh) for mapping boxes back."""
    a = np.asarray(rgb)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3:
        raise ShapeError(f"preprocess needs an (H, W, 3) uint8 RGB image; got {a.dtype} {a.shape}")
    a = np.ascontiguousarray(a)
    ow, oh = int(size[0]), int(size[1])
    if layout not in ("nchw", "nhwc"):
        raise ArgError("layout must be 'nchw' or 'nhwc'")
    c = 1 if gray else 3
    out = np.empty((c, oh, ow) if layout == "nchw" else (oh, ow, c), dtype=np.float32) if ow > 0 and oh > 0 else None
    if out is None:
        raise ArgError("size must be positive")
    m = tuple(float(v) for v in mean)
    s = tuple(float(v) for v in std)
    if len(m) != 3 or len(s) != 3:
        raise ArgError("mean and std need 3 values (gray uses the first)")
    xf = _c.preprocess(_addr(a), a.shape[1], a.shape[0], a.strides[0], ow, oh, _choice("fit", fit, _FIT), int(pad),
                       float(scale), m, s, layout == "nhwc", bool(bgr), bool(gray), _addr(out), out.nbytes)
    return (out, xf) if return_transform else out


_FRAME = {"rgb": 0, "yuyv": 5}  # ert_pixel_format: ERT_PIXEL_RGB, ERT_PIXEL_YUYV


class Preprocessor:
    """The camera pipeline's GPU preprocessing (``ert_preprocessor_*``): one
    fused CUDA kernel (RGB or YUYV frame -> resize -> normalise -> float32 or
    float16), equal to :func:`preprocess` within 1e-5. It allocates its pinned
    staging, device buffers and stream here, for frames up to ``max_size`` =
    (width, height); runs allocate nothing. Options as for :func:`preprocess`;
    f16=True writes IEEE halves (for f16 model inputs).
    Needs an edgert built with CUDA (UnsupportedError) and a GPU (CudaError).
    One preprocessor is used by one thread at a time."""

    def __init__(self, max_size: Tuple[int, int], size: Tuple[int, int], fit: str = "stretch",
                 mean: Sequence[float] = (0.0, 0.0, 0.0), std: Sequence[float] = (1.0, 1.0, 1.0),
                 scale: float = 1.0 / 255.0, layout: str = "nchw", bgr: bool = False, gray: bool = False,
                 pad: int = 0, f16: bool = False):
        if layout not in ("nchw", "nhwc"):
            raise ArgError("layout must be 'nchw' or 'nhwc'")
        m = tuple(float(v) for v in mean)
        sd = tuple(float(v) for v in std)
        if len(m) != 3 or len(sd) != 3:
            raise ArgError("mean and std need 3 values (gray uses the first)")
        self.size = (int(size[0]), int(size[1]))
        c = 1 if gray else 3
        w, h = self.size
        self.shape = (c, h, w) if layout == "nchw" else (h, w, c)
        self.dtype = np.dtype(np.float16 if f16 else np.float32)
        self._cap = _c.preprocessor_create(int(max_size[0]), int(max_size[1]), w, h, _choice("fit", fit, _FIT),
                                           int(pad), float(scale), m, sd, layout == "nhwc", bool(bgr), bool(gray),
                                           bool(f16))

    @staticmethod
    def _frame(frame: Any, format: str) -> Tuple[np.ndarray, int, int]:
        a = np.asarray(frame)
        fmt = _choice("format", format, _FRAME)
        if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != (3 if fmt == 0 else 2):
            want = "(H, W, 3)" if fmt == 0 else "(H, W, 2) YUYV"
            raise ShapeError(f"the frame must be a {want} uint8 array; got {a.dtype} {a.shape}")
        if a.strides[1:] != (a.shape[2], 1):
            a = np.ascontiguousarray(a)
        return a, fmt, a.strides[0]

    def run(self, frame: Any, format: str = "rgb", out: Optional[np.ndarray] = None) -> np.ndarray:
        """Preprocess one frame ((H, W, 3) RGB, or (H, W, 2) YUYV bytes with
        format="yuyv") into host memory: `out` or a new array of ``self.shape``."""
        a, fmt, stride = self._frame(frame, format)
        if out is None:
            out = np.empty(self.shape, self.dtype)
        elif not isinstance(out, np.ndarray) or out.dtype != self.dtype or out.shape != self.shape \
                or not out.flags.c_contiguous or not out.flags.writeable:
            raise ShapeError(f"out: needs a writable C-contiguous {self.dtype} array of shape {self.shape}")
        _c.preprocessor_run(self._cap, _addr(a), a.shape[1], a.shape[0], stride, fmt, _addr(out), out.nbytes, False)
        return out

    def run_into(self, session: "Session", input: str, frame: Any, format: str = "rgb") -> None:
        """Preprocess one frame straight into a session's input: on the GPU
        for a CUDA session (the result never goes through host memory; then
        ``session.run()`` with no arguments), else into its host storage. The
        input must hold exactly one preprocessed image (batch 1, same dtype)."""
        i = session._in_index.get(input)
        if i is None:
            raise NotFoundError(f"no input named {input!r}")
        info = session.inputs[i]
        if info.np_dtype != self.dtype or int(np.prod(info.shape)) != int(np.prod(self.shape)):
            raise ShapeError(f"input {input!r} is {info.dtype} {info.shape}; this preprocessor makes "
                             f"{self.dtype} {self.shape}")
        a, fmt, stride = self._frame(frame, format)
        dst = _c.session_input_address(session._capsule(), i)
        _c.preprocessor_run(self._cap, _addr(a), a.shape[1], a.shape[0], stride, fmt, dst,
                            int(np.prod(self.shape)) * self.dtype.itemsize, session.device == "cuda")

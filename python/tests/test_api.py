"""The package's surface: one exception class per ert_status, the type stubs
of the C module against the module itself, a docstring on every public name,
and a test somewhere in python/tests that uses every public name."""
import ast
import glob
import inspect
import os
import re

import pytest

import edgert

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(edgert.__file__)
CLASSES = (edgert.Model, edgert.Session, edgert.Trainer, edgert.Preprocessor, edgert.DLPackView, edgert.TensorInfo)


def public_members(cls):
    return [n for n in vars(cls) if not n.startswith("_") and not (cls is edgert.TensorInfo and n in ("count", "index"))]


def test_one_exception_class_per_status():
    """Every status the library can return (status_str names all but 0 and
    the unknown ones) raises its own class, a subclass of Error."""
    codes = []
    k = 1
    while "unknown" not in edgert._edgert.status_str(k):
        codes.append(k)
        k += 1
    assert len(codes) >= 11
    classes = [getattr(edgert, n) for n in edgert.__all__ if n.endswith("Error") and n != "Error"]
    assert sorted(c.status for c in classes) == codes
    for c in classes:
        assert issubclass(c, edgert.Error) and c.__doc__
        assert c.__name__ in edgert.__all__
        name = edgert._edgert.status_str(c.status).split(":")[0]   # "ERT_E_SHAPE"
        assert name in c.__doc__


def stub_names(path):
    tree = ast.parse(open(path).read())
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def test_stubs_match_the_c_module():
    """_edgert.pyi declares exactly what the C module defines, and ships in
    the package beside the module (with py.typed for the inline types)."""
    pyi = os.path.join(PKG, "_edgert.pyi")
    assert os.path.exists(pyi) and os.path.exists(os.path.join(PKG, "py.typed"))
    have = {n for n in dir(edgert._edgert) if not n.startswith("_")}
    assert stub_names(pyi) == have


def test_every_public_name_has_a_docstring_and_annotations():
    missing = []
    for n in edgert.__all__:
        obj = getattr(edgert, n)
        if not (obj.__doc__ or "").strip():
            missing.append(n)
        if inspect.isfunction(obj):
            sig = inspect.signature(obj)
            if sig.return_annotation is inspect.Signature.empty:
                missing.append(f"{n} -> (no return annotation)")
    for cls in CLASSES:
        for n in public_members(cls):
            v = vars(cls)[n]
            if not (getattr(v, "__doc__", None) or "").strip():
                missing.append(f"{cls.__name__}.{n}")
    assert not missing, f"no docstring/annotation: {missing}"


def test_every_public_name_is_tested():
    """Each function of edgert.__all__ and each public method/property of the
    classes is used by some test of this folder (other than this file)."""
    text = ""
    for f in glob.glob(os.path.join(HERE, "test_*.py")):
        if os.path.basename(f) != "test_api.py":
            text += open(f).read()
    # the classes' members are checked one by one below, the exception classes
    # by test_one_exception_class_per_status (NoMemoryError and InternalError
    # cannot be provoked from Python)
    made_by_calls = {c.__name__ for c in CLASSES} | {n for n in edgert.__all__ if n.endswith("Error")}
    untested = [n for n in edgert.__all__
                if n not in made_by_calls and not re.search(r"\bedgert\." + n + r"\b", text)]
    for cls in CLASSES:
        for n in public_members(cls):
            if not re.search(r"\." + n + r"\b", text):
                untested.append(f"{cls.__name__}.{n}")
    assert not untested, f"never used by a test: {untested}"

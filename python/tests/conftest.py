"""Shared fixtures of the edgert Python tests.

Data comes from ../shared beside the repository (models, images,
fashion-mnist), as for the C tests; the C CLI for the CLI comparisons from
$ERT_CLI or build/*/apps/edgert (the python phase of scripts/test.sh sets
ERT_CLI). A test whose data or tool is missing is skipped with the reason
(counted in the phase's line), never passed.
"""
import glob
import os
import shutil
import sys
import threading
import time

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.environ.get("ERT_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
MODELS = os.path.join(SHARED, "models")
IMAGES = os.path.join(SHARED, "images")
FMNIST = os.path.join(SHARED, "data", "fashion-mnist")


def need(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} is missing (../shared beside the repository)")
    return path


@pytest.fixture
def rng(request):
    # a fresh seed per test, printed on failure through the test's name
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("ERT_CLI")
    if not path:
        cands = sorted(glob.glob(os.path.join(ROOT, "build", "*", "apps", "edgert")), key=os.path.getmtime)
        path = cands[-1] if cands else shutil.which("edgert")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("the edgert CLI is not built (set ERT_CLI or build build/<dir>/apps/edgert)")
    return path


def gil_free_ticks(call, repeat=5):
    """How far another Python thread gets while call() runs, repeat times.
    With the switch interval at 100 s nothing forces the GIL from a thread:
    the spinner gets it only when the main thread releases it, which inside
    call() only the C library call does (the spinner hands it back by
    sleeping after each 1,000 ticks). A call that held the GIL would leave
    the spinner no tick in it; one that releases it, thousands."""
    in_call = False
    ticks = 0
    stop = threading.Event()

    def spin():
        nonlocal ticks
        k = 0
        while not stop.is_set():
            k += 1
            if in_call:
                ticks += 1
            if k % 1000 == 0:
                time.sleep(0.0005)

    old = sys.getswitchinterval()
    sys.setswitchinterval(100)
    th = threading.Thread(target=spin)
    try:
        th.start()
        time.sleep(0.01)
        for _ in range(repeat):
            in_call = True
            call()
            in_call = False
    finally:
        stop.set()
        th.join()
        sys.setswitchinterval(old)
    return ticks

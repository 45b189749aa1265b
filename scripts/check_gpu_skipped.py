#!/usr/bin/env python3
"""check_gpu_skipped.py - in a CUDA build run where no NVIDIA driver exists
(the cuda-aarch64 phase under qemu-aarch64), every `gpu` test must report
SKIPPED, and for the want of a driver or GPU: a gpu test that passes there
checked nothing (a silent pass), and one skipped because "this build has no
CUDA backend" means the build lost CUDA.

    python3 scripts/check_gpu_skipped.py JUNIT.xml TEST...   # the gpu tests (ctest -N -L gpu)
    python3 scripts/check_gpu_skipped.py --self-test

JUNIT.xml is ctest's --output-junit report. Prints one line per test with the
reason it gave; exit status 0 when all are right, 1 otherwise.
"""
import re
import sys
import xml.etree.ElementTree as ET

# What the tests print when the CUDA runtime finds no driver: the library's
# "no NVIDIA driver/GPU found" (kernels/cuda/cuda_libs.c), cudart's own
# cudaErrorInsufficientDriver text, or a test's "no usable GPU".
NO_DRIVER = re.compile(r"no NVIDIA driver|driver version is insufficient|no usable GPU|no CUDA device", re.I)
NO_CUDA_BUILD = re.compile(r"no CUDA backend|built without CUDA|ERT_CUDA=OFF", re.I)


def check(xml_text, names):
    """[(test, ok, what)] for each name."""
    cases = {c.get("name"): c for c in ET.fromstring(xml_text).iter("testcase")}
    res = []
    for n in names:
        c = cases.get(n)
        if c is None:
            res.append((n, False, "not in the report (not run)"))
            continue
        out = (c.findtext("system-out") or "").strip()
        skip = [ln for ln in out.splitlines() if "SKIP" in ln]
        reason = skip[-1] if skip else (out.splitlines()[-1] if out else "")
        if c.find("skipped") is None or c.get("status") != "notrun":
            res.append((n, False, f"status {c.get('status')} ({'failed' if c.find('failure') is not None else 'passed'}"
                                  f" without a GPU): {reason}"))
        elif NO_CUDA_BUILD.search(out):
            res.append((n, False, f"skipped as if CUDA were not built: {reason}"))
        elif not NO_DRIVER.search(out):
            res.append((n, False, f"skipped, but not for want of a driver/GPU: {reason}"))
        else:
            res.append((n, True, reason))
    return res


def self_test():
    def case(name, status, out, skipped=True):
        sk = '<skipped message="SKIP_RETURN_CODE=77"/>' if skipped else ""
        return f'<testcase name="{name}" status="{status}">{sk}<system-out>{out}</system-out></testcase>'
    xml = "<testsuite>" + "".join([
        case("a", "notrun", "a: SKIPPED: no CUDA device: no NVIDIA driver/GPU found (libcuda.so.1 cannot be loaded)"),
        case("b", "notrun", "b: SKIPPED: CUDA driver version is insufficient for CUDA runtime version"),
        case("c", "run", "c: 12 passed, 0 failed", skipped=False),
        case("d", "notrun", "d: SKIPPED: this build has no CUDA backend (ERT_CUDA=OFF)"),
        case("e", "notrun", "e: SKIPPED: data missing"),
    ]) + "</testsuite>"
    got = {n: ok for n, ok, _ in check(xml, ["a", "b", "c", "d", "e", "f"])}
    want = {"a": True, "b": True, "c": False, "d": False, "e": False, "f": False}
    if got != want:
        print(f"check_gpu_skipped self-test: got {got}, want {want}")
        return 1
    print("check_gpu_skipped self-test: ok")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 3:
        print(__doc__.strip())
        return 2
    with open(argv[1]) as f:
        res = check(f.read(), argv[2:])
    for n, ok, what in res:
        print(f"  {'ok  ' if ok else 'BAD '} {n}: {what}")
    bad = [n for n, ok, _ in res if not ok]
    print(f"gpu tests SKIPPED for want of a driver: {len(res) - len(bad)} of {len(res)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

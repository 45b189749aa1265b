#!/usr/bin/env python3
"""ONNX node tests through the `edgert` command line.

For every test directory (model.onnx + test_data_set_*/input_*.pb,
output_*.pb) of SUITE_DIR, runs

    edgert run model.onnx -i NAME_0=input_0.pb ... --expect OUT_0=output_0.pb ...

(names from `edgert info --json`, since ONNX lists test inputs in graph-input
order and the .pb names may be empty) and counts a test as passed when every
data set exits 0: the CLI fixed the shape-like inputs at create, ran, and
every output matched its reference within --tol (ONNX's backend-test
tolerance 1e-5 + 1e-3 |ref| by default; integers and bools exactly).

The rate is reported over all tests, and over the tests the C conformance
harness passes (tests/conformance.c's --report TSV, if given with --harness):
those are the tests whose ops the library runs, so a failure there is the
CLI's. Exit status: 0 when the rate over the harness-passing tests (or over
all tests without --harness) is at least --min (percent), else 1; 77 when
SUITE_DIR is missing. Uses only the Python standard library.

    scripts/conformance_cli.py EDGERT SUITE_DIR [--harness TSV] [--min 95]
        [--report OUT.tsv] [--filter SUBSTR] [--timeout S]
"""
import argparse
import json
import os
import subprocess
import sys


def names(edgert, model, timeout):
    """Input and output names of a model (info prints them even when it
    cannot plan, e.g. for dynamic shapes: then it exits 1)."""
    p = subprocess.run([edgert, "info", model, "--json"], capture_output=True, text=True, timeout=timeout)
    try:
        j = json.loads(p.stdout)
    except ValueError:
        return None, None, (p.stderr.strip().splitlines() or ["info failed"])[-1]
    return [t["name"] for t in j["inputs"]], [t["name"] for t in j["outputs"]], ""


def run_test(edgert, tdir, timeout):
    model = os.path.join(tdir, "model.onnx")
    ins, outs, why = names(edgert, model, timeout)
    if ins is None:
        return False, "load: " + why
    sets = sorted(d for d in os.listdir(tdir) if d.startswith("test_data_set_"))
    if not sets:
        return False, "no test_data_set_*"
    for s in sets:
        sd = os.path.join(tdir, s)
        cmd = [edgert, "run", model]
        for kind, opt, tnames in (("input", "-i", ins), ("output", "--expect", outs)):
            k = 0
            while os.path.exists(os.path.join(sd, "%s_%d.pb" % (kind, k))):
                if k >= len(tnames):
                    return False, "more %s files than model %ss" % (kind, kind)
                cmd += [opt, "%s=%s" % (tnames[k], os.path.join(sd, "%s_%d.pb" % (kind, k)))]
                k += 1
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, "%s: timeout" % s
        if p.returncode != 0:
            lines = [l for l in p.stderr.splitlines() if "error" in l] or p.stderr.splitlines() or ["exit %d" % p.returncode]
            return False, "%s: exit %d: %s" % (s, p.returncode, lines[0][:300])
    return True, ""


def harness_passes(tsv):
    """Test names the C harness passed, from its --report TSV."""
    passed = set()
    with open(tsv) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 2 and cols[1] == "pass":
                passed.add(cols[0])
    return passed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("edgert")
    ap.add_argument("suite")
    ap.add_argument("--harness", help="the C harness's --report TSV")
    ap.add_argument("--min", type=float, default=95.0, help="required pass rate in percent (default 95)")
    ap.add_argument("--report", help="write name, result, detail per test (TSV)")
    ap.add_argument("--filter", default="", help="only tests whose name contains this")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per edgert call (default 60)")
    a = ap.parse_args()
    if not os.path.isdir(a.suite):
        print("SKIPPED: %s missing" % a.suite)
        return 77
    tests = sorted(d for d in os.listdir(a.suite)
                   if a.filter in d and os.path.isfile(os.path.join(a.suite, d, "model.onnx")))
    results = {}
    for t in tests:
        ok, why = run_test(a.edgert, os.path.join(a.suite, t), a.timeout)
        results[t] = (ok, why)
    if a.report:
        with open(a.report, "w") as f:
            for t in tests:
                f.write("%s\t%s\t%s\n" % (t, "pass" if results[t][0] else "fail", results[t][1]))
    n_pass = sum(1 for t in tests if results[t][0])
    print("edgert run: %d of %d ONNX node tests pass (%.1f%%)" % (n_pass, len(tests), 100.0 * n_pass / max(len(tests), 1)))
    rate = 100.0 * n_pass / max(len(tests), 1)
    if a.harness:
        if not os.path.exists(a.harness):
            print("FAIL: harness report %s missing (conformance_node did not run?)" % a.harness)
            return 1
        hp = [t for t in tests if t in harness_passes(a.harness)]
        cp = [t for t in hp if results[t][0]]
        rate = 100.0 * len(cp) / max(len(hp), 1)
        print("of the %d tests the C harness passes, %d pass through edgert run (%.1f%%)" % (len(hp), len(cp), rate))
        for t in hp:
            if not results[t][0]:
                print("  harness pass, CLI fail: %s: %s" % (t, results[t][1]))
        extra = [t for t in tests if results[t][0] and t not in hp]
        if extra:
            print("CLI pass, harness not: %s" % ", ".join(extra))
    else:
        for t in tests:
            if not results[t][0]:
                print("  fail: %s: %s" % (t, results[t][1]))
    if rate < a.min:
        print("FAIL: %.1f%% < %.1f%%" % (rate, a.min))
        return 1
    print("ok: %.1f%% >= %.1f%%" % (rate, a.min))
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
harness passes (tests/ops/conformance.c's --report TSV, if given with --harness):
those are the tests whose ops the library runs, so a failure there is the
CLI's; and over the float/int/bool tests: those whose graph inputs and
outputs the model declares as tensors of the types edgert has (f32, f16,
bf16, i8, u8, i32, i64, bool; issue 13 item 10's goal). Exit status: 0 when
both rates (the first over all tests without --harness) are at least --min
(percent), else 1; 77 when SUITE_DIR is missing. Uses only the Python
standard library.

    scripts/conformance_cli.py EDGERT SUITE_DIR [--harness TSV] [--min 95]
        [--report OUT.tsv] [--filter SUBSTR] [--timeout S]
"""
import argparse
import json
import os
import subprocess
import sys


def pb_fields(buf):
    """(field number, wire type, value) of one protobuf message: ints for
    varints, bytes for length-delimited fields (fixed-size ones skipped)."""
    i, n = 0, len(buf)
    while i < n:
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 2:
            ln, i = varint(buf, i)
            v, i = buf[i:i + ln], i + ln
            if len(v) != ln:
                raise ValueError("truncated")
        elif wt in (1, 5):
            v, i = None, i + (8 if wt == 1 else 4)
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def varint(buf, i):
    v = sh = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << sh
        sh += 7
        if not b & 0x80:
            return v, i


def pb_names(model):
    """Graph inputs (less initializers, as edgert lists them) and outputs
    from ModelProto.graph, read directly: one process fewer per test."""
    with open(model, "rb") as f:
        data = f.read()
    graph = [v for num, wt, v in pb_fields(data) if num == 7 and wt == 2]
    if len(graph) != 1:
        raise ValueError("no graph")
    ins, outs, inits = [], [], set()
    for num, wt, v in pb_fields(graph[0]):
        if wt != 2 or num not in (5, 11, 12):
            continue
        name = [x for k, w, x in pb_fields(v) if k == (8 if num == 5 else 1) and w == 2]
        name = name[0].decode() if name else ""
        {5: lambda: inits.add(name), 11: lambda: ins.append(name), 12: lambda: outs.append(name)}[num]()
    return [x for x in ins if x not in inits], outs


# ONNX TensorProto.DataType values. EDGERT_TYPES: the float/int/bool types
# edgert has a dtype for (f32, u8, i8, i32, i64, bool, f16, bf16); WIDER adds
# the other standard float/int types (u16, i16, f64, u32, u64). Excluded from
# both: string, complex, float8/float4/e8m0, 4- and 2-bit integers, and
# non-tensor values (sequences, maps, optionals).
EDGERT_TYPES = {1, 2, 3, 6, 7, 9, 10, 16}
WIDER_TYPES = EDGERT_TYPES | {4, 5, 11, 12, 13}


def pb_types(model):
    """Element types of the graph's inputs (less initializers) and outputs,
    from the ValueInfoProtos of model.onnx; None for a non-tensor value."""
    with open(model, "rb") as f:
        data = f.read()
    graph = [v for num, wt, v in pb_fields(data) if num == 7 and wt == 2][0]
    inits, vals = set(), []
    for num, wt, v in pb_fields(graph):
        if wt != 2 or num not in (5, 11, 12):
            continue
        if num == 5:
            inits.update(x.decode() for k, w, x in pb_fields(v) if k == 8 and w == 2)
            continue
        name = ([x.decode() for k, w, x in pb_fields(v) if k == 1 and w == 2] or [""])[0]
        tp = [x for k, w, x in pb_fields(v) if k == 2 and w == 2]
        tensor = [x for k, w, x in pb_fields(tp[0]) if k == 1 and w == 2] if tp else []
        elem = [x for k, w, x in pb_fields(tensor[0]) if k == 1 and w == 0] if tensor else []
        vals.append((num, name, elem[0] if elem else None))
    return [t for num, name, t in vals if not (num == 11 and name in inits)]


def type_class(model):
    """'edgert' (every graph input/output a tensor of a type edgert has),
    'wider' (standard float/int/bool types, some without an edgert dtype),
    or 'other'."""
    try:
        types = pb_types(model)
    except (ValueError, IndexError, UnicodeDecodeError):
        return "other"
    if types and all(t in EDGERT_TYPES for t in types):
        return "edgert"
    if types and all(t in WIDER_TYPES for t in types):
        return "wider"
    return "other"


def names(edgert, model, timeout):
    """Input and output names of a model: from the file, or else from
    `edgert info` (which prints them even when it cannot plan, e.g. for
    dynamic shapes: then it exits 1)."""
    try:
        return pb_names(model) + ("",)
    except (ValueError, IndexError, UnicodeDecodeError):
        pass
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
    # issue 13 item 10: the rate over the float/int/bool node tests, by the
    # element types the model declares for its graph inputs and outputs
    cls = {t: type_class(os.path.join(a.suite, t, "model.onnx")) for t in tests}
    typed = [t for t in tests if cls[t] == "edgert"]
    wider = [t for t in tests if cls[t] in ("edgert", "wider")]
    typed_rate = 100.0 * sum(1 for t in typed if results[t][0]) / max(len(typed), 1)
    print("of the %d tests whose graph inputs and outputs are float/int/bool tensors of types edgert has "
          "(f32, f16, bf16, i8, u8, i32, i64, bool), %d pass (%.1f%%)"
          % (len(typed), sum(1 for t in typed if results[t][0]), typed_rate))
    print("of the %d tests with any standard float/int/bool types (adding f64, i16, u16, u32, u64), %d pass (%.1f%%)"
          % (len(wider), sum(1 for t in wider if results[t][0]),
             100.0 * sum(1 for t in wider if results[t][0]) / max(len(wider), 1)))
    for t in typed:
        if not results[t][0]:
            print("  float/int/bool fail: %s: %s" % (t, results[t][1]))
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
    bad = [(what, r) for what, r in (("the harness-passing tests" if a.harness else "all tests", rate),
                                       ("the float/int/bool tests", typed_rate)) if r < a.min]
    for what, r in bad:
        print("FAIL: %.1f%% of %s < %.1f%%" % (r, what, a.min))
    if bad:
        return 1
    print("ok: %.1f%% (%s) and %.1f%% (float/int/bool) >= %.1f%%"
          % (rate, "harness-passing" if a.harness else "all", typed_rate, a.min))
    return 0


if __name__ == "__main__":
    sys.exit(main())

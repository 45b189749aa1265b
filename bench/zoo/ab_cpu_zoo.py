#!/usr/bin/env python3
"""Before/after of two edgert builds on the CPU zoo, in alternating rounds.

    python bench/zoo/ab_cpu_zoo.py MODELS_DIR --base OLD_EDGERT --after NEW_EDGERT
        [--rounds 4] [--threads 1,2] [--batch 1] [--iters 15] [--warmup 3] [--only NAME,...]
        [--out bench/results] [--what TEXT]

On a shared VM one run of bench_cpu_zoo.py moves by 5-10% from minute to
minute, so the two builds run in turn (base, after, base, after, ...), each
round a whole bench_cpu_zoo.py run (edgert and onnxruntime, every model,
every thread count). Per model and thread count: the min over the rounds of
each side's p50 (onnxruntime's over the runs of both builds), the ratio
edgert / onnxruntime of those, and the ratio of the medians as a check.
Writes OUT/cpu_zoo_<UTC>_ab.json (every run's JSON and the summary) and .md.
"""
import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def one_run(a, edgert, tmp, tag):
    out = os.path.join(tmp, tag)
    os.makedirs(out, exist_ok=True)
    cmd = [sys.executable, os.path.join(HERE, "bench_cpu_zoo.py"), a.models_dir, "--threads", a.threads,
           "--batch", str(a.batch), "--iters", str(a.iters), "--warmup", str(a.warmup), "--edgert", edgert, "--out", out]
    if a.only:
        cmd += ["--only", a.only]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    js = [f for f in os.listdir(out) if f.endswith(".json")]
    with open(os.path.join(out, js[0])) as f:
        return json.load(f)


def summarise(runs, threads):
    """runs: {tag: run JSON}, tags 'base-i' / 'after-i'."""
    summ = {}
    for t in threads:
        per = {}
        for tag, r in runs.items():
            side = tag.split("-")[0]
            for row in r["rows"]:
                if row["threads"] != t or row.get("edgert_p50_ms") is None:
                    continue
                m = per.setdefault(row["model"], {"base": [], "after": [], "ort": [], "ok": True})
                m[side].append(row["edgert_p50_ms"])
                m["ort"].append(row["ort_p50_ms"])
                m["ok"] = m["ok"] and bool(row.get("outputs_match"))
        out = {}
        for model, m in sorted(per.items()):
            if not m["base"] or not m["after"]:
                continue
            o_min, o_med = min(m["ort"]), statistics.median(m["ort"])
            out[model] = {
                "edgert_min_ms": min(m["after"]), "edgert_before_min_ms": min(m["base"]), "ort_min_ms": o_min,
                "ratio": min(m["after"]) / o_min, "ratio_before": min(m["base"]) / o_min,
                "ratio_median": statistics.median(m["after"]) / o_med,
                "ratio_before_median": statistics.median(m["base"]) / o_med,
                "rounds": [len(m["base"]), len(m["after"])], "outputs_match": m["ok"],
            }
        summ[f"threads_{t}"] = out
    return summ


def geo(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def markdown(stamp, what, machine, ort_ver, summ):
    lines = [f"# CPU zoo A/B, {stamp}", "", what, "",
             f"Machine: {machine}, onnxruntime {ort_ver}; ratio = edgert / onnxruntime (min p50 over the rounds on "
             "each side; onnxruntime over the runs of both builds).", ""]
    for key, rows in summ.items():
        if not rows:
            continue
        t = key.split("_")[1]
        n = next(iter(rows.values()))["rounds"]
        lines += [f"### {t} thread{'s' if t != '1' else ''} ({n[0]} rounds base, {n[1]} rounds after, alternating)", "",
                  "| model | edgert ms (min p50) | ort ms (min p50) | ratio | before ms | before ratio | "
                  "ratio of medians (after / before) | outputs |", "|---|---|---|---|---|---|---|---|"]
        for model, r in rows.items():
            lines.append(f"| {model} | {r['edgert_min_ms']:.2f} | {r['ort_min_ms']:.2f} | {r['ratio']:.2f} | "
                         f"{r['edgert_before_min_ms']:.2f} | {r['ratio_before']:.2f} | {r['ratio_median']:.2f} / "
                         f"{r['ratio_before_median']:.2f} | {'ok' if r['outputs_match'] else 'MISMATCH'} |")
        g = lambda k: geo([r[k] for r in rows.values()])  # noqa: E731
        lines += [f"| **geomean** | | | **{g('ratio'):.3f}** | | ({g('ratio_before'):.3f}) | "
                  f"{g('ratio_median'):.3f} / {g('ratio_before_median'):.3f} | |", ""]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models_dir")
    ap.add_argument("--base", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default=os.path.join("bench", "results"))
    ap.add_argument("--what", default="", help="what base and after are (branch, commit)")
    a = ap.parse_args()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(1, a.rounds + 1):
            for side, exe in (("base", a.base), ("after", a.after)):
                runs[f"{side}-{i}"] = one_run(a, exe, tmp, f"{side}-{i}")
                print(f"round {i} {side} done", file=sys.stderr)
    threads = [int(t) for t in a.threads.split(",")]
    summ = summarise(runs, threads)
    first = next(iter(runs.values()))
    what = (f"alternating A/B runs of bench/zoo/bench_cpu_zoo.py (--batch {a.batch} --iters {a.iters} --warmup {a.warmup}), "
            f"{a.rounds} rounds; {a.what}").rstrip("; ")
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"cpu_zoo_{stamp}_ab")
    with open(base + ".json", "w") as f:
        json.dump({"stamp": stamp, "what": what, "runs": runs, "summary": summ}, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(markdown(stamp, what, first["machine"], first["onnxruntime"], summ))
    print(f"wrote {base}.json and {base}.md")


if __name__ == "__main__":
    main()

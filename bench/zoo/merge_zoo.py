#!/usr/bin/env python3
"""Merge zoo result files (bench/zoo/run_zoo_gpu.py JSON) into one table.

    python3 bench/zoo/merge_zoo.py OUT.json OUT.md RUN1.json[=LABEL] RUN2.json[=LABEL] ...

For each model the last run that has it wins (its row gains "run": LABEL);
geomeans and the markdown are recomputed with run_zoo_gpu.py's own functions,
so a zoo measured over several device calls (each one's time is limited)
reads as one table that says which call each row came from. Needs no torch.
"""
import importlib.util
import json
import os
import sys
import types

here = os.path.dirname(os.path.abspath(__file__))
stub = types.ModuleType("bench_gpu")  # run_zoo_gpu imports its timing helpers from here (torch)
stub.pct = stub.rel_l2 = stub.time_torch = None
sys.modules["bench_gpu"] = stub
spec = importlib.util.spec_from_file_location("run_zoo_gpu", os.path.join(here, "run_zoo_gpu.py"))
rz = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rz)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out_json, out_md = sys.argv[1], sys.argv[2]
    by, order, runs = {}, [], []
    for arg in sys.argv[3:]:
        path, _, label = arg.partition("=")
        d = json.load(open(path))
        label = label or os.path.basename(path)
        runs.append({"file": os.path.basename(path), "label": label, "date": d.get("date"),
                     "device": d.get("device"), "command": d.get("command")})
        for m in d["models"]:
            m = dict(m, run=label)
            by[m["name"]] = m
            if m["name"] not in order:
                order.append(m["name"])
    models = [by[n] for n in order]
    for m in models:  # ratios again from the stored times
        m["ratio"], m["ratio_host_io"] = {}, {}
    res = {"device": runs[-1]["device"], "date": ", ".join("%s (%s)" % (r["date"], r["label"]) for r in runs),
           "command": "merged by bench/zoo/merge_zoo.py from " + ", ".join(r["file"] for r in runs),
           "runs": runs, "models": models, "not_run": []}
    res["geomeans"] = rz.summarise(models)
    md = rz.markdown(res)
    md += "\nRow sources: " + "; ".join("%s: %s" % (m["name"], m["run"]) for m in models) + "\n"
    json.dump(res, open(out_json, "w"), indent=1)
    open(out_md, "w").write(md)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Turn the reports of run_zoo.py into the results tables of docs/models.md.

    python scripts/zoo/report.py docs/models.md build/zoo/zoo.tsv build/zoo/ppocr.tsv

Rewrites what lies between the lines '<!-- results -->' and
'<!-- /results -->' of the Markdown file: one table per suite, a row per
model, a column per check, each cell the measured relative L2 error (the
worst over the model's outputs; size checks give the file-size ratio).
"""
import sys
from collections import OrderedDict

BEGIN, END = "<!-- results -->", "<!-- /results -->"
TITLES = {"zoo": "Model zoo (scripts/zoo/make_models.py)", "ppocr": "PaddleOCR (../shared/models/ppocr)"}


def tables(paths):
    suites = OrderedDict()
    for p in paths:
        with open(p) as f:
            for line in f:
                suite, model, check, val, tol, ok = line.rstrip("\n").split("\t")
                s = suites.setdefault(suite, {"checks": OrderedDict(), "rows": OrderedDict()})
                s["checks"].setdefault(check, tol)
                s["rows"].setdefault(model, {})[check] = (float(val), ok)
    out = []
    for suite, s in suites.items():
        checks = list(s["checks"])
        out.append("### %s\n" % TITLES.get(suite, suite))
        out.append("| model | " + " | ".join(checks) + " |")
        out.append("|---|" + "---:|" * len(checks))
        out.append("| *tolerance* | " + " | ".join("≤ %s" % s["checks"][c] for c in checks) + " |")
        for model, cells in s["rows"].items():
            row = []
            for c in checks:
                if c not in cells:
                    row.append("–")
                    continue
                v, ok = cells[c]
                txt = "%.2f" % v if "size" in c else "%.1e" % v
                row.append(txt if ok == "ok" else "**%s FAIL**" % txt)
            out.append("| %s | %s |" % (model, " | ".join(row)))
        worst = OrderedDict((c, max(cells[c][0] for cells in s["rows"].values() if c in cells)) for c in checks)
        out.append("| *worst* | " + " | ".join(("%.2f" if "size" in c else "%.1e") % v for c, v in worst.items())
                   + " |")
        out.append("")
    return "\n".join(out)


def main():
    doc, reports = sys.argv[1], sys.argv[2:]
    text = open(doc).read()
    a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
    text = text[:a] + "\n" + tables(reports) + text[b:]
    with open(doc, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()

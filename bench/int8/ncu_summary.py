#!/usr/bin/env python3
"""Per launch of an `ncu --csv --page details` report (bench/device_round.sh's ncu step): kernel,
grid, duration, SM and memory throughput, achieved occupancy, cycles per issued instruction,
registers; and the summed duration per kernel.

    python3 bench/int8/ncu_summary.py ncu.csv [FIRST_ID]
"""
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1]))]
i0 = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
h = rows[i0]; H = {k: i for i, k in enumerate(h)}
by = collections.OrderedDict()
for r in rows[i0 + 1:]:
    if len(r) < len(h) - 5 or not r[0].isdigit(): continue
    k = (int(r[0]), r[H["Kernel Name"]].split("(")[0][:22], r[H["Grid Size"]].replace(" ", ""))
    by.setdefault(k, {})[r[H["Metric Name"]]] = r[H["Metric Value"]]
want = ["Duration", "Compute (SM) Throughput", "Memory Throughput", "Achieved Occupancy", "Warp Cycles Per Issued Instruction", "Registers Per Thread"]
lo = int(sys.argv[2]) if len(sys.argv) > 2 else 0
print("id kernel grid dur_ns SM% Mem% occ% cyc/issue regs")
tot = collections.Counter()
for k, m in by.items():
    if k[0] < lo: continue
    print(*k, *[m.get(w, "-") for w in want])
    tot[k[1]] += float(m.get("Duration", "0").replace(",", ""))
print({a: round(b / 1000, 1) for a, b in tot.items()}, "us")

#!/usr/bin/env python3
"""Fail on an #include that points up (or sideways) across edgert's floors.

The floors (docs/architecture.md, DESIGN.md section 2), lowest first:
  include/      edgert.h, seen by everyone
  core/         floor 1: sees include/ only
  kernels/cpu   floor 2: sees core/         (never loaders/ or kernels/cuda)
  kernels/cuda  floor 2: sees core/         (never loaders/ or kernels/cpu)
  loaders/      floor 2: sees core/         (never kernels/)
  runtime/      floor 3: sees core/, kernels/cpu (the CPU backend table), loaders/
  apps/         floor 4: sees include/ only (and apps/'s own headers)
CMake enforces the same through each floor's include directories; this check
also catches relative paths ("../runtime/x.h") that CMake would let through.
Every quoted #include is resolved as the compiler would (the including file's
folder first, then the floor's include directories) and the folder it lands
in must be one the including floor may see. tests/ and bench/ are white-box
and not checked. Usage: check_floors.py [ROOT]; exit 1 with one line per
violation.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))

# area -> (include directories the build gives it, areas it may see)
AREAS = {
    "core": (["include", "core"], {"include", "core"}),
    "kernels/cpu": (["include", "core"], {"include", "core", "kernels/cpu"}),
    "kernels/cuda": (["include", "core"], {"include", "core", "kernels/cuda"}),
    "loaders": (["include", "core", "loaders"], {"include", "core", "loaders"}),
    "runtime": (["include", "core", "kernels/cpu", "loaders", "runtime"],
                {"include", "core", "kernels/cpu", "loaders", "runtime"}),
    "apps": (["include", "apps", "apps/camera"], {"include", "apps"}),
}
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def area_of(rel):
    rel = rel.replace(os.sep, "/")
    for a in sorted(AREAS, key=len, reverse=True):
        if rel == a or rel.startswith(a + "/"):
            return a
    if rel.startswith("include/"):
        return "include"
    return None


def main():
    bad = []
    n_files = 0
    for area, (incdirs, may_see) in AREAS.items():
        top = os.path.join(ROOT, area)
        for d, _, files in os.walk(top):
            for f in sorted(files):
                if not f.endswith((".c", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(d, f)
                n_files += 1
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for ln, line in enumerate(fh, 1):
                        m = INC.match(line)
                        if not m:
                            continue
                        name = m.group(1)
                        cands = [os.path.join(d, name)] + [os.path.join(ROOT, i, name) for i in incdirs]
                        hit = next((os.path.normpath(c) for c in cands if os.path.isfile(c)), None)
                        rel_src = os.path.relpath(path, ROOT)
                        if hit is None:
                            bad.append("%s:%d: \"%s\" not found in its floor's include directories" % (rel_src, ln, name))
                            continue
                        target = area_of(os.path.relpath(hit, ROOT))
                        if target not in may_see:
                            bad.append("%s:%d: includes %s (%s may not see %s)"
                                       % (rel_src, ln, os.path.relpath(hit, ROOT), area, target or "outside the floors"))
    for b in bad:
        print(b)
    print("check_floors: %d files, %d upward or sideways includes" % (n_files, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

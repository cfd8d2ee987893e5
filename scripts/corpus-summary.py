#!/usr/bin/env python3
"""Summary of scripts/instrument-corpus.sh's per-code-object outcomes.

Usage: corpus-summary.py RESULTS_DIR EXAMPLE LIBRARY OBJECTS_DIR
Prints one line; exits 1 when any done code object failed a check."""

import json
import os
import statistics
import sys

results_dir, example, library, objects_dir = sys.argv[1:]
total = len([f for f in os.listdir(objects_dir) if f.endswith(".hsaco")]) if os.path.isdir(objects_dir) else 0
outcomes = []
if os.path.isdir(results_dir):
    for name in sorted(os.listdir(results_dir)):
        if name.endswith(".json"):
            with open(os.path.join(results_dir, name)) as file:
                outcomes.append((name[: -len(".json")], json.load(file)))
if not outcomes:
    print(f"{example:18} {library:20} nothing done yet")
    sys.exit(0)

instrumented = [(n, o) for n, o in outcomes if "points" in o]
errors = [(n, o) for n, o in outcomes if "error" in o]
bad = [(n, o) for n, o in instrumented if not o["verified"] or o["readelf_warnings"] or o["objdump_unknown"]]
points = sum(o["points"] for _, o in instrumented)
sites = sum(o["sites"] for _, o in instrumented)
added = sum(o["added"] for _, o in instrumented)
# Results of runs before points left out were counted by cause say "rejected".
left_out = sum(len(o.get("left_out", o.get("rejected", []))) for _, o in instrumented)
payloads = sum(o["payloads"] for _, o in instrumented)
seconds = sum(o["seconds"] for _, o in instrumented)
per_site = [p for _, o in instrumented for p in o["per_site"]]
median = statistics.median(per_site) if per_site else 0
print(
    f"{example:18} {library:20} {len(outcomes)} of {total} code objects done "
    f"({len(instrumented)} instrumented, {len(outcomes) - len(instrumented) - len(errors)} with nothing selected, "
    f"{len(errors)} errors); {sum(o['kernels'] for _, o in instrumented)} kernels, {points} points, "
    f"{payloads} payloads, {left_out} left out; {added} instructions added "
    f"({added / sites if sites else 0:.1f} per site, kernel median {median:.1f}, max {max(per_site, default=0):.1f}); "
    f"verified {len(instrumented) - len(bad)} of {len(instrumented)} "
    f"({sum(o['regions'] for _, o in instrumented)} regions), "
    f"llvm-readelf warnings in {sum(o['readelf_warnings'] for _, o in instrumented)}, "
    f"llvm-objdump unknown {sum(o['objdump_unknown'] for _, o in instrumented)}; "
    f"{seconds:.0f} s instrumenting ({1000 * seconds / points if points else 0:.2f} s per 1,000 points); "
    f"built from {', '.join(sorted({o.get('commit', 'unknown') for _, o in instrumented}))}"
)
for name, outcome in bad[:5]:
    print(f"    {name}: {outcome['findings'][:3]}", file=sys.stderr)
for name, outcome in errors[:5]:
    print(f"    {name}: {outcome['error'].strip()[:300]}", file=sys.stderr)
sys.exit(1 if bad or errors else 0)

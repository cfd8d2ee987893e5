#!/usr/bin/env python3
"""Summary of scripts/instrument-corpus.sh's per-code-object outcomes.

Usage: corpus-summary.py RESULTS_DIR EXAMPLE LIBRARY OBJECTS_DIR
Prints one line; exits 1 when any done code object failed a check.

       corpus-summary.py --markdown RESULTS_ROOT OBJECTS_ROOT
Prints a Markdown table, one row per example, library and processor with
results (the table docs/instrument.md keeps).

       corpus-summary.py --stages RESULTS_ROOT
Prints where the time went: per example, library and processor, each
stage's and payload step's seconds summed over the code objects done (with
its share), and the largest peak memory of one run."""

import glob
import json
import os
import statistics
import sys

EXAMPLES = ["kernel-arguments", "branch-divergence", "memory-tracer", "memory-efficiency", "instruction-counter", "opcode-histogram"]


def stages(results_root):
    """The time breakdown of every results directory with step times."""
    for example in EXAMPLES:
        for directory in sorted(glob.glob(os.path.join(results_root, example, "*"))):
            outcomes = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(directory, "*.json")))]
            timed = [o for o in outcomes if "steps" in o]
            if not timed:
                continue
            totals = {}
            for outcome in timed:
                for name, seconds in outcome["steps"].items():
                    totals[name] = totals.get(name, 0.0) + seconds
            whole = sum(o["seconds"] for o in timed)
            peak = max(o.get("peak_rss_kb", 0) for o in timed)
            print(f"\n{example} {os.path.basename(directory)}: {len(timed)} code objects, "
                  f"{sum(o['points'] for o in timed)} points, {whole:.1f} s, peak {peak / 1024 / 1024:.2f} GB")
            print("| step | seconds | share |")
            print("|---|---|---|")
            for name, seconds in totals.items():
                print(f"| {name} | {seconds:.1f} | {100 * seconds / whole if whole else 0:.1f}% |")


def markdown(results_root, objects_root):
    """Rows for every results directory: RESULTS_ROOT/EXAMPLE/KEY, where KEY
    is the library's file name, with `.gfxNNN` unless it is gfx90a."""
    print("| example | library | processor | code objects | kernels | points | payloads | left out "
          "| added per site | checks | time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for example in EXAMPLES:
        for directory in sorted(glob.glob(os.path.join(results_root, example, "*"))):
            key = os.path.basename(directory)
            last = key.rsplit(".", 1)[-1]
            processor, library = (last, key[: -len(last) - 1]) if last.startswith("gfx") else ("gfx90a", key)
            outcomes = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(directory, "*.json")))]
            done = [o for o in outcomes if "points" in o]
            errors = [o for o in outcomes if "error" in o]
            if not outcomes:
                continue
            total = len(glob.glob(os.path.join(objects_root, key, "*.hsaco")))
            sites = sum(o["sites"] for o in done)
            clean = all(o["verified"] and not o["readelf_warnings"] and not o["objdump_unknown"] for o in done)
            skipped = len(outcomes) - len(done) - len(errors)
            errors_note = f" ({len(errors)} errors)" if errors else ""
            errors_note += f" ({skipped} with nothing selected)" if skipped else ""
            print(
                f"| {example} | {library} | {processor} | {len(done)} of {total}{errors_note} "
                f"| {sum(o['kernels'] for o in done):,} | {sum(o['points'] for o in done):,} "
                f"| {sum(o['payloads'] for o in done):,} | {sum(len(o['left_out']) for o in done):,} "
                f"| {sum(o['added'] for o in done) / sites if sites else 0:.1f} "
                f"| {'all pass' if clean else 'FINDINGS'} ({sum(o['regions'] for o in done):,} regions) "
                f"| {sum(o['seconds'] for o in done):,.0f} s |"
            )


if sys.argv[1:2] == ["--stages"]:
    stages(sys.argv[2])
    sys.exit(0)

if sys.argv[1:2] == ["--markdown"]:
    markdown(*sys.argv[2:4])
    sys.exit(0)

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
drains = [o.get("full_drains") for _, o in instrumented]
drains_note = f"{sum(drains)} full drains" if drains and None not in drains else "full drains not counted"
median = statistics.median(per_site) if per_site else 0
print(
    f"{example:18} {library:20} {len(outcomes)} of {total} code objects done "
    f"({len(instrumented)} instrumented, {len(outcomes) - len(instrumented) - len(errors)} with nothing selected, "
    f"{len(errors)} errors); {sum(o['kernels'] for _, o in instrumented)} kernels, {points} points, "
    f"{payloads} payloads, {left_out} left out; {added} instructions added "
    f"({added / sites if sites else 0:.1f} per site, kernel median {median:.1f}, max {max(per_site, default=0):.1f}); "
    f"{drains_note}; "
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

#!/usr/bin/env python3
"""How many selected points each example tool leaves out with default flags.

Usage: scripts/left-out.py [--link BIN] [--corpus-every N] [--no-corpus] [--grow free|always|never] [--label TEXT] [--json]

Instruments our own test programs (tests/inputs/{kernels,regressions,emulator}
and the vector-add example, each for gfx90a and gfx908) and a sample of the
production corpus (every gfx90a and gfx908 code object of Debian's rocRAND,
every Nth gfx90a code object of rocSPARSE) with each example tool and its
plan, with instrument's default flags, and counts the points the plan
selected and the points left out. BIN defaults to target/release/gpuinstr-link;
an older build (before points left out failed the run) reports them as
`rejected` and exits 0, a newer one is run with --allow-partial so that they
are counted instead of failing the run. Prints one line per tool and input
set, and the total.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = ["instruction-counter", "opcode-histogram", "memory-tracer", "memory-efficiency", "kernel-arguments", "branch-divergence"]


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def build_programs(work):
    """Our HIP programs, each a host object with gfx908 and gfx90a code."""
    sources = []
    for directory in ["tests/inputs/kernels", "tests/inputs/regressions", "tests/inputs/emulator"]:
        for name in sorted(os.listdir(os.path.join(REPO, directory))):
            if name.endswith(".hip"):
                sources.append(os.path.join(REPO, directory, name))
    sources.append(os.path.join(REPO, "hook-sdk/examples/applications/vector-add/vector-add.hip"))
    objects = []
    for source in sources:
        output = os.path.join(work, os.path.basename(source).replace(".hip", ".o"))
        if not os.path.exists(output):
            built = run(["hipcc", "--offload-arch=gfx908", "--offload-arch=gfx90a", "-O3", "-c", source, "-o", output])
            if built.returncode != 0:
                sys.exit(f"hipcc {source}: {built.stderr}")
        objects.append(output)
    return objects


def build_tool(example, work, plugin):
    output = os.path.join(work, f"{example}.tool.o")
    if not os.path.exists(output):
        built = run(["hipcc", "--offload-arch=gfx90a", "-O3", "--cuda-device-only", f"-fpass-plugin={plugin}",
                     "-I", os.path.join(REPO, "hook-sdk/include"), "-c",
                     os.path.join(REPO, f"hook-sdk/examples/{example}/tool.hip"), "-o", output])
        if built.returncode != 0:
            sys.exit(f"building {example}: {built.stderr}")
    return output


def corpus(work, link, every):
    """Code object files of the corpus: rocRAND (gfx90a and gfx908), every Nth gfx90a rocSPARSE one."""
    fetched = run([os.path.join(REPO, "scripts/fetch-corpus.sh")])
    libraries = fetched.stdout.split()
    files = []
    for library, targets, step in [(libraries[0], ["gfx90a", "gfx908"], 1), (libraries[1], ["gfx90a"], every)]:
        for target in targets:
            directory = os.path.join(work, "corpus", os.path.basename(library), target)
            if not os.path.exists(os.path.join(directory, ".complete")):
                os.makedirs(directory, exist_ok=True)
                extracted = run([link, "extract", library, "--target", target, "-o", directory])
                if extracted.returncode != 0:
                    sys.exit(f"extract {library}: {extracted.stderr}")
                open(os.path.join(directory, ".complete"), "w").close()
            names = sorted(f for f in os.listdir(directory) if f.endswith(".hsaco"))
            files += [(os.path.join(directory, n), None) for n in names[::step]]
    return files


def instrument(link, app, target, tool, plan, new, grow):
    """(selected, left out, error) for one run with default flags (and `grow`)."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [link, "instrument", app, "--tool", tool, "--plan", plan, "-o", os.path.join(scratch, "out"), "--json"]
        if target:
            command += ["--target", target]
        if grow:
            command.append(f"--grow-registers={grow}")
        if new:
            command.append("--allow-partial")
        ran = run(command)
    if ran.returncode != 0:
        if "selects no instruction" in ran.stderr:
            return 0, 0, None
        return 0, 0, ran.stderr.strip()
    report = json.loads(ran.stdout)
    selected = left = 0
    for code_object in report["code_objects"]:
        if "selected" in code_object:
            selected += code_object["selected"]
            left += len(code_object["left_out"])
        else:
            selected += code_object["points"]
            left += len(code_object["rejected"])
    return selected, left, None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--link", default=os.path.join(REPO, "target/release/gpuinstr-link"))
    parser.add_argument("--plugin", default=os.path.join(REPO, "target/release/libembed.so"))
    parser.add_argument("--corpus-every", type=int, default=20)
    parser.add_argument("--no-corpus", action="store_true")
    parser.add_argument("--label", default="")
    parser.add_argument("--grow", choices=["free", "always", "never"],
                        help="pass --grow-registers=POLICY (default: instrument's own default)")
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    work = os.path.join(REPO, "target/left-out")
    os.makedirs(work, exist_ok=True)
    new = "--allow-partial" in run([arguments.link, "instrument", "--help"]).stdout
    programs = [(p, t) for p in build_programs(work) for t in ["gfx90a", "gfx908"]]
    sets = [("our programs", programs)]
    if not arguments.no_corpus:
        sets.append(("corpus sample", corpus(work, arguments.link, arguments.corpus_every)))
    rows = []
    for example in EXAMPLES:
        tool = build_tool(example, work, arguments.plugin)
        plan = os.path.join(REPO, f"hook-sdk/examples/{example}/plan.toml")
        for name, files in sets:
            selected = left = 0
            errors = []
            for app, target in files:
                s, l, error = instrument(arguments.link, app, target, tool, plan, new, arguments.grow)
                selected += s
                left += l
                if error:
                    errors.append(f"{os.path.basename(app)} {target or ''}: {error[:200]}")
            rows.append({"tool": example, "inputs": name, "files": len(files), "selected": selected,
                         "left_out": left, "errors": errors})
            line = f"{arguments.label}{example:20} {name:14} {len(files):4} inputs {selected:9} points {left:7} left out"
            if selected:
                line += f" ({100 * left / selected:.2f}%)"
            if errors:
                line += f", {len(errors)} runs failed: {errors[0]}"
            print(line, flush=True)
    if arguments.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()

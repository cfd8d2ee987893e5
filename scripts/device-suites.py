#!/usr/bin/env python3
"""ROCm libraries' own test suites on the emulated GPU (docs/device.md).

Usage:
  scripts/device-suites.py run [--target T] [LIBRARY...]
      Replays the named passing sets in scripts/device-suites/LIBRARY-T.txt;
      exit status 1 unless every case passes.
  scripts/device-suites.py sample LIBRARY [--target T] [--per-group N]
                                  [--groups G] [--filter GTEST_FILTER]
                                  [--binary NAME...]
      Runs N cases of every test group (evenly spread over the group; with
      --groups, of G groups per program, evenly spread over them) and
      prints what passed, failed, stopped the program or ran too long; with
      --write, the passing cases of the sampled programs replace theirs in
      LIBRARY-T.txt.

LIBRARY is rocsparse, rocprim or rocrand: Debian 13's prebuilt test programs
(librocsparse0-tests, librocprim-tests, librocrand1-tests) in the chroot of
scripts/trixie-chroot.sh, run there on the emulated GPU. Every program runs
its cases in one process (rocsparse-test spends about 40 s reading its 200 MB
case table at every start); a case that runs longer than --case-timeout or
stops the program is recorded and the rest go on in a fresh process.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETS = os.path.join(REPO, "scripts", "device-suites")
CHROOT = os.path.join(REPO, "scripts", "trixie-chroot.sh")
LIBRARIES = {
    "rocsparse": "/usr/libexec/rocm/librocsparse0-tests",
    "rocprim": "/usr/libexec/rocm/librocprim-tests",
    "rocrand": "/usr/libexec/rocm/librocrand1-tests",
}
# A gtest filter is one argument, and Linux limits one argument to 128 KiB.
FILTER_BYTES = 100_000
RESULT = re.compile(r"^\[\s+(RUN|OK|FAILED|SKIPPED)\s+\] (\S+?)(,| \(|$)")


def chroot_command(target, program, arguments):
    return [CHROOT, "--", program, "--gtest_color=no", *arguments], dict(os.environ, TARGET=target)


def list_cases(target, program, gtest_filter):
    command, env = chroot_command(target, program, ["--gtest_list_tests", f"--gtest_filter={gtest_filter}"])
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    groups, group = {}, None
    for line in out.splitlines():
        # Typed and parameterised groups carry a comment: "Name/0.  # TypeParam = ...".
        head = line.split("#")[0].rstrip()
        if not line.startswith(" ") and head.endswith("."):
            group = head
            groups[group] = []
        elif line.startswith("  ") and group is not None:
            groups[group].append(group + line.split()[0])
    return groups


class Run:
    """One process running a list of cases, watched case by case."""

    def __init__(self, target, program, cases, case_timeout):
        self.outcomes = {}  # case -> (outcome, seconds, detail)
        self.current, self.started, self.detail = None, time.monotonic(), []
        command, env = chroot_command(target, program, ["--gtest_filter=" + ":".join(cases)])
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        self.timed_out = False
        watchdog = threading.Thread(target=self.watch, args=(case_timeout,), daemon=True)
        watchdog.start()
        tail = []
        for line in self.process.stdout:
            if not line.startswith("Note: Google Test filter"):
                tail = (tail + [line.rstrip()])[-20:]
            self.take(line.rstrip())
        self.process.wait()
        if self.current is not None:
            outcome = "too slow" if self.timed_out else "stopped the program"
            self.outcomes[self.current] = (outcome, time.monotonic() - self.started, "\n".join(tail[-6:]))

    def take(self, line):
        if line.startswith("Note: Google Test filter"):
            return
        match = RESULT.match(line)
        if not match:
            if self.current is not None and ("Failure" in line or "error" in line.lower()):
                self.detail.append(line)
            elif self.current is not None and self.detail and len(self.detail) < 6:
                self.detail.append(line)
            return
        kind, case = match.group(1), match.group(2)
        if kind == "RUN":
            self.current, self.started, self.detail = case, time.monotonic(), []
        elif case == self.current:
            outcome = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[kind]
            self.outcomes[case] = (outcome, time.monotonic() - self.started, "\n".join(self.detail))
            self.current = None

    def watch(self, case_timeout):
        while self.process.poll() is None:
            time.sleep(1)
            if self.current is not None and time.monotonic() - self.started > case_timeout:
                self.timed_out = True
                # The whole group: the chroot, its program and their mounts end together.
                os.killpg(self.process.pid, signal.SIGTERM)
                return


def run_cases(target, program, cases, case_timeout, log):
    """Every case's (outcome, seconds, detail); cases never started are 'not run'."""
    outcomes, remaining = {}, list(cases)
    while remaining:
        batch, size = [], 0
        for case in remaining:
            if batch and size + len(case) + 1 > FILTER_BYTES:
                break
            batch.append(case)
            size += len(case) + 1
        run = Run(target, program, batch, case_timeout)
        for case, result in run.outcomes.items():
            outcomes[case] = result
            if result[0] not in ("passed", "skipped"):
                log(f"{result[0]}: {case} ({result[1]:.1f} s)\n{result[2]}")
        progressed = any(case in run.outcomes for case in batch)
        remaining = [case for case in remaining if case not in outcomes]
        if not progressed:
            for case in remaining:
                outcomes[case] = ("not run", 0.0, f"{os.path.basename(program)} ran no case")
            break
    return outcomes


def set_path(library, target):
    return os.path.join(SETS, f"{library}-{target}.txt")


def read_set(path):
    """binary -> cases, from lines 'BINARY CASE' (# comments)."""
    cases = {}
    with open(path) as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line:
                binary, case = line.split()
                cases.setdefault(binary, []).append(case)
    return cases


def spread(items, n):
    if len(items) <= n:
        return items
    return [items[(k * len(items)) // n] for k in range(n)]


def report(library, target, results, seconds):
    counts = {}
    for binary, outcomes in results.items():
        for case, (outcome, _, _) in outcomes.items():
            group = binary + " " + case.split(".")[0]
            counts.setdefault(group, {}).setdefault(outcome, 0)
            counts[group][outcome] += 1
    kinds = ["passed", "skipped", "failed", "stopped the program", "too slow", "not run"]
    print(f"\n{library} on the emulated {target}: {seconds:.0f} s")
    print("| program and group | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    total = {k: 0 for k in kinds}
    for group, c in sorted(counts.items()):
        print(f"| {group} | " + " | ".join(str(c.get(k, 0)) for k in kinds) + " |")
        for k in kinds:
            total[k] += c.get(k, 0)
    print("| total | " + " | ".join(str(total[k]) for k in kinds) + " |")
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["run", "sample"])
    parser.add_argument("libraries", nargs="*")
    parser.add_argument("--target", default="gfx90a", choices=["gfx90a", "gfx908"])
    parser.add_argument("--per-group", type=int, default=2)
    parser.add_argument("--groups", type=int, help="sample: at most this many groups per program")
    parser.add_argument("--filter", default="*", help="gtest filter the sample is taken from")
    parser.add_argument("--binary", action="append", help="sample only these test programs")
    parser.add_argument("--case-timeout", type=float, default=180.0)
    parser.add_argument("--write", action="store_true", help="sample: the sampled programs' passing cases replace theirs in the named set")
    args = parser.parse_args()
    libraries = args.libraries or (sorted(LIBRARIES) if args.mode == "run" else [])
    if not libraries or any(library not in LIBRARIES for library in libraries):
        parser.error(f"name libraries among {', '.join(sorted(LIBRARIES))}")
    if args.mode == "sample" and len(libraries) != 1:
        parser.error("sample takes one library")
    subprocess.run([CHROOT], check=True, stdout=subprocess.DEVNULL)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    bad = False
    for library in libraries:
        directory = LIBRARIES[library]
        start = time.monotonic()
        results = {}
        if args.mode == "run":
            path = set_path(library, args.target)
            if not os.path.exists(path):
                log(f"{path}: no named set for {library} on {args.target}; make one with `sample --write`")
                bad = True
                continue
            for binary, cases in read_set(path).items():
                results[binary] = run_cases(args.target, f"{directory}/{binary}", cases, args.case_timeout, log)
        else:
            root = subprocess.run([CHROOT], check=True, capture_output=True, text=True).stdout.strip()
            binaries = args.binary or sorted(os.listdir(root + directory))
            for binary in binaries:
                groups = list_cases(args.target, f"{directory}/{binary}", args.filter)
                if args.groups is not None:
                    groups = {name: groups[name] for name in spread(list(groups), args.groups)}
                cases = [case for group in groups.values() for case in spread(group, args.per_group)]
                log(f"{binary}: {len(cases)} cases from {len(groups)} groups")
                if cases:
                    results[binary] = run_cases(args.target, f"{directory}/{binary}", cases, args.case_timeout, log)
        total = report(library, args.target, results, time.monotonic() - start)
        # A case the test program skips itself (a type it does not test on
        # this GPU) is neither a pass nor a problem.
        bad |= any(total[k] for k in total if k not in ("passed", "skipped"))
        if args.mode == "sample" and args.write:
            os.makedirs(SETS, exist_ok=True)
            path = set_path(library, args.target)
            # The sampled programs' passing cases replace theirs; other
            # programs' cases in the set stay.
            named = read_set(path) if os.path.exists(path) else {}
            for binary, outcomes in results.items():
                named[binary] = sorted(case for case, (outcome, _, _) in outcomes.items() if outcome == "passed")
            with open(path + ".new", "w") as f:
                f.write(f"# {library} cases that pass on the emulated {args.target}: scripts/device-suites.py\n")
                for binary, cases in sorted(named.items()):
                    for case in cases:
                        f.write(f"{binary} {case}\n")
            os.replace(path + ".new", path)
            log(f"wrote {path}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

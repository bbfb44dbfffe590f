#!/usr/bin/env python3
"""`toolgate call ... search_text` beside ripgrep, whole processes, in one run.

Both search one large source tree for a string found nowhere in it, on a warm cache, N times
each, alternating: `toolgate call --tool search_text` (start, audit log, pipeline, the walk
with its ignore rules and sensitive-file pruning, the search, the answer) against `rg` with
the same meaning — ignore case, a fixed string, dotfiles searched, files over 16 MiB skipped.
Each run's wall time and CPU time (user + system of the child) are kept; the script prints
their medians and the ratios.

    cargo build --release -p toolgate
    apt-get install ripgrep           # Debian's, ripgrep 13
    python3 bench/search_text.py [--tree DIR] [--runs 11] [--toolgate target/release/toolgate]

The default tree is cargo's registry sources (~/.cargo/registry/src): a few hundred megabytes
of real Rust in some twenty thousand files once the workspace has been built. Target:
toolgate's median wall time <= 1.2x ripgrep's. The script reports it; it does not fail on it.
toolgate's audit log goes to a fresh state directory under target/, removed afterwards.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Found nowhere, so every file is read to its end.
PATTERN = "toolgate-bench-absent-8f3e1c2a"


def timed(argv, env=None):
    """Wall and CPU seconds of one run of `argv`, and what it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def output_of(outcome):
    """The search's own output in the outcome `toolgate call` prints."""
    if isinstance(outcome, dict):
        if "files_searched" in outcome:
            return outcome
        for value in outcome.values():
            found = output_of(value)
            if found is not None:
                return found
    return None


def median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", default=os.path.expanduser("~/.cargo/registry/src"))
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--toolgate", default=os.path.join(ROOT, "target", "release", "toolgate"))
    parser.add_argument("--rg", default=shutil.which("rg") or "rg")
    args = parser.parse_args()

    tree = os.path.realpath(args.tree)
    state = tempfile.mkdtemp(prefix="bench-search-", dir=os.path.join(ROOT, "target"))
    env = {**os.environ, "XDG_STATE_HOME": state}
    call = json.dumps({"pattern": PATTERN})
    targets = {
        "toolgate search_text": [args.toolgate, "call", "--json", "--workspace", tree,
                                 "--tool", "search_text", "--args", call],
        "ripgrep": [args.rg, "--hidden", "--ignore-case", "--fixed-strings",
                    "--max-filesize", "16M", "--no-messages", PATTERN, tree],
    }
    version = subprocess.run([args.rg, "--version"], capture_output=True, text=True)
    print(f"tree: {tree}")
    print(f"{version.stdout.splitlines()[0]}; {args.runs} runs each after one warm-up, alternating")

    searched = None
    times = {name: ([], []) for name in targets}
    try:
        for name, argv in targets.items():
            timed(argv, env)  # the warm-up reads the tree into the page cache
        for _ in range(args.runs):
            for name, argv in targets.items():
                wall, cpu, done = timed(argv, env)
                if name == "ripgrep":
                    if done.returncode != 1:  # 1: nothing found, as meant
                        sys.exit(f"rg exited {done.returncode}: {done.stderr.decode()[:500]}")
                else:
                    if done.returncode != 0:
                        sys.exit(f"toolgate exited {done.returncode}: {done.stderr.decode()[:500]}")
                    found = output_of(json.loads(done.stdout))
                    searched = found["files_searched"]
                    if found["matches"]:
                        sys.exit(f"the absent pattern was found: {found['matches'][:1]}")
                times[name][0].append(wall)
                times[name][1].append(cpu)
    finally:
        shutil.rmtree(state, ignore_errors=True)

    print(f"files toolgate searched: {searched}")
    print(f"{'':24} {'wall p50':>10} {'cpu p50':>10}")
    for name, (walls, cpus) in times.items():
        print(f"{name:24} {median(walls) * 1000:8.1f}ms {median(cpus) * 1000:8.1f}ms")
    wall_ratio = median(times["toolgate search_text"][0]) / median(times["ripgrep"][0])
    cpu_ratio = median(times["toolgate search_text"][1]) / median(times["ripgrep"][1])
    met = "met" if wall_ratio <= 1.2 else "missed"
    print(f"toolgate / ripgrep: wall {wall_ratio:.2f}x (target <= 1.2x, {met}), cpu {cpu_ratio:.2f}x")


if __name__ == "__main__":
    main()

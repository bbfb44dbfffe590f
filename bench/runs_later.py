#!/usr/bin/env python3
"""What guarding the files that run later costs one command, end to end.

Starts `toolgate serve` over stdio twice: on a small repository (one file) and on one of
10,000 files (100 directories of 100, 1,000 loose objects in `.git`, agent and build
configuration). Each time, N times: sends `run_command ["true"]`, approves it through the
console's HTTP API as a browser would (the login link's cookie, the CSRF value), and measures
from the decision's POST to the call's result: the grant, the snapshot of the files that run
later, the sandbox, the process, the comparison after it, and the reply. The difference of
the medians is what the guard costs a command on the larger repository (the snapshot and the
check walk it; the rest is the same). The guard alone, without the process, is measured by
`cargo bench -p toolgate-tools --bench runs_later`.

    cargo build --release -p toolgate
    python3 bench/runs_later.py [--calls 30] [--toolgate target/release/toolgate]
"""

import argparse
import os
import subprocess
import tempfile

from console_login import Served


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def repository(ws, files):
    os.makedirs(ws)
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    with open(os.path.join(ws, "README.md"), "w") as f:
        f.write("# bench\n")
    if files:
        for d in range(files // 100):
            path = os.path.join(ws, "src", f"module{d}")
            os.makedirs(path)
            for n in range(100):
                with open(os.path.join(path, f"file{n}.rs"), "w") as f:
                    f.write("fn main() {}\n")
        for o in range(1000):
            path = os.path.join(ws, ".git", "objects", f"{o % 256:02x}")
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, f"{o:038x}"), "wb") as f:
                f.write(bytes(64))
        os.makedirs(os.path.join(ws, ".claude"))
        with open(os.path.join(ws, ".claude", "settings.json"), "w") as f:
            f.write("{}\n")
        with open(os.path.join(ws, ".npmrc"), "w") as f:
            f.write("fund=false\n")


def measure(toolgate, ws, state, calls):
    served = Served(toolgate, ws, dict(os.environ, XDG_STATE_HOME=state))
    times = []
    for i in range(1, calls + 1):
        served.send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "run_command", "arguments": {"argv": ["true"]}}})
        times.append(served.allow_once(served.first_pending(), i))
    served.close()
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--toolgate", default="target/release/toolgate")
    args = parser.parse_args()
    # Under the repository's target/, not /tmp, which the sandbox denies.
    os.makedirs("target", exist_ok=True)
    with tempfile.TemporaryDirectory(dir="target") as tmp:
        tmp = os.path.abspath(tmp)
        results = {}
        for name, files in (("1 file", 0), ("10,000 files", 10_000)):
            ws = os.path.join(tmp, name.replace(" ", "-").replace(",", ""))
            repository(ws, files)
            results[name] = measure(args.toolgate, ws, os.path.join(tmp, "state-" + str(files)),
                                    args.calls)
    print(f"calls: {args.calls} each")
    for name, times in results.items():
        print(f"run_command true, decision POST -> result, {name}: "
              f"p50 {percentile(times, 0.5):.2f} ms, p99 {percentile(times, 0.99):.2f} ms")
    small, large = (percentile(t, 0.5) for t in results.values())
    print(f"the guard on 10,000 files, difference of the medians: {large - small:.2f} ms")


if __name__ == "__main__":
    main()

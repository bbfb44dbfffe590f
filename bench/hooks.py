#!/usr/bin/env python3
"""What a pre_call hook adds to a call, sandbox included.

Starts `toolgate serve` over stdio three times on the same workspace, in the same invocation:
with no hook; with one `[[hook]]` on every tool whose program is bench/hook_allow.c, compiled
(it reads the call from standard input and answers `{"decision": "allow"}` at once); and with
the same hook under `[sandbox] mode = "dangerous-unconfined"`. Each server gets a warm-up,
then N `read_file` calls of a small file, one at a time, the servers alternating in blocks so
that machine noise falls on all. The hook runs confined as every hook does (Landlock,
seccomp, the mount namespace where there is one). It prints the median and 99th percentile of
each, the difference of the medians, what the hook adds, and the sandbox's share of it.

    cargo build --release -p toolgate
    python3 bench/hooks.py [--calls 500] [--toolgate target/release/toolgate]

Target: the hook adds <= 5 ms at the median. The script reports it; it does not fail on it.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = 50
WARM_UP = 20


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def build_hook():
    """bench/hook_allow.c compiled into target/bench-tools (not /tmp: the sandbox denies it)."""
    source = os.path.join(ROOT, "bench", "hook_allow.c")
    built = os.path.join(ROOT, "target", "bench-tools", "hook_allow")
    if os.path.exists(built) and os.path.getmtime(built) >= os.path.getmtime(source):
        return built
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        sys.exit("no C compiler: the hook cannot be built")
    os.makedirs(os.path.dirname(built), exist_ok=True)
    subprocess.run([compiler, "-O2", "-o", built, source], check=True)
    return built


class Server:
    """`toolgate serve` over stdio and a newline-delimited JSON-RPC conversation with it."""

    def __init__(self, toolgate, ws, config, state):
        env = dict(os.environ, XDG_STATE_HOME=state)
        self.proc = subprocess.Popen(
            [toolgate, "serve", "--workspace", ws, "--config", config, "--no-console"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )
        self.next_id = 0
        self.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{method}: the server closed its output")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def read(self):
        """One `read_file` call, timed in milliseconds."""
        started = time.perf_counter()
        result = self.request("tools/call", {"name": "read_file",
                                             "arguments": {"path": "a.txt"}})
        elapsed = (time.perf_counter() - started) * 1000
        if result.get("isError"):
            raise RuntimeError(f"read_file failed: {result}")
        return elapsed

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--toolgate", default=os.path.join(ROOT, "target/release/toolgate"))
    args = parser.parse_args()
    hook = build_hook()
    os.makedirs(os.path.join(ROOT, "target"), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.join(ROOT, "target")) as tmp:
        ws = os.path.join(tmp, "ws")
        os.makedirs(ws)
        with open(os.path.join(ws, "a.txt"), "w") as f:
            f.write("alpha\n")
        plain = os.path.join(tmp, "plain.toml")
        with open(plain, "w") as f:
            f.write("")
        hooked = os.path.join(tmp, "hooked.toml")
        with open(hooked, "w") as f:
            f.write(f'[[hook]]\nname = "allow"\nevent = "pre_call"\ncommand = ["{hook}"]\n')
        unconfined = os.path.join(tmp, "unconfined.toml")
        with open(unconfined, "w") as f:
            f.write('[sandbox]\nmode = "dangerous-unconfined"\n')
            f.write(f'[[hook]]\nname = "allow"\nevent = "pre_call"\ncommand = ["{hook}"]\n')
        servers = {
            "no hook": Server(args.toolgate, ws, plain, os.path.join(tmp, "state-plain")),
            "compiled hook": Server(args.toolgate, ws, hooked, os.path.join(tmp, "state-hook")),
            "unconfined hook": Server(args.toolgate, ws, unconfined,
                                      os.path.join(tmp, "state-unconfined")),
        }
        try:
            for server in servers.values():
                for _ in range(WARM_UP):
                    server.read()
            times = {name: [] for name in servers}
            while len(times["no hook"]) < args.calls:
                for name, server in servers.items():
                    times[name].extend(server.read() for _ in range(BLOCK))
        finally:
            for server in servers.values():
                server.close()
    print(f"read_file over stdio, {len(times['no hook'])} calls each, in blocks of {BLOCK}")
    for name, samples in times.items():
        print(f"{name:16} p50 {percentile(samples, 0.5):7.3f} ms   "
              f"p99 {percentile(samples, 0.99):7.3f} ms")
    median = {name: percentile(samples, 0.5) for name, samples in times.items()}
    added = median["compiled hook"] - median["no hook"]
    verdict = "met" if added <= 5 else "MISSED"
    print(f"the hook adds {added:.3f} ms at the median (target <= 5 ms: {verdict})")
    print(f"of which the sandbox: {median['compiled hook'] - median['unconfined hook']:.3f} ms")


if __name__ == "__main__":
    main()

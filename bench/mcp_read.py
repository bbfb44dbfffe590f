#!/usr/bin/env python3
"""toolgate serve against the reference filesystem MCP server, side by side.

One minimal JSON-RPC client (newline-delimited over stdio, no SDK) starts each server,
initializes it, reads the same small file N times, one call at a time, and prints the median
and 99th-percentile latency of each, their ratios, toolgate's idle memory and how long it takes
from process start to answering `initialize`.

    cargo build --release -p toolgate
    scripts/test-deps      # target/test-deps: Node 22 and @modelcontextprotocol/server-filesystem
    python3 bench/mcp_read.py [--calls 1000] [--toolgate target/release/toolgate]

Targets: p50 <= 0.25x and p99 <= 0.5x the reference, idle RSS <= 20 MB, initialize <= 50 ms.
The script reports them; it does not fail on them.

toolgate writes every call's audit record, durably, before answering it (an fsync per call for
a lone client). The log goes to a fresh state directory under target/, on the checkout's disk;
`--state DIR` puts it elsewhere (on a tmpfs such as /dev/shm, fsync costs nothing, which shows
what the dispatch itself costs).
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
DEPS = os.path.join(ROOT, "target", "test-deps", "node", "node_modules")


class Server:
    """A server child and a newline-delimited JSON-RPC conversation with it."""

    def __init__(self, argv, env=None):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.next_id = 0

    def request(self, method, params):
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            answer = self.proc.stdout.readline()
            if not answer:
                raise RuntimeError(f"{method}: the server closed its output")
            message = json.loads(answer)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def initialize(self):
        result = self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        )
        answered = time.perf_counter() - self.started
        line = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return result, answered

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def state_dir(given):
    """Where toolgate keeps its audit log in a benchmark, and whether to remove it after."""
    if given:
        given = os.path.abspath(given)  # toolgate ignores a relative XDG_STATE_HOME
        os.makedirs(given, exist_ok=True)
        return given, False
    return tempfile.mkdtemp(prefix="bench-state-", dir=os.path.join(ROOT, "target")), True


def latencies(server, tool, arguments, calls, warmup):
    samples = []
    for i in range(warmup + calls):
        started = time.perf_counter()
        result = server.request("tools/call", {"name": tool, "arguments": arguments})
        elapsed = time.perf_counter() - started
        if result.get("isError"):
            raise RuntimeError(f"{tool} failed: {result}")
        if i >= warmup:
            samples.append(elapsed)
    samples.sort()
    return samples


def percentile(sorted_samples, p):
    index = min(len(sorted_samples) - 1, max(0, round(p / 100 * len(sorted_samples)) - 1))
    return sorted_samples[index]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--toolgate", default=os.path.join(ROOT, "target", "release", "toolgate"))
    parser.add_argument("--node", default=os.path.join(DEPS, "node", "bin", "node"))
    parser.add_argument("--state", help="toolgate's state directory, where its audit log goes")
    args = parser.parse_args()
    reference = os.path.join(DEPS, "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
    for path in (args.toolgate, args.node, reference):
        if not os.path.exists(path):
            sys.exit(f"missing {path}: build toolgate in release mode and run scripts/test-deps first")
    state, remove_state = state_dir(args.state)
    gate_env = {**os.environ, "XDG_STATE_HOME": state}

    with tempfile.TemporaryDirectory() as ws:
        ws = os.path.realpath(ws)
        text = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(20))
        with open(os.path.join(ws, "small.txt"), "w") as f:
            f.write(text)
        config = os.path.join(ws, "..", f"{os.path.basename(ws)}-empty.toml")
        with open(config, "w") as f:
            f.write("")

        gate = Server([args.toolgate, "serve", "--workspace", ws, "--config", config], gate_env)
        _, init_seconds = gate.initialize()
        time.sleep(0.2)
        idle_rss = gate.rss_kib()
        gate_samples = latencies(gate, "read_file", {"path": "small.txt"}, args.calls, args.warmup)
        busy_rss = gate.rss_kib()
        gate.close()
        os.remove(config)

        ref = Server([args.node, reference, ws])
        _, ref_init_seconds = ref.initialize()
        ref_samples = latencies(
            ref, "read_text_file", {"path": os.path.join(ws, "small.txt")}, args.calls, args.warmup
        )
        ref.close()
    if remove_state:
        shutil.rmtree(state, ignore_errors=True)

    ms = lambda s: s * 1000
    g50, g99 = percentile(gate_samples, 50), percentile(gate_samples, 99)
    r50, r99 = percentile(ref_samples, 50), percentile(ref_samples, 99)
    verdict = lambda ok: "ok" if ok else "MISSED"
    print(f"{args.calls} sequential calls reading a {len(text)}-byte file, after {args.warmup} warm-up calls")
    print(f"toolgate's audit log in {'a fresh directory under target/' if remove_state else state}")
    print(f"{'':24} {'p50 ms':>9} {'p99 ms':>9}")
    print(f"{'toolgate read_file':24} {ms(g50):9.3f} {ms(g99):9.3f}")
    print(f"{'reference read_text_file':24} {ms(r50):9.3f} {ms(r99):9.3f}")
    print(f"ratio p50 {g50 / r50:.3f} (target <= 0.25, {verdict(g50 / r50 <= 0.25)})")
    print(f"ratio p99 {g99 / r99:.3f} (target <= 0.5, {verdict(g99 / r99 <= 0.5)})")
    print(f"toolgate idle RSS {idle_rss / 1024:.1f} MiB (target <= 20, {verdict(idle_rss <= 20 * 1024)}); after the calls {busy_rss / 1024:.1f} MiB")
    print(f"toolgate start to initialize answered {ms(init_seconds):.1f} ms (target <= 50, {verdict(init_seconds <= 0.05)}); reference {ms(ref_init_seconds):.1f} ms")


if __name__ == "__main__":
    main()

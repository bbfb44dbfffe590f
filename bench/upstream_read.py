#!/usr/bin/env python3
"""The reference filesystem MCP server directly, and through `toolgate serve`, side by side.

The same minimal JSON-RPC client as bench/mcp_read.py (newline-delimited over stdio, no SDK)
reads the same small file with `read_text_file` N times, one call at a time: once talking to
`@modelcontextprotocol/server-filesystem` directly, once talking to `toolgate serve` with that
server configured as an upstream and `read_text_file` admitted (so every call is normalized,
resolved, validated against the pinned schema, authorized by Cedar, forwarded, checked and
redacted). Both runs happen in the same invocation, alternating in blocks, so machine noise
falls on both. It prints the median and 99th-percentile latency of each and their ratios.

    cargo build --release -p toolgate
    scripts/test-deps      # target/test-deps: Node 22 and @modelcontextprotocol/server-filesystem
    python3 bench/upstream_read.py [--calls 1000] [--toolgate target/release/toolgate]

Targets: p50 ratio <= 1.10 and p99 ratio <= 1.25. The script reports them; it does not fail on
them. As in bench/mcp_read.py, toolgate's audit log goes to a fresh directory under target/
unless `--state DIR` says where.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_read import DEPS, ROOT, Server, percentile, state_dir  # noqa: E402
import shutil  # noqa: E402

import time  # noqa: E402


def timed_calls(server, tool, arguments, calls):
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        result = server.request("tools/call", {"name": tool, "arguments": arguments})
        elapsed = time.perf_counter() - started
        if result.get("isError"):
            raise RuntimeError(f"{tool} failed: {result}")
        samples.append(elapsed)
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--block", type=int, default=100, help="calls per alternating block")
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

    with tempfile.TemporaryDirectory() as tmp:
        tmp = os.path.realpath(tmp)
        files = os.path.join(tmp, "files")
        ws = os.path.join(tmp, "ws")
        os.makedirs(files)
        os.makedirs(ws)
        text = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(20))
        small = os.path.join(files, "small.txt")
        with open(small, "w") as f:
            f.write(text)
        config = os.path.join(tmp, "toolgate.toml")
        with open(config, "w") as f:
            f.write(
                "[[upstream]]\nname = \"fs\"\n"
                f"command = [{json.dumps(args.node)}, {json.dumps(reference)}, {json.dumps(files)}]\n"
            )
        admitted = subprocess.run(
            [args.toolgate, "tools", "admit", "fs", "read_text_file", "--effect", "read_only",
             "--config", config],
            capture_output=True, text=True, env=gate_env,
        )
        if admitted.returncode != 0:
            sys.exit(f"toolgate tools admit failed: {admitted.stderr}")

        direct = Server([args.node, reference, files])
        direct.initialize()
        gate = Server([args.toolgate, "serve", "--workspace", ws, "--config", config], gate_env)
        gate.initialize()
        arguments = {"path": small}
        timed_calls(direct, "read_text_file", arguments, args.warmup)
        timed_calls(gate, "fs__read_text_file", arguments, args.warmup)
        direct_samples, gate_samples = [], []
        done = 0
        while done < args.calls:
            n = min(args.block, args.calls - done)
            direct_samples += timed_calls(direct, "read_text_file", arguments, n)
            gate_samples += timed_calls(gate, "fs__read_text_file", arguments, n)
            done += n
        gate.close()
        direct.close()
    if remove_state:
        shutil.rmtree(state, ignore_errors=True)

    direct_samples.sort()
    gate_samples.sort()
    ms = lambda s: s * 1000
    d50, d99 = percentile(direct_samples, 50), percentile(direct_samples, 99)
    g50, g99 = percentile(gate_samples, 50), percentile(gate_samples, 99)
    verdict = lambda ok: "ok" if ok else "MISSED"
    print(f"{args.calls} sequential read_text_file calls of a {len(text)}-byte file each way, "
          f"after {args.warmup} warm-up calls, alternating in blocks of {args.block}")
    print(f"toolgate's audit log in {'a fresh directory under target/' if remove_state else state}")
    print(f"{'':32} {'p50 ms':>9} {'p99 ms':>9}")
    print(f"{'server-filesystem directly':32} {ms(d50):9.3f} {ms(d99):9.3f}")
    print(f"{'through toolgate serve':32} {ms(g50):9.3f} {ms(g99):9.3f}")
    print(f"ratio p50 {g50 / d50:.3f} (target <= 1.10, {verdict(g50 / d50 <= 1.10)})")
    print(f"ratio p99 {g99 / d99:.3f} (target <= 1.25, {verdict(g99 / d99 <= 1.25)})")


if __name__ == "__main__":
    main()

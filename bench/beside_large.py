#!/usr/bin/env python3
"""A small read's latency over streamable HTTP while another session makes large calls.

`toolgate serve --http` serves every session on one thread. A call that ends soon may run
there, where its request arrived; one that takes long must not, or it holds up every other
session's requests. This script opens two sessions on one server: session B reads a small
file N times, one call at a time, first alone and then while session A, call after call,

- reads a 16 MiB file with `read_file` (each read digests the whole file and counts its
  lines), then
- reads a 192 KiB file through `@modelcontextprotocol/server-filesystem` as an upstream
  (an answer of some 400 KiB of JSON to measure, redact and record), when scripts/test-deps
  has installed it.

It prints B's median and 99th percentile each way, and how many calls A made meanwhile.

    cargo build --release -p toolgate
    python3 bench/beside_large.py [--calls 1000] [--toolgate target/release/toolgate]
"""

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_read import (  # noqa: E402
    DEPS, REFERENCE, ROOT, TOKEN, HttpClient, HttpServer, admit, fs_upstream, ms, percentile,
    state_dir, token_config,
)


def timed(client, calls):
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        client.request("tools/call", {"name": "read_file", "arguments": {"path": "small.txt"}})
        samples.append(time.perf_counter() - started)
    return sorted(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--toolgate", default=os.path.join(ROOT, "target", "release", "toolgate"))
    parser.add_argument("--state", help="toolgate's state directory, where its audit log goes")
    args = parser.parse_args()
    if not os.path.exists(args.toolgate):
        sys.exit(f"missing {args.toolgate}: build toolgate in release mode first")
    state, remove_state = state_dir(args.state)
    env = {**os.environ, "XDG_STATE_HOME": state, "TOOLGATE_BENCH_TOKEN": TOKEN}
    node = os.path.join(DEPS, "node", "bin", "node")
    with_upstream = os.path.exists(node) and os.path.exists(REFERENCE)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = os.path.realpath(tmp)
        ws = os.path.join(tmp, "ws")
        files = os.path.join(tmp, "files")
        os.makedirs(ws)
        os.makedirs(files)
        with open(os.path.join(ws, "small.txt"), "w") as f:
            f.write("".join(f"line {i}: the quick brown fox\n" for i in range(20)))
        line = "the quick brown fox jumps over the lazy dog, again and again and again\n"
        with open(os.path.join(ws, "large.txt"), "w") as f:
            f.write(line * ((16 << 20) // len(line) - 1))
        with open(os.path.join(files, "answer.txt"), "w") as f:
            f.write(line * ((192 << 10) // len(line)))
        config = os.path.join(tmp, "toolgate.toml")
        token_config(config, fs_upstream(node, files) if with_upstream else "")
        if with_upstream:
            admit(args.toolgate, "fs", config, env)
        server = HttpServer([args.toolgate, "serve", "--workspace", ws, "--config", config,
                             "--http", "127.0.0.1:0", "--no-console"], env)
        small = HttpClient(server.addr, token=TOKEN)
        small.initialize()
        large = HttpClient(server.addr, token=TOKEN)
        large.initialize()
        timed(small, 50)
        rows.append(("alone", timed(small, args.calls), None))
        beside = [("beside 16 MiB read_file calls", "read_file",
                   {"path": "large.txt", "limit": 10})]
        if with_upstream:
            beside.append(("beside 192 KiB upstream reads", "fs__read_text_file",
                           {"path": os.path.join(files, "answer.txt")}))
        for name, tool, arguments in beside:
            stop = threading.Event()
            made = [0]

            def call_large():
                while not stop.is_set():
                    large.request("tools/call", {"name": tool, "arguments": arguments})
                    made[0] += 1

            caller = threading.Thread(target=call_large)
            caller.start()
            time.sleep(0.2)
            samples = timed(small, args.calls)
            stop.set()
            caller.join()
            rows.append((name, samples, made[0]))
        server.close()
    if remove_state:
        shutil.rmtree(state, ignore_errors=True)
    print(f"{args.calls} small reads over HTTP in one session, alone and beside another "
          "session's large calls")
    if not with_upstream:
        print("(no server-filesystem in target/test-deps: run scripts/test-deps for the upstream row)")
    print(f"{'':34s}{'p50 ms':>10s}{'p99 ms':>10s}{'large calls':>13s}")
    for name, samples, made in rows:
        print(f"{name:34s}{ms(percentile(samples, 50)):10.3f}{ms(percentile(samples, 99)):10.3f}"
              f"{'' if made is None else made:>13}")


if __name__ == "__main__":
    main()

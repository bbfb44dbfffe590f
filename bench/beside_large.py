#!/usr/bin/env python3
"""A small read's latency over streamable HTTP while another session reads a large file.

`toolgate serve --http` serves every session on one thread. A call that ends soon may run
there, where its request arrived; one that takes long must not, or it holds up every other
session's requests. This script opens two sessions on one server: session B reads a small
file N times, one call at a time, first alone and then while session A reads a 16 MiB file
call after call (each read digests the whole file and counts its lines). It prints B's median
and 99th percentile both ways, and how many large reads A made meanwhile.

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
    ROOT, TOKEN, HttpClient, HttpServer, ms, percentile, state_dir, token_config,
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
    with tempfile.TemporaryDirectory() as tmp:
        ws = os.path.join(tmp, "ws")
        os.makedirs(ws)
        with open(os.path.join(ws, "small.txt"), "w") as f:
            f.write("".join(f"line {i}: the quick brown fox\n" for i in range(20)))
        line = "the quick brown fox jumps over the lazy dog, again and again and again\n"
        with open(os.path.join(ws, "large.txt"), "w") as f:
            f.write(line * ((16 << 20) // len(line) - 1))
        config = os.path.join(tmp, "toolgate.toml")
        token_config(config)
        server = HttpServer([args.toolgate, "serve", "--workspace", ws, "--config", config,
                             "--http", "127.0.0.1:0", "--no-console"], env)
        small = HttpClient(server.addr, token=TOKEN)
        small.initialize()
        large = HttpClient(server.addr, token=TOKEN)
        large.initialize()
        timed(small, 50)
        alone = timed(small, args.calls)
        stop = threading.Event()
        large_reads = [0]

        def read_large():
            while not stop.is_set():
                large.request("tools/call", {"name": "read_file",
                                             "arguments": {"path": "large.txt", "limit": 10}})
                large_reads[0] += 1

        reader = threading.Thread(target=read_large)
        reader.start()
        time.sleep(0.2)
        beside = timed(small, args.calls)
        stop.set()
        reader.join()
        server.close()
    if remove_state:
        shutil.rmtree(state, ignore_errors=True)
    print(f"{args.calls} small reads over HTTP in one session, alone and beside a session "
          f"reading a 16 MiB file ({large_reads[0]} large reads meanwhile)")
    print(f"{'':30s}{'p50 ms':>10s}{'p99 ms':>10s}")
    for name, samples in (("alone", alone), ("beside the large reads", beside)):
        print(f"{name:30s}{ms(percentile(samples, 50)):10.3f}{ms(percentile(samples, 99)):10.3f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The approval console's own latency: how quickly a decision reaches the waiting call.

Starts `toolgate serve` over stdio with its console, with a minimal JSON-RPC client (no SDK),
and N times: sends a `write_file` call, polls `GET /api/pending` until it appears, posts
`allow_once`, and measures from the decision's POST to the call's result (the wake-up of the
waiting pipeline thread, the grant, the write and the reply). Also times `GET /api/pending`
alone. Prints medians and 99th percentiles in milliseconds.

    cargo build -p toolgate
    python3 bench/console_roundtrip.py [--calls 50] [--toolgate target/debug/toolgate]
"""

import argparse
import os
import tempfile

from console_login import Served


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--toolgate", default="target/debug/toolgate")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        ws = os.path.join(tmp, "ws")
        os.makedirs(ws)
        env = dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "state"))
        served = Served(args.toolgate, ws, env)
        served.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        served.reply("list")

        decision_to_result, list_times = [], []
        for i in range(1, args.calls + 1):
            served.send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "name": "write_file", "arguments": {"path": f"f{i}.txt", "content": "x\n"}}})
            pending = served.first_pending(list_times)
            decision_to_result.append(served.allow_once(pending, i))
        served.close()

    print(f"calls: {args.calls}")
    print(f"decision POST -> call result: p50 {percentile(decision_to_result, 0.5):.2f} ms, "
          f"p99 {percentile(decision_to_result, 0.99):.2f} ms")
    print(f"GET /api/pending: p50 {percentile(list_times, 0.5):.2f} ms, "
          f"p99 {percentile(list_times, 0.99):.2f} ms")


if __name__ == "__main__":
    main()

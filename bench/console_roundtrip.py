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
import json
import os
import subprocess
import tempfile
import time
import urllib.request

from console_login import log_in


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
        proc = subprocess.Popen(
            [args.toolgate, "serve", "--workspace", ws],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        base, cookie, csrf = log_in(proc)

        def get_pending():
            request = urllib.request.Request(base + "/api/pending", headers={"Cookie": cookie})
            return json.loads(urllib.request.urlopen(request).read())

        def rpc(message):
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()

        def read_reply(want_id):
            while True:
                reply = json.loads(proc.stdout.readline())
                if reply.get("id") == want_id:
                    return reply

        rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}})
        read_reply(0)
        rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
        rpc({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        read_reply("list")

        decision_to_result, list_times = [], []
        for i in range(1, args.calls + 1):
            rpc({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "name": "write_file", "arguments": {"path": f"f{i}.txt", "content": "x\n"}}})
            while True:
                started = time.perf_counter()
                pending = get_pending()
                list_times.append((time.perf_counter() - started) * 1000)
                if pending:
                    break
                time.sleep(0.005)
            request = urllib.request.Request(
                f"{base}/api/pending/{pending[0]['id']}/decision",
                data=b'{"decision":"allow_once"}', method="POST",
                headers={"Cookie": cookie, "X-Toolgate-Csrf": csrf,
                         "Content-Type": "application/json"})
            started = time.perf_counter()
            urllib.request.urlopen(request).read()
            reply = read_reply(i)
            decision_to_result.append((time.perf_counter() - started) * 1000)
            assert not reply["result"].get("isError"), reply
        proc.stdin.close()
        proc.wait(timeout=10)

    print(f"calls: {args.calls}")
    print(f"decision POST -> call result: p50 {percentile(decision_to_result, 0.5):.2f} ms, "
          f"p99 {percentile(decision_to_result, 0.99):.2f} ms")
    print(f"GET /api/pending: p50 {percentile(list_times, 0.5):.2f} ms, "
          f"p99 {percentile(list_times, 0.99):.2f} ms")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Times tool calls with the official MCP Python SDK, for bench/mcp_read.py and
bench/upstream_read.py, which run it with the test venv's Python (target/test-deps/venv).

Reads a JSON spec on standard input:

    {"calls": N, "warmup": W, "block": B,
     "targets": [{"name", "transport": "stdio", "command", "args", "env", "tool", "arguments"},
                 {"name", "transport": "http", "url", "token", "tool", "arguments"}, ...]}

opens one SDK session per target, calls each target's tool W times, then N times each in
alternating blocks of B, one call at a time, and prints `{name: [seconds, ...]}`.
"""

import json
import os
import sys
import time
from contextlib import AsyncExitStack

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def open_session(stack, target):
    if target["transport"] == "stdio":
        params = StdioServerParameters(
            command=target["command"],
            args=target.get("args", []),
            env={**os.environ, **target.get("env", {})},
        )
        read, write = await stack.enter_async_context(stdio_client(params))
    else:
        headers = {"Authorization": f"Bearer {target['token']}"} if target.get("token") else {}
        http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        read, write = await stack.enter_async_context(
            streamable_http_client(target["url"], http_client=http)
        )
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def timed(session, target, calls):
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        result = await session.call_tool(target["tool"], target.get("arguments", {}))
        elapsed = time.perf_counter() - started
        if result.is_error:
            raise RuntimeError(f"{target['name']}: {target['tool']} failed: {result}")
        samples.append(elapsed)
    return samples


async def main(spec):
    samples = {t["name"]: [] for t in spec["targets"]}
    async with AsyncExitStack() as stack:
        sessions = [(t, await open_session(stack, t)) for t in spec["targets"]]
        for target, session in sessions:
            await timed(session, target, spec["warmup"])
        done = 0
        while done < spec["calls"]:
            n = min(spec["block"], spec["calls"] - done)
            for target, session in sessions:
                samples[target["name"]] += await timed(session, target, n)
            done += n
    print(json.dumps(samples))


if __name__ == "__main__":
    anyio.run(main, json.load(sys.stdin))

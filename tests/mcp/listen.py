"""Open a `subscriptions/listen` stream on `toolgate serve` with the official Python SDK's
2026-07-28 client, make toolgate's tool list change, and report what the stream carried.

Usage: python listen.py PLAN.json

PLAN is one session, as drive.py takes it ({"transport": "stdio", "command", "args"} or
{"transport": "http", "url", "token"}), plus

    "pidfile": a file holding the pid of an upstream server behind toolgate; it is sent
               SIGUSR1 once the subscription is acknowledged, which changes its tool list
    "wait": seconds to wait for the change to arrive (default 20)

The report, printed as JSON, is {"protocolVersion", "honored": {...}, "events": [...],
"listed_before": [...], "listed_after": [...]}: the acknowledged filter, the events the SDK
delivered on the stream (by type), and the tool names listed before and after the change.
Assertions live in crates/toolgate/tests/mcp_methods.rs.
"""

import json
import os
import signal
import sys

import anyio

from drive import modern_client


async def listen(client, spec):
    report = {"protocolVersion": client.session.protocol_version, "events": []}
    report["listed_before"] = [t.name for t in (await client.list_tools()).tools]
    async with client.listen(tools_list_changed=True, prompts_list_changed=True) as sub:
        report["honored"] = sub.honored.model_dump(mode="json", by_alias=True, exclude_none=True)
        with open(spec["pidfile"]) as f:
            os.kill(int(f.read().strip()), signal.SIGUSR1)
        with anyio.move_on_after(spec.get("wait", 20)):
            async for event in sub:
                report["events"].append(type(event).__name__)
                break
    report["listed_after"] = [t.name for t in (await client.list_tools()).tools]
    return report


async def main(spec):
    async with modern_client(spec) as client:
        report = await listen(client, spec)
    print(json.dumps(report))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        anyio.run(main, json.load(f))

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

from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


# The variables that place toolgate's files (audit log, console tokens, grants): the test that
# runs this script gives it a home of its own (tests/support/home.rs), and every server started
# here gets it, under whatever the plan sets.
HOME_VARIABLES = ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")


def server_env(spec):
    """The server's environment: the SDK's default, this script's home and XDG directories,
    and the plan's `env` over them. Refuses to run without a home of the test's own, so that
    no server writes into the user's."""
    missing = [name for name in HOME_VARIABLES if name not in os.environ]
    if missing:
        raise SystemExit(f"started without {', '.join(missing)}: use tests/support/home.rs")
    home = {name: os.environ[name] for name in HOME_VARIABLES}
    return {**get_default_environment(), **home, **(spec.get("env") or {})}


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
    if spec["transport"] == "stdio":
        server = StdioServerParameters(
            command=spec["command"], args=spec.get("args", []), env=server_env(spec)
        )
        async with Client(server) as client:
            report = await listen(client, spec)
    else:
        headers = {"Authorization": f"Bearer {spec['token']}"} if spec.get("token") else {}
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(spec["url"], http_client=http)
            async with Client(transport) as client:
                report = await listen(client, spec)
    print(json.dumps(report))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        anyio.run(main, json.load(f))

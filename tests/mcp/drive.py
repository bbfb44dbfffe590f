"""Drive `toolgate serve` with the official Python MCP SDK and report what happened.

Usage: python drive.py PLAN.json

PLAN is {"sessions": [SESSION, ...]}; every session runs concurrently in its own
`ClientSession`. A SESSION is

    {"transport": "stdio", "command": "...", "args": [...], "env": {...}, "steps": [...]}
    {"transport": "http", "url": "http://127.0.0.1:PORT/mcp", "token": "...", "steps": [...]}

With `"client": "modern"` a session uses the SDK's high-level `Client`, which speaks the
2026-07-28 revision (no `initialize`, metadata on every request) when the server offers it;
such a session takes only `list` and `call` steps.

With `"elicit": [ANSWER, ...]` a session declares the elicitation capability and answers the
forms the server sends (or, at 2026-07-28, puts in `input_required` results) in order, each
ANSWER being {"action": "accept" | "decline" | "cancel", "content": {...}}, optionally with
"hold": SECONDS to wait that long before answering, and "touch": PATH to create that file as
soon as the form arrives (so a test knows it did). Past the list, forms are cancelled. The
session report then has "elicited": one {"message", "schema"} per form, with
"withdrawn": true for a form the server cancelled while it was held.

Each STEP is one of

    {"op": "list"}
    {"op": "call", "tool": "read_file", "arguments": {...}}
    {"op": "cancel", "tool": "run_command", "arguments": {...}, "after": 0.5}
        starts the call with a progress callback, abandons it once a progress notification
        arrived and, with "until": PATH, that file exists (or after `after` seconds), which
        makes the SDK send `notifications/cancelled` (or, at 2026-07-28 over HTTP, close the
        stream)
    {"op": "sleep", "seconds": 0.2}
    {"op": "signal", "pidfile": "...", "signal": "SIGUSR1"}
    {"op": "signal", ..., "await": "notifications/tools/list_changed", "within": 10}
        also waits, at most `within` seconds, until the server sends that notification after
        the signal; the report says whether it came ("heard": true or false)

The report, printed to standard output as JSON, is {"sessions": [{"init": ..., "steps":
[...]}, ...]} with one result per step. Assertions live in the Rust test that runs this
(crates/toolgate/tests/mcp.rs); this script only drives and records.
"""

import contextlib
import json
import os
import signal
import sys
import time

import anyio

from mcp import Client, ClientSession, StdioServerParameters
from mcp import types
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def result_of(result):
    text = "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")
    return {
        "isError": bool(result.is_error),
        "text": text,
        "structured": result.structured_content,
        "meta": result.meta,
    }


class Heard:
    """The notifications the server sent, by method, with a way to wait for the next one."""

    def __init__(self):
        self.counts = {}
        self.changed = anyio.Event()

    async def handler(self, message):
        method = getattr(getattr(message, "root", message), "method", None)
        if method is not None:
            self.counts[method] = self.counts.get(method, 0) + 1
            self.changed.set()
            self.changed = anyio.Event()

    async def after(self, method, seen, within):
        """Whether `method` arrives more than `seen` times within `within` seconds."""
        with anyio.move_on_after(within):
            while self.counts.get(method, 0) <= seen:
                await self.changed.wait()
        return self.counts.get(method, 0) > seen


async def run_steps(session, steps, heard=None):
    report = []
    for step in steps:
        op = step["op"]
        if op == "list":
            listed = await session.list_tools()
            report.append({"tools": [dump(t) for t in listed.tools]})
        elif op == "call":
            # With "until_ok": SECONDS, the call is repeated until it succeeds or time runs out
            # (an upstream coming back after a restart); the last result is reported.
            deadline = time.monotonic() + step.get("until_ok", 0)
            while True:
                try:
                    result = await session.call_tool(step["tool"], step.get("arguments", {}))
                    outcome = result_of(result)
                except Exception as e:  # a JSON-RPC error: record it, go on
                    outcome = {"error": str(e)}
                if not outcome.get("isError", True) or time.monotonic() >= deadline:
                    break
                await anyio.sleep(0.2)
            report.append(outcome)
        elif op == "cancel":
            progress = []
            got_progress = anyio.Event()

            async def on_progress(value, total, message):
                progress.append({"progress": value, "message": message})
                got_progress.set()

            started = time.monotonic()
            outcome = {"completed": None}

            async def call():
                result = await session.call_tool(
                    step["tool"], step.get("arguments", {}), progress_callback=on_progress
                )
                outcome["completed"] = result_of(result)

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                with anyio.move_on_after(step.get("after", 5.0)):
                    await got_progress.wait()
                    until = step.get("until")
                    while until and not os.path.exists(until):
                        await anyio.sleep(0.02)
                group.cancel_scope.cancel()
            report.append(
                {
                    "cancelled_after": time.monotonic() - started,
                    "progress": progress,
                    "completed": outcome["completed"],
                }
            )
        elif op == "signal":
            # Sends a signal to the process whose pid is in `pidfile` (an upstream behind the
            # server under test).
            awaited = step.get("await")
            seen = heard.counts.get(awaited, 0) if awaited and heard else 0
            with open(step["pidfile"]) as f:
                os.kill(int(f.read().strip()), getattr(signal, step["signal"]))
            entry = {"signalled": step["signal"]}
            if awaited:
                if heard is None:
                    raise ValueError("`await` needs a session that records notifications")
                entry["heard"] = await heard.after(awaited, seen, step.get("within", 10))
            report.append(entry)
        elif op == "sleep":
            await anyio.sleep(step["seconds"])
            report.append({"slept": step["seconds"]})
        else:
            raise ValueError(f"unknown step {op!r}")
    return report


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


def elicitation(spec, elicited):
    """The session's elicitation callback, answering as `spec["elicit"]` says; None (no
    capability declared) without that key."""
    if "elicit" not in spec:
        return None
    answers = list(spec["elicit"])

    async def callback(context, params):
        form = dump(params)
        entry = {"message": form.get("message"), "schema": form.get("requestedSchema")}
        elicited.append(entry)
        answer = answers.pop(0) if answers else {"action": "cancel"}
        if "touch" in answer:
            open(answer["touch"], "w").close()
        if "hold" in answer:
            try:
                await anyio.sleep(answer["hold"])
            except anyio.get_cancelled_exc_class():
                entry["withdrawn"] = True
                raise
        return types.ElicitResult(action=answer["action"], content=answer.get("content"))

    return callback


@contextlib.asynccontextmanager
async def modern_client(spec, elicitation_callback=None):
    """The SDK's 2026-07-28 `Client` for the session `spec`, over stdio or HTTP."""
    if spec["transport"] == "stdio":
        server = StdioServerParameters(
            command=spec["command"], args=spec.get("args", []), env=server_env(spec)
        )
        async with Client(server, elicitation_callback=elicitation_callback) as client:
            yield client
        return
    headers = {"Authorization": f"Bearer {spec['token']}"} if spec.get("token") else {}
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(spec["url"], http_client=http)
        async with Client(transport, elicitation_callback=elicitation_callback) as client:
            yield client


async def run_modern(spec):
    elicited = []
    async with modern_client(spec, elicitation(spec, elicited)) as client:
        return {"init": {"protocolVersion": client.session.protocol_version},
                "steps": await run_steps(client, spec["steps"]), "elicited": elicited}


async def run_session(spec):
    if spec.get("client") == "modern":
        return await run_modern(spec)
    elicited = []
    callback = elicitation(spec, elicited)
    heard = Heard()
    if spec["transport"] == "stdio":
        params = StdioServerParameters(
            command=spec["command"], args=spec.get("args", []), env=server_env(spec)
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(
                read, write, elicitation_callback=callback, message_handler=heard.handler
            ) as session:
                init = await session.initialize()
                steps = await run_steps(session, spec["steps"], heard)
    else:
        headers = {"Authorization": f"Bearer {spec['token']}"} if spec.get("token") else {}
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(spec["url"], http_client=http) as (read, write):
                async with ClientSession(
                    read, write, elicitation_callback=callback, message_handler=heard.handler
                ) as session:
                    init = await session.initialize()
                    steps = await run_steps(session, spec["steps"], heard)
    return {"init": dump(init), "steps": steps, "elicited": elicited}


async def main(plan):
    sessions = plan["sessions"]
    reports = [None] * len(sessions)

    async def one(i, spec):
        reports[i] = await run_session(spec)

    async with anyio.create_task_group() as group:
        for i, spec in enumerate(sessions):
            group.start_soon(one, i, spec)
    print(json.dumps({"sessions": reports}))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        anyio.run(main, json.load(f))

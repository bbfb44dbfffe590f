"""A hostile MCP server over stdio, in raw JSON-RPC for exact control of what it writes when:
it floods toolgate with `notifications/tools/list_changed` and reports a call's progress far
faster than any client should hear it. Used by crates/toolgate/tests/upstream_floods.rs.

Usage: python flood_server.py STATE_DIR [--http]

With `--http` it serves MCP's streamable HTTP on a free port of 127.0.0.1 instead, written to
`STATE_DIR/port`, and answers `chatty` with an event stream carrying its reports.

Its tools:
- `flood` (`count`, `seconds`): returns at once, then sends `count` list_changed notifications
  spread over `seconds`. When they are sent, the tool list changes (`doomed` goes, `arrived`
  comes), one last list_changed is sent, and `flood.done` is written. Every `tools/list` it
  answers from the start of the flood on is appended to `lists.log` as the list's version.
- `doomed`, `arrived`: answer "ok"; each is listed only before, or only after, the flood.
- `chatty` (`secret`, `burst`, `label`): while the call runs, reports progress for the call's
  token (one message and one log line carrying `secret`, then `burst` progress notifications
  at once, a wrong token's, a pause, one more; each message starts with `label`), answers,
  and keeps reporting for the ended call.
"""

import json
import os
import sys
import threading
import time

STATE = sys.argv[1]
out = threading.Lock()
# 1 before the flood ends, 2 after.
version = 1
flooding = False

EMPTY = {"type": "object", "properties": {}}


def write(message):
    line = json.dumps(message) + "\n"
    with out:
        sys.stdout.write(line)
        sys.stdout.flush()


def notify(method, params=None):
    message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    write(message)


def tools():
    listed = [
        {
            "name": "flood",
            "description": "Floods the client with list_changed notifications.",
            "inputSchema": {
                "type": "object",
                "properties": {"count": {"type": "integer"}, "seconds": {"type": "number"}},
                "required": ["count", "seconds"],
            },
        },
        {
            "name": "chatty",
            "description": "Reports progress and logs, far too often, while it runs.",
            "inputSchema": {
                "type": "object",
                "properties": {"secret": {"type": "string"}, "burst": {"type": "integer"},
                               "label": {"type": "string"}},
                "required": ["secret", "burst"],
            },
        },
    ]
    listed.append(
        {"name": "doomed" if version == 1 else "arrived", "description": "Answers ok.",
         "inputSchema": EMPTY}
    )
    return listed


def flood(count, seconds):
    global version
    slices = 100
    per_slice = max(1, count // slices)
    started = time.monotonic()
    sent = 0
    while sent < count:
        for _ in range(min(per_slice, count - sent)):
            notify("notifications/tools/list_changed")
            sent += 1
        # Paced against the clock, so a slow reader does not stretch the flood.
        target = started + seconds * sent / count
        time.sleep(max(0.0, target - time.monotonic()))
    version = 2
    notify("notifications/tools/list_changed")
    with open(os.path.join(STATE, "flood.done"), "w") as f:
        f.write(f"{sent}\n")


def chatty(id, params):
    token = params.get("_meta", {}).get("progressToken")
    arguments = params.get("arguments", {})
    secret = arguments["secret"]
    burst = arguments["burst"]
    label = arguments.get("label", "")

    def progress(value, message=None, token=token):
        body = {"progressToken": token, "progress": value, "total": burst + 10}
        if message is not None:
            body["message"] = f"{label} {message}".strip()
        notify("notifications/progress", body)

    def log(text, data=None):
        notify("notifications/message", {
            "level": "info", "logger": "chatty",
            "data": data if data is not None else text,
        })

    def run():
        progress(1, f"cloning with {secret}")
        log("starting", {"text": f"using {secret}", "token": secret})
        for n in range(burst):
            progress(2 + n, f"burst {n}")
        progress(5000, "wrong token", token="not-a-token-toolgate-gave")
        if isinstance(token, int):
            progress(5001, "another call's token", token=token + 1000)
        time.sleep(1.3)
        progress(burst + 5, "after the pause")
        log("after the pause")
        time.sleep(0.2)
        write({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": "chatty done"}]}})
        time.sleep(0.1)
        progress(burst + 6, "after the end")
        log("after the end")
        with open(os.path.join(STATE, "chatty.done"), "w") as f:
            f.write(json.dumps({"token": token}) + "\n")

    threading.Thread(target=run, daemon=True).start()


def chatty_events(handler, id, params):
    """`chatty` over HTTP: its reports and its answer as events of the call's own stream."""
    token = params.get("_meta", {}).get("progressToken")
    arguments = params.get("arguments", {})
    secret = arguments["secret"]
    burst = arguments["burst"]
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()

    def event(message):
        handler.wfile.write(f"event: message\ndata: {json.dumps(message)}\n\n".encode())
        handler.wfile.flush()

    def progress(value, message, token=token):
        event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": token, "progress": value, "total": burst + 10, "message": message}})

    def log(data):
        event({"jsonrpc": "2.0", "method": "notifications/message", "params": {
            "level": "info", "logger": "chatty", "data": data}})

    progress(1, f"cloning with {secret}")
    log({"text": f"using {secret}", "token": secret})
    for n in range(burst):
        progress(2 + n, f"burst {n}")
    progress(5000, "wrong token", token="not-a-token-toolgate-gave")
    time.sleep(1.3)
    progress(burst + 5, "after the pause")
    time.sleep(0.2)
    event({"jsonrpc": "2.0", "id": id, "result": {
        "content": [{"type": "text", "text": "chatty done"}]}})
    try:
        progress(burst + 6, "after the end")
        log("after the end")
    except OSError:
        pass
    with open(os.path.join(STATE, "chatty.done"), "w") as f:
        f.write(json.dumps({"token": token}) + "\n")


def serve_http():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, message, status=200):
            body = json.dumps(message).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Mcp-Session-Id", "flood-session")
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            message = json.loads(self.rfile.read(length))
            method, id = message.get("method"), message.get("id")
            params = message.get("params") or {}
            if id is None:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif method == "initialize":
                self.answer({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": params["protocolVersion"],
                    "capabilities": {"tools": {}, "logging": {}},
                    "serverInfo": {"name": "toolgate-flood-server", "version": "1.0"},
                }})
            elif method == "tools/list":
                self.answer({"jsonrpc": "2.0", "id": id, "result": {"tools": tools()}})
            elif method == "tools/call" and params.get("name") == "chatty":
                chatty_events(self, id, params)
            elif method == "ping":
                self.answer({"jsonrpc": "2.0", "id": id, "result": {}})
            else:
                self.answer({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32601, "message": "not offered over http"}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_file = os.path.join(STATE, "port")
    with open(port_file + ".part", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".part", port_file)
    server.serve_forever()


def main():
    global flooding
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            write({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}, "logging": {}},
                "serverInfo": {"name": "toolgate-flood-server", "version": "1.0"},
            }})
        elif method == "tools/list":
            if flooding:
                with open(os.path.join(STATE, "lists.log"), "a") as f:
                    f.write(f"{version}\n")
            write({"jsonrpc": "2.0", "id": id, "result": {"tools": tools()}})
        elif method == "tools/call":
            name = params.get("name")
            arguments = params.get("arguments", {})
            if name == "flood":
                flooding = True
                threading.Thread(
                    target=flood, args=(arguments["count"], arguments["seconds"]), daemon=True
                ).start()
                write({"jsonrpc": "2.0", "id": id, "result": {
                    "content": [{"type": "text", "text": "flooding"}]}})
            elif name == "chatty":
                chatty(id, params)
            elif name in ("doomed", "arrived"):
                write({"jsonrpc": "2.0", "id": id, "result": {
                    "content": [{"type": "text", "text": "ok"}]}})
            else:
                write({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32602, "message": f"unknown tool {name}"}})
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": id, "result": {}})
        elif id is not None:
            write({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601, "message": "no such method"}})


if __name__ == "__main__":
    if "--http" in sys.argv[2:]:
        serve_http()
    else:
        main()

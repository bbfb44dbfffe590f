#!/usr/bin/env python3
"""A streamable-HTTP MCP server whose one tool, `wait`, never answers.

    python3 tests/upstream/hanging_http.py STATE_DIR

Listens on a free port of 127.0.0.1 and prints it on standard output. `initialize` and
`tools/list` are answered at once; each `tools/call` is appended to STATE_DIR/calls.log and its
connection is then held, unanswered, until the client closes it. Notifications get 202.
"""

import json
import os
import socket
import sys
import threading

STATE = sys.argv[1]
LOCK = threading.Lock()
TOOLS = {"tools": [{"name": "wait", "inputSchema": {"type": "object"}}]}
INIT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
        "serverInfo": {"name": "hanging", "version": "1"}}


def request(conn):
    """The body of the one request on `conn`, or None when it closed first."""
    buffered = b""
    while b"\r\n\r\n" not in buffered:
        data = conn.recv(65536)
        if not data:
            return None
        buffered += data
    head, body = buffered.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        data = conn.recv(65536)
        if not data:
            return None
        body += data
    return json.loads(body)


def reply(conn, status, body=b""):
    conn.sendall(b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
                 b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def serve(conn):
    with conn:
        message = request(conn)
        if message is None:
            return
        method = message.get("method")
        if "id" not in message:
            reply(conn, b"202 Accepted")
        elif method in ("initialize", "tools/list"):
            result = INIT if method == "initialize" else TOOLS
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            reply(conn, b"200 OK", json.dumps(answer).encode())
        else:
            with LOCK, open(os.path.join(STATE, "calls.log"), "a") as log:
                log.write(json.dumps(message) + "\n")
            while conn.recv(65536):
                pass


def main():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print(listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()

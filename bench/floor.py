#!/usr/bin/env python3
"""An MCP server that answers every request at once with a canned result: the floor under any
server, what a client, Python and the pipes or the loopback socket cost.

    python3 bench/floor.py            # newline-delimited JSON-RPC on standard input and output
    python3 bench/floor.py --http     # streamable HTTP on 127.0.0.1, a port of its own choosing,
                                      # announced on standard error as `serving MCP at http://…/mcp`

`initialize` gets a server's answer, `tools/list` one tool (`read_file`, no output schema),
any other request the same small text result; notifications get nothing (over HTTP, 202).
Over HTTP every answer is one `application/json` write; a GET (the optional event stream)
gets 405 and a DELETE 200, as the transport allows. Nothing is checked: this is what the
client pays with a server that does no work at all.
"""

import re
import socket
import sys
import threading

ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')
INIT = (b'{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},'
        b'"serverInfo":{"name":"floor","version":"1"}}')
LIST = (b'{"tools":[{"name":"read_file","inputSchema":{"type":"object",'
        b'"properties":{"path":{"type":"string"}}}},{"name":"read_text_file","inputSchema":'
        b'{"type":"object","properties":{"path":{"type":"string"}}}}]}')
READ = b'{"content":[{"type":"text","text":"line 0"}],"isError":false}'


def answer(message):
    """The answer to one JSON-RPC message, or None for a notification or a response."""
    found = ID.search(message)
    if not found or b'"method"' not in message:
        return None
    if b'"initialize"' in message:
        result = INIT
    elif b'"tools/list"' in message:
        result = LIST
    else:
        result = READ
    return b'{"jsonrpc":"2.0","id":' + found.group(1) + b',"result":' + result + b'}'


def stdio():
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        reply = answer(line)
        if reply is not None:
            out.write(reply + b"\n")
            out.flush()


def connection(conn):
    buffered = b""
    with conn:
        while True:
            while b"\r\n\r\n" not in buffered:
                data = conn.recv(65536)
                if not data:
                    return
                buffered += data
            head, buffered = buffered.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            method = lines[0].split(b" ", 1)[0]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(buffered) < length:
                data = conn.recv(65536)
                if not data:
                    return
                buffered += data
            body, buffered = buffered[:length], buffered[length:]
            reply = answer(body) if method == b"POST" else None
            if method == b"GET":
                status, reply = b"405 Method Not Allowed", b""
            elif method == b"DELETE":
                status, reply = b"200 OK", b""
            elif reply is None:
                status, reply = b"202 Accepted", b""
            else:
                status = b"200 OK"
            conn.sendall(
                b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
                b"mcp-session-id: floor\r\ncontent-length: " + str(len(reply)).encode()
                + b"\r\n\r\n" + reply
            )


def http():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    host, port = listener.getsockname()
    print(f"serving MCP at http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=connection, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    http() if sys.argv[1:] == ["--http"] else stdio()

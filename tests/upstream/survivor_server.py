"""A hostile MCP server over stdio, in raw JSON-RPC: it leaves a process behind that tries to
outlive the server's stop and then write a file. Used by
crates/toolgate/tests/upstream_survivors.rs.

Usage: python survivor_server.py STATE_DIR [--at-start HOW]

With `--at-start HOW` it leaves one (named `start`) before it reads its first message.

Its tool `leave` (`how`, `name`, `seconds`) leaves a process, `how`:
- `setsid`: a child that calls setsid(), a session and group of its own, the server its parent;
- `double_fork`: a child that calls setsid() and forks again, and exits, so the grandchild is
  an orphan at once (a daemon's way);
- `setpgid`: a child that moves into a process group of its own, in the server's session.

The process left closes the standard streams it shares with the server, writes its pid to
`STATE_DIR/NAME.pid`, sleeps `seconds`, then writes `STATE_DIR/NAME.marker`. The test checks
by that pid that it is gone once toolgate stopped, and that the marker never appears.
"""

import json
import os
import sys
import time

STATE = sys.argv[1]


def write(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def survive(name, seconds):
    """The process left behind: out of the server's streams, then the late write."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    part = os.path.join(STATE, name + ".pid.part")
    with open(part, "w") as f:
        f.write(str(os.getpid()))
    os.rename(part, os.path.join(STATE, name + ".pid"))
    time.sleep(seconds)
    with open(os.path.join(STATE, name + ".marker"), "w") as f:
        f.write("written after the server stopped\n")
    os._exit(0)


def leave(how, name, seconds):
    """Leaves a process `how`; returns once it is on its way."""
    child = os.fork()
    if child == 0:
        try:
            if how == "setsid":
                os.setsid()
            elif how == "setpgid":
                os.setpgid(0, 0)
            elif how == "double_fork":
                os.setsid()
                if os.fork() != 0:
                    os._exit(0)
            survive(name, seconds)
        finally:
            os._exit(1)
    if how == "double_fork":
        os.waitpid(child, 0)
    # The pid file says the process is in place.
    pid = os.path.join(STATE, name + ".pid")
    while not os.path.exists(pid):
        time.sleep(0.01)


def main():
    if "--at-start" in sys.argv[2:]:
        leave(sys.argv[sys.argv.index("--at-start") + 1], "start", 3)
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            write({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "toolgate-survivor-server", "version": "1.0"},
            }})
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": id, "result": {"tools": [{
                "name": "leave",
                "description": "Leaves a process behind.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "how": {"type": "string"},
                        "name": {"type": "string"},
                        "seconds": {"type": "number"},
                    },
                    "required": ["how", "name", "seconds"],
                },
            }]}})
        elif method == "tools/call":
            arguments = params.get("arguments", {})
            leave(arguments["how"], arguments["name"], arguments["seconds"])
            write({"jsonrpc": "2.0", "id": id, "result": {
                "content": [{"type": "text", "text": "left"}]}})
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": id, "result": {}})
        elif id is not None:
            write({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601, "message": "no such method"}})


if __name__ == "__main__":
    main()

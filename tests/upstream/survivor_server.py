"""A hostile MCP server, on the official Python SDK: it leaves a process behind that tries to
outlive the server's stop and then write a file. Used by
crates/toolgate/tests/upstream_survivors.rs.

Usage: python survivor_server.py STATE_DIR [--at-start HOW]

With `--at-start HOW` it leaves one (named `start`) before it reads its first message.

Its tool `leave` (`how`, `name`, `seconds`) leaves a process, `how`:
- `setsid`: a child that calls setsid(), a session and group of its own, the server its parent;
- `double_fork`: a child that calls setsid() and forks again, and exits, so the grandchild is
  an orphan at once (a daemon's way);
- `setpgid`: a child that moves into a process group of its own, in the server's session.

The process left (this file run with `--survive HOW NAME SECONDS`, not sharing the server's
standard streams) writes its pid to `STATE_DIR/NAME.pid`, sleeps `seconds`, then writes
`STATE_DIR/NAME.marker`. The test checks by that pid that it is gone once toolgate stopped, and
that the marker never appears.
"""

import os
import subprocess
import sys
import time

STATE = sys.argv[1]


def survive(how, name, seconds):
    """The process left behind: out of the server's group `how`, then the late write."""
    if how == "setsid":
        os.setsid()
    elif how == "setpgid":
        os.setpgid(0, 0)
    elif how == "double_fork":
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
    part = os.path.join(STATE, name + ".pid.part")
    with open(part, "w") as f:
        f.write(str(os.getpid()))
    os.rename(part, os.path.join(STATE, name + ".pid"))
    time.sleep(seconds)
    with open(os.path.join(STATE, name + ".marker"), "w") as f:
        f.write("written after the server stopped\n")


def leave(how, name, seconds):
    """Leaves a process `how`, a child of the server; returns once it is on its way."""
    child = subprocess.Popen(
        [sys.executable, __file__, STATE, "--survive", how, name, str(seconds)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if how == "double_fork":
        child.wait()
    # The pid file says the process is in place.
    pid = os.path.join(STATE, name + ".pid")
    while not os.path.exists(pid):
        time.sleep(0.01)


def main():
    if "--survive" in sys.argv[2:]:
        how, name, seconds = sys.argv[sys.argv.index("--survive") + 1:][:3]
        survive(how, name, float(seconds))
        return
    if "--at-start" in sys.argv[2:]:
        leave(sys.argv[sys.argv.index("--at-start") + 1], "start", 3)

    from mcp.server.mcpserver import MCPServer

    server = MCPServer("toolgate-survivor-server")

    @server.tool(name="leave", description="Leaves a process behind.")
    def leave_tool(how: str, name: str, seconds: float) -> str:
        leave(how, name, seconds)
        return "left"

    server.run()


if __name__ == "__main__":
    main()

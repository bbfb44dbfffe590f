"""An MCP server for toolgate's upstream sandbox tests, on the official Python SDK.

Usage: python probe_server.py

Its one tool, `probe`, runs the Python source it is given in a process of its own (a child of
the server, so confined exactly as the server is) and returns what that process printed. The
tests send escape attempts that print `REFUSED ...` or `ESCAPED ...`.
"""

import subprocess
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool()
def probe(python: str) -> str:
    """Runs `python` in a process of its own and returns its standard output and error."""
    done = subprocess.run(
        [sys.executable, "-c", python],
        capture_output=True,
        text=True,
        timeout=20,
        stdin=subprocess.DEVNULL,
    )
    return done.stdout + (f"\n[stderr] {done.stderr}" if done.stderr else "")


if __name__ == "__main__":
    server.run()

"""An MCP server whose tool result holds live-looking credentials, for toolgate's redaction
tests, on the official Python SDK.

Usage: python secrets_server.py STATE_DIR

Its one tool, `deploy_log`, makes fresh random keys in real providers' formats on every call,
appends them to STATE_DIR/keys.jsonl (so the test knows what must not reach the client), and
returns them in both the text content and the structured content of its result, as a careless
tool would.
"""

import json
import pathlib
import secrets
import string
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

STATE = pathlib.Path(sys.argv[1])
URLSAFE = string.ascii_letters + string.digits + "-_"
ALNUM = string.ascii_letters + string.digits
BASE64 = string.ascii_letters + string.digits + "+/"

server = MCPServer("secrets")


def random(alphabet: str, count: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(count))


@server.tool()
def deploy_log(service: str) -> dict[str, Any]:
    """Returns the log of the last deployment of `service`."""
    keys = {
        "anthropic": f"sk-ant-api03-{random(URLSAFE, 93)}AA",
        "github": f"ghp_{random(ALNUM, 36)}",
        "aws_secret": random(BASE64, 40),
        "stripe": f"sk_live_{random(ALNUM, 24)}",
    }
    with (STATE / "keys.jsonl").open("a") as log:
        log.write(json.dumps(keys) + "\n")
    return {
        "service": service,
        "log": (
            f"deploying {service}\n"
            f"export ANTHROPIC_API_KEY={keys['anthropic']}\n"
            f"git push https://x-access-token:{keys['github']}@github.com/acme/{service}.git\n"
            "done"
        ),
        "environment": {
            "aws_secret_access_key": keys["aws_secret"],
            "STRIPE_KEY": keys["stripe"],
        },
    }


if __name__ == "__main__":
    server.run()

"""An MCP server over stdio offering the fixture tools the MCP conformance suite calls, so the
suite can run against `toolgate serve --http` placed in front of it (see
`upstream_conformance_suite` in crates/toolgate/tests/upstream.rs).

Usage: python conformance_upstream.py
"""

import json
import sys
import time

PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
RESOURCE = {
    "type": "resource",
    "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain",
                 "text": "This is an embedded resource content."},
}
EMPTY = {"type": "object", "properties": {}}

NOTIFYING = {
    "test_tool_with_logging": "Tests tool that emits log messages during execution",
    "test_tool_with_progress": "Tests tool that reports progress notifications",
}

TOOLS = {
    "test_simple_text": (
        "Tests simple text content response",
        EMPTY,
        {"content": [{"type": "text", "text": "This is a simple text response for testing."}]},
    ),
    "test_image_content": (
        "Tests image content response",
        EMPTY,
        {"content": [{"type": "image", "data": PIXEL, "mimeType": "image/png"}]},
    ),
    "test_audio_content": (
        "Tests audio content response",
        EMPTY,
        {"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]},
    ),
    "test_embedded_resource": (
        "Tests embedded resource content response",
        EMPTY,
        {"content": [RESOURCE]},
    ),
    "test_multiple_content_types": (
        "Tests response with multiple content types (text, image, resource)",
        EMPTY,
        {"content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": PIXEL, "mimeType": "image/png"},
            RESOURCE,
        ]},
    ),
    "test_error_handling": (
        "Tests error response handling",
        EMPTY,
        {"content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}],
         "isError": True},
    ),
    "json_schema_2020_12_tool": (
        "Tool with JSON Schema 2020-12 features",
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"type": "object", "properties": {
                "street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
        {"content": [{"type": "text", "text": "ok"}]},
    ),
}


def write(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    if not line.strip():
        continue
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        write({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "toolgate-conformance-upstream", "version": "1.0"},
        }})
    elif method == "tools/list":
        write({"jsonrpc": "2.0", "id": id, "result": {"tools": [
            {"name": name, "description": description, "inputSchema": schema}
            for name, (description, schema, _) in TOOLS.items()
        ] + [{"name": name, "description": description, "inputSchema": EMPTY}
             for name, description in NOTIFYING.items()]}})
    elif method == "tools/call":
        name = message["params"]["name"]
        if name == "test_tool_with_logging":
            for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
                write({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "data": text}})
                time.sleep(0.05)
            write({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "logged"}]}})
        elif name == "test_tool_with_progress":
            token = message["params"].get("_meta", {}).get("progressToken")
            for value in (0, 50, 100):
                if token is not None:
                    write({"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {"progressToken": token, "progress": value, "total": 100}})
                time.sleep(0.05)
            write({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "progressed"}]}})
        elif name in TOOLS:
            write({"jsonrpc": "2.0", "id": id, "result": TOOLS[name][2]})
        else:
            write({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": f"unknown tool {name}"}})
    elif id is not None:
        write({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}})

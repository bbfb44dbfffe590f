"""A scripted stand-in for the Anthropic Messages API, for driving a real agent client (Claude
Code) against toolgate without a model.

Usage: python scripted_model.py SCRIPT LOG

It listens on 127.0.0.1 on a free port and prints `port N` on its standard output once it is
ready. Every request is appended to LOG as one JSON line (`method`, `path`, `body`) before it is
answered, so a test can check what the client sent: the `tools` it offered the model and the
`tool_result` blocks it gave back.

SCRIPT is a JSON object `{"turns": [TURN, ...]}`. The client's conversation requests are
answered turn by turn, the turn chosen by how many assistant messages the request already
holds, so a request the client repeats gets the same answer. A TURN is one of

    {"tool_use": {"name": "mcp__toolgate__read_file", "input": {"path": "a.txt"}}}
    {"text": "done"}

and may also carry, done in this order before it answers:

- `"signal": {"pidfile": PATH, "signal": "SIGUSR1"}`: sends the signal, once, to the process
  whose pid is in PATH (a test server that changes its tools on a signal);
- `"wait_for": {"file": PATH, "after": TEXT, "contains": TEXT, "timeout": SECONDS}`: holds the
  answer until PATH contains `contains` after the first `after` (both optional but
  `contains`), for a turn that must come after something else has happened, such as a
  notification reaching the client and the client acting on it. Past the last turn, and for the
client's side requests (those that offer no tools: titles, summaries, quota checks), the answer
is a short text that ends the turn.

Other endpoints the client may touch (`/v1/messages/count_tokens`, `/v1/models`) get small
harmless answers; anything else gets a 404 in the API's error shape.
"""

import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT = json.load(open(sys.argv[1]))
LOG = sys.argv[2]
LOCK = threading.Lock()
MODEL = "claude-scripted-1"
# A repeated request must not signal again.
SIGNALLED = set()


def log(entry):
    with LOCK:
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")


def wait_for(condition):
    deadline = time.monotonic() + condition.get("timeout", 30)
    while time.monotonic() < deadline:
        try:
            with open(condition["file"]) as f:
                text = f.read()
            after = condition.get("after")
            if after is not None:
                start = text.find(after)
                text = "" if start < 0 else text[start + len(after) :]
            if condition["contains"] in text:
                return True
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    return False


def turn_for(body):
    """The scripted turn that answers `body`, or None for a side request or past the end."""
    if not body.get("tools"):
        return None
    index = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    turns = SCRIPT.get("turns", [])
    if index >= len(turns):
        return None
    return index, turns[index]


def blocks_for(found):
    """The content blocks and stop reason of the answer."""
    if found is None:
        return [{"type": "text", "text": "Done."}], "end_turn"
    index, turn = found
    if "signal" in turn and index not in SIGNALLED:
        SIGNALLED.add(index)
        with open(turn["signal"]["pidfile"]) as f:
            os.kill(int(f.read().strip()), getattr(signal, turn["signal"]["signal"]))
    if "wait_for" in turn and not wait_for(turn["wait_for"]):
        return [{"type": "text", "text": f"gave up waiting: {turn['wait_for']}"}], "end_turn"
    if "tool_use" in turn:
        use = turn["tool_use"]
        return [
            {
                "type": "tool_use",
                "id": f"toolu_scripted_{index:02}",
                "name": use["name"],
                "input": use.get("input", {}),
            }
        ], "tool_use"
    return [{"type": "text", "text": turn.get("text", "Done.")}], "end_turn"


def usage():
    return {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def sse(blocks, stop_reason, message_id):
    """The answer as the event stream the API sends for `stream: true`."""
    events = []

    def event(kind, **fields):
        events.append(f"event: {kind}\ndata: {json.dumps(dict(type=kind, **fields))}\n\n")

    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage(),
    }
    event("message_start", message=message)
    for i, block in enumerate(blocks):
        if block["type"] == "tool_use":
            event("content_block_start", index=i, content_block=dict(block, input={}))
            text = json.dumps(block["input"])
            # In two parts, as the API streams a tool's input as partial JSON.
            for part in (text[: len(text) // 2], text[len(text) // 2 :]):
                delta = {"type": "input_json_delta", "partial_json": part}
                event("content_block_delta", index=i, delta=delta)
        else:
            event("content_block_start", index=i, content_block={"type": "text", "text": ""})
            delta = {"type": "text_delta", "text": block["text"]}
            event("content_block_delta", index=i, delta=delta)
        event("content_block_stop", index=i)
    event(
        "message_delta",
        delta={"stop_reason": stop_reason, "stop_sequence": None},
        usage={"output_tokens": 5},
    )
    event("message_stop")
    return "".join(events)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    counter = 0

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_scripted")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        log({"method": "GET", "path": self.path})
        path = self.path.split("?")[0]
        if path.startswith("/v1/models"):
            model = {
                "type": "model",
                "id": MODEL,
                "display_name": "Scripted",
                "created_at": "2026-01-01T00:00:00Z",
            }
            if path.rstrip("/") == "/v1/models":
                listing = {"data": [model], "has_more": False, "first_id": MODEL, "last_id": MODEL}
                self.reply(200, json.dumps(listing))
            else:
                self.reply(200, json.dumps(model))
            return
        self.not_found()

    def do_HEAD(self):
        log({"method": "HEAD", "path": self.path})
        self.reply(200, "")

    def not_found(self):
        error = {"type": "not_found_error", "message": f"no {self.path} here"}
        self.reply(404, json.dumps({"type": "error", "error": error}))

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": raw.decode(errors="replace")}
        log({"method": "POST", "path": self.path, "body": body})
        path = self.path.split("?")[0]
        if path == "/v1/messages/count_tokens":
            self.reply(200, json.dumps({"input_tokens": 10}))
            return
        if path != "/v1/messages":
            self.not_found()
            return
        with LOCK:
            Handler.counter += 1
            message_id = f"msg_scripted_{Handler.counter:03}"
        blocks, stop_reason = blocks_for(turn_for(body))
        if body.get("stream"):
            self.reply(200, sse(blocks, stop_reason, message_id), "text/event-stream")
            return
        message = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage(),
        }
        self.reply(200, json.dumps(message))


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

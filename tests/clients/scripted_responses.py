"""A scripted stand-in for the OpenAI Responses API, for driving a real agent client (Codex CLI)
against toolgate without a model.

Usage: python scripted_responses.py SCRIPT LOG

It listens on 127.0.0.1 on a free port and prints `port N` on its standard output once it is
ready. Every request is appended to LOG as one JSON line (`method`, `path`, `body`) before it is
answered, so a test can check what the client sent: the `tools` it offered the model and the
`function_call_output` items it gave back.

SCRIPT is a JSON object `{"turns": [TURN, ...]}`. The client's requests to `/v1/responses` are
answered turn by turn, the turn chosen by how many `function_call` items the request's input
already holds, so a request the client repeats gets the same answer. A TURN is one of

    {"function_call": {"namespace": "mcp__toolgate", "name": "read_file",
                       "arguments": {"path": "a.txt"}}}
    {"text": "done"}

Past the last turn the answer is a short text that ends the turn. Anything else gets a 404.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT = json.load(open(sys.argv[1]))
LOG = sys.argv[2]
LOCK = threading.Lock()
MODEL = "gpt-scripted-1"


def log(entry):
    with LOCK:
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")


def turn_for(body):
    """The index and scripted turn that answer `body`, or None past the end."""
    items = body.get("input", [])
    index = sum(1 for item in items if item.get("type") == "function_call")
    turns = SCRIPT.get("turns", [])
    if index >= len(turns):
        return None
    return index, turns[index]


def output_item(found):
    if found is not None:
        index, turn = found
        if "function_call" in turn:
            call = turn["function_call"]
            item = {
                "type": "function_call",
                "id": f"fc_scripted_{index:02}",
                "call_id": f"call_scripted_{index:02}",
                "name": call["name"],
                "arguments": json.dumps(call.get("arguments", {})),
                "status": "completed",
            }
            if "namespace" in call:
                item["namespace"] = call["namespace"]
            return item
        text = turn.get("text", "Done.")
    else:
        text = "Done."
    return {
        "type": "message",
        "id": "msg_scripted",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def sse(item, response_id):
    """The answer as the event stream the API sends for `stream: true`."""
    response = {
        "id": response_id,
        "object": "response",
        "model": MODEL,
        "status": "in_progress",
        "output": [],
    }
    events = [("response.created", {"response": response})]
    events.append(("response.output_item.added", {"output_index": 0, "item": item}))
    events.append(("response.output_item.done", {"output_index": 0, "item": item}))
    done = dict(
        response,
        status="completed",
        output=[item],
        usage={
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    )
    events.append(("response.completed", {"response": done}))
    text = ""
    for kind, fields in events:
        text += f"event: {kind}\ndata: {json.dumps(dict(type=kind, **fields))}\n\n"
    return text.encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, content_type, data):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        log({"method": "GET", "path": self.path, "body": None})
        if self.path.split("?")[0].endswith("/models"):
            self.reply(200, "application/json", json.dumps({"models": []}).encode())
        else:
            self.reply(404, "application/json", b'{"error": {"message": "not found"}}')

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        log({"method": "POST", "path": self.path, "body": body})
        if self.path.split("?")[0] != "/v1/responses":
            self.reply(404, "application/json", b'{"error": {"message": "not found"}}')
            return
        found = turn_for(body)
        response_id = f"resp_scripted_{0 if found is None else found[0]:02}"
        self.reply(200, "text/event-stream", sse(output_item(found), response_id))


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"port {server.server_address[1]}", flush=True)
server.serve_forever()

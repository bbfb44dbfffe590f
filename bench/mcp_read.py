#!/usr/bin/env python3
"""toolgate's builtin read over stdio and streamable HTTP, against the floor and the reference.

In one run, every target reads the same small file N times, one call at a time, after a
warm-up, in alternating blocks so that machine noise falls on all of them:

- the floor: a server that answers every request at once (bench/floor.py; what the client and
  the pipes or the loopback socket cost), over stdio and over HTTP, for the raw clients and for
  the SDK, so that each of toolgate's rows has the floor of its own client beside it;
- `toolgate serve` `read_file` over stdio, with the same minimal JSON-RPC client
  (newline-delimited, no SDK);
- `toolgate serve --http` `read_file` with a raw keep-alive `http.client` connection, which
  writes each request's head and body in two writes, as `http.client` does for a body it
  streams (the case Nagle's algorithm punishes);
- `@modelcontextprotocol/server-filesystem` `read_text_file` over stdio, the reference;
- with the official Python SDK (`tests/mcp/drive.py`'s, from target/test-deps/venv), toolgate
  `read_file` over stdio and over streamable HTTP, alternating, in a child process.

It prints the median and 99th percentile of each, the ratios the targets name, the CPU time
toolgate spends per call over stdio and over HTTP (all its threads, warm-up calls included),
toolgate's idle memory and how long it takes from process start to answering `initialize`.

    cargo build --release -p toolgate
    scripts/test-deps      # target/test-deps: Node 22, server-filesystem, the Python SDK
    python3 bench/mcp_read.py [--calls 1000] [--toolgate target/release/toolgate]

`--sync always` runs toolgate with `[audit] sync = "always"` (every record flushed before its
answer), whose target is p50 <= 0.75x the reference.

Targets: builtin read p50 <= 0.25x and p99 <= 0.5x the reference; over HTTP, p50 <= 1.5x the
same client over stdio (raw client and SDK alike); idle RSS <= 20 MB, initialize <= 50 ms.
The script reports them; it does not fail on them.

toolgate writes every call's audit record, durably, before answering it. The log goes to a
fresh state directory under target/, on the checkout's disk; `--state DIR` puts it elsewhere
(on a tmpfs such as /dev/shm, fsync costs nothing, which shows what the dispatch itself costs).
"""

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPS = os.path.join(ROOT, "target", "test-deps", "node", "node_modules")
# The reference server, @modelcontextprotocol/server-filesystem, as scripts/test-deps installs it.
REFERENCE = os.path.join(DEPS, "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
VENV_PYTHON = os.path.join(ROOT, "target", "test-deps", "venv", "bin", "python")
TOKEN = "bench-0123456789abcdef0123456789abcdef"
PROTOCOL = "2025-11-25"

# A server that answers every request at once with a canned result (bench/floor.py): the floor
# under any server, what the client, Python and the pipes or the loopback socket cost.
FLOOR = os.path.join(ROOT, "bench", "floor.py")


class Server:
    """A server child and a newline-delimited JSON-RPC conversation with it."""

    def __init__(self, argv, env=None):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.next_id = 0

    def request(self, method, params):
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            answer = self.proc.stdout.readline()
            if not answer:
                raise RuntimeError(f"{method}: the server closed its output")
            message = json.loads(answer)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def initialize(self):
        result = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        )
        answered = time.perf_counter() - self.started
        line = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return result, answered

    def rss_kib(self):
        return rss_kib(self.proc.pid)

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def cpu_seconds(pid):
    """The CPU time the process's live threads have run, from /proc (nanosecond counts, where
    the process's own utime ticks would be too coarse for some thousand calls)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # the thread ended meanwhile
    return total / 1e9


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class HttpServer:
    """A server child that announces `serving MCP at http://ADDR/mcp` on its standard error,
    or listens on a given port."""

    def __init__(self, argv, env=None, announced=True, addr=None):
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE if announced else subprocess.DEVNULL, env=env,
        )
        if announced:
            for line in self.proc.stderr:
                line = line.decode(errors="replace")
                marker = "serving MCP at http://"
                if marker in line:
                    self.addr = line.split(marker, 1)[1].strip().removesuffix("/mcp")
                    break
            else:
                raise RuntimeError(f"{argv[0]} stopped before serving")
            # Keep reading, so that the server never blocks on a full pipe.
            threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        else:
            self.addr = addr
            host, port = addr.rsplit(":", 1)
            deadline = time.monotonic() + 30
            while True:
                try:
                    http.client.HTTPConnection(host, int(port), timeout=1).connect()
                    break
                except OSError:
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        raise RuntimeError(f"{argv[0]} is not listening on {addr}")
                    time.sleep(0.05)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class HttpClient:
    """One keep-alive `http.client` connection to a streamable HTTP server, head and body of
    each request in two writes."""

    def __init__(self, addr, path="/mcp", token=None):
        host, port = addr.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        self.path = path
        self.token = token
        self.session = None
        self.next_id = 0
        self.json_answers = 0

    def post(self, message):
        body = json.dumps(message).encode()
        conn = self.conn
        conn.putrequest("POST", self.path, skip_accept_encoding=True)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Accept", "application/json, text/event-stream")
        conn.putheader("Content-Length", str(len(body)))
        conn.putheader("MCP-Protocol-Version", PROTOCOL)
        if self.token:
            conn.putheader("Authorization", f"Bearer {self.token}")
        if self.session:
            conn.putheader("Mcp-Session-Id", self.session)
        conn.endheaders()
        conn.send(body)
        response = conn.getresponse()
        payload = response.read()
        session = response.getheader("Mcp-Session-Id")
        if session:
            self.session = session
        kind = response.getheader("Content-Type", "")
        if response.status >= 300:
            raise RuntimeError(f"HTTP {response.status}: {payload[:200]!r}")
        if kind.startswith("application/json"):
            self.json_answers += 1
            return [json.loads(payload)] if payload else []
        messages = []
        for event in payload.replace(b"\r\n", b"\n").split(b"\n\n"):
            data = b"\n".join(
                line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")
            )
            if data.strip():
                messages.append(json.loads(data))
        return messages

    def request(self, method, params):
        self.next_id += 1
        messages = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        for message in messages:
            if message.get("id") == self.next_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
        raise RuntimeError(f"{method}: no answer in {messages}")

    def initialize(self):
        self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})


def state_dir(given):
    """Where toolgate keeps its audit log in a benchmark, and whether to remove it after."""
    if given:
        given = os.path.abspath(given)  # toolgate ignores a relative XDG_STATE_HOME
        os.makedirs(given, exist_ok=True)
        return given, False
    return tempfile.mkdtemp(prefix="bench-state-", dir=os.path.join(ROOT, "target")), True


def timed_calls(client, tool, arguments, calls):
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        result = client.request("tools/call", {"name": tool, "arguments": arguments})
        elapsed = time.perf_counter() - started
        if result.get("isError"):
            raise RuntimeError(f"{tool} failed: {result}")
        samples.append(elapsed)
    return samples


def alternate(targets, calls, warmup, block):
    """Times `calls` calls of every target, `(name, client, tool, arguments)`, after `warmup`
    each, in alternating blocks of `block`; sorted samples by name."""
    for _, client, tool, arguments in targets:
        timed_calls(client, tool, arguments, warmup)
    samples = {name: [] for name, *_ in targets}
    done = 0
    while done < calls:
        n = min(block, calls - done)
        for name, client, tool, arguments in targets:
            samples[name] += timed_calls(client, tool, arguments, n)
        done += n
    return {name: sorted(s) for name, s in samples.items()}


def sdk_samples(targets, calls, warmup, block):
    """The same with the official Python SDK, in a child process of the test venv:
    `targets` are `{"name", "transport", ...}` as bench/sdk_read.py reads them."""
    if not os.path.exists(VENV_PYTHON):
        return None
    spec = {"targets": targets, "calls": calls, "warmup": warmup, "block": block}
    done = subprocess.run(
        [VENV_PYTHON, os.path.join(ROOT, "bench", "sdk_read.py")],
        input=json.dumps(spec), capture_output=True, text=True, timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench/sdk_read.py failed: {done.stderr[-2000:]}")
    return {name: sorted(s) for name, s in json.loads(done.stdout).items()}


def percentile(sorted_samples, p):
    index = min(len(sorted_samples) - 1, max(0, round(p / 100 * len(sorted_samples)) - 1))
    return sorted_samples[index]


def ms(seconds):
    return seconds * 1000


def verdict(ok):
    return "ok" if ok else "MISSED"


def table(rows, samples):
    width = max(len(label) for _, label in rows) + 2
    print(f"{'':{width}} {'p50 ms':>9} {'p99 ms':>9}")
    for name, label in rows:
        s = samples.get(name)
        if s:
            print(f"{label:{width}} {ms(percentile(s, 50)):9.3f} {ms(percentile(s, 99)):9.3f}")


def ratio(samples, a, b, p, target, what):
    if a not in samples or b not in samples:
        return
    r = percentile(samples[a], p) / percentile(samples[b], p)
    print(f"{what}: p{p} ratio {r:.3f} (target <= {target}, {verdict(r <= target)})")


def token_config(path, extra=""):
    with open(path, "w") as f:
        f.write(extra + "[[serve.token]]\nenv = \"TOOLGATE_BENCH_TOKEN\"\n"
                "actor = \"bench\"\nprofile = \"default\"\n")


def fs_upstream(node, files):
    """toolgate.toml's entry for the reference server, as the upstream `fs`, serving `files`."""
    return ("[[upstream]]\nname = \"fs\"\n"
            f"command = [{json.dumps(node)}, {json.dumps(REFERENCE)}, {json.dumps(files)}]\n"
            # The server reads its root, under /tmp, which its sandbox denies unless granted.
            f"[upstream.sandbox]\nread = [{json.dumps(files)}]\n\n")


def admit(toolgate, upstream, config, env):
    """Admits `upstream`'s `read_text_file` as read-only, or stops the script."""
    admitted = subprocess.run(
        [toolgate, "tools", "admit", upstream, "read_text_file", "--effect", "read_only",
         "--config", config],
        capture_output=True, text=True, env=env,
    )
    if admitted.returncode != 0:
        sys.exit(f"toolgate tools admit {upstream} failed: {admitted.stderr}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--block", type=int, default=100, help="calls per alternating block")
    parser.add_argument("--toolgate", default=os.path.join(ROOT, "target", "release", "toolgate"))
    parser.add_argument("--node", default=os.path.join(DEPS, "node", "bin", "node"))
    parser.add_argument("--state", help="toolgate's state directory, where its audit log goes")
    parser.add_argument("--sync", choices=["effects", "always"], default="effects",
                        help="the audit log's [audit] sync setting (default: effects, toolgate's own)")
    args = parser.parse_args()
    reference = REFERENCE
    for path in (args.toolgate, args.node, reference):
        if not os.path.exists(path):
            sys.exit(f"missing {path}: build toolgate in release mode and run scripts/test-deps first")
    state, remove_state = state_dir(args.state)
    # Each toolgate process keeps its own audit log.
    gate_env = lambda name: {**os.environ, "XDG_STATE_HOME": os.path.join(state, name),
                             "TOOLGATE_BENCH_TOKEN": TOKEN}

    with tempfile.TemporaryDirectory() as tmp:
        tmp = os.path.realpath(tmp)
        ws = os.path.join(tmp, "ws")
        os.makedirs(ws)
        text = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(20))
        with open(os.path.join(ws, "small.txt"), "w") as f:
            f.write(text)
        config = os.path.join(tmp, "toolgate.toml")
        token_config(config, f'[audit]\nsync = "{args.sync}"\n')
        serve = [args.toolgate, "serve", "--workspace", ws, "--config", config]
        read = ("read_file", {"path": "small.txt"})

        floor = Server([sys.executable, FLOOR])
        floor.initialize()
        floor_web = HttpServer([sys.executable, FLOOR, "--http"])
        floor_web_client = HttpClient(floor_web.addr)
        floor_web_client.initialize()
        gate = Server(serve, gate_env("stdio"))
        _, init_seconds = gate.initialize()
        time.sleep(0.2)
        idle_rss = gate.rss_kib()
        web = HttpServer(serve + ["--http", "127.0.0.1:0", "--no-console"], gate_env("http"))
        web_client = HttpClient(web.addr, token=TOKEN)
        web_client.initialize()
        ref = Server([args.node, reference, ws])
        _, ref_init_seconds = ref.initialize()
        cpu_before = {name: cpu_seconds(p.proc.pid) for name, p in (("stdio", gate), ("http", web))}
        samples = alternate(
            [
                ("floor", floor, *read),
                ("floor http", floor_web_client, *read),
                ("stdio", gate, *read),
                ("http", web_client, *read),
                ("reference", ref, "read_text_file", {"path": os.path.join(ws, "small.txt")}),
            ],
            args.calls, args.warmup, args.block,
        )
        cpu_per_call = {name: (cpu_seconds(p.proc.pid) - cpu_before[name]) / (args.calls + args.warmup)
                        for name, p in (("stdio", gate), ("http", web))}
        busy_rss = gate.rss_kib()
        json_share = web_client.json_answers / max(1, web_client.next_id)
        for server in (floor, gate, ref):
            server.close()
        web_client.conn.close()
        floor_web_client.conn.close()

        sdk = sdk_samples(
            [
                {"name": "sdk floor stdio", "transport": "stdio", "command": sys.executable,
                 "args": [FLOOR], "tool": read[0], "arguments": read[1]},
                {"name": "sdk floor http", "transport": "http", "url": f"http://{floor_web.addr}/mcp",
                 "tool": read[0], "arguments": read[1]},
                {"name": "sdk stdio", "transport": "stdio", "command": serve[0], "args": serve[1:],
                 "env": {"XDG_STATE_HOME": os.path.join(state, "sdk-stdio")}, "tool": read[0], "arguments": read[1]},
                {"name": "sdk http", "transport": "http", "url": f"http://{web.addr}/mcp",
                 "token": TOKEN, "tool": read[0], "arguments": read[1]},
            ],
            args.calls, args.warmup, args.block,
        )
        web.close()
        floor_web.close()
        if sdk:
            samples.update(sdk)
    if remove_state:
        shutil.rmtree(state, ignore_errors=True)

    print(f"{args.calls} sequential calls reading a {len(text)}-byte file per target, after "
          f"{args.warmup} warm-up calls, alternating in blocks of {args.block}")
    print(f"toolgate's audit log in {'a fresh directory under target/' if remove_state else state}, sync = {args.sync}")
    table(
        [
            ("floor", "floor (answers at once), stdio"),
            ("floor http", "floor, HTTP http.client"),
            ("stdio", "toolgate read_file, stdio"),
            ("http", "toolgate read_file, HTTP http.client"),
            ("reference", "server-filesystem read_text_file"),
            ("sdk floor stdio", "floor, SDK stdio"),
            ("sdk floor http", "floor, SDK HTTP"),
            ("sdk stdio", "toolgate read_file, SDK stdio"),
            ("sdk http", "toolgate read_file, SDK HTTP"),
        ],
        samples,
    )
    print(f"HTTP answers that were application/json: {json_share:.0%}")
    p50_target = 0.75 if args.sync == "always" else 0.25
    ratio(samples, "stdio", "reference", 50, p50_target, "builtin read / reference")
    ratio(samples, "stdio", "reference", 99, 0.5, "builtin read / reference")
    ratio(samples, "http", "stdio", 50, 1.5, "HTTP / stdio, http.client")
    ratio(samples, "sdk http", "sdk stdio", 50, 1.5, "HTTP / stdio, Python SDK")
    if sdk is None:
        print(f"(no Python SDK at {VENV_PYTHON}: run scripts/test-deps for the SDK rows)")
    for gate, floor in (("stdio", "floor"), ("http", "floor http"),
                        ("sdk stdio", "sdk floor stdio"), ("sdk http", "sdk floor http")):
        if gate in samples and floor in samples:
            above = percentile(samples[gate], 50) - percentile(samples[floor], 50)
            print(f"toolgate {gate} p50 above its floor: {ms(above):.3f} ms")
    print(f"toolgate CPU per call, all its threads: stdio {cpu_per_call['stdio'] * 1e6:.0f} us, "
          f"HTTP http.client {cpu_per_call['http'] * 1e6:.0f} us")
    print(f"toolgate idle RSS {idle_rss / 1024:.1f} MiB (target <= 20, {verdict(idle_rss <= 20 * 1024)}); "
          f"after the calls {busy_rss / 1024:.1f} MiB")
    print(f"toolgate start to initialize answered {ms(init_seconds):.1f} ms "
          f"(target <= 50, {verdict(init_seconds <= 0.05)}); reference {ms(ref_init_seconds):.1f} ms")


if __name__ == "__main__":
    main()

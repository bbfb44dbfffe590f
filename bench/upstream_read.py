#!/usr/bin/env python3
"""The reference filesystem MCP server directly, through `toolgate serve` (stdio and
streamable HTTP) and through mcp-proxy (streamable HTTP), side by side.

The same minimal clients as bench/mcp_read.py (newline-delimited JSON-RPC over stdio; a raw
keep-alive `http.client` connection over HTTP, head and body in two writes) read the same small
file with `read_text_file` N times per target, one call at a time:

- `@modelcontextprotocol/server-filesystem` directly, over stdio;
- `toolgate serve` with that server configured as an upstream and `read_text_file` admitted
  (so every call is normalized, resolved, validated against the pinned schema, authorized by
  Cedar, forwarded, checked and redacted), over stdio and over HTTP;
- mcp-proxy (the Rust MCP gateway) with the same server as its stdio backend, over HTTP. The
  script installs it when target/bench-tools/bin/mcp-proxy is missing (`cargo install --locked
  mcp-proxy --root target/bench-tools --no-default-features`; `--no-install` skips it, and
  `--mcp-proxy PATH` names another);
- the floor (bench/floor.py, a server that answers at once) directly and through toolgate as
  an upstream, over stdio: what toolgate itself adds to an upstream call, whatever the server;
  and the floor over streamable HTTP as a `url` upstream of toolgate (`floor --http`), what
  toolgate's HTTP client adds to an upstream call;
- both servers through bench/relay.c, a proxy that passes bytes both ways and does nothing
  else (one thread, one poll): what any proxy between client and server pays on this machine,
  the floor under the ratio targets. The script compiles it with `cc` into target/bench-tools;
  without a C compiler these rows are left out.

All targets run in the same invocation, alternating in blocks, so machine noise falls on all
of them. It prints the median and 99th percentile of each, the ratios the targets name, and
the CPU time toolgate's and mcp-proxy's threads spend per forwarded call.

    cargo build --release -p toolgate
    scripts/test-deps      # target/test-deps: Node 22 and @modelcontextprotocol/server-filesystem
    python3 bench/upstream_read.py [--calls 1000] [--toolgate target/release/toolgate]

Targets: through toolgate over stdio, p50 <= 1.10x and p99 <= 1.25x direct; over HTTP,
toolgate adds less to the direct p50 than mcp-proxy does. The script reports them; it does not
fail on them. As in bench/mcp_read.py, toolgate's audit log goes to a fresh directory under
target/ unless `--state DIR` says where.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_read import (  # noqa: E402
    DEPS, FLOOR, REFERENCE, ROOT, TOKEN, HttpClient, HttpServer, Server, admit, alternate,
    cpu_seconds, fs_upstream, ms, percentile, ratio, state_dir, table, token_config, verdict,
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_relay():
    """bench/relay.c compiled into target/bench-tools, or None without a C compiler."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "relay.c")
    built = os.path.join(ROOT, "target", "bench-tools", "relay")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if os.path.exists(built) and os.path.getmtime(built) >= os.path.getmtime(source):
        return built
    if not compiler:
        print("no C compiler: the bare relay's rows are left out", file=sys.stderr)
        return None
    os.makedirs(os.path.dirname(built), exist_ok=True)
    if subprocess.run([compiler, "-O2", "-o", built, source]).returncode != 0:
        print("bench/relay.c did not compile: its rows are left out", file=sys.stderr)
        return None
    return built


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--block", type=int, default=100, help="calls per alternating block")
    parser.add_argument("--toolgate", default=os.path.join(ROOT, "target", "release", "toolgate"))
    parser.add_argument("--node", default=os.path.join(DEPS, "node", "bin", "node"))
    default_proxy = os.path.join(ROOT, "target", "bench-tools", "bin", "mcp-proxy")
    parser.add_argument("--mcp-proxy", default=default_proxy)
    parser.add_argument("--no-install", action="store_true",
                        help="do not install mcp-proxy with cargo when it is missing")
    parser.add_argument("--state", help="toolgate's state directory, where its audit log goes")
    args = parser.parse_args()
    reference = REFERENCE
    for path in (args.toolgate, args.node, reference):
        if not os.path.exists(path):
            sys.exit(f"missing {path}: build toolgate in release mode and run scripts/test-deps first")
    if args.mcp_proxy == default_proxy and not os.path.exists(default_proxy) and not args.no_install:
        print("installing mcp-proxy into target/bench-tools (once; a few minutes)", file=sys.stderr)
        installed = subprocess.run(
            ["cargo", "install", "--locked", "mcp-proxy", "--root",
             os.path.join(ROOT, "target", "bench-tools"), "--no-default-features"],
        )
        if installed.returncode != 0:
            print("mcp-proxy could not be installed; its row is left out", file=sys.stderr)
    have_proxy = os.path.exists(args.mcp_proxy)
    relay = build_relay()
    state, remove_state = state_dir(args.state)
    gate_env = lambda name: {**os.environ, "XDG_STATE_HOME": os.path.join(state, name),
                             "TOOLGATE_BENCH_TOKEN": TOKEN}

    with tempfile.TemporaryDirectory() as tmp:
        tmp = os.path.realpath(tmp)
        files = os.path.join(tmp, "files")
        ws = os.path.join(tmp, "ws")
        os.makedirs(files)
        os.makedirs(ws)
        text = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(20))
        small = os.path.join(files, "small.txt")
        with open(small, "w") as f:
            f.write(text)
        floor_web = HttpServer([sys.executable, FLOOR, "--http"])
        config = os.path.join(tmp, "toolgate.toml")
        token_config(
            config,
            fs_upstream(args.node, files) +
            # The floor: a server that answers at once, so that what toolgate itself adds to
            # an upstream call shows apart from what the reference server takes.
            "[[upstream]]\nname = \"floor\"\n"
            f"command = [{json.dumps(sys.executable)}, {json.dumps(FLOOR)}]\n\n"
            f"[[upstream]]\nname = \"floorweb\"\nurl = \"http://{floor_web.addr}/mcp\"\n\n",
        )
        for upstream in ("fs", "floor", "floorweb"):
            admit(args.toolgate, upstream, config, gate_env("stdio"))

        serve = [args.toolgate, "serve", "--workspace", ws, "--config", config]
        arguments = {"path": small}
        direct = Server([args.node, reference, files])
        direct.initialize()
        floor = Server([sys.executable, FLOOR])
        floor.initialize()
        gate = Server(serve, gate_env("stdio"))
        gate.initialize()
        web = HttpServer(serve + ["--http", "127.0.0.1:0", "--no-console"], gate_env("http"))
        web_client = HttpClient(web.addr, token=TOKEN)
        web_client.initialize()
        targets = [
            ("floor", floor, "read_text_file", arguments),
            ("toolgate floor stdio", gate, "floor__read_text_file", arguments),
            ("toolgate floor url", gate, "floorweb__read_text_file", arguments),
            ("direct", direct, "read_text_file", arguments),
            ("toolgate stdio", gate, "fs__read_text_file", arguments),
            ("toolgate http", web_client, "fs__read_text_file", arguments),
        ]
        relayed = []
        if relay:
            relayed = [Server([relay, args.node, reference, files]),
                       Server([relay, sys.executable, FLOOR])]
            for server in relayed:
                server.initialize()
            targets += [
                ("relay floor stdio", relayed[1], "read_text_file", arguments),
                ("relay stdio", relayed[0], "read_text_file", arguments),
            ]
        proxy = None
        if have_proxy:
            port = free_port()
            proxy_config = os.path.join(tmp, "proxy.toml")
            with open(proxy_config, "w") as f:
                f.write(
                    "[proxy]\nname = \"bench\"\nseparator = \"__\"\n\n"
                    f"[proxy.listen]\nhost = \"127.0.0.1\"\nport = {port}\n\n"
                    "[[backends]]\nname = \"fs\"\ntransport = \"stdio\"\n"
                    f"command = {json.dumps(args.node)}\n"
                    f"args = [{json.dumps(reference)}, {json.dumps(files)}]\n"
                )
            proxy = HttpServer([args.mcp_proxy, "--config", proxy_config],
                               announced=False, addr=f"127.0.0.1:{port}")
            proxy_client = HttpClient(proxy.addr, path="/")
            proxy_client.initialize()
            targets.append(("mcp-proxy http", proxy_client, "fs__read_text_file", arguments))
        # CPU time per forwarded call, the upstream's own excluded: toolgate over stdio (two
        # targets, the floor's and server-filesystem's), toolgate and mcp-proxy over HTTP.
        measured = [("toolgate stdio", gate, 2), ("toolgate http", web, 1)]
        if proxy:
            measured.append(("mcp-proxy http", proxy, 1))
        cpu_before = {name: cpu_seconds(p.proc.pid) for name, p, _ in measured}
        samples = alternate(targets, args.calls, args.warmup, args.block)
        cpu_per_call = {name: (cpu_seconds(p.proc.pid) - cpu_before[name])
                        / (n * (args.calls + args.warmup)) for name, p, n in measured}
        for server in [gate, direct, floor, floor_web, web, *relayed] + ([proxy] if proxy else []):
            server.close()
    if remove_state:
        shutil.rmtree(state, ignore_errors=True)

    print(f"{args.calls} sequential read_text_file calls of a {len(text)}-byte file per target, "
          f"after {args.warmup} warm-up calls, alternating in blocks of {args.block}")
    print(f"toolgate's audit log in {'a fresh directory under target/' if remove_state else state}")
    table(
        [
            ("floor", "floor (answers at once) directly, stdio"),
            ("toolgate floor stdio", "floor through toolgate, stdio"),
            ("toolgate floor url", "floor through toolgate, stdio; floor a url upstream"),
            ("relay floor stdio", "floor through the bare relay, stdio"),
            ("direct", "server-filesystem directly, stdio"),
            ("toolgate stdio", "through toolgate, stdio"),
            ("relay stdio", "through the bare relay, stdio"),
            ("toolgate http", "through toolgate, HTTP http.client"),
            ("mcp-proxy http", "through mcp-proxy, HTTP http.client"),
        ],
        samples,
    )
    ratio(samples, "toolgate stdio", "direct", 50, 1.10, "toolgate stdio / direct")
    ratio(samples, "toolgate stdio", "direct", 99, 1.25, "toolgate stdio / direct")
    d50 = percentile(samples["direct"], 50)
    f_added = percentile(samples["toolgate floor stdio"], 50) - percentile(samples["floor"], 50)
    print(f"toolgate over stdio adds {ms(f_added):.3f} ms to the floor's p50 "
          f"(the 1.10x target allows {ms(0.10 * d50):.3f} ms)")
    u_added = percentile(samples["toolgate floor url"], 50) - percentile(samples["floor"], 50)
    print(f"toolgate over stdio with the floor as a url upstream adds {ms(u_added):.3f} ms to "
          f"the floor's p50 over stdio (its HTTP client and the floor's HTTP server included)")
    if "relay stdio" in samples:
        r_added = percentile(samples["relay stdio"], 50) - d50
        rf_added = percentile(samples["relay floor stdio"], 50) - percentile(samples["floor"], 50)
        print(f"the bare relay adds {ms(r_added):.3f} ms to server-filesystem's p50 "
              f"(ratio {percentile(samples['relay stdio'], 50) / d50:.3f}) and "
              f"{ms(rf_added):.3f} ms to the floor's (what passing bytes alone costs here)")
    g_added = percentile(samples["toolgate http"], 50) - d50
    print(f"toolgate over HTTP adds {ms(g_added):.3f} ms to the direct p50")
    if "mcp-proxy http" in samples:
        p_added = percentile(samples["mcp-proxy http"], 50) - d50
        print(f"mcp-proxy over HTTP adds {ms(p_added):.3f} ms to the direct p50 "
              f"(toolgate adds less: {verdict(g_added < p_added)})")
    else:
        print(f"(no mcp-proxy at {args.mcp_proxy}: install it as the docstring says for its row)")
    print("CPU per forwarded call, the proxy's threads only: "
          + ", ".join(f"{name} {cpu * 1e6:.0f} us" for name, cpu in cpu_per_call.items()))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where a running toolgate spends its CPU, by part, from a perf profile with call stacks.

Each sample goes to the innermost frame of its stack that belongs to one of the parts below
(so SQLite's code under the audit log counts as the audit log's, and a socket write under
hyper as the write); a sample in none of them is `other`, named by its leaf frame.

    perf record -F 4000 -g --call-graph dwarf,16384 -p <toolgate pid> -o toolgate.data -- sleep 4
    perf script -i toolgate.data | python3 bench/perf_categories.py

Run it while a client calls toolgate one call at a time (bench/mcp_read.py's clients do).
"""

import collections
import re
import sys

PARTS = [
    ("audit log (record, SQLite commit)", r"toolgate_audit::"),
    ("pipeline stages 1-8 and the tool", r"toolgate_core::pipeline|toolgate_tools::|watcher::run_call"),
    ("upstream relay", r"toolgate_upstream::"),
    ("socket or pipe write", r"__GI___writev|__libc_write|__GI___libc_write"),
    ("socket or pipe read", r"__libc_recv|__GI___libc_read|__libc_read"),
    ("waiting for events (epoll, park)", r"epoll_wait|Context::park"),
    ("futex waits and wakes", r"syscall\+|futex"),
    ("HTTP answer chosen (toolgate)", r"toolgate_mcp::http::answer::"),
    ("rmcp: event stream", r"SseBody|CancelOnDropStream|sse_stream"),
    ("rmcp: HTTP session worker", r"LocalSessionWorker|session::local"),
    ("rmcp: service and handler", r"rmcp::service::|rmcp::handler::"),
    ("rmcp: streamable HTTP service", r"StreamableHttpService"),
    ("request decoding (toolgate)", r"toolgate_mcp::wire::"),
    ("MCP session and reply (toolgate)", r"toolgate_mcp::session::|toolgate_mcp::reply::"),
    ("HTTP front checks (toolgate)", r"toolgate_mcp::http::"),
    ("stdio transport (toolgate)", r"toolgate_mcp::stdio::"),
    ("hyper", r"hyper::"),
    ("tokio", r"tokio::"),
]


def main():
    parts = [(name, re.compile(pattern)) for name, pattern in PARTS]
    counts = collections.Counter()
    stack = []

    def count():
        for frame in stack:
            for name, pattern in parts:
                if pattern.search(frame):
                    counts[name] += 1
                    return
        leaf = stack[0].split()
        counts["other: " + (leaf[1] if len(leaf) > 1 else "?")[:60]] += 1

    for line in sys.stdin:
        if not line.strip():
            if stack:
                count()
            stack = []
        elif line[0] in " \t":
            stack.append(line.strip())
    if stack:
        count()
    total = sum(counts.values())
    if not total:
        sys.exit("no samples with call stacks on standard input")
    print(f"{total} samples")
    for name, n in counts.most_common(20):
        print(f"{100 * n / total:6.1f}%  {name}")


if __name__ == "__main__":
    main()

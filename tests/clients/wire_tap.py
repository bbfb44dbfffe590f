"""Runs an MCP server over stdio and records its traffic, for tests that must see what crossed
the wire between a real client and toolgate.

Usage: python wire_tap.py WIRE_LOG STDERR_LOG -- COMMAND [ARG...]

The client's standard input is copied to COMMAND and COMMAND's standard output to the client,
line by line, unchanged; each line is also appended to WIRE_LOG as a JSON object
`{"from": "client" | "server", "line": TEXT}`. COMMAND's standard error goes to STDERR_LOG and
to this program's own standard error (a client keeps it in its server log). When the client
closes its side, COMMAND's input is closed; when COMMAND ends, so does this program, with its
exit status. SIGINT and SIGTERM, which a client sends its server when it stops, are passed on
to COMMAND, so that it stops as it would without the tap in between.
"""

import json
import signal
import subprocess
import sys
import threading

WIRE_LOG, STDERR_LOG = sys.argv[1], sys.argv[2]
COMMAND = sys.argv[sys.argv.index("--") + 1 :]
LOCK = threading.Lock()


def record(direction, line):
    with LOCK:
        with open(WIRE_LOG, "a") as f:
            text = line.decode(errors="replace").rstrip("\n")
            f.write(json.dumps({"from": direction, "line": text}) + "\n")


def client_to_server(child):
    for line in sys.stdin.buffer:
        record("client", line)
        try:
            child.stdin.write(line)
            child.stdin.flush()
        except BrokenPipeError:
            break
    try:
        child.stdin.close()
    except BrokenPipeError:
        pass


def server_errors(child):
    with open(STDERR_LOG, "ab") as log:
        for line in child.stderr:
            log.write(line)
            log.flush()
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()


def main():
    pipe = subprocess.PIPE
    child = subprocess.Popen(COMMAND, stdin=pipe, stdout=pipe, stderr=pipe)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda signum, _: child.send_signal(signum))
    threading.Thread(target=client_to_server, args=(child,), daemon=True).start()
    errors = threading.Thread(target=server_errors, args=(child,), daemon=True)
    errors.start()
    for line in child.stdout:
        record("server", line)
        try:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            break
    code = child.wait()
    errors.join(timeout=2)
    sys.exit(code)


if __name__ == "__main__":
    main()

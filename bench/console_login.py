"""Logging in to a `toolgate serve` console as a browser does, for the bench scripts, and a
server driven over stdio whose calls are approved there (`Served`).

`log_in(proc)` reads the server's standard error until it prints the console's single-use
login link, opens the link once, keeps the cookie its answer sets and reads the page's CSRF
value. The rest of standard error is read and dropped, so the server never blocks on it.
"""

import json
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def log_in(proc):
    """(base URL, cookie, CSRF value) of the console of `proc`, logged in."""
    link = None
    while link is None:
        line = proc.stderr.readline().decode()
        if not line:
            raise SystemExit("toolgate serve stopped before printing the console's login link")
        match = re.search(r"(http://127\.0\.0\.1:(\d+))/login\?code=\w+", line)
        if match:
            link, base = match.group(0), match.group(1)
    threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
    try:
        urllib.request.build_opener(_NoRedirect).open(link)
        raise SystemExit("the login link did not redirect")
    except urllib.error.HTTPError as answer:
        if answer.code != 303:
            raise
        cookie = answer.headers["Set-Cookie"].split(";")[0]
    page = urllib.request.urlopen(
        urllib.request.Request(base + "/", headers={"Cookie": cookie})).read().decode()
    csrf = re.search(r'name="toolgate-csrf" content="(\w+)"', page).group(1)
    return base, cookie, csrf


class Served:
    """`toolgate serve --workspace WS` over stdio with its console: logged in as a browser, and
    spoken to in JSON-RPC lines (no SDK) past the handshake."""

    def __init__(self, toolgate, ws, env):
        self.proc = subprocess.Popen(
            [toolgate, "serve", "--workspace", ws],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        self.base, self.cookie, self.csrf = log_in(self.proc)
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}})
        self.reply(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def reply(self, want_id):
        """The answer to request `want_id` (what comes before it is dropped)."""
        while True:
            reply = json.loads(self.proc.stdout.readline())
            if reply.get("id") == want_id:
                return reply

    def first_pending(self, list_times=None):
        """The first request the console lists as pending, once there is one; each listing's
        milliseconds appended to `list_times` if given."""
        while True:
            started = time.perf_counter()
            request = urllib.request.Request(self.base + "/api/pending",
                                             headers={"Cookie": self.cookie})
            pending = json.loads(urllib.request.urlopen(request).read())
            if list_times is not None:
                list_times.append((time.perf_counter() - started) * 1000)
            if pending:
                return pending[0]
            time.sleep(0.005)

    def allow_once(self, pending, call_id):
        """Allows `pending` once as the page's button does; the milliseconds from the POST to
        the result of call `call_id`, which must not be an error."""
        request = urllib.request.Request(
            f"{self.base}/api/pending/{pending['id']}/decision",
            data=b'{"decision":"allow_once"}', method="POST",
            headers={"Cookie": self.cookie, "X-Toolgate-Csrf": self.csrf,
                     "Content-Type": "application/json"})
        started = time.perf_counter()
        urllib.request.urlopen(request).read()
        reply = self.reply(call_id)
        took = (time.perf_counter() - started) * 1000
        assert not reply["result"].get("isError"), reply
        return took

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)

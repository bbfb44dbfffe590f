"""Logging in to a `toolgate serve` console as a browser does, for the bench scripts.

`log_in(proc)` reads the server's standard error until it prints the console's single-use
login link, opens the link once, keeps the cookie its answer sets and reads the page's CSRF
value. The rest of standard error is read and dropped, so the server never blocks on it.
"""

import re
import threading
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

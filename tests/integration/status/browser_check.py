#!/usr/bin/env python3
"""Loads a running job's status page in headless Chromium, once, and drives
it over the DevTools protocol: the page must show the machines, the ranks
and generation 0, and each rank's newest line (the markup below) as text;
then rank 0's worker is killed (SIGKILL) and, without a
reload, the page must show generation 1 and the failure, with the worker's
last line `<img src=x onerror=alert(1)>` as text, not as an element.
Then, two ranks a page, the page moves through the pages and searches,
each time asking the server for that page only. Screenshots go to SCRATCH (before.png, after.png).

    browser_check.py CHROMIUM STATUS_PORT SCRATCH [MACHINE_ADDRESS]

MACHINE_ADDRESS (default 127.0.0.1) is the address the page must show for
the machines; STATUS_PORT may be the coordinator's or a `trl-coord ui`'s.
Exit 0 when all holds; 1 saying what did not; 77 when Chromium is missing."""
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import websocket

XSS = "<img src=x onerror=alert(1)>"


class Page:
    """One DevTools session on one tab; every call bounded."""

    def __init__(self, ws_url):
        # No Origin header: Chromium refuses DevTools websockets from web
        # origins unless --remote-allow-origins says otherwise.
        self.ws = websocket.create_connection(ws_url, timeout=10,
                                              suppress_origin=True)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method,
                                 "params": params}))
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
        raise TimeoutError(method)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression,
                           returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, what, condition, seconds):
        """Polls the page's text until condition(text) holds."""
        deadline = time.monotonic() + seconds
        text = ""
        while time.monotonic() < deadline:
            text = self.evaluate("document.body.innerText") or ""
            if condition(text):
                return text
            time.sleep(0.1)  # the page itself refreshes once a second
        raise AssertionError(f"the page never showed {what}; it shows:\n{text}")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))
        return os.path.getsize(path)


def start_chromium(chromium, scratch):
    profile = os.path.join(scratch, "chromium-profile")
    os.makedirs(profile, exist_ok=True)
    stale = os.path.join(profile, "DevToolsActivePort")
    if os.path.exists(stale):
        os.remove(stale)  # an earlier browser's: its port is gone
    # --no-sandbox: the tests run as root, and Chromium's sandbox refuses
    # to start as root (it would need a setuid helper or user namespaces
    # for another user). The page is our own, on loopback.
    # Chromium puts its singleton's Unix socket under TMPDIR, and the
    # test's own TMPDIR is longer than a socket path may be (108 bytes):
    # a short directory of its own, removed with the browser.
    short_tmp = tempfile.mkdtemp(prefix="trl-chromium-", dir="/tmp")
    browser = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
         "--no-first-run", "--no-default-browser-check",
         "--disable-dev-shm-usage", "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0", f"--user-data-dir={profile}",
         "--window-size=1280,1600", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=open(
            os.path.join(scratch, "chromium.log"), "w"),
        env=dict(os.environ, TMPDIR=short_tmp))
    browser.short_tmp = short_tmp
    port_file = os.path.join(profile, "DevToolsActivePort")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(port_file):
            lines = open(port_file).read().split("\n")
            if len(lines) >= 2 and lines[0].isdigit():
                return browser, int(lines[0])
        if browser.poll() is not None:
            break
        time.sleep(0.05)
    browser.kill()
    browser.wait()
    shutil.rmtree(short_tmp, ignore_errors=True)
    raise RuntimeError("Chromium did not open its DevTools port; see "
                       + os.path.join(scratch, "chromium.log"))


def api_status(status_port):
    url = f"http://127.0.0.1:{status_port}/api/status"
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.load(reply)


def wait_until(what, probe, condition, seconds):
    """Polls probe() until condition(value) holds."""
    deadline = time.monotonic() + seconds
    value = None
    while time.monotonic() < deadline:
        value = probe()
        if condition(value):
            return value
        time.sleep(0.1)
    raise AssertionError(f"never {what}; last seen: {value!r}")


RANK_PAGE = ("[document.getElementById('rank-page').textContent.trim(), "
             "[...document.querySelectorAll('#ranks tr')].map("
             "(r) => r.cells[0].textContent)]")


def check_paging(page, status_port):
    """Two ranks a page (?page_size=2): the server sends one page at a
    time, the buttons move through them, and the search box goes to the
    server; the page never asks for the whole status."""
    page.call("Page.navigate", url=f"http://127.0.0.1:{status_port}/"
              "?page_size=2")
    probe = lambda: page.evaluate(RANK_PAGE)
    wait_until("the first page of ranks", probe,
               lambda v: v == ["1-2 of 4", ["0", "1"]], 30)
    page.evaluate("document.getElementById('rank-next').click()")
    wait_until("the second page of ranks", probe,
               lambda v: v == ["3-4 of 4", ["2", "3"]], 10)
    page.evaluate("document.getElementById('rank-next').click()")
    time.sleep(1.5)  # past the last page: it stays
    assert probe() == ["3-4 of 4", ["2", "3"]], probe()
    page.evaluate("const f = document.getElementById('rank-filter'); "
                  "f.value = 'RANK 3'; f.dispatchEvent(new Event('input'))")
    wait_until("the search's one rank", probe,
               lambda v: v == ["1-1 of 1", ["3"]], 10)
    asked = page.evaluate(
        "performance.getEntriesByType('resource').map((e) => e.name)"
        ".filter((n) => n.includes('/api/status'))")
    assert asked, "no request to /api/status"
    for url in asked:
        assert "view=summary" in url and "limit=2" in url, url
    assert any("offset=2&limit=2" in url for url in asked), asked
    assert any("q=RANK+3" in url for url in asked), asked
    # The same page of ranks, as JSON; and a bad parameter is named.
    url = (f"http://127.0.0.1:{status_port}/api/status?"
           "view=summary&offset=2&limit=2")
    with urllib.request.urlopen(url, timeout=10) as reply:
        view = json.load(reply)
    assert [r["rank"] for r in view["ranks"]] == [2, 3], view["ranks"]
    assert view["ranks_matching"] == 4 and view["summary"]["ranks"] == 4
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{status_port}/api/status"
                               "?limit=0", timeout=10)
        raise AssertionError("limit=0 was served")
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        assert e.code == 400 and "'limit'" in body, (e.code, body)


def main():
    chromium, status_port, scratch = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    machine_address = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"
    if not shutil.which(chromium):
        print(f"{chromium} is not installed (scripts/setup.sh --tests)")
        return 77
    browser, devtools_port = start_chromium(chromium, scratch)
    try:
        with urllib.request.urlopen(
                f"http://127.0.0.1:{devtools_port}/json/list",
                timeout=10) as reply:
            tabs = [t for t in json.load(reply) if t["type"] == "page"]
        page = Page(tabs[0]["webSocketDebuggerUrl"])
        page.call("Page.enable")
        page.call("Page.navigate", url=f"http://127.0.0.1:{status_port}/")
        page.wait_for("generation 0 running",
                      lambda t: "state running" in t and "generation 0" in t
                      and "ranks: running 4" in t, 30)
        # Each rank's newest line (the markup it printed) is in its row, as
        # text: no element came of it.
        ranks_text = ("document.getElementById('ranks').innerText"
                      ".split(" + json.dumps(XSS) + ").length - 1")
        wait_until("each rank's newest line in its row",
                   lambda: page.evaluate(ranks_text), lambda n: n == 4, 30)
        assert page.evaluate(
            "document.querySelectorAll('#ranks img').length") == 0
        # A mark the page keeps only as long as it is not loaded again.
        page.evaluate("window.loadedOnce = 'yes'")
        text = page.evaluate("document.body.innerText")
        for shown in ["2 of 2 machines: running 2", machine_address,
                      "4 ranks: running 4", "Failures", "Generations"]:
            assert shown in text, f"{shown!r} missing from:\n{text}"
        size = page.screenshot(os.path.join(scratch, "before.png"))
        assert size > 0, "empty screenshot"

        status = api_status(status_port)
        pid = next(r["pid"] for r in status["ranks"] if r["rank"] == 0)
        os.kill(pid, signal.SIGKILL)
        text = page.wait_for(
            "generation 1 and the failure",
            lambda t: "generation 1" in t and "signal 9" in t
            and "ranks: running 4" in t, 60)
        assert XSS in page.evaluate(
            "document.getElementById('failures').innerText"), \
            "the failure's last line is not shown"
        assert page.evaluate("window.loadedOnce") == "yes", "page reloaded"
        # The worker's line is text: no element came of it.
        assert page.evaluate(
            "document.querySelectorAll('#failures img').length") == 0
        assert "1 (1 of the budget of 1 used, 0 left)" in text, text
        size = page.screenshot(os.path.join(scratch, "after.png"))
        assert size > 0, "empty screenshot"
        check_paging(page, status_port)
        print(f"page shows generation 1 and the failure; screenshots in "
              f"{scratch}")
        return 0
    except AssertionError as e:
        print(e)
        return 1
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()
        shutil.rmtree(browser.short_tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""A real browser for the served app: Debian's chromium, headless, driven over the DevTools protocol (a
websocket; websocket-client comes with the kubernetes client). What the page received from its terminal
websocket is kept in the page (`window.__gputui`), so a test reads the board's text through the page
itself; screenshots are PNGs. Chromium that cannot start fails the test loudly."""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.procs import free_port, wait_until

# Before the page's own scripts: every websocket's incoming data, decoded, appended to window.__gputui.
CAPTURE = """
(() => {
  window.__gputui = "";
  window.__violations = [];  // what the page's Content-Security-Policy blocked
  document.addEventListener("securitypolicyviolation", (e) => {
    window.__violations.push(e.effectiveDirective + " " + e.blockedURI);
  });
  const Native = window.WebSocket;
  window.WebSocket = function (...args) {
    const ws = new Native(...args);
    ws.addEventListener("message", (event) => {
      if (typeof event.data === "string") { window.__gputui += event.data; return; }
      const read = (buffer) => { window.__gputui += new TextDecoder().decode(buffer); };
      if (event.data instanceof Blob) { event.data.arrayBuffer().then(read); } else { read(event.data); }
    });
    return ws;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, Native);
})();
"""
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise RuntimeError("chromium is not installed (scripts/test.sh installs Debian's package)")
    return path


class Browser:
    def __init__(self, profile: Path, width: int = 1280, height: int = 800, extra_args: tuple[str, ...] = ()) -> None:
        import websocket

        self.port = free_port()
        self.proc = subprocess.Popen(
            [chromium_path(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--remote-debugging-port={self.port}", "--remote-debugging-address=127.0.0.1",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", *extra_args, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ, HOME=str(profile)))
        try:
            page = wait_until(self._page_target, 30, what="chromium's DevTools endpoint")
        except Exception as exc:
            self.proc.kill()
            raise RuntimeError(f"chromium did not start: {self.proc.stderr.read().decode(errors='replace')[-800:]}") from exc
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30)
        self._ids = itertools.count(1)
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Page.addScriptToEvaluateOnNewDocument", source=CAPTURE)

    def _page_target(self) -> dict | None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"chromium exited: {self.proc.stderr.read().decode(errors='replace')[-800:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json", timeout=2) as r:
                targets = json.load(r)
        except OSError:
            return None
        return next((t for t in targets if t.get("type") == "page"), None)

    def call(self, method: str, **params: Any) -> dict:
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    def page_text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def log_in(self, url: str, token: str) -> None:
        """gputui serve's login form, as a person fills it: the page, the token, Open."""
        self.navigate(url)
        wait_until(lambda: "the token printed" in self.page_text(), 15, what="the token form")
        self.evaluate(f"document.querySelector('input[name=token]').value = {json.dumps(token)};"
                      "document.forms[0].submit()")

    def violations(self) -> list[str]:
        """What the page's Content-Security-Policy blocked (the directive, then the URL)."""
        return self.evaluate("window.__violations || []") or []

    def received_text(self) -> str:
        """What the page's terminal was sent, escape sequences removed: the board's words as drawn."""
        return ANSI.sub(" ", self.evaluate("window.__gputui || ''") or "")

    def wait_for_text(self, *words: str, timeout: float = 30.0) -> float:
        """Seconds until every word has reached the page."""
        start = time.monotonic()
        while not all(w in (text := self.received_text()) for w in words):
            if time.monotonic() - start > timeout:
                raise AssertionError(f"{words} never reached the page; it has: {text[-800:]!r}")
            time.sleep(0.1)
        return time.monotonic() - start

    def type(self, text: str) -> None:
        """Keys as a person types them into the terminal (its input is xterm's hidden textarea)."""
        self.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
        for ch in text:
            self.call("Input.dispatchKeyEvent", type="keyDown", text=ch, key=ch)
            self.call("Input.dispatchKeyEvent", type="keyUp", key=ch)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait(timeout=10)

"""`gputui serve` in a real browser: Debian's chromium loads the page, the board reaches it by itself, and the
served gputui writes nothing. The screenshot is saved for a person to look at (GPUTUI_SCREENSHOT_DIR keeps a
copy: the README's picture comes from here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.browser import Browser
from tests.support.procs import free_port, port_is_free, wait_until


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(*args: str) -> tuple[subprocess.Popen, int]:
        port = free_port()
        env = dict(os.environ, HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"),
                   XDG_CONFIG_HOME=str(tmp_path / "config"))
        proc = subprocess.Popen([sys.executable, "-m", "gputui", "--demo", "serve", "--port", str(port), *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        started.append(proc)
        wait_until(lambda: proc.poll() is not None or not port_is_free(port), 30, what="gputui serve listening")
        assert proc.poll() is None, proc.stderr.read()
        return proc, port

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path / "chromium")
    yield b
    b.close()


def test_the_wallboard_starts_by_itself_in_chromium_and_is_read_only(serve, browser, tmp_path):
    _proc, port = serve("--wallboard")
    started = time.monotonic()
    browser.navigate(f"http://127.0.0.1:{port}/")
    browser.wait_for_text("GPUs in use", "Idle GPUs", "Fleet heat map")  # no click: a wall has nobody to click
    board = time.monotonic() - started
    text = browser.received_text()
    assert "SIMULATED" in text and "READ-ONLY" in text  # the demo says it is simulated, the page that it is RO
    time.sleep(1.0)  # the heat map's first full frame, for the picture
    shot = browser.screenshot(tmp_path / "serve-wallboard.png")
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("GPUTUI_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["GPUTUI_SCREENSHOT_DIR"]) / shot.name)
    print(f"board in the page after {board:.2f}s; screenshot: {shot}")


def test_the_served_dashboard_cannot_write(serve, browser, tmp_path):
    """Not the wallboard: the dashboard, whose keys write elsewhere. Served, it has no writer: `c` answers
    read-only and nothing reaches the (demo's) audit log."""
    _proc, port = serve()
    browser.navigate(f"http://127.0.0.1:{port}/")
    browser.wait_for_text("Nodes 27", "Inference services")
    browser.type("c")
    browser.wait_for_text("read-only: cordon is unavailable")
    browser.type("r")
    browser.wait_for_text("read-only: drain is unavailable")
    audit = tmp_path / "state" / "gputui" / "audit-demo.jsonl"
    assert not audit.exists() or audit.read_text() == ""


def test_away_from_loopback_the_page_asks_for_the_token_and_a_taken_port_is_one_line(serve, browser, tmp_path):
    proc, port = serve("--wallboard", "--host", "0.0.0.0")
    printed = proc.stdout.readline() + proc.stdout.readline()
    token = printed.rsplit(": ", 1)[1].strip()
    assert len(token) >= 24
    browser.navigate(f"http://127.0.0.1:{port}/")
    wait_until(lambda: "the token printed" in (browser.evaluate("document.body.innerText") or ""), 15,
               what="the token form")
    browser.evaluate("document.querySelector('input[name=token]').value = 'wrong'; document.forms[0].submit()")
    wait_until(lambda: "That is not the token" in (browser.evaluate("document.body.innerText") or ""), 15,
               what="the refusal")
    browser.evaluate(f"document.querySelector('input[name=token]').value = {token!r}; document.forms[0].submit()")
    browser.wait_for_text("GPUs in use")
    assert token not in browser.evaluate("location.href")  # carried by a cookie, never in a URL
    taken = subprocess.run([sys.executable, "-m", "gputui", "--demo", "serve", "--host", "0.0.0.0", "--port", str(port)],
                           capture_output=True, text=True, timeout=30)
    assert taken.returncode == 2 and taken.stderr.strip() == \
        f"gputui: error: port {port} on 0.0.0.0 is taken: choose another with --port"
    proc.terminate()
    out, err = proc.communicate(timeout=10)
    assert token not in out + err  # printed once, at start (read above), never again

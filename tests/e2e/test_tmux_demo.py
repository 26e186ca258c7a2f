"""The installed `gputui --demo`, driven in tmux the way a person over SSH drives it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "gputui")

    def keys(self, *keys: str) -> None:
        self("send-keys", "-t", "gputui", *keys)

    def wait_for(self, text: str, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared; the screen was:\n{screen}")
            time.sleep(0.2)

    def until(self, check: Callable[[], T], what: str, timeout: float = 15.0) -> T:
        """Poll `check()` until it returns something truthy; fail loudly with the screen when it never does."""
        deadline = time.monotonic() + timeout
        while not (got := check()):
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} never happened; the screen was:\n{self.screen()}")
            time.sleep(0.2)
        return got

    def alive(self) -> bool:
        return subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", "gputui"],
                              capture_output=True).returncode == 0


def _demo_nodes() -> int:
    from gputui.backends.demo import DemoCluster

    return len(DemoCluster(seed=7).snapshot().nodes)


NODES = _demo_nodes()  # the seeded demo's fleet, as the header counts it


@pytest.fixture
def tmux(tmp_path):
    for tool in ("tmux", "gputui"):
        if shutil.which(tool) is None:  # a missing tool is a failure, never a skip
            pytest.fail(f"{tool} is not installed; scripts/test.sh installs it")
    session = Tmux(f"gputui-e2e-{os.getpid()}")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "TERM": "xterm-256color", "KUBECONFIG": str(tmp_path / "none")}
    flags = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
    session("new-session", "-d", "-s", "gputui", "-x", "100", "-y", "30", *flags, "gputui --demo --seed 7")
    yield session
    subprocess.run(["tmux", "-L", session.socket, "kill-server"], capture_output=True)


def test_filter_open_cordon_help_quit(tmux, tmp_path):
    tmux.wait_for(f"Nodes {NODES}")
    tmux.keys("/")
    tmux.wait_for("filter: a name")  # as a person does: type once the box is there
    tmux.keys("-l", "h100-07")
    tmux.keys("Enter")
    screen = tmux.wait_for(f"Nodes 1/{NODES}")
    assert "gpu-h100-07" in screen and "gpu-h100-01" not in screen

    tmux.keys("Enter")
    screen = tmux.wait_for("Pods on this node")
    assert "gpu-h100-07" in screen and "XID" in screen
    tmux.keys("Escape")
    tmux.wait_for(f"Nodes 1/{NODES}")

    tmux.keys("c")
    tmux.wait_for("Reason")  # the cordon form asks why first
    tmux.keys("e2e")
    tmux.keys("Enter")
    screen = tmux.wait_for("Cordoned")
    row = next(line for line in screen.splitlines() if "gpu-h100-07" in line)
    assert "Cordoned" in row
    audit = [json.loads(line) for line in (tmp_path / "state" / "gputui" / "audit-demo.jsonl").read_text().splitlines()]
    assert (audit[-1]["action"], audit[-1]["target"], audit[-1]["result"]) == ("cordon", "node/gpu-h100-07", "ok")

    tmux.keys("?")
    screen = tmux.wait_for("gputui keys")
    assert "Cordon the selected node" in screen
    tmux.keys("Escape")
    tmux.wait_for(f"Nodes 1/{NODES}")

    tmux.keys("q")
    tmux.until(lambda: not tmux.alive(), "gputui quitting on q", timeout=10)


def test_no_color_draws_in_greys_only(tmp_path):
    """NO_COLOR: the mono theme, and no hue anywhere in what reaches the terminal."""
    import re

    session = Tmux(f"gputui-e2e-nc-{os.getpid()}")
    env = ["-e", f"XDG_CONFIG_HOME={tmp_path}/c", "-e", f"XDG_STATE_HOME={tmp_path}/s", "-e", "NO_COLOR=1",
           "-e", "TERM=xterm-256color"]
    session("new-session", "-d", "-s", "gputui", "-x", "100", "-y", "30", *env, "gputui --demo --seed 7")
    try:
        session.wait_for(f"Nodes {NODES}")

        def painted_colours() -> list[str]:
            """The SGR sequences of a capture that sets colours (38/48): the frame is painted, styles and all."""
            styled = session("capture-pane", "-p", "-e", "-t", "gputui")
            colours = re.findall(r"\x1b\[[0-9;]*m", styled)
            return colours if any(p in ("38", "48") for seq in colours for p in seq[2:-1].split(";")) else []

        colours = session.until(painted_colours, "a capture with colours set")
        hues = []
        for seq in colours:
            params = seq[2:-1].split(";")
            for i, p in enumerate(params):
                if p in ("38", "48") and i + 4 < len(params) and params[i + 1] == "2":
                    r, g, b = params[i + 2: i + 5]
                    if not (r == g == b):
                        hues.append(seq)
                elif p in ("38", "48") and i + 2 < len(params) and params[i + 1] == "5":
                    n = int(params[i + 2])
                    if 16 <= n <= 231 and len({(n - 16) // 36, (n - 16) // 6 % 6, (n - 16) % 6}) > 1:
                        hues.append(seq)
        assert not hues, f"coloured output under NO_COLOR: {hues[:5]}"
    finally:
        subprocess.run(["tmux", "-L", session.socket, "kill-server"], capture_output=True)


def test_the_3am_path_at_80x24(tmp_path):
    """Start, see the worst node first, open it, read why, drain it from there, watch the board."""
    session = Tmux(f"gputui-e2e-3am-{os.getpid()}")
    env = ["-e", f"XDG_CONFIG_HOME={tmp_path}/c", "-e", f"XDG_STATE_HOME={tmp_path}/s", "-e", "TERM=xterm-256color",
           "-e", f"KUBECONFIG={tmp_path}/none"]
    session("new-session", "-d", "-s", "gputui", "-x", "80", "-y", "24", *env, "gputui --demo --seed 7")
    try:
        session.wait_for("sort problems, worst first")

        def table_drawn() -> tuple[str, list[str], int] | None:
            # The title can be on screen a frame before the node table's header and first row are.
            screen = session.screen()
            lines = screen.splitlines()
            first = next((i for i, line in enumerate(lines) if line.lstrip().startswith("Node ")), None)
            if first is None or first + 1 >= len(lines) or not lines[first + 1].strip():
                return None
            return screen, lines, first

        screen, lines, first = session.until(table_drawn, "the node table's header and first row")
        worst = lines[first + 1]
        assert "NotReady" in worst, screen  # the down node is the first row, not the last
        name = worst.split()[0]
        for field in ("Util", "Memory", "Temp", "Driver"):
            assert field in lines[first], f"{field} missing at 80x24:\n{screen}"

        session.keys("Enter")
        screen = session.wait_for("Pods on this node")
        assert name in screen and "node is NotReady" in screen
        session.keys("i")
        screen = session.wait_for("Alerts, worst first")  # describe: the alerts first (faults, holds, conditions below)
        assert "NotReady: node is NotReady" in screen
        session.keys("Escape")
        session.wait_for("Pods on this node")

        # On a GPU row `r` drains that GPU alone (its plan says "Drain GPU 0 of …"); the pods table's `r` drains
        # the node.
        session.keys("Tab")
        session.keys("r")
        screen = session.wait_for(f"Drain {name}")  # its plan, before anything is written
        assert f"node/{name}" in screen
        session.keys("Enter")
        screen = session.wait_for(f"{name} done", timeout=20)  # the board's log: it held no pods
        assert "Drain FINISHED" in screen and "1/1 nodes ended" in screen
    finally:
        subprocess.run(["tmux", "-L", session.socket, "kill-server"], capture_output=True)

"""--debug: one printable, bounded line per event; to stderr from headless commands, to a file from the
terminal UI; a file it cannot write is one line, no traceback. (Against a real store: the recording rules'
integration test reads the mode line.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.base import debug_log
from gputui.base.debug_log import MAX_LINE, log


@pytest.fixture(autouse=True)
def _off():
    yield
    debug_log.stop()


def test_lines_carry_no_control_characters_and_are_bounded(tmp_path: Path) -> None:
    path = debug_log.start(tmp_path / "state" / "debug.log")
    assert path is not None
    log.debug("watch %s: %s", "/api/v1/pods", "boom\x1b[31m red\r\nsecond line\x07 " + "x" * 10_000)
    debug_log.stop()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1, lines  # the newline in the text did not start a second line
    assert "\x1b" not in lines[0] and "\x07" not in lines[0] and "\r" not in lines[0]
    assert "boom␛[31m red␍␊second line␇" in lines[0]
    assert len(lines[0]) == MAX_LINE and lines[0].endswith("…")


def test_off_writes_nothing(capsys) -> None:
    log.debug("metrics: nothing to see")
    assert capsys.readouterr().err == ""


def _gputui(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputui", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


def test_headless_debug_goes_to_stderr_and_says_the_demo_is_simulated(tmp_path: Path) -> None:
    out = _gputui("services", "--demo", "--debug", env={"HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "s")})
    assert out.returncode == 0, out.stderr
    assert "gputui debug: cluster: the embedded demo cluster (SIMULATED" in out.stderr
    assert "gputui debug" not in out.stdout  # the listing stays clean for scripts
    assert not (tmp_path / "s" / "gputui" / "debug.log").exists()


def test_the_terminal_ui_writes_to_a_file_it_names(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    from gputui.cli.main import _debug

    assert _debug(to_file=True) == tmp_path / "state" / "gputui" / "debug.log"
    log.debug("snapshot: joined 3 nodes")
    debug_log.stop()
    assert "snapshot: joined 3 nodes" in (tmp_path / "state" / "gputui" / "debug.log").read_text(encoding="utf-8")


def test_a_file_it_cannot_write_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    # The TUI's path under a file: no directory can be made there. It fails before the UI starts.
    out = _gputui("--demo", "--debug", env={"HOME": str(tmp_path), "XDG_STATE_HOME": str(blocker)})
    assert out.returncode == 2
    assert out.stderr.startswith("gputui: error: --debug: cannot write") and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr

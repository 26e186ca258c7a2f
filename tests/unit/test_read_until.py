"""tests/support/gputui_cli.read_until: a gputui that goes silent fails the test at the deadline, instead of
hanging the suite on a blocking readline (issue 34: the deadline was checked only between lines)."""

import subprocess
import sys

import pytest

from tests.support.gputui_cli import read_until


def test_a_silent_process_fails_the_wait_at_its_deadline():
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('hello', flush=True); time.sleep(600)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        with pytest.raises(AssertionError, match=r"(?s)killed: silent.*hello"):
            read_until(proc, lambda line: "never" in line, timeout=1)
        assert proc.wait(10) != 0  # killed, not left running
    finally:
        proc.kill()
        proc.wait()


def test_a_found_line_leaves_the_rest_to_the_caller_and_the_process_running():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('a'); print('b', flush=True); sys.stdin.read(); print('c')"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert read_until(proc, lambda line: line.startswith("a"), timeout=0.5) == ["a\n"]
    assert read_until(proc, lambda line: line.startswith("b"), timeout=0.5) == ["b\n"]
    proc.stdin.close()
    assert proc.stdout.read() == "c\n" and proc.wait(10) == 0  # the timers did not kill it after their lines

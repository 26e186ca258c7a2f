"""Write commands against an apiserver nobody answers for say so, in one line, exit 2 (README: no cluster), and
never "your identity may not…": an access review that got no answer is not a denial."""

from __future__ import annotations

import socket

import pytest

from tests.support.gputui_cli import closed_port, kubeconfig, run

COMMANDS = {
    "shift": ("shift", "llm/mistral-7b", "--to", "v2=10"),
    "rollout": ("rollout", "llm/mistral-7b", "v2"),
    "check --drill": ("check", "--drill", "gpu-h100-01", "--yes-i-mean-it"),
    "drain": ("drain", "gpu-h100-01"),
    "scale-down": ("scale-down", "llm/mistral-7b", "v1", "1"),
}


def assert_unreachable(out, reason: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: error: the apiserver https://127.0.0.1:"), out.stderr
    assert lines[0].endswith(f"could not be reached ({reason})"), lines[0]
    assert "may not" not in out.stderr and "Traceback" not in out.stderr
    assert "s3cret-token-value" not in out.stdout + out.stderr


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_refused_connection_is_said_as_such(tmp_path, name):
    kc = kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{closed_port()}")
    assert_unreachable(run(*COMMANDS[name], "--kubeconfig", kc, home=tmp_path), "connection refused")


def test_an_apiserver_that_never_answers_is_said_as_such(tmp_path):
    """It gives up by itself (run() stops a gputui still waiting after a minute) and says why: timed out, not
    a denial. How long that takes is a figure, not a test: benchmarks/unreachable.py."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # the kernel accepts; nobody ever answers (not even TLS's hello)
    try:
        kc = kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{silent.getsockname()[1]}")
        assert_unreachable(run(*COMMANDS["shift"], "--kubeconfig", kc, home=tmp_path), "timed out")
    finally:
        silent.close()

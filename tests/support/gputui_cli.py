"""gputui run as a user runs it: a subprocess with its own home (config, state, audit log) and no
KUBECONFIG from the machine running the tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml


def environment(home: Path | None = None, env: dict | None = None) -> dict[str, str]:
    environ = dict(os.environ)
    environ.pop("KUBECONFIG", None)
    if home is not None:
        environ.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_STATE_HOME=str(home / ".state"))
    environ.update(env or {})
    return environ


def run(*args: str, env: dict | None = None, home: Path | None = None) -> subprocess.CompletedProcess:
    """`gputui ARGS…` to its end (a minute at most), its output captured."""
    return subprocess.run([sys.executable, "-m", "gputui", *args], capture_output=True, text=True,
                          env=environment(home, env), timeout=60)


def start_drain(cluster, prometheus, *args: str, home: Path) -> subprocess.Popen:
    """`gputui drain ARGS…` against the test cluster, running; its lines read as they come (read_until)."""
    return subprocess.Popen([sys.executable, "-u", "-m", "gputui", "drain", "--kubeconfig", str(cluster.admin_kubeconfig),
                             "--prometheus", prometheus.url, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=environment(home))


def read_until(proc: subprocess.Popen, found, timeout: float = 60) -> list[str]:
    """The process's lines up to the first that `found` accepts; fails with them all when none does."""
    lines = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if found(line):
            return lines
        if not line and proc.poll() is not None:
            break
    raise AssertionError("".join(lines))


def kubeconfig(path: Path, server: str, contexts: tuple[str, ...] = ("main",)) -> str:
    """A kubeconfig at `path` for `server`, with a token gputui must never print; its contexts, the first current."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": contexts[0],
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "s3cret-token-value"}}],
        "contexts": [{"name": c, "context": {"cluster": "c", "user": "u"}} for c in contexts],
    }))
    return str(path)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port

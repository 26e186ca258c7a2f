"""gputui run as a user runs it: a subprocess with its own home (config, state, audit log) and no
KUBECONFIG from the machine running the tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
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
    # The test Prometheus scrapes every second: a quiet count after a pod leaves rotation settles in 3 s.
    return subprocess.Popen([sys.executable, "-u", "-m", "gputui", "drain", "--kubeconfig", str(cluster.admin_kubeconfig),
                             "--prometheus", prometheus.url, "--rotation-settle", "3s", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=environment(home))


def read_until(proc: subprocess.Popen, found, timeout: float = 60) -> list[str]:
    """The process's lines up to the first that `found` accepts; fails with them all when none does within
    `timeout`. A process that goes silent would block `readline` past any deadline checked between lines, so
    a timer kills it at the deadline (its pipe then ends): the wait is bounded, and nothing else reads the
    pipe, so a caller may go on with `communicate()` or `readline()` after a line was found."""
    lines: list[str] = []
    silent = threading.Timer(timeout, proc.kill)
    silent.daemon = True
    silent.start()
    try:
        while True:
            line = proc.stdout.readline()
            lines.append(line)
            if found(line):
                return lines
            if not line and proc.poll() is not None:
                break
    finally:
        silent.cancel()
    killed = " (killed: silent)" if silent.finished.is_set() else ""
    raise AssertionError(f"no line wanted within {timeout:g} s{killed}:\n" + "".join(lines))


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


# `python -c` running gputui with its waits on the apiserver cut (gputui has no setting for them): each module's
# own constant, checked to exist, so a rename fails here instead of silently waiting the full time again.
_SHORT_WAITS = """
import runpy, sys
import gputui.backends.kube_backend as backend, gputui.backends.kube_discovery as discovery
import gputui.backends.kube_http as http, gputui.backends.kube_writer as writer
seconds = float(sys.argv.pop(1))
for module, names in ((http, ("PROBE_TIMEOUT_S", "CONNECT_TIMEOUT_S")), (discovery, ("PROBE_TIMEOUT_S",)),
                      (writer, ("PROBE_TIMEOUT_S",)), (backend, ("PROBE_TIMEOUT_S",))):
    for name in names:
        assert hasattr(module, name), f"{module.__name__}.{name} is gone: tests/support/gputui_cli.py must follow"
        setattr(module, name, seconds)
sys.argv[0] = "gputui"
runpy.run_module("gputui", run_name="__main__", alter_sys=True)
"""


def run_with_short_waits(seconds: float, *args: str, env: dict | None = None,
                         home: Path | None = None) -> subprocess.CompletedProcess:
    """`gputui ARGS…` as `run` does, with the waits on an apiserver's answer (connect, discovery, access reviews,
    the probe) cut to `seconds`: a test of a server that accepts and never answers then takes seconds."""
    return subprocess.run([sys.executable, "-c", _SHORT_WAITS, str(seconds), *args], capture_output=True, text=True,
                          env=environment(home, env), timeout=60)


def silent_server() -> socket.socket:
    """A loopback server that accepts connections (the kernel does) and never answers, not even TLS's hello.
    Close it when done; its address is `https://127.0.0.1:{sock.getsockname()[1]}`."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def page_settings(kubeconfig_path: str, *more: str):
    """The settings of the gputui each page of `gputui serve --allow-writes --kubeconfig K MORE…` runs: its command
    line as serve builds it (gputui.cli.serve.child_command), read as that gputui reads it. Writes stay allowed."""
    import shlex

    from gputui.cli.parser import build_parser, settings_from
    from gputui.cli.serve import child_command

    served = build_parser().parse_args(["serve", "--allow-writes", "--kubeconfig", kubeconfig_path, *more])
    argv = shlex.split(child_command(served))[3:]  # past `python -m gputui`
    if "--read-only" in argv:
        raise AssertionError(f"serve --allow-writes runs its pages read-only: {argv}")
    return settings_from(build_parser().parse_args(argv))

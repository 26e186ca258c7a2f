"""A kubeconfig's client key (client-key-data) never lands in $TMPDIR: not while gputui runs, not after a dropped
SSH session (SIGHUP) or a SIGTERM ends it mid-connection, headless or in the TUI. The kubernetes client wrote
it to a temporary file removed at a normal exit only."""

from __future__ import annotations

import base64
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]  # the gputui under test is this tree's (python -m gputui from here)


class SilentServer:
    """An apiserver that accepts connections and never says a word (not even TLS's hello): gputui blocks on it
    for a few seconds at every step. `hello` is set once a client's TLS hello came: that client has loaded its
    certificate and key (urllib3 loads them into the TLS context before it says hello)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.hello = threading.Event()
        self._held: list[socket.socket] = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._held.append(conn)
            try:
                if conn.recv(1, socket.MSG_PEEK):  # left unread: nobody answers it
                    self.hello.set()
            except OSError:
                pass  # the client went (or close() ran): the next connection, if any

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.sock.close()
        for conn in self._held:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # wakes the thread if it waits on this one's hello
            conn.close()


@pytest.fixture
def server():
    s = SilentServer()
    yield s
    s.close()


@pytest.fixture
def keyed_kubeconfig(tmp_path, server) -> Path:
    """A kubeconfig whose user is a client certificate and key given as data, as kind and kubeadm write them."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "k.pem"),
                    "-out", str(tmp_path / "c.pem"), "-days", "1", "-subj", "/CN=gputui-test"],
                   check=True, capture_output=True)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "keyed",
        "clusters": [{"name": "c", "cluster": {"server": server.url, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {
            "client-certificate-data": base64.b64encode((tmp_path / "c.pem").read_bytes()).decode(),
            "client-key-data": base64.b64encode((tmp_path / "k.pem").read_bytes()).decode()}}],
        "contexts": [{"name": "keyed", "context": {"cluster": "c", "user": "u"}}],
    }))
    (tmp_path / "k.pem").unlink()
    return path


@pytest.fixture
def tmpdir_watched(tmp_path) -> Path:
    path = tmp_path / "tmpdir"
    path.mkdir()
    return path


def environment(tmp_path: Path, tmpdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "state"),
               TMPDIR=str(tmpdir), TERM="xterm-256color")
    return env


def left_in(tmpdir: Path) -> list[str]:
    return sorted(str(p.relative_to(tmpdir)) for p in tmpdir.rglob("*"))


def wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still running {timeout}s after the signal")


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_headless_blocked_on_a_silent_apiserver(tmp_path, server, keyed_kubeconfig, tmpdir_watched, signum):
    proc = subprocess.Popen([sys.executable, "-m", "gputui", "nodes", "--kubeconfig", str(keyed_kubeconfig)],
                            cwd=REPO, env=environment(tmp_path, tmpdir_watched),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.hello.wait(30), "gputui never said hello"  # past loading its key, blocked on the answer
        assert proc.poll() is None, proc.communicate()
        assert left_in(tmpdir_watched) == [], "the key was written to $TMPDIR while connecting"
        proc.send_signal(signum)
        proc.wait(30)
        assert left_in(tmpdir_watched) == [], f"left behind after {signum.name}"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_the_tui_blocked_on_a_silent_apiserver(tmp_path, server, keyed_kubeconfig, tmpdir_watched, signum):
    if shutil.which("tmux") is None:  # a missing tool is a failure, never a skip
        pytest.fail("tmux is not installed; scripts/test.sh installs it")
    socket_name = f"gputui-keys-{os.getpid()}-{signum.name}"
    pidfile = tmp_path / "pid"
    env = environment(tmp_path, tmpdir_watched)
    flags = [arg for key in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "TMPDIR", "TERM")
             for arg in ("-e", f"{key}={env[key]}")]
    command = (f"cd {shlex.quote(str(REPO))} && echo $$ > {shlex.quote(str(pidfile))} && exec "
               f"{shlex.quote(sys.executable)} -m gputui --kubeconfig {shlex.quote(str(keyed_kubeconfig))}")
    subprocess.run(["tmux", "-L", socket_name, "new-session", "-d", "-s", "gputui", "-x", "100", "-y", "30", *flags,
                    command], check=True, timeout=10)
    try:
        assert server.hello.wait(30), "gputui never said hello"  # past loading its key, blocked on the answer
        pid = int(pidfile.read_text())
        assert left_in(tmpdir_watched) == [], "the key was written to $TMPDIR while connecting"
        if signum == signal.SIGHUP:  # the terminal goes away, as when the SSH session drops
            subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True, timeout=10)
        else:
            os.kill(pid, signum)
        wait_gone(pid)
        assert left_in(tmpdir_watched) == [], f"left behind after {signum.name}"
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True, timeout=10)


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM, None])
def test_without_memfd_the_private_key_directory_goes_too(tmp_path, server, keyed_kubeconfig, tmpdir_watched, signum):
    """Where memfd is unavailable (macOS; a container without /proc) the key goes to a 0700 directory of its
    own, removed at exit and when SIGHUP or SIGTERM ends gputui. Forced here by a wrapper around main()."""
    wrapper = tmp_path / "no_memfd_gputui.py"
    wrapper.write_text("import sys\n"
                       "from gputui.backends import key_files\n"
                       "key_files._memfd = lambda data: None\n"
                       "from gputui.cli.main import main\n"
                       "sys.exit(main(sys.argv[1:]))\n")
    env = dict(environment(tmp_path, tmpdir_watched), PYTHONPATH=str(REPO))
    args = [sys.executable, str(wrapper), "nodes", "--kubeconfig", str(keyed_kubeconfig)]
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.hello.wait(30), "gputui never said hello"  # past loading its key, blocked on the answer
        made = left_in(tmpdir_watched)
        assert len(made) == 3 and made[0].startswith("gputui-"), made  # the directory, the certificate and key in it
        assert all(m.startswith(made[0]) for m in made), made
        if signum is None:
            server.close()  # refused from now on: gputui gives up and exits by itself
            assert proc.wait(60) == 2
        else:
            proc.send_signal(signum)
            assert proc.wait(30) == -signum
        assert left_in(tmpdir_watched) == [], f"left behind after {signum.name if signum else 'exit'}"
    finally:
        proc.kill()
        proc.wait()

"""Exec credential plugins run by gputui itself: bounded in time, never given the terminal, a failure one line;
keys and certificates from a kubeconfig or a plugin live in memory, never in $TMPDIR; an apiserver nobody
answers for is "unreachable", never a denial."""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
import yaml

from gputui.backends import exec_plugins, key_files
from gputui.backends.base import BackendError
from gputui.backends.exec_plugins import ExecPluginError, run_exec_plugin
from gputui.backends.key_files import memory_file
from gputui.backends.kube_errors import Unreachable
from gputui.backends.kube_writer import allowed, review
from gputui.backends.kubeconfig import connect
from tests.support.procs import dead, queued, wait_until

API = "client.authentication.k8s.io/v1beta1"


def plugin(tmp_path: Path, body: str, name: str = "plugin.py") -> str:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    path.chmod(0o755)
    return str(path)


def credential(status: dict, api: str = API) -> str:
    return f"print(json.dumps({{'apiVersion': {api!r}, 'kind': 'ExecCredential', 'status': {status!r}}}))"


def key_pair(tmp_path: Path) -> tuple[bytes, bytes]:
    """A self-signed certificate and its key, PEM (openssl: the test cluster's harness uses it too)."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "k.pem"),
                    "-out", str(tmp_path / "c.pem"), "-days", "1", "-subj", "/CN=gputui-test"],
                   check=True, capture_output=True)
    return (tmp_path / "c.pem").read_bytes(), (tmp_path / "k.pem").read_bytes()


def test_a_plugin_token_is_returned(tmp_path):
    status = run_exec_plugin({"command": plugin(tmp_path, credential({"token": "tok-1"})), "apiVersion": API},
                             str(tmp_path), None, timeout=10)
    assert status == {"token": "tok-1"}


def test_the_plugin_is_told_it_has_no_terminal_and_gets_no_stdin(tmp_path):
    body = ("info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
            "stdin = sys.stdin.read()\n"
            + credential({"token": "x"}).replace("{'token': 'x'}", "{'token': json.dumps([info, stdin, os.environ['EXTRA']])}"))
    spec = {"command": plugin(tmp_path, body), "apiVersion": API, "env": [{"name": "EXTRA", "value": "e"}],
            "provideClusterInfo": True}
    info, stdin, extra = json.loads(run_exec_plugin(spec, str(tmp_path), {"server": "https://h:6443"}, 10)["token"])
    assert info["spec"]["interactive"] is False and info["spec"]["cluster"] == {"server": "https://h:6443"}
    assert stdin == "" and extra == "e"


def test_a_plugin_that_never_answers_is_killed_with_what_it_started_at_the_timeout(tmp_path):
    pids, answered = tmp_path / "pids", tmp_path / "answered"
    # It answers after a minute (its child holds its stdout for five): stopped at 1.5 s, it never got that far;
    # a run that waited longer than its timeout would find the answer written, whatever the error then said.
    body = (f"child = __import__('subprocess').Popen(['sleep', '300'])\n"
            f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
            "sys.stderr.write('open https://login.example/device and type ABCD\\n'); sys.stderr.flush()\n"
            f"time.sleep(60)\nopen({str(answered)!r}, 'w').write('too late')\n" + credential({"token": "too-late"}))
    with pytest.raises(ExecPluginError) as caught:
        run_exec_plugin({"command": plugin(tmp_path, body, "hang.py"), "apiVersion": API}, str(tmp_path), None, 1.5)
    message = str(caught.value)
    assert message == ("exec credential plugin hang.py gave no credential within 1.5s and was stopped: "
                       "open https://login.example/device and type ABCD")
    for pid in map(int, pids.read_text().split()):
        # Killed, not waited for: gone long before its minute (a killed process may take a while to be reaped
        # on a busy machine, hence the generous wait).
        wait_until(lambda pid=pid: dead(pid), 30, interval=0.05, what=f"process {pid} gone after the timeout")
    assert not answered.exists()
    assert exec_plugins.running_plugins() == []



@pytest.mark.parametrize("body, said", [
    ("sys.stderr.write('token expired: run `login`\\nsecond line\\n'); sys.exit(3)",
     "exec credential plugin p.py failed (exit 3): token expired: run `login`"),
    ("sys.stderr.write('\\x1b]0;pwned\\x07bad\\x1b[2J\\n'); sys.exit(1)",
     "exec credential plugin p.py failed (exit 1): ␛]0;pwned␇bad␛[2J"),
    ("print('not json')", "exec credential plugin p.py printed no ExecCredential (not JSON)"),
    (credential({"token": "x"}, api="client.authentication.k8s.io/v1"),
     f"exec credential plugin p.py answered in client.authentication.k8s.io/v1, not the {API} the kubeconfig asks for"),
    ("print(json.dumps({'apiVersion': %r, 'kind': 'ExecCredential'}))" % API,
     "exec credential plugin p.py printed no ExecCredential status"),
])
def test_a_failing_plugin_is_one_line_with_its_own_words(tmp_path, body, said):
    with pytest.raises(ExecPluginError) as caught:
        run_exec_plugin({"command": plugin(tmp_path, body, "p.py"), "apiVersion": API}, str(tmp_path), None, 10)
    assert str(caught.value) == said


def test_a_plugin_that_cannot_be_run_says_so(tmp_path):
    with pytest.raises(ExecPluginError, match="exec credential plugin nope cannot be run: No such file"):
        run_exec_plugin({"command": str(tmp_path / "nope"), "apiVersion": API}, str(tmp_path), None, 10)


def kubeconfig(tmp_path: Path, server: str, user: dict) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "main",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
    }))
    return str(path)


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """$TMPDIR, as the kubernetes client's tempfile calls see it, pointed at a directory of the test's."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def test_client_key_data_never_reaches_the_disk(tmp_path, private_tmp):
    cert, key = key_pair(tmp_path)
    kc = kubeconfig(tmp_path, "https://127.0.0.1:1", {
        "client-certificate-data": base64.b64encode(cert).decode(), "client-key-data": base64.b64encode(key).decode()})
    conn = connect(kc)
    cfg = conn.configuration
    assert cfg.key_file.startswith("/proc/self/fd/") and cfg.cert_file.startswith("/proc/self/fd/")
    assert Path(cfg.key_file).read_bytes() == key and Path(cfg.cert_file).read_bytes() == cert
    assert os.readlink(cfg.key_file).startswith("/memfd:")
    ssl.create_default_context().load_cert_chain(cfg.cert_file, cfg.key_file)  # what urllib3 does with them
    assert list(private_tmp.iterdir()) == []


def test_a_plugin_client_certificate_never_reaches_the_disk(tmp_path, private_tmp):
    cert, key = key_pair(tmp_path)
    status = {"clientCertificateData": cert.decode(), "clientKeyData": key.decode()}
    kc = kubeconfig(tmp_path, "https://127.0.0.1:1", {"exec": {"apiVersion": API, "command": plugin(tmp_path, credential(status))}})
    cfg = connect(kc).configuration
    assert cfg.key_file.startswith("/proc/self/fd/") and Path(cfg.key_file).read_bytes() == key
    assert list(private_tmp.iterdir()) == []


def test_memory_files_are_shared_per_content_and_not_inherited(tmp_path):
    path = memory_file(b"some key")
    assert memory_file("some key") == path and memory_file(b"another key") != path
    fd = int(path.rsplit("/", 1)[1])
    assert not os.get_inheritable(fd)  # a credential plugin started later does not hold it


def test_a_plugin_token_is_the_connection_authorization(tmp_path):
    kc = kubeconfig(tmp_path, "https://127.0.0.1:1", {"exec": {"apiVersion": API, "command": plugin(tmp_path, credential({"token": "tok-2"}))}})
    assert connect(kc).headers()["authorization"] == "Bearer tok-2"


def test_a_failing_plugin_fails_the_connection_in_one_line_and_logs_nothing(tmp_path, caplog):
    body = "sys.stderr.write('token expired: run login\\n'); sys.exit(1)"
    kc = kubeconfig(tmp_path, "https://127.0.0.1:1", {"exec": {"apiVersion": API, "command": plugin(tmp_path, body, "p.py")}})
    with pytest.raises(BackendError) as caught:
        connect(kc)
    assert str(caught.value) == "exec credential plugin p.py failed (exit 1): token expired: run login"
    assert [r for r in caplog.records if r.name in ("root", "")] == []  # the client would log.error it and go on


def test_the_exec_timeout_reaches_the_plugin(tmp_path):
    """The message names the timeout the plugin was stopped at: 0.5 s, not the default 30 s (which this
    plugin, answering after a minute, would also outlast)."""
    kc = kubeconfig(tmp_path, "https://127.0.0.1:1", {"exec": {"apiVersion": API, "command": plugin(tmp_path, "time.sleep(60)", "h.py")}})
    with pytest.raises(ExecPluginError, match=r"within 0\.5s and was stopped"):
        connect(kc, exec_timeout=0.5)


def test_an_expired_plugin_token_is_fetched_again_once_for_all_threads(tmp_path):
    count = tmp_path / "count"
    count.write_text("")
    body = (f"open({str(count)!r}, 'a').write('x')\n"
            "time.sleep(0.3)\n"  # a slow plugin: the five threads below ask while it still runs
            "print(json.dumps({'apiVersion': %r, 'kind': 'ExecCredential', 'status': {'token': 'tok', "
            "'expirationTimestamp': '2000-01-01T00:00:00Z' if len(open(%r).read()) == 1 else '2999-01-01T00:00:00Z'}}))"
            % (API, str(count)))
    conn = connect(kubeconfig(tmp_path, "https://127.0.0.1:1", {"exec": {"apiVersion": API, "command": plugin(tmp_path, body)}}))
    assert count.read_text() == "x"  # the first run; its token has expired already
    threads = [threading.Thread(target=conn.headers) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count.read_text() == "xx"  # five threads asking for headers ran the plugin once more, not five times


SENTINEL = b"the test's own connection"


class Server:
    """A TCP port that accepts connections and closes them at once, without an answer: a pooled connection the
    restarted apiserver dropped looks like this. It counts the connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.accepted = 0
        self.sentinels = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if conn.recv(65536) == SENTINEL:
                self.sentinels += 1
            else:
                self.accepted += 1
            conn.close()

    def count(self) -> int:
        """The connections gputui made so far, each one accepted: the kernel queued every one of them before
        the request that made it failed, and the thread takes them in order, so once it has taken one of the
        test's own, made now, none made earlier is left uncounted."""
        before = self.sentinels
        with socket.create_connection(self.sock.getsockname()) as own:
            own.sendall(SENTINEL)
        wait_until(lambda: self.sentinels > before, 10, interval=0.01, what="the server to take the test's connection")
        return self.accepted

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"


def test_a_get_is_sent_again_once_on_a_dropped_connection_a_write_never(tmp_path):
    server = Server()
    conn = connect(kubeconfig(tmp_path, server.url, {"token": "t"}))
    with pytest.raises(Unreachable):
        conn.request("GET", "/version", timeout=2)
    assert server.count() == 2
    with pytest.raises(Unreachable):
        conn.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body={}, timeout=2)
    assert server.count() == 3


def test_an_unanswered_read_is_not_retried(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # accepted by the kernel, never answered
    try:
        conn = connect(kubeconfig(tmp_path, f"http://127.0.0.1:{sock.getsockname()[1]}", {"token": "t"}))
        with pytest.raises(Unreachable, match="timed out"):
            conn.request("GET", "/version", timeout=1)
        assert queued(sock) == 1  # one wait, not two: a retry would have connected again
    finally:
        sock.close()


def test_an_apiserver_nobody_answers_for_is_never_read_as_a_denial(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    conn = connect(kubeconfig(tmp_path, f"https://127.0.0.1:{port}", {"token": "t"}))
    with pytest.raises(Unreachable) as caught:
        allowed(conn, "patch", "nodes")
    assert caught.value.reason == "connection refused"
    assert review(conn, "patch", "nodes") is None  # gputui check: unknown, not denied


def test_without_memfd_keys_go_to_a_private_directory_removed_on_release(tmp_path, private_tmp, monkeypatch):
    monkeypatch.setattr(key_files, "_memfd", lambda data: None)  # macOS, or /proc not mounted
    path = Path(memory_file(f"a key for {tmp_path}".encode()))
    directory = path.parent
    assert directory.parent == private_tmp and directory.name.startswith("gputui-")
    assert directory.stat().st_mode & 0o777 == 0o700 and path.stat().st_mode & 0o777 == 0o600
    exec_plugins.release()  # what SIGHUP and SIGTERM run (gputui.cli.main), and exit
    assert list(private_tmp.iterdir()) == []
    monkeypatch.setattr(key_files, "_memory_files", {})

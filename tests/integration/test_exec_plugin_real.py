"""Exec credential plugins in a real `gputui` process: one that never answers is stopped at --exec-timeout with
everything it started, one that fails is one line in its own words (no `ERROR:root:`, no urllib3 retry lines),
a dropped SSH session (SIGHUP) leaves none behind; one that hands out a token lets gputui read the real
apiserver."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.gputui_cli import closed_port
from tests.support.procs import dead, wait_for, wait_until

REPO = Path(__file__).resolve().parents[2]  # the gputui under test is this tree's (python -m gputui from here)
API = "client.authentication.k8s.io/v1beta1"



def write_plugin(tmp_path: Path, body: str, name: str = "plugin.py") -> Path:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\nimport json, os, subprocess, sys, time\n{body}\n")
    path.chmod(0o755)
    return path


def exec_kubeconfig(tmp_path: Path, command: Path, server: str | None = None, ca: str | None = None) -> Path:
    cluster = {"server": server or f"https://127.0.0.1:{closed_port()}"}
    cluster.update({"certificate-authority": ca} if ca else {"insecure-skip-tls-verify": True})
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "main",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": API, "command": str(command),
                                                  "interactiveMode": "IfAvailable"}}}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "state"))
    env.update(extra)
    return env


def gputui(tmp_path: Path, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    """`gputui ARGS…` to its end; one still running after `timeout` seconds fails the test (it hung)."""
    return subprocess.run([sys.executable, "-m", "gputui", *args], capture_output=True, text=True, cwd=REPO,
                          env=environment(tmp_path, **env), timeout=timeout)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: error: "), done.stderr
    for noise in ("Traceback", "ERROR:root", "urllib3", "Retrying", "WARNING"):
        assert noise not in done.stderr, done.stderr
    return lines[0]



def assert_gone(pid: int) -> None:
    """The process ends (a killed process may take a while to be reaped on a busy machine: a generous wait;
    the plugins here would live ten minutes)."""
    wait_until(lambda: dead(pid), 30, interval=0.05, what=f"the plugin's process {pid} to end with gputui")


HANG = ("child = subprocess.Popen(['sleep', '600'])\n"
        "open(sys.argv[0] + '.pids', 'w').write(f'{os.getpid()} {child.pid}')\n"
        "sys.stderr.write('waiting for you to log in at https://login.example/device\\n'); sys.stderr.flush()\n"
        "time.sleep(600)")


def plugin_pids(plugin: Path, timeout: float = 20.0) -> list[int]:
    pids = Path(str(plugin) + ".pids")
    wait_until(lambda: pids.exists() and pids.read_text(), timeout, interval=0.05, what="the plugin to start")
    return [int(p) for p in pids.read_text().split()]


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_a_plugin_that_never_answers_ends_gputui_at_the_exec_timeout(tmp_path, how):
    plugin = write_plugin(tmp_path, HANG, "hang.py")
    kc = exec_kubeconfig(tmp_path, plugin)
    if how == "flag":
        done = gputui(tmp_path, "nodes", "--kubeconfig", str(kc), "--exec-timeout", "2")
    else:
        done = gputui(tmp_path, "nodes", "--kubeconfig", str(kc), GPUTUI_EXEC_TIMEOUT="2")
    line = one_error_line(done)
    # Stopped at the 2 s asked for, not the default 30 s nor the plugin's own ten minutes (gputui() fails a
    # run past a minute): the line names the timeout it was stopped at.
    assert line == ("gputui: error: exec credential plugin hang.py gave no credential within 2s and was stopped: "
                    "waiting for you to log in at https://login.example/device")
    for pid in plugin_pids(plugin):
        assert_gone(pid)


def test_a_failing_plugin_is_one_line_in_its_own_words(tmp_path):
    plugin = write_plugin(tmp_path, "sys.stderr.write('\\x1b]0;owned\\x07token expired: run `login`\\nmore\\n'); sys.exit(1)",
                          "login.py")
    done = gputui(tmp_path, "nodes", "--kubeconfig", str(exec_kubeconfig(tmp_path, plugin)))
    line = one_error_line(done)
    assert line == "gputui: error: exec credential plugin login.py failed (exit 1): ␛]0;owned␇token expired: run `login`"


def test_a_bad_exec_timeout_is_one_line(tmp_path):
    kc = exec_kubeconfig(tmp_path, write_plugin(tmp_path, "sys.exit(1)"))
    for value in ("0", "-1", "inf", "nan", "soon"):
        done = gputui(tmp_path, "nodes", "--kubeconfig", str(kc), "--exec-timeout", value)
        assert "--exec-timeout" in one_error_line(done)
        done = gputui(tmp_path, "nodes", "--kubeconfig", str(kc), GPUTUI_EXEC_TIMEOUT=value)
        assert "exec_timeout" in one_error_line(done)


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_a_dropped_session_leaves_no_plugin_behind(tmp_path, signum):
    """The plugin runs in its own process group (so that its timeout kills all it started): a hangup of the
    terminal does not reach it, so gputui stops it before the signal ends gputui."""
    plugin = write_plugin(tmp_path, HANG, "hang.py")
    proc = subprocess.Popen([sys.executable, "-m", "gputui", "nodes", "--kubeconfig", str(exec_kubeconfig(tmp_path, plugin))],
                            cwd=REPO, env=environment(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pids = plugin_pids(plugin)
        proc.send_signal(signum)
        assert proc.wait(30) == -signum  # ended by the signal, as before
        for pid in pids:
            assert_gone(pid)
    finally:
        proc.kill()
        proc.wait()


def test_a_plugin_token_reads_the_real_apiserver(cluster, fake_kubelet, tmp_path):
    token = cluster.token("admin")
    plugin = write_plugin(tmp_path, "print(json.dumps({'apiVersion': %r, 'kind': 'ExecCredential', "
                                    "'status': {'token': %r}}))" % (API, token))
    admin = yaml.safe_load(cluster.admin_kubeconfig.read_text())
    server = admin["clusters"][0]["cluster"]["server"]
    ca = admin["clusters"][0]["cluster"].get("certificate-authority")
    kc = exec_kubeconfig(tmp_path, plugin, server=server, ca=ca)
    if ca is None:  # the harness may inline the CA
        config = yaml.safe_load(kc.read_text())
        config["clusters"][0]["cluster"] = admin["clusters"][0]["cluster"]
        kc.write_text(yaml.safe_dump(config))
    done = gputui(tmp_path, "nodes", "--kubeconfig", str(kc), "-o", "json", "--exec-timeout", "10")
    assert done.returncode == 0, done.stderr
    assert token not in done.stdout + done.stderr
    assert '"name"' in done.stdout


def test_the_tui_connects_through_a_slow_plugin_then_shows_the_cluster(cluster, fake_kubelet, tmp_path):
    """The start-up path end to end: the connecting screen while the plugin takes its time, then the real
    cluster's nodes, then q."""
    import re
    import shlex
    import shutil

    if shutil.which("tmux") is None:  # a missing tool is a failure, never a skip
        pytest.fail("tmux is not installed; scripts/test.sh installs it")
    # A slow plugin (three seconds: the behaviour under test), so that the connecting screen shows it.
    plugin = write_plugin(tmp_path, "time.sleep(3)\nprint(json.dumps({'apiVersion': %r, 'kind': 'ExecCredential', "
                                    "'status': {'token': %r}}))" % (API, cluster.token("admin")))
    config = yaml.safe_load(cluster.admin_kubeconfig.read_text())
    config["users"][0]["user"] = {"exec": {"apiVersion": API, "command": str(plugin)}}
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump(config))
    context = config["current-context"]
    rc = tmp_path / "rc"
    env = environment(tmp_path, TERM="xterm-256color")
    flags = [arg for key in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "TERM") for arg in ("-e", f"{key}={env[key]}")]
    socket_name = f"gputui-plugin-{os.getpid()}"
    command = (f"cd {shlex.quote(str(REPO))}; {shlex.quote(sys.executable)} -m gputui --kubeconfig "
               f"{shlex.quote(str(kc))}; echo $? > {shlex.quote(str(rc))}; sleep 600")

    def screen() -> str:
        return subprocess.run(["tmux", "-L", socket_name, "capture-pane", "-p", "-t", "g"], capture_output=True,
                              text=True, timeout=10).stdout

    def shows(pattern: str, timeout: float = 30) -> str:
        def showing() -> str:
            text = screen()
            return text if re.search(pattern, text) else ""
        return wait_for(showing, timeout=timeout, interval=0.1, what=f"{pattern!r} on the screen", on_timeout=screen)

    subprocess.run(["tmux", "-L", socket_name, "new-session", "-d", "-s", "g", "-x", "120", "-y", "30", *flags, command],
                   check=True, timeout=10)
    try:
        shows(rf"connecting to {re.escape(context)}… \d+s")
        shows(r"credential plugin plugin\.py: \d+s of 30s")
        shown = shows(r"Nodes \d+")
        assert "connecting to" not in shown
        subprocess.run(["tmux", "-L", socket_name, "send-keys", "-t", "g", "q"], check=True, timeout=10)
        wait_for(lambda: rc.exists() and rc.read_text().strip(), timeout=30, interval=0.1, what="gputui to quit on q",
                 on_timeout=screen)
        assert rc.read_text().strip() == "0"
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True, timeout=10)

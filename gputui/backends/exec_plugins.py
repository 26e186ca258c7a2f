"""Exec credential plugins (a kubeconfig user's `exec:`), run by gputui rather than the official client:
never given the terminal, stopped with everything they started when they take longer than the exec timeout,
and a failure is one line carrying the plugin's own stderr. The client would wait forever, log
`ERROR:root:` and carry on without credentials. `loader_class` is the client's kubeconfig loader with this
runner in place of its own."""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from gputui.backends.base import BackendError
from gputui.backends.key_files import memory_file, remove_private_files
from gputui.base.debug_log import log
from gputui.base.errors import first_line
from gputui.base.safe_text import visible

EXEC_TIMEOUT_S = 30.0  # an exec credential plugin's time to answer (Settings.exec_timeout)


class ExecPluginError(BackendError):
    """An exec credential plugin gave no credential: it failed, timed out or answered nonsense."""


_plugins_lock = threading.Lock()
_running_plugins: dict[subprocess.Popen, tuple[str, float]] = {}  # each running plugin: its name, when started


def running_plugins() -> list[tuple[str, float]]:
    """The credential plugins running now: (name, time.monotonic() when started), for the connecting screen."""
    with _plugins_lock:
        return list(_running_plugins.values())


def stop_plugins() -> None:
    """Stop every credential plugin running now, with what it started (each is its own process group): at
    exit, on SIGHUP/SIGTERM, when the TUI quits. A connection waiting on one then fails at once."""
    with _plugins_lock:
        procs = list(_running_plugins)
    for proc in procs:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    with suppress(ProcessLookupError, PermissionError):  # ended, with all it started
        os.killpg(proc.pid, signal.SIGKILL)  # its group id is its pid (process_group=0)


def run_exec_plugin(spec: Mapping[str, Any], base_path: str, cluster: Mapping[str, Any] | None,
                    timeout: float = EXEC_TIMEOUT_S) -> dict[str, Any]:
    """Run a kubeconfig `exec:` credential plugin as kubectl does and return its ExecCredential's status
    (a token, or a client certificate and key). It never gets the terminal (the TUI owns it; a prompt would
    wait forever) and is told so (spec.interactive false). After `timeout` seconds it is killed with
    everything it started; any failure is an ExecPluginError of one line carrying the first line of the
    plugin's stderr, its control characters made visible."""
    command, api_version = spec.get("command"), spec.get("apiVersion")
    if not command or not api_version:
        raise ExecPluginError("kubeconfig: exec: a credential plugin needs command and apiVersion")
    name = visible(os.path.basename(str(command)), 80)
    info: dict[str, Any] = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    if spec.get("provideClusterInfo") and cluster:
        info["spec"]["cluster"] = _cluster_info(cluster)
    env = dict(os.environ)
    env.update({str(e["name"]): str(e["value"]) for e in spec.get("env") or [] if "name" in e and "value" in e})
    env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
    args = [str(command), *(str(a) for a in spec.get("args") or [])]
    try:
        # Its own process group: at the timeout it is killed with every process it started, which would
        # otherwise hold its pipes open (and this read) after it died.
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=base_path or None, env=env, process_group=0)
    except OSError as exc:
        raise ExecPluginError(f"exec credential plugin {name} cannot be run: {exc.strerror or exc}") from None
    _stop_at_exit()
    started = time.monotonic()
    with _plugins_lock:
        _running_plugins[proc] = (name, started)
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            _out, err = _rest_of(proc)
            raise ExecPluginError(f"exec credential plugin {name} gave no credential within {timeout:g}s "
                                  f"and was stopped{_said(err)}") from None
    except BaseException:  # the timeout, Ctrl-C, the app quitting: nothing it started stays behind
        _kill_group(proc)
        raise
    finally:
        with _plugins_lock:
            _running_plugins.pop(proc, None)
    log.debug("credential plugin %s ended (exit %s) after %.1fs", name, proc.returncode, time.monotonic() - started)
    if proc.returncode != 0:
        how = f"exit {proc.returncode}" if proc.returncode > 0 else f"killed by signal {-proc.returncode}"
        raise ExecPluginError(f"exec credential plugin {name} failed ({how}){_said(err)}")
    try:
        data = json.loads(out)
    except ValueError:
        raise ExecPluginError(f"exec credential plugin {name} printed no ExecCredential (not JSON){_said(err)}") \
            from None
    if not isinstance(data, dict) or not isinstance(data.get("status"), dict):
        raise ExecPluginError(f"exec credential plugin {name} printed no ExecCredential status")
    if data.get("apiVersion") != api_version:
        raise ExecPluginError(f"exec credential plugin {name} answered in {visible(data.get('apiVersion'), 80)}, "
                              f"not the {visible(api_version, 80)} the kubeconfig asks for")
    return data["status"]


def _rest_of(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """What a killed plugin had written: read until its pipes close, or a second at most (a process that left
    its group may hold them)."""
    try:
        return proc.communicate(timeout=1.0)
    except subprocess.TimeoutExpired as exc:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        return exc.output or b"", exc.stderr or b""


def _said(stderr: bytes | str | None) -> str:
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else (stderr or "")
    line = first_line(text, 300)
    return f": {visible(line)}" if line else ""


def _cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The cluster as ExecCredential's spec.cluster gives it (provideClusterInfo): the kubeconfig's fields,
    the plugin's own config from the client.authentication.k8s.io/exec extension."""
    keys = ("server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority-data", "proxy-url",
            "disable-compression")
    info = {k: cluster[k] for k in keys if k in cluster}
    for extension in cluster.get("extensions") or []:
        if extension.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = extension.get("extension")
    return info


_loader: Any = None


def loader_class() -> Any:
    """The client's KubeConfigLoader with gputui's exec plugin runner (made once, on first use: importing the
    client is slow, and the demo never needs it)."""
    global _loader
    if _loader is not None:
        return _loader
    from kubernetes.config.dateutil import parse_rfc3339  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)
    from kubernetes.config.kube_config import KubeConfigLoader, _is_expired  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)

    class Loader(KubeConfigLoader):
        exec_timeout = EXEC_TIMEOUT_S

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._exec_lock = threading.Lock()

        def _load_from_exec_plugin(self) -> bool | None:
            # The client's own swallows every failure (logging.error, then no credentials at all) and waits
            # forever. Here a failure raises, as one line, and every refresh of an expired credential (from
            # any thread: each watch asks for headers) runs the plugin once.
            user, cluster = self._user, self._cluster
            if user is None or cluster is None or "exec" not in user:
                return None  # no user, no cluster (the client sets both before asking): no plugin to run
            with self._exec_lock:
                if "expiry" in self.__dict__ and not _is_expired(self.expiry) and \
                        ("token" in self.__dict__ or "cert_file" in self.__dict__):
                    return True  # another thread refreshed it while this one waited
                base_path = self._get_base_path(cluster.path)
                status = run_exec_plugin(user["exec"].value, base_path, cluster.value, self.exec_timeout)
                if status.get("token"):
                    self.token = f"Bearer {status['token']}"
                elif status.get("clientCertificateData") and status.get("clientKeyData"):
                    self.cert_file = memory_file(status["clientCertificateData"])
                    self.key_file = memory_file(status["clientKeyData"])
                else:
                    name = visible(os.path.basename(str(user["exec"].value.get("command"))), 80)
                    raise ExecPluginError(f"exec credential plugin {name} gave neither a token nor a client "
                                          "certificate and key")
                if status.get("expirationTimestamp"):
                    self.expiry = parse_rfc3339(status["expirationTimestamp"])
                return True

    _loader = Loader
    return Loader


def release() -> None:
    """What gputui leaves on the machine, gone: running credential plugins and private key files. At exit,
    and from SIGHUP/SIGTERM handlers (gputui.cli.main), before the signal ends the process."""
    stop_plugins()
    remove_private_files()


_exit_hook = False


def _stop_at_exit() -> None:
    global _exit_hook
    if not _exit_hook:
        _exit_hook = True
        atexit.register(stop_plugins)

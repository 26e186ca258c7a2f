"""Talking to the apiserver as kubectl would configure it, reading raw JSON.

The official client loads kubeconfig (several files in KUBECONFIG, contexts,
in-cluster config); requests go through its own urllib3 pool, but responses are
parsed as plain JSON, never into the client's model classes (that
deserialisation is the slow part at scale).

Two parts of the client's loading are gputui's own, because the client's cannot wait a bounded time or keep
a secret off the disk:

- Exec credential plugins run here (`run_exec_plugin`): never given the terminal, stopped with everything
  they started when they take longer than `exec_timeout`, and a failure is one line carrying the plugin's
  own stderr. The client would wait forever, log `ERROR:root:` and carry on without credentials.
- Client keys and certificates given as data (client-key-data, a plugin's clientKeyData, and the CA) are
  handed to ssl, which reads paths only, as files in memory (`memory_file`: a memfd, gone with the
  process however it ends). The client would write them to $TMPDIR and remove them at a normal exit only,
  so a dropped SSH session (SIGHUP) left the key behind.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

from gputui.backends.base import BackendError
from gputui.backends.gcpause import gc_paused
from gputui.base.debug_log import log
from gputui.base.errors import first_line, one_line, transport_reason
from gputui.base.safe_text import visible
from gputui.base.yaml_file import load_text

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 3.0  # a cheap question (version, who am I, may I): an answer or a clear failure, fast
EXEC_TIMEOUT_S = 30.0  # an exec credential plugin's time to answer (Settings.exec_timeout)


class Unreachable(BackendError):
    """No answer from the apiserver at all (refused, timed out, no route, TLS failed): never a refusal."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"cannot reach {host}: {reason}")
        self.host = host
        self.reason = reason


class ExecPluginError(BackendError):
    """An exec credential plugin gave no credential: it failed, timed out or answered nonsense."""


class ApiError(BackendError):
    def __init__(self, status: int, message: str, body: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = dict(body or {})

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", ""))

    @property
    def causes(self) -> list[dict[str, Any]]:
        return list((self.body.get("details") or {}).get("causes") or [])


@dataclass
class Connection:
    """Everything a request needs: where, how to authenticate, which context."""

    host: str
    context: str
    user: str
    namespace: str | None
    pool: urllib3.PoolManager
    configuration: Any  # kubernetes.client.Configuration

    def headers(self) -> dict[str, str]:
        # auth_settings() runs the client's refresh hook: exec plugins and expiring tokens.
        headers = {"Accept": "application/json", "User-Agent": "gputui"}
        for auth in self.configuration.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"]] = auth["value"]
        return headers

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        q = {k: v for k, v in (query or {}).items() if v is not None}
        return self.host.rstrip("/") + path + (("?" + urlencode(q)) if q else "")

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = READ_TIMEOUT_S,
    ) -> dict[str, Any]:
        headers = self.headers()
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        # No retry by urllib3: a second try after a connection timed out doubles the wait. A GET is sent again
        # once when a pooled connection died with a restarted apiserver, which fails at once (ProtocolError);
        # writes are never retried here (the ops decide).
        attempts = 2 if method == "GET" else 1
        for attempt in range(attempts):
            try:
                resp = self.pool.request(
                    method, self.url(path, query), body=data, headers=headers,
                    timeout=urllib3.Timeout(connect=min(CONNECT_TIMEOUT_S, timeout), read=timeout),
                    retries=False, preload_content=True,
                )
                break
            except urllib3.exceptions.ProtocolError as exc:
                if attempt + 1 == attempts:
                    raise Unreachable(self.host, _reason(exc)) from None
            except urllib3.exceptions.HTTPError as exc:
                raise Unreachable(self.host, _reason(exc)) from None
        return _decode(resp.status, resp.data, self.host)

    def stream(
        self, path: str, query: Mapping[str, Any], timeout: float, on_open: Callable[[], None] = lambda: None,
        on_response: Callable[[Any], None] = lambda _resp: None,
    ) -> Iterator[dict[str, Any]]:
        """A watch: one JSON event per line, until the server or the read timeout ends it.

        on_open runs once the server accepted the watch: a quiet cluster sends no events,
        and an open watch is fresh data all the same. on_response gets the open response,
        so another thread can end a quiet watch at once (see ListWatchCache.stop).
        """
        try:
            resp = self.pool.request(
                "GET", self.url(path, query), headers=self.headers(),
                timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=timeout),
                retries=False, preload_content=False,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise Unreachable(self.host, _reason(exc)) from None
        on_response(resp)
        try:
            if resp.status != 200:
                _decode(resp.status, resp.read(), self.host)
            on_open()
            buffer = b""
            for chunk in resp.stream(64 * 1024):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        except urllib3.exceptions.HTTPError as exc:
            raise BackendError(f"watch on {path} broke: {_reason(exc)}") from None
        finally:
            resp.release_conn()


def _reason(exc: Exception) -> str:
    return transport_reason(exc)


def _decode(status: int, data: bytes, host: str) -> dict[str, Any]:
    try:
        with gc_paused():  # a list page is hundreds of objects (see gcpause)
            body = json.loads(data) if data else {}
    except ValueError:
        body = {}
    if 200 <= status < 300:
        return body
    message = body.get("message") if isinstance(body, dict) else None
    if status == 401:
        raise ApiError(status, f"{host} rejected the credentials (401 Unauthorized)", body)
    if status == 403:
        raise ApiError(status, f"forbidden: {message or 'not allowed'}", body)
    raise ApiError(status, f"{status}: {message or 'request failed'}", body if isinstance(body, dict) else {})


def path_of(group: str, version: str, plural: str, namespace: str | None = None, name: str | None = None) -> str:
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    if namespace:
        base += f"/namespaces/{quote(namespace)}"
    base += f"/{plural}"
    if name:
        base += f"/{quote(name)}"
    return base


def kubeconfig_files(kubeconfig: str | None = None) -> list[Path]:
    """The files kubectl would read, the one place that decides: --kubeconfig, else KUBECONFIG's list, else
    ~/.kube/config."""
    if kubeconfig:
        return [Path(kubeconfig).expanduser()]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [Path.home() / ".kube" / "config"]


def target_context(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The context `connect` would use ("in-cluster" inside a pod), read from the kubeconfig only: no
    credential plugin runs and nothing is sent. A bad kubeconfig or an unknown context is one clear line."""
    files = kubeconfig_files(kubeconfig)
    if _in_cluster(kubeconfig, files):
        return "in-cluster"
    joined, current = _chosen_context(kubeconfig, context, files)
    _loader_for(joined, context)  # the context's cluster and user exist
    return str(current.get("name", context or ""))


def connect(
    kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None,
    exec_timeout: float = EXEC_TIMEOUT_S,
) -> Connection:
    """Load configuration exactly as kubectl resolves it; one clear line when it is bad. An exec credential
    plugin runs here, for `exec_timeout` seconds at most (and again whenever its credential expires)."""
    from kubernetes import client, config  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)
    from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)

    _quiet_library_logs()
    _keep_key_files_in_memory()
    configuration = client.Configuration()
    user = ""
    default_ns = "default"
    files = kubeconfig_files(kubeconfig)
    if _in_cluster(kubeconfig, files):
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise BackendError(f"in-cluster config: {exc}") from None
        ctx_name = "in-cluster"
        try:
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                default_ns = f.read().strip() or default_ns
        except OSError:
            pass
    else:
        joined, current = _chosen_context(kubeconfig, context, files)
        loader = _loader_for(joined, context)
        loader.exec_timeout = exec_timeout
        try:
            loader.load_and_set(configuration)
        except BackendError:
            raise
        except ConfigException as exc:
            raise BackendError(_config_error(str(exc), context)) from None
        except Exception as exc:  # noqa: BLE001 - a shape kubeconfig_problem does not know: still the files it came from
            raise BackendError(f"kubeconfig {_names(joined)} is not valid: {one_line(exc)}") from None
        ctx_name = current.get("name", context or "")
        ctx = current.get("context") or {}
        user = ctx.get("user", "")
        default_ns = ctx.get("namespace") or default_ns
    pool = client.ApiClient(configuration).rest_client.pool_manager
    return Connection(
        host=configuration.host, context=ctx_name, user=user,
        namespace=namespace, pool=pool, configuration=configuration,
    )


def _in_cluster(kubeconfig: str | None, files: list[Path]) -> bool:
    return kubeconfig is None and not os.environ.get("KUBECONFIG") and bool(os.environ.get("KUBERNETES_SERVICE_HOST")) \
        and not files[0].exists()


def _chosen_context(kubeconfig: str | None, context: str | None, files: list[Path]) -> tuple[str, dict]:
    """The kubeconfig files joined as KUBECONFIG would join them, and the context chosen in them."""
    from kubernetes import config  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)
    from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)

    try:
        missing = [p for p in files if not p.exists()]
    except OSError as exc:  # a KUBECONFIG entry the file system cannot even look up (a name too long)
        raise BackendError(f"kubeconfig {visible(exc.filename, 120)} cannot be read: {exc.strerror or exc}") from None
    if kubeconfig and missing:
        raise BackendError(f"kubeconfig {kubeconfig} does not exist")
    if len(missing) == len(files):  # KUBECONFIG names only files that are not there (kubectl skips missing ones)
        raise BackendError(f"kubeconfig {', '.join(visible(str(p), 200) for p in files)} "
                           f"{'does not exist' if len(files) == 1 else 'do not exist'} (KUBECONFIG)")
    for path in files:  # one line naming the file, never the client's TypeError on a file of the wrong shape
        problem = None if path in missing else kubeconfig_problem(path)
        if problem:
            raise BackendError(problem)
    joined = os.pathsep.join(str(p) for p in files)  # the client merges a KUBECONFIG-style list
    try:
        contexts, current = config.list_kube_config_contexts(joined)
    except ConfigException as exc:
        raise BackendError(_config_error(str(exc), context)) from None
    except Exception as exc:  # noqa: BLE001 - a shape kubeconfig_problem does not know: still the files it came from
        raise BackendError(f"kubeconfig {_names(joined)} is not valid: {one_line(exc)}") from None
    if context is not None:
        current = next((c for c in contexts if c.get("name") == context), None)
        if current is None:
            raise BackendError(f'context "{context}" is not in the kubeconfig')
    return joined, current or {}


KUBECONFIG_LISTS = ("clusters", "contexts", "users")


def kubeconfig_problem(path: Path) -> str | None:
    """What makes one kubeconfig file unusable, in one line that names it (None: the client may read it): not
    readable, not YAML (with the line), empty, not a mapping, or a list of clusters, contexts or users of the
    wrong shape. The client's own errors for these are Python's ("'str' object does not support item
    assignment") and name no file."""
    name = visible(str(path), 200)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return f"kubeconfig {name} is not UTF-8 text"
    except OSError as exc:
        return f"kubeconfig {name} cannot be read: {exc.strerror or one_line(exc)}"
    try:
        doc = load_text(text)
    except ValueError as exc:
        return f"kubeconfig {name}: {first_line(str(exc), 200)}"
    if doc is None:
        return f"kubeconfig {name} is empty"
    if not isinstance(doc, dict):
        return f"kubeconfig {name} is not a kubeconfig: a YAML {_yaml_kind(doc)}, not a mapping of clusters, " \
               "contexts and users"
    for key in KUBECONFIG_LISTS:
        entries, item = doc.get(key), key[:-1]
        if entries is None:
            continue
        if not isinstance(entries, list):
            return f"kubeconfig {name}: {key} is a {_yaml_kind(entries)}, not a list"
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                return f"kubeconfig {name}: {key}[{i}] has no name (each entry is name: and {item}:)"
            if entry.get(item) is not None and not isinstance(entry[item], dict):
                return (f"kubeconfig {name}: {key}[{i}] ({visible(entry['name'], 80)}): {item} is a "
                        f"{_yaml_kind(entry[item])}, not a mapping")
    current = doc.get("current-context")
    if current is not None and not isinstance(current, str):
        return f"kubeconfig {name}: current-context is a {_yaml_kind(current)}, not a name"
    return None


def _yaml_kind(value: object) -> str:
    return {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), type(value).__name__)


def _loader_for(joined: str, context: str | None) -> Any:
    """The client's loader (with gputui's plugin runner) on the context: its cluster and user looked up, nothing
    run or sent yet."""
    from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)
    from kubernetes.config.kube_config import KubeConfigMerger  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)

    try:
        return _loader_class()(config_dict=KubeConfigMerger(joined).config, active_context=context,
                               config_base_path=None)
    except ConfigException as exc:
        raise BackendError(_config_error(str(exc), context)) from None
    except Exception as exc:  # noqa: BLE001 - a shape kubeconfig_problem does not know: still the files it came from
        raise BackendError(f"kubeconfig {_names(joined)} is not valid: {one_line(exc)}") from None


def _names(joined: str) -> str:
    return ", ".join(visible(p, 200) for p in joined.split(os.pathsep) if p)


def _config_error(text: str, context: str | None) -> str:
    first = first_line(text) or "invalid kubeconfig"
    if context and "context" in first.lower():
        return f'context "{context}" is not in the kubeconfig'
    return f"kubeconfig: {first}"


def _quiet_library_logs() -> None:
    """The client and urllib3 log warnings (a connection pool full, a retry) to whatever handler the root
    logger has: on the terminal they are noise before gputui's own line, in the TUI they tear the screen.
    gputui words its own failures; --debug says what it does (gputui.base.debug_log)."""
    for name in ("urllib3", "kubernetes"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())
        logger.propagate = False


# ----- exec credential plugins ----------------------------------------------------------------------------

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


def _loader_class() -> Any:
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


# ----- key and certificate data: files in memory ------------------------------------------------------------

_files_lock = threading.Lock()
_memory_files: dict[bytes, str] = {}  # content -> its path (the same key twice is one file)
_private_dir: str | None = None  # where memfd is unavailable: a 0700 directory removed at exit and on signals


def memory_file(content: bytes | str) -> str:
    """A path whose file holds `content` for as long as this process lives, for ssl's load_cert_chain and
    load_verify_locations, which read paths only. On Linux a memfd (/proc/self/fd/N): never on a disk, gone
    however the process ends, SIGKILL included, and not inherited by children. Elsewhere a 0600 file in a
    0700 private directory that `remove_private_files` removes (at exit, and on SIGHUP and SIGTERM through
    gputui.cli.main)."""
    data = content.encode() if isinstance(content, str) else bytes(content)
    with _files_lock:
        path = _memory_files.get(data)
        if path is None:
            path = _memfd(data) or _private_file(data)
            _memory_files[data] = path
        return path


def _memfd(data: bytes) -> str | None:
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    try:
        fd = create("gputui-credential", os.MFD_CLOEXEC)
    except OSError:
        return None
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    path = f"/proc/self/fd/{fd}"
    if not os.path.exists(path):  # no /proc mounted
        os.close(fd)
        return None
    return path


def _private_file(data: bytes) -> str:
    global _private_dir
    if _private_dir is None:
        _private_dir = tempfile.mkdtemp(prefix="gputui-")  # 0700
        atexit.register(remove_private_files)
    fd, path = tempfile.mkstemp(dir=_private_dir)  # 0600
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def remove_private_files() -> None:
    """Remove the private directory of key files, if memfd was unavailable and one was made."""
    global _private_dir
    if _private_dir is not None:
        shutil.rmtree(_private_dir, ignore_errors=True)
        _private_dir = None


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


def _keep_key_files_in_memory() -> None:
    """Every key, certificate and CA the client would write to a temporary file (client-key-data,
    client-certificate-data, certificate-authority-data, an OIDC provider's CA) goes to `memory_file`
    instead: the client writes them to $TMPDIR and removes them at a normal exit only."""
    from kubernetes.config import kube_config  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)

    def in_memory(content: bytes | str, temp_file_path: str | None = None, force_recreate: bool = False) -> str:
        return memory_file(content)

    kube_config._create_temp_file_with_content = in_memory

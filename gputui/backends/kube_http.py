"""Talking to the apiserver as kubectl would configure it, reading raw JSON.

The official client loads kubeconfig (several files in KUBECONFIG, contexts,
exec credential plugins, in-cluster config); requests go through its own
urllib3 pool, but responses are parsed as plain JSON, never into the client's
model classes (that deserialisation is the slow part at scale).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import quote, urlencode

import urllib3

from gputui.backends.base import BackendError
from gputui.errors import first_line, one_line, transport_reason
from gputui.backends.gcpause import gc_paused

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 3.0  # a cheap question (version, who am I, may I): an answer or a clear failure, fast


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
        # A GET may be retried once when a pooled connection died with a restarted apiserver;
        # writes are never retried here (the ops decide).
        retries = urllib3.Retry(total=1, read=0, status=0, redirect=0) if method == "GET" else False
        try:
            resp = self.pool.request(
                method, self.url(path, query), body=data, headers=headers,
                timeout=urllib3.Timeout(connect=min(CONNECT_TIMEOUT_S, timeout), read=timeout),
                retries=retries, preload_content=True,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise BackendError(f"cannot reach {self.host}: {_reason(exc)}") from None
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
            raise BackendError(f"cannot reach {self.host}: {_reason(exc)}") from None
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


def connect(
    kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None
) -> Connection:
    """Load configuration exactly as kubectl resolves it; one clear line when it is bad."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    user = ""
    default_ns = "default"
    files = kubeconfig_files(kubeconfig)
    if kubeconfig is None and not os.environ.get("KUBECONFIG") and os.environ.get("KUBERNETES_SERVICE_HOST") \
            and not files[0].exists():
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
        missing = [p for p in files if not p.exists()]
        if kubeconfig and missing:
            raise BackendError(f"kubeconfig {kubeconfig} does not exist")
        try:
            joined = os.pathsep.join(str(p) for p in files)  # the client merges a KUBECONFIG-style list
            contexts, current = config.list_kube_config_contexts(joined)
            if context is not None:
                current = next((c for c in contexts if c.get("name") == context), None)
                if current is None:
                    raise BackendError(f'context "{context}" is not in the kubeconfig')
            config.load_kube_config(
                config_file=joined, context=context, client_configuration=configuration,
                persist_config=False,
            )
        except ConfigException as exc:
            raise BackendError(_config_error(str(exc), context)) from None
        except BackendError:
            raise
        except Exception as exc:  # malformed YAML, wrong types
            raise BackendError(f"kubeconfig is not valid: {one_line(exc)}") from None
        current = current or {}
        ctx_name = current.get("name", context or "")
        ctx = current.get("context") or {}
        user = ctx.get("user", "")
        default_ns = ctx.get("namespace") or default_ns
    pool = client.ApiClient(configuration).rest_client.pool_manager
    return Connection(
        host=configuration.host, context=ctx_name, user=user,
        namespace=namespace, pool=pool, configuration=configuration,
    )


def _config_error(text: str, context: str | None) -> str:
    first = first_line(text) or "invalid kubeconfig"
    if context and "context" in first.lower():
        return f'context "{context}" is not in the kubeconfig'
    return f"kubeconfig: {first}"

"""Talking to the apiserver over HTTP, reading raw JSON: a Connection (where, how to authenticate) sends
requests and opens watches through the official client's urllib3 pool, but responses are parsed as plain
JSON, never into the client's model classes (that deserialisation is the slow part at scale). A Connection is
made from the kubeconfig by gputui.backends.kubeconfig.connect; what an answer means as an error is
decided in gputui.backends.kube_errors."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

from gputui.backends import base
from gputui.backends.base import BackendError
from gputui.backends.kube_errors import Unreachable, decode_answer
from gputui.base.errors import transport_reason

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 3.0  # a cheap question (version, who am I, may I): an answer or a clear failure, fast
# WATCH_BATCH_S (backends.base): after a watch waited for its data, it waits this long more before reading on, so
# the events that came meanwhile are read in one go: an event that wakes its thread costs about twice the CPU of
# one read with others. A kubelet reports its node every 5 minutes: 17 updates a second at 5,000 nodes (a fleet
# view watches 20 such clusters), 217 at 65,000, to every watcher. At 17 a second the waking is most of the cost:
# 350 us of CPU an event unbatched, 190 us with a 0.25 s pause, 130 at 0.5 s, 80 at 1 s, 60 at 2 s
# (benchmarks/watch_events.py --batch 0.25 --batch 0.5 --batch 1 --batch 2). 1 s: an event that comes during the
# pause is seen at most half a default refresh later; the first after a quiet spell (a write's own) at once.


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
        return decode_answer(resp.status, resp.data, self.host)

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
                decode_answer(resp.status, resp.read(), self.host)
            on_open()
            buffer = b""
            chunks = resp.stream(64 * 1024)
            while True:
                asked = time.monotonic()
                chunk = next(chunks, None)
                if chunk is None:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
                if time.monotonic() - asked > 0.001:  # it waited for this chunk: let the next ones gather
                    time.sleep(base.WATCH_BATCH_S)
        except urllib3.exceptions.HTTPError as exc:
            raise BackendError(f"watch on {path} broke: {_reason(exc)}") from None
        finally:
            resp.release_conn()


def _reason(exc: Exception) -> str:
    return transport_reason(exc)


def path_of(group: str, version: str, plural: str, namespace: str | None = None, name: str | None = None) -> str:
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    if namespace:
        base += f"/namespaces/{quote(namespace)}"
    base += f"/{plural}"
    if name:
        base += f"/{quote(name)}"
    return base

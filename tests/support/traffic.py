"""A traffic generator that routes inference sessions the way a data plane does, for the integration tests.

No test sets a session count by hand: counts come from sessions this generator routes, on what the real
control plane says, and the real Prometheus reads them from the pods' engine gauges.

Routing, per new session (each read from the apiserver by list + watch, as an informer does):

* a **route** picks a backend by weight: an ``HTTPRoute`` (Gateway API: the rule a plain ``GET /`` matches,
  its ``backendRefs[].weight``, default 1, 0 = none; a backend is a ``Service`` or an ``InferencePool``), an
  Istio ``VirtualService`` (the first ``http[]`` entry a plain request matches, ``route[].weight``; a
  ``subset`` is resolved through the host's ``DestinationRule``), or a bare ``Service`` / ``InferencePool``;
* a **Service** offers the pods of its ready endpoints, read from its real ``discovery.k8s.io/v1``
  EndpointSlices (``conditions.ready`` true or unset; a terminating or unready endpoint gets nothing new);
  an **InferencePool** offers the pods its ``spec.selector.matchLabels`` selects that are Running, Ready and
  not terminating (what its endpoint picker reads);
* one of those pods is chosen (least live sessions, ties in turn; or plain round robin). A chosen backend
  with no pod to offer answers the session with an error: it is counted ``rejected`` (Envoy's 503 "no
  healthy upstream"), never moved to another backend.

A session lasts a duration drawn from a seeded distribution (:class:`Durations`) and stays on its pod until
it ends (``ended``) or the pod is gone, deleted or no longer running, before then (``cut``). A pod that only
leaves the endpoints, or is terminating but still running (preStop), keeps its sessions. Arrivals are a
seeded Poisson process per route.

Each pod's live count is served through :class:`tests.support.exporters.InferenceExporter` as its engine's
gauge (``vllm:num_requests_running`` by default, ``pod``/``namespace`` from the scrape target), and each
session that ends normally advances the engine's request counter and latency histogram
(``vllm:request_success_total``, ``vllm:e2e_request_latency_seconds``). A pod is registered with the
exporter when it first shows as a backend's member (any endpoint of a routed Service, or a pod its pool
selects) and removed when it is gone, as its real target would be.

Everything runs in daemon threads on loopback; the generator is bounded in time and count and stops by
itself::

    gen = TrafficGenerator(cluster.kubeconfigs["harness"], inference_exporter, seed=7,
                           durations=Durations(mean_s=4, max_s=15))
    gen.add_route("HTTPRoute", ns, "chat", rate_per_s=2.0)
    with gen.start(run_for_s=30):
        ...                               # drain, shift, delete pods...
        gen.live()                        # {"ns/pod": live sessions}
    report = gen.wait(60)                 # arrivals stopped, every session ended or cut
    assert report.cut == 0
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.support.exporters import InferenceExporter

log = logging.getLogger("gputui.tests.traffic")

POOL_GROUP = "inference.networking.k8s.io"
#: resource -> API path prefix (namespaced collections)
RESOURCES: dict[str, str] = {
    "pods": "/api/v1",
    "endpointslices": "/apis/discovery.k8s.io/v1",
    "httproutes": "/apis/gateway.networking.k8s.io/v1",
    "virtualservices": "/apis/networking.istio.io/v1",
    "destinationrules": "/apis/networking.istio.io/v1",
    "inferencepools": f"/apis/{POOL_GROUP}/v1",
}
#: route kind -> the resource holding it (a Service is read through its EndpointSlices)
ROUTE_KINDS: dict[str, str] = {
    "Service": "endpointslices",
    "HTTPRoute": "httproutes",
    "VirtualService": "virtualservices",
    "InferencePool": "inferencepools",
}
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


# --- distributions ---------------------------------------------------------------

@dataclass(frozen=True)
class Durations:
    """How long a session lasts: ``lognormal`` (a tail, ``sigma`` its weight) or ``exponential``, with mean
    ``mean_s`` before clipping to [``min_s``, ``max_s``] (clipping the tail lowers the mean a little)."""

    mean_s: float = 6.0
    max_s: float = 30.0
    min_s: float = 0.2
    shape: str = "lognormal"
    sigma: float = 0.8

    def draw(self, rng: random.Random) -> float:
        if self.shape == "lognormal":
            value = rng.lognormvariate(math.log(self.mean_s) - self.sigma ** 2 / 2, self.sigma)
        elif self.shape == "exponential":
            value = rng.expovariate(1.0 / self.mean_s)
        else:
            raise ValueError(f"unknown duration shape {self.shape!r}")
        return min(self.max_s, max(self.min_s, value))


# --- what the generator reports ----------------------------------------------------

@dataclass
class Session:
    """One session. Times are epoch seconds (``time.time()``), comparable with the apiserver's."""

    id: int
    route: str  # "HTTPRoute ns/name"
    backend: str  # "Service ns/name", "Service ns/name subset", "InferencePool ns/name"
    pod: str  # "ns/name"
    uid: str
    started: float
    planned_end: float
    ended: float | None = None
    outcome: str = "live"  # live | ended | cut | unfinished (the generator was stopped first)

    @property
    def duration_s(self) -> float:
        return self.planned_end - self.started


@dataclass
class PodTally:
    started: int = 0
    ended: int = 0
    cut: int = 0
    live: int = 0


@dataclass
class TrafficReport:
    started: int
    ended: int
    cut: int
    rejected: int  # arrivals no backend could take (no route, weights all 0, no ready pod)
    live: int
    unfinished: int  # live when the generator was stopped
    pods: dict[str, PodTally]  # "ns/name" -> its tally
    by_backend: dict[str, int]  # backend -> sessions started on it
    by_route: dict[str, int]

    @property
    def cut_by_pod(self) -> dict[str, int]:
        return {p: t.cut for p, t in self.pods.items() if t.cut}

    @property
    def started_by_pod(self) -> dict[str, int]:
        return {p: t.started for p, t in self.pods.items()}

    @property
    def live_by_pod(self) -> dict[str, int]:
        return {p: t.live for p, t in self.pods.items()}


# --- list + watch ---------------------------------------------------------------------

def api_sessions(kubeconfig: Path | str) -> tuple[str, Callable[[], requests.Session]]:
    """(server URL, a maker of requests sessions authenticated as the kubeconfig's current user): one session
    per thread, since a requests session is not meant to be shared between threads."""
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    cfg = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    token = cfg.get_api_key_with_prefix("authorization") or cfg.get_api_key_with_prefix("BearerToken")

    def make() -> requests.Session:
        s = requests.Session()
        s.trust_env = False
        if token:
            s.headers["Authorization"] = token if token.lower().startswith("bearer ") else f"Bearer {token}"
        s.verify = cfg.ssl_ca_cert if cfg.verify_ssl and cfg.ssl_ca_cert else cfg.verify_ssl
        if cfg.cert_file and cfg.key_file:
            s.cert = (cfg.cert_file, cfg.key_file)
        s.headers["Accept"] = "application/json"
        return s

    return cfg.host.rstrip("/"), make


class Collection:
    """One namespace's objects of one resource, kept current by list then watch (re-listed after an error or
    a 410), as a client-go informer does. ``on_event(type, obj, now)`` is called for every change, with
    DELETED synthesised for objects a re-list no longer finds. A resource the apiserver does not serve
    (its CRD not installed) is an empty, synced collection, re-listed every 2 s."""

    def __init__(self, base: str, session: requests.Session, resource: str, namespace: str, lock: threading.RLock,
                 on_event: Callable[[str, dict[str, Any], float], None] | None = None):
        self.url = f"{base}{RESOURCES[resource]}/namespaces/{namespace}/{resource}"
        self.resource, self.namespace = resource, namespace
        self.session, self.lock, self.on_event = session, lock, on_event
        self.objects: dict[str, dict[str, Any]] = {}
        self.synced = threading.Event()
        self.served = True
        self.errors = 0
        self._stop = threading.Event()
        self._resp: requests.Response | None = None
        self._thread = threading.Thread(target=self._run, name=f"traffic-{resource}-{namespace}", daemon=True)

    def start(self) -> Collection:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            with suppress(Exception):  # shut the socket down: a close alone does not wake a thread blocked reading it; already closed, or an older urllib3
                resp.raw.shutdown()
            with suppress(Exception):
                resp.close()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        rv: str | None = None
        backoff = 0.2
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._list()
                    if rv is None:  # not served
                        self._stop.wait(2.0)
                        continue
                rv = self._watch(rv)
                backoff = 0.2
            except Exception as exc:  # noqa: BLE001 - apiserver restarting, 410, connection reset...
                if self._stop.is_set():
                    return
                self.errors += 1
                log.debug("%s/%s watch: %r", self.namespace, self.resource, exc)
                rv = None
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)

    def _list(self) -> str | None:
        r = self.session.get(self.url, timeout=15)
        now = time.time()
        if r.status_code == 404:
            with self.lock:
                self.served = False
                gone = list(self.objects.values())
                self.objects.clear()
            for obj in gone:
                self._emit("DELETED", obj, now)
            self.synced.set()
            return None
        r.raise_for_status()
        data = r.json()
        fresh = {o["metadata"]["name"]: o for o in data.get("items") or []}
        with self.lock:
            self.served = True
            gone = [o for n, o in self.objects.items()
                    if n not in fresh or fresh[n]["metadata"].get("uid") != o["metadata"].get("uid")]
            self.objects = fresh
        for obj in gone:
            self._emit("DELETED", obj, now)
        for obj in fresh.values():
            self._emit("MODIFIED", obj, now)
        self.synced.set()
        return data["metadata"]["resourceVersion"]

    def _watch(self, rv: str) -> str:
        params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "30"}
        resp = self.session.get(self.url, params=params, stream=True, timeout=(5, 45))
        self._resp = resp
        try:
            resp.raise_for_status()
            for line in resp.iter_lines():
                if self._stop.is_set():
                    break
                if not line:
                    continue
                ev = json.loads(line)
                kind, obj = ev.get("type"), ev.get("object") or {}
                if kind == "ERROR":
                    raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")  # 410: re-list
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                if kind == "BOOKMARK":
                    continue
                now = time.time()
                name = obj["metadata"]["name"]
                with self.lock:
                    old = self.objects.get(name)
                    if kind == "DELETED":
                        self.objects.pop(name, None)
                    else:
                        self.objects[name] = obj
                if kind != "DELETED" and old is not None and old["metadata"].get("uid") != obj["metadata"].get("uid"):
                    self._emit("DELETED", old, now)  # replaced under the same name (a StatefulSet pod)
                self._emit(kind, obj, now)
        finally:
            self._resp = None
            resp.close()
        return rv

    def _emit(self, kind: str, obj: dict[str, Any], now: float) -> None:
        if self.on_event is not None:
            self.on_event(kind, obj, now)


# --- pods as the data plane sees them -------------------------------------------------

def pod_running(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and bool(status.get("podIP"))


def pod_ready(pod: dict[str, Any]) -> bool:
    """Running, Ready and not terminating: what an endpoint picker sends new requests to."""
    if not pod_running(pod) or pod["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def labels_match(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def endpoint_pods(slices: list[dict[str, Any]], service: str, *, ready_only: bool) -> list[tuple[str, str]]:
    """(pod name, uid) of the Service's endpoints in its EndpointSlices: only the ready ones (``ready`` true or
    unset, as the API says to read an unknown state) when ``ready_only``."""
    out: list[tuple[str, str]] = []
    for sl in slices:
        if ((sl.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) != service:
            continue
        for ep in sl.get("endpoints") or []:
            ref = ep.get("targetRef") or {}
            if ref.get("kind") != "Pod":
                continue
            if ready_only and (ep.get("conditions") or {}).get("ready") is False:
                continue
            key = (ref.get("name", ""), ref.get("uid", ""))
            if key not in out:
                out.append(key)
    return out


@dataclass(frozen=True)
class Backend:
    kind: str  # Service | InferencePool
    namespace: str
    name: str
    subset: tuple[tuple[str, str], ...] = ()  # an Istio subset's pod labels
    subset_name: str = ""

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" + (f" {self.subset_name}" if self.subset_name else "")


@dataclass
class _Route:
    kind: str
    namespace: str
    name: str
    rate_per_s: float
    durations: Durations
    rng: random.Random
    next_arrival: float = 0.0

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _vs_matches_plain_request(match: dict[str, Any]) -> bool:
    """Whether an Istio HTTPMatchRequest matches a plain ``GET /`` with no headers (an empty one does)."""
    if set(match) - {"uri", "name"}:
        return False
    uri = match.get("uri") or {"prefix": "/"}
    return uri.get("prefix") == "/" or uri.get("exact") == "/"


def _plain_request_matches_path(match: dict[str, Any]) -> int | None:
    """How specific an HTTPRoute match is for a plain ``GET /`` with no headers (path length), or None when
    it does not match such a request."""
    if match.get("headers") or match.get("queryParams") or match.get("method") not in (None, "GET"):
        return None
    path = match.get("path") or {"type": "PathPrefix", "value": "/"}
    value = path.get("value", "/")
    if path.get("type", "PathPrefix") in ("PathPrefix", "Exact") and value == "/":
        return len(value)
    return None


class TrafficGenerator:
    """Sessions routed like a data plane over the real control plane; see the module docstring.

    ``kubeconfig``: whose objects to read (the harness user's is fine). ``exporter``: where each pod's live
    count is served (None: count only). ``pick``: ``"least"`` (least live sessions, ties in turn) or
    ``"round_robin"``. ``server``/``model``: the engine the exporter speaks for the pods it registers.
    """

    def __init__(self, kubeconfig: Path | str, exporter: InferenceExporter | None, *, seed: int = 0,
                 durations: Durations | None = None, pick: str = "least", server: str = "vllm",
                 model: str = "meta-llama/Llama-3.1-8B-Instruct", tick_s: float = 0.05):
        if pick not in ("least", "round_robin"):
            raise ValueError(f"pick is 'least' or 'round_robin', not {pick!r}")
        self.base, self._new_http = api_sessions(kubeconfig)
        self.exporter = exporter
        self.seed = seed
        self.durations = durations or Durations()
        self.pick = pick
        self.server, self.model = server, model
        self.tick_s = tick_s
        self._lock = threading.RLock()
        self._routes: list[_Route] = []
        self._collections: dict[tuple[str, str], Collection] = {}
        self._sessions: list[Session] = []
        self._live: dict[str, list[Session]] = {}  # pod uid -> its live sessions
        self._ends: list[tuple[float, int, Session]] = []  # heap of planned ends
        self._gone: dict[str, float] = {}  # pod uid -> when it was seen gone (deleted, or no longer running)
        self._pod_of_uid: dict[str, str] = {}  # pod uid -> "ns/name"
        self._tally: dict[str, PodTally] = {}
        self._by_backend: dict[str, int] = {}
        self._by_route: dict[str, int] = {}
        self._rejected = 0
        self._arrivals = 0
        self._history: dict[str, list[tuple[float, int]]] = {}  # "ns/name" -> (time, live) at every change
        self._registered: dict[str, str] = {}  # "ns/name" -> uid registered with the exporter
        self._turn: dict[str, itertools.count] = {}
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._arrivals_on = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._run_until = 0.0
        self._hard_until = 0.0
        self._max_sessions: int | None = None
        self.errors: list[str] = []

    # --- configuration --------------------------------------------------------------
    def add_route(self, kind: str, namespace: str, name: str, *, rate_per_s: float,
                  durations: Durations | None = None) -> None:
        """New sessions arrive at ``rate_per_s`` (Poisson) at this route: an ``HTTPRoute``, a
        ``VirtualService``, a bare ``Service`` or an ``InferencePool``."""
        if kind not in ROUTE_KINDS:
            raise ValueError(f"route kind {kind!r}: one of {sorted(ROUTE_KINDS)}")
        if rate_per_s <= 0:
            raise ValueError("rate_per_s must be > 0")
        rng = random.Random(f"{self.seed}/{kind}/{namespace}/{name}")
        with self._lock:
            self._routes.append(_Route(kind, namespace, name, rate_per_s, durations or self.durations, rng))

    # --- lifecycle --------------------------------------------------------------------
    def start(self, *, run_for_s: float, max_sessions: int | None = None, sync_timeout: float = 15) -> TrafficGenerator:
        """Start routing: arrivals for ``run_for_s`` seconds (at most ``max_sessions`` of them), then the
        sessions still live run out (bounded by the longest duration) and the generator stops by itself."""
        if not self._routes:
            raise ValueError("add a route first")
        if self._thread is not None:
            raise RuntimeError("already started")
        deadline = time.monotonic() + sync_timeout
        for route in self._routes:
            self._watch_namespace(route.namespace, route.kind)
        self._wait_synced(deadline)
        with self._lock:  # backends in other namespaces: watched before the first session, too
            for route in self._routes:
                for _, b in self._backends(route):
                    self._watch_namespace(b.namespace, "InferencePool" if b.kind == "InferencePool" else None)
        self._wait_synced(deadline)
        now = time.time()
        longest = max(r.durations.max_s for r in self._routes)
        self._run_until = now + run_for_s
        self._hard_until = self._run_until + longest + 5.0
        self._max_sessions = max_sessions
        for route in self._routes:
            route.next_arrival = now + route.rng.expovariate(route.rate_per_s)
        self._arrivals_on.set()
        self._thread = threading.Thread(target=self._loop, name="traffic-generator", daemon=True)
        self._thread.start()
        return self

    def _wait_synced(self, deadline: float) -> None:
        for c in list(self._collections.values()):
            if not c.synced.wait(max(0.1, deadline - time.monotonic())):
                raise RuntimeError(f"{c.namespace}/{c.resource} never listed (apiserver at {self.base})")

    def stop_arrivals(self) -> None:
        """No new sessions from now on; live ones run out, then the generator stops."""
        self._arrivals_on.clear()

    def wait(self, timeout: float) -> TrafficReport:
        """Wait for the generator to stop by itself (arrivals over, every session ended or cut)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"traffic generator still running after {timeout} s: {self.report()}")
        return self.report()

    def stop(self) -> TrafficReport:
        """Stop now: sessions still live count as ``unfinished``. Pods stay registered with the exporter
        (their gauges keep their last value) until :meth:`close`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._finish_unfinished()
        for c in self._collections.values():
            c.stop()
        for c in self._collections.values():
            c.join(5)
        return self.report()

    def close(self) -> None:
        """Stop, and take the pods it registered off the exporter."""
        self.stop()
        if self.exporter is not None:
            with self._lock:
                registered = list(self._registered)
                self._registered.clear()
            for key in registered:
                ns, name = key.split("/", 1)
                self.exporter.remove_pod(ns, name)

    def __enter__(self) -> TrafficGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    # --- what happened ------------------------------------------------------------------
    def report(self) -> TrafficReport:
        with self._lock:
            pods = {p: PodTally(t.started, t.ended, t.cut, t.live) for p, t in self._tally.items()}
            outcomes = [s.outcome for s in self._sessions]
            return TrafficReport(
                started=len(self._sessions), ended=outcomes.count("ended"), cut=outcomes.count("cut"),
                rejected=self._rejected, live=outcomes.count("live"), unfinished=outcomes.count("unfinished"),
                pods=pods, by_backend=dict(self._by_backend), by_route=dict(self._by_route))

    def live(self, pod: str | None = None) -> Any:
        """Live sessions per pod ({"ns/name": n}), or of one pod ("ns/name") as an int."""
        with self._lock:
            if pod is not None:
                t = self._tally.get(pod)
                return t.live if t else 0
            return {p: t.live for p, t in self._tally.items()}

    def live_at(self, pod: str, at: float) -> int:
        """The pod's live count at epoch second ``at``."""
        with self._lock:
            hist = self._history.get(pod) or []
            i = bisect.bisect_right(hist, (at, math.inf)) - 1
            return hist[i][1] if i >= 0 else 0

    def history(self, pod: str) -> list[tuple[float, int]]:
        """(epoch second, live count) at every change of the pod's count."""
        with self._lock:
            return list(self._history.get(pod) or [])

    def sessions(self, pod: str | None = None) -> list[Session]:
        with self._lock:
            return [Session(**vars(s)) for s in self._sessions if pod is None or s.pod == pod]

    def routable(self, kind: str, namespace: str, name: str) -> list[str]:
        """The pods ("ns/name") a new session for that backend (``Service``/``InferencePool``) could land on
        now, as this generator sees the cluster: what a test waits on before asserting where sessions go."""
        return [f"{b.namespace}/{p}" for b in [Backend(kind, namespace, name)] for p, _ in self._candidates(b)]

    def gone_at(self, pod_uid: str) -> float | None:
        with self._lock:
            return self._gone.get(pod_uid)

    # --- watches ----------------------------------------------------------------------------
    def _watch_namespace(self, namespace: str, kind: str | None = None) -> None:
        for resource in ("pods", "endpointslices"):
            self._collection(resource, namespace)
        if kind == "VirtualService":
            self._collection("destinationrules", namespace)
        if kind == "HTTPRoute":  # its backends may be pools
            self._collection("inferencepools", namespace)
        if kind:
            self._collection(ROUTE_KINDS[kind], namespace)

    def _collection(self, resource: str, namespace: str) -> Collection:
        with self._lock:
            c = self._collections.get((resource, namespace))
            if c is None:
                on_event = self._on_pod_event if resource == "pods" else None
                c = Collection(self.base, self._new_http(), resource, namespace, self._lock, on_event)
                self._collections[(resource, namespace)] = c
                c.start()
            return c

    def _objects(self, resource: str, namespace: str) -> dict[str, dict[str, Any]]:
        c = self._collection(resource, namespace)
        return c.objects  # read under self._lock by callers

    def _on_pod_event(self, kind: str, pod: dict[str, Any], now: float) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid", "")
        phase = (pod.get("status") or {}).get("phase")
        with self._lock:
            self._pod_of_uid.setdefault(uid, f"{meta.get('namespace')}/{meta.get('name')}")
            if kind == "DELETED" or phase in ("Succeeded", "Failed"):
                self._gone.setdefault(uid, now)

    # --- routing ------------------------------------------------------------------------------
    def _backends(self, route: _Route) -> list[tuple[float, Backend]]:
        """(weight, backend) for a new session of the route; an empty list when it has none."""
        ns = route.namespace
        if route.kind in ("Service", "InferencePool"):
            return [(1.0, Backend(route.kind, ns, route.name))]
        if route.kind == "HTTPRoute":
            obj = self._objects("httproutes", ns).get(route.name)
            if obj is None:
                return []
            best: tuple[int, list[dict[str, Any]]] | None = None
            for rule in (obj.get("spec") or {}).get("rules") or []:
                matches = rule.get("matches") or [{}]
                score = max((s for s in map(_plain_request_matches_path, matches) if s is not None), default=None)
                if score is not None and (best is None or score > best[0]):
                    best = (score, rule.get("backendRefs") or [])
            out: list[tuple[float, Backend]] = []
            for ref in best[1] if best else []:
                kind = ref.get("kind", "Service")
                if kind not in ("Service", "InferencePool"):
                    continue
                out.append((float(ref.get("weight", 1)), Backend(kind, ref.get("namespace", ns), ref["name"])))
            return out
        obj = self._objects("virtualservices", ns).get(route.name)
        if obj is None:
            return []
        for http in (obj.get("spec") or {}).get("http") or []:
            if http.get("match") and not any(_vs_matches_plain_request(m) for m in http["match"]):
                continue
            dests = http.get("route") or []
            out = []
            for d in dests:
                dest = d.get("destination") or {}
                host = dest.get("host", "")
                svc, _, rest = host.partition(".")
                svc_ns = rest.split(".", 1)[0] if rest else ns
                weight = float(d.get("weight", 100 if len(dests) == 1 else 0))
                subset = dest.get("subset") or ""
                labels: tuple[tuple[str, str], ...] = ()
                if subset:
                    found = self._subset_labels(svc_ns, svc, subset)
                    if found is None:
                        continue  # Istio answers 503 for an unknown subset: weight with no pod
                    labels = tuple(sorted(found.items()))
                out.append((weight, Backend("Service", svc_ns, svc, labels, subset)))
            return out
        return []

    def _subset_labels(self, namespace: str, service: str, subset: str) -> dict[str, str] | None:
        for dr in self._objects("destinationrules", namespace).values():
            host = ((dr.get("spec") or {}).get("host") or "")
            if host.partition(".")[0] != service:
                continue
            for s in (dr.get("spec") or {}).get("subsets") or []:
                if s.get("name") == subset:
                    return dict(s.get("labels") or {})
        return None

    def _pool_selector(self, backend: Backend) -> dict[str, str]:
        """The pool's pod selector (v1: spec.selector.matchLabels; v1alpha2: spec.selector is the map); {}
        selects nothing."""
        pool = self._objects("inferencepools", backend.namespace).get(backend.name) or {}
        selector: dict[str, Any] = (pool.get("spec") or {}).get("selector") or {}
        labels = selector.get("matchLabels", selector)
        return {k: v for k, v in labels.items() if isinstance(v, str)}

    def _candidates(self, backend: Backend) -> list[tuple[str, str]]:
        """(pod name, uid) a new session of this backend may go to now."""
        with self._lock:
            pods = self._objects("pods", backend.namespace)
            out = []
            if backend.kind == "InferencePool":
                selector = self._pool_selector(backend)
                for name, pod in sorted(pods.items()):
                    if labels_match(pod["metadata"].get("labels") or {}, selector) and pod_ready(pod):
                        out.append((name, pod["metadata"]["uid"]))
                return out
            slices = list(self._objects("endpointslices", backend.namespace).values())
            for name, uid in endpoint_pods(slices, backend.name, ready_only=True):
                found = pods.get(name)
                if found is None or found["metadata"].get("uid") != uid or not pod_running(found):
                    continue  # the data plane's endpoint is a pod this generator cannot follow (yet)
                if backend.subset and not labels_match(found["metadata"].get("labels") or {}, dict(backend.subset)):
                    continue
                out.append((name, uid))
            return sorted(out)

    def _members(self, backend: Backend) -> list[tuple[str, str]]:
        """Every running pod of the backend, ready or not: the pods whose engines the exporter serves."""
        with self._lock:
            pods = self._objects("pods", backend.namespace)
            if backend.kind == "InferencePool":
                selector = self._pool_selector(backend)
                return [(n, p["metadata"]["uid"]) for n, p in pods.items()
                        if labels_match(p["metadata"].get("labels") or {}, selector) and pod_running(p)]
            slices = list(self._objects("endpointslices", backend.namespace).values())
            return [(n, u) for n, u in endpoint_pods(slices, backend.name, ready_only=False)
                    if n in pods and pods[n]["metadata"].get("uid") == u and pod_running(pods[n])]

    def _choose(self, backend: Backend, candidates: list[tuple[str, str]]) -> tuple[str, str]:
        turn = next(self._turn.setdefault(str(backend), itertools.count()))
        if self.pick == "round_robin":
            return candidates[turn % len(candidates)]
        least = min(len(self._live.get(uid, ())) for _, uid in candidates)
        fewest = [c for c in candidates if len(self._live.get(c[1], ())) == least]
        return fewest[turn % len(fewest)]

    # --- the loop ----------------------------------------------------------------------------
    def _loop(self) -> None:
        last_members = 0.0
        try:
            while not self._stop.is_set():
                now = time.time()
                self._end_sessions(now)
                if now - last_members >= 0.25:
                    self._register_members()
                    last_members = now
                arriving = self._arrivals_on.is_set() and now < self._run_until
                if arriving:
                    for route in self._routes:
                        while route.next_arrival <= now and self._under_cap():
                            self._arrive(route, now)
                            route.next_arrival += route.rng.expovariate(route.rate_per_s)
                with self._lock:
                    live = sum(len(v) for v in self._live.values())
                if not arriving and (live == 0 or now > self._hard_until):
                    break
                self._stop.wait(self.tick_s)
        except Exception as exc:  # reported (log.exception, errors), never a silent stop
            log.exception("traffic generator")
            self.errors.append(repr(exc))
        finally:
            try:
                self._finish_unfinished()
            finally:
                self._done.set()

    def _under_cap(self) -> bool:
        return self._max_sessions is None or self._arrivals < self._max_sessions

    def _arrive(self, route: _Route, now: float) -> None:
        self._arrivals += 1
        with self._lock:
            self._by_route[str(route)] = self._by_route.get(str(route), 0)
            backends = [(w, b) for w, b in self._backends(route) if w > 0]
            for _, b in backends:
                if b.namespace != route.namespace:
                    self._watch_namespace(b.namespace)
        if not backends:
            with self._lock:
                self._rejected += 1
            return
        total = sum(w for w, _ in backends)
        x = route.rng.random() * total
        backend = backends[-1][1]
        for w, b in backends:
            if x < w:
                backend = b
                break
            x -= w
        duration = route.durations.draw(route.rng)
        with self._lock:
            candidates = self._candidates(backend)
            if not candidates:
                self._rejected += 1
                return
            name, uid = self._choose(backend, candidates)
            pod = f"{backend.namespace}/{name}"
            s = Session(next(self._ids), str(route), str(backend), pod, uid, now, now + duration)
            self._sessions.append(s)
            self._live.setdefault(uid, []).append(s)
            heapq.heappush(self._ends, (s.planned_end, s.id, s))
            tally = self._tally.setdefault(pod, PodTally())
            tally.started += 1
            self._by_backend[str(backend)] = self._by_backend.get(str(backend), 0) + 1
            self._by_route[str(route)] += 1
            self._pod_of_uid.setdefault(uid, pod)
        self._register(pod, uid)
        self._publish(pod, now)

    def _end_sessions(self, now: float) -> None:
        """Sessions whose pod is gone are cut at that moment unless they had ended by then; the others end
        at their planned time."""
        changed: set[str] = set()
        with self._lock:
            for uid, at in list(self._gone.items()):
                sessions = self._live.pop(uid, None)
                for s in sessions or ():
                    if s.planned_end <= at:
                        self._close(s, "ended", s.planned_end)
                    else:
                        self._close(s, "cut", at)
                    changed.add(s.pod)
            while self._ends and self._ends[0][0] <= now:
                _, _, s = heapq.heappop(self._ends)
                if s.outcome != "live":
                    continue
                live = self._live.get(s.uid) or []
                if s in live:
                    live.remove(s)
                self._close(s, "ended", s.planned_end)
                changed.add(s.pod)
            gone_pods = {self._pod_of_uid.get(uid, "") for uid in self._gone}
        for pod in changed:
            self._publish(pod, now)
        for pod in gone_pods:
            self._unregister_if_gone(pod)

    def _close(self, s: Session, outcome: str, at: float) -> None:
        s.outcome, s.ended = outcome, at
        tally = self._tally[s.pod]
        if outcome == "cut":
            tally.cut += 1
        else:
            tally.ended += 1
            if self.exporter is not None and outcome == "ended" and self._registered.get(s.pod) == s.uid:
                ns, name = s.pod.split("/", 1)
                self.exporter.record_request(ns, name, s.duration_s)

    def _finish_unfinished(self) -> None:
        # A stop may come between a pod's DELETED event and the loop's next tick: settle what is already
        # known first, so those sessions count as cut (or ended) when the pod went, not as unfinished.
        try:
            self._end_sessions(time.time())
        except Exception as exc:  # reported like the loop's own errors; the rest still finishes
            log.exception("traffic generator: settling at stop")
            self.errors.append(repr(exc))
        with self._lock:
            for sessions in self._live.values():
                for s in sessions:
                    if s.outcome == "live":
                        s.outcome = "unfinished"
                        self._tally[s.pod].live = 0
            self._live.clear()

    def _publish(self, pod: str, now: float) -> None:
        with self._lock:
            tally = self._tally.setdefault(pod, PodTally())
            live = sum(len(ss) for uid, ss in self._live.items() if self._pod_of_uid.get(uid) == pod)
            if tally.live == live and pod in self._history:
                return
            tally.live = live
            self._history.setdefault(pod, []).append((now, live))
            registered = pod in self._registered
        if registered and self.exporter is not None:
            ns, name = pod.split("/", 1)
            with suppress(KeyError):  # taken off the exporter meanwhile (gone)
                self.exporter.set(ns, name, running=live)

    def _register_members(self) -> None:
        with self._lock:
            backends: set[Backend] = set()
            for route in self._routes:
                backends.update(b for _, b in self._backends(route))
            members = [(f"{b.namespace}/{n}", u) for b in backends for n, u in self._members(b)]
        for pod, uid in members:
            self._register(pod, uid)

    def _register(self, pod: str, uid: str) -> None:
        with self._lock:
            if self._registered.get(pod) == uid or uid in self._gone:
                return
            fresh = pod not in self._registered
            self._registered[pod] = uid
            live = len(self._live.get(uid, ()))
            self._tally.setdefault(pod, PodTally())
        if self.exporter is None:
            return
        ns, name = pod.split("/", 1)
        if fresh or pod not in {f"{n}/{p}" for n, p in self.exporter.pods()}:
            self.exporter.add_pod(ns, name, model=self.model, server=self.server, running=live)
        else:
            self.exporter.set(ns, name, running=live)

    def _unregister_if_gone(self, pod: str) -> None:
        with self._lock:
            uid = self._registered.get(pod)
            if uid is None or uid not in self._gone:
                return
            del self._registered[pod]
        if self.exporter is not None:
            ns, name = pod.split("/", 1)
            self.exporter.remove_pod(ns, name)


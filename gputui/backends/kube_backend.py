"""The live backend: Kubernetes caches + Prometheus, joined into snapshots; writes via the API."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import chain
from typing import Any

from gputui.backends import kube_objects as ko
from gputui.backends.base import Backend, BackendError, ListProgress, reading_line
from gputui.backends.gcpause import gc_paused, unsettle
from gputui.backends.join import Joiner, KubeState, Metrics, join_gpus
from gputui.backends.join_fleet import inference_pod
from gputui.backends.kube_access import access_reviews
from gputui.backends.kube_actors import ActorReader
from gputui.backends.kube_cache import ListWatchCache
from gputui.backends.kube_describe import describe_node
from gputui.backends.kube_discovery import ISTIO_GROUP, OPERATOR_GROUP, Served, discover
from gputui.backends.kube_dra import DRA_GROUP, claim_record, slice_record
from gputui.backends.kube_errors import Unreachable
from gputui.backends.kube_http import PROBE_TIMEOUT_S, Connection, path_of
from gputui.backends.kube_writer import KubeWriter, whoami
from gputui.backends.kubeconfig import connect
from gputui.backends.prom import HOST_LABELS, PromConfig, PromSource
from gputui.backends.prom_arrivals import arrivals
from gputui.backends.prom_canary import version_signals
from gputui.backends.prom_fault_window import read as read_fault_window
from gputui.backends.prom_review import idle_gpus, read_facts
from gputui.backends.session_metrics import engines, unknown_sessions, with_vanished
from gputui.base.debug_log import log
from gputui.policy.fault_peers import FaultWindow
from gputui.policy.node_pools import IdleReading
from gputui.policy.upgrades import policy_from
from gputui.settings import DEFAULT_SERVICE_LABELS, DEFAULT_VERSION_LABELS, Settings, protection
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary.check_facts import CheckFacts
from gputui.vocabulary.gpu_bindings import GpuBindings
from gputui.vocabulary.model import Gpu, InferencePod, InferenceService, NodeDescription
from gputui.vocabulary.router_kinds import ROUTER_KINDS
from gputui.vocabulary.sessions import GONE, Arrivals
from gputui.vocabulary.signals import VersionSignals

# Caches an identity may be refused without gputui refusing to start (see _wait_first_sync).
OPTIONAL_CACHES = frozenset({"destinationrules", "resourceslices", "resourceclaims", "clusterpolicies"})

FIRST_SYNC_TIMEOUT_S = 10.0  # silence, not the whole first list: each page answered restarts it


def _kept(new: Any, old: Any) -> Any:
    """The old object when the new one is equal: identity then tells the join "unchanged"."""
    return old if new is old or new == old else new


class KubeReader:
    def __init__(self, conn: Connection, prom: PromSource | None, *, namespace: str | None = None,
                 clock: Callable[[], float] = time.time, per_gpu: bool = False, dcgm_interval: float = 0.0,
                 service_labels: Iterable[str] = DEFAULT_SERVICE_LABELS,
                 version_labels: Iterable[str] = DEFAULT_VERSION_LABELS) -> None:
        self.conn = conn
        self.prom = prom
        self.per_gpu = per_gpu  # False: per-node aggregates for the fleet; per GPU on demand
        self.dcgm_interval = dcgm_interval  # fleet-wide DCGM reads at most this often; sessions every refresh
        self.clock = clock
        self._changed = threading.Event()
        ns = namespace
        self.discovery_error: BackendError | None = None  # why the kinds served are unknown (None: discovered)
        try:
            served = discover(conn)
        except BackendError as exc:
            served = Served()  # discovery failing is an API error the caches report too
            self.discovery_error = exc
        subset_rules, pools = served.subset_rules, served.pools
        self.routers = served.routers  # router kind -> the version it is spoken in (what a shift patches)
        self.maintenance_served = served.maintenance is not None  # a requestor drain's NodeMaintenance

        def cache(path: str, transform: Callable[[dict[str, Any]], Any]) -> ListWatchCache:
            return ListWatchCache(conn, path, transform, on_change=self._changed.set, clock=clock)

        self.caches: dict[str, ListWatchCache] = {
            # Nodes and pods stay cluster-wide: allocation counts every pod on a node.
            "nodes": cache("/api/v1/nodes", ko.node_record),
            "pods": cache("/api/v1/pods", ko.pod_record),
            "deployments": cache(path_of("apps", "v1", "deployments", ns), ko.deployment_record),
            "pdbs": cache(path_of("policy", "v1", "poddisruptionbudgets", ns), ko.pdb_record),
            "services": cache(path_of("", "v1", "services", ns), ko.service_record),
        }
        # One cache per router kind served, under its plural: a route kind's objects read by its row, a
        # Rollout's as a workload (its controller owns its routes' weights).
        self._route_caches: list[str] = []
        self._workload_caches = ["deployments"]
        for name, version in self.routers.items():
            kind = ROUTER_KINDS[name]
            transform = kind.record if kind.weights is not None else ko.deployment_record
            self.caches[kind.plural] = cache(path_of(kind.group, version, kind.plural, ns), transform)
            (self._route_caches if kind.weights is not None else self._workload_caches).append(kind.plural)
        if subset_rules:
            self.caches["destinationrules"] = cache(path_of(ISTIO_GROUP, subset_rules, "destinationrules", ns),
                                                    ko.destinationrule_record)
        if pools:
            self.caches["inferencepools"] = cache(path_of(ko.POOL_GROUP, pools, "inferencepools", ns),
                                                  ko.inferencepool_record)
        if served.dra:  # cluster-wide, like pods: a node's allocation counts every claim on it
            self.caches["resourceslices"] = cache(path_of(DRA_GROUP, served.dra, "resourceslices"), slice_record)
            self.caches["resourceclaims"] = cache(path_of(DRA_GROUP, served.dra, "resourceclaims"), claim_record)
        if served.cluster_policy:
            self.caches["clusterpolicies"] = cache(path_of(OPERATOR_GROUP, served.cluster_policy, "clusterpolicies"),
                                                   policy_from)
        # NodeMaintenances and NodeClaims: optional caches of their own (an error there is no API error).
        self.actors = ActorReader(cache, served.maintenance, served.nodeclaims, self.discovery_error,
                                  remediations=served.remediations, maintenance_requests=served.maintenance_requests,
                                  evictions=served.evictions, janitor=served.janitor, conn=conn)
        for c in [*self.caches.values(), *self.actors.caches.values()]:
            c.start()
        self._metrics: Metrics | None = None
        self._metrics_at: float | None = None  # when the DCGM gauges were last read (sessions are newer)
        self._gauges_tried_at: float | None = None
        self._metrics_error: str | None = None
        self._probe_error: str | None = None
        self._probe_at: float | None = None
        self._first = True
        self._joiner = Joiner(service_labels, version_labels)
        self._closed = False
        self._join_lock = threading.Lock()  # the UI's poll and a drain may both ask for snapshots
        self._dra_error: str | None = None

    def _probe(self) -> None:
        """A cheap request each refresh: a hung apiserver shows as stale within one refresh."""
        try:
            self.conn.request("GET", "/version", timeout=PROBE_TIMEOUT_S)
        except BackendError as exc:
            self._probe_error = str(exc)
        else:
            self._probe_error = None
            self._probe_at = self.clock()

    def _wait_first_sync(self) -> None:
        deadline = time.monotonic() + FIRST_SYNC_TIMEOUT_S
        for name, c in list(self.caches.items()):
            pages = c.pages
            while not c.synced.wait(0.1):
                if c.pages != pages:  # a large cluster's list is still coming in, page by page
                    pages, deadline = c.pages, time.monotonic() + FIRST_SYNC_TIMEOUT_S
                if name in OPTIONAL_CACHES and c.error and c.error.startswith("forbidden"):
                    # Refinements: subset labels (else subsets are taken as version labels), the operator's
                    # upgrade policy (else its limits are not named). DRA is not a refinement: GPUs it
                    # allocates would go uncounted, and the header says so (the "DRA" source).
                    c.stop()
                    del self.caches[name]
                    if name in ("resourceslices", "resourceclaims"):
                        self._dra_error = "not readable (forbidden): GPUs it allocates are not counted"
                    break
                # Refused, forbidden or unauthorised will not get better by waiting.
                if c.error and (c.error.startswith(("forbidden", "cannot reach")) or "401" in c.error):
                    raise BackendError(c.error)
                if time.monotonic() > deadline:
                    raise BackendError(c.error or f"no answer from {self.conn.host} within {FIRST_SYNC_TIMEOUT_S:.0f}s")
        self.actors.wait(time.monotonic() + FIRST_SYNC_TIMEOUT_S)  # never raises: an actor unread is unknown

    def _items(self, plurals: Sequence[str]) -> tuple[Any, ...]:
        """The records of these caches; one cache's own tuple when it is the only one, so the join tells
        "unchanged" by identity (at 10,000 workloads their selectors are not worked out again)."""
        parts = [self.caches[p].items() for p in plurals if p in self.caches]
        return parts[0] if len(parts) == 1 else tuple(chain.from_iterable(parts))

    def snapshot(self) -> ClusterSnapshot:
        if self._first:
            self._wait_first_sync()
            self._first = False
        self._probe()
        errors = [c.error for c in self.caches.values() if c.error]
        api_error = self._probe_error or (errors[0] if errors else None)
        state = self._state()
        now = self.clock()
        if self.prom is not None:
            try:
                self._read_metrics(state, now)
                self._metrics_error = None
            except BackendError as exc:
                self._metrics_error = f"unavailable: {exc}"
                log.debug("metrics: read failed: %s", exc)
        api_at = now if api_error is None else self._probe_at
        sources = (
            SourceStatus("API", api_at, api_error),
            SourceStatus("metrics", self._metrics_at,
                         self._metrics_error if self.prom is not None else "not configured (--prometheus)",
                         every=self.dcgm_interval or None, mode=self.prom.mode if self.prom is not None else ""),
        ) + ((SourceStatus("DRA", now, self._dra_error),) if self._dra_error else ()) + ActorReader.sources(state.actors)
        return self._join(state, self._metrics, now, sources, api_error)

    def partial_snapshot(self) -> ClusterSnapshot:
        """What the first lists hold so far, while they run (a large cluster's start-up draws it, marked partial):
        no metrics are read for it (every session count is unknown), and its API source says it is partial, so
        nothing counts it whole. Nothing may be planned or written from it (the app keeps its pending backend)."""
        now = self.clock()
        sources = (SourceStatus("API", None, "partial: " + (reading_line(self.progress()) or "reading")),
                   SourceStatus("metrics", None, "not read yet (partial view)"))
        return self._join(self._state(), None, now, sources, "partial")

    def _state(self) -> KubeState:
        return KubeState(
            nodes=self.caches["nodes"].items(),
            pods=self.caches["pods"].items(),
            workloads=self._items(self._workload_caches),
            budgets=self.caches["pdbs"].items(),
            services=self.caches["services"].items(),
            routes=self._items(self._route_caches),
            subset_rules=self.caches["destinationrules"].items() if "destinationrules" in self.caches else (),
            pools=self.caches["inferencepools"].items() if "inferencepools" in self.caches else (),
            resource_slices=self.caches["resourceslices"].items() if "resourceslices" in self.caches else (),
            resource_claims=self.caches["resourceclaims"].items() if "resourceclaims" in self.caches else (),
            upgrade_policies=self.caches["clusterpolicies"].items() if "clusterpolicies" in self.caches else (),
            actors=self.actors.objects(),
        )

    def _join(self, state: KubeState, metrics: Metrics | None, now: float, sources: tuple[SourceStatus, ...],
              api_error: str | None) -> ClusterSnapshot:
        started = time.monotonic()
        with self._join_lock, gc_paused():  # a snapshot is tens of thousands of new objects, no cycles
            snap = self._joiner.join(state, metrics, now=now, context=self.conn.context, sources=sources)
        log.debug("snapshot: joined %d nodes, %d pods, %d services in %.0f ms%s", len(snap.nodes), len(snap.pods),
                  len(snap.services), (time.monotonic() - started) * 1000, f"; API: {api_error}" if api_error else "")
        return snap

    def _read_metrics(self, state: KubeState, now: float) -> None:
        """Sessions every refresh; the fleet's DCGM gauges when due, when never read, or to recover from a
        failed read. Parts that did not change keep their identity, so the join skips them. A failed read
        leaves the gauges as they were (shown stale, with their age) but makes every session count
        unknown: a count from before an outage must not pass for the count now."""
        assert self.prom is not None
        last = self._metrics
        # After a refused connection, try again at once (it costs nothing); after a timeout Prometheus is
        # overloaded, and asking it for the whole fleet every refresh would keep it so.
        retry_now = self._metrics_error is not None and "timed out" not in self._metrics_error
        try:
            if last is None or retry_now or now - (self._gauges_tried_at or 0.0) >= self.dcgm_interval:
                self._gauges_tried_at = now
                fresh = self.prom.fetch({n.name for n in state.nodes}, per_gpu=self.per_gpu)
                self._metrics_at = now
                gpus, nodes, sessions = fresh.gpus, fresh.nodes, fresh.sessions
            else:
                gpus, nodes, sessions = last.gpus, last.nodes, self.prom.sessions()
        except BackendError:
            if last is not None:
                self._metrics = Metrics(gpus=last.gpus, nodes=last.nodes, sessions=unknown_sessions(last.sessions))
            raise
        if last is not None:
            sessions = with_vanished(sessions, last.sessions, state.pods)
            gpus, nodes, sessions = _kept(gpus, last.gpus), _kept(nodes, last.nodes), _kept(sessions, last.sessions)
            if gpus is last.gpus and nodes is last.nodes and sessions is last.sessions:
                return
        self._metrics = Metrics(gpus=gpus, nodes=nodes, sessions=sessions)

    def gpu_bindings(self, node: str, pods: Sequence[InferencePod]) -> GpuBindings:
        from gputui.backends.gpu_bindings import read_bindings  # noqa: PLC0415 (loaded with the first GPU drain)

        return read_bindings(self, node, {p.uid: p.key for p in pods if p.uid})

    def pods_snapshot(self, keys: Collection[str], namespaces: Collection[str] = ()) -> ClusterSnapshot:
        """Only these pods ("namespace/name"), from the watch caches, with their live sessions, and the PDBs:
        what a running drain re-reads every second, without a whole refresh (no probe, no fleet metrics).
        When Prometheus fails, every count is unknown (never the last one seen: it may have grown).
        A closed reader raises: an empty answer from it would look like every pod gone."""
        if self._closed:
            raise BackendError("the cluster connection was closed (context switched or quitting)")
        records = self.caches["pods"].get(keys)
        wanted = [(r.namespace, r.name) for r in records]
        if namespaces:  # the neighbours: every pod of these namespaces (only a drain that takes pods out asks)
            spaces, mine = set(namespaces), {id(r) for r in records}
            records += [r for r in self.caches["pods"].items() if r.namespace in spaces and id(r) not in mine]
        error = None
        if self.prom is not None:
            try:
                fresh = self.prom.sessions_for(wanted)
            except BackendError as exc:
                error = f"unavailable: {exc}"
                fresh = {}
        else:
            fresh = {}
        seen = self._metrics.sessions if self._metrics is not None else {}
        # A pod a series named, now or in the last refresh, is an inference pod: without a fresh count, unknown.
        counts = {k: fresh.get(k, GONE) for k in wanted if k in fresh or k in seen}
        now = self.clock()
        api_errors = [c.error for c in (self.caches["pods"], self.caches["pdbs"]) if c.error]
        sources = (
            SourceStatus("API", None if api_errors else now, api_errors[0] if api_errors else None),
            SourceStatus("metrics", None if error or self.prom is None else now,
                         error if self.prom is not None else "not configured (--prometheus)"),
        )
        with self._join_lock:
            pods = tuple(inference_pod(self._joiner.with_claims(r), *self._joiner.identity(r)) for r in records)
        # The actors' objects too: a drain re-checks each pod's EvictionRequests on this fresh read before evicting it.
        return ClusterSnapshot(taken_at=now, context=self.conn.context, pods=pods, session_counts=counts,
                               budgets=self.caches["pdbs"].items(), sources=sources, actors=self.actors.objects())

    def gpu_history(self, node: str, minutes: int = 5) -> dict[int, list[float | None]]:
        if self.prom is None:
            return {}
        return self.prom.gpu_history(node, minutes)

    def describe(self, node: str, pods: Sequence[tuple[str, str]]) -> NodeDescription:
        return describe_node(self.conn, node, pods)

    def node_gpus(self, node: str) -> tuple[Gpu, ...] | None:
        """Every GPU of one node, for the detail screen (the fleet view keeps aggregates)."""
        if self.prom is None:
            return None
        record = next((n for n in self.caches["nodes"].items() if n.name == node), None)
        if record is None:
            return None
        labels = [self.prom.cfg.host_label] if self.prom.cfg.host_label else list(HOST_LABELS)
        for label in labels:
            metrics = self.prom.fetch({node}, per_gpu=True, host=node, host_label=label)
            if metrics.gpus:
                return join_gpus(record, metrics)
        return ()

    def check_facts(self, window_s: float) -> CheckFacts:
        return read_facts(self.prom, window_s)

    def idle_gpus(self, window_s: float, below_pct: float) -> IdleReading | None:
        if self.prom is None:
            raise BackendError("no metrics source (give --prometheus): idle GPUs cannot be told")
        return idle_gpus(self.prom, window_s, below_pct)

    def fault_window(self, window_s: float) -> FaultWindow:
        """Every node's GPU fault counts over the window: one query for the fleet (prom_fault_window)."""
        if self.prom is None:
            raise BackendError("no metrics source (give --prometheus): fault counts cannot be read")
        return read_fault_window(self.prom, window_s)

    def arrivals(self, pods: Collection[InferencePod], window_s: float = 60.0) -> Mapping[str, Arrivals]:
        if self.prom is None:
            raise BackendError("no metrics source (give --prometheus): arrival rates cannot be read")
        return arrivals(self.prom, pods, window_s)

    def version_signals(self, snapshot: ClusterSnapshot, service: InferenceService,
                        window_s: float) -> dict[str, VersionSignals]:
        # The caller's snapshot, not a fresh one: snapshot() belongs to the poll thread (its join caches).
        if self.prom is None:
            raise BackendError("no metrics source (give --prometheus): the canary's gates cannot be read")
        return version_signals(self.prom, snapshot, service, window_s)

    def progress(self) -> tuple[ListProgress, ...]:
        """The first lists still running (what start-up shows while a large cluster's nodes come in)."""
        return tuple(ListProgress(name, *p) for name, c in list(self.caches.items()) if (p := c.progress()))

    def close(self) -> None:
        self._closed = True
        for c in list(self.caches.values()):
            c.stop()
        self.actors.stop()
        if self.prom is not None:
            self.prom.close()
        unsettle()  # the app's poll froze what lived (gcpause): these records among it, maybe in cycles


def prom_config(settings: Settings, sessions: bool = True) -> PromConfig | None:
    if not settings.prometheus:
        return None
    basic = os.environ.get("GPUTUI_PROMETHEUS_BASIC_AUTH")  # user:password, never in argv
    return PromConfig(
        url=settings.prometheus,
        timeout=settings.prometheus_timeout,
        bearer_token=os.environ.get("GPUTUI_PROMETHEUS_TOKEN") or None,
        basic_auth=tuple(basic.split(":", 1)) if basic and ":" in basic else None,  # type: ignore[arg-type]
        headers=dict(settings.prometheus_headers),
        ca_file=settings.prometheus_ca_file,
        verify_tls=not settings.prometheus_insecure,
        host_label=settings.host_label,
        engines=engines(settings.session_metrics),
        sessions=sessions,
    )


def live_backend(settings: Settings, clock: Callable[[], float] = time.time, per_gpu: bool = False,
                 sessions: bool = True) -> Backend:
    conn = connect(settings.kubeconfig, settings.context, settings.namespace, exec_timeout=settings.exec_timeout)
    cfg = prom_config(settings, sessions)
    prom = PromSource(cfg) if cfg else None
    reader = KubeReader(conn, prom, namespace=settings.namespace, clock=clock, per_gpu=per_gpu,
                        dcgm_interval=settings.dcgm_interval,
                        service_labels=settings.service_labels, version_labels=settings.version_labels)
    guard = protection(settings, conn.context)
    if settings.read_only or guard:
        # No identity or access reviews either: read-only sends no POST at all.
        return Backend(reader=reader, writer=None, context=conn.context, permissions={}, protected=guard)
    try:
        # NodeMaintenance's writes are reviewed only where the kind may be served (discovery failed: unknown).
        requests_in = settings.maintenance_namespace if reader.maintenance_served or reader.discovery_error else ""
        permissions, unknown, words = access_reviews(conn, reader.routers, reader.discovery_error, requests_in)
    except Unreachable as exc:
        # Not a denial: nobody answered, not even discovery. Said as such, before any command reads "may not".
        reader.close()
        raise BackendError(f"the apiserver {exc.host} could not be reached ({exc.reason})") from None
    writer = KubeWriter(conn, whoami(conn))
    return Backend(reader=reader, writer=writer, context=conn.context, permissions=permissions, unknown=unknown,
                   words=words)


"""The embedded demo cluster: a seeded, clock-driven simulation with real semantics.

It exists so the first run always shows something real-looking, and so the UI
and the ops can be tested deterministically. It is not a stand-in for the
Kubernetes or Prometheus backends in their own tests. What it keeps true:
PodDisruptionBudgets block evictions, evicting a pod that holds sessions loses
them (and counts them), traffic weights decide where new sessions go, evicted
pods are replaced by their controller on a node with free GPUs of the model.
"""

from __future__ import annotations

import copy
import math
import random
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from gputui.backends.base import Backend, ConflictError, EvictionOutcome, EvictionResult, WriteError
from gputui.backends.kube_objects import RouteBackend, httproute_record, virtualservice_record
from gputui.model import (
    DRAIN_PHASE_ANNOTATION,
    Budget,
    ClusterSnapshot,
    Condition,
    Gpu,
    Health,
    InferencePod,
    InferenceService,
    Node,
    Rollout,
    ServiceVersion,
    SourceStatus,
)

STEP_S = 1.0  # simulation tick
HISTORY_S = 600  # sparkline history kept per GPU
SAMPLE_EVERY_S = 3  # GPU sampling period while catching up
MAX_CATCH_UP_STEPS = 900  # after a long pause, skip ahead instead of replaying
WARM_UP_S = 180  # history and sessions exist from the first frame
POD_START_S = 40.0  # model load time of a replacement pod
DEFAULT_GRACE_S = 30

DRIVER = "550.127.05"
OLD_DRIVER = "535.183.01"
CUDA = "12.4"

# The route kinds the demo serves, as a cluster with Gateway API and Istio installed would:
# kind -> (group, plural, served versions, preferred first).
ROUTE_APIS = {
    "HTTPRoute": ("gateway.networking.k8s.io", "httproutes", ("v1", "v1beta1")),
    "VirtualService": ("networking.istio.io", "virtualservices", ("v1", "v1beta1", "v1alpha3")),
}
HTTPROUTE_MAX_WEIGHT = 1_000_000  # the CRD schema's maximum
BACKEND_PORT = 8000


class DemoApiError(WriteError):
    """What the apiserver would answer, with its HTTP status (as kube_http.ApiError has)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclass(frozen=True)
class _Product:
    label: str  # nvidia.com/gpu.product (spaces become dashes)
    model_name: str
    count: int
    mem_mib: int
    idle_w: float
    max_w: float
    family: str


H100 = _Product("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 8, 81559, 72.0, 700.0, "hopper")
A100 = _Product("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 8, 81920, 55.0, 400.0, "ampere")
L40S = _Product("NVIDIA-L40S", "NVIDIA L40S", 4, 46068, 35.0, 350.0, "ada-lovelace")


@dataclass
class _SimNode:
    name: str
    product: _Product
    driver: str = DRIVER
    ready: bool = True
    unschedulable: bool = False
    upgrade_state: str = ""
    temp_offset: float = 0.0
    bad_gpus: dict[int, int] = field(default_factory=dict)  # index -> XID
    conditions: list[Condition] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    uuids: list[str] = field(default_factory=list)
    history: dict[int, deque[tuple[float, float]]] = field(default_factory=dict)  # (time, util %)
    holders: dict[int, tuple[str, bool]] = field(default_factory=dict)  # GPU -> (pod uid, ready)
    version: int = 1  # as a resourceVersion: bumped by every annotation write (the drain lease's precondition)

    @property
    def allocatable(self) -> int:
        return self.product.count - len(self.bad_gpus)


@dataclass
class _SimVersion:
    name: str
    replicas: int
    weight: int | None  # the route's weight at start; afterwards the route object holds it


@dataclass
class _SimService:
    namespace: str
    name: str
    product: _Product
    gpus_per_pod: int
    versions: list[_SimVersion]
    router_kind: str
    arrivals_per_s: float
    mean_session_s: float
    max_running: int  # per pod; more arrivals queue
    weights_gb: float  # model weights per GPU
    pdb_max_unavailable: int = 1


@dataclass
class _SimPod:
    namespace: str
    name: str
    uid: str
    node: str
    service: str
    version: str
    gpu_request: int
    gpu_indices: list[int]
    ready_at: float
    labels: dict[str, str]
    owner_kind: str = "ReplicaSet"
    has_emptydir: bool = False
    deleting_at: float | None = None
    grace_s: float = DEFAULT_GRACE_S
    session_ends: list[float] = field(default_factory=list)
    waiting: int = 0
    phase: str = "Running"
    signal: bool = True  # exports a session metric

    def ready(self, t: float) -> bool:
        return self.deleting_at is None and t >= self.ready_at and bool(self.node)


def _fleet() -> list[_SimNode]:
    nodes = [_SimNode(f"gpu-h100-{i:02d}", H100) for i in range(1, 11)]
    nodes += [_SimNode(f"gpu-a100-{i:02d}", A100) for i in range(1, 9)]
    nodes += [_SimNode(f"gpu-l40s-{i:02d}", L40S) for i in range(1, 7)]
    by_name = {n.name: n for n in nodes}
    xid = by_name["gpu-h100-07"]
    xid.bad_gpus = {5: 79}
    xid.conditions = [Condition("SysLogsXIDError", "True", "XID79", "GPU has fallen off the bus")]
    by_name["gpu-h100-04"].temp_offset = 31.0  # a blocked air intake
    by_name["gpu-a100-05"].driver = OLD_DRIVER
    by_name["gpu-a100-08"].unschedulable = True
    upgrading = by_name["gpu-l40s-03"]
    upgrading.unschedulable = True
    upgrading.upgrade_state = "pod-restart-required"
    by_name["gpu-l40s-06"].ready = False
    return nodes


def _services() -> list[_SimService]:
    return [
        _SimService(
            "llm", "llama-3-70b-instruct", H100, 4,
            [_SimVersion("v1", 7, 90), _SimVersion("v2", 1, 10)],
            "HTTPRoute", 2.6, 70.0, 48, 36.0,
        ),
        _SimService(
            "llm", "qwen2-72b", H100, 4, [_SimVersion("v3", 5, None)],
            "", 1.4, 90.0, 48, 38.0,
        ),
        _SimService(
            "llm", "mistral-7b", A100, 1,
            [_SimVersion("stable", 6, 80), _SimVersion("canary", 2, 20)],
            "VirtualService", 1.8, 35.0, 32, 15.0, pdb_max_unavailable=2,
        ),
        _SimService(
            "llm", "codellama-34b", A100, 2, [_SimVersion("v1", 5, None)],
            "", 0.6, 120.0, 24, 34.0,
        ),
        _SimService(
            "embeddings", "bge-large", L40S, 1, [_SimVersion("v1.5", 4, None)],
            "", 9.0, 0.6, 64, 1.4,
        ),
    ]


class DemoCluster:
    """The simulated cluster. Thread-safe: the UI reads while ops write."""

    def __init__(self, seed: int = 7, clock: Callable[[], float] = time.time) -> None:
        self._rng = random.Random(seed)
        self._clock = clock
        self._lock = threading.RLock()
        self.lost_sessions = 0  # sessions cut by evictions or deletions
        self.identity = "demo-operator"
        self._nodes = {n.name: n for n in _fleet()}
        self._services = {f"{s.namespace}/{s.name}": s for s in _services()}
        # One real-format route object per routed service: the writer patches these exactly as
        # the apiserver would, and the simulated router reads its weights from them.
        self._routes: dict[str, dict[str, Any]] = {
            key: _route_object(s) for key, s in self._services.items() if s.router_kind
        }
        self._weights_cache: dict[str, tuple[str, dict[str, int | None]]] = {}
        self._resource_version = 1000
        self._pods: dict[str, _SimPod] = {}
        self._serial = 0
        start = clock()
        self._t = start - WARM_UP_S
        for node in self._nodes.values():
            node.uuids = [self._uuid() for _ in range(node.product.count)]
            node.history = {i: deque(maxlen=int(HISTORY_S / STEP_S)) for i in range(node.product.count)}
        self._place_initial_workloads()
        # The warm-up runs on the first read, in the caller's thread (the UI's poll worker).

    # ----- simulation -------------------------------------------------------------

    def _uuid(self) -> str:
        h = "%032x" % self._rng.getrandbits(128)
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _suffix(self, n: int) -> str:
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        return "".join(self._rng.choice(alphabet) for _ in range(n))

    def _place_initial_workloads(self) -> None:
        for svc in self._services.values():
            for ver in svc.versions:
                hash_ = self._suffix(9)
                for _ in range(ver.replicas):
                    self._create_pod(svc, ver.name, hash_, ready_at=self._t)
        # The canary of mistral is mid-rollout: its last pod is still loading weights.
        canary = [p for p in self._pods.values() if p.version == "canary"]
        if canary:
            canary[-1].ready_at = self._t + WARM_UP_S + 45
        # A fine-tuning job and the per-node DaemonSet pods: what a drain must step around.
        self._add_pod(_SimPod(
            "research", "finetune-llama-lora-7xk2p", self._uid(), "", "", "", 8, [],
            self._t, {"job-name": "finetune-llama-lora"}, owner_kind="Job", has_emptydir=True,
            signal=False,
        ), A100)
        # A job asking for more GPUs than any node has: Pending, with the scheduler's reason.
        self._add_pod(_SimPod(
            "research", "pretrain-moe-16x-4kq9z", self._uid(), "", "", "", 16, [], self._t,
            {"job-name": "pretrain-moe-16x"}, owner_kind="Job", signal=False,
        ), H100)
        for node in self._nodes.values():
            if node.ready:
                pod = _SimPod(
                    "gpu-operator", f"nvidia-dcgm-exporter-{self._suffix(5)}", self._uid(),
                    node.name, "", "", 0, [], self._t, {"app": "nvidia-dcgm-exporter"},
                    owner_kind="DaemonSet", signal=False,
                )
                self._pods[f"{pod.namespace}/{pod.name}"] = pod

    def _uid(self) -> str:
        h = "%032x" % self._rng.getrandbits(128)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _create_pod(self, svc: _SimService, version: str, rs_hash: str, ready_at: float) -> _SimPod:
        labels = {
            "app.kubernetes.io/name": svc.name,
            "app.kubernetes.io/version": version,
            "pod-template-hash": rs_hash,
        }
        pod = _SimPod(
            svc.namespace, f"{svc.name}-{version}-{rs_hash}-{self._suffix(5)}", self._uid(), "",
            svc.name, version, svc.gpus_per_pod, [], ready_at, labels,
        )
        return self._add_pod(pod, svc.product)

    def _add_pod(self, pod: _SimPod, product: _Product) -> _SimPod:
        self._schedule(pod, product)
        self._pods[f"{pod.namespace}/{pod.name}"] = pod
        return pod

    def _free_indices(self, node: _SimNode) -> list[int]:
        used = {i for p in self._pods.values() if p.node == node.name for i in p.gpu_indices}
        return [i for i in range(node.product.count) if i not in used and i not in node.bad_gpus]

    def _schedule(self, pod: _SimPod, product: _Product) -> None:
        """Bind to the first schedulable, Ready node of the model with enough free GPUs."""
        for node in self._nodes.values():
            if node.product is not product or not node.ready or node.unschedulable:
                continue
            free = self._free_indices(node)
            if len(free) >= pod.gpu_request:
                pod.node = node.name
                pod.gpu_indices = free[: pod.gpu_request]
                pod.phase = "Running"
                return
        pod.phase = "Pending"

    def _advance(self, now: float) -> None:
        steps = int((now - self._t) / STEP_S)
        if steps > MAX_CATCH_UP_STEPS:
            self._t = now - MAX_CATCH_UP_STEPS * STEP_S
            steps = MAX_CATCH_UP_STEPS
        for step in range(steps):
            self._t += STEP_S
            # Catching up, GPUs are sampled every few ticks; the newest tick always.
            self._tick(sample=step == steps - 1 or int(self._t) % SAMPLE_EVERY_S == 0)

    def _tick(self, sample: bool = True) -> None:
        t = self._t
        for key, pod in list(self._pods.items()):
            if pod.deleting_at is not None and t >= pod.deleting_at + pod.grace_s:
                del self._pods[key]
            elif pod.session_ends:
                pod.session_ends = [e for e in pod.session_ends if e > t]
        by_service: dict[str, list[_SimPod]] = {}
        by_node: dict[str, list[_SimPod]] = {}
        for pod in self._pods.values():
            if pod.phase == "Pending" and pod.service:
                self._schedule(pod, self._services[f"{pod.namespace}/{pod.service}"].product)
                if pod.phase == "Running":
                    pod.ready_at = t + POD_START_S
            by_service.setdefault(f"{pod.namespace}/{pod.service}", []).append(pod)
            by_node.setdefault(pod.node, []).append(pod)
        # Like an inference gateway's endpoint picker, the demo's router sends no new
        # sessions to pods on a node being drained: their sessions can run down.
        draining = {n.name for n in self._nodes.values()
                    if n.annotations.get(DRAIN_PHASE_ANNOTATION) in ("cordoned", "waiting", "evicting")}
        for key, svc in self._services.items():
            pods = [p for p in by_service.get(key, []) if p.node not in draining] if draining else by_service.get(key, [])
            self._arrivals(svc, pods, t)
        if sample:
            for node in self._nodes.values():
                self._sample_gpus(node, by_node.get(node.name, []), t)

    def _poisson(self, lam: float) -> int:
        # Knuth's method; fine for the small rates simulated here.
        limit, k, p = math.exp(-lam), 0, 1.0
        while True:
            p *= self._rng.random()
            if p <= limit:
                return k
            k += 1

    def _arrivals(self, svc: _SimService, svc_pods: list[_SimPod], t: float) -> None:
        # Load follows a slow wave so the fleet looks alive rather than flat.
        wave = 1.0 + 0.25 * math.sin(t / 97.0)
        n = self._poisson(svc.arrivals_per_s * wave * STEP_S)
        route_weights = self._route_weights(svc)
        versions = [v for v in svc.versions if route_weights.get(v.name, 0 if svc.router_kind else None) != 0]
        weights = [route_weights.get(v.name) or 1 for v in versions]  # unrouted: even split
        if not versions or sum(weights) == 0:
            return
        for _ in range(n):
            version = self._rng.choices(versions, weights)[0].name
            pods = [p for p in svc_pods if p.version == version and p.ready(t)]
            if not pods:
                continue
            pod = min(pods, key=lambda p: len(p.session_ends) + p.waiting + self._rng.random())
            if len(pod.session_ends) < svc.max_running:
                pod.session_ends.append(t + self._rng.expovariate(1.0 / svc.mean_session_s))
            else:
                pod.waiting += 1
        for pod in svc_pods:
            if pod.waiting and len(pod.session_ends) < svc.max_running:
                admitted = min(pod.waiting, svc.max_running - len(pod.session_ends))
                pod.waiting -= admitted
                pod.session_ends += [
                    t + self._rng.expovariate(1.0 / svc.mean_session_s) for _ in range(admitted)
                ]

    def _sample_gpus(self, node: _SimNode, node_pods: list[_SimPod], t: float) -> None:
        holders: dict[int, tuple[_SimPod, _SimService | None]] = {}
        for pod in node_pods:
            svc = self._services.get(f"{pod.namespace}/{pod.service}")
            for i in pod.gpu_indices:
                holders[i] = (pod, svc)
        p = node.product
        for i in range(p.count):
            if not node.ready or i in node.bad_gpus:
                util = 0.0
            elif i in holders:
                pod, svc = holders[i]
                noise = self._rng.gauss(0, 2.5)
                if svc is None:  # a training job: busy and steady
                    util = 96.0 + noise / 2
                elif pod.ready(t):
                    util = 18.0 + 78.0 * len(pod.session_ends) / svc.max_running + noise
                else:  # loading weights
                    util = 4.0 + abs(noise)
            else:
                util = 0.0
            node.history[i].append((t, round(max(0.0, min(100.0, util)), 1)))
        node.holders = {i: (pod.uid, pod.ready(t)) for i, (pod, _) in holders.items()}

    def _gpu_model(self, node: _SimNode, i: int) -> Gpu:
        """A GPU's metrics from its last utilisation sample (no randomness: re-reads agree)."""
        p = node.product
        if not node.ready:
            return Gpu(i, node.uuids[i])
        util = node.history[i][-1][1] if node.history[i] else 0.0
        mem_total = float(p.mem_mib)
        health, xid = Health.PASS, 0
        if i in node.bad_gpus:
            mem, health, xid = 0.0, Health.FAIL, node.bad_gpus[i]
        elif i in node.holders:
            uid, ready = node.holders[i]
            pod = next((q for q in self._pods.values() if q.uid == uid), None)
            svc = self._services.get(f"{pod.namespace}/{pod.service}") if pod else None
            if pod is None:
                mem = 512.0
            elif svc is None:
                mem = 0.88 * mem_total
            elif ready:
                load = len(pod.session_ends) / svc.max_running
                kv = max(0.0, 0.9 * mem_total - svc.weights_gb * 1024)
                mem = svc.weights_gb * 1024 + kv * min(1.0, 0.3 + load)
            else:
                mem = svc.weights_gb * 1024 * 0.6
        else:
            mem = 512.0
        temp = 31.0 + 0.5 * util + node.temp_offset + (i % 3) * 0.7
        power = p.idle_w + (p.max_w - p.idle_w) * (util / 100.0) ** 1.3
        return Gpu(
            index=i, uuid=node.uuids[i], util_pct=util, mem_used_mib=float(round(mem)),
            mem_total_mib=mem_total, temp_c=float(round(temp)), power_w=round(power, 1),
            xid=xid, health=health,
        )

    # ----- reader -----------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        with self._lock:
            now = self._clock()
            self._advance(now)
            nodes = tuple(self._node_model(n) for n in self._nodes.values())
            pods = tuple(self._pod_model(p) for p in self._pods.values())
            services = tuple(self._service_model(s) for s in self._services.values())
            budgets = tuple(self._budget_model(s) for s in self._services.values())
            return ClusterSnapshot(
                taken_at=now, context="demo", nodes=nodes, pods=pods, services=services,
                budgets=budgets,
                sources=(SourceStatus("API", now), SourceStatus("metrics", now)),
                simulated=True,
            )

    def gpu_history(self, node: str, minutes: int = 5) -> dict[int, list[float | None]]:
        with self._lock:
            sim = self._nodes.get(node)
            if sim is None:
                return {}
            since = self._t - minutes * 60
            return {i: [u for t, u in h if t > since] for i, h in sim.history.items()}

    def node_gpus(self, node: str) -> None:
        return None  # the demo's snapshot already holds every GPU

    def close(self) -> None:
        pass

    def _node_model(self, n: _SimNode) -> Node:
        p = n.product
        labels = {
            "kubernetes.io/hostname": n.name,
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": p.label,
            "nvidia.com/gpu.memory": str(p.mem_mib),
            "nvidia.com/gpu.count": str(p.count),
            "nvidia.com/gpu.family": p.family,
            "nvidia.com/cuda.driver-version.full": n.driver,
            "nvidia.com/cuda.runtime-version.full": CUDA,
        }
        if n.upgrade_state:
            labels["nvidia.com/gpu-driver-upgrade-state"] = n.upgrade_state
        ready = Condition("Ready", "True" if n.ready else "Unknown",
                          "KubeletReady" if n.ready else "NodeStatusUnknown")
        return Node(
            name=n.name, ready=n.ready, unschedulable=n.unschedulable, gpu_product=p.label,
            gpu_capacity=p.count, gpu_allocatable=n.allocatable, driver_version=n.driver,
            cuda_version=CUDA, upgrade_state=n.upgrade_state, gpu_memory_mib=p.mem_mib,
            conditions=(ready, *n.conditions),
            gpus=tuple(self._gpu_model(n, i) for i in range(p.count)),
            labels=labels, annotations=dict(n.annotations),
        )

    def _pod_model(self, p: _SimPod) -> InferencePod:
        running = len(p.session_ends) if p.signal else None
        return InferencePod(
            namespace=p.namespace, name=p.name, uid=p.uid, node=p.node, phase=p.phase,
            ready=p.ready(self._t), gpu_request=p.gpu_request, service=p.service,
            version=p.version, deleting=p.deleting_at is not None, owner_kind=p.owner_kind,
            labels=dict(p.labels), has_emptydir=p.has_emptydir,
            sessions_running=running, sessions_waiting=p.waiting if p.signal else None, session_signal=p.signal,
            pending_reason=self._pending_reason(p) if p.phase == "Pending" else "",
        )

    def _pending_reason(self, p: _SimPod) -> str:
        n = len(self._nodes)
        return f"0/{n} nodes are available: {n} Insufficient nvidia.com/gpu. preemption: not helpful."

    def _version_pods(self, svc: _SimService, version: str) -> list[_SimPod]:
        return [
            p for p in self._pods.values()
            if p.namespace == svc.namespace and p.service == svc.name and p.version == version
        ]

    def _route_backends(self, s: _SimService) -> dict[str, RouteBackend]:
        """version -> its backend in the route, parsed by the same code the live backend uses."""
        route = self._routes.get(f"{s.namespace}/{s.name}")
        if route is None:
            return {}
        record = (httproute_record if s.router_kind == "HTTPRoute" else virtualservice_record)(route)
        found: dict[str, RouteBackend] = {}
        for b in record.backends:
            for v in s.versions:
                if (b.subset == v.name) if b.subset else (b.service == _backend_name(s, v.name)):
                    found.setdefault(v.name, b)
        return found

    def _route_weights(self, s: _SimService) -> dict[str, int | None]:
        key = f"{s.namespace}/{s.name}"
        route = self._routes.get(key)
        if route is None:
            return {}
        version = route["metadata"]["resourceVersion"]
        cached = self._weights_cache.get(key)
        if cached is None or cached[0] != version:
            cached = (version, {name: b.weight for name, b in self._route_backends(s).items()})
            self._weights_cache[key] = cached
        return cached[1]

    def _service_model(self, s: _SimService) -> InferenceService:
        versions = []
        backends = self._route_backends(s)
        for v in s.versions:
            pods = self._version_pods(s, v.name)
            live = [p for p in pods if p.deleting_at is None]
            ready = sum(p.ready(self._t) for p in live)
            routed = backends.get(v.name)
            versions.append(ServiceVersion(
                name=v.name, weight=routed.weight if routed else None,
                rollout=Rollout(
                    replicas_desired=v.replicas, replicas=len(live), updated=len(live),
                    ready=ready, available=ready,
                ),
                backend=routed.service if routed else f"{s.name}-{v.name}",
                workload=f"{s.name}-{v.name}",
            ))
        router = s.name if s.router_kind else ""
        return InferenceService(s.namespace, s.name, tuple(versions), s.router_kind, router)

    def _budget_model(self, s: _SimService) -> Budget:
        pods = [p for p in self._pods.values() if p.namespace == s.namespace and p.service == s.name]
        expected = sum(v.replicas for v in s.versions)
        healthy = sum(p.ready(self._t) for p in pods)
        desired = max(0, expected - s.pdb_max_unavailable)
        return Budget(
            namespace=s.namespace, name=f"{s.name}-pdb", selector={"app.kubernetes.io/name": s.name},
            max_unavailable=str(s.pdb_max_unavailable), disruptions_allowed=max(0, healthy - desired),
            current_healthy=healthy, desired_healthy=desired, expected_pods=expected,
        )

    # ----- writer -----------------------------------------------------------------

    def _node(self, name: str) -> _SimNode:
        node = self._nodes.get(name)
        if node is None:
            raise WriteError(f'node "{name}" not found')
        return node

    def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        with self._lock:
            self._node(node).unschedulable = unschedulable

    def annotate_node(self, node: str, annotations: Mapping[str, str | None],
                      resource_version: str | None = None) -> None:
        with self._lock:
            sim = self._node(node)
            if resource_version is not None and resource_version != str(sim.version):
                raise ConflictError(f"node {node} changed since it was read")
            sim.version += 1
            target = sim.annotations
            for key, value in annotations.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value

    def node_annotations(self, node: str) -> tuple[dict[str, str], str]:
        with self._lock:
            sim = self._node(node)
            return dict(sim.annotations), str(sim.version)

    def evict_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> EvictionResult:
        with self._lock:
            self._advance(self._clock())
            pod = self._pods.get(f"{namespace}/{name}")
            if pod is None:
                return EvictionResult(EvictionOutcome.GONE)
            svc = self._services.get(f"{namespace}/{pod.service}")
            # As the apiserver: pending, finished and deleting pods skip the PDB check.
            if svc and pod.phase == "Running" and pod.deleting_at is None:
                budget = self._budget_model(svc)
                if budget.disruptions_allowed <= 0:
                    return EvictionResult(
                        EvictionOutcome.BLOCKED,
                        f"Cannot evict pod as it would violate the pod's disruption budget "
                        f"{budget.name}: {budget.disruptions_allowed} disruptions allowed "
                        f"({budget.current_healthy} healthy, {budget.desired_healthy} needed)",
                    )
            self._terminate(pod, grace_seconds)
            return EvictionResult(EvictionOutcome.EVICTED)

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        with self._lock:
            self._advance(self._clock())
            pod = self._pods.get(f"{namespace}/{name}")
            if pod is not None:
                self._terminate(pod, grace_seconds)

    def _terminate(self, pod: _SimPod, grace_seconds: int | None) -> None:
        if pod.deleting_at is not None:
            return
        # The pod leaves its endpoints at once: every session it held is cut.
        self.lost_sessions += len(pod.session_ends) + pod.waiting
        pod.session_ends, pod.waiting = [], 0
        pod.deleting_at = self._t
        pod.grace_s = DEFAULT_GRACE_S if grace_seconds is None else grace_seconds
        svc = self._services.get(f"{pod.namespace}/{pod.service}")
        if svc is not None and pod.owner_kind == "ReplicaSet":
            # The ReplicaSet replaces it at once; the scheduler avoids cordoned nodes.
            replacement = self._create_pod(svc, pod.version, pod.labels["pod-template-hash"], 0)
            replacement.ready_at = self._t + POD_START_S
        elif pod.owner_kind == "Job":
            job = _SimPod(
                pod.namespace, f"{pod.labels['job-name']}-{self._suffix(5)}", self._uid(), "",
                "", "", pod.gpu_request, [], self._t, dict(pod.labels), owner_kind="Job",
                has_emptydir=pod.has_emptydir, signal=False,
            )
            self._add_pod(job, self._nodes[pod.node].product if pod.node else A100)

    def pod_uid(self, namespace: str, name: str) -> str | None:
        with self._lock:
            self._advance(self._clock())
            pod = self._pods.get(f"{namespace}/{name}")
            return pod.uid if pod else None

    def set_weights(self, namespace: str, service: str, weights: Mapping[str, int]) -> None:
        """A shortcut for tests: set weights in the service's route object (its splitting rule)."""
        with self._lock:
            key = f"{namespace}/{service}"
            svc = self._services.get(key)
            if svc is None:
                raise WriteError(f'service "{key}" not found')
            route = self._routes.get(key)
            if route is None:
                raise WriteError(f'service "{key}" has no route')
            self._advance(self._clock())
            updated = copy.deepcopy(route)
            rules = updated["spec"]["rules" if svc.router_kind == "HTTPRoute" else "http"]
            split = max(rules, key=lambda r: len(r.get("backendRefs") or r.get("route") or []))
            for entry in split.get("backendRefs") or split.get("route") or []:
                dest = entry.get("destination") or {}
                for v in svc.versions:
                    mine = dest.get("subset") == v.name if dest else entry.get("name") == _backend_name(svc, v.name)
                    if mine and v.name in weights:
                        entry["weight"] = int(weights[v.name])
            self._store(namespace, service, route, updated)

    # ----- custom resources: GET and PATCH as the apiserver serves them -------------------

    def _find(self, group: str, version: str, plural: str, namespace: str, name: str) -> tuple[str, dict[str, Any]]:
        kind = next((k for k, (g, p, _) in ROUTE_APIS.items() if g == group and p == plural), None)
        if kind is None or version not in ROUTE_APIS[kind][2]:
            raise DemoApiError(404, "the server could not find the requested resource")
        route = self._routes.get(f"{namespace}/{name}")
        if route is None or route.get("kind") != kind:
            raise DemoApiError(404, f'{plural}.{group} "{name}" not found')
        return kind, route

    def get_object(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict:
        with self._lock:
            _, route = self._find(group, version, plural, namespace, name)
            out = copy.deepcopy(route)
            out["apiVersion"] = f"{group}/{version}"
            return out

    def patch_object(
        self, group: str, version: str, plural: str, namespace: str, name: str,
        patch: dict | list, patch_type: str = "merge", subresource: str = "",
    ) -> dict:
        with self._lock:
            kind, route = self._find(group, version, plural, namespace, name)
            if subresource not in ("", "status"):
                raise DemoApiError(404, "the server could not find the requested resource")
            if patch_type == "merge":
                if not isinstance(patch, dict):
                    raise DemoApiError(400, "json: cannot unmarshal array into Go value of type map[string]interface {}")
                updated = merge_patch(copy.deepcopy(route), patch)
            elif patch_type == "json":
                if not isinstance(patch, list):
                    raise DemoApiError(400, "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
                updated = json_patch(copy.deepcopy(route), patch)
            else:  # custom resources take no strategic merge patch
                raise DemoApiError(
                    415, "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                )
            if not isinstance(updated, dict):
                raise DemoApiError(400, "the patch does not leave an object")
            meta, old_meta = updated.get("metadata") or {}, route["metadata"]
            if meta.get("name") != name or meta.get("namespace", namespace) != namespace:
                raise DemoApiError(400, f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
            if meta.get("resourceVersion", old_meta["resourceVersion"]) != old_meta["resourceVersion"]:
                # A resourceVersion in the patch is a precondition, as the apiserver reads it.
                raise DemoApiError(
                    409, f'Operation cannot be fulfilled on {plural}.{group} "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again",
                )
            # The status subresource changes status only; the main resource never changes status.
            if subresource == "status":
                status = updated.get("status")
                updated = copy.deepcopy(route)
                updated["status"] = status
            else:
                updated["status"] = copy.deepcopy(route.get("status"))
                keep = ("uid", "generation", "creationTimestamp", "resourceVersion")
                updated["metadata"] = {**meta, **{k: old_meta[k] for k in keep}}
            problems = _validate_route(kind, updated)
            if problems:
                raise DemoApiError(422, f'{kind}.{group} "{name}" is invalid: ' + ", ".join(problems))
            self._advance(self._clock())  # sessions so far arrived under the old weights
            self._store(namespace, name, route, updated)
            out = copy.deepcopy(self._routes[f"{namespace}/{name}"])
            out["apiVersion"] = f"{group}/{version}"
            return out

    def _store(self, namespace: str, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        new["apiVersion"] = old["apiVersion"]
        if new == old:
            return  # the apiserver writes nothing for a no-op patch
        self._resource_version += 1
        meta = new["metadata"]
        meta["resourceVersion"] = str(self._resource_version)
        if new.get("spec") != old.get("spec"):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        self._routes[f"{namespace}/{name}"] = new


def _backend_name(svc: _SimService, version: str) -> str:
    return f"{svc.name}-{version}"


def _route_object(svc: _SimService) -> dict[str, Any]:
    """The route a real cluster would hold for this service (no randomness: the seed is untouched)."""
    api = ROUTE_APIS[svc.router_kind]
    meta = {
        "name": svc.name, "namespace": svc.namespace,
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"demo/{svc.router_kind}/{svc.namespace}/{svc.name}")),
        "resourceVersion": "1000", "generation": 1, "creationTimestamp": "2026-11-02T09:00:00Z",
        "labels": {"app.kubernetes.io/name": svc.name},
    }
    if svc.router_kind == "HTTPRoute":
        canary = svc.versions[-1]
        spec = {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                            "name": "inference-gateway", "namespace": "gateway-system"}],
            "rules": [
                # Testers reach the canary by header, whatever the split says.
                {"matches": [{"headers": [{"type": "Exact", "name": "x-model-version", "value": canary.name}],
                              "path": {"type": "PathPrefix", "value": "/"}}],
                 "backendRefs": [{"group": "", "kind": "Service", "name": _backend_name(svc, canary.name),
                                  "port": BACKEND_PORT, "weight": 1}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                 "backendRefs": [{"group": "", "kind": "Service", "name": _backend_name(svc, v.name),
                                  "port": BACKEND_PORT, "weight": v.weight} for v in svc.versions]},
            ],
        }
        status: dict[str, Any] = {"parents": [{
            "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                          "name": "inference-gateway", "namespace": "gateway-system"},
            "controllerName": "demo.gputui.io/gateway-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "observedGeneration": 1, "lastTransitionTime": "2026-11-02T09:00:00Z",
                            "message": ""}],
        }]}
    else:
        host = f"{svc.name}.{svc.namespace}.svc.cluster.local"
        spec = {
            "hosts": [host],
            "http": [{"name": "primary", "route": [
                {"destination": {"host": host, "subset": v.name, "port": {"number": BACKEND_PORT}}, "weight": v.weight}
                for v in svc.versions
            ]}],
        }
        status = {}
    return {"apiVersion": f"{api[0]}/{api[2][0]}", "kind": svc.router_kind, "metadata": meta,
            "spec": spec, "status": status}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_route(kind: str, obj: dict[str, Any]) -> list[str]:
    """The checks the CRD schema (HTTPRoute) or Istio's validating webhook (VirtualService) make."""
    problems: list[str] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ["spec: Required value"]
    if kind == "HTTPRoute":
        for i, rule in enumerate(spec.get("rules") or []):
            for j, ref in enumerate(rule.get("backendRefs") or []):
                where = f"spec.rules[{i}].backendRefs[{j}]"
                if not ref.get("name"):
                    problems.append(f"{where}.name: Required value")
                weight = ref.get("weight", 1)
                if not _is_int(weight):
                    problems.append(f'{where}.weight: Invalid value: "{weight}": {where}.weight in body must be of type integer')
                elif weight < 0:
                    problems.append(f"{where}.weight: Invalid value: {weight}: {where}.weight in body should be greater than or equal to 0")
                elif weight > HTTPROUTE_MAX_WEIGHT:
                    problems.append(f"{where}.weight: Invalid value: {weight}: {where}.weight in body should be less than or equal to {HTTPROUTE_MAX_WEIGHT}")
    else:
        for http in spec.get("http") or []:
            routes = http.get("route") or []
            total = 0
            for r in routes:
                weight = r.get("weight", 0)
                if not _is_int(weight):
                    problems.append(f"weight {weight!r} is not an integer")
                elif weight < 0:
                    problems.append(f"weight {weight} < 0")
                else:
                    total += weight
                if not (r.get("destination") or {}).get("host"):
                    problems.append("destination.host is required")
            if len(routes) > 1 and total == 0 and not problems:
                problems.append("total destination weight = 0")
        if problems:  # Istio's webhook words it so
            problems = ['admission webhook "validation.istio.io" denied the request: configuration is invalid: '
                        + "; ".join(problems)]
    return problems


# ----- RFC 7386 JSON merge patch and RFC 6902 JSON patch, as the apiserver applies them -----


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)  # a list or a scalar replaces whatever was there
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise DemoApiError(400, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]] if path else []


def _index(container: list, token: str, path: str, op: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise DemoApiError(422, f"{op} operation does not apply: doc is missing path: {path}: invalid index")
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise DemoApiError(422, f"{op} operation does not apply: doc is missing path: {path}: index out of range")
    return i


def json_patch(doc: Any, ops: list) -> Any:
    """add, remove, replace and test (what gputui sends); the whole patch or nothing."""
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise DemoApiError(400, "each JSON patch operation needs op and path")
        kind, path = op["op"], op["path"]
        if kind not in ("add", "remove", "replace", "test"):
            raise DemoApiError(400, f'the demo cluster does not implement JSON patch op "{kind}"')
        if kind != "remove" and "value" not in op:
            raise DemoApiError(400, f"{kind} operation: missing value")
        tokens = _pointer(path)
        if not tokens:
            if kind == "test":
                if not _json_equal(doc, op["value"]):
                    raise DemoApiError(422, f"testing value {path} failed: test failed")
                continue
            doc = copy.deepcopy(op["value"])
            continue
        parent = doc
        for token in tokens[:-1]:
            if isinstance(parent, dict) and token in parent:
                parent = parent[token]
            elif isinstance(parent, list):
                parent = parent[_index(parent, token, path, kind, False)]
            else:
                raise DemoApiError(422, f"{kind} operation does not apply: doc is missing path: {path}: missing value")
        last = tokens[-1]
        if isinstance(parent, dict):
            present = last in parent
            if kind == "add":
                parent[last] = copy.deepcopy(op["value"])
            elif not present:
                raise DemoApiError(422, f"{kind} operation does not apply: doc is missing key: {path}: missing value")
            elif kind == "remove":
                del parent[last]
            elif kind == "replace":
                parent[last] = copy.deepcopy(op["value"])
            elif not _json_equal(parent[last], op["value"]):
                raise DemoApiError(422, f"testing value {path} failed: test failed")
        elif isinstance(parent, list):
            i = _index(parent, last, path, kind, kind == "add")
            if kind == "add":
                parent.insert(i, copy.deepcopy(op["value"]))
            elif kind == "remove":
                del parent[i]
            elif kind == "replace":
                parent[i] = copy.deepcopy(op["value"])
            elif not _json_equal(parent[i], op["value"]):
                raise DemoApiError(422, f"testing value {path} failed: test failed")
        else:
            raise DemoApiError(422, f"{kind} operation does not apply: doc is missing path: {path}: missing value")
    return doc


class _ReadOnlyView:
    """Only the reading half of the demo cluster: a read-only backend cannot write."""

    def __init__(self, cluster: DemoCluster) -> None:
        self.snapshot = cluster.snapshot
        self.gpu_history = cluster.gpu_history
        self.node_gpus = cluster.node_gpus
        self.close = cluster.close


def demo_backend(
    seed: int = 7, clock: Callable[[], float] = time.time, read_only: bool = False
) -> Backend:
    cluster = DemoCluster(seed=seed, clock=clock)
    if read_only:
        return Backend(reader=_ReadOnlyView(cluster), writer=None, context="demo", simulated=True)
    return Backend(reader=cluster, writer=cluster, context="demo", simulated=True)

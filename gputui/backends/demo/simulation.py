"""The demo cluster's simulation: a seeded, clock-driven world (placement, sessions ending, GPU samples) and
the snapshot it shows. Where new sessions go is the router's (router.py); writes are the API emulation's
(api.py)."""


from __future__ import annotations

import heapq
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from gputui.backends.demo.actors import actor_objects, hand_to_actors
from gputui.backends.demo.router import NAME, Router, route_backends, template_labels
from gputui.backends.demo.routes import route_object
from gputui.backends.demo.scenario import (
    A100,
    CUDA,
    ENGINE,
    FINISHED_KEPT_S,
    H100,
    HISTORY_S,
    MAX_CATCH_UP_STEPS,
    NODE_INFO,
    POD_START_S,
    SAMPLE_EVERY_S,
    STEP_S,
    WARM_UP_S,
    Product,
    SimNode,
    SimPod,
    SimService,
    demo_fleet,
    demo_services,
    fail_after_placement,
)
from gputui.policy.upgrades import STATE_LABEL
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary.disruptions import CA_DELETION_CANDIDATE
from gputui.vocabulary.gpu_metrics import METRICS, extra_of
from gputui.vocabulary.gpu_resources import DRA_PREFIX, GpuResource, Scheme, node_resources
from gputui.vocabulary.model import (
    Budget,
    Condition,
    Gpu,
    Health,
    InferencePod,
    InferenceService,
    Node,
    Rollout,
    ServiceVersion,
)
from gputui.vocabulary.router_kinds import RouteBackend
from gputui.vocabulary.scheduling import EMPTY_POD, NodeScheduling, Taint

DEMO_FIGURES = tuple(m for m in METRICS if m.demo is not None and not m.typed)  # simulated beyond the typed five

# The demo's nodes have no taints of their own (a cordon or NotReady is read from the node's state; one node has the
# cluster autoscaler's, see Simulation) and the kubelet's default pod limit; their CPU and memory are a DGX-class node's.
DEMO_NODE_SCHEDULING = NodeScheduling((), (("cpu", 224_000), ("memory", 2048 * 2**30), ("pods", 110)))


class Simulation:
    """The simulated cluster. Thread-safe: the UI reads while ops write."""

    def __init__(self, seed: int = 7, clock: Callable[[], float] = time.time) -> None:
        self._rng = random.Random(seed)
        self._clock = clock
        self._lock = threading.RLock()
        self.lost_sessions = 0  # sessions cut by evictions or deletions
        self.identity = "demo-operator"
        self._nodes = {n.name: n for n in demo_fleet()}
        self._services = {f"{s.namespace}/{s.name}": s for s in demo_services()}
        # One real-format route object per routed service: the writer patches these exactly as
        # the apiserver would, and the simulated router reads its weights from them.
        self._routes: dict[str, dict[str, Any]] = {
            key: route_object(s) for key, s in self._services.items() if s.router_kind
        }
        self._router = Router(self._rng, self._services)
        self._resource_version = 1000
        self._pods: dict[str, SimPod] = {}
        self._serial = 0
        start = clock()
        self._t = start - WARM_UP_S
        self._began = self._t  # when the simulated history begins (describe dates its events from it)
        # The cluster autoscaler found one node unneeded two hours ago (docs/disruption-actors.md §4: value =
        # Unix seconds, PreferNoSchedule): `nodes -o json` names it; no cordon, so the dashboard is unchanged.
        self._nodes["gpu-l40s-05"].taints = (
            Taint(CA_DELETION_CANDIDATE, str(int(start - 2 * 3600)), "PreferNoSchedule"),)
        for node in self._nodes.values():
            node.uuids = [self._uuid() for _ in range(node.product.count)]
            node.history = {i: deque(maxlen=int(HISTORY_S / STEP_S)) for i in range(node.product.count)}
        self._place_initial_workloads()
        fail_after_placement(self._nodes)  # a GPU a pod holds falls off the bus: the pod stays on it
        hand_to_actors(self._nodes, start)  # after placement: the pods and GPU figures are the same without it
        self._actors = actor_objects(start)  # the actors' own objects behind those Nodes, and the budgets beside them
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
        for svc in self._services.values():
            if svc.restarts:
                first = next(p for p in self._pods.values() if (p.namespace, p.service) == (svc.namespace, svc.name))
                first.restarts = svc.restarts
        # The canary of mistral is mid-rollout: its last pod is still loading weights.
        canary = [p for p in self._pods.values() if p.version == "canary"]
        if canary:
            canary[-1].ready_at = self._t + WARM_UP_S + 45
        # A fine-tuning job and the per-node DaemonSet pods: what a drain must step around.
        self._add_pod(SimPod(
            "research", "finetune-llama-lora-7xk2p", self._uid(), "", "", "", 8, [],
            self._t, {"job-name": "finetune-llama-lora"}, owner_kind="Job", has_emptydir=True,
            signal=False,
        ), A100)
        # A job asking for more GPUs than any node has: Pending, with the scheduler's reason.
        self._add_pod(SimPod(
            "research", "pretrain-moe-16x-4kq9z", self._uid(), "", "", "", 16, [], self._t,
            {"job-name": "pretrain-moe-16x"}, owner_kind="Job", signal=False,
        ), H100)
        # A notebook holding a GPU it does not use: what the idle figures are for (seed 000 §7).
        self._add_pod(SimPod(
            "research", "jupyter-alice-0", self._uid(), "", "", "", 1, [], self._t,
            {"app": "jupyter"}, owner_kind="StatefulSet", signal=False, busy=False,
        ), A100)
        # A monitoring agent seeing every GPU without asking for one, on the node whose driver restart waits:
        # why its upgrade does not finish (named, not drawn from the seed, so nothing else moves).
        agent = SimPod("monitoring", "gpu-agent-0", "9d1c7e52-agent-0000-0000-000000000000", "gpu-l40s-03", "", "", 0,
                        [], self._t, {"app": "gpu-agent"}, owner_kind="StatefulSet", signal=False,
                        gpus_unrequested=True)
        self._pods[f"{agent.namespace}/{agent.name}"] = agent
        for node in self._nodes.values():
            if node.ready:
                pod = SimPod(
                    "gpu-operator", f"nvidia-dcgm-exporter-{self._suffix(5)}", self._uid(),
                    node.name, "", "", 0, [], self._t, {"app": "nvidia-dcgm-exporter"},
                    owner_kind="DaemonSet", signal=False,
                )
                self._pods[f"{pod.namespace}/{pod.name}"] = pod

    def _uid(self) -> str:
        h = "%032x" % self._rng.getrandbits(128)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _create_pod(self, svc: SimService, version: str, rs_hash: str, ready_at: float) -> SimPod:
        labels = template_labels(svc, version, rs_hash)
        pod = SimPod(
            svc.namespace, f"{svc.name}-{version}-{rs_hash}-{self._suffix(5)}", self._uid(), "",
            svc.name, version, svc.gpus_per_pod, [], ready_at, labels, grace_s=svc.grace_s, resource=svc.resource,
        )
        return self._add_pod(pod, svc.product)

    def _add_pod(self, pod: SimPod, product: Product) -> SimPod:
        self._schedule(pod, product)
        self._pods[f"{pod.namespace}/{pod.name}"] = pod
        return pod

    def _free_units(self, node: SimNode, resource: str) -> list[int]:
        used = {i for p in self._pods.values() if p.node == node.name for i in p.gpu_indices}
        return [i for i, (name, gpu) in enumerate(node.units)
                if name == resource and i not in used and gpu not in node.bad_gpus]

    def _schedule(self, pod: SimPod, product: Product) -> None:
        """Bind to the first schedulable, Ready node of the model with enough free units of what it asks for."""
        for node in self._nodes.values():
            if node.product is not product or not node.ready or node.unschedulable:
                continue
            free = self._free_units(node, pod.resource)
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
            else:
                while pod.running and pod.running[0][0] <= t:  # a heap: the first to end comes first
                    end, began = heapq.heappop(pod.running)
                    pod.finished.append((end, end - began))
                while pod.finished and pod.finished[0][0] <= t - FINISHED_KEPT_S:
                    pod.finished.popleft()
        by_service: dict[str, list[SimPod]] = {}
        by_node: dict[str, list[SimPod]] = {}
        by_name: dict[tuple[str, str], list[SimPod]] = {}
        for pod in self._pods.values():
            if pod.phase == "Pending" and pod.service:
                self._schedule(pod, self._services[f"{pod.namespace}/{pod.service}"].product)
                if pod.phase == "Running":
                    pod.ready_at = t + POD_START_S
            by_service.setdefault(f"{pod.namespace}/{pod.service}", []).append(pod)
            by_node.setdefault(pod.node, []).append(pod)
            by_name.setdefault((pod.namespace, pod.labels.get(NAME, "")), []).append(pod)
        # New sessions go where the routes and the Services' selectors send them (router.py), never by
        # gputui's own annotations: no real router reads them.
        for key, svc in self._services.items():
            self._router.arrive(key, svc, self._route_weights(svc), by_name, by_service.get(key, []), t)
        if sample:
            for node in self._nodes.values():
                self._sample_gpus(node, by_node.get(node.name, []), t)

    def _sample_gpus(self, node: SimNode, node_pods: list[SimPod], t: float) -> None:
        # GPU -> the pods holding its units (a whole card has one; a sliced or shared card several).
        holders: dict[int, list[tuple[SimPod, SimService | None]]] = {}
        for pod in node_pods:
            svc = self._services.get(f"{pod.namespace}/{pod.service}")
            for unit in pod.gpu_indices:
                holders.setdefault(node.units[unit][1], []).append((pod, svc))
        per_gpu = self._units_per_gpu(node)
        for i in range(node.product.count):
            if not node.ready or i in node.bad_gpus:
                # No exporter answers for a node that is down or a GPU fallen off the bus: no sample, a gap. The
                # noise its holders would have drawn is drawn all the same, so that a GPU failing under a pod
                # moves no other figure of the seeded demo.
                for _pod, _svc in holders.get(i, ()):
                    self._rng.gauss(0, 2.5)
                node.history[i].append((t, None))
                continue
            util = 0.0
            for pod, svc in holders.get(i, ()):  # each unit is its share of the card's engine time
                noise = self._rng.gauss(0, 2.5)
                if svc is None:  # a training job: busy and steady; a notebook: idle
                    busy = 96.0 + noise / 2 if pod.busy else abs(noise) / 5
                elif pod.ready(t):
                    busy = 18.0 + 78.0 * len(pod.running) / svc.max_running + noise
                else:  # loading weights
                    busy = 4.0 + abs(noise)
                util += busy / per_gpu[i]
            node.history[i].append((t, round(max(0.0, min(100.0, util)), 1)))
        node.holders = {i: [(pod.uid, pod.ready(t)) for pod, _ in held] for i, held in holders.items()}

    @staticmethod
    def _units_per_gpu(node: SimNode) -> dict[int, int]:
        per: dict[int, int] = {}
        for _name, gpu in node.units:
            per[gpu] = per.get(gpu, 0) + 1
        return per

    def _gpu_model(self, node: SimNode, i: int) -> Gpu:
        """A GPU's metrics from its last utilisation sample (no randomness: re-reads agree)."""
        p = node.product
        if not node.ready:
            return Gpu(i, node.uuids[i])
        mem_total = float(p.mem_mib)
        if i in node.bad_gpus:  # fallen off the bus: DCGM reads nothing from it but the XID
            return Gpu(index=i, uuid=node.uuids[i], mem_total_mib=mem_total, xid=node.bad_gpus[i], health=Health.FAIL)
        util = node.history[i][-1][1] if node.history[i] else None
        if util is None:  # not sampled yet
            return Gpu(i, node.uuids[i])
        mem = 512.0 if i not in node.holders else 0.0
        unit_mem = mem_total / self._units_per_gpu(node)[i]  # a slice's or a replica's share of the card
        for uid, ready in node.holders.get(i, ()):
            pod = next((q for q in self._pods.values() if q.uid == uid), None)
            svc = self._services.get(f"{pod.namespace}/{pod.service}") if pod else None
            if pod is None:
                mem += 512.0
            elif svc is None:
                mem += 0.88 * unit_mem
            elif ready:
                load = len(pod.running) / svc.max_running
                kv = max(0.0, 0.9 * unit_mem - svc.weights_gb * 1024)
                mem += svc.weights_gb * 1024 + kv * min(1.0, 0.3 + load)
            else:
                mem += svc.weights_gb * 1024 * 0.6
        temp = 31.0 + 0.5 * util + node.temp_offset + (i % 3) * 0.7
        power = p.idle_w + (p.max_w - p.idle_w) * (util / 100.0) ** 1.3
        # The table's other figures the demo simulates (gpu_metrics: a row's `demo`); the rest stay unknown.
        extra = {m.name: m.demo(util, i) for m in DEMO_FIGURES if m.demo is not None}
        return Gpu(
            index=i, uuid=node.uuids[i], util_pct=util, mem_used_mib=float(round(mem)),
            mem_total_mib=mem_total, temp_c=float(round(temp)), power_w=round(power, 1),
            xid=node.gpu_xids.get(i, 0), health=Health.PASS, extra=extra_of({**extra, **self._fault_fields(node, i, util)}),
        )

    def _fault_fields(self, node: SimNode, i: int, util: float) -> dict[str, float]:
        """What the demo's exporter reports of a GPU's faults, by the names gpu_faults reads (scenario.py: the
        row-remap fields everywhere, the clock event reasons on the thermal story's node alone; the XID is the
        record's own)."""
        rows = 0
        if i in node.remaps:
            at_start, every_s = node.remaps[i]
            rows = at_start + int((self._t - self._began) / every_s)
        out = {
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": float(rows),
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0.0,
            "DCGM_FI_DEV_ROW_REMAP_PENDING": 1.0 if rows else 0.0,  # the newest remap waits for a GPU reset
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0.0,
        }
        if node.throttle:
            out["throttle_reasons"] = float(node.throttle | (0x1 if util < 1.0 else 0))  # 0x1: GPU idle
        return out

    # ----- reader -----------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        with self._lock:
            now = self._clock()
            self._advance(now)
            nodes = tuple(self._node_model(n) for n in self._nodes.values())
            pods = tuple(self._pod_model(p) for p in self._pods.values())
            services = tuple(self._service_model(s) for s in self._services.values())
            # As the session query reads: running in the batch plus waiting in the queue (pods without the
            # signal export none).
            counts = {(p.namespace, p.name): len(p.running) + p.waiting for p in self._pods.values() if p.signal}
            budgets = tuple(self._budget_model(s) for s in self._services.values() if s.pdb_max_unavailable is not None)
            return ClusterSnapshot(
                taken_at=now, context="demo", nodes=nodes, pods=pods, services=services,
                budgets=budgets, session_counts=counts, selectors=self._router.selectors,
                sources=(SourceStatus("API", now), SourceStatus("metrics", now)),
                simulated=True, actors=self._actors,
            )

    def gpu_history(self, node: str, minutes: int = 5) -> dict[int, list[float | None]]:
        with self._lock:
            sim = self._nodes.get(node)
            if sim is None:
                return {}
            since = self._t - minutes * 60
            return {i: [u for t, u in h if t > since] for i, h in sim.history.items()}

    def gpu_pods(self, node: str) -> dict[int, list[str]] | None:
        """The demo's DCGM pod attribution: per GPU index, the pods ("namespace/name") holding a unit of it, as
        dcgm-exporter's pod labels name them; None for a node it does not know."""
        with self._lock:
            self._advance(self._clock())
            sim = self._nodes.get(node)
            if sim is None:
                return None
            out: dict[int, list[str]] = {}
            for key, pod in sorted(self._pods.items()):
                if pod.node == node:  # a terminating pod holds its GPUs until it is gone
                    for gpu in sorted({sim.units[u][1] for u in pod.gpu_indices}):
                        out.setdefault(gpu, []).append(key)
            return out

    def node_gpus(self, node: str) -> None:
        return None  # the demo's snapshot already holds every GPU

    def close(self) -> None:
        pass

    def _node_model(self, n: SimNode) -> Node:
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
            "gpu.pool": p.family,  # the seeds' pool label: one pool per GPU family
            **n.scheme_labels,
            **n.labels,
        }
        if n.upgrade_state:
            labels[STATE_LABEL] = n.upgrade_state
        ready = Condition("Ready", "True" if n.ready else "Unknown",
                          "KubeletReady" if n.ready else "NodeStatusUnknown")
        offered = n.offered()
        # Read as the live backend reads a node: the device plugin's resources from its status (GFD's labels
        # tell their scheme), a DRA driver's devices from its ResourceSlice.
        resources = node_resources({k: c for k, (c, _a) in offered.items() if not k.startswith(DRA_PREFIX)},
                                   {k: a for k, (_c, a) in offered.items() if not k.startswith(DRA_PREFIX)}, labels)
        resources += tuple(GpuResource(k, Scheme.DRA, c, a) for k, (c, a) in offered.items() if k.startswith(DRA_PREFIX))
        return Node(
            name=n.name, ready=n.ready, unschedulable=n.unschedulable, gpu_product=p.label,
            gpu_capacity=sum(r.capacity for r in resources), gpu_allocatable=sum(r.allocatable for r in resources),
            driver_version=n.driver,
            cuda_version=CUDA, upgrade_state=n.upgrade_state, gpu_memory_mib=p.mem_mib,
            conditions=(ready, *n.conditions),
            gpus=tuple(self._gpu_model(n, i) for i in range(p.count)),
            labels=labels, annotations=dict(n.annotations),
            gpu_resources=resources, gpu_count=p.count,
            node_info=NODE_INFO, scheduling=DEMO_NODE_SCHEDULING if not n.taints
            else NodeScheduling(n.taints, DEMO_NODE_SCHEDULING.allocatable),
        )

    def _pod_model(self, p: SimPod) -> InferencePod:
        return InferencePod(
            namespace=p.namespace, name=p.name, uid=p.uid, node=p.node, phase=p.phase,
            ready=p.ready(self._t), gpu_request=p.gpu_request, service=p.service,
            gpu_units={p.resource: p.gpu_request} if p.gpu_request else {},
            images=(f"vllm/vllm-openai:{ENGINE}",) if p.service else (),
            version=p.version, deleting=p.deleting_at is not None, owner_kind=p.owner_kind,
            labels=dict(p.labels), has_emptydir=p.has_emptydir,
            session_signal=p.signal,
            pending_reason=self._pending_reason(p) if p.phase == "Pending" else "",
            termination_grace_s=int(p.grace_s), restarts=p.restarts, gpus_unrequested=p.gpus_unrequested,
            probes=svc.probes if (svc := self._services.get(f"{p.namespace}/{p.service}")) else None,
            scheduling=EMPTY_POD,  # the demo's pods ask for no node, taint, zone or CPU: the preview reads none
        )

    def _pending_reason(self, p: SimPod) -> str:
        n = len(self._nodes)
        return f"0/{n} nodes are available: {n} Insufficient {p.resource}. preemption: not helpful."

    def _version_pods(self, svc: SimService, version: str) -> list[SimPod]:
        return [
            p for p in self._pods.values()
            if p.namespace == svc.namespace and p.service == svc.name and p.version == version
        ]

    def _route_backends(self, s: SimService) -> dict[str, RouteBackend]:
        """version -> its backend in the route, parsed by the same code the live backend uses."""
        return route_backends(s, self._routes.get(f"{s.namespace}/{s.name}"))

    def _route_weights(self, s: SimService) -> dict[str, int | None]:
        key = f"{s.namespace}/{s.name}"
        return self._router.weights(key, s, self._routes.get(key))

    def _service_model(self, s: SimService) -> InferenceService:
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

    def _budget_model(self, s: SimService) -> Budget:
        assert s.pdb_max_unavailable is not None  # callers skip services without a budget
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

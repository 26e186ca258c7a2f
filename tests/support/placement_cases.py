"""Clusters for comparing the drain's placement preview (gputui.ops.drain.placement) with the real kube-scheduler:
GPU nodes on the fake kubelet with zones, labels, taints, CPU and pod limits; Deployments with node selectors,
node affinity, tolerations, pod (anti-)affinity and spread constraints; a drain (cordon the batch, evict its pods
in the plan's order); and what the real scheduler then did with each replacement.

Every case lives in a namespace and a node pool of its own (`gputui.test/pool`): every pod selects its pool, so
cases run side by side and the harness's other nodes take none of them (the preview sees those nodes too, and
the selector excludes them, as the scheduler's does).

What the scheduler did is read once the cluster has settled: the evicted pods gone, every replacement either
bound or marked Unschedulable; a replacement still Pending is then deleted once, so that its controller's next
pod is judged by the scheduler in that final state (a replacement refused while an evicted pod was still
terminating would otherwise be judged on a state the preview does not claim to describe).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from gputui.vocabulary.sessions import SESSION_SIGNAL_LABEL
from tests.support.procs import wait_until

ZONE = "topology.kubernetes.io/zone"
POOL = "gputui.test/pool"


@dataclass
class NodeSpec:
    name: str
    zone: str = "z1"
    gpus: int = 8
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    cpu: str = "96"
    pods: int = 110
    cordoned: bool = False  # cordoned once the pods are placed (before the drain: not one of the batch)


@dataclass
class Workload:
    """A Deployment of `replicas` pods labelled app=NAME asking `gpus` GPUs each; `spec`: more of its pod spec
    (nodeSelector entries are added to the pool's, the rest as given); `on`: the nodes its pods are first
    placed on (the others cordoned meanwhile), none: wherever the scheduler puts them."""

    name: str
    replicas: int = 1
    gpus: int = 1
    spec: dict[str, Any] = field(default_factory=dict)
    cpu: str | None = None
    on: list[str] = field(default_factory=list)


def deployment(w: Workload, ns: str, pool: str) -> dict:
    labels = {"app": w.name, SESSION_SIGNAL_LABEL: "false"}  # no sessions: evicted at once
    spec = dict(w.spec)
    requests = {"nvidia.com/gpu": str(w.gpus), **({"cpu": w.cpu} if w.cpu else {})}
    pod = {"terminationGracePeriodSeconds": 1, **spec,
           "nodeSelector": {POOL: pool, **spec.get("nodeSelector", {})},
           "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.9.0",
                           "resources": {"requests": requests, "limits": {"nvidia.com/gpu": str(w.gpus)}}}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": w.name, "namespace": ns},
            "spec": {"replicas": w.replicas, "selector": {"matchLabels": {"app": w.name}},
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}


def _judged(pod) -> bool:
    """Bound and running, or refused by the scheduler (PodScheduled False, Unschedulable)."""
    if pod.spec.node_name:
        return pod.status.phase == "Running"
    return any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
               for c in pod.status.conditions or [])


def live_pods(core, ns: str) -> list:
    return [p for p in core.list_namespaced_pod(ns).items if not p.metadata.deletion_timestamp]


def settle(core, ns: str, want: int, timeout: float = 90) -> list:
    """The namespace's live pods once there are `want` and each is judged (bound and running, or refused)."""
    def check():
        pods = live_pods(core, ns)
        return pods if len(pods) == want and all(map(_judged, pods)) else None
    return wait_until(check, timeout, interval=0.3, what=f"{want} pods of {ns} bound or refused")


class Case:
    """One cluster: its nodes (on the fake kubelet) and workloads, in a namespace and pool of its own."""

    def __init__(self, name: str, nodes: list[NodeSpec], workloads: list[Workload]) -> None:
        self.name, self.nodes, self.workloads = name, nodes, workloads
        self.ns = f"pl-{name}"

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def build(self, kubelet, core, apps) -> None:
        """The nodes, then each workload (on its `on` nodes, the others cordoned meanwhile), each settled."""
        core.create_namespace({"metadata": {"name": self.ns}})
        for n in self.nodes:
            kubelet.add_node(n.name, gpus=n.gpus, cpu=n.cpu, pods=n.pods, taints=list(n.taints),
                             labels={POOL: self.name, ZONE: n.zone, **n.labels})
        placed = 0
        for w in self.workloads:
            if w.on:
                self.cordon(core, [n for n in self.node_names if n not in w.on], True)
            apps.create_namespaced_deployment(self.ns, deployment(w, self.ns, self.name))
            placed += w.replicas
            if w.on:  # placed where asked before the next one is made
                settle(core, self.ns, placed)
                self.cordon(core, [n for n in self.node_names if n not in w.on], False)
        settle(core, self.ns, placed)
        self.cordon(core, [n.name for n in self.nodes if n.cordoned], True)

    @staticmethod
    def cordon(core, names: Iterable[str], on: bool) -> None:
        for name in names:
            core.patch_node(name, {"spec": {"unschedulable": True if on else None}})

    def drain(self, core, batch: list[str], order: list[str]) -> None:
        """kubectl drain's way: the whole batch cordoned first, then each pod (NAMESPACE/NAME) evicted in order."""
        self.cordon(core, batch, True)
        for key in order:
            ns, name = key.split("/", 1)
            try:
                core.create_namespaced_pod_eviction(name, ns, {"metadata": {"name": name, "namespace": ns}})
            except ApiException as exc:
                if exc.status != 404:
                    raise

    def outcome(self, core, evicted: list[str], before: set[str]) -> dict[str, tuple[int, int]]:
        """Per workload (app label): how many of its replacements the real scheduler bound, how many it left
        Pending, once settled; a Pending one is asked again once, its next pod judged in the final state."""
        gone = {k.split("/", 1)[1] for k in evicted}
        wait_until(lambda: not (gone & {p.metadata.name for p in core.list_namespaced_pod(self.ns).items}), 90,
                   interval=0.3, what=f"the evicted pods of {self.ns} gone")
        total = sum(w.replicas for w in self.workloads)
        pods = settle(core, self.ns, total)
        pending = [p for p in pods if not p.spec.node_name and p.metadata.name not in before]  # replacements
        if pending:
            for p in pending:
                core.delete_namespaced_pod(p.metadata.name, self.ns, grace_period_seconds=0)
            names = {p.metadata.name for p in pending}
            wait_until(lambda: not (names & {p.metadata.name for p in core.list_namespaced_pod(self.ns).items}), 60,
                       interval=0.3, what="the pending replacements deleted")
            pods = settle(core, self.ns, total)
        out: dict[str, list[int]] = {}
        for p in pods:
            if p.metadata.name in before:
                continue  # not a replacement: in place before the drain
            counts = out.setdefault(p.metadata.labels["app"], [0, 0])
            counts[0 if p.spec.node_name else 1] += 1
        return {app: (c[0], c[1]) for app, c in out.items()}

    def tear_down(self, kubelet, core, wait: bool = True) -> None:
        """The namespace deleted and the nodes removed; `wait`: until the namespace is gone."""
        try:
            core.delete_namespace(self.ns, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise
        for name in self.node_names:
            kubelet.remove_node(name)
        deadline = time.monotonic() + (120 if wait else 0)
        while time.monotonic() < deadline:
            try:
                core.read_namespace(self.ns)
            except ApiException as exc:
                if exc.status == 404:
                    return
                raise
            time.sleep(0.5)


@dataclass(frozen=True)
class Judged:
    """The preview's claims for one workload's evicted pods against what the scheduler did."""

    app: str
    sure_go: int  # predicted: surely can go
    sure_nowhere: int  # predicted: surely nowhere
    contended: int  # predicted either way, depending on the others
    unknown: int
    bound: int  # observed
    pending: int

    @property
    def contradictions(self) -> int:
        """Sure claims the scheduler contradicted: can go but left Pending, nowhere but bound (replicas of one
        workload are alike, so claims and outcomes are compared by count)."""
        return max(0, self.sure_go - self.bound) + max(0, self.sure_nowhere - self.pending)


def judge(placements: Iterable, outcome: dict[str, tuple[int, int]]) -> list[Judged]:
    """Each workload's placements (gputui.ops.drain.placement.Placement) against its outcome."""
    by: dict[str, list] = {}
    for p in placements:
        by.setdefault(p.pod.labels["app"], []).append(p)
    out = []
    for app, items in sorted(by.items()):
        verdicts = [(p.verdict.value, p.sure) for p in items]
        bound, pending = outcome.get(app, (0, 0))
        out.append(Judged(app, verdicts.count(("can go", True)), verdicts.count(("nowhere", True)),
                          sum(1 for v, s in verdicts if not s and v != "unknown"),
                          sum(1 for v, _s in verdicts if v == "unknown"), bound, pending))
    return out

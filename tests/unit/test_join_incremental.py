"""The join that rejoins only what moved (join_fleet) gives, refresh after refresh, exactly what a join from
scratch gives: nodes, pods and the per-node indexes, through records changed in place, added and deleted
(which shifts the cache's order), pods scheduled, moved and finished, GPU labels lost, session counts that
move, appear and vanish, and refreshes where every node's metrics moved."""

from __future__ import annotations

import random

from gputui.backends import join_fleet
from gputui.backends import kube_objects as ko
from gputui.backends.join import Joiner, KubeState, Metrics, join
from gputui.model import GpuSummary
from tests.support.kube_json import deployment_json, node_json, pod_json

NODES, PODS = 640, 720  # above MIN_MOVED * MOVED_SHARE, so a few moved records take the incremental path


def _pod(i: int, node: str, phase: str = "Running", version: str = "v1") -> ko.PodRecord:
    labels = {"app.kubernetes.io/name": "bge", "app.kubernetes.io/version": version}
    return ko.pod_record(pod_json(f"bge-{i}", node, 1 + i % 2, labels, phase=phase))


def _node(i: int, **kw) -> ko.NodeRecord:
    return ko.node_record(node_json(f"gpu-{i:04d}", **kw))


def _check(snap, fresh) -> None:
    assert snap.nodes == fresh.nodes
    assert snap.pods == fresh.pods
    assert dict(snap._allocated) == dict(fresh._allocated)
    assert dict(snap._pods_by_node) == dict(fresh._pods_by_node)


def test_refresh_after_refresh_the_incremental_join_is_the_join_from_scratch(monkeypatch):
    rng = random.Random(18)
    nodes = {f"gpu-{i:04d}": _node(i) for i in range(NODES)}
    pods = {f"llm/bge-{i}": _pod(i, f"gpu-{rng.randrange(NODES):04d}") for i in range(PODS)}
    sessions = {("llm", f"bge-{i}"): (rng.randrange(5), 0) for i in range(PODS)}
    workloads = (ko.deployment_record(deployment_json("bge", "v1", service="bge")),)
    summaries = {name: GpuSummary(8, util_mean=10.0) for name in nodes}
    no_problems: dict = {}
    fulls = {"nodes": 0, "pods": 0}
    joiner = Joiner()
    for cls, key in ((join_fleet.NodeJoin, "nodes"), (join_fleet.PodJoin, "pods")):
        real = cls._full

        def counting(self, *a, _real=real, _key=key):
            if self is getattr(joiner, f"_{_key}"):  # not the joins from scratch it is checked against
                fulls[_key] += 1
            return _real(self, *a)

        monkeypatch.setattr(cls, "_full", counting)
    last = None
    next_node, next_pod = NODES, PODS
    steps = 60
    for step in range(steps):
        names = list(nodes)
        for _ in range(rng.randrange(1, 12)):  # status updates in place: cordons, readiness
            n = rng.choice(names)
            nodes[n] = ko.node_record(node_json(n, unschedulable=rng.random() < 0.5, ready=rng.random() < 0.9))
        if step % 7 == 3:  # a node joins; one leaves from the middle (the cache's order shifts after it)
            nodes[f"gpu-{next_node:04d}"] = _node(next_node)
            next_node += 1
            del nodes[names[-3]]
        if step % 11 == 5:  # a node loses its GPU label: it leaves the GPU fleet, its pods with it
            n = rng.choice(names[:-3])
            raw = node_json(n)
            del raw["metadata"]["labels"]["nvidia.com/gpu.product"]
            raw["status"] = {"capacity": {}, "allocatable": {}, "conditions": [{"type": "Ready", "status": "True"}]}
            nodes[n] = ko.node_record(raw)
        gpu_names = [n for n in nodes if nodes[n].is_gpu_node]
        keys = list(pods)
        for _ in range(rng.randrange(0, 10)):  # pods: scheduled elsewhere, pending, finished, a new version
            k = rng.choice(keys)
            i = int(k.rsplit("-", 1)[1])
            choice = rng.random()
            pods[k] = (_pod(i, "", phase="Pending") if choice < 0.2 else
                       _pod(i, rng.choice(gpu_names), phase="Succeeded") if choice < 0.35 else
                       _pod(i, rng.choice(gpu_names), version="v2" if choice < 0.5 else "v1"))
        if step % 5 == 2:  # pods come and go
            pods[f"llm/bge-{next_pod}"] = _pod(next_pod, rng.choice(gpu_names))
            sessions[("llm", f"bge-{next_pod}")] = (1, 1)
            next_pod += 1
            gone = rng.choice(keys)
            del pods[gone]
            sessions.pop(("llm", gone.split("/")[1]), None)
        sessions = dict(sessions)
        for key in rng.sample(list(sessions), rng.randrange(0, 20)):  # counts move, a series vanishes
            if rng.random() < 0.1:
                del sessions[key]
            else:
                sessions[key] = (rng.randrange(9), rng.randrange(3))
        if step % 13 == 0:  # a DCGM read: every node's figures moved
            summaries = {name: GpuSummary(8, util_mean=float(rng.randrange(100))) for name in nodes}
        metrics = Metrics(nodes=summaries, gpus=no_problems, sessions=sessions)  # the reader keeps unchanged maps
        state = KubeState(nodes=tuple(nodes.values()), pods=tuple(pods.values()), workloads=workloads)
        snap = joiner.join(state, metrics, now=float(step), context="c", sources=())
        _check(snap, join(state, metrics, now=float(step), context="c", sources=()))
        if last is not None and step % 13:  # what did not move is the very object of the last snapshot
            before = {n.name: n for n in last.nodes}
            unchanged = [n for n in snap.nodes if n.name in before and before[n.name] is n]
            assert len(unchanged) >= len(snap.nodes) - 40
        last = snap
    # Most refreshes took the path that touches only what moved; the metrics reads took the full one.
    assert fulls["nodes"] <= steps // 13 + 3, fulls
    # The pods' full joins: when the set of GPU nodes changed (a node came, went, or lost its label).
    assert fulls["pods"] <= steps // 7 + steps // 11 + 3, fulls


def test_moved_and_changed_keys_say_what_moved_or_that_too_much_did():
    a, b, c, d = object(), object(), object(), object()
    assert join_fleet.moved((a, b, c), (a, d, c), 5) == [1]
    assert join_fleet.moved((a, b), (a, b, c, d), 5) == [2, 3]  # appended
    assert join_fleet.moved((a, b, c), (a, c), 5) == [1, 2]  # b deleted: c shifted, and the end is gone
    assert join_fleet.moved((a, b, c), (d, d, d), 2) is None
    assert join_fleet.changed_keys({1: "x", 2: "y"}, {1: "x", 2: "z", 3: "w"}, 5) == [2, 3]
    assert sorted(join_fleet.changed_keys({1: "x", 2: "y"}, {1: "x"}, 5)) == [2]
    assert join_fleet.changed_keys({1: "x"}, {1: "y", 2: "z"}, 1) is None

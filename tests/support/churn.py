"""A fleet's records and metrics refresh after refresh, churning as a busy cluster does: node status updates
in place, nodes joining and leaving (the cache's order shifts), a node losing its GPU label, pods rescheduled,
pending, finished and replaced, session counts moving, appearing and vanishing (now and then all of them),
and every few refreshes a DCGM read that moves every node's figures (some hot, some missing) and names a few
GPUs with a problem. For the tests that check what is kept
from one refresh to the next against what is worked out from scratch."""

from __future__ import annotations

import random
from collections.abc import Iterator

from gputui.backends import kube_objects as ko
from gputui.backends.join import KubeState, Metrics
from gputui.backends.join_fleet import GpuSample
from gputui.vocabulary.gpu_metrics import Figures
from gputui.vocabulary.model import GpuSummary
from tests.support.kube_json import deployment_json, node_json, pod_json


def _pod(i: int, node: str, phase: str = "Running", version: str = "v1") -> ko.PodRecord:
    labels = {"app.kubernetes.io/name": "bge", "app.kubernetes.io/version": version}
    return ko.pod_record(pod_json(f"bge-{i}", node, 1 + i % 2, labels, phase=phase))


def _node(i: int, **kw) -> ko.NodeRecord:
    # In one of three pools; a status update below rewrites the node without it ("(no pool)"): pools change too.
    return ko.node_record(node_json(f"gpu-{i:04d}", labels={"gpu.pool": f"pool-{i % 3}"}, **kw))


def churn(nodes_n: int, pods_n: int, steps: int, seed: int = 18) -> Iterator[tuple[int, KubeState, Metrics]]:
    """(step, state, metrics) for each refresh; maps that did not change are the same objects, as the
    reader hands them over."""
    rng = random.Random(seed)
    nodes = {f"gpu-{i:04d}": _node(i) for i in range(nodes_n)}
    pods = {f"llm/bge-{i}": _pod(i, f"gpu-{rng.randrange(nodes_n):04d}") for i in range(pods_n)}
    sessions = {("llm", f"bge-{i}"): rng.randrange(5) for i in range(pods_n)}
    workloads = (ko.deployment_record(deployment_json("bge", "v1", service="bge")),)
    summaries = {name: GpuSummary(8, util_pct=10.0) for name in nodes}
    no_problems: dict = {}
    next_node, next_pod = nodes_n, pods_n
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
            sessions[("llm", f"bge-{next_pod}")] = 2
            next_pod += 1
            gone = rng.choice(keys)
            del pods[gone]
            sessions.pop(("llm", gone.split("/")[1]), None)
        sessions = dict(sessions)
        for key in rng.sample(list(sessions), rng.randrange(0, 20)):  # counts move, a series vanishes
            if rng.random() < 0.1:
                del sessions[key]
            else:
                sessions[key] = rng.randrange(9) + rng.randrange(3)
        if step % 17 == 8:  # a scrape in a busy cluster: every pod's count moved
            sessions = {key: count + 1 for key, count in sessions.items()}
        if step % 13 == 0 or step % 13 == 6:  # a DCGM read: every node's figures moved, some GPUs hot (an alert)
            summaries = {name: GpuSummary(8, util_pct=float(rng.randrange(100)) if rng.random() < 0.95 else None,
                                          temp_c=float(rng.choice((40, 60, 84, 85, 92))))
                         for name in nodes if rng.random() < 0.98}  # a node's series missing now and then
            # A few GPUs with a problem, named one by one (they carry their own temperature: a hot summary of
            # their node adds no alert of its own).
            no_problems = {(name, 0): GpuSample(name, 0, values=Figures({"util_pct": 50.0, "temp_c": 70.0}), xid=79)
                           for name in rng.sample(list(nodes), 3)}
        metrics = Metrics(nodes=summaries, gpus=no_problems, sessions=sessions)  # the reader keeps unchanged maps
        state = KubeState(nodes=tuple(nodes.values()), pods=tuple(pods.values()), workloads=workloads)
        yield step, state, metrics

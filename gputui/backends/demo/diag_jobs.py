"""The demo's side of the DCGM diagnostic (gputui.ops.diag): a Job made on a node finishes at once, its pod
Succeeded, and its log is a DCGM 4.x-shaped `dcgmi diag -j` document, SIMULATED, that passes every GPU the node
offers (a node with a GPU off the bus offers fewer than it has, so the real op calls that unknown before any Job).
The node itself is read as the apiserver serves it: capacity and allocatable per resource."""

from __future__ import annotations

import copy
import json
from typing import Any

from gputui.backends.demo.errors import DemoApiError
from gputui.backends.demo.scenario import SimNode


def simulated_pass(gpus: int) -> str:
    """`dcgmi diag -r N -j` as DCGM 4.x writes it, every test passing on `gpus` GPUs; its version says SIMULATED."""
    def results() -> list[dict[str, Any]]:
        return [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": i, "status": "Pass"} for i in range(gpus)]
    tests = [("Deployment", "software"), ("Integration", "pcie"), ("Hardware", "memory")]
    doc = {"DCGM Diagnostic": {
        "test_categories": [{"category": category, "tests": [{"name": name, "results": results(),
                                                             "test_summary": {"status": "Pass"}}]}
                            for category, name in tests],
        "metadata": {"version": "SIMULATED"}}}
    return json.dumps(doc, indent=1)


class DemoJobs:
    """Jobs and their pods, per namespace/name; the demo cluster's lock is held by the caller."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.logs: dict[str, str] = {}  # namespace/pod -> its log

    def create(self, namespace: str, body: dict, node: SimNode | None) -> dict:
        name = str((body.get("metadata") or {}).get("name") or "")
        if not name or f"{namespace}/{name}" in self.jobs:
            raise DemoApiError(409, f'jobs.batch "{name}" already exists')
        if node is None:
            raise DemoApiError(422, "the Job names no node the demo has")
        job = copy.deepcopy(body)
        gpus = sum(1 for _, gpu in node.units if gpu not in node.bad_gpus)
        job["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
        self.jobs[f"{namespace}/{name}"] = job
        self.logs[f"{namespace}/{name}-sim"] = simulated_pass(gpus)
        return copy.deepcopy(job)

    def get(self, namespace: str, name: str) -> dict:
        job = self.jobs.get(f"{namespace}/{name}")
        if job is None:
            raise DemoApiError(404, f'jobs.batch "{name}" not found')
        return copy.deepcopy(job)

    def pods(self, namespace: str, label_selector: str) -> list[dict]:
        name = label_selector.removeprefix("job-name=")
        if f"{namespace}/{name}" not in self.jobs:
            return []
        return [{"metadata": {"name": f"{name}-sim", "namespace": namespace},
                 "status": {"phase": "Succeeded", "containerStatuses": [
                     {"name": "dcgm-diag", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}}]

    def delete(self, namespace: str, name: str) -> None:
        self.jobs.pop(f"{namespace}/{name}", None)
        self.logs.pop(f"{namespace}/{name}-sim", None)

    def log(self, namespace: str, pod: str) -> str:
        text = self.logs.get(f"{namespace}/{pod}")
        if text is None:
            raise DemoApiError(404, f'pods "{pod}" not found')
        return text


def node_object(node: SimNode) -> dict:
    """The Node's status as the apiserver serves it, enough for the diagnostic: capacity and allocatable."""
    offered = node.offered()
    return {"metadata": {"name": node.name}, "status": {
        "capacity": {r: str(cap) for r, (cap, _) in offered.items()},
        "allocatable": {r: str(alloc) for r, (_, alloc) in offered.items()}}}


def pinned_node(body: dict) -> str:
    """The node a diagnostic Job is pinned to (its required node affinity on metadata.name)."""
    spec = ((body.get("spec") or {}).get("template") or {}).get("spec") or {}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return str(spec.get("nodeName") or "")

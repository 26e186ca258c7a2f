"""Whether a drain's pods fit elsewhere: the GPU units they hold against what is free on the other Ready,
schedulable nodes of their GPU model, in the units the pods ask for (whole GPUs, MIG slices, shared replicas, DRA
devices). Pure. The drain plan (gputui.ops.drain.plan) and the batch's (batch_plan) check with it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_resources import WHOLE_GPU
from gputui.vocabulary.model import Node

if TYPE_CHECKING:  # the plan's pods: plan.py imports this module
    from gputui.ops.drain.plan import PodPlan


def pod_count(n: int) -> str:
    """"1 pod", "3 pods": the count and its noun, as every plan line says it."""
    return f"{n} pod" if n == 1 else f"{n} pods"


@dataclass(frozen=True, slots=True)
class CapacityCheck:
    """One kind of GPU unit (a resource, on one GPU model): the pods' requests of it against what is free."""

    product: str
    needed: tuple[int, ...]  # GPU requests of the pods that must be placed elsewhere
    free_by_node: Mapping[str, int]
    resource: str = WHOLE_GPU  # counted in the units the pods request: MIG slices, shared replicas, DRA devices

    @property
    def fits(self) -> bool:
        """First-fit decreasing, as a scheduler would have to place them: whole pods per node."""
        free = sorted(self.free_by_node.values(), reverse=True)
        for need in sorted(self.needed, reverse=True):
            for i, room in enumerate(free):
                if room >= need:
                    free[i] -= need
                    break
            else:
                return False
        return True

    @property
    def free_total(self) -> int:
        return sum(self.free_by_node.values())

    def describe(self) -> str:
        if not self.needed:
            return "no GPU pods to place elsewhere"
        verdict = "fits" if self.fits else "does NOT fit"
        what = f"{self.product or 'GPUs'} GPUs" if self.resource == WHOLE_GPU else \
            f"{self.resource} on {self.product or 'any model'}"
        return (f"{sum(self.needed)} {what} in {pod_count(len(self.needed))} need a new home; "
                f"{self.free_total} free on other schedulable nodes: {verdict}")


def _offered(node: Node, resource: str) -> int:
    if not node.gpu_resources:  # a node known only by its count (hand-built, older demo data): whole cards
        return node.gpu_allocatable if resource == WHOLE_GPU else 0
    return sum(r.allocatable for r in node.gpu_resources if r.name == resource)


def _free_outside(snapshot: ClusterSnapshot, nodes: Iterable[str], product: str, resource: str) -> dict[str, int]:
    """Free units of one resource on one GPU model, on Ready, schedulable nodes outside the given set."""
    excluded = set(nodes)
    return {
        n.name: max(0, _offered(n, resource) - snapshot.allocated_by_resource(n.name).get(resource, 0))
        for n in snapshot.nodes
        if n.name not in excluded and n.gpu_product == product and n.ready and not n.unschedulable
    }


def capacity_after(snapshot: ClusterSnapshot, nodes: set[str], product: str, needed: list[int],
                   resource: str = WHOLE_GPU) -> CapacityCheck:
    return CapacityCheck(product, tuple(needed), _free_outside(snapshot, nodes, product, resource), resource)


def units_needed(pods: Iterable[PodPlan]) -> dict[str, list[int]]:
    """Resource -> each moving pod's units of it: what must find room elsewhere, in the units asked for."""
    out: dict[str, list[int]] = {}
    for p in pods:
        if p.moves:
            for resource, n in (p.pod.gpu_units or {WHOLE_GPU: p.pod.gpu_request}).items():
                out.setdefault(resource, []).append(n)
    return out

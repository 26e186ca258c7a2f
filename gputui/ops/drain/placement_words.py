"""The placement preview's words: which kinds of node a replacement cannot go to, the first rule that excludes
each kind, and one headline for a pod with nowhere to go ("no node with zone=z1 outside the batch has 2 free
NVIDIA-H100 GPUs", "tolerates only dedicated=llm, held by 3 nodes, all in the batch"). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.ops.drain.placement_rules import (
    AFFINITY,
    ANTI,
    BATCH,
    CORDONED,
    EXISTING_ANTI,
    NOT_READY,
    RESOURCES,
    SELECTOR,
    STATIC,
    TAINT,
    UNREAD,
    Filtered,
    gpu_units,
    node_taints,
)
from gputui.ops.drain.placement_state import Cluster
from gputui.vocabulary.gpu_resources import DRA_PREFIX, WHOLE_GPU
from gputui.vocabulary.model import InferencePod
from gputui.vocabulary.scheduling import (
    CPU,
    NOT_READY_TAINT_KEY,
    PODS,
    UNREACHABLE_TAINT_KEY,
    UNSCHEDULABLE_TAINT_KEY,
    Toleration,
    tolerated,
)

# Tolerations nearly every pod carries (DefaultTolerationSeconds, DaemonSets): no sign of a dedicated pool.
_ROUTINE = (NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY, UNSCHEDULABLE_TAINT_KEY)


@dataclass(frozen=True, slots=True)
class Exclusion:
    """One kind of node a replacement cannot go to: how many, and the first rule that excludes them, in words."""

    rule: str
    nodes: int
    words: str


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def amount(resource: str, units: int, product: str = "") -> str:
    """Free units of a resource in words: `2 free NVIDIA-H100 GPUs`, `8 free CPUs`, `64Gi of free memory`,
    `1 free gpu.nvidia.com device`, `room for 1 more pod`."""
    if resource == WHOLE_GPU:
        return f"{units} free {product + ' ' if product else ''}GPU{'' if units == 1 else 's'}"
    if resource == CPU:
        return f"{units / 1000:g} free CPU{'' if units == 1000 else 's'}"
    if resource == PODS:
        return "room for 1 more pod"
    if resource == "memory" or resource.startswith(("hugepages-", "ephemeral-storage")):
        size = next(((units / 2**e, s) for e, s in ((40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki"))
                     if units >= 2**e), (units, ""))
        return f"{size[0]:.3g}{size[1]} of free {resource}"
    if resource.startswith(DRA_PREFIX):
        return f"{units} free {resource[len(DRA_PREFIX):]} device{'' if units == 1 else 's'}"
    return f"{units} free {resource}"


def _need(pod: InferencePod, resource: str) -> int:
    if resource == PODS:
        return 1
    found = gpu_units(pod).get(resource)
    if found is not None:
        return found
    return pod.scheduling.request(resource) if pod.scheduling is not None else 0


def _term_words(detail: str) -> tuple[str, str]:
    key, _, what = detail.partition("\x00")
    return key, what


def exclusions(pod: InferencePod, filtered: Filtered, product: str) -> tuple[Exclusion, ...]:
    """Each kind of node the pod cannot go to, in the order the rules apply."""
    spec = pod.scheduling
    selection = spec.describe_nodes() if spec is not None else ""
    out: list[Exclusion] = []
    for stage in filtered.stages:
        for detail, names in stage.by_detail.items():
            n = len(names)
            nodes = _plural(n, "node")
            if stage.rule == BATCH:
                words = f"{nodes} in the batch"
            elif stage.rule == CORDONED:
                words = f"{nodes} cordoned"
            elif stage.rule == NOT_READY:
                words = f"{nodes} not ready"
            elif stage.rule == TAINT:
                words = f"{nodes} tainted {detail} (not tolerated)"
            elif stage.rule == SELECTOR:
                words = f"{nodes} without {selection}"
            elif stage.rule == UNREAD:
                words = f"{nodes} whose taints and resources were not read"
            elif stage.rule == RESOURCES:
                if detail == "unread":
                    words = f"{nodes} running pods whose requests were not read"
                else:
                    most = filtered.best.get(detail)
                    words = f"{nodes} without {amount(detail, _need(pod, detail), product)}" + (
                        f" (the most free: {most})" if most is not None and detail != PODS else "")
            elif stage.rule == EXISTING_ANTI:
                words = f"{nodes} where a pod's anti-affinity over {detail} keeps it out"
            elif stage.rule == ANTI:
                key, what = _term_words(detail)
                words = f"{nodes} in a {key} already running {what} (its anti-affinity)"
            elif stage.rule == AFFINITY:
                key, what = _term_words(detail)
                words = f"{nodes} in a {key} without {what} (its affinity)"
            else:  # SPREAD
                key, what = _term_words(detail)
                words = f"{nodes} in a {key} where one more breaks {what}" if not what.startswith("no ") \
                    else f"{nodes} with {what}"
            out.append(Exclusion(stage.rule, n, words))
    return tuple(out)


def _dedicated(cluster: Cluster, pod: InferencePod) -> tuple[list[Toleration], list[str]]:
    """Its tolerations that name a pool's taint (not the routine ones), and the nodes holding such a taint."""
    spec = pod.scheduling
    assert spec is not None
    named = [t for t in spec.tolerations if t.key and t.key not in _ROUTINE]
    if not named:
        return [], []
    holding = [n.name for n in cluster.nodes if any(t.repels and tolerated(tuple(named), t) for t in node_taints(n))]
    return named, holding


def headline(cluster: Cluster, pod: InferencePod, filtered: Filtered, product: str) -> str:
    """Why there is nowhere to go, in one line: the kind of node it needs and what stops each."""
    spec = pod.scheduling
    assert spec is not None
    selection = spec.describe_nodes()
    with_selection = f" with {selection}" if selection else ""
    outside = sum(s.count for s in filtered.stages if s.rule not in STATIC)  # past the static rules
    if not outside:
        named, holding = _dedicated(cluster, pod)
        if filtered.static and named and holding and all(n in cluster.batch for n in holding):
            return (f"tolerates only {', '.join(map(str, named))}, held by {_plural(len(holding), 'node')}, "
                    f"{'all' if len(holding) > 1 else 'it is'} in the batch")
        if filtered.static:
            what = f"{_plural(filtered.static, 'node')}{with_selection or ' that would take it'}"
            blocked = [s for s in filtered.stages if s.rule in (CORDONED, NOT_READY)]
            rest = f" or {' or '.join(s.rule for s in blocked)}" if blocked else ""
            return f"the {what} {'are' if filtered.static > 1 else 'is'} in the batch{rest}"
        if selection:
            return f"no node{with_selection} that it tolerates"
        return "no node it tolerates"
    dynamic = [s for s in filtered.stages if s.rule not in STATIC]
    if len(dynamic) == 1 and dynamic[0].rule == RESOURCES and len(dynamic[0].by_detail) == 1:
        (resource,) = dynamic[0].by_detail
        if resource != "unread":
            return f"no node{with_selection} outside the batch has {amount(resource, _need(pod, resource), product)}"
    parts = [e.words for e in exclusions(pod, Filtered([], dynamic, filtered.best), product)]
    return f"no node{with_selection} outside the batch takes it: " + "; ".join(parts)

"""The checks on taking pods out of rotation: whether each inference workload's pods can leave their
Services' and pools' endpoints before a drain waits on them, and pods left out with no drain that owns
them (seed 000 §4.2 and §7: drains that work with readiness and graceful termination)."""

from __future__ import annotations

from collections import defaultdict

from gputui.checks.context import CheckContext, unknown, verdict
from gputui.checks.result import CheckResult, Status
from gputui.ops.drain.lease import LEASE_S, holder_of
from gputui.ops.drain.out_of_rotation import recorded
from gputui.policy.rotation import RotationState, remedy, rotation_of
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod

SEED = "000 §4.2, §7"


def _inference_pods(snap: ClusterSnapshot) -> dict[str, list[InferencePod]]:
    by_service: dict[str, list[InferencePod]] = defaultdict(list)
    for p in snap.pods:
        if p.service and not p.terminated and not p.deleting:
            by_service[f"{p.namespace}/{p.service}"].append(p)
    return by_service


def can_leave(ctx: CheckContext) -> CheckResult:
    """Each inference workload's pods can leave their Services' and pools' endpoints before a drain waits on
    their sessions; where none can, new sessions keep arriving and the wait runs to its deadline."""
    id, title = "services.rotation", "inference pods can be taken out of rotation"
    snap = ctx.snapshot
    if snap.selectors is None:
        return unknown(id, SEED, title, "Services and InferencePools were not read",
                       "run it against the cluster (the live backend reads them)")
    bad: list[str] = []
    unread: list[str] = []
    fixes: list[str] = []  # the first workload's commands: the others' follow the same pattern
    for service, pods in sorted(_inference_pods(snap).items()):
        seen: set[tuple] = set()  # a workload's pods share their labels: judge one pod per label set
        for p in pods:
            labels = tuple(sorted(p.labels.items()))
            if labels in seen:
                continue
            seen.add(labels)
            r = rotation_of(p, snap)
            if r.state is RotationState.NO_SWITCH:
                bad.append(f"{service} version {p.version or '?'} ({r.why})")
                fixes = fixes or remedy(r, p, _workload_of(snap, p))
            elif r.state is RotationState.UNKNOWN:
                unread.append(f"{service} ({r.why})")
    if not bad and unread:
        return unknown(id, SEED, title, "; ".join(unread), "see why for each", tuple(unread))
    fix = "add a serving label to the pod template, then to the Service's (or InferencePool's) selector" + \
        (": " + " && ".join(fixes) if fixes else "")
    # Counted per workload version (its pods share their labels), not per pod: one fix serves them all.
    return verdict(id, SEED, title, bad, Status.WARN, "inference workloads whose pods no label can take out of "
                   "rotation: new sessions reach them until they are evicted", fix,
                   "every inference pod has a label its Services select on and its owner does not")


def left_out(ctx: CheckContext) -> CheckResult:
    """Pods out of rotation that no running drain owns (killed, its lease expired; or a label removed by hand):
    running, owned, serving nobody. Found two ways: a node's drain record names them (with the labels taken),
    and their labels say so: selected by their workload but by no Service or pool that selects its other pods."""
    id, title = "pods.out_of_rotation", "no pod left out of rotation without a drain that owns it"
    snap, bad, nodes = ctx.snapshot, [], []
    live = {(p.namespace, p.name): p for p in snap.pods}
    owned: set[str] = set()  # pods a running drain's record names
    for node in snap.nodes:
        held = recorded(node)
        if not held:
            continue
        holder = holder_of(dict(node.annotations))
        if holder is not None and snap.taken_at - holder.renewed < LEASE_S:
            owned |= set(held)
            continue  # a running drain owns them
        for key, entry in sorted(held.items()):
            namespace, name = key.split("/", 1)
            pod = live.get((namespace, name))
            if pod is None or pod.uid != entry.uid or pod.deleting:
                continue
            if all(pod.labels.get(k) == v for k, v in entry.labels.items()):
                continue  # put back since (by hand): in rotation again, whatever the record says
            bad.append(f"{key} on {node.name} (label {', '.join(entry.labels)} removed by a drain that stopped)")
            nodes.append(node.name)
    said = {b.split(" ", 1)[0] for b in bad}
    for pod in _unrouted_siblings(snap):
        if pod.key not in owned and pod.key not in said:
            bad.append(f"{pod.key} on {pod.node or '?'} (no Service or pool selects it, as they do its workload's "
                       f"other pods: a label is missing; no drain record names it)")
    return verdict(id, SEED, title, bad, Status.FAIL, "pods out of rotation that no drain owns",
                   "resume the drain (R, or gputui drain --resume), or uncordon the node in gputui (u: it puts the "
                   "labels back; kubectl uncordon does not)"
                   + (f": {', '.join(dict.fromkeys(nodes))}" if nodes else "")
                   + "; a pod no record names: put back the label its workload's other pods carry",
                   "every pod out of rotation belongs to a running drain")


def _unrouted_siblings(snap: ClusterSnapshot) -> list[InferencePod]:
    """Running pods their workload selects, that no path selects, while a path selects another of its pods."""
    if snap.selectors is None:
        return []
    paths = [s for s in snap.selectors if s.kind in ("Service", "InferencePool")]
    workloads = [s for s in snap.selectors if s.kind in ("Deployment", "Rollout")]
    alive = [p for p in snap.pods if p.service and not p.deleting and not p.terminated]
    out = []
    for w in workloads:
        mine = [p for p in alive if p.namespace == w.namespace and w.selects(p.labels)]
        routes = [r for r in paths if r.namespace == w.namespace and any(r.selects(p.labels) for p in mine)]
        if not routes:
            continue
        out += [p for p in mine if not any(r.selects(p.labels) for r in routes)]
    return sorted(out, key=lambda p: p.key)


def _workload_of(snap: ClusterSnapshot, pod: InferencePod) -> str:
    """`deployment/NAME` (or `rollout/NAME`) of the workload that owns the pod, "" when none read does."""
    for s in snap.selectors or ():
        if s.kind in ("Deployment", "Rollout") and s.namespace == pod.namespace and s.selects(pod.labels):
            return f"{s.kind.lower()}/{s.name}"
    return ""

"""Out of rotation without a controller: which label, removed from one pod, takes it out of every Service
and InferencePool that sends it traffic while its owner keeps it running. Pure, over one snapshot.

A Service's EndpointSlices (and an InferencePool's endpoint picker) follow the pods their selector matches;
a ReplicaSet or StatefulSet keeps the pods its own selector matches. A key the first selects on and the
second does not is a per-pod switch: removed, the pod leaves every path's endpoints, keeps running and
finishes what it holds; its replacement gets the template's labels back. Readiness gates are no such
switch for a terminal tool: some controller must set their condition True for every new pod.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, PodSelector

PATH_KINDS = ("Service", "InferencePool")  # what sends a pod traffic; everything else in selectors owns pods
# The label the remedy proposes: in the template and in the path's selector, and in no owner's selector.
SERVING_LABEL = "serving"
# Keys an owner adds to its own selector behind the workload's back: removing one orphans the pod.
OWNER_HASH_KEYS = {"ReplicaSet": "pod-template-hash", "StatefulSet": "controller-revision-hash"}
# The workloads gputui reads whose selector a pod's owner carries (a ReplicaSet's is its Deployment's or
# Rollout's, plus its template hash). Other owners' selectors are not read.
OWNER_WORKLOADS = {"ReplicaSet": ("Deployment", "Rollout")}


class RotationState(str, Enum):
    NOT_ROUTED = "not routed"  # no Service or pool selects it: nothing in the cluster sends it new sessions
    SWITCH = "switch"  # removing `labels` takes it out of every path
    NO_SWITCH = "no switch"  # some path selects it only on keys its owner selects on too
    UNKNOWN = "unknown"  # the selectors, or its owner, were not read


@dataclass(frozen=True, slots=True)
class Rotation:
    state: RotationState
    paths: tuple[PodSelector, ...] = ()
    labels: tuple[str, ...] = ()  # SWITCH: the keys to remove (one serves every path where it can)
    why: str = ""  # NO_SWITCH / UNKNOWN: in words
    # Every path of the pod's namespace: a pod any of them selects is in rotation (a PDB's count spans versions
    # that different Services serve). Kept here so a running drain can count without re-reading them.
    neighbours: tuple[PodSelector, ...] = ()

    @property
    def path_names(self) -> str:
        return ", ".join(p.key for p in self.paths)

    def describe(self) -> str:
        if self.state is RotationState.SWITCH:
            return f"in rotation through {self.path_names}; removing label {', '.join(self.labels)} takes it out"
        if self.state is RotationState.NOT_ROUTED:
            return "no Service or InferencePool selects it"
        return f"{'cannot say whether it can leave rotation' if self.state is RotationState.UNKNOWN else 'no label can take it out of rotation'}: {self.why}"


def _by_namespace(snapshot: ClusterSnapshot) -> Mapping[str, tuple[list[PodSelector], list[PodSelector]]]:
    """Paths and owners per namespace, built once per snapshot."""
    def build() -> dict[str, tuple[list[PodSelector], list[PodSelector]]]:
        out: dict[str, tuple[list[PodSelector], list[PodSelector]]] = {}
        for s in snapshot.selectors or ():
            paths, owners = out.setdefault(s.namespace, ([], []))
            (paths if s.kind in PATH_KINDS else owners).append(s)
        return out

    return snapshot.derived("rotation.by_namespace", build)


def rotation_of(pod: InferencePod, snapshot: ClusterSnapshot) -> Rotation:
    """How traffic reaches `pod`, and the label that takes it out of rotation, if one can."""
    if snapshot.selectors is None:
        return Rotation(RotationState.UNKNOWN, why="Services and InferencePools were not read")
    paths_here, owners_here = _by_namespace(snapshot).get(pod.namespace, ([], []))
    paths = tuple(p for p in paths_here if p.selects(pod.labels))
    if not paths:
        return Rotation(RotationState.NOT_ROUTED)
    kinds = OWNER_WORKLOADS.get(pod.owner_kind, ())
    owners = [o for o in owners_here if o.kind in kinds and o.selects(pod.labels)]
    if pod.owner_kind and not owners:
        # A StatefulSet, a bare ReplicaSet, a Job: its selector is not read, so any label might be its.
        return Rotation(RotationState.UNKNOWN, paths,
                        why=f"its owner ({pod.owner_kind}) is not a workload gputui reads: a label might orphan it")
    owned = set().union(*(o.keys or o.match.keys() for o in owners)) if owners else set()
    if pod.owner_kind in OWNER_HASH_KEYS:
        owned.add(OWNER_HASH_KEYS[pod.owner_kind])
    free = [sorted(k for k in p.match if k not in owned) for p in paths]  # per path, its switches
    for p, keys in zip(paths, free, strict=True):
        if not keys:
            owner = owners[0].key if owners else pod.owner_kind
            return Rotation(RotationState.NO_SWITCH, paths,
                            why=f"{p.key} selects it only on {', '.join(sorted(p.match))}, which {owner} selects on too")
    common = set.intersection(*(set(keys) for keys in free))
    labels = (min(common),) if common else tuple(sorted({keys[0] for keys in free}))
    return Rotation(RotationState.SWITCH, paths, labels, neighbours=tuple(paths_here))


def remedy(rotation: Rotation, pod: InferencePod, workload: str) -> list[str]:
    """The commands that give a workload a serving label: the template first (its rollout gives every pod
    the label), then each path's selector. The other way round, the selector matches no pod in between."""
    if rotation.state is not RotationState.NO_SWITCH or not workload:
        return []
    ns = shlex.quote(pod.namespace)
    label = {SERVING_LABEL: "true"}
    template = json.dumps({"spec": {"template": {"metadata": {"labels": label}}}})
    out = [f"kubectl -n {ns} patch {shlex.quote(workload)} --type merge -p {shlex.quote(template)}",
           f"kubectl -n {ns} rollout status {shlex.quote(workload)}"]
    for p in rotation.paths:
        body = {"spec": {"selector": label}} if p.kind == "Service" else {"spec": {"selector": {"matchLabels": label}}}
        out.append(f"kubectl -n {ns} patch {p.kind.lower()} {shlex.quote(p.name)} --type merge "
                   f"-p {shlex.quote(json.dumps(body))}")
    return out

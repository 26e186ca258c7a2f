"""Taking a drained node's inference pods out of rotation, and putting them back: the writes and their record.

Before a drain waits on a pod's sessions it removes the label that takes the pod out of every Service and
InferencePool sending it traffic (gputui.policy.rotation), so new sessions go elsewhere and the ones it holds
finish. The pod stays Ready and owned; its replacement gets the template's labels back.

A pod is never left out of rotation without a drain that owns it: before a label is removed, the node's
drain record (`gputui.io/drain-rotation`, JSON: pod -> uid, the labels removed with their values, since
when) names it, so an abort, an uncordon, `R`/`--resume` or `gputui check` can put it back. Each write
is a JSON patch whose `test` operations make the apiserver apply it only to the very pod read (its UID)
with the very labels read: a pod replaced or relabelled meanwhile is left alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from gputui.backends.base import ConflictError, Writer
from gputui.policy.rotation import Rotation, RotationState
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import DRAIN_ANNOTATION_PREFIX, InferencePod, Node

RECORD = DRAIN_ANNOTATION_PREFIX + "rotation"
# How a pod kept in rotation for capacity is described: the plan, the run and the board say the same.
KEPT_IN = "new sessions keep arriving: kept in rotation for capacity"
KEPT_RUNNING = "kept in rotation until another pod serves"  # the run's shorter word for it, on the board's log


@dataclass(frozen=True, slots=True)
class OutOfRotation:
    """One pod a drain took out of rotation: what to put back."""

    key: str  # namespace/name
    uid: str
    labels: Mapping[str, str]  # removed, with the values they had
    since: float


def _pointer(key: str) -> str:
    """A label key as a JSON pointer segment (RFC 6901): `app.kubernetes.io/name` has a slash."""
    return "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1")


def recorded(node: Node) -> dict[str, OutOfRotation]:
    """The pods this node's drain record says are out of rotation."""
    return parse_record(node.annotations.get(RECORD, ""))


def parse_record(raw: str) -> dict[str, OutOfRotation]:
    """The record's entries ({} when none, or unreadable: a record that does not parse names nothing, and
    `gputui check` still finds such pods by their labels)."""
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    out: dict[str, OutOfRotation] = {}
    for key, entry in data.items() if isinstance(data, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("labels"), dict) and "/" in str(key):
            since = entry.get("since")
            out[str(key)] = OutOfRotation(str(key), str(entry.get("uid", "")),
                                          {str(k): str(v) for k, v in entry["labels"].items()},
                                          float(since) if isinstance(since, (int, float)) else 0.0)
    return out


def record_text(entries: Mapping[str, OutOfRotation]) -> str | None:
    """The annotation's value for these entries (None removes it)."""
    if not entries:
        return None
    return json.dumps({e.key: {"uid": e.uid, "labels": dict(e.labels), "since": e.since}
                       for e in entries.values()}, sort_keys=True)


def take_out(writer: Writer, entry: OutOfRotation) -> None:
    """Remove the labels from the pod, only if it is still that pod with those values (ConflictError else)."""
    namespace, name = entry.key.split("/", 1)
    ops: list[dict] = [{"op": "test", "path": "/metadata/uid", "value": entry.uid}]
    for key, value in sorted(entry.labels.items()):
        ops += [{"op": "test", "path": _pointer(key), "value": value}, {"op": "remove", "path": _pointer(key)}]
    writer.patch_object("", "v1", "pods", namespace, name, ops, "json")


def put_back(writer: Writer, entry: OutOfRotation) -> bool:
    """The labels back on the pod, if it is still there under its UID. False when it is gone or replaced:
    nothing to put back (its replacement has the template's labels)."""
    namespace, name = entry.key.split("/", 1)
    if writer.pod_uid(namespace, name) != entry.uid:
        return False
    ops: list[dict] = [{"op": "test", "path": "/metadata/uid", "value": entry.uid}]
    ops += [{"op": "add", "path": _pointer(k), "value": v} for k, v in sorted(entry.labels.items())]
    try:
        writer.patch_object("", "v1", "pods", namespace, name, ops, "json")
    except ConflictError:  # replaced between the read and the patch
        return False
    return True


def choose(snapshot: ClusterSnapshot, pods: list[tuple[InferencePod, Rotation]], now: float,
           already_out: Collection[str] = ()) -> dict[str, tuple[OutOfRotation | None, str]]:
    """For each pod waited on: what to take out of rotation (None: it stays in), and why in words.

    Capacity stays in rotation: taking a pod out counts against no PDB (it stays Ready), so nobody but
    gputui counts the serving capacity it removes. A pod goes out only while every Service and pool that
    sends it traffic keeps a pod serving, and every PDB over it keeps its desired healthy pods in rotation
    (Ready, not deleting, selected by one of the paths). `already_out`: pods known to be out whatever the
    snapshot's labels say (this process's own writes, which a watch cache may not show yet)."""
    serving = [p for p in snapshot.pods if p.ready and not p.deleting and not p.terminated
               and p.key not in already_out]
    out: dict[str, tuple[OutOfRotation | None, str]] = {}

    def in_rotation(match: Callable[[InferencePod], bool]) -> int:  # serving, after the choices made so far
        return sum(1 for p in serving if match(p) and out.get(p.key, (None, ""))[0] is None)

    for pod, rotation in pods:
        if rotation.state is not RotationState.SWITCH:
            out[pod.key] = (None, rotation.describe())
            continue

        others = rotation.neighbours or rotation.paths
        # Every path that sends it traffic keeps a pod to send it to (a Service with no ready endpoint, or a
        # weighted backend with none, answers its share of requests with errors).
        short = ""
        for path in rotation.paths:
            if not in_rotation(lambda p: p.key != pod.key and path.selects(p.labels)):  # noqa: B023 - called at once, in this iteration
                short = f"{path.key} would have no pod serving"
                break
        for b in snapshot.budget_for(pod):
            kept = in_rotation(lambda p: p.key != pod.key and b.matches(p)  # noqa: B023 - called at once, in this iteration
                               and any(path.selects(p.labels) for path in others))  # noqa: B023 - called at once, in this iteration
            if not short and kept < b.desired_healthy:
                short = f"PodDisruptionBudget {b.name} needs {b.desired_healthy} pods serving, {kept} would be"
        if short:
            out[pod.key] = (None, f"{KEPT_IN}, as {short}; it goes out when another pod serves in its place")
            continue
        labels = {k: pod.labels[k] for k in rotation.labels}
        out[pod.key] = (OutOfRotation(pod.key, pod.uid, labels, now),
                        f"out of rotation (label {', '.join(labels)} removed from {rotation.path_names}'s selection)")
    return out

"""What of a Node or a Pod an evidence bundle may carry: pure functions from the API's objects (or gputui's model
of them, on the simulated cluster) to JSON with no secret in it.

A bundle leaves the cluster (attached to an RMA or an incident ticket), so it keeps what explains the node and
drops whatever may hold a credential: environment values (names only), command and args (a key is often passed
on the command line), probes (an httpGet probe's headers may carry a token), a container's termination message,
the values of annotations gputui does not read (a `last-applied-configuration` holds a whole object), and
managedFields (bookkeeping). What is dropped is said in LEFT_OUT, which the bundle's MANIFEST repeats."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputui.vocabulary.disruptions import ACTOR_ANNOTATIONS
from gputui.vocabulary.model import InferencePod, Node

DROPPED = "<value left out: an annotation gputui does not read>"
LEFT_OUT: tuple[tuple[str, str], ...] = (
    ("Secret objects", "never read: a bundle leaves the cluster"),
    ("pod environment values", "only each variable's name is kept (env), and envFrom's kind: values may be keys"),
    ("pod command and args", "left out whole: a key or token is often passed on the command line"),
    ("pod probes and lifecycle hooks", "only whether each is set: an httpGet probe's headers may carry a token"),
    ("container termination messages", "only the reason: the message is whatever the program wrote last"),
    ("annotation values", "kept only for gputui's own and the disruption actors' annotations (as gputui's node "
                          "reader keeps them); every other annotation is listed by key, its value left out"),
    ("managedFields", "the apiserver's bookkeeping of who set which field: nothing about the node's health"),
    ("volumes", "kept by name and kind only (a secret or configMap volume's source name is left out)"),
)


def kept_annotations(raw: Mapping[str, Any] | None) -> dict[str, str]:
    """Every key; the value only where gputui reads it (gputui.io/*, the actors'), as the node reader filters."""
    return {str(k): (str(v) if str(k).startswith("gputui.io/") or k in ACTOR_ANNOTATIONS else DROPPED)
            for k, v in (raw or {}).items()}


def _meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "labels")
    out = {k: meta[k] for k in keep if k in meta}
    out["annotations"] = kept_annotations(meta.get("annotations"))
    if meta.get("ownerReferences"):
        out["ownerReferences"] = [{"kind": o.get("kind"), "name": o.get("name")} for o in meta["ownerReferences"]
                                  if isinstance(o, dict)]
    return out


def node_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The Node as the API answered, managedFields dropped and annotations filtered."""
    return {**{k: v for k, v in obj.items() if k != "metadata"}, "metadata": {
        **{k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("managedFields", "annotations")},
        "annotations": kept_annotations((obj.get("metadata") or {}).get("annotations"))}}


def _container(c: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": c.get("name"), "image": c.get("image"), "resources": c.get("resources") or {},
        "ports": c.get("ports") or [],
        "env": [e.get("name") for e in c.get("env") or [] if isinstance(e, dict)],  # names only, never a value
        "envFrom": [next((k for k in e if k != "prefix"), "") for e in c.get("envFrom") or [] if isinstance(e, dict)],
        "volumeMounts": [{"name": m.get("name"), "mountPath": m.get("mountPath")}
                         for m in c.get("volumeMounts") or [] if isinstance(m, dict)],
        "probes": {p: p in c for p in ("startupProbe", "readinessProbe", "livenessProbe")},
        "lifecycle": sorted((c.get("lifecycle") or {}).keys()),
    }


def _status(status: Mapping[str, Any]) -> dict[str, Any]:
    def state(s: Mapping[str, Any] | None) -> dict[str, Any]:
        return {k: {"reason": (v or {}).get("reason"), "exitCode": (v or {}).get("exitCode")}
                for k, v in (s or {}).items()}

    return {
        "phase": status.get("phase"), "reason": status.get("reason"), "qosClass": status.get("qosClass"),
        "hostIP": status.get("hostIP"), "podIP": status.get("podIP"), "startTime": status.get("startTime"),
        "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "lastTransitionTime")}
                       for c in status.get("conditions") or [] if isinstance(c, dict)],
        "containerStatuses": [{"name": c.get("name"), "ready": c.get("ready"), "restartCount": c.get("restartCount"),
                               "image": c.get("image"), "state": state(c.get("state")),
                               "lastState": state(c.get("lastState"))}
                              for c in status.get("containerStatuses") or [] if isinstance(c, dict)],
    }


def pod_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Pod reduced to what explains it on this node: who owns it, what it asked for, where it may run."""
    spec = obj.get("spec") or {}
    keep = ("nodeName", "schedulerName", "priorityClassName", "priority", "terminationGracePeriodSeconds",
            "tolerations", "nodeSelector", "resourceClaims", "runtimeClassName", "serviceAccountName")
    return {
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {**{k: spec[k] for k in keep if k in spec},
                 "containers": [_container(c) for c in spec.get("containers") or [] if isinstance(c, dict)],
                 "initContainers": [_container(c) for c in spec.get("initContainers") or [] if isinstance(c, dict)],
                 "volumes": [{"name": v.get("name"), "kind": next((k for k in v if k != "name"), "")}
                             for v in spec.get("volumes") or [] if isinstance(v, dict)]},
        "status": _status(obj.get("status") or {}),
    }


def node_from_model(node: Node) -> dict[str, Any]:
    """The simulated cluster has no API: the Node as gputui's model holds it, in the API's shape where it can."""
    taints = node.scheduling.taints if node.scheduling is not None else ()
    return {
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": node.name, "labels": dict(node.labels), "annotations": kept_annotations(node.annotations)},
        "spec": {"unschedulable": node.unschedulable,
                 "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints]},
        "status": {"conditions": [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                                  for c in node.conditions],
                   "capacity": {r.name: r.capacity for r in node.gpu_resources},
                   "allocatable": {r.name: r.allocatable for r in node.gpu_resources},
                   "nodeInfo": dict(node.node_info)},
    }


def pod_from_model(pod: InferencePod) -> dict[str, Any]:
    """A pod of the simulated cluster as gputui's model holds it."""
    return {"metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid, "labels": dict(pod.labels),
                         "ownerReferences": [{"kind": pod.owner_kind}]},
            "spec": {"nodeName": pod.node, "containers": [{"image": i} for i in pod.images]},
            "status": {"phase": pod.phase, "ready": pod.ready, "restarts": pod.restarts}}

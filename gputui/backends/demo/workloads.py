"""The demo's answer to writes on pods and Deployments: a pod's annotations (the pod-deletion-cost a
scale-down sets) and a Deployment's scale subresource, with the ReplicaSet controller's order of removal:
unready pods first, then the lowest pod-deletion-cost, then the name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gputui.backends.demo.errors import DemoApiError
from gputui.backends.demo.patches import json_patch
from gputui.backends.demo.scenario import POD_START_S

if TYPE_CHECKING:
    from gputui.backends.demo.api import DemoCluster

COST = "controller.kubernetes.io/pod-deletion-cost"


def annotate_pod(sim: DemoCluster, namespace: str, name: str, patch: Any) -> dict[str, Any]:
    pod = sim._pods.get(f"{namespace}/{name}")
    if pod is None:
        raise DemoApiError(404, f'pods "{name}" not found')
    notes = ((patch or {}).get("metadata") or {}).get("annotations") if isinstance(patch, Mapping) else None
    if not isinstance(notes, Mapping) or set(patch) - {"metadata"}:
        raise DemoApiError(422, "the demo cluster patches only a pod's annotations")
    for key, value in notes.items():
        if value is None:
            pod.annotations.pop(key, None)
        else:
            pod.annotations[key] = str(value)
    return {"metadata": {"name": name, "namespace": namespace, "annotations": dict(pod.annotations)}}


def label_pod(sim: DemoCluster, namespace: str, name: str, patch: Any) -> dict[str, Any]:
    """A JSON patch of a pod's labels (a drain taking it out of rotation, or putting it back), its `test`
    operations checked as the apiserver checks them: the whole patch or nothing."""
    pod = sim._pods.get(f"{namespace}/{name}")
    if pod is None:
        raise DemoApiError(404, f'pods "{name}" not found')
    if not isinstance(patch, list):
        raise DemoApiError(400, "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = {"metadata": {"name": name, "namespace": namespace, "uid": pod.uid, "labels": dict(pod.labels)}}
    updated = json_patch(doc, patch)
    if set(updated["metadata"]) != set(doc["metadata"]) or updated["metadata"]["uid"] != pod.uid:
        raise DemoApiError(422, "the demo cluster patches only a pod's labels")
    pod.labels = {str(k): str(v) for k, v in updated["metadata"]["labels"].items()}
    return updated


def scale(sim: DemoCluster, namespace: str, workload: str, patch: Any) -> dict[str, Any]:
    for svc in sim._services.values():
        for version in svc.versions:
            if svc.namespace == namespace and f"{svc.name}-{version.name}" == workload:
                replicas = ((patch or {}).get("spec") or {}).get("replicas") if isinstance(patch, Mapping) else None
                if not isinstance(replicas, int) or replicas < 0:
                    raise DemoApiError(422, f'Scale.autoscaling "{workload}" is invalid: spec.replicas: Invalid value')
                live = [p for p in sim._version_pods(svc, version.name) if p.deleting_at is None]

                def rank(p: Any) -> tuple[bool, int, str]:
                    try:
                        cost = int(p.annotations.get(COST, "0"))
                    except ValueError:
                        cost = 0
                    return (p.ready(sim._t), cost, p.name)

                version.replicas = replicas
                for pod in sorted(live, key=rank)[: max(0, len(live) - replicas)]:
                    sim._terminate(pod, None, replace=False)
                # Scaled up: its ReplicaSet makes the pods; they wait for free GPUs (Pending) like any other.
                rs_hash = live[0].labels["pod-template-hash"] if live else sim._suffix(9)
                for _ in range(replicas - len(live)):
                    pod = sim._create_pod(svc, version.name, rs_hash, 0)
                    pod.ready_at = sim._t + POD_START_S
                return {"spec": {"replicas": replicas}, "status": {"replicas": len(live)}}
    raise DemoApiError(404, f'deployments.apps "{workload}" not found')

"""A recording API with NVIDIA maintenance-operator's NodeMaintenances, the operator stepping gputui's request as
v0.3.0's controller steps it (phase = Ready's reason: Pending → Scheduled → Cordon → WaitForPodCompletion →
Draining → Ready; it cordons at Cordon and moves on from WaitForPodCompletion when no pod its selector picks is left
on the node). Shared by the fast tests of a requestor drain (tests.support.drain_api's Api underneath)."""

from __future__ import annotations

from dataclasses import replace

from gputui.backends.base import BackendError
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import ActorObjects
from tests.support.drain_api import Api

GVR = ("maintenance.nvidia.com", "v1alpha1", "nodemaintenances")
ORDER = ("Pending", "Scheduled", "Cordon", "WaitForPodCompletion", "Draining", "Ready")


class OperatorApi(Api):
    """Api (tests.support.drain_api) with NodeMaintenances, and the operator taking gputui's through its phases: one
    step per read of the object, cordoning at Cordon, held in WaitForPodCompletion while a pod its selector picks
    stands on the node. `stop_at`: the phase it stays in (its scheduler giving no slot, or a controller gone)."""

    def __init__(self, *args, installed: bool = True, stop_at: str = "", lag: int = 0, **kw) -> None:
        super().__init__(*args, **kw)
        self.installed, self.stop_at, self.lag = installed, stop_at, lag  # lag: reads before it sees the pods gone
        self.objects: dict[tuple[str, str], dict] = {}
        self.phases: list[str] = []  # the phase each read of gputui's object saw
        self.deleted: list[str] = []
        self.created: list[tuple[str, dict]] = []  # (namespace, body) of each create, as gputui sent it

    def snapshot(self) -> ClusterSnapshot:
        snap = super().snapshot()
        reads = {"NodeMaintenance": d.READ if self.installed else d.NOT_INSTALLED}
        return replace(snap, actors=ActorObjects(reads=reads))

    def create_object(self, group, version, plural, namespace, body):
        assert (group, version, plural) == GVR
        self.created.append((namespace, body))
        obj = {**body, "metadata": {**body["metadata"], "creationTimestamp": "2026-12-04T10:00:00Z"}, "status": {}}
        self.objects[(namespace, body["metadata"]["name"])] = obj
        self.writes.append(("create", body["metadata"]["name"]))
        return obj

    def get_object(self, group, version, plural, namespace, name):
        assert (group, version, plural) == GVR, (group, version, plural)
        obj = self.objects.get((namespace, name))
        if obj is None:
            raise Missing()
        self._step(obj)
        self.phases.append(_phase(obj))
        return obj

    def delete_object(self, group, version, plural, namespace, name, propagation="Foreground"):
        assert (group, version, plural, propagation) == (*GVR, "Background"), (group, version, plural, propagation)
        self.writes.append(("delete", name))
        self.deleted.append(f"{namespace}/{name}")
        self.objects.pop((namespace, name), None)

    def list_objects(self, *args, **kw):
        return []

    def pod_log(self, *args, **kw):
        return ""

    def _step(self, obj: dict) -> None:
        phase = _phase(obj)
        if phase and (phase == self.stop_at or phase not in ORDER):  # held there, or failed (the requestor's word)
            return
        if phase == "WaitForPodCompletion":
            wait = obj["spec"].get("waitForPodCompletion")  # none: it moves on at once
            if wait and any(_picks(wait["podSelector"], p.labels) for p in self.pods.values()):
                return
            if self.lag > 0:  # its next reconcile (a requeue) sees them gone
                self.lag -= 1
                return
        if phase == "Ready":
            return
        nxt = ORDER[ORDER.index(phase) + 1] if phase else "Pending"
        if nxt == "Cordon":
            self.cordoned = True  # internal/cordon: spec.unschedulable
        obj["status"] = {"conditions": [{"type": "Ready", "status": "True" if nxt == "Ready" else "False",
                                         "reason": nxt, "message": "", "lastTransitionTime": "2026-12-04T10:00:00Z"}]}


def _picks(selector: str, labels: dict) -> bool:
    """labels.Parse's set-based form as gputui writes it: `key in (v1,v2)`."""
    key, _, values = selector.partition(" in (")
    return labels.get(key) in values.rstrip(")").split(",")


class Missing(BackendError):
    status = 404  # the apiserver's answer for an object that is not there (kube_errors.ApiError's status)


def _phase(obj: dict) -> str:
    return next((c["reason"] for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == "Ready"), "")

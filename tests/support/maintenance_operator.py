"""NVIDIA's maintenance-operator, reconciling NodeMaintenances on the real apiserver as its controller does, for the
tests of gputui's requestor path (issue 40 item 4). Its main module is refused by the Go module proxy, so the
controller cannot be built here (docs/disruption-actors.md §2); this plays its reconcile step for step, written from
tag v0.3.0's sources (github.com/Mellanox/maintenance-operator, read through the library's mirror):

- internal/controller/nodemaintenancescheduler_controller.go: a Pending request is Scheduled when a slot is free:
  maxParallelOperations minus the nodes under maintenance (Ready's reason not "" nor Pending), one request per node;
- nodemaintenance_controller.go: "" → Pending (handleUninitiaizedState); Scheduled → adds its finalizer, then Cordon
  (handleScheduledState); Cordon → cordons when spec.cordon, then WaitForPodCompletion (handleCordonState);
  WaitForPodCompletion → stays while its selector picks a pod on the node, else Draining; Draining → with no
  drainSpec, Ready at once (handleDrainState); a deleted object: uncordon (when it cordoned and the node was
  schedulable before), then the finalizer removed;
- the Ready condition is set with meta.SetStatusCondition (k8sutils.SetReadyConditionReason): lastTransitionTime
  moves only when the status does; status True only in Ready;
- internal/cordon: the node's initial state kept in the annotation maintenance.nvidia.com/node-initial-state.
  unschedulable ("true"/"false") before cordoning; uncordon only when it was "false";
- internal/podcompletion: the wait's start in maintenance.nvidia.com/wait-pod-completion-start-time (RFC3339), the
  pods waited on in status.waitForCompletion ("ns/name"), listed with the selector and spec.nodeName (a terminating
  pod is still listed: the wait ends when the pod is gone).

Everything it does is through the apiserver (status through the status subresource), so gputui sees only objects as
the controller leaves them. `history` records each phase each object reached, in order."""

from __future__ import annotations

import threading
import time
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "maintenance.nvidia.com", "v1alpha1", "nodemaintenances"
FINALIZER = "maintenance.nvidia.com/finalizer"
INITIAL_STATE = "maintenance.nvidia.com/node-initial-state.unschedulable"
WAIT_START = "maintenance.nvidia.com/wait-pod-completion-start-time"
IDLE = ("", "Pending")  # not under maintenance, for the scheduler


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def phase_of(obj: dict) -> str:
    return next((c.get("reason", "") for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), "")


class MaintenanceOperator:
    def __init__(self, api: client.ApiClient, namespace: str, max_parallel: int = 1, period_s: float = 0.5) -> None:
        self.custom, self.core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        self.namespace, self.max_parallel, self.period_s = namespace, max_parallel, period_s
        self.history: dict[str, list[str]] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="maintenance-operator", daemon=True)

    def __enter__(self) -> MaintenanceOperator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        assert not self.errors, self.errors

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.reconcile()
            except ApiException as exc:  # a conflict or a race with a deletion: the next pass tries again
                if exc.status not in (404, 409):
                    self.errors.append(f"{exc.status}: {exc.reason}")
            except Exception as exc:  # noqa: BLE001 - said when the test ends
                self.errors.append(repr(exc))

    def reconcile(self) -> None:
        items = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)["items"]
        busy = {o["spec"]["nodeName"] for o in items if phase_of(o) not in IDLE}
        for obj in sorted(items, key=lambda o: o["metadata"]["creationTimestamp"]):
            if obj["metadata"].get("deletionTimestamp"):
                self._delete(obj)
                continue
            phase = phase_of(obj)
            if phase == "":
                self._set(obj, "Pending")
            elif phase == "Pending":  # the scheduler
                if len(busy) < self.max_parallel and obj["spec"]["nodeName"] not in busy:
                    busy.add(obj["spec"]["nodeName"])
                    self._set(obj, "Scheduled")
            elif phase == "Scheduled":
                self._meta(obj, finalizers=sorted({*(obj["metadata"].get("finalizers") or []), FINALIZER}))
                self._set(obj, "Cordon")
            elif phase == "Cordon":
                if obj["spec"].get("cordon", True):
                    self._cordon(obj)
                self._set(obj, "WaitForPodCompletion")
            elif phase == "WaitForPodCompletion":
                if self._waiting(obj):
                    continue
                self._set(obj, "Draining")
            elif phase == "Draining" and not obj["spec"].get("drainSpec"):
                self._set(obj, "Ready")

    def _set(self, obj: dict, reason: str) -> None:
        """SetReadyConditionReason: Ready's reason; its time moves only when its status changes."""
        status = "True" if reason == "Ready" else "False"
        old = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
        since = old["lastTransitionTime"] if old is not None and old.get("status") == status else _stamp()
        conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"]
        conditions.append({"type": "Ready", "status": status, "reason": reason, "message": "",
                           "lastTransitionTime": since})
        self._status(obj, {"conditions": conditions})
        self.history.setdefault(obj["metadata"]["name"], []).append(reason)

    def _status(self, obj: dict, fields: dict[str, Any]) -> None:
        body = {"status": {**(obj.get("status") or {}), **fields}}
        obj.update(self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, PLURAL, obj["metadata"]["name"], body))

    def _meta(self, obj: dict, **fields: Any) -> None:
        obj.update(self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, obj["metadata"]["name"], {"metadata": fields}))

    def _cordon(self, obj: dict) -> None:
        node = self.core.read_node(obj["spec"]["nodeName"])
        notes = obj["metadata"].get("annotations") or {}
        if INITIAL_STATE not in notes:
            self._meta(obj, annotations={INITIAL_STATE: "true" if node.spec.unschedulable else "false"})
            notes = obj["metadata"].get("annotations") or {}
        if notes.get(INITIAL_STATE) == "false" and not node.spec.unschedulable:
            self.core.patch_node(node.metadata.name, {"spec": {"unschedulable": True}})

    def _waiting(self, obj: dict) -> bool:
        wait = obj["spec"].get("waitForPodCompletion")
        if wait is None:
            return False
        if not (obj["metadata"].get("annotations") or {}).get(WAIT_START):
            self._meta(obj, annotations={WAIT_START: _stamp()})
        pods = self.core.list_pod_for_all_namespaces(label_selector=wait.get("podSelector") or None,
                                                     field_selector=f"spec.nodeName={obj['spec']['nodeName']}").items
        self._status(obj, {"waitForCompletion": [f"{p.metadata.namespace}/{p.metadata.name}" for p in pods]})
        return bool(pods)

    def _delete(self, obj: dict) -> None:
        if phase_of(obj) not in (*IDLE, "Scheduled") and obj["spec"].get("cordon", True):  # HandleUnCordon
            node = self.core.read_node(obj["spec"]["nodeName"])
            if (obj["metadata"].get("annotations") or {}).get(INITIAL_STATE) == "false" and node.spec.unschedulable:
                self.core.patch_node(node.metadata.name, {"spec": {"unschedulable": False}})
            self._meta(obj, annotations={INITIAL_STATE: None})
        kept = [f for f in obj["metadata"].get("finalizers") or [] if f != FINALIZER]
        self._meta(obj, finalizers=kept or None)
        self.history.setdefault(obj["metadata"]["name"], []).append("deleted")

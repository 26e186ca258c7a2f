"""A drain as the maintenance-operator's requestor (issue 40 item 4; docs/disruption-actors.md §2).

Where NVIDIA's maintenance-operator runs, the cluster's maintenance goes through `NodeMaintenance` objects: its
scheduler decides how many nodes are taken at once (MaintenanceOperatorConfig's maxParallelOperations and
maxUnavailable) and other requestors (the Network Operator) wait their turn by it. A gputui drain that cordons by
itself is invisible to that scheduler. Chosen with `--via nodemaintenance` (setting `drain_via`), gputui instead
creates a NodeMaintenance with requestorID `gputui.io` for the node and lets the operator take it through
Pending → Scheduled → Cordon → WaitForPodCompletion → Draining → Ready (the phase is condition Ready's reason):

- the operator cordons (spec.cordon), when its scheduler says the node's turn has come;
- `waitForPodCompletion.podSelector` selects the node's pods that hold sessions, with no timeout: the operator waits
  in WaitForPodCompletion until they are gone, and that step is where gputui's session-aware wait runs (out of
  rotation, sessions, eviction), so the operator never evicts a pod holding a conversation;
- no `drainSpec`: the operator evicts nothing. Every eviction is gputui's, through the Eviction API, with the pod's
  own grace period and one audit entry per state change, exactly as when gputui cordons by itself;
- gputui evicts only in WaitForPodCompletion, Draining or Ready (the operator has cordoned by then), and calls the
  drain done only when its pods are gone (API-confirmed) and the operator says Ready;
- an abort deletes the NodeMaintenance (the operator uncordons a node it cordoned); a drain that ends unfinished
  leaves it in place, node cordoned, and says how to give the node back (`gputui uncordon NODE` deletes it).

The selector must be one label-selector string (the operator parses it with labels.Parse): one key whose values
pick out exactly the session pods gputui moves, no pod it leaves (a DaemonSet's pod would hold the wait forever). A
node where no such key exists cannot be drained this way; the plan says so and which pods share no key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from gputui.backends.base import BackendError, JobWriter  # JobWriter: the object verbs (create, get, delete)
from gputui.backends.kube_actors import maintenance_record
from gputui.ops.audit import AuditLog
from gputui.ops.drain.events import DrainEvent
from gputui.ops.drain.events import EventKind as K
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.model import InferencePod

REQUESTOR_ID = d.GPUTUI_REQUESTOR
VERSION, PLURAL = "v1alpha1", "nodemaintenances"
SOURCE = "NodeMaintenance"  # its source's name in ActorObjects.reads
# The phases in which the operator has cordoned the node: gputui's evictions may run.
EVICTING = ("WaitForPodCompletion", d.NM_DRAINING, "Ready")
# Keys tried first for the wait's selector (the common serving labels), then every other key, by name.
PREFERRED_KEYS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app", "model")
SILENT_AFTER_S = 60.0  # no phase this long after creation: say the operator may not be running


def request_name(node: str) -> str:
    """The NodeMaintenance's name: `gputui-<node>`, hashed when that would pass a name's 253 characters."""
    name = f"gputui-{node}"
    return name if len(name) <= 253 else f"gputui-{hashlib.sha256(node.encode()).hexdigest()[:16]}"


def wait_selector(on_node: Sequence[InferencePod], moved: set[str], sessions: set[str]) -> tuple[str, str]:
    """(selector, "") selecting every pod of `sessions` and only pods of `moved` among the node's pods; ("", why)
    when no single key does. No session pod: ("", ""): the operator has nothing to wait for."""
    if not sessions:
        return "", ""
    held = [p for p in on_node if p.key in sessions]
    common = set.intersection(*(set(p.labels) for p in held))
    for key in [k for k in PREFERRED_KEYS if k in common] + sorted(common - set(PREFERRED_KEYS)):
        values = sorted({p.labels[key] for p in held})
        picked = {p.key for p in on_node if p.labels.get(key) in values}
        if picked <= moved:
            return f"{key} in ({','.join(values)})", ""
    return "", (f"no label key selects only the pods gputui moves among {len(held)} pods holding sessions "
                "(the operator's waitForPodCompletion takes one label selector); --via cordon drains it")


def request_body(namespace: str, node: str, selector: str) -> dict:
    """The NodeMaintenance gputui creates (api/v1alpha1 NodeMaintenanceSpec): the operator cordons, waits on the
    session pods with no timeout, and drains nothing (no drainSpec): every eviction is gputui's."""
    spec: dict = {"requestorID": REQUESTOR_ID, "nodeName": node, "cordon": True}
    if selector:
        spec["waitForPodCompletion"] = {"podSelector": selector, "timeoutSeconds": 0}
    return {"apiVersion": f"{d.MAINTENANCE_GROUP}/{VERSION}", "kind": "NodeMaintenance",
            "metadata": {"name": request_name(node), "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "gputui"}},
            "spec": spec}


@dataclass(frozen=True, slots=True)
class RequestPlan:
    """What the plan says of a drain through a NodeMaintenance: which object, what the operator waits on, and
    why it cannot be done (the plan is then blocked before any write)."""

    namespace: str
    node: str
    selector: str = ""
    error: str = ""

    @property
    def name(self) -> str:
        return request_name(self.node)

    def words(self) -> str:
        wait = (f"gputui's session-aware wait runs in its WaitForPodCompletion step ({self.selector})"
                if self.selector else "no pod holds sessions: nothing for it to wait on")
        return (f"as the maintenance-operator's requestor ({REQUESTOR_ID}): NodeMaintenance "
                f"{self.namespace}/{self.name}; the operator cordons when its scheduler gives the node a turn; "
                f"{wait}; gputui evicts every pod; done when the operator says Ready")

    def to_json(self) -> dict:
        return {"via": "nodemaintenance", "namespace": self.namespace, "name": self.name,
                "requestor": REQUESTOR_ID, "wait_selector": self.selector or None, "error": self.error or None}


def request_plan(namespace: str, node: str, on_node: Sequence[InferencePod], moved: set[str], sessions: set[str],
                 source: str | None) -> RequestPlan:
    """The request for a drain through a NodeMaintenance; `source` is the NodeMaintenance source as the snapshot
    read it (READ, NOT_INSTALLED or unknown: why)."""
    if source != d.READ:
        why = "not installed here" if source in (None, d.NOT_INSTALLED) else source
        return RequestPlan(namespace, node, error=f"--via nodemaintenance: the maintenance-operator's "
                                                  f"NodeMaintenance is {why}")
    selector, why = wait_selector(on_node, moved, sessions)
    return RequestPlan(namespace, node, selector, f"--via nodemaintenance: {why}" if why else "")


class MaintenanceRequest:
    """The run's side: create the NodeMaintenance once, follow the operator's phases, withdraw it on abort."""

    def __init__(self, writer: object, audit: AuditLog, plan: RequestPlan, clock: Callable[[], float]) -> None:
        if not isinstance(writer, JobWriter):
            raise BackendError("this cluster's writer cannot create a NodeMaintenance")
        self.writer, self.audit, self.plan, self.clock = writer, audit, plan, clock
        self.target = f"nodemaintenance/{plan.namespace}/{plan.name}"
        self.phase: str | None = None  # as last read ("": the operator has not set one yet)
        self.created_at: float | None = None
        self.said_silent = False

    @property
    def evicting(self) -> bool:
        """The operator has cordoned and is waiting on (or past) the pods: gputui's evictions may run."""
        return self.phase in EVICTING

    @property
    def ready(self) -> bool:
        return self.phase == "Ready"

    def open(self) -> Iterator[DrainEvent]:
        """Create the NodeMaintenance, or adopt gputui's own (a resumed drain). Raises BackendError."""
        try:
            found: d.NodeMaintenanceRecord | None = self._read()
        except BackendError as exc:
            if not _missing(exc):
                raise
            found = None
        if found is not None:
            if found.requestor != REQUESTOR_ID:
                raise BackendError(f"{self.target} exists, requested by {found.requestor or 'nobody'}, not gputui")
            self.created_at = found.created
            yield DrainEvent(self.plan.node, K.INFO, message=f"{self.target}: gputui's request adopted "
                                                             f"({found.phase or 'no phase yet'})")
            return
        body = request_body(self.plan.namespace, self.plan.node, self.plan.selector)
        with self.audit.writing("nodemaintenance-create", self.target,
                                {"requestor": REQUESTOR_ID, "wait_selector": self.plan.selector}):
            self.writer.create_object(d.MAINTENANCE_GROUP, VERSION, PLURAL, self.plan.namespace, body)
        self.created_at = self.clock()
        yield DrainEvent(self.plan.node, K.INFO, message=f"{self.target} created; waiting for the maintenance-operator")

    def look(self) -> Iterator[DrainEvent]:
        """Read its phase now; say each new one. Raises BackendError (the drain pauses) on a failed read, and
        RequestGone when the object or its request is gone (someone deleted it, or it failed)."""
        try:
            record = self._read()
        except BackendError as exc:
            if not _missing(exc):
                raise
            raise RequestGone(f"{self.target} was deleted: the maintenance-operator no longer holds the node "
                              "for this drain") from None
        if record.deleting:
            raise RequestGone(f"{self.target} is being deleted: the maintenance-operator is giving the node back")
        phase = record.phase
        if phase == d.NM_REQUESTOR_FAILED:
            raise RequestGone(f"{self.target}: RequestorFailed")
        if phase != self.phase:
            self.phase = phase
            yield DrainEvent(self.plan.node, K.INFO, message=f"maintenance-operator: {phase or 'no phase yet'}"
                             + ("; gputui moves the pods now" if phase in EVICTING and phase != "Ready" else ""))
        silent = not phase and self.created_at is not None and self.clock() - self.created_at > SILENT_AFTER_S
        if silent and not self.said_silent:
            self.said_silent = True
            yield DrainEvent(self.plan.node, K.INFO, message=f"{self.target} has no phase after "
                             f"{SILENT_AFTER_S:.0f}s: is the maintenance-operator's controller running?")

    def withdraw(self, why: str) -> None:
        withdraw(self.writer, self.audit, f"{self.plan.namespace}/{self.plan.name}", why)

    def _read(self) -> d.NodeMaintenanceRecord:
        obj = self.writer.get_object(d.MAINTENANCE_GROUP, VERSION, PLURAL, self.plan.namespace, self.plan.name)
        return maintenance_record(obj)


def withdraw(writer: object, audit: AuditLog, ref: str, why: str) -> None:
    """Delete gputui's NodeMaintenance `ref` ("namespace/name"), audited: the operator ends the maintenance and
    uncordons a node it cordoned. Gone already: done (the writer's rule for a 404)."""
    if not isinstance(writer, JobWriter):
        raise BackendError("this cluster's writer cannot delete a NodeMaintenance")
    namespace, name = ref.split("/", 1)
    with audit.writing("nodemaintenance-delete", f"nodemaintenance/{ref}", {"reason": why}):
        writer.delete_object(d.MAINTENANCE_GROUP, VERSION, PLURAL, namespace, name, propagation="Background")


def _missing(exc: BackendError) -> bool:
    return getattr(exc, "status", None) == 404


class RequestGone(BackendError):
    """The drain's NodeMaintenance is gone or failed: the operator no longer holds the node for it. Not a pause."""

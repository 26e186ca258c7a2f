"""The node lifecycle conditions a gputui drain sets (KEP-5683; docs/disruption-actors.md §6), so that the other
tools draining GPU nodes can see it: `DrainInProgress` True while it runs; at the end False, and `Drained` True
when every pod is gone. Its reasons start with "Gputui", which is how gputui tells its own from other writers'.

Where: `lifecycle_conditions` "on", or "auto" when the apiserver's NodeLifecycleConditions gate is on (its
/metrics: no API says it; 1.37's apiserver accepts the conditions whatever the gate says). Advisory to the others:
a condition that cannot be written is said once and audited, never a reason to stop a drain. A one-GPU drain sets
none: the node is not being drained."""

from __future__ import annotations

from collections.abc import Iterator

from gputui.backends.base import BackendError, LifecycleWriter, error_line
from gputui.ops.audit import AuditLog
from gputui.ops.drain.events import DrainEvent
from gputui.ops.drain.events import EventKind as K
from gputui.vocabulary import disruptions as d


class NodeLifecycle:
    def __init__(self, writer: object, audit: AuditLog, node: str, mode: str, one_gpu: bool = False) -> None:
        self.audit, self.node = audit, node
        self.writer: LifecycleWriter | None = None
        self.words = ""  # what the drain's start says of them ("": nothing worth saying)
        self._done: set[tuple[str, str]] = set()  # each state (type, status) is written once, whatever the retries
        if mode == "off" or one_gpu:
            return
        if not isinstance(writer, LifecycleWriter):
            if mode == "on":
                self.words = "node lifecycle conditions: not set (this cluster's writer cannot set them)"
            return
        on, why = (True, "") if mode == "on" else writer.feature_gate(d.LIFECYCLE_GATE)
        if on:
            self.writer, self.words = writer, f"node lifecycle condition {d.LC_DRAIN_IN_PROGRESS} set"
        elif on is None:  # unknown: not set, and said so (the setting's "on" sets them anyway)
            self.words = f"node lifecycle conditions: not set ({why}; lifecycle_conditions: on sets them)"

    def started(self, message: str) -> Iterator[DrainEvent]:
        yield from self._mark(d.LC_DRAIN_IN_PROGRESS, "True", d.LC_DRAINING, message)

    def ended(self, drained: bool, why: str) -> Iterator[DrainEvent]:
        """The drain is over: no longer in progress; drained only when every pod is gone (API-confirmed)."""
        yield from self._mark(d.LC_DRAIN_IN_PROGRESS, "False", d.LC_DONE if drained else d.LC_STOPPED, why)
        if drained:
            yield from self._mark(d.LC_DRAINED, "True", d.LC_DONE, why)

    def _mark(self, kind: str, status: str, reason: str, message: str) -> Iterator[DrainEvent]:
        if self.writer is None or (kind, status) in self._done:
            return
        self._done.add((kind, status))
        try:
            with self.audit.writing("node-condition", f"node/{self.node}",
                                    {"type": kind, "status": status, "reason": reason}):
                self.writer.set_node_condition(self.node, kind, status, reason, message)
        except BackendError as exc:  # advisory: said, audited (above), and the drain goes on
            yield DrainEvent(self.node, K.INFO, message=f"node lifecycle condition {kind} not set: {error_line(exc)}")

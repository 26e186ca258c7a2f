"""The pods one drain holds out of rotation, during its run: taking each out before its wait, putting it back
when it is left in place, when the drain is aborted or ends, and the node's record of them kept in step.

The record is written before a label is removed and rewritten after one is put back, so at every moment it
names at least the pods that are out: a drain killed between two writes leaves a record that `R`,
`--resume`, an uncordon or `gputui check` can act on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from gputui.backends.base import BackendError, ConflictError, Writer
from gputui.ops.audit import AuditLog
from gputui.ops.drain.events import DrainEvent, EventKind as K
from gputui.ops.drain.out_of_rotation import RECORD, OutOfRotation, parse_record, put_back, record_text, take_out

if TYPE_CHECKING:
    from gputui.ops.drain.plan import DrainPlan

# The run's pod progress (ops.drain.run.PodProgress, which imports this module): read by its state's value.
Progress = Mapping[str, Any]


class RotationHold:
    def __init__(self, writer: Writer, audit: AuditLog, node: str, clock: Callable[[], float]) -> None:
        self.writer, self.audit, self.node, self.clock = writer, audit, node, clock
        self.held: dict[str, OutOfRotation] = {}  # what the node's record says, as this drain keeps it
        self.tried: set[str] = set()  # pods this drain tried to take out (once each)

    def adopt(self) -> None:
        """The pods the node's record names (a resumed drain's predecessor took them out)."""
        annotations, _rv = self.writer.node_annotations(self.node)
        self.held = parse_record(annotations.get(RECORD, ""))
        self.tried = set(self.held)

    def _write_record(self) -> None:
        self.writer.annotate_node(self.node, {RECORD: record_text(self.held)})

    def take_out_due(self, plan: DrainPlan, pods: Progress) -> Iterator[DrainEvent]:
        """Each pod the plan takes out of rotation, before its first wait. A write that fails with a
        BackendError pauses the drain (raised); a pod changed since the plan read it stays in rotation."""
        for p in plan.to_evict:
            if p.rotation is None or p.pod.key in self.tried or pods[p.pod.key].finished:
                continue
            entry = replace(p.rotation, since=self.clock())
            self.held[entry.key] = entry
            try:
                with self.audit.writing("rotation-out", f"pod/{entry.key}",
                                        {"node": self.node, "labels": dict(entry.labels)},
                                        refused=(ConflictError,)):
                    self._write_record()  # first: the record names it before it is out
                    take_out(self.writer, entry)
            except BackendError as exc:
                # Changed since read (409, a failed test), forbidden (403: no patch on pods) or invalid (422):
                # the pod stays in rotation and the drain waits on it as before; anything else (the API down)
                # pauses the drain, which tries again.
                if not isinstance(exc, ConflictError) and getattr(exc, "status", None) not in (403, 422):
                    del self.held[entry.key]
                    raise
                del self.held[entry.key]
                self.tried.add(entry.key)
                self._write_record()
                yield DrainEvent(self.node, K.INFO, entry.key, f"stays in rotation: {exc}")
                continue
            except BaseException:
                self.held.pop(entry.key, None)  # not out: the record keeps naming it, harmlessly, until rewritten
                raise
            self.tried.add(entry.key)
            yield DrainEvent(self.node, K.INFO, entry.key, p.rotation_note)

    def put_back_all(self, why: str, pods: Progress, only: Iterable[str] | None = None) -> Iterator[DrainEvent]:
        """The labels back on the pods held out that are still there (`only`: those in these states)."""
        states = set(only) if only is not None else None
        dropped = False
        for key in list(self.held):
            prog = pods.get(key)
            if states is not None and (prog is None or prog.state.value not in states):
                continue
            if prog is not None and prog.state.value == "gone":
                del self.held[key]  # evicted: its replacement has the template's labels
                dropped = True
                continue
            entry = self.held[key]
            with self.audit.writing("rotation-in", f"pod/{key}", {"node": self.node, "labels": dict(entry.labels),
                                                                  "why": why}) as result:
                back = put_back(self.writer, entry)
                del self.held[key]
                self._write_record()
                if not back:
                    result.result = "ok: the pod is gone or replaced; nothing to put back"
            if back:
                yield DrainEvent(self.node, K.INFO, key, f"back in rotation ({why})")
        if dropped and not self.held:  # the record named only evicted pods: it says nothing any more
            self._write_record()

"""The pods one drain holds out of rotation, during its run: taking each out before its wait, putting it back
when it is left in place, when the drain is aborted or ends, and the node's record of them kept in step.

The record is written before a label is removed and rewritten after one is put back, so at every moment it
names at least the pods that are out: a drain killed between two writes leaves a record that `R`,
`--resume`, an uncordon or `gputui check` can act on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from gputui.backends.base import BackendError, ConflictError, Writer
from gputui.ops.audit import AuditLog
from gputui.ops.drain.events import DrainEvent
from gputui.ops.drain.events import EventKind as K
from gputui.ops.drain.out_of_rotation import (
    KEPT_RUNNING,
    RECORD,
    OutOfRotation,
    choose,
    parse_record,
    put_back,
    record_text,
    take_out,
)
from gputui.snapshot import ClusterSnapshot

if TYPE_CHECKING:
    from gputui.ops.drain.plan import DrainPlan

# The run's pod progress (ops.drain.run.PodProgress, which imports this module): read by its state's value.
Progress = Mapping[str, Any]


RECHECK_S = 5.0  # how often a pod kept in rotation for capacity is looked at again


class _TakenOut:
    """The pods this process holds out of rotation, per cluster (its writer), across all its drains: a batch's
    drains interleave, and the watch cache that feeds the next one's fresh view may not show a label removed
    a moment ago."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[int, set[str]] = {}

    def add(self, writer: object, key: str) -> None:
        with self._lock:
            self._keys.setdefault(id(writer), set()).add(key)

    def discard(self, writer: object, key: str) -> None:
        with self._lock:
            self._keys.get(id(writer), set()).discard(key)

    def keys(self, writer: object) -> frozenset[str]:
        with self._lock:
            return frozenset(self._keys.get(id(writer), ()))


TAKEN_OUT = _TakenOut()


class RotationHold:
    def __init__(self, writer: Writer, audit: AuditLog, node: str, clock: Callable[[], float]) -> None:
        self.writer, self.audit, self.node, self.clock = writer, audit, node, clock
        self.held: dict[str, OutOfRotation] = {}  # what the node's record says, as this drain keeps it
        self.tried: set[str] = set()  # pods this drain tried to take out (once each)
        self.kept: dict[str, str] = {}  # pods kept in rotation for capacity, with why (said once per change)
        self._next_check = 0.0

    def adopt(self) -> None:
        """The pods the node's record names (a resumed drain's predecessor took them out)."""
        annotations, _rv = self.writer.node_annotations(self.node)
        self.held = parse_record(annotations.get(RECORD, ""))
        self.tried = set(self.held)
        for key in self.held:
            TAKEN_OUT.add(self.writer, key)

    def not_yet(self, key: str, now: float, settle_s: float) -> str:
        """Why a quiet count does not evict this pod yet ("" when it may go): it left rotation too recently for
        the metrics to show what reached it just before, or it is kept in rotation for capacity (evicting it
        would take away the serving pod it was kept for, and new sessions still reach it)."""
        entry = self.held.get(key)
        if entry is not None and now < entry.since + settle_s:
            return f"out of rotation {now - entry.since:.0f}s ago: its count settles for {settle_s:.0f}s"
        if entry is None and key in self.kept and key not in self.tried:
            return "kept in rotation for capacity: evicted once out of rotation, or at its deadline"
        return ""

    def forget(self) -> None:
        """The drain ends here, however (its pods may stay out: the node's record names them): the process
        stops counting them as its own."""
        for key in self.held:
            TAKEN_OUT.discard(self.writer, key)

    def _write_record(self) -> None:
        self.writer.annotate_node(self.node, {RECORD: record_text(self.held)})

    def take_out_due(self, plan: DrainPlan, pods: Progress, view: Callable[[], ClusterSnapshot]) -> Iterator[DrainEvent]:
        """Each pod a label can take out of rotation, before its wait, as soon as capacity allows: judged on a
        fresh `view` (the pods of its namespaces), not on the plan's, so a pod kept in goes out once a
        replacement serves, and a batch's drains never take out more than the budgets allow between them.
        A failed read or write (BackendError) pauses the drain (raised); a pod changed since stays in."""
        due = [p for p in plan.to_evict if p.switch is not None and p.pod.key not in self.tried
               and pods[p.pod.key].state.value in ("pending", "waiting")]  # not once evicted (or blocked)
        now = self.clock()
        if not due or now < self._next_check:
            return
        self._next_check = now + RECHECK_S
        fresh = view()
        current = {p.key: p for p in fresh.pods}
        for p in due:
            pod, switch = current.get(p.pod.key), p.switch
            assert switch is not None
            if pod is None or pod.uid != p.pod.uid:
                continue  # gone or replaced: the run's poll asks the API and says so
            if any(k not in pod.labels for k in switch.labels):
                self.tried.add(pod.key)  # someone else took it out: not this drain's to put back
                yield DrainEvent(self.node, K.INFO, pod.key, "already out of rotation (not by this drain)")
                continue
            entry, why = choose(fresh, [(pod, switch)], now, TAKEN_OUT.keys(self.writer))[pod.key]
            if entry is None:
                if pod.key not in self.kept:  # said once: its count of pods serving moves with every poll
                    short = why.split(", as ", 1)[-1].split("; it goes out", 1)[0]
                    yield DrainEvent(self.node, K.INFO, pod.key, f"{KEPT_RUNNING}: {short}")
                self.kept[pod.key] = why
                continue
            self.kept.pop(pod.key, None)
            yield from self._take_out(entry, why)

    def _take_out(self, entry: OutOfRotation, note: str) -> Iterator[DrainEvent]:
        self.held[entry.key] = entry
        TAKEN_OUT.add(self.writer, entry.key)
        try:
            with self.audit.writing("rotation-out", f"pod/{entry.key}", {"node": self.node, "labels": dict(entry.labels)},
                                    refused=(ConflictError,)):
                self._write_record()  # first: the record names it before it is out
                take_out(self.writer, entry)
        except BackendError as exc:
            del self.held[entry.key]
            TAKEN_OUT.discard(self.writer, entry.key)
            # Changed since read (409, a failed test), forbidden (403: no patch on pods) or invalid (422): the
            # pod stays in rotation and the drain waits on it as before; anything else (the API down) pauses
            # the drain, which tries again.
            if not isinstance(exc, ConflictError) and getattr(exc, "status", None) not in (403, 422):
                self._next_check = 0.0
                raise
            self.tried.add(entry.key)
            self._write_record()
            yield DrainEvent(self.node, K.INFO, entry.key, f"stays in rotation: {exc}")
            return
        except BaseException:
            self.held.pop(entry.key, None)  # not out: the record keeps naming it, harmlessly, until rewritten
            TAKEN_OUT.discard(self.writer, entry.key)
            raise
        self.tried.add(entry.key)
        yield DrainEvent(self.node, K.OUT_OF_ROTATION, entry.key, note)

    def put_back_all(self, why: str, pods: Progress, only: Iterable[str] | None = None,
                     keys: Iterable[str] | None = None) -> Iterator[DrainEvent]:
        """The labels back on the pods held out that are still there (`only`: those in these states; `keys`:
        these pods only). A pod put back is not taken out again by this drain."""
        states = set(only) if only is not None else None
        dropped = False
        for key in list(self.held) if keys is None else [k for k in keys if k in self.held]:
            prog = pods.get(key)
            if states is not None and (prog is None or prog.state.value not in states):
                continue
            if prog is not None and prog.state.value in ("gone", "replaced"):
                del self.held[key]
                TAKEN_OUT.discard(self.writer, key)  # gone: its replacement has the template's labels
                dropped = True
                continue
            entry = self.held[key]
            with self.audit.writing("rotation-in", f"pod/{key}", {"node": self.node, "labels": dict(entry.labels),
                                                                  "why": why}) as result:
                back = put_back(self.writer, entry)
                del self.held[key]
                TAKEN_OUT.discard(self.writer, key)
                self._write_record()
                if not back:
                    result.result = "ok: the pod is gone or replaced; nothing to put back"
            if back:
                yield DrainEvent(self.node, K.IN_ROTATION, key, f"back in rotation ({why})")
        if dropped and not self.held:  # the record named only evicted pods: it says nothing any more
            self._write_record()

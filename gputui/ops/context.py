"""What every operation runs with, as one typed value: where it reads, where it writes (None: read-only, and the
operation refuses), where it says what it writes, its clock and its sleep (a test's hand-moved clock, the TUI's
sleep that a quit interrupts), how often it looks again, the settings it was started under, and where a
canary reads its gates. What an operation reports as it goes is what it yields; the front end hands it to
its sink through the one driver, `ops.steps.run_steps(op, sink)`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gputui.backends.base import Backend, Reader, SignalsReader, Writer
from gputui.ops.audit import AuditLog, audit_for
from gputui.settings import Settings


@dataclass(frozen=True, slots=True)
class OpContext:
    reader: Reader
    writer: Writer | None
    audit: AuditLog
    settings: Settings = field(default_factory=Settings)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    poll_s: float = 1.0  # how often a running operation looks at the cluster again
    signals: SignalsReader | None = None  # each version's error ratio and latency: a canary's gates

    @classmethod
    def of(cls, backend: Backend, settings: Settings, audit: AuditLog | None = None) -> OpContext:
        """A backend's context, as every front end builds it: its audit log from the settings (`audit_for`)
        unless one is given (the TUI keeps one for the app); the backend itself reads a canary's gates."""
        return cls(backend.reader, backend.writer, audit if audit is not None else audit_for(settings.audit_log, backend),
                   settings, signals=backend)

    def paced(self, poll_s: float, clock: Callable[[], float] | None = None,
              sleep: Callable[[float], None] | None = None) -> OpContext:
        """The same context looking again every `poll_s`, on this clock and with this sleep (None: as it was)."""
        return replace(self, poll_s=poll_s, clock=clock or self.clock, sleep=sleep or self.sleep)

"""What a thread worker hands to the UI. This is the one way a result crosses from a worker thread to the UI
thread: the worker posts one of these messages (post_message is thread-safe) and a handler on the UI's loop
takes it. No worker calls into the UI (no call_from_thread), and no screen polls shared state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from gputui.backends.base import Backend
    from gputui.checks.facts import CheckFacts
    from gputui.checks.result import CheckResult
    from gputui.model import Gpu, NodeDescription
    from gputui.ops.traffic import ShiftPlan
    from gputui.pools import IdleReading
    from gputui.settings import Settings
    from gputui.signals import VersionSignals
    from gputui.snapshot import ClusterSnapshot


class SnapshotReady(Message):
    """A fresh snapshot (or why there is none). A newer one replaces a queued older one."""

    def __init__(self, snapshot: ClusterSnapshot | None, error: str | None) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotReady)


class DrainProgress(Message):
    """A running drain moved (a pod's state, a count, a log line, or its end). Progress is carried by
    the drain's run (runs.drain.DrainRun) itself, so a queued one is replaced by the next: the board draws the
    latest."""

    def __init__(self, finished: bool) -> None:
        super().__init__()
        self.finished = finished

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DrainProgress) and not message.finished


class CanaryProgress(Message):
    """A guided canary (app.canaries[service]) logged a line or ended; its run (runs.canary.CanaryRun) carries the rest."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service


class WriteDone(Message):
    """A write (cordon, shift, uncordon…) ended: what to tell the operator."""

    def __init__(self, title: str, text: str, failed: bool) -> None:
        super().__init__()
        self.title = title
        self.text = text
        self.failed = failed


class Connected(Message):
    """A context switch ended: the new backend, or why there is none."""

    def __init__(self, context: str, settings: Settings, backend: Backend | None, error: str | None) -> None:
        super().__init__()
        self.context = context
        self.settings = settings
        self.backend = backend
        self.error = error


class HistoryRead(Message):
    """A node's full GPU rows (None when the snapshot's are complete) and per-GPU utilisation history, for
    the node named (the detail screen may show another by the time it arrives)."""

    def __init__(self, gpus: tuple[Gpu, ...] | None, history: dict[int, list[float | None]], node: str) -> None:
        super().__init__()
        self.gpus = gpus
        self.history = history
        self.node = node


class DescriptionRead(Message):
    """describe's on-demand read of a node (taints, heartbeat, events), or why it failed."""

    def __init__(self, node: str, description: NodeDescription | None, error: str | None) -> None:
        super().__init__()
        self.node = node
        self.description = description
        self.error = error


class SignalsRead(Message):
    """A service's versions' error ratio and p95 latency from the engines' metrics, or why they are unknown."""

    def __init__(self, signals: dict[str, VersionSignals] | None, error: str) -> None:
        super().__init__()
        self.signals = signals
        self.error = error


class ChecksRun(Message):
    """The checks, run on one snapshot off the UI thread (at 10,000 nodes they take a few hundred ms), and the
    metrics store's facts they used (re-read only now and then: a window of 30 minutes moves slowly)."""

    def __init__(self, results: list[CheckResult], facts: CheckFacts, facts_at: float) -> None:
        super().__init__()
        self.results = results
        self.facts = facts
        self.facts_at = facts_at

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ChecksRun)


class RouteRead(Message):
    """The shift dialog's read of a route: the plan made on it as it is now, or why it could not be read."""

    def __init__(self, seq: int, plan: ShiftPlan | None, error: str | None) -> None:
        super().__init__()
        self.seq = seq
        self.plan = plan
        self.error = error


class PlanRead(Message):
    """A plan built off the UI thread on the objects as read now (the service screen's undo, rollback and
    Argo verbs), or why it could not be built."""

    def __init__(self, title: str, plan: ShiftPlan | None, error: str | None) -> None:
        super().__init__()
        self.title = title
        self.plan = plan
        self.error = error


class IdleRead(Message):
    """Per node, GPUs allocated but idle over the window, or why that is unknown; `asked`: the backend read
    (an answer from a cluster since left is dropped)."""

    def __init__(self, idle: IdleReading | None, why: str, asked: object) -> None:
        super().__init__()
        self.idle = idle
        self.why = why
        self.asked = asked


class FleetRead(Message):
    """One cluster of the fleet read (or not): its snapshot, or why there is none this time."""

    def __init__(self, context: str, snapshot: ClusterSnapshot | None, error: str) -> None:
        super().__init__()
        self.context = context
        self.snapshot = snapshot
        self.error = error

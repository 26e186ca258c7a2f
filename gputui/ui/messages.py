"""What a thread worker hands to the UI. This is the one way a result crosses from a worker thread to the UI
thread: the worker posts one of these messages (post_message is thread-safe) and a handler on the UI's loop
takes it. No worker calls into the UI (no call_from_thread), and no screen polls shared state.

Each is a dataclass: its fields are what it carries. Textual's Message.__init__ is its __post_init__, which the
dataclass's __init__ calls (sender, time, propagation flags). The handler's name comes from the class name, as
before (tests/ui/test_messages.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from collections.abc import Hashable

    from gputui.backends.base import Backend
    from gputui.checks.result import CheckResult
    from gputui.ops.drain.options import DrainOptions
    from gputui.ops.traffic import ShiftPlan
    from gputui.policy.fleet import ClusterRow
    from gputui.policy.node_pools import IdleReading
    from gputui.settings import Settings
    from gputui.snapshot import ClusterSnapshot
    from gputui.vocabulary.check_facts import CheckFacts
    from gputui.vocabulary.model import Gpu, NodeDescription
    from gputui.vocabulary.signals import VersionSignals


@dataclass
class SnapshotReady(Message):
    """A fresh snapshot (or why there is none). A newer one replaces a queued older one."""

    snapshot: ClusterSnapshot | None
    error: str | None

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotReady)


@dataclass
class PartialRead(Message):
    """What a large cluster's first lists hold so far, while start-up waits for the rest (drawn marked partial;
    nothing is planned or written from it)."""

    snapshot: ClusterSnapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PartialRead)


@dataclass
class DrainProgress(Message):
    """A running drain moved (a pod's state, a count, a log line, or its end). Progress is carried by
    the drain's run (runs.drain.DrainRun) itself, so a queued one is replaced by the next: the board draws the
    latest."""

    finished: bool

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DrainProgress) and not message.finished


@dataclass
class CanaryProgress(Message):
    """A guided canary (app.canaries[service]) logged a line or ended; its run (runs.canary.CanaryRun) carries the rest."""

    service: str


@dataclass
class WriteDone(Message):
    """A write (cordon, shift, uncordon…) ended: what to tell the operator."""

    title: str
    text: str
    failed: bool


@dataclass
class Connected(Message):
    """A context switch ended: the new backend, or why there is none."""

    context: str
    settings: Settings
    backend: Backend | None
    error: str | None


@dataclass
class HistoryRead(Message):
    """A node's full GPU rows (None when the snapshot's are complete) and per-GPU utilisation history, for
    the node named (the detail screen may show another by the time it arrives)."""

    gpus: tuple[Gpu, ...] | None
    history: dict[int, list[float | None]]
    node: str


@dataclass
class DescriptionRead(Message):
    """describe's on-demand read of a node (taints, heartbeat, events), or why it failed."""

    node: str
    description: NodeDescription | None
    error: str | None


@dataclass
class SignalsRead(Message):
    """A service's versions' error ratio and p95 latency from the engines' metrics, or why they are unknown."""

    signals: dict[str, VersionSignals] | None
    error: str


@dataclass
class ChecksRun(Message):
    """The checks, run on one snapshot off the UI thread (at 10,000 nodes they take a few hundred ms), and the
    metrics store's facts they used (re-read only now and then: a window of 30 minutes moves slowly)."""

    results: list[CheckResult]
    facts: CheckFacts
    facts_at: float

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ChecksRun)


@dataclass
class RouteRead(Message):
    """The shift dialog's read of a route: the plan made on it as it is now, or why it could not be read."""

    seq: int
    plan: ShiftPlan | None
    error: str | None


@dataclass
class PlanRead(Message):
    """A plan built off the UI thread on the objects as read now (the service screen's undo, rollback and
    Argo verbs), or why it could not be built."""

    title: str
    plan: ShiftPlan | None
    error: str | None


@dataclass
class IdleRead(Message):
    """Per node, GPUs allocated but idle over the window, or why that is unknown; `asked`: the backend read
    (an answer from a cluster since left is dropped)."""

    idle: IdleReading | None
    why: str
    asked: object


@dataclass
class FleetRead(Message):
    """One cluster of the fleet read (or not): its snapshot, or why there is none this time."""

    context: str
    snapshot: ClusterSnapshot | None
    error: str
    row: tuple[float, ClusterRow] | None = None  # worked out by the poller: (at this temp threshold, the row)


@dataclass
class OrderWorkedOut(Message):
    """A sort's order worked out ahead (`s`'s next column) for a snapshot the UI may be showing: the UI thread
    stores it on that snapshot (present/columns.keep_order), the worker never writes the snapshot's memo."""

    snapshot: ClusterSnapshot
    sort: Hashable  # present/columns.order_key
    names: list[str]


@dataclass
class GpuDrainPlanned(Message):
    """One GPU's drain options, from the pods bound to it as read now (node detail's `r` on a GPU row), or why
    they could not be read."""

    gpu: str
    options: DrainOptions | None
    error: str | None

"""How a drain starts beyond its plan and its options (DrainOptions, recorded on the node): what one front end
chooses for this run only, never saved with the drain."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from gputui.ops.drain.events import DrainControl
from gputui.ops.drain.lease import Holder


@dataclass(frozen=True, slots=True)
class DrainStart:
    """One node's run: the deadline a resumed drain keeps (None: the plan's session deadline from now), taking over
    the lease another gputui holds (the operator's choice), and as whom (None: this process; a test: another)."""

    deadline: float | None = None
    take_over: bool = False
    holder: Holder | None = None


@dataclass(frozen=True, slots=True)
class BatchStart:
    """A batch's run: nodes at once (None: the settings' drain_parallel), the operator's hand on each node's drain,
    each resumed node's deadline, taking over leases, and the pods (keys) the operator accepts to leave with
    nowhere to go (the placement guard stops before a node that would strand any other)."""

    parallel: int | None = None
    controls: Mapping[str, DrainControl] = field(default_factory=dict)
    deadlines: Mapping[str, float] = field(default_factory=dict)
    take_over: bool = False
    accept_stranded: Collection[str] = ()

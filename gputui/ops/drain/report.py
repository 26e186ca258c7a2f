"""How each node's drain ended, said truthfully."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Outcome(str, Enum):
    DRAINED = "drained"  # every pod the plan moves is gone, confirmed by the API
    UNFINISHED = "unfinished"  # pods left in place: unknown sessions at the deadline, or failed evictions
    FAILED = "failed"  # never started (plan blocked, lease held by another) or stopped by an error
    ABORTED = "aborted"  # the operator aborted it
    NOT_STARTED = "not started"  # the capacity guard stopped the batch before it


@dataclass
class DrainReport:
    node: str
    outcome: Outcome = Outcome.FAILED
    evicted: int = 0
    failed: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # pods left in place, and why
    replaced: list[str] = field(default_factory=list)  # pods replaced under their name before their eviction
    cut_sessions: int = 0  # known sessions cut by an eviction the operator chose (evict now, deadline)
    unknown_cut_pods: int = 0  # pods evicted with their count unknown: their sessions possibly cut
    pauses: int = 0  # times the API or a reader failed mid-drain (each retried)
    reason: str = ""

    def describe(self) -> str:
        text = f"{self.node}: {self.outcome.value}"
        if self.outcome is Outcome.NOT_STARTED:
            return f"{text} ({self.reason})" if self.reason else text
        text += f", {self.evicted} pod{'s' * (self.evicted != 1)} evicted"
        if self.reason:
            text += f" ({self.reason})"
        if self.failed:
            text += f", {len(self.failed)} failed ({'; '.join(self.failed)})"
        if self.held:
            text += f", {len(self.held)} left in place ({'; '.join(self.held)})"
        if self.replaced:
            text += f", {len(self.replaced)} replaced under its name before its eviction, the new pod not evicted " \
                    f"({'; '.join(self.replaced)})"
        if self.cut_sessions:
            text += f", {self.cut_sessions} live sessions cut by choice"
        if self.unknown_cut_pods:
            text += (f", {self.unknown_cut_pods} pod{'s' * (self.unknown_cut_pods != 1)} evicted with sessions unknown"
                     " (possibly cut)")
        if self.pauses:
            text += f", paused {self.pauses} time{'s' * (self.pauses != 1)} (API or metrics failures, retried)"
        return text


"""Holds another writer declares with node lifecycle conditions (KEP-5683, docs/disruption-actors.md §6): a True
`DrainInProgress`, `Drained`, `MaintenancePlanned` or `MaintenanceInProgress` on a Node. The KEP names no owner,
so the writer is told only by the condition's reason and message. gputui's own (reasons starting "Gputui") are
its drain's, which the drain's own hold already shows. Pure."""

from __future__ import annotations

from gputui.policy.disruption_time import stale
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import Disruption
from gputui.vocabulary.model import Node

# A drain or maintenance under way this long looks stuck; being drained, or maintenance planned, is a state that
# may rightly last (a node drained for repair waits on its parts).
_STUCK_WHEN_LONG = frozenset({d.LC_DRAIN_IN_PROGRESS, d.LC_MAINTENANCE_IN_PROGRESS})


def lifecycle_holds(node: Node, now: float) -> list[Disruption]:
    out = []
    for c in node.conditions:
        if c.type not in d.LIFECYCLE_TYPES or c.status != "True" or c.reason.startswith(d.LC_GPUTUI):
            continue
        said = ": ".join(p for p in (c.reason, c.message) if p)
        why = f"node lifecycle condition {c.type}" + (f" ({said})" if said else " (no reason given)")
        out.append(Disruption(d.NODE_LIFECYCLE, c.type, c.since, why,
                              stale(c.since, now, c.type) if c.type in _STUCK_WHEN_LONG else ""))
    return out

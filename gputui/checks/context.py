"""What every check reads (one snapshot, what the backend knows of its identity, what the metrics store
says over time) and the helpers that word a result the same way for all of them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputui.checks.result import CheckResult, Status
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.check_facts import UNREAD, CheckFacts

if TYPE_CHECKING:
    from gputui.backends.base import Backend
    from gputui.settings import Settings

LISTED = 5  # objects named in a summary line before "+N more"
# The head noun of each check's `found` phrase, which is plural ("nodes running hot"): one bad object takes the
# singular ("1 node running hot"). A new check's phrase must start from one of these (its test says so).
SINGULAR = {"fields": "field", "nodes": "node", "pods": "pod", "services": "service", "gaps": "gap", "alerts": "alert",
            "grants": "grant", "workloads": "workload"}
_HEAD = re.compile(r"\b(" + "|".join(SINGULAR) + r")\b")


@dataclass(frozen=True)
class CheckContext:
    snapshot: ClusterSnapshot
    temp_threshold: float = 85.0
    engine_shutdown_s: float = 0.0
    read_only: bool = True
    permissions: Mapping[str, bool] = field(default_factory=dict)  # access reviews; empty: not probed
    facts: CheckFacts = UNREAD

    def metrics_down(self) -> str | None:
        """Why the snapshot's metrics cannot be trusted now (None: they were read)."""
        source = self.snapshot.source("metrics")
        if source is None:
            return "no metrics source"
        if source.error:
            return f"metrics {source.error}"
        return None if source.fetched_at is not None else "metrics not read yet"


def names(objects: list[str]) -> str:
    shown = ", ".join(objects[:LISTED])
    return shown + (f" (+{len(objects) - LISTED} more)" if len(objects) > LISTED else "")


def verdict(id: str, seed: str, title: str, bad: list[str], status: Status, found: str, fix: str,
            fine: str) -> CheckResult:
    """PASS saying `fine` when nothing is bad; else `status`, counting and naming the bad objects."""
    if not bad:
        return CheckResult(id, seed, title, Status.PASS, fine)
    if len(bad) == 1:
        found = _HEAD.sub(lambda m: SINGULAR[m[1]], found, count=1)
    return CheckResult(id, seed, title, status, f"{len(bad)} {found}: {names(bad)}", tuple(bad), fix)


def unknown(id: str, seed: str, title: str, why: str, fix: str, objects: tuple[str, ...] = ()) -> CheckResult:
    return CheckResult(id, seed, title, Status.UNKNOWN, f"cannot tell: {why}", objects, fix)



def context_for(snapshot: ClusterSnapshot, settings: Settings, backend: Backend, facts: CheckFacts) -> CheckContext:
    """The one way the CLI and the :check screen put a context together (both off the UI's thread)."""
    return CheckContext(snapshot, settings.temp_threshold, settings.engine_shutdown, backend.read_only,
                        backend.permissions, facts)

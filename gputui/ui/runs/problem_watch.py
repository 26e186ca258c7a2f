"""The nodes that need attention as every view of the app counts them (gputui.policy.problems): the snapshot's own,
with what flapped within the last minute kept and marked, so the header, `/alert`, `d` and the wallboard
agree and none of them counts a problem in and out at every refresh.

One memory per cluster context: a `:ctx` switch starts the new cluster's afresh and a fleet's clusters never
mix. Each snapshot is observed once (ClusterSnapshot.derived), by the poll thread before the UI is told."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from gputui.policy.figures import problems as snapshot_problems
from gputui.policy.problems import Problem, ProblemMemory, with_flaps
from gputui.snapshot import ClusterSnapshot


class ProblemWatch:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._memories: dict[str, ProblemMemory] = {}

    def flaps(self, snap: ClusterSnapshot, temp_threshold: float) -> Mapping[str, Problem]:
        """The flapping problems as of this snapshot (observed once: the first ask feeds the memory)."""
        def observe() -> Mapping[str, Problem]:
            with self._lock:
                memory = self._memories.setdefault(snap.context, ProblemMemory())
            return memory.observe(snapshot_problems(snap, temp_threshold), self._clock())

        return snap.derived(("flaps", temp_threshold), observe)

    def problems(self, snap: ClusterSnapshot, temp_threshold: float) -> list[Problem]:
        """The nodes that need attention, worst first, flapping ones marked and kept for a minute: once per
        snapshot (its flaps are), the same list to every view that asks (callers do not change it). The header
        asks every second: at 100,000 nodes with 30,000 problems, merging and counting them again was 50 ms of
        the UI thread's each tick (benchmarks/keys.py, node detail's open)."""
        return snap.derived(("problems with flaps", temp_threshold),
                            lambda: with_flaps(snapshot_problems(snap, temp_threshold), self.flaps(snap, temp_threshold)))

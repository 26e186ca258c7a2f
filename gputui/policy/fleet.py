"""A fleet of clusters, one row each (issue 17): nodes, GPUs in use of total, mean utilisation, alerts by
severity, drains running, canaries in flight, and how fresh the cluster's last read is, or why it failed.
Built from each cluster's own snapshot (the same figures as its wallboard); the fleet's totals sum the
clusters that answered, and say how many did not. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gputui.policy.figures import figures
from gputui.policy.problems import KIND_ORDER, counts, expired_cordons
from gputui.snapshot import ClusterSnapshot, stale
from gputui.vocabulary.gpu_resources import GpuUse

FLEET = "(fleet)"


@dataclass(frozen=True, slots=True)
class ClusterRow:
    context: str
    nodes: int = 0
    gpus: GpuUse = GpuUse()
    util: float | None = None
    alerts: Mapping[str, int] = field(default_factory=dict)  # nodes that need attention, by kind (gputui.policy.problems)
    drains: int = 0
    canaries: int = 0
    taken_at: float | None = None  # the last snapshot's time; None: never read
    error: str = ""  # why the last read failed ("" when it did not)
    clusters: int = 1  # the fleet row: how many clusters it sums
    unread: int = 0  # the fleet row: clusters without a snapshot (not in the sums)
    util_gpus: int = 0  # the GPUs reporting utilisation (util's weight in the fleet's mean)

    def alerts_text(self, compact: bool = False) -> str:
        """`2 NotReady, 1 XID, 3 hot`: nodes that need attention, worst kind first, as the cluster's header counts
        them; compact: the count and the worst, `6 (2 NotReady)`. "" when none."""
        parts = [f"{n} {kind}" for kind, n in sorted(self.alerts.items(), key=lambda kv: _rank(kv[0])) if n]
        if compact and len(parts) > 1:
            return f"{sum(self.alerts.values())} ({parts[0]})"
        return ", ".join(parts)

    def freshness(self, now: float, refresh: float) -> str:
        if self.taken_at is None:
            return self.error or "connecting…"
        age = max(0.0, now - self.taken_at)
        text = f"{age:.0f}s"
        if stale(age, refresh):
            text = f"STALE {text}"
        return f"{text}: {self.error}" if self.error else text


def _rank(kind: str) -> int:
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def cluster_row(context: str, snapshot: ClusterSnapshot | None, error: str, temp_threshold: float,
                last: tuple[ClusterSnapshot, ClusterRow] | None = None) -> ClusterRow:
    """`last`: the cluster's previous read and the row made from it (at the same threshold). When nothing its
    figures come from moved, they are taken from it: a quiet cluster's read every refresh is then no walk over
    its nodes and pods (20 clusters of 5,000 nodes: benchmarks/fleet.py)."""
    if snapshot is None:
        return ClusterRow(context, error=error)
    # A backend with watch caches answers from them while its apiserver is down: the API source says how old
    # they are and why, and that is the cluster's freshness (not the time the snapshot was assembled).
    api = next((src for src in snapshot.sources if src.name == "API"), None)
    taken_at = api.fetched_at if api is not None and api.fetched_at is not None else snapshot.taken_at
    error = error or (api.error if api is not None and api.error else "")
    if last is not None and same_figures(last[0], snapshot):
        return replace(last[1], taken_at=taken_at, error=error)
    f = figures(snapshot, temp_threshold)
    alerts = {kind: n for kind, n, _flapping in counts(f.problems)}
    return ClusterRow(context, len(snapshot.nodes), f.gpus, f.mean_util, alerts, f.drains,
                      f.canaries, taken_at, error, util_gpus=f.util_gpus)


def same_figures(old: ClusterSnapshot, new: ClusterSnapshot) -> bool:
    """Two reads of a cluster give the same row figures: the join and the metrics kept the very objects (they do
    while nothing changes), and the cordons expired as of each read are the same (the one figure with a clock)."""
    return (old.nodes is new.nodes and old.pods is new.pods and old.summaries is new.summaries
            and old.services is new.services and expired_cordons(old) == expired_cordons(new))


def fleet_total(rows: Iterable[ClusterRow]) -> ClusterRow:
    """The clusters summed; utilisation weighted by the GPUs reporting it; the oldest read's time (the fleet is
    as fresh as its stalest member)."""
    rows = list(rows)
    read = [r for r in rows if r.taken_at is not None]
    alerts: dict[str, int] = {}
    for r in read:
        for s, n in r.alerts.items():
            alerts[s] = alerts.get(s, 0) + n
    weighted = [(r.util, r.util_gpus) for r in read if r.util is not None and r.util_gpus]
    weight = sum(w for _u, w in weighted)
    return ClusterRow(
        FLEET, sum(r.nodes for r in read), sum((r.gpus for r in read), GpuUse()),
        sum(u * w for u, w in weighted) / weight if weight else None, alerts, sum(r.drains for r in read),
        sum(r.canaries for r in read), min((r.taken_at for r in read if r.taken_at), default=None),
        clusters=len(rows), unread=len(rows) - len(read), util_gpus=weight)

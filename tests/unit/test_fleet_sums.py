"""The fleet's figures and pool rows, kept from one refresh to the next (fleet_sums), are those worked out from
scratch, refresh after refresh of a churning fleet: the header's GPUs, GPUs in use, mean utilisation, alerts
(worst first, in the fleet's order) and drains, and every pool's row, with and without an idle reading."""

from __future__ import annotations

import pytest

from gputui.backends.join import Joiner
from gputui.policy import fleet_sums
from gputui.policy.figures import alerts, figures
from gputui.policy.health import fleet_alerts
from gputui.policy.node_pools import DEFAULT_POOL_LABELS, IdleReading, fleet_pools, pool_rows
from gputui.policy.problems import problems_of
from gputui.vocabulary.model import NodeState
from tests.support.churn import churn


def test_figures_and_pools_kept_between_refreshes_are_those_worked_out_from_scratch(monkeypatch):
    monkeypatch.setattr(fleet_sums, "INCREMENTAL_FROM", 100)  # the churning fleet is 640 nodes
    updates = {"kept": 0}
    real = fleet_sums.NodeSums._update

    def counting(self, *a):
        kept = real(self, *a)
        updates["kept"] += bool(kept)
        return kept

    monkeypatch.setattr(fleet_sums.NodeSums, "_update", counting)
    joiner = Joiner()
    steps = 40
    for step, state, metrics in churn(640, 720, steps):
        snap = joiner.join(state, metrics, now=float(step), context="c", sources=())
        f = figures(snap, 85.0)
        assert f.gpus == snap.gpu_use()
        assert f.mean_util == pytest.approx(snap.mean_util)
        want = fleet_alerts(snap, 85.0)
        # The header counts nodes that need attention (gputui.policy.problems), from the same alerts worked out afresh.
        fresh = problems_of(want)
        assert alerts(snap, 85.0) == want and f.alerts == len({a.node for a in want}) == len(fresh)
        assert list(f.problems) == fresh and f.worst == (fresh[0].kind if fresh else "")
        assert f.drains == sum(1 for n in snap.nodes if n.state is NodeState.DRAINING)
        # An idle reading for half the refreshes (it is read apart, now and then): a new one redoes the sums.
        names = [n.name for n in snap.nodes]
        reading = IdleReading(idle={n: 1 for n in names[::5]}, attributed={n: 2 for n in names[::2]}) \
            if step % 20 >= 10 else None
        kept, fresh = fleet_pools(snap, reading, DEFAULT_POOL_LABELS), pool_rows(snap, reading, DEFAULT_POOL_LABELS)
        assert [(r.pool, r.nodes, r.gpus, r.allocated, r.idle, r.unattributed) for r in kept] == \
            [(r.pool, r.nodes, r.gpus, r.allocated, r.idle, r.unattributed) for r in fresh]
        assert [r.util for r in kept] == pytest.approx([r.util for r in fresh])
        assert {r.pool for r in kept} >= {"pool-0", "pool-1", "pool-2"}
    # Most refreshes looked only at what moved (both sums: figures and pools).
    assert updates["kept"] >= steps, updates


def test_the_node_tables_order_kept_between_refreshes_is_a_fresh_sort(monkeypatch):
    """Each column's order, kept from one refresh to the next (present/kept_order), is the fresh sort: (key,
    name), reversed on request, through nodes that moved, came, went, and pods that moved between nodes (the
    GPUs column sorts by allocation)."""
    from gputui.present import kept_order
    from gputui.present.cells import Palette
    from gputui.present.columns import NODE_COLUMNS, node_order, row_context

    monkeypatch.setattr(fleet_sums, "INCREMENTAL_FROM", 100)
    updates = {"kept": 0}
    real = kept_order._Order.update

    def counting(self, *a):
        kept = real(self, *a)
        updates["kept"] += bool(kept)
        return kept

    monkeypatch.setattr(kept_order._Order, "update", counting)
    monkeypatch.setattr(kept_order, "KEPT", len(NODE_COLUMNS))  # every column's order kept: each is updated
    joiner = Joiner()
    for step, state, metrics in churn(640, 720, 30, seed=5):
        snap = joiner.join(state, metrics, now=float(step), context="c", sources=())
        ctx = row_context(snap, Palette(), 85.0)
        by_name = {n.name: n for n in snap.nodes}
        for index in range(1, len(NODE_COLUMNS)):  # the name column is sorted by its keys, never kept
            col = NODE_COLUMNS[index]
            reverse = bool(step % 2)
            fresh = sorted(by_name, key=lambda name: (col.sort(by_name[name], ctx), name), reverse=reverse)
            assert node_order(ctx, index, reverse) == fresh, (step, col.key)
    # Most refreshes placed again only what moved, in every column (a DCGM read re-sorts the figures' columns,
    # but not the alerts': only the nodes that turned hot or cool move there).
    assert updates["kept"] >= 15 * (len(NODE_COLUMNS) - 1), updates


def test_each_cluster_keeps_its_own_sums_when_fleet_reads_several_in_turn(monkeypatch):
    """`:fleet` works each cluster's figures and pools out in turn. One kept sum for every cluster compared
    each snapshot with another cluster's last one, and walked every node again: each now keeps its own."""
    monkeypatch.setattr(fleet_sums, "INCREMENTAL_FROM", 100)
    updates = {"kept": 0, "full": 0}
    real_update, real_full = fleet_sums.NodeSums._update, fleet_sums.NodeSums._full

    def counting(self, *a):
        kept = real_update(self, *a)
        updates["kept"] += bool(kept)
        return kept

    def full(self, *a):
        updates["full"] += 1
        return real_full(self, *a)

    monkeypatch.setattr(fleet_sums.NodeSums, "_update", counting)
    monkeypatch.setattr(fleet_sums.NodeSums, "_full", full)
    clusters = {name: (Joiner(), churn(640, 720, 12, seed=seed)) for name, seed in (("east", 1), ("west", 2))}
    steps = 0
    for _ in range(12):
        for name, (joiner, stream) in clusters.items():
            step, state, metrics = next(stream)
            snap = joiner.join(state, metrics, now=float(step), context=name, sources=())
            f = figures(snap, 85.0)
            assert f.gpus == snap.gpu_use()
            fresh = pool_rows(snap, None, DEFAULT_POOL_LABELS)
            assert [(r.pool, r.gpus, r.allocated) for r in fleet_pools(snap, None, DEFAULT_POOL_LABELS)] == \
                [(r.pool, r.gpus, r.allocated) for r in fresh]
            steps += 1
    # Each cluster's first snapshot is walked in full (figures and pools: 2 each); after that, what moved.
    assert updates["full"] <= 2 * len(clusters) + steps // 4, updates
    assert updates["kept"] >= steps, updates


def test_a_fleet_of_twenty_clusters_keeps_each_ones_sums(monkeypatch):
    """benchmarks/fleet.py's fleet: 20 clusters read in turn. With sums kept for 8 clusters only, each cluster's
    were dropped before its next snapshot, and every row of the fleet view walked its whole cluster again."""
    monkeypatch.setattr(fleet_sums, "INCREMENTAL_FROM", 100)
    full = {"n": 0}
    real_full = fleet_sums.NodeSums._full

    def counting(self, *a):
        full["n"] += 1
        return real_full(self, *a)

    monkeypatch.setattr(fleet_sums.NodeSums, "_full", counting)
    clusters = {f"c{i:02d}": (Joiner(), churn(120, 130, 3, seed=i)) for i in range(20)}
    for round_ in range(3):
        before = full["n"]
        for name, (joiner, stream) in clusters.items():
            step, state, metrics = next(stream)
            snap = joiner.join(state, metrics, now=float(step), context=name, sources=())
            assert figures(snap, 85.0).gpus == snap.gpu_use()
        if round_:  # after each cluster's first snapshot: only what moved, never a whole cluster again
            assert full["n"] == before, f"round {round_}: {full['n'] - before} clusters walked in full"

"""The join that rejoins only what moved (join_fleet) gives, refresh after refresh, exactly what a join from
scratch gives: nodes, pods and the per-node indexes, through records changed in place, added and deleted
(which shifts the cache's order), pods scheduled, moved and finished, GPU labels lost, session counts that
move, appear and vanish, and refreshes where every node's metrics moved."""

from __future__ import annotations

from gputui.backends import join_fleet
from gputui.backends.join import Joiner, join
from gputui.base import moved
from tests.support.churn import churn

NODES, PODS, STEPS = 640, 720, 60  # above MIN_MOVED * MOVED_SHARE: a few moved records take the incremental path


def _check(snap, fresh) -> None:
    assert snap.nodes == fresh.nodes
    assert snap.pods == fresh.pods
    assert dict(snap._allocated) == dict(fresh._allocated)
    assert dict(snap._pods_by_node) == dict(fresh._pods_by_node)


def test_refresh_after_refresh_the_incremental_join_is_the_join_from_scratch(monkeypatch):
    fulls = {"nodes": 0, "pods": 0}
    joiner = Joiner()
    for cls, key in ((join_fleet.NodeJoin, "nodes"), (join_fleet.PodJoin, "pods")):
        real = cls._full

        def counting(self, *a, _real=real, _key=key):
            if self is getattr(joiner, f"_{_key}"):  # not the joins from scratch it is checked against
                fulls[_key] += 1
            return _real(self, *a)

        monkeypatch.setattr(cls, "_full", counting)
    last = None
    steps = STEPS
    for step, state, metrics in churn(NODES, PODS, steps):
        snap = joiner.join(state, metrics, now=float(step), context="c", sources=())
        _check(snap, join(state, metrics, now=float(step), context="c", sources=()))
        if last is not None and step % 13:  # what did not move is the very object of the last snapshot
            before = {n.name: n for n in last.nodes}
            unchanged = [n for n in snap.nodes if n.name in before and before[n.name] is n]
            assert len(unchanged) >= len(snap.nodes) - 40
        last = snap
    # Most refreshes took the path that touches only what moved; the DCGM reads that named other GPUs with a
    # problem (two every 13 refreshes) took the full one. A read that moves only summaries moves no node.
    assert fulls["nodes"] <= 2 * (steps // 13) + 3, fulls
    # The pods' full joins: when the set of GPU nodes changed (a node came, went, or lost its label).
    assert fulls["pods"] <= steps // 7 + steps // 11 + 3, fulls


def test_moved_and_changed_keys_say_what_moved_or_that_too_much_did():
    a, b, c, d = object(), object(), object(), object()
    assert moved.moved((a, b, c), (a, d, c), 5) == [1]
    assert moved.moved((a, b), (a, b, c, d), 5) == [2, 3]  # appended
    assert moved.moved((a, b, c), (a, c), 5) == [1, 2]  # b deleted: c shifted, and the end is gone
    assert moved.moved((a, b, c), (d, d, d), 2) is None
    assert moved.changed_keys({1: "x", 2: "y"}, {1: "x", 2: "z", 3: "w"}, 5) == [2, 3]
    assert sorted(moved.changed_keys({1: "x", 2: "y"}, {1: "x"}, 5)) == [2]
    assert moved.changed_keys({1: "x"}, {1: "y", 2: "z"}, 1) is None


def test_what_is_worked_out_from_the_nodes_alone_is_shared_while_no_node_moves_and_never_stale():
    """A snapshot whose nodes are its predecessor's very tuple takes over what was worked out from them (the name
    map, the interrupted drains): no walk over 65,000 nodes per refresh. Whatever moved, each snapshot's map is
    its own nodes', and a snapshot copied with other nodes never reads its original's."""
    from dataclasses import replace

    from gputui.ops.drain.options import IN_PROGRESS, PHASE, resumable

    joiner, last, shared = Joiner(), None, 0
    for step, state, metrics in churn(NODES, PODS, STEPS):
        snap = joiner.join(state, metrics, now=float(step), context="c", sources=())
        assert snap.by_name() == {n.name: n for n in snap.nodes}
        assert resumable(snap) == [n.name for n in snap.nodes if n.annotations.get(PHASE) in IN_PROGRESS]
        if last is not None and snap.nodes is last.nodes:
            assert snap.by_name() is last.by_name()
        if step % 5 == 0:  # a refresh that read nothing new: the same nodes, so the same map
            again = joiner.join(state, metrics, now=step + 0.5, context="c", sources=())
            assert again.nodes is snap.nodes and again.by_name() is snap.by_name()
            snap, shared = again, shared + 1
        last = snap
    assert shared == len(range(0, STEPS, 5))
    assert last is not None
    first = last.nodes[0]
    other = replace(last, nodes=last.nodes[1:])
    assert other.node(first.name) is None and len(other.by_name()) == len(last.nodes) - 1
    assert last.node(first.name) is first

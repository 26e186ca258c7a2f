"""Sums over the fleet's nodes (the header's figures, the pools' rows) kept from one snapshot to the next, so a
refresh looks again only at the nodes that moved: at 65,000 nodes a few hundred change between two refreshes,
and walking all of them for every figure cost more than the changes (issue 18).

A NodeSums holds, per node name, its group (the fleet, or its pool), its contribution (numbers summed per group)
and an optional extra (its alerts). Each snapshot is compared with the last one: the nodes whose object moved
(moved.aligned, by name) and those whose GPU allocation moved are taken out of their group's sums and put
back as they are now. Small fleets, a change in what the sums depend on, and too much moved take the full
walk, which is also what the incremental path is tested against. Floating sums taken apart and put back
drift by an ulp at a time; a full walk every time the changes since the last one reach the fleet's size keeps
that far below what any figure shows.

What a node's DCGM summary gives (its utilisation; a hot GPU) is the metered part, summed apart: the summaries
live beside the nodes (gputui.vocabulary.gauges), and a DCGM read replaces all of them but moves no node. So the node's
part stays, and the metered part alone is summed again over every node, by a small function in one loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from gputui.base.moved import aligned, changed_keys, limit_for
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import GpuSummary, Node

# Below this many nodes every snapshot takes the full walk: it costs little, and its sums are exact.
INCREMENTAL_FROM = 4000

Contribution = tuple[Hashable, Sequence[float], Any]  # group, numbers, extra (kept when truthy)
Metered = Callable[[Node, "GpuSummary | None"], tuple[Sequence[float], Any]]  # numbers, extra from node and summary


def _name(node: Node) -> str:
    return node.name


def nodes_moved(nodes: tuple[Node, ...], allocation: Mapping[str, Mapping[str, int]], snap: ClusterSnapshot,
                ) -> tuple[list[str], dict[str, Node]] | None:
    """From the last snapshot's nodes and allocation to this snapshot's: the names to take out (nodes gone,
    replaced, or whose pods' GPUs moved) and the nodes to put back by name; None when too many moved for
    that to pay. What a sum or an order kept across snapshots must look at again."""
    limit = limit_for(len(snap.nodes))
    found = aligned(nodes, snap.nodes, _name, limit)
    allocated = changed_keys(allocation, snap.allocation, limit) if found is not None else None
    if found is None or allocated is None:
        return None
    changed, deleted = found
    new = snap.nodes
    gone = [nodes[i].name for i in deleted] + [nodes[i].name for i, _j in changed if i is not None]
    came = {new[j].name: new[j] for _i, j in changed}
    for name in allocated:  # the same node object, other pods on it: looked up in the snapshot's name map
        node = snap.node(name) if name not in came else None
        if node is not None:
            gone.append(name)
            came[name] = node
    return gone, came


class NodeSums:
    """`width` numbers per node from the node (and its allocation), and `metered` numbers from the node with its
    DCGM summary (gputui.vocabulary.gauges). The summaries live beside the nodes: a DCGM read replaces every one and moves
    no node, so the metered part alone is summed again, from its own small function, while the node's part
    stays as it was."""

    def __init__(self, width: int, metered: int = 0) -> None:
        self.width = width
        self.metered = metered
        self._lock = threading.Lock()  # the poll thread works the sums out; a view may ask too
        self._key: Hashable = None
        self._nodes: tuple[Node, ...] = ()
        self._allocated: Mapping[str, Mapping[str, int]] = {}
        self._summaries: Mapping[str, GpuSummary] = {}
        self._by_name: dict[str, tuple[Node, Contribution]] = {}
        self._groups: dict[Hashable, list[float]] = {}
        self._extras: dict[str, Any] = {}
        self._mgroups: dict[Hashable, list[float]] = {}
        self._mextras: dict[str, Any] = {}
        self._moved = 0

    def sums(self, snap: ClusterSnapshot, key: Hashable, contribution: Callable[[Node], Contribution],
             metered: Metered | None = None) -> tuple[dict[Hashable, list[float]], dict[str, Any]]:
        """Per group: [nodes, *sums of the numbers, *sums of the metered numbers]; per node with one: its extra,
        the metered one where there is one. `key` names everything the contributions depend on besides the
        node, its allocation and its summary (a threshold, pool labels): when it changes, every node is looked
        at again."""
        with self._lock:
            moved: tuple[list[tuple[Node, Hashable]], dict[str, Node]] | None = None
            if len(snap.nodes) >= INCREMENTAL_FROM and key == self._key and self._nodes:
                moved = self._update(snap, contribution)
            if moved is None:
                self._full(snap, key, contribution)
            if metered is not None:
                summaries = snap.summaries
                if moved is None or not (summaries is self._summaries or not (summaries or self._summaries)):
                    self._metered_full(snap, metered)
                else:
                    self._metered_moved(snap, metered, *moved)
                self._summaries = summaries
            groups = {g: v + self._mgroups.get(g, [0.0] * self.metered) for g, v in self._groups.items()}
            return groups, {**self._extras, **self._mextras}

    def _full(self, snap: ClusterSnapshot, key: Hashable, contribution: Callable[[Node], Contribution]) -> None:
        self._by_name, self._groups, self._extras = {}, {}, {}
        for node in snap.nodes:
            self._add(node, contribution(node))
        self._key, self._nodes, self._allocated, self._moved = key, snap.nodes, snap.allocation, 0

    def _update(self, snap: ClusterSnapshot, contribution: Callable[[Node], Contribution],
                ) -> tuple[list[tuple[Node, Hashable]], dict[str, Node]] | None:
        """The nodes that moved taken out and put back; None when too many moved. The nodes taken out (with
        their group) and those put back, for the metered part to do the same."""
        found = nodes_moved(self._nodes, self._allocated, snap)
        if found is None or self._moved > len(snap.nodes):
            return None
        gone, came = found
        taken = [held for held in map(self._remove, gone) if held is not None]
        for node in came.values():
            self._add(node, contribution(node))
        self._moved += len(gone) + len(came)
        self._nodes, self._allocated = snap.nodes, snap.allocation
        return taken, came

    def _metered_full(self, snap: ClusterSnapshot, metered: Metered) -> None:
        """Every node's metered part from scratch, in one tight loop: a DCGM read moves them all. Nothing is
        kept per node but the extras: a node that moves later is taken out by working its part out again from
        the node it was and the same summary (metered is a pure function of the two)."""
        groups: dict[Hashable, list[float]] = {}
        extras: dict[str, Any] = {}
        get, by_name, width = snap.summaries.get, self._by_name, self.metered
        for node in snap.nodes:
            name = node.name
            numbers, extra = metered(node, get(name))
            group = by_name[name][1][0]
            sums = groups.get(group)
            if sums is None:
                sums = groups[group] = [0.0] * width
            for i, value in enumerate(numbers):
                sums[i] += value
            if extra:
                extras[name] = extra
        self._mgroups, self._mextras = groups, extras

    def _metered_moved(self, snap: ClusterSnapshot, metered: Metered, taken: list[tuple[Node, Hashable]],
                       came: dict[str, Node]) -> None:
        """The summaries are those of the last time: only the nodes that moved take their metered part again."""
        get, groups, width = snap.summaries.get, self._mgroups, self.metered
        for node, group in taken:
            numbers, _extra = metered(node, get(node.name))
            sums = groups.setdefault(group, [0.0] * width)
            for i, value in enumerate(numbers):
                sums[i] -= value
            self._mextras.pop(node.name, None)
        for name, node in came.items():
            numbers, extra = metered(node, get(name))
            sums = groups.setdefault(self._by_name[name][1][0], [0.0] * width)
            for i, value in enumerate(numbers):
                sums[i] += value
            if extra:
                self._mextras[name] = extra

    def _add(self, node: Node, contributed: Contribution) -> None:
        group, numbers, extra = contributed
        self._by_name[node.name] = (node, contributed)
        sums = self._groups.get(group)
        if sums is None:
            sums = self._groups[group] = [0.0] * (self.width + 1)
        sums[0] += 1
        for i, value in enumerate(numbers, 1):
            sums[i] += value
        if extra:
            self._extras[node.name] = extra

    def _remove(self, name: str) -> tuple[Node, Hashable] | None:
        """Take the node out: the node it was and its group (None when it was not in)."""
        held = self._by_name.pop(name, None)
        if held is None:
            return None
        group, numbers, _extra = held[1]
        sums = self._groups[group]
        sums[0] -= 1
        for i, value in enumerate(numbers, 1):
            sums[i] -= value
        if not sums[0]:
            del self._groups[group]
        self._extras.pop(name, None)
        return held[0], group


# Clusters whose sums are kept at once: `:fleet` polls every one in turn, and a cluster's sums dropped before its next
# snapshot are a walk of its every node per read (with 8 kept, 20 clusters of 5,000 nodes took 60% of a core against
# 41% with each kept: benchmarks/fleet.py). A cluster's sums are a few hundred bytes a node.
CONTEXTS_KEPT = 64


class SumsByContext:
    """One NodeSums per cluster (the snapshot's context). `:fleet` works each cluster's figures out in turn:
    one NodeSums for all of them compared every snapshot with another cluster's last one and walked in full."""

    def __init__(self, width: int, metered: int = 0) -> None:
        self.width, self.metered = width, metered
        self._lock = threading.Lock()
        self._by_context: dict[str, NodeSums] = {}

    def sums(self, snap: ClusterSnapshot, key: Hashable, contribution: Callable[[Node], Contribution],
             metered: Metered | None = None) -> tuple[dict[Hashable, list[float]], dict[str, Any]]:
        with self._lock:
            kept = self._by_context.pop(snap.context, None)
            if kept is None:
                kept = NodeSums(self.width, self.metered)
                if len(self._by_context) >= CONTEXTS_KEPT:  # the cluster looked at longest ago goes
                    del self._by_context[next(iter(self._by_context))]
            self._by_context[snap.context] = kept  # last: the latest looked at
        return kept.sums(snap, key, contribution, metered)

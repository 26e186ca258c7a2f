"""Sums over the fleet's nodes (the header's figures, the pools' rows) kept from one snapshot to the next, so a
refresh looks again only at the nodes that moved: at 65,000 nodes a few hundred change between two refreshes,
and walking all of them for every figure cost more than the changes (issue 18).

A NodeSums holds, per node name, its group (the fleet, or its pool), its contribution (numbers summed per group)
and an optional extra (its alerts). Each snapshot is compared with the last one: the nodes whose object moved
(moved.aligned, by name) and those whose GPU allocation moved are taken out of their group's sums and put
back as they are now. Small fleets, a change in what the sums depend on, and too much moved (a metrics read
moves every node) take the full walk, which is also what the incremental path is tested against. Floating
sums taken apart and put back drift by an ulp at a time; a full walk every time the changes since the last one
reach the fleet's size keeps that far below what any figure shows.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Hashable, Mapping, Sequence

from gputui.model import Node
from gputui.moved import aligned, changed_keys, limit_for
from gputui.snapshot import ClusterSnapshot

# Below this many nodes every snapshot takes the full walk: it costs little, and its sums are exact.
INCREMENTAL_FROM = 4000

Contribution = tuple[Hashable, Sequence[float], Any]  # group, numbers, extra (kept when truthy)


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
    def __init__(self, width: int) -> None:
        self.width = width
        self._lock = threading.Lock()  # the poll thread works the sums out; a view may ask too
        self._key: Hashable = None
        self._nodes: tuple[Node, ...] = ()
        self._allocated: Mapping[str, Mapping[str, int]] = {}
        self._by_name: dict[str, tuple[Node, Contribution]] = {}
        self._groups: dict[Hashable, list[float]] = {}
        self._extras: dict[str, Any] = {}
        self._moved = 0

    def sums(self, snap: ClusterSnapshot, key: Hashable, contribution: Callable[[Node], Contribution],
             ) -> tuple[dict[Hashable, list[float]], dict[str, Any]]:
        """Per group: [nodes, *sums of the numbers]; per node with one: its extra. `key` names everything the
        contributions depend on besides the node and its allocation (a threshold, pool labels): when it changes,
        every node is looked at again."""
        with self._lock:
            if not (len(snap.nodes) >= INCREMENTAL_FROM and key == self._key and self._nodes
                    and self._update(snap, contribution)):
                self._full(snap, key, contribution)
            return {g: list(v) for g, v in self._groups.items()}, dict(self._extras)

    def _full(self, snap: ClusterSnapshot, key: Hashable, contribution: Callable[[Node], Contribution]) -> None:
        self._by_name, self._groups, self._extras = {}, {}, {}
        for node in snap.nodes:
            self._add(node, contribution(node))
        self._key, self._nodes, self._allocated, self._moved = key, snap.nodes, snap.allocation, 0

    def _update(self, snap: ClusterSnapshot, contribution: Callable[[Node], Contribution]) -> bool:
        found = nodes_moved(self._nodes, self._allocated, snap)
        if found is None or self._moved > len(snap.nodes):
            return False
        gone, came = found
        for name in gone:
            self._remove(name)
        for node in came.values():
            self._add(node, contribution(node))
        self._moved += len(gone) + len(came)
        self._nodes, self._allocated = snap.nodes, snap.allocation
        return True

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

    def _remove(self, name: str) -> None:
        held = self._by_name.pop(name, None)
        if held is None:
            return
        group, numbers, _extra = held[1]
        sums = self._groups[group]
        sums[0] -= 1
        for i, value in enumerate(numbers, 1):
            sums[i] -= value
        if not sums[0]:
            del self._groups[group]
        self._extras.pop(name, None)

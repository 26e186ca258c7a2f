"""The node table's order in a sort, kept from one snapshot to the next: the nodes that moved are taken out of
the sorted list and put back where their new key goes, instead of sorting the fleet again (at 65,000 nodes a
sort is some 100 ms of the poll thread, every refresh, for a few hundred nodes that moved; issue 18).

Entries are (sort key, name): the name breaks ties, so the order is total and equals a fresh sort's. The nodes
that moved are those fleet_sums.nodes_moved finds (the GPUs column sorts by allocation, so nodes whose pods
moved count), and, for a sort that reads the nodes' summaries (gputui.vocabulary.gauges), those whose summary moved in
what the sort reads (`metered`: a DCGM read moves every summary, but few nodes turn hot or cool). Too many,
or a sort that depends on something else that changed (the threshold, the majority driver, the pool labels:
the `key`), and the fleet is sorted afresh.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Mapping
from itertools import compress, islice
from operator import ne
from typing import Any

from gputui.base.moved import limit_for
from gputui.policy import fleet_sums
from gputui.policy.fleet_sums import nodes_moved
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import GpuSummary, Node

Metered = Callable[[GpuSummary | None], Any]

KEPT = 2  # orders kept: the sort in force and the next one `s` would show (worked out ahead)


class _Order:
    def __init__(self) -> None:
        self.nodes: tuple[Node, ...] = ()
        self.allocation: Mapping[str, Mapping[str, int]] = {}
        self.summaries: Mapping[str, GpuSummary] = {}
        self.keys: dict[str, tuple[Any, str]] = {}
        self.entries: list[tuple[Any, str]] = []
        self.moved = 0

    def full(self, snap: ClusterSnapshot, sort_key: Callable[[Node], Any]) -> None:
        self.keys = {n.name: (sort_key(n), n.name) for n in snap.nodes}
        self.entries = sorted(self.keys.values())
        self.nodes, self.allocation, self.summaries, self.moved = snap.nodes, snap.allocation, snap.summaries, 0

    def update(self, snap: ClusterSnapshot, sort_key: Callable[[Node], Any], metered: Metered | None) -> bool:
        found = nodes_moved(self.nodes, self.allocation, snap)
        if found is None or self.moved > len(snap.nodes):
            return False
        gone, came = found
        if metered is not None and snap.summaries is not self.summaries:
            resummed = self._resummed(snap, metered)
            if resummed is None:
                return False
            for name in resummed:
                node = snap.node(name)
                if node is not None and name not in came:  # (a node gone from the snapshot is among `gone`)
                    gone.append(name)
                    came[name] = node
        for name in gone:
            self._take(name)
        for name, node in came.items():
            entry = (sort_key(node), name)
            self.keys[name] = entry
            insort(self.entries, entry)
        self.moved += len(came)
        self.nodes, self.allocation, self.summaries = snap.nodes, snap.allocation, snap.summaries
        return True

    def _resummed(self, snap: ClusterSnapshot, metered: Metered) -> list[str] | None:
        """The nodes (of those sorted) whose summary moved in what the sort reads; None past the limit."""
        names = list(self.keys)
        # map() and compress() loop in C: at 65,000 nodes a DCGM read asks this of every node.
        was = map(metered, map(self.summaries.get, names))
        now = map(metered, map(snap.summaries.get, names))
        limit = limit_for(len(snap.nodes))
        out = list(islice(compress(names, map(ne, was, now)), limit + 1))
        return out if len(out) <= limit else None

    def _take(self, name: str) -> None:
        entry = self.keys.pop(name, None)
        if entry is not None:
            i = bisect_left(self.entries, entry)
            if i < len(self.entries) and self.entries[i] == entry:
                del self.entries[i]


class KeptOrders:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # the poll thread, the UI thread and the sort worked out ahead
        self._orders: dict[Hashable, _Order] = {}

    def names(self, snap: ClusterSnapshot, key: Hashable, sort_key: Callable[[Node], Any], reverse: bool,
              metered: Metered | None = None) -> list[str]:
        """Every node's name, sorted by (sort_key(node), name), reversed if asked. `metered`: what of a node's
        summary the sort key reads (None: nothing)."""
        with self._lock:
            order = self._orders.pop(key, None)
            if order is None:
                order = _Order()
            if not (len(snap.nodes) >= fleet_sums.INCREMENTAL_FROM and order.nodes and order.update(snap, sort_key, metered)):
                order.full(snap, sort_key)
            self._orders[key] = order  # the most recent last
            while len(self._orders) > KEPT:
                del self._orders[next(iter(self._orders))]
            names = [name for _key, name in order.entries]
        if reverse:
            names.reverse()
        return names

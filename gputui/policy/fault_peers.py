"""A node's GPU fault counts over a window against its pool's (issue 37 item 2): "XID 45 ×37 in 24 h; pool median
0, next worst 2". The counts come from one metrics read for the whole fleet (FaultWindow: the backend's); this
module holds the arithmetic and the words only.

The node is compared with the *other* nodes of its pool (gputui.policy.node_pools.pool_of): the median of their
counts and the worst of them (the "next worst"), the node itself left out of both, so one bad node does not move
the figure it is compared with. Fail closed: a read that failed is unknown with its reason, a family the node has
no series of in the window is "not collected", and neither is ever 0. A peer whose count is unknown is left out of
the median and the next worst, and counted (`peers_unknown`), so a partial pool says so.

Policy level: pure, no I/O.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gputui.policy.node_pools import DEFAULT_POOL_LABELS, pool_of
from gputui.vocabulary.gpu_faults import PCIE_REPLAY_FIELD, XID_FIELD
from gputui.vocabulary.model import Node

# The families counted over the window, and a kind's words. An XID is counted per code ("XID 45") and in all
# ("XID", every code together); the others are counters (or a flag) whose rises are summed over the window.
COUNTERS: tuple[str, ...] = (
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", PCIE_REPLAY_FIELD,
)
FAMILIES: tuple[str, ...] = (XID_FIELD, *COUNTERS)
XID_ANY = "XID"  # every code together
KIND_WORDS: Mapping[str, str] = {
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "uncorrectable ECC errors",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "rows remapped (uncorrectable)",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "row remap failures",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "NVLink recoveries",
    PCIE_REPLAY_FIELD: "PCIe replays",
}
DEFAULT_WINDOW_S = 24 * 3600.0
NOT_COLLECTED_WHY = "not collected: no {field} series for the node in the window"


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """What the metrics store says of every node's faults over a window (one read). `counts`: node -> kind ->
    count, kinds with a count above 0 only ("XID 45" per code, a counter by its DCGM field); `collected`: node ->
    the families it has a series of in the window (a family it lacks is not collected, never 0)."""

    window_s: float
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    collected: Mapping[str, frozenset[str]] = field(default_factory=dict)


def family_of(kind: str) -> str:
    return XID_FIELD if kind == XID_ANY or kind.startswith("XID ") else kind


def kind_words(kind: str) -> str:
    return KIND_WORDS.get(kind, kind)


def window_words(window_s: float) -> str:
    """`24 h`, `6 h`, `90 min`, `45 s`: the window as a line says it."""
    s = round(window_s)
    if s >= 3600 and s % 3600 == 0:
        return f"{s // 3600} h"
    if s >= 60 and s % 60 == 0:
        return f"{s // 60} min"
    return f"{s} s"


@dataclass(frozen=True, slots=True)
class PeerCount:
    """One kind of fault on one node over the window, against the other nodes of its pool."""

    kind: str
    window_s: float
    pool: str
    count: int | None  # None: unknown (`why` says why)
    pool_median: float | None  # of the other nodes whose count is known; None: none is
    pool_next_worst: int | None  # the worst other node's count; None: no other node's count is known
    peers: int  # other nodes in the pool
    peers_unknown: int = 0  # of them, how many have an unknown count (left out of the median and the next worst)
    why: str = ""

    def words(self) -> str:
        """`XID 45 ×37 in 24 h; pool median 0, next worst 2`."""
        what = kind_words(self.kind)
        if self.count is None:
            return f"{what}: unknown ({self.why})" if not self.why.startswith("not collected") else \
                f"{what}: {self.why}"
        head = f"{what} ×{self.count} in {window_words(self.window_s)}"
        if self.peers == 0:
            return f"{head}; no other node in pool {self.pool}"
        if self.pool_median is None:
            return f"{head}; pool {self.pool}: every other node's count unknown"
        partial = f" ({self.peers_unknown} of {self.peers} other nodes unknown)" if self.peers_unknown else ""
        return f"{head}; pool median {_number(self.pool_median)}, next worst {self.pool_next_worst}{partial}"

    @property
    def stands_out(self) -> bool:
        """Worth a line of its own: the node has some, or another node of its pool has."""
        return bool(self.count) or bool(self.pool_next_worst)

    def to_dict(self) -> dict[str, Any]:
        """As `gputui nodes -o json` lists it (per node `fault_peers`)."""
        out: dict[str, Any] = {"kind": self.kind, "window": window_words(self.window_s), "window_s": self.window_s,
                               "pool": self.pool, "count": self.count,
                               "pool_median": self.pool_median, "pool_next_worst": self.pool_next_worst,
                               "pool_others": self.peers, "pool_others_unknown": self.peers_unknown}
        if self.count is None:
            out["unknown"] = self.why
        return out


def _number(x: float) -> str:
    return f"{x:g}"


def median(values: Iterable[int]) -> float | None:
    """The middle value (the mean of the two middle ones for an even number); None for none."""
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def node_count(window: FaultWindow, node: str, kind: str) -> tuple[int | None, str]:
    """The node's count of a kind, or None and why: 0 only when the family's series exists in the window."""
    fam = family_of(kind)
    if fam not in window.collected.get(node, frozenset()):
        return None, NOT_COLLECTED_WHY.format(field=fam)
    counts = window.counts.get(node, {})
    if kind == XID_ANY:
        return sum(v for k, v in counts.items() if k.startswith("XID ")), ""
    return counts.get(kind, 0), ""


def compare(window: FaultWindow | None, error: str, pools: Mapping[str, str],
            window_s: float = DEFAULT_WINDOW_S, only: str | None = None) -> dict[str, list[PeerCount]]:
    """Every node's counts against the other nodes of its pool (`only`: that node's alone, its pool still read
    whole). `pools`: node -> pool, every node compared (a node the window does not name has nothing collected);
    `window` None: the read (of `window_s`) failed, `error` says why, and every count is unknown. The kinds of a
    node: XID (every code), each counter family, then each XID code any node of its pool had in the window.

    Each kind's known counts are sorted once per pool; a node's "others" are that list less one copy of its own
    count, read by position: a pool of 100,000 nodes is compared in a second, where a walk over the others for
    each node never finished (node detail at 100,000 nodes: benchmarks/keys.py)."""
    members: dict[str, list[str]] = {}
    for node, pool in pools.items():
        if only is None or pool == pools.get(only):
            members.setdefault(pool, []).append(node)
    out: dict[str, list[PeerCount]] = {}
    for pool, nodes in members.items():
        codes = sorted({k for n in nodes for k in (window.counts.get(n, {}) if window else {}) if k.startswith("XID ")},
                       key=lambda k: int(k.split()[1]))
        kinds = (XID_ANY, *COUNTERS, *codes)
        shown = nodes if only is None else [only]
        for kind in kinds:
            read = {n: node_count(window, n, kind) if window is not None else (None, error or "not read")
                    for n in nodes}
            known = sorted(c for c, _ in read.values() if c is not None)
            for n in shown:
                count, why = read[n]
                others = _Without(known, count)
                out.setdefault(n, []).append(PeerCount(
                    kind, window.window_s if window is not None else window_s, pool, count, others.median(),
                    others.max(), len(nodes) - 1, len(nodes) - 1 - len(others), why))
    return out


class _Without:
    """A sorted list less one copy of `value` (None: nothing taken out), read without copying it."""

    def __init__(self, ordered: list[int], value: int | None) -> None:
        self.ordered = ordered
        self.gap = bisect_left(ordered, value) if value is not None else None  # where the copy taken out was

    def __len__(self) -> int:
        return len(self.ordered) - (self.gap is not None)

    def __getitem__(self, i: int) -> int:
        return self.ordered[i + 1 if self.gap is not None and i >= self.gap else i]

    def median(self) -> float | None:
        n = len(self)
        if not n:
            return None
        mid = n // 2
        return float(self[mid]) if n % 2 else (self[mid - 1] + self[mid]) / 2

    def max(self) -> int | None:
        return self[len(self) - 1] if len(self) else None


def fleet_peers(nodes: Iterable[Node], window: FaultWindow | None, error: str,
                keys: Iterable[str] = DEFAULT_POOL_LABELS, window_s: float = DEFAULT_WINDOW_S,
                only: str | None = None) -> dict[str, list[PeerCount]]:
    """compare() over a snapshot's nodes, each in the pool its labels name (node_pools.pool_of)."""
    keys = tuple(keys)
    return compare(window, error, {n.name: pool_of(n.labels, keys) for n in nodes}, window_s, only)


def lines(peers: Iterable[PeerCount], limit: int | None = None) -> list[str]:
    """A node's lines (line_items' words)."""
    return [text for text, _ in line_items(peers, limit)]


def line_items(peers: Iterable[PeerCount], limit: int | None = None) -> list[tuple[str, bool]]:
    """A node's lines, each with whether it asks to be looked at (the node has some, or its count is unknown):
    each kind that stands out (the node or another node of its pool has some; the XID total only when no code's
    own line is shown), each unknown kind, the families not collected in one line; when nothing stands out, one
    line saying so first. A failed read is one line."""
    peers = list(peers)
    if not peers:
        return []
    window = window_words(peers[0].window_s)
    unknown = [p for p in peers if p.count is None and not p.why.startswith("not collected")]
    if len(unknown) == len(peers) and len({p.why for p in unknown}) == 1:
        return [(f"fault counts over {window} unknown: {unknown[0].why}", True)]
    out: list[tuple[str, bool]] = []
    standing = [p for p in peers if p.count is not None and p.stands_out]
    codes = any(p.kind.startswith("XID ") for p in standing)
    if not standing:
        out.append((f"no fault counted in {window} on this node or the other nodes of pool {peers[0].pool}", False))
    out += [(p.words(), bool(p.count)) for p in standing if not (p.kind == XID_ANY and codes)]
    out += [(p.words(), True) for p in unknown]
    missing = dict.fromkeys("XID" if family_of(p.kind) == XID_FIELD else kind_words(p.kind)
                            for p in peers if p.count is None and p.why.startswith("not collected"))
    if missing:
        out.append((f"not collected over {window}: {', '.join(missing)} (no series for the node)", True))
    return out if limit is None else out[:limit]


def own_lines(peers: Iterable[PeerCount]) -> list[str]:
    """The lines of the kinds the node itself has some of (the XID total only when no code's line is), or the
    one line of a failed read: what node detail's header shows (describe shows every line)."""
    items = line_items(peers)
    if len(items) == 1 and items[0][0].startswith("fault counts over"):
        return [items[0][0]]
    peers = list(peers)
    mine = [p for p in peers if p.count]
    codes = any(p.kind.startswith("XID ") for p in mine)
    return [p.words() for p in mine if not (p.kind == XID_ANY and codes)]

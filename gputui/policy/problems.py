"""What needs attention, counted one way everywhere (issue 35): nodes, not alerts. A node with eight hot GPUs
is one hot node, not eight alerts; a node whose GPU fell off the bus is one XID node, whatever else that
fault raises (a lost device, a failed health check, a condition). The header, the `/alert` filter, the
diagnostics (`d`), `gputui check` and the wallboard all count these, so their numbers agree.

A problem that comes and goes within a minute (a GPU hovering at the temperature threshold) is *flapping*:
it stays counted, marked so, until it has been gone for a whole minute, instead of being counted in and out
at every refresh (ProblemMemory). Pure: no I/O, no Textual."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from gputui.policy.cordon_record import CordonRecord, read_record, shown_time
from gputui.policy.health import DEFAULT_TEMP_ALERT_C, Alert, Finding, Severity, diagnose, node_alerts
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.disruptions import CORDON_RECORD
from gputui.vocabulary.model import GpuSummary, Node

FLAP_WINDOW_S = 60.0  # a problem gone and back within this is flapping; gone this long, it is gone

EXPIRED_CORDON = "cordon expired"  # the kind of a node whose gputui cordon is past its expiry (expired_cordon_alert)
# The header's word for a node's problem, by its worst alert's kind (health.node_alerts' kinds).
KIND_WORDS = {"NotReady": "NotReady", "Lost": "GPU lost", "XID": "XID", "Health": "health", "Condition": "health",
              "Fault": "health", "Upgrade": "upgrade failed", "Temp": "hot",  # Fault: a DCGM field (gpu_faults)
              "Cordon": EXPIRED_CORDON}
FLAPPING = "flapping"
# worst first, as counted
KIND_ORDER = ("NotReady", "XID", "GPU lost", "health", "upgrade failed", "hot", EXPIRED_CORDON)


@dataclass(frozen=True, slots=True)
class Problem:
    """One node that needs attention: its worst problem, in words of three lengths."""

    node: str
    severity: Severity
    kind: str  # what it counts as: NotReady, XID, GPU lost, health, upgrade failed, hot
    word: str  # the worst problem in a word that fits a narrow column whole: NotReady, XID 79, 96°C, upgrade ✗
    detail: str  # the worst alert's message
    alerts: tuple[Alert, ...]  # every alert of the node, worst first
    flapping: bool = False  # came and went within FLAP_WINDOW_S
    present: bool = True  # False: gone now, but seen within FLAP_WINDOW_S (flapping)

    def words(self) -> list[str]:
        """Each distinct problem's word, worst first (the worst as `word` says it)."""
        out = [self.word]
        for a in self.alerts:
            if a.short not in out and not (a.kind == "Temp" and self.kind == "hot"):
                out.append(a.short)
        return out

    def details(self) -> str:
        """Every alert of the node in words, per-GPU ones grouped: `XID 79 …; 4 GPUs hot, the hottest 96°C`."""
        parts: list[str] = [] if self.kind == "hot" else [self.detail]  # the worst problem's own words first
        hot = [a for a in self.alerts if a.kind == "Temp"]
        for a in self.alerts:
            if a.kind != "Temp":
                parts.append(a.message)
            elif a is hot[0]:
                hottest = max(hot, key=_temp_of).short
                parts.append(a.message if len(hot) == 1 else f"{len(hot)} GPUs hot, the hottest {hottest}")
        text = "; ".join(dict.fromkeys(parts))
        if not self.present:
            return f"gone now, back and forth within the last minute ({text})"
        return f"{FLAPPING}: {text}" if self.flapping else text

    def cell(self, width: int) -> str:
        """What a table cell of `width` says: the worst problem's word in full, then the others while they fit
        whole; a flapping problem says `flapping` first (the word beside it where it fits)."""
        if self.flapping:
            long = f"{FLAPPING} ({self.word})" if not self.present else f"{self.word}, {FLAPPING}"
            return long if len(long) <= width else FLAPPING
        words = self.words()
        text = words[0]
        for w in words[1:]:
            if len(text) + 2 + len(w) > width:
                break
            text += f", {w}"
        return text


@lru_cache(maxsize=4096)
def _record(raw: str) -> CordonRecord | None:
    """A record read once per distinct annotation (a frozen value, shared): the fleet's figures ask every cordoned
    node at every snapshot, and a read is JSON and two time parses (at 650 cordoned nodes, 26 ms a snapshot)."""
    return read_record({CORDON_RECORD: raw})


def expired_cordon_alert(node: Node, now: float) -> Alert | None:
    """A cordon through gputui past the expiry its owner gave (issue 40 item 2): an alert, the least severe (a person
    is to uncordon it or give a new expiry; nothing is broken), with who, why, the ticket and since when. Not in
    health.node_alerts, whose answer is kept per node object and holds no clock: the caller gives `now` (the
    snapshot's taken_at)."""
    raw = node.annotations.get(CORDON_RECORD) if node.unschedulable else None
    record = _record(raw) if raw is not None else None
    if record is None or record.expires is None or not record.expired(now):
        return None
    said = replace(record, expires=None).words(now)  # who, why, the ticket, since: the expiry is said once, first
    return Alert(node.name, "Cordon", f"cordon expired {shown_time(record.expires)} (by {said})", Severity.CORDONED,
                 "expired")


def expired_cordons(snapshot: ClusterSnapshot) -> list[Alert]:
    """Every node's expired cordon, as of the snapshot: what the fleet's alerts add to health.fleet_alerts
    (figures.alerts, whence the header, `d`, the wallboard and the fleet's rows count)."""
    def walk() -> list[Alert]:  # once per snapshot: a fleet's row asks of every read (policy.fleet.same_figures)
        found = (expired_cordon_alert(n, snapshot.taken_at) for n in snapshot.nodes if n.unschedulable)
        return [a for a in found if a is not None]

    return snapshot.derived("expired cordons", walk)


def alerts_at(node: Node, now: float, temp_threshold: float = DEFAULT_TEMP_ALERT_C,
              summary: GpuSummary | None = None) -> list[Alert]:
    """Every alert of one node as of `now`, worst first: health.node_alerts (the node alone, kept per node object)
    and what needs a clock, an expired gputui cordon (the least severe: last). The one per-node answer of every
    view that shows or counts a node's alerts against a clock (the Problem column, `gputui nodes`, `gputui
    check`, the wallboard), so that they count what the fleet's figures count (expired_cordons)."""
    alerts = node_alerts(node, temp_threshold, summary)
    expired = expired_cordon_alert(node, now) if node.unschedulable else None
    return alerts if expired is None else [*alerts, expired]


def snapshot_alerts(snapshot: ClusterSnapshot, node: Node, temp_threshold: float = DEFAULT_TEMP_ALERT_C) -> list[Alert]:
    """alerts_at as of the snapshot: its time and the node's DCGM summary."""
    return alerts_at(node, snapshot.taken_at, temp_threshold, snapshot.summary(node))


def problem_of(alerts: Sequence[Alert]) -> Problem | None:
    """A node's problem from its alerts (worst first, as health.node_alerts gives them); None without any.
    Among the worst alerts an XID names the cause (a GPU lost because it fell off the bus is XID 79), and the
    hottest GPU stands for a hot node."""
    if not alerts:
        return None
    worst = alerts[0].severity
    top = [a for a in alerts if a.severity == worst]
    chosen = next((a for a in top if a.kind == "XID"), top[0])
    if chosen.kind == "Temp":
        chosen = max(top, key=_temp_of)
    return Problem(chosen.node, worst, KIND_WORDS.get(chosen.kind, chosen.kind), chosen.short, chosen.message,
                   tuple(alerts))


def _temp_of(alert: Alert) -> float:
    try:
        return float(alert.short.removesuffix("°C"))
    except ValueError:
        return float("-inf")


def problems_of(alerts: Iterable[Alert]) -> list[Problem]:
    """One problem per node from alerts worst first across the fleet (health.fleet_alerts, figures.alerts):
    worst first, in the order each node's worst alert came."""
    by_node: dict[str, list[Alert]] = {}
    for a in alerts:
        by_node.setdefault(a.node, []).append(a)
    found = (problem_of(sorted(own, key=lambda a: a.severity)) for own in by_node.values())
    return sorted((p for p in found if p is not None), key=lambda p: p.severity)


def counts(problems: Iterable[Problem]) -> list[tuple[str, int, int]]:
    """(kind, nodes, of which flapping), worst kind first."""
    seen: dict[str, list[int]] = {}
    order: dict[str, Severity] = {}
    for p in problems:
        entry = seen.setdefault(p.kind, [0, 0])
        entry[0] += 1
        entry[1] += p.flapping
        order[p.kind] = min(order.get(p.kind, p.severity), p.severity)
    return [(kind, n, f) for kind, (n, f) in sorted(seen.items(), key=lambda kv: order[kv[0]])]


def count_words(problems: Sequence[Problem]) -> str:
    """`1 NotReady, 1 XID, 1 upgrade failed, 1 hot (flapping)`: nodes per kind, worst first."""
    parts = []
    for kind, n, flapping in counts(problems):
        mark = "" if not flapping else f" ({FLAPPING})" if flapping == n else f" ({flapping} {FLAPPING})"
        parts.append(f"{n} {kind}{mark}")
    return ", ".join(parts)


def headline(problems: Sequence[Problem]) -> str:
    """`4 nodes need attention`, or `no node needs attention`."""
    n = len(problems)
    if not n:
        return "no node needs attention"
    return f"{n} node{'s' if n != 1 else ''} need{'s' if n == 1 else ''} attention"


def summary(problems: Sequence[Problem]) -> str:
    """`4 nodes need attention: 1 NotReady, 1 XID, 1 upgrade failed, 1 hot`."""
    words = count_words(problems)
    return f"{headline(problems)}: {words}" if words else headline(problems)


class ProblemMemory:
    """What needs attention over the last minute, as far as gputui watched: each node's problem when last seen
    and the times it came or went. Only nodes with a problem within the window are kept (most of a fleet has
    none). `observe` is called once per snapshot (the poll thread) and hands back the flapping problems, the
    same object while they do not change, so a view can tell it has nothing to redraw."""

    def __init__(self, window_s: float = FLAP_WINDOW_S) -> None:
        self.window_s = window_s
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[Problem, float, tuple[float, ...]]] = {}  # node -> (problem, last seen, flips)
        self._present: frozenset[str] = frozenset()
        self._flaps: Mapping[str, Problem] = {}

    def observe(self, problems: Iterable[Problem], now: float) -> Mapping[str, Problem]:
        """The problems seen now; returns the flapping ones by node (gone now but seen within the window, or
        back within the window after going)."""
        with self._lock:
            current = {p.node: p for p in problems}
            cutoff = now - self.window_s
            seen: dict[str, tuple[Problem, float, tuple[float, ...]]] = {}
            for node, (problem, last, flips) in self._seen.items():
                flips = tuple(t for t in flips if t > cutoff)
                if node in current:
                    continue
                if node in self._present:  # went just now
                    flips += (now,)
                if last > cutoff:
                    seen[node] = (problem, last, flips)
            for node, problem in current.items():
                old = self._seen.get(node)
                flips = tuple(t for t in old[2] if t > cutoff) if old is not None else ()
                if old is not None and node not in self._present and old[1] > cutoff:
                    flips += (now,)  # back within the window
                seen[node] = (problem, now, flips)
            self._seen = seen
            self._present = frozenset(current)
            flaps: dict[str, Problem] = {}
            for node, (problem, _last, flips) in seen.items():
                if node not in current:
                    flaps[node] = replace(problem, flapping=True, present=False)
                elif flips:
                    flaps[node] = replace(problem, flapping=True)
            if flaps != self._flaps:
                self._flaps = flaps
            return self._flaps


def with_flaps(problems: Sequence[Problem], flaps: Mapping[str, Problem]) -> list[Problem]:
    """The problems seen now, the flapping ones marked and those gone within the window kept: worst first."""
    if not flaps:
        return list(problems)
    out = [flaps.get(p.node, p) for p in problems]
    here = {p.node for p in problems}
    out += [p for node, p in flaps.items() if node not in here]
    return sorted(out, key=lambda p: p.severity)


def findings(problems: Sequence[Problem], snap: ClusterSnapshot) -> list[Finding]:
    """The diagnostics list: each node that needs attention first (one finding per node, its worst problem's
    word as the kind), then the troubleshooting findings (health.diagnose) but the lost GPUs, which are those
    nodes' own problems already."""
    own = [Finding(p.word if p.present else FLAPPING, p.node, p.details()) for p in problems]
    named = {p.node for p in problems}
    return own + [f for f in diagnose(snap) if not (f.kind == "GpuLost" and f.subject in named)]

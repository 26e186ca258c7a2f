"""A drain batch's progress as every front end shows it: one row per pod, one state per node, folded from the
events the run yields, and which event is news. The TUI's board (ui/runs/drain, ui/screens/drain_progress, ui/screens/drains_list) and
`gputui drain` (cli/drain) render this fold; neither keeps a state machine of its own.

A pod's row is the last thing that happened to it (None: nothing yet, pending), its live count while waited on,
its deadline, its PDB tries, and its time out of rotation (from which the board estimates when it empties). An
event is news when it says something the row did not hold: a state entered, a count that moved while waiting,
the first PDB refusal (the later ones only count), a pause for another reason."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputui.ops.drain.events import FINAL, DrainEvent
from gputui.ops.drain.events import EventKind as K
from gputui.ops.drain.out_of_rotation import KEPT_RUNNING

MOVED = frozenset({K.GONE, K.EVICTED, K.REPLACED})  # its pod left the node (or is leaving it)
SETTLED = MOVED | {K.FAILED, K.HELD}  # nothing left to do to it: no live count, no "evict now"


@dataclass
class PodRow:
    """One pod as the drain's front ends show it."""

    node: str
    pod: str
    state: K | None = None  # the last thing that happened to it (None: nothing yet, pending)
    sessions: int | None = None
    message: str = ""
    deadline: float | None = None  # when the wait ends (epoch seconds)
    tries: int = 0  # PDB 429s so far
    last_try: float | None = None
    out_since: float | None = None  # taken out of rotation then (None: in rotation)
    rotation_note: str = ""  # why it is in rotation, when the drain keeps it there
    decay_from: tuple[float, int] | None = None  # its first count after it went out: the decay's start
    put_back: bool = False  # the operator put it back: the drain leaves it in rotation

    @property
    def waiting(self) -> bool:
        return self.state is K.WAITING

    @property
    def moved(self) -> bool:
        return self.state in MOVED

    @property
    def settled(self) -> bool:
        return self.state in SETTLED

    def empty_in(self, now: float, mean_s: float | None = None) -> float | None:
        """Seconds until it holds no session, from its own decay since it went out of rotation; without a
        decay yet, its engine's mean request time (what is in flight ends within about that). None: no
        estimate."""
        if self.out_since is None or self.sessions is None:
            return None
        if self.sessions == 0:
            return 0.0
        if self.decay_from is not None:
            t0, s0 = self.decay_from
            if s0 > self.sessions and now > t0:
                return self.sessions / ((s0 - self.sessions) / (now - t0))
        # n requests in flight, each ending in about `mean_s`: the last one ends after about mean x H(n).
        return mean_s * sum(1.0 / k for k in range(1, self.sessions + 1)) if mean_s is not None else None


@dataclass
class DrainProgress:
    """Every pod's row and every node's state (absent: queued), folded from the batch's events by `apply`."""

    pods: dict[str, PodRow] = field(default_factory=dict)
    node_state: dict[str, K] = field(default_factory=dict)
    paused_for: dict[str, str] = field(default_factory=dict)  # node -> the reason of its pause under way

    def apply(self, event: DrainEvent, now: float) -> bool:
        """Fold one event in; True when it is news (see the module's docstring), False for a repeat or a tick."""
        if event.kind is K.TICK:
            return False
        if event.pod:
            return self._pod(event, now)
        if event.kind is K.INFO:  # a word about a node (cordoned with its batch) is no state of it
            return True
        self.node_state[event.node] = event.kind
        if event.kind is K.PAUSED:
            reason = event.message.split(";")[0]  # "…; trying again in 4s": the backoff is no news
            news = self.paused_for.get(event.node) != reason
            self.paused_for[event.node] = reason
            return news
        self.paused_for.pop(event.node, None)
        return True

    def _pod(self, event: DrainEvent, now: float) -> bool:
        row = self.pods.get(event.pod)
        if row is None:
            row = self.pods[event.pod] = PodRow(event.node, event.pod)
        news = True
        if event.kind is K.OUT_OF_ROTATION:
            row.out_since, row.decay_from, row.rotation_note = now, None, ""
        elif event.kind is K.IN_ROTATION:
            row.out_since, row.decay_from = None, None
            row.rotation_note = event.message
        elif event.kind is K.INFO and event.message.startswith(KEPT_RUNNING):
            row.rotation_note = event.message
        elif event.kind not in (K.SESSIONS_CUT, K.INFO):
            if event.kind is K.WAITING:  # waited on again: news only when its count moved
                news = row.state is not K.WAITING or row.sessions != event.sessions
            row.state = event.kind
        if event.kind is K.WAITING:
            row.sessions, row.deadline = event.sessions, event.deadline
            if row.out_since is not None and row.decay_from is None and event.sessions is not None:
                row.decay_from = (now, event.sessions)
        elif event.kind not in (K.OUT_OF_ROTATION, K.IN_ROTATION, K.INFO):
            row.message = event.message
        if event.kind is K.BLOCKED:
            row.tries, row.last_try = event.count, now
            news = event.count <= 1  # one line per blocked pod, with its count: not one per retry
        return news

    def nodes_ended(self) -> int:
        return sum(1 for state in self.node_state.values() if state in FINAL)

    def on(self, node: str) -> list[PodRow]:
        return [r for r in self.pods.values() if r.node == node]

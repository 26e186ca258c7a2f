"""A pod's live sessions: whether it has any to lose, and how many one snapshot read.

The counts are not fields of the pod. They move at every scrape while the pod does not; a snapshot holds
them in one map (ClusterSnapshot.session_counts, keyed by namespace and name), so a refresh in which only
counts moved builds one dict, not a new object for every pod (issue 18: at 65,000 pods that was a quarter
of the steady CPU). What is the pod's own is whether it is an inference pod by its labels or its service
(InferencePod.session_signal / session_opt_out); a session series naming it says so too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

# A pod label that says whether the pod exports a session count, overriding what gputui infers:
# "true" for an inference pod outside any service gputui finds, "false" for a GPU pod that serves
# no sessions (a batch job grouped with a service by its labels).
SESSION_SIGNAL_LABEL = "gputui.io/session-signal"

# A session gauge that answered NaN or +-Inf: the series is there but says nothing (counts are never
# negative, so neither mark below can be mistaken for one).
UNREADABLE = -1
# A pod whose series vanished or could not be read: it had a session signal, so its count is unknown, never 0.
GONE = -2

# Live requests per (namespace, pod): running and waiting summed (the store sums them, one query: see
# session_metrics), or UNREADABLE, or GONE.
SessionCounts = Mapping[tuple[str, str], int]


class SessionState(str, Enum):
    """The three states of a pod's live session count. Unknown is never zero."""

    KNOWN = "known"  # a number, read now
    UNKNOWN = "unknown"  # an inference pod whose count cannot be read now (series gone, NaN, Prometheus down)
    NONE = "none"  # no session signal: not an inference pod


@dataclass(frozen=True, slots=True)
class PodSessions:
    """One pod's sessions as one read saw them."""

    state: SessionState
    live: int | None = None  # running + waiting; a number only when KNOWN

    @property
    def text(self) -> str:
        """As every output writes it: a number, "unknown", or "–" (not an inference pod)."""
        if self.state is SessionState.KNOWN:
            return str(self.live)
        return "unknown" if self.state is SessionState.UNKNOWN else "–"


@dataclass(frozen=True, slots=True)
class Arrivals:
    """How fast new sessions reach a pod, read from its engine's counters (backends.prom_arrivals)."""

    rate_per_s: float  # finished requests per second: in a steady state, what arrives
    mean_s: float | None = None  # mean time a request is held, end to end; None when unread

    def held(self) -> float | None:
        """Sessions it holds while they keep arriving at this rate (Little's law), None without a mean."""
        return self.rate_per_s * self.mean_s if self.mean_s is not None else None


NO_SIGNAL = PodSessions(SessionState.NONE)
UNKNOWN = PodSessions(SessionState.UNKNOWN)


def signal_of(labels: Mapping[str, str], service: str) -> tuple[bool, bool]:
    """(signal, opt_out) from what the pod itself says: an inference pod because its label says so or it
    belongs to an inference service; opted out when its label says "false" (then a series naming it does not
    make it one either)."""
    override = labels.get(SESSION_SIGNAL_LABEL, "").strip().lower()
    if override in ("true", "false"):
        return override == "true", override == "false"
    return bool(service), False


def read_sessions(signal: bool, opt_out: bool, count: int | None) -> PodSessions:
    """A pod's sessions from its entry in a snapshot's counts (None: no series names it, nor did one)."""
    if count is None:
        return UNKNOWN if signal else NO_SIGNAL
    if count == GONE:  # a series named it and is gone, or could not be read
        return UNKNOWN if signal or not opt_out else NO_SIGNAL
    if count < 0:
        return UNKNOWN
    return PodSessions(SessionState.KNOWN, count)

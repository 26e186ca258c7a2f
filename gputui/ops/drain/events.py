"""What a running drain tells its driver, and what the operator tells a running drain."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import Enum


class EventKind(str, Enum):
    STARTED = "started"  # cordoned and recorded on the node
    WAITING = "waiting"  # an inference pod's sessions (known or unknown) are being waited for
    BLOCKED = "blocked"  # a PDB answered 429; `count` says how many tries so far
    EVICTED = "evicted"  # the Eviction API (or a forced delete) accepted it
    SESSIONS_CUT = "sessions-cut"  # an eviction the operator chose cut live sessions (or possibly did)
    GONE = "gone"  # the API confirms the pod gone (404 or another UID)
    # The pod planned was replaced under its name before its eviction (the UID precondition's 409): it is gone; the
    # new one is not the drain's, and was not evicted.
    REPLACED = "replaced"
    HELD = "held"  # left in place: its count was unknown at the deadline and no eviction was chosen
    FAILED = "failed"
    PAUSED = "paused"  # the API or the reader failed; retrying with backoff, nothing marked done
    RESUMED = "resumed"
    INFO = "info"
    OUT_OF_ROTATION = "out-of-rotation"  # its serving label removed: no new sessions reach it
    IN_ROTATION = "in-rotation"  # its label back (left in place, aborted, or the operator asked)
    ABORTED = "aborted"
    DONE = "done"  # every pod gone, confirmed by the API
    TICK = "tick"  # one poll finished: lets a batch interleave several drains


# Node-level outcomes: a drain that ended with one of these is over.
FINAL = frozenset({EventKind.DONE, EventKind.ABORTED, EventKind.FAILED})


@dataclass(frozen=True, slots=True)
class DrainEvent:
    node: str
    kind: EventKind
    pod: str = ""
    message: str = ""
    sessions: int | None = None  # the pod's live sessions, when known
    deadline: float | None = None  # when the pod's wait ends (epoch seconds), for waiting pods
    count: int = 0  # for BLOCKED: tries so far


class DrainControl:
    """What the operator asks of a running drain, from another thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._evict_now: set[str] = set()
        self._extend: dict[str, float] = {}
        self._put_back: set[str] = set()
        self.aborted = False
        self.uncordon_on_abort = False

    def evict_now(self, pod_key: str) -> None:
        with self._lock:
            self._evict_now.add(pod_key)

    def extend(self, pod_key: str, seconds: float) -> None:
        with self._lock:
            self._extend[pod_key] = self._extend.get(pod_key, 0.0) + seconds

    def put_back(self, pod_key: str) -> None:
        """Back in rotation, and kept there by this drain (it then waits on the pod as on one with no switch)."""
        with self._lock:
            self._put_back.add(pod_key)

    def take_put_backs(self) -> set[str]:
        with self._lock:
            asked, self._put_back = self._put_back, set()
            return asked

    def abort(self, uncordon: bool = False) -> None:
        self.aborted, self.uncordon_on_abort = True, uncordon

    def take(self, pod_key: str) -> tuple[bool, float]:
        with self._lock:
            return pod_key in self._evict_now, self._extend.pop(pod_key, 0.0)

"""What a drain does with the EvictionRequest API (KEP-4563, alpha; gputui.vocabulary.eviction_requests): the plan
shows each moving pod's pending EvictionRequests and names as a blocker a pod whose eviction another responder is
handling; the run re-checks on each fresh read and never evicts such a pod (it waits, and at its deadline leaves the
pod in place). Pure.

Where the API is not served nothing changes. Where it is served but unreadable (forbidden, failing) the plan warns
that they are unknown and the drain goes on: the API is alpha and off by default, so a role written before it (most)
may not read it, and refusing every drain there would stop the tool for a feature nobody may be using; what the
drain does is said in the plan before anything is written. The run never knows less than its plan did: a drain
planned on a read of them waits, saying why, while they are unknown, rather than evict blind."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.disruptions import NOT_INSTALLED, READ, UNKNOWN
from gputui.vocabulary.eviction_requests import EvictionIndex, Handler, read_state, request_words

RBAC_HINT = "docs/rbac.yaml grants get/list/watch on lifecycle.k8s.io evictionrequests and evictions"


@dataclass(frozen=True, slots=True)
class PodEvictionApi:
    """One moving pod's part: its pending EvictionRequests in words, and the responder handling it (if another)."""

    requests: tuple[str, ...] = ()
    requesters: tuple[str, ...] = ()
    handler: Handler | None = None


NOTHING = PodEvictionApi()  # no request, no other responder (or the API not served)


@dataclass(frozen=True, slots=True)
class EvictionApiView:
    """The API's state as one snapshot read it, and its objects indexed by pod."""

    state: str  # READ, NOT_INSTALLED, "unknown: <why>"
    index: EvictionIndex
    now: float

    @classmethod
    def of(cls, snapshot: ClusterSnapshot) -> EvictionApiView:
        actors = snapshot.actors
        if actors is None:  # a view that carries no actors' objects (hand-built, or a reader without them)
            return cls(NOT_INSTALLED, EvictionIndex(), snapshot.taken_at)
        return cls(read_state(actors.reads), EvictionIndex.of(actors.eviction_requests, actors.evictions),
                   snapshot.taken_at)

    @property
    def served(self) -> bool:
        return self.state != NOT_INSTALLED

    @property
    def unknown(self) -> bool:
        return self.state.startswith(UNKNOWN)

    def pod(self, namespace: str, name: str, uid: str) -> PodEvictionApi:
        """Read even when the state is unknown: the last records seen still name a responder (fail closed)."""
        if not self.served:
            return PodEvictionApi()
        pending = self.index.pending(namespace, name, uid)
        return PodEvictionApi(tuple(request_words(r, self.now) for r in pending),
                              tuple(dict.fromkeys(r.requester for r in pending)),
                              self.index.handler(namespace, name, uid, self.now))

    def warning(self, moving: int) -> str:
        """The plan's warning when they are unknown ("" otherwise)."""
        if not self.unknown or not moving:
            return ""
        return (f"EvictionRequests {self.state}: whether another responder is handling the eviction of the "
                f"{moving} pod{'s' if moving != 1 else ''} to move is not known; gputui evicts them as planned "
                f"(the API is alpha; {RBAC_HINT})")

    def hold(self, namespace: str, name: str, uid: str, planned: str) -> tuple[str, str]:
        """Before an eviction, on the fresh read: ("", "") to go on, else (what holds it, words why). `planned`: the
        state the drain was planned on."""
        if self.served:
            handler = self.index.handler(namespace, name, uid, self.now)
            if handler is not None:
                return f"{handler.responder} {handler.state}{' stale' if handler.stale else ''}", handler.words()
        if planned == READ and (self.unknown or not self.served):
            return (UNKNOWN, f"EvictionRequests were read for the plan and are {self.state} now: whether another "
                    "responder is handling its eviction is not known; waiting before evicting it")
        return "", ""


def pod_json(part: PodEvictionApi) -> dict:
    h = part.handler
    return {"pending": list(part.requests), "requesters": list(part.requesters),
            "handled_by": None if h is None else {"responder": h.responder, "state": h.state,
                                                  "heartbeat_age_s": h.heartbeat_age_s, "stale": h.stale,
                                                  "eviction": h.eviction}}

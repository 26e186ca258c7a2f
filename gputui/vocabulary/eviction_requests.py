"""The EvictionRequest API (KEP-4563, `lifecycle.k8s.io/v1alpha1`, alpha in Kubernetes 1.37 behind the
EvictionRequestAPI gate; docs/disruption-actors.md §5): the records gputui keeps of its two kinds, and the pure rules
a drain asks of them. Every name below is read from `k8s.io/api@v0.37.2` lifecycle/v1alpha1/types.go.

- An EvictionRequest asks for one pod's eviction (`spec.target.pod{name, uid}`, `spec.requester`, `spec.intent`).
  It is pending while its intent is `Eviction` and neither `TargetEvicted` nor `Failed` is True.
- Responders and their heartbeats are on the Eviction object of the same pod: `status.targetResponders[]` (name,
  priority, state; at most one `Active`) and `status.responders[]` (startTime, heartbeatTime, ...). A responder
  that stops heartbeating for the API's deadline (20 minutes) is passed over by the API's controller; none ships in
  1.37.2, so a stale Active responder stays Active. gputui still leaves its pod alone (fail closed: the pod is in
  someone's hands until the API says otherwise) and says the heartbeat is stale.

gputui is no responder yet: GPUTUI_RESPONDER is the name it would take, and an Active responder of that name is its
own and never blocks it. Pure: no I/O (gputui.backends.kube_evictions reads the objects)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gputui.vocabulary.model import NOT_INSTALLED, READ, UNKNOWN, Condition

GROUP = "lifecycle.k8s.io"
VERSION = "v1alpha1"
EVICTION_REQUEST = "EvictionRequest"  # the kinds, as the sources and the plan name them
EVICTION = "Eviction"
KINDS = (EVICTION_REQUEST, EVICTION)
GPUTUI_RESPONDER = "gputui.io/drain"  # gputui's name as a responder (domain-prefixed, as the API asks)
INTENT_EVICTION = "Eviction"  # EvictionRequestIntentEviction; the other is "Withdrawn"
TARGET_EVICTED = "TargetEvicted"  # conditions of both kinds: the request is over when either is True
FAILED = "Failed"
FINAL_CONDITIONS = frozenset({TARGET_EVICTED, FAILED})
ACTIVE = "Active"  # ResponderStateActive; the others: Inactive, Interrupted, Canceled, Completed
HEARTBEAT_DEADLINE_S = 20 * 60.0  # "the heartbeat deadline defined by the Eviction API (currently 20 minutes)"


@dataclass(frozen=True, slots=True)
class EvictionRequestRecord:
    """One EvictionRequest: who asks for which pod's eviction, and whether it is over."""

    namespace: str
    name: str
    pod: str  # spec.target.pod.name
    pod_uid: str  # spec.target.pod.uid
    requester: str  # spec.requester, e.g. "example.com/upgrader"
    intent: str  # spec.intent: Eviction | Withdrawn
    created: float | None = None  # metadata.creationTimestamp: pending since
    conditions: tuple[Condition, ...] = ()

    @property
    def pending(self) -> bool:
        return self.intent == INTENT_EVICTION and not any(
            c.type in FINAL_CONDITIONS and c.status == "True" for c in self.conditions)


@dataclass(frozen=True, slots=True)
class ResponderRecord:
    """One responder of an Eviction: its state (status.targetResponders) joined to its times (status.responders)."""

    name: str
    state: str
    priority: int | None = None
    started: float | None = None
    heartbeat: float | None = None
    completed: float | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """One Eviction: the pod it targets and the responders handling its eviction."""

    namespace: str
    name: str
    pod: str
    pod_uid: str
    responders: tuple[ResponderRecord, ...] = ()
    requesters: tuple[tuple[str, str], ...] = ()  # status.requesters: (name, intent)
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True, slots=True)
class Handler:
    """Another responder Active on a pod's eviction: gputui leaves that pod to it."""

    responder: str
    state: str
    heartbeat_age_s: float | None  # since its last heartbeat (its start when it never beat); None: neither known
    eviction: str  # the Eviction object's name

    @property
    def stale(self) -> bool:
        """Past the API's heartbeat deadline (or no time at all): it may have died; it is still Active."""
        return self.heartbeat_age_s is None or self.heartbeat_age_s > HEARTBEAT_DEADLINE_S

    def words(self) -> str:
        """"its eviction is handled by x (Active, heartbeat 40 s ago): gputui will not evict it"."""
        beat = "no heartbeat" if self.heartbeat_age_s is None else f"heartbeat {age(self.heartbeat_age_s)} ago"
        if self.stale:
            beat += f", stale: past the API's {age(HEARTBEAT_DEADLINE_S)} deadline, yet still {self.state}"
        return f"its eviction is handled by {self.responder} ({self.state}, {beat}): gputui will not evict it"


def age(seconds: float) -> str:
    """"40 s", "12 min", "3.5 h", "2.0 d"."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def request_words(request: EvictionRequestRecord, now: float) -> str:
    """"EvictionRequest by example.com/upgrader pending since 2026-12-04T03:53:58Z (5 min)"."""
    since = "an unknown time" if request.created is None else \
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(request.created)) + f" ({age(now - request.created)})"
    return f"{EVICTION_REQUEST} by {request.requester or 'an unnamed requester'} pending since {since}"


def read_state(reads: Mapping[str, str] | None) -> str:
    """The two kinds' state as one: READ when both were read, NOT_INSTALLED when the API is not served (neither
    kind), else "unknown: <why>" (either unreadable: the two are one answer, a responder is on the Eviction)."""
    if reads is None:
        return NOT_INSTALLED
    states = [reads.get(k, NOT_INSTALLED) for k in KINDS]
    for kind, state in zip(KINDS, states, strict=True):
        if state.startswith(UNKNOWN):
            return f"{UNKNOWN}: {kind}s {state[len(UNKNOWN):].lstrip(': ') or 'unread'}"
    if all(s == READ for s in states):
        return READ
    if all(s == NOT_INSTALLED for s in states):
        return NOT_INSTALLED
    return f"{UNKNOWN}: only one of the two kinds is served ({', '.join(f'{k}: {s}' for k, s in zip(KINDS, states, strict=True))})"


@dataclass(frozen=True, slots=True)
class EvictionIndex:
    """Each pod's EvictionRequests and Evictions, keyed (namespace, name, uid): built once per plan or look."""

    requests: Mapping[tuple[str, str, str], tuple[EvictionRequestRecord, ...]] = field(default_factory=dict)
    evictions: Mapping[tuple[str, str, str], tuple[EvictionRecord, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, requests: Iterable[EvictionRequestRecord], evictions: Iterable[EvictionRecord]) -> EvictionIndex:
        by_pod: dict[tuple[str, str, str], list[EvictionRequestRecord]] = {}
        for r in requests:
            by_pod.setdefault((r.namespace, r.pod, r.pod_uid), []).append(r)
        by_pod_e: dict[tuple[str, str, str], list[EvictionRecord]] = {}
        for e in evictions:
            by_pod_e.setdefault((e.namespace, e.pod, e.pod_uid), []).append(e)
        return cls({k: tuple(v) for k, v in by_pod.items()}, {k: tuple(v) for k, v in by_pod_e.items()})

    def pending(self, namespace: str, name: str, uid: str) -> tuple[EvictionRequestRecord, ...]:
        """The pod's pending EvictionRequests, oldest first. A request for another pod under the same name (another
        UID) is not this pod's."""
        found = [r for r in self.requests.get((namespace, name, uid), ()) if r.pending]
        return tuple(sorted(found, key=lambda r: (r.created if r.created is not None else float("inf"), r.name)))

    def requesters(self, namespace: str, name: str, uid: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.requester for r in self.pending(namespace, name, uid)))

    def handler(self, namespace: str, name: str, uid: str, now: float) -> Handler | None:
        """Another responder Active on the pod's eviction (an Eviction targeting this very pod, name and UID),
        else None. gputui's own name never blocks it."""
        for e in sorted(self.evictions.get((namespace, name, uid), ()), key=lambda e: e.name):
            for r in e.responders:
                if r.state == ACTIVE and r.name != GPUTUI_RESPONDER:
                    beat = r.heartbeat if r.heartbeat is not None else r.started
                    return Handler(r.name, r.state, None if beat is None else max(0.0, now - beat), e.name)
        return None

"""EvictionRequest API objects (lifecycle.k8s.io/v1alpha1) written as the apiserver returns them, field for field
from k8s.io/api@v0.37.2 lifecycle/v1alpha1/types.go, for the tests of their rules and of a drain beside them."""

from __future__ import annotations

import calendar
import time

T0 = float(calendar.timegm((2026, 12, 4, 3, 0, 0, 0, 0, 0)))
REQUESTER = "example.com/upgrader"
RESPONDER = "inference.example.com/drainer"
EVICTOR = "imperative-eviction.k8s.io/evictor"  # the API's default responder, priority 100


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def request_obj(name: str, pod: str, uid: str, *, intent: str = "Eviction", created: float = T0,
                conditions: tuple[tuple[str, str, str], ...] = (), namespace: str = "ns",
                requester: str = REQUESTER) -> dict:
    return {"apiVersion": "lifecycle.k8s.io/v1alpha1", "kind": "EvictionRequest",
            "metadata": {"name": name, "namespace": namespace, "uid": f"er-{name}", "generation": 1,
                         "creationTimestamp": stamp(created)},
            "spec": {"target": {"pod": {"name": pod, "uid": uid}}, "requester": requester, "intent": intent},
            "status": {"observedGeneration": 1,
                       "conditions": [{"type": t, "status": s, "reason": r, "message": "", "observedGeneration": 1,
                                       "lastTransitionTime": stamp(created + 5)} for t, s, r in conditions]}}


def eviction_obj(name: str, pod: str, uid: str, *, state: str = "Active", responder: str = RESPONDER,
                 started: float | None = T0, heartbeat: float | None = T0 + 20, namespace: str = "ns") -> dict:
    """As the API's controller would leave it (none ships in 1.37.2: the tests write it): the requester and the two
    target responders, the highest priority Active, the default evictor Inactive behind it."""
    times = {k: v for k, v in (("startTime", started), ("heartbeatTime", heartbeat)) if v is not None}
    return {"apiVersion": "lifecycle.k8s.io/v1alpha1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace, "uid": f"ev-{name}", "generation": 1,
                         "creationTimestamp": stamp(T0),
                         "labels": {REQUESTER: "requester", responder: "responder", EVICTOR: "responder"}},
            "spec": {"target": {"pod": {"name": pod, "uid": uid}}},
            "status": {"requesters": [{"name": REQUESTER, "intent": "Eviction"}],
                       "targetResponders": [{"name": responder, "priority": 10000, "state": state},
                                            {"name": EVICTOR, "priority": 100, "state": "Inactive"}],
                       "responders": [{"name": responder, **{k: stamp(v) for k, v in times.items()},
                                       "message": "migrating KV cache"}, {"name": EVICTOR}]}}


READ = {"EvictionRequest": "read", "Eviction": "read"}

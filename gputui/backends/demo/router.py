"""The demo's data plane: where each new session goes, decided as a real one decides it.

A route's weights (HTTPRoute backendRefs, VirtualService destinations) choose a version's backend; an
unrouted service's versions share its traffic evenly. The backend is a Service, which selects pods by their
labels as the EndpointSlice controller does, and only the pods it selects that are Ready and not terminating
take new sessions (an Istio subset narrows them by its DestinationRule's labels). Nothing else steers
traffic: no real router reads gputui's annotations, so a pod on a node being drained keeps getting new
sessions until a label takes it out of its Service's selection (gputui.policy.rotation).

Most demo services' Services select a serving label their Deployments do not select on: removing it from one
pod takes that pod out of rotation. One service (codellama, the scenario's badly kept one) has no such label,
so the demo shows a drain that cannot stop its new sessions, and `gputui check` says how to fix it.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gputui.backends.demo.routes import backend_name, demo_kind
from gputui.backends.demo.scenario import STEP_S, SimPod, SimService
from gputui.policy.rotation import SERVING_LABEL
from gputui.vocabulary.model import PodSelector
from gputui.vocabulary.router_kinds import RouteBackend

NAME, VERSION, TEMPLATE_HASH = "app.kubernetes.io/name", "app.kubernetes.io/version", "pod-template-hash"
SERVING = {SERVING_LABEL: "true"}


@dataclass(frozen=True, slots=True)
class Backend:
    """Where one version's share of the traffic goes: a Service, narrowed by an Istio subset's labels."""

    service: PodSelector
    subset: Mapping[str, str]

    def takes(self, pod: SimPod, t: float) -> bool:
        """In the Service's ready endpoints (and the subset): selected by labels, Ready, not terminating.
        Matched inline rather than by PodSelector.selects: it runs for every pod on every simulated second.
        (Every demo Service has a selector, so the empty one that selects nothing never comes up.)"""
        labels = pod.labels.items()  # label values are strings: an items view's subset test is the match
        return self.service.match.items() <= labels and self.subset.items() <= labels and pod.ready(t)


def template_labels(svc: SimService, version: str, rs_hash: str) -> dict[str, str]:
    """The labels a ReplicaSet gives each pod it makes (a replacement comes back into rotation with them)."""
    return {NAME: svc.name, VERSION: version, TEMPLATE_HASH: rs_hash, **(SERVING if svc.serving_label else {})}


def backends(svc: SimService) -> dict[str, Backend]:
    """version -> its backend. A route kind whose demo form has subsets (a VirtualService) has one Service over
    every version, its subsets pick the version; everything else sends each version's traffic to that version's
    own Service."""
    serving = SERVING if svc.serving_label else {}
    subsets = bool(svc.router_kind) and demo_kind(svc.router_kind)[1].subsets
    out = {}
    for v in svc.versions:
        if subsets:
            service = PodSelector("Service", svc.namespace, svc.name, {NAME: svc.name, **serving})
            out[v.name] = Backend(service, {VERSION: v.name})
        else:
            service = PodSelector("Service", svc.namespace, backend_name(svc, v.name),
                                  {NAME: svc.name, VERSION: v.name, **serving})
            out[v.name] = Backend(service, {})
    return out


def selectors(services: Iterable[SimService]) -> tuple[PodSelector, ...]:
    """What the live backend reads for gputui.policy.rotation: each Service that selects pods, then each Deployment
    that owns them (its selector: name and version, never the serving label)."""
    paths: dict[str, PodSelector] = {}
    owners = []
    for svc in services:
        for b in backends(svc).values():
            paths.setdefault(b.service.key, b.service)
        for v in svc.versions:
            match = {NAME: svc.name, VERSION: v.name}
            owners.append(PodSelector("Deployment", svc.namespace, f"{svc.name}-{v.name}", match, frozenset(match)))
    return tuple(paths.values()) + tuple(owners)


def route_backends(svc: SimService, route: dict[str, Any] | None) -> dict[str, RouteBackend]:
    """version -> its backend in the route, parsed by the same code the live backend uses."""
    if route is None:
        return {}
    record = demo_kind(svc.router_kind)[0].record(route)
    found: dict[str, RouteBackend] = {}
    for b in record.backends:
        for v in svc.versions:
            if (b.subset == v.name) if b.subset else (b.service == backend_name(svc, v.name)):
                found.setdefault(v.name, b)
    return found


class Router:
    """Sends each service's new sessions to its backends' ready endpoints. Draws from the simulation's own
    generator, in a fixed order: the same seed and clock give the same sessions."""

    def __init__(self, rng: random.Random, services: Mapping[str, SimService]) -> None:
        self._rng = rng
        self._backends = {key: backends(svc) for key, svc in services.items()}
        self.selectors = selectors(services.values())
        self._weights: dict[str, tuple[str, dict[str, int | None]]] = {}

    def weights(self, key: str, svc: SimService, route: dict[str, Any] | None) -> dict[str, int | None]:
        """version -> its weight in the route ({} unrouted), parsed again only when the route changed."""
        if route is None:
            return {}
        version = route["metadata"]["resourceVersion"]
        cached = self._weights.get(key)
        if cached is None or cached[0] != version:
            cached = (version, {name: b.weight for name, b in route_backends(svc, route).items()})
            self._weights[key] = cached
        return cached[1]

    def _poisson(self, lam: float) -> int:
        # Knuth's method; fine for the small rates simulated here.
        limit, k, p = math.exp(-lam), 0, 1.0
        while True:
            p *= self._rng.random()
            if p <= limit:
                return k
            k += 1

    def arrive(self, key: str, svc: SimService, weights: Mapping[str, int | None],
               by_name: Mapping[tuple[str, str], list[SimPod]], svc_pods: list[SimPod], t: float) -> None:
        """One tick of new sessions for `svc`. `by_name`: every pod by (namespace, its name label), read this
        tick: every demo Service selects on that label, so only pods carrying its value can be selected (the
        rest of the selector is checked pod by pod). `svc_pods`: its own pods (their engines admit what waits
        in their queues)."""
        # Load follows a slow wave so the fleet looks alive rather than flat.
        wave = 1.0 + 0.25 * math.sin(t / 97.0)
        n = self._poisson(svc.arrivals_per_s * wave * STEP_S)
        versions = [v for v in svc.versions if weights.get(v.name, 0 if svc.router_kind else None) != 0]
        shares = [weights.get(v.name) or 1 for v in versions]  # unrouted: even split
        if not versions or sum(shares) == 0:
            return
        # Summed once for the tick: choices() with cum_weights draws exactly as it does with the weights.
        cum_shares = list(itertools.accumulate(shares))
        rand = self._rng.random
        endpoints: dict[str, list[SimPod]] = {}  # labels and readiness do not change within a tick
        for _ in range(n):
            version = self._rng.choices(versions, cum_weights=cum_shares)[0].name
            if version not in endpoints:
                backend = self._backends[key][version]
                candidates = by_name.get((svc.namespace, backend.service.match[NAME]), [])
                endpoints[version] = [p for p in candidates if backend.takes(p, t)]
            pods = endpoints[version]
            if not pods:
                continue  # no ready endpoint: the router answers with an error, no session starts
            pod = min(pods, key=lambda p: len(p.running) + p.waiting + rand())
            if len(pod.running) < svc.max_running:
                heapq.heappush(pod.running, (t + self._rng.expovariate(1.0 / svc.mean_session_s), t))
            else:
                pod.waiting += 1
        # Each engine admits from its own queue as its running batch has room, in rotation or not.
        for pod in svc_pods:
            if pod.waiting and len(pod.running) < svc.max_running:
                admitted = min(pod.waiting, svc.max_running - len(pod.running))
                pod.waiting -= admitted
                # Held from admission: the demo keeps no arrival time for what waited in the queue.
                for _ in range(admitted):
                    heapq.heappush(pod.running, (t + self._rng.expovariate(1.0 / svc.mean_session_s), t))

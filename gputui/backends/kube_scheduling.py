"""A pod's and a node's scheduling facts (gputui.vocabulary.scheduling) from their raw JSON, shared between records.

Every pod of a workload has the same spec, and the nodes of a pool the same taints and allocatable resources:
the facts are interned (a bounded map from a fact to its one copy), so the watch caches hold one object per
distinct spec, not one per pod. Quantities repeat too ("500m", "16Gi"): their parses are kept (bounded).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from sys import intern
from typing import Any, TypeVar

from gputui.vocabulary.gpu_resources import is_gpu_resource, parse_quantity
from gputui.vocabulary.label_selectors import Requirement
from gputui.vocabulary.scheduling import (
    CPU,
    EMPTY_POD,
    UNREAD_COMPARING,
    UNREAD_SCHEDULER,
    NodeScheduling,
    NodeTerm,
    PodScheduling,
    PodTerm,
    Spread,
    Taint,
    Toleration,
)

T = TypeVar("T")
_SHARED: dict[Any, Any] = {}
_SHARED_MAX = 8192
_QUANTITIES: dict[tuple[str, str], int] = {}
_QUANTITIES_MAX = 4096
DEFAULT_SCHEDULER = "default-scheduler"
# Pod-level requests (spec.resources) replace the containers' sum for these (component-helpers' resource).
_POD_LEVEL = ("cpu", "memory")


def _shared(value: T) -> T:
    found = _SHARED.get(value)
    if found is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()
        _SHARED[value] = found = value
    return found


def units(resource: str, raw: object) -> int:
    """A resource quantity in the scheduler's units: cpu in millicores, everything else whole, rounded up (as
    Quantity.MilliValue and Value do); 0 when it is no quantity."""
    key = (resource if resource == CPU else "", str(raw))
    found = _QUANTITIES.get(key)
    if found is None:
        try:
            value = parse_quantity(raw)
        except ValueError:
            value = 0  # type: ignore[assignment]
        found = max(0, math.ceil(value * 1000 if resource == CPU else value))
        if len(_QUANTITIES) >= _QUANTITIES_MAX:
            _QUANTITIES.clear()
        _QUANTITIES[key] = found
    return found


def _requirements(raw: Any) -> tuple[Requirement, ...]:
    return tuple(Requirement(intern(str(e.get("key") or "")), str(e.get("operator") or ""),
                             tuple(str(v) for v in e.get("values") or ()))
                 for e in raw or () if isinstance(e, dict))


def label_selector(raw: Any) -> tuple[Requirement, ...] | None:
    """A metav1.LabelSelector as requirements; None for a null one (it selects nothing)."""
    if not isinstance(raw, dict):
        return None
    match = raw.get("matchLabels") or {}
    labels = tuple(Requirement(intern(str(k)), "In", (str(v),)) for k, v in sorted(match.items())) \
        if isinstance(match, dict) else ()
    return labels + _requirements(raw.get("matchExpressions"))


def _node_terms(affinity: Mapping[str, Any]) -> tuple[tuple[NodeTerm, ...] | None, str]:
    required = ((affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not isinstance(required, dict):
        return None, ""
    terms = []
    for term in required.get("nodeSelectorTerms") or ():
        if not isinstance(term, dict):
            continue
        labels, names = _requirements(term.get("matchExpressions")), _requirements(term.get("matchFields"))
        if labels or names:  # an empty term matches no node: dropped, as nodeaffinity does
            terms.append(NodeTerm(labels, tuple(Requirement("metadata.name", r.operator, r.values) for r in names)))
    return tuple(terms), ""


def _pod_terms(raw: Any, namespace: str) -> tuple[tuple[PodTerm, ...], str]:
    """Required pod (anti-)affinity terms. A namespaceSelector other than {} needs the namespaces' labels,
    which gputui does not read: said in the second value."""
    out, unread = [], ""
    for term in raw or ():
        if not isinstance(term, dict):
            continue
        names = frozenset(str(n) for n in term.get("namespaces") or ())
        ns_selector = term.get("namespaceSelector")
        if isinstance(ns_selector, dict) and (ns_selector.get("matchLabels") or ns_selector.get("matchExpressions")):
            unread = "a pod affinity term selects namespaces by label (namespaces are not read)"
        namespaces: frozenset[str] | None
        if isinstance(ns_selector, dict) and not (ns_selector.get("matchLabels") or ns_selector.get("matchExpressions")):
            namespaces = None  # {}: every namespace
        else:
            namespaces = names or frozenset((namespace,))
        out.append(PodTerm(label_selector(term.get("labelSelector")), intern(str(term.get("topologyKey") or "")),
                           namespaces))
    return tuple(out), unread


def _spread(raw: Any, labels: Mapping[str, str]) -> tuple[Spread, ...]:
    out = []
    for c in raw or ():
        if not isinstance(c, dict) or c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
            continue
        selector = label_selector(c.get("labelSelector"))
        keys = [str(k) for k in c.get("matchLabelKeys") or () if str(k) in labels]
        if selector is not None and keys:  # merged as the scheduler merges them (a null selector stays null)
            selector = tuple(Requirement(k, "In", (labels[k],)) for k in keys) + selector
        try:
            skew, domains = int(c.get("maxSkew") or 1), int(c.get("minDomains") or 1)
        except (TypeError, ValueError):
            skew, domains = 1, 1
        out.append(Spread(skew, intern(str(c.get("topologyKey") or "")), selector, domains,
                          honor_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
                          honor_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor"))
    return tuple(out)


def _container_requests(c: Mapping[str, Any]) -> dict[str, int]:
    res = c.get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    out = {}
    for name in set(requests) | set(limits):  # only limits given: the API defaults the request to it
        if is_gpu_resource(name):
            continue  # GPUs are the pod's gpu_units
        n = units(name, requests.get(name, limits.get(name)))
        if n:
            out[intern(str(name))] = n
    return out


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def requests_of(spec: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """The pod's requests as the scheduler computes them (component-helpers resource.PodRequests): the
    containers summed, with sidecars (restartable init containers); each init container with the sidecars
    before it; the largest of the two; pod-level requests for cpu and memory; then the overhead."""
    total: dict[str, int] = {}
    for c in spec.get("containers") or ():
        if isinstance(c, dict):
            _add(total, _container_requests(c))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in spec.get("initContainers") or ():
        if not isinstance(c, dict):
            continue
        own = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            use = dict(sidecars)
        else:
            use = dict(own)
            _add(use, sidecars)
        for k, v in use.items():
            init_max[k] = max(init_max.get(k, 0), v)
    for k, v in init_max.items():
        total[k] = max(total.get(k, 0), v)
    pod_level = ((spec.get("resources") or {}).get("requests")) or {}
    for name, raw in pod_level.items():
        if name in _POD_LEVEL or str(name).startswith("hugepages-"):
            total[intern(str(name))] = units(name, raw)
    for name, raw in (spec.get("overhead") or {}).items():
        if not is_gpu_resource(name):
            total[intern(str(name))] = total.get(str(name), 0) + units(name, raw)
    return tuple(sorted((k, v) for k, v in total.items() if v))


def _unread(spec: Mapping[str, Any]) -> str:
    """A rule of the scheduler's the preview does not model, present in this spec."""
    if (spec.get("schedulerName") or DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER:
        return f"{UNREAD_SCHEDULER} {spec.get('schedulerName')}"
    if any("persistentVolumeClaim" in v or "ephemeral" in v for v in spec.get("volumes") or () if isinstance(v, dict)):
        return "a PersistentVolumeClaim (its volume's node affinity is not read)"
    for c in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()):
        if isinstance(c, dict) and any(isinstance(p, dict) and p.get("hostPort") for p in c.get("ports") or ()):
            return "a hostPort (ports in use on nodes are not read)"
    if any(isinstance(t, dict) and t.get("operator") in ("Lt", "Gt") for t in spec.get("tolerations") or ()):
        return f"{UNREAD_COMPARING} (Lt/Gt)"
    return ""


_BY_SPEC: dict[Any, PodScheduling] = {}


def _flat(raw: Any) -> Any:
    """A dict as a tuple of its items (hashable when its values are plain)."""
    return tuple(raw.items()) if isinstance(raw, dict) else raw


def _signature(spec: Mapping[str, Any], labels: Mapping[str, str]) -> tuple:
    """Everything pod_scheduling reads of a spec, as a hashable key: the pods of one workload have one. Flat
    dicts become tuples of their items (hashing strings that cache their hash: a few µs, where reading the
    facts again costs tens); the nested rules, rarer, their repr."""
    get = spec.get
    spread, affinity = get("topologySpreadConstraints"), get("affinity")
    parts: list[Any] = [_flat(get("nodeSelector")), repr(affinity) if affinity else None,
                        repr(spread) if spread else None, _flat(labels) if spread else None,
                        _flat(get("overhead")), get("schedulerName")]
    pod_level = get("resources")
    if pod_level:
        parts.append(repr(pod_level))
    for t in get("tolerations") or ():
        parts.append(_flat(t))
    for group in (get("containers"), get("initContainers")):
        for c in group or ():
            if isinstance(c, dict):
                res = c.get("resources")
                if isinstance(res, dict):
                    parts.extend((k, _flat(v)) for k, v in res.items())
                parts.append("|")
                for port in c.get("ports") or ():
                    if isinstance(port, dict) and port.get("hostPort"):
                        parts.append(("hostPort", _flat(port)))
                if c.get("restartPolicy"):
                    parts.append(("restartPolicy", c.get("restartPolicy")))
    for v in get("volumes") or ():
        if isinstance(v, dict) and ("persistentVolumeClaim" in v or "ephemeral" in v):
            parts.append("claim")
    return tuple(parts)


def pod_scheduling(spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> PodScheduling:
    """The scheduling facts of a pod's spec, shared with every pod of the same spec."""
    key: Any = (namespace, _signature(spec, labels))
    try:
        found = _BY_SPEC.get(key)
    except TypeError:  # a value that is no plain one (a list where a string was expected): its text
        key = repr(key)
        found = _BY_SPEC.get(key)
    if found is None:
        if len(_BY_SPEC) >= _SHARED_MAX:
            _BY_SPEC.clear()
        _BY_SPEC[key] = found = _read_pod(spec, namespace, labels)
    return found


def _read_pod(spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> PodScheduling:
    affinity = spec.get("affinity") or {}
    node_terms, _ = _node_terms(affinity)
    pod_affinity, unread_a = _pod_terms(((affinity.get("podAffinity") or {})
                                         .get("requiredDuringSchedulingIgnoredDuringExecution")), namespace)
    anti, unread_b = _pod_terms(((affinity.get("podAntiAffinity") or {})
                                 .get("requiredDuringSchedulingIgnoredDuringExecution")), namespace)
    selector = spec.get("nodeSelector") or {}
    facts = PodScheduling(
        node_selector=tuple(sorted((intern(str(k)), intern(str(v))) for k, v in selector.items()))
        if isinstance(selector, dict) else (),
        node_terms=node_terms,
        tolerations=tuple(Toleration(intern(str(t.get("key") or "")), str(t.get("operator") or "Equal"),
                                     intern(str(t.get("value") or "")), str(t.get("effect") or ""))
                          for t in spec.get("tolerations") or () if isinstance(t, dict)),
        affinity=pod_affinity, anti_affinity=anti,
        spread=_spread(spec.get("topologySpreadConstraints"), labels),
        requests=requests_of(spec),
        unread=_unread(spec) or unread_a or unread_b,
    )
    return EMPTY_POD if facts == EMPTY_POD else _shared(facts)


def _taints(raw: Iterable[Any]) -> tuple[Taint, ...]:
    return tuple(Taint(intern(str(t.get("key") or "")), intern(str(t.get("value") or "")),
                       intern(str(t.get("effect") or ""))) for t in raw if isinstance(t, dict))


_BY_NODE: dict[Any, NodeScheduling] = {}


def node_scheduling(spec: Mapping[str, Any], allocatable: Mapping[str, Any]) -> NodeScheduling:
    """A node's taints (timeAdded aside) and allocatable resources other than GPUs, shared between nodes."""
    taints = spec.get("taints") or ()
    key: Any = (tuple((t.get("key"), t.get("value"), t.get("effect")) for t in taints if isinstance(t, dict)),
                tuple(allocatable.items()))
    try:
        found = _BY_NODE.get(key)
    except TypeError:
        key = repr(key)
        found = _BY_NODE.get(key)
    if found is None:
        offered = tuple(sorted((intern(str(k)), units(k, v)) for k, v in allocatable.items()
                               if not is_gpu_resource(k)))
        if len(_BY_NODE) >= _SHARED_MAX:
            _BY_NODE.clear()
        _BY_NODE[key] = found = _shared(NodeScheduling(_taints(taints), offered))
    return found

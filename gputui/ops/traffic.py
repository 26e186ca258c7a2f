"""Traffic weights between an inference service's versions: a pure plan, then apply.

`plan_shift` turns "move to 80/20" (or "+10 on v2") into integer weights on the
route's own scale, the checks that block or warn, and the exact PATCH the
router needs. `apply_shift` sends that PATCH through the backend's writer and
audit-logs it. One adapter per router kind:

- Gateway API HTTPRoute: `spec.rules[].backendRefs[].weight` (0..1,000,000, relative);
- Istio VirtualService: `spec.http[].route[].weight` (non-negative; not all 0 with
  several destinations);
- SMI TrafficSplit: `spec.backends[].weight` (relative);
- ingress-nginx canary Ingress: the `canary-weight` annotation, out of
  `canary-weight-total` (default 100);
- Argo Rollouts: no "set weight" exists; promote / promote-full / abort / retry
  patches on the Rollout. Its controller owns the routes: gputui never patches them.

Why JSON patch (RFC 6902) with `test` operations for the list-shaped routes,
not a JSON merge patch: custom resources take no strategic merge patch, and a
merge patch replaces a whole list, so changing one weight means resending every
rule (matches, filters, other backends) as read a moment before, silently
reverting anything another operator, a GitOps controller or a second gputui
changed in between. Making that merge patch conditional on
`metadata.resourceVersion` would fail on any unrelated write (gateway
controllers update status all the time). A JSON patch touches only the weights,
and its `test` operations on each backend's name and old weight make the
apiserver apply it only onto exactly what the plan was made from: the whole
patch or nothing (422), never a half-shift or a clobbered edit.

Percentages become integer weights with the largest-remainder method, so they
always add up exactly to the scale (100, or the route's own total when it is a
multiple of 100, e.g. 1000 or 1,000,000).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

from gputui.backends.base import BackendError, Writer
from gputui.model import ClusterSnapshot, InferenceService, ServiceVersion
from gputui.ops.audit import AuditLog
from gputui.ops.cordon import ReadOnlyError

# router kind -> (API group, default version, plural). Discovery may name another served version.
ROUTER_APIS: dict[str, tuple[str, str, str]] = {
    "HTTPRoute": ("gateway.networking.k8s.io", "v1", "httproutes"),
    "VirtualService": ("networking.istio.io", "v1", "virtualservices"),
    "TrafficSplit": ("split.smi-spec.io", "v1alpha2", "trafficsplits"),
    "Ingress": ("networking.k8s.io", "v1", "ingresses"),
    "Rollout": ("argoproj.io", "v1alpha1", "rollouts"),
}
HTTPROUTE_MAX_WEIGHT = 1_000_000
DEFAULT_SCALE = 100
NGINX_CANARY = "nginx.ingress.kubernetes.io/canary"
NGINX_WEIGHT = "nginx.ingress.kubernetes.io/canary-weight"
NGINX_TOTAL = "nginx.ingress.kubernetes.io/canary-weight-total"
ARGO_MANAGER = "rollouts-controller"  # the Argo Rollouts controller's field manager
ROLLOUT_ACTIONS = ("promote", "promote-full", "abort", "retry")
STEP_PCT = 10.0


class ShiftError(BackendError):
    """A shift that may not go ahead (validation, conflict), worded for one line."""


@dataclass(frozen=True, slots=True)
class Step:
    """Move one version's share by `delta` percentage points; the others rebalance."""

    version: str
    delta: float


Targets = Union[Mapping[str, Union[float, int, str]], Step]


@dataclass(frozen=True, slots=True)
class Patch:
    """Exactly what goes to the apiserver."""

    group: str
    version: str
    plural: str
    namespace: str
    name: str
    patch_type: str  # merge | json
    body: Any
    subresource: str = ""

    @property
    def content_type(self) -> str:
        return {"merge": "application/merge-patch+json", "json": "application/json-patch+json"}[self.patch_type]

    @property
    def path(self) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        tail = f"/{self.subresource}" if self.subresource else ""
        return f"{base}/namespaces/{self.namespace}/{self.plural}/{self.name}{tail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group, "version": self.version, "plural": self.plural,
            "namespace": self.namespace, "name": self.name, "patch_type": self.patch_type,
            "subresource": self.subresource, "body": self.body,
        }

    def render(self, indent: int | None = 2) -> str:
        """The request as text: method and path, content type, body."""
        if isinstance(self.body, list) and indent is not None:
            # One operation per line reads best for a JSON patch.
            body = "[\n" + ",\n".join("  " + json.dumps(op, ensure_ascii=False) for op in self.body) + "\n]"
        else:
            body = json.dumps(self.body, indent=indent, ensure_ascii=False)
        return f"PATCH {self.path}\nContent-Type: {self.content_type}\n{body}"


@dataclass(frozen=True, slots=True)
class VersionShift:
    name: str
    backend: str
    current_weight: int | None
    current_pct: float | None
    target_weight: int | None
    target_pct: float | None
    ready: int
    desired: int
    sessions: int | None

    @property
    def changes(self) -> bool:
        return self.target_weight is not None and self.target_weight != self.current_weight


@dataclass(frozen=True, slots=True)
class ShiftPlan:
    service: InferenceService
    kind: str
    action: str  # shift | promote | promote-full | abort | retry
    group: str
    api_version: str
    plural: str
    object_name: str
    versions: tuple[VersionShift, ...]
    scale: int
    targets: Mapping[str, float]  # the resolved percentages, summing to 100
    errors: tuple[str, ...] = ()
    blockers: tuple[str, ...] = ()  # what --force overrides
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    patch: Patch | None = None  # None until built from the route object as read
    route_read: bool = False  # current weights come from the route object, not the snapshot

    @property
    def service_key(self) -> str:
        return self.service.key

    @property
    def target(self) -> str:
        """The object written, as the audit log names it."""
        return f"{self.kind.lower()}/{self.service.namespace}/{self.object_name}"

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def changes(self) -> bool:
        return self.action != "shift" or any(v.changes for v in self.versions)

    def version(self, name: str) -> VersionShift | None:
        return next((v for v in self.versions if v.name == name), None)

    def summary(self) -> str:
        if self.action != "shift":
            return f"{self.action} of Rollout {self.service.namespace}/{self.object_name}"
        moves = [
            f"{v.name} {fmt_pct(v.current_pct)} → {fmt_pct(v.target_pct)}"
            for v in self.versions if v.changes
        ]
        return ", ".join(moves) if moves else "no change"

    def to_dict(self) -> dict[str, Any]:
        return {
            "service": self.service.key,
            "router": {"kind": self.kind, "group": self.group, "version": self.api_version,
                       "plural": self.plural, "namespace": self.service.namespace, "name": self.object_name},
            "action": self.action,
            "scale": self.scale,
            "versions": [
                {"name": v.name, "backend": v.backend, "current_weight": v.current_weight,
                 "current_pct": v.current_pct, "target_weight": v.target_weight, "target_pct": v.target_pct,
                 "ready": v.ready, "desired": v.desired, "sessions": v.sessions}
                for v in self.versions
            ],
            "errors": list(self.errors),
            "blockers": list(self.blockers),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "patch": self.patch.to_dict() if self.patch else None,
        }


def fmt_pct(pct: float | None) -> str:
    if pct is None:
        return "–"
    return f"{pct:.0f}%" if abs(pct - round(pct)) < 0.05 else f"{pct:.1f}%"


# ----- percentages and weights ----------------------------------------------------


def apportion(pcts: Mapping[str, float], scale: int) -> dict[str, int]:
    """Integer weights proportional to `pcts` that add up to exactly `scale` (largest remainder)."""
    total = sum(pcts.values())
    if total <= 0:
        return {k: 0 for k in pcts}
    exact = {k: scale * p / total for k, p in pcts.items()}
    weights = {k: math.floor(x + 1e-9) for k, x in exact.items()}
    left = scale - sum(weights.values())
    order = sorted(exact, key=lambda k: (-(exact[k] - weights[k]), list(pcts).index(k)))
    for k in order[:max(0, left)]:
        weights[k] += 1
    return weights


def shares(weights: Mapping[str, int | None]) -> dict[str, float]:
    """Each version's share in percent of the known weights (an even split when all are unknown)."""
    known = {k: w for k, w in weights.items() if w is not None}
    if not known:
        return {k: 100.0 / len(weights) for k in weights} if weights else {}
    total = sum(known.values())
    return {k: (100.0 * (weights[k] or 0) / total if total else 0.0) for k in weights}


def rebalance(pcts: Mapping[str, float], version: str, value: float) -> dict[str, float]:
    """Set one version's share; the others share the rest in their current proportions."""
    value = min(100.0, max(0.0, float(value)))
    others = [k for k in pcts if k != version]
    rest = sum(pcts[k] for k in others)
    out = {}
    for k in pcts:
        if k == version:
            out[k] = value
        elif rest > 0:
            out[k] = (100.0 - value) * pcts[k] / rest
        else:
            out[k] = (100.0 - value) / len(others)
    return out


def _parse_pct(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, str):
        value = value.strip().rstrip("%").strip()
    out = float(value)
    if math.isnan(out) or math.isinf(out):
        raise ValueError
    return out


def resolve_targets(current: Mapping[str, float], targets: Targets) -> tuple[dict[str, float], list[str]]:
    """Percentages for every version, summing to 100, or the errors that stop it.

    A step moves one version and rebalances the rest; a mapping that names only
    some versions gives the others the remainder in their current proportions.
    """
    errors: list[str] = []
    names = list(current)
    if isinstance(targets, Step):
        if targets.version not in current:
            return dict(current), [f'no version "{targets.version}" (versions: {", ".join(names)})']
        return rebalance(current, targets.version, current[targets.version] + targets.delta), []
    given: dict[str, float] = {}
    for name, raw in targets.items():
        if name not in current:
            errors.append(f'no version "{name}" (versions: {", ".join(names)})')
            continue
        try:
            pct = _parse_pct(raw)
        except (TypeError, ValueError):
            errors.append(f"{name}: {raw!r} is not a percentage")
            continue
        if not 0 <= pct <= 100:
            errors.append(f"{name}: {fmt_pct(pct)} is outside 0..100%")
            continue
        given[name] = pct
    if errors:
        return dict(current), errors
    if not given:
        return dict(current), ["no target given"]
    total = sum(given.values())
    others = [k for k in names if k not in given]
    if not others:
        if abs(total - 100.0) > 0.01:
            errors.append(f"targets add up to {fmt_pct(total)}, not 100%")
        return {k: given[k] for k in names}, errors
    if total > 100.0 + 0.01:
        return dict(current), [f"targets add up to {fmt_pct(total)}, more than 100%"]
    rest = max(0.0, 100.0 - total)
    base = sum(current[k] for k in others)
    out = {}
    for k in names:
        if k in given:
            out[k] = given[k]
        else:
            out[k] = rest * current[k] / base if base > 0 else rest / len(others)
    return out, []


def route_scale(total: int) -> int:
    """The route's own scale when its weights add up to a multiple of 100, else 100."""
    if total >= DEFAULT_SCALE and total % DEFAULT_SCALE == 0 and total <= HTTPROUTE_MAX_WEIGHT:
        return total
    return DEFAULT_SCALE


# ----- adapters: read the route object, validate weights, build the patch ----------------


def _ptr(*parts: Any) -> str:
    """A JSON pointer (RFC 6901): ~ and / in a key are escaped."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass
class _Read:
    """What an adapter found in the route object."""

    weights: dict[str, int | None] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Where each version's weight lives: (path of the entry, field naming it, its value, the weight
    # as read or _MISSING, the version). ingress-nginx: (annotations path, key, value as read, weight, version).
    slots: list[tuple[tuple[Any, ...], str, Any, Any, str]] = field(default_factory=list)
    scale: int | None = None
    canary: str = ""  # ingress-nginx: the version behind the canary Ingress


_MISSING = object()


class _ListAdapter:
    """Routes whose weights sit in lists of backends: HTTPRoute, VirtualService, TrafficSplit."""

    kind = ""
    max_weight: int | None = None
    default_weight: int | None = None  # the weight an absent field means

    def groups(self, spec: Mapping[str, Any]) -> list[tuple[tuple[Any, ...], list[Any]]]:
        """(path of the backend list, the list) per rule."""
        raise NotImplementedError

    def identity(self, entry: Mapping[str, Any]) -> tuple[str, Any]:
        """The field that names the backend, for the `test` operation, and its value."""
        raise NotImplementedError

    def matches(self, entry: Mapping[str, Any], version: ServiceVersion) -> bool:
        raise NotImplementedError

    def describe_group(self, path: tuple[Any, ...]) -> str:
        raise NotImplementedError

    def read(self, route: Mapping[str, Any], service: InferenceService) -> _Read:
        out = _Read()
        spec = route.get("spec") or {}
        groups = []
        for path, entries in self.groups(spec):
            owners: list[str | None] = []
            for entry in entries:
                owner = next((v.name for v in service.versions if isinstance(entry, dict) and self.matches(entry, v)), None)
                owners.append(owner)
            groups.append((path, entries, owners))
        # The splitting groups: every backend is one of the service's versions, as in the widest rule.
        splitting = [g for g in groups if len(g[1]) >= 2 and all(o is not None for o in g[2])]
        if not splitting:
            out.errors.append(
                f"{self.kind} {_name(route)} has no rule that splits traffic between "
                f"{', '.join(v.name for v in service.versions)}"
            )
            return out
        widest = max(len(set(g[2])) for g in splitting)
        chosen = [g for g in splitting if len(set(g[2])) == widest]
        first = chosen[0]
        wanted = {v.name for v in service.versions}
        if set(first[2]) != wanted:
            missing = sorted(wanted - set(first[2]))
            out.errors.append(f"{self.kind} {_name(route)} routes to no backend of {', '.join(missing)}")
            return out
        for path, entries, owners in groups:
            if (path, entries, owners) in chosen:
                continue
            mine = sorted({o for o in owners if o})
            if mine:
                out.notes.append(f"{self.describe_group(path)} sends its matches to {', '.join(mine)}; left as is")
        seen: dict[str, int | None] = {}
        for path, entries, owners in chosen:
            for index, (entry, owner) in enumerate(zip(entries, owners)):
                assert owner is not None  # chosen groups are splitting ones: every entry has its version
                weight = entry.get("weight", _MISSING)
                id_field, id_value = self.identity(entry)
                out.slots.append((path + (index,), id_field, id_value, weight, owner))
                seen.setdefault(owner, self._weight(weight))  # the first splitting rule's weights
        out.weights = {v.name: seen.get(v.name) for v in service.versions}
        if len(chosen) > 1:
            per_group = [
                tuple(self._weight(e.get("weight", _MISSING)) for e in entries) for _, entries, _ in chosen
            ]
            if len(set(per_group)) > 1:
                out.warnings.append(
                    f"{len(chosen)} rules split between these versions with different weights; all get the target"
                )
        known = [w for w in out.weights.values() if w is not None]
        out.scale = route_scale(sum(known)) if known else DEFAULT_SCALE
        return out

    def _weight(self, raw: Any) -> int | None:
        if raw is _MISSING or raw is None:
            return self.default_weight
        return _quantity(raw)

    def validate(self, weights: Mapping[str, int]) -> list[str]:
        errors = []
        for name, w in weights.items():
            if w < 0:
                errors.append(f"{name}: weight {w} is negative")
            elif self.max_weight is not None and w > self.max_weight:
                errors.append(f"{name}: weight {w} is above {self.kind}'s maximum {self.max_weight:,}")
        if weights and sum(weights.values()) == 0:
            errors.append(self.all_zero_error())
        return errors

    def all_zero_error(self) -> str:
        return "every weight would be 0: no backend would get traffic"

    def patch_body(self, read: _Read, weights: Mapping[str, int]) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        for path, id_field, id_value, old, owner in read.slots:
            new = weights[owner]
            ops.append({"op": "test", "path": _ptr(*path, *id_field.split(".")), "value": id_value})
            if old is _MISSING or old is None:
                # Nothing to test: an absent weight has no value. The name test still pins the entry.
                ops.append({"op": "add", "path": _ptr(*path, "weight"), "value": new})
                continue
            ops.append({"op": "test", "path": _ptr(*path, "weight"), "value": old})
            if _quantity(old) != new or not isinstance(old, int):
                ops.append({"op": "replace", "path": _ptr(*path, "weight"), "value": new})
        return ops

    def warnings(self, route: Mapping[str, Any]) -> list[str]:
        return []


class _HTTPRoute(_ListAdapter):
    kind = "HTTPRoute"
    max_weight = HTTPROUTE_MAX_WEIGHT
    default_weight = 1  # Gateway API: an absent weight is 1

    def groups(self, spec):
        return [(("spec", "rules", i, "backendRefs"), list(rule.get("backendRefs") or []))
                for i, rule in enumerate(spec.get("rules") or [])]

    def identity(self, entry):
        return "name", entry.get("name")

    def matches(self, entry, version):
        return entry.get("name") == (version.backend or version.name)

    def describe_group(self, path):
        return f"rule {path[2]}"

    def all_zero_error(self) -> str:
        return "every weight would be 0: Gateway API answers 500 to every request of the rule"

    def warnings(self, route):
        rules = (route.get("spec") or {}).get("rules") or []
        if any(r.get("sessionPersistence") for r in rules):
            return ["sessionPersistence is set: clients with a session cookie or header keep their backend, "
                    "even at weight 0"]
        return []


class _VirtualService(_ListAdapter):
    kind = "VirtualService"
    default_weight = None  # absent: Istio's even split (or 100 for a single destination)

    def groups(self, spec):
        return [(("spec", "http", i, "route"), list(http.get("route") or []))
                for i, http in enumerate(spec.get("http") or [])]

    def identity(self, entry):
        return "destination", entry.get("destination")

    def matches(self, entry, version):
        dest = entry.get("destination") or {}
        host = str(dest.get("host", "")).split(".")[0]
        subset = dest.get("subset") or ""
        if subset:
            return subset == version.name and (not version.backend or host == version.backend)
        return host == (version.backend or version.name)

    def describe_group(self, path):
        return f"http route {path[2]}"

    def all_zero_error(self) -> str:
        return "every weight would be 0: Istio rejects a route whose destinations' weights add up to 0"


class _TrafficSplit(_ListAdapter):
    kind = "TrafficSplit"
    default_weight = 0

    def groups(self, spec):
        return [(("spec", "backends"), list(spec.get("backends") or []))]

    def identity(self, entry):
        return "service", entry.get("service")

    def matches(self, entry, version):
        return entry.get("service") == (version.backend or version.name)

    def describe_group(self, path):
        return "the backends"


class _NginxCanary:
    """ingress-nginx: the canary Ingress' annotations; the stable Ingress is never touched."""

    kind = "Ingress"

    def read(self, route: Mapping[str, Any], service: InferenceService) -> _Read:
        out = _Read()
        meta = route.get("metadata") or {}
        notes = meta.get("annotations") or {}
        name = _name(route)
        if str(notes.get(NGINX_CANARY, "")).lower() != "true":
            out.errors.append(f'Ingress {name} is not an ingress-nginx canary ({NGINX_CANARY} is not "true")')
            return out
        if len(service.versions) != 2:
            out.errors.append("an ingress-nginx canary splits between exactly two versions")
            return out
        backends = _ingress_backends(route.get("spec") or {})
        canary = next((v.name for v in service.versions if (v.backend or v.name) in backends), None)
        if canary is None:
            out.errors.append(f"Ingress {name} routes to none of the service's versions")
            return out
        try:
            total = int(str(notes.get(NGINX_TOTAL, DEFAULT_SCALE)))
            weight = int(str(notes.get(NGINX_WEIGHT, 0)))
        except ValueError:
            out.errors.append(f"Ingress {name}: {NGINX_WEIGHT} or {NGINX_TOTAL} is not an integer")
            return out
        if total <= 0:
            out.errors.append(f"Ingress {name}: {NGINX_TOTAL} must be positive")
            return out
        stable = next(v.name for v in service.versions if v.name != canary)
        out.canary = canary
        out.scale = total
        out.weights = {v.name: (weight if v.name == canary else total - weight) for v in service.versions}
        out.slots = [(("metadata", "annotations"), NGINX_WEIGHT, notes.get(NGINX_WEIGHT, _MISSING), weight, canary)]
        out.notes.append(f"{stable} is the stable Ingress' backend; only the canary's weight is written")
        return out

    def validate(self, weights: Mapping[str, int]) -> list[str]:
        return [f"{k}: weight {w} is negative" for k, w in weights.items() if w < 0]

    def patch_body(self, read: _Read, weights: Mapping[str, int]) -> list[dict[str, Any]]:
        (_, key, old, _, canary) = read.slots[0]
        path = _ptr("metadata", "annotations", key)
        new = str(weights[canary])
        if old is _MISSING:
            return [{"op": "add", "path": path, "value": new}]
        return [{"op": "test", "path": path, "value": old}, {"op": "replace", "path": path, "value": new}]

    def warnings(self, route: Mapping[str, Any]) -> list[str]:
        return ["with session affinity, ingress-nginx keeps clients on the backend they were sent to "
                "(affinity-canary-behavior: sticky)"]


ADAPTERS: dict[str, Any] = {
    "HTTPRoute": _HTTPRoute(),
    "VirtualService": _VirtualService(),
    "TrafficSplit": _TrafficSplit(),
    "Ingress": _NginxCanary(),
}


def _ingress_backends(spec: Mapping[str, Any]) -> set[str]:
    names = set()
    default = ((spec.get("defaultBackend") or {}).get("service") or {}).get("name")
    if default:
        names.add(default)
    for rule in spec.get("rules") or []:
        for path in ((rule.get("http") or {}).get("paths") or []):
            svc = ((path.get("backend") or {}).get("service") or {}).get("name")
            if svc:
                names.add(svc)
    return names


def _quantity(raw: Any) -> int:
    """A weight as an integer (SMI v1alpha1 wrote quantities such as "500m")."""
    if isinstance(raw, bool):
        return int(raw)
    if isinstance(raw, (int, float)):
        return int(raw)
    text = str(raw).strip()
    try:
        return int(text[:-1]) // 1000 if text.endswith("m") else int(float(text))
    except ValueError:
        return 0


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _managed_by_argo(route: Mapping[str, Any]) -> bool:
    return any(ARGO_MANAGER in str(m.get("manager", "")) for m in (route.get("metadata") or {}).get("managedFields") or [])


# ----- the plan -------------------------------------------------------------------------


def router_api(kind: str, api_versions: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    group, version, plural = ROUTER_APIS[kind]
    return group, (api_versions or {}).get(group, version), plural


def served_api_versions(backend: Any) -> dict[str, str]:
    """API group -> version the live backend discovered (empty for the demo: it serves the defaults)."""
    kinds = getattr(getattr(backend, "reader", None), "route_kinds", None) or {}
    return {group: version for group, (version, _plural) in kinds.items()}


def route_object_name(service: InferenceService) -> str:
    if service.router_kind == "Rollout":
        return next((v.workload for v in service.versions if v.workload), service.router_name or service.name)
    return service.router_name or service.name


def needs_route(plan: ShiftPlan) -> bool:
    """True when the patch can only be built from the route object, read fresh."""
    return plan.kind in ADAPTERS and plan.ok and plan.changes and plan.patch is None


def read_route(plan: ShiftPlan, writer: Writer) -> dict:
    return writer.get_object(plan.group, plan.api_version, plan.plural, plan.service.namespace, plan.object_name)


def find_service(snapshot: ClusterSnapshot, name: str) -> InferenceService:
    """A service by "namespace/name", or by name when only one namespace has it."""
    if "/" in name:
        found = snapshot.service(name)
        if found is None:
            raise ShiftError(f'service "{name}" not found')
        return found
    matches = [s for s in snapshot.services if s.name == name]
    if not matches:
        raise ShiftError(f'service "{name}" not found')
    if len(matches) > 1:
        raise ShiftError(f'service name "{name}" is in several namespaces: {", ".join(s.key for s in matches)}')
    return matches[0]


def plan_shift(
    snapshot: ClusterSnapshot,
    service_key: str,
    targets: Targets,
    *,
    route: Mapping[str, Any] | None = None,
    api_versions: Mapping[str, str] | None = None,
) -> ShiftPlan:
    """What a shift will do. Pure: no I/O.

    Without `route` the current weights come from the snapshot and the plan has
    no patch yet for list-shaped routes (`needs_route`); with the route object
    as just read, the patch is exact: what the preview shows is what is sent.
    """
    service = find_service(snapshot, service_key)
    facts = {
        v.name: (v.rollout.ready, v.rollout.replicas_desired, snapshot.sessions_of(service, v.name))
        for v in service.versions
    }
    current = {v.name: v.weight for v in service.versions}
    return _plan(service, facts, current, targets, route, api_versions)


def plan_rollout(
    snapshot: ClusterSnapshot, service_key: str, action: str, *, api_versions: Mapping[str, str] | None = None,
) -> ShiftPlan:
    """An Argo Rollouts action: promote (next step), promote-full, abort or retry."""
    service = find_service(snapshot, service_key)
    facts = {
        v.name: (v.rollout.ready, v.rollout.replicas_desired, snapshot.sessions_of(service, v.name))
        for v in service.versions
    }
    if service.router_kind != "Rollout":
        return _bare(service, facts, api_versions, [f"{service.key} is not an Argo Rollout ({service.router_kind or 'no router'})"])
    if action not in ROLLOUT_ACTIONS:
        return _bare(service, facts, api_versions, [f'unknown Rollout action "{action}" ({", ".join(ROLLOUT_ACTIONS)})'])
    return _rollout_plan(service, facts, {v.name: v.weight for v in service.versions}, action, api_versions)


def _bare(service, facts, api_versions, errors, kind: str | None = None) -> ShiftPlan:
    kind = kind if kind is not None else service.router_kind
    group, version, plural = router_api(kind, api_versions) if kind in ROUTER_APIS else ("", "", "")
    versions = tuple(
        VersionShift(v.name, v.backend, v.weight, service.share_pct(v.name), None, None, *facts[v.name])
        for v in service.versions
    )
    return ShiftPlan(service, kind, "shift", group, version, plural, route_object_name(service), versions,
                     DEFAULT_SCALE, {}, errors=tuple(errors))


def _rollout_plan(service, facts, current, action, api_versions) -> ShiftPlan:
    group, version, plural = router_api("Rollout", api_versions)
    name = route_object_name(service)
    body, sub = {
        "promote": ({"spec": {"paused": False}}, ""),
        "promote-full": ({"status": {"promoteFull": True}}, "status"),
        "abort": ({"status": {"abort": True}}, "status"),
        "retry": ({"status": {"abort": False}}, "status"),
    }[action]
    pcts = shares(current)
    target = {"promote-full": {"canary": 100.0, "stable": 0.0}, "abort": {"canary": 0.0, "stable": 100.0}}.get(action)
    versions = tuple(
        VersionShift(
            v.name, v.backend, current[v.name], pcts.get(v.name),
            None if target is None or v.name not in target else round(target[v.name]),
            None if target is None else target.get(v.name), *facts[v.name],
        )
        for v in service.versions
    )
    warnings = ["the Rollouts controller moves the weights and owns the routes: gputui patches the Rollout only"]
    sessions = facts.get("canary", (0, 0, None))[2] if action == "abort" else None
    if sessions:
        warnings.insert(0, f"canary goes to 0%: its {sessions} live sessions continue on its pods until the "
                           "controller scales it down; only new sessions move")
    return ShiftPlan(
        service, "Rollout", action, group, version, plural, name, versions, DEFAULT_SCALE, target or {},
        warnings=tuple(warnings),
        patch=Patch(group, version, plural, service.namespace, name, "merge", body, sub),
    )


def _plan(service, facts, current, targets, route, api_versions) -> ShiftPlan:
    kind = service.router_kind
    if not kind:
        return _bare(service, facts, api_versions, [f"{service.key} has no traffic router in front of it: nothing to shift"], kind="")
    if kind not in ROUTER_APIS:
        return _bare(service, facts, api_versions, [f"router kind {kind} is not supported"])
    if len(service.versions) < 2:
        return _bare(service, facts, api_versions, [f"{service.key} has one version: nothing to shift"])
    if kind == "Rollout":
        return _rollout_from_targets(service, facts, current, targets, api_versions)

    adapter = ADAPTERS[kind]
    group, version, plural = router_api(kind, api_versions)
    errors: list[str] = []
    blockers: list[str] = []
    warnings: list[str] = []
    notes: list[str] = []
    read: _Read | None = None
    scale = route_scale(sum(w for w in current.values() if w is not None))
    if route is not None:
        if _managed_by_argo(route):
            errors.append(f"{kind} {_name(route)} is managed by Argo Rollouts ({ARGO_MANAGER}): "
                          "promote or abort its Rollout instead")
        read = adapter.read(route, service)
        errors += read.errors
        warnings += read.warnings + adapter.warnings(route)
        notes += read.notes
        if not read.errors:
            current = read.weights
            scale = read.scale or scale
    current_pcts = shares(current)
    pcts, target_errors = resolve_targets(current_pcts, targets)
    errors += target_errors
    weights = apportion(pcts, scale) if not target_errors else {k: w or 0 for k, w in current.items()}
    if not target_errors:
        errors += adapter.validate(weights)
    target_pcts = {k: 100.0 * w / scale for k, w in weights.items()}

    for v in service.versions:
        ready, desired, sessions = facts[v.name]
        now, then = current_pcts.get(v.name, 0.0), target_pcts[v.name]
        if then > 0 and ready == 0:
            if then > now + 1e-9:
                blockers.append(f"{v.name} has no ready replicas (0/{desired}): it would get {fmt_pct(then)} of "
                                "new sessions and fail them")
            else:
                warnings.append(f"{v.name} has no ready replicas: its {fmt_pct(then)} of new sessions will fail")
        if then == 0 and now > 0 and sessions:
            warnings.append(f"{v.name} goes to 0%: its {sessions} live sessions continue on its pods until "
                            "they finish; only new sessions move")
    versions = tuple(
        VersionShift(v.name, v.backend, current.get(v.name), current_pcts.get(v.name), weights[v.name],
                     target_pcts[v.name], *facts[v.name])
        for v in service.versions
    )
    patch = None
    changed = any(x.changes for x in versions)
    if read is not None and not errors and changed:
        patch = Patch(group, version, plural, service.namespace, route_object_name(service), "json",
                      adapter.patch_body(read, weights))
    return ShiftPlan(
        service, kind, "shift", group, version, plural, route_object_name(service), versions, scale, pcts,
        errors=tuple(errors), blockers=tuple(blockers), warnings=tuple(dict.fromkeys(warnings)),
        notes=tuple(notes), patch=patch, route_read=read is not None,
    )


def _rollout_from_targets(service, facts, current, targets, api_versions) -> ShiftPlan:
    """Argo Rollouts has no set-weight: 100% canary is promote-full, 0% is abort, nothing else."""
    pcts, errors = resolve_targets(shares(current), targets)
    if errors:
        return _bare(service, facts, api_versions, errors)
    if "canary" not in pcts:
        return _bare(service, facts, api_versions, ['an Argo Rollout has versions "stable" and "canary"'])
    if abs(pcts["canary"] - 100) < 0.01:
        return _rollout_plan(service, facts, current, "promote-full", api_versions)
    if pcts["canary"] < 0.01:
        return _rollout_plan(service, facts, current, "abort", api_versions)
    return _bare(service, facts, api_versions, [
        "Argo Rollouts has no set-weight: its canary follows spec.strategy.canary.steps; "
        "shift the canary to 100% (promote-full) or 0% (abort), or promote to the next step",
    ])


def replan(plan: ShiftPlan, route: Mapping[str, Any]) -> ShiftPlan:
    """The same targets, planned again on the route object as read now."""
    facts = {v.name: (v.ready, v.desired, v.sessions) for v in plan.versions}
    current = {v.name: v.current_weight for v in plan.versions}
    api = {plan.group: plan.api_version}
    return _plan(plan.service, facts, current, dict(plan.targets), route, api)


# ----- apply ----------------------------------------------------------------------------


def _conflict(exc: BaseException) -> bool:
    status = getattr(exc, "status", None)
    text = str(exc).lower()
    return status == 409 or (status == 422 and ("test" in text or "does not apply" in text))


def apply_shift(plan: ShiftPlan, writer: Writer | None, audit: AuditLog, force: bool = False) -> str:
    """Send the plan's patch; returns the line to show. Audit-logged, ok or not."""
    if writer is None:
        raise ReadOnlyError("shift")
    if plan.errors:
        raise ShiftError(plan.errors[0])
    if plan.blockers and not force:
        raise ShiftError(plan.blockers[0] + " (force to shift anyway)")
    if not plan.changes:
        return f"{plan.target}: already at {', '.join(f'{v.name} {fmt_pct(v.current_pct)}' for v in plan.versions)}"
    if plan.patch is None:
        # Planned from the snapshot: read the route now, and refuse when it moved since.
        fresh = replan(plan, read_route(plan, writer))
        if fresh.errors:
            raise ShiftError(fresh.errors[0])
        moved = [v for v, f in zip(plan.versions, fresh.versions) if v.current_weight != f.current_weight]
        if moved:
            raise ShiftError(
                f"{plan.target} changed since the plan ({', '.join(f'{f.name} now {fmt_pct(f.current_pct)}' for f in fresh.versions)}): "
                "look again before shifting"
            )
        if fresh.blockers and not force:
            raise ShiftError(fresh.blockers[0] + " (force to shift anyway)")
        plan = fresh
        if plan.patch is None:
            return f"{plan.target}: nothing to change"
    patch = plan.patch
    params = {
        "service": plan.service.key,
        "action": plan.action,
        "from": {v.name: v.current_weight for v in plan.versions},
        "to": {v.name: v.target_weight for v in plan.versions},
        "patch_type": patch.patch_type,
        "subresource": patch.subresource,
        "patch": patch.body,
        "force": force,
    }
    action = "shift" if plan.action == "shift" else f"rollout-{plan.action}"
    try:
        writer.patch_object(patch.group, patch.version, patch.plural, patch.namespace, patch.name,
                            patch.body, patch_type=patch.patch_type, subresource=patch.subresource)
    except BackendError as exc:
        audit.record(action, plan.target, f"error: {exc}", params)
        if _conflict(exc):
            raise ShiftError(
                f"{plan.target} changed since it was read (someone else edited it): nothing was changed; "
                "look again and retry"
            ) from None
        raise
    audit.record(action, plan.target, "ok", params)
    if plan.action != "shift":
        return f"{plan.target}: {plan.action} sent"
    return f"{plan.target}: {plan.summary()}"

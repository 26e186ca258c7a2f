"""One adapter per router kind: read its route object, validate weights, build the exact patch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gputui.model import InferenceService, ServiceVersion
from gputui.ops.traffic.vocabulary import ARGO_MANAGER, DEFAULT_SCALE, HTTPROUTE_MAX_WEIGHT
from gputui.ops.traffic.weights import route_scale


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
    # as read or _MISSING, the version).
    slots: list[tuple[tuple[Any, ...], str, Any, Any, str]] = field(default_factory=list)
    scale: int | None = None


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


ADAPTERS: dict[str, Any] = {
    "HTTPRoute": _HTTPRoute(),
    "VirtualService": _VirtualService(),
    "TrafficSplit": _TrafficSplit(),
}


def _quantity(raw: Any) -> int:
    """A weight as an integer (SMI v1alpha1 wrote quantities such as "500m")."""
    if isinstance(raw, bool):
        return int(raw)
    try:
        if isinstance(raw, (int, float)):
            return int(raw)
        text = str(raw).strip()
        return int(text[:-1]) // 1000 if text.endswith("m") else int(float(text))
    except (ValueError, OverflowError):  # "x", NaN, or 1e999 (infinite) in a route read from the cluster
        return 0


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _managed_by_argo(route: Mapping[str, Any]) -> bool:
    return any(ARGO_MANAGER in str(m.get("manager", "")) for m in (route.get("metadata") or {}).get("managedFields") or [])

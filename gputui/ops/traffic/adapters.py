"""The route adapter: a router kind's route object read by its row of the table, its weights validated, the exact
patch built."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gputui.ops.traffic.vocabulary import ARGO_MANAGER
from gputui.ops.traffic.weights import route_scale
from gputui.vocabulary.model import InferenceService, ServiceVersion
from gputui.vocabulary.router_kinds import (
    ROUTER_KINDS,
    Path,
    RouteBackend,
    RouterKind,
    WeightedBackends,
    route_kinds,
    route_weight,
    whole_weight,
)


def _ptr(*parts: str | int) -> str:
    """A JSON pointer (RFC 6901): ~ and / in a key are escaped."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one version's weight lives in the route object."""

    path: Path  # of the backend entry
    id_field: str  # the entry's field naming its backend
    id_value: object  # its value, as read (the patch's `test`)
    raw: object  # the weight as written; None when absent or null: its patch adds one and tests no old value
    version: str


@dataclass
class AdapterRead:
    """What an adapter found in the route object."""

    weights: dict[str, int | None] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    scale: int | None = None


def names(backend: RouteBackend, version: ServiceVersion) -> bool:
    """The route's backend is this version's: an Istio subset by the version's name (on its host, when it
    has one), anything else by the version's backend (or its name)."""
    if backend.subset:
        return backend.subset == version.name and (not version.backend or backend.service == version.backend)
    return backend.service == (version.backend or version.name)


@dataclass(frozen=True, slots=True)
class RouteAdapter:
    """A list-shaped route kind's weights, read and patched by its row: HTTPRoute, VirtualService,
    TrafficSplit, and whatever kind the table gains."""

    row: RouterKind

    @property
    def kind(self) -> str:
        return self.row.kind

    @property
    def max_weight(self) -> int | None:
        return self.row.max_weight

    @property
    def _weights(self) -> WeightedBackends:
        assert self.row.weights is not None  # ADAPTERS holds only kinds with weights
        return self.row.weights

    def read(self, route: Mapping[str, Any], service: InferenceService) -> AdapterRead:
        out = AdapterRead()
        shape = self._weights
        spec = route.get("spec") or {}
        groups: list[tuple[Path, list[Any], list[str | None]]] = []
        for path, entries in shape.lists(spec):
            owners: list[str | None] = []
            for entry in entries:
                backend = shape.backend(entry) if isinstance(entry, Mapping) else None
                owners.append(next((v.name for v in service.versions if backend and names(backend, v)), None))
            groups.append((path, entries, owners))
        # The splitting groups: every backend is one of the service's versions, as in the widest rule.
        splitting = [g for g in groups if len(g[1]) >= 2 and all(o is not None for o in g[2])]
        if not splitting:
            out.errors.append(
                f"{self.kind} {route_name(route)} has no rule that splits traffic between "
                f"{', '.join(v.name for v in service.versions)}"
            )
            return out
        widest = max(len(set(g[2])) for g in splitting)
        chosen = [g for g in splitting if len(set(g[2])) == widest]
        first = chosen[0]
        wanted = {v.name for v in service.versions}
        if set(first[2]) != wanted:
            missing = sorted(wanted - {o for o in first[2] if o})
            out.errors.append(f"{self.kind} {route_name(route)} routes to no backend of {', '.join(missing)}")
            return out
        for path, entries, owners in groups:
            if (path, entries, owners) in chosen:
                continue
            mine = sorted({o for o in owners if o})
            if mine:
                out.notes.append(f"{shape.describe(path)} sends its matches to {', '.join(mine)}; left as is")
        seen: dict[str, int | None] = {}
        rounded: list[str] = []
        unreadable: list[str] = []
        for path, entries, owners in chosen:
            for index, (entry, owner) in enumerate(zip(entries, owners, strict=True)):
                assert owner is not None  # chosen groups are splitting ones: every entry has its version
                raw = entry.get("weight")
                out.slots.append(Slot((*path, index), shape.identity, entry.get(shape.identity), raw, owner))
                seen.setdefault(owner, self._weight(raw))  # the first splitting rule's weights
                if raw is not None and not whole_weight(raw):
                    (rounded if route_weight(raw) is not None else unreadable).append(f"{owner} {raw!r}")
        out.weights = {v.name: seen.get(v.name) for v in service.versions}
        if rounded:
            out.warnings.append(
                f"weights not written as whole numbers ({', '.join(dict.fromkeys(rounded))}) are read rounded up, "
                "as Kubernetes reads a quantity as an integer; the shift writes whole numbers")
        if unreadable:
            out.warnings.append(f"weights that are no number ({', '.join(dict.fromkeys(unreadable))}) are unknown; "
                                "the shift writes whole numbers")
        per_group = {tuple(self._weight(e.get("weight")) for e in entries) for _, entries, _ in chosen}
        if len(per_group) > 1:
            out.warnings.append(f"{len(chosen)} rules split between these versions with different weights; all get the target")
        known = [w for w in out.weights.values() if w is not None]
        out.scale = route_scale(sum(known))  # none known: the default scale
        return out

    def _weight(self, raw: object) -> int | None:
        if raw is None:  # absent or null: the kind's meaning of no weight
            return self._weights.absent
        return route_weight(raw)

    def validate(self, weights: Mapping[str, int]) -> list[str]:
        errors = []
        for name, w in weights.items():
            if w < 0:
                errors.append(f"{name}: weight {w} is negative")
            elif self.max_weight is not None and w > self.max_weight:
                errors.append(f"{name}: weight {w} is above {self.kind}'s maximum {self.max_weight:,}")
        if weights and sum(weights.values()) == 0:
            errors.append(self.row.all_zero)
        return errors

    def patch_body(self, read: AdapterRead, weights: Mapping[str, int]) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        for slot in read.slots:
            new = weights[slot.version]
            ops.append({"op": "test", "path": _ptr(*slot.path, slot.id_field), "value": slot.id_value})
            if slot.raw is None:
                # Nothing to test: an absent weight has no value. The name test still pins the entry.
                ops.append({"op": "add", "path": _ptr(*slot.path, "weight"), "value": new})
                continue
            ops.append({"op": "test", "path": _ptr(*slot.path, "weight"), "value": slot.raw})
            if route_weight(slot.raw) != new or not whole_weight(slot.raw):
                ops.append({"op": "replace", "path": _ptr(*slot.path, "weight"), "value": new})
        return ops

    def warnings(self, route: Mapping[str, Any]) -> list[str]:
        return self.row.warnings(route)


class _Adapters(Mapping[str, RouteAdapter]):
    """Router kind -> its adapter, for every kind of the table whose route objects hold weights, read from the
    table at each lookup: a kind added to it has its adapter without another edit."""

    def __getitem__(self, kind: str) -> RouteAdapter:
        row = ROUTER_KINDS.get(kind)
        if row is None or row.weights is None:
            raise KeyError(kind)
        return RouteAdapter(row)

    def __iter__(self) -> Iterator[str]:
        return iter([k.kind for k in route_kinds()])

    def __len__(self) -> int:
        return len(route_kinds())


ADAPTERS: Mapping[str, RouteAdapter] = _Adapters()


def route_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def managed_by_argo(route: Mapping[str, Any]) -> bool:
    return any(ARGO_MANAGER in str(m.get("manager")) for m in (route.get("metadata") or {}).get("managedFields") or [])

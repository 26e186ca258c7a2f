"""The router kinds gputui reads and shifts: one typed row per kind (its API, where its weights live and how
an entry names its backend, its limits, its demo form). Discovery, the reader's records, the snapshot's caches,
the shift's patches and the demo all read this table at the time they run: a kind added to it is joined
without another edit. Pure: no I/O."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gputui.vocabulary.gpu_resources import parse_quantity
from gputui.vocabulary.router_demo_forms import DemoForm, httproute_form, virtualservice_form

POOL_GROUP = "inference.networking.k8s.io"  # the Gateway API Inference Extension's InferencePool
HTTPROUTE_MAX_WEIGHT = 1_000_000  # Gateway API's CRD schema


@dataclass(frozen=True, slots=True)
class RouteBackend:
    service: str  # Service name (or VirtualService host / subset, or InferencePool name)
    weight: int | None
    subset: str = ""
    pool: bool = False  # an HTTPRoute backendRef to an InferencePool (its selector finds the pods), not a Service


@dataclass(frozen=True, slots=True)
class RouteRecord:
    kind: str
    namespace: str
    name: str
    backends: tuple[RouteBackend, ...]


def route_weight(raw: object) -> int | None:
    """A route's weight as the integer a router holds, or None when it is no number (unknown, never 0).

    The one parser for weights, the reader's and the shift's. A weight is a Kubernetes quantity (SMI v1alpha1
    wrote "500m"); as an integer it is read as apimachinery's Quantity.Value() reads one: rounded up, away from
    zero. So "1500m" is 2 and "500m" is 1: a backend given any weight is never read as one that gets none,
    and a whole quantity reads exactly. The shift writes whole numbers back (and says it rounded)."""
    if type(raw) is int:
        return raw
    if isinstance(raw, float):  # JSON's 2.0 or 1.5: finite ones only (NaN and 1e999 are no weight)
        if not math.isfinite(raw):
            return None
        exact = Fraction(raw)
    else:
        try:
            exact = parse_quantity(raw)  # refuses booleans, None and text that is no quantity
        except ValueError:
            return None
    return math.ceil(exact) if exact >= 0 else math.floor(exact)


def whole_weight(raw: object) -> bool:
    """The weight is written as the integer it reads as (no quantity to round)."""
    return type(raw) is int


def _entry(raw: object) -> Mapping[str, Any]:
    return raw if isinstance(raw, Mapping) else {}


def backend_ref(entry: Mapping[str, Any]) -> RouteBackend:
    """Gateway API's backendRef (HTTPRoute, GRPCRoute): a Service by name, or an InferencePool."""
    pool = entry.get("group") == POOL_GROUP and entry.get("kind") == "InferencePool"
    return RouteBackend(str(entry.get("name") or ""), None, pool=pool)


def istio_destination(entry: Mapping[str, Any]) -> RouteBackend:
    """Istio's destination: a host (a Service, by its short name) and maybe one of its subsets."""
    dest = _entry(entry.get("destination"))
    return RouteBackend(str(dest.get("host", "")).split(".")[0], None, str(dest.get("subset", "") or ""))


def smi_backend(entry: Mapping[str, Any]) -> RouteBackend:
    """SMI's backend: a Service by name."""
    return RouteBackend(str(entry.get("service") or ""), None)


def _no_warnings(route: Mapping[str, Any]) -> list[str]:
    return []


def _session_persistence(route: Mapping[str, Any]) -> list[str]:
    rules = _entry(route.get("spec")).get("rules") or []
    if any(_entry(r).get("sessionPersistence") for r in rules):
        return ["sessionPersistence is set: clients with a session cookie or header keep their backend, "
                "even at weight 0"]
    return []


Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class WeightedBackends:
    """Where a route keeps its weighted backends, and what one entry says."""

    rules: str | None  # spec.<rules>[] each hold a list (a rule, an http route); None: one list in spec itself
    field: str  # the list's field in a rule (or in spec)
    identity: str  # the entry's field that names its backend: the JSON patch's `test` pins the entry by it
    backend: Callable[[Mapping[str, Any]], RouteBackend]  # the backend an entry names (its weight aside)
    absent: int | None  # what an entry without a weight means (None: the router splits evenly)
    rule_word: str = "rule"  # how the kind's own documentation names one of its rules

    def lists(self, spec: Mapping[str, Any]) -> list[tuple[Path, list[Any]]]:
        """(path of each backend list, the list), rule by rule."""
        if self.rules is None:
            return [(("spec", self.field), list(spec.get(self.field) or []))]
        return [(("spec", self.rules, i, self.field), list(_entry(rule).get(self.field) or []))
                for i, rule in enumerate(spec.get(self.rules) or [])]

    def weight(self, entry: Mapping[str, Any]) -> int | None:
        raw = entry.get("weight")
        return self.absent if raw is None else route_weight(raw)

    def describe(self, path: Path) -> str:
        return f"{self.rule_word} {path[2]}" if self.rules is not None else f"the {self.field}"


@dataclass(frozen=True, slots=True)
class RouterKind:
    """One router kind: its API, its weights (None: a Rollout, whose controller owns them and whose objects
    are read as workloads), its limits and its demo form."""

    kind: str
    group: str
    versions: tuple[str, ...]  # the versions gputui speaks, the default (without discovery) first
    plural: str
    weights: WeightedBackends | None
    max_weight: int | None = None
    all_zero: str = "every weight would be 0: no backend would get traffic"
    warnings: Callable[[Mapping[str, Any]], list[str]] = _no_warnings
    demo: DemoForm | None = None  # how the demo cluster holds one; None: the demo has none of this kind

    @property
    def version(self) -> str:
        return self.versions[0]

    def record(self, obj: Mapping[str, Any]) -> RouteRecord:
        """The route as the join reads it: the backends of its widest list (the one that splits traffic),
        each with its weight. An unknown weight on a list's only backend is all of its traffic."""
        assert self.weights is not None, f"{self.kind} has no weights of its own"
        meta = _entry(obj.get("metadata"))
        backends: list[RouteBackend] = []
        for _path, entries in self.weights.lists(_entry(obj.get("spec"))):
            if len(entries) > len(backends):
                backends = []
                for raw in entries:
                    entry = _entry(raw)
                    b = self.weights.backend(entry)
                    backends.append(RouteBackend(b.service, self.weights.weight(entry), b.subset, b.pool))
        if len(backends) == 1 and backends[0].weight is None:
            backends = [RouteBackend(backends[0].service, 100, backends[0].subset, backends[0].pool)]
        return RouteRecord(self.kind, str(meta.get("namespace", "")), str(meta.get("name", "")), tuple(backends))


ROUTER_KINDS: dict[str, RouterKind] = {
    "HTTPRoute": RouterKind(
        "HTTPRoute", "gateway.networking.k8s.io", ("v1", "v1beta1"), "httproutes",
        WeightedBackends("rules", "backendRefs", "name", backend_ref, absent=1),  # Gateway API: absent is 1
        max_weight=HTTPROUTE_MAX_WEIGHT,
        all_zero="every weight would be 0: Gateway API answers 500 to every request of the rule",
        warnings=_session_persistence, demo=httproute_form(HTTPROUTE_MAX_WEIGHT),
    ),
    "VirtualService": RouterKind(
        "VirtualService", "networking.istio.io", ("v1", "v1beta1", "v1alpha3"), "virtualservices",
        WeightedBackends("http", "route", "destination", istio_destination, absent=None, rule_word="http route"),
        all_zero="every weight would be 0: Istio rejects a route whose destinations' weights add up to 0",
        demo=virtualservice_form(),
    ),
    # SMI is archived (legacy); its CRD's last version is v1alpha4, v1alpha1 wrote weights as quantities.
    "TrafficSplit": RouterKind(
        "TrafficSplit", "split.smi-spec.io", ("v1alpha2", "v1alpha4", "v1alpha3", "v1alpha1"), "trafficsplits",
        WeightedBackends(None, "backends", "service", smi_backend, absent=0),
    ),
    # Argo Rollouts: no weight to set. Its controller owns the routes; gputui patches the Rollout's verbs.
    "Rollout": RouterKind("Rollout", "argoproj.io", ("v1alpha1",), "rollouts", None),
}


def router_kind(kind: str) -> RouterKind | None:
    return ROUTER_KINDS.get(kind)


def route_kinds() -> list[RouterKind]:
    """The kinds whose route objects hold weights (every one but Rollout), as the table holds them now."""
    return [k for k in ROUTER_KINDS.values() if k.weights is not None]

"""How the demo cluster holds a route of one kind: the object a real cluster would hold for a service (no
randomness: the demo's seed is untouched), and the checks its CRD schema or admission webhook makes on a
write. One form per row of `router_kinds`; pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class DemoBackend:
    version: str
    service: str  # the Service the version's traffic goes to
    weight: int | None


@dataclass(frozen=True, slots=True)
class DemoRoute:
    """A demo service as its route sees it: its versions' backends, in order, the last the canary."""

    name: str
    namespace: str
    backends: tuple[DemoBackend, ...]
    port: int


@dataclass(frozen=True, slots=True)
class DemoForm:
    # One Service over every version, a subset each (Istio's way); else each version its own Service.
    subsets: bool
    spec: Callable[[DemoRoute], dict[str, Any]]
    status: Callable[[DemoRoute], dict[str, Any]]
    validate: Callable[[Mapping[str, Any]], list[str]]  # the apiserver's (or its webhook's) complaints; [] is ok


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_GATEWAY = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway",
            "namespace": "gateway-system"}


def _httproute_spec(route: DemoRoute) -> dict[str, Any]:
    canary = route.backends[-1]
    return {
        "parentRefs": [dict(_GATEWAY)],
        "rules": [
            # Testers reach the canary by header, whatever the split says.
            {"matches": [{"headers": [{"type": "Exact", "name": "x-model-version", "value": canary.version}],
                          "path": {"type": "PathPrefix", "value": "/"}}],
             "backendRefs": [{"group": "", "kind": "Service", "name": canary.service, "port": route.port,
                              "weight": 1}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
             "backendRefs": [{"group": "", "kind": "Service", "name": b.service, "port": route.port,
                              "weight": b.weight} for b in route.backends]},
        ],
    }


def _httproute_status(route: DemoRoute) -> dict[str, Any]:
    return {"parents": [{
        "parentRef": dict(_GATEWAY),
        "controllerName": "demo.gputui.io/gateway-controller",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                        "observedGeneration": 1, "lastTransitionTime": "2026-11-02T09:00:00Z",
                        "message": ""}],
    }]}


def httproute_form(max_weight: int) -> DemoForm:
    def validate(obj: Mapping[str, Any]) -> list[str]:
        """The checks Gateway API's CRD schema makes."""
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return ["spec: Required value"]
        problems: list[str] = []
        for i, rule in enumerate(spec.get("rules") or []):
            for j, ref in enumerate(rule.get("backendRefs") or []):
                where = f"spec.rules[{i}].backendRefs[{j}]"
                if not ref.get("name"):
                    problems.append(f"{where}.name: Required value")
                weight = ref.get("weight", 1)
                if not _is_int(weight):
                    problems.append(f'{where}.weight: Invalid value: "{weight}": {where}.weight in body must be of type integer')
                elif weight < 0:
                    problems.append(f"{where}.weight: Invalid value: {weight}: {where}.weight in body should be greater than or equal to 0")
                elif weight > max_weight:
                    problems.append(f"{where}.weight: Invalid value: {weight}: {where}.weight in body should be less than or equal to {max_weight}")
        return problems

    return DemoForm(subsets=False, spec=_httproute_spec, status=_httproute_status, validate=validate)


def _virtualservice_spec(route: DemoRoute) -> dict[str, Any]:
    host = f"{route.name}.{route.namespace}.svc.cluster.local"
    return {
        "hosts": [host],
        "http": [{"name": "primary", "route": [
            {"destination": {"host": host, "subset": b.version, "port": {"number": route.port}}, "weight": b.weight}
            for b in route.backends
        ]}],
    }


def _no_status(route: DemoRoute) -> dict[str, Any]:
    return {}


def _virtualservice_validate(obj: Mapping[str, Any]) -> list[str]:
    """The checks Istio's validating webhook makes, worded as it words them."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ["spec: Required value"]
    problems: list[str] = []
    for http in spec.get("http") or []:
        routes = http.get("route") or []
        total = 0
        for r in routes:
            weight = r.get("weight", 0)
            if not _is_int(weight):
                problems.append(f"weight {weight!r} is not an integer")
            elif weight < 0:
                problems.append(f"weight {weight} < 0")
            else:
                total += weight
            if not (r.get("destination") or {}).get("host"):
                problems.append("destination.host is required")
        if len(routes) > 1 and total == 0 and not problems:
            problems.append("total destination weight = 0")
    if problems:
        return ['admission webhook "validation.istio.io" denied the request: configuration is invalid: '
                + "; ".join(problems)]
    return problems


def virtualservice_form() -> DemoForm:
    return DemoForm(subsets=True, spec=_virtualservice_spec, status=_no_status, validate=_virtualservice_validate)

"""The demo's route objects (HTTPRoute, VirtualService) in their real format, and the validation their CRD
schemas would apply."""

from __future__ import annotations

import uuid
from typing import Any

from gputui.backends.demo.scenario import BACKEND_PORT, HTTPROUTE_MAX_WEIGHT, ROUTE_APIS, _SimService


def _backend_name(svc: _SimService, version: str) -> str:
    return f"{svc.name}-{version}"


def _route_object(svc: _SimService) -> dict[str, Any]:
    """The route a real cluster would hold for this service (no randomness: the seed is untouched)."""
    api = ROUTE_APIS[svc.router_kind]
    meta = {
        "name": svc.name, "namespace": svc.namespace,
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"demo/{svc.router_kind}/{svc.namespace}/{svc.name}")),
        "resourceVersion": "1000", "generation": 1, "creationTimestamp": "2026-11-02T09:00:00Z",
        "labels": {"app.kubernetes.io/name": svc.name},
    }
    if svc.router_kind == "HTTPRoute":
        canary = svc.versions[-1]
        spec = {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                            "name": "inference-gateway", "namespace": "gateway-system"}],
            "rules": [
                # Testers reach the canary by header, whatever the split says.
                {"matches": [{"headers": [{"type": "Exact", "name": "x-model-version", "value": canary.name}],
                              "path": {"type": "PathPrefix", "value": "/"}}],
                 "backendRefs": [{"group": "", "kind": "Service", "name": _backend_name(svc, canary.name),
                                  "port": BACKEND_PORT, "weight": 1}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                 "backendRefs": [{"group": "", "kind": "Service", "name": _backend_name(svc, v.name),
                                  "port": BACKEND_PORT, "weight": v.weight} for v in svc.versions]},
            ],
        }
        status: dict[str, Any] = {"parents": [{
            "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                          "name": "inference-gateway", "namespace": "gateway-system"},
            "controllerName": "demo.gputui.io/gateway-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "observedGeneration": 1, "lastTransitionTime": "2026-11-02T09:00:00Z",
                            "message": ""}],
        }]}
    else:
        host = f"{svc.name}.{svc.namespace}.svc.cluster.local"
        spec = {
            "hosts": [host],
            "http": [{"name": "primary", "route": [
                {"destination": {"host": host, "subset": v.name, "port": {"number": BACKEND_PORT}}, "weight": v.weight}
                for v in svc.versions
            ]}],
        }
        status = {}
    return {"apiVersion": f"{api[0]}/{api[2][0]}", "kind": svc.router_kind, "metadata": meta,
            "spec": spec, "status": status}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_route(kind: str, obj: dict[str, Any]) -> list[str]:
    """The checks the CRD schema (HTTPRoute) or Istio's validating webhook (VirtualService) make."""
    problems: list[str] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ["spec: Required value"]
    if kind == "HTTPRoute":
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
                elif weight > HTTPROUTE_MAX_WEIGHT:
                    problems.append(f"{where}.weight: Invalid value: {weight}: {where}.weight in body should be less than or equal to {HTTPROUTE_MAX_WEIGHT}")
    else:
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
        if problems:  # Istio's webhook words it so
            problems = ['admission webhook "validation.istio.io" denied the request: configuration is invalid: '
                        + "; ".join(problems)]
    return problems

"""The demo's route objects in their real format, each built by its kind's demo form (gputui.vocabulary.router_kinds), and
the validation its CRD schema or webhook would apply."""

from __future__ import annotations

import uuid
from typing import Any

from gputui.backends.demo.scenario import BACKEND_PORT, SimService
from gputui.vocabulary.router_demo_forms import DemoBackend, DemoForm, DemoRoute
from gputui.vocabulary.router_kinds import ROUTER_KINDS, RouterKind


def demo_kind(kind: str) -> tuple[RouterKind, DemoForm]:
    """A kind the demo can hold: in the table, with a demo form."""
    row = ROUTER_KINDS.get(kind)
    if row is None or row.demo is None or row.weights is None:
        raise ValueError(f"the demo has no form for router kind {kind!r}")
    return row, row.demo


def backend_name(svc: SimService, version: str) -> str:
    """The Service a version's traffic goes to: the service's own for a form of subsets, else the version's."""
    if svc.router_kind and demo_kind(svc.router_kind)[1].subsets:
        return svc.name
    return f"{svc.name}-{version}"


def route_object(svc: SimService) -> dict[str, Any]:
    """The route a real cluster would hold for this service (no randomness: the seed is untouched)."""
    row, form = demo_kind(svc.router_kind)
    meta = {
        "name": svc.name, "namespace": svc.namespace,
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"demo/{svc.router_kind}/{svc.namespace}/{svc.name}")),
        "resourceVersion": "1000", "generation": 1, "creationTimestamp": "2026-11-02T09:00:00Z",
        "labels": {"app.kubernetes.io/name": svc.name},
    }
    route = DemoRoute(svc.name, svc.namespace, tuple(DemoBackend(v.name, backend_name(svc, v.name), v.weight)
                                                     for v in svc.versions), BACKEND_PORT)
    return {"apiVersion": f"{row.group}/{row.version}", "kind": svc.router_kind, "metadata": meta,
            "spec": form.spec(route), "status": form.status(route)}


def validate_route(kind: str, obj: dict[str, Any]) -> list[str]:
    """The checks the kind's CRD schema (HTTPRoute) or its validating webhook (Istio's) make."""
    return demo_kind(kind)[1].validate(obj)

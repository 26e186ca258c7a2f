"""The shift plan: from a snapshot, a route object and targets to weights, checks and a patch. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gputui.backends.base import Writer
from gputui.ops.traffic import argo
from gputui.ops.traffic.adapters import ADAPTERS, AdapterRead, managed_by_argo, route_name
from gputui.ops.traffic.vocabulary import (
    ARGO_MANAGER,
    DEFAULT_SCALE,
    ROLLOUT_ACTIONS,
    Patch,
    ShiftError,
    ShiftPlan,
    Targets,
    VersionShift,
    fmt_pct,
)
from gputui.ops.traffic.weights import apportion, resolve_targets, route_scale, shares
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferenceService
from gputui.vocabulary.router_kinds import ROUTER_KINDS

CAPACITY_SLACK_PCT = 2.0  # rounding and one small step of a canary above its ready share are not an overload
# A version's (ready replicas, desired replicas, live sessions or None when unknown), when the plan is made.
Facts = Mapping[str, tuple[int, int, int | None]]


@dataclass(frozen=True, slots=True)
class PlanBasis:
    """What a plan is made from, passed as one through the planners: the service, each version's facts and
    current weight when the plan is made, and the router API versions discovery found served (None: the
    table's defaults)."""

    service: InferenceService
    facts: Facts
    current: Mapping[str, int | None]
    api_versions: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class RolloutRead:
    """An Argo Rollout as read now, and for undo the ReplicaSets it owns (their pod templates are the
    revisions undo goes back to)."""

    rollout: Mapping[str, Any]
    replicasets: Sequence[Mapping[str, Any]] = ()


def router_api(kind: str, api_versions: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """(group, version, plural) to patch a kind of the table in: the version discovery found served, else the
    row's default."""
    row = ROUTER_KINDS[kind]
    return row.group, (api_versions or {}).get(kind, row.version), row.plural


def served_api_versions(backend: Any) -> dict[str, str]:
    """Router kind -> version the live backend discovered (empty for the demo: it serves the defaults)."""
    return dict(getattr(getattr(backend, "reader", None), "routers", None) or {})


def route_object_name(service: InferenceService) -> str:
    if service.router_kind == "Rollout":
        return next((v.workload for v in service.versions if v.workload), service.router_name or service.name)
    return service.router_name or service.name


def needs_route(plan: ShiftPlan) -> bool:
    """True when the patch can only be built from the route object (or the Rollout), read fresh."""
    return (plan.kind in ADAPTERS or plan.kind == "Rollout") and plan.ok and plan.changes and plan.patch is None


def read_route(plan: ShiftPlan, writer: Writer) -> dict[str, Any]:
    return writer.get_object(plan.group, plan.api_version, plan.plural, plan.service.namespace, plan.object_name)


def on_route_now(build: Callable[..., ShiftPlan], writer: Writer) -> ShiftPlan:
    """`build(route=None)` from the snapshot, then, when its patch needs the route object, `build(route=...)`
    again on the object as read now: the exact patch is built on what the apiserver holds."""
    plan = build(route=None)
    return build(route=read_route(plan, writer)) if needs_route(plan) else plan


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
    return _plan(_basis(snapshot, service_key, api_versions), targets, route)


def _basis(snapshot: ClusterSnapshot, service_key: str, api_versions: Mapping[str, str] | None) -> PlanBasis:
    """The service's versions as the snapshot has them: ready and desired replicas, live sessions, weight."""
    service = find_service(snapshot, service_key)
    facts = {
        v.name: (v.rollout.ready, v.rollout.replicas_desired, snapshot.sessions_of(service, v.name))
        for v in service.versions
    }
    return PlanBasis(service, facts, {v.name: v.weight for v in service.versions}, api_versions)


def plan_rollout(
    snapshot: ClusterSnapshot, service_key: str, action: str, *, rollout: RolloutRead | None = None,
    api_versions: Mapping[str, str] | None = None,
) -> ShiftPlan:
    """An Argo Rollouts action: promote (next step), promote-full, abort, retry or undo. Its patches follow
    the Rollout object as read (`rollout`, and for undo its ReplicaSets); without it the plan has none yet
    (`needs_route`)."""
    basis = _basis(snapshot, service_key, api_versions)
    service = basis.service
    if service.router_kind != "Rollout":
        return _bare(basis, [f"{service.key} is not an Argo Rollout ({service.router_kind or 'no router'})"])
    if action not in ROLLOUT_ACTIONS:
        return _bare(basis, [f'unknown Rollout action "{action}" ({", ".join(ROLLOUT_ACTIONS)})'])
    return _rollout_plan(basis, action, rollout)


def plan_rollout_now(snapshot: ClusterSnapshot, service_key: str, action: str, writer: Writer,
                     api_versions: Mapping[str, str] | None = None) -> ShiftPlan:
    """plan_rollout on the Rollout as read now (and, for undo, the ReplicaSets it owns)."""
    plan = plan_rollout(snapshot, service_key, action, api_versions=api_versions)
    if not needs_route(plan):
        return plan
    rollout = read_route(plan, writer)
    replicasets: list[dict] = []
    if action == "undo":
        labels = ((rollout.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        replicasets = writer.list_objects("apps", "v1", "replicasets", plan.service.namespace,
                                          ",".join(f"{k}={v}" for k, v in labels.items()))
    return plan_rollout(snapshot, service_key, action, rollout=RolloutRead(rollout, replicasets),
                        api_versions=api_versions)


def _bare(basis: PlanBasis, errors: Sequence[str], kind: str | None = None) -> ShiftPlan:
    service = basis.service
    kind = kind if kind is not None else service.router_kind
    group, version, plural = router_api(kind, basis.api_versions) if kind in ROUTER_KINDS else ("", "", "")
    versions = tuple(
        VersionShift(v.name, v.backend, v.weight, service.share_pct(v.name), None, None, *basis.facts[v.name])
        for v in service.versions
    )
    return ShiftPlan(service, kind, "shift", group, version, plural, route_object_name(service), versions,
                     DEFAULT_SCALE, {}, errors=tuple(errors))


def _rollout_plan(basis: PlanBasis, action: str, read: RolloutRead | None = None) -> ShiftPlan:
    service, facts, current = basis.service, basis.facts, basis.current
    rollout, replicasets = (read.rollout, read.replicasets) if read is not None else (None, ())
    group, version, plural = router_api("Rollout", basis.api_versions)
    name = route_object_name(service)
    patches: list[Patch] = []
    errors: list[str] = []
    notes: list[str] = []
    if rollout is not None and action == "undo":
        body, why, revision = argo.undo_body(rollout, replicasets)
        ref = (rollout.get("spec") or {}).get("workloadRef")
        if why:
            errors.append(f"nothing to send: {why}")
        elif ref and ref.get("kind") != "Deployment":
            errors.append(f"its pod template lives in {ref.get('kind')} {ref.get('name')}: undo it there")
        elif ref:  # the plugin patches the Deployment the Rollout refers to
            patches = [Patch("apps", "v1", "deployments", service.namespace, ref.get("name", ""), "json", body)]
        else:
            patches = [Patch(group, version, plural, service.namespace, name, "json", body)]
        if not why:
            notes.append(f"back to revision {revision}'s pod template: the controller rolls it out as a new "
                         "revision, through the Rollout's own steps")
    elif rollout is not None:
        (status_body, spec_body), why = argo.bodies(action, rollout)
        if why:
            errors.append(f"nothing to send: {why}")
        # Status first, then spec: the order kubectl argo rollouts keeps.
        patches = [Patch(group, version, plural, service.namespace, name, "merge", body, sub)
                   for body, sub in ((status_body, "status"), (spec_body, "")) if body is not None]
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
        errors=tuple(errors), warnings=tuple(warnings), notes=tuple(notes), patch=patches[0] if patches else None,
        then=patches[1] if len(patches) > 1 else None, route_read=rollout is not None,
    )


def _plan(basis: PlanBasis, targets: Targets, route: Mapping[str, Any] | None) -> ShiftPlan:
    service, facts, current = basis.service, basis.facts, basis.current
    kind = service.router_kind
    if not kind:
        return _bare(basis, [f"{service.key} has no traffic router in front of it: nothing to shift"], kind="")
    if kind not in ROUTER_KINDS:
        return _bare(basis, [f"router kind {kind} is not supported"])
    if len(service.versions) < 2:
        return _bare(basis, [f"{service.key} has one version: nothing to shift"])
    if kind == "Rollout":
        return _rollout_from_targets(basis, targets, None if route is None else RolloutRead(route))

    adapter = ADAPTERS[kind]
    group, version, plural = router_api(kind, basis.api_versions)
    errors: list[str] = []
    blockers: list[str] = []
    warnings: list[str] = []
    notes: list[str] = []
    read: AdapterRead | None = None
    scale = route_scale(sum(w for w in current.values() if w is not None))
    if route is not None:
        if managed_by_argo(route):
            errors.append(f"{kind} {route_name(route)} is managed by Argo Rollouts ({ARGO_MANAGER}): "
                          "promote or abort its Rollout instead")
        read = adapter.read(route, service)
        errors += read.errors
        warnings += read.warnings + adapter.warnings(route)
        notes += read.notes
        if not read.errors:
            current = read.weights
            scale = read.scale or scale
    # A weight that is no number (route_weight: unknown) gets an unknown share of traffic: a plan from it would
    # guess what that version gets, and shares() would count it as 0%. Fail closed.
    unknown = [k for k, w in current.items() if w is None]
    if unknown and any(w is not None for w in current.values()):
        errors.append(f"the weight of {', '.join(unknown)} on the {kind} is no number: what "
                      f"{'it gets' if len(unknown) == 1 else 'they get'} is unknown, so no shift is planned from it "
                      "(fix the route's weight first)")
    current_pcts = shares(current)
    pcts, target_errors = resolve_targets(current_pcts, targets)
    errors += target_errors
    weights = apportion(pcts, scale) if not target_errors else {k: w or 0 for k, w in current.items()}
    if not target_errors:
        errors += adapter.validate(weights)
    target_pcts = {k: 100.0 * w / scale for k, w in weights.items()}

    total_ready = sum(f[0] for f in facts.values())
    primary = max(current_pcts, key=lambda name: current_pcts[name] or 0.0, default=None)
    for v in service.versions:
        ready, desired, sessions = facts[v.name]
        now, then = current_pcts.get(v.name, 0.0), target_pcts[v.name]
        capacity = 100.0 * ready / total_ready if total_ready else 0.0  # its share of the ready pods
        if ready and then > capacity + CAPACITY_SLACK_PCT and then > now + 1e-9:
            overload = (f"{v.name} would get {fmt_pct(then)} of new sessions on {fmt_pct(capacity)} of the ready "
                        f"pods ({ready} of {total_ready}): each of its pods {then / capacity:.1f}× an even share")
            # Traffic going back to the version that carries the most is the rollback path: never held up.
            if v.name == primary:
                warnings.append(overload)
            else:
                blockers.append(overload + "; scale it up first")
        if then > 0 and ready == 0:
            if then > now + 1e-9:
                blockers.append(f"{v.name} has no ready replicas (0/{desired}): it would get {fmt_pct(then)} of "
                                "new sessions and fail them")
            else:
                warnings.append(f"{v.name} has no ready replicas: its {fmt_pct(then)} of new sessions will fail")
        if then == 0 and now > 0 and sessions:
            warnings.append(f"{v.name} goes to 0%: its {sessions} live sessions continue on its pods until "
                            "they finish; only new sessions move")
    live = {v.name: facts[v.name][2] for v in service.versions if facts[v.name][2] is not None}
    if live:
        notes.append("live sessions stay on their pods (" + ", ".join(f"{k} {n}" for k, n in live.items())
                     + "); new sessions follow the new weights")
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


def _rollout_from_targets(basis: PlanBasis, targets: Targets, rollout: RolloutRead | None = None) -> ShiftPlan:
    """Argo Rollouts has no set-weight: 100% canary is promote-full, 0% is abort, nothing else."""
    pcts, errors = resolve_targets(shares(basis.current), targets)
    if errors:
        return _bare(basis, errors)
    if "canary" not in pcts:
        return _bare(basis, ['an Argo Rollout has versions "stable" and "canary"'])
    if abs(pcts["canary"] - 100) < 0.01:
        return _rollout_plan(basis, "promote-full", rollout)
    if pcts["canary"] < 0.01:
        return _rollout_plan(basis, "abort", rollout)
    return _bare(basis, [
        "Argo Rollouts has no set-weight: its canary follows spec.strategy.canary.steps; "
        "shift the canary to 100% (promote-full) or 0% (abort), or promote to the next step",
    ])


def replan(plan: ShiftPlan, route: Mapping[str, Any]) -> ShiftPlan:
    """The same targets, planned again on the route object as read now."""
    facts = {v.name: (v.ready, v.desired, v.sessions) for v in plan.versions}
    current = {v.name: v.current_weight for v in plan.versions}
    basis = PlanBasis(plan.service, facts, current, {plan.kind: plan.api_version})
    if plan.action != "shift":
        return _rollout_plan(basis, plan.action, RolloutRead(route))
    return _plan(basis, dict(plan.targets), route)

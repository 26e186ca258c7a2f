"""Fencing one DRA GPU before its drain evicts anything: a DeviceTaintRule selecting that device, first with effect
None (a dry run: the device-taint controller says in the rule's status what NoExecute would do to the pods using
it), then NoSchedule (no new claim is allocated the device). Never NoExecute: that deletes the pods, past their
PodDisruptionBudgets and the drain's session wait. Each write audited once (its intent, then its result)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from gputui.backends.base import BackendError, DeviceFencer, Writer
from gputui.ops.audit import AuditLog
from gputui.ops.drain.events import DrainEvent
from gputui.ops.drain.events import EventKind as K
from gputui.ops.drain.gpu_target import FENCE_KEY, rule_name
from gputui.ops.drain.plan import DrainPlan

STATUS_WAIT_S = 10.0  # how long the dry run's status is waited for (the controller sets it once per spec change)
CONDITION = "EvictionInProgress"


def dry_run_words(rule: dict | None) -> str:
    """What the controller said of the None-effect rule, or that it said nothing (never "no pods")."""
    conditions = ((rule or {}).get("status") or {}).get("conditions") or []
    said = next((c for c in conditions if c.get("type") == CONDITION), None)
    if said is None:
        return ""
    return str(said.get("message") or f"{CONDITION}={said.get('status', '?')} (no message)")


def fence_device(writer: Writer, audit: AuditLog, plan: DrainPlan, clock: Callable[[], float],
                 sleep: Callable[[float], None], poll_s: float) -> Iterator[DrainEvent]:
    """Raises BackendError (the drain does not start) when the fence cannot be written."""
    node, device = plan.node, plan.options.gpu_device
    if not isinstance(writer, DeviceFencer):
        raise BackendError(f"this cluster connection cannot write a DeviceTaintRule: {device} cannot be fenced")
    name = rule_name(node, device)
    target = f"devicetaintrule/{name}"
    current = writer.device_taint_rule(name)
    if ((current or {}).get("spec") or {}).get("taint", {}).get("effect") == "NoSchedule":
        # A resumed drain: already fenced. A dry run now would lift the fence while it runs.
        yield DrainEvent(node, K.INFO, message=f"{device} already fenced (DeviceTaintRule {name}, NoSchedule)")
        return
    with audit.writing("fence", target, {"device": device, "effect": "None"}):
        writer.taint_device(name, device, FENCE_KEY, "drain", "None")
    until = clock() + STATUS_WAIT_S
    while not (said := dry_run_words(writer.device_taint_rule(name))) and clock() < until:
        sleep(min(poll_s, 1.0))
    yield DrainEvent(node, K.INFO, message=f"dry run (effect None) of DeviceTaintRule {name}: " + (
        said or f"the controller reported nothing within {STATUS_WAIT_S:.0f}s: which pods it would touch is not known "
        f"from it (the plan's pods on GPU {plan.options.gpu} are {len(plan.to_evict)})"))
    with audit.writing("fence", target, {"device": device, "effect": "NoSchedule"}):
        writer.taint_device(name, device, FENCE_KEY, "drain", "NoSchedule")
    yield DrainEvent(node, K.INFO, message=f"{device} fenced: DeviceTaintRule {name} NoSchedule (no new claim gets it)")

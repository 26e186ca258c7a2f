"""Draining several nodes: at most N at once, and a capacity guard that stops before GPUs run out.

Runs interleave in one thread (each drain yields a tick per poll), so the
order of writes is deterministic and a batch needs no locks.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator, Mapping

from gputui.backends.base import Reader, Writer
from gputui.ops.audit import AuditLog
from gputui.model import ClusterSnapshot
from gputui.ops.drain_plan import CapacityCheck, DrainOptions, Step, capacity_after, plan_drain
from gputui.ops.drain_run import DrainControl, DrainEvent, DrainReport, run_drain


def run_batch(
    nodes: list[str],
    reader: Reader,
    writer: Writer | None,
    audit: AuditLog,
    options: DrainOptions = DrainOptions(),
    *,
    parallel: int = 1,
    controls: Mapping[str, DrainControl] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 1.0,
    deadlines: Mapping[str, float] | None = None,
) -> Iterator[DrainEvent]:
    """Yields every run's events (ticks dropped); returns {node: DrainReport}."""
    pending = list(nodes)
    active: dict[str, Iterator[DrainEvent]] = {}
    reports: dict[str, DrainReport] = {}
    controls = controls or {}
    while pending or active:
        while pending and len(active) < max(1, parallel):
            node = pending[0]
            snap = reader.snapshot()
            taken = set(reports) | set(active) | {node}
            plan = plan_drain(snap, node, options, batch=taken)
            guard = _guard(snap, set(active) | {node}, taken, options)
            if not guard.fits:
                for skipped in pending:
                    reports[skipped] = DrainReport(skipped, failed=["not started: capacity guard"])
                yield DrainEvent(node, "failed", message=f"capacity guard stopped the batch before {node}: "
                                                          f"{guard.describe()}")
                pending.clear()
                break
            pending.pop(0)
            active[node] = run_drain(
                plan, reader, writer, audit, controls.get(node), clock=clock, sleep=lambda _s: None,
                poll_s=poll_s, deadline=(deadlines or {}).get(node),
            )
        for node, run in list(active.items()):
            try:
                while (event := next(run)).kind != "tick":
                    yield event
            except StopIteration as stop:
                reports[node] = stop.value
                del active[node]
        if active:
            sleep(poll_s)
    return reports


def _guard(snap: ClusterSnapshot, draining: set[str], taken: set[str], options: DrainOptions) -> CapacityCheck:
    """Every GPU pod still on a node being drained (this one included) must fit outside the batch,
    model by model; the first model that does not fit is the answer."""
    needed: dict[str, list[int]] = {}
    for name in sorted(draining):
        product = snap.node(name).gpu_product
        for p in plan_drain(snap, name, options).pods:
            if p.step in (Step.EVICT, Step.WAIT_SESSIONS) and p.pod.gpu_request and not p.pod.deleting \
                    and not p.pod.terminated and p.pod.owner_kind:
                needed.setdefault(product, []).append(p.pod.gpu_request)
    checks = [capacity_after(snap, taken, product, gpus) for product, gpus in sorted(needed.items())]
    return next((c for c in checks if not c.fits), checks[0] if checks else CapacityCheck("", (), {}))

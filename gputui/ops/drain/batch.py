"""Draining several nodes: at most N at once (fewer while the GPU Operator's maxUnavailable leaves no room for
another: gputui.policy.upgrades.parallel_hold, or another budget does: Karpenter's NodePools, the maintenance-operator's
limits, gputui.policy.batch_budgets; a budget that allows none, or is
unknown, with nothing running stops the batch there), no node whose pods carry karpenter.sh/do-not-disrupt (read
as each node starts: gputui.ops.drain.pod_guards), a capacity guard that stops before GPUs run out, and a placement guard
that stops before a node whose drain would leave a pod with nowhere to go (gputui.ops.drain.placement), unless
the operator accepted that pod.

Runs interleave in one thread (each drain yields a tick per poll), so the order of writes is
deterministic and a batch needs no locks. Each node runs with its own options (a resumed batch
restores them from each node). The guard counts capacity outside the whole batch, as the plan does
(plan_batch), so the plan's prediction and the run agree.
"""

from __future__ import annotations

from collections.abc import Collection, Generator, Iterator, Mapping
from dataclasses import replace

from gputui.backends.base import BackendError, Writer
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain import lease
from gputui.ops.drain.batch_plan import plan_batch
from gputui.ops.drain.events import DrainEvent, EventKind
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.plan import capacity_after, plan_drain, units_needed
from gputui.ops.drain.plan_placement import eviction_order, previewed, strand_words, strands
from gputui.ops.drain.pod_guards import guards_reader, with_guards
from gputui.ops.drain.report import DrainReport, Outcome
from gputui.ops.drain.run import run_drain
from gputui.ops.drain.start import BatchStart, DrainStart
from gputui.ops.steps import Ended, step
from gputui.policy.batch_budgets import budgets_of, refusing
from gputui.policy.upgrades import parallel_hold
from gputui.snapshot import ClusterSnapshot


def run_batch(nodes: list[str], ctx: OpContext, options: DrainOptions | Mapping[str, DrainOptions] = DrainOptions(),
              start: BatchStart = BatchStart()) -> Generator[DrainEvent, None, dict[str, DrainReport]]:
    """Yields every run's events (ticks dropped); returns {node: DrainReport} for every node named."""
    reader, writer, audit, clock, sleep, poll_s = ctx.reader, ctx.writer, ctx.audit, ctx.clock, ctx.sleep, ctx.poll_s
    parallel = start.parallel if start.parallel is not None else ctx.settings.drain_parallel
    controls, accept_stranded = start.controls, start.accept_stranded
    # The batch sleeps between its looks; each node's run only yields a tick and says when it wants the next.
    each = replace(ctx, sleep=lambda _s: None)
    per_node = options if isinstance(options, Mapping) else {n: options for n in nodes}
    members = set(nodes)
    pending = list(nodes)
    active: dict[str, Generator[DrainEvent, None, DrainReport]] = {}
    wake: dict[str, float] = {}  # when each run asked to be polled again (a paused one backs off)
    reports: dict[str, DrainReport] = {}
    told_held: set[str] = set()
    guard_reader = guards_reader(reader)
    cordoned: list[str] | None = None if len(nodes) > 1 and writer is not None else []  # by this batch, first
    while pending or active:
        while pending and len(active) < max(1, parallel):
            node = pending[0]
            try:
                snap = reader.snapshot()
                if cordoned is None:
                    cordoned = []
                    first = plan_batch(snap, nodes, per_node, accept_stranded).cordon_first
                    yield from _cordon_first(snap, first, ctx, cordoned)
                    if cordoned:
                        snap = reader.snapshot()  # the plans see the cordons (no second cordon, no second entry)
            except BackendError as exc:
                if cordoned is not None and len(cordoned) < len(nodes) and not active and not reports:
                    # A cordon refused before anything was evicted: nothing starts, what was cordoned goes back.
                    yield from _uncordon(cordoned, writer, audit, f"the batch could not cordon its nodes: {exc}")
                    cordoned.clear()  # put back once: the end's "never started" pass must not uncordon them again
                    for n in pending:
                        reports[n] = DrainReport(n, Outcome.NOT_STARTED, reason=f"could not cordon: {exc}")
                    yield DrainEvent(node, EventKind.FAILED, message=f"could not cordon the batch's nodes: {exc}")
                    pending.clear()
                    break
                yield DrainEvent(node, EventKind.PAUSED, message=f"cannot read the cluster to start {node}: {exc}")
                sleep(poll_s)
                break
            if active and (held := parallel_hold(snap, node, set(active), set(cordoned or ()) & set(pending))):
                if node not in told_held:  # said once per node, not on every poll it waits
                    told_held.add(node)
                    yield DrainEvent(node, EventKind.INFO, message=held)
                break
            # The other budgets: this batch's own nodes (those it cordoned, those it drains) are not others' disruptions.
            own = set(cordoned or ()) | set(active)
            stop = refusing(budgets_of(snap, own), node, set(active))
            if stop is not None and active:
                if node not in told_held:
                    told_held.add(node)
                    yield DrainEvent(node, EventKind.INFO, message=f"{node} waits for the drains running: {stop.words()}")
                break
            if stop is not None:  # nothing running and no room (or a budget unknown): the batch starts nothing more
                for skipped in pending:
                    reports[skipped] = DrainReport(skipped, Outcome.NOT_STARTED, reason=f"budget: {stop.words()}")
                yield DrainEvent(node, EventKind.FAILED, message=f"no room in a budget before {node}: {stop.words()}; "
                                                                  f"not started: {', '.join(pending)}")
                pending.clear()
                break
            # Drains running beside this batch (other gputuis, other batches of this one) move first.
            beside = [n for n in lease.draining(snap, clock()) if n not in members]
            guard, which = _guard(snap, set(active) | {node} | set(beside), members | set(beside), per_node), "capacity"
            if guard is None:
                which = "placement"
                guard = _placement_guard(snap, [n for n in nodes if n in active or n == node], members, per_node,
                                         accept_stranded)
            if guard is not None:
                for skipped in pending:
                    reports[skipped] = DrainReport(skipped, Outcome.NOT_STARTED,
                                                   reason=f"{which} guard: {guard}")
                yield DrainEvent(node, EventKind.FAILED, message=f"{which} guard stopped the batch before {node}: "
                                                                  f"{guard}; not started: {', '.join(pending)}")
                pending.clear()
                break
            try:  # read as it starts: an annotation added since the plan still blocks the node
                guards = guard_reader.pod_guards([node]) if guard_reader is not None else {}
            except BackendError as exc:  # unknown is not "none": the node waits until they can be read
                yield DrainEvent(node, EventKind.PAUSED, message=f"cannot read {node}'s pods' do-not-disrupt: {exc}")
                sleep(poll_s)
                break
            pending.pop(0)
            # The run reads the plan's pods, not its capacity or placements (the batch's guards above did): none asked.
            plan = with_guards(plan_drain(snap, node, per_node[node], preview=False), guards)
            active[node] = run_drain(plan, each, controls.get(node), DrainStart(start.deadlines.get(node), start.take_over))
        for node, run in list(active.items()):
            if clock() < wake.get(node, 0.0):
                continue
            while not isinstance(got := step(run), Ended) and got.kind is not EventKind.TICK:
                yield got  # as it comes, up to its next tick (when it wants the next look) or its end
            if isinstance(got, Ended):
                reports[node] = got.report
                del active[node]
            else:
                wake[node] = got.deadline or 0.0
        if active:
            sleep(max(0.0, min(poll_s, min(wake.get(n, 0.0) for n in active) - clock())) or poll_s)
    never = [n for n in (cordoned or []) if reports.get(n) is None or reports[n].outcome is Outcome.NOT_STARTED]
    if never and writer is not None:  # cordoned for a drain that never started: as they were
        yield from _uncordon(never, writer, audit, "the batch stopped before draining it")
    return {n: reports[n] for n in nodes if n in reports}


def _cordon_first(snap: ClusterSnapshot, names: list[str], ctx: OpContext, cordoned: list[str]) -> Iterator[DrainEvent]:
    """Every node the batch will drain (`names`: the plan's, up to where its capacity or placement guard stops),
    cordoned before the first eviction; `cordoned` collects those this batch cordoned (not those already
    cordoned). BackendError: stop."""
    writer, audit = ctx.writer, ctx.audit
    assert writer is not None
    for name in names:
        node = snap.node(name)
        if node is None or node.unschedulable:
            continue
        with audit.writing("cordon", f"node/{name}", {"reason": "batch: before its first eviction"}):
            writer.set_unschedulable(name, True)
        cordoned.append(name)
        yield DrainEvent(name, EventKind.INFO, message="cordoned with the batch, before its first eviction")


def _uncordon(names: list[str], writer: Writer | None, audit: AuditLog, why: str) -> Iterator[DrainEvent]:
    assert writer is not None
    for name in names:
        try:
            with audit.writing("uncordon", f"node/{name}", {"reason": why}):
                writer.set_unschedulable(name, False)
        except BackendError as exc:
            yield DrainEvent(name, EventKind.FAILED, message=f"left cordoned ({why}); uncordon failed: {exc}")
            continue
        yield DrainEvent(name, EventKind.INFO, message=f"uncordoned: {why}")


BESIDE = DrainOptions(force=True)  # a drain beside the batch: every pod of its node that moves, counted


def _guard(snap: ClusterSnapshot, draining: set[str], members: set[str], options: Mapping[str, DrainOptions]) -> str | None:
    """Every GPU pod still on a node being drained (this one included) must fit outside the batch,
    model by model: None when they do, else what does not fit."""
    needed: dict[tuple[str, str], list[int]] = {}
    for name in sorted(draining):
        node = snap.node(name)
        if node is None:
            continue
        plan = plan_drain(snap, name, options.get(name, BESIDE), preview=False)  # BESIDE: another's drain
        for resource, units in units_needed(plan.pods).items():
            needed.setdefault((node.gpu_product, resource), []).extend(units)
    for (product, resource), gpus in sorted(needed.items()):
        check = capacity_after(snap, members, product, gpus, resource)
        if not check.fits:
            return check.describe()
    return None


def _placement_guard(snap: ClusterSnapshot, draining: list[str], members: set[str], options: Mapping[str, DrainOptions],
                     accepted: Collection[str]) -> str | None:
    """The pods still on the nodes being drained (this one included), placed in the batch's order outside the
    batch as the plan places them: None when each has somewhere to go (or the operator accepted that it has
    not), else who would be stranded and why."""
    moving = [p.pod for name in draining if snap.node(name) is not None
              for p in eviction_order(plan_drain(snap, name, options[name], preview=False).pods)]
    stranded = strands(previewed(snap, members, moving).placements, accepted)
    return strand_words(stranded) if stranded else None

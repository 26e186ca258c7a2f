"""`gputui drain NODE...`: the same plan and run as the TUI, for scripts and runbooks."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from gputui.backends.base import Backend, BackendError, bindings_for
from gputui.cli.common import EXIT_NOT_DONE, EXIT_OK, EXIT_USAGE, fail
from gputui.ops.context import OpContext
from gputui.ops.drain.arrivals import batch_with_arrivals
from gputui.ops.drain.batch import run_batch
from gputui.ops.drain.batch_plan import batch_json, plan_batch
from gputui.ops.drain.events import DrainEvent, EventKind
from gputui.ops.drain.gpu_target import UNKNOWN_GPU, GpuNotFound, gpu_options, why_unattributed
from gputui.ops.drain.lease import draining
from gputui.ops.drain.options import DrainOptions, DrainRecordError, resumable, saved_drain, settings_options
from gputui.ops.drain.plan import DrainPlan, Step
from gputui.ops.drain.pod_guards import guards_reader
from gputui.ops.drain.progress import DrainProgress
from gputui.ops.drain.report import DrainReport, Outcome
from gputui.ops.drain.start import BatchStart
from gputui.ops.errors import read_only_words
from gputui.ops.steps import run_steps
from gputui.present.cells import ago
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot


def _options(args: argparse.Namespace, settings: Settings) -> DrainOptions:
    return replace(
        settings_options(settings, args.via),
        ignore_daemonsets=args.ignore_daemonsets, delete_emptydir_data=args.delete_emptydir_data,
        force=args.force, pod_selector=args.selector,
        grace_seconds=None if args.grace_period < 0 else args.grace_period,
        session_threshold=args.session_threshold, session_deadline_s=args.session_deadline,
        rotation_settle_s=args.rotation_settle,
        disable_eviction=args.disable_eviction, evict_unknown_at_deadline=args.evict_unknown_at_deadline,
    )


def exit_code(reports: Iterable[DrainReport]) -> int:
    """0 when every node named was drained; 1 when any was not (blocked, guarded, unfinished, failed, aborted)."""
    reports = list(reports)
    return EXIT_OK if reports and all(r.outcome is Outcome.DRAINED for r in reports) else EXIT_NOT_DONE


SIMULATED = "SIMULATED: the demo cluster; nothing real was drained"


def run(settings: Settings, args: argparse.Namespace, backend_factory: Callable[[Settings], Backend]) -> int:
    if args.parallel < 1:
        return fail("--parallel must be at least 1", EXIT_USAGE)
    if args.session_threshold < 0:
        return fail("--session-threshold must be 0 or more", EXIT_USAGE)
    if args.disable_eviction and not args.dry_run:
        if not args.force:
            return fail("--disable-eviction deletes pods past their PodDisruptionBudgets: it needs --force too", EXIT_USAGE)
        if sorted(filter(None, args.confirm_delete.split(","))) != sorted(args.nodes):
            return fail("--disable-eviction needs --confirm-delete with the same node names", EXIT_USAGE)
    if settings.read_only and not args.dry_run:
        return fail(read_only_words("drain"), EXIT_USAGE)
    backend = backend_factory(settings)
    try:
        if backend.writer is None and not args.dry_run:  # a protected context: read-only though not asked
            return fail(backend.why_not("drain") or read_only_words("drain"), EXIT_USAGE)
        snap = backend.reader.snapshot()
        nodes = list(args.nodes)
        if args.resume:
            nodes += [n for n in resumable(snap) if n not in nodes]
        if not nodes:
            return fail("name at least one node (or --resume)", EXIT_USAGE)
        missing = [n for n in nodes if snap.node(n) is None]
        if missing:
            return fail(f"no such GPU node: {', '.join(missing)}", EXIT_USAGE)
        given = _options(args, settings)
        options: dict[str, DrainOptions] = {n: given for n in nodes}
        if args.gpu and args.via == "nodemaintenance":
            return fail("--gpu drains one GPU and leaves the node schedulable: the maintenance-operator takes whole "
                        "nodes (--via nodemaintenance)", EXIT_USAGE)
        if args.gpu or args.include_unattributed:
            if not args.gpu or len(nodes) != 1 or args.resume:
                return fail("--gpu (and --include-unattributed with it) takes exactly one NODE, without --resume",
                            EXIT_USAGE)
            refused = _one_gpu(backend, snap, nodes[0], args, options)
            if refused is not None:
                return refused
        deadlines: dict[str, float] = {}
        if args.resume:  # each interrupted node to the end it was started for, with its own options
            for n in resumable(snap):
                options[n], deadline = saved_drain(snap.node(n))  # type: ignore[arg-type]
                if deadline:
                    deadlines[n] = deadline
        # Drains running elsewhere (their leases live) take free GPUs first: the plan counts their pods first.
        running = draining(snap, time.time())
        guards, guards_error = _pod_guards(backend, nodes)
        planned = plan_batch(snap, nodes, options, draining=running, parallel=args.parallel, guards=guards,
                             guards_error=guards_error)
        # --accept-stranded: the pods this plan strands are left Pending by choice; the run's guard still stops
        # before a node that would strand any other.
        accepted = [p.pod.key for p in planned.stranded] if getattr(args, "accept_stranded", False) else []
        if accepted:
            planned = plan_batch(snap, nodes, options, accepted, running, args.parallel, guards, guards_error)
        batch = batch_with_arrivals(planned, backend.reader)
        if args.dry_run:
            if args.output == "json":
                json.dump({**batch_json(batch), "simulated": snap.simulated}, sys.stdout, indent=2)
                print()
            else:
                if snap.simulated:
                    print(f"# {SIMULATED}")
                for plan in batch.plans:
                    _print_plan(plan)
                for line in batch.describe():
                    print(line)
            return EXIT_NOT_DONE if any(p.blocked for p in batch.plans) or not batch.fits \
                or batch.blocked_by_placement or batch.budget_stops else EXIT_OK
        # What each node's drain needs: a requestor drain (--via nodemaintenance, or resumed as one) makes and
        # withdraws its NodeMaintenance too.
        why = backend.why_not_any(o.operation for o in options.values())
        if why:
            return fail(why, EXIT_USAGE)
        if batch.blocked_by_placement:  # before any write: the operator sees who would be stranded, and why
            for p in batch.stranding:
                print(f"{p.pod.key}: {p.placement.text() if p.placement else ''}", file=sys.stderr)
            return fail(f"{len(batch.stranding)} pods would have nowhere to go (see the plan: gputui drain --dry-run); "
                        "--accept-stranded drains anyway and leaves them Pending", EXIT_NOT_DONE)
        if batch.budget_stops and batch.limiting is not None:  # before any write: no budget has room, or one is unknown
            return fail(f"no node may start now: {batch.limiting.words()}", EXIT_NOT_DONE)
        if snap.simulated:
            print(f"# {SIMULATED}", flush=True)
        for line in batch.describe():
            print(f"# {line}", flush=True)
        ctx = OpContext.of(backend, settings)
        start = BatchStart(parallel=args.parallel, deadlines=deadlines, take_over=args.take_over,
                           accept_stranded=accepted)
        reports = run_steps(run_batch(nodes, ctx, options, start), _Follow())
        for node in nodes:
            report = reports.get(node)
            print(report.describe() if report else f"{node}: not started")
        if snap.simulated:
            print(f"# {SIMULATED}")
        return exit_code(reports.get(n) or DrainReport(n, Outcome.NOT_STARTED) for n in nodes)
    except DrainRecordError as exc:
        return fail(str(exc), EXIT_USAGE)
    finally:
        backend.close()


def _pod_guards(backend: Backend, nodes: list[str]) -> tuple[dict[str, str] | None, str]:
    """The batch's pods' karpenter.sh/do-not-disrupt annotations, and why not when they could not be read."""
    reader = guards_reader(backend.reader)
    if reader is None:
        return None, ""
    try:
        return reader.pod_guards(nodes), ""
    except BackendError as exc:
        return None, str(exc)


class _Follow:
    """Print the batch's events as they come, as ops' fold of them says what is news (a waiting pod again only when
    its count moves, a pause again only for another reason, a PDB's refusal at its first 429), and a PDB retry
    every twelfth try too (a minute at kubectl's 5 s), with its count."""

    def __init__(self) -> None:
        self.progress = DrainProgress()

    def __call__(self, event: DrainEvent) -> None:
        news = self.progress.apply(event, time.time())
        blocked = event.kind is EventKind.BLOCKED
        if not news and not (blocked and event.count % 12 == 0):
            return
        message = event.message + (f" (try {event.count})" if blocked else "")
        stamp = time.strftime("%H:%M:%S")
        print(f"{stamp} {event.node} {event.kind.value:12s} {event.pod} {message}".rstrip(), flush=True)


def _one_gpu(backend: Backend, snap: ClusterSnapshot, node: str, args: argparse.Namespace,
             options: dict[str, DrainOptions]) -> int | None:
    """Narrow the node's drain to the pods bound to one GPU; refuse before any write when some of the node's GPU
    pods cannot be placed on a GPU and the operator did not choose to move them too."""
    bindings = bindings_for(backend.reader, node, snap.pods_on(node))
    try:
        options[node] = gpu_options(options[node], snap, node, args.gpu, bindings, args.include_unattributed)
    except GpuNotFound as exc:
        return fail(str(exc), EXIT_USAGE)
    unknown = options[node].unattributed
    if unknown and not args.include_unattributed and not args.dry_run:
        return fail(f"refused: {len(unknown)} GPU pods on {node} have an {UNKNOWN_GPU} ({why_unattributed(bindings)}): "
                    f"{', '.join(unknown)}; --include-unattributed moves them too", EXIT_NOT_DONE)
    if unknown:
        print(f"# {UNKNOWN_GPU}: {why_unattributed(bindings)}", file=sys.stderr)
    return None


def _print_plan(plan: DrainPlan) -> None:
    head = f"{plan.title}: " + ("BLOCKED" if plan.blocked else
                                    f"{len(plan.stranded)} pods with nowhere to go" if plan.stranded else "ready to drain")
    left = len(plan.blockers)  # pods another responder evicts: the drain waits on them, never evicts them
    head += f"; {left} pod{'s' if left != 1 else ''} left to another responder" if left else ""
    print(head + ("" if not plan.already_cordoned else " (already cordoned)"))
    for p in plan.pods:
        sessions = "" if p.step is Step.SKIP else f" sessions={p.sessions.text}"
        budget = f" [{p.budget_note}]" if p.budget_note and p.step is not Step.SKIP else ""
        note = f" ({p.note})" if p.note else ""
        most = "" if p.step in (Step.SKIP, Step.ERROR) else f" at-most={ago(p.max_seconds(plan.options))}"
        print(f"  {p.step.value:6s} {p.pod.key} gpus={p.pod.gpu_request}{sessions}{most}{budget}{note}")
        if p.rotation is not None:  # what it does first (a pod kept in says why among the warnings)
            print(f"         first: {p.rotation_note}")
        for request in p.eviction_api.requests:  # the EvictionRequest API: who else asks for its eviction
            print(f"         {request}")
        if p.placement is not None:  # where its replacement can go (never where it will go: see the caveat)
            print(f"         {p.placement.text()}")
            for e in p.placement.excluded if p.placement.stranded else ():
                print(f"           {e.words}")
    for blocker in plan.blockers:  # left to another responder: the rest drains, these stay until it is done
        print(f"  blocker: {blocker}")
    for warning in plan.warnings:
        print(f"  warning: {warning}")
    if plan.request is not None:  # which of the two ways it takes the node: said in every whole-node plan
        print(f"  {'BLOCKED' if plan.request.error else 'via'}: {plan.request.error or plan.request.words()}")
    elif not plan.options.gpu:
        print("  via: gputui cordons the node")
    if plan.fence:
        print(f"  fence: {plan.fence}")
    print(f"  capacity: {plan.capacity.describe()}")

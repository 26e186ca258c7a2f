"""`gputui drain NODE...`: the same plan and run as the TUI, for scripts and runbooks."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Callable

from gputui.backends.base import Backend
from gputui.ops.audit import AuditLog
from gputui.ops.drain_batch import run_batch
from gputui.ops.drain_plan import DrainOptions, Step, plan_drain, plan_json
from gputui.ops.drain_run import options_from_node, resumable
from gputui.settings import Settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(s|m|h)?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 90s, 15m, 1h)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def selector(text: str) -> dict[str, str]:
    out = {}
    for part in filter(None, text.split(",")):
        if "=" not in part:
            raise argparse.ArgumentTypeError(f"selector {part!r} must be key=value")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def add_parser(sub, common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("drain", help="drain nodes without cutting live inference sessions")
    common(p)
    p.add_argument("nodes", nargs="*", metavar="NODE")
    p.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.add_argument("--resume", action="store_true", help="resume drains interrupted earlier (from node annotations)")
    p.add_argument("--parallel", type=int, default=1, help="nodes drained at once (default 1)")
    p.add_argument("--ignore-daemonsets", dest="ignore_daemonsets", action="store_true", default=True)
    p.add_argument("--no-ignore-daemonsets", dest="ignore_daemonsets", action="store_false")
    p.add_argument("--delete-emptydir-data", action="store_true")
    p.add_argument("--force", action="store_true", help="also evict pods no controller manages")
    p.add_argument("-l", "--selector", type=selector, default={}, help="only pods matching key=value[,key=value]")
    p.add_argument("--grace-period", type=int, default=-1, help="seconds; -1: each pod's own (default)")
    p.add_argument("--session-threshold", type=int, default=0, help="evict an inference pod at or below this many live sessions")
    p.add_argument("--session-deadline", type=duration, default=15 * 60, help="wait at most this long per pod (default 15m)")
    p.add_argument("--disable-eviction", action="store_true", help="DELETE pods, bypassing PodDisruptionBudgets")
    p.add_argument("--confirm-delete", default="", metavar="NODES",
                   help="with --disable-eviction: the node names again, comma-separated, to confirm")


def _options(args: argparse.Namespace) -> DrainOptions:
    return DrainOptions(
        ignore_daemonsets=args.ignore_daemonsets, delete_emptydir_data=args.delete_emptydir_data,
        force=args.force, pod_selector=args.selector,
        grace_seconds=None if args.grace_period < 0 else args.grace_period,
        session_threshold=args.session_threshold, session_deadline_s=args.session_deadline,
        disable_eviction=args.disable_eviction,
    )


def _err(message: str, code: int) -> int:
    print(f"gputui: error: {message}", file=sys.stderr)
    return code


def run(settings: Settings, args: argparse.Namespace, backend_factory: Callable[[Settings], Backend]) -> int:
    if args.parallel < 1:
        return _err("--parallel must be at least 1", EXIT_USAGE)
    if args.disable_eviction and not args.dry_run:
        if not args.force:
            return _err("--disable-eviction deletes pods past their PodDisruptionBudgets: it needs --force too", EXIT_USAGE)
        if sorted(filter(None, args.confirm_delete.split(","))) != sorted(args.nodes):
            return _err("--disable-eviction needs --confirm-delete with the same node names", EXIT_USAGE)
    if settings.read_only and not args.dry_run:
        return _err("read-only: drain is not allowed", EXIT_USAGE)
    backend = backend_factory(settings)
    try:
        snap = backend.reader.snapshot()
        nodes = list(args.nodes)
        if args.resume:
            nodes += [n for n in resumable(snap) if n not in nodes]
        if not nodes:
            return _err("name at least one node (or --resume)", EXIT_USAGE)
        missing = [n for n in nodes if snap.node(n) is None]
        if missing:
            return _err(f"no such GPU node: {', '.join(missing)}", EXIT_USAGE)
        options = _options(args)
        deadlines = {}
        if args.resume:
            for n in resumable(snap):
                options, deadline = options_from_node(snap, n)
                if deadline:
                    deadlines[n] = deadline
        plans = [plan_drain(snap, n, options, batch=set(nodes)) for n in nodes]
        if args.dry_run:
            if args.output == "json":
                json.dump([plan_json(p) for p in plans], sys.stdout, indent=2)
                print()
            else:
                for plan in plans:
                    _print_plan(plan)
            return EXIT_FAILED if any(p.blocked for p in plans) else EXIT_OK
        if backend.writer is None:
            return _err("read-only: drain is not allowed", EXIT_USAGE)
        if not backend.may("evict") or not backend.may("cordon"):
            return _err("your identity may not cordon nodes or evict pods here", EXIT_USAGE)
        audit_path = settings.audit_log
        from pathlib import Path

        from gputui.ops.audit import default_audit_path

        audit = AuditLog(Path(audit_path) if audit_path else default_audit_path(),
                         backend.writer.identity, backend.context)
        gen = run_batch(nodes, backend.reader, backend.writer, audit, options, parallel=args.parallel,
                        deadlines=deadlines)
        last_waiting: dict[str, int | None] = {}  # print a waiting pod again only when its count moves
        try:
            while True:
                event = next(gen)
                key = f"{event.node}/{event.pod}"
                if event.kind != "waiting" or last_waiting.get(key, -1) != event.sessions:
                    last_waiting[key] = event.sessions
                    stamp = time.strftime("%H:%M:%S")
                    print(f"{stamp} {event.node} {event.kind:12s} {event.pod} {event.message}".rstrip(), flush=True)
        except StopIteration as stop:
            reports = stop.value or {}
        for report in reports.values():
            print(report.describe())
        return EXIT_OK if reports and all(not r.failed and not r.aborted for r in reports.values()) else EXIT_FAILED
    finally:
        backend.close()


def _print_plan(plan) -> None:
    head = f"node/{plan.node}: " + ("BLOCKED" if plan.blocked else "ready to drain")
    print(head + ("" if not plan.already_cordoned else " (already cordoned)"))
    for p in plan.pods:
        sessions = "" if p.pod.live_sessions is None else f" sessions={p.pod.live_sessions}"
        budget = f" [{p.budget_note}]" if p.budget_note and p.step is not Step.SKIP else ""
        note = f" ({p.note})" if p.note else ""
        print(f"  {p.step.value:6s} {p.pod.key} gpus={p.pod.gpu_request}{sessions}{budget}{note}")
    print(f"  capacity: {plan.capacity.describe()}")

"""Each subcommand's arguments, apart from the code that runs it: building the parser (every start of
gputui, the TUI included) then imports no operation."""

from __future__ import annotations

import argparse
import re
from typing import Any, Callable


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


def add_drain_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
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
    p.add_argument("--evict-unknown-at-deadline", action="store_true",
                   help="evict an inference pod whose session count is unknown when its deadline comes "
                        "(default: leave it in place and report the node unfinished)")
    p.add_argument("--take-over", action="store_true",
                   help="take over a drain whose gputui stopped renewing its lease (another operator's)")


def _target(text: str) -> tuple[str, str]:
    version, sep, pct = text.partition("=")
    if not sep or not version.strip() or not pct.strip():
        raise argparse.ArgumentTypeError(f"expected VERSION=PERCENT, got {text!r}")
    return version.strip(), pct.strip()


def add_shift_parser(subparsers: Any, common: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "shift", help="shift traffic between a service's versions (plan, preview, apply)",
        description="Shift new traffic between the versions of an inference service through its router "
                    "(HTTPRoute, VirtualService, TrafficSplit (legacy), Argo Rollout). "
                    "Versions not named share the rest in their current proportions.",
    )
    common(parser)
    parser.add_argument("service", metavar="SERVICE", help="namespace/name, or name when only one namespace has it")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--to", dest="targets", action="append", type=_target, metavar="VERSION=PCT",
                      help="target share of new traffic, e.g. --to v2=20 (repeatable)")
    what.add_argument("--rollout", choices=("promote", "promote-full", "abort", "retry", "undo"),
                      help="an Argo Rollout's own verb, sent as kubectl argo rollouts sends it (undo: back to the "
                           "previous revision's pod template)")
    what.add_argument("--undo", action="store_true",
                      help="back to the weights before this service's last shift (from the audit log)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the exact patch; write nothing")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument("--force", action="store_true",
                        help="shift even to a version with no ready replicas")
    return parser


def add_check_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    from gputui.checks.rules import AREAS  # (a table of names: no operation imported)

    p = sub.add_parser("check", help="run the seeds' validation checklists against the cluster")
    common(p)
    p.add_argument("--only", choices=AREAS, help="only this area's checks")
    p.add_argument("-o", "--output", choices=("text", "json", "junit"), default="text")
    p.add_argument("--strict", action="store_true", help="an unknown result (could not be read) fails too")
    p.add_argument("--window", type=duration, default=30 * 60.0, metavar="DURATION",
                   help="how long GPU memory must have stayed flat (default 30m)")
    drill = p.add_argument_group("drill (seed 000 §6: an injected fault, timed, then undone)")
    drill.add_argument("--drill", metavar="NODE", help="cordon NODE, evict one inference pod, time its recovery, "
                                                       "uncordon")
    drill.add_argument("--drill-pod", metavar="NS/NAME", help="the pod to evict (default: the one with fewest sessions)")
    drill.add_argument("--drill-timeout", type=duration, default=600.0, metavar="DURATION",
                       help="give up waiting for recovery after this long (default 10m)")
    drill.add_argument("--yes-i-mean-it", action="store_true", help="run the drill on a real cluster")


def add_scale_down_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("scale-down", help="scale a version down once its sessions are low, the idlest pods first")
    common(p)
    p.add_argument("service", metavar="SERVICE", help="namespace/name, or name when only one namespace has it")
    p.add_argument("version", metavar="VERSION")
    p.add_argument("replicas", metavar="REPLICAS", type=int, help="how many pods of the version to keep")
    p.add_argument("--threshold", type=int, default=0, metavar="N",
                   help="remove a pod only with at most N live sessions (default 0)")
    p.add_argument("--dry-run", action="store_true", help="print which pods would go; write nothing")
    p.add_argument("--force", action="store_true", help="remove pods above the threshold too (cuts their sessions)")
    p.add_argument("--confirm-sessions", type=int, metavar="N",
                   help="the number of live sessions the removed pods hold (the plan says it), typed back")


def _steps(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of percentages (e.g. 5,25,50,100)") from None


def add_rollout_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("rollout", help="guided canary: raise a version's share step by step, gated, rolled back on "
                                       "a failing gate")
    common(p)
    p.add_argument("service", metavar="SERVICE", help="namespace/name, or name when only one namespace has it")
    p.add_argument("version", metavar="VERSION", help="the new version")
    p.add_argument("--steps", type=_steps, default=None, metavar="P,P,...",
                   help="its share of new sessions at each step (default: those of 5,25,50,100 above its share now)")
    p.add_argument("--hold", type=duration, default=300.0, metavar="DURATION",
                   help="how long each step is watched before the next (default 5m)")
    p.add_argument("--window", type=duration, default=300.0, metavar="DURATION",
                   help="the rate window of the error and latency metrics (default 5m)")
    p.add_argument("--poll", type=duration, default=15.0, metavar="DURATION", help="how often the gates are read")
    p.add_argument("--error-x", type=float, default=2.0, metavar="X",
                   help="error ratio gate: at most X times the old version's (or +1 point)")
    p.add_argument("--latency-x", type=float, default=1.5, metavar="X", help="p95 latency gate: at most X times the old")
    p.add_argument("--dry-run", action="store_true", help="print the plan and the gates; write nothing")

"""Each subcommand's arguments, apart from the code that runs it: building the parser (every start of
gputui, the TUI included) then imports no operation.

Every value is checked here, before anything runs, by the rules of gputui.base.validate (the same the config file
and GPUTUI_* variables pass): a bad one is argparse's one line naming the flag, exit 2."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from itertools import pairwise
from typing import Any

from gputui.base import validate
from gputui.checks.result import AREAS  # check --only's names (every parser built offers them)
from gputui.vocabulary.label_selectors import equality_selector


def checked(check: Callable[..., Any], name: str | None = None, **options: Any) -> Callable[[str], Any]:
    """An argparse type from a gputui.base.validate rule: its ValueError becomes the flag's one-line error."""
    def parse(text: str) -> Any:
        try:
            return check(text, **options)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name or check.__name__
    return parse


duration = checked(validate.duration)
positive_seconds = checked(validate.seconds, "seconds", at_most=3600)
whole = checked(validate.whole)
count = checked(validate.count)
at_least_one = checked(validate.count, "count", at_least=1, at_most=1000)
multiplier = checked(validate.multiplier)
namespace = checked(validate.namespace)
prometheus_url = checked(validate.prometheus_url)
node_name = checked(validate.object_name, "node", what="node name")
file_path = checked(validate.path)


def seconds_or_zero(text: str) -> float:
    """--dcgm-interval: 0 (every refresh) up to an hour."""
    return checked(validate.seconds, zero_ok=True, at_most=3600)(text)


def idle_below(text: str) -> float:
    """--idle-below PCT: above 0 (nothing is below 0%) and at most 100."""
    return checked(validate.percent, zero_ok=False)(text)


def contexts(text: str) -> str:
    """--context NAME or a fleet NAME,NAME: no empty name (',' alone is not 'the current context'), none twice.
    Whether the command takes a fleet is settled once the command is known (parser.settings_from)."""
    return ",".join(checked(validate.context_names)(text))


def selector(text: str) -> dict[str, str]:
    """-l: a label selector as Kubernetes reads it; a drain matches key=value requirements only, so any other
    (!=, in, notin, exists) is refused by name rather than ignored."""
    try:
        return equality_selector(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def grace_period(text: str) -> int:
    """-1 (each pod's own, as kubectl) or 0 and more seconds; any other negative is a typo, not 'the default'."""
    seconds = checked(validate.whole)(text)
    if seconds < -1 or seconds > 365 * 86400:
        raise argparse.ArgumentTypeError(f"must be -1 (each pod's own) or 0 to {365 * 86400} seconds, got {seconds}")
    return seconds


def _name(text: str, what: str) -> str:
    name = validate.text(text, what=what, limit=253).strip()
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"{text!r} is not a {what}")
    return name


def service(text: str) -> str:
    """SERVICE: NAME, or NAMESPACE/NAME with a valid namespace."""
    try:
        ns, slash, name = _name(text, "service").rpartition("/")
        if slash:
            validate.namespace(ns)
        return f"{ns}/{_name(name, 'service name')}" if slash else _name(name, "service name")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


version = checked(_name, "version", what="version name")


def pod(text: str) -> str:
    """NAMESPACE/NAME of a pod."""
    ns, slash, name = text.partition("/")
    try:
        if not slash:
            raise ValueError(f"{text!r} is not NAMESPACE/NAME")
        return f"{validate.namespace(ns)}/{validate.object_name(name, 'pod name')}"
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def node_list(text: str) -> str:
    """--confirm-delete NODE,NODE: each a node name."""
    return ",".join(node_name(part) for part in text.split(",") if part.strip())


def add_drain_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("drain", help="drain nodes without cutting live inference sessions")
    common(p)
    p.add_argument("nodes", nargs="*", metavar="NODE", type=node_name)
    p.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.add_argument("--resume", action="store_true", help="resume drains interrupted earlier (from node annotations)")
    p.add_argument("--parallel", type=at_least_one, default=1, help="nodes drained at once (default 1)")
    p.add_argument("--ignore-daemonsets", dest="ignore_daemonsets", action="store_true", default=True)
    p.add_argument("--no-ignore-daemonsets", dest="ignore_daemonsets", action="store_false")
    p.add_argument("--delete-emptydir-data", action="store_true")
    p.add_argument("--force", action="store_true", help="also evict pods no controller manages")
    p.add_argument("-l", "--selector", type=selector, default={},
                   help="only pods matching key=value[,key=value] (a Kubernetes selector of equality requirements)")
    p.add_argument("--grace-period", type=grace_period, default=-1, help="seconds; -1: each pod's own (default)")
    p.add_argument("--session-threshold", type=count, default=0, help="evict an inference pod at or below this many live sessions")
    p.add_argument("--session-deadline", type=duration, default=15 * 60, help="wait at most this long per pod (default 15m)")
    p.add_argument("--accept-stranded", action="store_true",
                   help="drain even where the placement preview finds nowhere for a pod to go (it stays Pending)")
    p.add_argument("--rotation-settle", type=duration, default=30,
                   help="after a pod leaves rotation, trust a quiet count only this long after (default 30s: two "
                        "15 s scrapes; what reached it just before shows at the next scrape)")
    p.add_argument("--disable-eviction", action="store_true", help="DELETE pods, bypassing PodDisruptionBudgets")
    p.add_argument("--confirm-delete", type=node_list, default="", metavar="NODES",
                   help="with --disable-eviction: the node names again, comma-separated, to confirm")
    p.add_argument("--evict-unknown-at-deadline", action="store_true",
                   help="evict an inference pod whose session count is unknown when its deadline comes "
                        "(default: leave it in place and report the node unfinished)")
    p.add_argument("--take-over", action="store_true",
                   help="take over a drain whose gputui stopped renewing its lease (another operator's)")
    p.add_argument("--gpu", metavar="INDEX|UUID", default="",
                   help="drain only the pods bound to this GPU of the one NODE named; the node is not cordoned")
    p.add_argument("--include-unattributed", action="store_true",
                   help="with --gpu: also move the node's GPU pods whose GPU cannot be told (else the plan refuses)")
    p.add_argument("--via", choices=("cordon", "nodemaintenance"), default=None,
                   help="cordon: gputui cordons the node; nodemaintenance: as the maintenance-operator's requestor "
                        "(a NodeMaintenance its scheduler takes in turn; default: the drain_via setting)")


def _target(text: str) -> tuple[str, float]:
    """--to VERSION=PCT: a version's name and a percentage 0..100 (a trailing % allowed)."""
    name, sep, pct = text.partition("=")
    if not sep or not name.strip() or not pct.strip():
        raise argparse.ArgumentTypeError(f"expected VERSION=PERCENT, got {text!r}")
    try:
        return _name(name, "version name"), validate.percent(pct)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def add_shift_parser(subparsers: Any, common: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "shift", help="shift traffic between a service's versions (plan, preview, apply)",
        description="Shift new traffic between the versions of an inference service through its router "
                    "(HTTPRoute, VirtualService, TrafficSplit (legacy), Argo Rollout). "
                    "Versions not named share the rest in their current proportions.",
    )
    common(parser)
    parser.add_argument("service", metavar="SERVICE", type=service,
                        help="namespace/name, or name when only one namespace has it")
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
    p = sub.add_parser("check", help="run the seeds' validation checklists against the cluster")
    common(p)
    p.add_argument("--only", choices=AREAS, help="only this area's checks")
    p.add_argument("-o", "--output", choices=("text", "json", "junit"), default="text")
    p.add_argument("--strict", action="store_true", help="an unknown result (could not be read) fails too")
    p.add_argument("--window", type=duration, default=30 * 60.0, metavar="DURATION",
                   help="how long GPU memory must have stayed flat (default 30m)")
    drill = p.add_argument_group("drill (seed 000 §6: an injected fault, timed, then undone)")
    drill.add_argument("--drill", metavar="NODE", type=node_name, help="cordon NODE, evict one inference pod, time its recovery, "
                                                       "uncordon")
    drill.add_argument("--drill-pod", metavar="NS/NAME", type=pod, help="the pod to evict (default: the one with fewest sessions)")
    drill.add_argument("--drill-timeout", type=duration, default=600.0, metavar="DURATION",
                       help="give up waiting for recovery after this long (default 10m)")
    drill.add_argument("--yes-i-mean-it", action="store_true", help="run the drill on a real cluster")


def add_scale_down_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("scale-down", help="scale a version down once its sessions are low, the idlest pods first")
    common(p)
    p.add_argument("service", metavar="SERVICE", type=service, help="namespace/name, or name when only one namespace has it")
    p.add_argument("version", metavar="VERSION", type=version)
    p.add_argument("replicas", metavar="REPLICAS", type=count, help="how many pods of the version to keep")
    p.add_argument("--threshold", type=count, default=0, metavar="N",
                   help="remove a pod only with at most N live sessions (default 0)")
    p.add_argument("--dry-run", action="store_true", help="print which pods would go; write nothing")
    p.add_argument("--force", action="store_true", help="remove pods above the threshold too (cuts their sessions)")
    p.add_argument("--confirm-sessions", type=count, metavar="N",
                   help="the number of live sessions the removed pods hold (the plan says it), typed back")


def _steps(text: str) -> list[float]:
    """--steps 5,25,50,100: each above 0 and at most 100, rising."""
    try:
        steps = [validate.percent(part, zero_ok=False) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of percentages (e.g. 5,25,50,100): {exc}") from None
    if not steps or any(b <= a for a, b in pairwise(steps)):
        raise argparse.ArgumentTypeError(f"{text!r}: give rising percentages, each above 0 and at most 100 "
                                         "(e.g. 5,25,50,100)")
    return steps


def poll(text: str) -> float:
    """--poll: how often the gates are read, at least every second (0 was a busy loop on the metrics store)."""
    return checked(validate.duration, at_least=1.0)(text)


def add_rollout_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("rollout", help="guided canary: raise a version's share step by step, gated, rolled back on "
                                       "a failing gate")
    common(p)
    p.add_argument("service", metavar="SERVICE", type=service, help="namespace/name, or name when only one namespace has it")
    p.add_argument("version", metavar="VERSION", type=version, help="the new version")
    p.add_argument("--steps", type=_steps, default=None, metavar="P,P,...",
                   help="its share of new sessions at each step (default: those of 5,25,50,100 above its share now)")
    p.add_argument("--hold", type=duration, default=300.0, metavar="DURATION",
                   help="how long each step is watched before the next (default 5m)")
    p.add_argument("--window", type=duration, default=300.0, metavar="DURATION",
                   help="the rate window of the error and latency metrics (default 5m)")
    p.add_argument("--poll", type=poll, default=15.0, metavar="DURATION", help="how often the gates are read")
    p.add_argument("--error-x", type=multiplier, default=2.0, metavar="X",
                   help="error ratio gate: at most X times the old version's (or +1 point)")
    p.add_argument("--latency-x", type=multiplier, default=1.5, metavar="X", help="p95 latency gate: at most X times the old")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (each step it would take now, or hold at and why) and the gates; write "
                        "nothing; exit 1 when a step would be held")
    p.add_argument("--force", action="store_true",
                   help="take each step past the capacity rule (a share of new sessions above the version's share "
                        "of ready pods); never past a gate, nor towards pods waiting to be evicted")


def _record_check(name: str) -> Callable[[str], Any]:
    """--reason, --ticket, --expires: gputui.policy.cordon_record's checks (loaded when one is given)."""
    def parse(text: str) -> Any:
        import time  # noqa: PLC0415 (only when the flag is given)

        from gputui.policy import cordon_record as r  # noqa: PLC0415 (only when the flag is given)

        try:
            return {"reason": r.clean_reason, "ticket": r.clean_ticket,
                    "expires": lambda t: r.parse_expiry(t, time.time())}[name](text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name
    return parse


def add_cordon_parsers(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """`gputui cordon NODE --reason TEXT` and `gputui uncordon NODE` (gputui.cli.cordon)."""
    p = sub.add_parser("cordon", help="cordon a node, recording who, why, a ticket and an expiry on it")
    common(p)
    p.add_argument("node", metavar="NODE", type=node_name)
    p.add_argument("--reason", required=True, type=_record_check("reason"), metavar="TEXT",
                   help="why (one line, at most 200 characters; written on the node, readable by all who read nodes)")
    p.add_argument("--ticket", type=_record_check("ticket"), default="", metavar="TICKET", help="a ticket ID or URL")
    p.add_argument("--expires", type=_record_check("expires"), default=None, metavar="WHEN",
                   help="when the cordon should end: a duration (4h, 2d) or an ISO date (2026-12-24, "
                        "2026-12-24T18:00Z); past it the node is an alert")
    p.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    u = sub.add_parser("uncordon", help="uncordon a node; refused while another actor holds it (NVSentinel, the GPU "
                                        "Operator, Karpenter, the cluster autoscaler, a running drain, another user)")
    common(u)
    u.add_argument("node", metavar="NODE", type=node_name)
    u.add_argument("--override-owner", action="store_true",
                   help="uncordon even though another actor holds the node (the audit log names it)")
    u.add_argument("--diag", action="store_true",
                   help="run a DCGM diagnostic on the node first (a Job holding all its GPUs: settings diag_image, "
                        "diag_level) and uncordon only on a pass; a fail leaves it cordoned (exit 1)")
    u.add_argument("--override-diag", action="store_true",
                   help="with --diag: uncordon even when the diagnostic did not pass (the audit log names it)")
    u.add_argument("--dry-run", action="store_true", help="print the plan; write nothing (exit 1 when refused)")
    u.add_argument("-o", "--output", choices=("text", "json"), default="text")


def add_disruptions_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """`gputui disruptions`: every node another actor (or gputui) is disrupting, stuck ones first."""
    p = sub.add_parser("disruptions", help="print every node being disrupted (NVSentinel, Karpenter, the cluster "
                       "autoscaler, the GPU Operator, gputui, a person's cordon), stuck first, and exit")
    common(p)
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")


def add_evidence_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """`gputui evidence NODE [-o FILE] [--force]`: the node's evidence bundle (gputui.cli.evidence)."""
    p = sub.add_parser("evidence", help="write a node's evidence bundle (.tar.gz) for an RMA or incident ticket: "
                       "the node, its pods, holders, GPU faults, the last hour of DCGM series, audit entries")
    common(p)
    p.add_argument("node", metavar="NODE", type=node_name)
    p.add_argument("-o", "--output", dest="file", type=file_path, default=None, metavar="FILE",
                   help="where to write it (default: $XDG_STATE_HOME/gputui/evidence/NODE-TIME.tar.gz)")
    p.add_argument("--force", action="store_true", help="replace FILE when it exists (never done otherwise)")

"""A service in full, for its screen: the router object; per version its share of new sessions, replicas,
live sessions and the gates' figures (error ratio, p95 latency); its pods and the nodes they run on; and the
shifts and canaries the audit log holds for it. Textual-free: built from a snapshot, the signals read and
the audit entries; strings from the cluster stay data."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gputui.present.cells import Palette
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferenceService
from gputui.vocabulary.sessions import SessionState
from gputui.vocabulary.signals import VersionSignals

HISTORY_SHOWN = 8
HISTORY_ACTIONS = ("shift", "canary-start", "canary-end", "scale-down", "rollout-promote", "rollout-promote-full",
                   "rollout-abort", "rollout-retry", "rollout-undo")


def version_sessions(snapshot: ClusterSnapshot, service: InferenceService, version: str) -> tuple[int | None, int]:
    """A version's live sessions: the sum of the counts read (None: none read) and how many of its pods'
    counts cannot be read (never summed as 0). The service screen and `gputui services` say both."""
    pods = [p for p in snapshot.pods_of(service, version) if not p.terminated]
    reads = [snapshot.sessions(p) for p in pods]
    unknown = sum(1 for r in reads if r.state is SessionState.UNKNOWN)
    known = [r.live for r in reads if r.live is not None]
    return (sum(known) if known else None), unknown


def _sessions(snapshot: ClusterSnapshot, service: InferenceService, version: str) -> str:
    known, unknown = version_sessions(snapshot, service, version)
    return f"≥{known or 0} ({unknown} unknown)" if unknown else str(known or 0)


def _gates(signals: VersionSignals | None) -> tuple[str, str]:
    if signals is None or signals.error_ratio is None:
        return "–", "–" if signals is None or signals.p95_latency_s is None else f"{signals.p95_latency_s:.2f}s"
    latency = "–" if signals.p95_latency_s is None else f"{signals.p95_latency_s:.2f}s"
    return f"{signals.error_ratio:.2%}", latency


def _picker_lines(service: InferenceService, signals: Mapping[str, VersionSignals] | None) -> list[Text]:
    """For versions behind an InferencePool: what its endpoint picker reports, or that it reports nothing."""
    pooled = [v for v in service.versions if v.pool]
    if not pooled or signals is None:
        return []
    line = Text("endpoint picker  ", style="dim")
    for i, v in enumerate(pooled):
        picker = (signals.get(v.name) or VersionSignals()).picker
        line.append(("  ·  " if i else "") + f"{v.name} ({v.backend}): ")
        if picker is None:
            line.append("no metrics read (its EPP not scraped?)", style="dim")
            continue
        kv = "–" if picker.kv_cache is None else f"{picker.kv_cache:.0%}"
        queue = "–" if picker.queue is None else f"{picker.queue:.1f}"
        ready = "–" if picker.ready_pods is None else str(picker.ready_pods)
        line.append(f"KV cache {kv}, queue {queue}, ready pods {ready}")
    return [line]


def _budget_lines(snapshot: ClusterSnapshot, service: InferenceService, palette: Palette) -> list[Text]:
    """Per version, the PodDisruptionBudgets over its pods, or a warning that none does (issue 35: a version
    without one showed nothing, and a drain or the GPU Operator may take all its pods at once); versions under
    the same budgets on one line. Then where its pods run when they all run on one node."""
    said: dict[str, tuple[list[str], Text]] = {}
    for v in service.versions:
        pods = [p for p in snapshot.pods_of(service, v.name) if not p.terminated]
        budgets = {b.name: b for p in pods for b in snapshot.budget_for(p)}
        words = Text()
        if not pods:
            words.append("no pods")
        elif not budgets:
            words.append("none: no PodDisruptionBudget covers its pods, so a drain or a driver upgrade may evict "
                         "them all at once", style=f"bold {palette.cordoned}")
        else:
            for i, b in enumerate(budgets.values()):
                n = b.disruptions_allowed
                words.append(("; " if i else "") + f"{b.name}: {n} disruption{'s' * (n != 1)} allowed "
                             f"({b.current_healthy} healthy, {b.desired_healthy} needed)")
                if b.deadlock():
                    words.append(f" – {b.deadlock()}", style=f"bold {palette.alert}")
        said.setdefault(words.plain, ([], words))[0].append(v.name)
    lines = []
    for names, words in said.values():
        line = Text(f"disruption budget  {', '.join(names)}: ", style="dim")
        line.append_text(words)
        lines.append(line)
    running = [p for p in snapshot.pods_of(service) if not p.terminated and p.node]
    by_node = Counter(p.node for p in running)
    if len(running) > 1 and by_node:
        node, n = by_node.most_common(1)[0]
        if n == len(running):
            lines.append(Text(f"all {n} pods on {node}: one drain or one node failure takes the whole service",
                              style=f"bold {palette.cordoned}"))
        elif 2 * n > len(running):
            lines.append(Text(f"{n} of {len(running)} pods on {node}: one drain or one node failure takes most "
                              "of the service", style=palette.cordoned))
    return lines


def history(entries: Sequence[Mapping[str, Any]], service_key: str) -> list[Mapping[str, Any]]:
    """The audit entries about this service, newest first."""
    mine = [e for e in entries if e.get("action") in HISTORY_ACTIONS
            and ((e.get("params") or {}).get("service") == service_key or str(e.get("target", "")).endswith(service_key))]
    return list(reversed(mine))[:HISTORY_SHOWN]


def service_view(snapshot: ClusterSnapshot, service: InferenceService, signals: Mapping[str, VersionSignals] | None,
                 signals_error: str, entries: Sequence[Mapping[str, Any]], palette: Palette,
                 canary: tuple[str, Sequence[str], bool] | None = None) -> RenderableType:
    """`canary`: the guided canary of this service started from this gputui, if any (its state line, its
    last log lines, whether it ended)."""
    head = Text()
    head.append("router ", style="dim")
    head.append(f"{service.router_kind} {service.namespace}/{service.router_name}" if service.router_kind
                else "none: every version gets its pods' share")
    versions = Table(box=None, pad_edge=False, expand=False)
    for label in ("VERSION", "SHARE", "WEIGHT", "READY", "SESSIONS", "ERRORS", "P95"):
        versions.add_column(label, no_wrap=True, style="bold" if label == "VERSION" else "")
    for v in service.versions:
        share = service.share_pct(v.name)
        errors, p95 = _gates((signals or {}).get(v.name))
        ready = Text(f"{v.rollout.ready}/{v.rollout.replicas_desired}",
                     style="" if v.rollout.ready >= v.rollout.replicas_desired else palette.cordoned)
        versions.add_row(Text(v.name), "–" if share is None else f"{share:.0f}%", "–" if v.weight is None else str(v.weight),
                         ready, _sessions(snapshot, service, v.name), errors, p95)
    pods = Table(box=None, pad_edge=False, expand=False)
    for label in ("POD", "VERSION", "NODE", "READY", "SESSIONS"):
        pods.add_column(label, no_wrap=True)
    for v in service.versions:
        for p in snapshot.pods_of(service, v.name):
            if p.terminated:
                continue
            read = snapshot.sessions(p)
            live = "?" if read.state is SessionState.UNKNOWN else "–" if read.live is None else str(read.live)
            pods.add_row(Text(p.name), Text(v.name), Text(p.node or "(pending)"),
                         Text("yes" if p.ready else "no", style="" if p.ready else palette.cordoned), live)
    parts: list[RenderableType] = [head, Text(""), versions]
    parts += _picker_lines(service, signals)
    parts += _budget_lines(snapshot, service, palette)
    if signals_error:
        parts.append(Text(f"errors and latency unknown: {signals_error}", style="dim"))
    if canary is not None:
        state, lines, ended = canary
        head_line = Text("guided canary ", style="bold")
        head_line.append(state, style="" if ended else palette.cordoned)
        if not ended and not state.startswith("held"):  # a held canary's state says its own keys
            head_line.append("   space pause/continue · x stop · b roll back now", style="dim")
        parts += [Text(""), head_line, *(Text(line, style="dim") for line in lines)]
    parts += [Text(""), pods, Text("")]
    past = history(entries, service.key)
    parts.append(Text("history (audit log)", style="bold"))
    if not past:
        parts.append(Text("no shift, canary or scale-down of this service in the audit log", style="dim"))
    for e in past:
        params = e.get("params") or {}
        line = Text(f"{e.get('time', '?')}  {e.get('action')}  ")
        if "to" in params and isinstance(params["to"], Mapping):
            line.append(" ".join(f"{k}={w}" for k, w in params["to"].items()))
        elif params.get("version"):
            line.append(f"{params['version']}")
        line.append(f"  {e.get('identity', '?')}  {e.get('result', '')}", style="dim")
        parts.append(line)
    return Group(*parts)

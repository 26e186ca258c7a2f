"""`gputui services`: the inference services, their versions, routers, weights, replicas and live sessions, as
a table or JSON: the names `gputui shift` takes, for scripts."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.table import Table
from rich.text import Text

from gputui.cli import common, safe_output
from gputui.present.service_view import version_sessions
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferenceService


def _sessions(snapshot: ClusterSnapshot, service: InferenceService, version: str) -> dict[str, Any]:
    known, unknown = version_sessions(snapshot, service, version)
    return {"known": known, "pods_unknown": unknown}


def service_record(snapshot: ClusterSnapshot, service: InferenceService) -> dict[str, Any]:
    return {
        "service": service.key,  # what `gputui shift` takes
        "simulated": snapshot.simulated,
        "router": {"kind": service.router_kind or None, "name": service.router_name or None},
        "versions": [
            {
                "name": v.name,
                "weight": v.weight,
                "share_pct": service.share_pct(v.name),
                "backend": v.backend or None,
                "workload": v.workload or None,
                "replicas": {"desired": v.rollout.replicas_desired, "ready": v.rollout.ready,
                             "updated": v.rollout.updated, "available": v.rollout.available},
                "sessions": _sessions(snapshot, service, v.name),
                "pods": [{"name": p.name, "node": p.node or None, "ready": p.ready}
                         for p in snapshot.pods_of(service, v.name) if not p.terminated],
            }
            for v in service.versions
        ],
    }


def run(settings: Settings, output: str) -> int:
    snapshot = common.read_snapshot(settings)
    if output == "json":
        json.dump([service_record(snapshot, s) for s in snapshot.services], sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    from gputui.ops.traffic import fmt_pct  # noqa: PLC0415 (gputui.ops.traffic, ~40 ms: the table only, not -o json)

    table = Table(box=None, pad_edge=False)
    for label in ("SERVICE", "ROUTER", "VERSION", "WEIGHT", "SHARE", "READY", "SESSIONS"):
        table.add_column(label, no_wrap=True)
    for s in snapshot.services:
        for i, v in enumerate(s.versions):
            live = _sessions(snapshot, s, v.name)
            sessions = "–" if live["known"] is None else str(live["known"])
            if live["pods_unknown"]:
                sessions = f"≥{live['known'] or 0} ({live['pods_unknown']} pods unknown)"
            table.add_row(Text(s.key if i == 0 else ""), Text((s.router_kind or "–") if i == 0 else ""), Text(v.name),
                          "–" if v.weight is None else str(v.weight), fmt_pct(s.share_pct(v.name)),
                          f"{v.rollout.ready}/{v.rollout.replicas_desired}", sessions)
    console = safe_output.console(200)
    if snapshot.simulated:
        console.print(Text("# SIMULATED: the demo cluster, nothing here is real", style="dim"))
    console.print(table)
    return 0

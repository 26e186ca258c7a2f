"""What `i` (describe) reads from the API on demand, never on every refresh: the node object as it is now
(its taints, the Ready condition's last heartbeat) and the recent events of the node and of its pods."""

from __future__ import annotations

import calendar
import time
from collections.abc import Sequence
from typing import Any

from gputui.backends.kube_http import Connection
from gputui.vocabulary.model import Event, NodeDescription

EVENTS_SHOWN = 20


def _epoch(stamp: Any) -> float | None:
    """An RFC 3339 time ("2026-12-01T03:04:05Z", fractions allowed) as epoch seconds; None when absent/bad."""
    if not isinstance(stamp, str) or len(stamp) < 19:
        return None
    try:
        return float(calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def event_record(obj: dict[str, Any]) -> Event:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    series = obj.get("series") or {}
    last = (_epoch(obj.get("lastTimestamp")) or _epoch(series.get("lastObservedTime")) or _epoch(obj.get("eventTime"))
            or _epoch((obj.get("metadata") or {}).get("creationTimestamp")))
    return Event(
        type=str(obj.get("type") or ""), reason=str(obj.get("reason") or ""),
        message=str(obj.get("message") or obj.get("note") or "")[:1000],
        object=f"{involved.get('kind', '')}/{involved.get('name', '')}",
        count=int(obj.get("count") or series.get("count") or 1), last_seen=last,
    )


def taints_of(node: dict[str, Any]) -> tuple[str, ...]:
    """`key=value:Effect` as kubectl prints them."""
    out = []
    for t in (node.get("spec") or {}).get("taints") or []:
        value = f"={t['value']}" if t.get("value") else ""
        out.append(f"{t.get('key', '')}{value}:{t.get('effect', '')}")
    return tuple(out)


def heartbeat_of(node: dict[str, Any]) -> float | None:
    ready: dict[str, Any] = next(
        (c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
    return _epoch(ready.get("lastHeartbeatTime"))


def describe_node(conn: Connection, node: str, pods: Sequence[tuple[str, str]]) -> NodeDescription:
    """The node's taints, heartbeat and the newest events of it and its pods (one GET for the node, one
    for its events, one per pod: a node holds a handful of pods)."""
    obj = conn.request("GET", f"/api/v1/nodes/{node}")
    raw = conn.request("GET", "/api/v1/events",
                       {"fieldSelector": f"involvedObject.kind=Node,involvedObject.name={node}"}).get("items") or []
    for namespace, name in pods:
        raw += conn.request("GET", f"/api/v1/namespaces/{namespace}/events",
                            {"fieldSelector": f"involvedObject.kind=Pod,involvedObject.name={name}"}).get("items") or []
    events = sorted((event_record(e) for e in raw), key=lambda e: e.last_seen or 0.0, reverse=True)
    return NodeDescription(taints_of(obj), heartbeat_of(obj), tuple(events[:EVENTS_SHOWN]))

"""The evidence bundle of one node (issue 37 item 5), gathered: everything an RMA or incident ticket needs, read
now, each part on its own. A part that cannot be read (Prometheus down, a list forbidden) is kept as missing
with its reason: the bundle is still written, and says so. Only the node itself is required: without it there
is nothing to attach (BackendError).

The parts are named by gputui (PARTS), never by anything the cluster wrote; what goes in them is cleaned by
gputui.ops.evidence_clean; gputui.ops.evidence_write makes the SUMMARY.md, the MANIFEST and the file."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from gputui.backends.base import Backend, BackendError, error_line
from gputui.ops import evidence_clean as clean
from gputui.ops.audit import audit_path
from gputui.ops.audit_read import read_tail
from gputui.policy.disruptions import node_disruptions
from gputui.policy.fault_peers import DEFAULT_WINDOW_S, fleet_peers, lines, window_words
from gputui.policy.node_pools import DEFAULT_POOL_LABELS
from gputui.policy.upgrades import stuck_because
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_faults import NOT_COLLECTED, faults_of
from gputui.vocabulary.model import Gpu, Node

MINUTES = 60  # the DCGM series kept: the last hour
AUDIT_ENTRIES, AUDIT_BYTES = 5000, 16 * 1024 * 1024  # how far back the audit log is read
POD_LABELS = (("exported_namespace", "exported_pod"), ("pod_namespace", "pod_name"), ("namespace", "pod"))
UTIL = "DCGM_FI_DEV_GPU_UTIL"


@dataclass
class Part:
    """One file of the bundle: its fixed name, what it holds in words, and its content or why it is missing."""

    name: str
    what: str
    data: Any = None
    missing: str = ""  # "": read; else the one-line reason it could not be


@dataclass
class Evidence:
    node: str
    context: str
    simulated: bool
    taken_at: float
    model: Node
    gpus: tuple[Gpu, ...]
    parts: list[Part] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the reader should know about how a part was read
    # The node's GPU fault counts against its pool, in words (SUMMARY.md alone: no file of its own), or why unknown
    peers: list[str] = field(default_factory=list)
    peers_unknown: str = ""

    def part(self, name: str) -> Part:
        return next(p for p in self.parts if p.name == name)

    @property
    def missing(self) -> list[Part]:
        return [p for p in self.parts if p.missing]


Progress = Callable[[str], None]


def _quiet(_line: str) -> None:
    pass


def gather(backend: Backend, node: str, *, audit_log: str | None = None, snapshot: ClusterSnapshot | None = None,
           progress: Progress = _quiet, pool_labels: tuple[str, ...] = DEFAULT_POOL_LABELS) -> Evidence:
    """Read every part. `snapshot`: the caller's (the TUI's, whose reader belongs to its poll thread); else one is
    read; `pool_labels`: what names a node's pool (its fault counts are compared within it). BackendError only
    when the node itself cannot be read."""
    reader = backend.reader
    if snapshot is None:
        progress("reading the cluster")
        snapshot = reader.snapshot()
    model = snapshot.node(node)
    conn = getattr(reader, "conn", None)  # the live reader's apiserver connection; the demo has none
    if model is None:
        raise BackendError(f'node "{node}" not found (or not a GPU node) in context {backend.context}')
    raw_node: dict[str, Any]
    if conn is not None:
        progress(f"reading node {node}")
        raw_node = clean.node_object(conn.request("GET", f"/api/v1/nodes/{quote(node, safe='')}"))  # raises: nothing to bundle
    else:
        raw_node = clean.node_from_model(model)
    ev = Evidence(node, backend.context, snapshot.simulated, snapshot.taken_at, model, model.gpus)
    if conn is None:
        ev.notes.append("the simulated cluster has no API: node.json and pods.json are gputui's model of them")
    meta, status = raw_node.get("metadata") or {}, raw_node.get("status") or {}
    ev.parts += [
        Part("node.json", "the Node object as read from the API (managedFields dropped, annotations filtered)",
             raw_node),
        Part("conditions.json", "the node's conditions", status.get("conditions") or []),
        Part("taints.json", "the node's taints", (raw_node.get("spec") or {}).get("taints") or []),
        Part("labels.json", "the node's labels", meta.get("labels") or {}),
    ]
    pods = snapshot.pods_on(node)
    events = "the newest events of the node and of its pods (at most 20 on a real cluster: what describe, i, reads)"
    ev.parts.append(_read("events.json", events, lambda: [
        {"type": e.type, "reason": e.reason, "message": e.message, "object": e.object, "count": e.count,
         "last_seen": e.last_seen} for e in reader.describe(node, [(p.namespace, p.name) for p in pods]).events],
        progress, "reading events"))
    ev.gpus = _gpus(reader, model, ev)
    series = _series(reader, node, ev, progress)
    attribution = _attribution(series.get(UTIL))
    ev.parts.insert(4, _read("pods.json", "the pods on the node (specs reduced: see MANIFEST), their GPU units, "
                             "DCGM's GPU attribution and live sessions",
                             lambda: _pods(conn, node, snapshot, attribution), progress, "reading pods"))
    ev.parts.append(Part("actors.json", "who holds the node: every actor's disruption (the GPU Operator, NVSentinel, "
                         "autoscalers, gputui) and the driver upgrade state", {
                             "disruptions": [x.to_dict() for x in node_disruptions(model, snapshot.taken_at, snapshot)],
                             "upgrade": {"state": model.upgrade_state or None,
                                         "stuck": stuck_because(snapshot, model) or None},
                             "unschedulable": model.unschedulable}))
    ev.parts.append(Part("faults.json", "every GPU's faults in words with the action and who acts, worst first, "
                         "and the fields the exporter does not collect", [_fault_table(g) for g in ev.gpus]))
    _peers(ev, backend, snapshot, pool_labels, progress)
    for family, got in series.items():
        if isinstance(got, str):
            ev.parts.append(Part(f"dcgm/{family}.json", f"{family} of the node's GPUs, last {MINUTES} min",
                                 missing=got))
        else:
            ev.parts.append(Part(f"dcgm/{family}.json", f"{family} of the node's GPUs, last {MINUTES} min "
                                 f"({len(got)} series)", got))
    ev.parts.append(_audit(audit_log, backend.simulated, node, pods))
    return ev


def _read(name: str, what: str, read: Callable[[], Any], progress: Progress, doing: str) -> Part:
    progress(doing)
    try:
        return Part(name, what, read())
    except Exception as exc:  # noqa: BLE001 - a part that cannot be read is missing with its reason, never fatal
        return Part(name, what, missing=error_line(exc))


def _peers(ev: Evidence, backend: Backend, snapshot: ClusterSnapshot, pool_labels: tuple[str, ...],
           progress: Progress) -> None:
    """The node's GPU fault counts over 24 h against the other nodes of its pool (gputui.policy.fault_peers), in
    words for the summary: one query for the fleet; unknown with the reason when it cannot be read."""
    window_s = DEFAULT_WINDOW_S
    progress(f"counting the fleet's GPU faults over {window_words(window_s)} (one query)")
    window, why = backend.read_fault_window(window_s)
    if window is None:
        ev.peers_unknown = why or "not read"
        return
    ev.peers = lines(fleet_peers(snapshot.nodes, window, "", pool_labels, window_s, only=ev.node).get(ev.node, []))


def _gpus(reader: Any, model: Node, ev: Evidence) -> tuple[Gpu, ...]:
    """Every GPU of the node (a fleet read keeps only the troubled ones of a large cluster)."""
    try:
        full = reader.node_gpus(model.name)
    except Exception as exc:  # noqa: BLE001 - the snapshot's GPUs, said so
        ev.notes.append(f"the node's GPUs could not be read one by one ({error_line(exc)}): faults.json holds "
                        "the snapshot's GPUs")
        return model.gpus
    return tuple(full) if full else model.gpus


def _series(reader: Any, node: str, ev: Evidence, progress: Progress) -> dict[str, list[dict[str, Any]] | str]:
    from gputui.backends.prom_range import FAMILIES, node_series  # noqa: PLC0415 (prometheus_api_client: only when bundling)

    prom = getattr(reader, "prom", None)
    if prom is not None:
        progress(f"reading the node's DCGM series, last {MINUTES} min ({len(FAMILIES)} range queries, one per field)")
        return node_series(prom, node, MINUTES)
    if not ev.simulated:
        return dict.fromkeys(FAMILIES, "no metrics source (--prometheus not given)")
    # The demo simulates utilisation alone, its samples without their times: kept as such, never given made-up ones.
    out: dict[str, list[dict[str, Any]] | str] = dict.fromkeys(FAMILIES, "the simulated cluster has no such series")
    history = reader.gpu_history(node, MINUTES)
    out[UTIL] = [{"metric": {"__name__": UTIL, "gpu": str(i), "Hostname": node, "simulated": "true"},
                  "samples": [None if v is None else str(v) for v in h]}
                 for i, h in sorted(history.items())]
    return out


def _attribution(util: list[dict[str, Any]] | str | None) -> dict[tuple[str, str], list[int]] | None:
    """(namespace, pod) -> the GPU indices whose DCGM series name it (dcgm-exporter's pod attribution); None when
    the series could not be read or none of them names a pod (attribution off: unknown, not "no GPU")."""
    if not isinstance(util, list):
        return None
    out: dict[tuple[str, str], set[int]] = {}
    for s in util:
        labels = s.get("metric") or {}
        for ns_label, pod_label in POD_LABELS:
            if labels.get(pod_label) and str(labels.get("gpu", "")).isdigit():
                out.setdefault((labels.get(ns_label, ""), labels[pod_label]), set()).add(int(labels["gpu"]))
                break
    if not out and util:  # series, none naming a pod: the exporter attributes nothing (unknown, not "none")
        return None
    return {k: sorted(v) for k, v in out.items()}


def _pods(conn: Any, node: str, snapshot: ClusterSnapshot,
          attribution: Mapping[tuple[str, str], list[int]] | None) -> list[dict[str, Any]]:
    models = {(p.namespace, p.name): p for p in snapshot.pods_on(node)}
    if conn is not None:
        items = conn.request("GET", "/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"}).get("items") or []
        objects = [clean.pod_object(o) for o in items if isinstance(o, dict)]
    else:
        objects = [clean.pod_from_model(p) for p in models.values()]
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        model = models.get(key)
        sessions = snapshot.sessions(model) if model is not None else None
        out.append({
            **obj,
            "gputui": None if model is None else {
                "service": model.service or None, "version": model.version or None,
                "gpu_units": dict(model.gpu_units), "sessions": sessions.text if sessions else "unknown",
                "sessions_state": sessions.state.value if sessions else "unknown"},
            # GPU indices whose DCGM series carry this pod's name; null: unknown (no series read), [] none
            "dcgm_gpus": attribution.get(key, []) if attribution is not None else None,
        })
    return out


def _fault_table(gpu: Gpu) -> dict[str, Any]:
    faults = faults_of(gpu)
    return {"index": gpu.index, "uuid": gpu.uuid, "health": gpu.health.value, "xid": gpu.xid,
            "faults": [f.to_dict() for f in faults if f.category != NOT_COLLECTED],
            "not_collected": [name for f in faults if f.category == NOT_COLLECTED for name in f.fields]}


def _audit(configured: str | None, simulated: bool, node: str, pods: Any) -> Part:
    path = audit_path(configured, simulated)
    what = "gputui's audit-log entries about the node and its pods"
    tail = read_tail(path, AUDIT_ENTRIES, AUDIT_BYTES)
    if tail.error:
        return Part("audit.json", what, missing=tail.error)
    targets = {f"node/{node}", *(f"pod/{p.namespace}/{p.name}" for p in pods)}
    entries = [e for e in tail.entries
               if e.get("target") in targets or (e.get("params") or {}).get("node") == node]
    return Part("audit.json", what, {"file": str(path), "complete": tail.complete, "skipped_lines": tail.skipped,
                                     "entries": entries})

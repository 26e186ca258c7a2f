"""One policy for what is wrong: alert kinds and their order, the temperature threshold, driver drift, and the
troubleshooting findings. Pure: the header, the tables, the wallboard, the CLI and the diagnostics screen
all judge the same way. (Staleness is snapshot.stale; heat bands are present.cells.heat_band.)"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gauges import hot
from gputui.vocabulary.gpu_faults import NOT_COLLECTED, XID_FIELD, explain_xid, faults_of
from gputui.vocabulary.gpu_metrics import NO_VALUES
from gputui.vocabulary.gpu_resources import DEVICE_TAINT_CONDITION
from gputui.vocabulary.model import UPGRADE_FAILED, GpuSummary, Health, Node

DEFAULT_TEMP_ALERT_C = 85.0


class Severity(IntEnum):
    """What is wrong with a node, worst first: the order of the default sort, `sort alerts`, the header's
    worst problem and the wallboard's banner. DRIFT and CORDONED rank nodes but raise no alert."""

    NOT_READY = 0
    GPU_LOST = 1  # fallen off the bus, a fatal XID, or taken out of allocatable by the device plugin
    HEALTH = 2  # DCGM health warn/fail, an application XID, a problem condition from a health agent
    UPGRADE_FAILED = 3  # the GPU Operator's driver upgrade failed on it
    THERMAL = 4
    DRIFT = 5  # its driver differs from the fleet's
    CORDONED = 6
    OK = 7


# The verdicts whose fault leaves the GPU usable (the application's own fault, or nothing to do yet): a health
# alert; every other verdict on an XID (hardware, reset the GPU, driver, unknown) counts as a lost GPU.
USABLE = frozenset({"application", "informational"})


def xid_text(code: int) -> str:
    """`XID 79 (fallen off the bus: reboot the node)`: the code and its words from NVIDIA's catalog
    (gpu_faults); a code the catalog does not hold says so."""
    return explain_xid(code).short


@dataclass(frozen=True, slots=True)
class Alert:
    node: str
    kind: str
    message: str
    severity: Severity = Severity.HEALTH
    # The alert in a word or two that fits a narrow column whole: `NotReady`, `XID 79`, `96°C`, `upgrade ✗`.
    word: str = ""

    @property
    def short(self) -> str:
        return self.word or self.kind


def fleet_alerts(snapshot: ClusterSnapshot, temp_threshold: float = DEFAULT_TEMP_ALERT_C) -> list[Alert]:
    """Every node's alerts, worst first across the fleet (node order within a severity)."""
    summaries = snapshot.summaries
    return sorted((a for n in snapshot.nodes for a in node_alerts(n, temp_threshold, summaries.get(n.name))),
                  key=lambda a: a.severity)


def majority_driver(nodes: Iterable[Node]) -> str:
    """The driver version most GPU nodes run; ties go to the newest string."""
    counts = Counter(n.driver_version for n in nodes if n.driver_version)
    if not counts:
        return ""
    return max(counts.items(), key=lambda kv: (kv[1], version_key(kv[0])))[0]


def fleet_driver(snapshot: ClusterSnapshot) -> str:
    """The snapshot's majority driver (majority_driver), worked out once per snapshot: node detail asks on every
    draw, the node table and the wallboard once each; a walk over 65,000 nodes each time."""
    return snapshot.derived("majority_driver", lambda: majority_driver(snapshot.nodes))


def has_driver_drift(node: Node, majority: str) -> bool:
    return bool(majority and node.driver_version and node.driver_version != majority)


def node_alerts(node: Node, temp_threshold: float = DEFAULT_TEMP_ALERT_C,
                summary: GpuSummary | None = None) -> list[Alert]:
    """Everything about a node an on-call engineer should look at, most severe first. `summary`: the node's
    DCGM figures in a summarised fleet (ClusterSnapshot.summary), whose one alert is a hot GPU."""
    memo = node.alerts_memo  # a node object outlives many refreshes when it does not change: asked once per object
    if memo is None or memo[0] != temp_threshold:
        memo = (temp_threshold, tuple(_own_alerts(node, temp_threshold)))
        object.__setattr__(node, "alerts_memo", memo)  # a cache, not a change of the node
    alerts = list(memo[1])
    if hot(summary, temp_threshold) and not any(g.temp_c is not None for g in node.gpus):
        assert summary is not None and summary.temp_c is not None
        alerts.append(Alert(node.name, "Temp", f"hottest GPU {summary.temp_c:.0f}°C", Severity.THERMAL,
                            f"{summary.temp_c:.0f}°C"))
        alerts.sort(key=lambda a: a.severity)  # stable: no other alert of the node is thermal (its GPUs have none)
    return alerts


def _own_alerts(node: Node, temp_threshold: float) -> list[Alert]:
    """The node's alerts from the node alone (its record, devices and the GPUs it carries)."""
    alerts: list[Alert] = []
    if not node.ready:
        alerts.append(Alert(node.name, "NotReady", "node is NotReady", Severity.NOT_READY, "NotReady"))
    if node.gpu_allocatable < node.gpu_capacity:
        lost = node.gpu_capacity - node.gpu_allocatable
        alerts.append(Alert(node.name, "Lost", f"{lost} of {node.gpu_capacity} GPUs not allocatable (unhealthy device)",
                            Severity.GPU_LOST, "GPU lost"))
    for gpu in node.gpus:
        if gpu.xid:
            fault = explain_xid(gpu.xid)
            severity = Severity.HEALTH if fault.category in USABLE else Severity.GPU_LOST
            alerts.append(Alert(node.name, "XID", f"GPU {gpu.index}: {fault.short}", severity, f"XID {gpu.xid}"))
        if gpu.extra is not NO_VALUES:  # the fields that predict a failure, when a per-GPU read brought them
            for fault in faults_of(gpu):
                if fault.field != XID_FIELD and fault.category not in USABLE and fault.category != NOT_COLLECTED:
                    alerts.append(Alert(node.name, "Fault", f"GPU {gpu.index}: {fault.short}", Severity.HEALTH,
                                        "GPU fault"))
        if gpu.health in (Health.WARN, Health.FAIL):
            alerts.append(Alert(node.name, "Health", f"GPU {gpu.index}: health {gpu.health.value}", Severity.HEALTH,
                                "health ✗" if gpu.health is Health.FAIL else "health !"))
        if gpu.temp_c is not None and gpu.temp_c >= temp_threshold:
            alerts.append(Alert(node.name, "Temp", f"GPU {gpu.index}: {gpu.temp_c:.0f}°C", Severity.THERMAL,
                                f"{gpu.temp_c:.0f}°C"))
    for cond in node.problem_conditions:
        # A device taint's message is gputui's own and says what the taint will do: shown whole.
        detail = f": {cond.message}" if cond.type == DEVICE_TAINT_CONDITION else f": {cond.reason}" if cond.reason else ""
        word = "dev taint" if cond.type == DEVICE_TAINT_CONDITION else cond.type if len(cond.type) <= 9 else "condition"
        alerts.append(Alert(node.name, "Condition", f"{cond.type}{detail}", Severity.HEALTH, word))
    if node.upgrade_state == UPGRADE_FAILED:
        alerts.append(Alert(node.name, "Upgrade", "driver upgrade failed", Severity.UPGRADE_FAILED, "upgrade ✗"))
    alerts.sort(key=lambda a: a.severity)  # stable: within a severity, in the order found
    return alerts


def node_severity(node: Node, temp_threshold: float, majority: str, summary: GpuSummary | None = None) -> Severity:
    """The worst thing about the node (OK when nothing is)."""
    alerts = node_alerts(node, temp_threshold, summary)
    if alerts:
        return alerts[0].severity
    if has_driver_drift(node, majority):
        return Severity.DRIFT
    if node.unschedulable:
        return Severity.CORDONED
    return Severity.OK


def problem_order(node: Node, temp_threshold: float, majority: str,
                  summary: GpuSummary | None = None) -> tuple[int, int]:
    """Sort key, worst first: the worst severity, then the most alerts."""
    alerts = node_alerts(node, temp_threshold, summary)
    if alerts:
        return alerts[0].severity, -len(alerts)
    return node_severity(node, temp_threshold, majority), 0


def version_key(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


RESTARTS_WORTH_A_LOOK = 3


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # Pending, NoMetrics, NotReady, Restarts, Drift, GpuLost
    subject: str  # node name or namespace/pod
    detail: str


def diagnose(snap: ClusterSnapshot) -> list[Finding]:
    out: list[Finding] = []
    for pod in snap.pods:
        if pod.phase == "Pending" and pod.gpu_request > 0 and not pod.node:
            out.append(Finding("Pending", pod.key, pod.pending_reason or f"waiting for {pod.gpu_request} GPUs"))
    for node in snap.nodes:
        for alert in node_alerts(node):  # a lost GPU is the node's own alert, whatever its summary says
            if alert.kind == "Lost":
                out.append(Finding("GpuLost", node.name, alert.message))
    for pod in snap.pods:
        if not pod.service or pod.deleting or pod.terminated:
            continue
        if pod.phase == "Running" and not pod.ready:
            out.append(Finding("NotReady", pod.key, f"{pod.service} {pod.version}: running but not Ready"))
        if pod.restarts >= RESTARTS_WORTH_A_LOOK:
            out.append(Finding("Restarts", pod.key, f"{pod.service} {pod.version}: {pod.restarts} restarts"))
    metrics = snap.source("metrics")
    if metrics is not None and metrics.error is None and metrics.fetched_at is not None:
        for node in snap.nodes:
            if node.ready and node.gpu_capacity and not snap.gauges(node).reporting:
                out.append(Finding("NoMetrics", node.name, "no DCGM series for this node (is the exporter running?)"))
    majority = fleet_driver(snap)
    cuda = Counter(n.cuda_version for n in snap.nodes if n.cuda_version).most_common(1)
    cuda_major = cuda[0][0] if cuda else ""
    for node in snap.nodes:
        drift = []
        if majority and node.driver_version and node.driver_version != majority:
            drift.append(f"driver {node.driver_version} (fleet {majority})")
        if cuda_major and node.cuda_version and node.cuda_version != cuda_major:
            drift.append(f"CUDA {node.cuda_version} (fleet {cuda_major})")
        if drift:
            out.append(Finding("Drift", node.name, ", ".join(drift)))
    return out

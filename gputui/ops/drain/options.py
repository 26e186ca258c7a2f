"""A drain's options, and the record a running drain keeps on its node.

Each node carries its own options (selector, eviction mode, threshold, deadline, grace period, force,
emptyDir, what to do with unknown counts at the deadline), so an interrupted batch resumes every node
to the end it was started for, whoever resumes it. A record gputui cannot read is one clear line
(DrainRecordError), never a traceback and never a silent default.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from gputui.backends.base import BackendError
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import DRAIN_ANNOTATION_PREFIX, DRAIN_PHASE_ANNOTATION, Node

DEFAULT_SESSION_DEADLINE_S = 15 * 60.0

BY = DRAIN_ANNOTATION_PREFIX + "by"
STARTED = DRAIN_ANNOTATION_PREFIX + "started"
DEADLINE = DRAIN_ANNOTATION_PREFIX + "deadline"
OPTIONS = DRAIN_ANNOTATION_PREFIX + "options"
PHASE = DRAIN_PHASE_ANNOTATION
IN_PROGRESS = ("cordoned", "waiting", "evicting", "paused")


class DrainRecordError(BackendError):
    """A node's drain record that cannot be read back (hand-edited, truncated, from another tool)."""


@dataclass(frozen=True, slots=True)
class DrainOptions:
    ignore_daemonsets: bool = True
    delete_emptydir_data: bool = False
    force: bool = False
    pod_selector: Mapping[str, str] = field(default_factory=dict)
    grace_seconds: int | None = None  # None: each pod's own terminationGracePeriodSeconds
    session_threshold: int = 0  # evict an inference pod once its live sessions are at or below this
    session_deadline_s: float = DEFAULT_SESSION_DEADLINE_S
    disable_eviction: bool = False  # delete instead of evict: bypasses PDBs (force + typed confirm only)
    # An inference pod whose count is unknown at its deadline: evicted only when chosen here, before the
    # drain starts; otherwise it stays and the node's drain ends unfinished, saying why.
    evict_unknown_at_deadline: bool = False
    # Seconds an engine takes to stop after SIGTERM (finishing its batch): the plan warns when a pod's
    # terminationGracePeriodSeconds is shorter than its preStop sleep plus this.
    engine_shutdown_s: float = 0.0
    # After a pod leaves rotation, a quiet count is trusted only this long after: sessions routed to it just
    # before the endpoints changed show only at the metrics' next scrape (two scrapes at 15 s).
    rotation_settle_s: float = 30.0
    # One GPU's drain (issue 37): the GPU as the operator named it ("" : the whole node), the pods bound to it
    # ("namespace/name", resolved when the drain was planned: gputui.ops.drain.gpu_target), the node's GPU pods
    # whose GPU could not be told, whether those go too (the operator's choice; else the plan refuses to start),
    # and the DRA device to fence ("driver/pool/device"; "" on device-plugin clusters). The node stays schedulable.
    gpu: str = ""
    gpu_pods: tuple[str, ...] = ()
    unattributed: tuple[str, ...] = ()
    include_unattributed: bool = False
    gpu_device: str = ""
    # A drain as the maintenance-operator's requestor (gputui.ops.drain.maintenance_request): the namespace of its
    # NodeMaintenance ("" : gputui cordons by itself). Kept with the options so a resumed drain finds its request.
    maintenance_namespace: str = ""

    @property
    def operation(self) -> str:
        """The operation whose permissions this drain needs (gputui.backends.base.NEEDS)."""
        return "drain_via_nodemaintenance" if self.maintenance_namespace else "drain"

    def to_json(self) -> str:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["pod_selector"] = dict(self.pod_selector)
        data["gpu_pods"], data["unattributed"] = list(self.gpu_pods), list(self.unattributed)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DrainOptions:
        """The options written by to_json; DrainRecordError naming what is wrong."""
        try:
            data = json.loads(text)
        except ValueError:
            raise DrainRecordError("its options are not JSON") from None
        if not isinstance(data, dict):
            raise DrainRecordError("its options are not a JSON object")
        defaults = cls()
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value, default = data[f.name], getattr(defaults, f.name)
            if f.name == "pod_selector":
                ok = isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
            elif f.name in ("gpu_pods", "unattributed"):
                ok = isinstance(value, list) and all(isinstance(k, str) and "/" in k for k in value)
                if ok:
                    value = tuple(value)
            elif f.name in ("gpu", "gpu_device", "maintenance_namespace"):
                ok = isinstance(value, str)
            elif f.name == "grace_seconds":
                ok = value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)
            elif isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, int):
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            elif f.name in ("engine_shutdown_s", "rotation_settle_s"):  # JSON's NaN and Infinity: no duration
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                    and value >= 0
            else:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                    and value > 0
            if not ok:
                raise DrainRecordError(f"its option {f.name} is {str(value)[:40]!r}")
            values[f.name] = float(value) if f.name == "session_deadline_s" else value
        return cls(**values)


def settings_options(settings: Settings, via: str | None = None) -> DrainOptions:
    """A drain's options as the settings give them (the TUI's start; the CLI's flags override them); `via`
    overrides the drain_via setting."""
    requestor = (via or settings.drain_via) == "nodemaintenance"
    return DrainOptions(session_deadline_s=settings.session_deadline, engine_shutdown_s=settings.engine_shutdown,
                        maintenance_namespace=settings.maintenance_namespace if requestor else "")


def record_values(options: DrainOptions, identity: str, started: float, deadline: float) -> dict[str, str]:
    """The annotations a drain writes when it starts on a node."""
    return {
        BY: identity, STARTED: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        DEADLINE: f"{deadline:.0f}", OPTIONS: options.to_json(),
    }


def resumable(snapshot: ClusterSnapshot) -> list[str]:
    """Nodes whose drain was interrupted (process killed, SSH closed): their annotations say so. Asked of every
    snapshot the dashboard sees: worked out once per nodes tuple."""
    return list(snapshot.of_nodes("resumable", lambda: tuple(n.name for n in snapshot.nodes
                                                             if n.annotations.get(PHASE) in IN_PROGRESS)))


def saved_drain(node: Node) -> tuple[DrainOptions, float | None]:
    """The options and deadline this node's interrupted drain was started with."""
    raw = node.annotations.get(OPTIONS)
    if not raw:
        raise DrainRecordError(f"node {node.name}: its drain record has no options ({OPTIONS})")
    try:
        options = DrainOptions.from_json(raw)
    except DrainRecordError as exc:
        raise DrainRecordError(f"node {node.name}: cannot resume its drain: {exc}") from None
    text = node.annotations.get(DEADLINE, "")
    try:
        deadline = float(text) if text else None
        if deadline is not None and not math.isfinite(deadline):  # "nan" or "inf": a wait that never ends
            raise ValueError(text)
    except ValueError:
        raise DrainRecordError(f"node {node.name}: cannot resume its drain: its deadline is {text[:40]!r}") from None
    return options, deadline

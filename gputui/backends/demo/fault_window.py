"""The demo's GPU fault counts over a window (issue 37 item 2), derived from the faults its snapshot already
shows, so node detail's counts agree with its GPU rows: a GPU showing an XID counts one of that code; a fault
counter or flag a GPU carries (its `extra`, by DCGM name) counts its value, the demo's counters starting at 0 when
the simulation starts. The demo serves an XID for every GPU: its family is always collected; a counter family is
collected on a node only when one of its GPUs carries it (as a real exporter's configuration would say)."""

from __future__ import annotations

from gputui.policy.fault_peers import COUNTERS, FaultWindow
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_faults import PCIE_REPLAY_FIELD, XID_FIELD

_AS_FIELD = {"pcie_replays": PCIE_REPLAY_FIELD}  # the table's figure -> its DCGM field


def fault_window(snapshot: ClusterSnapshot, window_s: float) -> FaultWindow:
    counts: dict[str, dict[str, int]] = {}
    collected: dict[str, frozenset[str]] = {}
    for node in snapshot.nodes:
        mine: dict[str, int] = {}
        families = {XID_FIELD}
        for gpu in node.gpus:
            if gpu.xid:
                mine[f"XID {gpu.xid}"] = mine.get(f"XID {gpu.xid}", 0) + 1
            for name, value in gpu.extra.items():
                field = _AS_FIELD.get(name, name)
                if field not in COUNTERS or value is None:
                    continue
                families.add(field)
                if value > 0:
                    mine[field] = mine.get(field, 0) + round(value)
        collected[node.name] = frozenset(families)
        if mine:
            counts[node.name] = mine
    return FaultWindow(window_s, counts, collected)

"""The demo's answer to describe: taints, heartbeats and events that follow from its own state (a node that
is down, a GPU fallen off the bus, a pod that cannot be scheduled), worded as Kubernetes words them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gputui.vocabulary.model import Event, NodeDescription

if TYPE_CHECKING:
    from gputui.backends.demo.simulation import Simulation

DOWN_FOR_S = 1500.0  # how long before the simulation began the demo's NotReady node stopped reporting
HEARTBEAT_EVERY_S = 40.0


def describe(sim: Simulation, node: str, pods: Sequence[tuple[str, str]]) -> NodeDescription:
    n = sim._nodes.get(node)
    if n is None:
        return NodeDescription()
    t = sim._t
    taints = []
    if n.unschedulable:
        taints.append("node.kubernetes.io/unschedulable:NoSchedule")
    if not n.ready:
        taints += ["node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"]
    taints += [str(taint) for taint in n.taints]  # its own: other actors' (actors.py), the autoscaler's
    heartbeat = t - (t % HEARTBEAT_EVERY_S) if n.ready else sim._began - DOWN_FOR_S
    events = []
    if not n.ready:
        events.append(Event("Normal", "NodeNotReady", f"Node {node} status is now: NodeNotReady", f"Node/{node}",
                            1, sim._began - DOWN_FOR_S))
    for index, xid in sorted({**n.bad_gpus, **n.gpu_xids}.items()):
        events.append(Event("Warning", "SysLogsXIDError", f"XID {xid} on GPU {index} ({n.uuids[index]})",
                            f"Node/{node}", 3, t - 120))
    for namespace, name in pods:
        pod = sim._pods.get(f"{namespace}/{name}")
        if pod is not None and pod.phase == "Running":
            events.append(Event("Normal", "Started", "Started container server", f"Pod/{name}", 1, pod.ready_at))
    events.sort(key=lambda e: e.last_seen or 0.0, reverse=True)
    return NodeDescription(tuple(taints), heartbeat, tuple(events))

"""The GPU Operator's driver upgrades, node by node (../shared/reference/gpu-resources.md): each node's state
in the operator's state machine (`nvidia.com/gpu-driver-upgrade-state`) and, when it is not moving, why: it
failed, it is skipped by label, the ClusterPolicy's maxParallelUpgrades or maxUnavailable holds it back, its
driver pod restarts, a pod uses GPUs without requesting them (never evicted, it keeps the driver in use),
GPU pods are still on it. And the warning gputui gives before it cordons, drains or
uncordons a node the operator is upgrading: two controllers on one node undo each other's work. Pure."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from gputui.policy.disruption_time import seconds, stale
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.model import UPGRADE_FAILED, UPGRADE_IN_PROGRESS, Node, UpgradePolicy

STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
DRIVER_POD_PREFIX = "nvidia-driver"  # the operator's driver DaemonSet's pods
RESTARTS_STUCK = 3
OPERATOR_POD_PREFIXES = ("nvidia-", "gpu-feature-discovery", "gpu-operator")  # its own pods see GPUs by design
# Past upgrade-required: the operator has taken the node (counted against maxParallelUpgrades).
TAKEN = UPGRADE_IN_PROGRESS[1:]
WITH_PODS = ("wait-for-jobs-required", "pod-deletion-required", "drain-required")


def policy_from(obj: Mapping[str, Any]) -> UpgradePolicy:
    """A ClusterPolicy's upgrade policy; its CRD's defaults for what it leaves unset."""
    up = ((obj.get("spec") or {}).get("driver") or {}).get("upgradePolicy") or {}
    try:
        parallel = max(0, int(up.get("maxParallelUpgrades", 1)))
    except (TypeError, ValueError):
        parallel = 1
    return UpgradePolicy(bool(up.get("autoUpgrade", False)), parallel, str(up.get("maxUnavailable", "25%")))


def max_unavailable(policy: UpgradePolicy, nodes: int) -> int:
    """maxUnavailable as a node count: a percentage of the nodes rounded up, as the operator reads it."""
    text = policy.max_unavailable.strip()
    try:
        return math.ceil(nodes * float(text[:-1]) / 100) if text.endswith("%") else int(text)
    except ValueError:
        return math.ceil(nodes * 0.25)


def parallel_hold(snapshot: ClusterSnapshot, starting: str, draining: set[str],
                  queued: Collection[str] = ()) -> str:
    """Why a maintenance batch must not start draining `starting` beside the drains it runs: the GPU Operator
    upgrades only while at most maxUnavailable GPU nodes are unavailable, and one more drained in parallel
    would take the fleet past it. "" when there is room, or the node is unavailable already (draining it
    costs nothing more). The batch still drains one node at a time: the limit holds back parallelism, never
    the maintenance itself (the plan says when the batch as a whole goes beyond it)."""
    policy = snapshot.upgrade_policy
    if policy is None:
        return ""
    limit = max_unavailable(policy, len(snapshot.nodes))
    # The batch's running drains count as unavailable even before their cordon shows in the snapshot; the
    # nodes it cordoned first and has not started (`queued`) do not: parallelism is about drains at once.
    down = ({n.name for n in snapshot.nodes if _unavailable(n)} - set(queued)) | draining
    if starting in down or len(down) < limit:
        return ""
    return (f"{starting} waits for the drains running: {len(down)} of {len(snapshot.nodes)} GPU nodes are "
            f"unavailable, the GPU Operator's maxUnavailable {policy.max_unavailable} ({limit}); one more at once "
            "would hold its driver upgrades back")


@dataclass(frozen=True, slots=True)
class UpgradeRow:
    node: str
    state: str  # "" when the operator has not labelled the node
    stuck: str  # why it does not move ("" when nothing holds it, or it is idle)

    def to_dict(self) -> dict:
        return {"node": self.node, "state": self.state or None, "stuck": self.stuck or None}


def _unavailable(n: Node) -> bool:
    return n.unschedulable or not n.ready


# The two states the operator dates itself, with Unix seconds in a node annotation (k8s-operator-libs
# pkg/upgrade/consts.go; docs/disruption-actors.md §7): the others are dated only by gputui's own watch (StateClock).
DATED_STATES = {"wait-for-jobs-required": d.UPGRADE_WAIT_START, "validation-required": d.UPGRADE_VALIDATION_START}


def dated_since(node: Node) -> float | None:
    """When the node entered its upgrade state, as the operator wrote it; None where it writes no time."""
    key = DATED_STATES.get(node.upgrade_state)
    return seconds(node.annotations.get(key)) if key else None


def stuck_because(snapshot: ClusterSnapshot, node: Node) -> str:
    state = node.upgrade_state
    if state == UPGRADE_FAILED:
        return ("upgrade failed: the operator leaves the node for manual recovery (fix the cause, then set "
                f"{STATE_LABEL}=upgrade-required)")
    if node.labels.get(SKIP_LABEL) == "true" and state not in ("", "upgrade-done"):
        return f"skipped: labelled {SKIP_LABEL}=true"
    driver = [p for p in snapshot.pods_on(node.name) if p.name.startswith(DRIVER_POD_PREFIX) and not p.terminated]
    for pod in driver:
        if pod.restarts >= RESTARTS_STUCK and not pod.ready:
            return (f"driver pod {pod.name} restarting ({pod.restarts} restarts, not ready): often the old driver "
                    "is still in use by a process holding a GPU")
    if state in TAKEN:  # taken by the operator: a pod it cannot see keeps the old driver loaded
        hidden = [p.key for p in snapshot.pods_on(node.name)
                  if p.gpus_unrequested and not p.terminated and not p.name.startswith(OPERATOR_POD_PREFIXES)]
        if hidden:
            return (f"{len(hidden)} pod{'s' * (len(hidden) != 1)} use{'s' * (len(hidden) == 1)} GPUs without "
                    f"requesting any (NVIDIA_VISIBLE_DEVICES): the operator never evicts {'them' if len(hidden) > 1 else 'it'}"
                    f" and the driver stays in use: {', '.join(hidden[:3])}" + (" …" if len(hidden) > 3 else ""))
    policy = snapshot.upgrade_policy
    if state == "upgrade-required" and policy is not None:
        taken = sum(1 for n in snapshot.nodes if n.upgrade_state in TAKEN)
        if policy.max_parallel and taken >= policy.max_parallel:
            return f"waiting its turn: {taken} node{'' if taken == 1 else 's'} upgrading, maxParallelUpgrades {policy.max_parallel}"
        limit = max_unavailable(policy, len(snapshot.nodes))
        down = sum(1 for n in snapshot.nodes if _unavailable(n))
        if down >= limit:
            return f"waiting: {down} nodes unavailable, maxUnavailable {policy.max_unavailable} ({limit} nodes)"
    if state in WITH_PODS:
        gpu_pods = [p for p in snapshot.pods_on(node.name)
                    if p.gpu_request and not p.terminated and p.owner_kind != "DaemonSet"]
        if gpu_pods:
            return f"{len(gpu_pods)} GPU pods still on the node; the operator waits for them or evicts them"
    return stale(dated_since(node), snapshot.taken_at, state)  # a day in a state the operator dated


def upgrade_rows(snapshot: ClusterSnapshot) -> list[UpgradeRow]:
    return [UpgradeRow(n.name, n.upgrade_state, stuck_because(snapshot, n)) for n in snapshot.nodes]


class StateClock:
    """How long each node has been in its upgrade state: the operator's own time where it writes one
    (dated_since: exact), else as far as gputui has watched. A state seen at gputui's first look is a lower
    bound ("≥"); a change seen live is exact. Only nodes
    in some upgrade state are kept (most of a fleet is in none: at 65,000 nodes a table of them all cost a
    walk in Python per refresh); the names seen, for "live", come from the snapshot's name map."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, float, bool]] = {}  # node in an upgrade state -> (state, since, exact)
        self._names: Collection[str] = ()  # every node of the last snapshot observed
        self._looked = False
        self._nodes: tuple[Node, ...] | None = None  # the nodes last observed

    def observe(self, snapshot: ClusterSnapshot, now: float) -> None:
        if snapshot.nodes is self._nodes:
            return  # no node moved since (the join hands over the same tuple): every entry stays as it is
        seen = {}
        upgrading = snapshot.of_nodes("upgrading", lambda: tuple(n for n in snapshot.nodes if n.upgrade_state))
        for node in upgrading:
            name, state, dated = node.name, node.upgrade_state, dated_since(node)
            old = self._seen.get(name)
            if dated is not None:
                seen[name] = (state, dated, True)
            elif old is not None and old[0] == state:
                seen[name] = old
            else:  # moved while watched (exact), or new to gputui (since at least now)
                seen[name] = (state, now, self._looked and name in self._names)
        self._seen, self._looked = seen, True
        self._names = frozenset(snapshot.node_names())  # not the view: it would keep the snapshot's nodes alive
        self._nodes = snapshot.nodes  # the current snapshot's own tuple: nothing more is kept alive

    def since(self, node: str, now: float) -> tuple[float, bool] | None:
        """(seconds in its current state, exact), or None when gputui has not seen the node in one."""
        entry = self._seen.get(node)
        return None if entry is None else (max(0.0, now - entry[1]), entry[2])


def owner_warning(node: Node) -> str:
    """What gputui says before it cordons, uncordons or drains a node the GPU Operator is upgrading."""
    if node.upgrade_state == UPGRADE_FAILED:
        # The operator has let go of a failed node (stuck_because says the same): acting on it is the
        # manual recovery, not a race with the operator; what the operator needs afterwards is the label.
        return (f"{node.name}'s driver upgrade failed: the GPU Operator leaves it for manual recovery; once the "
                f"cause is fixed, set {STATE_LABEL}=upgrade-required and the operator takes it again")
    if node.upgrade_state in TAKEN:
        return (f"{node.name} is mid driver upgrade under the GPU Operator (state {node.upgrade_state}): the "
                "operator cordons, drains and uncordons it itself; acting now can undo its step")
    return ""

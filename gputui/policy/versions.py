"""The version matrix (seed 001 §8.1, §10.5; seed 000 §6's driver consistency spot check): per GPU node, the
driver (GFD's or DCGM's label), the CUDA runtime, kubelet, container runtime, kernel and OS image (node
status), the GPU Operator's components running on it (their images' tags) and the inference engines' images,
with the node's driver-upgrade state and why it is stuck (gputui.policy.upgrades).
Each column is compared with the majority of the node's pool: a node that differs is flagged in that column.
A value not read is unknown ("" here, "–" shown), never drift. Pure: built from a snapshot."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gputui.policy.node_pools import DEFAULT_POOL_LABELS, pool_of
from gputui.policy.upgrades import stuck_because
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, Node

# The GPU Operator's DaemonSets (and the standalone charts' names), by the component they run.
COMPONENTS: Mapping[str, tuple[str, ...]] = {
    "device-plugin": ("nvidia-device-plugin",),
    "dcgm-exporter": ("nvidia-dcgm-exporter", "dcgm-exporter"),
    "toolkit": ("nvidia-container-toolkit",),
    "driver-pod": ("nvidia-driver",),
}
COLUMNS = ("driver", "cuda", "kubelet", "runtime", "kernel", "os", *COMPONENTS, "engines")
NODE_INFO = {"kubelet": "kubeletVersion", "runtime": "containerRuntimeVersion", "kernel": "kernelVersion",
             "os": "osImage"}


def image_tag(image: str) -> str:
    """The version an image names: its tag (`vllm/vllm-openai:v0.9.0` -> v0.9.0), else its digest's start."""
    name, at, digest = image.partition("@")
    if at:
        return digest.split(":")[-1][:12]
    last = name.rsplit("/", 1)[-1]
    return last.partition(":")[2] or "latest"


def _component(pod: InferencePod) -> str | None:
    if pod.owner_kind != "DaemonSet":
        return None
    return next((c for c, prefixes in COMPONENTS.items() if pod.name.startswith(prefixes)), None)


@dataclass(frozen=True, slots=True)
class VersionRow:
    node: str
    pool: str
    values: Mapping[str, str]  # column -> version ("" unknown)
    drift: frozenset[str]  # columns differing from the pool's majority
    upgrade: str = ""  # the GPU Operator's driver-upgrade state ("" not labelled)
    stuck: str = ""  # why that upgrade does not move (gputui.policy.upgrades)

    def to_dict(self) -> dict:
        return {"node": self.node, "pool": self.pool, "versions": {c: self.values.get(c) or None for c in COLUMNS},
                "drift": sorted(self.drift), "upgrade": {"state": self.upgrade or None, "stuck": self.stuck or None}}


def _values(node: Node, pods: Iterable[InferencePod]) -> dict[str, str]:
    values = {"driver": node.driver_version, "cuda": node.cuda_version,
              **{col: node.node_info.get(key, "") for col, key in NODE_INFO.items()}}
    engines: set[str] = set()
    for pod in pods:
        if pod.terminated:
            continue
        component = _component(pod)
        if component and pod.images:
            values[component] = image_tag(pod.images[0])
        elif pod.service and pod.images:
            engines.update(image_tag(i) for i in pod.images)
    values["engines"] = ",".join(sorted(engines))
    return values


def version_matrix(snapshot: ClusterSnapshot, pool_labels: Iterable[str] = DEFAULT_POOL_LABELS) -> list[VersionRow]:
    keys = tuple(pool_labels)
    raw = [(n, pool_of(n.labels, keys), _values(n, snapshot.pods_on(n.name))) for n in snapshot.nodes]
    majority: dict[tuple[str, str], str] = {}
    for column in COLUMNS:
        if column == "engines":
            continue  # engines differ by service on purpose: shown, never called drift
        by_pool: dict[str, Counter[str]] = {}
        for _node, pool, values in raw:
            if values.get(column):
                by_pool.setdefault(pool, Counter())[values[column]] += 1
        for pool, counts in by_pool.items():
            top = counts.most_common(2)
            if len(top) == 1 or top[0][1] > top[1][1]:  # a tie has no majority: nothing is flagged
                majority[(pool, column)] = top[0][0]
    return [VersionRow(n.name, pool, values, frozenset(
        c for c in COLUMNS if values.get(c) and majority.get((pool, c), values[c]) != values[c]),
        n.upgrade_state, stuck_because(snapshot, n))
        for n, pool, values in raw]



def needs_a_look(row: VersionRow) -> bool:
    """Drifted from its pool, or in a driver upgrade that is stuck or failed."""
    return bool(row.drift or row.stuck)


def problems_first(rows: list[VersionRow]) -> list[VersionRow]:
    """Drifted and stuck nodes first (stuck before drifted), then any node mid-upgrade, then the rest; by pool
    and name within each."""
    def rank(r: VersionRow) -> tuple[int, str, str]:
        return (0 if r.stuck else 1 if r.drift else 2 if r.upgrade else 3), r.pool, r.node
    return sorted(rows, key=rank)


def varying(rows: list[VersionRow]) -> tuple[tuple[str, ...], dict[str, str], tuple[str, ...]]:
    """(the columns whose value differs between nodes, each column the same on every node read with that
    value, the columns read on no node). What is the same everywhere is said once, not in a column of 27
    equal cells that pushed what differs (and why an upgrade is stuck) off the screen."""
    shown, same, unread = [], {}, []
    for column in COLUMNS:
        values = {r.values.get(column) or "" for r in rows}
        if values == {""}:
            unread.append(column)
        elif column == "driver" or len(values) > 1:  # the driver is what drift and upgrades are about: shown
            shown.append(column)
        else:
            same[column] = values.pop()
    return tuple(shown), same, tuple(unread)

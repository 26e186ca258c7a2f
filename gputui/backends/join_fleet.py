"""The nodes and the pods of a snapshot, joined from the watch caches' records and the metrics, each join
remembering its last result so that a refresh touches only what moved.

At 65,000 nodes a few hundred records change between two refreshes (node heartbeats, pod status), and a
walk over the whole fleet in Python cost more than all of them (issue 18). A cache hands its records over
as a tuple in its dict's order: a record changed in place keeps its position, a new one is appended, a
deleted one shifts those after it. So the positions where the last tuple and this one hold different
objects (gputui.base.moved) are what a join must look at again. When too much moved for that to pay (a per-GPU
read of every node), the full join runs, which still reuses every object whose inputs are unchanged. Session
counts are no input of a pod (gputui.vocabulary.sessions), nor a node's summary of a node (gputui.vocabulary.gauges): a scrape or
a DCGM read of a summarised fleet moves neither.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gputui.backends.kube_dra import DraView, device_taint_conditions
from gputui.backends.kube_objects import NodeRecord, PodRecord
from gputui.base.moved import aligned, limit_for, same
from gputui.snapshot import PodIndexes, node_allocated, pod_indexes
from gputui.vocabulary.gpu_metrics import NO_VALUES, Figures, extra_of
from gputui.vocabulary.gpu_resources import physical_gpus
from gputui.vocabulary.model import Gpu, Health, InferencePod, Node
from gputui.vocabulary.sessions import signal_of

if TYPE_CHECKING:
    from gputui.backends.join import Metrics


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU as Prometheus read it: its figures by their names in gputui.vocabulary.gpu_metrics (known ones only), and
    what says whether it is sound (XID, DCGM health)."""

    host: str
    index: int
    uuid: str = ""
    values: Figures = NO_VALUES
    xid: int = 0
    health: int | None = None  # DCGM health: 0 pass, 10 warn, 20 fail


def _health(code: int | None) -> Health:
    if code is None:
        return Health.UNKNOWN
    return Health.PASS if code == 0 else Health.WARN if code < 20 else Health.FAIL


def gpus_of(node: NodeRecord, samples: Iterable[GpuSample]) -> tuple[Gpu, ...]:
    out = []
    for s in samples:
        v = s.values
        util = v.get("util_pct")
        # The node label is the card's size; the series' used + free misses the driver's reserve.
        total = float(node.gpu_memory_mib) if node.gpu_memory_mib else v.get("mem_total_mib")
        out.append(Gpu(
            index=s.index, uuid=s.uuid, util_pct=util, mem_used_mib=v.get("mem_used_mib"), mem_total_mib=total,
            temp_c=v.get("temp_c"), power_w=v.get("power_w"), xid=s.xid,
            health=_health(s.health) if s.health is not None else (Health.PASS if util is not None else Health.UNKNOWN),
            extra=extra_of(v) if v else NO_VALUES,
        ))
    return tuple(out)


def inference_pod(p: PodRecord, service: str, version: str) -> InferencePod:
    signal, opt_out = signal_of(p.labels, service)
    return InferencePod(
        namespace=p.namespace, name=p.name, uid=p.uid, node=p.node, phase=p.phase, ready=p.ready,
        gpu_request=p.gpu_request, gpu_units=p.gpu_units, images=p.images, service=service, version=version, restarts=p.restarts,
        deleting=p.deleting, owner_kind=p.owner_kind, labels=p.labels, has_emptydir=p.has_emptydir,
        mirror=p.mirror, session_signal=signal, session_opt_out=opt_out, pending_reason=p.pending_reason,
        termination_grace_s=p.grace_seconds, prestop_sleep_s=p.prestop_sleep_s, probes=p.probes,
        gpus_unrequested=p.gpus_unrequested, scheduling=p.scheduling,
    )


class NodeJoin:
    """GPU nodes (those GPU Feature Discovery or DRA names), in name order, and the set of their names."""

    def __init__(self) -> None:
        # Keyed by id(record); the record is kept too, so an id is never reused while it is cached. Plain dicts
        # of existing objects: a refresh then allocates little for the garbage collector to scan.
        self._records: dict[int, NodeRecord] = {}
        self._samples: dict[int, tuple[GpuSample, ...]] = {}  # only nodes with per-GPU samples
        self._nodes: dict[int, Node] = {}
        self._by_host: dict[str, list[GpuSample]] = {}  # of the metrics last joined
        self._by_name: dict[str, Node] = {}
        self._names: list[str] = []  # sorted
        self._stale = 0  # id entries of records replaced since the last full join (freed by the next)
        self._inputs: tuple = ()
        self.result: tuple[tuple[Node, ...], frozenset[str]] = ((), frozenset())

    def join(self, records: tuple[NodeRecord, ...], metrics: Metrics | None,
             dra: DraView) -> tuple[tuple[Node, ...], frozenset[str]]:
        # A node's summary is no input: it lives beside the node (gputui.vocabulary.gauges), so a DCGM read in a summarised
        # fleet moves no node, only the GPUs with a problem (mostly none) and per-GPU reads of a small fleet.
        inputs = (records, (metrics.gpus or None) if metrics else None, dra)  # no samples: one input, however read
        if same(inputs, self._inputs):
            return self.result
        if not (self._inputs and same(inputs[1:], self._inputs[1:]) and self._stale <= len(records) // 2
                and self._moved(records, dra)):
            self._full(records, metrics, dra)
        self._inputs = inputs
        return self.result

    def _node(self, n: NodeRecord, dra: DraView) -> Node:
        group = self._by_host.get(n.name)  # in fleet mode only GPUs with a problem: mostly none
        samples = tuple(sorted(group, key=lambda s: s.index)) if group else ()
        key = id(n)
        old = self._nodes.get(key)
        if old is not None and self._records.get(key) is n and self._inputs and self._inputs[2] is dra:
            # The same record and devices: only its GPUs' samples can have moved.
            if self._samples.get(key, ()) == samples:
                return old
            resources, capacity, allocatable = old.gpu_resources, old.gpu_capacity, old.gpu_allocatable
            conditions, count = old.conditions, old.gpu_count
        else:
            claimed = dra.resources(n.name)
            resources = n.gpu_resources + claimed if claimed else n.gpu_resources  # the same tuple when no DRA
            if old is not None and self._records.get(key) is n and self._samples.get(key, ()) == samples \
                    and old.gpu_resources == resources:
                return old
            capacity = sum(r.capacity for r in resources)
            allocatable = sum(r.allocatable for r in resources)
            conditions = n.conditions + device_taint_conditions(dra.taints.get(n.name, ()))
            count = physical_gpus(n.labels, n.gpu_resources, sum(r.capacity for r in claimed))
        node = Node(
            name=n.name, ready=n.ready, unschedulable=n.unschedulable, gpu_product=n.gpu_product,
            gpu_capacity=capacity, gpu_allocatable=allocatable,
            driver_version=n.driver_version, cuda_version=n.cuda_version, upgrade_state=n.upgrade_state,
            gpu_memory_mib=n.gpu_memory_mib, conditions=conditions,
            gpus=gpus_of(n, samples), labels=n.labels, annotations=n.annotations,
            gpu_resources=resources, node_info=n.node_info, gpu_count=count, scheduling=n.scheduling,
        )
        self._records[key], self._nodes[key] = n, node
        if samples:
            self._samples[key] = samples
        else:
            self._samples.pop(key, None)
        return node

    def _full(self, records: tuple[NodeRecord, ...], metrics: Metrics | None, dra: DraView) -> None:
        by_host: dict[str, list[GpuSample]] = {}
        for sample in (metrics.gpus.values() if metrics is not None else ()):
            by_host.setdefault(sample.host, []).append(sample)
        self._by_host = by_host
        gpu_nodes = sorted((n for n in records if n.is_gpu_node or n.name in dra.capacity), key=lambda n: n.name)
        old = (self._records, self._samples, self._nodes)
        records_, samples_, nodes_ = {}, {}, {}  # what the last join built for these records
        for n in gpu_nodes:
            key = id(n)
            if key in old[2]:
                records_[key], nodes_[key] = old[0][key], old[2][key]
                if key in old[1]:
                    samples_[key] = old[1][key]
        self._records, self._samples, self._nodes = records_, samples_, nodes_
        nodes = tuple(self._node(n, dra) for n in gpu_nodes)
        self._by_name = {node.name: node for node in nodes}
        self._names = [node.name for node in nodes]
        self._stale = 0
        names = frozenset(self._names)
        # The same nodes (a read that moved no GPU's samples): the same tuple, so what is kept from one snapshot
        # to the next sees nothing moved. The same GPU nodes: the same set, so the pods need not all be looked
        # at again.
        self.result = (self.result[0] if same(nodes, self.result[0]) else nodes,
                       self.result[1] if names == self.result[1] else names)

    def _moved(self, records: tuple[NodeRecord, ...], dra: DraView) -> bool:
        """Only some records moved (the metrics and DRA are those of the last join): rejoin those."""
        old = self._inputs[0]
        found = aligned(old, records, _name, limit_for(len(records)))
        if found is None:
            return False
        changed, deleted = found
        gone = {old[i].name for i in deleted} | {old[i].name for i, _j in changed if i is not None}
        came = [records[j] for _i, j in changed]
        touched = gone | {n.name for n in came}
        by_name = self._by_name
        before = {name for name in touched if name in by_name}
        for name in gone:
            by_name.pop(name, None)
        for n in came:
            if n.is_gpu_node or n.name in dra.capacity:
                by_name[n.name] = self._node(n, dra)
        self._stale += len(gone)
        names = self.result[1]
        if {name for name in touched if name in by_name} != before:  # a GPU node came or went
            self._names = sorted(by_name)
            names = frozenset(self._names)
        self.result = (tuple(map(by_name.__getitem__, self._names)), names)
        return True


def _name(record: NodeRecord) -> str:
    return record.name


def _pod_key(record: PodRecord) -> tuple[str, str]:
    return record.namespace, record.name


class PodJoin:
    """The pods on GPU nodes and the GPU pods waiting for one, in the cache's order, with their indexes per
    node. `identify` gives a record's service and version (the services' selectors)."""

    def __init__(self, identify: Callable[[PodRecord], tuple[str, str]]) -> None:
        self.identify = identify
        self.reset()

    def reset(self) -> None:
        """Forget every pod (their services changed: each is identified again)."""
        self._records: dict[int, PodRecord] = {}  # keyed by id(record), as NodeJoin's
        self._pods: dict[int, InferencePod] = {}
        self._slots: list[InferencePod | None] = []  # one per record of the last join; None: not shown
        self._on_node: dict[str, list[int]] = {}  # node -> the slots of its pods, in order
        self._stale = 0
        self._inputs: tuple = ()
        self.result: tuple[InferencePod, ...] = ()
        self.indexes: PodIndexes = ({}, {})

    def cached(self, record: PodRecord) -> InferencePod | None:
        """The pod the last join made of this very record (None when it has not seen it)."""
        return self._pods.get(id(record)) if self._records.get(id(record)) is record else None

    def join(self, records: tuple[PodRecord, ...], node_names: frozenset[str],
             dra: DraView) -> tuple[tuple[InferencePod, ...], PodIndexes]:
        inputs = (records, node_names, dra)
        if same(inputs, self._inputs):
            return self.result, self.indexes
        last = self._inputs
        if not (last and last[1] is node_names and last[2] is dra and self._stale <= len(records) // 2
                and self._moved(records, node_names, dra)):
            self._full(records, node_names, dra)
        self._inputs = inputs
        return self.result, self.indexes

    def _pod(self, record: PodRecord, node_names: frozenset[str], dra: DraView) -> InferencePod | None:
        claimed = dra.pod_units.get(record.uid)
        if record.node not in node_names and not (not record.node and (record.gpu_request > 0 or claimed)):
            return None  # only what runs on GPU nodes, and GPU pods still waiting for one
        pod = self.cached(record)
        if pod is not None and (pod.gpu_units is not record.gpu_units if not claimed else
                                len(pod.gpu_units) != len(record.gpu_units) + len(claimed)
                                or any(pod.gpu_units.get(k) != v for k, v in claimed.items())):
            pod = None  # its DRA devices moved (claimed, released, or other devices)
        if pod is None:
            p = with_claims(record, dra)
            pod = inference_pod(p, *self.identify(p))
        self._records[id(record)], self._pods[id(record)] = record, pod
        return pod

    def _full(self, records: tuple[PodRecord, ...], node_names: frozenset[str], dra: DraView) -> None:
        old_records, old_pods = self._records, self._pods
        self._records, self._pods = {}, {}
        for key in map(id, records):  # reuse what the last join built for the same record (a live object
            if old_records.get(key) is not None:  # held there has this id: it is this record)
                self._records[key], self._pods[key] = old_records[key], old_pods[key]
        self._slots = [self._pod(r, node_names, dra) for r in records]
        self._index_slots()
        self._stale = 0
        self.result = tuple(filter(None, self._slots))
        self.indexes = pod_indexes(self.result)

    def _moved(self, records: tuple[PodRecord, ...], node_names: frozenset[str], dra: DraView) -> bool:
        """Only some records moved: rejoin those, and the lists and GPU allocation of their nodes."""
        found = aligned(self._inputs[0], records, _pod_key, limit_for(len(records)))
        if found is None:
            return False
        changed, deleted = found
        old_slots = self._slots
        nodes: set[str] = set()  # whose pods moved
        if deleted:  # the records after each shifted: the slots follow, and the per-node slots are redone
            drop = set(deleted)
            nodes.update(p.node for i in drop if (p := old_slots[i]) is not None and p.node)
            slots = [slot for i, slot in enumerate(old_slots) if i not in drop]
            self._stale += len(deleted)
        else:
            slots = old_slots
        slots.extend([None] * (len(records) - len(slots)))
        for i, j in changed:
            before = old_slots[i] if i is not None else None
            after = self._pod(records[j], node_names, dra)
            if i is not None:
                self._stale += 1
            for p in (before, after):
                if p is not None and p.node:
                    nodes.add(p.node)
            if not deleted:
                if before is not None and before.node:
                    self._on_node[before.node].remove(j)
                if after is not None and after.node:
                    insort(self._on_node.setdefault(after.node, []), j)
            slots[j] = after
        self._slots = slots
        if deleted:
            self._index_slots()
        self.result = tuple(filter(None, slots))
        if nodes:  # else the indexes stay the same objects: what reads them (fleet_sums) sees so at once
            self.indexes = self._reindexed(nodes, slots)
        return True

    def _reindexed(self, nodes: set[str], slots: list[InferencePod | None]) -> PodIndexes:
        """The last indexes with these nodes' pod lists and GPU allocation worked out again."""
        by_node, allocated = dict(self.indexes[1]), dict(self.indexes[0])
        for node in nodes:
            on = self._on_node.get(node)
            # Each slot _on_node names holds a pod; C loops all the same (a generator per node cost more).
            pods = tuple(filter(None, map(slots.__getitem__, on or ())))
            if not on:
                self._on_node.pop(node, None)
            if pods:
                by_node[node] = pods
            else:
                by_node.pop(node, None)
            units = node_allocated(pods)
            if units:
                allocated[node] = units
            else:
                allocated.pop(node, None)
        return allocated, by_node

    def _index_slots(self) -> None:
        """The slots of each node's pods, in order."""
        self._on_node = {}
        for i, pod in enumerate(self._slots):
            if pod is not None and pod.node:
                self._on_node.setdefault(pod.node, []).append(i)


def with_claims(record: PodRecord, dra: DraView) -> PodRecord:
    """The pod with its DRA devices among its GPUs: they are in no container's limits."""
    claimed = dra.pod_units.get(record.uid)
    if not claimed:
        return record
    return replace(record, gpu_units={**record.gpu_units, **claimed},
                   gpu_request=record.gpu_request + sum(claimed.values()))

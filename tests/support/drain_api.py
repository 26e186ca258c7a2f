"""A recording API and a stepped drain for the fast tests of one node's whole drain run (run.run_drain): node
n1's annotations and cordon, the pods standing, their session counts, reads that fail when told to, and the
drain stepped one event at a time on a manual clock. Shared by the run's rule tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gputui.backends.base import ConflictError, EvictionOutcome, EvictionResult
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.events import DrainControl, DrainEvent, EventKind
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.plan import plan_drain
from gputui.ops.drain.run import run_drain
from gputui.ops.drain.start import DrainStart
from gputui.ops.steps import Ended, step
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary.model import InferencePod, Node, PodSelector
from tests.demo_clock import ManualClock
from tests.support.audit_lines import written

T0 = 1_000.0


def pod(name: str, **kw) -> InferencePod:
    base = dict(namespace="ns", name=name, uid=f"uid-{name}", node="n1", owner_kind="ReplicaSet", gpu_request=1,
                session_signal=True,
                labels={"app": "llm"})
    base.update(kw)
    return InferencePod(**base)


class Api:
    """The cluster as one drain sees it: node n1's annotations (a resourceVersion per write), its cordon, the pods
    standing (each evicted one is gone at once), each sessions count, and reads that fail when told to."""

    identity = "t"

    def __init__(self, pods: tuple[InferencePod, ...] = (), counts: dict[str, int | None] | None = None,
                 cordoned: bool = False, metrics_ok: bool = True,
                 selectors: tuple[PodSelector, ...] | None = None) -> None:
        self.pods = {p.name: p for p in pods}
        self.selectors = selectors  # the Services and Deployments a pod's rotation is judged by
        self.counts = dict(counts or {})
        self.cordoned, self.metrics_ok = cordoned, metrics_ok
        self.annotations: dict[str, str] = {}
        self.version = 0
        self.writes: list[tuple] = []  # ("annotate", values) / ("unschedulable", bool) / ("evict", name)
        self.failures: list[BaseException] = []  # the next reads' answers, in turn, then the cluster again
        self.reads = 0
        self.on_read: Callable[[Api], None] | None = None
        self.blocked: set[str] = set()  # pods whose eviction a PDB refuses (429)

    # the reader
    def snapshot(self) -> ClusterSnapshot:
        self.reads += 1
        if self.on_read is not None:
            self.on_read(self)
        if self.failures:
            raise self.failures.pop(0)
        live = {("ns", n): c for n, c in self.counts.items() if c is not None and n in self.pods}
        return ClusterSnapshot(0.0, "t", nodes=(Node("n1", True, self.cordoned, "H100", 8, 8, annotations=dict(
            self.annotations)), Node("n2", True, False, "H100", 8, 8)), pods=tuple(self.pods.values()),
            session_counts=live, selectors=self.selectors, sources=(SourceStatus("metrics", 1.0 if self.metrics_ok else None,
                                                       None if self.metrics_ok else "timeout"),))

    # the writer
    def node_annotations(self, node: str) -> tuple[dict[str, str], str]:
        return dict(self.annotations), str(self.version)

    def annotate_node(self, node: str, values: dict[str, str | None], resource_version: str | None = None) -> None:
        if resource_version is not None and resource_version != str(self.version):
            raise ConflictError("changed")
        self.version += 1
        for k, v in values.items():
            if v is None:
                self.annotations.pop(k, None)
            else:
                self.annotations[k] = v
        self.writes.append(("annotate", dict(values)))

    def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        self.cordoned = unschedulable
        self.writes.append(("unschedulable", unschedulable))

    def pod_uid(self, namespace: str, name: str) -> str | None:
        p = self.pods.get(name)
        return p.uid if p is not None else None

    def evict_pod(self, namespace: str, name: str, grace: int | None = None, uid: str | None = None) -> EvictionResult:
        if name in self.blocked:
            self.writes.append(("evict", name))
            return EvictionResult(EvictionOutcome.BLOCKED, "Cannot evict pod")
        self.pods.pop(name, None)
        self.writes.append(("evict", name))
        return EvictionResult(EvictionOutcome.EVICTED, "evicted")


class Drain:
    def __init__(self, api: Api, log: Path | None = None, options: DrainOptions = DrainOptions(),
                 start: DrainStart = DrainStart(), control: DrainControl | None = None, poll_s: float = 2.0) -> None:
        self.api, self.log, self.clock = api, log, ManualClock(T0)
        self.slept: list[float] = []

        def sleep(s: float) -> None:
            self.slept.append(s)
            self.clock.advance(s)

        self.plan = plan_drain(api.snapshot(), "n1", options, preview=False)
        api.reads = 0
        self.ctx = OpContext(api, api, AuditLog(log, "t", "demo"), clock=self.clock, sleep=sleep, poll_s=poll_s)
        self.gen = run_drain(self.plan, self.ctx, control, start)
        self.events: list[DrainEvent] = []

    def run(self, max_steps: int = 500):
        for _ in range(max_steps):
            got = step(self.gen)
            if isinstance(got, Ended):
                return got.report
            self.events.append(got)
        raise AssertionError("the drain did not end")

    def kinds(self) -> list[str]:
        return [e.kind.value for e in self.events if e.kind is not EventKind.TICK]

    def entries(self) -> list[tuple[str, str, dict, str]]:
        assert self.log is not None
        return [(e["action"], e["target"], e["params"], e["result"]) for e in written(self.log)]

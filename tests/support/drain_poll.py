"""One look of a drain at its pods (run._poll) on hand-built snapshots and a recording writer: the pods, snapshots,
writer and stepped look the poll's rule tests share."""

from __future__ import annotations

from pathlib import Path

from gputui.backends.base import EvictionOutcome, EvictionResult
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.events import DrainControl
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.plan import plan_drain
from gputui.ops.drain.report import DrainReport
from gputui.ops.drain.rotation_run import RotationHold
from gputui.ops.drain.run import PodProgress, _Look, _poll
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary.model import InferencePod, Node
from tests.support.audit_lines import written


def pod(name: str, **kw) -> InferencePod:
    base = dict(namespace="ns", name=name, uid=f"uid-{name}", node="n1", owner_kind="ReplicaSet", gpu_request=1,
                labels={"app": "llm"})
    base.update(kw)
    return InferencePod(**base)


def snap(*pods: InferencePod, counts: dict[str, int] | None = None, budgets=(), metrics_ok: bool = True) -> ClusterSnapshot:
    return ClusterSnapshot(0.0, "t", nodes=(Node("n1", True, True, "H100", 8, 8), Node("n2", True, False, "H100", 8, 8)),
                           pods=tuple(pods), budgets=tuple(budgets),
                           session_counts={("ns", n): c for n, c in (counts or {}).items()},
                           sources=(SourceStatus("metrics", 1.0 if metrics_ok else None,
                                                 None if metrics_ok else "timeout"),))


EVICTED = EvictionResult(EvictionOutcome.EVICTED, "evicted")


class Hand:
    """The API as the drain sees it: which UID stands under each name, and how evictions and deletes answer."""

    identity = "t"

    def __init__(self, answer: EvictionResult | BaseException = EVICTED,
                 standing: dict[str, str | None] | None = None) -> None:
        self.answer, self.standing = answer, standing or {}
        self.evicted: list[tuple] = []
        self.deleted: list[tuple] = []

    def pod_uid(self, namespace: str, name: str) -> str | None:
        if namespace != "ns":  # no such pod in another namespace
            return None
        return self.standing.get(name, f"uid-{name}")

    def evict_pod(self, namespace: str, name: str, grace: int | None = None, uid: str | None = None) -> EvictionResult:
        self.evicted.append((namespace, name, grace, uid))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    def delete_pod(self, namespace: str, name: str, grace: int | None, uid: str | None = None) -> None:
        self.deleted.append((namespace, name, grace, uid))


class Run:
    """One drain's state between looks, as run_drain keeps it."""

    def __init__(self, s: ClusterSnapshot, hand: Hand, log: Path | None = None, options: DrainOptions = DrainOptions(),
                 deadline: float = 100.0) -> None:
        self.plan = plan_drain(s, "n1", options, preview=False)
        self.hand, self.log = hand, log
        self.audit = AuditLog(log, "t", "demo")
        self.control, self.report = DrainControl(), DrainReport("n1")
        self.rotation = RotationHold(hand, self.audit, "n1", lambda: 0.0)
        self.pods = {p.pod.key: PodProgress(p.pod.key, p.pod.uid, p.step, p.pod.gpu_request, deadline,
                                            sessions=p.sessions.live) for p in self.plan.to_evict}

    def look(self, s: ClusterSnapshot, now: float = 10.0) -> list[tuple]:
        ctx = OpContext(s, self.hand, self.audit)
        look = _Look(self.plan, ctx, self.control, self.report, self.rotation, self.pods)
        events = list(_poll(look, s, now))
        assert all(e.node == "n1" for e in events), events  # every event names the drained node
        self.events = events  # in full, for a test of the fields the triples leave out
        return [(e.kind, e.pod, e.message) for e in events]

    def entries(self) -> list[tuple[str, str, dict, str]]:
        assert self.log is not None
        return [(e["action"], e["target"], e["params"], e["result"]) for e in written(self.log)]

"""A pod replaced under its name between the drain's look and its eviction (a StatefulSet's), on the demo cluster:
the eviction (or the forced delete) carries the planned UID, the demo answers as the apiserver does (409), the new
pod is left alone and the planned one counts as replaced. The real apiserver's answer is proven in
tests/integration/test_eviction_replaced_real.py."""

from __future__ import annotations

import pytest

from gputui.backends.base import ConflictError, EvictionOutcome
from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.events import EventKind
from gputui.ops.drain.plan import DrainOptions, plan_drain
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.run import run_drain
from gputui.ops.steps import run_steps
from gputui.snapshot import ClusterSnapshot
from tests.demo_clock import ManualClock
from tests.support.audit_lines import written


class Replacing:
    """The demo as the drain's reader; the view it hands back first was read before `key` was replaced (another
    UID under the same name), as a watch cache one event behind would."""

    def __init__(self, cluster: DemoCluster, key: str) -> None:
        self.cluster, self.key, self.done = cluster, key, False

    def __getattr__(self, name: str):
        return getattr(self.cluster, name)

    def snapshot(self) -> ClusterSnapshot:
        snap = self.cluster.snapshot()
        if not self.done and any(p.key == self.key for p in snap.pods):
            self.cluster._pods[self.key].uid = "the-new-uid"  # the StatefulSet's new pod
            self.done = True
        return snap


def test_the_demo_refuses_a_uid_that_no_longer_stands_under_the_name():
    cluster = DemoCluster(seed=7, clock=ManualClock())
    pod = next(p for p in cluster.snapshot().pods if p.service and not p.deleting)
    assert cluster.evict_pod(pod.namespace, pod.name, uid="another").outcome is EvictionOutcome.REPLACED
    with pytest.raises(ConflictError, match="409"):
        cluster.delete_pod(pod.namespace, pod.name, uid="another")
    assert not next(p for p in cluster.snapshot().pods if p.key == pod.key).deleting  # untouched


@pytest.mark.parametrize("options", [DrainOptions(session_deadline_s=0, evict_unknown_at_deadline=True),
                                     DrainOptions(session_deadline_s=0, evict_unknown_at_deadline=True, force=True,
                                                  disable_eviction=True)], ids=["evict", "delete"])
def test_a_pod_replaced_before_its_eviction_is_not_evicted_and_counts_as_replaced(options, tmp_path):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    node = next(n.name for n in snap.nodes if n.ready and not n.unschedulable and any(
        p.service for p in snap.pods_on(n.name)))
    plan = plan_drain(snap, node, options)
    target = next(p.pod for p in plan.to_evict if p.pod.service)
    reader = Replacing(cluster, target.key)
    events: list = []
    audit = tmp_path / "audit.jsonl"
    report = run_steps(run_drain(plan,
                                 OpContext(reader, cluster, AuditLog(audit, "t", "demo"), clock=clock,
                                           sleep=clock.advance, poll_s=2.0)), events.append)
    mine = [e for e in events if e.pod == target.key]
    assert [e.kind for e in mine if e.kind in (EventKind.EVICTED, EventKind.GONE, EventKind.REPLACED)] == \
        [EventKind.REPLACED], [(e.kind, e.message) for e in mine]
    standing = next(p for p in cluster.snapshot().pods if p.key == target.key)
    assert standing.uid == "the-new-uid" and not standing.deleting  # the new pod: not evicted, not deleted
    assert report.outcome is Outcome.DRAINED and len(report.replaced) == 1 and target.key in report.replaced[0]
    results = [x for x in written(audit) if x["target"] == f"pod/{target.key}"]
    assert [x["result"].split(":")[0] for x in results] == ["refused"]
    assert results[0]["params"]["standing"] == "the-new-uid"

"""A forced delete (`--disable-eviction --force --confirm-delete`) the identity may not make (403) fails that
pod and the drain ends saying so; it no longer pauses and retries for ever (found by the docs/rbac.yaml test:
a role without `delete pods` ran past a minute with no word). A 503 still pauses: the apiserver is in trouble,
not the identity."""

from __future__ import annotations

from gputui.backends.demo import DemoCluster
from gputui.backends.kube_errors import ApiError
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.events import DrainControl, EventKind
from gputui.ops.drain.plan import DrainOptions, plan_drain
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.run import run_drain
from gputui.ops.steps import Ended, step
from tests.demo_clock import ManualClock


class _Refusing:
    def __init__(self, cluster: DemoCluster, status: int) -> None:
        self.cluster, self.status, self.tries = cluster, status, 0

    def delete_pod(self, namespace, name, grace_seconds=None, uid=None):
        self.tries += 1
        raise ApiError(self.status, f'pods "{name}" is forbidden: User "ops" cannot delete resource "pods"')

    def __getattr__(self, name):
        return getattr(self.cluster, name)


def _run(status: int, max_events: int = 400):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    node = "gpu-l40s-01"
    options = DrainOptions(disable_eviction=True, force=True, session_deadline_s=1)
    plan = plan_drain(snap, node, options)
    writer = _Refusing(cluster, status)
    run = run_drain(plan,
                    OpContext(cluster, writer, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=1.0),
                    DrainControl())
    events = []
    for _ in range(max_events):
        event = step(run)
        if isinstance(event, Ended):
            return event.report, events, writer
        events.append(event)
    return None, events, writer


def test_a_forbidden_delete_fails_the_pod_and_the_drain_ends_saying_so():
    report, events, _writer = _run(403)
    assert report is not None, [e.message for e in events[-5:]]  # it ended: no endless pause
    assert report.outcome is not Outcome.DRAINED and report.failed
    assert any("delete refused (403)" in f for f in report.failed), report.failed
    assert not any(e.kind is EventKind.PAUSED for e in events)


def test_an_apiserver_in_trouble_still_pauses_the_forced_delete():
    report, events, writer = _run(503, max_events=60)
    assert report is None and any(e.kind is EventKind.PAUSED for e in events)
    assert writer.tries >= 2  # tried again after the pause

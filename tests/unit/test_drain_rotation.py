"""A drain takes each waited-on pod out of rotation before it waits (the label its Service selects on and its
Deployment does not), records it on the node first, and puts it back when the pod is left in place or the
drain is aborted. The demo cluster is the writer; the selectors are given (the demo reads none)."""

from __future__ import annotations

import json

from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.events import DrainControl
from gputui.ops.drain.out_of_rotation import RECORD, recorded
from gputui.ops.drain.plan import DrainOptions, Step, plan_drain
from gputui.ops.drain.run import run_drain
from gputui.ops.drain.start import DrainStart
from gputui.ops.steps import Ended, step
from tests.demo_clock import ManualClock
from tests.support.demo_selectors import VERSION, busy_node, served


def start(options=DrainOptions()):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = served(cluster.snapshot())
    node = busy_node(snap).name
    plan = plan_drain(snap, node, options)
    return clock, cluster, node, plan


def steps(gen, until, max_steps=5000):
    events = []
    for _ in range(max_steps):
        event = step(gen)
        if isinstance(event, Ended):
            return event.report, events
        events.append(event)
        if until(events[-1]):
            return None, events
    raise AssertionError("never happened")


def test_the_pods_waited_on_leave_rotation_first_then_come_back_on_abort():
    clock, cluster, node, plan = start()
    out = [p for p in plan.to_evict if p.rotation is not None]
    assert out and all(p.step is Step.WAIT_SESSIONS for p in out)
    control = DrainControl()
    gen = run_drain(plan,
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0),
                    control)
    _, events = steps(gen, lambda e: e.kind == "waiting")
    first = out[0].pod
    pod = cluster._pods[first.key]
    assert VERSION not in pod.labels  # out of rotation: its Service no longer selects it
    record = recorded(cluster.snapshot().node(node))
    assert record[first.key].labels == {VERSION: first.version} and record[first.key].uid == first.uid
    assert any(e.kind == "out-of-rotation" and "out of rotation" in e.message for e in events)
    control.abort(uncordon=True)
    report, events = steps(gen, lambda e: False)
    assert report is not None and report.outcome.value == "aborted"
    assert pod.labels[VERSION] == first.version  # back in rotation
    assert RECORD not in cluster.snapshot().node(node).annotations
    assert any("back in rotation (the drain was aborted)" in e.message for e in events)


def test_a_pod_left_in_place_goes_back_into_rotation_and_the_record_is_cleared():
    clock, cluster, node, plan = start(DrainOptions(session_deadline_s=60, evict_unknown_at_deadline=False))
    gen = run_drain(plan,
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0),
                    DrainControl())
    report, _events = steps(gen, lambda e: False)
    assert report is not None
    for p in plan.to_evict:
        if p.rotation is not None and p.pod.key in cluster._pods and not cluster._pods[p.pod.key].deleting_at:
            assert cluster._pods[p.pod.key].labels.get(VERSION) == p.pod.version, p.pod.key
    assert RECORD not in cluster.snapshot().node(node).annotations


def test_a_killed_drain_leaves_its_record_and_a_resumed_one_owns_it():
    clock, cluster, node, plan = start()
    gen = run_drain(plan,
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0),
                    DrainControl())
    steps(gen, lambda e: e.kind == "waiting")
    gen.close()  # gputui killed: nothing more is written
    held = recorded(cluster.snapshot().node(node))
    assert held and all(VERSION not in cluster._pods[k].labels for k in held)
    # The resumed drain plans again: the pods already out are no longer selected, and still owned.
    again = plan_drain(served(cluster.snapshot()), node)
    control = DrainControl()
    gen = run_drain(again,
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0),
                    control, DrainStart(take_over=True))
    steps(gen, lambda e: e.kind == "waiting")
    control.abort(uncordon=True)
    steps(gen, lambda e: False)
    for key, entry in held.items():
        assert cluster._pods[key].labels[VERSION] == entry.labels[VERSION], key
    assert json.dumps(cluster.snapshot().node(node).annotations).find(RECORD) == -1


def test_an_uncordon_puts_back_what_a_killed_drain_left_out_of_rotation():
    from gputui.ops.cordon import plan_cordon, run_cordon

    clock, cluster, node, plan = start()
    gen = run_drain(plan,
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0),
                    DrainControl())
    steps(gen, lambda e: e.kind == "waiting")
    gen.close()
    held = recorded(cluster.snapshot().node(node))
    uncordon = plan_cordon(cluster.snapshot(), node, cordon=False)
    assert {e.key for e in uncordon.back_in_rotation} == set(held)
    assert f"{len(held)} pods a drain took out of rotation go back in first" in uncordon.describe()
    line = run_cordon(uncordon, OpContext(cluster, cluster, AuditLog(None, "t", "demo")))
    assert line.endswith(f"{len(held)} pods back in rotation")
    assert all(cluster._pods[k].labels[VERSION] == e.labels[VERSION] for k, e in held.items())
    assert RECORD not in cluster.snapshot().node(node).annotations


def test_check_finds_pods_a_stopped_drain_left_out_of_rotation_and_not_those_a_running_one_holds():
    from gputui.checks.context import CheckContext
    from gputui.checks.result import Status
    from gputui.checks.rotation import left_out

    clock, cluster, node, plan = start()
    gen = run_drain(plan,
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0),
                    DrainControl())
    steps(gen, lambda e: e.kind == "waiting")
    held = recorded(cluster.snapshot().node(node))
    assert left_out(CheckContext(cluster.snapshot())).status is Status.PASS  # its drain renews its lease
    gen.close()  # killed: nothing renews the lease any more
    clock.advance(120)
    found = left_out(CheckContext(cluster.snapshot()))
    assert found.status is Status.FAIL and all(k in found.summary for k in held) and node in found.fix


def test_a_pod_the_identity_may_not_relabel_stays_in_rotation_and_the_drain_goes_on():
    """A 403 on the label patch (no patch on pods) is no reason to pause the drain: the pod is waited on in
    rotation, as before."""
    from gputui.backends.demo.errors import DemoApiError

    clock, cluster, node, plan = start()
    real = cluster.patch_object

    def forbidden(group, version, plural, namespace, name, patch, patch_type="merge", subresource=""):
        if plural == "pods" and patch_type == "json":
            raise DemoApiError(403, 'pods "x" is forbidden: User "t" cannot patch resource "pods"')
        return real(group, version, plural, namespace, name, patch, patch_type, subresource)

    cluster.patch_object = forbidden
    gen = run_drain(plan,
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0),
                    DrainControl())
    _, events = steps(gen, lambda e: e.kind == "waiting")
    assert any(e.kind == "info" and e.message.startswith("stays in rotation: 403") for e in events)
    assert not any(e.kind == "paused" for e in events)
    assert RECORD not in cluster.snapshot().node(node).annotations or not recorded(cluster.snapshot().node(node))


def test_check_finds_a_pod_out_of_rotation_by_its_labels_and_not_one_put_back_by_hand():
    """No record needed: a pod its workload selects that no Service selects, as they do its siblings, is out of
    rotation (a label removed by hand, or by a drain whose record was lost). A pod a stopped drain's record
    names, whose label was put back by hand since, is in rotation again and not reported."""
    from gputui.checks.context import CheckContext
    from gputui.checks.result import Status
    from gputui.checks.rotation import left_out

    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()  # the demo reads its Services' and Deployments' selectors
    assert left_out(CheckContext(snap)).status is Status.PASS
    pod = next(p for p in snap.pods if p.labels.get("serving") == "true")
    cluster.patch_object("", "v1", "pods", pod.namespace, pod.name,
                         [{"op": "remove", "path": "/metadata/labels/serving"}], "json")
    found = left_out(CheckContext(cluster.snapshot()))
    assert found.status is Status.FAIL and pod.key in found.summary and "no drain record names it" in found.summary
    cluster.patch_object("", "v1", "pods", pod.namespace, pod.name,
                         [{"op": "add", "path": "/metadata/labels/serving", "value": "true"}], "json")
    assert left_out(CheckContext(cluster.snapshot())).status is Status.PASS
    # A stopped drain's record, its pods' labels put back by hand: nothing out of rotation.
    clock, cluster, node, plan = start()
    gen = run_drain(plan,
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0),
                    DrainControl())
    steps(gen, lambda e: e.kind == "waiting")
    held = recorded(cluster.snapshot().node(node))
    gen.close()
    clock.advance(120)
    for key, entry in held.items():
        ns, name = key.split("/", 1)
        cluster.patch_object("", "v1", "pods", ns, name, [{"op": "add", "path": f"/metadata/labels/{k.replace('/', '~1')}",
                                                           "value": v} for k, v in entry.labels.items()], "json")
    assert left_out(CheckContext(cluster.snapshot())).status is Status.PASS

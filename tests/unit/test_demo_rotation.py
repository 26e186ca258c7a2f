"""The demo's router sends new sessions as a real data plane does: only to pods its Service selects by label
that are Ready and not terminating, never because of gputui's own annotations. So the demo shows rotation
as a real cluster would: a drain takes pods out by their serving label and its wait ends; the one service
without a serving label (codellama) keeps getting new sessions on a drained node, and the plan says so.

Every figure here comes from the seeded simulation moved by a manual clock: sessions are the router's,
never set by hand."""

from __future__ import annotations

from itertools import pairwise

from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.cordon import plan_cordon, run_cordon
from gputui.ops.drain.events import DrainControl, EventKind
from gputui.ops.drain.out_of_rotation import RECORD, recorded
from gputui.ops.drain.plan import DrainOptions, Step, plan_drain
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.run import run_drain
from gputui.ops.steps import run_steps
from gputui.policy.rotation import RotationState, rotation_of
from gputui.vocabulary.model import DRAIN_PHASE_ANNOTATION
from tests.demo_clock import ManualClock

SERVING = "serving"
LLAMA, CODELLAMA = "llama-3-70b-instruct", "codellama-34b"


def cluster() -> tuple[ManualClock, DemoCluster]:
    clock = ManualClock()
    return clock, DemoCluster(seed=7, clock=clock)


def counts_over(clock: ManualClock, demo: DemoCluster, keys: list[tuple[str, str]], seconds: int,
                every: int = 2) -> list[list[int]]:
    """Each pod's live sessions (running plus queued), read every `every` simulated seconds."""
    out = []
    for _ in range(seconds // every):
        clock.advance(every)
        counts = demo.snapshot().session_counts
        out.append([counts.get(k, 0) for k in keys])
    return out


def gained(series: list[list[int]], i: int) -> bool:
    """Pod i got a new session between two reads: its count rose (sessions only end otherwise)."""
    return any(b[i] > a[i] for a, b in pairwise(series))


def labels_of(demo: DemoCluster, key: str) -> dict[str, str]:
    """The pod's labels as the snapshot shows them."""
    return dict(next(p for p in demo.snapshot().pods if p.key == key).labels)


def unserve(demo: DemoCluster, namespace: str, name: str) -> None:
    """What a drain writes: a JSON patch removing the serving label, through the demo's apiserver path."""
    uid = demo.pod_uid(namespace, name)
    demo.patch_object("", "v1", "pods", namespace, name, [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": f"/metadata/labels/{SERVING}", "value": "true"},
        {"op": "remove", "path": f"/metadata/labels/{SERVING}"},
    ], "json")


def _drain(demo: DemoCluster, clock: ManualClock, node: str, control: DrainControl | None = None):
    plan = plan_drain(demo.snapshot(), node, DrainOptions())
    return plan, run_drain(plan,
                           OpContext(demo, demo, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                                     poll_s=2.0),
                           control or DrainControl())


def _until_waiting(gen) -> None:
    while next(gen).kind is not EventKind.WAITING:
        pass


def test_the_demo_reads_services_and_deployments_selectors_as_the_live_backend_does():
    _, demo = cluster()
    snap = demo.snapshot()
    assert snap.selectors is not None
    kinds = {(s.kind, s.name) for s in snap.selectors}
    assert {("Service", f"{LLAMA}-v1"), ("Service", f"{LLAMA}-v2"), ("Service", "mistral-7b"),
            ("Deployment", f"{LLAMA}-v1"), ("Deployment", f"{CODELLAMA}-v1")} <= kinds
    # No owner selects on the serving label: removing it never orphans a pod.
    assert not any(SERVING in s.keys for s in snap.selectors if s.kind == "Deployment")
    states: dict[str, set[tuple[RotationState, tuple[str, ...]]]] = {}
    for p in snap.pods:
        if p.service and not p.deleting:
            r = rotation_of(p, snap)
            states.setdefault(p.service, set()).add((r.state, r.labels))
    assert states.pop(CODELLAMA) == {(RotationState.NO_SWITCH, ())}
    assert len(states) >= 7
    assert all(s == {(RotationState.SWITCH, (SERVING,))} for s in states.values()), states


def test_a_pod_whose_serving_label_is_removed_gets_no_new_session_and_its_siblings_do():
    clock, demo = cluster()
    snap = demo.snapshot()
    v1 = [p for p in snap.pods if p.service == LLAMA and p.version == "v1" and p.ready]
    out, sibling = v1[0], v1[1]
    assert snap.sessions(out).live
    unserve(demo, out.namespace, out.name)
    series = counts_over(clock, demo, [(out.namespace, out.name), (sibling.namespace, sibling.name)], 300, every=5)
    assert not gained(series, 0)  # its sessions only end
    assert series[-1][0] == 0 and series[-20][0] == 0  # it empties, and stays empty: nothing new reaches it
    assert gained(series, 1)  # the same version's pods in rotation take the traffic
    assert demo.lost_sessions == 0


def test_a_pod_in_rotation_on_a_node_gputui_is_draining_still_gets_new_sessions():
    """Cordoned and carrying gputui's drain annotation: no real router reads either, so a pod still in its
    Service's endpoints keeps getting sessions (the old demo stopped sending to it)."""
    clock, demo = cluster()
    node = "gpu-h100-01"
    demo.set_unschedulable(node, True)
    demo.annotate_node(node, {DRAIN_PHASE_ANNOTATION: "waiting"})
    pods = [p for p in demo.snapshot().pods if p.node == node and p.service == LLAMA]
    assert pods and all(p.labels.get(SERVING) == "true" for p in pods)
    series = counts_over(clock, demo, [(p.namespace, p.name) for p in pods], 120)
    assert all(gained(series, i) for i in range(len(pods)))


def test_the_service_without_a_serving_label_keeps_getting_sessions_through_a_drain():
    clock, demo = cluster()
    node = "gpu-a100-02"
    plan, gen = _drain(demo, clock, node)
    waited = [p for p in plan.to_evict if p.pod.service == CODELLAMA]
    assert waited and all(p.step is Step.WAIT_SESSIONS and p.rotation is None for p in waited)
    assert all(p.rotation_note.startswith("new sessions keep arriving: no label can take it out")
               for p in waited)
    _until_waiting(gen)
    assert demo.snapshot().node(node).annotations.get(DRAIN_PHASE_ANNOTATION) == "waiting"
    keys = [(p.pod.namespace, p.pod.name) for p in waited]
    series = counts_over(clock, demo, keys, 120)
    assert all(gained(series, i) for i in range(len(keys)))
    gen.close()


def test_a_demo_drain_takes_pods_out_of_rotation_and_finishes_before_its_deadline_cutting_nothing():
    clock, demo = cluster()
    node = "gpu-h100-01"
    plan, gen = _drain(demo, clock, node)
    out = [p for p in plan.to_evict if p.rotation is not None]
    assert out and all(p.rotation.labels == {SERVING: "true"} for p in out)
    _until_waiting(gen)
    first = out[0].pod
    assert SERVING not in labels_of(demo, first.key)
    assert set(recorded(demo.snapshot().node(node))) >= {first.key}
    started = clock()
    report = run_steps(gen, lambda _event: None)
    assert report.outcome is Outcome.DRAINED and report.cut_sessions == 0 and report.unknown_cut_pods == 0
    assert demo.lost_sessions == 0
    assert clock() - started < DrainOptions().session_deadline_s  # the waits ended on their own
    # The replacements come back with the template's labels: in rotation without anyone putting them back.
    llama = [p for p in demo.snapshot().pods if p.service == LLAMA and not p.deleting]
    assert llama and all(p.labels.get(SERVING) == "true" for p in llama)
    assert RECORD not in demo.snapshot().node(node).annotations


def test_abort_and_uncordon_put_the_serving_label_back_and_sessions_return():
    clock, demo = cluster()
    node = "gpu-h100-01"
    control = DrainControl()
    _plan, gen = _drain(demo, clock, node, control)
    _until_waiting(gen)
    held = recorded(demo.snapshot().node(node))
    assert held and all(SERVING not in labels_of(demo, k) for k in held)
    control.abort(uncordon=True)
    for _ in gen:
        pass
    assert all(labels_of(demo, k).get(SERVING) == "true" for k in held)
    keys = [tuple(k.split("/", 1)) for k in held]
    assert all(gained(counts_over(clock, demo, keys, 60), i) for i in range(len(keys)))  # back in rotation

    # A drain killed while pods are out: the uncordon puts them back.
    _plan, gen = _drain(demo, clock, node)
    _until_waiting(gen)
    gen.close()
    held = recorded(demo.snapshot().node(node))
    assert held and all(SERVING not in labels_of(demo, k) for k in held)
    run_cordon(plan_cordon(demo.snapshot(), node, cordon=False), OpContext(demo, demo, AuditLog(None, "t", "demo")))
    assert all(labels_of(demo, k).get(SERVING) == "true" for k in held)


def test_the_demo_answers_arrival_rates_from_its_engines_finished_requests_so_the_plan_predicts_the_deadline():
    """The plan's prediction for a pod no label can take out (issue 33, item 3) reads the rate its engine
    finishes requests at: the demo answers from the sessions its router sent, as Prometheus would."""
    from gputui.backends.base import ArrivalsReader
    from gputui.backends.demo import demo_backend
    from gputui.ops.drain.arrivals import batch_with_arrivals
    from gputui.ops.drain.batch_plan import plan_batch

    clock, demo = cluster()
    clock.advance(600)  # ten minutes of traffic: several codellama sessions have finished on every pod
    snap = demo.snapshot()
    codellama = [p for p in snap.pods if p.service == CODELLAMA and p.ready]
    job = next(p for p in snap.pods if p.owner_kind == "Job" and p.node)
    rates = demo.arrivals([*codellama, job], window_s=600)
    assert set(rates) == {p.key for p in codellama}  # a pod exporting no engine counters is unknown, not zero
    assert all(r.rate_per_s > 0 and r.mean_s is not None and r.mean_s > 0 for r in rates.values())
    # Finished per second across the service: what its route sends it (0.6/s, give or take the load's wave).
    assert 0.3 < sum(r.rate_per_s for r in rates.values()) < 0.9
    assert isinstance(demo_backend(clock=clock, read_only=True).reader, ArrivalsReader)
    batch = batch_with_arrivals(plan_batch(snap, ["gpu-a100-02"], DrainOptions()), demo)
    notes = [p.rotation_note for plan in batch.plans for p in plan.pods if p.pod.service == CODELLAMA]
    assert notes and all("new sessions/s held" in n and "reaches its deadline (900s) with about" in n for n in notes)

"""The pods one drain holds out of rotation while it runs (rotation_run.RotationHold), fast, against a recording
writer: the node's record is written before a label is removed and rewritten after one is put back; a pod
changed, forbidden or invalid stays in rotation and the drain goes on, anything else pauses it; a pod kept in
for capacity is said once; a pod gone needs no put-back; the process's count of what it holds out follows
every write. The mutants named in each docstring are one-line bugs of gputui/ops/drain/rotation_run.py these
tests kill."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputui.backends.base import BackendError, ConflictError
from gputui.ops.audit import AuditLog
from gputui.ops.drain.events import EventKind
from gputui.ops.drain.out_of_rotation import KEPT_RUNNING, RECORD, OutOfRotation, record_text
from gputui.ops.drain.plan import Step
from gputui.ops.drain.rotation_run import RECHECK_S, RotationHold, _TakenOut
from gputui.ops.drain.run import PodProgress, PodState
from gputui.policy.rotation import rotation_of
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, Node, PodSelector
from tests.support.audit_lines import written

LABELS = {"app": "llama", "serving": "true"}
SVC = PodSelector("Service", "ns", "llama", {"app": "llama", "serving": "true"})
DEPLOY = PodSelector("Deployment", "ns", "llama", {"app": "llama"}, frozenset({"app"}))


class StatusError(BackendError):
    def __init__(self, status: int) -> None:
        super().__init__(f"status {status}")
        self.status = status


class Hand:
    """A writer that records every call in order; `fail` raises on the pod patch (a label removed or added)."""

    identity = "t"

    def __init__(self, record: str | None = None, uid: str | None = "uid-a", fail: BaseException | None = None):
        self.annotations = {RECORD: record} if record else {}
        self.uid, self.fail = uid, fail
        self.calls: list[tuple] = []

    def node_annotations(self, node: str) -> tuple[dict[str, str], str]:
        return (dict(self.annotations) if node == "n1" else {}), "1"  # the drained node's, no other

    def annotate_node(self, node: str, annotations) -> None:
        self.calls.append(("annotate", node, dict(annotations)))
        for k, v in annotations.items():
            if v is None:
                self.annotations.pop(k, None)
            else:
                self.annotations[k] = v

    def pod_uid(self, namespace: str, name: str) -> str | None:
        return self.uid if namespace == "ns" else None

    def patch_object(self, group, version, plural, namespace, name, patch, patch_type="merge", subresource=""):
        if self.fail is not None:
            raise self.fail
        self.calls.append(("patch", f"{namespace}/{name}", [op["op"] for op in patch]))
        return {}

    def record(self) -> dict:
        return json.loads(self.annotations.get(RECORD) or "{}")


def pod(name: str, **kw) -> InferencePod:
    base = dict(namespace="ns", name=name, uid=f"uid-{name}", node="n1", service="llama", version="v1",
                labels=LABELS, session_signal=True, gpu_request=1, owner_kind="ReplicaSet", ready=True)
    base.update(kw)
    return InferencePod(**base)


def snap(*pods: InferencePod) -> ClusterSnapshot:
    return ClusterSnapshot(0.0, "t", nodes=(Node("n1", ready=True, unschedulable=False, gpu_product="H100",
                                                 gpu_capacity=8, gpu_allocatable=8),),
                           pods=pods, selectors=(SVC, DEPLOY))


@dataclass
class _PodPlan:
    pod: InferencePod
    switch: object


@dataclass
class _Plan:
    to_evict: list


def plan_of(s: ClusterSnapshot, *names: str) -> _Plan:
    by = {p.name: p for p in s.pods}
    return _Plan([_PodPlan(by[n], rotation_of(by[n], s)) for n in names])


def progress(*keys: str, state: PodState = PodState.WAITING) -> dict[str, PodProgress]:
    return {k: PodProgress(k, "uid-" + k.split("/")[1], Step.WAIT_SESSIONS, 1, 100.0, state=state) for k in keys}


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def hold(hand: Hand, log: Path | None = None, clock: Clock | None = None) -> RotationHold:
    return RotationHold(hand, AuditLog(log, "t", "demo"), "n1", clock or Clock())


@pytest.fixture(autouse=True)
def _own_taken_out(monkeypatch):
    """Each test its own count of what the process holds out (the module's is shared by every drain)."""
    fresh = _TakenOut()
    monkeypatch.setattr("gputui.ops.drain.rotation_run.TAKEN_OUT", fresh)
    return fresh


def _taken(hand) -> frozenset[str]:
    from gputui.ops.drain import rotation_run

    return rotation_run.TAKEN_OUT.keys(hand)


def test_the_process_counts_what_it_holds_out_per_cluster():
    """Kills: `_keys.get(id(writer), set()).discard` on another writer's set, `setdefault(...)` → a fresh set,
    `keys` of another writer."""
    t, w1, w2 = _TakenOut(), object(), object()
    t.add(w1, "ns/a")
    t.add(w1, "ns/b")
    t.add(w2, "ns/c")
    t.discard(w1, "ns/a")
    t.discard(w2, "ns/a")
    assert t.keys(w1) == {"ns/b"} and t.keys(w2) == {"ns/c"} and t.keys(object()) == frozenset()


def test_a_pod_goes_out_record_first_then_its_label_audited_and_said(tmp_path):
    """Kills: the record written after the label is removed (or not at all), `held[key] = entry` dropped,
    `TAKEN_OUT.add` dropped, the audit's action, target, node or labels changed, the event's kind or note
    changed, `tried.add` dropped (the pod taken out again)."""
    hand, log, clock = Hand(), tmp_path / "a.jsonl", Clock()
    s = snap(pod("a"), pod("b", node="n2"))
    h = hold(hand, log, clock)
    events = list(h.take_out_due(plan_of(s, "a"), progress("ns/a"), lambda: s))
    assert [c[0] for c in hand.calls] == ["annotate", "patch"]
    assert hand.calls[1] == ("patch", "ns/a", ["test", "test", "remove"])
    assert hand.record() == {"ns/a": {"uid": "uid-a", "labels": {"serving": "true"}, "since": 1000.0}}
    assert [(e.node, e.kind, e.pod) for e in events] == [("n1", EventKind.OUT_OF_ROTATION, "ns/a")]
    assert events[0].message.startswith("out of rotation (label serving removed")
    assert [(e["action"], e["target"], e["params"], e["result"]) for e in written(log)] == [
        ("rotation-out", "pod/ns/a", {"node": "n1", "labels": {"serving": "true"}}, "ok")]
    assert _taken(hand) == {"ns/a"} and h.tried == {"ns/a"} and set(h.held) == {"ns/a"}
    clock.now += RECHECK_S
    assert list(h.take_out_due(plan_of(s, "a"), progress("ns/a"), lambda: s)) == []
    assert len(hand.calls) == 2


def test_it_looks_again_only_after_its_recheck_period():
    """Kills: `now < self._next_check` → `<=` / `>`, `_next_check = now + RECHECK_S` → `-` or `*`, a view read
    while nothing is due."""
    hand, clock = Hand(), Clock()
    s = snap(pod("a"))  # alone: kept in for capacity, looked at again every RECHECK_S
    views: list[float] = []

    def view() -> ClusterSnapshot:
        views.append(clock.now)
        return s

    h = hold(hand, clock=clock)
    plan = plan_of(s, "a")
    list(h.take_out_due(plan, progress("ns/a"), view))
    clock.now += RECHECK_S - 0.5
    list(h.take_out_due(plan, progress("ns/a"), view))
    clock.now += 0.5
    list(h.take_out_due(plan, progress("ns/a"), view))
    assert views == [1000.0, 1000.0 + RECHECK_S]
    list(h.take_out_due(plan_of(s), progress("ns/a"), view))  # nothing due: no read
    assert len(views) == 2


@pytest.mark.parametrize("state", [PodState.TERMINATING, PodState.BLOCKED, PodState.GONE])
def test_only_a_pod_still_waiting_or_pending_is_taken_out(state):
    """Kills: the states `("pending", "waiting")` changed, `not in self.tried` → `in`."""
    hand = Hand()
    s = snap(pod("a"), pod("b", node="n2"))
    assert list(hold(hand).take_out_due(plan_of(s, "a"), progress("ns/a", state=state), lambda: s)) == []
    assert hand.calls == []
    assert list(hold(hand).take_out_due(plan_of(s, "a"), progress("ns/a", state=PodState.PENDING), lambda: s))
    assert hand.calls


def test_a_pod_gone_or_replaced_in_the_fresh_view_is_left_for_the_poll():
    """Kills: `pod is None or pod.uid != p.pod.uid` → `and`/`==`, `continue` → `break` (the next pod never
    taken out); such a pod is not marked tried (it is looked at again)."""
    hand = Hand()
    s = snap(pod("a"), pod("c"), pod("b", node="n2"))
    fresh = snap(pod("a", uid="uid-new"), pod("c"), pod("b", node="n2"))
    h = hold(hand)
    events = list(h.take_out_due(plan_of(s, "a", "c"), progress("ns/a", "ns/c"), lambda: fresh))
    assert [e.pod for e in events] == ["ns/c"] and "ns/a" not in h.tried


def test_a_pod_someone_else_took_out_is_said_and_never_put_back_by_this_drain():
    """Kills: `any(k not in pod.labels ...)` → `all`/`in`, its `tried.add` dropped, the event's words."""
    hand = Hand()
    s = snap(pod("a"), pod("b", node="n2"))
    fresh = snap(pod("a", labels={"app": "llama"}), pod("b", node="n2"))
    h = hold(hand)
    events = list(h.take_out_due(plan_of(s, "a"), progress("ns/a"), lambda: fresh))
    assert [(e.kind, e.pod, e.message) for e in events] == [
        (EventKind.INFO, "ns/a", "already out of rotation (not by this drain)")]
    assert h.tried == {"ns/a"} and not h.held and hand.calls == []


def test_a_pod_kept_in_for_capacity_is_said_once_and_goes_out_when_another_serves():
    """Kills: the `if pod.key not in self.kept` guard dropped (said every look), the shortfall's words not cut
    from the note, `kept[...] = why` dropped, `kept.pop` dropped once it goes out."""
    hand, clock = Hand(), Clock()
    alone = snap(pod("a"))
    h = hold(hand, clock=clock)
    first = list(h.take_out_due(plan_of(alone, "a"), progress("ns/a"), lambda: alone))
    assert [(e.kind, e.message) for e in first] == [
        (EventKind.INFO, f"{KEPT_RUNNING}: Service ns/llama would have no pod serving")]
    assert "ns/a" in h.kept and hand.calls == []
    clock.now += RECHECK_S
    assert list(h.take_out_due(plan_of(alone, "a"), progress("ns/a"), lambda: alone)) == []
    clock.now += RECHECK_S
    served = snap(pod("a"), pod("b", node="n2"))
    out = list(h.take_out_due(plan_of(alone, "a"), progress("ns/a"), lambda: served))
    assert [e.kind for e in out] == [EventKind.OUT_OF_ROTATION] and "ns/a" not in h.kept


@pytest.mark.parametrize("refusal", [ConflictError("changed"), StatusError(403), StatusError(422)])
def test_a_refused_label_write_leaves_the_pod_in_and_the_drain_going(tmp_path, refusal):
    """Kills: the refusal's statuses `(403, 422)` changed or `not in` → `in`, `del self.held[...]` dropped (the
    record names a pod that is in), `tried.add` dropped (tried on every look), the record not rewritten, the
    event's words."""
    hand = Hand(fail=refusal)
    s = snap(pod("a"), pod("b", node="n2"))
    h = hold(hand, tmp_path / "a.jsonl")
    events = list(h.take_out_due(plan_of(s, "a"), progress("ns/a"), lambda: s))
    assert [(e.kind, e.pod, e.message) for e in events] == [(EventKind.INFO, "ns/a", f"stays in rotation: {refusal}")]
    assert h.tried == {"ns/a"} and not h.held and _taken(hand) == frozenset()
    assert [c for c in hand.calls if c[0] == "annotate"][-1] == ("annotate", "n1", {RECORD: None})
    assert hand.record() == {}


@pytest.mark.parametrize("failure", [StatusError(500), StatusError(401), BackendError("unreachable")])
def test_a_failed_label_write_pauses_the_drain_and_is_tried_again_at_once(failure):
    """Kills: the pause not raised, `_next_check = 0.0` dropped (the retry waits RECHECK_S), held or the
    process's count left naming the pod, `tried.add` before the raise."""
    hand, clock = Hand(fail=failure), Clock()
    s = snap(pod("a"), pod("b", node="n2"))
    h = hold(hand, clock=clock)
    with pytest.raises(BackendError):
        list(h.take_out_due(plan_of(s, "a"), progress("ns/a"), lambda: s))
    assert not h.held and _taken(hand) == frozenset() and "ns/a" not in h.tried
    hand.fail = None
    events = list(h.take_out_due(plan_of(s, "a"), progress("ns/a"), lambda: s))  # same clock: tried again
    assert [e.kind for e in events] == [EventKind.OUT_OF_ROTATION]


def test_an_interrupted_write_forgets_the_pod():
    """Anything but a BackendError (Ctrl-C, a bug) mid-write: not held, not counted. Kills the `except
    BaseException` branch's `held.pop` / `TAKEN_OUT.discard` dropped."""
    hand = Hand(fail=KeyboardInterrupt())
    s = snap(pod("a"), pod("b", node="n2"))
    h = hold(hand)
    with pytest.raises(KeyboardInterrupt):
        list(h.take_out_due(plan_of(s, "a"), progress("ns/a"), lambda: s))
    assert not h.held and _taken(hand) == frozenset()


A = OutOfRotation("ns/a", "uid-a", {"serving": "true"}, 100.0)
B = OutOfRotation("ns/b", "uid-b", {"serving": "true"}, 100.0)


def test_a_resumed_drain_adopts_its_predecessors_record_and_forgets_it_at_the_end():
    """Kills: `adopt` reading another annotation, `tried = set(held)` dropped (the pods taken out twice),
    `TAKEN_OUT.add` dropped in adopt or `discard` dropped in forget."""
    hand = Hand(record=record_text({A.key: A, B.key: B}))
    h = hold(hand)
    h.adopt()
    assert h.held == {A.key: A, B.key: B} and h.tried == {"ns/a", "ns/b"} and _taken(hand) == {"ns/a", "ns/b"}
    h.forget()
    assert _taken(hand) == frozenset()


def test_a_count_is_not_trusted_until_the_pod_has_been_out_for_the_settle_time_nor_while_kept_in():
    """Kills: `now < entry.since + settle_s` → `<=` or `-`, the words' figures, `entry is None and ...` → `or`,
    `key not in self.tried` → `in`."""
    hand = Hand(record=record_text({A.key: A}))
    h = hold(hand)
    h.adopt()
    assert h.not_yet("ns/a", 110.0, 30.0) == "out of rotation 10s ago: its count settles for 30s"
    assert h.not_yet("ns/a", 130.0, 30.0) == ""
    h.kept["ns/b"] = "why"
    assert h.not_yet("ns/b", 0.0, 30.0) == "kept in rotation for capacity: evicted once out of rotation, or at its deadline"
    h.tried.add("ns/b")
    assert h.not_yet("ns/b", 0.0, 30.0) == ""
    assert h.not_yet("ns/c", 0.0, 30.0) == ""


def test_put_back_adds_the_labels_rewrites_the_record_audits_and_says_why(tmp_path):
    """Kills: the put-back's audit action, target, labels or why changed, `del held[key]` dropped (the record
    keeps naming it), `TAKEN_OUT.discard` dropped, the event's kind or words."""
    hand, log = Hand(record=record_text({A.key: A, B.key: B}), uid="uid-a"), tmp_path / "a.jsonl"
    h = hold(hand, log)
    h.adopt()
    events = list(h.put_back_all("the drain ended", progress("ns/a", "ns/b"), keys=["ns/a", "ns/x"]))
    assert [(e.kind, e.pod, e.message) for e in events] == [
        (EventKind.IN_ROTATION, "ns/a", "back in rotation (the drain ended)")]
    assert hand.calls[0] == ("patch", "ns/a", ["test", "add"])
    assert set(hand.record()) == {"ns/b"} and set(h.held) == {"ns/b"} and _taken(hand) == {"ns/b"}
    assert [(e["action"], e["target"], e["params"], e["result"]) for e in written(log)] == [
        ("rotation-in", "pod/ns/a", {"node": "n1", "labels": {"serving": "true"}, "why": "the drain ended"}, "ok")]


def test_a_pod_replaced_since_is_not_put_back_and_the_audit_says_so(tmp_path):
    """Kills: `if not back` → `if back` (the result), the event said for a pod not put back."""
    hand, log = Hand(record=record_text({A.key: A}), uid="uid-other"), tmp_path / "a.jsonl"
    h = hold(hand, log)
    h.adopt()
    assert list(h.put_back_all("why", progress("ns/a"))) == []
    assert written(log)[0]["result"] == "ok: the pod is gone or replaced; nothing to put back"
    assert not h.held and hand.record() == {}


def test_only_the_pods_in_the_states_asked_are_put_back():
    """Kills: `states is not None and (...)` → `or`, `prog is None or ...` → `and`, `not in states` → `in`."""
    hand = Hand(record=record_text({A.key: A, B.key: B}))
    h = hold(hand)
    h.adopt()
    pods = {**progress("ns/a", state=PodState.HELD), **progress("ns/b", state=PodState.WAITING)}
    events = list(h.put_back_all("left in place", pods, only=("held", "failed")))
    assert [e.pod for e in events] == ["ns/a"] and set(h.held) == {"ns/b"}
    del pods["ns/b"]  # no progress known: not in the states asked
    assert list(h.put_back_all("left in place", pods, only=("held", "failed"))) == []
    assert set(h.held) == {"ns/b"}


def test_an_evicted_pod_needs_no_put_back_and_the_record_goes_once_it_names_nothing(tmp_path):
    """Gone or replaced: dropped from the record without a write to the pod (its replacement has the template's
    labels). Kills: `("gone", "replaced")` changed, `continue` → `break`, `dropped = True` dropped or
    `dropped and not held` → `or` (the record left naming evicted pods, or rewritten while others remain)."""
    hand, log = Hand(record=record_text({A.key: A, B.key: B})), tmp_path / "a.jsonl"
    h = hold(hand, log)
    h.adopt()
    pods = {**progress("ns/a", state=PodState.GONE), **progress("ns/b", state=PodState.REPLACED)}
    assert list(h.put_back_all("the drain ended", pods)) == []
    assert hand.calls == [("annotate", "n1", {RECORD: None})] and not h.held and _taken(hand) == frozenset()
    assert written(log) == []
    hand2 = Hand(record=record_text({A.key: A, B.key: B}))
    h2 = hold(hand2)
    h2.adopt()
    list(h2.put_back_all("why", {**progress("ns/a", state=PodState.GONE)}, only=("gone",)))
    assert hand2.calls == [] and set(h2.held) == {"ns/b"}  # b still out (no progress known): no rewrite


def test_the_first_look_is_at_once_whatever_the_clock_reads_and_a_paused_write_is_tried_again_at_once():
    """A clock that starts near 0 (a demo's, a test's): the first look reads the view at once, and after a
    failed write the very next look tries again. Kills: `__init__`'s `_next_check = 0.0` → `1.0` (no first
    look before a second of the clock), `_take_out`'s `_next_check = 0.0` → `1.0` (the retry waits)."""
    hand, clock = Hand(fail=StatusError(500)), Clock(0.0)
    s = snap(pod("a"), pod("b", node="n2"))
    h = hold(hand, clock=clock)
    with pytest.raises(BackendError):
        list(h.take_out_due(plan_of(s, "a"), progress("ns/a"), lambda: s))
    clock.now = 0.5
    hand.fail = None
    events = list(h.take_out_due(plan_of(s, "a"), progress("ns/a"), lambda: s))
    assert [(e.kind, e.pod) for e in events] == [(EventKind.OUT_OF_ROTATION, "ns/a")]


def test_every_event_names_the_drained_node_and_its_pod(tmp_path):
    """The board and the report file each event under its node. Kills `DrainEvent(None, ...)` for "already out
    of rotation", "kept in rotation", "stays in rotation" and "back in rotation", and the kept pod's key → None."""
    s_in = snap(pod("a"), pod("b", node="n2"))
    s_out = snap(pod("a", labels={"app": "llama"}), pod("b", node="n2"))  # its label removed since the plan
    already = list(hold(Hand()).take_out_due(plan_of(s_in, "a"), progress("ns/a"), lambda: s_out))
    alone = snap(pod("a"))
    kept = list(hold(Hand()).take_out_due(plan_of(alone, "a"), progress("ns/a"), lambda: alone))
    s = snap(pod("a"), pod("b", node="n2"))
    stays = list(hold(Hand(fail=ConflictError("changed"))).take_out_due(plan_of(s, "a"), progress("ns/a"), lambda: s))
    h = hold(Hand(record=record_text({A.key: A})))
    h.adopt()
    back = list(h.put_back_all("why", progress("ns/a")))
    assert already[0].message == "already out of rotation (not by this drain)"
    assert kept[0].message.startswith(KEPT_RUNNING) and stays[0].message.startswith("stays in rotation")
    assert [(e.node, e.pod) for e in already + kept + stays + back] == [("n1", "ns/a")] * 4
    assert [e.kind for e in already + kept + stays + back] == [
        EventKind.INFO, EventKind.INFO, EventKind.INFO, EventKind.IN_ROTATION]


def test_a_pod_already_out_or_kept_in_does_not_stop_the_next_pod_going_out():
    """Each pod of the look is judged on its own. Kills `continue` → `break` after "already out of rotation" and
    after "kept in rotation" (the pods after it never taken out on this look)."""
    # a: someone else took it out; c: taken out by this drain.
    s = snap(pod("a"), pod("c"), pod("b", node="n2"))
    fresh = snap(pod("a", labels={"app": "llama"}), pod("c"), pod("b", node="n2"))
    events = list(hold(Hand()).take_out_due(plan_of(s, "a", "c"), progress("ns/a", "ns/c"), lambda: fresh))
    assert [(e.kind, e.pod, e.message.split(" (")[0]) for e in events] == [
        (EventKind.INFO, "ns/a", "already out of rotation"), (EventKind.OUT_OF_ROTATION, "ns/c", "out of rotation")]
    # a: the only pod its own Service sends to (kept in); c: another Service's, with a second pod serving it.
    other = {"app": "other", "serving": "true"}
    svc2 = PodSelector("Service", "ns", "other", other)
    deploy2 = PodSelector("Deployment", "ns", "other", {"app": "other"}, frozenset({"app"}))
    s2 = ClusterSnapshot(0.0, "t", nodes=s.nodes, selectors=(SVC, DEPLOY, svc2, deploy2),
                         pods=(pod("a"), pod("c", service="other", labels=other),
                               pod("d", node="n2", service="other", labels=other)))
    events = list(hold(Hand()).take_out_due(plan_of(s2, "a", "c"), progress("ns/a", "ns/c"), lambda: s2))
    assert [(e.kind, e.pod) for e in events] == [(EventKind.INFO, "ns/a"), (EventKind.OUT_OF_ROTATION, "ns/c")]


def test_a_pod_not_in_the_states_asked_does_not_stop_the_next_being_put_back():
    """Kills `continue` → `break` after a pod whose state was not asked (the pods after it left out)."""
    h = hold(Hand(record=record_text({A.key: A, B.key: B}), uid="uid-b"))
    h.adopt()
    pods = {**progress("ns/a", state=PodState.WAITING), **progress("ns/b", state=PodState.HELD)}
    events = list(h.put_back_all("left in place", pods, only=("held",)))
    assert [e.pod for e in events] == ["ns/b"] and set(h.held) == {"ns/a"}


def test_nothing_held_nothing_written():
    """A drain that took nothing out ends without a write to its node. Kills `dropped = False` → `True` (the
    record removed again, a write to the API, when nothing was dropped)."""
    hand = Hand()
    assert list(hold(hand).put_back_all("the drain ended", {})) == []
    assert hand.calls == []


def test_forgetting_a_pod_of_a_cluster_never_counted_is_harmless():
    """Kills `_keys.get(id(writer), set())` → `get(id(writer), None)` / no default in `discard` (an
    AttributeError for a writer that holds nothing out)."""
    t = _TakenOut()
    t.discard(object(), "ns/a")
    assert t.keys(object()) == frozenset()

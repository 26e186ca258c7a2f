"""Fencing one DRA GPU before its drain (gputui.ops.drain.gpu_fence), on a recording writer: a dry run (effect None)
first, its status waited for and said, then NoSchedule; each write audited; a fence already in place left as it is
(a dry run then would lift it); a writer that cannot fence stops the drain before anything is written. The real
DeviceTaintRule and its controller are in tests/integration/test_gpu_drain_dra_real.py."""

from __future__ import annotations

import pytest

from gputui.backends.base import BackendError
from gputui.ops.audit import AuditLog
from gputui.ops.drain.events import EventKind
from gputui.ops.drain.gpu_fence import STATUS_WAIT_S, dry_run_words, fence_device
from gputui.ops.drain.gpu_target import FENCE_KEY
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.plan import plan_drain
from gputui.ops.drain.report import Outcome
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, Node
from tests.support.audit_lines import written
from tests.support.drain_api import Api, Drain, pod

DEVICE = "gpu.nvidia.com/pool-n1/gpu-1"
RULE = "gputui-fence-n1-gpu-1"


def said(message: str | None = "1 pod would be evicted", status: str = "True") -> dict:
    condition = {"type": "EvictionInProgress", "status": status}
    if message is not None:
        condition["message"] = message
    return {"spec": {"taint": {"effect": "None"}}, "status": {"conditions": [condition]}}


class Fencer:
    """A DeviceFencer: the rule's reads answer `reads` in turn (the last one again when they run out)."""

    identity = "tester"

    def __init__(self, *reads: dict | None) -> None:
        self.reads = list(reads) or [None]
        self.asked: list[str] = []
        self.taints: list[tuple[str, str, str, str, str]] = []

    def device_taint_rule(self, name: str) -> dict | None:
        self.asked.append(name)
        return self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]

    def taint_device(self, name: str, device: str, key: str, value: str, effect: str) -> dict:
        self.taints.append((name, device, key, value, effect))
        return {}


class Clock:
    def __init__(self) -> None:
        self.now, self.slept = 1000.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def plan():
    pods = (InferencePod(namespace="ns", name="b", uid="uid-b", node="n1", owner_kind="ReplicaSet", gpu_request=1),
            InferencePod(namespace="ns", name="c", uid="uid-c", node="n1", owner_kind="ReplicaSet", gpu_request=1))
    snap = ClusterSnapshot(0.0, "t", nodes=(Node("n1", True, False, "H100", 4, 4),), pods=pods)
    return plan_drain(snap, "n1", DrainOptions(gpu="1", gpu_pods=("ns/b", "ns/c"), gpu_device=DEVICE))


def fence(writer, tmp_path, poll_s: float = 0.5):
    clock, log = Clock(), tmp_path / "audit.jsonl"
    events = list(fence_device(writer, AuditLog(log, "tester", "ctx"), plan(), clock, clock.sleep, poll_s))
    return events, clock, [(e["action"], e["target"], e["params"], e["result"]) for e in written(log)
                           if e["phase"] == "result"]


def test_a_dry_run_then_noschedule_each_audited_and_the_controllers_words_said(tmp_path):
    writer = Fencer(None, None, said())  # absent; the dry run's status not yet set; then set
    events, clock, audited = fence(writer, tmp_path)
    assert writer.taints == [(RULE, DEVICE, FENCE_KEY, "drain", "None"), (RULE, DEVICE, FENCE_KEY, "drain", "NoSchedule")]
    assert writer.asked == [RULE, RULE, RULE]
    assert clock.slept == [0.5]  # waited once for the status, at the drain's own pace
    assert [(e.node, e.kind, e.message) for e in events] == [
        ("n1", EventKind.INFO, f"dry run (effect None) of DeviceTaintRule {RULE}: 1 pod would be evicted"),
        ("n1", EventKind.INFO, f"{DEVICE} fenced: DeviceTaintRule {RULE} NoSchedule (no new claim gets it)")]
    assert audited == [("fence", f"devicetaintrule/{RULE}", {"device": DEVICE, "effect": "None"}, "ok"),
                       ("fence", f"devicetaintrule/{RULE}", {"device": DEVICE, "effect": "NoSchedule"}, "ok")]


def test_a_controller_that_says_nothing_is_waited_for_a_bounded_time_and_said_silent(tmp_path):
    writer = Fencer(None)
    events, clock, _ = fence(writer, tmp_path, poll_s=5.0)
    assert clock.slept and set(clock.slept) == {1.0}  # never more than a second between looks
    assert sum(clock.slept) == pytest.approx(STATUS_WAIT_S)
    assert events[0].message == (
        f"dry run (effect None) of DeviceTaintRule {RULE}: the controller reported nothing within 10s: which pods "
        "it would touch is not known from it (the plan's pods on GPU 1 are 2)")
    assert writer.taints[-1][-1] == "NoSchedule"  # the fence goes on all the same


def test_a_fence_already_in_place_is_kept_and_nothing_written(tmp_path):
    writer = Fencer({"spec": {"taint": {"effect": "NoSchedule"}}})
    events, _clock, audited = fence(writer, tmp_path)
    assert writer.taints == [] and audited == []
    assert [(e.node, e.kind, e.message) for e in events] == [
        ("n1", EventKind.INFO, f"{DEVICE} already fenced (DeviceTaintRule {RULE}, NoSchedule)")]


@pytest.mark.parametrize("existing", [{"spec": {"taint": {"effect": "None"}}}, {"spec": {}}, {}])
def test_a_rule_not_yet_noschedule_is_dry_run_again(tmp_path, existing):
    writer = Fencer(existing, said())
    fence(writer, tmp_path)
    assert [t[-1] for t in writer.taints] == ["None", "NoSchedule"]


def test_a_writer_that_cannot_fence_stops_before_anything(tmp_path):
    with pytest.raises(BackendError) as refused:
        fence(object(), tmp_path)
    assert str(refused.value) == f"this cluster connection cannot write a DeviceTaintRule: {DEVICE} cannot be fenced"


@pytest.mark.parametrize("rule, words", [
    (None, ""),
    ({}, ""),
    ({"status": {}}, ""),
    ({"status": {"conditions": [{"type": "Other", "message": "x"}]}}, ""),
    (said("3 pods"), "3 pods"),
    (said(None, "False"), "EvictionInProgress=False (no message)"),
    (said("", "True"), "EvictionInProgress=True (no message)"),
    ({"status": {"conditions": [{"type": "EvictionInProgress"}]}}, "EvictionInProgress=? (no message)"),
])
def test_the_dry_runs_words(rule, words):
    assert dry_run_words(rule) == words


# -- the fence inside run_drain (its wiring: the drain's writer, audit log, plan, clock, sleep and poll) ---------

def test_a_gpu_drain_fences_its_device_first_on_the_drains_own_clock_and_log(tmp_path):
    """run_drain's `fence_device(writer, audit, plan, clock, sleep, poll_s)`: each argument replaced (None) or
    dropped is a drain that cannot fence, fences another device, audits elsewhere or waits on another clock."""
    class FencingApi(Api):
        def __init__(self, *args, **kw) -> None:
            super().__init__(*args, **kw)
            self.fencer = Fencer(None, None, said())

        def device_taint_rule(self, name: str) -> dict | None:
            return self.fencer.device_taint_rule(name)

        def taint_device(self, name: str, device: str, key: str, value: str, effect: str) -> dict:
            self.writes.append(("taint", effect))
            return self.fencer.taint_device(name, device, key, value, effect)

    api = FencingApi((pod("a"), pod("b")), {"a": 0, "b": 0})
    options = DrainOptions(gpu="1", gpu_device=DEVICE, gpu_pods=("ns/a",))
    d = Drain(api, tmp_path / "a.jsonl", options, poll_s=0.5)
    report = d.run()
    assert report.outcome is Outcome.DRAINED, report.describe()
    assert api.fencer.taints == [(RULE, DEVICE, FENCE_KEY, "drain", "None"), (RULE, DEVICE, FENCE_KEY, "drain",
                                                                               "NoSchedule")]
    assert [w for w in api.writes if w[0] in ("taint", "evict")] == [("taint", "None"), ("taint", "NoSchedule"),
                                                                    ("evict", "a")]
    assert d.slept[:1] == [0.5]  # the drain's own sleep and poll, waiting for the dry run's status
    fenced = [(e.node, e.message) for e in d.events if e.kind is EventKind.INFO and "DeviceTaintRule" in e.message]
    assert fenced[0][0] == "n1" and "1 pod would be evicted" in fenced[0][1]
    assert [(a, t, p) for a, t, p, _r in ((e["action"], e["target"], e["params"], e["result"])
                                          for e in written(tmp_path / "a.jsonl")) if a == "fence"] == [
        ("fence", f"devicetaintrule/{RULE}", {"device": DEVICE, "effect": e}) for e in ("None", "NoSchedule")]

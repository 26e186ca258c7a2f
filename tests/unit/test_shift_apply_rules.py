"""Applying a shift, fast: what stops it before anything is sent (errors even when forced, blockers unless forced,
the route moved since the plan), the refusal of an edit made meanwhile whoever words the 409, and what is audited."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

from gputui.backends.base import BackendError, ConflictError
from gputui.backends.demo import demo_backend
from gputui.ops.audit import AuditLog
from gputui.ops.errors import ReadOnlyError
from gputui.ops.traffic.apply import apply_shift
from gputui.ops.traffic.plans import plan_shift, read_route
from gputui.ops.traffic.vocabulary import Patch, ShiftError
from tests.demo_clock import ManualClock
from tests.support.op_context import write_context

LLAMA = "llm/llama-3-70b-instruct"  # the demo's HTTPRoute: v1 90, v2 10 (v2 has 1 of 8 pods ready)


class Writer:
    """Serves one route object; records patches; fails them as told."""

    identity = "rec"

    def __init__(self, route: dict, fail: BaseException | None = None) -> None:
        self.route, self.fail = route, fail
        self.patches: list[tuple] = []

    def get_object(self, group, version, plural, namespace, name):
        return copy.deepcopy(self.route)

    def patch_object(self, group, version, plural, namespace, name, patch, patch_type="merge", subresource=""):
        if self.fail is not None:
            raise self.fail
        self.patches.append((plural, name, patch_type, subresource, patch))
        return {}


def setup(tmp_path, targets, route_weights=None, fail=None):
    backend = demo_backend(clock=ManualClock())
    snap = backend.reader.snapshot()
    route = backend.writer.get_object("gateway.networking.k8s.io", "v1", "httproutes", "llm", "llama-3-70b-instruct")
    if route_weights is not None:
        for ref, w in zip(route["spec"]["rules"][1]["backendRefs"], route_weights, strict=True):  # rule 1 splits v1/v2
            ref["weight"] = w
    writer = Writer(route, fail)
    return snap, writer, AuditLog(tmp_path / "a.jsonl", "alice", "demo")


def entries(tmp_path) -> list[dict]:
    path = tmp_path / "a.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_an_invalid_plan_is_refused_even_when_forced(tmp_path):
    snap, writer, audit = setup(tmp_path, None)
    bad = plan_shift(snap, LLAMA, {"v2": 150})
    with pytest.raises(ShiftError, match=r"^v2: 150% is outside 0\.\.100%$"):
        apply_shift(bad, write_context(writer, audit), force=True)
    assert writer.patches == [] and entries(tmp_path) == []


def test_a_blocker_is_said_with_how_to_go_past_it(tmp_path):
    snap, writer, audit = setup(tmp_path, None)
    plan = plan_shift(snap, LLAMA, {"v2": 50}, route=read_route(plan_shift(snap, LLAMA, {"v2": 50}), writer))
    assert plan.blockers
    with pytest.raises(ShiftError) as err:
        apply_shift(plan, write_context(writer, audit))
    assert str(err.value) == plan.blockers[0] + " (force to shift anyway)"
    assert writer.patches == []


def test_read_only_is_refused_first(tmp_path):
    snap, _, audit = setup(tmp_path, None)
    with pytest.raises(ReadOnlyError, match=r"^read-only: shift is unavailable$"):
        apply_shift(plan_shift(snap, LLAMA, {"v2": 150}), write_context(None, audit))


def test_a_plan_from_the_snapshot_is_made_again_on_the_route_as_read_and_sent(tmp_path):
    snap, writer, audit = setup(tmp_path, None)
    plan = plan_shift(snap, LLAMA, {"v2": 12})
    assert plan.patch is None
    line = apply_shift(plan, write_context(writer, audit))
    assert line == "httproute/llm/llama-3-70b-instruct: v1 90% → 88%, v2 10% → 12%"
    ((plural, name, patch_type, sub, body),) = writer.patches
    assert (plural, name, patch_type, sub) == ("httproutes", "llama-3-70b-instruct", "json", "")
    intent, result = entries(tmp_path)
    assert (intent["phase"], result["phase"], result["result"]) == ("intent", "result", "ok")
    assert intent["action"] == "shift" and intent["target"] == "httproute/llm/llama-3-70b-instruct"
    assert intent["params"] == {"service": LLAMA, "action": "shift", "from": {"v1": 90, "v2": 10},
                                "to": {"v1": 88, "v2": 12}, "patch_type": "json", "subresource": "",
                                "patch": body, "force": False}


def test_a_route_that_moved_since_the_plan_is_refused_naming_what_it_holds_now(tmp_path):
    snap, writer, audit = setup(tmp_path, None, route_weights=[70, 30])
    plan = plan_shift(snap, LLAMA, {"v2": 12})
    with pytest.raises(ShiftError) as err:
        apply_shift(plan, write_context(writer, audit), force=True)
    assert str(err.value) == ("httproute/llm/llama-3-70b-instruct changed since the plan (v1 now 70%, v2 now 30%): "
                              "look again before shifting")
    assert writer.patches == [] and entries(tmp_path) == []


def test_a_route_read_now_that_cannot_be_shifted_is_refused(tmp_path):
    snap, writer, audit = setup(tmp_path, None)
    writer.route["spec"]["rules"][1]["backendRefs"][1]["name"] = "somewhere-else"
    with pytest.raises(ShiftError, match="has no rule that splits traffic"):
        apply_shift(plan_shift(snap, LLAMA, {"v2": 12}), write_context(writer, audit), force=True)
    assert writer.patches == []


def test_a_blocker_found_on_the_route_read_now_needs_force(tmp_path):
    snap, writer, audit = setup(tmp_path, None)
    plan = plan_shift(snap, LLAMA, {"v2": 50})
    plan = replace(plan, blockers=())  # the snapshot's plan said nothing; the route's replan will
    with pytest.raises(ShiftError, match=r" \(force to shift anyway\)$"):
        apply_shift(plan, write_context(writer, audit))
    assert writer.patches == []
    apply_shift(plan, write_context(writer, audit), force=True)
    assert len(writer.patches) == 1 and entries(tmp_path)[0]["params"]["force"] is True


def test_no_change_sends_nothing_and_says_where_it_is(tmp_path):
    snap, writer, audit = setup(tmp_path, None)
    line = apply_shift(plan_shift(snap, LLAMA, {"v2": 10}), write_context(writer, audit))
    assert line == "httproute/llm/llama-3-70b-instruct: already at v1 90%, v2 10%"
    assert writer.patches == [] and entries(tmp_path) == []


class Status409(BackendError):
    status = 409


@pytest.mark.parametrize("refusal", [ConflictError("changed"), Status409("Conflict")])
def test_an_edit_made_meanwhile_is_refused_whole_whoever_words_the_409(tmp_path, refusal):
    snap, writer, audit = setup(tmp_path, None, fail=refusal)
    plan = plan_shift(snap, LLAMA, {"v2": 12}, route=writer.get_object("", "", "", "", ""))
    with pytest.raises(ShiftError) as err:
        apply_shift(plan, write_context(writer, audit))
    assert str(err.value) == ("httproute/llm/llama-3-70b-instruct changed since it was read (someone else edited it): "
                              "nothing was changed; look again and retry")
    assert err.value.__suppress_context__
    assert entries(tmp_path)[-1]["phase"] == "result" and entries(tmp_path)[-1]["result"].startswith("refused")


def test_any_other_failure_is_raised_as_it_is_and_audited(tmp_path):
    failure = BackendError("403 forbidden")
    snap, writer, audit = setup(tmp_path, None, fail=failure)
    plan = plan_shift(snap, LLAMA, {"v2": 12}, route=writer.get_object("", "", "", "", ""))
    with pytest.raises(BackendError) as err:
        apply_shift(plan, write_context(writer, audit))
    assert err.value is failure
    assert entries(tmp_path)[-1]["result"] == "error: 403 forbidden"


def test_a_rollout_action_sends_both_halves_in_order_and_is_audited_by_its_name(tmp_path):
    snap, writer, audit = setup(tmp_path, None)
    plan = plan_shift(snap, LLAMA, {"v2": 12}, route=writer.get_object("", "", "", "", ""))
    first = Patch("argoproj.io", "v1alpha1", "rollouts", "llm", "chat", {"status": {"pauseConditions": None}},
                  "merge", "status")
    then = Patch("argoproj.io", "v1alpha1", "rollouts", "llm", "chat", {"spec": {"paused": False}}, "merge")
    promote = replace(plan, action="promote", patch=first, then=then, kind="Rollout", object_name="chat")
    assert apply_shift(promote, write_context(writer, audit)) == "rollout/llm/chat: promote sent"
    assert [(p[3], p[4]) for p in writer.patches] == [("status", first.body), ("", then.body)]
    intent = entries(tmp_path)[0]
    assert intent["action"] == "rollout-promote" and intent["target"] == "rollout/llm/chat"
    assert intent["params"]["then"] == {"subresource": "", "patch": then.body}
    assert intent["params"]["action"] == "promote"

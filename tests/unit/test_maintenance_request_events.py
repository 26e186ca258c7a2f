"""What a drain through a NodeMaintenance says, event by event and exactly (node, kind, words): created or adopted,
each new phase once (no phase yet included), the silent operator asked about once a minute has passed (for an
adopted request too), and the refusals. Mutation of gputui/ops/drain/maintenance_request.py found these events'
node, kind and words reached by no fast assertion."""

from __future__ import annotations

import pytest

from gputui.backends.base import BackendError
from gputui.backends.kube_errors import Unreachable
from gputui.ops.audit import AuditLog
from gputui.ops.drain.events import DrainEvent
from gputui.ops.drain.events import EventKind as K
from gputui.ops.drain.maintenance_request import (
    SILENT_AFTER_S,
    MaintenanceRequest,
    RequestGone,
    RequestPlan,
    request_body,
)
from tests.support.maintenance_api import GVR, Missing

TARGET = "nodemaintenance/maint/gputui-n1"


class Api:
    """The NodeMaintenance as the apiserver holds it: created, read (its phase set by the test), deleted."""

    def __init__(self, fail: BackendError | None = None) -> None:
        self.obj: dict | None = None
        self.fail = fail

    def create_object(self, group, version, plural, namespace, body):
        assert (group, version, plural, namespace) == (*GVR, "maint")
        self.obj = {**body, "metadata": {**body["metadata"], "creationTimestamp": "2026-12-04T10:00:00Z"}, "status": {}}
        return self.obj

    def get_object(self, group, version, plural, namespace, name):
        if self.fail is not None:
            raise self.fail
        if self.obj is None:
            raise Missing()
        return self.obj

    def list_objects(self, *args, **kw):
        return []

    def delete_object(self, *args, **kw):
        self.obj = None

    def pod_log(self, *args, **kw):
        return ""

    def phase(self, phase: str) -> None:
        assert self.obj is not None
        self.obj["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": phase}]} if phase else {}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def request(api: Api, tmp_path, clock: Clock, selector: str = "app in (llm)") -> MaintenanceRequest:
    return MaintenanceRequest(api, AuditLog(tmp_path / "a.jsonl", "t", "c"), RequestPlan("maint", "n1", selector), clock)


def info(message: str) -> DrainEvent:
    return DrainEvent("n1", K.INFO, message=message)


def test_a_new_request_is_said_created_then_each_phase_once_no_phase_yet_included(tmp_path):
    api, clock = Api(), Clock()
    req = request(api, tmp_path, clock)
    assert list(req.open()) == [info(f"{TARGET} created; waiting for the maintenance-operator")]
    assert list(req.look()) == [info("maintenance-operator: no phase yet")]
    assert list(req.look()) == []  # said once
    api.phase("WaitForPodCompletion")
    assert list(req.look()) == [info("maintenance-operator: WaitForPodCompletion; gputui moves the pods now")]
    assert req.evicting and not req.ready


def test_the_silent_operator_is_asked_about_once_and_only_past_a_minute(tmp_path):
    api, clock = Api(), Clock()
    req = request(api, tmp_path, clock)
    list(req.open())
    list(req.look())
    clock.now += SILENT_AFTER_S  # exactly a minute: not yet
    assert list(req.look()) == []
    clock.now += 1
    asked = info(f"{TARGET} has no phase after 60s: is the maintenance-operator's controller running?")
    assert list(req.look()) == [asked]
    clock.now += 60
    assert list(req.look()) == []


def test_an_adopted_request_is_said_with_its_phase_and_its_silence_timed_from_its_creation(tmp_path):
    api, clock = Api(), Clock()
    api.create_object(*GVR, "maint", request_body("maint", "n1", "app in (llm)"))
    req = request(api, tmp_path, clock)
    assert list(req.open()) == [info(f"{TARGET}: gputui's request adopted (no phase yet)")]
    clock.now = 1_796_378_400.0 + SILENT_AFTER_S + 1  # 2026-12-04T10:00:00Z, its creation, and a minute on
    assert list(req.look())[-1].message.endswith("is the maintenance-operator's controller running?")
    api.phase("Draining")
    assert list(request(api, tmp_path, clock).open()) == [info(f"{TARGET}: gputui's request adopted (Draining)")]


def test_a_read_that_fails_for_another_reason_than_a_404_is_raised_as_it_is(tmp_path):
    api, clock = Api(), Clock()
    req = request(api, tmp_path, clock)
    list(req.open())
    api.fail = Unreachable("https://api:6443", "timed out")  # no status at all: not "gone"
    with pytest.raises(Unreachable):
        list(req.look())
    api.fail = None
    api.obj = None
    with pytest.raises(RequestGone) as gone:
        list(req.look())
    assert str(gone.value) == (f"{TARGET} was deleted: the maintenance-operator no longer holds the node for this "
                               "drain")


def test_a_writer_that_cannot_create_objects_is_one_clear_line(tmp_path):
    with pytest.raises(BackendError) as refused:
        MaintenanceRequest(object(), AuditLog(None, "t", "c"), RequestPlan("maint", "n1"), Clock())
    assert str(refused.value) == "this cluster's writer cannot create a NodeMaintenance"


def test_a_plan_with_no_session_pod_says_the_operator_has_nothing_to_wait_on():
    assert RequestPlan("maint", "n1").words() == (
        "as the maintenance-operator's requestor (gputui.io): NodeMaintenance maint/gputui-n1; the operator cordons "
        "when its scheduler gives the node a turn; no pod holds sessions: nothing for it to wait on; gputui evicts "
        "every pod; done when the operator says Ready")

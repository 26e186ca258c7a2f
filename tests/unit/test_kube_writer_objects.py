"""The live writer's newer requests, fast and exact (mutation of kube_writer.py found them reached only by the
real-apiserver tests): a Job created and deleted (the DCGM diagnostic), a pod's log, a feature gate read from the
apiserver's /metrics, a node condition (KEP-5683), one DRA device's DeviceTaintRule; and what a UID-guarded
delete or eviction says when the pod under the name is another."""

from __future__ import annotations

import time
from typing import Any

import pytest
import urllib3

from gputui.backends import kube_writer
from gputui.backends.base import BackendError, ConflictError, EvictionOutcome, EvictionResult
from gputui.backends.kube_errors import ApiError, Unreachable
from gputui.backends.kube_http import PROBE_TIMEOUT_S, READ_TIMEOUT_S
from gputui.backends.kube_writer import KubeWriter
from tests.support.fake_conn import Conn, api_error, writer

MERGE, STRATEGIC = "application/merge-patch+json", "application/strategic-merge-patch+json"


class Response:
    def __init__(self, status: int, data: bytes) -> None:
        self.status, self.data = status, data


class Pool:
    """urllib3's pool as pod_log and feature_gate use it: every call's arguments, one scripted answer."""

    def __init__(self, answer: Response | BaseException) -> None:
        self.answer = answer
        self.calls: list[tuple[tuple, dict]] = []

    def request(self, *args: Any, **kw: Any) -> Response:
        self.calls.append((args, kw))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


class RawConn(Conn):
    """A connection whose raw pool is used (the log and /metrics are not JSON answers)."""

    def __init__(self, answer: Response | BaseException) -> None:
        super().__init__()
        self.pool = Pool(answer)

    def url(self, path: str, query=None) -> str:
        q = "&".join(f"{k}={v}" for k, v in (query or {}).items() if v is not None)
        return self.host + path + (f"?{q}" if q else "")

    def headers(self) -> dict[str, str]:
        return {"Authorization": "Bearer t"}


def raw(answer: Response | BaseException) -> tuple[KubeWriter, RawConn]:
    conn = RawConn(answer)
    return KubeWriter(conn, "ops@example"), conn  # type: ignore[arg-type]


def sent(conn: Conn) -> list[tuple]:
    return [(s["method"], s["path"], s["query"], s["body"], s["content_type"]) for s in conn.sent]


# -- objects: the diagnostic's Job -------------------------------------------------------------------------------

def test_an_object_is_created_with_a_post_and_the_answer_is_the_object_made():
    w, conn = writer({"metadata": {"name": "gputui-diag-x", "uid": "u"}})
    made = w.create_object("batch", "v1", "jobs", "gpu-ops", {"kind": "Job"})
    assert made == {"metadata": {"name": "gputui-diag-x", "uid": "u"}}
    assert sent(conn) == [("POST", "/apis/batch/v1/namespaces/gpu-ops/jobs", None, {"kind": "Job"},
                           "application/json")]


def test_an_object_is_deleted_with_its_dependents_in_the_foreground_unless_asked_and_a_404_is_done():
    w, conn = writer({}, {}, api_error(404))
    w.delete_object("batch", "v1", "jobs", "gpu-ops", "d")
    w.delete_object("batch", "v1", "jobs", "gpu-ops", "d", propagation="Background")
    w.delete_object("batch", "v1", "jobs", "gpu-ops", "gone")  # already gone: done, nothing raised
    assert [(s[0], s[1], s[3]) for s in sent(conn)] == [
        ("DELETE", "/apis/batch/v1/namespaces/gpu-ops/jobs/d",
         {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"}),
        ("DELETE", "/apis/batch/v1/namespaces/gpu-ops/jobs/d",
         {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}),
        ("DELETE", "/apis/batch/v1/namespaces/gpu-ops/jobs/gone",
         {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"})]


def test_a_refused_delete_of_an_object_is_raised():
    with pytest.raises(ApiError) as raised:
        writer(api_error(403, "forbidden: jobs"))[0].delete_object("batch", "v1", "jobs", "gpu-ops", "d")
    assert raised.value.status == 403


# -- a pod's log ------------------------------------------------------------------------------------------------

def test_a_pods_log_is_read_raw_bounded_and_quickly_failing_to_connect():
    w, conn = raw(Response(200, b"line 1\nline 2\xff\n"))
    assert w.pod_log("gpu-ops", "diag-x", container="dcgm", limit_bytes=64) == "line 1\nline 2\ufffd\n"
    (args, kw), = conn.pool.calls
    assert args == ("GET", "https://api:6443/api/v1/namespaces/gpu-ops/pods/diag-x/log?container=dcgm&limitBytes=64")
    assert kw["headers"] == {"Authorization": "Bearer t"}
    assert kw["retries"] is False and kw["preload_content"] is True
    assert (kw["timeout"].connect_timeout, kw["timeout"].read_timeout) == (PROBE_TIMEOUT_S, READ_TIMEOUT_S)


def test_a_log_asks_for_no_container_unless_named_and_is_cut_at_its_limit():
    w, conn = raw(Response(200, b"0123456789"))
    assert w.pod_log("gpu-ops", "diag-x", limit_bytes=4) == "0123"
    assert conn.pool.calls[0][0][1].endswith("/pods/diag-x/log?limitBytes=4")
    w, conn = raw(Response(200, b"x"))
    w.pod_log("gpu-ops", "diag-x")
    assert conn.pool.calls[0][0][1].endswith("/log?limitBytes=8000000")


def test_a_log_answered_with_an_error_raises_what_it_means_and_no_answer_is_unreachable():
    with pytest.raises(ApiError) as raised:
        raw(Response(404, b'{"message": "pods \\"diag-x\\" not found"}'))[0].pod_log("gpu-ops", "diag-x")
    assert (raised.value.status, str(raised.value)) == (404, '404: pods "diag-x" not found')
    with pytest.raises(ApiError, match=r"^forbidden: "):
        raw(Response(403, b"{}"))[0].pod_log("gpu-ops", "diag-x")
    assert raw(Response(299, b"ok"))[0].pod_log("gpu-ops", "diag-x") == "ok"  # any 2xx is the log
    with pytest.raises(ApiError):
        raw(Response(300, b"{}"))[0].pod_log("gpu-ops", "diag-x")
    with pytest.raises(ApiError, match=r"^https://api:6443 rejected the credentials \(401 Unauthorized\)$"):
        raw(Response(401, b""))[0].pod_log("gpu-ops", "diag-x")
    with pytest.raises(Unreachable) as gone:
        raw(urllib3.exceptions.ConnectTimeoutError("timed out"))[0].pod_log("gpu-ops", "diag-x")
    assert (gone.value.host, gone.value.reason) == ("https://api:6443", "timed out")


# -- a feature gate, from the apiserver's /metrics ---------------------------------------------------------------

METRICS = (b'# HELP kubernetes_feature_enabled [ALPHA] This metric records the data about the stage and enablement\xff\n'
           b'# TYPE kubernetes_feature_enabled gauge\n'
           b'kubernetes_feature_enabled{name="NodeLifecycleConditionsX",stage="ALPHA"} 1\n'
           b'kubernetes_feature_enabled{name="NodeLifecycleConditions",stage="ALPHA"} 0\n'
           b'kubernetes_feature_enabled{name="DRADeviceTaints",stage=""} 1\n'
           # A label value may hold a space (the exposition format allows it): the value is the line's last field.
           b'kubernetes_feature_enabled{name="SpacedGate",stage="BETA",note="a 0"} 1\n')


def test_a_gate_is_read_from_the_apiservers_metrics_by_its_exact_name():
    w, conn = raw(Response(200, METRICS))
    assert w.feature_gate("DRADeviceTaints") == (True, "")
    assert w.feature_gate("NodeLifecycleConditions") == (False, "")  # not its longer-named neighbour's 1
    assert w.feature_gate("SpacedGate") == (True, "")  # a byte that is no UTF-8 (in HELP) spoils nothing
    (args, kw), *_ = conn.pool.calls
    assert args == ("GET", "https://api:6443/metrics")
    assert kw["headers"] == {"Authorization": "Bearer t"} and kw["retries"] is False and kw["preload_content"] is True
    assert (kw["timeout"].connect_timeout, kw["timeout"].read_timeout) == (PROBE_TIMEOUT_S, READ_TIMEOUT_S)


@pytest.mark.parametrize("answer, said", [
    (Response(200, METRICS), "the apiserver's /metrics does not name the SomeGate gate"),
    (Response(204, b""), "the apiserver's /metrics does not name the SomeGate gate"),
    (Response(401, b""), "your identity may not read the apiserver's /metrics"),
    (Response(403, b""), "your identity may not read the apiserver's /metrics"),
    (Response(300, b""), "the apiserver's /metrics answered 300"),
    (Response(500, b""), "the apiserver's /metrics answered 500"),
])
def test_a_gate_that_cannot_be_read_is_unknown_and_says_why(answer, said):
    assert raw(answer)[0].feature_gate("SomeGate") == (None, said)


def test_a_metrics_endpoint_nobody_answers_is_unknown_naming_the_cause():
    refused = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] "  # type: ignore[arg-type]
                                                          "Connection refused")
    assert raw(refused)[0].feature_gate("X") == (None, "the apiserver's /metrics could not be read (connection refused)")


# -- a node condition --------------------------------------------------------------------------------------------

def test_a_node_condition_is_a_strategic_merge_of_one_condition_on_the_status(monkeypatch):
    monkeypatch.setattr(kube_writer.time, "gmtime", lambda *_: time.struct_time((2026, 12, 4, 10, 0, 0, 4, 338, 0)))
    w, conn = writer()
    w.set_node_condition("gpu-1", "Drained", "True", "GputuiDrainCompleted", "drained by ops@example")
    assert sent(conn) == [("PATCH", "/api/v1/nodes/gpu-1/status", None, {"status": {"conditions": [
        {"type": "Drained", "status": "True", "reason": "GputuiDrainCompleted", "message": "drained by ops@example",
         "lastTransitionTime": "2026-12-04T10:00:00Z", "lastHeartbeatTime": "2026-12-04T10:00:00Z"}]}}, STRATEGIC)]


# -- one DRA device's taint --------------------------------------------------------------------------------------

SPEC = {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-1/gpus", "device": "gpu-3"},
        "taint": {"key": "gputui.io/drain", "value": "gpu-3", "effect": "NoSchedule"}}


def test_a_device_taint_rule_is_created_naming_its_driver_pool_and_device():
    w, conn = writer({"metadata": {"name": "r"}})
    assert w.taint_device("r", "gpu.nvidia.com/node-1/gpus/gpu-3", "gputui.io/drain", "gpu-3", "NoSchedule") == \
        {"metadata": {"name": "r"}}
    assert sent(conn) == [("POST", "/apis/resource.k8s.io/v1/devicetaintrules", None, {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": "r", "labels": {"app.kubernetes.io/managed-by": "gputui"}}, "spec": SPEC},
        "application/json")]


def test_an_existing_rule_gets_the_taint_by_a_merge_patch_and_other_refusals_are_raised():
    w, conn = writer(api_error(409), {"spec": SPEC})
    assert w.taint_device("r", "gpu.nvidia.com/node-1/gpus/gpu-3", "gputui.io/drain", "gpu-3", "NoSchedule") == \
        {"spec": SPEC}
    assert sent(conn)[1] == ("PATCH", "/apis/resource.k8s.io/v1/devicetaintrules/r", None, {"spec": SPEC}, MERGE)
    w, conn = writer(api_error(403))
    with pytest.raises(ApiError):
        w.taint_device("r", "gpu.nvidia.com/node-1/gpus/gpu-3", "gputui.io/drain", "gpu-3", "None")
    assert len(conn.sent) == 1 and conn.sent[0]["body"]["spec"]["taint"]["effect"] == "None"


@pytest.mark.parametrize("effect", ["NoExecute", "noschedule", ""])
def test_a_taint_that_would_evict_past_budgets_or_is_no_effect_is_refused_before_any_request(effect):
    w, conn = writer()
    with pytest.raises(BackendError) as refused:
        w.taint_device("r", "gpu.nvidia.com/node-1/gpus/gpu-3", "k", "v", effect)
    assert str(refused.value) == f"refused: a DeviceTaintRule with effect {effect!r} (only None or NoSchedule)"
    assert conn.sent == []


def test_a_rule_is_read_and_an_absent_one_is_none_but_a_failed_read_is_raised():
    w, conn = writer({"status": {"conditions": []}}, api_error(404), api_error(500))
    assert w.device_taint_rule("r") == {"status": {"conditions": []}}
    assert sent(conn)[0] == ("GET", "/apis/resource.k8s.io/v1/devicetaintrules/r", None, None, "application/json")
    assert w.device_taint_rule("r") is None
    with pytest.raises(ApiError):
        w.device_taint_rule("r")


# -- a UID-guarded delete or eviction of a pod that is another now -----------------------------------------------

def test_a_delete_without_a_uid_sends_no_preconditions():
    w, conn = writer({})
    w.delete_pod("llm", "kv-0")
    assert sent(conn) == [("DELETE", "/api/v1/namespaces/llm/pods/kv-0", None, None, "application/json")]


def test_a_409_on_a_uid_guarded_delete_names_the_pod_the_uid_and_the_apiservers_words():
    conflict = api_error(409, body_message="Precondition failed: UID in precondition: u-1, UID in object meta: u-2")
    with pytest.raises(ConflictError) as raised:
        writer(conflict)[0].delete_pod("llm", "kv-0", uid="u-1")
    assert str(raised.value) == ("pod llm/kv-0 is no longer the pod planned (uid u-1): "
                                 "Precondition failed: UID in precondition: u-1, UID in object meta: u-2")
    with pytest.raises(ConflictError) as raised:
        writer(api_error(409, "409: conflict"))[0].delete_pod("llm", "kv-0", uid="u-1")
    assert str(raised.value) == "pod llm/kv-0 is no longer the pod planned (uid u-1): 409: conflict"


def test_other_refusals_of_a_uid_guarded_delete_are_raised_as_they_are():
    with pytest.raises(ApiError) as raised:
        writer(api_error(403, "forbidden: pods"))[0].delete_pod("llm", "kv-0", uid="u-1")
    assert not isinstance(raised.value, ConflictError) and raised.value.status == 403
    with pytest.raises(ApiError) as raised:
        writer(api_error(409, "409: conflict"))[0].delete_pod("llm", "kv-0")  # no UID asked: not "another pod"
    assert not isinstance(raised.value, ConflictError)


def test_a_replaced_pods_eviction_without_the_apiservers_words_says_the_error():
    assert writer(api_error(409, "409: conflict"))[0].evict_pod("llm", "kv-0", uid="u-1") == \
        EvictionResult(EvictionOutcome.REPLACED, "409: conflict")

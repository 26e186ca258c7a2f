"""The live writer's requests and its reading of each apiserver answer, fast: what is sent (path, body, content type,
preconditions, the pod's own grace period unless one was chosen) and what each status means (gone, blocked by a
budget, failed, or an apiserver in trouble that pauses the drain). The real apiserver's answers are proven in
tests/integration; these pin what kube_writer.py makes of them."""

from __future__ import annotations

import pytest

from gputui.backends.base import BackendError, ConflictError, EvictionOutcome, EvictionResult
from gputui.backends.kube_errors import ApiError, Unreachable
from gputui.backends.kube_http import PROBE_TIMEOUT_S
from gputui.backends.kube_writer import BEYOND_NEEDS, ReviewFailed, allowed, review, whoami
from tests.support.fake_conn import Conn, api_error, writer

MERGE, STRATEGIC, JSONPATCH = ("application/merge-patch+json", "application/strategic-merge-patch+json",
                               "application/json-patch+json")


# -- cordon and annotations -----------------------------------------------------------------------------------

def test_cordon_and_uncordon_are_one_strategic_merge_patch_each():
    w, conn = writer()
    w.set_unschedulable("gpu-1", True)
    w.set_unschedulable("gpu-1", False)
    assert [(s["method"], s["path"], s["body"], s["content_type"]) for s in conn.sent] == [
        ("PATCH", "/api/v1/nodes/gpu-1", {"spec": {"unschedulable": True}}, STRATEGIC),
        ("PATCH", "/api/v1/nodes/gpu-1", {"spec": {"unschedulable": None}}, STRATEGIC)]


def test_annotations_are_a_merge_patch_with_the_resource_version_as_a_precondition():
    w, conn = writer()
    w.annotate_node("gpu-1", {"a": "1", "b": None}, resource_version="42")
    (sent,) = conn.sent
    assert (sent["method"], sent["path"], sent["content_type"]) == ("PATCH", "/api/v1/nodes/gpu-1", MERGE)
    assert sent["body"] == {"metadata": {"annotations": {"a": "1", "b": None}, "resourceVersion": "42"}}


def test_annotations_without_a_resource_version_are_unconditional():
    w, conn = writer()
    w.annotate_node("gpu-1", {"a": "1"})
    assert conn.sent[0]["body"] == {"metadata": {"annotations": {"a": "1"}}}


def test_a_node_that_moved_on_is_a_conflict():
    w, _ = writer(api_error(409))
    with pytest.raises(ConflictError, match="node gpu-1 changed since it was read") as err:
        w.annotate_node("gpu-1", {"a": "1"}, resource_version="41")
    assert err.value.__suppress_context__


@pytest.mark.parametrize("status", [403, 422, 500])
def test_any_other_refusal_of_an_annotation_is_raised_as_it_is(status):
    failure = api_error(status)
    w, _ = writer(failure)
    with pytest.raises(ApiError) as err:
        w.annotate_node("gpu-1", {"a": "1"}, resource_version="41")
    assert err.value is failure


def test_node_annotations_and_version_are_read_with_a_get():
    w, conn = writer({"metadata": {"annotations": {"x": "y"}, "resourceVersion": 77}})
    assert w.node_annotations("gpu-1") == ({"x": "y"}, "77")
    assert (conn.sent[0]["method"], conn.sent[0]["path"]) == ("GET", "/api/v1/nodes/gpu-1")


def test_a_node_without_metadata_has_no_annotations_and_no_version():
    assert writer({})[0].node_annotations("n") == ({}, "")
    assert writer({"metadata": None})[0].node_annotations("n") == ({}, "")
    assert writer({"metadata": {"annotations": None}})[0].node_annotations("n") == ({}, "")


# -- eviction ---------------------------------------------------------------------------------------------------

def test_an_eviction_leaves_the_grace_period_to_the_pod_unless_one_was_chosen():
    """No deleteOptions at all by default: a drain never sends gracePeriodSeconds 0 by accident."""
    w, conn = writer({}, {}, {})
    assert w.evict_pod("llm", "p-1") == EvictionResult(EvictionOutcome.EVICTED)
    w.evict_pod("llm", "p-1", grace_seconds=0)
    w.evict_pod("llm", "p-1", grace_seconds=45)
    assert [(s["method"], s["path"]) for s in conn.sent] == [("POST", "/api/v1/namespaces/llm/pods/p-1/eviction")] * 3
    assert conn.sent[0]["body"] == {"apiVersion": "policy/v1", "kind": "Eviction",
                                    "metadata": {"name": "p-1", "namespace": "llm"}}
    assert conn.sent[1]["body"]["deleteOptions"] == {"gracePeriodSeconds": 0}
    assert conn.sent[2]["body"]["deleteOptions"] == {"gracePeriodSeconds": 45}


def test_an_eviction_with_a_uid_carries_it_as_a_precondition_and_a_409_is_replaced():
    """The drain evicts the pod it planned, by its UID: another pod under the name (a StatefulSet's) is answered
    409 by the apiserver and is REPLACED, never evicted; without a UID a 409 stays a failure of that pod."""
    w, conn = writer({}, {})
    w.evict_pod("llm", "kv-0", uid="u-1")
    w.evict_pod("llm", "kv-0", grace_seconds=5, uid="u-1")
    assert conn.sent[0]["body"]["deleteOptions"] == {"preconditions": {"uid": "u-1"}}
    assert conn.sent[1]["body"]["deleteOptions"] == {"gracePeriodSeconds": 5, "preconditions": {"uid": "u-1"}}
    conflict = api_error(409, body_message="Precondition failed: UID in precondition: u-1, UID in object meta: u-2")
    assert writer(conflict)[0].evict_pod("llm", "kv-0", uid="u-1") == EvictionResult(
        EvictionOutcome.REPLACED, "Precondition failed: UID in precondition: u-1, UID in object meta: u-2")


def test_a_delete_with_a_uid_carries_it_as_a_precondition_and_a_409_is_a_conflict():
    w, conn = writer({})
    w.delete_pod("llm", "kv-0", grace_seconds=0, uid="u-1")
    assert (conn.sent[0]["query"], conn.sent[0]["body"]) == (
        {"gracePeriodSeconds": 0}, {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "u-1"}})
    with pytest.raises(ConflictError, match="no longer the pod planned"):
        writer(api_error(409))[0].delete_pod("llm", "kv-0", uid="u-1")


def test_an_eviction_of_a_pod_already_gone_is_gone():
    assert writer(api_error(404))[0].evict_pod("llm", "p") == EvictionResult(EvictionOutcome.GONE)


def test_a_budget_refusal_is_blocked_naming_the_budget():
    refusal = api_error(429, body_message="Cannot evict pod as it would violate the pod's disruption budget.",
                        causes=[{"reason": "DisruptionBudget", "message": "The disruption budget llm-pdb needs 2 "
                                 "healthy pods and has 2 currently"}, {"reason": "x"}])
    result = writer(refusal)[0].evict_pod("llm", "p")
    assert result == EvictionResult(EvictionOutcome.BLOCKED, "Cannot evict pod as it would violate the pod's "
                                    "disruption budget. The disruption budget llm-pdb needs 2 healthy pods and has "
                                    "2 currently")


def test_a_budget_refusal_without_words_still_says_something():
    result = writer(api_error(429, message="Too Many Requests"))[0].evict_pod("llm", "p")
    assert result == EvictionResult(EvictionOutcome.BLOCKED, "Too Many Requests")


def test_two_budget_causes_are_joined():
    refusal = api_error(429, body_message="no", causes=[{"message": "a"}, {"message": "b"}])
    assert writer(refusal)[0].evict_pod("llm", "p").reason == "no a; b"


def test_a_terminating_namespace_blocks_the_eviction():
    refusal = api_error(403, causes=[{"reason": "NamespaceTerminating", "message": "ns llm is terminating"}])
    assert writer(refusal)[0].evict_pod("llm", "p") == EvictionResult(EvictionOutcome.BLOCKED,
                                                                       "namespace is terminating")


def test_a_forbidden_eviction_fails_that_pod():
    refusal = api_error(403, message="forbidden", body_message="pods \"p\" is forbidden: cannot create eviction",
                        causes=[{"reason": "Other"}])
    assert writer(refusal)[0].evict_pod("llm", "p") == EvictionResult(
        EvictionOutcome.FAILED, 'pods "p" is forbidden: cannot create eviction')


def test_a_failed_eviction_without_words_says_the_error():
    assert writer(api_error(422, message="Unprocessable"))[0].evict_pod("llm", "p") == EvictionResult(
        EvictionOutcome.FAILED, "Unprocessable")


def test_a_pod_under_two_budgets_fails_that_pod():
    """kube-apiserver answers 500 "more than one PodDisruptionBudget": that pod fails, the drain goes on."""
    refusal = api_error(500, message="This pod has more than one PodDisruptionBudget, which the eviction "
                        "subresource does not support.")
    assert writer(refusal)[0].evict_pod("llm", "p").outcome is EvictionOutcome.FAILED


@pytest.mark.parametrize("status", [401, 500, 502, 503, 504])
def test_expired_credentials_or_an_apiserver_in_trouble_are_raised_so_the_drain_pauses(status):
    failure = api_error(status)
    with pytest.raises(ApiError) as err:
        writer(failure)[0].evict_pod("llm", "p")
    assert err.value is failure


@pytest.mark.parametrize("status", [400, 409, 422, 501])
def test_other_refusals_fail_that_pod_and_are_not_retried(status):
    assert writer(api_error(status))[0].evict_pod("llm", "p").outcome is EvictionOutcome.FAILED


# -- deletion, reads and patches --------------------------------------------------------------------------------

def test_a_delete_leaves_the_grace_period_to_the_pod_unless_one_was_chosen():
    w, conn = writer({}, {}, {})
    w.delete_pod("llm", "p")
    w.delete_pod("llm", "p", grace_seconds=0)
    w.delete_pod("llm", "p", grace_seconds=30)
    assert [(s["method"], s["path"], s["query"]) for s in conn.sent] == [
        ("DELETE", "/api/v1/namespaces/llm/pods/p", None),
        ("DELETE", "/api/v1/namespaces/llm/pods/p", {"gracePeriodSeconds": 0}),
        ("DELETE", "/api/v1/namespaces/llm/pods/p", {"gracePeriodSeconds": 30})]


def test_deleting_a_pod_already_gone_is_fine_and_any_other_failure_is_raised():
    writer(api_error(404))[0].delete_pod("llm", "p")
    with pytest.raises(ApiError):
        writer(api_error(403))[0].delete_pod("llm", "p")


def test_get_object_reads_the_object():
    w, conn = writer({"kind": "HTTPRoute"})
    assert w.get_object("gateway.networking.k8s.io", "v1", "httproutes", "llm", "chat") == {"kind": "HTTPRoute"}
    assert (conn.sent[0]["method"], conn.sent[0]["path"]) == (
        "GET", "/apis/gateway.networking.k8s.io/v1/namespaces/llm/httproutes/chat")


def test_a_list_is_read_page_by_page():
    w, conn = writer({"items": [1, 2], "metadata": {"continue": "c1"}}, {"items": None, "metadata": {"continue": "c2"}},
                     {"items": [3]})
    assert w.list_objects("apps", "v1", "replicasets", "llm", "app=chat") == [1, 2, 3]
    assert [s["method"] for s in conn.sent] == ["GET"] * 3
    assert [s["query"] for s in conn.sent] == [{"labelSelector": "app=chat", "limit": 500, "continue": None},
                                               {"labelSelector": "app=chat", "limit": 500, "continue": "c1"},
                                               {"labelSelector": "app=chat", "limit": 500, "continue": "c2"}]
    assert conn.sent[0]["path"] == "/apis/apps/v1/namespaces/llm/replicasets"


def test_a_list_without_a_selector_asks_for_none():
    w, conn = writer({"items": [1], "metadata": None})
    assert w.list_objects("apps", "v1", "replicasets", "llm") == [1]
    assert conn.sent[0]["query"] == {"labelSelector": None, "limit": 500, "continue": None}


@pytest.mark.parametrize("patch_type, content_type", [("merge", MERGE), ("json", JSONPATCH), ("strategic", STRATEGIC)])
def test_each_patch_type_has_its_content_type(patch_type, content_type):
    w, conn = writer({"ok": 1})
    assert w.patch_object("argoproj.io", "v1alpha1", "rollouts", "llm", "chat", {"a": 1}, patch_type) == {"ok": 1}
    assert (conn.sent[0]["method"], conn.sent[0]["path"], conn.sent[0]["content_type"], conn.sent[0]["body"]) == (
        "PATCH", "/apis/argoproj.io/v1alpha1/namespaces/llm/rollouts/chat", content_type, {"a": 1})


def test_a_merge_patch_is_the_default_and_a_subresource_goes_on_the_path():
    w, conn = writer({})
    w.patch_object("argoproj.io", "v1alpha1", "rollouts", "llm", "chat", {"status": {"abort": True}},
                   subresource="status")
    assert conn.sent[0]["path"] == "/apis/argoproj.io/v1alpha1/namespaces/llm/rollouts/chat/status"
    assert conn.sent[0]["content_type"] == MERGE


def test_a_patch_on_an_object_that_moved_on_is_a_conflict():
    w, _ = writer(api_error(409, message="conflict"))
    with pytest.raises(ConflictError) as err:
        w.patch_object("gateway.networking.k8s.io", "v1", "httproutes", "llm", "chat", {"a": 1})
    assert str(err.value) == 'httproutes.gateway.networking.k8s.io "chat" changed since it was read (conflict)'


def test_a_failed_test_operation_is_a_conflict_and_a_schema_error_is_not():
    ops = [{"op": "test", "path": "/spec/x", "value": 1}, {"op": "replace", "path": "/spec/x", "value": 2}]
    with pytest.raises(ConflictError):
        writer(api_error(422))[0].patch_object("g", "v1", "things", "ns", "n", ops, "json")
    schema = api_error(422, causes=[{"field": "spec.x", "message": "must be >= 0"}])
    with pytest.raises(ApiError) as err:
        writer(schema)[0].patch_object("g", "v1", "things", "ns", "n", ops, "json")
    assert err.value is schema and not isinstance(err.value, ConflictError)


def test_the_uid_of_the_pod_now_under_a_name():
    w, conn = writer({"metadata": {"uid": "u-1"}})
    assert w.pod_uid("llm", "p") == "u-1"
    assert (conn.sent[0]["method"], conn.sent[0]["path"]) == ("GET", "/api/v1/namespaces/llm/pods/p")
    assert writer(api_error(404))[0].pod_uid("llm", "p") is None
    assert writer({})[0].pod_uid("llm", "p") is None


@pytest.mark.parametrize("status", [401, 403, 500, 503])
def test_a_pod_read_that_fails_is_never_gone(status):
    """Fail closed: only a 404 says the pod is gone; any other failure is raised (the drain pauses)."""
    with pytest.raises(ApiError):
        writer(api_error(status))[0].pod_uid("llm", "p")


# -- who we are and what we may do -----------------------------------------------------------------------------

def test_whoami_asks_a_self_subject_review_quickly():
    conn = Conn({"status": {"userInfo": {"username": "alice@corp"}}})
    assert whoami(conn) == "alice@corp"  # type: ignore[arg-type]
    (sent,) = conn.sent
    assert (sent["method"], sent["path"], sent["timeout"]) == (
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", PROBE_TIMEOUT_S)
    assert sent["body"] == {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def test_whoami_falls_back_to_the_kubeconfig_user():
    assert whoami(Conn({"status": {"userInfo": {}}})) == "kubeconfig-user"  # type: ignore[arg-type]
    assert whoami(Conn({})) == "kubeconfig-user"  # type: ignore[arg-type]
    assert whoami(Conn(api_error(404))) == "kubeconfig-user"  # type: ignore[arg-type]
    nobody = Conn(api_error(403))
    nobody.user = ""
    assert whoami(nobody) == "unknown"  # type: ignore[arg-type]


def test_an_access_review_asks_for_the_verb_and_resource_quickly():
    conn = Conn({"status": {"allowed": True}})
    assert allowed(conn, "create", "pods", "eviction") is True  # type: ignore[arg-type]
    (sent,) = conn.sent
    assert (sent["method"], sent["path"], sent["timeout"]) == (
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", PROBE_TIMEOUT_S)
    assert sent["body"] == {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                            "spec": {"resourceAttributes": {"verb": "create", "resource": "pods",
                                                            "subresource": "eviction", "group": ""}}}


def test_the_writer_acts_as_the_identity_it_was_given():
    assert writer()[0].identity == "ops@example"


@pytest.mark.parametrize("answer", [["not", "an", "object"], {"status": "yes"}, {"status": {"allowed": "true"}},
                                    {"status": {}}, {}])
def test_an_answer_without_a_boolean_verdict_is_no_verdict(answer):
    """A proxy's page or an empty body says nothing: never read as allowed, never a crash."""
    with pytest.raises(ReviewFailed, match=r"^the access review's answer held no verdict$"):
        allowed(Conn(answer), "patch", "nodes")  # type: ignore[arg-type]
    assert review(Conn(answer), "patch", "nodes") is None  # type: ignore[arg-type]


def test_a_review_that_failed_carries_its_cause():
    with pytest.raises(ReviewFailed) as err:
        allowed(Conn(api_error(503, message="503 Service Unavailable")), "patch", "nodes")  # type: ignore[arg-type]
    assert str(err.value) == "503 Service Unavailable" and err.value.__suppress_context__


def test_a_review_asks_for_no_subresource_unless_named():
    conn = Conn({"status": {"allowed": True}})
    allowed(conn, "patch", "nodes")  # type: ignore[arg-type]
    assert conn.sent[0]["body"]["spec"]["resourceAttributes"] == {"verb": "patch", "resource": "nodes",
                                                                  "subresource": "", "group": ""}


def test_a_namespaced_review_asks_in_that_namespace_through_both_entries():
    """A requestor drain's NodeMaintenance is made in maintenance_namespace: its review is asked there (a role bound
    in that namespace only answers there), by `allowed` (start-up) and `review` alike."""
    for ask in (allowed, review):
        conn = Conn({"status": {"allowed": True}})
        assert ask(conn, "create", "nodemaintenances", group="maintenance.nvidia.com",  # type: ignore[operator]
                   namespace="maint") is True
        assert conn.sent[0]["body"]["spec"]["resourceAttributes"] == {
            "verb": "create", "resource": "nodemaintenances", "subresource": "", "group": "maintenance.nvidia.com",
            "namespace": "maint"}


def test_a_review_that_says_no_is_not_allowed():
    assert allowed(Conn({"status": {"allowed": False}}), "patch", "nodes") is False  # type: ignore[arg-type]


def test_a_review_that_got_no_verdict_is_never_allowed():
    """Fail closed: an error answering the review is not a yes (the CLI words it; tests/unit/test_unreachable_…)."""
    for answer in (api_error(403), api_error(500)):
        try:
            verdict = allowed(Conn(answer), "patch", "nodes")  # type: ignore[arg-type]
        except BackendError:
            continue
        assert verdict is False


def test_an_apiserver_nobody_reaches_is_not_a_denial():
    with pytest.raises(Unreachable):
        allowed(Conn(Unreachable("https://api:6443", "connection refused")), "patch", "nodes")  # type: ignore[arg-type]


def test_review_says_unknown_when_the_review_fails():
    assert review(Conn({"status": {"allowed": True}}), "get", "secrets") is True  # type: ignore[arg-type]
    assert review(Conn({"status": {"allowed": False}}), "get", "secrets") is False  # type: ignore[arg-type]
    assert review(Conn(api_error(500)), "get", "secrets") is None  # type: ignore[arg-type]
    assert review(Conn(Unreachable("h", "refused")), "get", "secrets") is None  # type: ignore[arg-type]
    conn = Conn({"status": {"allowed": True}})
    review(conn, "create", "clusterrolebindings", group="rbac.authorization.k8s.io")  # type: ignore[arg-type]
    assert conn.sent[0]["body"]["spec"]["resourceAttributes"] == {
        "verb": "create", "resource": "clusterrolebindings", "subresource": "", "group": "rbac.authorization.k8s.io"}


def test_grants_beyond_needs_are_each_asked():
    w, conn = writer({"status": {"allowed": False}}, {"status": {"allowed": True}}, api_error(500),
                     {"status": {"allowed": False}})
    assert w.beyond_needs() == {"read secrets": False, "delete nodes": True, "bind cluster roles": None,
                                "do anything (cluster-admin)": False}
    assert [s["body"]["spec"]["resourceAttributes"] for s in conn.sent] == [
        {"verb": a["verb"], "resource": a["resource"], "subresource": "", "group": a.get("group", "")}
        for a in BEYOND_NEEDS.values()]


def test_errors_are_backend_errors():
    assert issubclass(ApiError, BackendError) and issubclass(Unreachable, BackendError)

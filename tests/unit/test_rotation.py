"""Which label takes one pod out of rotation (every Service and InferencePool that sends it traffic) while its
owner keeps it: table-driven over the selectors a cluster holds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputui.backends.kube_objects import deployment_record
from gputui.ops.drain.plan import plan_drain
from gputui.policy.rotation import RotationState, remedy, rotation_of
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, Node, PodSelector

LABELS = {"app": "llama", "serving": "true", "pool": "llama", "pod-template-hash": "abc"}
DEPLOY = PodSelector("Deployment", "ns", "llama", {"app": "llama"}, frozenset({"app"}))


def pod(**kw) -> InferencePod:
    base = dict(namespace="ns", name="llama-1", uid="u1", node="n1", service="llama", version="v1",
                labels=LABELS, session_signal=True, gpu_request=1, owner_kind="ReplicaSet")
    base.update(kw)
    return InferencePod(**base)


def snap(*selectors: PodSelector, pods=None) -> ClusterSnapshot:
    return ClusterSnapshot(0.0, "t", nodes=(Node("n1", ready=True, unschedulable=False, gpu_product="H100",
                                         gpu_capacity=8, gpu_allocatable=8),),
                           pods=pods or (pod(),), selectors=selectors, session_counts={("ns", "llama-1"): 3})


def svc(match: dict, name: str = "llama", kind: str = "Service") -> PodSelector:
    return PodSelector(kind, "ns", name, match)


@pytest.mark.parametrize("selectors, state, labels", [
    ((svc({"app": "llama", "serving": "true"}), DEPLOY), RotationState.SWITCH, ("serving",)),
    # One label serves both paths when both select on it.
    ((svc({"app": "llama", "serving": "true"}), svc({"serving": "true"}, "p", "InferencePool"), DEPLOY),
     RotationState.SWITCH, ("serving",)),
    # No common key: one per path.
    ((svc({"app": "llama", "serving": "true"}), svc({"pool": "llama"}, "p", "InferencePool"), DEPLOY),
     RotationState.SWITCH, ("pool", "serving")),
    ((svc({"app": "llama"}), DEPLOY), RotationState.NO_SWITCH, ()),
    # The ReplicaSet selects on its template hash: removing it would orphan the pod.
    ((svc({"app": "llama", "pod-template-hash": "abc"}), DEPLOY), RotationState.NO_SWITCH, ()),
    # A key only in the owner's matchExpressions is still the owner's.
    ((svc({"app": "llama", "serving": "true"}),
      PodSelector("Deployment", "ns", "llama", {"app": "llama"}, frozenset({"app", "serving"}))),
     RotationState.NO_SWITCH, ()),
    ((DEPLOY,), RotationState.NOT_ROUTED, ()),
    # A Service in another namespace never selects it.
    ((PodSelector("Service", "other", "llama", {"app": "llama", "serving": "true"}), DEPLOY),
     RotationState.NOT_ROUTED, ()),
])
def test_the_label_that_takes_a_pod_out_of_rotation(selectors, state, labels):
    r = rotation_of(pod(), snap(*selectors))
    assert (r.state, r.labels) == (state, labels), r.describe()


def test_what_was_not_read_is_unknown_never_a_switch():
    unread = ClusterSnapshot(0.0, "t", pods=(pod(),))
    assert rotation_of(pod(), unread).state is RotationState.UNKNOWN
    # A StatefulSet's selector is not read: any label might be its own.
    sts = rotation_of(pod(owner_kind="StatefulSet"), snap(svc({"app": "llama", "serving": "true"}), DEPLOY))
    assert sts.state is RotationState.UNKNOWN and "StatefulSet" in sts.why
    # A pod no controller owns loses nothing by any label.
    bare = rotation_of(pod(owner_kind=""), snap(svc({"app": "llama"})))
    assert bare.state is RotationState.SWITCH and bare.labels == ("app",)


def test_the_remedy_labels_the_template_before_the_selector():
    r = rotation_of(pod(), snap(svc({"app": "llama"}), svc({"app": "llama"}, "p", "InferencePool"), DEPLOY))
    commands = remedy(r, pod(), "deployment/llama")
    assert commands[0].startswith("kubectl -n ns patch deployment/llama --type merge -p ")
    assert '"template": {"metadata": {"labels": {"serving": "true"}}}' in commands[0]
    assert "rollout status deployment/llama" in commands[1]
    assert commands[2].startswith("kubectl -n ns patch service llama") and '"selector": {"serving": "true"}' in commands[2]
    assert '"matchLabels": {"serving": "true"}' in commands[3]


def test_a_drain_plan_says_when_new_sessions_keep_arriving_before_anything_is_written():
    stuck = plan_drain(snap(svc({"app": "llama"}), DEPLOY), "n1")
    assert any(w.startswith("ns/llama-1: new sessions keep arriving: no label can take it out of rotation: "
                            "Service ns/llama selects it only on app") for w in stuck.warnings), stuck.warnings
    assert stuck.pods[0].rotation is None


def test_a_pod_goes_out_of_rotation_only_while_its_version_keeps_enough_serving():
    other = pod(name="llama-2", uid="u2", node="n2")
    serving = (svc({"app": "llama", "serving": "true"}), DEPLOY)
    out = plan_drain(snap(*serving, pods=(pod(), other)), "n1").pods[0]
    assert out.rotation is not None and out.rotation.labels == {"serving": "true"} and out.rotation.uid == "u1"
    assert "out of rotation (label serving removed" in out.rotation_note
    # Its version's only pod: taken out, nothing would serve it.
    alone = plan_drain(snap(*serving), "n1")
    assert alone.pods[0].rotation is None
    assert any("kept in rotation for capacity, as Service ns/llama would have no pod serving; it goes out when "
               "another pod serves in its place" in w for w in alone.warnings), \
        alone.warnings
    # A PDB that needs 2 healthy: one other pod serving is not enough.
    from gputui.vocabulary.model import Budget

    budget = Budget("ns", "llama", {"app": "llama"}, desired_healthy=2, current_healthy=2, disruptions_allowed=0)
    held = plan_drain(replace(snap(*serving, pods=(pod(), other)), budgets=(budget,)), "n1").pods[0]
    assert held.rotation is None and "PodDisruptionBudget llama needs 2 pods serving, 1 would be" in held.rotation_note


def test_a_workloads_selector_is_read_with_its_expression_keys():
    record = deployment_record({"kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"}, "spec": {
        "selector": {"matchLabels": {"app": "llama"},
                     "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]},
        "template": {"metadata": {"labels": {"app": "llama", "tier": "gpu", "serving": "true"}}}}})
    assert record.selector == {"app": "llama"} and record.selector_keys == {"app", "tier"}

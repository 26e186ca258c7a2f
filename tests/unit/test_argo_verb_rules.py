"""Argo Rollouts' verbs as gputui sends them (read from kubectl-argo-rollouts v1.8.3): which half of each patch
is sent in which case, and undo's choice of revision and template."""

from __future__ import annotations

from gputui.ops.traffic.argo import (
    HASH_LABEL,
    REVISION,
    _derives,
    _revision,
    _without_hash,
    bodies,
    owned_replicasets,
    undo_body,
)

CANARY = {"spec": {"strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}, {"setWeight": 50}]}}}}


def rollout(status=None, paused=False, steps=True) -> dict:
    spec = dict(CANARY["spec"]) if steps else {"strategy": {"blueGreen": {}}}
    if paused:
        spec = {**spec, "paused": True}
    return {"metadata": {"uid": "ro-1"}, "spec": spec, "status": status or {}}


def test_abort_and_retry_are_status_patches_alone():
    assert bodies("abort", rollout()) == (({"status": {"abort": True}}, None), "")
    assert bodies("retry", rollout()) == (({"status": {"abort": False}}, None), "")


def test_promote_full_unless_already_fully_promoted():
    assert bodies("promote-full", rollout({"currentPodHash": "a", "stableRS": "b"})) == (
        ({"status": {"promoteFull": True}}, None), "")
    assert bodies("promote-full", rollout({"currentPodHash": "a", "stableRS": "a"})) == (
        (None, None), "the Rollout is fully promoted already (its current pods are its stable ones)")
    assert bodies("promote-full", rollout({}))[0] == ({"status": {"promoteFull": True}}, None)  # no hash: not known


def test_promote_a_paused_step_clears_the_pause_conditions():
    status = {"pauseConditions": [{"reason": "CanaryPauseStep"}], "currentStepIndex": 1}
    assert bodies("promote", rollout(status)) == (({"status": {"pauseConditions": None}}, None), "")


def test_promote_a_rollout_paused_by_hand_also_unpauses_its_spec():
    status = {"pauseConditions": [{"reason": "PausedByUser"}]}
    assert bodies("promote", rollout(status, paused=True)) == (
        ({"status": {"pauseConditions": None}}, {"spec": {"paused": False}}), "")
    assert bodies("promote", rollout({}, paused=True, steps=False)) == ((None, {"spec": {"paused": False}}), "")


def test_promote_between_pauses_moves_to_the_next_step_and_not_past_the_last():
    assert bodies("promote", rollout({"currentStepIndex": 0})) == (
        ({"status": {"pauseConditions": None, "currentStepIndex": 1}}, None), "")
    assert bodies("promote", rollout({"currentStepIndex": 2}))[0][0] == {
        "status": {"pauseConditions": None, "currentStepIndex": 3}}
    assert bodies("promote", rollout({"currentStepIndex": 3}))[0][0] == {  # at the end: stays at the end
        "status": {"pauseConditions": None, "currentStepIndex": 3}}
    assert bodies("promote", rollout({}))[0][0] == {"status": {"pauseConditions": None, "currentStepIndex": 1}}


def test_promote_an_inconclusive_analysis_pause_moves_the_step_too():
    status = {"canary": {"currentStepAnalysisRunStatus": {"status": "Inconclusive"}},
              "pauseConditions": [{"reason": "InconclusiveAnalysisRun"}], "controllerPause": True, "currentStepIndex": 1}
    assert bodies("promote", rollout(status)) == (
        ({"status": {"pauseConditions": None, "controllerPause": False, "currentStepIndex": 2}}, None), "")


def test_an_inconclusive_analysis_needs_every_condition_to_move_the_step():
    base = {"canary": {"currentStepAnalysisRunStatus": {"status": "Inconclusive"}},
            "pauseConditions": [{"reason": "x"}], "controllerPause": True, "currentStepIndex": 1}
    for drop in ("pauseConditions", "controllerPause"):
        status = {k: v for k, v in base.items() if k != drop}
        assert "controllerPause" not in (bodies("promote", rollout(status))[0][0] or {}).get("status", {})
    other = {**base, "canary": {"currentStepAnalysisRunStatus": {"status": "Failed"}}}
    assert bodies("promote", rollout(other))[0][0] == {"status": {"pauseConditions": None}}
    no_steps = bodies("promote", rollout(base, steps=False))
    assert no_steps == (({"status": {"pauseConditions": None}}, None), "")


def test_promote_with_nothing_to_promote_sends_nothing():
    assert bodies("promote", rollout({}, steps=False)) == (
        (None, None), "nothing to promote: the Rollout is neither paused nor on a canary step")
    empty_steps = {"metadata": {}, "spec": {"strategy": {"canary": {"steps": []}}}, "status": {}}
    assert bodies("promote", empty_steps)[0] == (None, None)


def test_a_replicasets_revision_as_the_plugin_reads_it():
    assert _revision({"metadata": {"annotations": {REVISION: "7"}}}) == 7
    assert _revision({"metadata": {"annotations": {}}}) == 0
    assert _revision({}) == 0
    assert _revision({"metadata": {"annotations": {REVISION: "seven"}}}) is None


def test_derivative_equality_ignores_unset_fields_only():
    assert _derives({"a": 1, "b": None, "c": {}, "d": [], "e": ""}, {"a": 1, "x": 2})
    assert not _derives({"a": 1}, {"a": 2})
    assert not _derives({"a": {"b": 1}}, {"a": 5})
    assert _derives([1, {"a": 1}], [1, {"a": 1, "b": 2}])
    assert not _derives([1, 2], [1, 2, 3]) and not _derives([1], {"0": 1}) and not _derives([1, 2], [1, 3])
    assert _derives("x", "x") and not _derives("x", "y") and _derives(None, "anything")


def test_the_hash_label_is_dropped_from_a_copy():
    template = {"metadata": {"labels": {HASH_LABEL: "abc", "app": "chat"}}, "spec": {"x": 1}}
    assert _without_hash(template) == {"metadata": {"labels": {"app": "chat"}}, "spec": {"x": 1}}
    assert template["metadata"]["labels"][HASH_LABEL] == "abc"  # the original untouched
    assert _without_hash({"spec": {}}) == {"spec": {}}


def rs(name, revision, image, owner="ro-1", controller=True, hash_="h"):
    return {"metadata": {"name": name, "annotations": {REVISION: str(revision)} if revision is not None else {},
                         "ownerReferences": [{"uid": owner, "controller": controller}]},
            "spec": {"template": {"metadata": {"labels": {HASH_LABEL: hash_, "app": "chat"}},
                                  "spec": {"containers": [{"image": image}]}}}}


def test_only_replicasets_the_rollout_controls_are_its_own():
    mine, other, not_ctrl = rs("a", 1, "i"), rs("b", 2, "i", owner="ro-2"), rs("c", 3, "i", controller=False)
    assert owned_replicasets(rollout(), [mine, other, not_ctrl]) == [mine]


def test_undo_goes_back_to_the_revision_before_the_latest():
    ro = rollout()
    ro["spec"]["template"] = {"metadata": {"labels": {"app": "chat"}}, "spec": {"containers": [{"image": "v3"}]}}
    history = [rs("c", 3, "v3"), rs("a", 1, "v1"), rs("b", 2, "v2"), rs("x", "junk", "vx")]
    ops, why, revision = undo_body(ro, history)
    assert (why, revision) == ("", 2)
    assert ops == [{"op": "replace", "path": "/spec/template",
                    "value": {"metadata": {"labels": {"app": "chat"}}, "spec": {"containers": [{"image": "v2"}]}}}]


def test_undo_to_a_named_revision_or_says_which_there_are():
    ro = rollout()
    ro["spec"]["template"] = {"spec": {"containers": [{"image": "v3"}]}}
    history = [rs("a", 1, "v1"), rs("b", 2, "v2"), rs("c", 3, "v3")]
    assert undo_body(ro, history, to_revision=1)[2] == 1
    assert undo_body(ro, history, to_revision=1)[0][0]["value"]["spec"] == {"containers": [{"image": "v1"}]}
    assert undo_body(ro, history, to_revision=9) == (None, "revision 9 is not in its history (1, 2, 3)", None)
    assert undo_body(ro, [], to_revision=9) == (None, "revision 9 is not in its history (none)", None)


def test_undo_with_no_earlier_revision_or_to_the_same_template_sends_nothing():
    ro = rollout()
    ro["spec"]["template"] = {"spec": {"containers": [{"image": "v1"}]}}
    assert undo_body(ro, [rs("a", 1, "v1")]) == (None, "no earlier revision in its history to go back to", None)
    assert undo_body(ro, [rs("a", 1, "v1"), rs("b", 2, "v2")], to_revision=1) == (
        None, "its template already matches revision 1", 1)


def test_two_replicasets_claiming_one_revision_do_not_break_undo():
    """Sorted by revision alone: two ReplicaSets with the same revision are never compared as objects (a crash)."""
    ro = rollout()
    ro["spec"]["template"] = {"spec": {"containers": [{"image": "v3"}]}}
    ops, why, revision = undo_body(ro, [rs("a", 1, "v1"), rs("b", 1, "v1b"), rs("c", 2, "v3")])
    assert why == "" and revision == 1 and ops is not None

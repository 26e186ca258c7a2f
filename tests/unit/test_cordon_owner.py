"""Cordons carry an owner (issue 40 item 2), fast: the record (format, parse, bounds, hostile text), the expiry
input, who holds a node as an uncordon sees it, and the cordon and uncordon writes with their audit entries."""

from __future__ import annotations

import json

import pytest

from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.cordon import OwnerRefused, plan_cordon, run_cordon
from gputui.policy.cordon_owner import UNRECORDED, cordon_owner
from gputui.policy.cordon_record import CordonRecord, clean_reason, clean_ticket, parse_expiry, read_record
from gputui.policy.disruptions import node_disruptions
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.disruptions import CORDON_RECORD, DRAIN_LEASE
from gputui.vocabulary.model import DRAIN_PHASE_ANNOTATION, Node
from gputui.vocabulary.scheduling import NodeScheduling, Taint

NOW = 1_800_000_000.0  # 2027-01-15


def node(unschedulable=True, annotations=None, labels=None, taints=(), upgrade_state="") -> Node:
    return Node(name="gpu-1", ready=True, unschedulable=unschedulable, gpu_product="H100", gpu_capacity=8,
                gpu_allocatable=8, upgrade_state=upgrade_state, annotations=annotations or {}, labels=labels or {},
                scheduling=NodeScheduling(taints=tuple(taints)) if taints else None)


def recorded_by(who: str, expires: float | None = None, reason: str = "kernel 6.8 rollout") -> dict[str, str]:
    return {CORDON_RECORD: CordonRecord(who, reason, NOW - 3600, "OPS-12", expires).to_annotation()}


# -- the record ------------------------------------------------------------------------------------------------

def test_the_record_is_compact_json_and_reads_back_whole():
    record = CordonRecord("alice@example.com", "kernel 6.8 rollout", NOW, "OPS-12", NOW + 4 * 3600)
    text = record.to_annotation()
    assert text == ('{"by":"alice@example.com","expires":"2027-01-15T12:00:00Z","reason":"kernel 6.8 rollout",'
                    '"since":"2027-01-15T08:00:00Z","ticket":"OPS-12"}')
    assert read_record({CORDON_RECORD: text}) == record
    bare = CordonRecord("bob", "disk", NOW)
    assert json.loads(bare.to_annotation()) == {"by": "bob", "reason": "disk", "since": "2027-01-15T08:00:00Z"}
    assert read_record({CORDON_RECORD: bare.to_annotation()}) == bare
    assert read_record({}) is None


@pytest.mark.parametrize("text, fragment", [
    ("", "a reason is required"), ("   ", "a reason is required"),
    ("x" * 201, "201 characters: at most 200"),
    ("line one\nline two", "control character or a line break"), ("tab\there", "control character"),
    ("\x1b]0;pwned\x07", "control character"), ("bidi \u202e", "control character"),
    ("token=abc123", "credential"), ("Authorization: Bearer abcdefghijkl", "credential"),
    ("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.sig", "credential"), ("key AKIAIOSFODNN7EXAMPLE", "credential"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123", "credential"), ("paste Zk3qL9xWv2TbN8mR4yHc7PdA1sE6uJ0o", "credential"),
])
def test_a_reason_is_refused_in_one_line_naming_why(text, fragment):
    with pytest.raises(ValueError, match=fragment) as caught:
        clean_reason(text)
    assert "\n" not in str(caught.value)


def test_a_good_reason_and_ticket_pass_stripped_and_a_git_hash_is_no_credential():
    assert clean_reason("  bad NVLink, RMA 4711 ") == "bad NVLink, RMA 4711"
    assert clean_reason("x" * 200) == "x" * 200
    assert clean_reason("revert to 3f2a9c1b7d8e4f5a6b7c8d9e0f1a2b3c4d5e6f7a")  # one case: a hash, not a key
    assert clean_ticket("") == "" and clean_ticket("https://jira.example.com/browse/OPS-12") != ""
    with pytest.raises(ValueError, match="at most 80"):
        clean_ticket("T" * 81)


def test_expiry_from_a_duration_or_an_iso_date_and_refused_when_past_or_garbage():
    assert parse_expiry("", NOW) is None
    assert parse_expiry("4h", NOW) == NOW + 4 * 3600
    assert parse_expiry("2d", NOW) == NOW + 2 * 86400
    assert parse_expiry("2027-01-20", NOW) == 1_800_403_200.0  # midnight UTC
    assert parse_expiry("2027-01-20T18:00+01:00", NOW) == 1_800_403_200.0 + 17 * 3600
    for text, fragment in (("yesterday", "neither a duration"), ("2027-01-01", "in the past"),
                           ("0h", "longer than 0"), ("400d", "at most"), ("2029-01-01", "more than a year")):
        with pytest.raises(ValueError, match=fragment):
            parse_expiry(text, NOW)


@pytest.mark.parametrize("raw", ["not json", "[]", '{"reason": "no by"}', '{"by": 7}', '{"by": "  "}',
                                 "{" * 20000])
def test_a_record_that_is_no_record_is_named_unreadable_never_raises(raw):
    record = read_record({CORDON_RECORD: raw})
    assert record is not None and record.problem and record.by == ""
    assert "cannot be read" in record.words()


def test_hostile_text_read_back_is_cut_and_made_visible():
    raw = json.dumps({"by": "mallory\x1b[2J", "reason": "\x1b]0;title\x07" + "r" * 500, "since": "garbage",
                      "ticket": 7, "expires": "2027-13-45T00:00:00Z"})
    record = read_record({CORDON_RECORD: raw})
    assert record is not None and not record.problem
    assert "\x1b" not in record.by + record.reason and record.by.startswith("mallory␛")
    assert len(record.reason) < 260 and "chars)" in record.reason
    assert record.since is None and record.expires is None and record.ticket == ""


# -- who holds the node ------------------------------------------------------------------------------------------

NVSENTINEL_LABELS = {"k8saas.nvidia.com/cordon-by": "NVSentinel",
                     "k8saas.nvidia.com/cordon-timestamp": "2027-01-15T07-00-00Z",
                     "dgxc.nvidia.com/nvsentinel-state": "quarantined"}
NVSENTINEL_NOTES = {"quarantineHealthEvent": json.dumps([{"checkName": "GpuXidError",
                                                          "message": "XID 79 GPU has fallen off the bus"}]),
                    "quarantineHealthEventIsCordoned": "True"}


def test_nvsentinel_holds_it_and_the_words_name_it_with_why_and_since():
    owner = cordon_owner(node(labels=NVSENTINEL_LABELS, annotations=NVSENTINEL_NOTES), "alice", NOW)
    assert owner.foreign
    assert owner.words() == ("NVSentinel quarantined it: GpuXidError: XID 79 GPU has fallen off the bus "
                             "(since 2027-01-15 07:00 UTC)")


def test_nvsentinel_words_lead_with_what_it_does_a_maintenance_request_alone_is_no_quarantine():
    """One NVSentinel hold merges its quarantine with its requests: the words lead with the quarantine only when
    there is one, and never repeat it inside. (Before: an MR alone read "NVSentinel quarantined it".)"""
    from gputui.policy.cordon_owner import holder_words
    from gputui.vocabulary.disruptions import Disruption

    request = Disruption("nvsentinel", "Emitted", None, "under maintenance: MaintenanceRequest mr-1")
    assert holder_words(request) == "NVSentinel holds it (Emitted): under maintenance: MaintenanceRequest mr-1"
    both = Disruption("nvsentinel", "AwaitingExternalSystem", None,
                      "ExternalRemediationRequest err-1 awaits its external system; quarantined by NVSentinel; XID 79")
    assert holder_words(both) == ("NVSentinel quarantined it (AwaitingExternalSystem): ExternalRemediationRequest "
                                  "err-1 awaits its external system; XID 79")


@pytest.mark.parametrize("case, foreign", [
    (dict(upgrade_state="pod-restart-required"), True),
    (dict(upgrade_state="upgrade-failed"), False),  # the operator left it to a person
    (dict(upgrade_state="upgrade-required"), False),  # queued: the operator has not cordoned it
    (dict(taints=[Taint("karpenter.sh/disrupted", "", "NoSchedule")]), True),
    (dict(taints=[Taint("ToBeDeletedByClusterAutoscaler", str(int(NOW)), "NoSchedule")]), True),
    (dict(taints=[Taint("DeletionCandidateOfClusterAutoscaler", str(int(NOW)), "PreferNoSchedule")]), False),
    (dict(annotations={DRAIN_PHASE_ANNOTATION: "evicting", DRAIN_LEASE: json.dumps({"renewed": NOW - 5})}), True),
    (dict(annotations={DRAIN_PHASE_ANNOTATION: "evicting", DRAIN_LEASE: json.dumps({"renewed": NOW - 600})}), False),
    (dict(annotations={DRAIN_PHASE_ANNOTATION: "done"}), False),  # a finished drain: the uncordon after it
    (dict(annotations=recorded_by("bob")), True),
    (dict(annotations=recorded_by("alice")), False),  # one's own cordon
    (dict(annotations={CORDON_RECORD: "garbage"}), True),  # unreadable: whose is unknown, fail closed
    (dict(), False),  # kubectl cordon, no record
])
def test_which_actors_hold_the_cordon(case, foreign):
    assert cordon_owner(node(**case), "alice", NOW).foreign is foreign


def test_an_unknown_identity_owns_no_record_and_an_uncordoned_node_is_held_by_nobody():
    assert cordon_owner(node(annotations=recorded_by("unknown")), "unknown", NOW).foreign
    assert cordon_owner(node(annotations=recorded_by("")), "", NOW).foreign
    assert not cordon_owner(node(unschedulable=False, labels=NVSENTINEL_LABELS, annotations=NVSENTINEL_NOTES),
                            "alice", NOW).foreign


def test_another_users_cordon_is_named_with_reason_ticket_and_a_plain_cordon_is_said_not_refused():
    owner = cordon_owner(node(annotations=recorded_by("bob")), "alice", NOW)
    assert owner.words().startswith("cordoned through gputui by another user: bob: kernel 6.8 rollout (ticket OPS-12)")
    plain = cordon_owner(node(), "alice", NOW)
    assert not plain.foreign and plain.note == UNRECORDED
    plan = plan_cordon(ClusterSnapshot(taken_at=NOW, context="t", nodes=(node(),)), "gpu-1", False, identity="alice")
    assert plan.describe() == f"Uncordon gpu-1: new pods may be scheduled on it again. It was {UNRECORDED}."


def test_an_expired_cordon_is_a_stuck_person_disruption():
    held = node_disruptions(node(annotations=recorded_by("bob", expires=NOW - 7200)), NOW)
    assert [(x.actor, x.phase, x.since) for x in held] == [("person", "cordoned", NOW - 3600)]
    assert held[0].stuck.startswith("cordon expired 2h ago")
    assert not node_disruptions(node(annotations=recorded_by("bob", expires=NOW + 60)), NOW)[0].stuck


# -- the writes ----------------------------------------------------------------------------------------------------

def demo_ctx(tmp_path, identity="alice"):
    demo = DemoCluster(seed=1)
    return demo, OpContext(demo, demo, AuditLog(tmp_path / "audit.jsonl", identity, "demo"), clock=lambda: NOW)


def audit(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


def test_a_cordon_writes_its_record_in_the_same_write_and_an_uncordon_removes_it(tmp_path):
    demo, ctx = demo_ctx(tmp_path)
    plan = plan_cordon(demo.snapshot(), "gpu-h100-01", reason="bad fan", ticket="OPS-1", expires=NOW + 3600)
    assert "Reason: bad fan (ticket OPS-1); expires" in plan.describe()
    assert run_cordon(plan, ctx) == "node/gpu-h100-01 cordoned"
    n = demo.snapshot().node("gpu-h100-01")
    assert n.unschedulable
    assert read_record(n.annotations) == CordonRecord("alice", "bad fan", NOW, "OPS-1", NOW + 3600)
    back = plan_cordon(demo.snapshot(), "gpu-h100-01", False, identity="alice")
    assert not back.foreign and "It was cordoned through gputui by alice: bad fan" in back.describe()
    run_cordon(back, ctx)
    n = demo.snapshot().node("gpu-h100-01")
    assert not n.unschedulable and CORDON_RECORD not in n.annotations
    entries = [e for e in audit(tmp_path) if e["phase"] == "result"]
    assert [e["action"] for e in entries] == ["cordon", "uncordon"]  # one entry per state change
    assert entries[0]["params"]["record"]["reason"] == "bad fan"
    assert entries[1]["params"]["record_removed"]["by"] == "alice" and "override_owner" not in entries[1]["params"]


def test_uncordon_over_another_actor_is_refused_unless_overridden_and_the_override_is_audited(tmp_path):
    demo, ctx = demo_ctx(tmp_path)
    plan = plan_cordon(demo.snapshot(), "gpu-l40s-03", False, identity="alice")  # mid driver upgrade
    assert plan.foreign and "the GPU Operator is upgrading its driver" in plan.describe()
    with pytest.raises(OwnerRefused, match="gpu-l40s-03 is held by another actor: the GPU Operator"):
        run_cordon(plan, ctx)
    assert demo.snapshot().node("gpu-l40s-03").unschedulable and not (tmp_path / "audit.jsonl").exists()
    assert run_cordon(plan, ctx, override_owner=True) == "node/gpu-l40s-03 uncordoned"
    assert not demo.snapshot().node("gpu-l40s-03").unschedulable
    result = [e for e in audit(tmp_path) if e["phase"] == "result"][-1]
    assert result["action"] == "uncordon"
    assert [h["actor"] for h in result["params"]["override_owner"]] == ["gpu-operator"]


def test_the_node_parser_keeps_the_record_beside_the_actors_annotations():
    from gputui.backends.kube_objects import node_record

    value = CordonRecord("alice", "disk", NOW).to_annotation()
    parsed = node_record({"metadata": {"name": "gpu-1", "annotations": {CORDON_RECORD: value, "other.io/x": "y"}},
                          "spec": {"unschedulable": True}, "status": {}})
    assert parsed.annotations == {CORDON_RECORD: value}

"""The one permission policy (Backend.can, why_not, may; NEEDS; protected contexts), fast and whole: an operation
is available only with a writer and every access review it needs allowed, and each refusal says why."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from gputui.backends import factory
from gputui.backends.base import NEEDS, Backend
from gputui.ops.cordon import CordonPlan
from gputui.ops.drain.options import DrainOptions
from gputui.policy.cordon_owner import CordonOwner
from gputui.settings import Settings, protection


class Nothing:
    def close(self) -> None:
        pass


def backend(writer: bool = True, permissions: dict[str, bool] | None = None, protected: str = "") -> Backend:
    return Backend(reader=Nothing(), writer=object() if writer else None, context="prod-eu",  # type: ignore[arg-type]
                   permissions=permissions or {}, protected=protected)


NEEDED = {
    "cordon": ("cordon",), "uncordon": ("cordon",), "drain": ("cordon", "evict"),
    "resume_drains": ("cordon", "evict"), "shift": ("shift",), "canary": ("shift",), "rollback": ("shift",),
    "rollout": ("shift",), "undo": ("shift",),
    "drain_via_nodemaintenance": ("cordon", "evict", "nodemaintenance_create", "nodemaintenance_delete"),
    "uncordon_nodemaintenance": ("cordon", "nodemaintenance_delete")}
WORDS = {"drain_via_nodemaintenance": "drain via NodeMaintenance",
         "uncordon_nodemaintenance": "uncordon (withdrawing gputui's NodeMaintenance)"}


def test_what_each_operation_needs():
    assert {op: NEEDS.get(op) for op in NEEDED} == NEEDED


@pytest.mark.parametrize("operation", [*NEEDED, "anything"])
def test_without_a_writer_nothing_is_available_whatever_the_reviews_said(operation):
    b = backend(writer=False, permissions={"cordon": True, "evict": True, "shift": True})
    assert b.read_only
    assert not b.can(operation)
    assert not b.may("cordon")
    assert b.why_not(operation) == f"read-only: {WORDS.get(operation, operation.replace('_', ' '))} is unavailable"


@pytest.mark.parametrize("operation", [*NEEDED, "anything"])
def test_a_writer_whose_reviews_all_allowed_may_do_everything(operation):
    b = backend(permissions={"cordon": True, "evict": True, "shift": True, "nodemaintenance_create": True,
                             "nodemaintenance_delete": True})
    assert not b.read_only
    assert b.can(operation) and b.why_not(operation) is None


def test_a_review_never_asked_is_allowed_and_one_denied_is_not():
    b = backend(permissions={"evict": False})
    assert b.may("cordon") and b.may("shift") and not b.may("evict")
    assert b.can("cordon") and b.can("uncordon") and b.can("shift")
    assert not b.can("drain") and not b.can("resume_drains")


@pytest.mark.parametrize("denied, blocked, allowed", [
    ("cordon", {"cordon", "uncordon", "drain", "resume_drains", "drain_via_nodemaintenance", "uncordon_nodemaintenance"},
     {"shift", "canary", "rollback", "rollout", "undo"}),
    ("evict", {"drain", "resume_drains", "drain_via_nodemaintenance"}, {"cordon", "uncordon", "shift", "undo"}),
    ("shift", {"shift", "canary", "rollback", "rollout", "undo"}, {"cordon", "drain", "resume_drains"}),
    ("nodemaintenance_create", {"drain_via_nodemaintenance"}, {"drain", "uncordon_nodemaintenance"}),
    ("nodemaintenance_delete", {"drain_via_nodemaintenance", "uncordon_nodemaintenance"}, {"drain", "uncordon"}),
])
def test_each_denied_review_blocks_exactly_the_operations_that_need_it(denied, blocked, allowed):
    b = backend(permissions={denied: False})
    assert {op for op in NEEDED if not b.can(op)} == blocked
    assert all(b.can(op) for op in allowed)


def test_an_operation_no_review_guards_needs_only_the_writer():
    b = backend(permissions={"cordon": False, "evict": False, "shift": False})
    assert b.can("look_around") and b.why_not("look_around") is None
    assert not backend(writer=False).can("look_around")


def test_why_not_names_every_missing_grant_in_the_operators_words():
    b = backend(permissions={"cordon": False, "evict": False})
    assert b.why_not("drain") == "your identity may not patch nodes or create pods/eviction: drain is unavailable"
    assert b.why_not("resume_drains") == ("your identity may not patch nodes or create pods/eviction: "
                                          "resume drains is unavailable")
    assert backend(permissions={"shift": False}).why_not("undo") == \
        "your identity may not patch routes: undo is unavailable"


def test_a_batch_of_operations_is_refused_for_the_first_one_unavailable_and_allowed_when_none_is():
    """why_not_any: what `gputui drain` and `R` check for a batch whose drains need different grants."""
    b = backend(permissions={"cordon": True, "evict": True, "nodemaintenance_delete": False})
    assert b.why_not_any(["drain", "drain_via_nodemaintenance", "drain"]) == \
        "your identity may not delete nodemaintenances: drain via NodeMaintenance is unavailable"
    assert b.why_not_any(["drain", "cordon"]) is None
    assert b.why_not_any([]) is None
    assert backend(writer=False).why_not_any(iter(["drain"])) == "read-only: drain is unavailable"


def test_a_review_never_asked_is_not_named_as_denied():
    """why_not reads an absent review as allowed, as can does (kills permissions.get(p, True) → False/None)."""
    b = backend(permissions={"cordon": True})
    assert b.why_not("drain") is None and b.why_not("cordon") is None


def test_a_review_without_a_verdict_is_unknown_with_its_cause_never_a_denial():
    b = Backend(reader=Nothing(), writer=object(), context="c", permissions={"cordon": True},  # type: ignore[arg-type]
                unknown={"evict": "503 Service Unavailable"})
    assert not b.may("evict") and b.may("cordon")
    assert not b.can("drain") and b.can("cordon")
    assert b.why_not("drain") == ("drain is unavailable: whether this identity may create pods/eviction is unknown "
                                  "(its access review failed: 503 Service Unavailable)")


def test_unknown_reviews_are_named_together_and_each_cause_said_once():
    b = Backend(reader=Nothing(), writer=object(), context="c",  # type: ignore[arg-type]
                unknown={"cordon": "timed out", "evict": "timed out", "shift": "403 on the review"},
                words={"shift": "patch httproutes (gateway.networking.k8s.io)"})
    assert b.why_not("resume_drains") == ("resume drains is unavailable: whether this identity may patch nodes or "
                                          "create pods/eviction is unknown (its access review failed: timed out)")
    assert b.why_not("shift") == ("shift is unavailable: whether this identity may patch httproutes "
                                  "(gateway.networking.k8s.io) is unknown (its access review failed: 403 on the review)")


def test_two_unknown_reviews_with_two_causes_say_both():
    b = Backend(reader=Nothing(), writer=object(), context="c",  # type: ignore[arg-type]
                unknown={"cordon": "timed out", "evict": "503"})
    assert b.why_not("drain").endswith("is unknown (its access review failed: timed out; 503)")


def test_a_denial_is_said_before_an_unknown():
    b = Backend(reader=Nothing(), writer=object(), context="c", permissions={"cordon": False},  # type: ignore[arg-type]
                unknown={"evict": "timed out"})
    assert b.why_not("drain") == "your identity may not patch nodes: drain is unavailable"


def test_a_review_the_cluster_words_is_named_in_its_words():
    b = Backend(reader=Nothing(), writer=object(), context="c", permissions={"shift": False},  # type: ignore[arg-type]
                words={"shift": "patch virtualservices (networking.istio.io)"})
    assert b.why_not("canary") == "your identity may not patch virtualservices (networking.istio.io): canary is unavailable"
    unnamed = Backend(reader=Nothing(), writer=object(), context="c", permissions={"mystery": False},  # type: ignore[arg-type]
                      words={"shift": "x"})
    assert unnamed._words("mystery") == "mystery" and unnamed._words("evict") == "create pods/eviction"


def test_a_protected_context_says_which_entry_protects_it():
    b = backend(writer=False, protected="prod-*")
    assert b.why_not("resume_drains") == ("read-only: context prod-eu is protected ('prod-*' in protected_contexts): "
                                          "resume drains is unavailable")
    assert not b.can("cordon")


def test_protection_is_the_first_pattern_that_matches_the_whole_name_case_sensitively():
    s = replace(Settings(), protected_contexts=("staging-eu", "prod-*", "prod-eu"))
    assert protection(s, "prod-eu") == "prod-*"
    assert protection(s, "staging-eu") == "staging-eu"
    assert protection(s, "staging-eu-2") == ""
    assert protection(s, "dev-prod-1") == ""
    assert protection(s, "PROD-eu") == ""
    assert protection(Settings(), "prod-eu") == ""


def test_the_demo_is_writable_unless_read_only_or_protected():
    free = factory.build_backend(replace(Settings(), demo=True))
    assert free.writer is not None and free.protected == "" and free.can("drain")
    ro = factory.build_backend(replace(Settings(), demo=True, read_only=True))
    assert ro.writer is None and ro.protected == "" and ro.why_not("drain") == "read-only: drain is unavailable"
    guarded = factory.build_backend(replace(Settings(), demo=True, protected_contexts=("de*",)))
    assert guarded.writer is None and guarded.protected == "de*"
    other = factory.build_backend(replace(Settings(), demo=True, protected_contexts=("prod-*",)))
    assert other.writer is not None and other.protected == ""


def test_the_demo_runs_the_seed_and_the_clock_asked_for():
    """Two demos of one seed are the same cluster (kills the seed not passed on: an unseeded demo differs)."""
    def snapshot(seed):
        return factory.build_backend(replace(Settings(), demo=True, seed=seed), clock=lambda: 1000.0).reader.snapshot()

    a, b, other = snapshot(3), snapshot(3), snapshot(7)  # 7: the demo's own default seed
    assert a.taken_at == 1000.0
    assert sorted(p.uid for p in a.pods) == sorted(p.uid for p in b.pods) and a.session_counts == b.session_counts
    assert sorted(p.uid for p in a.pods) != sorted(p.uid for p in other.pods)


def test_a_cluster_asked_for_is_never_replaced_by_the_demo(monkeypatch, tmp_path):
    """A kubeconfig named means the live backend (kills `or` turned `and` and a dropped `not`)."""
    from gputui.backends import kube_backend

    seen = []
    # A stand-in with no defaults of its own: what build_backend passes is what it is handed.
    monkeypatch.setattr(kube_backend, "live_backend",
                        lambda settings, *, per_gpu, sessions: seen.append((settings, per_gpu, sessions)) or "live")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    settings = replace(Settings(), kubeconfig=str(tmp_path / "kubeconfig"))
    assert factory.build_backend(settings, per_gpu=True) == "live" and seen == [(settings, True, True)]
    # Per GPU only when asked; session series unless asked not to (the fleet's readers: their rows show none).
    assert factory.build_backend(settings) == "live" and seen[-1] == (settings, False, True)
    assert factory.build_backend(settings, sessions=False) == "live" and seen[-1] == (settings, False, False)
    assert factory.build_backend(replace(settings, demo=True)).simulated


def test_no_cluster_configured_is_the_demo(monkeypatch, tmp_path):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert factory.build_backend(Settings()).simulated


def test_debug_says_which_cluster(monkeypatch, tmp_path):
    from gputui.backends import kube_backend
    from gputui.base.debug_log import log

    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Keep()
    log.addHandler(handler)
    old = log.level
    log.setLevel(logging.DEBUG)
    try:
        factory.build_backend(replace(Settings(), demo=True, seed=5))
        monkeypatch.setattr(kube_backend, "live_backend", lambda settings, per_gpu=False, sessions=True: "live")
        factory.build_backend(replace(Settings(), kubeconfig=str(tmp_path / "k"), context="prod-eu"))
        factory.build_backend(replace(Settings(), kubeconfig=str(tmp_path / "k"), prometheus="http://p:9090"))
    finally:
        log.removeHandler(handler)
        log.setLevel(old)
    assert lines == [
        "cluster: the embedded demo cluster (SIMULATED, seed 5): it reads no API and no store",
        "cluster: a real cluster (kubeconfig context prod-eu); metrics not configured",
        "cluster: a real cluster (kubeconfig context current); metrics from a store"]


def test_an_uncordon_withdrawing_gputuis_nodemaintenance_needs_its_delete_and_a_plain_one_does_not():
    """The uncordon's operation follows its plan (gputui.ops.cordon.CordonPlan.operation): with gputui's own
    NodeMaintenance on the node it deletes that too, and an identity that may not is told so before any write."""
    b = Backend(reader=Nothing(), writer=object(), context="prod-eu",  # type: ignore[arg-type]
                permissions={"cordon": True, "nodemaintenance_delete": False},
                words={"nodemaintenance_delete": "delete nodemaintenances (maintenance.nvidia.com) in namespace m"})
    held = CordonPlan("n1", False, False, 0, owner=CordonOwner((), None, requests=("m/gputui-n1",)))
    plain = CordonPlan("n1", False, False, 0, owner=CordonOwner((), None))
    assert plain.operation == "uncordon" and b.why_not(plain.operation) is None
    assert held.operation == "uncordon_nodemaintenance"
    assert b.why_not(held.operation) == ("your identity may not delete nodemaintenances (maintenance.nvidia.com) in "
                                         "namespace m: uncordon (withdrawing gputui's NodeMaintenance) is unavailable")
    assert replace(held, already=True).operation == "uncordon"  # nothing to send, nothing to withdraw


def test_a_drain_via_nodemaintenance_needs_its_create_and_delete():
    b = backend(permissions={"cordon": True, "evict": True, "nodemaintenance_create": False})
    assert DrainOptions().operation == "drain" and b.can("drain")
    via = DrainOptions(maintenance_namespace="m").operation
    assert via == "drain_via_nodemaintenance" and not b.can(via)
    assert "may not create nodemaintenances" in (b.why_not(via) or "")

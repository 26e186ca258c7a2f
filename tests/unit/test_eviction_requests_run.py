"""A running drain and the EvictionRequest API (gputui/ops/drain/run.py's eviction step, on hand-built snapshots and
a recording writer): before each eviction the fresh read is checked; a pod whose eviction another responder handles
is never evicted, not even when the operator says now; the drain waits on it, saying why once per holder, and at
its deadline leaves it in place (the drain ends unfinished); a drain planned on a read of them waits while they turn
unknown; one planned with them unknown goes on as its plan warned."""

from __future__ import annotations

from dataclasses import replace

from gputui.backends.kube_evictions import eviction_record
from gputui.ops.drain.events import EventKind
from gputui.ops.drain.run import PodState
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary.disruptions import ActorObjects
from gputui.vocabulary.model import Node
from tests.support.drain_poll import Hand, Run, pod
from tests.support.eviction_objects import READ, RESPONDER, T0, eviction_obj

HANDLED = f"its eviction is handled by {RESPONDER} (Active, heartbeat 40 s ago): gputui will not evict it"
FORBIDDEN = {"EvictionRequest": "unknown: forbidden", "Eviction": "unknown: forbidden"}


def snap(reads: dict[str, str] | None, *evictions: dict, now: float = T0 + 60) -> ClusterSnapshot:
    actors = None if reads is None else ActorObjects(reads=reads, evictions=tuple(eviction_record(e) for e in evictions))
    return ClusterSnapshot(now, "t", nodes=(Node("n1", True, True, "H100", 8, 8), Node("n2", True, False, "H100", 8, 8)),
                           pods=(pod("a"), pod("b")), sources=(SourceStatus("metrics", 1.0, None),), actors=actors)


def test_the_handled_pod_is_never_evicted_the_other_is_and_the_wait_is_said_once(tmp_path):
    s = snap(READ, eviction_obj("a", "a", "uid-a"))
    run = Run(s, Hand(), tmp_path / "a.jsonl", deadline=T0 + 600)
    assert run.look(s, now=T0 + 60) == [(EventKind.WAITING, "ns/a", HANDLED), (EventKind.EVICTED, "ns/b", "evicted")]
    assert [e[1] for e in run.hand.evicted] == ["b"] and run.pods["ns/a"].state is PodState.WAITING
    assert run.look(snap(READ, eviction_obj("a", "a", "uid-a"), now=T0 + 90), now=T0 + 90) == []  # said once
    run.control.evict_now("ns/a")  # the operator's "evict now" does not override another responder
    assert run.look(s, now=T0 + 120) == [] and [e[1] for e in run.hand.evicted] == ["b"]
    assert [x for x in run.entries() if x[1] == "pod/ns/a"] == []  # nothing written, nothing audited as sent


def test_the_wait_on_another_responder_says_the_pods_sessions_and_when_the_wait_ends(tmp_path):
    """As every waiting event does (the drain board shows both). Kills: the event's sessions or deadline dropped."""
    s = replace(snap(READ, eviction_obj("a", "a", "uid-a")), session_counts={("ns", "a"): 0})  # quiet: to evict
    run = Run(s, Hand(), tmp_path / "a.jsonl", deadline=T0 + 600)
    assert run.look(s, now=T0 + 60)[0] == (EventKind.WAITING, "ns/a", HANDLED)
    assert (run.events[0].sessions, run.events[0].deadline) == (0, T0 + 600)


def test_at_its_deadline_the_handled_pod_is_left_in_place_and_audited(tmp_path):
    s = snap(READ, eviction_obj("a", "a", "uid-a"))
    run = Run(s, Hand(), tmp_path / "a.jsonl", deadline=T0 + 60)
    said = run.look(s, now=T0 + 60)
    assert said[0] == (EventKind.HELD, "ns/a", f"left in place at its deadline: {HANDLED}")
    assert run.pods["ns/a"].state is PodState.HELD and [e[1] for e in run.hand.evicted] == ["b"]
    assert ("evict", "pod/ns/a", {"node": "n1", "why": HANDLED}, "held") in run.entries()


def test_a_responder_taking_a_pod_a_pdb_refused_closes_its_eviction_with_both_reasons(tmp_path):
    """The pod's eviction was under way (a PDB refused it, gputui retrying) when another responder took it over: that
    eviction is closed in the audit log, once, with the PDB's last refusal and why gputui stopped. Kills:
    `_close(prog, audit, f"not evicted: {words}")` → the audit or the reason dropped."""
    from gputui.backends.base import EvictionOutcome, EvictionResult

    refusal = "Cannot evict pod as it would violate the pod's disruption budget."
    run = Run(snap(READ), Hand(EvictionResult(EvictionOutcome.BLOCKED, refusal)), tmp_path / "a.jsonl",
              deadline=T0 + 600)
    run.look(snap(READ), now=T0 + 60)
    assert run.pods["ns/a"].state is PodState.BLOCKED
    said = run.look(snap(READ, eviction_obj("a", "a", "uid-a"), now=T0 + 120), now=T0 + 120)
    kind, key, words = said[0]
    assert (kind, key) == (EventKind.WAITING, "ns/a") and words.startswith(f"its eviction is handled by {RESPONDER}")
    closed = [x[3] for x in run.entries() if x[:2] == ("evict", "pod/ns/a") and x[3] not in ("intent", "held")]
    assert closed == [f"refused: {refusal}; not evicted: {words}"], run.entries()


def test_the_fresh_read_decides_a_responder_appearing_after_the_plan_holds_one_done_lets_it_go():
    run = Run(snap(READ), Hand(), deadline=T0 + 600)  # planned with no Eviction at all
    assert run.plan.blockers == []
    said = run.look(snap(READ, eviction_obj("a", "a", "uid-a")), now=T0 + 60)
    assert said[0] == (EventKind.WAITING, "ns/a", HANDLED) and [e[1] for e in run.hand.evicted] == ["b"]
    done = snap(READ, eviction_obj("a", "a", "uid-a", state="Completed"))
    assert run.look(done, now=T0 + 70) == [(EventKind.EVICTED, "ns/a", "evicted")]


def test_a_stale_responder_still_holds_it_and_the_words_change_once():
    run = Run(snap(READ, eviction_obj("a", "a", "uid-a")), Hand(), deadline=T0 + 7200)
    run.look(snap(READ, eviction_obj("a", "a", "uid-a")), now=T0 + 60)
    late = T0 + 20 + 1201
    said = run.look(snap(READ, eviction_obj("a", "a", "uid-a"), now=late), now=late)
    assert [(k, p) for k, p, _ in said] == [(EventKind.WAITING, "ns/a")] and "stale" in said[0][2]
    assert [e[1] for e in run.hand.evicted] == ["b"]


def test_planned_on_a_read_then_unknown_waits_planned_unknown_goes_on():
    run = Run(snap(READ), Hand(), deadline=T0 + 600)
    said = run.look(snap(FORBIDDEN), now=T0 + 60)
    assert [k for k, _, _ in said] == [EventKind.WAITING, EventKind.WAITING] and run.hand.evicted == []
    assert "EvictionRequests were read for the plan and are unknown: EvictionRequests forbidden now" in said[0][2]
    assert run.look(snap(READ), now=T0 + 70) == [(EventKind.EVICTED, "ns/a", "evicted"),
                                                 (EventKind.EVICTED, "ns/b", "evicted")]
    blind = Run(snap(FORBIDDEN), Hand())
    assert [k for k, _, _ in blind.look(snap(FORBIDDEN))] == [EventKind.EVICTED, EventKind.EVICTED]


def test_not_served_changes_nothing():
    for reads in (None, {}):
        run = Run(snap(reads), Hand())
        assert [k for k, _, _ in run.look(snap(reads))] == [EventKind.EVICTED, EventKind.EVICTED]

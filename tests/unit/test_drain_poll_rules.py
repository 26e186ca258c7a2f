"""One look of a drain at its pods (run._poll), fast, on hand-built snapshots and a recording writer: a pod is
gone only when the API says so; a waited-on pod is evicted when quiet, at its deadline, or when the operator
says now, and left in place at its deadline when its sessions are unknown (unless chosen); what each eviction's
answer does to the pod, the report and the audit log. The mutants named in each docstring are one-line bugs of
gputui/ops/drain/run.py these tests kill."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.backends.base import BackendError, EvictionOutcome, EvictionResult
from gputui.ops.context import OpContext
from gputui.ops.drain.events import EventKind
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.plan import Step
from gputui.ops.drain.run import RETRY_BLOCKED_S, PodState, _Look, _poll
from gputui.vocabulary.model import Budget
from tests.support.drain_poll import Hand, Run, pod, snap

# -- gone only when the API says so ---------------------------------------------------------------------------

def test_a_pod_the_view_lacks_is_not_gone_while_the_api_still_holds_it():
    """Kills: `writer.pod_uid(...) != prog.uid` → `==` (a pod called gone on a lagging view), the `continue`
    after it dropped (a pod the view lacks evicted blind)."""
    s = snap(pod("a"))
    run = Run(s, Hand())
    assert run.look(snap()) == [] and run.pods["ns/a"].state is PodState.PENDING and run.hand.evicted == []


@pytest.mark.parametrize("standing", [None, "uid-new"])
def test_a_pod_is_gone_when_the_api_has_no_such_uid_under_its_name(standing):
    """Kills: the GONE state or its message changed, the event's kind or words."""
    run = Run(snap(pod("a")), Hand(standing={"a": standing}))
    assert run.look(snap()) == [(EventKind.GONE, "ns/a", "gone (confirmed by the API)")]
    assert run.pods["ns/a"].state is PodState.GONE and run.pods["ns/a"].message == "deleted"


def test_a_terminating_pod_stays_terminating_until_the_api_says_gone():
    """Kills: `or prog.state is PodState.TERMINATING` dropped (a pod being evicted evicted again), the second
    `continue` dropped."""
    s = snap(pod("a"))
    run = Run(s, Hand())
    run.pods["ns/a"].state = PodState.TERMINATING
    assert run.look(s) == [] and run.hand.evicted == [] and run.pods["ns/a"].state is PodState.TERMINATING
    run.hand.standing["a"] = None
    assert run.look(s) == [(EventKind.GONE, "ns/a", "gone (confirmed by the API)")]


def test_a_pod_replaced_in_the_view_but_standing_in_the_api_is_looked_at_again():
    """The view shows another UID under the name, the API still the planned one: the view lags. Kills:
    `current.uid != prog.uid` → `==` in either check."""
    run = Run(snap(pod("a")), Hand())
    assert run.look(snap(pod("a", uid="uid-other"))) == [] and run.hand.evicted == []


def test_finished_pods_are_not_looked_at():
    """Kills: `if prog.finished: continue` → `break` or dropped."""
    s = snap(pod("a"), pod("b"))
    run = Run(s, Hand())
    run.pods["ns/a"].state = PodState.GONE
    assert [e[1] for e in run.look(s) if e[0] is EventKind.EVICTED] == ["ns/b"]
    assert [c[1] for c in run.hand.evicted] == ["b"]


# -- waiting on sessions ----------------------------------------------------------------------------------------

def test_a_pod_with_live_sessions_is_waited_on_and_said_with_its_count_and_deadline(tmp_path):
    """Kills: `quiet` read as `<` threshold or with `or 1`, the WAITING event's sessions, deadline or words."""
    s = snap(pod("a", session_signal=True), counts={"a": 3})
    run = Run(s, Hand(), tmp_path / "a.jsonl")
    ctx = OpContext(s, run.hand, run.audit)
    events = list(_poll(_Look(run.plan, ctx, run.control, run.report, run.rotation, run.pods), s, 10.0))
    assert [(e.kind, e.pod, e.message, e.sessions, e.deadline) for e in events] == [
        (EventKind.WAITING, "ns/a", "3 live sessions", 3, 100.0)]
    assert run.pods["ns/a"].state is PodState.WAITING and run.hand.evicted == []
    quiet = snap(pod("a", session_signal=True), counts={"a": 1})
    assert Run(quiet, Hand(), options=DrainOptions(session_threshold=1)).look(quiet)[-1][0] is EventKind.EVICTED
    assert Run(quiet, Hand()).look(quiet)[0][0] is EventKind.WAITING


def test_an_unknown_count_is_waited_on_never_read_as_zero():
    """Kills: `known = state is KNOWN` → `is not`, the unknown words."""
    s = snap(pod("a", session_signal=True), metrics_ok=False)
    run = Run(s, Hand())
    assert run.plan.pods[0].step is Step.WAIT_SESSIONS
    assert run.look(s) == [(EventKind.WAITING, "ns/a", "sessions unknown: waiting for a count")]


def test_an_unknown_count_at_its_deadline_is_left_in_place_and_audited(tmp_path):
    """Kills: `now >= prog.deadline` → `>`, the HELD branch's `not opts.evict_unknown_at_deadline` inverted,
    its state, message, audit event or event kind changed."""
    s = snap(pod("a", session_signal=True), metrics_ok=False)
    run = Run(s, Hand(), tmp_path / "a.jsonl")
    assert run.look(s, now=100.0) == [(EventKind.HELD, "ns/a",
                                       "sessions unknown at its deadline; left in place (eviction not chosen)")]
    assert run.pods["ns/a"].state is PodState.HELD and run.hand.evicted == []
    assert run.entries() == [("evict", "pod/ns/a", {"node": "n1", "why": "sessions unknown at deadline"}, "held")]


def test_an_unknown_count_at_its_deadline_is_evicted_when_chosen_and_counted_possibly_cut(tmp_path):
    """Kills: `unknown_cut = step is WAIT_SESSIONS and not known` inverted, `unknown_cut_pods += 1` changed,
    the SESSIONS_CUT words, the intent's `sessions` (the state's value when unknown) and `why`."""
    s = snap(pod("a", session_signal=True), metrics_ok=False)
    run = Run(s, Hand(), tmp_path / "a.jsonl", DrainOptions(evict_unknown_at_deadline=True))
    assert run.look(s, now=100.0) == [
        (EventKind.SESSIONS_CUT, "ns/a", "deadline expired: sessions unknown, possibly cut"),
        (EventKind.EVICTED, "ns/a", "evicted")]
    assert run.report.unknown_cut_pods == 1 and run.report.cut_sessions == 0 and run.report.evicted == 1
    assert run.entries() == [("evict", "pod/ns/a", {"node": "n1", "sessions": "unknown", "why": "deadline expired",
                                                     "reason": "evicted", "tries": 1}, "evicted")]


def test_live_sessions_at_the_deadline_are_cut_counted_and_said(tmp_path):
    """Kills: `cut = sessions if known and not quiet else 0` changed, `cut_sessions += cut` → `=`/`-=`, the
    SESSIONS_CUT words and count, `evicted += 1` changed, the intent's params, the result's tries."""
    s = snap(pod("a", session_signal=True), counts={"a": 3})
    run = Run(s, Hand(), tmp_path / "a.jsonl")
    run.report.cut_sessions = 2  # an earlier pod's
    ctx = OpContext(s, run.hand, run.audit)
    events = list(_poll(_Look(run.plan, ctx, run.control, run.report, run.rotation, run.pods), s, 100.0))
    assert [(e.kind, e.message, e.sessions) for e in events] == [
        (EventKind.SESSIONS_CUT, "deadline expired: 3 live sessions cut", 3), (EventKind.EVICTED, "evicted", None)]
    assert run.report.cut_sessions == 5 and run.report.evicted == 1
    assert run.pods["ns/a"].state is PodState.TERMINATING
    assert run.entries() == [("evict", "pod/ns/a", {"node": "n1", "sessions": 3, "why": "deadline expired",
                                                     "reason": "evicted", "tries": 1}, "evicted")]


def test_the_operator_says_now_and_a_quiet_pod_goes_with_nothing_cut():
    """Kills: `now_please` ignored in the wait or the evict (`and not now_please` dropped), the why ("evict now",
    "quiet"), a quiet pod counted as cut."""
    s = snap(pod("a", session_signal=True), counts={"a": 3})
    run = Run(s, Hand())
    run.control.evict_now("ns/a")
    assert run.look(s)[0] == (EventKind.SESSIONS_CUT, "ns/a", "evict now: 3 live sessions cut")
    quiet = snap(pod("a", session_signal=True), counts={"a": 0})
    run = Run(quiet, Hand())
    assert run.look(quiet) == [(EventKind.EVICTED, "ns/a", "evicted")] and run.report.cut_sessions == 0


def test_an_extended_deadline_is_added_and_said():
    """Kills: `prog.deadline += extra` → `=` / `-=`, the words."""
    s = snap(pod("a", session_signal=True), counts={"a": 3})
    run = Run(s, Hand())
    run.control.extend("ns/a", 60)
    assert run.look(s)[0] == (EventKind.INFO, "ns/a", "deadline extended by 60s")
    assert run.pods["ns/a"].deadline == 160.0
    assert run.look(s, now=150.0)[0][0] is EventKind.WAITING  # not yet at its new deadline


# -- what each answer does ----------------------------------------------------------------------------------------

def test_an_eviction_names_the_planned_uid_and_the_operators_grace():
    """Kills: `uid=prog.uid` dropped or changed (a pod replaced under its name evicted), the grace dropped."""
    s = snap(pod("b"))
    run = Run(s, Hand(), options=DrainOptions(grace_seconds=7))
    run.look(s)
    assert run.hand.evicted == [("ns", "b", 7, "uid-b")]


def test_a_budget_refusal_names_the_budget_and_is_retried_after_its_period(tmp_path):
    """Kills: `budgets and budgets[0].name not in reason` → `in`/`or`, `tries += 1` changed, `next_try = now +
    RETRY_BLOCKED_S` → `-`, `now < next_try` → `>`/`<=`, `and not now_please` dropped, the BLOCKED event's count;
    the one intent over the retries (no result until they end)."""
    budget = Budget("ns", "llm", {"app": "llm"}, disruptions_allowed=0, current_healthy=2, desired_healthy=2)
    s = snap(pod("b"), budgets=(budget,))
    run = Run(s, Hand(EvictionResult(EvictionOutcome.BLOCKED, "Cannot evict pod")), tmp_path / "a.jsonl")
    ctx = OpContext(s, run.hand, run.audit)

    def look(now: float) -> list:
        return [(e.kind, e.message, e.count)
                for e in _poll(_Look(run.plan, ctx, run.control, run.report, run.rotation, run.pods), s, now)]

    said = "Cannot evict pod (llm: 0 disruptions allowed (2 healthy, 2 needed))"
    assert look(10.0) == [(EventKind.BLOCKED, said, 1)]
    assert run.pods["ns/b"].state is PodState.BLOCKED and run.pods["ns/b"].next_try == 10.0 + RETRY_BLOCKED_S
    assert look(10.0 + RETRY_BLOCKED_S - 0.1) == [] and len(run.hand.evicted) == 1
    assert look(10.0 + RETRY_BLOCKED_S) == [(EventKind.BLOCKED, said, 2)] and len(run.hand.evicted) == 2
    run.control.evict_now("ns/b")
    assert look(10.0 + RETRY_BLOCKED_S + 0.1)[0][2] == 3  # the operator's now does not wait its period
    assert [e["phase"] for e in map(dict, _raw(tmp_path / "a.jsonl"))] == ["intent"]
    named = EvictionResult(EvictionOutcome.BLOCKED, "the budget llm allows none")
    run2 = Run(s, Hand(named))
    assert run2.look(s) == [(EventKind.BLOCKED, "ns/b", "the budget llm allows none")]


def _raw(path: Path) -> list[dict]:
    import json

    return [json.loads(x) for x in path.read_text().splitlines()]


def test_a_conflict_on_the_very_pod_is_tried_again_not_called_replaced(tmp_path):
    """A 409 on the UID precondition, yet the API holds the planned UID: nothing was sent. Kills: `standing ==
    prog.uid` → `!=`, the `continue` dropped, `next_try` not set, the words; the intent kept for the retry."""
    s = snap(pod("b"))
    run = Run(s, Hand(EvictionResult(EvictionOutcome.REPLACED, "uid precondition failed")), tmp_path / "a.jsonl")
    assert run.look(s) == [(EventKind.INFO, "ns/b", "conflict on its eviction, tried again: uid precondition failed")]
    assert run.pods["ns/b"].state is PodState.PENDING and run.pods["ns/b"].next_try == 10.0 + RETRY_BLOCKED_S
    assert run.pods["ns/b"].intent is not None and run.entries() == []


def test_a_pod_replaced_under_its_name_is_never_evicted_nor_called_gone(tmp_path):
    """Kills: the REPLACED state, message (with the standing UID), report line or event changed; the audit
    result without the planned and standing UIDs."""
    s = snap(pod("b"))
    run = Run(s, Hand(EvictionResult(EvictionOutcome.REPLACED, "conflict"), standing={"b": "uid-new"}),
              tmp_path / "a.jsonl")
    msg = "replaced under its name before its eviction (a new pod, uid uid-new, stands; not evicted)"
    assert run.look(s) == [(EventKind.REPLACED, "ns/b", msg)]
    assert run.pods["ns/b"].state is PodState.REPLACED and run.report.replaced == [f"ns/b: {msg}"]
    assert run.report.evicted == 0
    (entry,) = run.entries()
    assert entry[3] == "refused: replaced under its name; the new pod not evicted"
    assert entry[2]["uid"] == "uid-b" and entry[2]["standing"] == "uid-new" and entry[2]["reason"] == "conflict"
    gone = Run(s, Hand(EvictionResult(EvictionOutcome.REPLACED, "conflict"), standing={"b": None}))
    assert gone.look(s)[0][2] == "gone before its eviction (replaced under its name)"


def test_a_pod_already_gone_and_a_failed_eviction(tmp_path):
    """Kills: the GONE answer's state or words, the FAILED answer's state, report line or event, the audit
    result of an error ("error: reason")."""
    s = snap(pod("b"))
    run = Run(s, Hand(EvictionResult(EvictionOutcome.GONE, "not found")))
    assert run.look(s) == [(EventKind.GONE, "ns/b", "already gone")] and run.pods["ns/b"].state is PodState.GONE
    run = Run(s, Hand(EvictionResult(EvictionOutcome.FAILED, "forbidden")), tmp_path / "a.jsonl")
    assert run.look(s) == [(EventKind.FAILED, "ns/b", "forbidden")]
    assert run.pods["ns/b"].state is PodState.FAILED and run.report.failed == ["ns/b: forbidden"]
    assert run.entries()[0][3] == "error: forbidden"


def test_a_failed_call_closes_the_intent_and_pauses_the_drain(tmp_path):
    """Kills: the `except BaseException` branch's `_close` dropped (an intent with no result) or the raise
    dropped (a pod failed on an apiserver in trouble)."""
    s = snap(pod("b"))
    run = Run(s, Hand(BackendError("apiserver unreachable")), tmp_path / "a.jsonl")
    with pytest.raises(BackendError):
        run.look(s)
    assert run.pods["ns/b"].intent is None and run.entries()[0][3] == "error: apiserver unreachable"


def test_eviction_disabled_deletes_the_planned_uid_with_the_operators_grace(tmp_path):
    """Kills: `if opts.disable_eviction` inverted, the delete's grace or UID dropped, the audit action
    ("delete", not "evict")."""
    s = snap(pod("b", owner_kind=""))
    run = Run(s, Hand(), tmp_path / "a.jsonl",
              DrainOptions(disable_eviction=True, force=True, grace_seconds=3))
    assert run.look(s)[-1] == (EventKind.EVICTED, "ns/b", "deleted (eviction disabled by force)")
    assert run.hand.deleted == [("ns", "b", 3, "uid-b")] and run.hand.evicted == []
    assert run.entries()[0][:2] == ("delete", "pod/ns/b")


def test_one_look_goes_on_past_a_pod_still_terminating_and_a_pod_gone():
    """Kills: the `continue` after a pod confirmed gone, or after one still terminating, → `break` (the pods
    after it not looked at in this poll); a GONE event without its node."""
    s = snap(pod("a"), pod("b"), pod("c"))
    run = Run(s, Hand(standing={"b": None}))
    run.pods["ns/a"].state = PodState.TERMINATING
    assert run.look(snap(pod("a"), pod("c"))) == [(EventKind.GONE, "ns/b", "gone (confirmed by the API)"),
                                                  (EventKind.EVICTED, "ns/c", "evicted")]


def test_a_pod_with_live_sessions_says_only_its_count_even_when_kept_in_rotation():
    """Why a quiet count is not trusted yet is said only for a quiet count. Kills: `held_back = ... if quiet and
    not now_please else ""` → `... or True` / `quiet or not now_please` (a busy pod's wait said as held back)."""
    s = snap(pod("a", session_signal=True), counts={"a": 3})
    run = Run(s, Hand())
    run.rotation.kept["ns/a"] = "kept in for capacity"
    assert run.look(s) == [(EventKind.WAITING, "ns/a", "3 live sessions")]
    quiet = snap(pod("a", session_signal=True), counts={"a": 0})
    run = Run(quiet, Hand())
    run.rotation.kept["ns/a"] = "kept in for capacity"
    assert run.look(quiet) == [(EventKind.WAITING, "ns/a", "0 live sessions; kept in rotation for capacity: evicted "
                                                           "once out of rotation, or at its deadline")]


def test_a_blocked_eviction_whose_pod_gets_busy_again_is_closed_as_refused_then_waiting(tmp_path):
    """A quiet pod's eviction refused by its budget (the intent open), then new sessions: the intent's result
    says both. Kills: `_close(prog, audit, "not evicted: waiting on its sessions again")` with the audit or the
    words dropped."""
    budget = Budget("ns", "llm", {"app": "llm"}, disruptions_allowed=0, current_healthy=2, desired_healthy=2)
    quiet = snap(pod("a", session_signal=True), counts={"a": 0}, budgets=(budget,))
    run = Run(quiet, Hand(EvictionResult(EvictionOutcome.BLOCKED, "Cannot evict pod")), tmp_path / "a.jsonl")
    assert run.look(quiet)[0][0] is EventKind.BLOCKED
    busy = snap(pod("a", session_signal=True), counts={"a": 2}, budgets=(budget,))
    assert run.look(busy, now=20.0) == [(EventKind.WAITING, "ns/a", "2 live sessions")]
    assert [r for *_, r in run.entries()] == [
        "refused: Cannot evict pod (llm: 0 disruptions allowed (2 healthy, 2 needed)); not evicted: waiting on its "
        "sessions again"]


def test_a_blocked_eviction_left_in_place_at_its_deadline_is_closed_as_refused_then_held(tmp_path):
    """A quiet pod's eviction refused by its budget (the intent open); then its count is lost and its deadline
    comes: left in place, and the open eviction's result says so. Kills: `_close(prog, audit, "not evicted:
    held")` with the audit or the words dropped or changed."""
    budget = Budget("ns", "llm", {"app": "llm"}, disruptions_allowed=0, current_healthy=2, desired_healthy=2)
    quiet = snap(pod("a", session_signal=True), counts={"a": 0}, budgets=(budget,))
    run = Run(quiet, Hand(EvictionResult(EvictionOutcome.BLOCKED, "Cannot evict pod")), tmp_path / "a.jsonl")
    assert run.look(quiet)[0][0] is EventKind.BLOCKED
    lost = snap(pod("a", session_signal=True), budgets=(budget,), metrics_ok=False)
    assert run.look(lost, now=100.0)[0][0] is EventKind.HELD
    # The budget's last refusal is said with it, as in the waiting case (it was lost: the state was set to HELD
    # before the intent was closed)
    results = [(a, r) for a, _t, _p, r in run.entries()]
    assert results == [("evict", "refused: Cannot evict pod (llm: 0 disruptions allowed (2 healthy, 2 needed)); "
                                 "not evicted: held"), ("evict", "held")], results


def test_a_quiet_pod_goes_as_quiet_even_at_its_deadline_and_cuts_nothing(tmp_path):
    """A count at or under the threshold is quiet: nothing cut, and the audit says "quiet" even when the
    deadline has come too. Kills: `cut = ... if known and not quiet else 0` → `or True` / `known or not quiet`
    (a quiet pod's sessions counted as cut), `"deadline expired" if expired and not quiet` → `or True` /
    `expired or not quiet`."""
    s = snap(pod("a", session_signal=True), counts={"a": 1})
    run = Run(s, Hand(), tmp_path / "a.jsonl", DrainOptions(session_threshold=1))
    assert run.look(s, now=100.0) == [(EventKind.EVICTED, "ns/a", "evicted")] and run.report.cut_sessions == 0
    assert run.entries()[0][2]["why"] == "quiet"
    early = Run(s, Hand(), tmp_path / "b.jsonl", DrainOptions(session_threshold=1))
    early.look(s, now=10.0)
    assert early.entries()[0][2]["why"] == "quiet"


def test_a_pod_waiting_its_retry_or_its_conflict_does_not_hold_up_the_next():
    """Kills: the `continue` of a pod still in its retry period, and of a conflict on the very pod, → `break`
    (the pods after it not evicted in this look)."""
    s = snap(pod("a"), pod("b"))
    run = Run(s, Hand())
    run.pods["ns/a"].next_try = 50.0
    assert run.look(s) == [(EventKind.EVICTED, "ns/b", "evicted")]

    class ConflictOnA(Hand):
        def evict_pod(self, namespace, name, grace=None, uid=None):
            if name == "a":
                return EvictionResult(EvictionOutcome.REPLACED, "conflict")
            return super().evict_pod(namespace, name, grace, uid)

    run = Run(s, ConflictOnA())
    assert [e[0] for e in run.look(s)] == [EventKind.INFO, EventKind.EVICTED]

"""One node's whole drain run (run.run_drain), fast, on hand-built snapshots and a recording API: what it writes and
in what order (lease, cordon, its records, phases, release), what it says, when it pauses and resumes, how it
ends (drained, left in place, aborted, taken over, a blocked plan, no writer), and the waits it asks for. The
mutants named in each docstring are one-line bugs of gputui/ops/drain/run.py these tests kill."""

from __future__ import annotations

import json

import pytest

from gputui.backends.base import BackendError
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain import lease
from gputui.ops.drain.events import DrainControl, EventKind
from gputui.ops.drain.options import BY, DEADLINE, OPTIONS, PHASE, STARTED, DrainOptions
from gputui.ops.drain.plan import plan_drain
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.run import PAUSE_MAX_S, run_drain
from gputui.ops.drain.start import DrainStart
from gputui.ops.errors import ReadOnlyError, read_only_words
from gputui.snapshot import ClusterSnapshot
from tests.support.drain_api import T0, Api, Drain, pod


def test_a_drain_without_a_writer_is_refused_as_a_read_only_drain():
    """Kills: `raise ReadOnlyError("drain")` → `ReadOnlyError(None)`, `"XXdrainXX"`, `"DRAIN"` (the refusal names
    another operation), `if writer is None` → `is not None`."""
    api = Api()
    ctx = OpContext(api, None, AuditLog(None, "t", "demo"))
    with pytest.raises(ReadOnlyError) as refused:
        next(run_drain(plan_drain(api.snapshot(), "n1", preview=False), ctx))
    assert refused.value.operation == "drain" and str(refused.value) == read_only_words("drain")


def test_a_blocked_plan_says_each_error_on_its_node_and_writes_nothing(tmp_path):
    """A pod with no controller, not forced: the plan is blocked. Kills: the FAILED event's node, kind or message
    changed, the report's node, errors or reason changed, `if plan.blocked` → `not` (a blocked node drained)."""
    api = Api((pod("bare", owner_kind=""), pod("also", owner_kind="")), {"bare": 0, "also": 0})
    d = Drain(api, tmp_path / "a.jsonl")
    report = d.run()
    assert d.plan.blocked and len(d.plan.errors) == 2
    assert [(e.node, e.kind, e.message) for e in d.events] == [("n1", EventKind.FAILED, err) for err in d.plan.errors]
    assert (report.node, report.outcome, report.failed, report.reason) == ("n1", Outcome.FAILED, d.plan.errors,
                                                                          "plan blocked")
    assert api.writes == []
    assert not (tmp_path / "a.jsonl").exists() or d.entries() == []


def test_a_drain_writes_its_lease_cordon_records_phases_and_release_in_order_each_once(tmp_path):
    """Kills: the lease's audit params (holder, take_over) changed or dropped, the cordon's or a phase's audit
    action or params changed, `once`'s `what not in done` → `in` or its `done.add` dropped (phases written on each
    look), the phase's annotation (PHASE: name) or the records (`record_values`) dropped or given another identity
    (None) or start (None: the time of the write), the STARTED event's words,
    `phase("done" ...)` swapped, release's params, `if not lease.release(...)` → `if lease.release(...)` (a
    lease dropped said to be no longer this drain's), `Holder.me(writer.identity)` → `Holder.me(None)`, the DONE
    event's words (report.describe)."""
    api = Api((pod("a"), pod("b")), {"a": 0, "b": 0})
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(session_deadline_s=600))
    report = d.run()
    assert report.outcome is Outcome.DRAINED and report.evicted == 2 and report.reason == ""
    holder = json.loads(d.api.writes[0][1][lease.LEASE])
    assert holder["who"] == "t"  # the writer's identity
    who = f"{holder['who']}@{holder['host']}:{holder['pid']}"
    assert [(a, t, p) for a, t, p, _r in d.entries() if a != "evict"] == [
        ("lease", "node/n1", {"holder": who, "take_over": False}),
        ("cordon", "node/n1", {"reason": "drain"}),
        ("annotate", "node/n1", {"phase": "cordoned"}),
        ("annotate", "node/n1", {"phase": "waiting"}),
        ("annotate", "node/n1", {"phase": "done"}),
        ("lease-release", "node/n1", {"holder": who}),
    ]
    phases = [w[1] for w in api.writes if w[0] == "annotate" and PHASE in w[1]]
    assert [p[PHASE] for p in phases] == ["cordoned", "waiting", "done"]
    assert phases[0][DEADLINE] == f"{T0 + 600:.0f}" and DrainOptions.from_json(phases[0][OPTIONS]).session_deadline_s == 600
    assert (phases[0][BY], phases[0][STARTED]) == ("t", "1970-01-01T00:16:40Z")  # who, and when (T0) it began
    assert api.writes[1] == ("unschedulable", True) and api.writes[-1] == ("annotate", {lease.LEASE: None})
    assert d.entries()[-1][3] == "ok"
    assert lease.LEASE not in api.annotations
    started = d.events[0]
    assert (started.node, started.kind, started.message) == ("n1", EventKind.STARTED,
                                                             "cordoned; 2 pods to move, 0 live sessions to wait for")
    done = d.events[-1]
    assert (done.node, done.kind, done.message) == ("n1", EventKind.DONE, report.describe())
    assert "n1: drained, 2 pods evicted" in done.message


def test_a_node_already_cordoned_is_not_cordoned_again(tmp_path):
    """Kills: `if not plan.already_cordoned` → `if plan.already_cordoned` (a second cordon, audited)."""
    api = Api((pod("a"),), {"a": 0}, cordoned=True)
    d = Drain(api, tmp_path / "a.jsonl")
    assert d.run().outcome is Outcome.DRAINED
    assert not any(w[0] == "unschedulable" for w in api.writes)
    assert not any(a == "cordon" for a, *_ in d.entries())


def test_a_resumed_drain_keeps_its_deadline_and_takes_over_when_told(tmp_path):
    """A lease whose holder stopped renewing long ago: refused without take_over, taken with it, and the resumed
    drain records its original deadline. Kills: `take_over = start.take_over` → None, the take_over dropped from
    acquire or its audit params, `start.deadline if start.deadline is not None else ...` → the plan's deadline
    always, the refusal's event or report reason dropped."""
    stale = lease.Holder("other", "elsewhere", 1, "tok-other", T0 - 10 * lease.LEASE_S)
    api = Api((pod("a"),), {"a": 0})
    api.annotations[lease.LEASE] = json.dumps({"who": stale.who, "host": stale.host, "pid": stale.pid,
                                               "token": stale.token, "renewed": stale.renewed})
    refused = Drain(api, tmp_path / "r.jsonl")
    report = refused.run()
    assert [(e.node, e.kind) for e in refused.events] == [("n1", EventKind.FAILED)]
    assert "stopped renewing its lease" in refused.events[0].message and report.reason == refused.events[0].message
    assert api.writes == []
    assert [(a, p["take_over"], r.split(":")[0]) for a, _t, p, r in refused.entries()] == [
        ("lease", False, "refused")]

    d = Drain(api, tmp_path / "a.jsonl", start=DrainStart(deadline=T0 + 77.0, take_over=True))
    assert d.run().outcome is Outcome.DRAINED
    assert d.entries()[0][2]["take_over"] is True
    cordoned = next(w[1] for w in api.writes if w[0] == "annotate" and w[1].get(PHASE) == "cordoned")
    assert cordoned[DEADLINE] == f"{T0 + 77:.0f}"


def test_each_look_asks_to_be_polled_again_after_its_poll_and_sleeps_it():
    """A pod with live sessions is looked at each poll. Kills: the TICK's deadline `clock() + poll_s` changed
    (`-`, dropped), `sleep(poll_s)` → `sleep(None)` or dropped, `poll_s` read from elsewhere."""
    api = Api((pod("a"),), {"a": 3})
    looks = 0

    def quiet_after_three(a: Api) -> None:
        nonlocal looks
        looks += 1
        if looks == 3:
            a.counts["a"] = 0

    d = Drain(api, poll_s=2.5)
    api.on_read = quiet_after_three
    assert d.run().outcome is Outcome.DRAINED
    ticks = [e for e in d.events if e.kind is EventKind.TICK]
    assert len(ticks) >= 3
    assert all(t.node == "n1" for t in ticks)
    assert [t.deadline for t in ticks[:3]] == [T0 + 2.5, T0 + 5.0, T0 + 7.5]
    assert d.slept[:3] == [2.5, 2.5, 2.5]


def test_a_failed_read_pauses_backs_off_says_why_once_and_resumes(tmp_path):
    """Kills: the backoff's first wait (`poll_s`; `backoff = 1.0` at the start: 2 s, not the poll's 3), its doubling (`backoff * 2`), its cap (`min(PAUSE_MAX_S, ...)`),
    `if str(exc) != paused` → `==` (a pause audited and counted on every retry), `report.pauses += 1` changed, the
    drain-paused or drain-resumed audit record (action, result, params) changed, the PAUSED or RESUMED event's
    words, the TICK's node and deadline `clock() + backoff`, `sleep(backoff)`, `paused, backoff = "", 0.0` after a resume
    (a later pause starting at the old backoff, or not said again)."""
    api = Api((pod("a"),), {"a": 3})
    d = Drain(api, tmp_path / "a.jsonl", poll_s=3.0)
    down = BackendError("the API is down")
    other = BackendError("token expired")
    api.failures = [down] * 6 + [other]
    looks = 0

    def fail_again_later(a: Api) -> None:
        nonlocal looks
        looks += 1
        if looks == 9:  # two good looks after the first resume, then one failure more
            a.failures.append(down)
        if looks == 12:
            a.counts["a"] = 0

    api.on_read = fail_again_later
    report = d.run()
    assert report.outcome is Outcome.DRAINED and report.pauses == 3
    paused = [e for e in d.events if e.kind is EventKind.PAUSED]
    assert [e.message for e in paused] == [
        "the API is down; trying again in 3s", "the API is down; trying again in 6s",
        "the API is down; trying again in 12s", "the API is down; trying again in 24s",
        "the API is down; trying again in 30s", "the API is down; trying again in 30s",
        "token expired; trying again in 30s",
        "the API is down; trying again in 3s"]
    assert all(e.node == "n1" for e in paused)
    assert d.slept[:7] == [3.0, 6.0, 12.0, 24.0, PAUSE_MAX_S, PAUSE_MAX_S, PAUSE_MAX_S]
    ticks = [e for e in d.events if e.kind is EventKind.TICK]
    assert ticks[0].deadline == T0 + 3.0 and ticks[1].deadline == T0 + 3.0 + 6.0
    assert all(t.node == "n1" for t in ticks)  # a pause's ticks name the node too (a batch steps by them)
    resumed = [(e.node, e.message) for e in d.events if e.kind is EventKind.RESUMED]
    assert resumed == [("n1", "resumed after: token expired"), ("n1", "resumed after: the API is down")]
    events = [(a, t, p, r) for a, t, p, r in d.entries() if a.startswith("drain-")]
    assert events == [
        ("drain-paused", "node/n1", {"reason": "the API is down"}, "paused"),
        ("drain-paused", "node/n1", {"reason": "token expired"}, "paused"),
        ("drain-resumed", "node/n1", {"after": "token expired"}, "ok"),
        ("drain-paused", "node/n1", {"reason": "the API is down"}, "paused"),
        ("drain-resumed", "node/n1", {"after": "the API is down"}, "ok"),
    ]


def test_a_pod_left_in_place_stops_the_drain_unfinished_and_says_which(tmp_path):
    """Sessions unknown at the deadline: the pod is left in place. Kills: `report.held` built from another
    state or without the pod's message, `drained = not report.failed and not report.held` → `or`,
    `phase("done" if drained else "stopped")` swapped, the outcome or the end event's kind swapped."""
    api = Api((pod("a"),), {"a": None}, metrics_ok=False)
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(session_deadline_s=5))
    report = d.run()
    assert report.outcome is Outcome.UNFINISHED
    assert len(report.held) == 1 and report.held[0].startswith("ns/a: ") and len(report.held[0]) > len("ns/a: ")
    assert api.annotations[PHASE] == "stopped" and "a" in api.pods
    assert (d.events[-1].node, d.events[-1].kind, d.events[-1].message) == ("n1", EventKind.FAILED, report.describe())
    assert d.entries()[-1][0] == "lease-release"


@pytest.mark.parametrize("uncordon", [False, True])
def test_an_aborted_drain_records_it_puts_back_the_cordon_only_when_asked_and_releases(tmp_path, uncordon):
    """Kills: `if control.aborted` → `not`, the phase "aborted" dropped or renamed, `if control.uncordon_on_abort`
    → `not`, the uncordon's audit (action, reason) or its write (`False`) changed, the release dropped, the
    outcome (ABORTED) or the ABORTED event's words ("uncordoned" / "left cordoned") changed."""
    api = Api((pod("a"),), {"a": 3})
    control = DrainControl()
    d = Drain(api, tmp_path / "a.jsonl", control=control)
    for event in d.gen:
        if event.kind is EventKind.TICK:
            break
    control.abort(uncordon=uncordon)
    report = d.run()
    assert report.outcome is Outcome.ABORTED and "a" in api.pods
    assert (d.events[-1].node, d.events[-1].kind, d.events[-1].message) == (
        "n1", EventKind.ABORTED, "uncordoned" if uncordon else "left cordoned")
    assert api.annotations[PHASE] == "aborted" and lease.LEASE not in api.annotations
    assert api.cordoned is (not uncordon)
    tail = [(a, p) for a, _t, p, _r in d.entries()][-3 if uncordon else -2:]
    assert tail == ([("annotate", {"phase": "aborted"})] + ([("uncordon", {"reason": "drain aborted"})] if uncordon
                                                             else []) + [("lease-release", tail[-1][1])])
    assert [w for w in api.writes if w[0] == "unschedulable"] == [("unschedulable", True)] + (
        [("unschedulable", False)] if uncordon else [])


def test_the_lease_is_renewed_every_renew_period_and_a_takeover_stops_the_drain_without_a_write(tmp_path):
    """Kills: `clock() - renewed >= lease.RENEW_S` → `>` / `<` / `+`, the renewal's new time not kept
    (`renewed = clock()` dropped: renewed on every look), the holder returned by renew dropped; on LeaseHeld: the
    FAILED event or the report's reason dropped, a phase or release written after a takeover."""
    api = Api((pod("a"),), {"a": 3})
    d = Drain(api, tmp_path / "a.jsonl", poll_s=5.0)
    renewals: list[float] = []
    for event in d.gen:
        if event.kind is EventKind.TICK:
            renewals = [json.loads(w[1][lease.LEASE])["renewed"] for w in api.writes
                        if w[0] == "annotate" and w[1].get(lease.LEASE)]
            if d.clock() >= T0 + 40:
                break
    # taken at T0; renewed at the look 15 s later and 15 s after that, not at each 5 s look
    assert renewals == [T0, T0 + 15, T0 + 30]
    # another gputui takes the node over
    api.annotations[lease.LEASE] = json.dumps({"who": "other", "host": "elsewhere", "pid": 1, "token": "tok-x",
                                               "renewed": d.clock()})
    before = list(api.writes)
    d.clock.advance(lease.RENEW_S)
    report = d.run()
    assert api.writes == before  # nothing more written: not a phase, not a release
    failed = [e for e in d.events if e.kind is EventKind.FAILED]
    assert len(failed) == 1 and failed[0].node == "n1" and "is being drained by other" in failed[0].message
    assert report.reason == failed[0].message and report.outcome is Outcome.FAILED


def test_the_live_backend_rereads_just_the_drains_pods(tmp_path):
    """A reader that can re-read a few pods (PodsReader) is asked for just the pods of this drain, not a whole
    snapshot. Kills: `pods_view(list(pods))` → `pods_view(None)`, `isinstance(reader, PodsReader)` → the whole
    snapshot always."""

    class PodsApi(Api):
        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            self.asked: list[tuple[list[str], tuple]] = []

        def pods_snapshot(self, keys, namespaces=()) -> ClusterSnapshot:
            self.asked.append((sorted(keys), tuple(namespaces)))
            return self.snapshot()

    api = PodsApi((pod("a"), pod("b")), {"a": 0, "b": 0})
    d = Drain(api)
    assert d.run().outcome is Outcome.DRAINED
    assert api.asked and api.asked[0] == (["ns/a", "ns/b"], ())


def test_a_lease_no_longer_the_drains_at_its_end_is_not_dropped_and_the_audit_says_so(tmp_path):
    """Between the last renewal and the end, the lease was removed (taken over, then given back): the release
    drops nothing and its result says why. Kills: `if not lease.release(...)` → `if lease.release(...)`, the
    result's words changed or set to None."""
    api = Api((pod("a"),), {"a": 3})
    control = DrainControl()
    d = Drain(api, tmp_path / "a.jsonl", control=control)
    for event in d.gen:
        if event.kind is EventKind.TICK:
            break
    api.annotations.pop(lease.LEASE)
    control.abort()
    assert d.run().outcome is Outcome.ABORTED
    action, _target, _params, result = d.entries()[-1]
    assert (action, result) == ("lease-release", "ok: nothing to drop (the lease is no longer this drain's)")
    assert api.writes[-1] == ("annotate", {PHASE: "aborted"})  # no release written


def test_a_refused_cordon_fails_the_drain_before_any_eviction_says_why_and_drops_its_lease(tmp_path):
    """Kills: the "could not start" event's node, kind or words changed or dropped, the report's reason dropped,
    the `except BackendError` around the start taken away (the refusal raised out of the drain). The lease is
    dropped, so that the next drain of the node is not refused for a lease nobody renews (it stayed before)."""

    class NoCordon(Api):
        def set_unschedulable(self, node: str, unschedulable: bool) -> None:
            raise BackendError("forbidden: may not patch node n1")

    api = NoCordon((pod("a"),), {"a": 0})
    d = Drain(api, tmp_path / "a.jsonl")
    report = d.run()
    words = "could not start: forbidden: may not patch node n1"
    assert [(e.node, e.kind, e.message) for e in d.events] == [("n1", EventKind.FAILED, words)]
    assert (report.outcome, report.reason, report.evicted) == (Outcome.FAILED, words, 0)
    assert "a" in api.pods and not any(w[0] == "evict" for w in api.writes)
    assert [(a, r.split(":")[0]) for a, _t, _p, r in d.entries()] == [("lease", "ok"), ("cordon", "error"),
                                                                       ("lease-release", "ok")]
    assert lease.LEASE not in api.annotations


def test_an_abort_closes_an_eviction_its_budget_still_refuses_with_why(tmp_path):
    """A quiet pod whose eviction its PDB keeps refusing, then the operator aborts: its eviction's audit result
    says the refusal and the abort. Kills, in `leave`: `_close(prog, audit, f"not evicted: {why}")` → `audit`
    None or the words None, and `leave("the drain was aborted")` → `leave(None)`."""
    api = Api((pod("a"),), {"a": 0})
    api.blocked.add("a")
    control = DrainControl()
    d = Drain(api, tmp_path / "a.jsonl", control=control)
    for event in d.gen:
        if event.kind is EventKind.BLOCKED:
            break
    control.abort()
    assert d.run().outcome is Outcome.ABORTED
    evicts = [(p, r) for a, _t, p, r in d.entries() if a == "evict"]
    assert evicts == [(evicts[0][0], "refused: Cannot evict pod; not evicted: the drain was aborted")]


@pytest.mark.parametrize("end", ["taken over", "interrupted"])
def test_an_eviction_its_budget_still_refuses_is_closed_with_how_the_drain_ended(tmp_path, end):
    """Kills: `leave(f"the drain stopped: {exc}")` → `leave(None)` (a takeover) and, in the `finally`,
    `leave("the drain was interrupted")` → `leave(None)` (the generator dropped: quitting gputui, Ctrl-C)."""
    api = Api((pod("a"),), {"a": 0})
    api.blocked.add("a")
    d = Drain(api, tmp_path / "a.jsonl", poll_s=5.0)
    for event in d.gen:
        if event.kind is EventKind.BLOCKED:
            break
    if end == "interrupted":
        d.gen.close()
        why = "the drain was interrupted"
    else:
        api.annotations[lease.LEASE] = json.dumps({"who": "other", "host": "elsewhere", "pid": 1, "token": "tok-x",
                                                   "renewed": d.clock() + lease.RENEW_S})
        d.clock.advance(lease.RENEW_S)
        assert d.run().outcome is Outcome.FAILED
        why = f"the drain stopped: {d.events[-1].message}"
    evicts = [r for a, _t, _p, r in d.entries() if a == "evict"]
    assert evicts == [f"refused: Cannot evict pod; not evicted: {why}"]


def test_a_drain_that_cannot_start_nor_drop_its_lease_says_both(tmp_path):
    """The cordon refused, then the lease's release refused too: the drain says why it could not start and that
    its lease stays until it expires. Kills: `why += …` → `why = …` (the first cause lost) and `-=`."""
    api = Api((pod("a"),), {"a": 0})

    def refuse_cordon(node, on):
        raise BackendError("nodes is forbidden")

    original = api.annotate_node

    def annotate(node, values, resource_version=None):
        if values.get(lease.LEASE, "") is None:
            raise BackendError("the apiserver is gone")
        return original(node, values, resource_version)

    api.set_unschedulable = refuse_cordon  # type: ignore[method-assign]
    api.annotate_node = annotate  # type: ignore[method-assign]
    d = Drain(api, tmp_path / "a.jsonl")
    report = d.run()
    why = "could not start: nodes is forbidden; its lease stays on the node until it expires (the apiserver is gone)"
    assert report.reason == why
    assert (d.events[-1].node, d.events[-1].kind, d.events[-1].message) == ("n1", EventKind.FAILED, why)


def test_an_aborted_gpu_drain_says_the_node_was_left_schedulable(tmp_path):
    """One GPU's drain never cordoned the node, so its abort neither uncordons it nor says "uncordoned". Kills: the
    ABORTED words' `if opts.gpu` → `and False`, and the words changed."""
    control = DrainControl()
    api = Api((pod("a"), pod("b")), {"a": 5, "b": 0})
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(gpu="1", gpu_pods=("ns/a",)), control=control)
    api.on_read = lambda a: control.abort(uncordon=True) if a.reads > 3 else None
    report = d.run()
    assert report.outcome is Outcome.ABORTED
    assert (d.events[-1].kind, d.events[-1].message) == (EventKind.ABORTED, "the node left schedulable")
    assert not any(w[0] == "unschedulable" for w in api.writes)

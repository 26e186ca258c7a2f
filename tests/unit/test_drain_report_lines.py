"""A drain's closing line, part by part: every count that matters to the operator is said, and only when it is
not zero; a batch's node the guard stopped says only why."""

from __future__ import annotations

from gputui.ops.drain.report import DrainReport, Outcome


def test_a_report_starts_as_a_failure_with_nothing_done():
    """Fail closed: a report nobody filled in says failed, not drained."""
    report = DrainReport("n1")
    assert report.outcome is Outcome.FAILED
    assert (report.evicted, report.failed, report.held, report.cut_sessions, report.unknown_cut_pods,
            report.pauses, report.reason) == (0, [], [], 0, 0, 0, "")
    assert report.describe() == "n1: failed, 0 pods evicted"


def test_reports_do_not_share_their_lists():
    a, b = DrainReport("a"), DrainReport("b")
    a.failed.append("x")
    assert b.failed == []


def test_not_started_says_why_and_nothing_else():
    report = DrainReport("n1", Outcome.NOT_STARTED, evicted=3, pauses=2, reason="capacity guard: no room")
    assert report.describe() == "n1: not started (capacity guard: no room)"
    assert DrainReport("n1", Outcome.NOT_STARTED).describe() == "n1: not started"


def test_every_part_in_its_order():
    report = DrainReport("n1", Outcome.UNFINISHED, evicted=3, failed=["ns/a: 500", "ns/b: 422"],
                         held=["ns/c: sessions unknown at the deadline", "ns/d: held"], cut_sessions=4, unknown_cut_pods=2,
                         pauses=1, reason="deadline")
    assert report.describe() == (
        "n1: unfinished, 3 pods evicted (deadline), 2 failed (ns/a: 500; ns/b: 422), "
        "2 left in place (ns/c: sessions unknown at the deadline; ns/d: held), 4 live sessions cut by choice, "
        "2 pods evicted with sessions unknown (possibly cut), paused 1 time (API or metrics failures, retried)")


def test_one_of_each_is_said_in_the_singular():
    report = DrainReport("n1", Outcome.ABORTED, evicted=1, unknown_cut_pods=1, pauses=1)
    assert report.describe() == ("n1: aborted, 1 pod evicted, 1 pod evicted with sessions unknown (possibly cut), "
                                 "paused 1 time (API or metrics failures, retried)")


def test_the_outcomes_read_as_words():
    assert [o.value for o in Outcome] == ["drained", "unfinished", "failed", "aborted", "not started"]

"""ops.drain.progress: the one fold of a drain's events that the TUI's board and `gputui drain` both render, and
what in it is news (a line in the board's log, a line on the CLI's stdout)."""

from __future__ import annotations

from gputui.ops.drain.events import DrainEvent
from gputui.ops.drain.events import EventKind as K
from gputui.ops.drain.progress import DrainProgress

POD = "llm/chat-0"


def fold(*events: DrainEvent) -> tuple[DrainProgress, list[bool]]:
    progress = DrainProgress()
    return progress, [progress.apply(e, 100.0 + i) for i, e in enumerate(events)]


def test_a_waiting_pod_is_news_again_only_when_its_count_moves():
    progress, news = fold(DrainEvent("n", K.WAITING, POD, sessions=3, deadline=500.0),
                          DrainEvent("n", K.WAITING, POD, sessions=3, deadline=500.0),
                          DrainEvent("n", K.WAITING, POD, sessions=2, deadline=500.0),
                          DrainEvent("n", K.WAITING, POD, sessions=None, deadline=500.0))
    assert news == [True, False, True, True]
    row = progress.pods[POD]
    assert (row.state, row.sessions, row.deadline, row.node) == (K.WAITING, None, 500.0, "n")


def test_a_pdb_refusal_is_news_once_and_counts_its_tries():
    progress, news = fold(*(DrainEvent("n", K.BLOCKED, POD, "budget chat-pdb", count=c) for c in (1, 2, 3)))
    assert news == [True, False, False]
    row = progress.pods[POD]
    assert (row.tries, row.last_try, row.message) == (3, 102.0, "budget chat-pdb")


def test_a_pause_is_news_again_only_for_another_reason_or_after_it_resumed():
    progress, news = fold(DrainEvent("n", K.PAUSED, message="503 from the apiserver; trying again in 1s"),
                          DrainEvent("n", K.PAUSED, message="503 from the apiserver; trying again in 2s"),
                          DrainEvent("n", K.PAUSED, message="token expired; trying again in 4s"),
                          DrainEvent("n", K.RESUMED, message="resumed"),
                          DrainEvent("n", K.PAUSED, message="token expired; trying again in 1s"),
                          DrainEvent("n", K.TICK))
    assert news == [True, False, True, True, True, False]
    assert progress.node_state == {"n": K.PAUSED}


def test_moved_and_settled_pods_and_ended_nodes():
    progress, _ = fold(DrainEvent("n", K.STARTED), DrainEvent("n", K.EVICTED, "a/1"), DrainEvent("n", K.REPLACED, "a/2"),
                       DrainEvent("n", K.HELD, "a/3"), DrainEvent("n", K.WAITING, "a/4", sessions=1),
                       DrainEvent("n", K.SESSIONS_CUT, "a/1", "cut 2", 2), DrainEvent("m", K.DONE))
    rows = progress.on("n")
    assert [(r.pod, r.moved, r.settled) for r in rows] == [
        ("a/1", True, True), ("a/2", True, True), ("a/3", False, True), ("a/4", False, False)]
    assert progress.pods["a/1"].state is K.EVICTED  # a cut is said, and is no state of the pod
    assert progress.nodes_ended() == 1 and progress.node_state == {"n": K.STARTED, "m": K.DONE}


def test_rotation_moves_its_own_fields_and_no_state():
    progress, news = fold(DrainEvent("n", K.OUT_OF_ROTATION, POD, "out"),
                          DrainEvent("n", K.WAITING, POD, sessions=4),
                          DrainEvent("n", K.WAITING, POD, sessions=2),
                          DrainEvent("n", K.IN_ROTATION, POD, "back in rotation (asked by the operator)"))
    row = progress.pods[POD]
    assert news == [True, True, True, True]
    assert row.state is K.WAITING and row.out_since is None and row.decay_from is None
    assert row.rotation_note == "back in rotation (asked by the operator)"

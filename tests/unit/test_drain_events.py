"""What the operator tells a running drain (DrainControl), taken by the run from another thread."""

from __future__ import annotations

import threading

from gputui.ops.drain.events import FINAL, DrainControl, DrainEvent, EventKind


def test_a_fresh_control_asks_nothing():
    control = DrainControl()
    assert control.take("ns/p") == (False, 0.0)
    assert control.aborted is False and control.uncordon_on_abort is False


def test_evict_now_is_for_the_pod_named_and_stays_asked():
    """The run asks at every poll until the pod is evicted: taking the answer does not forget it."""
    control = DrainControl()
    control.evict_now("ns/a")
    assert control.take("ns/a") == (True, 0.0)
    assert control.take("ns/a") == (True, 0.0)
    assert control.take("ns/b") == (False, 0.0)


def test_extensions_add_up_until_taken_then_start_again():
    control = DrainControl()
    control.extend("ns/a", 60.0)
    control.extend("ns/a", 30.0)
    control.extend("ns/b", 5.0)
    assert control.take("ns/a") == (False, 90.0)
    assert control.take("ns/a") == (False, 0.0)  # taken once: the run added it to the deadline
    control.extend("ns/a", 10.0)
    assert control.take("ns/a") == (False, 10.0)
    assert control.take("ns/b") == (False, 5.0)


def test_abort_keeps_the_node_cordoned_unless_asked_to_uncordon():
    control = DrainControl()
    control.abort()
    assert (control.aborted, control.uncordon_on_abort) == (True, False)
    other = DrainControl()
    other.abort(uncordon=True)
    assert (other.aborted, other.uncordon_on_abort) == (True, True)


def test_extensions_from_many_threads_are_all_counted():
    control = DrainControl()

    def press() -> None:
        for _ in range(500):
            control.extend("ns/a", 1.0)

    threads = [threading.Thread(target=press) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert control.take("ns/a") == (False, 2000.0)


def test_only_done_aborted_and_failed_end_a_drain():
    assert {EventKind.DONE, EventKind.ABORTED, EventKind.FAILED} == FINAL


def test_an_event_carries_no_count_or_sessions_unless_given():
    event = DrainEvent("n1", EventKind.WAITING)
    assert (event.pod, event.message, event.sessions, event.deadline, event.count) == ("", "", None, None, 0)
    assert EventKind.WAITING == "waiting" and EventKind.SESSIONS_CUT == "sessions-cut"


def test_pods_asked_back_into_rotation_are_taken_once():
    control = DrainControl()
    assert control.take_put_backs() == set()
    control.put_back("ns/a")
    control.put_back("ns/b")
    control.put_back("ns/a")
    assert control.take_put_backs() == {"ns/a", "ns/b"}
    assert control.take_put_backs() == set()

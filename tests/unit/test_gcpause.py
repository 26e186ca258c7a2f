"""gcpause: the collector paused while answers are digested, and a large fleet's objects frozen out of its walks
without keeping cyclic garbage for longer than one renewal."""

import gc
import weakref

from gputui.backends.gcpause import RENEW_S, gc_paused, settle, settle_after_snapshot, unsettle


class Cycle:
    def __init__(self) -> None:
        self.me = self


def _dropped_cycle() -> weakref.ref:
    """A reference cycle nobody holds any more: only the cycle collector can free it."""
    obj = Cycle()
    ref = weakref.ref(obj)
    del obj
    return ref


def test_pauses_nest_across_callers_and_leave_a_collector_someone_turned_off_off():
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still open
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_garbage_dead_before_a_freeze_is_collected_and_what_a_freeze_kept_goes_at_the_next_renewal():
    try:
        dead = _dropped_cycle()
        settle(renew=False)  # the young collection before the freeze frees it
        assert dead() is None

        kept = Cycle()
        frozen_while_alive = weakref.ref(kept)
        settle(renew=False)
        assert gc.get_freeze_count() > 0
        del kept  # garbage now, but frozen: no pass looks at it
        gc.collect()
        assert frozen_while_alive() is not None
        settle(renew=False)  # a later snapshot's freeze does not free it either
        assert frozen_while_alive() is not None
        settle(renew=True)  # thawed, collected in full, frozen again
        assert frozen_while_alive() is None
        assert gc.get_freeze_count() > 0
    finally:
        unsettle()
    assert gc.get_freeze_count() == 0


def test_the_polls_settling_renews_in_full_first_then_every_renew_s_and_again_after_a_thaw():
    try:
        unsettle()
        assert settle_after_snapshot(100.0) is True
        assert gc.get_freeze_count() > 0
        assert settle_after_snapshot(101.0) is False
        assert settle_after_snapshot(100.0 + RENEW_S) is True
        unsettle()  # a reader closed: thawed, and whatever it froze in a cycle goes at the next renewal
        assert gc.get_freeze_count() == 0
        assert settle_after_snapshot(101.0 + RENEW_S) is True
    finally:
        unsettle()
    assert gc.get_freeze_count() == 0


def test_what_a_paused_decode_made_is_frozen_where_it_stands_once_the_poll_settles():
    try:
        unsettle()
        with gc_paused():
            made = [[i] for i in range(1000)]  # lists: always tracked by the collector
        assert made and gc.get_freeze_count() == 0  # nothing settles (a headless command): nothing is frozen
        settle_after_snapshot(0.0)
        with gc_paused():
            decoded = [[i] for i in range(1000)]  # lists: always tracked by the collector
        # Frozen: tracked, yet in none of the collector's generations. (Not a difference of freeze counts: frozen
        # objects another thread frees meanwhile lower the count, and made this flaky.)
        walked = {id(o) for o in gc.get_objects()}
        assert all(gc.is_tracked(x) for x in decoded) and not any(id(x) in walked for x in decoded)
    finally:
        unsettle()
    assert gc.get_freeze_count() == 0

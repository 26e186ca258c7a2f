"""A large fleet's refresh moves its objects out of the cycle collector's sight (gc.freeze), and hands them
back for one full pass every UNFREEZE_S; a small fleet leaves the collector as it is."""

from __future__ import annotations

import gc
import weakref

from gputui.backends import gcpause


def test_settle_freezes_large_refreshes_and_collects_what_died_now_and_then(monkeypatch):
    monkeypatch.setattr(gcpause, "_frozen_since", None)
    gc.unfreeze()
    try:
        gcpause.settle(500, 0.0)  # a small fleet: nothing frozen
        assert gc.get_freeze_count() == 0
        gcpause.settle(gcpause.FREEZE_FROM, 0.0)
        assert gc.get_freeze_count() > 0

        class Cycle:
            pass

        a, b = Cycle(), Cycle()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        alive = weakref.ref(a)
        gcpause.settle(gcpause.FREEZE_FROM, 1.0)  # frozen alive...
        del a, b  # ...then dropped: only the collector frees a cycle, and it does not look at frozen objects
        gc.collect()
        assert alive() is not None
        gcpause.settle(gcpause.FREEZE_FROM, 1.0 + gcpause.UNFREEZE_S)  # handed back, collected, frozen again
        assert alive() is None and gc.get_freeze_count() > 0
        gcpause.settle(gcpause.FREEZE_FROM, 2.0 + gcpause.UNFREEZE_S)
        gcpause.settle(10, 3.0 + gcpause.UNFREEZE_S)  # the fleet shrank (another context): all handed back
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()

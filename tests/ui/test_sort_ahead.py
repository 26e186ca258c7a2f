"""`s` works out the next column's order ahead, in a worker: the worker only computes it, and the UI thread
stores it on the snapshot on screen (issue 36 item 5: nothing fills a snapshot's memo from a thread without a
message)."""

import threading

from gputui.present.columns import NODE_COLUMNS
from gputui.snapshot import ClusterSnapshot
from tests.ui.pilot import loaded, wait_for


async def test_the_next_sort_is_worked_out_in_a_thread_and_stored_by_the_ui_thread(app_factory, monkeypatch):
    app = app_factory(refresh=3600.0)  # no poll replaces the snapshot on screen meanwhile
    writes: list[tuple[object, str]] = []  # (key, thread) of each value stored on the snapshot on screen
    shown: list[ClusterSnapshot] = []
    derived = ClusterSnapshot.derived

    def recording(self, key, compute):
        def stored():
            if shown and self is shown[0]:
                writes.append((key, threading.current_thread().name))
            return compute()

        return derived(self, key, stored)

    monkeypatch.setattr(ClusterSnapshot, "derived", recording)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        shown.append(app.snapshot)
        await pilot.press("s")
        following = (app.screen.sort_index + 1) % len(NODE_COLUMNS)

        def ahead() -> list[tuple[object, str]]:
            return [(key, thread) for key, thread in writes
                    if isinstance(key, tuple) and key[:3] == ("order", following, False)]

        # Kept on the snapshot on screen, so that a press that follows finds it.
        await wait_for(pilot, ahead, what=lambda: writes)
        assert len(ahead()) == 1
        main = threading.main_thread().name
        assert [(key, thread) for key, thread in writes if thread != main] == []

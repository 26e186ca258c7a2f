"""Start-up on a large cluster: while the first lists run, the connecting screen says how far they are."""

from __future__ import annotations

import threading

import pytest

from gputui.backends.base import Backend, ListProgress
from gputui.backends.demo import DemoCluster
from gputui.backends.factory import NotConnected
from gputui.ops.audit import AuditLog
from gputui.settings import Settings
from gputui.ui.app import GputuiApp
from gputui.ui.screens.connecting import ConnectingScreen, reading_line
from tests.support.terminal import until


class SlowFirstRead(DemoCluster):
    """The demo, read as a large cluster reads: the first snapshot waits until the test lets it go, and
    meanwhile the reader says how far its lists are (as the live reader does, from the apiserver's pages)."""

    def __init__(self) -> None:
        super().__init__(seed=7)
        self.go = threading.Event()
        self.lists: tuple[ListProgress, ...] = (ListProgress("nodes", 12000, 65000), ListProgress("pods", 3500, None))

    def progress(self) -> tuple[ListProgress, ...]:
        return () if self.go.is_set() else self.lists

    def snapshot(self):  # type: ignore[no-untyped-def]
        self.go.wait(30)
        return super().snapshot()


def test_the_reading_line_names_each_list_and_its_estimate():
    assert reading_line([ListProgress("nodes", 12000, 65000), ListProgress("pods", 3500, None)]) == (
        "reading nodes 12,000 / ~65,000 · pods 3,500")
    assert reading_line([ListProgress("nodes", 500, 500)]) == "reading nodes 500"  # no estimate past what is read
    assert reading_line([]) == ""


@pytest.mark.asyncio
async def test_start_up_shows_how_far_the_first_lists_are_then_the_dashboard(tmp_path):
    reader = SlowFirstRead()
    settings = Settings()
    app = GputuiApp(settings, Backend(reader=NotConnected(), writer=None, context="big"),
                    audit=AuditLog(tmp_path / "audit.jsonl", "unknown", "big"),
                    connect=lambda: Backend(reader=reader, writer=reader, context="big", simulated=True))
    async with app.run_test(size=(80, 24)) as pilot:
        def shown() -> str:
            screen = app.screen
            return str(screen.text()) if isinstance(screen, ConnectingScreen) else ""

        await until(pilot, lambda: "reading" in shown())
        assert "reading nodes 12,000 / ~65,000 · pods 3,500" in shown()
        reader.lists = (ListProgress("nodes", 40000, 65000), ListProgress("pods", 9000, None))
        assert "reading nodes 40,000 / ~65,000 · pods 9,000" in shown()  # read again at each draw
        reader.go.set()
        await until(pilot, lambda: app.snapshot is not None and not isinstance(app.screen, ConnectingScreen))
        await pilot.press("q")

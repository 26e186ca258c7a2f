"""Start-up on a large cluster: while the first lists run, the connecting screen says how far they are, or the
context's last snapshot is drawn, marked CACHED, with every write refused until the live read replaces it."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from gputui.backends.base import Backend, ListProgress
from gputui.backends.demo import DemoCluster
from gputui.backends.factory import CACHED_VIEW, NotConnected
from gputui.backends.snapshot_cache import cache_path, save
from gputui.cli.tui import cached_snapshot
from gputui.ops.audit import AuditLog
from gputui.settings import Settings
from gputui.snapshot import SourceStatus
from gputui.ui import app_poll
from gputui.ui.app import GputuiApp
from gputui.ui.screens.connecting import ConnectingScreen, reading_line
from gputui.ui.widgets.header import HeaderBar
from tests.support.terminal import until


def pending_backend_for(context: str, waiting: str = "") -> Backend:
    """What cli.tui holds while it connects (factory.pending_backend, without a kubeconfig to read)."""
    return Backend(reader=NotConnected(), writer=None, context=context, waiting=waiting)


class SlowFirstRead(DemoCluster):
    """The demo, read as a large cluster reads: the first snapshot waits until the test lets it go, and
    meanwhile the reader says how far its lists are (as the live reader does, from the apiserver's pages)."""

    def __init__(self) -> None:
        super().__init__(seed=7)
        self.go = threading.Event()
        self.lists: tuple[ListProgress, ...] = (ListProgress("nodes", 12000, 65000), ListProgress("pods", 3500, None))

    def progress(self) -> tuple[ListProgress, ...]:
        return () if self.go.is_set() else self.lists

    def partial_snapshot(self):  # type: ignore[no-untyped-def]
        """The first five nodes, as the live reader's partial view has what its lists hold so far."""
        whole = super().snapshot()
        return dataclasses.replace(whole, nodes=whole.nodes[:5], simulated=False, session_counts={},
                                   sources=(SourceStatus("API", None, "partial: reading nodes 5 / ~27"),))

    def snapshot(self):  # type: ignore[no-untyped-def]
        self.go.wait(30)
        return super().snapshot()


def test_the_reading_line_names_each_list_and_its_estimate():
    assert reading_line([ListProgress("nodes", 12000, 65000), ListProgress("pods", 3500, None)]) == (
        "reading nodes 12,000 / ~65,000 · pods 3,500")
    assert reading_line([ListProgress("nodes", 500, 500)]) == "reading nodes 500"  # no estimate past what is read
    assert reading_line([]) == ""


@pytest.mark.asyncio
async def test_start_up_shows_how_far_the_first_lists_are_then_the_dashboard(tmp_path, monkeypatch):
    monkeypatch.setattr(app_poll, "PARTIAL_EVERY_S", 3600)  # this test reads the connecting screen: no partial view
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


@pytest.mark.asyncio
async def test_the_last_snapshot_is_drawn_at_once_marked_cached_and_nothing_is_written_until_the_live_read(
        tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    now = 1_800_000_000.0
    reader = SlowFirstRead()
    old = dataclasses.replace(DemoCluster(seed=7, clock=lambda: now - 240).snapshot(), simulated=False,
                              context="big")
    save(old, cache_path("big"))
    cached, note = cached_snapshot("big")
    assert cached is not None and note == ""
    settings = Settings()
    app = GputuiApp(settings, pending_backend_for("big", CACHED_VIEW), clock=lambda: now,
                    audit=AuditLog(tmp_path / "audit.jsonl", "unknown", "big"),
                    connect=lambda: Backend(reader=reader, writer=reader, context="big"), cached=cached)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not isinstance(app.screen, ConnectingScreen)  # the dashboard, drawn from the cache
        header = str(app.screen.query_one(HeaderBar).render())
        assert "CACHED" in header and "old" in header and "READ-ONLY" not in header
        assert app.snapshot is not None and len(app.snapshot.nodes) == len(old.nodes)
        await pilot.press("down")  # looking through it works
        await pilot.press("c")  # a write does not: it says why
        await pilot.pause()
        said = [str(n.message) for n in app._notifications]
        assert any("cached view: wait for the live read" in m for m in said), said
        reader.go.set()
        await until(pilot, lambda: app.cached_at is None and app.connecting is None)
        await pilot.pause()
        assert "CACHED" not in str(app.screen.query_one(HeaderBar).render())
        await pilot.press("q")


def test_a_cache_of_another_context_or_a_simulation_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    snap = DemoCluster(seed=7).snapshot()
    save(dataclasses.replace(snap, simulated=False, context="other"), cache_path("big"))
    assert cached_snapshot("big")[0] is None and "not 'big'" in cached_snapshot("big")[1]
    save(dataclasses.replace(snap, context="big"), cache_path("big"))  # a demo's, simulated
    assert cached_snapshot("big")[0] is None
    assert cached_snapshot("nothing-yet") == (None, "")  # none yet: nothing to say
    (tmp_path / "gputui" / "snapshots").joinpath(cache_path("bad").name).write_text("{")
    assert cached_snapshot("bad")[1].startswith("cached snapshot not used: ")


@pytest.mark.asyncio
async def test_what_the_first_lists_hold_so_far_is_drawn_marked_partial_and_nothing_is_written_from_it(
        tmp_path, monkeypatch):
    monkeypatch.setattr(app_poll, "PARTIAL_EVERY_S", 0.05)
    reader = SlowFirstRead()
    app = GputuiApp(Settings(), pending_backend_for("big"), audit=AuditLog(tmp_path / "audit.jsonl", "unknown", "big"),
                    connect=lambda: Backend(reader=reader, writer=reader, context="big"))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.partial and not isinstance(app.screen, ConnectingScreen))
        assert app.snapshot is not None and len(app.snapshot.nodes) == 5
        header = str(app.screen.query_one(HeaderBar).render())
        assert "PARTIAL" in header and "reading nodes 5 / ~27" in header
        await pilot.press("c")  # a write from part of the cluster would plan without the rest: refused
        await pilot.pause()
        said = [str(n.message) for n in app._notifications]
        assert any("partial view: wait for the whole first read" in m for m in said), said
        reader.go.set()
        await until(pilot, lambda: app.connecting is None and not app.partial)
        await pilot.pause()
        assert len(app.snapshot.nodes) == 27 and "PARTIAL" not in str(app.screen.query_one(HeaderBar).render())
        await pilot.press("q")

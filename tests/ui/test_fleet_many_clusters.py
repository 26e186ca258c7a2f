"""A fleet of more clusters than Textual's thread workers (asyncio's default executor: min(32, cores + 4)
threads, 6 on a 2-core box) is read whole, and the dashboard, writes and drains keep their threads.

Found with benchmarks/fleet.py (20 clusters of 5,000 nodes on 2 cores): each cluster's poller ran forever on one
of those shared threads, so 6 clusters were read and 14 never were, and nothing else that runs on a worker
thread (the dashboard's refresh, a cordon, a drain) could start while the fleet view was up."""

from __future__ import annotations

import threading
import time

from gputui.backends.demo import demo_backend
from gputui.ui.runs import fleet_watch

CLUSTERS = 40  # more than the executor ever holds (32 at most), whatever the machine


async def test_every_cluster_of_a_large_fleet_is_read_and_the_dashboard_keeps_refreshing(app_factory, monkeypatch):
    monkeypatch.setattr(fleet_watch, "build_backend", lambda settings, **_: demo_backend(seed=7, read_only=True))
    app = app_factory(refresh=0.2)
    contexts = tuple(f"cluster-{i:02d}" for i in range(CLUSTERS))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        app.watch_fleet(contexts)
        assert app.fleet is not None
        polls = app.polls
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            read = [c for c in contexts if app.fleet.latest[c][0] is not None]
            if len(read) == CLUSTERS and app.polls >= polls + 2:
                break
            await pilot.pause(0.1)
        unread = [c for c in contexts if app.fleet.latest[c][0] is None]
        assert unread == [], f"{len(unread)} of {CLUSTERS} clusters never read"
        assert app.polls >= polls + 2, "the dashboard stopped refreshing while the fleet was polled"
        app.fleet.stop()


async def test_long_runs_on_worker_threads_leave_the_dashboard_its_refresh(app_factory):
    """Drains and guided canaries each hold a worker thread while they run: 40 of them at once (more than
    asyncio's default pool ever holds) and the dashboard still refreshes, and a short worker still runs."""
    app = app_factory(refresh=0.2)
    release = threading.Event()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        for _ in range(40):
            app.run_worker(lambda: release.wait(30), thread=True, group="drain", exit_on_error=False)
        ran = threading.Event()
        app.run_worker(ran.set, thread=True, group="write", exit_on_error=False)
        polls = app.polls
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (ran.is_set() and app.polls >= polls + 2):
            await pilot.pause(0.1)
        release.set()
        assert ran.is_set(), "a write's worker never ran beside 40 long runs"
        assert app.polls >= polls + 2, "the dashboard stopped refreshing beside 40 long runs"


async def test_a_replaced_fleet_stops_reading_and_closes_its_clusters(app_factory, monkeypatch):
    """Another fleet (or the app's end) stops the old one's pollers: no read of theirs arrives after, and each
    closes its connection."""
    closed: list[str] = []

    def build(settings, **_):
        backend = demo_backend(seed=7, read_only=True)
        backend.reader.close = lambda c=settings.context: closed.append(c)  # type: ignore[method-assign]
        return backend

    monkeypatch.setattr(fleet_watch, "build_backend", build)
    app = app_factory(refresh=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        app.watch_fleet(("old-1", "old-2"))
        old = app.fleet
        assert old is not None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(s is None for s, _ in old.latest.values()):
            await pilot.pause(0.05)
        app.watch_fleet(("new-1",))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sorted(closed) != ["old-1", "old-2"]:
            await pilot.pause(0.05)
        assert sorted(closed) == ["old-1", "old-2"]
        await pilot.pause(0.5)  # five refreshes: whatever the old pollers had sent has arrived
        assert app.fleet is not old and set(app.fleet.latest) == {"new-1"}, "a replaced fleet's read was kept"


async def test_the_apps_own_poll_waits_while_the_fleet_view_is_up_and_comes_back_with_the_dashboard(
        app_factory, monkeypatch):
    """The fleet view's pollers read every cluster it lists; the app's own poll (a whole snapshot and its derived
    views, none of it shown there) waits while the view is on top: 14% of the fleet's CPU at 20 clusters of
    5,000 nodes (benchmarks/fleet.py). Leaving the view, or covering it, polls at once."""
    from gputui.ui.screens.fleet import FleetScreen

    monkeypatch.setattr(fleet_watch, "build_backend", lambda settings, **_: demo_backend(seed=7, read_only=True))
    app = app_factory(refresh=0.1)

    async def polls_within(seconds: float, more_than: int) -> int:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and app.polls <= more_than:
            await pilot.pause(0.05)
        return app.polls

    async def paused() -> int:
        """Once the poll is paused no poll is under way (one that was set the timer that paused)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not app._poll_paused:
            await pilot.pause(0.05)
        assert app._poll_paused, "the poll never paused under the fleet view"
        return app.polls

    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        app.watch_fleet(("one", "two"))
        await app.push_screen(FleetScreen())
        before = await paused()
        await pilot.pause(1.5)  # fifteen refreshes
        assert app.polls == before, "the dashboard's poll ran under the fleet view"
        assert all(s is not None for s, _ in app.fleet.latest.values()), "the fleet itself was not read"
        await pilot.press("question_mark")  # help over the fleet: covered, so the poll comes back
        assert await polls_within(5, before) > before, "covering the fleet view did not resume the poll"
        await pilot.press("escape")
        again = await paused()
        await pilot.pause(1.0)
        assert app.polls == again, "the poll did not wait again with the fleet view back on top"
        await pilot.press("escape")  # back to the dashboard
        assert await polls_within(5, again) > again, "leaving the fleet view did not resume the poll"
        assert await polls_within(5, again + 2) > again + 2, "the dashboard's refresh did not go on after"
        app.fleet.stop()


async def test_with_the_apps_poll_waiting_the_fleets_reads_are_frozen_out_of_the_collectors_walks(
        app_factory, monkeypatch):
    """The app's poll settles the collector after its snapshot (gcpause); under the fleet view it waits, so the
    fleet's pollers settle instead, once a refresh: otherwise every full pass walks every cluster's records."""
    import gc

    from gputui.backends import gcpause
    from gputui.ui.screens.fleet import FleetScreen

    monkeypatch.setattr(fleet_watch, "build_backend", lambda settings, **_: demo_backend(seed=7, read_only=True))
    app = app_factory(refresh=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        app.watch_fleet(("one", "two"))
        await app.push_screen(FleetScreen())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not app._poll_paused:
            await pilot.pause(0.05)
        assert app._poll_paused
        gcpause.unsettle()  # what the app's own polls froze before the view came up
        assert gc.get_freeze_count() == 0 and gcpause._renewed_at is None
        reads = app.fleet.revision
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (app.fleet.revision < reads + 4 or gcpause._renewed_at is None):
            await pilot.pause(0.05)
        assert app.fleet.revision >= reads + 4, "the fleet was not read"
        assert gcpause._renewed_at is not None and gc.get_freeze_count() > 0, "nothing settled the fleet's reads"
        app.fleet.stop()
    gcpause.unsettle()

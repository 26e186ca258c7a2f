"""The wallboard: read-only, rotating pages, an unmissable stale warning, and resizes."""

from __future__ import annotations

from textual.widgets import Static

from gputui.ui.screens.wallboard import PAGES, WallboardScreen
from tests.ui.pilot import wait_for, wallboard_loaded


def wallboard_app(app_factory, **settings):
    return app_factory(wallboard=True, read_only=True, **settings)


def table_text(app) -> str:
    """The page as a person reads it when it holds a table."""
    import io

    from rich.console import Console

    console = Console(width=app.screen._page_size()[0], file=io.StringIO(), record=True)
    console.print(app.screen.query_one("#page", Static).content)
    return console.export_text()


def page_text(app) -> str:
    return str(app.screen.query_one("#page", Static).render())


async def test_pages_rotate_on_their_own(app_factory):
    app = wallboard_app(app_factory, wallboard_rotate=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await wallboard_loaded(pilot)
        first = app.screen.page
        await wait_for(pilot, lambda: app.screen.page != first, timeout=4)
        await wait_for(pilot, lambda: app.screen.page == first, timeout=2 * len(PAGES) + 2)


async def test_wallboard_cannot_write(app_factory):
    app = wallboard_app(app_factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await wallboard_loaded(pilot)
        assert app.read_only and app.backend.writer is None
        await pilot.press("c", "r", "w")
        assert isinstance(app.screen, WallboardScreen)
        await pilot.press("colon", *"cordon gpu-h100-01", "enter")
        await pilot.pause()
        assert isinstance(app.screen, WallboardScreen)
        assert any("not available on the wallboard" in n.message for n in app._notifications)


async def test_stale_data_is_unmistakable(app_factory):
    app = wallboard_app(app_factory, refresh=3600.0)  # no new poll while the clock runs ahead
    async with app.run_test(size=(100, 30)) as pilot:
        await wallboard_loaded(pilot)
        banner = app.screen.query_one("#stale-banner", Static)
        assert not banner.has_class("shown")
        app.test_clock.advance(3 * 3600 + 5)
        await wait_for(pilot, lambda: banner.has_class("shown"), timeout=3)
        assert "DATA STALE" in str(banner.render())


async def test_heat_map_follows_resizes(app_factory):
    app = wallboard_app(app_factory)
    async with app.run_test(size=(200, 50)) as pilot:
        await wallboard_loaded(pilot)
        wide = page_text(app)
        assert "gpu-h100-07" in wide  # one named line per node when there is room
        for size in ((80, 24), (50, 16), (200, 50)):
            await pilot.resize_terminal(*size)

            def fits() -> bool:
                lines = page_text(app).splitlines()
                return bool(lines) and max(len(line) for line in lines) <= size[0]  # noqa: B023 - called at once, in this iteration

            await wait_for(pilot, fits)
        await pilot.press("m")
        await pilot.pause()
        assert "°C" in page_text(app)  # the temperature heat map


async def test_a_cut_alerts_page_says_how_many_more(app_factory):
    from gputui.policy.health import fleet_alerts

    app = wallboard_app(app_factory)
    async with app.run_test(size=(80, 14)) as pilot:
        await wallboard_loaded(pilot)
        await pilot.press(*["n"] * PAGES.index("alerts"))  # the alerts page
        await wait_for(pilot, lambda: "more" in table_text(app))
        shown = table_text(app)
        assert len(shown.strip().splitlines()) <= app.screen._page_size()[1]
        worst = fleet_alerts(app.snapshot, 85.0)[0]
        assert worst.node in shown  # the worst stay on screen


async def test_the_alert_strip_keeps_its_more_count_whole_at_80_columns(app_factory):
    app = wallboard_app(app_factory)
    async with app.run_test(size=(80, 24)) as pilot:
        await wallboard_loaded(pilot)
        strip = str(app.screen.query_one("#wall-alerts").render()).splitlines()
        # the message gave way (six more: the demo's GPU faults, the hot node and gpu-a100-06's expired cordon)
        assert len(strip) == 3 and strip[2].endswith("(6 more nodes on the attention page)")
        assert all(len(line) <= 80 for line in strip)


async def test_the_wallboard_shows_idle_gpus_and_a_pools_page(app_factory):
    """Against the demo's numbers worked out by hand (tests/demo_figures.py), not gputui's pool rows."""
    from textual.widgets import Digits

    from tests.demo_figures import DEMO_IDLE, DEMO_POOLS

    app = wallboard_app(app_factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await wallboard_loaded(pilot)
        await wait_for(pilot, lambda: app.idle_watch.idle is not None)  # read-only, and still read
        await wait_for(pilot, lambda: app.screen.query_one("#fig-idle Digits", Digits).value == str(DEMO_IDLE))
        app.screen.page = PAGES.index("pools")
        app.screen.show_snapshot()
        await pilot.pause()
        text = table_text(app)
        # pool: nodes, allocated/offered per scheme, free per scheme, idle (the notebook's card is on an A100)
        want = {"ada-lovelace": ["7", "4/24+6/16shared", "20+10shared", "0"],
                "ampere": ["9", "27/64+5/36MIG", "37+31MIG", str(DEMO_IDLE)],
                "hopper": ["11", "51/78+6/8DRA", "27+2DRA", "0"],
                "(fleet)": ["27", "82/166+5/36MIG+6/16shared+6/8DRA", "84+31MIG+10shared+2DRA", str(DEMO_IDLE)]}
        assert set(want) == {*DEMO_POOLS, "(fleet)"}
        shown = {words[0]: [*words[1:4], words[-1]] for line in text.splitlines() if (words := line.split())}
        assert {pool: shown.get(pool) for pool in want} == want, text
        assert "idle unknown" not in text

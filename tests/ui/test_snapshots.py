"""SVG snapshots of every screen on the seeded demo with a fixed clock, at 80x24 and 200x50."""

import pytest

from tests.ui.conftest import make_app, wait_for

SIZES = [(80, 24), (200, 50)]


async def _loaded(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.snapshot is not None and pilot.app.screen.query_one("#nodes").row_count > 0)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_dashboard(snap_compare, size):
    assert snap_compare(make_app(), terminal_size=size, run_before=_loaded)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_dashboard_read_only(snap_compare, size):
    assert snap_compare(make_app(read_only=True), terminal_size=size, run_before=_loaded)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_node_detail(snap_compare, size):
    async def open_xid_node(pilot):
        await _loaded(pilot)
        await pilot.press("slash", *"h100-07", "enter", "enter")
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "history", None))
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=size, run_before=open_xid_node)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help(snap_compare, size):
    async def open_help(pilot):
        await _loaded(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=size, run_before=open_help)


def test_cordon_confirmation(snap_compare):
    async def ask(pilot):
        await _loaded(pilot)
        await pilot.press("c")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=ask)


def test_diagnostics(snap_compare):
    async def open_diag(pilot):
        await _loaded(pilot)
        await pilot.press("d")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=open_diag)

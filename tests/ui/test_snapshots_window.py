"""Pictures of the screens issue 35 made readable, at 80x24 and 200x50, named by behaviour: what needs
attention as nodes (the alert filter and diagnostics), the canary's dialog saying which step it would hold,
and :versions with what is the same said once and why an upgrade is stuck in full."""

from __future__ import annotations

from gputui.ui.screens.canary_confirm import CanaryConfirm
from gputui.ui.screens.versions import VersionsScreen
from tests.ui.pictures import each_size, picture
from tests.ui.pilot import loaded, wait_for


async def alert_filter(pilot) -> None:
    await loaded(pilot)
    await pilot.press("slash", *"alert", "enter")
    await pilot.pause()


async def canary_dialog(pilot) -> None:
    from gputui.ui.screens.service import ServiceScreen

    await loaded(pilot)
    pilot.app.push_screen(ServiceScreen("llm/mistral-7b"))
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ServiceScreen) and pilot.app.screen.signals is not None)
    await pilot.press("g")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, CanaryConfirm))
    await pilot.pause()


async def versions(pilot) -> None:
    await loaded(pilot)
    pilot.app.push_screen(VersionsScreen())
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, VersionsScreen))
    await pilot.pause()


@each_size
def test_the_alert_filter_lists_the_nodes_the_header_counts_each_problem_whole(snap_compare, size):
    assert picture(snap_compare, alert_filter, size)


@each_size
def test_the_canary_dialog_says_which_step_it_would_hold_and_offers_the_force(snap_compare, size):
    assert picture(snap_compare, canary_dialog, size)


@each_size
def test_versions_say_once_what_is_the_same_and_why_an_upgrade_is_stuck_in_full(snap_compare, size):
    assert picture(snap_compare, versions, size)

"""Keys do what they say where the operator is (issue 35): vim's `l` on the services panel opens the service
(it opened the node selected in the other panel); `space` says which node it marked and that the cursor moved
(a second press marked a node the operator had not looked at, unsaid), and marks nothing where nothing can
drain; the wallboard's `c` and `r` answer instead of being silently ignored."""

from __future__ import annotations

from gputui.ui.screens.node_detail import NodeDetailScreen
from gputui.ui.screens.service import ServiceScreen
from tests.ui.pilot import loaded, rows, wait_for, wallboard_loaded


def said(app) -> list[str]:
    return [n.message for n in app._notifications]


async def test_vim_l_on_the_services_panel_opens_the_service(app_factory):
    app = app_factory(keymap="vim")
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        await pilot.press("tab", "j")  # the services panel, its second row
        table = app.screen.services_table
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, (ServiceScreen, NodeDetailScreen)))
        assert isinstance(app.screen, ServiceScreen) and app.screen.key == key.partition("@")[0]
        await pilot.press("h")  # back
        await wait_for(pilot, lambda: not isinstance(app.screen, ServiceScreen))
        await pilot.press("tab", "l")  # on the nodes panel, l still opens the node
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))


async def test_space_says_which_node_it_marked_and_where_the_cursor_went(app_factory):
    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        first, second = rows(app)[:2]
        await pilot.press("space")
        await pilot.pause()
        assert app.screen.marked == {first}
        assert f"{first} marked (1 marked: r drains them, M clears); the cursor moved down to {second}" in said(app)


async def test_read_only_marks_nothing_and_the_wallboard_answers_write_keys(app_factory):
    app = app_factory(read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("space")
        await pilot.pause()
        assert app.screen.marked == set() and any(m.startswith("read-only:") for m in said(app))
    wall = app_factory(wallboard=True, read_only=True, wallboard_rotate=3600.0)
    async with wall.run_test(size=(80, 24)) as pilot:
        await wallboard_loaded(pilot)
        await pilot.press("c", "r")
        await pilot.pause()
        assert sum(m.startswith("read-only: the wallboard only shows") for m in said(wall)) == 2

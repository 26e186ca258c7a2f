"""Several drains at once (issue 35, item 2): a second failing node need not wait behind the first one's
15-minute session deadline. Each drain runs on its own nodes (a node already draining is refused, by name);
`p` lists the drains when there are several and opens the one chosen; quitting names every drain it interrupts."""

from __future__ import annotations

from gputui.ui.screens.drain_progress import DrainProgressScreen
from gputui.ui.screens.drains_list import DrainsListScreen
from tests.ui.pilot import loaded, rows, wait_for


async def _drain(app, pilot, node_filter: str) -> str:
    await pilot.press("escape")
    await pilot.press("slash", *node_filter, "enter")
    node = rows(app)[0]
    await pilot.press("r", "enter")
    await wait_for(pilot, lambda: isinstance(app.screen, DrainProgressScreen) and app.screen.drain.nodes == [node])
    await pilot.press("escape")  # back to the dashboard: the drain goes on
    await wait_for(pilot, lambda: not isinstance(app.screen, DrainProgressScreen))
    return node


async def test_two_drains_run_side_by_side_and_p_lists_them(app_factory):
    from gputui.ui.screens.confirm import ConfirmScreen

    app = app_factory()
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(pilot)
        first = await _drain(app, pilot, "h100-01")
        second = await _drain(app, pilot, "a100-01")
        assert [s.nodes for s in app.running_drains] == [[first], [second]]
        # The same node again: refused by name, nothing started.
        await pilot.press("escape", "slash", *"h100-01", "enter", "r")
        await pilot.pause()
        assert not any(type(s).__name__ == "DrainPlanScreen" for s in app.screen_stack)
        assert any(f"{first} is being drained already: see it with p" in n.message for n in app._notifications)
        assert len(app.drains) == 2
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, DrainsListScreen))
        await wait_for(pilot, lambda: len(app.screen.query("Item")) == 2)
        texts = [str(i.render()) for i in app.screen.query("Item")]
        assert any(first in t for t in texts) and any(second in t for t in texts), texts
        assert all(t.startswith("running") for t in texts), texts
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DrainProgressScreen))
        assert app.screen.drain in app.drains
        await pilot.press("escape", "escape")
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        body = str(app.screen._body)
        assert "2 drains of" in body and first in body and second in body, body
        await pilot.press("n")
        for s in app.running_drains:
            for control in s.controls.values():
                control.abort()

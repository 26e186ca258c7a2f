"""The drain plan screen's placement preview: each pod's "can go" column, the pods with nowhere to go in words,
the caveat in sight, and a plan that would strand pods starting only once the operator accepts it (`a`)."""

import io

from rich.console import Console

from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.placement import SHORT_CAVEAT
from gputui.ui.drain_plan_screen import DrainPlanScreen
from tests.ui.pilot import loaded, wait_for


def shown(screen: DrainPlanScreen) -> str:
    """The title, the plan and the options as plain text, each as wide as it needs."""
    console = Console(width=400, record=True, file=io.StringIO())
    for name in ("drain-title", "drain-plan", "drain-options"):
        console.print(screen.query_one(f"#{name}").content)
    return console.export_text()


async def test_a_plan_that_strands_pods_starts_only_once_they_are_accepted(app_factory):
    app = app_factory()
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        # Every node at once: no replacement has anywhere to go.
        nodes = sorted(n.name for n in app.snapshot.nodes)
        options = DrainOptions(delete_emptydir_data=True, force=True)
        chosen: list = []
        screen = DrainPlanScreen(nodes, options)
        app.push_screen(screen, chosen.append)
        await pilot.pause()
        batch = screen.batch_plan()
        stranded = {p.pod.key for p in batch.stranded}
        assert stranded and batch.blocked_by_placement and not any(p.blocked for p in batch.plans)
        text = shown(screen)
        assert f"{len(stranded)} with nowhere to go" in text and SHORT_CAVEAT in text
        assert "NOWHERE: the " in text and "in the batch" in text  # why, in words
        assert "[a] accept stranded: off" in text and "blocked: nowhere to go" in text
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen and not chosen  # refused: nothing starts
        await pilot.press("a")
        assert screen.accepted == stranded
        text = shown(screen)
        assert "[a] accept stranded: on" in text and "(accepted: left Pending)" in text
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(chosen))
        assert chosen == [options]


async def test_a_plan_with_room_says_where_each_can_go(app_factory):
    app = app_factory()
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        node = sorted(n.name for n in app.snapshot.nodes if n.ready and not n.unschedulable)[0]
        screen = DrainPlanScreen([node], DrainOptions())
        app.push_screen(screen)
        await pilot.pause()
        batch = screen.batch_plan()
        moving = [p for p in batch.plans[0].pods if p.placement is not None]
        assert moving and not batch.stranded
        text = shown(screen)
        assert all(p.placement.short() in text for p in moving)
        assert "replacements can go elsewhere" in text and "[a] accept stranded" not in text

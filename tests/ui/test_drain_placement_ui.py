"""The drain plan screen's placement preview: each pod's "can go" column, the pods with nowhere to go in words,
the caveat in sight, and a plan that would strand pods starting only once the operator accepts it (`a`)."""

import io
from dataclasses import replace

from rich.console import Console

from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.placement import SHORT_CAVEAT
from gputui.ui.screens.drain_plan import DrainPlanScreen
from gputui.vocabulary.scheduling import PodScheduling
from tests.ui.pilot import loaded, wait_for


def shown(screen: DrainPlanScreen) -> str:
    """The title, the plan and the options as plain text, each as wide as it needs."""
    console = Console(width=400, record=True, file=io.StringIO())
    for name in ("drain-title", "drain-plan", "drain-options"):
        console.print(screen.query_one(f"#{name}").content)
    return console.export_text()


def pin_one_pod(app) -> tuple[str, str]:
    """The demo as it reads, but with one pod of a GPU node pinned to that node (nodeSelector on its hostname):
    draining the node leaves its replacement nowhere to go, though GPUs are free elsewhere."""
    reader = app.backend.reader
    first = reader.snapshot()
    pinned = next(p for p in first.pods if p.service == "llama-3-70b-instruct" and p.node)
    pin = PodScheduling(node_selector=(("kubernetes.io/hostname", pinned.node),))
    read = reader.snapshot

    def snapshot():
        s = read()
        return replace(s, indexes=None, pods=tuple(replace(p, scheduling=pin) if p.key == pinned.key else p
                                                   for p in s.pods))
    reader.snapshot = snapshot
    return pinned.node, pinned.key


async def test_a_plan_that_strands_pods_starts_only_once_they_are_accepted(app_factory):
    app = app_factory()
    node, key = pin_one_pod(app)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        options = DrainOptions(delete_emptydir_data=True, force=True)
        chosen: list = []
        screen = DrainPlanScreen([node], options)
        app.push_screen(screen, chosen.append)
        await pilot.pause()
        batch = screen.batch_plan()
        assert [p.pod.key for p in batch.stranded] == [key] and batch.fits
        assert batch.blocked_by_placement and not any(p.blocked for p in batch.plans)
        text = shown(screen)
        assert "1 with nowhere to go" in text and SHORT_CAVEAT in text
        assert f"{key}: NOWHERE: the 1 node with kubernetes.io/hostname={node} is in the batch" in text
        assert "[a] accept stranded: off" in text and "blocked: nowhere to go" in text
        assert "llm/llama-3-70b-instruct loses 1 of" in text
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen and not chosen  # refused: nothing starts
        await pilot.press("a")
        assert screen.accepted == {key}
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

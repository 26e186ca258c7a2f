"""The small things of issue 35 item 12, each a moment lost at 3 a.m.: node detail's header broken inside a
figure at 80 columns, the describe modal's heartbeat age standing still, enter on a pod row doing nothing, the
quit dialog promising the demo a resume it cannot give, `:drain h100` saying "no node" with eleven nodes so
named and the prompt keeping the old text."""

from __future__ import annotations

from textual.widgets import Input

from gputui.ui.screens.command import CommandScreen
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.detail import DetailScreen
from gputui.ui.screens.node_detail import NodeDetailScreen
from gputui.ui.screens.service import ServiceScreen
from gputui.ui.widgets.virtual_table import VirtualTable
from tests.ui.pilot import loaded, wait_for


async def _node(pilot, name: str) -> NodeDetailScreen:
    await loaded(pilot)
    pilot.app.open_node(name)
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, NodeDetailScreen))
    await pilot.pause()
    return pilot.app.screen


async def test_node_detail_breaks_its_header_between_figures_at_80_columns(app_factory):
    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _node(pilot, "gpu-a100-08")
        lines = str(screen.query_one("#node-info").render()).splitlines()
        assert lines[0].rstrip().endswith("GPUs 0/8 allocated"), lines  # "driver" and its version stay together
        assert lines[1].strip().startswith("driver 550.127.05"), lines
        assert all(len(line) <= 80 for line in lines)


async def test_the_describe_modal_heartbeat_age_ticks(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await _node(pilot, "gpu-h100-01")
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))

        def heartbeat() -> str:
            from rich.console import Console

            console = Console(width=160, record=True)
            console.print(app.screen.query_one("#detail-text").content)
            return next(line for line in console.export_text().splitlines() if "Last heartbeat" in line)

        before = heartbeat()
        app.test_clock.advance(42)
        app.clock_tick += 1
        await pilot.pause()
        assert heartbeat() != before and "ago" in heartbeat()


async def test_enter_on_a_pod_row_opens_its_service(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _node(pilot, "gpu-h100-07")
        pods = screen.query_one("#pods", VirtualTable)
        serving = next(k for k in pods.keys if "qwen2" in k)
        pods.focus()
        pods.move_to(serving)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ServiceScreen))
        assert app.screen.key == "llm/qwen2-72b"


async def test_quitting_a_demo_drain_promises_no_resume(app_factory):
    from gputui.ops.drain.options import DrainOptions
    from gputui.ui.runs.drain import start_drain

    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        start_drain(app, ["gpu-h100-01"], DrainOptions(session_deadline_s=900))
        await wait_for(pilot, lambda: app.running_drains)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        body = str(app.screen.query_one("#dialog-body").render())
        assert "a new gputui --demo starts afresh, with nothing to resume" in body and "R from the next" not in body
        await pilot.press("n")


async def test_an_ambiguous_name_lists_its_matches_and_the_next_key_replaces_the_text(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("colon", *"drain h100", "enter")
        await pilot.pause()
        assert isinstance(app.screen, CommandScreen)
        menu = str(app.screen.query_one("#command-menu").render())
        assert menu.startswith("'h100' matches 11: gpu-h100-01, gpu-h100-02") and "no node" not in menu
        await pilot.press(*"nodes")
        await pilot.pause()
        assert app.screen.query_one(Input).value == "nodes"

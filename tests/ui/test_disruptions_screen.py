"""`:disruptions` (issue 40 items 1 and 6): every node being disrupted, stuck first, readable at 80x24 (the why
cut, written in full below for the selected row), hostile text shown not sent, and enter opens the node."""

from __future__ import annotations

import json

import pytest

from gputui.backends.demo import simulation
from gputui.ui.screens.disruptions import DisruptionsScreen
from gputui.ui.screens.node_detail import NodeDetailScreen
from gputui.ui.widgets.key_table import KeyTable
from gputui.vocabulary import disruptions as d
from tests.ui.pilot import command, loaded, screen_lines, wait_for


async def _open(pilot) -> KeyTable:
    await loaded(pilot)
    await command(pilot, "disruptions", "enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, DisruptionsScreen))
    await pilot.pause()
    return pilot.app.screen.query_one("#disruptions", KeyTable)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_every_disrupted_node_stuck_first_and_enter_opens_it(app_factory, size):
    app = app_factory()
    async with app.run_test(size=size) as pilot:
        table = await _open(pilot)
        nodes = [k.value.split("\x00")[0] for k in table.rows]
        # the stuck ones: the person's cordon past its expiry (dated: two days), the NodeMaintenance past its drain
        # timeout (two hours), then the two stuck upgrades
        assert nodes[:5] == ["gpu-l40s-06", "gpu-a100-06", "gpu-h100-10", "gpu-a100-08", "gpu-l40s-03"]
        assert set(nodes) == {"gpu-a100-08", "gpu-l40s-03", "gpu-a100-03", "gpu-l40s-05", "gpu-l40s-04",
                              "gpu-a100-06", "gpu-a100-07", "gpu-h100-10", "gpu-l40s-06"}
        lines = screen_lines(app)
        assert all(len(line.rstrip()) <= size[0] for line in lines)
        shown = "\n".join(lines)
        assert "9 nodes disrupted · 5 stuck" in shown
        for word in ("nvsentinel", "karpenter", "autoscaler", "gpu-operator", "person", "quarantined", "3.0h"):
            assert word in shown, word
        table.move_cursor(row=nodes.index("gpu-a100-03"))
        await pilot.pause()
        below = " ".join(line.strip() for line in screen_lines(app))
        assert "gpu-a100-03: quarantined by NVSentinel; GpuXidError: XID 48: double-bit ECC error on GPU 2; taints " \
               "nvidia.com/gpu-error=fatal:NoSchedule" in below  # the whole why below the table, at 80 columns too
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        assert app.screen.node_name == "gpu-a100-03"
        detail = "\n".join(screen_lines(app))
        assert "nvsentinel quarantined for 3.0h" in detail


async def test_the_dashboard_names_the_actor_beside_the_state(app_factory):
    app = app_factory()
    async with app.run_test(size=(200, 50)) as pilot:
        await loaded(pilot)
        shown = "\n".join(screen_lines(app))
        for words in ("Cordoned·nvsentinel", "Cordoned·autoscaler", "Cordoned·person", "Ready·karpenter",
                      "Cordoned·gpu-operator"):
            assert words in shown, words


async def test_hostile_text_is_shown_not_sent(app_factory, monkeypatch):
    real = simulation.hand_to_actors

    def hostile(nodes, start):
        real(nodes, start)
        nodes["gpu-a100-03"].annotations[d.NVSENTINEL_EVENT] = json.dumps(
            [{"checkName": "GpuXidError", "message": "\x1b]0;pwned\x07[bold]boom[/bold]"}])

    monkeypatch.setattr(simulation, "hand_to_actors", hostile)
    app = app_factory()
    async with app.run_test(size=(200, 50)) as pilot:
        table = await _open(pilot)
        nodes = [k.value.split("\x00")[0] for k in table.rows]
        table.move_cursor(row=nodes.index("gpu-a100-03"))
        await pilot.pause()
        shown = "\n".join(screen_lines(app))
        assert "\x1b" not in shown and "\x07" not in shown
        assert "␛]0;pwned␇[bold]boom[/bold]" in shown

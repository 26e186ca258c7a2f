"""`:versions` readable at 80x24 and 200x50 (issue 35): why an upgrade is stuck was cut even at 200 columns,
`→` scrolled one character per press, the Node column scrolled away and the offset outlived a resize, and the
rows were not ordered stuck and drifted first; `enter` on a row did nothing."""

from __future__ import annotations

import pytest

from gputui.ui.screens.node_detail import NodeDetailScreen
from gputui.ui.screens.versions import VersionsScreen
from gputui.ui.widgets.key_table import KeyTable
from tests.ui.pilot import command, loaded, screen_lines, wait_for

STUCK = ("upgrade failed: the operator leaves the node for manual recovery (fix the cause, then set "
         "nvidia.com/gpu-driver-upgrade-state=upgrade-required)")


async def _versions(pilot) -> KeyTable:
    await loaded(pilot)
    await command(pilot, "versions", "enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, VersionsScreen))
    await pilot.pause()
    return pilot.app.screen.query_one("#versions", KeyTable)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_stuck_and_drifted_first_and_why_stuck_in_full(app_factory, size):
    app = app_factory()
    async with app.run_test(size=size) as pilot:
        table = await _versions(pilot)
        order = [k.value for k in table.rows]
        assert set(order[:4]) == {"gpu-l40s-03", "gpu-l40s-06", "gpu-a100-08", "gpu-a100-05"}  # 3 stuck, 1 drifted
        labels = [str(c.label) for c in table.columns.values()]
        assert labels == ["Node", "Pool", "Driver", "Engines", "Upgrade"]  # what differs; the rest said once
        lines = "\n".join(screen_lines(app))
        assert "Same on every node: CUDA 12.4 · kubelet v1.33.5" in lines
        table.move_cursor(row=order.index("gpu-a100-08"))
        await pilot.pause()
        why = " ".join(line.strip() for line in screen_lines(app)[-5:])
        assert STUCK in why, why  # whole, wrapped, at 80 columns too
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        assert app.screen.node_name == "gpu-a100-08"


async def test_right_scrolls_by_columns_the_node_stays_and_a_resize_starts_from_the_left(app_factory):
    app = app_factory()
    async with app.run_test(size=(40, 24)) as pilot:  # narrower than the table: it scrolls
        table = await _versions(pilot)
        await pilot.press("right")
        await pilot.pause()
        assert table.scroll_x >= 8 and table.fixed_columns == 1
        first = next(line for line in screen_lines(app) if "gpu-l40s-03" in line)
        assert first.lstrip().startswith("gpu-l40s-03"), first  # the node's name did not scroll away
        await pilot.resize_terminal(60, 24)
        await pilot.pause()
        assert table.scroll_x == 0

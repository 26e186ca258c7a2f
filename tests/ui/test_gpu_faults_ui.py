"""Node detail: enter on a GPU row shows that GPU's faults in words with the action (issue 37 item 1); before,
enter on a GPU opened nothing and the row said `XID 79` alone."""

import io

from rich.console import Console

from gputui.ui.screens.detail import DetailScreen
from gputui.ui.screens.node_detail import NodeDetailScreen
from gputui.ui.widgets.virtual_table import VirtualTable
from tests.ui.pilot import loaded, wait_for


async def test_enter_on_a_gpu_row_shows_its_faults_in_words_with_the_action(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app.open_node("gpu-h100-07")  # the demo's GPU 5 fell off the bus (XID 79)
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.query("#gpus"))
        gpus = app.screen.query_one("#gpus", VirtualTable)
        await wait_for(pilot, lambda: "5" in gpus.keys)
        assert gpus.cells("5")[-2].plain == "XID 79"
        gpus.focus()
        gpus.move_to("5")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        console = Console(width=100, file=io.StringIO(), record=True)
        console.print(app.screen._body)
        text = console.export_text()
        assert "hardware: XID 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS: GPU has fallen off the bus" in text
        assert "reboot the node (RESTART_BM)" in text and "RMA" in text
        assert "not-collected: not collected: DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in text  # the demo reads none
        await pilot.press("escape")
        assert isinstance(app.screen, NodeDetailScreen)

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


async def test_a_gpu_whose_fault_field_asks_for_action_reads_fault_in_its_row(app_factory):
    """No XID, health unknown or passing: before, the row said `pass` for a GPU whose row remap had failed."""
    from dataclasses import replace

    from gputui.vocabulary.gpu_metrics import FAULT_FIELDS, Figures

    app = app_factory()
    cluster = app.backend.reader
    name = next(n.name for n in cluster.snapshot().nodes if n.ready and n.gpus and not any(g.xid for g in n.gpus))
    sound = {f: 0.0 for f in FAULT_FIELDS} | {"throttle_reasons": 0.0, "pcie_replays": 0.0}

    def with_fault(node):
        gpus = tuple(replace(g, extra=Figures({**g.extra, **sound, "DCGM_FI_DEV_ROW_REMAP_FAILURE": float(g.index == 1)}))
                     for g in node.gpus)
        return replace(node, gpus=gpus) if node.name == name else node

    read = cluster.snapshot
    cluster.snapshot = lambda: (lambda s: replace(s, nodes=tuple(with_fault(n) for n in s.nodes)))(read())
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app.open_node(name)
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.query("#gpus"))
        gpus = app.screen.query_one("#gpus", VirtualTable)
        await wait_for(pilot, lambda: "1" in gpus.keys and "0" in gpus.keys)
        assert gpus.cells("1")[-2].plain == "fault"
        assert gpus.cells("0")[-2].plain != "fault"

"""Node detail: r on a GPU row plans a drain of only that GPU's pods (issue 37 item 3), in the same plan screen as a
node's drain, titled for the GPU; the node is not cordoned by the plan. Before, r there planned the whole node."""

from gputui.ui.screens.drain_plan import DrainPlanScreen
from gputui.ui.screens.node_detail import NodeDetailScreen
from gputui.ui.widgets.virtual_table import VirtualTable
from tests.ui.pilot import loaded, wait_for

NODE = "gpu-h100-01"


async def test_r_on_a_gpu_row_plans_that_gpu_s_drain(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app.open_node(NODE)
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.query("#gpus"))
        table = app.screen.query_one("#gpus", VirtualTable)
        await wait_for(pilot, lambda: table.row_count > 1, what="the GPU rows")
        table.focus()
        await pilot.press("down")  # the second GPU
        await pilot.pause()
        gpu = table.selected_key
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, DrainPlanScreen), what="the plan screen")
        screen = app.screen
        assert screen.options.gpu == gpu and screen.nodes == [NODE]
        held = {p.pod.key for plan in screen.plans() for p in plan.pods}
        on_node = {p.key for p in app.snapshot.pods_on(NODE)}
        assert held and held == set(screen.options.gpu_pods) and held <= on_node
        title = str(screen.query_one("#drain-title").render())
        assert f"Drain GPU {gpu} of {NODE}" in title
        assert not app.snapshot.node(NODE).unschedulable

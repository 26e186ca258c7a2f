"""Node detail says a node's GPU fault counts over 24 h against the other nodes of its pool (issue 37 item 2):
under its alerts, a line per fault kind it has; describe (`i`) lists every kind against the pool. One read for
the fleet per view, not one per refresh or per node; a read that fails says unknown with the reason, never
nothing. Before, node detail and describe had no such line."""

import io

from rich.console import Console

from gputui.backends.base import BackendError
from gputui.ui.screens.detail import DetailScreen
from gputui.ui.screens.node_detail import NodeDetailScreen
from tests.ui.pilot import loaded, wait_for


def info(app) -> str:
    return str(app.screen.query_one("#node-info").render())


async def open_node(app, pilot, name: str) -> None:
    await loaded(pilot)
    app.open_node(name)
    await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.history)


async def test_node_detail_says_the_xid_count_against_the_pool_and_describe_lists_every_kind(app_factory):
    app = app_factory()
    cluster = app.backend.reader
    reads = []
    fault_window = cluster.fault_window
    cluster.fault_window = lambda window_s: reads.append(window_s) or fault_window(window_s)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_node(app, pilot, "gpu-h100-07")  # the demo's GPU 5 fell off the bus (XID 79)
        # Its XID against the other nodes of pool hopper: gpu-h100-05 took one too (the demo's fault stories).
        await wait_for(pilot, lambda: "XID 79 ×1 in 24 h; pool median 0, next worst 1" in info(app))
        assert "≈ XID 79 ×1 in 24 h" in info(app)
        for _ in range(3):  # more refreshes: the day's counts are not read again (one read per view)
            app.screen._fetch_history()
            await pilot.pause()
        assert reads == [86400.0]
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        console = Console(width=120, file=io.StringIO(), record=True)
        console.print(app.screen._body)
        text = console.export_text()
        assert "GPU faults over 24 h against the other nodes of its pool" in text
        assert "≈ XID 79 ×1 in 24 h; pool median 0, next worst 1" in text
        # The demo exports no ECC counters: not collected, never a count of 0.
        assert "not collected over 24 h: uncorrectable ECC errors" in text


async def test_a_node_with_none_shows_no_line_and_a_peer_with_some_in_describe(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await open_node(app, pilot, "gpu-h100-01")
        await wait_for(pilot, lambda: app.screen.peers is not None)
        assert "≈" not in info(app)  # nothing of its own: the header stays as it was
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        console = Console(width=120, file=io.StringIO(), record=True)
        console.print(app.screen._body)
        assert "XID 79 ×0 in 24 h; pool median 0, next worst 1" in console.export_text()


async def test_a_failed_read_shows_unknown_with_the_reason(app_factory):
    app = app_factory()

    def down(window_s):
        raise BackendError("prometheus: connection refused")

    app.backend.reader.fault_window = down
    async with app.run_test(size=(120, 40)) as pilot:
        await open_node(app, pilot, "gpu-h100-07")
        await wait_for(pilot, lambda: "unknown" in info(app))
        assert "≈ fault counts over 24 h unknown: prometheus: connection refused" in info(app)

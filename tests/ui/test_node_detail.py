"""Node detail: one node's GPUs with their history and the pods on it, opened from any screen."""

from gputui.ui.messages import HistoryRead
from gputui.ui.screens.node_detail import NodeDetailScreen
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.virtual_table import VirtualTable
from gputui.vocabulary.sessions import GONE
from tests.ui.pilot import loaded, rows, wait_for


async def test_enter_opens_node_detail_and_escape_returns(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        first = rows(app)[0]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        gpus = app.screen.query_one("#gpus", VirtualTable)
        await wait_for(pilot, lambda: gpus.row_count == app.snapshot.node(first).gpu_capacity)
        pods = app.screen.query_one("#pods", VirtualTable)
        assert pods.row_count == len(app.snapshot.pods_on(first))
        await wait_for(pilot, lambda: app.screen.history)  # sparklines arrive off the UI thread
        await pilot.press("escape")
        assert not isinstance(app.screen, NodeDetailScreen)


async def test_node_detail_shows_an_unreadable_session_count_as_unknown_not_none(app_factory):
    """A pod whose session series vanished showed "–", the mark of a pod with no sessions at all."""
    from dataclasses import replace

    app = app_factory()
    cluster = app.backend.reader
    first = cluster.snapshot()
    node = next(n.name for n in first.nodes if any(first.sessions(p).live for p in first.pods_on(n.name)))
    lost = next(p for p in first.pods_on(node) if first.sessions(p).live)
    read = cluster.snapshot
    cluster.snapshot = lambda: (lambda s: replace(s, session_counts={
        **s.session_counts, (lost.namespace, lost.name): GONE}))(read())
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app.screen.nodes_table.move_to(node)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        pods = app.screen.query_one("#pods", VirtualTable)
        await wait_for(pilot, lambda: pods.row_count == len(app.snapshot.pods_on(node)))
        assert pods.cells(lost.key)[-1].plain == "?"


async def test_node_detail_reaches_drain_shift_and_diagnostics(app_factory):
    from gputui.ui.screens.diagnostics import DiagnosticsScreen
    from gputui.ui.screens.drain_plan import DrainPlanScreen

    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        pod = next(p for p in app.snapshot.pods if p.service == "llama-3-70b-instruct" and p.node)  # routed
        app.screen.nodes_table.move_to(pod.node)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        pods = app.screen.query_one("#pods")
        await wait_for(pilot, lambda: pods.row_count > 0)
        pods.move_to(pod.key)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DiagnosticsScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        await pilot.press("w")  # the selected pod's service
        await wait_for(pilot, lambda: type(app.screen).__name__ == "TrafficShiftScreen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, DrainPlanScreen))
        assert app.screen.nodes == [pod.node]


async def test_describe_explains_the_xid_and_reads_taints_heartbeat_and_events(app_factory):
    import io

    from rich.console import Console

    from gputui.ui.screens.detail import DetailScreen

    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)

        async def described(name: str) -> str:
            app.screen.nodes_table.move_to(name)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
            await pilot.press("i")
            await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
            console = Console(width=78, file=io.StringIO(), record=True)
            console.print(app.screen._body)
            await pilot.press("escape", "escape")
            return console.export_text()

        text = await described("gpu-h100-07")
        assert "XID 79 (fallen off the bus: reboot the node)" in text
        assert "Conditions" in text and "nvidia.com/gpu.product=" in text
        assert "SysLogsXIDError" in text and "Last heartbeat" in text
        text = await described(next(n.name for n in app.snapshot.nodes if not n.ready))
        assert "node.kubernetes.io/unreachable:NoExecute" in text and "NodeNotReady" in text


async def test_the_node_detail_is_built_once_and_shows_each_node_opened_with_nothing_of_the_last(app_factory):
    """The app keeps one detail screen (building it was most of an open: benchmarks/keys.py) and aims it at
    each node: the second node's GPUs, pods and history are its own, never the first's; a snapshot that
    comes while it is closed is drawn when it opens."""
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        first, second = rows(app)[0], next(n.name for n in app.snapshot.nodes
                                          if n.name != rows(app)[0] and app.snapshot.pods_on(n.name))
        app.open_node(first)
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.history)
        screen = app.screen
        first_history = dict(screen.history)
        await pilot.press("escape")
        app.open_node(second)
        await wait_for(pilot, lambda: app.screen is screen and screen.node_name == second)
        await wait_for(pilot, lambda: second in str(screen.query_one("#node-info").render()))
        assert first not in str(screen.query_one("#node-info").render())
        pods = screen.query_one("#pods", VirtualTable)
        await wait_for(pilot, lambda: pods.row_count == len(app.snapshot.pods_on(second)))
        assert set(pods.keys) == {p.key for p in app.snapshot.pods_on(second)}
        await wait_for(pilot, lambda: screen.history and screen.history != first_history)
        # A dialog above it, then back: the same screen, still on the second node.
        await pilot.press("escape")
        assert not isinstance(app.screen, NodeDetailScreen)


async def test_node_detail_asks_the_snapshot_for_the_majority_driver_once_not_at_every_draw(app_factory, monkeypatch):
    """Node detail worked the fleet's majority driver out twice per draw, a walk over every node (at 65,000 nodes
    some 10 ms a draw, every refresh and every open). It is kept on the snapshot (health.fleet_driver)."""
    from gputui.policy import health
    from gputui.ui.screens import node_detail
    from gputui.ui.screens.node_detail import NodeDetailScreen

    walks = []
    real = health.majority_driver

    def counted(nodes):
        walks.append(1)
        return real(nodes)

    monkeypatch.setattr(health, "majority_driver", counted)
    monkeypatch.setattr(node_detail, "majority_driver", counted, raising=False)  # wherever a screen may call it
    app = app_factory()
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(pilot)
        snap = app.snapshot
        for _ in range(3):
            app.open_node(snap.nodes[0].name)
            await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.is_mounted)
            await pilot.pause()  # drawn: the node's line names the majority driver when it drifts
            await pilot.press("escape")
            await pilot.pause()
        assert app.snapshot is snap and len(walks) <= 1, walks


async def test_a_history_read_repaints_the_gpu_rows_alone_and_a_same_redraw_repaints_nothing(app_factory, monkeypatch):
    """A detail's tables are Line-API tables that keep their painted lines: the sparklines read every refresh
    set the GPU rows again and leave the pods' lines painted; a draw that changes no cell sets no row."""
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        node = next(n.name for n in app.snapshot.nodes if n.gpus and app.snapshot.pods_on(n.name))
        app.open_node(node)
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.history)
        screen = app.screen
        await pilot.pause()
        gpus, pods = screen.query_one("#gpus", VirtualTable), screen.query_one("#pods", VirtualTable)
        assert gpus.row_count == len(app.snapshot.node(node).gpus) and pods.row_count == len(app.snapshot.pods_on(node))
        set_rows: list[str] = []
        for table in (gpus, pods):
            real = table.set_rows
            monkeypatch.setattr(table, "set_rows", lambda *a, _t=table, _r=real, **k: (set_rows.append(_t.id), _r(*a, **k))[1])
        moved = {i: [*values[1:], 100.0 - (values[-1] or 0.0)] for i, values in screen.history.items()}
        screen.post_message(HistoryRead(None, moved, node))
        await wait_for(pilot, lambda: screen.history == moved)
        await pilot.pause()
        assert set_rows == ["gpus"], set_rows
        first = sorted(screen.history)[0]
        assert gpus.cells(str(first))[-1].plain.strip(), "the sparkline is drawn from the new history"
        set_rows.clear()
        screen._draw()  # the same snapshot and history again
        assert set_rows == []


async def test_the_headers_tick_repaints_its_line_without_laying_the_screen_out_again(app_factory, monkeypatch):
    """The header's age ticks every second on every screen. Static.update lays the whole screen out unless told
    not to: a layout pass a second, and one more in every node-detail open (benchmarks/keys.py)."""
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        header = app.screen.query_one(HeaderBar)
        layouts: list[bool] = []
        real = header.refresh
        monkeypatch.setattr(header, "refresh", lambda *a, **k: (layouts.append(k.get("layout", False)), real(*a, **k))[1])
        header.refresh_age()
        header.show_snapshot()
        assert layouts and not any(layouts), layouts


async def test_node_detail_shows_a_column_for_each_further_figure_its_gpus_report(app_factory):
    """The figures of gputui.vocabulary.gpu_metrics beyond the typed five get a column when a GPU of the node reports them,
    written by their row's formatter; a GPU that does not report one shows it unknown, never 0."""
    from dataclasses import replace

    from gputui.vocabulary.gpu_metrics import Figures

    app = app_factory()
    cluster = app.backend.reader
    read = cluster.snapshot
    first = read()
    node = next(n.name for n in first.nodes if len(n.gpus) >= 2)

    def reporting(s):
        nodes = tuple(replace(n, gpus=(replace(n.gpus[0], extra=Figures({"mem_temp_c": 91.0, "throttle_reasons": 0x44})),
                                       *n.gpus[1:])) if n.name == node else n for n in s.nodes)
        return replace(s, nodes=nodes, indexes=None)

    cluster.snapshot = lambda: reporting(read())
    async with app.run_test(size=(160, 40)) as pilot:
        await loaded(pilot)
        app.screen.nodes_table.move_to(node)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        gpus = app.screen.query_one("#gpus", VirtualTable)
        await wait_for(pilot, lambda: "mem_temp_c" in [key for key, *_ in gpus.columns] and gpus.row_count > 1)
        keys = [key for key, *_ in gpus.columns]
        assert "throttle_reasons" in keys and "pcie_replays" not in keys  # no GPU of it reports replays
        assert [gpus.cells("0")[keys.index(k)].plain for k in ("mem_temp_c", "throttle_reasons")] == \
            ["91°C", "sw-power,hw-thermal"]
        assert [gpus.cells("1")[keys.index(k)].plain for k in ("mem_temp_c", "throttle_reasons")] == ["–", "–"]

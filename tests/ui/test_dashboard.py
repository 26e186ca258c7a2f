import json

from rich.text import Text
from textual.widgets import DataTable

from gputui.model import Condition, Node
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.backends.base import Backend
from gputui.settings import Settings
from gputui.ui.app import GputuiApp
from gputui.ui.confirm import ConfirmScreen
from gputui.ui.help import HelpScreen
from gputui.ui.node_detail import NodeDetailScreen
from gputui.ui.virtual_table import VirtualTable
from tests.ui.pilot import loaded, rows, wait_for


async def test_dashboard_lists_every_node_and_service(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        assert len(rows(app)) == len(app.snapshot.nodes)
        services = app.screen.query_one("#services", DataTable)
        assert services.row_count == sum(len(s.versions) for s in app.snapshot.services)


async def test_a_snapshot_read_before_start_is_the_first_frame_and_polling_follows(tmp_path):
    """The demo is read before the app starts (cli.tui): its first frame holds the fleet without a poll,
    and the next read comes a refresh later."""
    from gputui.backends.demo import demo_backend

    backend = demo_backend(seed=7)
    first = backend.reader.snapshot()
    app = GputuiApp(Settings(demo=True, seed=7, refresh=0.3), backend, first_snapshot=first)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        assert app.polls == 0 and app.snapshot is first
        assert len(rows(app)) == len(first.nodes)
        await wait_for(pilot, lambda: app.polls >= 1)
        assert app.snapshot is not first


async def test_sort_cycles_columns_and_reverses(app_factory):
    app = app_factory()
    async with app.run_test(size=(160, 40)) as pilot:
        await loaded(pilot)
        assert rows(app) == sorted(rows(app))
        await pilot.press("s")  # state
        await pilot.press("s")  # model
        await pilot.press("s")  # gpus
        await pilot.press("s")  # util, largest first
        await pilot.pause()
        utils = {n.name: n.mean_util or -1 for n in app.snapshot.nodes}
        order = rows(app)
        assert [utils[n] for n in order] == sorted(utils.values(), reverse=True)
        await pilot.press("S")
        await pilot.pause()
        assert [utils[n] for n in rows(app)] == sorted(utils.values())


async def test_filter_narrows_and_escape_clears(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("slash", "l", "4", "0", "s")
        await pilot.pause()
        assert rows(app) and all("l40s" in r for r in rows(app))
        await pilot.press("enter")  # keep the filter, back to the table
        assert app.screen.query_one("#nodes").has_focus
        assert all("l40s" in r for r in rows(app))
        await pilot.press("escape")
        await pilot.pause()
        assert len(rows(app)) == len(app.snapshot.nodes)


async def test_filter_matches_alert_kinds(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("slash", *"xid", "enter")
        await pilot.pause()
        assert rows(app) == ["gpu-h100-07"]


async def test_enter_opens_node_detail_and_escape_returns(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        first = rows(app)[0]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        gpus = app.screen.query_one("#gpus", DataTable)
        await wait_for(pilot, lambda: gpus.row_count == app.snapshot.node(first).gpu_capacity)
        pods = app.screen.query_one("#pods", DataTable)
        assert pods.row_count == len(app.snapshot.pods_on(first))
        await wait_for(pilot, lambda: app.screen.history)  # sparklines arrive off the UI thread
        await pilot.press("escape")
        assert not isinstance(app.screen, NodeDetailScreen)


async def test_cordon_confirm_then_visible_and_audited(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        target = rows(app)[0]
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")  # cancel: nothing happens
        await pilot.pause()
        assert not app.snapshot.node(target).unschedulable
        await pilot.press("c")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.snapshot.node(target).unschedulable)
        state = app.screen.query_one("#nodes", VirtualTable).cells(target)[1]
        assert state.plain == "Cordoned"
        await pilot.press("u", "y")
        await wait_for(pilot, lambda: not app.snapshot.node(target).unschedulable)
    entries = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(e["action"], e["target"], e["result"]) for e in entries] == [
        ("cordon", f"node/{target}", "ok"), ("uncordon", f"node/{target}", "ok")]


async def test_read_only_refuses_cordon(app_factory, tmp_path):
    app = app_factory(read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        target = rows(app)[0]
        assert app.screen.check_action("cordon", ()) is None
        assert app.screen.check_action("uncordon", ()) is None
        await pilot.press("c")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert not app.snapshot.node(target).unschedulable
    assert not (tmp_path / "audit.jsonl").exists()


async def test_help_lists_keys_in_force(app_factory):
    app = app_factory(read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        from rich.console import Console

        console = Console(width=120, record=True)
        console.print(app.screen._table())
        plain = console.export_text()
        assert "Cordon the selected node" in plain and "unavailable (read-only)" in plain
        assert "Filter" in plain and "Quit" in plain
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


class _StaticReader:
    def __init__(self, snapshot):
        self._snapshot = snapshot

    def snapshot(self):
        return self._snapshot

    def gpu_history(self, node, minutes=5):
        return {}

    def close(self):
        pass


async def test_markup_in_cluster_strings_is_shown_literally():
    hostile = Node(
        name="node-a", ready=True, unschedulable=False, gpu_product="[bold]H100[/]", gpu_capacity=8,
        gpu_allocatable=8, driver_version="[/]550", conditions=(Condition("GpuXidWatch", "True", "[red]boom[/red]"),),
    )
    snap = ClusterSnapshot(taken_at=0.0, context="[/]ctx", nodes=(hostile,), sources=(SourceStatus("API", 0.0),))
    app = GputuiApp(Settings(), Backend(_StaticReader(snap), None, "[/]ctx"), clock=lambda: 0.0)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one("#nodes").row_count == 1)
        row = app.screen.query_one("#nodes", VirtualTable).cells("node-a")
        cells = [c.plain if isinstance(c, Text) else str(c) for c in row]
        assert "[bold]H100[/]" in cells
        assert "≠[/]550" not in cells and "[/]550" in cells
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        await pilot.pause()
        info = app.screen.query_one("#node-info").render()
        assert "[red]boom[/red]" in str(info)


async def test_backend_failure_shows_error_not_traceback():
    class Broken(_StaticReader):
        def snapshot(self):
            raise ConnectionError("connection refused\nsecond line")

    app = GputuiApp(Settings(), Backend(Broken(None), None, "prod"), clock=lambda: 0.0)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.poll_error is not None)
        assert app.poll_error == "ConnectionError: connection refused"
        header = str(app.screen.query_one("HeaderBar").render())
        assert "connection refused" in header


async def test_stale_data_is_marked():
    from gputui.snapshot import ClusterSnapshot

    now = {"t": 100.0}
    snap = ClusterSnapshot(taken_at=100.0, context="prod", sources=(SourceStatus("API", 100.0),))
    app = GputuiApp(Settings(refresh=2.0), Backend(_StaticReader(snap), None, "prod"), clock=lambda: now["t"])
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.snapshot is not None)
        header = app.screen.query_one("HeaderBar")
        assert "STALE" not in str(header.summary())
        now["t"] = 107.0  # more than three refreshes without fresh data
        assert "STALE 7s" in str(header.summary())


async def test_diagnostics_screen_lists_findings(app_factory):
    from gputui.ui.diagnostics_screen import DiagnosticsScreen

    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("d")
        assert isinstance(app.screen, DiagnosticsScreen)
        await wait_for(pilot, lambda: app.screen.findings)
        kinds = {f.kind for f in app.screen.findings}
        assert {"Pending", "GpuLost", "Drift"} <= kinds
        await pilot.press("escape")
        assert not isinstance(app.screen, DiagnosticsScreen)


async def test_source_error_and_staleness_in_header():
    now = {"t": 50.0}
    snap = ClusterSnapshot(taken_at=50.0, context="prod", sources=(
        SourceStatus("API", 40.0), SourceStatus("metrics", None, "unavailable: connection refused")))
    app = GputuiApp(Settings(refresh=2.0), Backend(_StaticReader(snap), None, "prod"), clock=lambda: now["t"])
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.snapshot is not None)
        header = str(app.screen.query_one("HeaderBar").summary())
        assert "API stale 10s" in header
        assert "metrics unavailable: connection refused" in header


async def test_audit_log_screen_shows_writes(app_factory):
    from gputui.ui.audit_screen import AuditScreen

    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        target = rows(app)[0]
        await pilot.press("c", "y")
        await wait_for(pilot, lambda: app.snapshot.node(target).unschedulable)
        await pilot.press("L")
        assert isinstance(app.screen, AuditScreen)
        from rich.console import Console

        console = Console(width=120, record=True)
        console.print(app.screen.table)
        text = console.export_text()
        assert "cordon" in text and f"node/{target}" in text and "tester@demo" in text


def test_same_content_ignores_fetch_times_but_not_data():
    from dataclasses import replace

    from gputui.backends.demo import DemoCluster
    from gputui.snapshot import SourceStatus
    from gputui.ui.app import same_content
    from tests.demo_clock import ManualClock

    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    later = replace(snap, taken_at=snap.taken_at + 2,
                    sources=tuple(replace(s, fetched_at=(s.fetched_at or 0) + 2) for s in snap.sources))
    assert same_content(snap, later)
    assert not same_content(snap, replace(snap, nodes=snap.nodes[1:]))
    assert not same_content(snap, replace(snap, sources=(SourceStatus("metrics", None, "connection refused"),)))
    assert not same_content(None, snap) and same_content(None, None)

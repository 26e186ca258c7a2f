"""A fleet of two real control planes at once: the session's and a second one started here. Headless, each
node is tagged with its cluster; in the TUI, each cluster polls on its own, so stopping one apiserver
mid-test leaves the other updating while the stopped one goes stale and says why."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml
from kubernetes import client

from gputui.ops.audit import AuditLog
from gputui.settings import Settings
from tests.support.control_plane import ControlPlane
from tests.support.fake_kubelet import FakeKubelet
from tests.support.gputui_cli import run


@pytest.fixture(scope="module")
def west(k8s_bin_dir, tmp_path_factory):
    cp = ControlPlane(k8s_bin_dir)
    cp.start()
    kubelet = FakeKubelet(cp.kubeconfigs["kubelet"], heartbeat_interval=10)
    kubelet.start()
    try:
        for i in (1, 2):
            kubelet.add_node(f"west-gpu-{i}", gpus=8)
        yield cp
    finally:
        kubelet.stop()
        cp.stop()


def merged_kubeconfig(path, **clusters: ControlPlane):
    """One kubeconfig, a context per control plane named as given (each plane names its own alike)."""
    merged: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for name, cp in clusters.items():
        config = yaml.safe_load(cp.admin_kubeconfig.read_text())
        merged["clusters"].append({"name": name, "cluster": config["clusters"][0]["cluster"]})
        merged["users"].append({"name": name, "user": config["users"][0]["user"]})
        merged["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    merged["current-context"] = next(iter(clusters))
    path.write_text(yaml.safe_dump(merged))
    return path


def node_names(cp: ControlPlane) -> set[str]:
    return {n.metadata.name for n in client.CoreV1Api(cp.harness_client()).list_node().items}


WEST_NODES, WEST_GPUS = 2, 16  # the `west` fixture's two 8-GPU nodes; it runs no pod


def whole_gpus(cp: ControlPlane) -> tuple[int, int, int]:
    """(GPU nodes, whole cards in use, whole cards offered) counted from the API itself, not by gputui: the GPU
    nodes are those GFD labels or that offer nvidia.com/gpu; in use, what the live pods bound to them ask for,
    never more than a node offers (as the kubelet admits them). Other test modules' pods may be on the
    session's cluster, so its numbers are read here rather than written down."""
    core = client.CoreV1Api(cp.harness_client())
    offered: dict[str, int] = {}
    for n in core.list_node().items:
        cards = int((n.status.allocatable or {}).get("nvidia.com/gpu", "0"))
        if (n.metadata.labels or {}).get("nvidia.com/gpu.present") == "true" or cards > 0:
            offered[n.metadata.name] = cards
    asked: dict[str, int] = {}
    for p in core.list_pod_for_all_namespaces().items:
        if p.spec.node_name in offered and p.status.phase not in ("Succeeded", "Failed"):
            for c in p.spec.containers:
                limits = (c.resources.limits if c.resources else None) or {}
                asked[p.spec.node_name] = asked.get(p.spec.node_name, 0) + int(limits.get("nvidia.com/gpu", "0"))
    in_use = sum(min(asked.get(name, 0), cards) for name, cards in offered.items())
    return len(offered), in_use, sum(offered.values())


def test_nodes_of_a_fleet_are_tagged_with_their_cluster(cluster, fake_kubelet, west, tmp_path):
    kubeconfig = merged_kubeconfig(tmp_path / "fleet.yaml", east=cluster, west=west)
    out = run("nodes", "--context", "east,west", "-o", "json", "--kubeconfig", str(kubeconfig), home=tmp_path)
    assert out.returncode == 0, out.stderr
    by_cluster: dict[str, set[str]] = {}
    for n in json.loads(out.stdout):
        by_cluster.setdefault(n["cluster"], set()).add(n["name"])
    gpu_nodes = {n.metadata.name for n in client.CoreV1Api(cluster.harness_client()).list_node().items
                 if n.metadata.labels.get("nvidia.com/gpu.present") == "true" or
                 int((n.status.capacity or {}).get("nvidia.com/gpu", "0")) > 0}
    assert by_cluster["west"] == {"west-gpu-1", "west-gpu-2"} == node_names(west)
    assert by_cluster["east"] == gpu_nodes


async def until(pilot, predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} never became true")
        await pilot.pause(0.1)


async def test_each_cluster_polls_on_its_own_and_a_stopped_one_goes_stale(cluster, fake_kubelet, west, tmp_path,
                                                                        monkeypatch):
    from gputui.backends.kube_backend import live_backend
    from gputui.ui.app import GputuiApp
    from gputui.ui.screens.dashboard import DashboardScreen
    from gputui.ui.screens.fleet import FleetScreen

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    kubeconfig = merged_kubeconfig(tmp_path / "fleet.yaml", east=cluster, west=west)
    settings = Settings(kubeconfig=str(kubeconfig), context="east", contexts=("east", "west"), refresh=1.0)
    backend = live_backend(settings)
    app = GputuiApp(settings, backend, audit=AuditLog(tmp_path / "audit.jsonl", "admin", backend.context))
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, FleetScreen), what="the fleet view first")
            fleet = app.fleet
            await until(pilot, lambda: all(fleet.latest[c][0] is not None for c in ("east", "west")),
                        what="both clusters read")
            rows = {r.context: r for r in fleet.rows(85.0)}
            assert (rows["west"].nodes, rows["west"].gpus.in_use[0], rows["west"].gpus.offered[0]) == (
                WEST_NODES, 0, WEST_GPUS)
            east_nodes, _in_use, east_cards = whole_gpus(cluster)
            assert (rows["east"].nodes, rows["east"].gpus.offered[0]) == (east_nodes, east_cards)
            west.stop_apiserver()
            try:
                def row(context):
                    return {r.context: r for r in fleet.rows(85.0)}[context]

                east_before = row("east").taken_at
                await until(pilot, lambda: row("west").error != "", timeout=60, what="west's read failing")
                await until(pilot, lambda: row("east").taken_at > east_before + 2, timeout=20,
                            what="east still updating")
                west_row = row("west")
                assert west_row.taken_at is not None and west_row.error  # the last read kept, and why it is old
                table = app.screen.query_one("#fleet")

                def read_cell(context: str) -> str:
                    return str(table.get_cell(context, "read"))

                # Past three refreshes without an answer the row says STALE: waited for, not slept through.
                await until(pilot, lambda: read_cell("west").startswith("STALE"), timeout=30, what="west STALE")
                assert west_row.error[:20] in read_cell("west")
                assert not read_cell("east").startswith("STALE")
            finally:
                west.start_apiserver()
            # enter on a cluster: its dashboard; esc there: the fleet again.
            table = app.screen.query_one("#fleet")
            table.move_cursor(row=table.get_row_index("east"))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="east's dashboard")
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, FleetScreen), what="back to the fleet")
    finally:
        app.backend.close()


async def test_the_wallboard_sums_the_fleet_and_lists_its_clusters(cluster, fake_kubelet, west, tmp_path, monkeypatch):
    import io

    from rich.console import Console
    from textual.widgets import Digits, Static

    from gputui.backends.kube_backend import live_backend
    from gputui.policy.fleet import fleet_total
    from gputui.ui.app import GputuiApp
    from gputui.ui.screens.wallboard import WallboardScreen

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    kubeconfig = merged_kubeconfig(tmp_path / "fleet.yaml", east=cluster, west=west)
    settings = Settings(kubeconfig=str(kubeconfig), context="east", contexts=("east", "west"), refresh=1.0,
                        wallboard=True, read_only=True, wallboard_rotate=3600.0)
    backend = live_backend(settings)
    app = GputuiApp(settings, backend, audit=AuditLog(tmp_path / "audit.jsonl", "admin", backend.context))
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, WallboardScreen) and app.fleet is not None
                        and all(app.fleet.latest[c][0] is not None for c in ("east", "west")), what="both read")
            # The fleet's figures against the clusters' own numbers: west's by hand, east's counted from its API.
            east_cards = whole_gpus(cluster)[2]
            total = fleet_total(app.fleet.rows(85.0))
            assert (total.clusters, total.gpus.offered[0]) == (2, WEST_GPUS + east_cards)
            await until(pilot, lambda: app.screen.query_one("#fig-gpus Digits", Digits).value
                        == str(whole_gpus(cluster)[1]), what="the fleet's cards in use on the board (west: none)")
            pages = app.screen.pages()
            assert pages[-1] == "fleet"
            app.screen.page = len(pages) - 1
            app.screen.show_snapshot()
            await pilot.pause()
            console = Console(width=150, file=io.StringIO(), record=True)
            console.print(app.screen.query_one("#page", Static).content)
            text = console.export_text()
            assert "east" in text and "west" in text and "2/2 read" in text
            # The board rotates across the fleet: past its last page, the first page is the next cluster's.
            await pilot.press("n")
            await pilot.pause()
            assert app.screen.page == 0 and "· west" in str(app.screen.query_one("#page-title", Static).render())
            for _ in pages:
                await pilot.press("n")
            await pilot.pause()
            assert "· east" in str(app.screen.query_one("#page-title", Static).render())
    finally:
        app.backend.close()

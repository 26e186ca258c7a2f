import json
import subprocess
import sys

import pytest

from gputui.backends.demo import DemoCluster, demo_backend
from gputui.policy.node_pools import FLEET, PoolRow, pool_rows
from gputui.present.cells import Palette
from gputui.present.node_pools import has_pools, pool_strip
from gputui.settings import SettingsError, load_settings
from tests.demo_clock import ManualClock
from tests.demo_figures import DEMO_ALLOCATED, DEMO_NODES, DEMO_POOLS, DEMO_USE


def test_a_read_only_demo_still_reads_idle_gpus():
    """The wallboard is read-only: its idle figures must not be unknown for want of a reader method."""
    backend = demo_backend(clock=ManualClock(), read_only=True)
    idle, why = backend.read_idle(3600, 5)
    assert why == "" and idle is not None
    done = subprocess.run([sys.executable, "-m", "gputui", "--demo", "--read-only", "pools", "-o", "json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["idle_unknown_because"] is None


def test_pool_labels_are_a_setting_and_a_bad_one_is_one_line(tmp_path):
    settings = load_settings({}, env={"GPUTUI_POOL_LABELS": "team,gpu.pool"}, config_path=tmp_path / "none.yaml")
    assert settings.pool_labels == ("team", "gpu.pool")
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    # No node has `team`: every node falls to gpu.pool, the next label named.
    assert {r.pool for r in pool_rows(snap, None, settings.pool_labels)} == {"hopper", "ampere", "ada-lovelace", FLEET}
    assert {r.pool for r in pool_rows(snap, None, ("team",))} == {"(no pool)", FLEET}
    with pytest.raises(SettingsError, match="pool_labels: 'not a label!' is not a valid label name"):
        load_settings({}, env={"GPUTUI_POOL_LABELS": "not a label!"}, config_path=tmp_path / "none.yaml")


def _row(pool: str, gpus: int, allocated: int, idle: int | None) -> PoolRow:
    from gputui.vocabulary.gpu_resources import GpuUse

    return PoolRow(pool, 1, gpus, allocated, None, idle, use=GpuUse((allocated, 0, 0, 0), (gpus, 0, 0, 0)))


def test_the_pool_strip_fits_counts_what_it_leaves_out_and_says_unknown():
    rows = [_row(f"pool-{i:02d}", 8, 4, 1) for i in range(20)]
    rows.append(_row(FLEET, 160, 80, 20))
    line = pool_strip(rows, 80, Palette())
    assert len(line) <= 80
    shown = line.plain.count("pool-")
    assert 0 < shown < 20 and f"  {20 - shown} more pools (:pools)" in line.plain
    assert line.plain.endswith("idle 1h: 20/80")  # labelled: what is idle, and for how long
    unknown = pool_strip([_row("a", 8, 4, None), _row(FLEET, 8, 4, None)], 200, Palette(), "no pod label")
    assert unknown.plain == " Pools  a 4/8  idle GPUs ? (no pod label)"
    assert pool_strip(rows[:3] + rows[-1:], 200, Palette()).plain.endswith("  20 of 80 allocated GPUs idle for an hour")
    assert not has_pools([_row("(no pool)", 8, 4, None), _row(FLEET, 8, 4, None)])


def test_a_pools_utilisation_is_the_mean_over_its_gpus_reporting_as_the_header_says():
    """A GPU that reports no utilisation weighs nothing (it is unknown, not idle). The pools weighed each node's
    mean by all its GPUs, so a pool said 75% where its GPUs and the header's fleet mean said 83%."""
    from gputui.snapshot import ClusterSnapshot
    from gputui.vocabulary.model import Gpu, GpuSummary, Node

    def node(name: str, *utils: float | None) -> Node:
        return Node(name, True, False, "H100", len(utils), len(utils), labels={"gpu.pool": "hopper"},
                    gpus=tuple(Gpu(i, f"{name}-{i}", util_pct=u) for i, u in enumerate(utils)))

    snap = ClusterSnapshot(0.0, "c", nodes=(node("a", 50.0, None), node("b", 100.0, 100.0)))
    hopper, fleet = pool_rows(snap, None)
    assert hopper.util == pytest.approx(250 / 3) == snap.mean_util and fleet.util == pytest.approx(250 / 3)
    # Read as summaries (a large fleet): each node weighs the GPUs its summary counts; one without a figure, none.
    summarised = ClusterSnapshot(0.0, "c", nodes=(node("a"), node("b"), node("c")), summaries={
        "a": GpuSummary(2, util_pct=40.0), "b": GpuSummary(6, util_pct=80.0), "c": GpuSummary(8)})
    assert pool_rows(summarised, None)[0].util == pytest.approx((80 + 480) / 8) == summarised.mean_util


def test_pools_count_whole_gpus_mig_slices_and_shared_replicas_apart_as_the_header_does():
    """The pools added every GPU unit up: the demo's (fleet) row said 227 GPUs where the header said 167 cards
    (36 MIG slices, 16 shared replicas and 8 DRA devices are no cards). Each scheme is its own figure now, in
    the table, the pool strip and the JSON (`by_scheme`); `gpus` and `allocated` stay the units together."""
    from gputui.policy.figures import figures

    snap = demo_backend(seed=7, clock=ManualClock()).reader.snapshot()
    rows = pool_rows(snap, None)
    fleet = rows[-1]
    header = figures(snap, 85.0).gpus
    # Each pool and the fleet against the numbers worked out by hand (tests/demo_figures.py); the header alike.
    assert {r.pool: (r.nodes, r.gpus, r.allocated, r.use) for r in rows[:-1]} == DEMO_POOLS
    assert (fleet.pool, fleet.nodes, fleet.gpus, fleet.allocated, fleet.use) == (
        FLEET, DEMO_NODES, sum(DEMO_USE.offered), DEMO_ALLOCATED, DEMO_USE)
    assert header == DEMO_USE and fleet.use.text() == header.text()
    assert fleet.use.offered[0] < fleet.gpus == sum(fleet.use.offered)  # units: cards and the rest together
    mixed = [r for r in rows[:-1] if len(r.use.shown()) > 1]
    assert mixed and all("+" in r.use.text() and "+" in r.use.free_text() for r in mixed)
    as_json = fleet.to_dict()["by_scheme"]
    assert as_json["whole"] == {"allocated": header.in_use[0], "offered": header.offered[0]}
    assert set(as_json) == {"whole", "mig", "shared", "dra"}
    strip = pool_strip(rows, 200, Palette()).plain
    # Each pool's whole cards; never a bare "+" (issue 35: it said nothing of what was added).
    assert all(f"{r.pool} {r.use.in_use[0]}/{r.use.offered[0]}" in strip for r in rows[:-1]) and "+" not in strip


def test_a_drains_replacements_are_not_counted_idle_over_the_hour():
    """Issue 35 item 12: idle jumped during a drain, as minutes-old replacement pods (loading their weights,
    utilisation near 0) counted as idle over the last hour. A unit counts only when its pods held it the whole
    window (or since the simulated world began)."""
    clock = ManualClock()
    demo = DemoCluster(seed=3, clock=clock)
    snap = demo.snapshot()
    before = sum(demo.idle_gpus(3600, 5).idle.values())
    node = next(n.name for n in snap.nodes if n.gpu_product.startswith("NVIDIA-H100") and snap.pods_on(n.name))
    demo.set_unschedulable(node, True)
    for pod in snap.pods_on(node):
        if pod.gpu_request and pod.owner_kind != "DaemonSet":
            demo.evict_pod(pod.namespace, pod.name)
    clock.advance(30)  # the replacement placed, loading its weights
    snap = demo.snapshot()
    fresh = [p for p in snap.pods if p.gpu_request and p.node and p.node != node and not p.ready
             and p.service == "llama-3-70b-instruct"]
    assert fresh, "the drain's replacement is placed and still loading"
    assert sum(demo.idle_gpus(3600, 5).idle.values()) == before

from gputui.backends.demo import DemoCluster
from gputui.policy.fleet import FLEET, cluster_row, fleet_total
from gputui.policy.health import fleet_alerts
from tests.demo_clock import ManualClock
from tests.demo_figures import DEMO_NODES, DEMO_USE


def test_a_cluster_row_is_its_wallboard_figures_and_the_fleet_sums_what_answered():
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    row = cluster_row("east", snap, "", 85.0)
    assert (row.nodes, row.gpus) == (DEMO_NODES, DEMO_USE)  # worked out by hand: tests/demo_figures.py
    # Nodes that need attention, not alerts (issue 35): a node with several hot GPUs is one hot node.
    # and the person's cordon on gpu-a100-06, past its expiry (backends/demo/actors.py), is one node too (issue 40)
    assert sum(row.alerts.values()) == len({a.node for a in fleet_alerts(snap, 85.0)} | {"gpu-a100-06"}) == 9
    # worst first; the demo's GPU faults (issue 37): XIDs on gpu-h100-05 and gpu-a100-04, row remap and thermal health
    assert row.alerts_text() == "1 NotReady, 3 XID, 2 health, 1 upgrade failed, 1 hot, 1 cordon expired"
    assert fleet_total([row, row]).alerts_text(compact=True) == "18 (2 NotReady)"
    dead = cluster_row("west", None, "connection refused", 85.0)
    total = fleet_total([row, row, dead])
    assert total.context == FLEET and (total.clusters, total.unread) == (3, 1)
    assert (total.nodes, total.gpus.in_use, total.gpus.offered) == (
        2 * DEMO_NODES, tuple(2 * n for n in DEMO_USE.in_use), tuple(2 * n for n in DEMO_USE.offered))
    assert dead.freshness(0, 2) == "connection refused"  # never read: why, not an age


def test_a_cluster_answering_from_its_caches_is_as_old_as_its_api_source():
    from dataclasses import replace

    from gputui.snapshot import SourceStatus

    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    cached = replace(snap, taken_at=1000.0, sources=(SourceStatus("API", 900.0, "apiserver unreachable"),))
    row = cluster_row("west", cached, "", 85.0)
    assert row.taken_at == 900.0 and row.error == "apiserver unreachable"
    assert row.freshness(1000.0, 2.0) == "STALE 100s: apiserver unreachable"

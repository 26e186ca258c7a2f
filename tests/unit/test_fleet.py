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


def test_a_read_that_moved_nothing_keeps_the_last_rows_figures_and_a_cordon_expiring_between_reads_counts():
    """A fleet reader's row comes from its last one when the join and the metrics kept every object (a quiet
    cluster): only its freshness is new. The one figure with a clock, a gputui cordon past its expiry, is
    looked at again, so a cordon that expires between two reads of an unchanged cluster is counted at once."""
    from dataclasses import replace

    from gputui.policy.cordon_record import CordonRecord
    from gputui.policy.problems import expired_cordons
    from gputui.snapshot import SourceStatus
    from gputui.vocabulary.disruptions import CORDON_RECORD

    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    now = snap.taken_at
    target = next(n for n in snap.nodes if not n.unschedulable and n.ready)
    expiring = replace(target, unschedulable=True, annotations={
        **target.annotations, CORDON_RECORD: CordonRecord("bob", "fan", now - 60, "OPS-9", now + 30).to_annotation()})
    first = replace(snap, nodes=tuple(expiring if n is target else n for n in snap.nodes),
                    sources=(SourceStatus("API", now, None),))
    row = cluster_row("east", first, "", 85.0)
    assert target.name not in {a.node for a in expired_cordons(first)}  # not yet
    later = replace(first, taken_at=now + 10, sources=(SourceStatus("API", now + 10, None),))
    kept = cluster_row("east", later, "", 85.0, (first, row))
    assert kept == replace(row, taken_at=now + 10)  # the same figures, fresher
    expired = replace(first, taken_at=now + 60, sources=(SourceStatus("API", now + 60, None),))
    after = cluster_row("east", expired, "", 85.0, (later, kept))
    assert after.alerts.get("cordon expired", 0) == row.alerts.get("cordon expired", 0) + 1
    assert after == cluster_row("east", expired, "", 85.0)  # what a row from scratch says
    # A node that moved (a new object) is counted again: the same objects are the only shortcut.
    moved = replace(later, nodes=tuple(replace(n, ready=False) if n is expiring else n for n in later.nodes))
    assert cluster_row("east", moved, "", 85.0, (later, kept)) == cluster_row("east", moved, "", 85.0)
    assert cluster_row("east", moved, "", 85.0, (later, kept)) != kept


def test_a_fleet_cluster_is_read_every_refresh_its_reads_time_included_and_a_slow_one_not_back_to_back():
    from gputui.ui.runs.fleet_watch import next_pause

    assert next_pause(2.0, 0.5) == 1.5  # a read every 2 s: a row at most a refresh and a read old
    assert next_pause(2.0, 0.0) == 2.0
    assert next_pause(2.0, 1.8) == 1.0  # half a refresh at least: a slow cluster's reads do not run back to back
    assert next_pause(2.0, 30.0) == 1.0

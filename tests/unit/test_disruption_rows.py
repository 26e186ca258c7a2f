"""The rows of `:disruptions` and `gputui disruptions` (gputui.present.disruptions, issue 40): one per node and
actor, stuck ones first, then the oldest, undated after every dated one; unknown (never empty) when the nodes
could not be read; the dashboard's state words; text from the cluster made visible."""

from __future__ import annotations

import json

from gputui.backends.demo.simulation import Simulation
from gputui.present.disruptions import (
    DisruptionRow,
    cells,
    disruption_rows,
    order_key,
    state_with_actor,
    unknown_because,
)
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.model import Node
from gputui.vocabulary.scheduling import NodeScheduling, Taint

NOW = 1_780_000_000.0
DAY = 86400.0


def node(name: str, *, cordoned: bool = False, taints: tuple[Taint, ...] = (), labels: dict | None = None,
         annotations: dict | None = None) -> Node:
    return Node(name, True, cordoned, "NVIDIA H100 80GB HBM3", 8, 8, labels=labels or {},
                annotations=annotations or {}, scheduling=NodeScheduling(taints=taints))


READ = (SourceStatus("API", NOW),)


def snapshot(*nodes: Node, sources: tuple[SourceStatus, ...] = READ) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=NOW, context="t", nodes=nodes, sources=sources)


def deleting(since: float) -> tuple[Taint, ...]:
    return (Taint(d.CA_TO_BE_DELETED, str(int(since)), "NoSchedule"),)


def test_stuck_first_then_oldest_then_undated_then_by_node():
    rows = disruption_rows(snapshot(
        node("a-person", cordoned=True),  # undated
        node("b-recent", cordoned=True, taints=deleting(NOW - 600)),  # 10 minutes
        node("c-stuck", cordoned=True, taints=deleting(NOW - 2 * DAY)),  # 2 days: stuck
        node("d-older", cordoned=True, taints=deleting(NOW - 3 * 3600)),  # 3 hours
        node("e-karpenter", taints=(Taint(d.KARPENTER_DISRUPTED, "", "NoSchedule"),)),  # undated
        node("f-quiet"),
    ))
    assert [(r.node, r.actor, bool(r.stuck)) for r in rows] == [
        ("c-stuck", d.CLUSTER_AUTOSCALER, True),
        ("d-older", d.CLUSTER_AUTOSCALER, False),
        ("b-recent", d.CLUSTER_AUTOSCALER, False),
        ("a-person", d.PERSON, False),
        ("e-karpenter", d.KARPENTER, False),
    ]
    assert [r.age_s for r in rows] == [2 * DAY, 3 * 3600, 600, None, None]
    assert rows[0].age_text() == "48.0h" and rows[3].age_text() == "–"


def test_a_stuck_undated_hold_still_comes_before_a_dated_one_that_is_not():
    stuck = DisruptionRow("z", d.GPU_OPERATOR, "upgrade-failed", None, None, "w", "failed", True)
    dated = DisruptionRow("a", d.CLUSTER_AUTOSCALER, "deleting", NOW, 5.0, "w", "", True)
    assert sorted([dated, stuck], key=order_key) == [stuck, dated]


def test_one_row_per_actor_on_a_node_held_twice():
    quarantined = {d.NVSENTINEL_CORDON_BY: "NVSentinel"}
    rows = disruption_rows(snapshot(node("n", cordoned=True, labels=quarantined, taints=deleting(NOW - 60))))
    assert {r.actor for r in rows} == {d.NVSENTINEL, d.CLUSTER_AUTOSCALER}
    assert len({r.key for r in rows}) == 2


def test_the_list_is_unknown_not_empty_when_the_nodes_could_not_be_read():
    failed = snapshot(sources=(SourceStatus("API", None, "connection refused"),))
    assert disruption_rows(failed) == []
    assert unknown_because(failed) == "the nodes could not be read (connection refused)"
    assert unknown_because(snapshot(sources=(SourceStatus("API", None),))) != ""
    assert unknown_because(snapshot(node("n"))) == ""


def test_hostile_text_from_the_cluster_is_made_visible_and_cut():
    event = [{"checkName": "GpuXidError", "message": "\x1b]0;pwned\x07\x1b[2J[bold]boom " + "x" * 200}]
    rows = disruption_rows(snapshot(node("n\x1bq", cordoned=True, labels={d.NVSENTINEL_CORDON_BY: "NVSentinel"},
                                         annotations={d.NVSENTINEL_EVENT: json.dumps(event)})))
    shown = cells(rows[0], 40)
    assert all("\x1b" not in c and "\x07" not in c for c in shown), shown
    assert "␛" in shown[0] and len(shown[4]) == 40 and shown[4].endswith("…")
    assert "\x1b" in rows[0].why  # the row keeps the raw value: JSON escapes it, the terminal never sees it


def test_the_state_column_names_the_actor_as_wide_as_it_can():
    assert state_with_actor("Cordoned", d.NVSENTINEL, 21) == "Cordoned·nvsentinel"
    assert state_with_actor("Cordoned", d.NVSENTINEL, 9) == "nvsent"
    assert state_with_actor("Ready", d.KARPENTER, 9) == "karpenter"
    assert state_with_actor("Cordoned", d.CLUSTER_AUTOSCALER, 9) == "autoscale"
    assert state_with_actor("Cordoned", d.PERSON, 21) == "Cordoned·person"
    assert state_with_actor("Cordoned", d.PERSON, 9) == "Cordoned"  # an unowned cordon reads as it always did
    assert state_with_actor("Upgrading", d.GPU_OPERATOR, 21) == "Upgrading"  # the state already says who
    assert state_with_actor("Ready", "", 21) == "Ready"
    assert all(len(state_with_actor(s, a, 9)) <= 9 for s in ("Cordoned", "NotReady", "Ready")
               for a in (d.NVSENTINEL, d.KARPENTER, d.CLUSTER_AUTOSCALER, d.GPU_OPERATOR, d.GPUTUI, d.PERSON))


def test_the_demo_has_a_node_in_each_actors_hands_that_the_node_object_can_show():
    sim = Simulation(clock=lambda: NOW)
    rows = disruption_rows(sim.snapshot())
    by_node = {(r.node, r.actor): r for r in rows}
    assert {(r.node, r.actor, r.phase) for r in rows} == {
        ("gpu-a100-03", d.NVSENTINEL, "quarantined"),
        ("gpu-a100-07", d.KARPENTER, "Underutilized"),  # its NodeClaim says why: a consolidation
        ("gpu-h100-10", d.MAINTENANCE_OPERATOR, "Draining"),
        ("gpu-l40s-04", d.CLUSTER_AUTOSCALER, "deleting"),
        ("gpu-l40s-05", d.CLUSTER_AUTOSCALER, "deletion-candidate"),
        ("gpu-a100-08", d.GPU_OPERATOR, "upgrade-failed"),
        ("gpu-l40s-03", d.GPU_OPERATOR, "pod-restart-required"),
        ("gpu-l40s-06", d.GPU_OPERATOR, "validation-required"),  # stalled for days (dated by the operator)
        ("gpu-a100-06", d.PERSON, "cordoned"),
    }
    quarantine = by_node[("gpu-a100-03", d.NVSENTINEL)]
    assert quarantine.since == NOW - 3 * 3600 and "XID 48" in quarantine.why
    assert "nvidia.com/gpu-error=fatal:NoSchedule" in quarantine.why
    assert by_node[("gpu-l40s-04", d.CLUSTER_AUTOSCALER)].since == NOW - 20 * 60
    # The stuck ones first, oldest first: the upgrade stalled in validation for three days, the person's cordon
    # (since two days, expired six hours ago), the NodeMaintenance (two hours in Draining, past its drain timeout),
    # then the two stuck upgrades (undated).
    assert [r.node for r in rows[:5]] == ["gpu-l40s-06", "gpu-a100-06", "gpu-h100-10", "gpu-a100-08", "gpu-l40s-03"]
    stalled = by_node[("gpu-l40s-06", d.GPU_OPERATOR)]
    assert stalled.since == NOW - 3 * 86400 and stalled.stuck.startswith("validation-required for 72h")
    maintenance = by_node[("gpu-h100-10", d.MAINTENANCE_OPERATOR)]
    assert maintenance.since == NOW - 2 * 3600 and "past its drain timeout of 600s" in maintenance.stuck
    person = by_node[("gpu-a100-06", d.PERSON)]
    assert person.since == NOW - 2 * 86400 and "priya@example.com" in person.why and "HW-4217" in person.why
    assert person.stuck.startswith("cordon expired 6h ago")

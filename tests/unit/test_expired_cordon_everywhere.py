"""A gputui cordon past its expiry is a node alert everywhere a node's alerts are counted or shown (issue 40 item 2):
the header's figures (and so `d`, the wallboard's count, a fleet's rows), the Problem column, `gputui check`,
`gputui nodes` (-o json and the table) and the wallboard's heat map: the same node, the same word. The node object
is one and the same before and after its expiry (as a Node that does not change outlives many refreshes): only the
snapshot's time moves, so an answer kept per node object cannot hide the expiry."""

from __future__ import annotations

import json

from gputui.checks.context import CheckContext
from gputui.checks.result import Status
from gputui.checks.rules import gpu_health
from gputui.cli.nodes import node_record
from gputui.policy.cordon_record import CordonRecord
from gputui.policy.figures import figures
from gputui.policy.problems import summary
from gputui.present.cells import Palette
from gputui.present.columns import NODE_COLUMNS, row_context
from gputui.present.wallboard import heat_map
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.disruptions import CORDON_RECORD
from gputui.vocabulary.model import Node

EXPIRES = 1_800_000_000.0  # 2027-01-15 08:00 UTC
BEFORE, AFTER = EXPIRES - 60, EXPIRES + 60


def _node(name: str, unschedulable: bool = True) -> Node:
    record = CordonRecord("alice", "fan swap", EXPIRES - 86400, "OPS-7", EXPIRES).to_annotation()
    return Node(name=name, ready=True, unschedulable=unschedulable, gpu_product="NVIDIA-H100", gpu_capacity=8,
                gpu_allocatable=8, annotations={CORDON_RECORD: record})


HELD = _node("gpu-held")
LEFT = _node("gpu-left", unschedulable=False)  # uncordoned by hand since: the record is history, no alert
FINE = Node(name="gpu-fine", ready=True, unschedulable=False, gpu_product="NVIDIA-H100", gpu_capacity=8,
            gpu_allocatable=8)


def _snap(at: float) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=at, context="t", nodes=(FINE, HELD, LEFT))


def _cell(snap: ClusterSnapshot, node: Node) -> str:
    column = next(c for c in NODE_COLUMNS if c.key == "alerts")
    return column.cell(node, row_context(snap, Palette(), 85.0), column.width).plain


def test_the_figures_count_it_once_the_snapshot_is_past_the_expiry():
    assert figures(_snap(BEFORE), 85.0).alerts == 0
    after = figures(_snap(AFTER), 85.0)
    assert after.alerts == 1 and after.worst == "cordon expired"
    assert summary(list(after.problems)) == "1 node needs attention: 1 cordon expired"
    assert "alice: fan swap (ticket OPS-7)" in after.problems[0].details()


def test_the_problem_column_says_it():
    assert _cell(_snap(BEFORE), HELD) == ""
    assert _cell(_snap(AFTER), HELD) == "expired"
    assert _cell(_snap(AFTER), LEFT) == "" and _cell(_snap(AFTER), FINE) == ""


def test_gputui_check_warns_and_says_what_to_do():
    assert gpu_health(CheckContext(_snap(BEFORE), 85.0)).status is Status.PASS
    result = gpu_health(CheckContext(_snap(AFTER), 85.0))
    assert result.status is Status.WARN
    assert result.summary.startswith("1 node needing attention (1 cordon expired): gpu-held")
    assert "cordon them again with a new expiry" in result.fix and "cooling" not in result.fix


def test_gputui_nodes_json_lists_the_alert():
    assert node_record(_snap(BEFORE), HELD)["alerts"] == []
    [alert] = json.loads(json.dumps(node_record(_snap(AFTER), HELD)))["alerts"]
    assert alert.startswith("Cordon: cordon expired 2027-01-15 08:00 UTC (by alice: fan swap")


def test_the_wallboard_names_it_and_marks_the_node():
    def line(at: float) -> str:
        [found] = [t for t in heat_map(_snap(at), 120, 10, "util", 85.0, Palette()) if t.plain.startswith("gpu-held")]
        return found.plain

    assert line(BEFORE).endswith("Cordoned")
    assert line(AFTER).endswith("cordon expired") and "Cordoned" not in line(AFTER)


def test_alerts_at_adds_it_last_after_the_nodes_own():
    from gputui.policy.problems import alerts_at  # (new: imported here so the other tests run on the old code)

    hot_and_held = Node(name="h", ready=False, unschedulable=True, gpu_product="NVIDIA-H100", gpu_capacity=8,
                        gpu_allocatable=8, annotations=HELD.annotations)
    kinds = [a.kind for a in alerts_at(hot_and_held, AFTER)]
    assert kinds == ["NotReady", "Cordon"]
    assert [a.kind for a in alerts_at(hot_and_held, BEFORE)] == ["NotReady"]


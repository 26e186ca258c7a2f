"""A gputui cordon past its expiry is a node alert, and describe shows the record (issue 40 item 2)."""

from __future__ import annotations

import io

from rich.console import Console

from gputui.policy.cordon_record import CordonRecord
from gputui.policy.health import Severity
from gputui.policy.problems import expired_cordon_alert, expired_cordons, problems_of
from gputui.present.cells import Palette
from gputui.present.node_describe import describe
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.disruptions import CORDON_RECORD
from gputui.vocabulary.model import Node

NOW = 1_800_000_000.0  # 2027-01-15 08:00 UTC


def node(name="gpu-1", expires: float | None = NOW - 7200, unschedulable=True, raw: str | None = None) -> Node:
    value = raw if raw is not None else CordonRecord("bob", "bad \x1b[2J fan", NOW - 86400, "OPS-9",
                                                      expires).to_annotation()
    return Node(name=name, ready=True, unschedulable=unschedulable, gpu_product="H100", gpu_capacity=8,
                gpu_allocatable=8, annotations={CORDON_RECORD: value})


def text(renderable) -> str:
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_an_expired_cordon_is_an_alert_naming_who_why_and_the_ticket():
    alert = expired_cordon_alert(node(), NOW)
    assert alert is not None
    assert (alert.node, alert.kind, alert.severity, alert.short) == ("gpu-1", "Cordon", Severity.CORDONED, "expired")
    assert alert.message.startswith("cordon expired 2027-01-15 06:00 UTC (by bob: bad ␛[2J fan (ticket OPS-9)")
    [problem] = problems_of([alert])
    assert (problem.kind, problem.word) == ("cordon expired", "expired")


def test_no_alert_before_the_expiry_without_one_when_uncordoned_or_unreadable():
    assert expired_cordon_alert(node(expires=NOW + 60), NOW) is None
    assert expired_cordon_alert(node(expires=None), NOW) is None
    assert expired_cordon_alert(node(unschedulable=False), NOW) is None  # a record left behind: history
    assert expired_cordon_alert(node(raw="garbage"), NOW) is None
    assert expired_cordon_alert(node(expires=NOW), NOW) is not None  # at the expiry, expired


def test_the_fleet_alerts_list_each_expired_cordon_as_of_the_snapshot():
    snap = ClusterSnapshot(taken_at=NOW, context="t", nodes=(node("a"), node("b", expires=NOW + 60), node("c")))
    assert [a.node for a in expired_cordons(snap)] == ["a", "c"]


def test_describe_shows_the_record_and_the_expiry_alert():
    shown = text(describe(node(), 85.0, Palette(), now=NOW))
    assert "Cordon: cordon expired 2027-01-15 06:00 UTC" in shown
    for line in ("Cordoned through gputui", "By: bob", "Reason: bad ␛[2J fan", "Ticket: OPS-9",
                 "Since: 2027-01-14 08:00 UTC (24.0h ago)", "Expires: 2027-01-15 06:00 UTC",
                 "EXPIRED 2.0h ago"):
        assert line in shown, line
    assert "\x1b[2J" not in shown
    later = text(describe(node(expires=NOW + 3600), 85.0, Palette(), now=NOW))
    assert "EXPIRED" not in later and "Cordon: cordon expired" not in later and "Expires: 2027-01-15 09:00" in later
    assert "Cordoned through gputui" not in text(describe(node(unschedulable=False), 85.0, Palette(), now=NOW))

"""The budget arithmetic of a maintenance batch (issue 40 item 3): Karpenter's percent rounding and schedule windows
(as sigs.k8s.io/karpenter v1.13.0 and robfig/cron v3.0.1 decide them), reasons, the maintenance-operator's limits,
nodes other actors disrupt counted against each budget, and an unknown budget that stops everything."""

from __future__ import annotations

import calendar
import time

import pytest

from gputui.policy.batch_budgets import (
    BatchBudget,
    already,
    budgets_of,
    maintenance_budgets,
    nodepool_budget,
    parallelism,
    refusing,
    scaled,
)
from gputui.policy.karpenter_schedule import ScheduleError, go_duration, parse_cron, window_open
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.batch_budgets import (
    MAINTENANCE_CONFIG,
    NODEPOOL,
    NODEPOOL_LABEL,
    BudgetObjects,
    MaintenanceConfigRecord,
    NodePoolBudget,
    NodePoolRecord,
)
from gputui.vocabulary.model import Node


def at(text: str) -> float:
    """UTC "2026-12-07 10:00" -> epoch seconds (2026-12-07 is a Monday)."""
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M")))


MONDAY_10 = at("2026-12-07 10:00")
SATURDAY_10 = at("2026-12-05 10:00")


# ----- percent rounding -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "total", "up", "want"), [
    ("10%", 10, True, 1), ("10%", 11, True, 2), ("10%", 9, True, 1), ("10%", 0, True, 0), ("0%", 50, True, 0),
    ("100%", 7, True, 7), ("3", 100, True, 3),
    ("10%", 11, False, 1), ("10%", 9, False, 0), ("25%", 27, False, 6), ("25%", 27, True, 7),
])
def test_scaled_rounds_as_intstr_does(value, total, up, want):
    assert scaled(value, total, up) == want


def test_scaled_refuses_what_is_neither_a_count_nor_a_percentage():
    with pytest.raises(ValueError):
        scaled("ten", 10, True)


# ----- schedule windows ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("now", "want"), [
    (MONDAY_10, True),  # hit at 09:00, window 8h
    (at("2026-12-07 09:00"), True),  # the hit itself: Next(now - 8h) = now, not after now
    (at("2026-12-07 16:59"), True),
    (at("2026-12-07 17:00"), False),  # exactly the duration after the hit: Next(09:00) is Tuesday's
    (at("2026-12-07 08:59"), False),
    (SATURDAY_10, False),
    (at("2026-12-12 01:00"), False),  # Saturday 01:00: Friday's window closed at 17:00
])
def test_a_weekday_window_is_open_only_within_its_duration(now, want):
    assert window_open("0 9 * * 1-5", "8h", now) is want


def test_a_window_reaching_over_midnight_counts_yesterdays_hit():
    assert window_open("0 22 * * *", "4h", at("2026-12-08 01:30")) is True
    assert window_open("0 22 * * *", "4h", at("2026-12-08 02:00")) is False


def test_descriptors_and_names_read_as_robfig_reads_them():
    assert window_open("@daily", "1h", at("2026-12-07 00:30")) is True
    assert window_open("@daily", "1h", at("2026-12-07 01:30")) is False
    assert window_open("@hourly", "10m", at("2026-12-07 13:05")) is True
    assert window_open("0 9 * * MON", "1h", at("2026-12-07 09:30")) is True
    assert window_open("0 9 * DEC Tue", "1h", at("2026-12-07 09:30")) is False
    assert window_open("30 9 * * *", "1h30m", at("2026-12-07 10:59")) is True


def test_day_of_month_and_day_of_week_are_ored_unless_one_is_starred():
    # "1 of the month OR Monday": Monday 7 December matches though it is not the 1st.
    assert parse_cron("0 0 1 * 1").day_matches(time_of("2026-12-07 00:00"))
    # With the day of the month starred, both must hold: a Tuesday does not match "* * 1" (Monday).
    assert not parse_cron("0 0 * * 1").day_matches(time_of("2026-12-08 00:00"))
    # */2 drops the star (robfig's getRange): day-of-month every other day OR Monday.
    assert parse_cron("0 0 */2 * 1").day_matches(time_of("2026-12-07 00:00"))


def time_of(text: str):
    from datetime import UTC, datetime
    return datetime.fromtimestamp(at(text), tz=UTC)


def test_a_schedule_that_never_hits_is_open_as_karpenter_finds_it():
    # 30 February: robfig's Next gives up after five years and returns Go's zero time, which is not after now.
    assert window_open("0 0 30 2 *", "1h", MONDAY_10) is True


@pytest.mark.parametrize("bad", ["0 0 * * 7", "61 * * * *", "* * * *", "@every 1h", "0 0 * * mon-", "5-1 * * * *"])
def test_schedules_karpenter_cannot_parse_are_errors(bad):
    with pytest.raises(ScheduleError):
        parse_cron(bad)


def test_go_durations():
    assert go_duration("8h") == 8 * 3600 and go_duration("1h30m") == 5400 and go_duration("90m0s") == 5400
    with pytest.raises(ScheduleError):
        go_duration("8 hours")


# ----- Karpenter NodePool budgets ------------------------------------------------------------------------------------

def pool_nodes(pool: str, count: int, **changed: dict) -> tuple[Node, ...]:
    out = []
    for i in range(count):
        name = f"{pool}-{i:02d}"
        extra = changed.get(name, {})
        out.append(Node(name, extra.get("ready", True), extra.get("unschedulable", False), "H100", 8, 8,
                        labels={NODEPOOL_LABEL: pool, **extra.get("labels", {})}))
    return tuple(out)


QUARANTINED = {"unschedulable": True, "labels": {d.NVSENTINEL_CORDON_BY: "NVSentinel",
                                                 d.NVSENTINEL_STATE: "quarantined"}}
BUSINESS_HOURS_ZERO = NodePoolBudget("0", "0 9 * * 1-5", "8h")
TEN_PERCENT = NodePoolBudget("10%")


def snap_with(nodes, pools=(), configs=(), reads=None, now=SATURDAY_10) -> ClusterSnapshot:
    reads = reads if reads is not None else {NODEPOOL: d.READ, MAINTENANCE_CONFIG: d.READ}
    return ClusterSnapshot(now, "t", nodes=tuple(nodes), batch_budgets=BudgetObjects(tuple(pools), tuple(configs),
                                                                                     reads))


def test_ten_percent_of_ten_nodes_is_one_and_an_nvsentinel_quarantine_takes_it():
    nodes = pool_nodes("gpu-h100", 10, **{"gpu-h100-03": QUARANTINED})
    snap = snap_with(nodes, [NodePoolRecord("gpu-h100", (TEN_PERCENT,))])
    [budget] = budgets_of(snap)
    assert (budget.allowed, budget.room, dict(budget.taken)) == (1, 0, {"gpu-h100-03": d.NVSENTINEL})
    assert budget.words() == ("Karpenter NodePool gpu-h100: 10% of 10 nodes → 1 node; 1 already disrupted by "
                              "NVSentinel: 0 more at once now")
    # The quarantined node itself costs nothing more; any other node of the pool is refused.
    assert refusing([budget], "gpu-h100-03", set()) is None
    assert refusing([budget], "gpu-h100-01", set()) is budget
    assert refusing([budget], "elsewhere", set()) is None  # not in the pool: not its budget


def test_a_scheduled_zero_binds_inside_its_window_only():
    pool = NodePoolRecord("gpu-h100", (TEN_PERCENT, BUSINESS_HOURS_ZERO))
    nodes = pool_nodes("gpu-h100", 20)
    weekend = nodepool_budget(pool, snap_with(nodes, now=SATURDAY_10), {}, {})
    weekday = nodepool_budget(pool, snap_with(nodes, now=MONDAY_10), {}, {})
    assert (weekend.allowed, weekend.figures) == (2, "10% of 20 nodes → 2 nodes")
    assert (weekday.allowed, weekday.figures) == (0, "0 → 0 nodes (window 0 9 * * 1-5 for 8h, open now)")


def test_a_budget_for_other_reasons_does_not_bind_a_maintenance_drain():
    pool = NodePoolRecord("p", (NodePoolBudget("0", reasons=("Drifted",)), NodePoolBudget("50%")))
    budget = nodepool_budget(pool, snap_with(pool_nodes("p", 4)), {}, {})
    assert budget.allowed == 2
    # Karpenter's own reason: that budget binds it (its GetAllowedDisruptionsByReason).
    assert nodepool_budget(pool, snap_with(pool_nodes("p", 4)), {}, {}, reason="Drifted").allowed == 0


def test_no_budget_in_force_allows_the_whole_pool_and_says_which_are_closed():
    pool = NodePoolRecord("p", (BUSINESS_HOURS_ZERO,))
    budget = nodepool_budget(pool, snap_with(pool_nodes("p", 3)), {}, {})
    assert budget.allowed == 3 and budget.figures == "no budget in force now (0 (window 0 9 * * 1-5 for 8h, not open now))"


def test_a_budget_that_does_not_parse_allows_none_as_karpenter_does():
    pool = NodePoolRecord("p", (TEN_PERCENT, NodePoolBudget("1", "0 9 * * 8", "1h", reasons=("Drifted",))))
    budget = nodepool_budget(pool, snap_with(pool_nodes("p", 10)), {}, {})
    assert budget.allowed == 0 and "does not parse" in budget.figures and "fail closed" in budget.figures


# ----- the maintenance-operator --------------------------------------------------------------------------------------

def test_maintenance_operator_limits_round_as_its_scheduler_does():
    config = MaintenanceConfigRecord("nvidia-maintenance", "default", "10%", "10%")
    parallel, unavailable = maintenance_budgets(config, 11, {}, {})
    assert (parallel.allowed, unavailable.allowed) == (2, 1)  # up for maxParallelOperations, down for maxUnavailable
    assert parallel.name == "MaintenanceOperatorConfig nvidia-maintenance/default maxParallelOperations"
    default, = maintenance_budgets(MaintenanceConfigRecord("ns", "default"), 11, {}, {})
    assert default.allowed == 1 and "(unset: its default)" in default.figures  # maxUnavailable unset: no row
    zero, = maintenance_budgets(MaintenanceConfigRecord("ns", "default", "0"), 11, {}, {})
    assert zero.allowed == 0  # the code gives no slot, whatever its doc says
    bad, = maintenance_budgets(MaintenanceConfigRecord("ns", "default", "lots"), 11, {}, {})
    assert bad.allowed == 0 and "fail closed" in bad.figures


def test_only_the_config_named_default_counts_and_others_disruptions_count_against_it():
    nodes = pool_nodes("x", 4, **{"x-01": {"ready": False}})
    snap = snap_with(nodes, configs=[MaintenanceConfigRecord("ns", "other", "0"),
                                     MaintenanceConfigRecord("ns", "default", "2")])
    [budget] = budgets_of(snap)
    assert (budget.allowed, dict(budget.taken), budget.room) == (2, {"x-01": "NotReady"}, 1)
    assert "1 already disrupted (NotReady)" in budget.words()


# ----- unknown, min, limiting ---------------------------------------------------------------------------------------

def test_an_unreadable_budget_source_is_unknown_and_refuses_every_node():
    snap = snap_with(pool_nodes("p", 3), reads={NODEPOOL: "unknown: forbidden: nodepools is forbidden",
                                                MAINTENANCE_CONFIG: d.NOT_INSTALLED})
    [budget] = budgets_of(snap)
    assert budget.allowed is None and budget.room is None and budget.name == NODEPOOL
    assert budget.words() == ("NodePool: not readable (forbidden: nodepools is forbidden): batch size unknown, no node "
                              "starts until it is read")
    assert parallelism([budget], ["p-00", "p-01"], 2) == (0, budget)


def test_not_installed_is_no_budget_and_no_backend_read_is_none():
    assert budgets_of(snap_with(pool_nodes("p", 3), reads={NODEPOOL: d.NOT_INSTALLED})) == []
    assert budgets_of(ClusterSnapshot(0.0, "t", nodes=pool_nodes("p", 3))) == []


def test_unreadable_nodeclaims_make_a_nodepool_budget_unknown():
    from gputui.vocabulary.disruptions import ActorObjects
    snap = ClusterSnapshot(SATURDAY_10, "t", nodes=pool_nodes("p", 3),
                           actors=ActorObjects(reads={"NodeClaim": "unknown: forbidden", "NodeMaintenance": d.READ}),
                           batch_budgets=BudgetObjects((NodePoolRecord("p", (TEN_PERCENT,)),), (), {NODEPOOL: d.READ}))
    [budget] = budgets_of(snap)
    assert budget.allowed is None


def test_parallelism_is_the_minimum_and_names_the_limiting_budget():
    a = BatchBudget("A", "3 nodes", 3)
    b = BatchBudget("B", "2 nodes", 2, taken={"z": d.KARPENTER})  # room 1
    c = BatchBudget("C", "1 node", 1, holds_first=False, taken={"y": d.PERSON})  # room 0, but never the first
    assert parallelism([a, b], ["n1", "n2", "n3"], 10) == (1, b)
    assert parallelism([a], ["n1", "n2", "n3", "n4"], 10) == (3, a)
    assert parallelism([a], ["n1", "n2"], 10) == (2, None)
    assert parallelism([a], ["n1", "n2", "n3"], 2) == (2, None)  # --parallel 2: no budget stops it
    assert parallelism([c], ["n1", "n2"], 10) == (1, c)


def test_already_names_each_actor():
    assert already({"a": d.NVSENTINEL}) == "1 already disrupted by NVSentinel"
    assert already({"a": d.NVSENTINEL, "b": d.NVSENTINEL, "c": "NotReady"}) == \
        "3 already disrupted (2 by NVSentinel, 1 NotReady)"

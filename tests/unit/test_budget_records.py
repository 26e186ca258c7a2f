"""The budget objects as kube_actors reads them: a NodePool's spec.disruption.budgets and a MaintenanceOperatorConfig's
limits (written as the apiserver hands them back, CRD defaults applied), and each source's state: read, not installed
(its group served, its kind not: 404), unknown (forbidden)."""

from __future__ import annotations

import threading

from gputui.backends.kube_actors import ActorReader, maintenance_config_record, nodepool_record
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.batch_budgets import (
    MAINTENANCE_CONFIG,
    NODEPOOL,
    MaintenanceConfigRecord,
    NodePoolBudget,
)


def test_a_nodepool_reads_every_budget_as_written():
    pool = nodepool_record({"metadata": {"name": "gpu-h100"}, "spec": {"disruption": {
        "consolidateAfter": "30m", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [
            {"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"},
            {"nodes": "5", "reasons": ["Drifted", "Empty"]}]}}})
    assert pool.name == "gpu-h100" and not pool.problem
    assert pool.budgets == (NodePoolBudget("10%"), NodePoolBudget("0", "0 9 * * mon-fri", "8h"),
                            NodePoolBudget("5", reasons=("Drifted", "Empty")))


def test_an_empty_budget_list_is_no_budget_and_a_malformed_one_is_a_problem():
    assert nodepool_record({"metadata": {"name": "p"}, "spec": {"disruption": {"budgets": []}}}).budgets == ()
    bad = nodepool_record({"metadata": {"name": "p"}, "spec": {"disruption": {"budgets": [{"nodes": 3}]}}})
    assert bad.problem.startswith("a budget without a nodes count")


def test_a_maintenance_config_keeps_its_int_or_string_limits():
    assert maintenance_config_record({"metadata": {"namespace": "m", "name": "default"},
                                      "spec": {"maxParallelOperations": 2, "maxUnavailable": "10%",
                                               "maxNodeMaintenanceTimeSeconds": 3600}}) == \
        MaintenanceConfigRecord("m", "default", "2", "10%")
    assert maintenance_config_record({"metadata": {"namespace": "m", "name": "default"}, "spec": {}}) == \
        MaintenanceConfigRecord("m", "default", None, None)


class _Cache:
    def __init__(self, error: str | None) -> None:
        self.error, self.synced = error, threading.Event()
        if error is None:
            self.synced.set()

    def items(self) -> tuple:
        return ()


def test_a_budget_kind_not_served_is_not_installed_and_a_forbidden_one_unknown():
    errors = {"nodepools": "404: the server could not find the requested resource",
              "maintenanceoperatorconfigs": "forbidden: maintenanceoperatorconfigs is forbidden"}

    def make(path, _transform):
        return _Cache(next((e for plural, e in errors.items() if path.endswith(plural)), None))

    objects = ActorReader(make, "v1alpha1", "v1").objects()
    assert objects.budgets is not None
    assert objects.budgets.reads == {NODEPOOL: d.NOT_INSTALLED,
                                     MAINTENANCE_CONFIG: "unknown: forbidden: maintenanceoperatorconfigs is forbidden"}
    assert [(s.name, s.error) for s in ActorReader.sources(objects)] == \
        [(MAINTENANCE_CONFIG, "unknown: not readable (forbidden)")]
    # A NodeClaim answering 404 is no budget source: its state stays unknown, as before.
    errors["nodeclaims"] = errors.pop("nodepools")
    assert ActorReader(make, None, "v1").objects().reads["NodeClaim"].startswith("unknown: 404")

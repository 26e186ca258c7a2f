"""The limits other controllers set on how many nodes may be disrupted at once, as their objects say them (issue 40
item 3): Karpenter's NodePool disruption budgets and NVIDIA maintenance-operator's MaintenanceOperatorConfig.
Compact records, filled by gputui.backends.kube_actors; gputui.policy.batch_budgets turns them into a batch's
budgets. Pure vocabulary.

Sources (docs/disruption-actors.md §2, §3): Karpenter sigs.k8s.io/karpenter v1.13.0 pkg/apis/v1/nodepool.go
(`Budget`: nodes, schedule, duration, reasons); maintenance-operator github.com/Mellanox/maintenance-operator/api
v0.3.0 api/v1alpha1/maintenanceoperatorconfig_types.go (maxParallelOperations, maxUnavailable).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

NODEPOOL = "NodePool"  # the sources' names, as the header and the plan say them
MAINTENANCE_CONFIG = "MaintenanceOperatorConfig"
NODEPOOL_LABEL = "karpenter.sh/nodepool"  # on each node Karpenter launched: its NodePool
# The maintenance-operator reads only the config named so, in its own namespace (maintenanceoperatorconfig_controller.go).
MAINTENANCE_CONFIG_NAME = "default"


@dataclass(frozen=True, slots=True)
class NodePoolBudget:
    """One entry of a NodePool's spec.disruption.budgets, as written (checked when read into a budget)."""

    nodes: str  # "N" or "N%" (the CRD's pattern ^((100|[0-9]{1,2})%|[0-9]+)$; default "10%")
    schedule: str | None = None  # cron, UTC, or @daily & co.; None: always in force
    duration: str | None = None  # Go duration, hours and minutes ("8h", "30m", "1h30m"); with schedule
    reasons: tuple[str, ...] | None = None  # None: every disruption reason; else only these


@dataclass(frozen=True, slots=True)
class NodePoolRecord:
    """A Karpenter NodePool (karpenter.sh/v1, cluster-scoped): its name and its disruption budgets."""

    name: str
    budgets: tuple[NodePoolBudget, ...] = ()
    problem: str = ""  # why its budgets could not be read (a malformed entry): Karpenter then allows 0


@dataclass(frozen=True, slots=True)
class MaintenanceConfigRecord:
    """A MaintenanceOperatorConfig (maintenance.nvidia.com/v1alpha1, namespaced): its two limits as written
    (int-or-string, kept as text: "3", "10%"); None where unset (maxParallelOperations then defaults to 1,
    maxUnavailable to no limit)."""

    namespace: str
    name: str
    max_parallel: str | None = None
    max_unavailable: str | None = None


@dataclass(frozen=True, slots=True)
class BudgetObjects:
    """The budget objects one refresh read, and each source's state ("NodePool", "MaintenanceOperatorConfig" ->
    gputui.vocabulary.disruptions' READ, NOT_INSTALLED, or "unknown: <why>")."""

    nodepools: tuple[NodePoolRecord, ...] = ()
    configs: tuple[MaintenanceConfigRecord, ...] = ()
    reads: Mapping[str, str] = field(default_factory=dict)

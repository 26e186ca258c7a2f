"""What the cluster serves beyond the core kinds, found by API discovery: which route kinds, Argo Rollouts,
InferencePools, Istio's DestinationRules, DRA and the GPU Operator's ClusterPolicy exist, in which version.
Nothing is assumed: a kind the cluster does not serve is never watched."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputui.backends import kube_objects as ko
from gputui.backends.kube_dra import DRA_GROUP
from gputui.backends.kube_http import PROBE_TIMEOUT_S, Connection

OPERATOR_GROUP = "nvidia.com"  # the GPU Operator's ClusterPolicy
# Route kinds gputui understands, by API group; which exist is discovered, never assumed.
ROUTE_KINDS = {
    "gateway.networking.k8s.io": ("httproutes", ko.httproute_record),
    "networking.istio.io": ("virtualservices", ko.virtualservice_record),
    "split.smi-spec.io": ("trafficsplits", ko.trafficsplit_record),
}
ROLLOUT_GROUP = "argoproj.io"

ISTIO_GROUP = "networking.istio.io"


@dataclass(frozen=True, slots=True)
class Served:
    """What the cluster serves beyond the core kinds, from discovery: route and rollout groups -> (preferred
    version, plural); the versions serving Istio's DestinationRules (what a subset selects), InferencePools
    (what a pool backend selects) and DRA's ResourceSlices and ResourceClaims (GPUs no container limit
    shows). None when absent. Only routes and rollouts are ever patched."""

    routes: dict[str, tuple[str, str]] = field(default_factory=dict)
    subset_rules: str | None = None
    pools: str | None = None
    dra: str | None = None
    cluster_policy: str | None = None  # the GPU Operator's ClusterPolicy (nvidia.com): its upgrade policy


def discover(conn: Connection) -> Served:
    found: dict[str, tuple[str, str]] = {}
    subset_rules = pools = dra = cluster_policy = None
    groups = conn.request("GET", "/apis", timeout=PROBE_TIMEOUT_S * 2).get("groups") or []
    for group in groups:
        name = group.get("name")
        wanted = ROUTE_KINDS.get(name, ("rollouts", None) if name == ROLLOUT_GROUP else
                                 ("inferencepools", None) if name == ko.POOL_GROUP else
                                 ("resourceslices", None) if name == DRA_GROUP else
                                 ("clusterpolicies", None) if name == OPERATOR_GROUP else None)
        if not wanted:
            continue
        version = (group.get("preferredVersion") or {}).get("version")
        if not version:
            continue
        resources = conn.request("GET", f"/apis/{name}/{version}", timeout=PROBE_TIMEOUT_S * 2).get("resources") or []
        served = {r.get("name") for r in resources}
        if name == ko.POOL_GROUP:
            pools = version if "inferencepools" in served else None
        elif name == DRA_GROUP:
            dra = version if {"resourceslices", "resourceclaims"} <= served else None
        elif name == OPERATOR_GROUP:
            cluster_policy = version if "clusterpolicies" in served else None
        elif wanted[0] in served:
            found[name] = (version, wanted[0])
        if name == ISTIO_GROUP and "destinationrules" in served:
            subset_rules = version
    return Served(found, subset_rules, pools, dra, cluster_policy)

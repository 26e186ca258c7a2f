"""What the cluster serves beyond the core kinds, found by API discovery: which route kinds, Argo Rollouts,
InferencePools, Istio's DestinationRules, DRA, the GPU Operator's ClusterPolicy and the disrupting actors' kinds
(NodeMaintenance, Karpenter's NodeClaim, NVSentinel's requests and janitor actions, the alpha EvictionRequest API)
exist, in which version.
Nothing is assumed: a kind the cluster does not serve is never watched."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gputui.backends import kube_objects as ko
from gputui.backends.kube_dra import DRA_GROUP
from gputui.backends.kube_errors import ApiError
from gputui.backends.kube_http import PROBE_TIMEOUT_S, Connection
from gputui.vocabulary import eviction_requests as er
from gputui.vocabulary import nvsentinel_janitor as nj
from gputui.vocabulary.disruptions import KARPENTER_GROUP, MAINTENANCE_GROUP, NVSENTINEL_GROUP
from gputui.vocabulary.router_kinds import ROUTER_KINDS, RouterKind

OPERATOR_GROUP = "nvidia.com"  # the GPU Operator's ClusterPolicy
ROLLOUT_GROUP = ROUTER_KINDS["Rollout"].group
ISTIO_GROUP = "networking.istio.io"  # its DestinationRules: what a VirtualService's subset selects


@dataclass(frozen=True, slots=True)
class Served:
    """What the cluster serves beyond the core kinds, from discovery: each router kind of the table it serves
    -> the version to speak (route kinds and Argo Rollouts: the only kinds ever patched); the versions serving
    Istio's DestinationRules (what a subset selects), InferencePools (what a pool backend selects) and DRA's
    ResourceSlices and ResourceClaims (GPUs no container limit shows). None when absent."""

    routers: dict[str, str] = field(default_factory=dict)
    subset_rules: str | None = None
    pools: str | None = None
    dra: str | None = None
    cluster_policy: str | None = None  # the GPU Operator's ClusterPolicy (nvidia.com): its upgrade policy
    maintenance: str | None = None  # NVIDIA maintenance-operator's NodeMaintenance
    nodeclaims: str | None = None  # Karpenter's NodeClaim
    remediations: str | None = None  # NVSentinel's ExternalRemediationRequest
    maintenance_requests: str | None = None  # NVSentinel's MaintenanceRequest
    evictions: str | None = None  # lifecycle.k8s.io's EvictionRequest and Eviction (alpha, off by default)
    # NVSentinel janitor's RebootNode, TerminateNode, GPUReset it serves -> the version (each CRD may be absent alone)
    janitor: dict[str, str] = field(default_factory=dict)


def _version_of(kind: RouterKind, preferred: str, offered: list[str], served: Callable[[str], set[str]]) -> str | None:
    """The version to speak to a kind: the group's preferred one when it serves the kind (its shape is the
    same in every version gputui reads), else the first of the kind's own versions the group serves it in."""
    for version in dict.fromkeys([preferred, *(v for v in kind.versions if v in offered)]):
        if kind.plural in served(version):
            return version
    return None


def discover(conn: Connection) -> Served:
    routers: dict[str, str] = {}
    subset_rules = pools = dra = cluster_policy = maintenance = nodeclaims = None
    remediations = maintenance_requests = evictions = None
    janitor: dict[str, str] = {}
    groups = conn.request("GET", "/apis", timeout=PROBE_TIMEOUT_S * 2).get("groups") or []
    kinds = list(ROUTER_KINDS.values())  # as the table holds them now
    for group in groups:
        name = group.get("name")
        mine = [k for k in kinds if k.group == name]
        if not mine and name not in (ko.POOL_GROUP, DRA_GROUP, OPERATOR_GROUP, MAINTENANCE_GROUP, KARPENTER_GROUP,
                                     NVSENTINEL_GROUP, nj.JANITOR_GROUP, er.GROUP):
            continue
        version = (group.get("preferredVersion") or {}).get("version")
        if not version:
            continue
        offered = [str(v.get("version")) for v in group.get("versions") or [] if isinstance(v, dict)]
        answers: dict[str, set[str]] = {}

        def served(gv: str, name: str = name, answers: dict[str, set[str]] = answers) -> set[str]:
            if gv not in answers:
                try:
                    resources = conn.request("GET", f"/apis/{name}/{gv}", timeout=PROBE_TIMEOUT_S * 2).get("resources") or []
                except ApiError as exc:
                    if exc.status != 404:
                        raise  # discovery failed: every kind it decides is unknown, never "not installed"
                    # Listed in /apis a moment ago, gone now (its CRD being deleted): this group version serves
                    # nothing, and the other groups' kinds are read as they are.
                    resources = []
                answers[gv] = {r.get("name") for r in resources}
            return answers[gv]

        if name == ko.POOL_GROUP:
            pools = version if "inferencepools" in served(version) else None
        elif name == DRA_GROUP:
            dra = version if {"resourceslices", "resourceclaims"} <= served(version) else None
        elif name == OPERATOR_GROUP:
            cluster_policy = version if "clusterpolicies" in served(version) else None
        elif name == MAINTENANCE_GROUP:
            maintenance = version if "nodemaintenances" in served(version) else None
        elif name == KARPENTER_GROUP:
            nodeclaims = version if "nodeclaims" in served(version) else None
        elif name == NVSENTINEL_GROUP:
            remediations = version if "externalremediationrequests" in served(version) else None
            maintenance_requests = version if "maintenancerequests" in served(version) else None
        elif name == nj.JANITOR_GROUP:
            janitor = {kind: version for kind, plural in nj.PLURALS.items() if plural in served(version)}
        elif name == er.GROUP:  # only the version whose shape gputui reads, whichever the group prefers
            evictions = er.VERSION if er.VERSION in offered and \
                {"evictionrequests", "evictions"} <= served(er.VERSION) else None
        for kind in mine:
            found = _version_of(kind, version, offered, served)
            if found:
                routers[kind.kind] = found
        if name == ISTIO_GROUP and "destinationrules" in served(version):
            subset_rules = version
    return Served(routers, subset_rules, pools, dra, cluster_policy, maintenance, nodeclaims,
                  remediations=remediations, maintenance_requests=maintenance_requests, evictions=evictions,
                  janitor=janitor)

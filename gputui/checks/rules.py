"""The checks: each reads one snapshot (and what the backend knows of its identity) and says pass, warn,
fail or unknown. Thresholds and wording come from the seeds' checklists (001 §6.2, §8, §9, §10.1; 000 §6)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from gputui.checks import metrics, rotation
from gputui.checks.context import CheckContext, names, unknown, verdict
from gputui.checks.result import CheckResult, Status
from gputui.policy.health import RESTARTS_WORTH_A_LOOK, Severity
from gputui.policy.problems import EXPIRED_CORDON, count_words, problems_of, snapshot_alerts
from gputui.vocabulary.sessions import SessionState

MIN_GRACE_S = 30  # seed 001 §6.2: graceful termination of 30 s or more
MODEL_LOAD_S = 300  # startup allowance a large model needs before liveness may kill it (001 §6.2: warm-up)
ZONE_LABEL = "topology.kubernetes.io/zone"


def gpu_nodes_recognised(ctx: CheckContext) -> CheckResult:
    bad = []
    for n in ctx.snapshot.nodes:
        if n.gpu_capacity and not n.gpu_product:
            bad.append(f"{n.name} (no nvidia.com/gpu.product label: GPU Feature Discovery)")
        elif n.labels.get("nvidia.com/gpu.present") == "true" and not n.gpu_capacity:
            bad.append(f"{n.name} (nvidia.com/gpu not registered: device plugin)")
        elif n.gpu_capacity and not n.gpu_allocatable:
            bad.append(f"{n.name} (0 GPUs allocatable)")
    return verdict("nodes.recognised", "001 §8", "every GPU node recognised, its GPUs visible to the scheduler",
                   bad, Status.FAIL, "GPU nodes not fully recognised",
                   "check the GPU Operator's device plugin and GFD pods on these nodes",
                   f"{sum(1 for n in ctx.snapshot.nodes if n.gpu_capacity)} GPU nodes, all labelled and allocatable")


def gpu_health(ctx: CheckContext) -> CheckResult:
    """The nodes that need attention, counted as the TUI's header counts them (gputui.policy.problems: nodes, a hot
    node's GPUs as one, a gputui cordon past its expiry): fail for a node down, a GPU lost or faulted, a failed
    upgrade; warn for heat or an expired cordon alone."""
    snap = ctx.snapshot
    problems = problems_of(a for n in snap.nodes for a in snapshot_alerts(snap, n, ctx.temp_threshold))
    bad = [f"{p.node} ({p.kind}: {p.details()})" for p in problems]
    kinds = count_words(problems)
    if any(p.severity <= Severity.UPGRADE_FAILED for p in problems):
        return verdict("gpu.health", "001 §8", "no GPU health alarms", bad, Status.FAIL,
                       f"nodes needing attention ({kinds})",
                       "drain them (r in the TUI) and follow each alarm's advice (i describes a node)", "")
    advice = []
    if any(p.severity <= Severity.THERMAL for p in problems):
        advice.append("check cooling and power capping on the hot nodes")
    if any(p.kind == EXPIRED_CORDON for p in problems):
        # (gputui cordon does nothing on a node already cordoned: a new expiry is an uncordon and a cordon)
        advice.append("uncordon the nodes whose cordon expired, or uncordon and cordon them again with a new expiry")
    return verdict("gpu.health", "001 §8", "no GPU health alarms", bad, Status.WARN, f"nodes needing attention ({kinds})",
                   "; ".join(advice), "no XID, health, condition or upgrade alarm, no cordon past its expiry")


def versions_consistent(ctx: CheckContext) -> CheckResult:
    by_pool: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for n in ctx.snapshot.nodes:
        if n.gpu_capacity and n.driver_version:
            by_pool[n.gpu_product or "unknown model"][f"driver {n.driver_version}, CUDA {n.cuda_version or '?'}"].append(n.name)
    bad = []
    for pool, versions in sorted(by_pool.items()):
        if len(versions) > 1:
            common = max(versions.items(), key=lambda kv: len(kv[1]))[0]
            bad += [f"{name} ({v}; pool {pool} mostly {common})" for v, names in versions.items() if v != common
                    for name in names]
    return verdict("versions.consistent", "001 §8.1, 000 §6", "driver and CUDA versions consistent per GPU model",
                   bad, Status.FAIL, "nodes off the pool's versions",
                   "upgrade these nodes through the GPU Operator (one at a time: drain first)",
                   f"{len(by_pool)} GPU models, one driver and CUDA version each")


def pending_gpu_pods(ctx: CheckContext) -> CheckResult:
    bad = [f"{p.key} ({p.pending_reason or f'waiting for {p.gpu_request} GPUs'})" for p in ctx.snapshot.pods
           if p.phase == "Pending" and p.gpu_request and not p.node]
    return verdict("pods.pending", "001 §9", "no GPU pod Pending", bad, Status.FAIL, "GPU pods Pending",
                   "free or add GPUs of the model they ask for, or fix their selectors/tolerations", "none Pending")


def restart_loops(ctx: CheckContext) -> CheckResult:
    bad = [f"{p.key} ({p.restarts} restarts)" for p in ctx.snapshot.pods
           if p.restarts >= RESTARTS_WORTH_A_LOOK and not p.terminated]
    return verdict("pods.restarts", "001 §9", "no restart loops", bad, Status.WARN, "pods restarting",
                   "read the previous container's log (kubectl logs --previous)", "no pod restarting")


def _inference_pods(ctx: CheckContext) -> dict[str, list]:
    by_service: dict[str, list] = defaultdict(list)
    for p in ctx.snapshot.pods:
        if p.service and not p.terminated and not p.deleting:
            by_service[f"{p.namespace}/{p.service}"].append(p)
    return by_service


def budgets(ctx: CheckContext) -> CheckResult:
    snap, bad = ctx.snapshot, []
    for service, pods in sorted(_inference_pods(ctx).items()):
        # A service's pods share a few label sets (one per version): match each set once, not each pod.
        kinds = {(p.namespace, tuple(sorted(p.labels.items()))): p for p in pods}
        covering = {b.name: b for p in kinds.values() for b in snap.budget_for(p)}
        if not covering:
            bad.append(f"{service} (no PodDisruptionBudget)")
        bad += [f"{service} ({why})" for why in filter(None, (b.deadlock() for b in covering.values()))]
    return verdict("services.pdb", "001 §6.2, §10.1", "a PodDisruptionBudget on every inference service, not deadlocked",
                   bad, Status.FAIL, "services without a usable PDB",
                   "add a PDB (maxUnavailable: 1) over each version's pods; fix the deadlocked ones",
                   "every inference service has a budget that allows an eviction")


def replicas(ctx: CheckContext) -> CheckResult:
    snap, bad = ctx.snapshot, []
    zones = {n.name: n.labels.get(ZONE_LABEL, "") for n in snap.nodes}
    for service, pods in sorted(_inference_pods(ctx).items()):
        if len(pods) < 2:
            bad.append(f"{service} ({len(pods)} replica)")
            continue
        where = {zones.get(p.node, "") for p in pods if p.node}
        if all(where) and len(where) == 1 and len(set(zones.values()) - {""}) > 1:
            bad.append(f"{service} (every replica in zone {next(iter(where))})")
    return verdict("services.replicas", "001 §10.1", "several replicas, across zones when nodes have zones", bad,
                   Status.WARN, "services that one failure takes down",
                   "run 2 or more replicas with a topologySpreadConstraint on topology.kubernetes.io/zone",
                   "every inference service has 2+ replicas")


def grace_periods(ctx: CheckContext) -> CheckResult:
    snap = ctx.snapshot
    inference = [p for p in snap.pods if not p.terminated and snap.sessions(p).state is not SessionState.NONE]
    bad = []
    for p in inference:
        if p.termination_grace_s is None:
            continue
        needed = max(MIN_GRACE_S, p.prestop_sleep_s + ctx.engine_shutdown_s)
        if p.termination_grace_s < needed:
            bad.append(f"{p.key} ({p.termination_grace_s}s < {needed:g}s)")
    unread = [p.key for p in inference if p.termination_grace_s is None]
    if not bad and unread:
        return CheckResult("services.grace", "001 §6.2", "graceful termination long enough", Status.UNKNOWN,
                           f"{len(unread)} inference pods' grace periods not read: {names(unread)}", tuple(unread),
                           "read them with a backend that reads pod specs (the live cluster does)")
    return verdict("services.grace", "001 §6.2", "graceful termination long enough", bad, Status.FAIL,
                   "inference pods stopped before their sessions can end",
                   f"set terminationGracePeriodSeconds ≥ {MIN_GRACE_S}s and ≥ preStop sleep + engine shutdown",
                   f"every inference pod has {MIN_GRACE_S}s or more, and its preStop sleep fits")


def _spec_pods(ctx: CheckContext) -> tuple[list, list[str]]:
    """Inference pods whose spec was read, and the keys of those whose was not."""
    pods = [p for p in ctx.snapshot.pods if p.service and not p.terminated and not p.deleting]
    return [p for p in pods if p.probes is not None], [p.key for p in pods if p.probes is None]


def _unread(id: str, seed: str, title: str, unread: list[str]) -> CheckResult:
    return CheckResult(id, seed, title, Status.UNKNOWN, f"{len(unread)} inference pods' specs not read: {names(unread)}",
                       tuple(unread), "read them with a backend that reads pod specs (the live cluster does)")


def probes(ctx: CheckContext) -> CheckResult:
    title = "a readiness probe on every inference pod, apart from liveness"
    pods, unread = _spec_pods(ctx)
    missing = [f"{p.key} (no readiness probe)" for p in pods if p.probes and not p.probes.readiness]
    if missing:
        return verdict("services.probes", "001 §6.2, §10.1", title, missing, Status.FAIL,
                       "inference pods sent traffic before their model is loaded",
                       "add a readinessProbe on the engine's health or model endpoint", "")
    same = [f"{p.key} (readiness = liveness)" for p in pods if p.probes and p.probes.readiness_is_liveness]
    if not same and unread:
        return _unread("services.probes", "001 §6.2, §10.1", title, unread)
    return verdict("services.probes", "001 §6.2, §10.1", title, same, Status.WARN,
                   "pods restarted where they should only be taken out of traffic",
                   "give liveness its own, laxer probe (a busy engine is unready, not dead)",
                   "every inference pod has its own readiness probe")


def startup_allowance(ctx: CheckContext) -> CheckResult:
    title = f"liveness waits for model load (startup allowance ≥ {MODEL_LOAD_S}s)"
    pods, unread = _spec_pods(ctx)
    bad = [f"{p.key} ({p.probes.startup_allowance_s}s)" for p in pods if p.probes
           and p.probes.startup_allowance_s is not None and p.probes.startup_allowance_s < MODEL_LOAD_S]
    if not bad and unread:
        return _unread("services.startup", "001 §6.2", title, unread)
    return verdict("services.startup", "001 §6.2", title, bad, Status.FAIL,
                   "inference pods liveness may kill while the model loads",
                   "add a startupProbe (failureThreshold × periodSeconds ≥ the model's load time)",
                   "nothing kills a pod before its model can load")


def memory_limits(ctx: CheckContext) -> CheckResult:
    title = "memory limits on every inference pod"
    pods, unread = _spec_pods(ctx)
    bad = [p.key for p in pods if p.probes and not p.probes.memory_limited]
    if not bad and unread:
        return _unread("services.memory", "001 §10.1", title, unread)
    return verdict("services.memory", "001 §10.1", title, bad, Status.WARN, "inference pods without memory limits",
                   "set resources.limits.memory on every container (a leak then restarts one pod, not the node)",
                   "every inference pod's containers have memory limits")


def identity(ctx: CheckContext) -> CheckResult:
    title = "gputui's own permissions: what it can do"
    if ctx.read_only:
        return CheckResult("identity.permissions", "000 §6", title, Status.PASS, "read-only: gputui writes nothing")
    if ctx.snapshot.simulated:
        return CheckResult("identity.permissions", "000 §6", title, Status.PASS, "the demo's simulated operator")
    if not ctx.permissions:
        return CheckResult("identity.permissions", "000 §6", title, Status.UNKNOWN, "not probed (no access review)",
                           (), "grant create on selfsubjectaccessreviews, or run read-only")
    can = sorted(k for k, v in ctx.permissions.items() if v)
    cannot = sorted(k for k, v in ctx.permissions.items() if not v)
    summary = f"may {', '.join(can) or 'nothing'}" + (f"; may not {', '.join(cannot)}" if cannot else "")
    return CheckResult("identity.permissions", "000 §6", title, Status.PASS, summary)


def least_privilege(ctx: CheckContext) -> CheckResult:
    id, seed, title = "identity.least_privilege", "000 §6", "gputui's identity holds no more than it needs"
    if ctx.snapshot.simulated:
        return CheckResult(id, seed, title, Status.PASS, "the demo's simulated operator")
    grants = ctx.facts.beyond_needs
    if ctx.read_only or not grants:
        why = "read-only sends no access review" if ctx.read_only else "not probed"
        return unknown(id, seed, title, why, "run gputui check without --read-only to ask the apiserver")
    held = [grant for grant, has in grants.items() if has]
    failed = [grant for grant, has in grants.items() if has is None]
    if not held and failed:
        return unknown(id, seed, title, f"access reviews failed for: {', '.join(failed)}",
                       "grant create on selfsubjectaccessreviews")
    return verdict(id, seed, title, held, Status.WARN, "grants gputui never uses",
                   "bind gputui's identity to the role in docs/rbac.yaml instead", "none of: " + ", ".join(grants))


CHECKS: tuple[Callable[[CheckContext], CheckResult], ...] = (
    gpu_nodes_recognised, gpu_health, metrics.memory_growth, versions_consistent, metrics.dcgm_series,
    metrics.session_series, metrics.fault_fields, metrics.alert_rules, metrics.alerts_firing, pending_gpu_pods, restart_loops, budgets,
    replicas, grace_periods, rotation.can_leave, rotation.left_out, probes, startup_allowance, memory_limits, identity, least_privilege,
)


def run_checks(ctx: CheckContext, only: str | None = None) -> list[CheckResult]:
    results = [check(ctx) for check in CHECKS]
    return [r for r in results if only is None or r.area == only]

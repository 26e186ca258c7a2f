"""The disrupting actors' own objects, read from their custom resources: NVIDIA maintenance-operator's
NodeMaintenances and Karpenter's NodeClaims (issue 40 item 1; the fields and where each controller writes them:
gputui.vocabulary.disruptions and docs/disruption-actors.md §2, §3). Cluster-wide, like nodes: a node's holder may
live in any namespace.

Each actor's state is one of three, never "none": not installed (discovery finds no such CRD: the actor cannot be
acting here), read, or unknown (its CRD is served but the list is refused or failing, or discovery itself failed).
Their caches are apart from the reader's own: one refused or failing here is no API error of the fleet's, and
never stops gputui from starting.

With them, the limits those controllers set on nodes disrupted at once (issue 40 item 3): Karpenter's NodePools
(their disruption budgets) and the maintenance-operator's MaintenanceOperatorConfig, read the same way (a CRD of the
group not served, 404, is "not installed": no budget). And, for a batch about to start, its pods'
karpenter.sh/do-not-disrupt annotations, read node by node when asked (`pod_guards`): the fleet's pod records keep no
annotation, and a second watch of every pod for one annotation would double the largest list there is."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from gputui.backends import kube_evictions
from gputui.backends import kube_nvsentinel as nvs
from gputui.backends.base import BackendError
from gputui.backends.kube_cache import ListWatchCache
from gputui.backends.kube_http import Connection, path_of
from gputui.backends.kube_objects import rfc3339
from gputui.snapshot import SourceStatus
from gputui.vocabulary import disruptions as d
from gputui.vocabulary import nvsentinel_janitor as nj
from gputui.vocabulary.batch_budgets import (
    MAINTENANCE_CONFIG,
    NODEPOOL,
    BudgetObjects,
    MaintenanceConfigRecord,
    NodePoolBudget,
    NodePoolRecord,
)
from gputui.vocabulary.disruptions import ActorObjects, Condition, NodeClaimRecord, NodeMaintenanceRecord
from gputui.vocabulary.eviction_requests import EVICTION, EVICTION_REQUEST

MAINTENANCE = "NodeMaintenance"  # the sources' names
NODECLAIM = "NodeClaim"
_CLAIM_TYPES = frozenset({d.KC_DISRUPTION_REASON, d.KC_DRIFTED, d.KC_DRAINED, d.KC_INSTANCE_TERMINATING})


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _timeout(spec: object, default: int) -> int | None:
    """A spec's timeoutSeconds; None when the spec itself is absent (no drain, no wait)."""
    if not isinstance(spec, dict):
        return None
    value = _int(spec.get("timeoutSeconds"))
    return default if value is None else value


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _conditions(status: dict[str, Any], wanted: frozenset[str] | None = None) -> tuple[Condition, ...]:
    out = []
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type") and (wanted is None or c["type"] in wanted):
            out.append(Condition(str(c["type"]), str(c.get("status") or "Unknown"), str(c.get("reason") or ""),
                                 str(c.get("message") or ""), rfc3339(c.get("lastTransitionTime"))))
    return tuple(out)


def maintenance_record(obj: dict[str, Any]) -> NodeMaintenanceRecord:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    notes = meta.get("annotations") or {}
    drain_spec, wait_spec, drain = spec.get("drainSpec"), spec.get("waitForPodCompletion"), status.get("drain")
    drain = drain if isinstance(drain, dict) else {}
    return NodeMaintenanceRecord(
        namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        node=str(spec.get("nodeName") or ""), requestor=str(spec.get("requestorID") or ""),
        additional_requestors=_strings(spec.get("additionalRequestors")),
        created=rfc3339(meta.get("creationTimestamp")), deleting=bool(meta.get("deletionTimestamp")),
        cordon=spec.get("cordon") is not False,
        conditions=_conditions(status),
        # The CRD defaults timeoutSeconds (drain 300, wait 0): an absent one is that default.
        drain_timeout_s=_timeout(drain_spec, 300), wait_timeout_s=_timeout(wait_spec, 0),
        wait_started=rfc3339(notes.get(d.NM_WAIT_START)), ready_at=rfc3339(notes.get(d.NM_READY_TIME)),
        drain_progress=_int(drain.get("drainProgress")), eviction_pods=_int(drain.get("evictionPods")),
        waiting_pods=_strings(status.get("waitForCompletion")) + _strings(drain.get("waitForEviction")),
    )


def nodeclaim_record(obj: dict[str, Any]) -> NodeClaimRecord:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    return NodeClaimRecord(
        name=str(meta.get("name") or ""), node=str(status.get("nodeName") or ""),
        nodepool=str((meta.get("labels") or {}).get("karpenter.sh/nodepool") or ""),
        deleting_since=rfc3339(meta.get("deletionTimestamp")),
        conditions=_conditions(status, _CLAIM_TYPES),
    )


def nodepool_record(obj: dict[str, Any]) -> NodePoolRecord:
    """A NodePool's spec.disruption.budgets as written (the CRD defaults an absent list to [{nodes: "10%"}] on
    write, so the apiserver hands that default back; an explicit [] is no budget, as Karpenter reads it)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    raw = (spec.get("disruption") or {}).get("budgets") if isinstance(spec.get("disruption"), dict) else None
    budgets, problem = [], ""
    for b in raw if isinstance(raw, list) else []:
        if not isinstance(b, dict) or not isinstance(b.get("nodes"), str):
            problem = f"a budget without a nodes count ({b!r})"
            continue
        schedule, duration, reasons = b.get("schedule"), b.get("duration"), b.get("reasons")
        budgets.append(NodePoolBudget(
            b["nodes"], str(schedule) if schedule is not None else None, str(duration) if duration is not None else None,
            tuple(str(r) for r in reasons) if isinstance(reasons, list) else None))
    return NodePoolRecord(str(meta.get("name") or ""), tuple(budgets), problem)


def _int_or_string(value: object) -> str | None:
    """An IntOrString as text ("3", "10%"); None when unset."""
    if value is None:
        return None
    return str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else repr(value)


def maintenance_config_record(obj: dict[str, Any]) -> MaintenanceConfigRecord:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return MaintenanceConfigRecord(str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                                   _int_or_string(spec.get("maxParallelOperations")),
                                   _int_or_string(spec.get("maxUnavailable")))


class ActorReader:
    """One optional cache per actor CRD the cluster serves; `objects()` is what a snapshot carries of them."""

    def __init__(self, make: Callable[[str, Callable[[dict[str, Any]], Any]], ListWatchCache],
                 maintenance: str | None, karpenter: str | None, discovery_error: Exception | None = None, *,
                 remediations: str | None = None, maintenance_requests: str | None = None,
                 evictions: str | None = None, janitor: dict[str, str] | None = None,
                 conn: Connection | None = None) -> None:
        # Discovery failing leaves every actor unknown (it cannot tell "not installed" either).
        self.discovery_error = str(discovery_error) if discovery_error is not None else ""
        self.caches: dict[str, ListWatchCache] = {}
        self._conn = conn  # pod_guards' live reads (None: refused, unknown)
        if maintenance:
            self.caches[MAINTENANCE] = make(path_of(d.MAINTENANCE_GROUP, maintenance, "nodemaintenances"),
                                            maintenance_record)
            # Same group and version as NodeMaintenance (one API module); its CRD may still be absent (404).
            self.caches[MAINTENANCE_CONFIG] = make(path_of(d.MAINTENANCE_GROUP, maintenance,
                                                           "maintenanceoperatorconfigs"), maintenance_config_record)
        if karpenter:
            self.caches[NODECLAIM] = make(path_of(d.KARPENTER_GROUP, karpenter, "nodeclaims"), nodeclaim_record)
            self.caches[NODEPOOL] = make(path_of(d.KARPENTER_GROUP, karpenter, "nodepools"), nodepool_record)
        # NVSentinel's two request kinds (gputui.backends.kube_nvsentinel): each its own cache and source, as one
        # chart may install one CRD without the other (janitor's ERR, lifecycle-manager's MR).
        if remediations:
            self.caches[nvs.REMEDIATION] = make(path_of(d.NVSENTINEL_GROUP, remediations, nvs.REMEDIATION_PLURAL),
                                                nvs.remediation_record)
        if maintenance_requests:
            self.caches[nvs.MAINTENANCE_REQUEST] = make(
                path_of(d.NVSENTINEL_GROUP, maintenance_requests, nvs.MAINTENANCE_REQUEST_PLURAL),
                nvs.maintenance_request_record)
        # NVSentinel janitor's actions, each kind its own cache and source (janitor's chart installs the three CRDs,
        # but one may be absent where another is served).
        for kind, version in (janitor or {}).items():
            self.caches[kind] = make(path_of(nj.JANITOR_GROUP, version, nj.PLURALS[kind]),
                                     functools.partial(nvs.janitor_record, kind))
        # The EvictionRequest API's two kinds (gputui.backends.kube_evictions), where it is served.
        self.caches.update(kube_evictions.caches(make, evictions))

    def start(self) -> None:
        for c in self.caches.values():
            c.start()

    def wait(self, deadline: float) -> None:
        """Until each first list is done or has failed, or the deadline: never raises (an actor unread is
        unknown, and gputui still starts)."""
        for c in self.caches.values():
            while not c.synced.wait(0.1) and not c.error and time.monotonic() < deadline:
                pass

    def _state(self, name: str) -> str:
        if self.discovery_error:
            return f"{d.UNKNOWN}: API discovery failed ({self.discovery_error})"
        c = self.caches.get(name)
        if c is None:
            return d.NOT_INSTALLED
        if c.error and c.error.startswith("404") and name in (NODEPOOL, MAINTENANCE_CONFIG):
            return d.NOT_INSTALLED  # its group is served, this kind is not: no such budget here
        if c.error:  # forbidden, or failing: the records held (if any) are the last seen, not now's
            return f"{d.UNKNOWN}: {c.error}"
        return d.READ if c.synced.is_set() else f"{d.UNKNOWN}: not read yet"

    def objects(self) -> ActorObjects:
        """What the caches hold now, and each actor's state; the budget objects beside them."""
        budgets = BudgetObjects(nodepools=self._items(NODEPOOL), configs=self._items(MAINTENANCE_CONFIG),
                                reads={name: self._state(name) for name in (NODEPOOL, MAINTENANCE_CONFIG)})
        return ActorObjects(
            maintenances=self._items(MAINTENANCE), claims=self._items(NODECLAIM),
            reads={name: self._state(name) for name in (MAINTENANCE, NODECLAIM, nvs.REMEDIATION,
                                                         nvs.MAINTENANCE_REQUEST, *nj.KINDS, *self._eviction_kinds())},
            remediations=self._items(nvs.REMEDIATION), maintenance_requests=self._items(nvs.MAINTENANCE_REQUEST),
            janitor=tuple(r for kind in nj.KINDS for r in self._items(kind)),
            eviction_requests=self._items(EVICTION_REQUEST), evictions=self._items(EVICTION), budgets=budgets)

    def _eviction_kinds(self) -> tuple[str, ...]:
        """The EvictionRequest API's kinds where served, or where discovery failed (then unknown); absent from the
        reads they are not installed (gputui.vocabulary.eviction_requests.read_state)."""
        return (EVICTION_REQUEST, EVICTION) if EVICTION_REQUEST in self.caches or self.discovery_error else ()

    def _items(self, name: str) -> tuple[Any, ...]:
        return self.caches[name].items() if name in self.caches else ()

    @staticmethod
    def sources(objects: ActorObjects | None) -> tuple[SourceStatus, ...]:
        """The header shows a source with an error: each unknown actor or budget, named (a not-installed one is no
        error), in few words (the header is one line; `gputui disruptions -o json` has the apiserver's whole
        answer)."""
        if objects is None:
            return ()
        reads = dict(objects.reads)
        if objects.budgets is not None:
            reads.update(objects.budgets.reads)
        return tuple(SourceStatus(name, None, _short(state)) for name, state in reads.items()
                     if state.startswith(d.UNKNOWN))

    def pod_guards(self, nodes: list[str]) -> dict[str, str]:
        """Every pod on these nodes annotated karpenter.sh/do-not-disrupt -> its value ("true", or a duration after
        the pod started), read now, node by node (fieldSelector spec.nodeName). BackendError when a read fails: the
        caller cannot tell the node is free of them (fail closed)."""
        if self._conn is None:
            raise BackendError(f"the pods' {d.KARPENTER_DO_NOT_DISRUPT} annotations cannot be read: no connection")
        out: dict[str, str] = {}
        for node in nodes:
            cont: str | None = None
            while True:
                try:
                    body = self._conn.request("GET", "/api/v1/pods", {
                        "fieldSelector": f"spec.nodeName={node}", "limit": 500, "continue": cont}, timeout=30.0)
                except BackendError as exc:
                    raise BackendError(f"the pods of {node} (for {d.KARPENTER_DO_NOT_DISRUPT}): {exc}") from exc
                for pod in body.get("items") or []:
                    meta = pod.get("metadata") or {}
                    value = (meta.get("annotations") or {}).get(d.KARPENTER_DO_NOT_DISRUPT)
                    if value is not None:
                        out[f"{meta.get('namespace')}/{meta.get('name')}"] = str(value)
                cont = (body.get("metadata") or {}).get("continue")
                if not cont:
                    break
        return out

    def stop(self) -> None:
        for c in self.caches.values():
            c.stop()


def _short(state: str) -> str:
    if "forbidden" in state:
        return f"{d.UNKNOWN}: not readable (forbidden)"
    return state if len(state) <= 80 else state[:79] + "…"

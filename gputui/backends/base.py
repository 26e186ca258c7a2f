"""The one small protocol every backend implements.

A reader returns the latest ClusterSnapshot; a writer holds the handful of
verbs the ops need. A read-only backend has no writer at all, so read-only is
enforced below the UI and below the ops.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol, runtime_checkable

from gputui.base.errors import one_line
from gputui.policy.fault_peers import FaultWindow
from gputui.policy.node_pools import NO_ATTRIBUTION, IdleReading
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.check_facts import CheckFacts
from gputui.vocabulary.gpu_bindings import GpuBindings
from gputui.vocabulary.model import Gpu, InferencePod, InferenceService, NodeDescription
from gputui.vocabulary.sessions import Arrivals
from gputui.vocabulary.signals import VersionSignals

# How much later than the apiserver a live backend's watch caches may see a change: a watch that was woken
# reads on after this much more, so the events that came meanwhile are read in one go (gputui.backends.kube_http).
# What shows a write's outcome reads again after it (GputuiApp.on_write_done).
WATCH_BATCH_S = 1.0


class BackendError(Exception):
    """A failure worth one clear line to the user (no traceback)."""


def error_line(exc: BaseException) -> str:
    """An error as the one line an operator reads: ours by their message, anything else with its type."""
    return one_line(exc, known=(BackendError,))


class WriteError(BackendError):
    pass


class ConflictError(WriteError):
    """The object changed since it was read (409 on a resourceVersion precondition): read it again."""


def stale_json_patch(status: int, patch_type: str, patch: object, has_causes: bool) -> bool:
    """Did a JSON patch fail because the object moved on since it was read? gputui's JSON patches open with
    `test` ops on what they replace; when one fails (or a path is gone) kube-apiserver answers a bare 422
    Invalid, "the server rejected our request due to an error in our request", with no causes, unlike a
    schema violation, which names its fields. Read from the real apiserver (tests/integration)."""
    has_test = isinstance(patch, list) and any(isinstance(op, dict) and op.get("op") == "test" for op in patch)
    return status == 422 and patch_type == "json" and has_test and not has_causes


class EvictionOutcome(str, Enum):
    EVICTED = "evicted"
    GONE = "gone"  # 404: nothing left to evict
    BLOCKED = "blocked"  # 429: a PodDisruptionBudget has no headroom (retry)
    FAILED = "failed"  # anything else: this pod fails, no retry
    # 409 on the UID precondition: the pod under that name is no longer the one asked for (a StatefulSet replaced
    # it); nothing was evicted or deleted.
    REPLACED = "replaced"


@dataclass(frozen=True, slots=True)
class EvictionResult:
    outcome: EvictionOutcome
    reason: str = ""


class Reader(Protocol):
    def snapshot(self) -> ClusterSnapshot: ...

    def gpu_history(self, node: str, minutes: int = 5) -> dict[int, list[float | None]]:
        """Utilisation samples per GPU index, oldest first (for sparklines)."""
        ...

    def node_gpus(self, node: str) -> tuple[Gpu, ...] | None:
        """Every GPU of one node when the snapshot holds only aggregates; None: use the snapshot."""
        ...

    def describe(self, node: str, pods: Sequence[tuple[str, str]]) -> NodeDescription:
        """The node's taints, last heartbeat and recent events of it and these pods (namespace, name): read
        now, on demand."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ListProgress:
    """One resource's first list while it runs: objects read so far, and the apiserver's estimate of them all."""

    resource: str  # "nodes", "pods", …
    read: int
    total: int | None  # None: the apiserver gave no estimate (remainingItemCount)


def reading_line(lists: Sequence[ListProgress]) -> str:
    """"reading nodes 12,000 / ~65,000 · pods 3,500": the first lists start-up still waits on, in the reader's
    order (nodes first). The total is the apiserver's estimate, hence the ~."""
    parts = [f"{p.resource} {p.read:,}" + (f" / ~{p.total:,}" if p.total is not None and p.total > p.read else "")
             for p in lists]
    return "reading " + " · ".join(parts) if parts else ""


@runtime_checkable
class ProgressReader(Protocol):
    """A reader whose first read takes long enough on a large cluster to show how far it is (the live one)."""

    def progress(self) -> tuple[ListProgress, ...]: ...

    def partial_snapshot(self) -> ClusterSnapshot:
        """What the first lists hold so far (no metrics; its API source says partial)."""
        ...


@runtime_checkable
class PodsReader(Protocol):
    """A reader that re-reads a few pods cheaply (the live backend does); a running drain uses it when there."""

    def pods_snapshot(self, keys: Collection[str], namespaces: Collection[str] = ()) -> ClusterSnapshot:
        """A snapshot holding only these pods ("namespace/name", those that exist), fresh sessions, and the PDBs;
        plus every pod of `namespaces` (without session counts: a drain counts the pods serving beside its own)."""
        ...


@runtime_checkable
class LifecycleWriter(Protocol):
    """A writer that can set a node's lifecycle conditions (KEP-5683) and say whether its cluster serves them."""

    def feature_gate(self, name: str) -> tuple[bool | None, str]:
        """Whether the apiserver runs with this feature gate on (None: it cannot tell), and why it cannot."""
        ...

    def set_node_condition(self, node: str, kind: str, status: str, reason: str, message: str) -> None:
        """Set one condition on the node's status (the others kept), its transition time now."""
        ...


@runtime_checkable
class GpuBindingsReader(Protocol):
    """A reader that can tell which pods hold which GPU of a node, now (a single-GPU drain's scope)."""

    def gpu_bindings(self, node: str, pods: Sequence[InferencePod]) -> GpuBindings: ...


def bindings_for(reader: object, node: str, pods: Sequence[InferencePod]) -> GpuBindings:
    """The node's GPU bindings from this reader, or unknown (said why) when it cannot tell."""
    if isinstance(reader, GpuBindingsReader):
        return reader.gpu_bindings(node, pods)
    why = "this source cannot tell which pods hold which GPU"
    return GpuBindings(dcgm=why, dra=why)


@runtime_checkable
class ArrivalsReader(Protocol):
    """A reader that can say how fast new sessions reach pods, from their engines' counters (the live one)."""

    def arrivals(self, pods: Collection[InferencePod], window_s: float = 60.0) -> Mapping[str, Arrivals]:
        """Per pod key; a pod no counter names is absent. BackendError when the metrics store cannot answer."""
        ...


@runtime_checkable
class FactsReader(Protocol):
    """A reader that can answer `gputui check`'s questions about the metrics store (the live and demo ones)."""

    def check_facts(self, window_s: float) -> CheckFacts:
        """GPU memory growth per pod over the window and the alert rules loaded; a part that cannot be read
        carries its reason."""
        ...


@runtime_checkable
class SignalsReader(Protocol):
    """A reader that reads each version's health from its engines' metrics (the live and demo ones)."""

    def version_signals(self, snapshot: ClusterSnapshot, service: InferenceService,
                        window_s: float) -> dict[str, VersionSignals]:
        """Per version of the service; its pods are found in `snapshot` (the caller's: no second read)."""
        ...


@runtime_checkable
class GrantsProber(Protocol):
    """A writer that can ask which grants its identity holds beyond what gputui needs (least privilege)."""

    def beyond_needs(self) -> Mapping[str, bool | None]: ...


@runtime_checkable
class JobWriter(Protocol):
    """A writer that can run a one-off Job and read its pod's log (the DCGM diagnostic, gputui.ops.diag)."""

    def get_object(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict: ...

    def list_objects(self, group: str, version: str, plural: str, namespace: str, label_selector: str = "") -> list[dict]:
        ...

    def create_object(self, group: str, version: str, plural: str, namespace: str, body: dict) -> dict: ...

    def delete_object(self, group: str, version: str, plural: str, namespace: str, name: str,
                      propagation: str = "Foreground") -> None: ...

    def pod_log(self, namespace: str, name: str, container: str = "", limit_bytes: int = 8_000_000) -> str: ...


@runtime_checkable
class DeviceFencer(Protocol):
    """A writer that can taint one DRA device (a `resource.k8s.io` DeviceTaintRule): one GPU's drain fences it."""

    def taint_device(self, name: str, device: str, key: str, value: str, effect: str) -> dict:
        """Create the DeviceTaintRule `name` selecting one device ("driver/pool/device"), or set its taint if it
        exists. `effect`: None (a dry run) or NoSchedule; NoExecute is refused (it deletes pods past PDBs)."""
        ...

    def device_taint_rule(self, name: str) -> dict | None:
        """The rule as the apiserver holds it now (its status says what the controller saw), None when absent."""
        ...


class Writer(Protocol):
    identity: str

    def set_unschedulable(self, node: str, unschedulable: bool) -> None: ...

    def annotate_node(self, node: str, annotations: Mapping[str, str | None],
                      resource_version: str | None = None) -> None:
        """Merge these annotations (None removes one); with resource_version, only if the node is still at
        that version (ConflictError otherwise)."""
        ...

    def node_annotations(self, node: str) -> tuple[dict[str, str], str]:
        """The node's annotations and resourceVersion, read from the API now (not from a cache)."""
        ...

    def evict_pod(self, namespace: str, name: str, grace_seconds: int | None = None,
                  uid: str | None = None) -> EvictionResult:
        """`uid`: only the pod with this UID (deleteOptions.preconditions.uid); another pod under the name is
        answered REPLACED, untouched."""
        ...

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None,
                   uid: str | None = None) -> None:
        """`uid`: only the pod with this UID; another pod under the name raises ConflictError (409), untouched."""
        ...

    def pod_uid(self, namespace: str, name: str) -> str | None:
        """The UID of the pod now under that name, or None when there is none."""
        ...

    def get_object(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict: ...

    def list_objects(self, group: str, version: str, plural: str, namespace: str, label_selector: str = "") -> list[dict]:
        """The namespace's objects of a kind, read now (Argo's undo reads a Rollout's ReplicaSets)."""
        ...

    def patch_object(
        self, group: str, version: str, plural: str, namespace: str, name: str,
        patch: dict | list, patch_type: str = "merge", subresource: str = "",
    ) -> dict:
        """PATCH a namespaced object. patch_type: merge (RFC 7386), json (RFC 6902) or strategic."""
        ...


# What each operation needs of the access reviews (Backend.permissions: "cordon" = patch nodes, "evict" =
# create pods/eviction, "shift" = patch the route kinds the cluster serves (and an Argo Rollout's status),
# "patch_pods" = patch pods (a pod's deletion cost), "scale" = patch deployments/scale).
NEEDS: Mapping[str, tuple[str, ...]] = {
    "cordon": ("cordon",), "uncordon": ("cordon",), "drain": ("cordon", "evict"),
    "resume_drains": ("cordon", "evict"), "shift": ("shift",),
    "canary": ("shift",), "rollback": ("shift",), "rollout": ("shift",), "undo": ("shift",),
    "scale_down": ("patch_pods", "scale"),
    # As the maintenance-operator's requestor: its NodeMaintenance is made, and withdrawn on abort or uncordon
    # (reviewed in maintenance_namespace, when the cluster serves the kind).
    "drain_via_nodemaintenance": ("cordon", "evict", "nodemaintenance_create", "nodemaintenance_delete"),
    "uncordon_nodemaintenance": ("cordon", "nodemaintenance_delete"),
}
# An operation in the operator's words, where its name is not that already.
OPERATION_WORDS = {"drain_via_nodemaintenance": "drain via NodeMaintenance",
                   "uncordon_nodemaintenance": "uncordon (withdrawing gputui's NodeMaintenance)"}

PERMISSION_WORDS = {"cordon": "patch nodes", "evict": "create pods/eviction", "shift": "patch routes",
                    "patch_pods": "patch pods", "scale": "patch deployments/scale",
                    "nodemaintenance_create": "create nodemaintenances", "nodemaintenance_delete": "delete nodemaintenances"}


@dataclass(slots=True)
class Backend:
    reader: Reader
    writer: Writer | None  # None: read-only, at every layer
    context: str
    simulated: bool = False
    # What the identity may do, as the apiserver answered each access review (SelfSubjectAccessReview). An
    # action neither listed here nor in `unknown` needs no review.
    permissions: Mapping[str, bool] = field(default_factory=dict)
    protected: str = ""  # the protected_contexts entry that made this context read-only ("" when none)
    # Reviews that got no verdict (the apiserver failed it, timed out): review -> the cause, one line. Unknown is
    # not allowed (fail closed) and not denied: nothing says the identity may not.
    unknown: Mapping[str, str] = field(default_factory=dict)
    # What a review asked, where the cluster decides it (the route kinds it serves): review -> words.
    words: Mapping[str, str] = field(default_factory=dict)
    # Why nothing can be written yet, when that is the reason (a cached view while start-up connects).
    waiting: str = ""

    @property
    def read_only(self) -> bool:
        return self.writer is None

    def can(self, operation: str) -> bool:
        """The one permission policy, for every screen and the CLI: a writer, and every access review the
        operation needs allowed (an operation not listed needs only the writer)."""
        return self.writer is not None and all(self.may(p) for p in NEEDS.get(operation, ()))

    def why_not(self, operation: str) -> str | None:
        """Why `operation` is unavailable, in words for the operator (None: it is available). A review the
        apiserver answered "no" is a denial, named; one that got no verdict is unknown, said with its cause."""
        what = OPERATION_WORDS.get(operation) or operation.replace("_", " ")
        if self.writer is None:
            if self.waiting:
                return f"{self.waiting}: {what} is unavailable"
            if self.protected:
                return (f"read-only: context {self.context} is protected ({self.protected!r} in protected_contexts): "
                        f"{what} is unavailable")
            return f"read-only: {what} is unavailable"
        needs = NEEDS.get(operation, ())
        denied = [p for p in needs if p not in self.unknown and not self.permissions.get(p, True)]
        if denied:
            return f"your identity may not {' or '.join(self._words(p) for p in denied)}: {what} is unavailable"
        unknown = [p for p in needs if p in self.unknown]
        if unknown:
            causes = "; ".join(dict.fromkeys(self.unknown[p] for p in unknown))
            return (f"{what} is unavailable: whether this identity may {' or '.join(self._words(p) for p in unknown)} "
                    f"is unknown (its access review failed: {causes})")
        return None

    def why_not_any(self, operations: Iterable[str]) -> str | None:
        """Why the first of these operations that is unavailable is so (None: all are available): a batch whose
        nodes' drains need different grants (a requestor drain also makes and withdraws its NodeMaintenance)."""
        return next(filter(None, map(self.why_not, dict.fromkeys(operations))), None)

    def _words(self, review: str) -> str:
        return self.words.get(review) or PERMISSION_WORDS.get(review, review)

    def check_facts(self, window_s: float) -> CheckFacts:
        """Everything `gputui check` reads beyond a snapshot; read-only probes no grants (it sends no POST)."""
        if isinstance(self.reader, FactsReader):
            facts = self.reader.check_facts(window_s)
        else:
            why = "this backend reads no metrics history"
            facts = CheckFacts(window_s, memory_error=why, rules_error=why)
        writer = self.writer  # narrowed from None first: mypy finds Optional[Writer] & GrantsProber empty
        if writer is not None and isinstance(writer, GrantsProber):
            facts = replace(facts, beyond_needs=writer.beyond_needs())
        return facts

    def version_signals(self, snapshot: ClusterSnapshot, service: InferenceService,
                        window_s: float) -> dict[str, VersionSignals]:
        """Each version's error ratio and p95 latency from its engines' metrics (a canary's gates)."""
        if not isinstance(self.reader, SignalsReader):
            raise BackendError("this backend reads no engine metrics")
        return self.reader.version_signals(snapshot, service, window_s)

    def idle_gpus(self, window_s: float, below_pct: float) -> IdleReading | None:
        """Per node, GPUs held by a pod but idle over the window (None: attribution unavailable)."""
        reader = getattr(self.reader, "idle_gpus", None)
        if reader is None:
            raise BackendError("this backend reads no metrics history")
        result: IdleReading | None = reader(window_s, below_pct)
        return result

    def read_idle(self, window_s: float, below_pct: float) -> tuple[IdleReading | None, str]:
        """idle_gpus, or None and why it is unknown (one line), for the views and `gputui pools`."""
        try:
            idle = self.idle_gpus(window_s, below_pct)
        except BackendError as exc:
            return None, error_line(exc)
        return idle, "" if idle is not None else NO_ATTRIBUTION

    def read_fault_window(self, window_s: float) -> tuple[FaultWindow | None, str]:
        """Every node's GPU fault counts over the window (one query), or None and why they are unknown (one
        line): gputui.policy.fault_peers compares them within each pool."""
        reader = getattr(self.reader, "fault_window", None)
        if reader is None:
            return None, "this backend reads no metrics history"
        try:
            window: FaultWindow = reader(window_s)
        except BackendError as exc:
            return None, error_line(exc)
        return window, ""

    def may(self, action: str) -> bool:
        """A writer, and the review of `action` allowed (or none needed); a review without a verdict is a no."""
        return self.writer is not None and action not in self.unknown and self.permissions.get(action, True)

    def close(self) -> None:
        self.reader.close()

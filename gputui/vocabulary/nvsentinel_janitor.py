"""NVIDIA NVSentinel's janitor actions: the RebootNode, TerminateNode and GPUReset objects (janitor.dgxc.nvidia.com/
v1alpha1, cluster-scoped) that fault-remediation creates for a quarantined node and janitor carries out (issue 40
item 1; docs/disruption-actors.md §1 says where each name below is read from). The compact record gputui keeps of
one, and the names janitor writes. Pure vocabulary.

janitor sets status.startTime when it takes one up and status.completionTime when it is done, whichever way it ended
(succeeded, failed, timed out): an object without completionTime is under way, one with it is history (fault-
remediation's template keeps them 14 days, nvsentinel.nvidia.com/ttl "336h"). RebootNode and TerminateNode carry
conditions SignalSent and NodeReady / NodeTerminated (seeded Unknown/Initializing), and ManualMode=True/
OutsideActorRequired when janitor runs in manual mode: it then sends no signal, and an outside actor must. GPUReset
walks its steps as conditions (Ready, ServicesTornDown, ResetJobCreated, ResetJobCompleted, ServicesRestored), each
False with the step's reason until True, and keeps status.phase (Pending, InProgress, Terminating, Succeeded,
Failed, Unknown); its end is Complete=True with reason GPUResetSucceeded or the failure's reason."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.vocabulary.model import Condition

JANITOR_GROUP = "janitor.dgxc.nvidia.com"
REBOOT_NODE, TERMINATE_NODE, GPU_RESET = "RebootNode", "TerminateNode", "GPUReset"  # the kinds (and sources' names)
PLURALS = {REBOOT_NODE: "rebootnodes", TERMINATE_NODE: "terminatenodes", GPU_RESET: "gpuresets"}
KINDS = tuple(PLURALS)

# RebootNode / TerminateNode (janitor/api/v1alpha1/rebootnode_types.go, terminatenode_types.go).
SIGNAL_SENT = "SignalSent"  # True/Succeeded: the CSP took the request (for a reboot its message is the request id)
NODE_READY = "NodeReady"  # RebootNode's end: True/Succeeded; False/Failed, Timeout
NODE_TERMINATED = "NodeTerminated"  # TerminateNode's end: True/Succeeded; False/Timeout
MANUAL_MODE = "ManualMode"  # True/OutsideActorRequired: janitor sends no signal, someone else must
DONE_CONDITION = {REBOOT_NODE: NODE_READY, TERMINATE_NODE: NODE_TERMINATED}

# GPUReset (janitor/api/v1alpha1/gpureset_types.go): its steps in the order janitor takes them, and how it ends.
GR_STEPS = ("Ready", "ServicesTornDown", "ResetJobCreated", "ResetJobCompleted", "ServicesRestored")
GR_TERMINATING = "Terminating"  # deleting: janitor restores the GPU services before letting it go
GR_COMPLETE = "Complete"  # True at the end; reason GPUResetSucceeded or the failure's
GR_FAILURES = frozenset({"NodeNotFound", "InvalidConfig", "ServiceTeardownTimeoutExceeded", "ResetJobCreationFailed",
                         "ResetJobNotFound", "ResetJobFailed", "ServiceRestoreFailed", "RestoreTimeoutExceeded",
                         "InternalError"})
WANTED = {
    REBOOT_NODE: frozenset({SIGNAL_SENT, NODE_READY, MANUAL_MODE}),
    TERMINATE_NODE: frozenset({SIGNAL_SENT, NODE_TERMINATED, MANUAL_MODE}),
    GPU_RESET: frozenset({*GR_STEPS, GR_TERMINATING, GR_COMPLETE}),
}
GPUS_MAX = 16  # a selector's GPUs kept (a node has 8; the CRD sets no bound)


@dataclass(frozen=True, slots=True)
class JanitorRecord:
    """One RebootNode, TerminateNode or GPUReset, compact: only what gputui shows. Text is as written, cut to
    gputui.vocabulary.disruptions.EVENT_TEXT_MAX (made visible where shown)."""

    kind: str  # REBOOT_NODE, TERMINATE_NODE or GPU_RESET
    name: str
    node: str  # spec.nodeName
    force: bool = False  # spec.force (RebootNode, TerminateNode)
    created: float | None = None  # metadata.creationTimestamp
    started: float | None = None  # status.startTime: janitor took it up
    completed: float | None = None  # status.completionTime: janitor is done with it, however it ended
    deleting: bool = False  # metadata.deletionTimestamp
    phase: str = ""  # status.phase (GPUReset only)
    conditions: tuple[Condition, ...] = ()  # only WANTED[kind]
    gpus: tuple[str, ...] = ()  # GPUReset spec.selector uuids, then pciBusIDs; () = every GPU on the node

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    @property
    def open(self) -> bool:
        """Under way: janitor has not set completionTime (a record it never touched is open too: it will act)."""
        return self.completed is None

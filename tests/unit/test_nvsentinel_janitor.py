"""NVIDIA NVSentinel janitor's actions read from their objects (issue 40 item 1): RebootNode, TerminateNode and
GPUReset (janitor.dgxc.nvidia.com/v1alpha1), each written here as NVSentinel writes it (a snapshot of upstream main,
fork dims/NVSentinel @3b7f639; docs/disruption-actors.md §1):

- spec by fault-remediation from its chart's templates (distros/kubernetes/nvsentinel/charts/fault-remediation/
  values.yaml: name `maintenance-<node>-<HealthEventID>`, label app.kubernetes.io/managed-by=nvsentinel, annotations
  nvsentinel.nvidia.com/trace-id, span-id, ttl "336h"; spec {nodeName, force: false}; GPUReset from
  fault-remediation/pkg/reconciler/templates/gpureset-template.yaml: spec {nodeName, selector.uuids: [<GPU UUID>]});
- status by janitor (janitor/pkg/controller/rebootnode_controller.go, terminatenode_controller.go,
  gpureset_controller.go; janitor/api/v1alpha1/*_types.go): SetInitialConditions seeds SignalSent and NodeReady /
  NodeTerminated Unknown/Initializing ("Reboot signal not yet sent", "Node ready state not yet determined") and
  SetStartTime; then SignalSent True/Succeeded (a reboot's message is the CSP request id) or False/Failed with
  completionTime; NodeReady True/Succeeded "Node reached ready state post-reboot" or False/Timeout, False/Failed,
  with completionTime; in manual mode ManualMode True/OutsideActorRequired "Janitor is in manual mode, outside actor
  required to send reboot signal". GPUReset: Ready False/Pending "GPU reset pending" with phase Pending, then each step
  (Ready True/ReadyForReset, ServicesTornDown False/TearingDownServices, ResetJobCreated, ResetJobCompleted False/
  ResetJobRunning, ServicesRestored) with phase InProgress, and Complete True/GPUResetSucceeded (phase Succeeded) or
  Complete True/<failure reason> (phase Failed), both with completionTime.
"""

from __future__ import annotations

import threading
import time

from gputui.backends.kube_actors import MAINTENANCE, NODECLAIM, ActorReader
from gputui.backends.kube_discovery import discover
from gputui.backends.kube_nvsentinel import MAINTENANCE_REQUEST, REMEDIATION, janitor_record
from gputui.policy.disruptions import node_disruptions
from gputui.present.disruptions import cells, disruption_rows, hold_words, sources, unknown_because
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary import disruptions as d
from gputui.vocabulary import nvsentinel_janitor as nj
from gputui.vocabulary.disruptions import ActorObjects
from gputui.vocabulary.model import Node
from gputui.vocabulary.scheduling import NodeScheduling

NOW = 1_780_000_000.0
READS = {MAINTENANCE: d.NOT_INSTALLED, NODECLAIM: d.NOT_INSTALLED, REMEDIATION: d.NOT_INSTALLED,
         MAINTENANCE_REQUEST: d.NOT_INSTALLED, **dict.fromkeys(nj.KINDS, d.READ)}
HOSTILE = "\x1b]0;pwned\x07\x1b[2J[bold]boom[/bold]\r\n"
UUID = "GPU-3f2a1b4c-5d6e-7f80-9a1b-2c3d4e5f6a7b"


def k8s_time(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def cond(kind: str, status: str, reason: str, message: str, at: float) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": k8s_time(at)}


def seeded(kind: str, at: float) -> list[dict]:
    """SetInitialConditions: both conditions Unknown/Initializing."""
    done, what = (nj.NODE_READY, "Node ready state not yet determined") if kind == nj.REBOOT_NODE else \
        (nj.NODE_TERMINATED, "Node terminated state not yet determined")
    verb = "Reboot" if kind == nj.REBOOT_NODE else "Terminate"
    return [cond(nj.SIGNAL_SENT, "Unknown", "Initializing", f"{verb} signal not yet sent", at),
            cond(done, "Unknown", "Initializing", what, at)]


def action(kind: str, node: str, *, created: float, status: dict | None = None, name: str = "",
           selector: dict | None = None) -> dict:
    """A janitor action as fault-remediation's template creates it; `status` as janitor leaves it."""
    spec: dict = {"nodeName": node}
    if kind == nj.GPU_RESET:
        spec["selector"] = selector if selector is not None else {"uuids": [UUID]}
    else:
        spec["force"] = False
    return {
        "apiVersion": "janitor.dgxc.nvidia.com/v1alpha1", "kind": kind,
        "metadata": {"name": name or f"maintenance-{node}-6a1f0c2e9b", "creationTimestamp": k8s_time(created),
                     "generation": 1, "labels": {"app.kubernetes.io/managed-by": "nvsentinel"},
                     "annotations": {"nvsentinel.nvidia.com/ttl": "336h"}},
        "spec": spec, "status": status or {},
    }


def reboot_sent(node: str, created: float) -> dict:
    return action(nj.REBOOT_NODE, node, created=created, status={
        "startTime": k8s_time(created + 1),
        "conditions": [cond(nj.SIGNAL_SENT, "True", "Succeeded", "op-7f3a", created + 2),
                       cond(nj.NODE_READY, "Unknown", "Initializing", "Node ready state not yet determined",
                            created + 1)]})


def quarantined(name: str, at: float = NOW - 3600, state: str = "remediating") -> Node:
    labels = {d.NVSENTINEL_CORDON_BY: "NVSentinel", d.NVSENTINEL_STATE: state,
              d.NVSENTINEL_CORDON_TIMESTAMP: time.strftime(d.NVSENTINEL_TIMESTAMP_FORMAT, time.gmtime(at))}
    return Node(name, True, True, "NVIDIA H100 80GB HBM3", 8, 8, labels=labels,
                annotations={d.NVSENTINEL_IS_CORDONED: "True"}, scheduling=NodeScheduling())


def plain(name: str, cordoned: bool = False) -> Node:
    return Node(name, True, cordoned, "NVIDIA H100 80GB HBM3", 8, 8, scheduling=NodeScheduling())


def snap(*nodes: Node, objs: tuple = (), reads: dict | None = None) -> ClusterSnapshot:
    actors = ActorObjects(reads=reads or READS, janitor=tuple(janitor_record(o["kind"], o) for o in objs))
    return ClusterSnapshot(taken_at=NOW, context="t", nodes=nodes, sources=(SourceStatus("API", NOW),), actors=actors)


def hold(node: Node, *objs: dict):
    found = node_disruptions(node, NOW, snap(node, objs=objs))
    assert len(found) == 1, found
    return found[0]


def test_records_read_the_objects_as_janitor_writes_them():
    r = janitor_record(nj.REBOOT_NODE, reboot_sent("n1", NOW - 600))
    assert (r.kind, r.name, r.node, r.force, r.created, r.started, r.completed, r.deleting, r.open) == \
        (nj.REBOOT_NODE, "maintenance-n1-6a1f0c2e9b", "n1", False, NOW - 600, NOW - 599, None, False, True)
    assert [(c.type, c.status, c.reason, c.message, c.since) for c in r.conditions] == [
        (nj.SIGNAL_SENT, "True", "Succeeded", "op-7f3a", NOW - 598),
        (nj.NODE_READY, "Unknown", "Initializing", "Node ready state not yet determined", NOW - 599)]
    done = action(nj.REBOOT_NODE, "n1", created=NOW - 900, status={
        "startTime": k8s_time(NOW - 899), "completionTime": k8s_time(NOW - 300),
        "conditions": [cond(nj.NODE_READY, "True", "Succeeded", "Node reached ready state post-reboot", NOW - 300)]})
    assert not janitor_record(nj.REBOOT_NODE, done).open  # completionTime: history
    g = janitor_record(nj.GPU_RESET, action(nj.GPU_RESET, "n2", created=NOW, selector={
        "uuids": [UUID], "pciBusIDs": ["0000:1b:00.0"]}, status={"phase": "InProgress"}))
    assert (g.gpus, g.phase, g.force) == ((UUID, "0000:1b:00.0"), "InProgress", False)
    # Only the kind's own conditions are kept (a GPUReset's Ready is not a RebootNode's).
    assert janitor_record(nj.REBOOT_NODE, action(nj.REBOOT_NODE, "n1", created=NOW, status={
        "conditions": [cond("Ready", "True", "x", "", NOW)]})).conditions == ()


def test_hostile_text_is_bounded_and_never_raises():
    huge = "x" * 10_000
    obj = action(nj.GPU_RESET, HOSTILE + huge, created=NOW - 60, selector={"uuids": [huge] * 40, "pciBusIDs": 7},
                 status={"phase": HOSTILE + huge, "conditions": [
                     cond("Ready", "False", "Pending", HOSTILE + huge, NOW - 60)]})
    r = janitor_record(nj.GPU_RESET, obj)
    assert len(r.node) == d.EVENT_TEXT_MAX + 1 and len(r.phase) == d.EVENT_TEXT_MAX + 1
    assert len(r.conditions[0].message) == d.EVENT_TEXT_MAX + 1
    assert len(r.gpus) == nj.GPUS_MAX + 1 and r.gpus[-1] == "(and 24 more)"
    assert all(len(g) == d.EVENT_TEXT_MAX + 1 for g in r.gpus[:-1])
    junk = janitor_record(nj.REBOOT_NODE, {"metadata": [], "spec": "no", "status": {"conditions": {"a": 1},
                                                                                    "startTime": 5}})
    assert (junk.name, junk.node, junk.started, junk.conditions, junk.open) == ("", "", None, (), True)
    odd = janitor_record(nj.REBOOT_NODE, action(nj.REBOOT_NODE, "n1", created=NOW, status={"conditions": [
        {"type": nj.SIGNAL_SENT, "status": ["True"], "reason": {"r": 1}, "message": None}]}))
    assert [(c.status, c.reason, c.message) for c in odd.conditions] == [("Unknown", "", "")]
    # Shown: made visible, one line, never raw; the why's text is the record's, cut.
    n = quarantined("n9")
    bad = action(nj.REBOOT_NODE, "n9", created=NOW - 60, status={"startTime": k8s_time(NOW - 60), "conditions": [
        cond(nj.SIGNAL_SENT, "True", "Succeeded", HOSTILE + huge, NOW - 50)]})
    row = disruption_rows(snap(n, objs=(bad,)))[0]
    assert HOSTILE in row.why and len(row.why) < 2000
    for text in (*cells(row, 400), *hold_words(node_disruptions(n, NOW, snap(n, objs=(bad,)))[0], NOW)):
        assert "\x1b" not in text and "\x07" not in text and "\r" not in text and "\n" not in text


def test_an_open_reboot_is_one_nvsentinel_hold_merged_with_its_quarantine():
    n = quarantined("n1")
    x = hold(n, reboot_sent("n1", NOW - 600))
    # The action's phase; since the quarantine (the earliest part); the quarantine's cordon.
    assert (x.actor, x.phase, x.since, x.cordons, x.stuck) == (d.NVSENTINEL, "SignalSent", NOW - 3600, True, "")
    assert x.why.startswith("RebootNode maintenance-n1-6a1f0c2e9b: janitor is to reboot the node; signal sent to the "
                            "cloud provider (request op-7f3a); waiting for the node to be Ready again")
    assert "quarantined by NVSentinel" in x.why
    # Alone on an uncordoned node: since janitor took it up (startTime), holding no cordon.
    y = hold(plain("n2"), reboot_sent("n2", NOW - 600))
    assert (y.phase, y.since, y.cordons) == ("SignalSent", NOW - 599, False)
    # Done (completionTime): history, not a hold; the quarantine alone is left.
    done = action(nj.REBOOT_NODE, "n1", created=NOW - 900, status={
        "startTime": k8s_time(NOW - 899), "completionTime": k8s_time(NOW - 300), "conditions": [
            cond(nj.SIGNAL_SENT, "True", "Succeeded", "op-1", NOW - 898),
            cond(nj.NODE_READY, "False", "Timeout", "Node failed to return to ready state after timeout duration",
                 NOW - 300)]})
    assert hold(n, done).phase == "remediating"
    assert node_disruptions(plain("n2"), NOW, snap(plain("n2"), objs=(done,))) == []


def test_reboot_and_terminate_phases_and_what_is_stuck():
    fresh = action(nj.REBOOT_NODE, "n1", created=NOW - 30)  # janitor has not reconciled it (another holds the node)
    x = hold(plain("n1"), fresh)
    assert (x.phase, x.since, x.stuck) == ("Uninitialized", NOW - 30, "")
    seed = action(nj.TERMINATE_NODE, "n1", created=NOW - 30,
                  status={"startTime": k8s_time(NOW - 29), "conditions": seeded(nj.TERMINATE_NODE, NOW - 29)})
    y = hold(plain("n1"), seed)
    assert (y.phase, y.since) == ("Initializing", NOW - 29)
    assert y.why.startswith("TerminateNode maintenance-n1-6a1f0c2e9b: janitor is to terminate the node")
    # Manual mode: janitor sends nothing; someone else must. Stuck at once (no day to wait).
    manual = action(nj.REBOOT_NODE, "n1", created=NOW - 60, status={
        "startTime": k8s_time(NOW - 59), "conditions": [*seeded(nj.REBOOT_NODE, NOW - 59), cond(
            nj.MANUAL_MODE, "True", "OutsideActorRequired",
            "Janitor is in manual mode, outside actor required to send reboot signal", NOW - 59)]})
    z = hold(plain("n1"), manual)
    assert z.phase == "ManualMode" and z.stuck.startswith("janitor is in manual mode: it sends no reboot signal")
    assert "outside actor required to send reboot signal" in z.why
    # A failed condition janitor has not yet closed with completionTime: stuck, naming it.
    failed = action(nj.REBOOT_NODE, "n1", created=NOW - 60, status={"startTime": k8s_time(NOW - 59), "conditions": [
        cond(nj.SIGNAL_SENT, "False", "Failed", "rpc error: code = PermissionDenied", NOW - 50)]})
    w = hold(plain("n1"), failed)
    assert (w.phase, w.stuck) == ("Failed", "janitor's SignalSent is Failed (rpc error: code = PermissionDenied)")
    # Over a day in one step: janitor's own timeout (25 minutes) would have ended it; it is not acting.
    old = reboot_sent("n1", NOW - 2 * 86400)
    v = hold(plain("n1"), old)
    assert v.stuck == "RebootNode maintenance-n1-6a1f0c2e9b in SignalSent for 48h (over 24h)"
    assert hold(plain("n1"), reboot_sent("n1", NOW - 23 * 3600)).stuck == ""


def test_gpu_reset_steps_gpus_and_failure():
    def reset(status: dict, selector: dict | None = None, created: float = NOW - 300) -> dict:
        return action(nj.GPU_RESET, "n1", created=created, status={"startTime": k8s_time(created + 1), **status},
                      selector=selector)

    pending = reset({"phase": "Pending", "conditions": [cond("Ready", "False", "Pending", "GPU reset pending",
                                                             NOW - 299)]})
    x = hold(plain("n1"), pending)
    assert (x.phase, x.since) == ("Pending", NOW - 299)
    assert x.why == f"GPUReset maintenance-n1-6a1f0c2e9b: janitor is to reset {UUID}; GPU reset pending"
    tearing = reset({"phase": "InProgress", "conditions": [
        cond("Ready", "True", "ReadyForReset", "Node ready for GPU reset", NOW - 290),
        cond("ServicesTornDown", "False", "TearingDownServices", "Removing gpu-operator managed services",
             NOW - 280)]}, selector={})
    y = hold(plain("n1"), tearing)
    assert y.phase == "TearingDownServices"
    assert y.why == ("GPUReset maintenance-n1-6a1f0c2e9b: janitor is to reset every GPU on the node; Removing "
                     "gpu-operator managed services")
    running = reset({"phase": "InProgress", "conditions": [
        cond("Ready", "True", "ReadyForReset", "", NOW - 290),
        cond("ServicesTornDown", "True", "ServiceTeardownSucceeded", "", NOW - 200),
        cond("ResetJobCreated", "True", "ResetJobCreationSucceeded", "GPU reset job created", NOW - 190),
        cond("ResetJobCompleted", "False", "ResetJobRunning", "GPU reset in progress", NOW - 180)]})
    assert hold(plain("n1"), running).phase == "ResetJobRunning"
    # Between steps (the next condition not yet written): the phase janitor keeps.
    between = reset({"phase": "InProgress", "conditions": [cond("Ready", "True", "ReadyForReset", "", NOW - 290)]})
    assert hold(plain("n1"), between).phase == "InProgress"
    # A failure's reason janitor has not yet closed: stuck.
    failing = reset({"phase": "InProgress", "conditions": [
        cond("Ready", "True", "ReadyForReset", "", NOW - 290),
        cond("ServicesTornDown", "True", "ServiceTeardownSucceeded", "", NOW - 200),
        cond("ResetJobCreated", "True", "ResetJobCreationSucceeded", "", NOW - 190),
        cond("ResetJobCompleted", "True", "ResetJobFailed", "GPU reset failed", NOW - 100)]})
    z = hold(plain("n1"), failing)
    assert (z.phase, z.stuck) == ("ResetJobFailed", "janitor's GPU reset failed: ResetJobFailed (GPU reset failed)")
    # Ended (completionTime, Complete True): history, failed or not.
    ended = reset({"phase": "Failed", "completionTime": k8s_time(NOW - 90), "conditions": [
        cond("Complete", "True", "ResetJobFailed", "GPU reset failed", NOW - 90)]})
    assert node_disruptions(plain("n1"), NOW, snap(plain("n1"), objs=(ended,))) == []
    # Deleting: janitor restores the GPU services before it lets go.
    gone = reset({"phase": "Terminating", "conditions": [
        cond("Ready", "True", "ReadyForReset", "", NOW - 290),
        cond("Terminating", "False", "FinalizerRestoringServices", "Restoring managed services before deletion",
             NOW - 10)]})
    gone["metadata"]["deletionTimestamp"] = k8s_time(NOW - 10)
    t = hold(plain("n1"), gone)
    assert t.phase == "FinalizerRestoringServices" and t.why.endswith(
        "being deleted: janitor restores the GPU services first")


def test_several_actions_and_other_requests_merge_into_one_hold():
    n = quarantined("n1", at=NOW - 7200)
    reboot = reboot_sent("n1", NOW - 600)
    reset = action(nj.GPU_RESET, "n1", created=NOW - 1200, name="maintenance-n1-earlier",
                   status={"startTime": k8s_time(NOW - 1199), "phase": "Pending",
                           "conditions": [cond("Ready", "False", "Pending", "GPU reset pending", NOW - 1199)]})
    x = hold(n, reboot, reset)
    assert x.phase == "Pending"  # the earlier-started action first
    assert x.why.index("GPUReset maintenance-n1-earlier") < x.why.index("RebootNode") < x.why.index("quarantined")
    assert x.since == NOW - 7200


def test_sources_name_each_kind_and_unreadable_is_unknown_never_none():
    s = snap(plain("n1"))
    assert {k: v for k, v in sources(s).items() if k in nj.KINDS} == dict.fromkeys(nj.KINDS, d.READ)
    assert "other" not in sources(s)
    reads = {**READS, nj.GPU_RESET: "unknown: forbidden: gpuresets.janitor.dgxc.nvidia.com is forbidden"}
    cordoned = plain("n1", cordoned=True)
    u = snap(cordoned, reads=reads)
    assert unknown_because(u) == "GPUReset objects could not be read (forbidden: gpuresets.janitor.dgxc.nvidia.com " \
                                 "is forbidden)"
    row = disruption_rows(u)[0]
    assert row.actor == d.PERSON and "GPUReset objects could not be read: one may hold it" in row.why


class FakeCache:
    def __init__(self, error: str | None = None) -> None:
        self.error, self.synced = error, threading.Event()
        self.synced.set()

    def items(self) -> tuple:
        return ()


def test_actor_reader_watches_each_served_kind_cluster_wide_and_names_its_state():
    made = {}

    def make(path, transform):
        made[path] = (FakeCache("forbidden: terminatenodes is forbidden" if "terminate" in path else None), transform)
        return made[path][0]

    reader = ActorReader(make, None, None, janitor={nj.REBOOT_NODE: "v1alpha1", nj.TERMINATE_NODE: "v1alpha1"})
    assert sorted(made) == ["/apis/janitor.dgxc.nvidia.com/v1alpha1/rebootnodes",
                            "/apis/janitor.dgxc.nvidia.com/v1alpha1/terminatenodes"]
    parse = made["/apis/janitor.dgxc.nvidia.com/v1alpha1/rebootnodes"][1]
    assert parse(reboot_sent("n1", NOW)).kind == nj.REBOOT_NODE  # each cache parses its own kind
    reads = reader.objects().reads
    assert (reads[nj.REBOOT_NODE], reads[nj.GPU_RESET]) == (d.READ, d.NOT_INSTALLED)
    assert reads[nj.TERMINATE_NODE] == "unknown: forbidden: terminatenodes is forbidden"
    assert [(s.name, s.error) for s in ActorReader.sources(reader.objects())] == \
        [(nj.TERMINATE_NODE, "unknown: not readable (forbidden)")]
    blind = ActorReader(make, None, None, RuntimeError("503: discovery down")).objects().reads
    assert all(blind[k].startswith("unknown: API discovery failed") for k in nj.KINDS)


class FakeConn:
    """Discovery's answers: the janitor group serves RebootNode and GPUReset, not TerminateNode."""

    def request(self, method: str, path: str, *args, **kwargs) -> dict:
        if path == "/apis":
            return {"groups": [{"name": nj.JANITOR_GROUP, "preferredVersion": {"version": "v1alpha1"},
                                "versions": [{"version": "v1alpha1"}]}]}
        assert path == "/apis/janitor.dgxc.nvidia.com/v1alpha1", path
        return {"resources": [{"name": "rebootnodes"}, {"name": "rebootnodes/status"}, {"name": "gpuresets"}]}


def test_discovery_finds_the_janitor_kinds_each_alone():
    served = discover(FakeConn())  # type: ignore[arg-type]
    assert served.janitor == {nj.REBOOT_NODE: "v1alpha1", nj.GPU_RESET: "v1alpha1"}


def test_the_snapshot_cache_keeps_the_janitor_records(tmp_path):
    from gputui.backends.snapshot_cache import load, save
    s = snap(quarantined("n1"), objs=(reboot_sent("n1", NOW - 600), action(nj.GPU_RESET, "n1", created=NOW)))
    back, _saved = load(save(s, tmp_path / "c.json"))
    assert back.actors is not None and s.actors is not None
    assert back.actors.janitor == s.actors.janitor and back.actors.reads == s.actors.reads

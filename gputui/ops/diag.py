"""Run a DCGM diagnostic on one node (issue 37 item 4): a Job pinned to the node, tolerating its cordon, holding
every GPU the node offers so that it tests them all, running `dcgmi diag -r LEVEL -j`; wait for it, read its pod's
log, read the verdict (gputui.vocabulary.dcgm_diag), delete the Job and its pod.

Fail closed: a Job that cannot be created (the permission named), a pod that never schedules, a run past its
deadline, a log that cannot be read, output that is not a result, or an exit code that contradicts the output,
is the verdict unknown, never pass."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gputui.backends.base import BackendError, JobWriter, error_line
from gputui.ops.context import OpContext
from gputui.ops.errors import ReadOnlyError
from gputui.vocabulary.dcgm_diag import read_diag

GPU_RESOURCE = "nvidia.com/gpu"
CONTAINER = "dcgm-diag"
DIAG_LABEL = "gputui.io/diag-node"  # on the Job and its pod: which node it tests (a label value: the name, cut)
# Seconds a run may take per level (`-r 1` takes seconds, `-r 2` about two minutes, `-r 3` about half an hour,
# `-r 4` up to two hours on 8 GPUs, NVIDIA's DCGM user guide), with room for the image pull.
DEADLINE_S: Mapping[int, int] = {1: 600, 2: 1200, 3: 3600, 4: 3 * 3600}
SCHEDULE_WAIT_S = 300.0  # a pod unscheduled this long will not run: the node is full, tainted or gone
NO_POD_WAIT_S = 120.0  # a Job that made no pod this long: admission or a quota refused it
TTL_AFTER_FINISHED_S = 3600  # the cluster deletes the Job itself should gputui die before it cleans up
CLEANUP_WAIT_S = 60.0
PROGRESS_EVERY_S = 15.0


@dataclass(frozen=True, slots=True)
class DiagRun:
    """What the diagnostic said about the node."""

    node: str
    verdict: str  # pass, fail, warn or unknown
    summary: str  # one line: the verdict in words, or why it is unknown
    failing: tuple[str, ...] = ()  # the failed tests in words, one per failing GPU
    warnings: tuple[str, ...] = ()
    job: str = ""  # namespace/name ("" when none was created)
    pinned: Mapping[str, Any] = field(default_factory=dict)  # the Job's placement as the apiserver returned it
    cleanup: str = ""  # "" when the Job is gone; otherwise what was left and why

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "verdict": self.verdict, "summary": self.summary, "failing": list(self.failing),
                "warnings": list(self.warnings), "job": self.job or None, "cleanup": self.cleanup or None}

    def lines(self) -> list[str]:
        """The verdict for a person: a headline, then each failing test (or warning) on its own line."""
        head = f"DCGM diagnostic on {self.node}: {self.verdict.upper()}: {self.summary}"
        return [head, *(f"  {line}" for line in (self.failing or self.warnings))]


def job_name(node: str) -> str:
    """A Job name for the node, unique per run, within the 63 characters its pods' job-name label allows."""
    base = re.sub(r"[^a-z0-9-]+", "-", node.lower()).strip("-")[:40].strip("-") or "node"
    return f"gputui-diag-{base}-{uuid.uuid4().hex[:6]}"


def job_body(name: str, namespace: str, node: str, gpus: int, image: str, level: int) -> dict[str, Any]:
    """The Job. Pinned by a required node affinity on the node's name (metadata.name, as DaemonSets pin theirs;
    the kubernetes.io/hostname label is not the node's name on every cloud), through the real scheduler, so that
    a node whose GPUs are held elsewhere leaves the pod pending (unknown) rather than failed at admission.
    Tolerates the cordon and the GPU taint; holds all `gpus`; never retried (backoffLimit 0: a second run
    would hide the first one's failure); bounded by activeDeadlineSeconds; removed by the cluster after
    ttlSecondsAfterFinished if gputui does not delete it first."""
    label = re.sub(r"[^A-Za-z0-9_.-]+", "-", node)[:63].strip("-_.") or "node"
    labels = {"app.kubernetes.io/name": "gputui-diag", "app.kubernetes.io/managed-by": "gputui", DIAG_LABEL: label}
    # dcgmi talks to a host engine; NVIDIA's image starts one only when run without a command, so start it here.
    script = f"nv-hostengine >/dev/null 2>&1; exec dcgmi diag -r {int(level)} -j"
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": {"gputui.io/diag-node": node}},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": DEADLINE_S[level],
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
                    "tolerations": [
                        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": GPU_RESOURCE, "operator": "Exists"},
                    ],
                    "containers": [{
                        "name": CONTAINER, "image": image,
                        "command": ["/bin/sh", "-c", script],
                        "resources": {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {GPU_RESOURCE: str(gpus)}},
                        # DCGM's diagnostic reads profiling counters and resets clocks: SYS_ADMIN, as NVIDIA runs it.
                        "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},
                    }],
                },
            },
        },
    }


def _forbidden(exc: BaseException, verb: str, what: str, namespace: str) -> str:
    if getattr(exc, "status", None) == 403:  # the apiserver's answer (kube_errors.ApiError) or the demo's
        return f"your identity may not {verb} {what} in namespace {namespace} ({error_line(exc)})"
    return error_line(exc)


def _node_gpus(writer: JobWriter, node: str) -> tuple[int, str]:
    """The node's allocatable GPUs, read now; 0 and why when the diagnostic could not test them all."""
    body = writer.get_object("", "v1", "nodes", "", node)
    status = body.get("status") or {}
    try:
        allocatable = int(str((status.get("allocatable") or {}).get(GPU_RESOURCE, "0")))
        capacity = int(str((status.get("capacity") or {}).get(GPU_RESOURCE, "0")))
    except ValueError:
        return 0, f"the node's {GPU_RESOURCE} count is not a number"
    if allocatable <= 0:
        return 0, f"the node offers no {GPU_RESOURCE} (allocatable 0): there is nothing a diagnostic can hold"
    if allocatable < capacity:
        return 0, (f"only {allocatable} of its {capacity} GPUs are allocatable (the device plugin took some out): "
                   "a diagnostic could not test them all")
    return allocatable, ""


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True":
            return c
    return None


def _exit_code(pod: dict[str, Any]) -> int | None:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if isinstance(c, dict) and c.get("name") == CONTAINER:
            term = (c.get("state") or {}).get("terminated") or {}
            code = term.get("exitCode")
            return code if isinstance(code, int) else None
    return None


def _unscheduled(pod: dict[str, Any]) -> str:
    """Why the scheduler has not placed the pod ("" when it has, or has not said)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "not scheduled")
    return ""


def run_diag(node: str, ctx: OpContext, progress: Callable[[str], None] = lambda _line: None) -> DiagRun:
    """Run the diagnostic on `node` and read its verdict; the Job is deleted before this returns (or said left)."""
    writer = ctx.writer
    if writer is None:
        raise ReadOnlyError("diagnostic")
    if not isinstance(writer, JobWriter):
        return DiagRun(node, "unknown", "this backend cannot run a Job: no diagnostic was run")
    settings = ctx.settings
    namespace = settings.namespace or "default"
    level = settings.diag_level
    try:
        gpus, why = _node_gpus(writer, node)
    except BackendError as exc:
        return DiagRun(node, "unknown", f"cannot read node {node}: {error_line(exc)}")
    if not gpus:
        return DiagRun(node, "unknown", why)
    name = job_name(node)
    body = job_body(name, namespace, node, gpus, settings.diag_image, level)
    params = {"node": node, "image": settings.diag_image, "level": level, "gpus": gpus,
              "deadline_s": DEADLINE_S[level]}
    try:
        with ctx.audit.writing("diag-job", f"job/{namespace}/{name}", params):
            created = writer.create_object("batch", "v1", "jobs", namespace, body)
    except BackendError as exc:
        return DiagRun(node, "unknown", "the diagnostic's Job could not be created: "
                       + _forbidden(exc, "create", "jobs.batch", namespace))
    pinned = ((created.get("spec") or {}).get("template") or {}).get("spec") or {}
    job = f"{namespace}/{name}"
    progress(f"diagnostic Job {job} created: dcgmi diag -r {level} on {gpus} GPUs of {node} "
             f"(at most {DEADLINE_S[level] // 60} min)")
    try:
        verdict, summary, failing, warnings = _wait_and_read(writer, ctx, namespace, name, level, progress)
    finally:
        cleanup = _clean_up(writer, ctx, namespace, name)
    placement = {"affinity": pinned.get("affinity"), "tolerations": pinned.get("tolerations"),
                 "gpus": gpus}
    return DiagRun(node, verdict, summary, failing, warnings, job, placement, cleanup)


def _wait_and_read(writer: JobWriter, ctx: OpContext, namespace: str, name: str, level: int,
                   progress: Callable[[str], None]) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    start = ctx.clock()
    limit = DEADLINE_S[level] + 120.0
    said = start
    pending_since: float | None = None
    get = writer.get_object
    listing = writer.list_objects
    while True:
        now = ctx.clock()
        waited = now - start
        try:
            job = get("batch", "v1", "jobs", namespace, name)
            pods = listing("", "v1", "pods", namespace, f"job-name={name}")
        except BackendError as exc:
            return "unknown", f"lost sight of the diagnostic's Job: {_forbidden(exc, 'read', 'jobs or pods', namespace)}", (), ()
        pod = max(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""), default=None)
        failed = _condition(job, "Failed")
        done = _condition(job, "Complete") or failed
        if failed is not None and failed.get("reason") == "DeadlineExceeded":
            return "unknown", f"the diagnostic ran past its deadline ({DEADLINE_S[level]} s) and was stopped", (), ()
        phase = str(((pod or {}).get("status") or {}).get("phase") or "")
        if pod is not None and (done is not None or phase in ("Succeeded", "Failed")):
            return _read_result(writer, namespace, pod)
        if done is not None:
            return "unknown", f"the diagnostic's Job ended with no pod ({done.get('reason') or 'no reason given'})", (), ()
        if pod is None and waited >= NO_POD_WAIT_S:
            return "unknown", f"the diagnostic's Job made no pod in {int(waited)} s (admission or a quota?)", (), ()
        unscheduled = _unscheduled(pod) if pod is not None else ""
        if unscheduled:
            pending_since = now if pending_since is None else pending_since
            if now - pending_since >= SCHEDULE_WAIT_S:
                return "unknown", f"the diagnostic's pod never scheduled in {int(now - pending_since)} s: {unscheduled}", (), ()
        else:
            pending_since = None
        if waited >= limit:
            return "unknown", f"no result from the diagnostic in {int(waited)} s", (), ()
        if now - said >= PROGRESS_EVERY_S:
            said = now
            state = f"unscheduled: {unscheduled}" if unscheduled else (phase.lower() or "no pod yet")
            progress(f"diagnostic {namespace}/{name}: {state}, {int(waited)} s")
        ctx.sleep(ctx.poll_s)


def _read_result(writer: JobWriter, namespace: str, pod: dict[str, Any]
                 ) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    pod_name = str((pod.get("metadata") or {}).get("name") or "")
    try:
        text = writer.pod_log(namespace, pod_name, CONTAINER)
    except BackendError as exc:
        return "unknown", f"cannot read the diagnostic's output: {_forbidden(exc, 'get', 'pods/log', namespace)}", (), ()
    result = read_diag(text)
    code = _exit_code(pod)
    failing, warnings = tuple(result.failing()), tuple(result.warnings())
    if result.verdict == "pass" and code != 0:
        # dcgmi exits non-zero when a test fails or it could not run: a pass with such an exit is not proven.
        said = "no exit code" if code is None else f"exit code {code}"
        return "unknown", f"dcgmi's output says pass but it ended with {said}", (), warnings
    return result.verdict, result.reason, failing, warnings


def _clean_up(writer: JobWriter, ctx: OpContext, namespace: str, name: str) -> str:
    """Delete the Job and (foreground) its pod, and wait a while for them to go; "" when gone."""
    try:
        with ctx.audit.writing("delete", f"job/{namespace}/{name}", {"propagation": "Foreground"}):
            writer.delete_object("batch", "v1", "jobs", namespace, name, "Foreground")
    except BackendError as exc:
        return (f"the Job {namespace}/{name} was not deleted ({_forbidden(exc, 'delete', 'jobs.batch', namespace)}); "
                f"the cluster removes it {TTL_AFTER_FINISHED_S} s after it finished")
    start = ctx.clock()
    while ctx.clock() - start < CLEANUP_WAIT_S:
        try:
            writer.get_object("batch", "v1", "jobs", namespace, name)
        except BackendError as exc:  # the apiserver's 404 (ApiError), or the demo's
            if getattr(exc, "status", None) == 404:
                return ""
            break
        ctx.sleep(ctx.poll_s)
    return f"the Job {namespace}/{name} is being deleted (foreground: it goes once its pod is gone)"

"""The DCGM diagnostic gate of issue 37 item 4, fast: the Job's spec, how a run's ends map to verdicts (fail
closed: forbidden, never scheduled, past its deadline, unreadable or contradicted output are unknown, never pass),
the cleanup after each, the gate's decisions with and without an override, the verdict on the cordon record,
and the settings. The real apiserver, scheduler and Job controller: tests/integration/test_diag_gate_real.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gputui.backends.kube_errors import ApiError
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.cordon import plan_cordon
from gputui.ops.diag import DEADLINE_S, SCHEDULE_WAIT_S, DiagRun, job_body, run_diag
from gputui.ops.diag_gate import decide, record_verdict
from gputui.policy.cordon_record import CordonRecord, diag_note, read_record
from gputui.settings import Settings, SettingsError, load_settings
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.disruptions import CORDON_RECORD
from gputui.vocabulary.model import Node

SAMPLES = Path(__file__).parents[1] / "fixtures" / "dcgm_diag"
PASS = (SAMPLES / "nvidia_dcgm_nvvs_3.1.0_real_output_pass.txt").read_text()
FAIL = (SAMPLES / "nvidia_dcgm_nvvs_1.7_per_gpu_sm_stress_fail.json").read_text()
WARN_4X = (SAMPLES / "synthetic_dcgm_4.x_pass.json").read_text()


class FakeJobs:
    """A writer holding one node and the Jobs made on it; each Job's pod ends as the test says."""

    identity = "alice"

    def __init__(self, *, allocatable: str = "8", capacity: str = "8", phase: str = "Succeeded", exit_code: int = 0,
                 log: str = PASS, unscheduled: str = "", job_failed: str = "", create_error: ApiError | None = None,
                 log_error: ApiError | None = None) -> None:
        self.allocatable, self.capacity = allocatable, capacity
        self.phase, self.exit_code, self.log = phase, exit_code, log
        self.unscheduled, self.job_failed = unscheduled, job_failed
        self.create_error, self.log_error = create_error, log_error
        self.jobs: dict[str, dict] = {}
        self.created: list[dict] = []
        self.deleted: list[tuple[str, str]] = []
        self.annotations: dict[str, str | None] = {}

    def get_object(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict:
        if plural == "nodes":
            return {"status": {"allocatable": {"nvidia.com/gpu": self.allocatable},
                               "capacity": {"nvidia.com/gpu": self.capacity}}}
        if name not in self.jobs:
            raise ApiError(404, "not found")
        conditions = [{"type": "Failed", "status": "True", "reason": self.job_failed}] if self.job_failed else []
        if not self.job_failed and not self.unscheduled and self.phase in ("Succeeded", "Failed"):
            conditions = [{"type": "Complete" if self.phase == "Succeeded" else "Failed", "status": "True",
                           "reason": "BackoffLimitExceeded" if self.phase == "Failed" else ""}]
        return {**self.jobs[name], "status": {"conditions": conditions}}

    def list_objects(self, group: str, version: str, plural: str, namespace: str, label_selector: str = "") -> list[dict]:
        name = label_selector.removeprefix("job-name=")
        if name not in self.jobs:
            return []
        status: dict[str, Any] = {"phase": "Pending" if self.unscheduled else self.phase}
        if self.unscheduled:
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": self.unscheduled}]
        elif self.phase in ("Succeeded", "Failed"):
            status["containerStatuses"] = [{"name": "dcgm-diag", "state": {"terminated": {"exitCode": self.exit_code}}}]
        return [{"metadata": {"name": f"{name}-abcde", "creationTimestamp": "2026-12-03T10:00:00Z"}, "status": status}]

    def create_object(self, group: str, version: str, plural: str, namespace: str, body: dict) -> dict:
        if self.create_error is not None:
            raise self.create_error
        self.created.append(body)
        self.jobs[body["metadata"]["name"]] = body
        return body

    def delete_object(self, group: str, version: str, plural: str, namespace: str, name: str,
                      propagation: str = "Foreground") -> None:
        self.deleted.append((name, propagation))
        self.jobs.pop(name, None)

    def pod_log(self, namespace: str, name: str, container: str = "", limit_bytes: int = 8_000_000) -> str:
        if self.log_error is not None:
            raise self.log_error
        return self.log

    def annotate_node(self, node: str, annotations: dict[str, str | None], resource_version: str | None = None) -> None:
        self.annotations.update(annotations)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def context(writer: Any, tmp_path: Path, **settings: Any) -> OpContext:
    clock = Clock()
    return OpContext(reader=None, writer=writer, audit=AuditLog(tmp_path / "audit.jsonl", "alice", "test"),  # type: ignore[arg-type]
                     settings=Settings(**settings), clock=clock, sleep=clock.sleep, poll_s=5.0)


def audit(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


# -- the Job -----------------------------------------------------------------------------------------------------

def test_the_job_is_pinned_to_the_node_holds_every_gpu_tolerates_the_cordon_and_is_never_retried():
    body = job_body("gputui-diag-gpu-7-abc123", "ops", "gpu-7.example", 8, "nvcr.io/nvidia/cloud-native/dcgm:x", 3)
    spec, pod = body["spec"], body["spec"]["template"]["spec"]
    assert (body["apiVersion"], body["kind"], body["metadata"]["namespace"]) == ("batch/v1", "Job", "ops")
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == DEADLINE_S[3] == 3600
    assert spec["ttlSecondsAfterFinished"] > 0 and pod["restartPolicy"] == "Never"
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-7.example"]}]}]}
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in pod["tolerations"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"} == container["resources"]["requests"]
    assert container["command"][-1].endswith("dcgmi diag -r 3 -j")
    assert pod["automountServiceAccountToken"] is False


def test_the_run_reads_the_verdict_creates_one_job_audited_once_and_deletes_it_in_the_foreground(tmp_path):
    jobs = FakeJobs(log=FAIL, phase="Failed", exit_code=1)
    lines: list[str] = []
    run = run_diag("gpu-7", context(jobs, tmp_path, diag_image="img:1", diag_level=2), lines.append)
    assert run.verdict == "fail" and "SM stress on GPU 0: Max stress level of 2128.7" in run.failing[0]
    assert len(jobs.created) == 1 and jobs.created[0]["spec"]["template"]["spec"]["containers"][0]["image"] == "img:1"
    assert jobs.deleted == [(jobs.created[0]["metadata"]["name"], "Foreground")] and run.cleanup == ""
    assert [(e["action"], e["phase"]) for e in audit(tmp_path)] == [
        ("diag-job", "intent"), ("diag-job", "result"), ("delete", "intent"), ("delete", "result")]
    assert lines and "created" in lines[0]


def test_a_pass_is_a_pass_only_with_a_clean_exit(tmp_path):
    assert run_diag("gpu-7", context(FakeJobs(), tmp_path)).verdict == "pass"
    odd = run_diag("gpu-7", context(FakeJobs(phase="Failed", exit_code=3), tmp_path))
    assert odd.verdict == "unknown" and "exit code 3" in odd.summary


@pytest.mark.parametrize("jobs, fragment", [
    (FakeJobs(create_error=ApiError(403, "forbidden: jobs.batch is forbidden")),
     "may not create jobs.batch in namespace default"),
    (FakeJobs(log_error=ApiError(403, "forbidden: pods/log")), "may not get pods/log in namespace default"),
    (FakeJobs(log="dcgmi: Error: unable to establish a connection to the host engine"), "is not JSON"),
    (FakeJobs(job_failed="DeadlineExceeded", phase="Running"), "past its deadline"),
    (FakeJobs(unscheduled="0/3 nodes are available: 1 Insufficient nvidia.com/gpu."),
     "never scheduled in 300 s: 0/3 nodes are available: 1 Insufficient nvidia.com/gpu."),
    (FakeJobs(allocatable="7"), "only 7 of its 8 GPUs are allocatable"),
    (FakeJobs(allocatable="0"), "offers no nvidia.com/gpu"),
])
def test_every_way_a_run_cannot_prove_health_is_unknown_never_pass(jobs, fragment, tmp_path):
    run = run_diag("gpu-7", context(jobs, tmp_path))
    assert run.verdict == "unknown" and fragment in run.summary, run.summary
    assert not jobs.jobs  # whatever was created is deleted


def test_an_unscheduled_pod_is_given_up_after_the_schedule_wait_not_before(tmp_path):
    jobs = FakeJobs(unscheduled="node(s) had untolerated taint")
    ctx = context(jobs, tmp_path)
    run = run_diag("gpu-7", ctx)
    assert run.verdict == "unknown" and ctx.clock() - 1_800_000_000.0 >= SCHEDULE_WAIT_S


# -- the gate ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("verdict, override, uncordon, overridden", [
    ("pass", False, True, False), ("pass", True, True, False),
    ("fail", False, False, False), ("warn", False, False, False), ("unknown", False, False, False),
    ("fail", True, True, True), ("warn", True, True, True), ("unknown", True, True, True),
])
def test_only_a_pass_uncordons_unless_overridden(verdict, override, uncordon, overridden):
    decision = decide(DiagRun("gpu-7", verdict, "why"), override)
    assert (decision.uncordon, decision.overridden) == (uncordon, overridden)
    assert decision.line.startswith("gpu-7 ") and ("stays cordoned" in decision.line) == (not uncordon)


def test_the_verdict_is_written_on_the_record_and_read_back(tmp_path):
    record = CordonRecord("alice", "XID 79", 1_799_990_000.0)
    node = Node(name="gpu-7", ready=True, unschedulable=True, gpu_product="H100", gpu_capacity=8, gpu_allocatable=8,
                annotations={CORDON_RECORD: record.to_annotation()})
    plan = plan_cordon(ClusterSnapshot(taken_at=1_800_000_000.0, context="test", nodes=(node,)), "gpu-7", False,
                       identity="alice")
    jobs = FakeJobs()
    ctx = context(jobs, tmp_path)
    after = record_verdict(plan, DiagRun("gpu-7", "fail", "1 of 3 tests failed: SM stress"), ctx)
    written = read_record({CORDON_RECORD: str(jobs.annotations[CORDON_RECORD])})
    assert written is not None and written.diag == diag_note("fail", 1_800_000_000.0, "1 of 3 tests failed: SM stress")
    assert (written.by, written.reason) == ("alice", "XID 79")
    assert after.owner is not None and after.owner.record == written
    assert [e["action"] for e in audit(tmp_path)] == ["annotate", "annotate"]


def test_a_diag_note_from_the_node_is_bounded_and_its_verdict_checked():
    raw = json.dumps({"by": "x", "reason": "r", "since": "2026-12-03T10:00:00Z",
                      "diag": {"verdict": "PASS!", "when": "soon", "summary": "a\x1b[2Jb" + "z" * 999}})
    note = read_record({CORDON_RECORD: raw}).diag  # type: ignore[union-attr]
    assert note is not None and note.verdict == "unknown" and note.when is None
    assert "\x1b" not in note.summary and note.summary.startswith("a\u241b[2Jb")  # made visible
    assert len(note.summary) <= 300 + len("…(+705 chars)")  # cut, and the cut said


def test_settings_check_the_level_and_the_image():
    assert Settings().diag_level == 2 and Settings().diag_image.startswith("nvcr.io/nvidia/cloud-native/dcgm:")
    assert load_settings(env={"GPUTUI_DIAG_LEVEL": "3"}, config_path=Path("/nonexistent")).diag_level == 3
    with pytest.raises(SettingsError, match="diag_level must be 1, 2, 3 or 4"):
        load_settings(env={"GPUTUI_DIAG_LEVEL": "5"}, config_path=Path("/nonexistent"))
    with pytest.raises(SettingsError, match="diag_image"):
        load_settings(env={"GPUTUI_DIAG_IMAGE": "img; rm -rf /"}, config_path=Path("/nonexistent"))


# -- the demo ----------------------------------------------------------------------------------------------------

def test_the_demo_runs_a_simulated_diagnostic_and_calls_a_node_missing_a_gpu_unknown(tmp_path):
    from gputui.backends.demo import DemoCluster

    demo = DemoCluster(seed=1)
    ctx = OpContext(demo, demo, AuditLog(tmp_path / "audit.jsonl", "alice", "demo"))
    clean = run_diag("gpu-h100-02", ctx)
    assert (clean.verdict, clean.summary, clean.cleanup) == ("pass", "all 3 tests passed", "")
    assert demo.list_objects("", "v1", "pods", "default", f"job-name={clean.job.split('/')[1]}") == []
    faulty = run_diag("gpu-h100-07", ctx)  # XID 79: a GPU off the bus, out of allocatable
    assert faulty.verdict == "unknown" and "only 7 of its 8 GPUs are allocatable" in faulty.summary


# -- the headless gate, in process on one demo cluster (the demo forgets its writes between processes) ---------

def test_uncordon_diag_headless_keeps_an_unproven_node_cordoned_until_overridden(tmp_path, monkeypatch, capsys):
    from gputui.backends.base import Backend
    from gputui.backends.demo import DemoCluster
    from gputui.cli import cordon as cli
    from gputui.cli.parser import build_parser

    demo = DemoCluster(seed=1)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    def gputui(*argv: str) -> int:
        args = build_parser().parse_args([*argv, "--demo"])
        settings = Settings(demo=True, audit_log=str(tmp_path / "audit.jsonl"))

        def factory(_s: Settings) -> Backend:  # the same cluster each time (closing the demo stops nothing)
            return Backend(reader=demo, writer=demo, context="demo", simulated=True)

        return cli.run(settings, args, factory)

    node = "gpu-h100-07"  # a GPU off the bus: the diagnostic cannot test them all, so unknown
    assert gputui("cordon", node, "--reason", "XID 79") == 0
    capsys.readouterr()
    assert gputui("uncordon", node, "--diag") == 1
    out = capsys.readouterr()
    assert "has no proven DCGM diagnostic result (unknown), so it stays cordoned" in out.err
    assert "--override-diag" in out.err and "UNKNOWN" in out.out
    after = demo.snapshot().node(node)
    assert after is not None and after.unschedulable
    record = read_record(after.annotations)
    assert record is not None and record.diag is not None and record.diag.verdict == "unknown"
    assert gputui("uncordon", node, "--override-diag") == 2  # goes with --diag
    assert gputui("uncordon", node, "--diag", "--override-diag") == 0
    after = demo.snapshot().node(node)
    assert after is not None and not after.unschedulable
    clean = "gpu-h100-02"
    assert gputui("cordon", clean, "--reason", "fan") == 0
    assert gputui("uncordon", clean, "--diag") == 0 and "PASS" in capsys.readouterr().out
    lines = (tmp_path / "audit-demo.jsonl").read_text().splitlines()
    results = [e for e in map(json.loads, lines) if e["action"] == "diag"]
    assert [(e["target"], e["result"]) for e in results] == [
        (f"node/{node}", "refused"), (f"node/{node}", "override"), (f"node/{clean}", "ok")]

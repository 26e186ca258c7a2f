"""The uncordon gate of issue 37 item 4 on the real control plane: `gputui uncordon NODE --diag` creates a DCGM
diagnostic Job through the real apiserver, the real scheduler places its pod on that node (cordoned: through the
toleration), the real Job controller follows it, the fake kubelet runs it with a DCGM sample as its output
(tests/fixtures/dcgm_diag/SOURCES.md: NVIDIA's failing NVVS string, NVIDIA's real 3.1.0 pass output) and serves
that as the container's log, which gputui reads through the apiserver's pods/log proxy. A fail leaves the node
cordoned (exit 1, the failing test named); a pass uncordons it; the Job is pinned to the node, holds all its GPUs,
and is gone afterwards; the verdict is on the node's cordon record and in the audit log."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from kubernetes import client, watch

from tests.support.gputui_cli import run
from tests.support.rbac import ROLE_FILE, kubeconfig_for, token_of, wait_rbac

SAMPLES = Path(__file__).parents[1] / "fixtures" / "dcgm_diag"
# The image name picks the fake kubelet's output (FakeKubelet.set_run_output); nothing is pulled.
FAIL_IMAGE = "gputui.test/dcgm-diag:fail-sm-stress"
PASS_IMAGE = "gputui.test/dcgm-diag:pass-nvvs-3.1.0"


def _audit(home: Path) -> list[dict]:
    return [json.loads(line) for line in (home / ".state" / "gputui" / "audit.jsonl").read_text().splitlines()]


def _watch_jobs(batch: client.BatchV1Api, since: str, seen: list[dict], stop: threading.Event) -> None:
    """Every diagnostic Job as the apiserver served it, before gputui deletes it: from resourceVersion `since`,
    so that a Job made and deleted before the watch connects is still seen."""
    w = watch.Watch()
    for event in w.stream(batch.list_namespaced_job, "default", label_selector="app.kubernetes.io/name=gputui-diag",
                          resource_version=since, timeout_seconds=120, _preload_content=True):
        seen.append(client.ApiClient().sanitize_for_serialization(event["object"]))
        if stop.is_set():
            w.stop()


def test_uncordon_diag_gate_on_the_real_control_plane(cluster, fake_kubelet, tmp_path):
    api = cluster.harness_client()
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    kubeconfig = ("--kubeconfig", str(cluster.admin_kubeconfig))
    node = "diag-gpu-7"
    # dcgmi exits non-zero when a test fails; the pass sample is NVIDIA's 8-GPU run, so the node has 8 GPUs.
    fake_kubelet.set_run_output(FAIL_IMAGE, (SAMPLES / "nvidia_dcgm_nvvs_1.7_per_gpu_sm_stress_fail.json").read_text(),
                                exit_code=1)
    fake_kubelet.set_run_output(PASS_IMAGE, (SAMPLES / "nvidia_dcgm_nvvs_3.1.0_real_output_pass.txt").read_text())
    seen: list[dict] = []
    stop = threading.Event()
    since = batch.list_namespaced_job("default").metadata.resource_version
    watcher = threading.Thread(target=_watch_jobs, args=(batch, since, seen, stop), daemon=True)
    try:
        fake_kubelet.add_node(node, gpus=8, gpu_taint=True, serve_logs=True, labels={"gputui.test/pool": "diag"})
        out = run("cordon", node, *kubeconfig, "--reason", "XID 79 on GPU 3", home=tmp_path)
        assert out.returncode == 0, out.stderr
        watcher.start()

        # A failing diagnostic: exit 1, the failing test named, still cordoned, the verdict on the record.
        out = run("uncordon", node, *kubeconfig, "--diag", home=tmp_path, env={"GPUTUI_DIAG_IMAGE": FAIL_IMAGE})
        assert out.returncode == 1, out.stdout + out.stderr
        assert "FAIL" in out.stdout and "SM stress on GPU 0: Max stress level of 2128.7" in out.stdout, out.stdout
        assert f"{node} failed the DCGM diagnostic, so it stays cordoned" in out.stderr
        after = core.read_node(node)
        assert after.spec.unschedulable is True
        record = json.loads(after.metadata.annotations["gputui.io/cordon"])
        assert record["reason"] == "XID 79 on GPU 3" and record["diag"]["verdict"] == "fail"
        assert "SM stress" in record["diag"]["summary"]
        assert batch.list_namespaced_job("default", label_selector="app.kubernetes.io/name=gputui-diag").items == []

        # A passing one: uncordoned, its record (verdict and all) removed in the write the audit log names.
        out = run("uncordon", node, *kubeconfig, "--diag", home=tmp_path, env={"GPUTUI_DIAG_IMAGE": PASS_IMAGE})
        assert out.returncode == 0, out.stdout + out.stderr
        assert "PASS" in out.stdout
        after = core.read_node(node)
        assert not after.spec.unschedulable and "gputui.io/cordon" not in (after.metadata.annotations or {})
        assert batch.list_namespaced_job("default", label_selector="app.kubernetes.io/name=gputui-diag").items == []

        entries = _audit(tmp_path)
        verdicts = [(e["result"], e["params"]["verdict"]) for e in entries if e["action"] == "diag"]
        assert verdicts == [("refused", "fail"), ("ok", "pass")]
        created = [e for e in entries if e["action"] == "diag-job" and e["phase"] == "intent"]
        assert [(e["params"]["node"], e["params"]["gpus"]) for e in created] == [(node, 8), (node, 8)]
        uncordon = [e for e in entries if e["action"] == "uncordon" and e["phase"] == "result"]
        assert len(uncordon) == 1 and uncordon[0]["params"]["record_removed"]["diag"]["verdict"] == "pass"
        assert uncordon[0]["params"]["diag"]["verdict"] == "pass"

        # Each Job as the apiserver held it: pinned to that node, all 8 GPUs, the cordon tolerated, never retried.
        deadline = time.monotonic() + 30  # the watch's events may trail the CLI's end
        while len({j["metadata"]["name"] for j in seen}) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        stop.set()
        names = {j["metadata"]["name"] for j in seen}
        assert len(names) == 2 and {e["target"].rsplit("/", 1)[1] for e in created} == names
        for job in seen:
            pod = job["spec"]["template"]["spec"]
            terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert terms["nodeSelectorTerms"] == [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]
            assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
            assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in \
                pod["tolerations"]
            assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] > 0
    finally:
        stop.set()
        fake_kubelet.remove_node(node)


def test_an_identity_that_may_not_create_jobs_gets_unknown_named_and_the_node_stays_cordoned(cluster, fake_kubelet,
                                                                                               tmp_path):
    """docs/rbac.yaml grants no Jobs: the diagnostic cannot run, which is unknown (never pass), the permission
    named from the real apiserver's 403, and the node stays cordoned."""
    cluster.kubectl("apply", "-f", str(ROLE_FILE))
    kc = kubeconfig_for(cluster, tmp_path / "operator.yaml", token_of(cluster, "gputui"))
    wait_rbac(cluster, kc)
    core = client.CoreV1Api(cluster.harness_client())
    node = "diag-gpu-norbac"
    try:
        fake_kubelet.add_node(node, gpus=4, serve_logs=True)
        assert run("cordon", node, "--kubeconfig", str(kc), "--reason", "XID 48", home=tmp_path).returncode == 0
        out = run("uncordon", node, "--kubeconfig", str(kc), "--diag", home=tmp_path,
                  env={"GPUTUI_DIAG_IMAGE": PASS_IMAGE})
        assert out.returncode == 1, out.stdout + out.stderr
        assert "may not create jobs.batch in namespace default" in out.stdout, out.stdout
        assert "has no proven DCGM diagnostic result (unknown), so it stays cordoned" in out.stderr
        after = core.read_node(node)
        assert after.spec.unschedulable is True
        assert json.loads(after.metadata.annotations["gputui.io/cordon"])["diag"]["verdict"] == "unknown"
    finally:
        fake_kubelet.remove_node(node)

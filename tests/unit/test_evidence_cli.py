"""`gputui evidence NODE [-o FILE] [--force]` on the demo cluster, as a user runs it (issue 37 item 5): the bundle
read back (every part, SUMMARY.md in words, the MANIFEST with what is missing and what was left out), mode 0600,
never a file replaced without --force, exit 2 only when the node itself cannot be read. And what the cluster
wrote stays data: a planted secret in a pod's env, args and annotations and in a node annotation appears in no
file, hostile names and messages never become file names or raw control characters."""

from __future__ import annotations

import io
import json
import stat
import tarfile
from pathlib import Path
from typing import Any

from gputui.backends.base import Backend
from gputui.backends.demo import DemoCluster
from gputui.ops.evidence import gather
from gputui.ops.evidence_write import archive
from tests.support.gputui_cli import run

XID_NODE = "gpu-h100-07"  # the demo's hardware XID 79 on GPU 5
FIXED = {"SUMMARY.md", "MANIFEST", "node.json", "conditions.json", "taints.json", "labels.json", "pods.json",
         "events.json", "actors.json", "faults.json", "audit.json", "dcgm/DCGM_FI_DEV_GPU_UTIL.json"}
SECRET = "s3cr3t-planted-value-8f1e"


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_the_bundle_holds_every_part_in_words_and_lists_what_is_missing(tmp_path):
    target = tmp_path / "out" / "bundle.tar.gz"
    out = run("evidence", XID_NODE, "--demo", "-o", str(target), home=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("SIMULATED") and f"written to {target}" in out.stdout
    assert "reading the cluster" in out.stderr  # progress on stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    files = members(target)
    assert {n.removeprefix("evidence/") for n in files} >= FIXED
    assert all(n.startswith("evidence/") for n in files)
    summary = files["evidence/SUMMARY.md"].decode()
    assert f"# Evidence: node {XID_NODE}" in summary and "SIMULATED" in summary
    assert "GPU 5" in summary and "XID 79" in summary and "RMA" in summary  # the worst fault, with its action
    assert "qwen2-72b" in summary and "sessions" in summary  # the pod on it, with its live sessions
    [missing] = [line for line in summary.splitlines() if line.startswith("- MISSING ")]  # one line per reason
    assert "dcgm/DCGM_FI_DEV_GPU_TEMP.json" in missing and missing.endswith(": the simulated cluster has no such series")
    manifest = files["evidence/MANIFEST"].decode()
    for name in FIXED - {"SUMMARY.md", "MANIFEST"}:
        assert f"\n{name}\t" in manifest, name
    assert "dcgm/DCGM_FI_DEV_XID_ERRORS.json\tthe simulated cluster has no such series" in manifest
    assert "pod command and args\tleft out whole" in manifest and "Secret objects" in manifest
    faults = json.loads(files["evidence/faults.json"])
    gpu5 = next(g for g in faults if g["index"] == 5)
    assert gpu5["faults"][0]["code"] == 79 and gpu5["faults"][0]["category"] == "hardware"
    assert "DCGM_FI_DEV_ROW_REMAP_FAILURE" in gpu5["not_collected"]
    pods = json.loads(files["evidence/pods.json"])
    served = next(p for p in pods if (p["gputui"] or {}).get("service") == "qwen2-72b")
    assert served["gputui"]["gpu_units"] == {"nvidia.com/gpu": 4} and served["gputui"]["sessions"].isdigit()
    assert served["dcgm_gpus"] is None  # the demo's series name no pod: unknown, never "none"
    conditions = json.loads(files["evidence/conditions.json"])
    assert {"type": "SysLogsXIDError", "status": "True", "reason": "XID79",
            "message": "GPU has fallen off the bus"} in conditions
    util = json.loads(files["evidence/dcgm/DCGM_FI_DEV_GPU_UTIL.json"])
    assert sorted(int(s["metric"]["gpu"]) for s in util) == list(range(8)) and all(s["samples"] for s in util)


def test_an_existing_file_is_never_replaced_without_force(tmp_path):
    target = tmp_path / "bundle.tar.gz"
    target.write_bytes(b"the ticket's earlier bundle")
    out = run("evidence", XID_NODE, "--demo", "-o", str(target), home=tmp_path)
    assert out.returncode == 2 and "exists: not replaced (--force replaces it)" in out.stderr
    assert target.read_bytes() == b"the ticket's earlier bundle"
    forced = run("evidence", XID_NODE, "--demo", "-o", str(target), "--force", home=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "evidence/SUMMARY.md" in members(target) and stat.S_IMODE(target.stat().st_mode) == 0o600


def test_without_o_it_goes_under_the_state_directory_and_a_missing_node_is_exit_2(tmp_path):
    out = run("evidence", XID_NODE, "--demo", home=tmp_path)
    assert out.returncode == 0, out.stderr
    [written] = (tmp_path / ".state" / "gputui" / "evidence").iterdir()
    assert written.name.startswith(f"{XID_NODE}-") and written.name.endswith(".tar.gz")
    assert str(written) in out.stdout
    gone = run("evidence", "no-such-node", "--demo", home=tmp_path)
    assert gone.returncode == 2 and 'node "no-such-node" not found' in gone.stderr
    assert len(list((tmp_path / ".state" / "gputui" / "evidence").iterdir())) == 1


class _Api:
    """The apiserver's answers for the node and its pods, with a secret planted and hostile text everywhere."""

    def __init__(self, node: str) -> None:
        self.node = node

    def request(self, method: str, path: str, query: Any = None) -> dict[str, Any]:
        if path == f"/api/v1/nodes/{self.node}":
            return {"kind": "Node", "metadata": {
                "name": self.node, "labels": {"evil\x1b]0;x\x07": "../../etc/passwd"},
                "annotations": {"example.com/token": SECRET, "gputui.io/cordon-record": "\x1b[2J\u202eevil"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:x": {}}}]},
                "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "\x1b[31mred",
                                           "message": "line\nbreak"}]}}
        if path == "/api/v1/pods":
            return {"items": [{
                "metadata": {"name": "../../evil\x1b[2J", "namespace": "llm",
                             "annotations": {"example.com/config": f"key={SECRET}"}},
                "spec": {"nodeName": self.node, "containers": [{
                    "name": "server", "image": "vllm", "command": ["serve", f"--api-key={SECRET}"],
                    "args": [SECRET], "env": [{"name": "HF_TOKEN", "value": SECRET},
                                              {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "x", "key": "y"}}}],
                    "livenessProbe": {"httpGet": {"httpHeaders": [{"name": "Authorization", "value": SECRET}]}}}]},
                "status": {"phase": "Running", "containerStatuses": [
                    {"name": "server", "state": {"terminated": {"reason": "Error", "message": SECRET}}}]}}]}
        raise AssertionError(path)


class _Reader:
    def __init__(self, cluster: DemoCluster, node: str) -> None:
        self.cluster, self.conn = cluster, _Api(node)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)


def test_secrets_and_hostile_text_from_the_cluster_stay_data(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    cluster = DemoCluster(seed=7, clock=lambda: 1_800_000_000.0)
    backend = Backend(reader=_Reader(cluster, XID_NODE), writer=None, context="demo", simulated=True)
    files = members_of(archive(gather(backend, XID_NODE)))
    assert all(n.removeprefix("evidence/") in FIXED or n.startswith("evidence/dcgm/DCGM_") for n in files), files
    for name, body in files.items():
        assert SECRET.encode() not in body, name
        assert b"\x1b" not in body and "\u202e".encode() not in body, name  # escaped in JSON, pictured in the summary
    node = json.loads(files["evidence/node.json"])
    assert "managedFields" not in node["metadata"]
    assert node["metadata"]["annotations"]["example.com/token"].startswith("<value left out")
    assert node["metadata"]["annotations"]["gputui.io/cordon-record"] == "\x1b[2J\u202eevil"  # kept, escaped
    [pod] = json.loads(files["evidence/pods.json"])
    container = pod["spec"]["containers"][0]
    assert container["env"] == ["HF_TOKEN", "FROM_SECRET"] and "args" not in container and "command" not in container
    assert container["probes"]["livenessProbe"] is True
    assert pod["metadata"]["name"] == "../../evil\x1b[2J"  # a name is data in the JSON, never a file's name
    assert "../../evil" in files["evidence/SUMMARY.md"].decode()  # shown, its ESC pictured


def members_of(body: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}

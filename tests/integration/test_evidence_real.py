"""`gputui evidence NODE` against the real control plane and Debian's Prometheus scraping series shaped as
dcgm-exporter writes them (issue 37 item 5): the bundle read back and each part checked against the objects the
apiserver holds, the node's DCGM series there for every GPU of it, the pod's GPU from DCGM's attribution, the
cordon gputui made in the audit part and among the holders. A secret value planted in a Secret, a pod's env value
and args and in a node and a pod annotation appears in no file of the bundle. With Prometheus unreachable the
bundle is still written, every DCGM part listed as missing with the reason."""

from __future__ import annotations

import json
import stat
import tarfile

from kubernetes import client

from tests.support.gputui_cli import run
from tests.support.procs import wait_until

NS = "t-evidence"
NODE = "ev-node-1"
POD = "ev-server"
SECRET = "planted-7d1c0f-secret-value"


def members(path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name.removeprefix("evidence/"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _pod() -> dict:
    return {"metadata": {"name": POD, "namespace": NS, "annotations": {"example.com/config": f"token={SECRET}"},
                         "labels": {"app": "ev"}},
            "spec": {"nodeName": NODE, "containers": [{
                "name": "server", "image": "vllm/vllm-openai:v0.9.0", "args": ["--api-key", SECRET],
                "env": [{"name": "HF_TOKEN", "value": SECRET},
                        {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "ev-secret", "key": "token"}}}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                "tolerations": [{"operator": "Exists"}]}}


def test_the_bundle_of_a_real_node_holds_each_part_and_no_secret(cluster, fake_kubelet, prometheus, dcgm_exporter,
                                                                 tmp_path):
    core = client.CoreV1Api(cluster.admin_client())
    kube = ("--kubeconfig", str(cluster.admin_kubeconfig))
    try:
        fake_kubelet.add_node(NODE, gpus=2)
        dcgm_exporter.add_node(NODE, gpus=2)
        dcgm_exporter.set(NODE, 0, xid=79, util=55)
        core.create_namespace({"metadata": {"name": NS}})
        core.create_namespaced_secret(NS, {"metadata": {"name": "ev-secret"}, "stringData": {"token": SECRET}})
        core.patch_node(NODE, {"metadata": {"annotations": {"example.com/vault-token": SECRET}}})
        core.create_namespaced_pod(NS, _pod())
        wait_until(lambda: core.read_namespaced_pod(POD, NS).status.phase == "Running", 60, what="the pod running")
        dcgm_exporter.assign(NODE, 0, NS, POD, "server")
        core.create_namespaced_event("default", {
            "metadata": {"name": "ev-xid"}, "type": "Warning", "reason": "SysLogsXIDError",
            "message": "XID 79 on GPU 0", "involvedObject": {"kind": "Node", "name": NODE},
            "firstTimestamp": "2026-12-03T00:00:00Z", "lastTimestamp": "2026-12-03T00:00:00Z"})
        wait_until(lambda: len(prometheus.query(f'DCGM_FI_DEV_XID_ERRORS{{Hostname="{NODE}"}} == 79')) == 1
                   and prometheus.query(f'DCGM_FI_DEV_GPU_UTIL{{Hostname="{NODE}",pod="{POD}"}}'), 30,
                   what="the node's series, attributed, in Prometheus")
        cordon = run("cordon", NODE, *kube, "--reason", "XID 79 on GPU 0", "--ticket", "RMA-7", home=tmp_path)
        assert cordon.returncode == 0, cordon.stderr

        target = tmp_path / "bundle.tar.gz"
        out = run("evidence", NODE, *kube, "--prometheus", prometheus.url, "-o", str(target), home=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "SIMULATED" not in out.stdout and f"written to {target}" in out.stdout
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        files = members(target)

        for name, body in files.items():  # the planted value nowhere, whatever carried it
            assert SECRET.encode() not in body, name
        api_node = core.read_node(NODE).to_dict()
        node = json.loads(files["node.json"])
        assert node["metadata"]["uid"] == api_node["metadata"]["uid"] and "managedFields" not in node["metadata"]
        assert node["metadata"]["annotations"]["example.com/vault-token"].startswith("<value left out")
        assert "RMA-7" in node["metadata"]["annotations"]["gputui.io/cordon"]  # gputui's own record, kept
        assert json.loads(files["labels.json"]) == api_node["metadata"]["labels"]
        assert {c["type"] for c in json.loads(files["conditions.json"])} == \
            {c["type"] for c in api_node["status"]["conditions"]}
        assert node["spec"]["unschedulable"] is True
        assert any(e["reason"] == "SysLogsXIDError" and e["object"] == f"Node/{NODE}"
                   for e in json.loads(files["events.json"]))

        [pod] = [p for p in json.loads(files["pods.json"]) if p["metadata"]["name"] == POD]
        api_pod = core.read_namespaced_pod(POD, NS)
        assert pod["metadata"]["uid"] == api_pod.metadata.uid
        [container] = pod["spec"]["containers"]
        assert container["env"] == ["HF_TOKEN", "FROM_SECRET"] and "args" not in container
        assert pod["metadata"]["annotations"]["example.com/config"].startswith("<value left out")
        assert pod["gputui"]["gpu_units"] == {"nvidia.com/gpu": 1}
        assert pod["dcgm_gpus"] == [0]  # dcgm-exporter's attribution of GPU 0 to the pod

        actors = json.loads(files["actors.json"])
        [held] = actors["disruptions"]  # who holds it: the cordon made through gputui, its reason and ticket
        assert held["actor"] == "person" and "XID 79 on GPU 0" in held["why"] and "RMA-7" in held["why"]
        assert "XID 79 on GPU 0" in files["SUMMARY.md"].decode().split("## Who holds it", 1)[1]
        faults = {g["index"]: g for g in json.loads(files["faults.json"])}
        assert set(faults) == {0, 1} and faults[0]["faults"][0]["code"] == 79
        util = json.loads(files["dcgm/DCGM_FI_DEV_GPU_UTIL.json"])
        assert sorted(s["metric"]["gpu"] for s in util) == ["0", "1"]
        assert all(s["metric"]["Hostname"] == NODE and s["values"] for s in util)
        xid = json.loads(files["dcgm/DCGM_FI_DEV_XID_ERRORS.json"])
        assert any(s["metric"]["gpu"] == "0" and s["values"][-1][1] == "79" for s in xid)
        audit = json.loads(files["audit.json"])
        assert any(e["action"] == "cordon" and e["target"] == f"node/{NODE}" for e in audit["entries"])
        summary = files["SUMMARY.md"].decode()
        assert f"# Evidence: node {NODE}" in summary and "XID 79" in summary and f"{NS}/{POD}" in summary
        assert "cordoned" in summary and "MISSING" not in summary

        # Prometheus gone: the bundle is still written, each DCGM part named missing with why; exit 0
        dark = tmp_path / "dark.tar.gz"
        out = run("evidence", NODE, *kube, "--prometheus", "http://127.0.0.1:9", "-o", str(dark), home=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "missing dcgm/DCGM_FI_DEV_GPU_UTIL.json" in out.stderr and "parts missing" in out.stdout
        files = members(dark)
        assert "node.json" in files and "dcgm/DCGM_FI_DEV_GPU_UTIL.json" not in files
        manifest = files["MANIFEST"].decode()
        assert "\ndcgm/DCGM_FI_DEV_GPU_UTIL.json\t" in manifest.split("MISSING", 1)[1]
    finally:
        core.delete_namespace(NS)
        dcgm_exporter.remove_node(NODE)
        fake_kubelet.remove_node(NODE)

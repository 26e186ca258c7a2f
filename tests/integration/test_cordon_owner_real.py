"""Cordons carry an owner (issue 40 item 2) on the real control plane: `gputui cordon --reason` writes its record
on the Node through the real apiserver in the same write as the cordon, and `gputui uncordon` of a node NVSentinel
quarantined (its marks written field for field as docs/disruption-actors.md §1 says fault-quarantine writes them)
is refused and leaves the node cordoned, until --override-owner, which the audit log names."""

from __future__ import annotations

import json
import time

from kubernetes import client

from tests.support.gputui_cli import run


def _audit(home) -> list[dict]:
    return [json.loads(line) for line in (home / ".state" / "gputui" / "audit.jsonl").read_text().splitlines()]


def test_cordon_records_its_owner_and_uncordon_refuses_nvsentinels_quarantine(cluster, fake_kubelet, tmp_path):
    core = client.CoreV1Api(cluster.harness_client())
    kubeconfig = ("--kubeconfig", str(cluster.admin_kubeconfig))
    names = ["own-mine", "own-nvs"]
    quarantined = int(time.time()) - 3600
    # §1 fault-quarantine: cordon; labels under the default labelPrefix k8saas.nvidia.com/ (cordon-by, cordon-reason,
    # cordon-timestamp in Go layout 2006-01-02T15-04-05Z) and the state label; the quarantineHealthEvent annotation
    # (a JSON list of HealthEvents, protobuf Go structs through encoding/json) and quarantineHealthEventIsCordoned.
    event = [{"version": 1, "agent": "gpu-health-monitor", "componentClass": "GPU", "checkName": "GpuXidError",
              "isFatal": True, "isHealthy": False, "message": "XID 79 GPU has fallen off the bus",
              "recommendedAction": 24, "errorCode": ["79"],
              "entitiesImpacted": [{"entityType": "GPU", "entityValue": "0"}],
              "generatedTimestamp": {"seconds": quarantined - 5, "nanos": 0}, "nodeName": "own-nvs"}]
    nvs_labels = {"k8saas.nvidia.com/cordon-by": "NVSentinel",
                  "k8saas.nvidia.com/cordon-reason": "GPU-fatal-error-ruleset",
                  "k8saas.nvidia.com/cordon-timestamp": time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime(quarantined)),
                  "dgxc.nvidia.com/nvsentinel-state": "quarantined"}
    try:
        for name in names:
            fake_kubelet.add_node(name, gpus=2, labels={"gputui.test/pool": "own",
                                                        **(nvs_labels if name == "own-nvs" else {})})
        core.patch_node("own-nvs", {"spec": {"unschedulable": True}, "metadata": {"annotations": {
            "quarantineHealthEvent": json.dumps(event), "quarantineHealthEventIsCordoned": "True"}}})

        # A cordon with a reason: the record is on the Node the apiserver serves, beside spec.unschedulable.
        out = run("cordon", "own-mine", *kubeconfig, "--reason", "bad fan on GPU 1", "--ticket", "OPS-7",
                  "--expires", "2d", home=tmp_path)
        assert out.returncode == 0, out.stderr
        mine = core.read_node("own-mine")
        assert mine.spec.unschedulable is True
        record = json.loads(mine.metadata.annotations["gputui.io/cordon"])
        cordon = [e for e in _audit(tmp_path) if e["phase"] == "result"][-1]
        assert (record["by"], record["reason"], record["ticket"]) == (cordon["identity"], "bad fan on GPU 1", "OPS-7")
        assert set(record) == {"by", "reason", "ticket", "since", "expires"}

        # NVSentinel's quarantine: refused, one line naming it; the node stays cordoned, nothing audited.
        before = len(_audit(tmp_path))
        out = run("uncordon", "own-nvs", *kubeconfig, home=tmp_path)
        assert out.returncode == 1, out.stdout + out.stderr
        assert out.stderr.count("\n") == 1
        assert "own-nvs is held by another actor: NVSentinel quarantined it: GpuXidError: XID 79" in out.stderr
        assert core.read_node("own-nvs").spec.unschedulable is True
        assert len(_audit(tmp_path)) == before

        # With --override-owner: uncordoned, and the audit entry names whom it overrode.
        out = run("uncordon", "own-nvs", *kubeconfig, "--override-owner", home=tmp_path)
        assert out.returncode == 0, out.stderr
        assert not core.read_node("own-nvs").spec.unschedulable
        result = [e for e in _audit(tmp_path) if e["phase"] == "result"][-1]
        assert (result["action"], result["target"], result["result"]) == ("uncordon", "node/own-nvs", "ok")
        assert [(h["actor"], h["phase"], h["since"]) for h in result["params"]["override_owner"]] == [
            ("nvsentinel", "quarantined", quarantined)]

        # One's own cordon: uncordoned without asking, its record removed in the same write.
        out = run("uncordon", "own-mine", *kubeconfig, home=tmp_path)
        assert out.returncode == 0, out.stderr
        mine = core.read_node("own-mine")
        assert not mine.spec.unschedulable and "gputui.io/cordon" not in (mine.metadata.annotations or {})
    finally:
        for name in names:
            fake_kubelet.remove_node(name)

"""Who is disrupting each node (issue 40, first slice), on the real control plane: each actor's marks written on
real Node objects field for field as that actor writes them (docs/disruption-actors.md, the section beside each),
read back by `gputui nodes -o json` and `gputui disruptions -o json` through the real apiserver. None of these controllers runs here: what is tested
is gputui's reading of what they write."""

from __future__ import annotations

import calendar
import json
import time
from dataclasses import asdict

from kubernetes import client

from gputui.ops.drain import lease, options
from tests.support.gputui_cli import run

DAY = 86400


def _sorted(disruptions: list[dict]) -> list[tuple]:
    return [(x["actor"], x["phase"], x["since"], bool(x["stuck"])) for x in disruptions]


def test_nodes_json_names_each_actor_from_what_it_writes_on_the_node(cluster, fake_kubelet, tmp_path):
    core = client.CoreV1Api(cluster.harness_client())
    now = int(time.time())
    two_days = now - 2 * DAY
    names = ["dx-ca", "dx-cand", "dx-karp", "dx-nvs", "dx-gpuop", "dx-gputui", "dx-person", "dx-quiet"]
    # §4 cluster autoscaler (utils/taints/taints.go MarkToBeDeleted / MarkDeletionCandidate): value =
    # fmt.Sprint(time.Now().Unix()); ToBeDeleted also cordons (--cordon-node-before-terminating, default true).
    taints = {
        "dx-ca": [{"key": "ToBeDeletedByClusterAutoscaler", "value": str(now - 120), "effect": "NoSchedule"}],
        "dx-cand": [{"key": "DeletionCandidateOfClusterAutoscaler", "value": str(two_days),
                     "effect": "PreferNoSchedule"}],
        # §3 Karpenter (pkg/apis/v1/taints.go): karpenter.sh/disrupted:NoSchedule, no value.
        "dx-karp": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}],
    }
    # §1 NVSentinel fault-quarantine: cordon, labels under the default labelPrefix k8saas.nvidia.com/ (cordon-by,
    # cordon-reason, cordon-timestamp in Go layout 2006-01-02T15-04-05Z), the state label as node-drainer leaves it
    # on a failed drain, and the quarantineHealthEvent annotation (a JSON list of HealthEvents, protobuf Go structs
    # through encoding/json: camelCase names, the enum as its number, generatedTimestamp as {seconds, nanos}).
    # The reason's exact wording for a rule match is not in the note: a rule-set-like word stands in.
    quarantined = two_days
    event = [{"version": 1, "agent": "gpu-health-monitor", "componentClass": "GPU", "checkName": "GpuXidError",
              "isFatal": True, "isHealthy": False, "message": "XID 79 GPU has fallen off the bus",
              "recommendedAction": 24, "errorCode": ["79"],
              "entitiesImpacted": [{"entityType": "GPU", "entityValue": "0"}],
              "generatedTimestamp": {"seconds": quarantined - 5, "nanos": 0}, "nodeName": "dx-nvs"}]
    nvs_labels = {"k8saas.nvidia.com/cordon-by": "NVSentinel",
                  "k8saas.nvidia.com/cordon-reason": "GPU-fatal-error-ruleset",
                  "k8saas.nvidia.com/cordon-timestamp": time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime(quarantined)),
                  "dgxc.nvidia.com/nvsentinel-state": "drain-failed"}
    nvs_notes = {"quarantineHealthEvent": json.dumps(event), "quarantineHealthEventIsCordoned": "True"}
    # §7 GPU Operator (k8s-operator-libs pkg/upgrade/consts.go): the state label, and the wait state's start time
    # as strconv.FormatInt(time.Now().Unix()).
    gpuop_labels = {"nvidia.com/gpu-driver-upgrade-state": "wait-for-jobs-required"}
    gpuop_notes = {"nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time": str(two_days)}
    # gputui's own drain, as gputui.ops.drain writes it (record_values, the phase, the lease), its holder silent
    # for ten minutes: an interrupted drain.
    started = calendar.timegm(time.gmtime(now - 900))
    holder = lease.Holder("alice", "elsewhere", 4242, "abc", float(now - 600))
    gputui_notes = {**options.record_values(options.DrainOptions(), "alice", started, started + 900),
                    options.PHASE: "waiting", lease.LEASE: json.dumps(asdict(holder), sort_keys=True)}
    try:
        for name in names:
            labels = {"gputui.test/pool": "dx", **(nvs_labels if name == "dx-nvs" else {}),
                      **(gpuop_labels if name == "dx-gpuop" else {})}
            fake_kubelet.add_node(name, gpus=2, labels=labels, taints=taints.get(name))
        patches = {
            "dx-ca": {"spec": {"unschedulable": True}},
            "dx-karp": {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}},
            "dx-nvs": {"spec": {"unschedulable": True}, "metadata": {"annotations": nvs_notes}},
            "dx-gpuop": {"spec": {"unschedulable": True}, "metadata": {"annotations": gpuop_notes}},
            "dx-gputui": {"spec": {"unschedulable": True}, "metadata": {"annotations": gputui_notes}},
            "dx-person": {"spec": {"unschedulable": True}},
        }
        for name, patch in patches.items():
            core.patch_node(name, patch)

        out = run("nodes", "--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json", home=tmp_path)
        assert out.returncode == 0, out.stderr
        got = {n["name"]: n["disruptions"] for n in json.loads(out.stdout) if n["name"] in names}
        assert {name: _sorted(x) for name, x in got.items()} == {
            "dx-ca": [("cluster-autoscaler", "deleting", now - 120, False)],
            "dx-cand": [("cluster-autoscaler", "deletion-candidate", two_days, False)],
            "dx-karp": [("karpenter", "disrupting", None, False)],
            "dx-nvs": [("nvsentinel", "drain-failed", quarantined, True)],
            "dx-gpuop": [("gpu-operator", "wait-for-jobs-required", two_days, True)],
            "dx-gputui": [("gputui", "waiting", started, True)],
            "dx-person": [("person", "cordoned", None, False)],
            "dx-quiet": [],
        }
        assert "do-not-disrupt=true" in got["dx-karp"][0]["why"]
        assert "GpuXidError: XID 79 GPU has fallen off the bus" in got["dx-nvs"][0]["why"]
        assert "GPU-fatal-error-ruleset" in got["dx-nvs"][0]["why"]
        assert got["dx-gputui"][0]["stuck"].startswith("interrupted: its drain lease was last renewed")
        assert "owner unknown" in got["dx-person"][0]["why"]

        # `gputui disruptions -o json` (issue 40 items 1 and 6): the same holds from the same real Node objects,
        # one row per node and actor, stuck ones first, then the oldest, undated ones after every dated one.
        out = run("disruptions", "--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json", home=tmp_path)
        assert out.returncode == 0, out.stderr
        listed = json.loads(out.stdout)
        assert listed["simulated"] is False and listed["known"] is True
        rows = [r for r in listed["disruptions"] if r["node"] in names]
        assert [(r["node"], r["actor"], r["phase"], r["since"], bool(r["stuck"])) for r in rows] == [
            # stuck: the oldest first (NVSentinel's quarantine and the operator's wait both date from two days
            # ago, node A→Z between them), then gputui's interrupted drain of 15 minutes
            ("dx-gpuop", "gpu-operator", "wait-for-jobs-required", two_days, True),
            ("dx-nvs", "nvsentinel", "drain-failed", quarantined, True),
            ("dx-gputui", "gputui", "waiting", started, True),
            # not stuck: the candidate of two days, the deletion of two minutes, then the undated
            ("dx-cand", "cluster-autoscaler", "deletion-candidate", two_days, False),
            ("dx-ca", "cluster-autoscaler", "deleting", now - 120, False),
            ("dx-karp", "karpenter", "disrupting", None, False),
            ("dx-person", "person", "cordoned", None, False),
        ]
        for r in rows:
            assert r["why"] and (r["age_s"] is None) == (r["since"] is None)
            assert r["age_s"] is None or r["age_s"] >= 0
    finally:
        for name in names:
            fake_kubelet.remove_node(name)

"""NVIDIA NVSentinel janitor's actions read on the real control plane (issue 40 item 1), with their CRDs as
transcribed in tests/support/crds/ (the module proxy refuses every NVSentinel module; each file's header names its
source): a RebootNode, a TerminateNode and a GPUReset, each written as NVSentinel writes it — the spec as
fault-remediation's template creates it, status through the status subresource as janitor's Status().Update and
Status().Patch do, with metav1's shapes (field-by-field sources: tests/unit/test_nvsentinel_janitor.py's docstring).
No janitor runs here (none can be built).

Checked: before the CRDs exist the three kinds are "not installed"; then `gputui disruptions -o json` and `gputui
nodes -o json` show one NVSentinel hold per node with the open action's phase, since and why (a done one is history:
not in it), a janitor in manual mode stuck, a condition message with terminal escapes escaped in JSON and made
visible in the table; docs/rbac.yaml's role reads the three kinds; the same role without its janitor rule leaves
them unknown (never "none")."""

from __future__ import annotations

import calendar
import json
import time

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.crds import TRANSCRIBED_CRDS, create_cluster_custom, install_crd, uninstall_crd, write_status
from tests.support.gputui_cli import run
from tests.support.rbac import bound_role, kubeconfig_for, role_rules, wait_rbac

GROUP, VERSION = "janitor.dgxc.nvidia.com", "v1alpha1"
PLURALS = ("rebootnodes", "terminatenodes", "gpuresets")
KINDS = ("RebootNode", "TerminateNode", "GPUReset")
NS = "t-nvs-janitor"
REBOOT_NODE, RESET_NODE, MANUAL_NODE = "nv-reboot", "nv-reset", "nv-manual"
UUID = "GPU-3f2a1b4c-5d6e-7f80-9a1b-2c3d4e5f6a7b"
ESC = "\x1b]0;pwned\x07"  # a terminal title sequence, as anyone who may write the status could


def k8s_time(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def cond(kind: str, status: str, reason: str, message: str, at: float) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": k8s_time(at)}


def created_at(obj: dict) -> float:
    return float(calendar.timegm(time.strptime(obj["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")))


def create(api, kind: str, node: str, event: str, spec: dict | None = None) -> dict:
    """As fault-remediation's template creates one (charts/fault-remediation/values.yaml, gpureset-template.yaml)."""
    plural = PLURALS[KINDS.index(kind)]
    return create_cluster_custom(api, plural, {
        "metadata": {"name": f"maintenance-{node}-{event}", "labels": {"app.kubernetes.io/managed-by": "nvsentinel"},
                     "annotations": {"nvsentinel.nvidia.com/trace-id": "4bf92f3577b34da6a3ce929d0e0e4736",
                                     "nvsentinel.nvidia.com/span-id": "00f067aa0ba902b7",
                                     "nvsentinel.nvidia.com/ttl": "336h"}},
        "spec": {"nodeName": node, **(spec if spec is not None else {"force": False})}})


def quarantine(core: client.CoreV1Api, node: str, state: str, at: float) -> None:
    """fault-quarantine's cordon and marks, the state label fault-remediation moves (docs §1)."""
    core.patch_node(node, {
        "metadata": {
            "labels": {"k8saas.nvidia.com/cordon-by": "NVSentinel", "dgxc.nvidia.com/nvsentinel-state": state,
                       "k8saas.nvidia.com/cordon-timestamp": time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime(at))},
            "annotations": {"quarantineHealthEventIsCordoned": "True", "quarantineHealthEvent": json.dumps([{
                "checkName": "GpuXidError", "isFatal": True, "message": "XID 79 GPU has fallen off the bus",
                "nodeName": node, "generatedTimestamp": {"seconds": int(at)}}])}},
        "spec": {"unschedulable": True}})


def snapshot_of(kubeconfig):
    from gputui.backends.kube_backend import live_backend
    from gputui.settings import Settings
    backend = live_backend(Settings(kubeconfig=str(kubeconfig), read_only=True))
    try:
        return backend.reader.snapshot()
    finally:
        backend.close()


def test_janitor_actions_show_in_nvsentinels_hold_with_phase_since_and_why_and_forbidden_is_unknown(
        cluster, fake_kubelet, tmp_path):
    api = cluster.harness_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    limited, full = "t-nvs-no-janitor", "t-nvs-janitor-full"
    now = time.time()
    try:
        core.create_namespace({"metadata": {"name": NS}})
        for name in (REBOOT_NODE, RESET_NODE, MANUAL_NODE):
            fake_kubelet.add_node(name, gpus=8, labels={"gputui.test/pool": "nv-janitor"})
        before = snapshot_of(cluster.admin_kubeconfig)
        assert before.actors is not None
        assert {k: before.actors.reads[k] for k in KINDS} == dict.fromkeys(KINDS, "not installed")

        for plural in PLURALS:
            assert TRANSCRIBED_CRDS[plural][0] == GROUP
            install_crd(api, plural)
        # nv-reboot: quarantined and drained an hour ago on XID 79; fault-remediation created a RebootNode; janitor
        # seeded its conditions and start time, sent the signal (the CSP's request id in the message), and waits.
        # An earlier GPUReset on the same node is done (completionTime): history, not part of the hold.
        quarantine(core, REBOOT_NODE, "remediating", now - 3600)
        old = create(api, "GPUReset", REBOOT_NODE, "5b7c2d", {"selector": {"uuids": [UUID]}})
        t0 = created_at(old)
        write_status(api, "gpuresets", None, old["metadata"]["name"], {
            "phase": "Failed", "startTime": k8s_time(t0), "completionTime": k8s_time(t0 + 1), "conditions": [
                cond("Ready", "True", "ReadyForReset", "Node ready for GPU reset", t0),
                cond("Complete", "True", "ResetJobFailed", "GPU reset failed", t0 + 1)]})
        reboot = create(api, "RebootNode", REBOOT_NODE, "6a1f0c")
        t1 = created_at(reboot)
        written = write_status(api, "rebootnodes", None, reboot["metadata"]["name"], {
            "startTime": k8s_time(t1), "conditions": [
                cond("SignalSent", "True", "Succeeded", "operation-1788", t1),
                cond("NodeReady", "Unknown", "Initializing", "Node ready state not yet determined", t1)]})
        assert [c["reason"] for c in written["status"]["conditions"]] == ["Succeeded", "Initializing"]

        # nv-reset: a GPUReset of one GPU, janitor tearing the GPU services down (its message carries escapes).
        reset = create(api, "GPUReset", RESET_NODE, "7e2b9a", {"selector": {"uuids": [UUID]}})
        custom.patch_cluster_custom_object(GROUP, VERSION, "gpuresets", reset["metadata"]["name"],
                                           {"metadata": {"finalizers": ["janitor.dgxc.nvidia.com/finalizer"]}})
        t2 = created_at(reset)
        write_status(api, "gpuresets", None, reset["metadata"]["name"], {
            "phase": "InProgress", "startTime": k8s_time(t2), "conditions": [
                cond("Ready", "True", "ReadyForReset", "Node ready for GPU reset", t2),
                cond("ServicesTornDown", "False", "TearingDownServices", f"Removing gpu-operator managed services "
                     f"{ESC}", t2)]})

        # nv-manual: a TerminateNode with janitor in manual mode: it sends no signal, someone else must.
        quarantine(core, MANUAL_NODE, "remediating", now - 600)
        term = create(api, "TerminateNode", MANUAL_NODE, "9c4d1e")
        t3 = created_at(term)
        write_status(api, "terminatenodes", None, term["metadata"]["name"], {
            "startTime": k8s_time(t3), "conditions": [
                cond("SignalSent", "Unknown", "Initializing", "Terminate signal not yet sent", t3),
                cond("NodeTerminated", "Unknown", "Initializing", "Node terminated state not yet determined", t3),
                cond("ManualMode", "True", "OutsideActorRequired",
                     "Janitor is in manual mode, outside actor required to send terminate signal", t3)]})

        admin = ("--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json")
        out = run("disruptions", *admin, home=tmp_path)
        assert out.returncode == 0, out.stderr
        listed = json.loads(out.stdout)
        assert listed["known"] is True
        assert {k: listed["sources"][k] for k in KINDS} == dict.fromkeys(KINDS, "read")
        assert "other" not in listed["sources"]
        rows = [r for r in listed["disruptions"] if r["node"] in (REBOOT_NODE, RESET_NODE, MANUAL_NODE)]
        assert sorted((r["node"], r["actor"]) for r in rows) == \
            [(MANUAL_NODE, "nvsentinel"), (REBOOT_NODE, "nvsentinel"), (RESET_NODE, "nvsentinel")]
        by = {r["node"]: r for r in rows}
        r, g, m = by[REBOOT_NODE], by[RESET_NODE], by[MANUAL_NODE]
        # Since the quarantine (whole seconds), the RebootNode's phase; the done GPUReset is not in it.
        assert (r["phase"], r["since"], r["cordons"], r["stuck"]) == ("SignalSent", float(int(now - 3600)), True, None)
        assert r["why"].startswith(f"RebootNode {reboot['metadata']['name']}: janitor is to reboot the node; signal "
                                   "sent to the cloud provider (request operation-1788); waiting for the node to be "
                                   "Ready again; quarantined by NVSentinel")
        assert old["metadata"]["name"] not in r["why"]
        # Alone on an uncordoned node: since janitor took it up; no cordon.
        assert (g["phase"], g["since"], g["cordons"], g["stuck"]) == ("TearingDownServices", t2, False, None)
        assert g["why"] == (f"GPUReset {reset['metadata']['name']}: janitor is to reset {UUID}; Removing "
                            f"gpu-operator managed services {ESC}")
        assert m["phase"] == "ManualMode" and m["stuck"].startswith("janitor is in manual mode: it sends no terminate")
        assert "\x1b" not in out.stdout  # JSON carries the raw value, escaped
        table = run("disruptions", "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path)
        assert table.returncode == 0, table.stderr
        assert "\x1b" not in table.stdout and "\x07" not in table.stdout and RESET_NODE in table.stdout

        out = run("nodes", *admin, home=tmp_path)
        assert out.returncode == 0, out.stderr
        nodes = {n["name"]: n["disruptions"] for n in json.loads(out.stdout)
                 if n["name"] in (REBOOT_NODE, RESET_NODE, MANUAL_NODE)}
        assert {k: [(x["actor"], x["phase"], x["since"], x["why"]) for x in v] for k, v in nodes.items()} == {
            REBOOT_NODE: [("nvsentinel", "SignalSent", float(int(now - 3600)), r["why"])],
            RESET_NODE: [("nvsentinel", "TearingDownServices", t2, g["why"])],
            MANUAL_NODE: [("nvsentinel", "ManualMode", float(int(now - 600)), m["why"])]}
        assert nodes[MANUAL_NODE][0]["stuck"] == m["stuck"]

        # docs/rbac.yaml's role reads the three kinds; without its janitor rule they are unknown.
        _, rules = role_rules()
        kept = [rule for rule in rules if GROUP not in rule.get("apiGroups", [])]
        assert len(kept) == len(rules) - 1, "docs/rbac.yaml has no janitor rule"
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
            bound_role(full, NS, rules) + bound_role(limited, NS, kept)).encode())
        kubeconfigs = {}
        for name in (full, limited):
            token = cluster.kubectl("-n", NS, "create", "token", name, "--duration", "1h").stdout.decode().strip()
            kubeconfigs[name] = kubeconfig_for(cluster, tmp_path / f"{name}.yaml", token)
            wait_rbac(cluster, kubeconfigs[name])
        seen = snapshot_of(kubeconfigs[full])
        assert seen.actors is not None and {k: seen.actors.reads[k] for k in KINDS} == dict.fromkeys(KINDS, "read")

        out = run("disruptions", "--kubeconfig", str(kubeconfigs[limited]), "--read-only", "-o", "json",
                  home=tmp_path)
        assert out.returncode == 0, out.stderr
        listed = json.loads(out.stdout)
        assert listed["known"] is False
        for kind in KINDS:
            assert listed["sources"][kind].startswith("unknown: forbidden"), listed["sources"]
        # The Node marks still say NVSentinel holds the quarantined nodes; the actions' phases are not known.
        phases = {x["node"]: x["phase"] for x in listed["disruptions"]
                  if x["node"] in (REBOOT_NODE, RESET_NODE, MANUAL_NODE)}
        assert phases == {REBOOT_NODE: "remediating", MANUAL_NODE: "remediating"}
        snap = snapshot_of(kubeconfigs[limited])
        named = {s.name: s.error for s in snap.sources}
        assert {k: named.get(k) for k in KINDS} == dict.fromkeys(KINDS, "unknown: not readable (forbidden)")
        assert named["API"] is None  # the fleet's API is no worse for it
    finally:
        for name in (REBOOT_NODE, RESET_NODE, MANUAL_NODE):
            fake_kubelet.remove_node(name)
        for name in (limited, full):
            cluster.kubectl("delete", "clusterrole,clusterrolebinding", name, "--ignore-not-found", check=False)
        try:  # the finalizer no janitor here would remove
            for obj in custom.list_cluster_custom_object(GROUP, VERSION, "gpuresets")["items"]:
                custom.patch_cluster_custom_object(GROUP, VERSION, "gpuresets", obj["metadata"]["name"],
                                                   {"metadata": {"finalizers": None}})
        except ApiException:
            pass
        for plural in PLURALS:
            uninstall_crd(api, plural)
        core.delete_namespace(NS)

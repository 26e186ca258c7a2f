"""NVIDIA NVSentinel's requests read on the real control plane (issue 40 item 1), with its CRDs as transcribed in
tests/support/crds/ (the module proxy refuses every NVSentinel module; each file's header names its source): an
ExternalRemediationRequest and a MaintenanceRequest, each written as NVSentinel's controllers write it — the spec by
its creator, the finalizer by its reconciler, status through the status subresource as their Status().Update does,
with protojson's shapes (observedGeneration as a string, times with nanoseconds), and the Node marks fault-quarantine,
node-drainer, janitor and lifecycle-manager put on the node (field-by-field sources:
tests/unit/test_nvsentinel_requests.py's docstring). No NVSentinel controller runs here (none can be built).

Checked: before the CRDs exist both kinds are "not installed"; then `gputui disruptions -o json` and `gputui nodes
-o json` show one NVSentinel hold per node with the request's phase and its healthEvent's why, the MR's message
(with terminal escapes in it) escaped in JSON and made visible in the table; docs/rbac.yaml's role reads both; the
same role without its NVSentinel rule leaves both unknown (never "none")."""

from __future__ import annotations

import calendar
import json
import time
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.gputui_cli import run
from tests.support.procs import wait_until
from tests.support.rbac import ROLE_FILE, bound_role, kubeconfig_for, role_rules, wait_rbac

ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION = "nvsentinel.dgxc.nvidia.com", "v1"
PLURALS = ("externalremediationrequests", "maintenancerequests")
NS = "t-nvsentinel"
ERR_NODE, MR_NODE = "nv-err", "nv-mr"
ERR_NAME = "extrr-he-5b7c2d"
ESC = "\x1b]0;pwned\x07"  # a terminal title sequence, as anyone who may create an MR could write


def install_crds(api: client.ApiClient) -> None:
    ext, custom = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    for plural in PLURALS:
        crd = yaml.safe_load((ROOT / f"tests/support/crds/{plural}.{GROUP}.yaml").read_text())
        try:
            ext.create_custom_resource_definition(crd)
        except ApiException as exc:
            if exc.status != 409:
                raise
        wait_until(lambda p=plural: custom.list_cluster_custom_object(GROUP, VERSION, p) is not None, 30,
                   interval=0.2, what=f"{plural}.{GROUP} served")


def uninstall_crds(api: client.ApiClient) -> None:
    for plural in PLURALS:
        try:
            client.ApiextensionsV1Api(api).delete_custom_resource_definition(f"{plural}.{GROUP}")
        except ApiException as exc:
            if exc.status != 404:
                raise


def proto_time(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".250000000Z"  # protojson, timestamppb.Now()


def condition(kind: str, status: str, reason: str, message: str, at: float) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "observedGeneration": "1",
            "lastTransitionTime": proto_time(at)}


def put_status(custom: client.CustomObjectsApi, plural: str, name: str, status: dict) -> dict:
    """Status().Update: the object as read, its status replaced, PUT to the status subresource."""
    obj = custom.get_cluster_custom_object(GROUP, VERSION, plural, name)
    obj["status"] = status
    return custom.replace_cluster_custom_object_status(GROUP, VERSION, plural, name, obj)


def add_finalizer(custom: client.CustomObjectsApi, plural: str, name: str, finalizer: str) -> None:
    custom.patch_cluster_custom_object(GROUP, VERSION, plural, name, {"metadata": {"finalizers": [finalizer]}})


def created_at(obj: dict) -> float:
    return float(calendar.timegm(time.strptime(obj["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")))


def quarantine(core: client.CoreV1Api, node: str, state: str, at: float, check: str, message: str) -> None:
    """fault-quarantine's cordon and marks, node-drainer's/fault-remediation's state label (docs §1)."""
    core.patch_node(node, {
        "metadata": {
            "labels": {"k8saas.nvidia.com/cordon-by": "NVSentinel", "dgxc.nvidia.com/nvsentinel-state": state,
                       "k8saas.nvidia.com/cordon-timestamp": time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime(at))},
            "annotations": {"quarantineHealthEventIsCordoned": "True", "quarantineHealthEvent": json.dumps([{
                "version": 1, "agent": "gpu-health-monitor", "componentClass": "GPU", "checkName": check,
                "isFatal": True, "isHealthy": False, "message": message, "nodeName": node,
                "generatedTimestamp": {"seconds": int(at)}}])}},
        "spec": {"unschedulable": True}})


def role_without_nvsentinel(name: str) -> list[dict]:
    """docs/rbac.yaml's ClusterRole less its NVSentinel rule, bound to a ServiceAccount of NS."""
    _, rules = role_rules()
    kept = [r for r in rules if GROUP not in r.get("apiGroups", [])]
    assert len(kept) == len(rules) - 1, "docs/rbac.yaml has no NVSentinel rule"
    return bound_role(name, NS, kept)


def snapshot_of(kubeconfig: Path):
    from gputui.backends.kube_backend import live_backend
    from gputui.settings import Settings
    backend = live_backend(Settings(kubeconfig=str(kubeconfig), read_only=True))
    try:
        return backend.reader.snapshot()
    finally:
        backend.close()


def test_nvsentinel_requests_show_as_one_hold_with_phase_and_why_and_forbidden_is_unknown(
        cluster, fake_kubelet, tmp_path):
    api = cluster.harness_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    limited_role, full_role = "t-nvs-no-nvsentinel", "t-nvs-full"
    now = time.time()
    try:
        core.create_namespace({"metadata": {"name": NS}})
        for name in (ERR_NODE, MR_NODE):
            fake_kubelet.add_node(name, gpus=8, labels={"gputui.test/pool": "nv-actors"})
        # Neither CRD served yet: not installed (the actor cannot be acting here), not unknown, not "none".
        before = snapshot_of(cluster.admin_kubeconfig)
        assert before.actors is not None
        assert before.actors.reads["ExternalRemediationRequest"] == "not installed"
        assert before.actors.reads["MaintenanceRequest"] == "not installed"

        install_crds(api)
        # ERR: NVSentinel quarantined and drained nv-err on an XID 79 an hour ago; fault-remediation created the ERR
        # from its template; janitor added its finalizer, seeded both conditions, released the node (taint =
        # the ERR's name, managed=false) and set Released=True. The external system has not answered.
        quarantine(core, ERR_NODE, "remediating", now - 3600, "GpuXidError", "XID 79 GPU has fallen off the bus")
        err = custom.create_cluster_custom_object(GROUP, VERSION, "externalremediationrequests", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ExternalRemediationRequest",
            "metadata": {"name": ERR_NAME, "labels": {"app.kubernetes.io/managed-by": "nvsentinel"},
                         "annotations": {"nvsentinel.nvidia.com/preserve": "true",
                                         "nvsentinel.nvidia.com/trace-id": "4bf92f3577b34da6a3ce929d0e0e4736",
                                         "nvsentinel.nvidia.com/span-id": "00f067aa0ba902b7"}},
            "spec": {"healthEvent": {
                "version": 1, "agent": "gpu-health-monitor", "componentClass": "GPU", "checkName": "GpuXidError",
                "nodeName": ERR_NODE, "isFatal": True, "message": "XID 79 GPU has fallen off the bus",
                "recommendedAction": "CUSTOM", "customRecommendedAction": "external-remediation",
                "processingStrategy": "EXECUTE_REMEDIATION"}}})
        assert err["spec"]["healthEvent"]["recommendedAction"] == "CUSTOM"  # the schema kept what it was given
        add_finalizer(custom, "externalremediationrequests", ERR_NAME,
                      "nvsentinel.dgxc.nvidia.com/external-remediation-cleanup")
        t = created_at(err)
        core.patch_node(ERR_NODE, {
            "metadata": {"labels": {"nvsentinel.dgxc.nvidia.com/managed": "false"}},
            "spec": {"taints": [{"key": "nvsentinel.dgxc.nvidia.com/external-remediation", "value": ERR_NAME,
                                 "effect": "NoSchedule"}]}})
        written = put_status(custom, "externalremediationrequests", ERR_NAME, {"conditions": [
            condition("NVSentinelOwnershipReleased", "True", "ReleaseTaintApplied",
                      f"applied release taint nvsentinel.dgxc.nvidia.com/external-remediation={ERR_NAME} and "
                      f"managed=false label to node \"{ERR_NODE}\"", t + 1),
            condition("ExternalRemediationComplete", "Unknown", "AwaitingExternalSystem",
                      "External system has not yet reported completion.", t)]})
        assert [c["reason"] for c in written["status"]["conditions"]] == ["ReleaseTaintApplied",
                                                                          "AwaitingExternalSystem"]

        # MR: a requester asked for maintenance on nv-mr; lifecycle-manager added its finalizer and seeded
        # HealthEventEmitted=Unknown, claimed the node (annotation), stamped the event and emitted it (True/Emitted);
        # fault-quarantine then cordoned the node and node-drainer is draining it.
        mr = custom.create_cluster_custom_object(GROUP, VERSION, "maintenancerequests", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "MaintenanceRequest",
            "metadata": {"name": f"maintenance-{MR_NODE}"},
            "spec": {"startTime": proto_time(now + 7200), "healthEvent": {
                "version": 1, "agent": "lifecycle-manager", "componentClass": "Node",
                "checkName": "PlannedMaintenance", "nodeName": MR_NODE, "isHealthy": False, "isFatal": False,
                "recommendedAction": "NONE", "message": f"Planned hardware maintenance {ESC}",
                "errorCode": ["CSP-MAINT-1"],
                "metadata": {"maintenanceRequestRequesterAgent": "my-maintenance-tool"}}}})
        mr_name, mr_created = mr["metadata"]["name"], created_at(mr)
        add_finalizer(custom, "maintenancerequests", mr_name, "nvsentinel.dgxc.nvidia.com/maintenance-request-cleanup")
        put_status(custom, "maintenancerequests", mr_name, {"conditions": [condition(
            "HealthEventEmitted", "Unknown", "Initializing",
            "MaintenanceRequest accepted; preparing to emit health event.", mr_created)]})
        core.patch_node(MR_NODE, {"metadata": {"annotations": {
            "nvsentinel.dgxc.nvidia.com/active-maintenance-request": mr_name}}})
        spec = custom.get_cluster_custom_object(GROUP, VERSION, "maintenancerequests", mr_name)["spec"]
        spec["healthEvent"].update(id=f"he-mr-{mr['metadata']['uid']}", generatedTimestamp=proto_time(mr_created))
        spec["healthEvent"]["metadata"].update(maintenanceRequestName=mr_name,
                                               maintenanceRequestUID=mr["metadata"]["uid"])
        custom.patch_cluster_custom_object(GROUP, VERSION, "maintenancerequests", mr_name, {"spec": spec})
        put_status(custom, "maintenancerequests", mr_name, {"conditions": [condition(
            "HealthEventEmitted", "True", "Emitted", "Submitted health event to platform-connector.", mr_created)]})
        quarantine(core, MR_NODE, "draining", mr_created + 60, "PlannedMaintenance", "Planned hardware maintenance")

        admin = ("--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json")
        out = run("disruptions", *admin, home=tmp_path)
        assert out.returncode == 0, out.stderr
        listed = json.loads(out.stdout)
        assert listed["known"] is True
        assert listed["sources"]["ExternalRemediationRequest"] == listed["sources"]["MaintenanceRequest"] == "read"
        rows = [r for r in listed["disruptions"] if r["node"] in (ERR_NODE, MR_NODE)]
        assert sorted((r["node"], r["actor"]) for r in rows) == [(ERR_NODE, "nvsentinel"), (MR_NODE, "nvsentinel")]
        by = {r["node"]: r for r in rows}
        e, m = by[ERR_NODE], by[MR_NODE]
        # Since the quarantine (the cordon-timestamp label has whole seconds), the phase the ERR's conditions give.
        assert (e["phase"], e["since"], e["cordons"], e["stuck"]) == \
            ("AwaitingExternalSystem", float(int(now - 3600)), True, None)
        assert e["why"].startswith(f"ExternalRemediationRequest {ERR_NAME} for GpuXidError: XID 79 GPU has fallen "
                                   "off the bus; recommended action CUSTOM (external-remediation)")
        assert "quarantined by NVSentinel" in e["why"] and "handed to an external" not in e["why"]
        assert (m["phase"], m["since"], m["cordons"]) == ("Emitted", mr_created, True)
        assert m["why"].startswith(f"MaintenanceRequest {mr_name} for PlannedMaintenance: Planned hardware "
                                   f"maintenance {ESC}; recommended action NONE; error code CSP-MAINT-1")
        assert "\x1b" not in out.stdout  # JSON carries the raw value, escaped
        table = run("disruptions", "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path)
        assert table.returncode == 0, table.stderr
        assert "\x1b" not in table.stdout and "\x07" not in table.stdout and MR_NODE in table.stdout

        out = run("nodes", *admin, home=tmp_path)
        assert out.returncode == 0, out.stderr
        got = {n["name"]: [(x["actor"], x["phase"], x["since"]) for x in n["disruptions"]]
               for n in json.loads(out.stdout) if n["name"] in (ERR_NODE, MR_NODE)}
        assert got == {ERR_NODE: [("nvsentinel", "AwaitingExternalSystem", float(int(now - 3600)))],
                       MR_NODE: [("nvsentinel", "Emitted", mr_created)]}
        nodes_why = {n["name"]: n["disruptions"][0]["why"] for n in json.loads(out.stdout)
                     if n["name"] in (ERR_NODE, MR_NODE)}
        assert nodes_why[MR_NODE] == m["why"] and nodes_why[ERR_NODE] == e["why"]

        # docs/rbac.yaml's role reads both kinds.
        for name, docs in ((full_role, None), (limited_role, role_without_nvsentinel(limited_role))):
            if docs is None:
                role = next(d for d in yaml.safe_load_all(ROLE_FILE.read_text()) if d and d["kind"] == "ClusterRole")
                docs = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": NS}},
                        {**role, "metadata": {"name": name}},
                        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                         "metadata": {"name": name},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}]}]
            cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs).encode())
        kubeconfigs = {}
        for name in (full_role, limited_role):
            token = cluster.kubectl("-n", NS, "create", "token", name, "--duration", "1h").stdout.decode().strip()
            kubeconfigs[name] = kubeconfig_for(cluster, tmp_path / f"{name}.yaml", token)
            wait_rbac(cluster, kubeconfigs[name])
        full = snapshot_of(kubeconfigs[full_role])
        assert full.actors is not None
        assert full.actors.reads["ExternalRemediationRequest"] == full.actors.reads["MaintenanceRequest"] == "read"

        # Without the NVSentinel rule: both unknown, in `known` and in the sources the header shows.
        limited = ("--kubeconfig", str(kubeconfigs[limited_role]), "--read-only", "-o", "json")
        out = run("disruptions", *limited, home=tmp_path)
        assert out.returncode == 0, out.stderr
        listed = json.loads(out.stdout)
        assert listed["known"] is False
        assert listed["sources"]["ExternalRemediationRequest"].startswith("unknown: forbidden"), listed["sources"]
        assert listed["sources"]["MaintenanceRequest"].startswith("unknown: forbidden"), listed["sources"]
        # The Node marks still say NVSentinel holds both nodes; the requests' phases are not known.
        phases = {r["node"]: r["phase"] for r in listed["disruptions"] if r["node"] in (ERR_NODE, MR_NODE)}
        assert phases == {ERR_NODE: "remediating", MR_NODE: "draining"}
        snap = snapshot_of(kubeconfigs[limited_role])
        named = {s.name: s.error for s in snap.sources}
        assert named.get("ExternalRemediationRequest") == "unknown: not readable (forbidden)"
        assert named.get("MaintenanceRequest") == "unknown: not readable (forbidden)"
        assert named["API"] is None  # the fleet's API is no worse for it
        assert snap.actors is not None and snap.actors.reads["MaintenanceRequest"].startswith("unknown: forbidden")
    finally:
        for name in (ERR_NODE, MR_NODE):
            fake_kubelet.remove_node(name)
        for name in (limited_role, full_role):
            cluster.kubectl("delete", "clusterrole,clusterrolebinding", name, "--ignore-not-found", check=False)
        for plural in PLURALS:  # the finalizers no controller here would remove
            try:
                for obj in custom.list_cluster_custom_object(GROUP, VERSION, plural)["items"]:
                    custom.patch_cluster_custom_object(GROUP, VERSION, plural, obj["metadata"]["name"],
                                                       {"metadata": {"finalizers": None}})
            except ApiException:
                pass
        uninstall_crds(api)
        core.delete_namespace(NS)

"""docs/rbac.yaml is what gputui needs, all of it: applied with kubectl, its ServiceAccount's token in a
kubeconfig, every kind gputui reads is read under it (no watch dropped as forbidden, a node's events for the
describe view), and every write verb gputui has runs under it on the real cluster: shift, undo, the guided
canary, scale-down, drain, drain --disable-eviction, cordon and uncordon, the drill, and Argo Rollouts'
promote, abort, retry, promote-full and undo with the real controller. The apiserver refuses that identity
nothing, read or write (its audit log: no 403). With one verb taken out of a copy of the role, the command that
needs it stops before writing, naming it: "your identity may not <verb> <resource> (<group>)", exit 2.

Checked to fail on one-line changes: `events` dropped from the role's first rule (the describe view's read is
refused), the `delete pods` rule dropped (drain --disable-eviction cannot finish), and `"scale_down": ("patch_pods",
"scale")` dropped from gputui.backends.base.NEEDS (scale-down no longer stops at its review)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.argo import ARGO_CRDS, ArgoController
from tests.support.crds import TRANSCRIBED_CRDS, create_custom, get_custom, install_crd, uninstall_crd
from tests.support.gputui_cli import environment, run
from tests.support.maintenance_operator import GROUP, PLURAL, VERSION, MaintenanceOperator
from tests.support.procs import wait_until
from tests.support.rbac import ROLE_FILE, kubeconfig_for, token_of, wait_rbac
from tests.support.traffic import Durations, TrafficGenerator
from tests.support.workloads import deployment, pool, ready_pods, running, served_deployment, service_for, workload

ROOT = Path(__file__).resolve().parents[2]
OPERATOR = "system:serviceaccount:gputui:gputui"
READS = frozenset({"get", "list", "watch"})


def install_every_kind(api) -> None:
    """Every kind gputui reads or patches beyond the core ones, served: a rule the role lacks for any of them
    then shows (the routes, Istio's subsets, Argo, the GPU Operator's policy, InferencePools, the disrupting actors'
    kinds with NVSentinel's transcribed ones)."""
    for plural in ("httproutes", "virtualservices", "destinationrules", "trafficsplits", "clusterpolicies", *ARGO_CRDS,
                   "nodemaintenances", "nodeclaims", *TRANSCRIBED_CRDS):  # the disruption actors' (issue 40)
        install_crd(api, plural)
    pool_crd = yaml.safe_load((ROOT / "tests/support/crds/inferencepools.inference.networking.k8s.io.yaml").read_text())
    try:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(pool_crd)
    except ApiException as exc:
        if exc.status != 409:
            raise
    custom = client.CustomObjectsApi(api)
    wait_until(lambda: custom.list_cluster_custom_object(pool_crd["spec"]["group"], "v1", "inferencepools") is not None,
               30, what="InferencePool served")


@pytest.fixture(scope="module")
def operator(cluster, tmp_path_factory) -> Iterator[Path]:
    """docs/rbac.yaml applied as a user would, and a kubeconfig for its ServiceAccount."""
    install_every_kind(cluster.harness_client())
    cluster.kubectl("apply", "-f", str(ROLE_FILE))
    kc = kubeconfig_for(cluster, tmp_path_factory.mktemp("rbac") / "operator.yaml", token_of(cluster, "gputui"))
    wait_rbac(cluster, kc)
    yield kc
    for plural in TRANSCRIBED_CRDS:  # NVSentinel's tests start from its kinds not installed
        uninstall_crd(cluster.harness_client(), plural)


def refused(cluster, user: str, mark) -> list[tuple]:
    """Every request the apiserver refused `user` since `mark` (403): what the role lacks."""
    return [(e["verb"], e.get("requestURI")) for e in cluster.audit_events(user, since=mark)
            if (e.get("responseStatus") or {}).get("code") == 403]


def gputui(kc: Path, home: Path, *args: str, prometheus: str | None = None) -> subprocess.CompletedProcess:
    out = run(*args, "--kubeconfig", str(kc), *(["--prometheus", prometheus] if prometheus else []), home=home)
    assert "Traceback" not in out.stderr, out.stderr
    return out


def weights(api, ns: str) -> list[int]:
    return [b["weight"] for b in get_custom(api, "httproutes", ns, "chat")["spec"]["rules"][0]["backendRefs"]]


def test_everything_gputui_reads_is_read_under_the_role(cluster, fake_kubelet, operator, tmp_path):
    """Every watch gputui keeps (none dropped as forbidden), a node's describe view (its events) and the grants
    `gputui check` asks about, as the role's ServiceAccount; the apiserver refuses it nothing."""
    from gputui.backends.kube_backend import live_backend
    from gputui.settings import Settings

    start = cluster.audit_mark()
    backend = live_backend(Settings(kubeconfig=str(operator)))
    try:
        snapshot = backend.reader.snapshot()
        caches = backend.reader.caches  # type: ignore[attr-defined]
        assert {"nodes", "pods", "deployments", "pdbs", "services", "httproutes", "virtualservices", "trafficsplits",
                "rollouts", "destinationrules", "inferencepools", "resourceslices", "resourceclaims",
                "clusterpolicies"} <= set(caches), sorted(caches)
        assert not [c.error for c in caches.values() if c.error]
        assert snapshot.actors is not None  # the actors' kinds too, NVSentinel's janitor actions among them
        assert {k: v for k, v in snapshot.actors.reads.items() if v != "read"} == {}, snapshot.actors.reads
        node = snapshot.nodes[0].name
        described = backend.reader.describe(node, [(p.namespace, p.name) for p in snapshot.pods_on(node)][:3])
        assert described is not None
        assert backend.permissions == {"cordon": True, "evict": True, "patch_pods": True, "scale": True, "shift": True,
                                       "nodemaintenance_create": True, "nodemaintenance_delete": True}
        assert not backend.unknown
        assert backend.check_facts(60.0).beyond_needs == dict.fromkeys(
            ("read secrets", "delete nodes", "bind cluster roles", "do anything (cluster-admin)"), False)
    finally:
        backend.close()
    assert refused(cluster, OPERATOR, start) == []


def test_traffic_verbs_run_under_the_role(cluster, fake_kubelet, operator, prometheus, inference_exporter, tmp_path):
    """shift, undo, the guided canary and scale-down, as the role's ServiceAccount."""
    ns, node = "t-rbac-traffic", "rbac-traffic"
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    fake_kubelet.add_node(node, gpus=8, labels={"gputui.test/pool": node})
    core.create_namespace({"metadata": {"name": ns}})
    try:
        for version in ("v1", "v2"):
            apps.create_namespaced_deployment(ns, deployment(f"chat-{version}", "chat", version, 2, 1, ns=ns, pool=node))
            core.create_namespaced_service(ns, {"metadata": {"name": f"chat-{version}"}, "spec": {
                "selector": {"app.kubernetes.io/name": "chat", "app.kubernetes.io/version": version},
                "ports": [{"port": 80}]}})
        create_custom(api, "httproutes", ns, {"metadata": {"name": "chat"}, "spec": {"rules": [{"backendRefs": [
            {"name": "chat-v1", "port": 80, "weight": 100}, {"name": "chat-v2", "port": 80, "weight": 0}]}]}})
        pods = running(core, ns, 4, node)
        wait_until(lambda: all((d.status.ready_replicas or 0) == 2 for d in apps.list_namespaced_deployment(ns).items),
                   30, what="both Deployments' status ready")
        for p in pods:  # idle and healthy: nothing to cut, gates that pass
            inference_exporter.add_pod(ns, p.metadata.name, running=0)
            inference_exporter.serve(ns, p.metadata.name, 20.0, error_ratio=0.001, latency_s=0.8)
        prometheus.wait_until(f'sum by (pod) (rate(vllm:request_success_total{{namespace="{ns}"}}[10s])) > 0',
                              lambda v: len(v) == 4, timeout=40)
        start = cluster.audit_mark()
        key = f"{ns}/chat"

        shifted = gputui(operator, tmp_path, "shift", key, "--to", "v2=20")
        assert shifted.returncode == 0, shifted.stderr
        assert weights(api, ns) == [80, 20]
        undone = gputui(operator, tmp_path, "shift", key, "--undo")
        assert undone.returncode == 0, undone.stderr
        assert weights(api, ns) == [100, 0]
        canary = gputui(operator, tmp_path, "rollout", key, "v2", "--steps", "25,50", "--hold", "2s", "--poll", "1s",
                        "--window", "10s", prometheus=prometheus.url)
        assert canary.returncode == 0, canary.stdout + canary.stderr
        assert weights(api, ns) == [50, 50]
        scaled = gputui(operator, tmp_path, "scale-down", key, "v1", "1", prometheus=prometheus.url)
        assert scaled.returncode == 0, scaled.stdout + scaled.stderr
        assert apps.read_namespaced_deployment_scale("chat-v1", ns).spec.replicas == 1

        verbs = {(e["verb"], (e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get("subresource"))
                 for e in cluster.audit_events(OPERATOR, since=start) if e["verb"] not in READS}
        assert {("patch", "httproutes", None), ("patch", "pods", None), ("patch", "deployments", "scale")} <= verbs
        assert refused(cluster, OPERATOR, start) == []
    finally:
        for ns_, name in inference_exporter.pods():
            if ns_ == ns:
                inference_exporter.remove_pod(ns_, name)
        core.delete_namespace(ns)
        fake_kubelet.remove_node(node)


def test_node_verbs_run_under_the_role(cluster, fake_kubelet, operator, prometheus, inference_exporter, tmp_path):
    """uncordon and cordon (the TUI's c and u: ops.cordon), drain, drain --disable-eviction and the drill, as
    the role's ServiceAccount."""
    from gputui.backends.kube_backend import live_backend
    from gputui.ops.audit import AuditLog
    from gputui.ops.context import OpContext
    from gputui.ops.cordon import plan_cordon, run_cordon
    from gputui.settings import Settings

    ns = "t-rbac-nodes"
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    a, b = pool(fake_kubelet, core, "rbac-n")  # the pods land on a; b is cordoned
    apps.create_namespaced_deployment(ns, workload("Deployment", "chat", ns, "rbac-n", 2))
    stop = threading.Event()

    def live() -> list:
        return [p for p in core.list_namespaced_pod(ns).items
                if p.status.phase == "Running" and not p.metadata.deletion_timestamp]

    def router() -> None:  # a pod gets a session once it runs, as a load balancer would give it traffic
        while not stop.wait(0.3):
            for p in live():
                if (ns, p.metadata.name) not in inference_exporter.pods():
                    inference_exporter.add_pod(ns, p.metadata.name, running=1)

    thread = threading.Thread(target=router, daemon=True)
    try:
        running(core, ns, 2, a)
        thread.start()
        prometheus.wait_until(f'vllm:num_requests_running{{namespace="{ns}"}}', lambda v: len(v) == 2, timeout=30)
        start = cluster.audit_mark()

        backend = live_backend(Settings(kubeconfig=str(operator)))
        try:
            audit = AuditLog(tmp_path / "cordon.jsonl", backend.writer.identity if backend.writer else "", backend.context)
            run_cordon(plan_cordon(backend.reader.snapshot(), b, cordon=False), OpContext(backend.reader,
                                                                                          backend.writer, audit))
            wait_until(lambda: not core.read_node(b).spec.unschedulable, 10, what=f"{b} uncordoned")
        finally:
            backend.close()
        drained = gputui(operator, tmp_path, "drain", a, "--session-threshold", "1", prometheus=prometheus.url)
        assert drained.returncode == 0, drained.stdout + drained.stderr
        assert core.read_node(a).spec.unschedulable
        running(core, ns, 2, b)  # the Deployment's replacements, on b

        backend = live_backend(Settings(kubeconfig=str(operator)))
        try:
            run_cordon(plan_cordon(backend.reader.snapshot(), a, cordon=False), OpContext(backend.reader,
                                                                                          backend.writer, audit))
        finally:
            backend.close()
        wait_until(lambda: not core.read_node(a).spec.unschedulable, 10, what=f"{a} uncordoned")

        drill = subprocess.run([sys.executable, "-m", "gputui", "check", "--drill", b, "--yes-i-mean-it",
                                "--drill-timeout", "90s", "--kubeconfig", str(operator), "--prometheus", prometheus.url],
                               capture_output=True, text=True, env=environment(tmp_path), timeout=150)
        assert drill.returncode == 0, drill.stdout + drill.stderr
        assert drill.stdout.strip().splitlines()[-1].endswith("cordon undone"), drill.stdout

        deleted = gputui(operator, tmp_path, "drain", b, "--disable-eviction", "--force", "--confirm-delete", b,
                         "--session-threshold", "1", prometheus=prometheus.url)
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr

        verbs = {(e["verb"], (e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get("subresource"))
                 for e in cluster.audit_events(OPERATOR, since=start) if e["verb"] not in READS}
        assert {("patch", "nodes", None), ("create", "pods", "eviction"), ("delete", "pods", None)} <= verbs, verbs
        assert refused(cluster, OPERATOR, start) == []
    finally:
        stop.set()
        thread.join(5)
        for ns_, name in inference_exporter.pods():
            if ns_ == ns:
                inference_exporter.remove_pod(ns_, name)
        core.delete_namespace(ns)
        for node in (a, b):
            fake_kubelet.remove_node(node)


def test_requestor_drain_runs_under_the_role(cluster, fake_kubelet, operator, prometheus, inference_exporter, tmp_path):
    """`drain --via nodemaintenance` and the `uncordon` that withdraws it (issue 40), as the role's ServiceAccount:
    gputui creates its NodeMaintenance, the maintenance operator (tests.support.maintenance_operator, with the
    harness's rights) cordons the node and waits on gputui's pods, gputui takes the pod out of rotation, waits out
    the sessions the traffic generator routed to it, evicts it and, on uncordon, deletes its request. The apiserver
    refuses that identity nothing. Checked to fail with `delete` dropped from the role's nodemaintenances rule (the
    uncordon is refused and names it)."""
    ns, requests = "t-rbac-nm", "t-rbac-nm-requests"
    a, b = "rbac-m-a", "rbac-m-b"
    api = cluster.harness_client()
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    for name in (ns, requests):
        core.create_namespace({"metadata": {"name": name}})
    for node in (a, b):
        fake_kubelet.add_node(node, gpus=4, labels={"gputui.test/pool": node})
    # One pod on the node drained and one elsewhere behind one Service, so the first can leave rotation.
    for shard, node in (("a", a), ("b", b)):
        apps.create_namespaced_deployment(ns, served_deployment(f"chat-{shard}", ns, node, 1, grace_s=2,
                                                                labels={"app": "chat", "shard": shard}))
    core.create_namespaced_service(ns, service_for("chat", ns, {"app": "chat"}))
    config = tmp_path / ".config" / "gputui"
    config.mkdir(parents=True)
    (config / "config.yaml").write_text(f"maintenance_namespace: {requests}\n")
    request = f"gputui-{a}"
    gen = TrafficGenerator(cluster.kubeconfigs["harness"], inference_exporter, seed=34,
                           durations=Durations(mean_s=2, max_s=5))
    gen.add_route("Service", ns, "chat", rate_per_s=2.0)
    try:
        pods = ready_pods(core, ns, 2, label_selector="app=chat")
        on_a = next(p.metadata.name for p in pods if p.spec.node_name == a)
        with gen.start(run_for_s=120):
            wait_until(lambda: gen.live(f"{ns}/{on_a}") >= 1, 30, what="sessions on the pod")
            prometheus.wait_until(f'vllm:num_requests_running{{namespace="{ns}"}}',
                                  lambda v: v.get(on_a, 0) > 0, by="pod", timeout=20)
            start = cluster.audit_mark()
            with MaintenanceOperator(api, requests) as maintenance:
                drained = gputui(operator, tmp_path, "drain", a, "--via", "nodemaintenance", "--accept-stranded",
                                 "--session-deadline", "90s", prometheus=prometheus.url)
                assert drained.returncode == 0, drained.stdout + drained.stderr
                assert maintenance.history[request][-1] == "Ready", maintenance.history
                back = gputui(operator, tmp_path, "uncordon", a, prometheus=prometheus.url)
                assert back.returncode == 0, back.stdout + back.stderr
                wait_until(lambda: request not in {o["metadata"]["name"] for o in custom.list_namespaced_custom_object(
                    GROUP, VERSION, requests, PLURAL)["items"]}, 30, what="the request gone")
            report = gen.stop()
        assert report.cut == 0, report.cut_by_pod
        wait_until(lambda: not core.read_node(a).spec.unschedulable, 10, what=f"{a} uncordoned")
        verbs = {(e["verb"], (e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get("subresource"))
                 for e in cluster.audit_events(OPERATOR, since=start) if e["verb"] not in READS}
        assert {("create", "nodemaintenances", None), ("delete", "nodemaintenances", None),
                ("create", "pods", "eviction")} <= verbs, verbs
        assert refused(cluster, OPERATOR, start) == []
    finally:
        for obj in custom.list_namespaced_custom_object(GROUP, VERSION, requests, PLURAL)["items"]:
            custom.patch_namespaced_custom_object(GROUP, VERSION, requests, PLURAL, obj["metadata"]["name"],
                                                  {"metadata": {"finalizers": None}})
        apps.delete_collection_namespaced_deployment(ns)
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        for name in (ns, requests):
            core.delete_namespace(name)
        for node in (a, b):
            fake_kubelet.remove_node(node)


def test_argo_rollouts_verbs_run_under_the_role(cluster, fake_kubelet, operator, tmp_path):
    """promote, abort, retry, promote-full and undo on a Rollout the real controller runs, as the role's
    ServiceAccount: each accepted by the apiserver and acted on by the controller."""
    ns, key = "t-rbac-argo", "t-rbac-argo/summ"
    api = cluster.harness_client()
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    controller = ArgoController(cluster.harness_kubeconfig, ns).start()
    try:
        template = deployment("summ", "summ", "v1", 2, 1, ns=ns)["spec"]["template"]
        labels = {k: v for k, v in template["metadata"]["labels"].items() if k != "app.kubernetes.io/version"}
        template["metadata"]["labels"] = labels
        for name in ("summ-stable", "summ-canary"):
            core.create_namespaced_service(ns, {"metadata": {"name": name}, "spec": {
                "selector": labels, "ports": [{"port": 80}]}})
        create_custom(api, "virtualservices", ns, {"metadata": {"name": "summ"}, "spec": {"hosts": ["summ"], "http": [
            {"name": "primary", "route": [{"destination": {"host": "summ-stable"}, "weight": 100},
                                          {"destination": {"host": "summ-canary"}, "weight": 0}]}]}})
        create_custom(api, "rollouts", ns, {"metadata": {"name": "summ"}, "spec": {
            "replicas": 2, "selector": {"matchLabels": labels}, "template": template,
            "strategy": {"canary": {
                "canaryService": "summ-canary", "stableService": "summ-stable",
                "trafficRouting": {"istio": {"virtualService": {"name": "summ", "routes": ["primary"]}}},
                "steps": [{"setWeight": 20}, {"pause": {}}, {"setWeight": 50}, {"pause": {}}]}}}})

        def status() -> dict:
            return get_custom(api, "rollouts", ns, "summ").get("status") or {}

        wait_until(lambda: status().get("stableRS") and status().get("readyReplicas") == 2, 90,
                   what=f"the first revision stable\n{controller.log()}")
        container = {**template["spec"]["containers"][0], "image": "vllm/vllm-openai:v0.9.1"}
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            "argoproj.io", "v1alpha1", ns, "rollouts", "summ", {"spec": {"template": {"spec": {"containers": [container]}}}})
        wait_until(lambda: status().get("pauseConditions"), 90, what=f"the canary paused\n{controller.log()}")
        start = cluster.audit_mark()
        for verb, done in (
            ("promote", lambda s: s.get("currentStepIndex") == 3 and s.get("pauseConditions")),
            ("abort", lambda s: s.get("phase") == "Degraded"),
            ("retry", lambda s: s.get("currentStepIndex") == 1 and not s.get("abort")),
            ("promote-full", lambda s: s.get("phase") == "Healthy" and s.get("stableRS") == s.get("currentPodHash")),
            ("undo", lambda s: s.get("pauseConditions")),
        ):
            out = gputui(operator, tmp_path, "shift", key, "--rollout", verb)
            assert out.returncode == 0, (verb, out.stdout, out.stderr)
            wait_until(lambda: done(status()), 90, what=f"the controller after {verb}\n{controller.log()}")  # noqa: B023 - called at once, in this iteration
        sent = {((e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get("subresource"))
                for e in cluster.audit_events(OPERATOR, since=start, verbs={"patch"})}
        assert sent == {("rollouts", "status"), ("rollouts", None)}, sent
        assert refused(cluster, OPERATOR, start) == []
    finally:
        controller.stop()
        core.delete_namespace(ns)


# --- a role without one rule: the verb it lacks, by name -------------------------------------------------------

LACKING = {  # (API group, resource, verb) taken out of a copy of the role -> the command, what it must say
    "patch nodes": (("", "nodes", "patch"), ("drain", "{node}"), "your identity may not patch nodes"),
    "create pods/eviction": (("", "pods/eviction", "create"), ("check", "--drill", "{node}", "--yes-i-mean-it"),
                             "your identity may not create pods/eviction"),
    "patch pods": (("", "pods", "patch"), ("scale-down", "{ns}/chat", "v1", "0"), "your identity may not patch pods"),
    "patch deployments/scale": (("apps", "deployments/scale", "patch"), ("scale-down", "{ns}/chat", "v1", "0"),
                                "your identity may not patch deployments/scale (apps)"),
    "patch httproutes": (("gateway.networking.k8s.io", "httproutes", "patch"), ("shift", "{ns}/chat", "--to", "v2=50"),
                         "your identity may not patch httproutes (gateway.networking.k8s.io)"),
    "patch rollouts/status": (("argoproj.io", "rollouts/status", "patch"), ("shift", "{ns}/chat", "--rollout", "promote"),
                              "your identity may not patch rollouts/status (argoproj.io)"),
    # Before: no review asked it, and the drain reached the apiserver's forbidden answer (exit 1).
    "create nodemaintenances": (("maintenance.nvidia.com", "nodemaintenances", "create"),
                                ("drain", "{node}", "--via", "nodemaintenance"),
                                "your identity may not create nodemaintenances (maintenance.nvidia.com) in namespace "
                                "default: drain via NodeMaintenance is unavailable"),
}


def role_without(group: str, resource: str, verb: str, name: str) -> list[dict]:
    """docs/rbac.yaml's ClusterRole named `name`, without `verb` on `resource` (a rule left with no verb goes),
    bound to a ServiceAccount of the same name in the gputui namespace."""
    docs = [d for d in yaml.safe_load_all(ROLE_FILE.read_text()) if d]
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    rules = []
    for rule in role["rules"]:
        if group in rule.get("apiGroups", []) and resource in rule.get("resources", []) and verb in rule["verbs"]:
            others = [r for r in rule["resources"] if r != resource]
            if others:
                rules.append({**rule, "resources": others})
            rule = {**rule, "resources": [resource], "verbs": [v for v in rule["verbs"] if v != verb]}
            if not rule["verbs"]:
                continue
        rules.append(rule)
    assert rules != role["rules"], f"{verb} {resource} is not in docs/rbac.yaml"
    subject = {"kind": "ServiceAccount", "name": name, "namespace": "gputui"}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": "gputui"}},
        {**role, "metadata": {"name": name}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [subject]},
    ]


@pytest.mark.parametrize("taken", list(LACKING))
def test_a_verb_the_role_lacks_is_named_and_nothing_is_written(taken, cluster, fake_kubelet, operator, tmp_path):
    """Each command stops at its access review, before reading what it acts on: no namespace of its own needed."""
    (group, resource, verb), argv, says = LACKING[taken]
    name = "t-lacking-" + taken.replace(" ", "-").replace("/", "-")
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(role_without(group, resource, verb, name)).encode())
    kc = kubeconfig_for(cluster, tmp_path / "lacking.yaml", token_of(cluster, name))
    wait_rbac(cluster, kc)
    user = f"system:serviceaccount:gputui:{name}"
    node = next(n.metadata.name for n in client.CoreV1Api(cluster.harness_client()).list_node().items
                if n.metadata.name.startswith("gpu-node"))
    mark = cluster.audit_mark()
    out = run(*[a.format(node=node, ns="t-rbac-lacking") for a in argv], "--kubeconfig", str(kc), home=tmp_path)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1 and says in out.stderr, out.stderr
    wrote = [(e["verb"], e.get("requestURI")) for e in cluster.audit_events(user, since=mark)
             if e["verb"] not in READS and (e.get("objectRef") or {}).get("resource")
             not in ("selfsubjectaccessreviews", "selfsubjectreviews")]
    assert wrote == []


def test_an_uncordon_that_would_withdraw_gputuis_nodemaintenance_names_the_delete_it_lacks(
        cluster, fake_kubelet, operator, tmp_path):
    """A node the maintenance-operator cordoned for gputui's request: its uncordon deletes that NodeMaintenance. An
    identity without `delete nodemaintenances` is told so by name, exit 2, and nothing is written (neither the
    request nor the node). Before, the uncordon was offered, and the apiserver's forbidden answer came back with exit 1."""
    node, ns = "rbac-nm-held", "t-rbac-nm-held"
    api = cluster.harness_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    name = "t-lacking-delete-nodemaintenances"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
        role_without("maintenance.nvidia.com", "nodemaintenances", "delete", name)).encode())
    kc = kubeconfig_for(cluster, tmp_path / "lacking.yaml", token_of(cluster, name))
    wait_rbac(cluster, kc)
    (tmp_path / ".config" / "gputui").mkdir(parents=True)
    (tmp_path / ".config" / "gputui" / "config.yaml").write_text(f"maintenance_namespace: {ns}\n")
    core.create_namespace({"metadata": {"name": ns}})
    fake_kubelet.add_node(node, gpus=2, labels={"gputui.test/pool": node})
    try:
        create_custom(api, "nodemaintenances", ns, {"metadata": {"name": f"gputui-{node}"}, "spec": {
            "requestorID": "gputui.io", "nodeName": node, "waitForPodCompletion": {"podSelector": "app=chat"}}})
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, ns, PLURAL, f"gputui-{node}", {"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                            "lastTransitionTime": "2026-12-04T00:00:00Z"}]}})
        core.patch_node(node, {"spec": {"unschedulable": True}})
        user = f"system:serviceaccount:gputui:{name}"
        mark = cluster.audit_mark()
        out = gputui(kc, tmp_path, "uncordon", node)
        assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
        assert out.stderr.strip() == (
            f"gputui: error: your identity may not delete nodemaintenances (maintenance.nvidia.com) in namespace {ns}: "
            "uncordon (withdrawing gputui's NodeMaintenance) is unavailable"), out.stderr
        wrote = [(e["verb"], e.get("requestURI")) for e in cluster.audit_events(user, since=mark)
                 if e["verb"] not in READS and (e.get("objectRef") or {}).get("resource")
                 not in ("selfsubjectaccessreviews", "selfsubjectreviews")]
        assert wrote == []
        assert core.read_node(node).spec.unschedulable
    finally:
        core.delete_namespace(ns)
        fake_kubelet.remove_node(node)

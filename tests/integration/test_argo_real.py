"""Argo Rollouts end to end: its real controller (built from its module) runs a canary of a Rollout on the
real control plane, with an Istio VirtualService as its router (the real CRDs). gputui sees the controller's
weights, refuses to hand-edit the route the controller owns, and its promote, abort, retry, promote-full and
undo move the controller as `kubectl argo rollouts` would; the stable version's pods are never deleted by any
of it. Each verb is checked against what the controller then did, not against what gputui sent."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client

from tests.support.argo import ARGO_CRDS, ArgoController
from tests.support.audit_lines import written
from tests.support.crds import create_custom, get_custom, install_crd
from tests.support.gputui_cli import run
from tests.support.procs import wait_until
from tests.support.workloads import deployment

NS = "t-argo"
KEY = f"{NS}/summ"


@pytest.fixture(scope="module")
def argo(cluster, fake_kubelet):
    api = cluster.harness_client()
    core = client.CoreV1Api(api)
    for plural in (*ARGO_CRDS, "virtualservices"):
        install_crd(api, plural)
    core.create_namespace({"metadata": {"name": NS}})
    controller = ArgoController(cluster.harness_kubeconfig, NS).start()  # not admin: the audit tells them apart
    try:
        yield api, controller
    finally:
        controller.stop()
        core.delete_namespace(NS)


def _rollout(api) -> dict:
    return get_custom(api, "rollouts", NS, "summ")


def _vs_weights(api) -> dict[str, int]:
    vs = get_custom(api, "virtualservices", NS, "summ")
    return {d["destination"]["host"]: d.get("weight", 0) for d in vs["spec"]["http"][0]["route"]}


def test_the_real_controller_and_gputui_run_a_canary_together(cluster, argo, tmp_path):
    api, controller = argo
    core = client.CoreV1Api(api)
    start = cluster.audit_mark()
    template = deployment("summ", "summ", "v1", 2, 1, ns=NS)["spec"]["template"]
    labels = dict(template["metadata"]["labels"])
    labels.pop("app.kubernetes.io/version")
    template["metadata"]["labels"] = labels
    for name in ("summ-stable", "summ-canary"):
        core.create_namespaced_service(NS, {"metadata": {"name": name}, "spec": {
            "selector": labels, "ports": [{"port": 80}]}})
    create_custom(api, "virtualservices", NS, {"metadata": {"name": "summ"}, "spec": {"hosts": ["summ"], "http": [
        {"name": "primary", "route": [{"destination": {"host": "summ-stable"}, "weight": 100},
                                      {"destination": {"host": "summ-canary"}, "weight": 0}]}]}})
    create_custom(api, "rollouts", NS, {"metadata": {"name": "summ"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": labels}, "template": template,
        "strategy": {"canary": {
            "canaryService": "summ-canary", "stableService": "summ-stable",
            "trafficRouting": {"istio": {"virtualService": {"name": "summ", "routes": ["primary"]}}},
            "steps": [{"setWeight": 20}, {"pause": {}}, {"setWeight": 50}, {"pause": {}}]}}}})
    wait_until(lambda: (_rollout(api).get("status") or {}).get("stableRS")
               and (_rollout(api).get("status") or {}).get("readyReplicas") == 2, 90,
               what=f"the first revision stable\n{controller.log()}")
    custom = client.CustomObjectsApi(api)
    container = {**template["spec"]["containers"][0], "image": "vllm/vllm-openai:v0.9.1"}
    custom.patch_namespaced_custom_object("argoproj.io", "v1alpha1", NS, "rollouts", "summ", {"spec": {"template": {
        "spec": {"containers": [container]}}}})
    wait_until(lambda: (_rollout(api).get("status") or {}).get("pauseConditions"), 90,
               what=f"the canary paused at its first step\n{controller.log()}")
    assert _vs_weights(api) == {"summ-stable": 80, "summ-canary": 20}  # the controller's own patch
    stable_pods = _pods(core, "stable", _rollout(api))
    assert len(stable_pods) == 2

    # gputui sees the Rollout (not the VirtualService it drives), its weights and whose pods are whose.
    (service,) = [s for s in _services(cluster, tmp_path) if s["service"] == KEY]
    assert service["router"] == {"kind": "Rollout", "name": "summ"}
    assert {v["name"]: (v["weight"], sorted(p["name"] for p in v["pods"])) for v in service["versions"]} == {
        "stable": (80, sorted(stable_pods)), "canary": (20, sorted(_pods(core, "canary", _rollout(api))))}

    def gputui(*args: str):
        return run("shift", KEY, "--kubeconfig", str(cluster.admin_kubeconfig), *args, home=tmp_path)

    # No hand edit of what the controller owns: a weight is refused, and so is the route itself.
    refused = gputui("--to", "canary=50")
    assert refused.returncode == 1 and "no set-weight" in refused.stderr
    assert _vs_weights(api) == {"summ-stable": 80, "summ-canary": 20}

    # promote: the controller goes on to its next step (50%) and pauses there.
    assert gputui("--rollout", "promote").returncode == 0
    wait_until(lambda: _vs_weights(api) == {"summ-stable": 50, "summ-canary": 50}
               and (_rollout(api).get("status") or {}).get("pauseConditions"), 60,
               what=f"the controller at its 50% step\n{controller.log()}")
    assert _rollout(api)["status"]["currentStepIndex"] == 3

    # abort: the controller sends every request back to stable.
    assert gputui("--rollout", "abort").returncode == 0
    wait_until(lambda: _vs_weights(api) == {"summ-stable": 100, "summ-canary": 0}
               and _rollout(api)["status"].get("phase") == "Degraded", 60,
               what=f"the controller aborted\n{controller.log()}")

    # retry: the canary starts over from its first step.
    assert gputui("--rollout", "retry").returncode == 0
    wait_until(lambda: _vs_weights(api) == {"summ-stable": 80, "summ-canary": 20}
               and _rollout(api)["status"].get("currentStepIndex") == 1, 60,
               what=f"the controller retried\n{controller.log()}")

    # promote-full: past every step; the canary's pods become the stable ones.
    canary_hash = _rollout(api)["status"]["currentPodHash"]
    assert gputui("--rollout", "promote-full").returncode == 0
    wait_until(lambda: _rollout(api)["status"].get("stableRS") == canary_hash
               and _rollout(api)["status"].get("phase") == "Healthy", 90,
               what=f"the controller promoted fully\n{controller.log()}")
    assert not set(stable_pods) - _live_pod_names(core), "no v1 pod was deleted before the promotion finished"
    again = gputui("--rollout", "promote-full")
    assert again.returncode == 1 and "fully promoted already" in again.stderr

    # undo: revision 1's template (v0.9.0) comes back as a new revision, through the steps again.
    mark = cluster.audit_mark()
    undone = gputui("--rollout", "undo")
    assert undone.returncode == 0, undone.stderr
    wait_until(lambda: (_rollout(api).get("status") or {}).get("pauseConditions")
               and _vs_weights(api) == {"summ-stable": 80, "summ-canary": 20}, 90,
               what=f"the undone template rolling out\n{controller.log()}")
    image = _rollout(api)["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "vllm/vllm-openai:v0.9.0"
    (patch,) = cluster.wait_for_audit("admin", since=mark, verb="patch", resource="rollouts", code=200)
    assert "subresource" not in patch["objectRef"]  # the spec's template, as the plugin sends it
    writes = [e for e in cluster.audit_events("admin", since=start, verbs={"patch", "update"}, resource="virtualservices")
              if e["objectRef"].get("namespace") == NS]
    assert writes == [], "gputui never wrote the VirtualService the controller owns"

    # The same verbs from the service screen: P promotes, b (rollback) aborts; each shown in full and asked.
    asyncio.run(_promote_then_roll_back_in_the_tui(cluster, api, controller, tmp_path))


async def _promote_then_roll_back_in_the_tui(cluster, api, controller, tmp_path) -> None:
    from gputui.backends.kube_backend import live_backend
    from gputui.ops.audit import AuditLog
    from gputui.settings import Settings
    from gputui.ui.app import GputuiApp
    from gputui.ui.screens.confirm import ConfirmScreen
    from gputui.ui.screens.service import ServiceScreen

    settings = Settings(kubeconfig=str(cluster.admin_kubeconfig), refresh=1.0)
    backend = live_backend(settings)
    app = GputuiApp(settings, backend, audit=AuditLog(tmp_path / "tui-audit.jsonl", "admin", backend.context))

    async def until(pilot, predicate, what: str) -> None:
        deadline = asyncio.get_running_loop().time() + 60
        while not predicate():
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{what} never happened\n{controller.log()}")
            await pilot.pause(0.1)

    def dialog() -> str:
        return str(app.screen.query_one("#dialog-body").content) if isinstance(app.screen, ConfirmScreen) else ""

    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.snapshot is not None and app.snapshot.service(KEY) is not None, "snapshot")
            app.push_screen(ServiceScreen(KEY))
            await until(pilot, lambda: isinstance(app.screen, ServiceScreen), "service screen")
            await pilot.press("P")
            await until(pilot, lambda: "action: promote" in dialog(), "the promote plan")
            assert '"pauseConditions": null' in dialog()  # the exact patch, as read from the Rollout now
            await pilot.press("y")
            await until(pilot, lambda: _vs_weights(api) == {"summ-stable": 50, "summ-canary": 50}, "promote")
            await until(pilot, lambda: isinstance(app.screen, ServiceScreen), "back on the service screen")
            await pilot.press("b")
            await until(pilot, lambda: "action: abort" in dialog(), "the abort plan")
            await pilot.press("y")
            await until(pilot, lambda: _vs_weights(api) == {"summ-stable": 100, "summ-canary": 0}, "abort")
    finally:
        app.backend.close()
    actions = [e["action"] for e in written(tmp_path / "tui-audit.jsonl")]
    assert actions == ["rollout-promote", "rollout-abort"]


def _pods(core, role: str, rollout: dict) -> list[str]:
    status = rollout["status"]
    pod_hash = status["stableRS"] if role == "stable" else status["currentPodHash"]
    return [p.metadata.name for p in core.list_namespaced_pod(NS, label_selector=f"rollouts-pod-template-hash={pod_hash}").items
            if not p.metadata.deletion_timestamp]


def _live_pod_names(core) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod(NS).items if not p.metadata.deletion_timestamp}


def _services(cluster, tmp_path) -> list[dict]:
    out = run("services", "--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)

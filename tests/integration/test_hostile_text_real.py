"""Hostile text in every field gputui reads from the real apiserver (node info, conditions, annotations,
pod scheduling messages, events, an admission policy's error body, namespaces and names of services):
every headless command and every screen shows it as data. No ESC or BEL reaches stdout or the terminal,
nothing crashes, JUnit parses, JSON carries the raw value (kubectl's CVE-2021-25743 class)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from kubernetes import client
from textual.widgets._toast import Toast

from gputui.backends.kube_backend import live_backend
from gputui.ops.audit import AuditLog
from gputui.settings import Settings
from gputui.ui.app import GputuiApp
from gputui.vocabulary import disruptions as d
from tests.support.gputui_cli import run
from tests.support.terminal import assert_nothing_hostile, terminal_output, until

NODE = "hostile-1"
NS = "t-hostile"
TITLE = "\x1b]0;PWNED\x07"
CLEAR = "\x1b[2J\x9b2J"
EVIL = f"[/bold] x{TITLE}{CLEAR}[$var]"  # markup, an OSC title, screen clears in 7- and 8-bit CSI
HUGE = "A" * 10_000


def _clean(text: str) -> None:
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in text, f"{raw!r} in output: {text[:400]!r}"
    assert "Traceback" not in text, text[-2000:]


@pytest.fixture(scope="module")
def hostile(cluster, fake_kubelet):
    api = cluster.harness_client()
    core = client.CoreV1Api(api)
    fake_kubelet.add_node(NODE, gpus=8, node_info={"osImage": f"Ubuntu {EVIL}", "kernelVersion": f"6.8{TITLE}",
                                                   "containerRuntimeVersion": f"containerd://{CLEAR}"})
    fake_kubelet.set_condition(NODE, "GpuHealth", "False", reason="XidError", message=f"xid 79 {EVIL}")
    # An interrupted drain's record, as another gputui (or anyone who may annotate nodes) left it.
    core.patch_node(NODE, {"metadata": {"annotations": {
        "gputui.io/drain-phase": "waiting", "gputui.io/drain-by": f"[/bold] x{TITLE}",
        "gputui.io/drain-options": f"{{{EVIL}", "hostile.example/note": EVIL + HUGE,
        # Another actor's marks, as NVSentinel writes them (docs/disruption-actors.md §1): its quarantine's health
        # events and its maintenance request's name are any writer's text too, shown by :disruptions and describe.
        d.NVSENTINEL_EVENT: json.dumps([{"checkName": f"GpuXid{TITLE}", "message": EVIL + HUGE,
                                         "generatedTimestamp": {"seconds": 1764000000}}]),
        d.NVSENTINEL_MAINTENANCE_REQUEST: EVIL}}})
    core.create_namespace({"metadata": {"name": NS}})
    # A GPU pod no scheduler will place, its PodScheduled message written as any status writer could.
    core.create_namespaced_pod(NS, {"metadata": {"name": "stuck", "annotations": {"note": EVIL}},
                                    "spec": {"schedulerName": "nobody", "containers": [{
                                        "name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    core.patch_namespaced_pod_status("stuck", NS, {"status": {"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": f"0/9 nodes are available: {EVIL}"}]}})
    # A node's events live in `default`, as the kubelet writes them.
    core.create_namespaced_event("default", {"metadata": {"name": "hostile-event"}, "reason": "Evil", "message": EVIL,
                                             "type": "Warning", "involvedObject": {"kind": "Node", "name": NODE}})
    # An admission policy whose refusal carries the hostile text: the error body every write path shows.
    admission = client.AdmissionregistrationV1Api(api)
    admission.create_validating_admission_policy({
        "metadata": {"name": "hostile-refusal"},
        "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}]},
            "validations": [{"expression": f"object.metadata.name != '{NODE}'",
                             "messageExpression": f"'refused: ' + {json.dumps(EVIL)}"}]}})
    admission.create_validating_admission_policy_binding({
        "metadata": {"name": "hostile-refusal"},
        "spec": {"policyName": "hostile-refusal", "validationActions": ["Deny"]}})
    yield
    admission.delete_validating_admission_policy_binding("hostile-refusal")
    admission.delete_validating_admission_policy("hostile-refusal")
    core.delete_namespace(NS)
    core.delete_namespaced_event("hostile-event", "default")
    fake_kubelet.remove_node(NODE)


@pytest.mark.parametrize("args", [
    ("nodes",), ("nodes", "-o", "json"), ("versions",), ("versions", "-o", "json"), ("services",), ("pools",),
    ("check",), ("check", "-o", "json"), ("check", "-o", "junit"), ("drain", NODE, "--dry-run"), ("drain", NODE),
    ("disruptions",), ("disruptions", "-o", "json"),
])
def test_every_headless_command_prints_hostile_cluster_text_as_data(hostile, cluster, prometheus, tmp_path, args):
    out = run(*args, "--kubeconfig", str(cluster.admin_kubeconfig), "--prometheus", prometheus.url, home=tmp_path)
    _clean(out.stdout)
    _clean(out.stderr)
    assert out.returncode in (0, 1, 2), out.stderr
    if "json" in args:
        text = json.dumps(json.loads(out.stdout))
        if args[0] in ("versions", "disruptions"):
            assert "\\u001b]0;PWNED\\u0007" in text  # JSON keeps the raw value, escaped by JSON
    if args[0] == "disruptions":  # NVSentinel's hold is listed, its text made visible, not dropped
        assert "nvsentinel" in out.stdout.lower() and "GpuXid" in out.stdout
    if "junit" in args:
        ET.fromstring(out.stdout)
    if args == ("drain", NODE):  # the admission policy refused the cordon: its body is shown, made visible
        assert "refused: [/bold] x␛]0;PWNED␇" in out.stderr + out.stdout


async def test_every_screen_shows_hostile_cluster_text_as_data(hostile, cluster, prometheus, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    settings = Settings(kubeconfig=str(cluster.admin_kubeconfig), prometheus=prometheus.url, refresh=1.0)
    backend = live_backend(settings)
    app = GputuiApp(settings, backend, audit=AuditLog(tmp_path / "audit.jsonl", "admin", backend.context))
    seen = []

    def toast(*words: str):  # a toast on the screen says one of the words
        return lambda: any(w in str(t._notification.message) for t in app.screen.query(Toast) for w in words)

    def showing(name: str):
        return lambda: type(app.screen).__name__ == name

    async def look(what: str, shown) -> None:
        """Once the step's screen shows what it reads (`shown`), and its frame is drawn: nothing hostile in it."""
        await until(pilot, shown)
        await pilot.pause()
        out = terminal_output(app)
        assert_nothing_hostile(out)
        assert app.is_running, what
        seen.append(what)

    try:
        async with app.run_test(size=(160, 50), notifications=True) as pilot:
            await until(pilot, lambda: app.snapshot is not None and app.snapshot.node(NODE) is not None)
            # The interrupted drain's offer names its owner: the annotation that crashed every operator's TUI.
            await until(pilot, lambda: any("Interrupted drain" in str(n.message) for n in app._notifications))
            await look("dashboard", toast("Interrupted drain"))
            await pilot.press("slash", *NODE, "enter")
            await look("filtered", lambda: list(app.screen.query_one("#nodes").keys) == [NODE])
            await pilot.press("enter")
            await look("node detail", showing("NodeDetailScreen"))
            await pilot.press("i")
            await look("describe", showing("DetailScreen"))  # pushed once the node's description is read
            await pilot.press("escape")
            await until(pilot, showing("NodeDetailScreen"))
            await pilot.press("c")  # cordon: asks first, then the admission policy refuses it
            await look("cordon dialog", showing("CordonScreen"))
            await pilot.press("y", "enter")  # reason "y"
            await until(pilot, lambda: any("refused: " in str(n.message) for n in app._notifications))
            await look("refusal", toast("refused: "))
            await pilot.press("escape", "escape", "d")
            await look("diagnostics", showing("DiagnosticsScreen"))
            shown_by = {"versions": showing("VersionsScreen"), "audit": showing("AuditScreen"),
                        "pools": showing("NodePoolsScreen"), "disruptions": showing("DisruptionsScreen"),
                        "check": lambda: showing("CheckScreen")() and app.screen.results is not None,  # run, in a worker
                        "services": lambda: type(app.screen).__name__ == "DashboardScreen"
                        and app.focused is not None and app.focused.id == "services"}
            for command in ("versions", "check", "audit", "services", "pools", "disruptions"):
                await pilot.press("escape", "colon", *command, "enter")
                await look(command, shown_by[command])
            await pilot.press("escape", "R")  # resume the interrupted drain: its options do not parse
            await until(pilot, lambda: any("cannot resume" in str(n.message) or "drain record" in str(n.message)
                                           for n in app._notifications))
            await look("resume refused", toast("cannot resume", "drain record"))
    finally:
        app.backend.close()
    assert len(seen) == 14

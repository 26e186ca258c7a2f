"""A protected context (`protected_contexts: ['prod-*']` in the config file) refuses every write, however it is
reached: as the kubeconfig's current context, through --context, through `:ctx` in the terminal UI, and in the
gputui each page of `gputui serve --allow-writes` runs. The identity is the harness's admin (system:masters:
it may do anything), so only the protection stands between gputui and a write; the apiserver's audit log, not
what gputui says of itself, shows that nothing was written, not even an access review (read-only sends no
POST). A control run on the unprotected context writes, so the audit check can see a write.

Mutations this catches (each fails it): `if settings.read_only or guard:` -> `if settings.read_only:` in
kube_backend.live_backend (a write command on the current context writes); `protection(settings, conn.context)`
-> `protection(settings, settings.context or "")` (the current context, named by no flag, is not protected).
"""

from __future__ import annotations

from functools import partial

import pytest
import yaml
from kubernetes import client

from gputui.ops.traffic.vocabulary import ROLLOUT_ACTIONS
from tests.support.crds import create_custom, install_crd
from tests.support.gputui_cli import page_settings, run
from tests.support.procs import wait_until
from tests.support.terminal import until
from tests.support.topology import DEFAULT_GPU_NODES
from tests.support.workloads import deployment

NS = "t-protected"
SERVICE = f"{NS}/chat"
PROTECTED, OPEN = "prod-admin", "dev-admin"
CONFIG = "protected_contexts: ['prod-*']\n"
NODE = DEFAULT_GPU_NODES[0].name
SAYS = f"context {PROTECTED} is protected ('prod-*' in protected_contexts)"
COMMANDS: dict[str, tuple[str, ...]] = {
    "drain": ("drain", NODE), "drain --resume": ("drain", "--resume"),
    "shift": ("shift", SERVICE, "--to", "v2=50", "--force"), "shift --undo": ("shift", SERVICE, "--undo"),
    **{f"shift --rollout {verb}": ("shift", SERVICE, "--rollout", verb) for verb in ROLLOUT_ACTIONS},
    "rollout": ("rollout", SERVICE, "v2"),
    "scale-down": ("scale-down", SERVICE, "v1", "0", "--force"),
    "check --drill": ("check", "--drill", NODE, "--yes-i-mean-it"),
}
DASHBOARD_KEYS = ("c", "u", "r", "R")  # cordon, uncordon, drain, resume drains
SERVICE_KEYS = ("w", "g", "b", "U", "P", "F", "A", "T")  # shift, canary, rollback, undo, Argo's four verbs


@pytest.fixture(scope="module")
def routed(cluster, fake_kubelet):
    """chat v1 and v2 behind an HTTPRoute at 90/10: a service the admin could shift on any unprotected context."""
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    install_crd(api, "httproutes")
    core.create_namespace({"metadata": {"name": NS}})
    for version in ("v1", "v2"):
        apps.create_namespaced_deployment(NS, deployment(f"chat-{version}", "chat", version, 1, 1, ns=NS))
        core.create_namespaced_service(NS, {"metadata": {"name": f"chat-{version}"}, "spec": {
            "selector": {"app.kubernetes.io/name": "chat", "app.kubernetes.io/version": version},
            "ports": [{"port": 80}]}})
    create_custom(api, "httproutes", NS, {"metadata": {"name": "chat"}, "spec": {"rules": [{"backendRefs": [
        {"name": "chat-v1", "port": 80, "weight": 90}, {"name": "chat-v2", "port": 80, "weight": 10}]}]}})
    wait_until(lambda: all((d.status.ready_replicas or 0) == 1 for d in apps.list_namespaced_deployment(NS).items),
               60, what="chat v1 and v2 ready")
    yield
    core.delete_namespace(NS)


def kubeconfig(cluster, path, current: str) -> str:
    """Contexts prod-admin and dev-admin, both the admin identity; `current` is the kubeconfig's current one."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": "c", "cluster": {"server": cluster.api_url, "certificate-authority": str(cluster.ca_file)}}],
        "users": [{"name": "admin", "user": {"token": cluster.token("admin")}}],
        "contexts": [{"name": n, "context": {"cluster": "c", "user": "admin"}} for n in (PROTECTED, OPEN)],
    }))
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def home(tmp_path):
    """A user's home whose config file (the default path) protects prod-*."""
    (tmp_path / ".config" / "gputui").mkdir(parents=True)
    (tmp_path / ".config" / "gputui" / "config.yaml").write_text(CONFIG)
    return tmp_path


def reached(cluster, home, way: str) -> tuple[str, ...]:
    """The flags that reach the protected context `way`: as the current context, or named by --context."""
    if way == "current context":
        return ("--kubeconfig", kubeconfig(cluster, home / "kc.yaml", PROTECTED))
    return ("--kubeconfig", kubeconfig(cluster, home / "kc.yaml", OPEN), "--context", PROTECTED)


def writes(cluster, mark) -> list:
    return [(e["verb"], e.get("requestURI")) for e in cluster.write_requests("admin", since=mark)]


@pytest.mark.parametrize("way", ["current context", "--context"])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_write_command_is_refused_and_writes_nothing(name, way, cluster, routed, home):
    mark = cluster.audit_mark()
    out = run(*COMMANDS[name], *reached(cluster, home, way), home=home)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1 and SAYS in out.stderr, out.stderr
    assert writes(cluster, mark) == []


def test_the_unprotected_context_writes_so_the_audit_would_see_it(cluster, routed, home):
    """The control: the same admin on dev-admin shifts, and the audit log shows its patch."""
    mark = cluster.audit_mark()
    out = run("shift", SERVICE, "--to", "v2=20", "--force", "--kubeconfig", kubeconfig(cluster, home / "kc.yaml", OPEN),
              home=home)
    assert out.returncode == 0, out.stdout + out.stderr
    cluster.wait_for_audit("admin", since=mark, verb="patch", resource="httproutes", name="chat")


async def pressed_each(pilot, app, keys, said: list[str]) -> None:
    """Press each key; each must be answered by the protection's refusal."""
    for key in keys:
        before = len(said)
        await pilot.press(key)
        await until(pilot, lambda: len(said) > before)  # noqa: B023 - called at once, in this iteration
        assert SAYS in said[-1], (key, said[-1])


@pytest.mark.parametrize("way", ["current context", "--context", ":ctx", "serve --allow-writes"])
async def test_every_write_key_is_refused_and_writes_nothing(way, cluster, routed, home, monkeypatch):
    from gputui.backends.factory import pending_backend
    from gputui.cli import common
    from gputui.cli.parser import build_parser, settings_from
    from gputui.ops.audit import AuditLog
    from gputui.ui.app import GputuiApp
    from gputui.ui.screens.command import CommandScreen
    from gputui.ui.screens.service import ServiceScreen

    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".state"))
    monkeypatch.delenv("GPUTUI_CONFIG", raising=False)
    if way == "serve --allow-writes":
        settings = page_settings(kubeconfig(cluster, home / "kc.yaml", PROTECTED))
    else:
        flags = reached(cluster, home, way) if way != ":ctx" else ("--kubeconfig", kubeconfig(cluster, home / "kc.yaml", OPEN))
        settings = settings_from(build_parser().parse_args(list(flags)))
    mark = first = cluster.audit_mark()
    backend = pending_backend(settings)  # as gputui.cli.tui.run starts it
    app = GputuiApp(settings, backend, audit=AuditLog(home / "audit.jsonl", "unknown", backend.context),
                    connect=partial(common.backend, settings))
    said: list[str] = []
    notify = app.notify
    app.notify = lambda message, *a, **k: (said.append(str(message)), notify(message, *a, **k))[1]  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.connecting is None and app.snapshot is not None and app.snapshot.nodes, 60)
            if way == ":ctx":
                assert app.backend.context == OPEN and app.backend.may("cordon")  # writable until the switch
                await pilot.press("colon")
                await until(pilot, lambda: isinstance(app.screen, CommandScreen))
                await pilot.press(*f"ctx {PROTECTED}", "enter")
                await until(pilot, lambda: app.backend.context == PROTECTED and app.snapshot is not None
                            and bool(app.snapshot.nodes), 60)
                mark = cluster.audit_mark()  # dev-admin's access reviews were before: from here, none
            assert app.backend.context == PROTECTED and app.backend.writer is None
            assert app.backend.protected == "prod-*"
            assert "PROTECTED" in str(app.screen.query_one("HeaderBar").summary())
            await pressed_each(pilot, app, DASHBOARD_KEYS, said)
            app.push_screen(ServiceScreen(SERVICE))
            await until(pilot, lambda: isinstance(app.screen, ServiceScreen))
            await pressed_each(pilot, app, SERVICE_KEYS, said)
    finally:
        app.backend.close()
    cluster.wait_for_audit("admin", since=first, verb="list", resource="nodes")  # it did read, as the admin
    assert writes(cluster, mark) == []

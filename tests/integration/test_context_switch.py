"""`:ctx` in the running app against the real apiserver: completion from the kubeconfig, then a switch."""

from __future__ import annotations

from gputui.backends.kube_backend import live_backend
from gputui.ops.audit import AuditLog
from gputui.settings import Settings
from gputui.ui.app import GputuiApp
from gputui.ui.screens.command import CommandScreen
from tests.support.terminal import until


async def test_ctx_switches_identity_and_permissions(cluster, fake_kubelet, prometheus, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    settings = Settings(kubeconfig=str(cluster.combined_kubeconfig), context="gputui-test-admin",
                        prometheus=prometheus.url, refresh=1.0)
    backend = live_backend(settings)
    app = GputuiApp(settings, backend, audit=AuditLog(tmp_path / "audit.jsonl", "admin", backend.context))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.snapshot is not None and app.snapshot.nodes)
            assert app.backend.may("cordon")
            assert {"gputui-test-admin", "gputui-test-readonly"} <= set(app.command_choices()["context"])
            await pilot.press("colon")
            await until(pilot, lambda: isinstance(app.screen, CommandScreen))
            await pilot.press(*"ctx gputui-test-re", "tab", "enter")
            await until(pilot, lambda: app.backend.context == "gputui-test-readonly")
            await until(pilot, lambda: app.snapshot is not None and app.snapshot.nodes)
            assert not app.backend.may("cordon")  # the read-only identity's RBAC, probed anew
            await pilot.press("c")  # the key says why instead of doing nothing
            await until(pilot, lambda: any("may not patch nodes" in str(n.message) for n in app._notifications))
            assert app.audit.context == "gputui-test-readonly"
            await pilot.press("colon")
            await pilot.press(*"ctx nowhere", "enter")
            await pilot.pause()
            assert isinstance(app.screen, CommandScreen)  # refused on the prompt, before any connection
            assert "no context 'nowhere'" in str(app.screen.query_one("#command-menu").render())
            await pilot.press("escape")
            assert app.backend.context == "gputui-test-readonly"
    finally:
        app.backend.close()


async def test_a_protected_context_is_read_only_below_the_ui_and_sends_no_write(cluster, fake_kubelet, prometheus,
                                                                                  tmp_path, monkeypatch):
    """protected_contexts in the config: `:ctx` to the admin context gets no writer (no access review is even
    sent), the header says PROTECTED, a write key says why, and the CLI refuses a drain there; proven by the
    apiserver's audit log, not by what gputui says of itself."""
    import os
    import subprocess
    import sys

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    settings = Settings(kubeconfig=str(cluster.combined_kubeconfig), context="gputui-test-readonly",
                        prometheus=prometheus.url, refresh=1.0, protected_contexts=("*-admin",))
    mark = cluster.audit_mark()
    backend = live_backend(settings)
    assert not backend.protected  # the read-only identity's context is not protected: its RBAC decides
    app = GputuiApp(settings, backend, audit=AuditLog(tmp_path / "audit.jsonl", "readonly", backend.context))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.snapshot is not None and app.snapshot.nodes)
            await pilot.press("colon")
            await until(pilot, lambda: isinstance(app.screen, CommandScreen))
            await pilot.press(*"ctx gputui-test-admin", "enter")
            await until(pilot, lambda: app.backend.context == "gputui-test-admin")
            await until(pilot, lambda: app.snapshot is not None and app.snapshot.nodes)
            assert app.backend.writer is None and app.backend.protected == "*-admin"
            assert "PROTECTED" in str(app.screen.query_one("HeaderBar").summary())
            await pilot.press("c")
            await until(pilot, lambda: any("context gputui-test-admin is protected ('*-admin' in protected_contexts)"
                                           in str(n.message) for n in app._notifications))
    finally:
        app.backend.close()
    config = tmp_path / "gputui.yaml"
    config.write_text("protected_contexts: ['*-admin']\n")
    node = app.snapshot.nodes[0].name
    out = subprocess.run([sys.executable, "-m", "gputui", "drain", node, "--kubeconfig", str(cluster.combined_kubeconfig),
                          "--context", "gputui-test-admin"], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, GPUTUI_CONFIG=str(config), HOME=str(tmp_path)))
    assert out.returncode == 2 and "context gputui-test-admin is protected" in out.stderr
    cluster.wait_for_audit("admin", since=mark, verb="list", resource="nodes")  # it did read, as admin
    assert cluster.write_requests("admin", since=mark) == []

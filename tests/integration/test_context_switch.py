"""`:ctx` in the running app against the real apiserver: completion from the kubeconfig, then a switch."""

from __future__ import annotations

import asyncio

from gputui.backends.kube_backend import live_backend
from gputui.ops.audit import AuditLog
from gputui.settings import Settings
from gputui.ui.app import GputuiApp
from gputui.ui.command_screen import CommandScreen


async def until(pilot, predicate, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition never became true")
        await pilot.pause(0.1)


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

"""Every command against an apiserver nobody answers for (one that refuses connections, one that accepts and
never answers) says so: the cause in one line, exit 2, and never a permission ("your identity may not…",
"read-only"): no answer is not a denial. The terminal UI, and the gputui each page of `serve --allow-writes`
runs, show the cause on the connecting screen and take no write key meanwhile.

A server that does answer, but not the access review, is tests/integration/test_access_review_faults_real.py."""

from __future__ import annotations

from functools import partial

import pytest

from tests.support.cli_commands import COMMANDS
from tests.support.gputui_cli import closed_port, kubeconfig, page_settings, run_with_short_waits, silent_server
from tests.support.terminal import until

WAIT_S = 0.5  # each wait on the silent server (connect, discovery, a review): seconds per command, not a minute
NOT_A_CAUSE = ("may not", "your identity", "read-only", "Traceback", "s3cret-token-value")


@pytest.fixture(params=["refused", "silent"])
def nobody(request, tmp_path):
    """(kubeconfig, the reason gputui must name) for an apiserver that refuses, or accepts and never answers."""
    if request.param == "refused":
        yield kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{closed_port()}"), "connection refused"
        return
    sock = silent_server()
    try:
        yield kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{sock.getsockname()[1]}"), "timed out"
    finally:
        sock.close()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_names_the_cause_and_never_a_permission(name, nobody, tmp_path):
    kc, reason = nobody
    out = run_with_short_waits(WAIT_S, *COMMANDS[name], "--kubeconfig", kc, home=tmp_path)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("gputui: error: the apiserver https://127.0.0.1:"), lines[0]
    assert lines[0].endswith(f"could not be reached ({reason})"), lines[0]
    assert not [w for w in NOT_A_CAUSE if w in out.stdout + out.stderr], out.stdout + out.stderr


@pytest.mark.parametrize("fault", ["refused", "silent"])
async def test_the_tui_of_serve_allow_writes_shows_the_cause_and_takes_no_write(fault, tmp_path, monkeypatch):
    import gputui.backends.kube_discovery as discovery
    import gputui.backends.kube_http as http
    import gputui.backends.kube_writer as writer
    from gputui.backends.factory import pending_backend
    from gputui.cli import common
    from gputui.ops.audit import AuditLog
    from gputui.ui.app import GputuiApp

    for module, name in ((http, "CONNECT_TIMEOUT_S"), (discovery, "PROBE_TIMEOUT_S"), (writer, "PROBE_TIMEOUT_S")):
        monkeypatch.setattr(module, name, WAIT_S)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    sock = silent_server() if fault == "silent" else None
    port = sock.getsockname()[1] if sock is not None else closed_port()
    reason = "timed out" if sock is not None else "connection refused"
    settings = page_settings(kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}"))
    backend = pending_backend(settings)  # as gputui.cli.tui.run starts it
    app = GputuiApp(settings, backend, audit=AuditLog(tmp_path / "audit.jsonl", "unknown", backend.context),
                    connect=partial(common.backend, settings))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.connecting is not None and bool(app.connecting.error))
            assert app.connecting is not None
            error = app.connecting.error
            assert error.startswith("the apiserver https://127.0.0.1:") and error.endswith(f"could not be reached ({reason})")
            for key in ("c", "u", "r", "R", "w"):  # cordon, uncordon, drain, resume, shift: nothing to act on yet
                await pilot.press(key)
            await pilot.pause()
            said = " ".join(str(n.message) for n in app._notifications)
            assert not [w for w in NOT_A_CAUSE if w in said + error], said + error
            await pilot.press("q")
    finally:
        app.backend.close()
        if sock is not None:
            sock.close()

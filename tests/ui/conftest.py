from __future__ import annotations

import pytest

from gputui.backends.demo import demo_backend
from gputui.ops.audit import AuditLog
from gputui.settings import Settings
from gputui.ui.app import GputuiApp
from tests.demo_clock import ManualClock


def make_app(tmp_path=None, read_only: bool = False, seed: int = 7, **settings) -> GputuiApp:
    clock = ManualClock()
    backend = demo_backend(seed=seed, clock=clock, read_only=read_only)
    audit = AuditLog(tmp_path / "audit.jsonl" if tmp_path else None, "tester", "demo")
    app = GputuiApp(Settings(demo=True, seed=seed, read_only=read_only, **settings), backend, clock=clock, audit=audit)
    app.test_clock = clock
    app.drain_poll_s = 0.02  # the tests move the clock by hand; poll often in real time
    return app


@pytest.fixture
def app_factory(tmp_path):
    def factory(**kw) -> GputuiApp:
        return make_app(tmp_path, **kw)

    return factory


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    """The user's own themes, keymaps and audit log never leak into (or out of) a test."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

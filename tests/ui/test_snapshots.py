"""SVG snapshots of every screen in every bundled theme, at 80x24 and 200x50.

The seeded demo and a fixed clock make each picture the same on every run;
the audit screen reads a fixed file, and the drain board's wall-clock log is cleared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputui.ops.audit import AuditLog
from gputui.ui.drain_board import DrainProgressScreen
from gputui.ui.traffic_screen import TrafficShiftScreen
from tests.ui.conftest import make_app
from tests.ui.pilot import wait_for

THEMES = ["gputui-dark", "gputui-light", "gputui-wallboard", "gputui-colorblind", "gputui-mono", "gputui-nord"]
SIZES = [(80, 24), (200, 50)]
AUDIT_FILE = Path("/tmp/gputui-snapshot-audit/audit.jsonl")  # fixed: its path is part of the picture
LLAMA = "llm/llama-3-70b-instruct"


async def loaded(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.snapshot is not None)
    await pilot.pause()


async def dashboard_loaded(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.snapshot is not None and pilot.app.screen.query_one("#nodes").row_count > 0)


def keys(*pressed: str, settle: float = 0.0):
    async def run(pilot) -> None:
        await dashboard_loaded(pilot)
        await pilot.press(*pressed)
        await pilot.pause(settle)
        await pilot.pause()

    return run


async def node_detail(pilot) -> None:
    await dashboard_loaded(pilot)
    await pilot.press("slash", *"h100-07", "enter", "enter")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "history", None))
    await pilot.pause()


async def drain_board(pilot) -> None:
    await dashboard_loaded(pilot)
    await pilot.press("slash", *"h100-01", "enter", "r", "enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, DrainProgressScreen))
    await wait_for(pilot, lambda: any(r.state == "waiting" for r in pilot.app.drain_session.pods.values()))
    pilot.app.drain_session.log.clear()  # wall-clock stamps would make the picture change every run
    pilot.app.drain_session.started = pilot.app.clock()
    await pilot.pause(0.6)


async def shift_dialog(pilot) -> None:
    await dashboard_loaded(pilot)
    screen = TrafficShiftScreen(LLAMA)
    pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: pilot.app.screen is screen and screen.plan is not None)
    await pilot.press("plus")
    await pilot.pause()


def wallboard_page(flips: int):
    async def run(pilot) -> None:
        await loaded(pilot)
        await pilot.press(*["n"] * flips)
        await pilot.pause()

    return run


SCREENS = {
    "dashboard": dashboard_loaded,
    "node-detail": node_detail,
    "help": keys("question_mark"),
    "cordon-confirm": keys("c"),
    "diagnostics": keys("d"),
    "audit-log": keys("L"),
    "drain-plan": keys("slash", *"h100-01", "enter", "r"),
    "drain-board": drain_board,
    "shift": shift_dialog,
    "theme-picker": keys("t"),
    "command": keys("colon", "d", "r", settle=0.2),
    "wallboard-heat": wallboard_page(0),
    "wallboard-services": wallboard_page(1),
    "wallboard-alerts": wallboard_page(2),
}


def fixed_audit_log() -> AuditLog:
    AUDIT_FILE.parent.mkdir(parents=True, exist_ok=True)
    entries = [
        {"time": "2027-01-01T00:00:05Z", "action": "cordon", "target": "node/gpu-a100-08", "identity": "oncall@example.com",
         "context": "demo", "params": {}, "result": "ok"},
        {"time": "2027-01-01T00:01:10Z", "action": "evict", "target": "pod/llm/qwen2-72b-v3-abcde", "identity": "oncall@example.com",
         "context": "demo", "params": {"node": "gpu-h100-02"}, "result": "429: qwen2-72b-pdb allows no disruption"},
    ]
    AUDIT_FILE.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in entries))
    return AuditLog(AUDIT_FILE, "oncall@example.com", "demo")


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen(snap_compare, screen, size, theme):
    wallboard = screen.startswith("wallboard")
    app = make_app(theme=theme, wallboard=wallboard, read_only=wallboard, wallboard_rotate=3600.0)
    if screen == "audit-log":
        app.audit = fixed_audit_log()
    assert snap_compare(app, terminal_size=size, run_before=SCREENS[screen])


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_dashboard_read_only(snap_compare, size):
    assert snap_compare(make_app(read_only=True), terminal_size=size, run_before=dashboard_loaded)


def test_dashboard_built_in_textual_theme(snap_compare):
    """Textual's own themes work too: gputui's variables fall back to defaults."""
    assert snap_compare(make_app(theme="dracula"), terminal_size=(80, 24), run_before=dashboard_loaded)

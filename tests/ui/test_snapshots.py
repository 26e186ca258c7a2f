"""What each screen shows, as SVG pictures at 80x24 (over SSH) and 200x50 (a wide terminal).

Every bundled theme is pictured only where themes carry meaning (states and heat in colour: the dashboard,
the wallboard's heat map, the drain board); every other screen in the default theme. The seeded demo and
a fixed clock make each picture the same on every run; the audit screen reads a file written for the test
under a private home, and the drain board's wall-clock log is cleared.
"""

from __future__ import annotations

import json

from gputui.ops.audit import AuditLog
from gputui.ui.screens.drain_progress import DrainProgressScreen
from gputui.ui.screens.traffic_shift import TrafficShiftScreen
from tests.ui.conftest import make_app
from tests.ui.pictures import each_size, each_theme, picture
from tests.ui.pilot import loaded, wait_for, wallboard_loaded

LLAMA = "llm/llama-3-70b-instruct"


def keys(*pressed: str):
    async def run(pilot) -> None:
        await loaded(pilot)
        await pilot.press(*pressed)
        await pilot.pause()

    return run


async def node_detail(pilot) -> None:
    await loaded(pilot)
    await pilot.press("slash", *"h100-07", "enter", "enter")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "history", None))
    await pilot.pause()


async def drain_board(pilot) -> None:
    await loaded(pilot)
    await pilot.press("slash", *"h100-01", "enter", "r", "enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, DrainProgressScreen))
    await wait_for(pilot, lambda: any(r.state == "waiting" for r in pilot.app.last_drain.pods.values()))
    pilot.app.last_drain.log.clear()  # wall-clock stamps would make the picture change every run
    pilot.app.last_drain.started = pilot.app.clock()
    pilot.app.drain_revision += 1  # as the drain's next move would: the board redraws
    await pilot.pause()


async def shift_dialog(pilot) -> None:
    await loaded(pilot)
    screen = TrafficShiftScreen(LLAMA)
    pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: pilot.app.screen is screen and screen.plan is not None)
    await pilot.press("plus")
    await pilot.pause()


async def command_typed(pilot) -> None:
    """':dr' typed, and the inline suggestion shown: it comes from a worker, so wait for it, not for a time."""
    from textual.widgets import Input

    from gputui.ui.screens.command import CommandScreen

    def suggested() -> bool:
        screen = pilot.app.screen
        return isinstance(screen, CommandScreen) and screen.query_one(Input)._suggestion == "drain "

    await loaded(pilot)
    await pilot.press("colon", "d", "r")
    await wait_for(pilot, suggested)
    await pilot.pause()


async def service_screen(pilot) -> None:
    from gputui.ui.screens.service import ServiceScreen

    await loaded(pilot)
    screen = ServiceScreen("llm/mistral-7b")
    pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: pilot.app.screen is screen and screen.signals is not None)
    await pilot.pause()


def wallboard_page(page: str):
    from gputui.ui.screens.wallboard import PAGES

    async def run(pilot) -> None:
        await wallboard_loaded(pilot)
        await pilot.press(*["n"] * PAGES.index(page))
        await pilot.pause()

    return run


def fixed_audit_log(home) -> AuditLog:
    """Two writes in a file under the test's own home: the screen shows it as ~/…, the same on every run."""
    path = home / ".local/state/gputui/audit.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = [
        {"time": "2027-01-01T00:00:05Z", "action": "cordon", "target": "node/gpu-a100-08", "identity": "oncall@example.com",
         "context": "demo", "params": {}, "result": "ok"},
        {"time": "2027-01-01T00:01:10Z", "action": "evict", "target": "pod/llm/qwen2-72b-v3-abcde", "identity": "oncall@example.com",
         "context": "demo", "params": {"node": "gpu-h100-02"}, "result": "429: qwen2-72b-pdb allows no disruption"},
    ]
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in entries))
    return AuditLog(path, "oncall@example.com", "demo")




# ----- where themes carry meaning: every bundled theme --------------------------------------------

@each_theme
@each_size
def test_dashboard_shows_every_node_and_service_with_state_and_heat_in_each_theme(snap_compare, size, theme):
    assert picture(snap_compare, loaded, size, theme)


@each_theme
@each_size
def test_wallboard_heat_map_reads_in_each_theme(snap_compare, size, theme):
    assert picture(snap_compare, wallboard_page("heat"), size, theme, wallboard=True, read_only=True, wallboard_rotate=3600.0)


@each_theme
@each_size
def test_drain_board_shows_pod_states_deadlines_and_what_comes_next_in_each_theme(snap_compare, size, theme):
    assert picture(snap_compare, drain_board, size, theme)


# ----- one picture per screen and size, in the default theme ---------------------------------------

@each_size
def test_node_detail_lists_each_gpu_with_its_history_and_the_pods_on_it(snap_compare, size):
    assert picture(snap_compare, node_detail, size)


@each_size
def test_help_lists_the_keys_in_force(snap_compare, size):
    assert picture(snap_compare, keys("question_mark"), size)


@each_size
def test_cordon_asks_first_and_names_the_node(snap_compare, size):
    assert picture(snap_compare, keys("down", "c"), size)  # row 0 is cordoned (the GPU Operator's stalled upgrade)


@each_size
def test_diagnostics_lists_what_is_wrong_and_where_to_look(snap_compare, size):
    assert picture(snap_compare, keys("d"), size)


@each_size
def test_audit_log_shows_each_write_with_its_result(snap_compare, size, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    app = make_app()
    app.audit = fixed_audit_log(tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=keys("L"))


@each_size
def test_drain_plan_says_what_will_happen_before_anything_is_written(snap_compare, size):
    assert picture(snap_compare, keys("slash", *"h100-01", "enter", "r"), size)


@each_size
def test_shift_dialog_shows_current_and_target_weights_per_version(snap_compare, size):
    assert picture(snap_compare, shift_dialog, size)


@each_size
def test_service_screen_shows_versions_pods_gates_and_history(snap_compare, size):
    assert picture(snap_compare, service_screen, size)


@each_size
def test_theme_picker_lists_the_themes(snap_compare, size):
    assert picture(snap_compare, keys("t"), size)


@each_size
def test_command_mode_completes_as_you_type(snap_compare, size):
    assert picture(snap_compare, command_typed, size)


@each_size
def test_wallboard_services_page(snap_compare, size):
    assert picture(snap_compare, wallboard_page("services"), size, wallboard=True, read_only=True, wallboard_rotate=3600.0)


@each_size
def test_wallboard_pools_page_counts_allocated_free_and_idle_gpus(snap_compare, size):
    assert picture(snap_compare, wallboard_page("pools"), size, wallboard=True, read_only=True, wallboard_rotate=3600.0)


@each_size
def test_wallboard_alerts_page(snap_compare, size):
    assert picture(snap_compare, wallboard_page("alerts"), size, wallboard=True, read_only=True, wallboard_rotate=3600.0)


@each_size
def test_read_only_dashboard_says_so_and_offers_no_write_keys(snap_compare, size):
    assert picture(snap_compare, loaded, size, read_only=True)


def test_textual_built_in_themes_work_with_gputui_defaults(snap_compare):
    assert picture(snap_compare, loaded, (80, 24), "dracula")

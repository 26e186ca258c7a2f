"""Themes and keymaps in the running app: presets, hot reload of files, and bad files reported."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from gputui.ui.screens.cordon_dialog import CordonScreen
from gputui.ui.screens.diagnostics import DiagnosticsScreen
from gputui.ui.screens.node_detail import NodeDetailScreen
from tests.ui.pilot import loaded, wait_for

THEME = """name: mine
primary: "#336699"
variables:
  alert: "{alert}"
"""


def user_dir(tmp_path: Path, kind: str) -> Path:
    folder = tmp_path / "config" / "gputui" / kind  # XDG_CONFIG_HOME is tmp_path/config (conftest)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def notices(app) -> list[str]:
    return [n.message for n in app._notifications]


async def watching(pilot, tmp_path: Path) -> None:
    """The file watcher starts after the first frame, and its inotify watches a moment after `app.watching`: a
    file written before them would go unseen. Waited for, not slept through: a probe theme is written (again,
    under a new name, until one is seen) until the app has loaded it, i.e. the watcher saw a write."""
    await wait_for(pilot, lambda: pilot.app.watching)
    probe = user_dir(tmp_path, "themes") / "zz-watch-probe.yaml"
    for attempt in range(50):
        name = f"watch-probe-{attempt}"
        probe.write_text(THEME.replace("name: mine", f"name: {name}").format(alert="#aa0000"))
        try:
            await wait_for(pilot, lambda: name in pilot.app.available_themes, timeout=1.0)  # noqa: B023 - called at once, in this iteration
            return
        except AssertionError:
            continue  # written before the watches were in place: write it again
    raise AssertionError("the theme watcher never saw a file written")


async def test_vim_keymap_moves_with_g_G_and_opens_with_l(app_factory):  # noqa: N802 - g and G are two keys
    app = app_factory(keymap="vim")
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        table = app.screen.nodes_table
        await pilot.press("G")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("g")
        assert table.cursor_row == 0
        await pilot.press("j", "j", "k")
        assert table.cursor_row == 1
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        await pilot.press("h")
        await wait_for(pilot, lambda: not isinstance(app.screen, NodeDetailScreen))


async def test_vim_n_N_walk_the_filter_matches(app_factory):  # noqa: N802 - n and N are two keys
    app = app_factory(keymap="vim")
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("slash", *"h100", "enter")
        table = app.screen.nodes_table
        assert all("h100" in k for k in table.keys) and table.row_count > 2
        await pilot.press("n", "n")
        assert table.cursor_row == 2
        await pilot.press("N", "N", "N")
        assert table.cursor_row == table.row_count - 1  # wraps


async def test_k9s_keymap_d_describes_and_x_diagnoses(app_factory):
    app = app_factory(keymap="k9s")
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        await pilot.press("escape", "x")
        await wait_for(pilot, lambda: isinstance(app.screen, DiagnosticsScreen))


async def test_help_lists_the_keys_in_force(app_factory):
    app = app_factory(keymap="k9s")
    async with app.run_test(size=(120, 60)) as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(app.screen._table())
        text = console.export_text()
        assert "keymap k9s" in text
        lines = [line for line in text.splitlines() if "Pending GPU pods" in line]
        assert lines and lines[0].split()[0] == "x"  # diagnostics moved from d to x


async def test_theme_file_hot_reload(app_factory, tmp_path):
    themes = user_dir(tmp_path, "themes")
    (themes / "mine.yaml").write_text(THEME.format(alert="#aa0000"))
    app = app_factory(theme="mine")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await watching(pilot, tmp_path)
        assert app.palette.alert.lower() == "#aa0000"
        (themes / "mine.yaml").write_text(THEME.format(alert="#00aa00"))
        await wait_for(pilot, lambda: app.palette.alert.lower() == "#00aa00", timeout=10)
        (themes / "other.yaml").write_text(THEME.replace("name: mine", "name: other").format(alert="#0000aa"))
        await wait_for(pilot, lambda: "other" in app.available_themes, timeout=10)


async def test_bad_theme_file_is_named_and_the_last_good_theme_stays(app_factory, tmp_path):
    themes = user_dir(tmp_path, "themes")
    (themes / "mine.yaml").write_text(THEME.format(alert="#aa0000"))
    app = app_factory(theme="mine")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await watching(pilot, tmp_path)
        (themes / "mine.yaml").write_text(THEME.format(alert="not-a-colour") + "sparkle: 3\n")
        await wait_for(pilot, lambda: any("mine.yaml" in m for m in notices(app)), timeout=10)
        message = next(m for m in notices(app) if "mine.yaml" in m)
        assert "bad colour 'not-a-colour'" in message and "unknown keys sparkle" in message
        assert app.theme == "mine" and app.palette.alert.lower() == "#aa0000"


async def test_every_bad_file_in_one_notification(app_factory, tmp_path):
    (user_dir(tmp_path, "themes") / "broken.yaml").write_text("name: [unclosed\n")
    keymaps = user_dir(tmp_path, "keymaps")
    (keymaps / "typo.yaml").write_text("keys:\n  cordonn: x\n")
    (keymaps / "clash.yaml").write_text("keys:\n  cordon: d\n")
    app = app_factory()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        bad = [m for m in notices(app) if "broken.yaml" in m]
        assert len(bad) == 1
        message = bad[0]
        assert "line 2: not valid YAML" in message and "not valid YAML" in message
        assert "typo.yaml: unknown action id 'cordonn'" in message
        assert "clash.yaml: d is both cordon and diagnostics on the dashboard screen" in message
        assert "typo" not in app.keymaps and "clash" not in app.keymaps


async def test_keymap_file_hot_reload(app_factory, tmp_path):
    keymaps = user_dir(tmp_path, "keymaps")
    (keymaps / "mine.yaml").write_text("extends: vim\nkeys:\n  cordon: z\n")
    app = app_factory(keymap="mine")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("G")  # inherited from vim
        assert app.screen.nodes_table.cursor_row == app.screen.nodes_table.row_count - 1
        await pilot.press("z")
        await wait_for(pilot, lambda: isinstance(app.screen, CordonScreen))
        await pilot.press("escape")
        await watching(pilot, tmp_path)
        (keymaps / "mine.yaml").write_text("extends: vim\nkeys:\n  cordon: Z\n")
        await wait_for(pilot, lambda: app._keymap.get("cordon") == "Z", timeout=10)
        await pilot.press("z")
        await pilot.pause()
        assert not isinstance(app.screen, CordonScreen)
        await pilot.press("Z")
        await wait_for(pilot, lambda: isinstance(app.screen, CordonScreen))

"""Text from outside never reaches the terminal raw and never parses as markup, in any widget: the
terminal guard (gputui.ui.terminal_guard) and the app's notifications."""

from __future__ import annotations

import re

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from gputui.ui import terminal_guard
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.theme_picker import ThemePickerScreen
from tests.support.terminal import assert_nothing_hostile, terminal_output
from tests.ui.pilot import loaded, wait_for

TITLE = "\x1b]0;PWNED\x07"  # retitles the terminal (OSC 0), ends with BEL
CLEAR = "\x1b[2J\x9b2J"  # clears the screen, in 7-bit and 8-bit CSI


class _Plain(App[None]):
    def compose(self) -> ComposeResult:
        yield Static(Text(f"kernel {TITLE}{CLEAR} end"), id="raw")


async def test_a_rich_text_holding_escape_sequences_is_shown_not_sent():
    terminal_guard.install()
    app = _Plain()
    async with app.run_test(size=(80, 5)) as pilot:
        await pilot.pause()
        out = terminal_output(app)
    assert_nothing_hostile(out)
    assert "kernel ␛]0;PWNED" in out  # shown, so the operator sees what the cluster holds


async def test_a_notification_with_markup_and_escapes_from_the_cluster_is_shown_as_it_is(app_factory):
    """A drain-by annotation of `[/bold] x` raised MarkupError and took the TUI away at start-up."""
    app = app_factory()
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await loaded(pilot)
        app.notify(f"Interrupted drain on n1 (by [/bold] x{TITLE}). Press R", title=f"[$x]{CLEAR}")
        # The toast drawn: its text on the screen (Textual's codes left out), its escapes made visible.
        await wait_for(pilot, lambda: "(by [/bold] x␛]0;PWNED␇)" in re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "",
                                                                          terminal_output(app)),
                       what=lambda: terminal_output(app)[-2000:])
        out = terminal_output(app)
        assert app.is_running
    assert_nothing_hostile(out)


async def test_theme_and_keymap_files_with_markup_or_escapes_in_their_names_are_bad_files(app_factory, tmp_path):
    """A theme named `[/bold] x` crashed the theme picker (t) and help (?); an ESC in a theme's keys went
    to the terminal in the bad-file notification."""
    themes = tmp_path / "config" / "gputui" / "themes"
    keymaps = tmp_path / "config" / "gputui" / "keymaps"
    themes.mkdir(parents=True)
    keymaps.mkdir(parents=True)
    (themes / "evil.yaml").write_text(f'name: "[/bold] x{TITLE.encode("unicode_escape").decode()}"\nprimary: "#ff0000"\n'
                                      f'"{CLEAR.encode("unicode_escape").decode()}": 1\n')
    (keymaps / "evil.yaml").write_text('name: "[$x] [/]"\nkeys:\n  cordon: "k"\n')
    app = app_factory()
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await loaded(pilot)
        problems = "\n".join(str(n.message) for n in app._notifications)
        assert "evil.yaml" in problems and "name must be" in problems
        assert "[$x] [/]" not in app.loaded_keymaps() and not any("PWNED" in t for t in app.available_themes)
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, ThemePickerScreen))
        await pilot.pause()  # its first frame
        assert_nothing_hostile(terminal_output(app))
        await pilot.press("escape", "question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        assert_nothing_hostile(terminal_output(app))
        assert app.is_running

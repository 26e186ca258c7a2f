"""The app's looks: theme and keymap files, loaded at start and again whenever they change (a mixin of
GputuiApp: Textual finds watch_theme on the App class, so it lives on a class the app inherits)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import App

from gputui.base.paths import shown
from gputui.present.cells import Palette
from gputui.ui.keys.keymaps import load_keymaps, resolve, watched_dirs
from gputui.ui.theming import ThemesRead, load_themes, palette_from

if TYPE_CHECKING:
    _AppBase = App[None]  # mypy checks the mixin's calls against the app it is part of
else:
    _AppBase = object


class LooksMixin(_AppBase):
    """Themes and keymaps for GputuiApp; the attributes below are set in GputuiApp.__init__."""

    palette: Palette
    keymap_name: str
    keymaps: dict
    watching: bool
    _no_color: bool
    _told_problems: list
    _stop_watching: asyncio.Event

    if TYPE_CHECKING:
        def _show_snapshot(self) -> None: ...  # PollMixin's: every view redrawn

    def watch_theme(self, theme: str) -> None:
        if not self._no_color:
            self.palette = palette_from(self.get_css_variables())
        self._show_snapshot()

    def reload_looks(self, keymaps: bool = True, themes_read: ThemesRead | None = None) -> None:
        """(Re)load theme and keymap files; a bad file is reported and the last good one stays.
        `themes_read`: the theme files as just read by the caller (at start: not read twice)."""
        themes, problems = themes_read or load_themes()
        problems = list(problems)
        for theme in themes.values():
            self.register_theme(theme)
        if keymaps:
            self.keymaps, keymap_problems = load_keymaps()
            problems += keymap_problems
        if problems != self._told_problems:  # say it once per change, not on every reload
            self._told_problems = problems
            if problems:
                lines = [f"{shown(Path(p.path))}: {p.reason}" for p in problems]
                self.notify("\n".join(lines), title="Bad theme or keymap files (ignored)",
                            severity="warning", timeout=20, markup=False)
        if self.is_running and self.theme in themes:  # (App.is_mounted is a method: always true)
            self._invalidate_css()  # the file of the theme in force may have changed: apply it again
            self.refresh_css(animate=False)
            self.watch_theme(self.theme)
        if keymaps:
            self.use_keymap(self.keymap_name, quiet=True)

    def loaded_keymaps(self) -> dict:
        if not self.keymaps:  # skipped at start (see on_mount): load on first need
            self.keymaps, _ = load_keymaps()
        return self.keymaps

    def use_keymap(self, name: str, quiet: bool = False) -> bool:
        try:
            changes = resolve(name, self.loaded_keymaps())
        except (KeyError, ValueError):
            if not quiet:
                self.notify(f"no usable keymap {name!r}; keeping {self.keymap_name}", severity="warning")
            return False
        self.keymap_name = name
        self.set_keymap(changes)
        return True

    @work(exclusive=True, group="watch-looks", exit_on_error=False)
    async def _watch_looks(self) -> None:
        import watchfiles  # noqa: PLC0415 (third-party: loaded by the looks watcher, off the first frame)

        dirs = [str(d) for d in watched_dirs() if d.is_dir()]
        if not dirs:
            return

        def yaml_only(change: watchfiles.Change, path: str) -> bool:
            return path.endswith((".yaml", ".yml"))

        self.watching = True  # tests wait for this before they write files
        async for _ in watchfiles.awatch(*dirs, watch_filter=yaml_only, debounce=200, step=50,
                                         stop_event=self._stop_watching, recursive=True):
            self.reload_looks()

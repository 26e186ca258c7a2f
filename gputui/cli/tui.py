"""`gputui` with no subcommand: the terminal UI (or the wallboard)."""

from __future__ import annotations

import os

from gputui.cli import common
from gputui.settings import Settings, SettingsError


def check_named(kind: str, name: str, names: set[str], problems: list) -> None:
    """A theme or keymap asked for by name exists and loads; else one line saying which file is bad."""
    if name in names:
        return
    bad = next((p for p in problems if os.path.splitext(os.path.basename(p.path))[0] == name), None)
    if bad is not None:
        raise SettingsError(f"{kind} {name!r} cannot be used: {bad}")
    raise SettingsError(f"unknown {kind} {name!r}; available: {', '.join(sorted(names))}")


def run(settings: Settings) -> int:
    from dataclasses import replace

    from gputui.backends.factory import have_cluster_config
    from gputui.ops.audit import audit_for
    from gputui.ui.keymaps import DEFAULT, load_keymaps
    from gputui.ui.theming import BUILTIN_THEMES, load_themes

    no_color = bool(os.environ.get("NO_COLOR"))
    if no_color and settings.theme == Settings().theme:
        settings = replace(settings, theme="gputui-mono")  # NO_COLOR: no theme asked for, so none in colour
    themes_read = themes, theme_problems = load_themes()
    check_named("theme", settings.theme, {*themes, *BUILTIN_THEMES}, theme_problems)
    if settings.keymap != DEFAULT:  # the bundled default always loads (its test says so): no need to read them all
        keymaps, keymap_problems = load_keymaps()
        check_named("keymap", settings.keymap, {*keymaps, DEFAULT}, keymap_problems)
    fallback = not settings.demo and not have_cluster_config(settings)
    backend = common.backend(settings, per_gpu=settings.wallboard)  # the heat map draws every GPU
    from gputui.ui.app import GputuiApp

    audit = audit_for(settings.audit_log, backend)
    notice = "No kubeconfig found: showing the embedded demo cluster (a simulation)." if fallback else None
    # The demo reads from memory in a few milliseconds: read it before the first frame, so that frame
    # already holds the fleet (one full draw, not an empty one and then another). A cluster is read in the
    # app's worker, with its timeouts, while the screen says it is connecting.
    first = backend.reader.snapshot() if backend.simulated else None
    app = GputuiApp(settings, backend, audit=audit, no_color=no_color, notice=notice, first_snapshot=first,
                     themes_read=themes_read)
    try:
        app.run()
    finally:
        backend.close()
    return 0

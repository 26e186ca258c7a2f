"""`gputui` with no subcommand: the terminal UI (or the wallboard)."""

from __future__ import annotations

import os
from dataclasses import replace
from functools import partial

from gputui.backends.factory import CACHED_VIEW, have_cluster_config, pending_backend
from gputui.backends.snapshot_cache import CacheError, Keeper, cache_path, load
from gputui.cli import common
from gputui.ops.audit import audit_for
from gputui.settings import Settings, SettingsError
from gputui.snapshot import ClusterSnapshot
from gputui.ui.keys.keymaps import DEFAULT, load_keymaps
from gputui.ui.theming import BUILTIN_THEMES, load_themes


def check_named(kind: str, name: str, names: set[str], problems: list) -> None:
    """A theme or keymap asked for by name exists and loads; else one line saying which file is bad."""
    if name in names:
        return
    bad = next((p for p in problems if os.path.splitext(os.path.basename(p.path))[0] == name), None)
    if bad is not None:
        raise SettingsError(f"{kind} {name!r} cannot be used: {bad}")
    raise SettingsError(f"unknown {kind} {name!r}; available: {', '.join(sorted(names))}")


def cached_snapshot(context: str) -> tuple[tuple[ClusterSnapshot, float] | None, str]:
    """The context's cached snapshot and when it was saved, or None and why not (one line for diagnostics;
    "" when there is simply none yet)."""
    try:
        snapshot, saved_at = load(cache_path(context))
    except CacheError as exc:
        return None, "" if not cache_path(context).exists() else f"cached snapshot not used: {exc}"
    if snapshot.context != context or snapshot.simulated:
        return None, f"cached snapshot not used: it is of {snapshot.context!r}, not {context!r}"
    return (snapshot, saved_at), ""


def run(settings: Settings) -> int:
    no_color = bool(os.environ.get("NO_COLOR"))
    if no_color and settings.theme == Settings().theme:
        settings = replace(settings, theme="gputui-mono")  # NO_COLOR: no theme asked for, so none in colour
    themes_read = themes, theme_problems = load_themes()
    check_named("theme", settings.theme, {*themes, *BUILTIN_THEMES}, theme_problems)
    if settings.keymap != DEFAULT:  # the bundled default always loads (its test says so): no need to read them all
        keymaps, keymap_problems = load_keymaps()
        check_named("keymap", settings.keymap, {*keymaps, DEFAULT}, keymap_problems)
    fallback = not settings.demo and not have_cluster_config(settings)
    cached, cache_note = None, ""
    if settings.demo or fallback:
        backend = common.backend(settings, per_gpu=settings.wallboard)  # the heat map draws every GPU
        connect = None
    else:
        # A cluster is connected to by the app, off its UI thread, while the screen says so: the credential
        # plugin and the first reads may take long, and q and Ctrl-C work all the while. Only the kubeconfig is
        # read here, so a bad one is still one line before the screen opens. Meanwhile the context's last
        # snapshot, when gputui kept one, is drawn marked CACHED (and nothing can be written).
        backend = pending_backend(settings)
        if settings.cache and len(settings.contexts) <= 1:
            cached, cache_note = cached_snapshot(backend.context)
            if cached is not None:
                backend = pending_backend(settings, CACHED_VIEW)
        connect = partial(common.backend, settings, per_gpu=settings.wallboard)
    from gputui.ui.app import GputuiApp  # noqa: PLC0415 (looked up when the TUI starts, so tests can stand a stub app in: test_validation)

    audit = audit_for(settings.audit_log, backend)
    notice = "No kubeconfig found: showing the embedded demo cluster (a simulation)." if fallback else None
    # The demo reads from memory in a few milliseconds: read it before the first frame, so that frame
    # already holds the fleet (one full draw, not an empty one and then another).
    first = backend.reader.snapshot() if backend.simulated else None
    app = GputuiApp(settings, backend, audit=audit, no_color=no_color, notice=notice, first_snapshot=first,
                     themes_read=themes_read, connect=connect, cached=cached)
    if connect is not None and settings.cache:
        app.keeper, app.cache_note = Keeper(), cache_note
    try:
        app.run()
    finally:
        app.backend.close()  # the one it ended on (:ctx may have replaced the first)
    if app.crash is not None:  # Textual printed nothing of it (GputuiApp._fatal_error): the crash file says it all
        return common.crashed(app.crash)
    return common.EXIT_CRASH if app.return_code else common.EXIT_OK

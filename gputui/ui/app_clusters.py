"""The app's clusters: the context it is on (`:ctx` switches, off the UI thread, the old one kept until the new
one answers) and the fleet it watches (`:fleet`, `--context a,b`: gputui.ui.runs.fleet_watch). Functions of
the app (GputuiApp's handlers and commands call them), kept here so the app stays its spine. They change the
app only through its methods (use_backend, watch_fleet): no field of it is written from here."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gputui.backends.base import error_line
from gputui.backends.factory import build_backend, context_names
from gputui.ui.messages import Connected

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp


def contexts(app: GputuiApp) -> list[str]:
    if app.backend.simulated:
        return [app.backend.context]
    return context_names(app.settings)


def switch_context(app: GputuiApp, context: str) -> None:
    """Connect to another context off the UI thread; the old one stays until the new one answers."""
    if context == app.backend.context:
        app.notify(f"already on {context}")
        return
    if app.settings.pin_context:
        # A served page (gputui serve) stays on the context the operator started it on, whatever else the
        # kubeconfig holds (its credentials are the operator's, not the browser user's).
        app.notify(f"this page is pinned to {app.backend.context}: no switch to {context}", severity="warning",
                   markup=False)
        return
    if app.backend.simulated:
        app.notify("the demo cluster has a single context", severity="warning")
        return

    settings = replace(app.settings, context=context)
    app.notify(f"connecting to {context}…", timeout=5)

    def connect() -> None:
        try:
            app.post_message(Connected(context, settings, build_backend(settings), None))
        except Exception as exc:  # noqa: BLE001 - the switch fails with its reason shown, the app stays on its cluster
            app.post_message(Connected(context, settings, None, error_line(exc)))

    app.run_worker(connect, thread=True, group="connect", exclusive=True, exit_on_error=False)


def connected(app: GputuiApp, message: Connected) -> None:
    if message.backend is None:
        app.notify(f"{message.context}: {message.error}", severity="error", markup=False)
        return
    backend = message.backend
    old = app.backend
    app.use_backend(message.settings, backend)
    on_old = [s for s in app.running_drains if s.backend is old]
    if on_old:
        # The running drains keep their own connection (the last to end closes it): closing it now would
        # make every pod look gone.
        nodes = ", ".join(n for s in on_old for n in s.nodes)
        app.notify(f"now on {backend.context}; the drain of {nodes} goes on on {old.context}", markup=False)
    else:
        old.close()
        app.notify(f"now on {backend.context}")


def open_fleet(app: GputuiApp) -> None:
    """The fleet view: the configured contexts (--context a,b or contexts:), else the kubeconfig's."""
    from gputui.ui.screens.fleet import FleetScreen  # noqa: PLC0415 (screen: loaded when first shown)

    if app.fleet is None:
        if app.settings.pin_context and not app.settings.contexts:
            # Nor are the kubeconfig's other contexts a served page's to read: only the fleet the operator gave
            # (--context a,b, the config's contexts:) shows, polled read-only, its rows not switched to.
            app.notify(f"this page is pinned to {app.backend.context}: no fleet view", severity="warning",
                       markup=False)
            return
        contexts = app.settings.contexts or tuple(context_names(app.settings))
        if not contexts or app.backend.simulated:
            app.notify("no fleet: the demo cluster, or a kubeconfig with no contexts", severity="warning")
            return
        app.watch_fleet(contexts)
    app.push_screen(FleetScreen())

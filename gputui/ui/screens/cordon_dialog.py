"""Cordon and uncordon from any screen: plan, confirm, then write through the app's writer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.backends.base import BackendError
from gputui.ops.context import OpContext
from gputui.ops.cordon import plan_cordon, run_cordon
from gputui.ui.screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp


def ask_cordon(app: GputuiApp, node: str | None, cordon: bool) -> None:
    """Plan, confirm, then cordon or uncordon through the app's writer (shared by screens)."""
    why = app.backend.why_not("cordon" if cordon else "uncordon")
    if why:
        app.notify(why, severity="warning")
        return
    if node is None or app.snapshot is None:
        return
    try:
        plan = plan_cordon(app.snapshot, node, cordon)
    except BackendError as exc:  # the node is gone since the snapshot was shown
        app.notify(str(exc), severity="error")
        return
    if plan.already:
        app.notify(plan.describe())
        return

    def confirmed(yes: bool | None) -> None:
        if yes:
            ctx = OpContext.of(app.backend, app.settings, app.audit)
            app.run_write(plan.verb.capitalize(), lambda: run_cordon(plan, ctx))

    app.push_screen(ConfirmScreen(plan.verb.capitalize() + "?", plan.describe()), confirmed)

"""Cordon and uncordon from any screen: plan, ask, then write through the app's writer.

A cordon asks why (required), a ticket and an expiry (optional) in one small form, checked as the headless
command checks them (gputui.policy.cordon_record): a bad value is one line in the form and nothing is sent. An
uncordon of a node another actor holds (gputui.policy.cordon_owner) names that actor and takes `y` only: enter,
pressed by habit, does not override another actor's hold."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Static

from gputui.backends.base import BackendError
from gputui.base.safe_text import visible
from gputui.ops.context import OpContext
from gputui.ops.cordon import CordonPlan, plan_cordon, run_cordon
from gputui.policy.cordon_record import clean_reason, clean_ticket, parse_expiry
from gputui.ui.base import ClusterModal
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.vocabulary.disruptions import CORDON_REASON_MAX, CORDON_TICKET_MAX

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp

FIELDS = (("reason", "Reason", "why (required)", CORDON_REASON_MAX),
          ("ticket", "Ticket", "optional: OPS-123 or a URL", CORDON_TICKET_MAX),
          ("expires", "Expires", "optional: 4h, 2d or 2026-12-24", 40))


class CordonScreen(ClusterModal[tuple[str, str, float | None] | None]):
    """The cordon's form: reason, ticket, expiry. Enter (in any field) cordons, tab moves, esc cancels."""

    DEFAULT_CSS = """
    CordonScreen { align: center middle; }
    CordonScreen .cordon-row { height: 1; margin-top: 1; }
    CordonScreen .cordon-label { width: 9; }
    CordonScreen Input { width: 1fr; }
    CordonScreen #cordon-error { height: auto; margin-top: 1; color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="cordon-cancel")]

    def __init__(self, plan: CordonPlan) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(f"Cordon {self.plan.node}?", style="bold"), id="dialog-title")
            yield Static(Text(shown(self.plan)), id="dialog-body")
            for key, label, hint, most in FIELDS:
                with Horizontal(classes="cordon-row"):
                    yield Static(label, classes="cordon-label")
                    yield Input(placeholder=hint, max_length=most, compact=True, id=f"cordon-{key}")
            yield Static("", id="cordon-error")
            yield Static(Text.assemble(("enter", "bold"), " cordon   ", ("tab", "bold"), " next field   ",
                                       ("esc", "bold"), " cancel"), id="dialog-keys")

    def on_mount(self) -> None:
        self.query_one("#cordon-reason", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        values = {key: self.query_one(f"#cordon-{key}", Input).value for key, *_ in FIELDS}
        checks = (("reason", clean_reason), ("ticket", clean_ticket),
                  ("expires", lambda text: parse_expiry(text, self.app.clock())))
        out: dict[str, object] = {}
        for key, check in checks:
            try:
                out[key] = check(values[key])
            except ValueError as exc:  # one line in the form; nothing is sent
                self.query_one("#cordon-error", Static).update(Text(str(exc)))
                self.query_one(f"#cordon-{key}", Input).focus()
                return
        expires = out["expires"]
        self.dismiss((str(out["reason"]), str(out["ticket"]),
                      float(expires) if isinstance(expires, (int, float)) else None))

    def action_cancel(self) -> None:
        self.dismiss(None)


class OverrideScreen(ConfirmScreen):
    """An uncordon over another actor's hold: `y` overrides; enter does nothing (no override by habit)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Override", id="override-yes"),
        Binding("enter", "explain", show=False),
        Binding("n,escape", "answer(False)", "No", id="override-no"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self._title, style="bold"), id="dialog-title")
            yield Static(Text(self._body), id="dialog-body")
            yield Static(Text.assemble(("y", "bold"), " uncordon anyway (overrides it; audited)   ", ("n", "bold"),
                                       "/", ("esc", "bold"), " cancel"), id="dialog-keys")

    def action_explain(self) -> None:
        self.notify("Another actor holds this node: press y to override it, n to leave it", severity="warning")


def shown(plan: CordonPlan) -> str:
    """The plan in words, its cluster text (an actor's message, a record's reason) made safe for the screen and cut
    where a dialog at 80x24 still shows its keys."""
    return visible(plan.describe(), 600)


def ask_cordon(app: GputuiApp, node: str | None, cordon: bool) -> None:
    """Plan, ask, then cordon or uncordon through the app's writer (shared by screens)."""
    why = app.backend.why_not("cordon" if cordon else "uncordon")
    if why:
        app.notify(why, severity="warning")
        return
    if node is None or app.snapshot is None:
        return
    try:
        plan = plan_cordon(app.snapshot, node, cordon, identity=app.audit.identity)
    except BackendError as exc:  # the node is gone since the snapshot was shown
        app.notify(str(exc), severity="error")
        return
    if plan.already:
        app.notify(plan.describe())
        return

    def write(chosen: CordonPlan, override: bool = False) -> None:
        # The app's clock: the record's "since" on the same clock as the expiry the form read (and the snapshots).
        ctx = OpContext.of(app.backend, app.settings, app.audit).paced(1.0, clock=app.clock)
        app.run_write(chosen.verb.capitalize(), lambda: run_cordon(chosen, ctx, override_owner=override))

    if cordon:
        def given(answer: tuple[str, str, float | None] | None) -> None:
            if answer is not None:
                reason, ticket, expires = answer
                write(replace(plan, reason=reason, ticket=ticket, expires=expires))

        app.push_screen(CordonScreen(plan), given)
        return
    if plan.foreign:
        def overridden(yes: bool | None) -> None:
            if yes:
                write(plan, override=True)

        app.push_screen(OverrideScreen(f"Uncordon {node} over another actor?", shown(plan)), overridden)
        return

    def confirmed(yes: bool | None) -> None:
        if yes:
            write(plan)

    app.push_screen(ConfirmScreen(plan.verb.capitalize() + "?", shown(plan)), confirmed)

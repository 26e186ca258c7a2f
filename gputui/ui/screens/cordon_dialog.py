"""Cordon and uncordon from any screen: plan, ask, then write through the app's writer.

A cordon asks why (required), a ticket and an expiry (optional) in one small form, checked as the headless
command checks them (gputui.policy.cordon_record): a bad value is one line in the form and nothing is sent. An
uncordon of a node another actor holds (gputui.policy.cordon_owner) names that actor and takes `y` only: enter,
pressed by habit, does not override another actor's hold.

An uncordon of a node gputui cordoned with a record offers `d`: a DCGM diagnostic first (gputui.ops.diag), its
progress shown; the node is uncordoned only on a pass. Otherwise the failing tests are shown, the node stays
cordoned, and `o` then `y` (two explicit keys) uncordons it anyway, audited as an override."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, Static

from gputui.backends.base import BackendError, error_line
from gputui.base.safe_text import visible
from gputui.ops.context import OpContext
from gputui.ops.cordon import CordonPlan, plan_cordon, run_cordon
from gputui.ops.diag import DiagRun, run_diag
from gputui.ops.diag_gate import audit_verdict, decide, record_verdict
from gputui.policy.cordon_record import clean_reason, clean_ticket, parse_expiry
from gputui.ui.base import ClusterModal
from gputui.ui.messages import WriteDone
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


class UncordonChoiceScreen(ConfirmScreen):
    """An uncordon of a node gputui cordoned: `d` runs the diagnostic first, `y` uncordons without, `n`/esc
    cancels. Enter does nothing: which of the two is meant must be said. Still a yes/no answer (True for
    both d and y), `diag` saying which."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "diagnose", "Diagnose first", id="uncordon-diag"),
        Binding("y", "answer(True)", "Uncordon", id="uncordon-plain"),
        Binding("enter", "explain", show=False),
        Binding("n,escape", "answer(False)", "Cancel", id="uncordon-cancel"),
    ]
    diag = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self._title, style="bold"), id="dialog-title")
            yield Static(Text(self._body), id="dialog-body")
            yield Static(Text.assemble(("d", "bold"), " DCGM diagnostic first, uncordon on a pass   ", ("y", "bold"),
                                       " uncordon now   ", ("n", "bold"), "/", ("esc", "bold"), " cancel"),
                         id="dialog-keys")

    def action_diagnose(self) -> None:
        self.diag = True
        self.dismiss(True)

    def action_explain(self) -> None:
        self.notify("Press d to run the DCGM diagnostic first, y to uncordon now, n to cancel", severity="warning")


@dataclass
class DiagProgress(Message):
    line: str


@dataclass
class DiagDone(Message):
    run: DiagRun
    result: str  # the uncordon's line on a pass; "" when the node stayed cordoned


FAILING_SHOWN = 8  # failing tests listed in the dialog (the rest counted) so that its keys stay on an 80x24 screen


class DiagScreen(ClusterModal[None]):
    """The diagnostic running, then its verdict. While it runs, esc leaves it running (its end is notified);
    after a verdict other than pass, `o` asks (a second screen, `y` only) whether to uncordon anyway."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "override", "Override", id="diag-override"),
        Binding("escape,n", "close", "Close", id="diag-close"),
    ]

    def __init__(self, plan: CordonPlan, ctx: OpContext) -> None:
        super().__init__()
        self.plan, self.ctx = plan, ctx
        self.run: DiagRun | None = None
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(f"DCGM diagnostic on {self.plan.node}", style="bold"), id="dialog-title")
            yield Static(Text(f"dcgmi diag -r {self.ctx.settings.diag_level}: starting…"), id="dialog-body")
            yield Static(Text.assemble(("esc", "bold"), " close (the diagnostic keeps running; its end is notified)"),
                         id="dialog-keys")

    def on_mount(self) -> None:
        plan, ctx, app = self.plan, self.ctx, self.app

        def progress(line: str) -> None:
            self.post_message(DiagProgress(line))

        def job() -> None:
            try:
                run = run_diag(plan.node, ctx, progress)
                decision = decide(run, override=False)
                gated = record_verdict(plan, run, ctx)
                audit_verdict(run, decision, ctx)
                result = run_cordon(gated, ctx, diag=run.to_dict()) if decision.uncordon else ""
                self.plan = gated
            except Exception as exc:  # noqa: BLE001 - said in one line; the node stays as it was
                app.post_message(WriteDone("Diagnostic", error_line(exc), failed=True))
                return
            self.post_message(DiagDone(run, result))
            app.post_message(WriteDone("Diagnostic", result or decision.line, failed=not decision.uncordon))

        app.run_worker(job, thread=True, group="write", exit_on_error=False)

    def on_diag_progress(self, message: DiagProgress) -> None:
        self.lines = [*self.lines, message.line][-4:]
        self.query_one("#dialog-body", Static).update(Text(visible("\n".join(self.lines), 600)))

    def on_diag_done(self, message: DiagDone) -> None:
        self.run = run = message.run
        lines = run.lines()
        head, tests = lines[0], lines[1:]
        more = f"\n  …and {len(tests) - FAILING_SHOWN} more" if len(tests) > FAILING_SHOWN else ""
        outcome = message.result or f"{run.node} stays cordoned."
        body = visible(head, 300) + "".join("\n" + visible(t, 160) for t in tests[:FAILING_SHOWN]) + more
        self.query_one("#dialog-body", Static).update(Text(f"{body}\n\n{outcome}"))
        keys = Text.assemble(("esc", "bold"), " close")
        if not message.result:
            keys = Text.assemble(("o", "bold"), " uncordon anyway (asks again; audited)   ", ("esc", "bold"), " close")
        self.query_one("#dialog-keys", Static).update(keys)

    def action_override(self) -> None:
        run = self.run
        if run is None or run.verdict == "pass":
            return
        plan, ctx, app = self.plan, self.ctx, self.app

        def confirmed(yes: bool | None) -> None:
            if not yes:
                return
            audit_verdict(run, decide(run, override=True), ctx)
            app.run_write("Uncordon", lambda: run_cordon(plan, ctx, diag={**run.to_dict(), "override_diag": True}))
            self.dismiss(None)

        app.push_screen(OverrideScreen(f"Uncordon {run.node} although its diagnostic did not pass?",
                                       visible(f"{run.verdict.upper()}: {run.summary}", 400)), confirmed)

    def action_close(self) -> None:
        self.dismiss(None)


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
    why = app.backend.why_not(plan.operation)  # withdrawing gputui's NodeMaintenance: a delete as well
    if why:
        app.notify(why, severity="warning")
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

    record = plan.owner.record if plan.owner is not None else None
    if record is not None and not record.problem:  # gputui cordoned it, with a record: offer the diagnostic first
        choice = UncordonChoiceScreen(plan.verb.capitalize() + "?", shown(plan))

        def chosen(yes: bool | None) -> None:
            if yes and choice.diag:
                ctx = OpContext.of(app.backend, app.settings, app.audit).paced(1.0, clock=app.clock)
                app.push_screen(DiagScreen(plan, ctx))
            elif yes:
                write(plan)

        app.push_screen(choice, chosen)
        return
    app.push_screen(ConfirmScreen(plan.verb.capitalize() + "?", shown(plan)), confirmed)

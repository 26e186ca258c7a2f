"""`enter` on a service: the service in full (present.service_view), redrawn on each snapshot; its versions'
error ratio and p95 latency read from the engines' metrics in a worker every SIGNALS_EVERY_S, never on the UI
thread. From here the operator runs seed 001 §7's safe update: `w` shifts by hand, `g` starts a guided canary
(space pauses it, x stops it where it is), `b` rolls back at once, `U` undoes the last shift; on an Argo
Rollout, its own verbs (P promote, F promote-full, A abort, T retry, U undo). Every plan that is read from
the cluster is read in a worker and shown in full before anything is sent."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from gputui.backends.base import BackendError, error_line
from gputui.ops.canary import Gates, plan_canary
from gputui.ops.context import OpContext
from gputui.ops.traffic import (
    ShiftError,
    ShiftPlan,
    apply_shift,
    on_route_now,
    plan_rollout_now,
    plan_shift,
    served_api_versions,
)
from gputui.present.service_view import service_view

if TYPE_CHECKING:  # runs.canary is imported when a canary starts (it pulls in ops.canary)
    from gputui.ui.runs.canary import CanaryRun
from gputui.present.shift import plan_text
from gputui.ui.base import ClusterScreen
from gputui.ui.messages import PlanRead, SignalsRead
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.vocabulary.signals import VersionSignals

SIGNALS_EVERY_S = 15.0
SIGNALS_WINDOW_S = 300.0  # the canary's default rate window: the same figures it gates on
CANARY_LINES_SHOWN = 6
ARGO_VERBS = {"promote": "Promote", "promote-full": "Promote fully", "abort": "Abort", "retry": "Retry",
              "undo": "Undo"}


class ServiceScreen(ClusterScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
        Binding("w", "shift", "Weights", id="service-shift"),
        Binding("g", "canary", "Canary", id="service-canary",
                tooltip="Guided canary: the newest version to 5, 25, 50, 100%, each step gated"),
        Binding("space", "pause_canary", "Pause", id="service-canary-pause",
                tooltip="Pause or continue the running canary (its gates are still watched)"),
        Binding("x", "stop_canary", "Stop", id="service-canary-stop", show=False,
                tooltip="Stop the running canary where it is: traffic stays as it is now"),
        Binding("f", "force_canary", "Force step", id="service-canary-force", show=False,
                tooltip="A held canary: take its step past the capacity rule (as rollout --force)"),
        Binding("b", "rollback", "Rollback", id="service-rollback",
                tooltip="Roll back: a running canary at once; else back to the last canary's start, or undo the "
                        "last shift; an Argo Rollout is aborted"),
        Binding("U", "undo", "Undo", id="service-undo", show=False,
                tooltip="Undo the last shift (an Argo Rollout: back to the previous revision)"),
        Binding("P", "rollout('promote')", "Promote", id="service-promote", show=False,
                tooltip="Argo Rollout: promote to the next step"),
        Binding("F", "rollout('promote-full')", "Promote fully", id="service-promote-full", show=False,
                tooltip="Argo Rollout: skip the remaining steps"),
        Binding("A", "rollout('abort')", "Abort", id="service-abort", show=False,
                tooltip="Argo Rollout: abort (traffic back to stable)"),
        Binding("T", "rollout('retry')", "Retry", id="service-retry", show=False,
                tooltip="Argo Rollout: retry an aborted rollout"),
    ]

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key.partition("@")[0]  # a dashboard row key (service@version) works too
        self.signals: dict[str, VersionSignals] | None = None
        self.signals_error = ""
        self.read_at: float | None = None

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="service-title", classes="panel-title")
        with VerticalScroll(id="service-scroll"):
            yield Static(id="service-body")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.show_snapshot()

    def show_canary(self) -> None:
        self.show_snapshot(read_signals=False)

    def show_snapshot(self, read_signals: bool = True) -> None:
        app = self.app
        snapshot = app.snapshot
        if snapshot is None:
            return
        service = snapshot.service(self.key)
        title = Text(" Service ", style="bold")
        title.append(self.key)
        self.query_one("#service-title", Static).update(title)
        body = self.query_one("#service-body", Static)
        if service is None:
            body.update(Text(f"{self.key} is not in the snapshot any more (deleted, or outside the namespace view)"))
            return
        canary = app.canaries.get(self.key)
        shown = None if canary is None else (canary.state(), canary.lines(CANARY_LINES_SHOWN), canary.finished)
        body.update(service_view(snapshot, service, self.signals, self.signals_error, app.audit.entries(),
                                 app.palette, canary=shown))
        now = app.clock()
        if read_signals and (self.read_at is None or now - self.read_at >= SIGNALS_EVERY_S):
            self.read_at = now
            backend = app.backend

            def read() -> None:
                try:
                    self.post_message(SignalsRead(backend.version_signals(snapshot, service, SIGNALS_WINDOW_S), ""))
                except BackendError as exc:
                    self.post_message(SignalsRead(None, error_line(exc)))

            self.run_worker(read, thread=True, exclusive=True, group="signals", exit_on_error=False)

    def on_signals_read(self, message: SignalsRead) -> None:
        self.signals, self.signals_error = message.signals, message.error
        self.show_snapshot()

    # ----- the operator's hand ----------------------------------------------------------------

    def _live_canary(self) -> CanaryRun | None:  # not `_running`: Textual has one
        run = self.app.canaries.get(self.key)
        return run if run is not None and not run.finished else None

    def _is_rollout(self) -> bool:
        snapshot = self.app.snapshot
        service = snapshot.service(self.key) if snapshot else None
        return service is not None and service.router_kind == "Rollout"

    def action_shift(self) -> None:
        from gputui.ui.screens.traffic_shift import TrafficShiftScreen  # noqa: PLC0415 (screen: loaded when first shown)

        if self.allowed("shift"):
            self.app.push_screen(TrafficShiftScreen(self.key))

    def action_canary(self) -> None:
        from gputui.ops.canary_steps import preview  # noqa: PLC0415 (the canary machinery loads with the first canary)
        from gputui.ui.runs.canary import start_canary  # noqa: PLC0415 (the canary machinery loads with the first canary)
        from gputui.ui.screens.canary_confirm import CanaryConfirm, canary_question  # noqa: PLC0415 (screen: loaded when first shown)

        app, snapshot = self.app, self.app.snapshot
        if not self.allowed("canary") or snapshot is None:
            return
        if self._live_canary():
            app.notify(f"a canary of {self.key} is running: space pauses it, x stops it, b rolls it back")
            return
        service = snapshot.service(self.key)
        if service is None:
            return
        if service.router_kind == "Rollout":
            app.notify("an Argo Rollout runs its own canary: P promote, F promote fully, A abort, T retry, U undo",
                       markup=False)
            return
        share = {v.name: service.share_pct(v.name) or 0.0 for v in service.versions}
        primary = max(share, key=lambda n: share[n], default="")
        # The new version: the one with the least traffic besides the one carrying the most (the last on a tie).
        new = min(reversed([n for n in share if n != primary]), key=lambda n: share[n], default="")
        try:
            plan = plan_canary(snapshot, self.key, new)
        except ShiftError as exc:
            app.notify(str(exc), severity="warning", markup=False)
            return
        gates = Gates()
        steps = preview(snapshot, self.key, new, plan.steps)
        dialog = CanaryConfirm("Start a guided canary?", canary_question(plan, gates, steps, snapshot.simulated),
                               any(s.forceable for s in steps))

        def answer(yes: bool | None) -> None:
            if yes:
                start_canary(app, plan, gates, app.canary_poll_s, force=dialog.forced)
                self.show_canary()

        app.push_screen(dialog, answer)

    def action_pause_canary(self) -> None:
        run = self._live_canary()
        if run is None:
            self.app.notify(f"no canary of {self.key} is running (g starts one)")
            return
        if run.report.held and not run.control.paused:  # held: space tries the step (or the gates) now
            run.control.request("retry")
            self.app.notify("trying again now: " + run.report.held, markup=False)
            return
        run.control.set_paused(not run.control.paused)
        self.app.notify("canary paused: it stays at its step, its gates still watched" if run.control.paused
                        else "canary continues")
        self.show_canary()

    def action_force_canary(self) -> None:
        run = self._live_canary()
        if run is None:
            self.app.notify(f"no canary of {self.key} is running (g starts one)")
            return
        if not self.allowed("canary"):
            return
        if "takes it anyway" not in run.report.held:
            self.app.notify("nothing to force: the canary is not held by the capacity rule"
                            + (f" ({run.report.held})" if run.report.held else ""), markup=False)
            return
        run.control.request("force")
        self.app.notify("forcing the held step past the capacity rule (its gates still decide the next)")

    def action_stop_canary(self) -> None:
        run = self._live_canary()
        if run is None:
            self.app.notify(f"no canary of {self.key} is running (g starts one)")
            return
        run.control.request("stop")
        self.app.notify("stopping the canary: traffic stays where it is")

    def action_rollback(self) -> None:
        if not self.allowed("rollback"):
            return
        run = self._live_canary()
        if run is not None:  # one key, no question: what the canary was for
            run.control.request("rollback")
            self.app.notify("rolling back: " + ", ".join(f"{k} {v:g}%" for k, v in run.plan.start.items()),
                            severity="warning", markup=False)
            return
        if self._is_rollout():
            self._plan_and_confirm("Abort the Rollout?", lambda snap, backend, api: plan_rollout_now(
                snap, self.key, "abort", backend.writer, api))
            return
        ended = self.app.canaries.get(self.key)
        if ended is not None:
            start = dict(ended.plan.start)

            self._plan_and_confirm("Back to where the canary started?", lambda snap, backend, api: on_route_now(
                partial(plan_shift, snap, self.key, start, api_versions=api), backend.writer))
            return
        self.action_undo()

    def action_undo(self) -> None:
        if not self.allowed("undo"):
            return
        if self._is_rollout():
            self.action_rollout("undo")
            return
        from gputui.ops.traffic.undo import plan_undo  # noqa: PLC0415 (the rollback planner loads with the first undo)

        audit = self.app.audit

        self._plan_and_confirm("Undo the last shift?", lambda snap, backend, api: on_route_now(
            partial(plan_undo, snap, self.key, audit, api_versions=api), backend.writer))

    def action_rollout(self, verb: str) -> None:
        if not self.allowed("rollout"):
            return
        if not self._is_rollout():
            self.app.notify(f"{self.key} is not an Argo Rollout: its verbs do not apply (w shifts, g runs a canary)",
                            markup=False)
            return
        self._plan_and_confirm(f"{ARGO_VERBS[verb]} the Rollout?", lambda snap, backend, api: plan_rollout_now(
            snap, self.key, verb, backend.writer, api))

    def _plan_and_confirm(self, title: str, build: Callable[..., ShiftPlan]) -> None:
        """Plan in a worker on the objects as read now; on_plan_read shows the plan and asks."""
        snapshot, backend = self.app.snapshot, self.app.backend
        if snapshot is None:
            return

        def work() -> None:
            try:
                self.post_message(PlanRead(title, build(snapshot, backend, served_api_versions(backend)), None))
            except (BackendError, ShiftError) as exc:
                self.post_message(PlanRead(title, None, error_line(exc)))

        self.run_worker(work, thread=True, group="plan", exclusive=True, exit_on_error=False)

    def on_plan_read(self, message: PlanRead) -> None:
        from gputui.ui.screens.confirm import ConfirmScreen  # noqa: PLC0415 (screen: loaded when first shown)

        app, plan = self.app, message.plan
        if plan is None or plan.errors:
            app.notify(message.error or (plan.errors[0] if plan else "?"), title=message.title, severity="warning",
                       markup=False)
            return
        # What blocks it (the capacity rule, a route moved since) is in the plan's text: confirming it is the
        # operator's informed choice, as `f` is in the shift dialog and --force in the CLI.
        force = bool(plan.blockers)
        title = message.title.rstrip("?") + (" anyway?" if force else "?")
        ctx = OpContext.of(app.backend, app.settings, app.audit)
        simulated = bool(app.snapshot and app.snapshot.simulated)

        def answer(yes: bool | None) -> None:
            if yes:
                app.run_write(message.title.rstrip("?"),
                              lambda: apply_shift(plan, ctx, force=force))

        app.push_screen(ConfirmScreen(title, plan_text(plan, simulated)), answer)

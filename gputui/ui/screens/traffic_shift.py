"""Shift traffic between a service's versions: choose, step, preview the exact patch, confirm.

Editing is pure planning on the last snapshot (gputui.ops.traffic); reading the
route object and writing run in thread workers. The confirm step shows the plan
built from the route as just read, and that plan's patch is what is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from gputui.backends.base import error_line
from gputui.ops.context import OpContext
from gputui.ops.traffic import (
    ADAPTERS,
    STEP_PCT,
    ShiftPlan,
    apply_shift,
    plan_shift,
    read_route,
    rebalance,
    served_api_versions,
)
from gputui.present.shift import key_hints, plan_findings, shift_table
from gputui.ui.base import ClusterModal
from gputui.ui.messages import RouteRead


class Mode(Enum):
    """Where the dialog is: choosing weights, reading the route as it is now, or asking before the patch."""

    EDIT = "edit"
    READING = "reading"
    CONFIRM = "confirm"


class TrafficShiftScreen(ClusterModal[None]):
    """A state machine in `mode` (EDIT → READING → CONFIRM, and back to EDIT): its watcher redraws and clears
    what belonged to the state left."""

    DEFAULT_CSS = """
    TrafficShiftScreen { align: center middle; }
    #shift-dialog {
        width: 78; max-width: 100%; height: auto; max-height: 100%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    #shift-title { height: auto; }
    #shift-table { height: auto; margin-top: 1; }
    #shift-notes { height: auto; margin-top: 1; }
    #shift-patch { height: auto; max-height: 14; margin-top: 1; display: none; }
    #shift-patch.shown { display: block; }
    #shift-keys { height: auto; margin-top: 1; color: $text-muted; }
    """
    BINDINGS = [  # type: ignore[assignment]  # (a list of Binding is what Screen takes; mypy sees list invariance)
        Binding("left,h,up,k", "choose(-1)", "Previous version", id="shift-previous", show=False),
        Binding("right,l,down,j", "choose(1)", "Next version", id="shift-next", show=False),
        Binding("plus,equals_sign", "step(1)", "+10%", id="shift-more"),
        Binding("minus", "step(-1)", "-10%", id="shift-less"),
        Binding("p", "preview", "Patch", id="shift-preview", tooltip="Show the exact patch that will be sent"),
        Binding("enter,y", "confirm", "Apply", id="shift-apply"),
        Binding("f", "force", "Apply anyway", id="shift-force", show=False),
        Binding("n", "back", "Back", id="shift-back", show=False),
        Binding("backspace", "backspace", "Erase a digit", id="shift-erase", show=False),
        Binding("pageup", "scroll_patch(-1)", "Scroll the patch up", id="shift-scroll-up", show=False),
        Binding("pagedown", "scroll_patch(1)", "Scroll the patch down", id="shift-scroll-down", show=False),
        Binding("escape", "cancel", "Cancel", id="shift-cancel"),
    ] + [Binding(str(d), f"digit({d})", show=False) for d in range(10)]

    def __init__(self, service_key: str) -> None:
        super().__init__()
        key, _, version = service_key.partition("@")  # a dashboard row key works too
        self.service_key = key
        self.chosen: str | None = version or None
        self.targets: dict[str, float] | None = None  # None: the current weights
        self.typed = ""
        self._typed_base: dict[str, float] | None = None
        self.plan: ShiftPlan | None = None  # planned on the snapshot, as edited
        self.confirm_plan: ShiftPlan | None = None  # planned on the route as read: what is sent
        self.patch_shown = False
        self.problem: str | None = None
        self._refused = False
        self._reads = 0  # only the newest read's answer counts
        self._then: Callable[[ShiftPlan], None] = self._enter_confirm  # what the read's plan goes to

    mode: reactive[Mode] = reactive(Mode.EDIT, init=False)

    def watch_mode(self, mode: Mode) -> None:
        if mode is Mode.EDIT:  # back to editing: the plan read for the confirmation and its patch are gone
            self.confirm_plan = None
            self.patch_shown = False
        self._redraw()

    def compose(self) -> ComposeResult:
        with Vertical(id="shift-dialog"):
            yield Static(id="shift-title")
            yield Static(id="shift-table")
            yield Static(id="shift-notes")
            with VerticalScroll(id="shift-patch", can_focus=False):
                yield Static(id="shift-patch-text")
            yield Static(id="shift-keys")

    # ----- opening: refuse what cannot be shifted ------------------------------------

    def on_mount(self) -> None:
        app = self.app
        reason = None
        if app.backend.why_not("shift"):
            reason = app.backend.why_not("shift")
        elif app.snapshot is None:
            reason = "no data yet: try again in a moment"
        else:
            service = app.snapshot.service(self.service_key)
            if service is None:
                reason = f"service {self.service_key} is gone"
            elif not service.router_kind:
                reason = f"{service.key} has no traffic router in front of it: nothing to shift"
            elif len(service.versions) < 2:
                reason = f"{service.key} has one version: nothing to shift"
        if reason is not None:
            self._refused = True
            app.notify(reason, severity="warning", markup=False)
            self.call_after_refresh(self._close)
            return
        self.call_after_refresh(self.show_snapshot)  # once mounted: the next poll may bring nothing new

    def _close(self) -> None:
        self.dismiss(None)  # not awaited: called from this screen's own message loop

    # ----- planning ------------------------------------------------------------------

    def _plan(self, targets: dict[str, float] | None = None) -> ShiftPlan | None:
        snapshot = self.app.snapshot
        if snapshot is None or snapshot.service(self.service_key) is None:
            return None
        if targets is None:
            targets = self.targets
        if targets is None:
            service = snapshot.service(self.service_key)
            assert service is not None  # checked above
            targets = {v.name: (service.share_pct(v.name) or 0.0) for v in service.versions}
        return plan_shift(snapshot, self.service_key, targets, api_versions=served_api_versions(self.app.backend))

    def _target_pcts(self) -> dict[str, float]:
        assert self.plan is not None
        return {v.name: (v.target_pct if v.target_pct is not None else (v.current_pct or 0.0))
                for v in self.plan.versions}

    def _set_targets(self, pcts: dict[str, float]) -> None:
        plan = self._plan(pcts)
        if plan is None:
            return
        self.plan = plan
        # What is shown is what is kept: the percentages of the integer weights.
        self.targets = {v.name: v.target_pct for v in plan.versions if v.target_pct is not None} or pcts
        self.problem = None
        self._redraw()

    # ----- rendering -----------------------------------------------------------------

    def show_snapshot(self) -> None:
        if self._refused or not self.is_mounted:
            return
        plan = self._plan()
        if plan is None:
            self.problem = f"service {self.service_key} is gone"
            self._redraw()
            return
        self.plan = plan
        names = [v.name for v in plan.versions]
        if self.chosen not in names:
            # The canary, usually: the smallest share (the last of equals).
            self.chosen = min(reversed(plan.versions), key=lambda v: v.current_pct or 0.0).name
        self._redraw()

    def _shown_plan(self) -> ShiftPlan | None:
        return self.confirm_plan if self.mode is Mode.CONFIRM and self.confirm_plan else self.plan

    def _redraw(self) -> None:
        plan = self._shown_plan()
        if plan is None:
            self.query_one("#shift-notes", Static).update(Text(self.problem or "", style="bold red"))
            return
        title = Text("Shift traffic  ", style="bold")
        title.append(plan.service.key, style="bold")
        title.append("\n")
        title.append(f"{plan.kind} {plan.service.namespace}/{plan.object_name}", style="dim")
        if plan.scale != 100:
            title.append(f"  (weights out of {plan.scale:,})", style="dim")
        self.query_one("#shift-title", Static).update(title)
        chosen = self.chosen if self.mode is Mode.EDIT else None
        self.query_one("#shift-table", Static).update(shift_table(plan, chosen, self.typed))
        notes = self._notes(plan)
        self.query_one("#shift-notes", Static).update(notes)
        self.query_one("#shift-notes", Static).display = bool(notes)
        box = self.query_one("#shift-patch", VerticalScroll)
        box.set_class(self.patch_shown, "shown")
        if self.patch_shown:
            self.query_one("#shift-patch-text", Static).update(self._patch_text())
        self.query_one("#shift-keys", Static).update(self._keys(plan))

    def _notes(self, plan: ShiftPlan) -> Text:
        out = Text()

        def line(prefix: str, text: str, style: str) -> None:
            if out:
                out.append("\n")
            out.append(prefix, style=style)
            out.append(text)

        if self.problem:
            line("✗ ", self.problem, "bold red")
        out.append_text(plan_findings(plan, first=not out))
        if self.mode is Mode.CONFIRM and self.confirm_plan is not None and plan.ok:
            p = self.confirm_plan
            line("", "", "")
            verb = "Apply?" if p.patch else "Nothing to change."
            out.append(verb + " ", style="bold")
            out.append(f"{p.kind} {p.service.namespace}/{p.object_name}: {p.summary()}")
            if p.patch:
                ops = len(p.patch.body) if isinstance(p.patch.body, list) else 1
                kind = "JSON patch" if p.patch.patch_type == "json" else "merge patch"
                out.append(f"\n{kind}, {ops} operation{'s' if ops != 1 else ''}; the tests in it refuse a route "
                           "someone changed meanwhile", style="dim")
        elif self.mode is Mode.READING:
            line("", "reading the route…", "dim")
        for n in plan.notes if self.mode is Mode.CONFIRM else ():
            line("· ", n, "dim")
        return out

    def _patch_text(self) -> Text:
        plan = self.confirm_plan
        if plan is None or plan.patch is None:
            return Text("no patch: nothing would be sent" if plan else "reading the route…", style="dim")
        return Text(plan.patch.render())

    def _keys(self, plan: ShiftPlan) -> Text:
        """The keys of the state the dialog is in."""
        keys: list[tuple[str, str]]
        if self.mode is Mode.CONFIRM:
            keys = [("y", "apply")] if plan.ok and self.confirm_plan and self.confirm_plan.patch else []
            if plan.blockers and plan.ok:
                keys = [("f", "apply anyway")]
            keys += [("p", "hide patch" if self.patch_shown else "patch"), ("esc", "back")]
        elif self.mode is Mode.READING:
            keys = [("esc", "cancel")]
        else:
            keys = [("←→", "version"), ("+/-", f"{STEP_PCT:.0f}%"), ("0-9", "type %"),
                    ("p", "patch"), ("enter", "apply"), ("esc", "cancel")]
        return key_hints(keys)

    # ----- editing -------------------------------------------------------------------

    def action_choose(self, direction: int) -> None:
        if self.mode is not Mode.EDIT or self.plan is None:
            return
        names = [v.name for v in self.plan.versions]
        i = names.index(self.chosen) if self.chosen in names else 0
        self.chosen = names[(i + direction) % len(names)]
        self.typed, self._typed_base = "", None
        self._redraw()

    def action_step(self, direction: int) -> None:
        if self.mode is not Mode.EDIT or self.plan is None or self.chosen is None:
            return
        self.typed, self._typed_base = "", None
        pcts = self._target_pcts()
        self._set_targets(rebalance(pcts, self.chosen, pcts[self.chosen] + direction * STEP_PCT))

    def action_digit(self, digit: int) -> None:
        if self.mode is not Mode.EDIT or self.plan is None or self.chosen is None:
            return
        if self._typed_base is None:
            self._typed_base = self._target_pcts()
        typed = self.typed + str(digit)
        if len(typed) > 3 or int(typed) > 100:
            typed = str(digit)
        self.typed = typed.lstrip("0") or "0"
        self._set_targets(rebalance(self._typed_base, self.chosen, int(self.typed)))

    def action_backspace(self) -> None:
        if self.mode is not Mode.EDIT or not self.typed or self._typed_base is None or self.chosen is None:
            return
        self.typed = self.typed[:-1]
        base = self._typed_base
        if self.typed:
            self._set_targets(rebalance(base, self.chosen, int(self.typed)))
        else:
            self._typed_base = None
            self._set_targets(base)

    # ----- preview, confirm, apply ---------------------------------------------------

    def _read(self, then: Callable[[ShiftPlan], None]) -> None:
        """Plan again on the route object as read now (a thread: the read is a network call)."""
        plan = self.plan
        if plan is None:
            return
        if plan.kind not in ADAPTERS or not plan.ok or not plan.changes:
            then(plan)  # an Argo Rollout patch needs no read; an invalid plan is shown as it is
            return
        snapshot, writer = self.app.snapshot, self.app.backend.writer
        if snapshot is None or writer is None:  # read-only never gets here: the apply key is off
            return
        targets = dict(plan.targets)
        api = served_api_versions(self.app.backend)
        key = self.service_key
        self._reads += 1
        seq = self._reads
        self.mode = Mode.READING

        def job() -> None:
            try:
                route = read_route(plan, writer)
                self.post_message(RouteRead(seq, plan_shift(snapshot, key, targets, route=route, api_versions=api), None))
            except Exception as exc:  # noqa: BLE001 - shown in the dialog, never a crash
                self.post_message(RouteRead(seq, None, error_line(exc)))

        self._then = then
        self.run_worker(job, thread=True, exclusive=True, group="shift-read", exit_on_error=False)

    def on_route_read(self, message: RouteRead) -> None:
        if self.mode is not Mode.READING or message.seq != self._reads:
            return  # cancelled, or an older read
        if message.plan is not None:
            self._then(message.plan)
            return
        self.problem = f"cannot read the route: {message.error}"
        self.mode = Mode.EDIT

    def _enter_confirm(self, plan: ShiftPlan) -> None:
        self.confirm_plan = plan
        self.mode = Mode.CONFIRM

    def action_preview(self) -> None:
        if self.mode is Mode.READING:
            return
        if self.patch_shown:
            self.patch_shown = False
            self._redraw()
            return
        self.patch_shown = True
        if self.mode is Mode.CONFIRM:
            self._redraw()
        else:
            self._read(self._enter_confirm)

    def action_confirm(self) -> None:
        if self.mode is Mode.EDIT:
            if self.plan is None:
                return
            if not self.plan.ok:
                self.app.notify(self.plan.errors[0], severity="error", markup=False)
                return
            if not self.plan.changes:
                self.app.notify("nothing to change: set a target first (+/-, or type a percentage)")
                return
            self._read(self._enter_confirm)
        elif self.mode is Mode.CONFIRM:
            self._apply(force=False)

    def action_force(self) -> None:
        if self.mode is Mode.CONFIRM:
            self._apply(force=True)

    def _apply(self, force: bool) -> None:
        plan = self.confirm_plan
        if plan is None or not plan.ok:
            return
        if plan.blockers and not force:
            self.app.notify(plan.blockers[0] + ": press f to shift anyway", severity="warning", markup=False)
            return
        if not plan.changes or plan.patch is None:
            self.app.notify(f"{plan.target}: nothing to change", markup=False)
            self.dismiss(None)
            return
        ctx = OpContext.of(self.app.backend, self.app.settings, self.app.audit)
        self.app.run_write("Shift traffic", lambda: apply_shift(plan, ctx, force=force))
        self.dismiss(None)

    def action_back(self) -> None:
        if self.mode is Mode.CONFIRM:
            self.mode = Mode.EDIT

    def action_cancel(self) -> None:
        if self.mode in (Mode.CONFIRM, Mode.READING):
            self.mode = Mode.EDIT
            return
        self.dismiss(None)

    def action_scroll_patch(self, direction: int) -> None:
        box = self.query_one("#shift-patch", VerticalScroll)
        if direction < 0:
            box.scroll_page_up()
        else:
            box.scroll_page_down()

"""The drain plan, before anything is written: every pod's step, session state and budget, the batch's
capacity, kubectl's options as toggles. Enter starts; esc changes nothing."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Static

from gputui.backends.base import ArrivalsReader, BackendError
from gputui.ops.drain.arrivals import stuck_pods, with_rates
from gputui.ops.drain.batch_plan import BatchPlan, plan_batch
from gputui.ops.drain.lease import draining
from gputui.ops.drain.maintenance_request import SOURCE as MAINTENANCE_SOURCE
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.placement import SHORT_CAVEAT
from gputui.ops.drain.plan import DrainPlan, Step
from gputui.ops.drain.plan_placement import batch_lines
from gputui.present.cells import Palette, ago, short_pod
from gputui.ui.base import ClusterModal
from gputui.vocabulary.model import READ
from gputui.vocabulary.sessions import Arrivals

DEADLINE_STEP_S = 5 * 60


NARROW_BELOW = 120  # columns: below this the Pod column shows short names (cells.short_pod) on one line
NARROW_POD = 32


def render_plan(batch: BatchPlan, palette: Palette, narrow: bool = False) -> Group:
    """`narrow` (below NARROW_BELOW columns): each pod as two lines, its short name (cells.short_pod) and
    figures, then its note across the width, so no name or note is folded into a column a few cells wide."""
    parts: list[RenderableType] = []
    for plan in batch.plans:
        title = Text(plan.title, style="bold")
        if plan.already_cordoned:
            title.append("  already cordoned", style="dim")
        elif plan.options.gpu:  # one GPU's drain: the node keeps serving on its other GPUs
            title.append("  the node stays schedulable", style="dim")
        parts.append(title)
        if plan.fence:
            parts.append(Text(plan.fence, style=palette.cordoned if "could land" in plan.fence else "dim"))
        if plan.request is not None and not plan.request.error:  # the maintenance-operator takes the node
            parts.append(Text(plan.request.words(), style="dim"))
        table = Table(box=None, expand=True, padding=(0, 1), show_header=True, header_style="bold")
        table.add_column("Step", no_wrap=True)
        if narrow:
            table.add_column("Pod  GPUs  sessions / can go; note", overflow="fold")
        else:
            table.add_column("Pod", overflow="fold", ratio=3)
            table.add_column("GPUs", justify="right", no_wrap=True)
            table.add_column("Sessions", justify="right", no_wrap=True)
            table.add_column("Can go", no_wrap=True)  # where its replacement can go (placement preview)
            table.add_column("Budget / note", overflow="fold", ratio=3)
        for p in plan.pods:
            style = {Step.ERROR: f"bold {palette.alert}", Step.WAIT_SESSIONS: palette.draining,
                     Step.SKIP: "dim"}.get(p.step, "")
            note = p.note
            if p.rotation is not None:  # what the drain does first (a pod kept in says why among the warnings)
                # Short: at 80 columns the budget beside it must still show (the CLI's plan gives the paths).
                note = (note + "; " if note else "") + f"first: out of rotation (-{', '.join(p.rotation.labels)})"
            if p.budget_note and p.step is not Step.SKIP:  # a budget, or an inference pod with none
                note = (note + "; " if note else "") + p.budget_note
            goes = p.placement
            gpus = str(p.pod.gpu_request or "–")
            sessions = "–" if p.step is Step.SKIP else p.sessions.text
            go = Text(goes.short() if goes else "–", style=(f"bold {palette.alert}" if goes and goes.stranded else
                                                             palette.cordoned if goes and not goes.sure else ""))
            said = Text(note, style=palette.alert if p.pdb_blocks_now or p.step is Step.ERROR else "")
            if narrow:
                cell = Text()  # the name alone in bold (a Text's own style would cover all it holds)
                cell.append(short_pod(p.pod.key, NARROW_POD), style="bold")
                if p.step is not Step.SKIP:  # a skipped pod's figures are dashes: its note says why
                    cell.append(f"  {gpus} GPU{'' if gpus == '1' else 's'}  {sessions} sessions\ncan go: ")
                    cell.append_text(go)
                if note:
                    cell.append("; " if p.step is not Step.SKIP else "\n")
                    cell.append_text(said)
                table.add_row(Text(p.step.value, style=style), cell)
            else:
                table.add_row(Text(p.step.value, style=style), Text(p.pod.key), gpus, sessions, go, said)
        parts.append(table)
        for p in plan.pods:  # why a replacement has nowhere to go, or where it goes is unknown
            if p.placement is not None and p.placement.verdict.value != "can go":
                accepted = p.pod.key in batch.accepted
                parts.append(Text(f"{p.pod.key}: {p.placement.text()}" + ("  (accepted: left Pending)" if accepted else ""),
                                  style=palette.cordoned if accepted or not p.placement.stranded else f"bold {palette.alert}"))
        cap = Text("capacity: " + plan.capacity.describe(),
                   style=palette.ok if plan.capacity.fits else f"bold {palette.alert}")
        parts.append(cap)
        for error in plan.errors:
            parts.append(Text("blocked: " + error, style=f"bold {palette.alert}"))
        for warning in plan.warnings:
            parts.append(Text("warning: " + warning, style=palette.cordoned))
        for blocker in plan.blockers:  # another responder evicts these (EvictionRequest API): waited on, never evicted
            parts.append(Text("left to another responder: " + blocker, style=palette.cordoned))
        for p in plan.to_evict:
            for request in p.eviction_api.requests:
                parts.append(Text(f"{p.pod.key}: {request}", style="dim"))
        parts.append(Text(""))
    placed = batch_lines(batch)
    if len(batch.plans) > 1 or batch.ahead:
        for line in batch.describe():
            alert = not batch.fits or (line in placed and batch.blocked_by_placement)
            parts.append(Text(line, style=f"bold {palette.alert}" if alert else palette.ok))
    else:
        for line in placed:
            parts.append(Text(line, style=f"bold {palette.alert}" if batch.blocked_by_placement else palette.ok))
    return Group(*parts)


@dataclass
class RatesRead(Message):
    """The arrival rates of the plan's pods left in rotation, read by a worker (workers reach the UI by message)."""

    rates: dict[str, Arrivals]
    failed: str


class DrainPlanScreen(ClusterModal[DrainOptions | None]):
    """The plan, with kubectl's options as toggles. Enter starts; esc changes nothing."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,y", "start", "Start drain", id="drain-start"),
        Binding("escape,n", "cancel", "Cancel", id="drain-cancel"),
        Binding("e", "toggle_option('delete_emptydir_data')", "emptyDir", id="drain-emptydir"),
        Binding("f", "toggle_option('force')", "Force", id="drain-force"),
        Binding("u", "toggle_option('evict_unknown_at_deadline')", "Unknown: evict at deadline",
                id="drain-evict-unknown"),
        Binding("plus,equals_sign", "deadline(1)", "+5m", id="drain-deadline-up"),
        Binding("minus", "deadline(-1)", "-5m", id="drain-deadline-down"),
        Binding("D", "delete_mode", "Delete w/o eviction", id="drain-delete-mode", show=False),
        Binding("a", "accept_stranded", "Accept stranded", id="drain-accept-stranded", show=False),
        Binding("g", "include_unattributed", "Unknown GPU: move too", id="drain-include-unattributed", show=False),
        Binding("m", "toggle_via", "Via NodeMaintenance", id="drain-via", show=False),
    ]

    def __init__(self, nodes: list[str], options: DrainOptions | None = None) -> None:
        super().__init__()
        self.nodes = nodes
        self.options = options or DrainOptions()
        # The arrival rates of pods left in rotation, read once off the UI thread (a Prometheus query).
        self.rates: dict[str, Arrivals] = {}
        self.rates_failed = ""
        # Pods whose replacement would have nowhere to go, accepted by the operator (the `a` key): left Pending.
        self.accepted: frozenset[str] = frozenset()

    def compose(self) -> ComposeResult:
        with Vertical(id="drain-dialog"):
            yield Static(id="drain-title")
            with VerticalScroll(id="drain-plan-scroll"):
                yield Static(id="drain-plan")
            yield Static(id="drain-options")
            yield Input(placeholder="type the node names (comma-separated) to delete without eviction",
                        id="drain-confirm-delete")

    def on_mount(self) -> None:
        self.query_one("#drain-confirm-delete").display = False
        self.refresh_plan()
        reader = self.app.backend.reader if self.app.backend is not None else None
        waiting = stuck_pods(self.batch_plan())
        if waiting and isinstance(reader, ArrivalsReader):
            def read() -> None:
                try:
                    rates, failed = dict(reader.arrivals(waiting)), ""
                except BackendError as exc:
                    rates, failed = {}, str(exc)
                self.post_message(RatesRead(rates, failed))

            self.run_worker(read, thread=True, exit_on_error=False, group="arrivals")

    def on_rates_read(self, message: RatesRead) -> None:
        self.rates, self.rates_failed = message.rates, message.failed
        if self.is_attached:
            self.refresh_plan()

    def batch_plan(self) -> BatchPlan:
        snap = self.app.snapshot
        assert snap is not None  # the plan is opened only from a screen showing a snapshot
        # The drains running take free GPUs first: the plan counts what their pods still move before its own.
        running = [n for s in self.app.running_drains for n in s.nodes] + draining(snap, time.time())
        # As many at once as the run will start (the settings' drain_parallel), under every budget.
        return plan_batch(snap, [n for n in self.nodes if snap.node(n)], self.options, self.accepted, running,
                          parallel=self.app.settings.drain_parallel)

    def plans(self) -> list[DrainPlan]:
        return list(self.batch_plan().plans)

    def refresh_plan(self) -> None:
        batch = self.batch_plan()
        if self.rates or self.rates_failed:
            batch = with_rates(batch, self.rates, self.rates_failed)
        plans = list(batch.plans)
        palette = self.app.palette
        sessions = sum(p.live_sessions for p in plans)
        unknown = sum(len(p.unknown_pods) for p in plans)
        title = Text(f"Drain GPU {self.options.gpu} of {self.nodes[0]}" if self.options.gpu else
                     f"Drain {self.nodes[0]}" if len(self.nodes) == 1 else f"Drain {len(self.nodes)} nodes", style="bold")
        title.append(f"   {sessions} live sessions will be waited for", style=palette.draining)
        if unknown:
            title.append(f"; {unknown} pods with sessions unknown", style=f"bold {palette.alert}")
        if batch.stranded:
            title.append(f"; {len(batch.stranded)} with nowhere to go", style=f"bold {palette.alert}")
        self.query_one("#drain-title", Static).update(title)
        self.query_one("#drain-plan", Static).update(render_plan(batch, palette, self.app.size.width < NARROW_BELOW))
        o = self.options
        opts = Text()
        for key, label, on in (("e", "delete emptyDir data", o.delete_emptydir_data), ("f", "force", o.force),
                               ("u", "sessions unknown at deadline: evict", o.evict_unknown_at_deadline)):
            opts.append(f"[{key}] ", style="bold")
            opts.append(f"{label}: {'on' if on else 'off'}   ", style=palette.cordoned if on else "")
        opts.append("[+/-] ", style="bold")
        opts.append(f"session deadline {ago(o.session_deadline_s)}   ")
        if not o.gpu and (o.maintenance_namespace or self._operator_installed()):  # which way the node is taken
            opts.append("[m] ", style="bold")
            opts.append(f"via: {'NodeMaintenance (the operator cordons)' if o.maintenance_namespace else 'cordon'}   ",
                        style=palette.cordoned if o.maintenance_namespace else "")
        if o.disable_eviction:
            opts.append("DELETE WITHOUT EVICTION (PDBs bypassed)", style=f"bold reverse {palette.alert}")
        if o.unattributed:  # pods that may be on the GPU: the plan refuses until the operator chooses
            opts.append("[g] ", style="bold")
            opts.append(f"unknown GPU ({len(o.unattributed)}): {'move too' if o.include_unattributed else 'refuse'}   ",
                        style=palette.cordoned if o.include_unattributed else f"bold {palette.alert}")
        if batch.stranded:
            opts.append("[a] ", style="bold")
            opts.append(f"accept stranded: {'on' if self.accepted else 'off'}   ",
                        style=palette.cordoned if self.accepted else "")
        blocked = any(p.blocked for p in plans)
        stranded = batch.blocked_by_placement and not blocked
        if any(p.placement for plan in plans for p in plan.pods):  # the caveat stays in sight at any size
            opts.append("\n")
            opts.append(SHORT_CAVEAT, style="dim")
        opts.append("\n")
        opts.append("enter", style="bold")
        opts.append(" (blocked: fix the options first)   " if blocked else
                    " (blocked: nowhere to go; [a] accepts)   " if stranded else " start   ",
                    style=palette.alert if blocked or stranded else "")
        opts.append("esc", style="bold")
        opts.append(" cancel")
        self.query_one("#drain-options", Static).update(opts)

    def action_toggle_option(self, name: str) -> None:
        # (not action_toggle: that is Textual's own action, toggling an attribute of the screen)
        self.options = replace(self.options, **{name: not getattr(self.options, name)})  # type: ignore[arg-type]
        self.refresh_plan()

    def _operator_installed(self) -> bool:
        actors = self.app.snapshot.actors if self.app.snapshot is not None else None
        return actors is not None and actors.reads.get(MAINTENANCE_SOURCE) == READ

    def action_toggle_via(self) -> None:
        """Cordon by itself, or as the maintenance-operator's requestor (gputui.ops.drain.maintenance_request)."""
        if self.options.gpu:
            return  # one GPU's drain never takes the node
        namespace = "" if self.options.maintenance_namespace else self.app.settings.maintenance_namespace
        self.options = replace(self.options, maintenance_namespace=namespace)
        self.refresh_plan()

    def action_include_unattributed(self) -> None:
        if self.options.gpu and self.options.unattributed:
            self.action_toggle_option("include_unattributed")

    def action_deadline(self, direction: int) -> None:
        seconds = max(60.0, self.options.session_deadline_s + direction * DEADLINE_STEP_S)
        self.options = replace(self.options, session_deadline_s=seconds)
        self.refresh_plan()

    def action_delete_mode(self) -> None:
        box = self.query_one("#drain-confirm-delete", Input)
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        typed = sorted(filter(None, (s.strip() for s in event.value.split(","))))
        event.input.display = False
        if typed == sorted(self.nodes):
            self.options = replace(self.options, disable_eviction=True, force=True)
            self.notify("Pods will be DELETED without eviction: PodDisruptionBudgets will not protect them.",
                        severity="warning")
        else:
            self.notify("Names did not match: eviction stays on.", severity="information")
        self.refresh_plan()

    def action_accept_stranded(self) -> None:
        """Accept (or no longer accept) leaving Pending the pods the preview says have nowhere to go."""
        stranded = frozenset(p.pod.key for p in self.batch_plan().stranded)
        self.accepted = frozenset() if self.accepted else stranded
        self.refresh_plan()

    def action_start(self) -> None:
        batch = self.batch_plan()
        if any(p.blocked for p in batch.plans):
            self.notify("The drain is blocked; see the plan.", severity="error")
            return
        if batch.blocked_by_placement:
            self.notify(f"{len(batch.stranded)} pods would have nowhere to go: press a to accept leaving them "
                        "Pending.", severity="error")
            return
        if batch.budget_stops and batch.limiting is not None:  # no room in a budget, or one unknown: nothing starts
            self.notify(f"No node may start now: {batch.limiting.words()}", severity="error")
            return
        why = self.app.backend.why_not(self.options.operation)  # via NodeMaintenance: its create and delete too
        if why:
            self.notify(why, severity="error")
            return
        self.dismiss(self.options)

    def action_cancel(self) -> None:
        self.dismiss(None)

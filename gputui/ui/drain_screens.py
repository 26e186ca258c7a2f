"""Drain in the TUI: the plan first (nothing written), then a live progress board.

A drain outlives its screen: it runs in an app-level thread worker and keeps
its state in a DrainSession, so the operator can go back to the dashboard and
return with `p` while sessions run down.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Input, Static

from gputui.ops.drain_batch import run_batch
from gputui.ops.drain_plan import DrainOptions, DrainPlan, Step, plan_drain
from gputui.ops.drain_run import DrainControl, DrainEvent
from gputui.render import ago, elide_middle
from gputui.ui.footer import KeyFooter
from gputui.ui.key_table import KeyTable
from gputui.ui.header import HeaderBar
from gputui.ui.table_sync import sync_rows

EXTEND_S = 5 * 60
DEADLINE_STEP_S = 5 * 60


class _Interrupted(Exception):
    pass


@dataclass
class PodRow:
    node: str
    pod: str
    state: str = "pending"
    sessions: int | None = None
    message: str = ""


@dataclass
class DrainSession:
    """Everything the progress board shows; written by the drain thread, read by the UI."""

    nodes: list[str]
    options: DrainOptions
    started: float
    controls: dict[str, DrainControl] = field(default_factory=dict)
    pods: dict[str, PodRow] = field(default_factory=dict)
    node_state: dict[str, str] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    finished: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, event: DrainEvent, now: float) -> None:
        with self.lock:
            if event.pod:
                row = self.pods.setdefault(event.pod, PodRow(event.node, event.pod))
                row.state = {"sessions-cut": row.state, "info": row.state}.get(event.kind, event.kind)
                if event.sessions is not None and event.kind == "waiting":
                    row.sessions = event.sessions
                if event.kind != "waiting":
                    row.message = event.message
            else:
                self.node_state[event.node] = event.kind
            if event.kind not in ("waiting", "tick"):
                stamp = time.strftime("%H:%M:%S", time.localtime(now))
                self.log.append(f"{stamp} {event.node} {event.kind} {event.pod} {event.message}".rstrip())
                del self.log[:-200]


def render_plan(plans: list[DrainPlan], palette) -> Group:
    parts = []
    for plan in plans:
        title = Text(f"node/{plan.node}", style="bold")
        if plan.already_cordoned:
            title.append("  already cordoned", style="dim")
        parts.append(title)
        table = Table(box=None, expand=True, padding=(0, 1), show_header=True, header_style="bold")
        table.add_column("Step", no_wrap=True)
        table.add_column("Pod", overflow="fold", ratio=3)
        table.add_column("GPUs", justify="right", no_wrap=True)
        table.add_column("Sessions", justify="right", no_wrap=True)
        table.add_column("Budget / note", overflow="fold", ratio=3)
        for p in plan.pods:
            style = {Step.ERROR: f"bold {palette.alert}", Step.WAIT_SESSIONS: palette.draining,
                     Step.SKIP: "dim"}.get(p.step, "")
            note = p.note
            if p.budgets and p.step is not Step.SKIP:
                note = (note + "; " if note else "") + p.budget_note
            table.add_row(
                Text(p.step.value, style=style), Text(p.pod.key), str(p.pod.gpu_request or "–"),
                "–" if p.pod.live_sessions is None else str(p.pod.live_sessions),
                Text(note, style=palette.alert if p.pdb_blocks_now or p.step is Step.ERROR else ""),
            )
        parts.append(table)
        cap = Text("capacity: " + plan.capacity.describe(),
                   style=palette.ok if plan.capacity.fits else f"bold {palette.alert}")
        parts.append(cap)
        for error in plan.errors:
            parts.append(Text("blocked: " + error, style=f"bold {palette.alert}"))
        parts.append(Text(""))
    return Group(*parts)


class DrainPlanScreen(ModalScreen[DrainOptions | None]):
    """The plan, with kubectl's options as toggles. Enter starts; esc changes nothing."""

    BINDINGS = [
        Binding("enter,y", "start", "Start drain", id="drain-start"),
        Binding("escape,n", "cancel", "Cancel", id="drain-cancel"),
        Binding("e", "toggle('delete_emptydir_data')", "emptyDir", id="drain-emptydir"),
        Binding("f", "toggle('force')", "Force", id="drain-force"),
        Binding("plus,equals_sign", "deadline(1)", "+5m", id="drain-deadline-up"),
        Binding("minus", "deadline(-1)", "-5m", id="drain-deadline-down"),
        Binding("D", "delete_mode", "Delete w/o eviction", id="drain-delete-mode", show=False),
    ]

    def __init__(self, nodes: list[str], options: DrainOptions | None = None) -> None:
        super().__init__()
        self.nodes = nodes
        self.options = options or DrainOptions()

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

    def plans(self) -> list[DrainPlan]:
        snap = self.app.snapshot
        return [plan_drain(snap, n, self.options, batch=set(self.nodes)) for n in self.nodes if snap.node(n)]

    def refresh_plan(self) -> None:
        plans = self.plans()
        palette = self.app.palette
        sessions = sum(p.live_sessions for p in plans)
        title = Text(f"Drain {self.nodes[0]}" if len(self.nodes) == 1 else f"Drain {len(self.nodes)} nodes", style="bold")
        title.append(f"   {sessions} live sessions will be waited for", style=palette.draining)
        self.query_one("#drain-title", Static).update(title)
        self.query_one("#drain-plan", Static).update(render_plan(plans, palette))
        o = self.options
        opts = Text()
        for key, label, on in (("e", "delete emptyDir data", o.delete_emptydir_data), ("f", "force", o.force)):
            opts.append(f"[{key}] ", style="bold")
            opts.append(f"{label}: {'on' if on else 'off'}   ", style=palette.cordoned if on else "")
        opts.append("[+/-] ", style="bold")
        opts.append(f"session deadline {ago(o.session_deadline_s)}   ")
        if o.disable_eviction:
            opts.append("DELETE WITHOUT EVICTION (PDBs bypassed)", style=f"bold reverse {palette.alert}")
        blocked = any(p.blocked for p in plans)
        opts.append("\n")
        opts.append("enter", style="bold")
        opts.append(" start   " if not blocked else " (blocked: fix the options first)   ",
                    style="" if not blocked else palette.alert)
        opts.append("esc", style="bold")
        opts.append(" cancel")
        self.query_one("#drain-options", Static).update(opts)

    def action_toggle(self, name: str) -> None:
        self.options = replace(self.options, **{name: not getattr(self.options, name)})
        self.refresh_plan()

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

    def action_start(self) -> None:
        if any(p.blocked for p in self.plans()):
            self.notify("The drain is blocked; see the plan.", severity="error")
            return
        self.dismiss(self.options)

    def action_cancel(self) -> None:
        self.dismiss(None)


def start_drain(app, nodes: list[str], options: DrainOptions, deadlines: dict[str, float] | None = None) -> DrainSession:
    """Run the batch in an app-level thread; the session object carries its state."""
    session = DrainSession(nodes, options, app.clock(), {n: DrainControl() for n in nodes})
    app.drain_session = session

    def work() -> None:
        from textual.worker import get_current_worker

        worker = get_current_worker()

        def nap(seconds: float) -> None:
            # Quitting gputui interrupts the drain: the node's annotations let it resume later.
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                if worker.is_cancelled:
                    raise _Interrupted
                time.sleep(min(0.1, max(0.0, end - time.monotonic())))

        gen = run_batch(nodes, app.backend.reader, app.backend.writer, app.audit, options,
                        parallel=app.settings.drain_parallel, controls=session.controls,
                        deadlines=deadlines, clock=app.clock, sleep=nap, poll_s=app.drain_poll_s)
        try:
            for event in gen:
                session.apply(event, app.clock())
        except _Interrupted:
            session.apply(DrainEvent(",".join(nodes), "info", message="interrupted by quitting"), app.clock())
        except Exception as exc:  # shown, never a traceback
            session.apply(DrainEvent(",".join(nodes), "failed", message=str(exc)), app.clock())
        finally:
            session.finished = True
            if not worker.is_cancelled:
                app.call_from_thread(app.poll_now)

    app.run_worker(work, thread=True, group="drain", exit_on_error=False)
    return session


class DrainProgressScreen(Screen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back (drain goes on)", id="back"),
        Binding("e", "evict_now", "Evict now", id="drain-evict-now"),
        Binding("x", "extend", "+5m", id="drain-extend"),
        Binding("a", "abort(False)", "Abort", id="drain-abort"),
        Binding("U", "abort(True)", "Abort+uncordon", id="drain-abort-uncordon"),
    ]

    def __init__(self, session: DrainSession) -> None:
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="drain-summary", classes="panel-title")
        yield Static(id="drain-nodes")
        yield KeyTable(id="drain-pods", cursor_type="row")
        yield Static(id="drain-log")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#drain-pods", DataTable)
        for key, label, width in (("node", "Node", 12), ("pod", "Pod", 34), ("state", "State", 12),
                                  ("sessions", "Sessions", 8), ("message", "Detail", 40)):
            table.add_column(label, width=width, key=key)
        self.set_interval(0.5, self.show_snapshot)
        self.show_snapshot()

    def show_snapshot(self) -> None:
        self.query_one(HeaderBar).refresh_text()
        s = self.session
        palette = self.app.palette
        with s.lock:
            rows = {
                key: (Text(r.node), Text(elide_middle(key, 34)), Text(r.state, style={
                    "waiting": palette.draining, "blocked": palette.cordoned, "failed": f"bold {palette.alert}",
                    "gone": palette.ok, "evicted": palette.ok}.get(r.state, "")),
                      Text("–" if r.sessions is None else str(r.sessions).rjust(8)), Text(r.message))
                for key, r in s.pods.items()
            }
            log = list(s.log[-6:])
            done = sum(1 for st in s.node_state.values() if st in ("done", "aborted", "failed"))
        sync_rows(self.query_one("#drain-pods", DataTable), rows)
        self.query_one("#drain-nodes", Static).update(self._node_bars(palette))
        summary = Text(" Drain ", style="bold")
        summary.append(f"{done}/{len(s.nodes)} nodes finished" if not s.finished else "finished")
        summary.append(f"   running {ago(self.app.clock() - s.started)}", style="dim")
        self.query_one("#drain-summary", Static).update(summary)
        self.query_one("#drain-log", Static).update(Text("\n".join(log), style="dim"))

    def _node_bars(self, palette) -> Text:
        """One bar per node: pods moved off it out of pods to move."""
        from gputui.render import bar

        s = self.session
        out = Text()
        with s.lock:
            for node in s.nodes:
                mine = [r for r in s.pods.values() if r.node == node]
                moved = sum(r.state in ("gone", "evicted") for r in mine)
                state = s.node_state.get(node, "queued")
                pct = 100.0 * moved / len(mine) if mine else (100.0 if state == "done" else 0.0)
                out.append(f" {node:<14.14} ")
                out.append_text(bar(pct, 20, palette.ok if state == "done" else palette.draining))
                live = sum(r.sessions or 0 for r in mine if r.state == "waiting")
                out.append(f" {moved}/{len(mine)} pods  {state}" + (f"  {live} sessions left" if live else "") + "\n")
        out.rstrip()
        return out

    def _selected(self) -> tuple[str, str] | None:
        table = self.query_one("#drain-pods", DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.session.pods[key].node, key

    def action_evict_now(self) -> None:
        sel = self._selected()
        if sel:
            node, pod = sel
            self.session.controls[node].evict_now(pod)
            self.notify(f"{pod}: evicting now; its live sessions will be cut", severity="warning")

    def action_extend(self) -> None:
        sel = self._selected()
        if sel:
            node, pod = sel
            self.session.controls[node].extend(pod, EXTEND_S)
            self.notify(f"{pod}: deadline +5m")

    def action_abort(self, uncordon: bool) -> None:
        for control in self.session.controls.values():
            control.abort(uncordon)
        self.notify("Aborting: " + ("nodes will be uncordoned" if uncordon else "nodes stay cordoned"))

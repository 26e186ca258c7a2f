"""Drain in the TUI: the plan first (nothing written), then a live progress board.

A drain outlives its screen: it runs in an app-level thread worker and keeps
its state in a DrainSession, so the operator can go back to the dashboard and
return with `p` while sessions run down.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static

from gputui.ui.base import ClusterModal, ClusterScreen

from gputui.ops.drain.batch import run_batch
from gputui.ops.drain.events import FINAL, DrainControl, DrainEvent, EventKind as K
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.plan import BatchPlan, DrainPlan, Step, plan_batch, sessions_text
from gputui.present.cells import ago, elide_middle
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
    deadline: float | None = None  # when the wait ends (epoch seconds)
    tries: int = 0  # PDB 429s so far
    last_try: float | None = None


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
    aborted: bool = False
    backend: object = None  # the backend the drain runs on (kept open by it across a context switch)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, event: DrainEvent, now: float) -> None:
        with self.lock:
            if event.pod:
                row = self.pods.setdefault(event.pod, PodRow(event.node, event.pod))
                if event.kind not in (K.SESSIONS_CUT, K.INFO):
                    row.state = event.kind.value
                if event.kind is K.WAITING:
                    row.sessions, row.deadline = event.sessions, event.deadline
                else:
                    row.message = event.message
                if event.kind is K.BLOCKED:
                    row.tries, row.last_try = event.count, now
                    if event.count > 1:
                        return  # one line per blocked pod, with its count: not one log line per retry
            else:
                self.node_state[event.node] = event.kind.value
            if event.kind not in (K.WAITING, K.TICK):
                stamp = time.strftime("%H:%M:%S", time.localtime(now))
                self.log.append(f"{stamp} {event.node} {event.kind.value} {event.pod} {event.message}".rstrip())
                del self.log[:-200]


def render_plan(batch: BatchPlan, palette) -> Group:
    parts: list[RenderableType] = []
    for plan in batch.plans:
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
                "–" if p.step is Step.SKIP else sessions_text(p.pod),
                Text(note, style=palette.alert if p.pdb_blocks_now or p.step is Step.ERROR else ""),
            )
        parts.append(table)
        cap = Text("capacity: " + plan.capacity.describe(),
                   style=palette.ok if plan.capacity.fits else f"bold {palette.alert}")
        parts.append(cap)
        for error in plan.errors:
            parts.append(Text("blocked: " + error, style=f"bold {palette.alert}"))
        for warning in plan.warnings:
            parts.append(Text("warning: " + warning, style=palette.cordoned))
        parts.append(Text(""))
    if len(batch.plans) > 1:
        for line in batch.describe():
            parts.append(Text(line, style=palette.ok if batch.fits else f"bold {palette.alert}"))
    return Group(*parts)


class DrainPlanScreen(ClusterModal[DrainOptions | None]):
    """The plan, with kubectl's options as toggles. Enter starts; esc changes nothing."""

    BINDINGS = [
        Binding("enter,y", "start", "Start drain", id="drain-start"),
        Binding("escape,n", "cancel", "Cancel", id="drain-cancel"),
        Binding("e", "toggle_option('delete_emptydir_data')", "emptyDir", id="drain-emptydir"),
        Binding("f", "toggle_option('force')", "Force", id="drain-force"),
        Binding("u", "toggle_option('evict_unknown_at_deadline')", "Unknown: evict at deadline",
                id="drain-evict-unknown"),
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

    def batch_plan(self) -> BatchPlan:
        snap = self.app.snapshot
        assert snap is not None  # the plan is opened only from a screen showing a snapshot
        return plan_batch(snap, [n for n in self.nodes if snap.node(n)], self.options)

    def plans(self) -> list[DrainPlan]:
        return list(self.batch_plan().plans)

    def refresh_plan(self) -> None:
        batch = self.batch_plan()
        plans = list(batch.plans)
        palette = self.app.palette
        sessions = sum(p.live_sessions for p in plans)
        unknown = sum(len(p.unknown_pods) for p in plans)
        title = Text(f"Drain {self.nodes[0]}" if len(self.nodes) == 1 else f"Drain {len(self.nodes)} nodes", style="bold")
        title.append(f"   {sessions} live sessions will be waited for", style=palette.draining)
        if unknown:
            title.append(f"; {unknown} pods with sessions unknown", style=f"bold {palette.alert}")
        self.query_one("#drain-title", Static).update(title)
        self.query_one("#drain-plan", Static).update(render_plan(batch, palette))
        o = self.options
        opts = Text()
        for key, label, on in (("e", "delete emptyDir data", o.delete_emptydir_data), ("f", "force", o.force),
                               ("u", "sessions unknown at deadline: evict", o.evict_unknown_at_deadline)):
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

    def action_toggle_option(self, name: str) -> None:
        # (not action_toggle: that is Textual's own action, toggling an attribute of the screen)
        self.options = replace(self.options, **{name: not getattr(self.options, name)})  # type: ignore[arg-type]
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


def start_drain(app, nodes: list[str], options: DrainOptions | dict[str, DrainOptions],
                deadlines: dict[str, float] | None = None, take_over: bool = False) -> DrainSession:
    """Run the batch in an app-level thread; the session object carries its state. The drain keeps the
    backend it started on: a context switch meanwhile leaves it open until the drain ends."""
    shown = options if isinstance(options, DrainOptions) else next(iter(options.values()), DrainOptions())
    backend = app.backend
    session = DrainSession(nodes, shown, app.clock(), {n: DrainControl() for n in nodes}, backend=backend)
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

        gen = run_batch(nodes, backend.reader, backend.writer, app.audit, options,
                        parallel=app.settings.drain_parallel, controls=session.controls,
                        deadlines=deadlines, clock=app.clock, sleep=nap, poll_s=app.drain_poll_s,
                        take_over=take_over)
        try:
            for event in gen:
                session.apply(event, app.clock())
        except _Interrupted:
            session.apply(DrainEvent(",".join(nodes), K.INFO, message="interrupted by quitting"), app.clock())
        except Exception as exc:  # shown, never a traceback
            session.apply(DrainEvent(",".join(nodes), K.FAILED, message=str(exc)), app.clock())
        finally:
            session.aborted = any(c.aborted for c in session.controls.values())
            session.finished = True
            if backend is not app.backend:  # the app moved to another context meanwhile
                backend.close()
            if not worker.is_cancelled:
                app.call_from_thread(app.poll_now)

    app.run_worker(work, thread=True, group="drain", exit_on_error=False)
    return session


ACTIONS = ("evict_now", "extend", "abort")


class DrainProgressScreen(ClusterScreen):
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
        self._timer: Timer | None = None
        self._narrow = False
        self._pod_width = 30

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="drain-summary", classes="panel-title")
        yield Static(id="drain-nodes")
        yield KeyTable(id="drain-pods", cursor_type="row")
        yield Static(id="drain-log")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#drain-pods", DataTable)
        # At 80 columns every column still shows: the deadline is what an operator watches.
        # At 80 columns what happens next must still show: the node column goes (its bar line above names it,
        # and a single node is the usual case) and the words get shorter.
        self._narrow = narrow = self.app.size.width < 120
        self._pod_width = 20 if narrow else 30
        columns = [("node", "Node", 12), ("pod", "Pod", self._pod_width), ("state", "State", 9 if narrow else 11),
                   ("sessions", "Sessions", 8), ("deadline", "Deadline", 12 if narrow else 15),
                   ("message", "Next" if narrow else "Detail / next", 0)]
        shown = columns[1:] if narrow else columns
        rest = self.app.size.width - sum(w for *_, w in shown) - 2 * len(shown) - 2  # cell padding, scrollbar
        for key, label, width in shown:
            table.add_column(label, width=width or max(24, rest), key=key)
        self._timer = self.set_interval(0.5, self.show_snapshot)
        self.show_snapshot()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """A finished or aborted drain has nothing left to act on: its keys are gone from the footer."""
        if action in ACTIONS and (self.session.finished or self.session.aborted):
            return False
        return True

    def _deadline_text(self, row: PodRow, now: float) -> Text:
        if row.state != "waiting" or row.deadline is None:
            return Text("")
        left = row.deadline - now
        clock = time.strftime("%H:%M", time.localtime(row.deadline))
        return Text(f"{clock} in {ago(max(0.0, left))}" if left > 0 else f"{clock} now")

    def _next_text(self, row: PodRow, now: float) -> str:
        """What happens next to this pod, in words."""
        o = self.session.options
        short = self._narrow
        if row.state == "waiting":
            if row.sessions is None:
                then = "evicted (chosen)" if o.evict_unknown_at_deadline else "left in place"
                return f"deadline: {then}" if short else f"sessions unknown; at the deadline: {then}"
            if short:
                return f"evict at <={o.session_threshold}/deadline"
            return f"evicted at <= {o.session_threshold} sessions, or at the deadline (cutting what is left)"
        if row.state == "blocked":
            when = time.strftime("%H:%M:%S", time.localtime(row.last_try)) if row.last_try else "?"
            if short:
                return f"PDB: {row.tries} tries, last {when}"
            return f"PDB: {row.tries} tries, last {when}; evicted when the PDB allows. {row.message}"
        return row.message

    def show_snapshot(self) -> None:
        self.query_one(HeaderBar).refresh_text()
        s = self.session
        palette = self.app.palette
        now = self.app.clock()
        with s.lock:
            rows = {
                key: (*(() if self._narrow else (Text(r.node),)), Text(elide_middle(key, self._pod_width)), Text(r.state, style={
                    "waiting": palette.draining, "blocked": palette.cordoned, "failed": f"bold {palette.alert}",
                    "held": f"bold {palette.alert}", "paused": palette.cordoned,
                    "gone": palette.ok, "evicted": palette.ok}.get(r.state, "")),
                      Text(("unknown" if r.sessions is None and r.state == "waiting" else
                            "–" if r.sessions is None else str(r.sessions)).rjust(8)),
                      self._deadline_text(r, now), Text(self._next_text(r, now)))
                for key, r in s.pods.items()
            }
            log = list(s.log[-6:])
            done = sum(1 for st in s.node_state.values() if st in {k.value for k in FINAL})
        sync_rows(self.query_one("#drain-pods", DataTable), rows)
        self.query_one("#drain-nodes", Static).update(self._node_bars(palette))
        summary = Text(" Drain ", style="bold")
        if s.finished:
            summary.append("ABORTED" if s.aborted else "FINISHED", style=f"bold {palette.alert if s.aborted else palette.ok}")
            summary.append(f"   {done}/{len(s.nodes)} nodes ended; actions are off", style="dim")
            if self._timer is not None:  # nothing moves any more: stop redrawing
                self._timer.stop()
                self._timer = None
                self.refresh_bindings()
        else:
            summary.append(f"{done}/{len(s.nodes)} nodes finished")
            summary.append(f"   running {ago(now - s.started)}", style="dim")
        self.query_one("#drain-summary", Static).update(summary)
        self.query_one("#drain-log", Static).update(Text("\n".join(log), style="dim"))

    def _node_bars(self, palette) -> Text:
        """One bar per node: pods moved off it out of pods to move."""
        from gputui.present.cells import bar

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
                unknown = sum(1 for r in mine if r.state == "waiting" and r.sessions is None)
                out.append(f" {moved}/{len(mine)} pods  {state}" + (f"  {live} sessions left" if live else "")
                           + (f"  {unknown} unknown" if unknown else "") + "\n")
        out.rstrip()
        return out

    def _selected(self) -> tuple[str, str] | None:
        table = self.query_one("#drain-pods", DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return (self.session.pods[key].node, key) if key is not None else None

    def _confirm(self, title: str, body: str, then) -> None:
        from gputui.ui.confirm import ConfirmScreen

        self.app.push_screen(ConfirmScreen(title, body), lambda yes: then() if yes else None)

    def action_evict_now(self) -> None:
        sel = self._selected()
        if not sel or self.session.finished:
            return
        node, pod = sel
        row = self.session.pods[pod]
        if row.state in ("gone", "evicted", "terminating", "failed", "held"):
            self.notify(f"{pod} is {row.state}: nothing to evict", markup=False)
            return
        cut = "its sessions are UNKNOWN: any it holds will be cut" if row.sessions is None and row.state == "waiting" \
            else f"{row.sessions or 0} live sessions will be cut"

        def go() -> None:
            self.session.controls[node].evict_now(pod)
            self.notify(f"{pod}: evicting now", severity="warning", markup=False)

        self._confirm(f"Evict {pod} now?", f"{cut}. The Eviction API still honours its PodDisruptionBudget.", go)

    def action_extend(self) -> None:
        sel = self._selected()
        if sel and not self.session.finished:
            node, pod = sel
            self.session.controls[node].extend(pod, EXTEND_S)
            self.notify(f"{pod}: deadline +5m", markup=False)

    def action_abort(self, uncordon: bool) -> None:
        if self.session.finished:
            return
        with self.session.lock:
            waiting = [r for r in self.session.pods.values() if r.state == "waiting"]
        live = sum(r.sessions or 0 for r in waiting)
        then = "uncordoned" if uncordon else "left cordoned"

        def go() -> None:
            for control in self.session.controls.values():
                control.abort(uncordon)
            self.notify("Aborting: " + ("nodes will be uncordoned" if uncordon else "nodes stay cordoned"))

        self._confirm("Abort the drain?", f"No session is cut: the {len(waiting)} pods still waiting ({live} live "
                      f"sessions) stay where they are. The nodes will be {then}; pods already evicted do not come back.", go)

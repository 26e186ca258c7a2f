"""The live drain board: each pod's state, sessions, deadline and what happens next; evict now, more time,
abort (each asking first when it cuts sessions); finished, it says so and its actions are off."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from gputui.ops.drain.events import EventKind as K
from gputui.ops.drain.out_of_rotation import KEPT_RUNNING
from gputui.ops.drain.progress import PodRow
from gputui.present.cells import Palette, ago, bar, elide_middle, short_pod
from gputui.ui.base import ClusterScreen
from gputui.ui.runs.drain import DrainRun
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.key_table import KeyTable
from gputui.ui.widgets.table_sync import sync_rows

EXTEND_S = 5 * 60


ACTIONS = ("evict_now", "extend", "abort", "put_back")


class DrainProgressScreen(ClusterScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back (drain goes on)", id="back"),
        Binding("escape", "back", "Back", id="drain-back-done"),
        Binding("e", "evict_now", "Evict now", id="drain-evict-now"),
        Binding("x", "extend", "+5m", id="drain-extend"),
        Binding("a", "abort(False)", "Abort", id="drain-abort"),
        Binding("U", "abort(True)", "Abort+uncordon", id="drain-abort-uncordon"),
        Binding("b", "put_back", "Put back", id="drain-put-back"),
    ]

    def __init__(self, drain: DrainRun) -> None:
        super().__init__()
        self.drain = drain
        self._ended = False
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
        many = len(self.drain.nodes) > 1  # a batch keeps a node column, even narrow: which node is it on?
        self._node_width = 7 if narrow else 14
        self._pod_width = (17 if many else 20) if narrow else 30
        # Deadlines are the local clock's: the header names its zone (an operator and a runbook may differ).
        zone = time.strftime("%Z", time.localtime(self.app.clock()))[:4]
        columns = [("node", "Node", self._node_width), ("pod", "Pod", self._pod_width),
                   ("state", "State", 9 if narrow else 11), ("sessions", "Live" if narrow else "Sessions", 5 if narrow else 8), ("deadline", f"Deadline {zone}".strip(), 12 if narrow else 15),
                   ("message", "Next" if narrow else "Detail / next", 0)]
        shown = columns[1:] if narrow and not many else columns
        rest = self.app.size.width - sum(w for *_, w in shown) - 2 * len(shown) - 2  # cell padding, scrollbar
        for key, label, width in shown:
            table.add_column(label, width=width or max(24, rest), key=key)
        self.show_drain()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """A finished or aborted drain has nothing left to act on: its keys are gone from the footer."""
        over = self.drain.finished or self.drain.aborted
        if action in ACTIONS and over:
            return False
        if action == "app.pop_screen":  # the footer's escape: "drain goes on" only while it does
            return not over
        if action == "back":
            return over
        return True

    def action_back(self) -> None:
        self.app.pop_screen()

    def _deadline_text(self, row: PodRow, now: float) -> Text:
        if row.state is not K.WAITING or row.deadline is None:
            return Text("")
        left = row.deadline - now
        clock = time.strftime("%H:%M", time.localtime(row.deadline))
        return Text(f"{clock} in {ago(max(0.0, left))}" if left > 0 else f"{clock} now")

    def _next_text(self, row: PodRow, now: float) -> str:
        """What happens next to this pod, in words."""
        o = self.drain.options
        short = self._narrow
        if row.state is K.WAITING and row.out_since is not None:
            since = time.strftime("%H:%M:%S", time.localtime(row.out_since))
            left = row.empty_in(now, self.drain.mean_s.get(row.pod))
            empty = "?" if left is None else f"~{ago(left)}" if left > 0 else "now"
            if short:
                return f"out {since[:5]} empty {empty}"
            return (f"out of rotation since {since}; empty in {empty}, then evicted "
                    f"(the deadline cuts what is left)")
        if row.state is K.WAITING and row.rotation_note:
            if short:
                return "in: " + ("capacity" if row.rotation_note.startswith(KEPT_RUNNING) else "put back")
            return f"in rotation: {row.rotation_note.split(': ', 1)[-1]}"
        if row.state is K.WAITING:
            if row.sessions is None:
                then = "evicted (chosen)" if o.evict_unknown_at_deadline else "left in place"
                return f"deadline: {then}" if short else f"sessions unknown; at the deadline: {then}"
            if short:
                return f"evict at <={o.session_threshold}/deadline"
            return f"evicted at <= {o.session_threshold} sessions, or at the deadline (cutting what is left)"
        if row.state is K.GONE:
            return "gone (API confirmed)"
        if row.state is K.BLOCKED:
            when = time.strftime("%H:%M:%S", time.localtime(row.last_try)) if row.last_try else "?"
            if short:
                return f"PDB: {row.tries} tries, last {when}"
            return f"PDB: {row.tries} tries, last {when}; evicted when the PDB allows. {row.message}"
        return row.message

    def refresh_age(self) -> None:
        if not self.drain.finished:  # the countdowns and the running time move
            self.show_drain()

    def show_drain(self) -> None:
        s = self.drain
        palette = self.app.palette
        now = self.app.clock()
        styles = {K.WAITING: palette.draining, K.BLOCKED: palette.cordoned, K.FAILED: f"bold {palette.alert}",
                  K.HELD: f"bold {palette.alert}", K.PAUSED: palette.cordoned, K.GONE: palette.ok, K.EVICTED: palette.ok,
                  K.REPLACED: palette.ok}
        with_node = not self._narrow or len(s.nodes) > 1
        width = 5 if self._narrow else 8
        with s.lock:
            rows = {
                key: (*((Text(elide_middle(r.node.removeprefix("gpu-") if self._narrow else r.node,
                                           self._node_width)),) if with_node else ()),
                      Text(key if len(key) <= self._pod_width else short_pod(key, self._pod_width)),
                      Text(r.state.value if r.state else "pending", style=styles.get(r.state, "") if r.state else ""),
                      Text((("unk" if self._narrow else "unknown") if r.sessions is None and r.state is K.WAITING
                            else "–" if r.sessions is None or r.settled else str(r.sessions)).rjust(width)),
                      self._deadline_text(r, now), Text(self._next_text(r, now)))
                for key, r in s.pods.items()
            }
            # The newest lines, one row each: wrapped, they pushed the last one out of sight.
            room = max(20, self.app.size.width - 3)
            log = [Text(line if len(line) <= room else line[: room - 1] + "…") for line in s.log[-6:]]
            done = s.progress.nodes_ended()
        sync_rows(self.query_one("#drain-pods", DataTable), rows)
        self.query_one("#drain-nodes", Static).update(self._node_bars(palette))
        summary = Text(" Drain ", style="bold")
        if s.finished:
            summary.append("ABORTED" if s.aborted else "FINISHED", style=f"bold {palette.alert if s.aborted else palette.ok}")
            summary.append(f"   {done}/{len(s.nodes)} nodes ended; actions are off", style="dim")
            if not self._ended:  # its keys leave the footer
                self._ended = True
                self.refresh_bindings()
        else:
            summary.append(f"{done}/{len(s.nodes)} nodes finished")
            summary.append(f"   running {ago(now - s.started)}", style="dim")
        self.query_one("#drain-summary", Static).update(summary)
        self.query_one("#drain-log", Static).update(Text("\n", style="dim").join(log))

    def _node_bars(self, palette: Palette) -> Text:
        """One bar per node: pods moved off it out of pods to move."""
        s = self.drain
        out = Text()
        with s.lock:
            for node in s.nodes:
                mine = s.progress.on(node)
                moved = sum(r.moved for r in mine)
                kind = s.node_state.get(node)
                state = kind.value if kind else "queued"
                pct = 100.0 * moved / len(mine) if mine else (100.0 if kind is K.DONE else 0.0)
                out.append(f" {node:<14.14} ")
                out.append_text(bar(pct, 20, palette.ok if kind is K.DONE else palette.draining))
                live = sum(r.sessions or 0 for r in mine if r.state is K.WAITING)
                unknown = sum(1 for r in mine if r.state is K.WAITING and r.sessions is None)
                counted = f" {moved}/{len(mine)} pods " if mine else ""  # a queued node has no pods read yet
                out.append(f"{counted} {state}" + (f"  {live} sessions left" if live else "")
                           + (f"  {unknown} unknown" if unknown else "") + "\n")
        out.rstrip()
        return out

    def _selected(self) -> tuple[str, str] | None:
        table = self.query_one("#drain-pods", DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return (self.drain.pods[key].node, key) if key is not None else None

    def _confirm(self, title: str, body: str, then: Callable[[], None]) -> None:
        from gputui.ui.screens.confirm import ConfirmScreen  # noqa: PLC0415 (screen: loaded when first shown)

        self.app.push_screen(ConfirmScreen(title, body), lambda yes: then() if yes else None)

    def action_evict_now(self) -> None:
        sel = self._selected()
        if not sel or self.drain.finished:
            return
        node, pod = sel
        row = self.drain.pods[pod]
        if row.settled and row.state is not None:
            self.notify(f"{pod} is {row.state.value}: nothing to evict", markup=False)
            return
        cut = "its sessions are UNKNOWN: any it holds will be cut" if row.sessions is None and row.state is K.WAITING \
            else f"{row.sessions or 0} live sessions will be cut"

        def go() -> None:
            self.drain.controls[node].evict_now(pod)
            self.notify(f"{pod}: evicting now", severity="warning", markup=False)

        self._confirm(f"Evict {pod} now?", f"{cut}. The Eviction API still honours its PodDisruptionBudget.", go)

    def action_extend(self) -> None:
        sel = self._selected()
        if sel and not self.drain.finished:
            node, pod = sel
            self.drain.controls[node].extend(pod, EXTEND_S)
            self.notify(f"{pod}: deadline +5m", markup=False)

    def action_abort(self, uncordon: bool) -> None:
        if self.drain.finished:
            return
        with self.drain.lock:
            waiting = [r for r in self.drain.pods.values() if r.state is K.WAITING]
        live = sum(r.sessions or 0 for r in waiting)
        then = "uncordoned" if uncordon else "left cordoned"

        def go() -> None:
            for control in self.drain.controls.values():
                control.abort(uncordon)
            self.notify("Aborting: " + ("nodes will be uncordoned" if uncordon else "nodes stay cordoned"))

        self._confirm("Abort the drain?", f"No session is cut: the {len(waiting)} pods still waiting ({live} live "
                      f"sessions) stay where they are. The nodes will be {then}; pods already evicted do not come back.", go)

    def action_put_back(self) -> None:
        """The selected pod back in rotation, asking first: new sessions reach it again and the drain then
        waits for them, up to its deadline."""
        sel = self._selected()
        if not sel or self.drain.finished:
            return
        node, pod = sel
        row = self.drain.pods[pod]
        if row.out_since is None or row.state is not K.WAITING:
            self.notify(f"{pod} is not out of rotation: nothing to put back", markup=False)
            return
        deadline = time.strftime("%H:%M %Z", time.localtime(row.deadline)) if row.deadline else "its deadline"

        def go() -> None:
            self.drain.controls[node].put_back(pod)
            self.notify(f"{pod}: back in rotation", markup=False)

        self._confirm(f"Put {pod} back in rotation?",
                      f"New sessions reach it again, and this drain leaves it in rotation: it waits for its "
                      f"sessions up to {deadline}, and cuts what is left then.", go)

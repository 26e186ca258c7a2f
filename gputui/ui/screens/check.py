"""`:check`: the seeds' checklists (gputui.checks) on the snapshot in view, worst first; enter shows a
check's objects and fix. The checks run in a worker on each new snapshot, never on the UI thread."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from gputui.checks.context import context_for
from gputui.checks.result import CheckResult, Status
from gputui.checks.rules import run_checks
from gputui.ui.base import ClusterScreen
from gputui.ui.messages import ChecksRun
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.item_list import ItemList
from gputui.vocabulary.check_facts import DEFAULT_WINDOW_S, CheckFacts

ORDER = {Status.FAIL: 0, Status.UNKNOWN: 1, Status.WARN: 2, Status.PASS: 3}
FACTS_EVERY_S = 60.0  # memory growth over 30 minutes and the rules loaded: no need to ask on every refresh


class CheckScreen(ClusterScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back", id="back")]

    def __init__(self) -> None:
        super().__init__()
        self.results: list[CheckResult] | None = None
        self.facts: tuple[CheckFacts, float] | None = None  # and when it was read

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="check-title", classes="panel-title")
        yield ItemList(id="checks")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.show_snapshot()

    def show_snapshot(self) -> None:
        app = self.app
        if app.snapshot is None:
            return
        snapshot, settings, backend, known, now = app.snapshot, app.settings, app.backend, self.facts, app.clock()

        def run() -> None:
            facts, read_at = known if known and now - known[1] < FACTS_EVERY_S else \
                (backend.check_facts(DEFAULT_WINDOW_S), now)
            self.post_message(ChecksRun(run_checks(context_for(snapshot, settings, backend, facts)), facts, read_at))

        self.run_worker(run, thread=True, exclusive=True, group="checks", exit_on_error=False)

    def on_checks_run(self, message: ChecksRun) -> None:
        self.facts = (message.facts, message.facts_at)
        results = sorted(message.results, key=lambda r: ORDER[r.status])
        counts = {s: sum(r.status is s for r in results) for s in Status}
        title = Text(" Checks ", style="bold")
        warnings = counts[Status.WARN]
        title.append(f"{counts[Status.FAIL]} failed, {counts[Status.UNKNOWN]} unknown, "
                     f"{warnings} warning{'s' * (warnings != 1)}, {counts[Status.PASS]} passed", style="dim")
        self.query_one("#check-title", Static).update(title)
        if results == self.results:
            return
        self.results = results
        palette = self.app.palette
        style = {Status.FAIL: f"bold {palette.alert}", Status.UNKNOWN: f"bold {palette.cordoned}",
                 Status.WARN: palette.cordoned, Status.PASS: palette.ok}
        rows = []
        for r in results:
            grid = Table.grid(expand=True, padding=(0, 1))
            grid.add_column(width=7, no_wrap=True)
            grid.add_column(width=20, no_wrap=True)
            grid.add_column(ratio=1, overflow="fold")
            grid.add_row(Text(r.status.value.upper(), style=style[r.status]), Text(r.id), Text(r.summary))
            rows.append((grid, r))
        self.query_one(ItemList).set_items(rows)

    def on_item_list_chosen(self, event: ItemList.Chosen) -> None:
        from gputui.ui.screens.detail import DetailScreen  # noqa: PLC0415 (screen: loaded when first shown)

        r: CheckResult = event.payload
        body = Text.assemble((f"{r.title}  [{r.seed}]\n\n", "bold"), r.summary, "\n")
        for obj in r.objects:
            body.append(f"\n• {obj}")
        if r.fix:
            body.append("\n\nfix: ", style="bold")
            body.append(r.fix)
        self.app.push_screen(DetailScreen(f"{r.status.value.upper()} {r.id}", body))

"""The wallboard: read-only, no cursor, big figures, problems first, pages that rotate on their own."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Digits, Static

from gputui.policy.figures import Figures, figures
from gputui.policy.fleet import FLEET as FLEET_ROW
from gputui.policy.fleet import fleet_total
from gputui.policy.node_pools import FLEET, fleet_pools, idle_why
from gputui.policy.problems import findings as all_findings
from gputui.present import cells
from gputui.present.columns import fit_service_columns, service_rows
from gputui.present.wallboard import heat_map, legend
from gputui.snapshot import ClusterSnapshot, stale
from gputui.ui.base import ClusterScreen
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar

PAGES = ("heat", "services", "pools", "alerts")
TITLES = {"heat": "Fleet heat map", "services": "Services and rollouts", "pools": "Pools: allocated, free and idle GPUs",
          "alerts": "Nodes that need attention, and findings", "fleet": "Clusters of the fleet"}
FIGURES = ("gpus", "util", "idle", "alerts", "drains", "canaries")


class Figure(Vertical):
    """A label above a number drawn in large digits."""

    def __init__(self, key: str) -> None:
        super().__init__(id=f"fig-{key}", classes="figure")

    def compose(self) -> ComposeResult:
        yield Static(classes="figure-label")
        yield Digits(classes="figure-value")

    def show(self, label: str, value: str, style: str) -> None:
        self.query_one(".figure-label", Static).update(Text(label, style="bold"))
        digits = self.query_one(Digits)
        digits.update(value)
        digits.styles.color = style or None


class WallboardScreen(ClusterScreen):
    DEFAULT_CSS = """
    WallboardScreen { layout: vertical; }
    #stale-banner { display: none; height: 3; content-align: center middle; text-style: bold reverse; }
    #stale-banner.shown { display: block; }
    #figures { height: 4; }
    .figure { width: 1fr; height: 4; padding: 0 1; }
    .figure-label { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }  /* a cut label shows it is cut */
    #wall-alerts { height: auto; max-height: 3; padding: 0 1; }
    #page-title { height: 1; background: $surface; }
    #page { height: 1fr; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right,n,space", "page(1)", "Next page", id="wall-next"),
        Binding("left,p", "page(-1)", "Previous page", id="wall-previous"),
        Binding("m", "metric", "Utilisation/temperature", id="wall-metric"),
        # A write key on a wall answers, never nothing (issue 35: c and r were silently ignored).
        Binding("c,u,r,w,g,b", "writes", "Writes", id="wall-writes", show=False,
                tooltip="The wallboard only shows: cordon, drain and shifts are in gputui without --wallboard"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.page = 0
        self.cluster = 0  # with a fleet: whose pages are up (the board moves to the next after the last page)
        self._fleet_seen = -1  # the fleet's revision last drawn
        self.metric = "util"  # the setting's choice is read on mount

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="stale-banner")
        with Horizontal(id="figures"):
            for key in FIGURES:
                yield Figure(key)
        yield Static(id="wall-alerts")
        yield Static(id="page-title")
        yield Static(id="page")
        yield KeyFooter()  # one line: what the keys do, ? for the rest

    def on_mount(self) -> None:
        self.metric = self.app.settings.wallboard_heat
        self.set_interval(self.app.settings.wallboard_rotate, lambda: self.action_page(1))
        self.show_snapshot()

    def on_resize(self) -> None:
        self.show_snapshot()

    def pages(self) -> tuple[str, ...]:
        """Watching a fleet (--context a,b), one more page: every cluster, one row each."""
        return (*PAGES, "fleet") if self.app.fleet is not None else PAGES

    def action_page(self, step: int) -> None:
        pages = len(self.pages())
        if self.app.fleet is not None and (self.page + step) // pages != 0:  # past the last page (or the first)
            self.cluster += 1 if step > 0 else -1  # the next cluster's turn: the board rotates across the fleet
        self.page = (self.page + step) % pages
        self.show_snapshot()

    def shown_cluster(self) -> tuple[str, ClusterSnapshot | None]:
        """The cluster whose pages are up: this one, or with a fleet the one whose turn it is (its last read)."""
        fleet = self.app.fleet
        if fleet is None:
            return self.app.backend.context, self.app.snapshot
        context = fleet.contexts[self.cluster % len(fleet.contexts)]
        return context, fleet.latest[context][0] or (self.app.snapshot if context == self.app.backend.context
                                                     else None)

    def action_writes(self) -> None:
        self.app.notify("read-only: the wallboard only shows; cordon, drain and traffic shifts are in gputui "
                        "without --wallboard", severity="warning")

    def action_metric(self) -> None:
        self.metric = "temp" if self.metric == "util" else "util"
        self.show_snapshot()

    # ----- drawing ----------------------------------------------------------------

    def show_snapshot(self) -> None:
        app = self.app
        self._banner()
        snap = app.snapshot
        if snap is None:
            return
        palette = app.palette
        threshold = app.settings.temp_threshold
        f = figures(snap, threshold)
        alerts = len(app.problems(snap))
        idle = self._idle_fleet(snap)
        idle_label = "Idle GPUs"
        if app.fleet is not None:  # the big figures sum the fleet's clusters (idle is this cluster's own)
            self._fleet_seen = app.fleet.revision
            total = fleet_total(app.fleet.rows(threshold))
            f = Figures(total.gpus, total.util, sum(total.alerts.values()), total.drains, total.canaries)
            alerts = f.alerts
            idle_label = f"Idle, {app.backend.context}"[:14]
        util = f.mean_util
        # The big digits count whole cards; MIG slices, shared replicas and DRA devices are no GPUs, so the label
        # says them apart (a wall at 80 columns shows its start).
        (_whole, cards, _offered), *others = f.gpus.shown()
        more = "".join(f" +{used}{mark}" for mark, used, _o in others)
        shown = {
            # A sum over the clusters that answered, and said so: never a partial sum passed off as the fleet's.
            "gpus": (f"GPUs in use{more}" if app.fleet is None else
                     f"GPUs, {total.clusters - total.unread}/{total.clusters} read{more}", str(cards), ""),
            "util": ("Mean util %", "–" if util is None else f"{util:.0f}", palette.heat(util)),
            # Allocated but below 5% for the last hour (seed 000 §7); unknown is "–", never 0.
            "idle": (idle_label, "–" if idle is None else str(idle), palette.cordoned if idle else ""),
            # Nodes, not alerts: the header's count (a node with eight hot GPUs is one), flapping ones kept.
            "alerts": ("Need attention" if app.size.width >= 100 else "Attention", str(alerts),
                       palette.alert if alerts else palette.ok),
            "drains": ("Drains", str(f.drains), palette.draining if f.drains else ""),
            "canaries": ("Canaries", str(f.canaries), palette.upgrading if f.canaries else ""),
        }
        for key, (label, value, style) in shown.items():
            self.query_one(f"#fig-{key}", Figure).show(label, value, style)
        context, on_board = self.shown_cluster()
        if on_board is None:  # that cluster not read yet: this one's pages meanwhile; the big figures sum all
            on_board, context = snap, app.backend.context
        snap = on_board
        self._alert_strip(snap, threshold)
        pages = self.pages()
        page = pages[self.page % len(pages)]
        title = Text(f" {TITLES[page]}", style="bold")
        if app.fleet is not None and page != "fleet":
            title.append(f" · {context}")
        if page == "heat":
            title.append(f" ({'utilisation' if self.metric == 'util' else 'temperature'})")
        title.append(f"   page {self.page % len(pages) + 1}/{len(pages)} · every {app.settings.wallboard_rotate:g}s",
                     style="dim")
        self.query_one("#page-title", Static).update(title)
        self.query_one("#page", Static).update(getattr(self, f"_page_{page}")(snap))

    def refresh_age(self) -> None:
        fleet = self.app.fleet
        if fleet is not None and fleet.revision != self._fleet_seen:  # a cluster answered: its sums moved
            self.show_snapshot()
        else:
            self._banner()

    def _banner(self) -> None:
        """Unmissable when the data is older than three refreshes: the board must never lie quietly."""
        app = self.app
        banner = self.query_one("#stale-banner", Static)
        snap = app.snapshot
        age = None if snap is None else app.clock() - snap.taken_at
        is_stale = stale(age, app.settings.refresh)
        failing = snap is None and app.poll_error
        if is_stale or failing:
            why = f": {app.poll_error}" if app.poll_error else ""
            what = f"DATA STALE: last update {cells.ago(age)} ago" if is_stale else "NO DATA"
            banner.update(Text(f"⚠  {what}{why}  ⚠", style=f"bold reverse {app.palette.stale}"))
            banner.styles.color = app.palette.stale or None
            banner.add_class("shown")
        else:
            banner.remove_class("shown")

    def _alert_strip(self, snap: ClusterSnapshot, threshold: float) -> None:
        """The worst first, one line per node (a hot node's eight GPUs are one line), at most three."""
        problems = self.app.problems(snap)
        strip = Text()
        width = max(20, self.app.size.width - 2)
        for i, problem in enumerate(problems[:3]):
            if i:
                strip.append("\n")
            line = Text()
            line.append(f"▲ {problem.node} ", style=f"bold {self.app.palette.alert}")
            line.append(f"{problem.word}: ", style="bold")
            line.append(problem.details())
            rest = len(problems) - 3
            more = Text(f"  ({rest} more node{'s' if rest != 1 else ''} on the attention page)", style="dim") \
                if i == 2 and rest > 0 else Text()
            # The count of what is not shown is never the part cut off: the message gives way first.
            line.truncate(max(1, width - len(more)), overflow="ellipsis")
            strip.append_text(line + more)
        self.query_one("#wall-alerts", Static).update(strip)

    def _idle_fleet(self, snap: ClusterSnapshot) -> int | None:
        rows = fleet_pools(snap, self.app.idle_watch.idle, self.app.settings.pool_labels)
        self.app.idle_watch.want(self.app)
        return rows[-1].idle

    def _page_pools(self, snap: ClusterSnapshot) -> Table:
        watch = self.app.idle_watch
        table = Table(box=None, expand=True, padding=(0, 1), show_edge=False)
        for label in ("POOL", "NODES", "ALLOCATED", "FREE", "UTIL", "IDLE"):
            table.add_column(label, no_wrap=True, header_style="bold", overflow="ellipsis",
                             justify="left" if label == "POOL" else "right")
        rows = fleet_pools(snap, watch.idle, self.app.settings.pool_labels)
        short = self._page_size()[0] < cells.NARROW  # whole cards and a "+", as the header: the columns fit
        for r in rows:
            table.add_row(Text(r.pool, style="bold" if r.pool == FLEET else ""), str(r.nodes), r.use.text(short),
                          r.use.free_text(short), cells.pct(r.util),
                          Text("?" if r.idle is None else str(r.idle),
                               style=f"bold {self.app.palette.cordoned}" if r.idle else ""))
        notes = ["+: slices, replicas or DRA devices too (wider: each)"] if short and len(rows[-1].use.shown()) > 1 else []
        if why := idle_why(rows[-1], watch.why):
            notes.append(f"idle unknown: {why}")
        table.caption = "; ".join(notes) or None
        return table

    def _page_fleet(self, snap: ClusterSnapshot) -> Table:
        fleet = self.app.fleet
        assert fleet is not None  # the page exists only with a fleet
        settings, palette = self.app.settings, self.app.palette
        rows = fleet.rows(settings.temp_threshold)
        table = Table(box=None, expand=True, padding=(0, 1), show_edge=False)
        for label in ("CLUSTER", "GPUS", "UTIL", "ALERTS", "READ"):
            table.add_column(label, no_wrap=True, header_style="bold", overflow="ellipsis")
        now = self.app.clock()
        for r in [*rows, fleet_total(rows)]:
            read = r.taken_at is not None or r.context == FLEET_ROW
            fresh = r.freshness(now, settings.refresh) if r.context != FLEET_ROW else f"{r.clusters - r.unread}/{r.clusters} read"
            table.add_row(Text(r.context, style="bold" if r.context == FLEET_ROW else ""),
                          r.gpus.text() if read else "–", cells.pct(r.util),
                          Text(r.alerts_text(compact=True) or ("none" if read else "–"),
                               style=f"bold {palette.alert}" if r.alerts else ""),
                          Text(fresh, style=f"bold {palette.alert}" if r.error or "STALE" in fresh or r.unread else "dim"))
        return table

    def _page_size(self) -> tuple[int, int]:
        page = self.query_one("#page", Static)
        width = page.content_region.width or self.app.size.width - 2
        height = page.content_region.height or max(1, self.app.size.height - 11)
        return width, height

    def _page_heat(self, snap: ClusterSnapshot) -> Text:
        width, height = self._page_size()
        settings = self.app.settings
        lines = heat_map(snap, width, height - 1, self.metric, settings.temp_threshold, self.app.palette)
        return Text("\n").join([legend(self.metric, settings.temp_threshold, self.app.palette), *lines])

    def _page_services(self, snap: ClusterSnapshot) -> Table:
        width, _ = self._page_size()
        columns = fit_service_columns(width)
        table = Table(box=None, expand=True, padding=(0, 1), show_edge=False)
        for _, label, col_width, _ in columns:
            table.add_column(label, width=col_width, no_wrap=True, header_style="bold")
        for row in service_rows(snap, self.app.palette, columns).values():
            table.add_row(*row)
        return table

    def _page_alerts(self, snap: ClusterSnapshot) -> Table | Text:
        problems = self.app.problems(snap)
        findings = all_findings(problems, snap)
        if not findings:
            return Text("No node needs attention, nothing else to report.", style=self.app.palette.ok)
        table = Table(box=None, expand=True, padding=(0, 1), show_edge=False)
        width, _ = self._page_size()
        table.add_column("WHERE", no_wrap=True, header_style="bold", overflow="ellipsis", max_width=max(12, width // 3))
        table.add_column("WHAT", no_wrap=True, header_style="bold", min_width=9)
        table.add_column("DETAIL", header_style="bold", overflow="ellipsis", no_wrap=True, ratio=1)
        alert = f"bold {self.app.palette.alert}"
        rows = [(Text(f.subject), Text(f.kind, style=alert if i < len(problems) else ""), Text(f.detail))
                for i, f in enumerate(findings)]
        _, height = self._page_size()
        room = max(1, height - 1)  # below the column titles
        if len(rows) > room:  # cut, and said: the worst stay on screen (nodes that need attention come first)
            hidden = len(rows) - (room - 1)
            rows = [*rows[: room - 1], (Text(""), Text(f"+{hidden} more", style="bold"),
                                        Text("not shown: a taller window shows them, gputui check lists them",
                                             style="dim"))]
        for row in rows:
            table.add_row(*row)
        return table

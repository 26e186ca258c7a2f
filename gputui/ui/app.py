"""The Textual application: wires settings, backend, theme and screens; runs the poll loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.reactive import var
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.timer import Timer

from gputui.backends.base import WATCH_BATCH_S, Backend, error_line
from gputui.backends.factory import stop_credential_plugins
from gputui.backends.gcpause import unsettle
from gputui.base.safe_text import visible
from gputui.ops.audit import AuditLog
from gputui.policy.upgrades import StateClock
from gputui.present.cells import MONO, Palette
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from gputui.ui import app_clusters, terminal_guard
from gputui.ui.app_looks import LooksMixin
from gputui.ui.app_poll import PollMixin
from gputui.ui.keys.keymaps import DEFAULT, keymap_files
from gputui.ui.messages import CanaryProgress, Connected, DrainProgress, FleetRead, IdleRead, SnapshotReady, WriteDone
from gputui.ui.runs.fleet_watch import FleetWatch
from gputui.ui.runs.idle_watch import IdleWatch
from gputui.ui.runs.problem_watch import ProblemWatch
from gputui.ui.screens.connecting import CONNECT_RETRY_S, Connecting, ConnectingScreen
from gputui.ui.screens.dashboard import DashboardScreen
from gputui.ui.screens.node_order import NodeView
from gputui.ui.theming import ThemesRead, palette_defaults

terminal_guard.install()  # before any screen paints: see the module


class PlainScrollBar(ScrollBarRender):
    """A scrollbar drawn in whole cells of colour: Textual's eighth-block ends (`▃▃`, `▅`) beside a table's
    last column read as one more bar of data (issue 35)."""

    VERTICAL_BARS = [" "] * 8
    HORIZONTAL_BARS = [" "] * 8


ScrollBar.renderer = PlainScrollBar

if TYPE_CHECKING:
    from gputui.ui.keys.commands import Command
    from gputui.ui.runs.canary import CanaryRun
    from gputui.ui.runs.drain import DrainRun  # imported when a drain starts, not at start-up


NODE_DETAIL = "node-detail"  # the installed node-detail screen's name (open_node)
WORKER_THREADS = 64  # Textual's thread workers' pool (on_mount)


# ----- start-up: connecting to a cluster off the UI thread (its screen: screens/connecting.py) -----------

@dataclass
class FirstRead(Message):
    """Start-up's connection is made and read a first snapshot."""

    backend: Backend
    snapshot: ClusterSnapshot


class GputuiApp(LooksMixin, PollMixin, App[None]):
    CSS_PATH = "gputui.tcss"
    TITLE = "gputui"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("colon", "command", "Command", id="command", tooltip="Command mode: :nodes, :drain NODE, :theme NAME…"),
        Binding("t", "themes", "Theme", id="themes", show=False, tooltip="Pick a theme (previews as you move)"),
    ]

    # What the screens subscribe to (gputui.ui.base): each moves when what it names changes. Revision counters only (var):
    # a reactive that repaints would repaint the whole screen at each, every second and every refresh (at 200x50
    # a full frame is 50 ms of CPU, most of a quiet refresh's); each view repaints what it redraws.
    data_revision: var[int] = var(0, init=False)  # a snapshot, a poll error, the theme, the namespace view
    clock_tick: var[int] = var(0, init=False)  # every second: ages and countdowns
    drain_revision: var[int] = var(0, init=False)  # the running drain moved
    canary_revision: var[int] = var(0, init=False)  # a guided canary logged a line or ended

    def __init__(
        self,
        settings: Settings,
        backend: Backend,
        *,
        clock: Callable[[], float] = time.time,
        audit: AuditLog | None = None,
        no_color: bool = False,
        notice: str | None = None,
        first_snapshot: ClusterSnapshot | None = None,
        themes_read: ThemesRead | None = None,
        connect: Callable[[], Backend] | None = None,
        cached: tuple[ClusterSnapshot, float] | None = None,
    ) -> None:
        """`connect`: builds the real backend; `backend` is then only what stands for it meanwhile
        (factory.pending_backend). Start-up runs it off the UI thread (ConnectingScreen), or, given the context's
        `cached` snapshot and when it was saved (backends.snapshot_cache), behind that snapshot marked CACHED."""
        super().__init__()
        self.settings = settings
        self.backend = backend
        self.clock = clock
        self.audit = audit or AuditLog(None, "unknown", backend.context)
        self.snapshot: ClusterSnapshot | None = first_snapshot or (cached[0] if cached else None)  # see cli.tui
        self.cached_at: float | None = cached[1] if cached and connect is not None else None  # until the live read
        self.poll_error: str | None = None
        self.palette: Palette = MONO if no_color else Palette()
        self._no_color = no_color
        self._poll_timer: Timer | None = None
        self._notice = notice
        self._themes_read = themes_read
        self.drains: list[DrainRun] = []  # every drain started since gputui started, each on its own nodes
        self.drain_poll_s = 1.0  # how often a running drain re-reads sessions
        self.canaries: dict[str, CanaryRun] = {}  # guided canaries by service key, running or ended
        self.idle_watch = IdleWatch()  # allocated-but-idle GPUs, read while a view shows them
        self.upgrade_clock = StateClock()  # how long each node has been in its driver-upgrade state
        self.problem_watch = ProblemWatch(clock)  # the nodes that need attention, flapping ones kept a minute
        self.fleet: FleetWatch | None = None  # the fleet's clusters, polled each on its own (:fleet)
        if first_snapshot is not None:
            self.upgrade_clock.observe(first_snapshot, clock())
        self.canary_poll_s = 15.0  # how often a running canary reads its gates
        self.polls = 0  # refreshes done (benchmarks count queries per refresh)
        self.keymap_name = settings.keymap
        self.keymaps: dict = {}
        self.namespace_view: str | None = None  # :ns: which namespace's services are listed
        self._told_problems: list = []
        self._stop_watching = asyncio.Event()
        self.watching = False
        self._connect = connect
        self.connecting: Connecting | None = Connecting(backend.context) if connect is not None else None
        self.crash: BaseException | None = None  # what crashed the app, if anything (cli.tui says it)

    @property
    def read_only(self) -> bool:
        return self.backend.writer is None

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification (the app's and every screen's: theirs come here) shows its text as data.
        Messages carry names, annotations and error bodies from the cluster: parsed as markup, one
        `gputui.io/drain-by: "[/bold] x"` raised MarkupError at start-up; a raw ESC retitled the terminal."""
        super().notify(visible(message, 2000, newlines=True), title=visible(title, 200), severity=severity,
                       timeout=timeout, markup=False)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return palette_defaults()

    def on_mount(self) -> None:
        # Textual's thread workers share asyncio's default executor: min(32, cores + 4) threads, 6 on a 2-core box. A
        # drain or a guided canary holds one for as long as it runs, so a few of them at once would leave the
        # dashboard's refresh (and every write) waiting for a thread; a pool far larger than anyone's concurrent runs.
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="gputui-worker"))
        # Keymaps are checked against every screen's bindings, which imports them all: skip that
        # on the way to the first frame when only the tested, bundled default is in play.
        self.reload_looks(keymaps=self.keymap_name != DEFAULT or bool(keymap_files(user_only=True)),
                          themes_read=self._themes_read)
        self._themes_read = None
        self.theme = self.settings.theme
        if self.settings.wallboard:
            from gputui.ui.screens.wallboard import WallboardScreen  # noqa: PLC0415 (screen: loaded when first shown)

            if len(self.settings.contexts) > 1:  # the board sums the fleet, and lists it on a page
                self.watch_fleet(self.settings.contexts, sessions=True)
            self.push_screen(WallboardScreen())
        else:
            self.push_screen(DashboardScreen())
            if len(self.settings.contexts) > 1:  # --context a,b: the fleet first
                self.open_fleet()
        if self._notice:
            self.notify(self._notice, title="Simulation", timeout=15)
        self.set_interval(1.0, self._tick_age)
        if self.connecting is not None:
            if self.cached_at is None:  # with a cached snapshot, the dashboard draws it meanwhile
                self.push_screen(ConnectingScreen(self.connecting))
            threading.Thread(target=self._connect_first, args=(self.dashboard_view(),), name="gputui connect",
                             daemon=True).start()
        elif self.snapshot is None:
            self.poll_now()
        else:  # the first read came with the app: the next one is a refresh away
            self._poll_timer = self.set_timer(self.settings.refresh, self._start_poll)
        self.set_timer(0.5, self._watch_looks)  # off the path to the first frame

    def on_unmount(self) -> None:
        self._stop_watching.set()  # lets the file watcher's thread end at once
        if self.fleet is not None:
            self.fleet.stop()  # its pollers are threads of their own (runs/fleet_watch.py)
        unsettle()  # the poll froze what lived (gcpause): nothing stays frozen after the app
        if self.connecting is not None:
            self.connecting.stop.set()
        stop_credential_plugins()  # a worker waiting on one ends now, not at its timeout

    def _connect_first(self, view: NodeView | None) -> None:
        """Start-up's connection, on a daemon thread: quitting waits for a worker's thread, never for this one.
        Build the backend (the credential plugin, discovery, access reviews), then read a first snapshot; after a
        failure, which the connecting screen shows, try again."""
        state, connect = self.connecting, self._connect
        assert state is not None and connect is not None
        backend: Backend | None = None
        while not state.stop.is_set():
            try:
                if backend is None:
                    backend = connect()
                    self.follow_first_lists(backend)
                snapshot = backend.reader.snapshot()
            except Exception as exc:  # noqa: BLE001 - said on the screen and retried; q is always there
                state.error, state.retry_at = error_line(exc), time.monotonic() + CONNECT_RETRY_S
                if state.stop.wait(CONNECT_RETRY_S):
                    break
                state.retry_at = None
                continue
            self.prepare_snapshot(snapshot, view)
            if self.post_message(FirstRead(backend, snapshot)):
                return
            break
        if backend is not None:  # the app quit meanwhile
            backend.close()

    def on_first_read(self, message: FirstRead) -> None:
        self.connecting, self.cached_at, self.partial = None, None, False
        old, self.backend = self.backend, message.backend
        old.close()
        self.audit = AuditLog(self.audit.path, getattr(self.backend.writer, "identity", "unknown"), self.backend.context)
        if isinstance(self.screen, ConnectingScreen):
            self.pop_screen()
        self.refresh_bindings()  # the footer dims what the backend cannot do
        self.on_snapshot_ready(SnapshotReady(message.snapshot, None))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # While start-up connects there is nothing to act on: the app's keys but quitting wait for a cluster. A
        # cached view can be looked through; its writes are refused by the pending backend (factory.CACHED_VIEW).
        return self.connecting is None or action == "quit" or self.cached_at is not None or self.partial

    # Themes and keymaps (reload_looks, use_keymap, watch_theme): gputui.ui.app_looks.LooksMixin.
    # The poll loop (poll_now, prepare_snapshot, on_snapshot_ready, problems): gputui.ui.app_poll.PollMixin.

    def on_drain_progress(self, message: DrainProgress) -> None:
        self.drain_revision += 1
        if message.finished:  # what the drain did shows at once, not at the next refresh
            self.poll_now()

    # ----- clusters: the one on screen and the fleet (gputui.ui.app_clusters) ----------

    def contexts(self) -> list[str]:
        return app_clusters.contexts(self)

    def switch_context(self, context: str) -> None:
        app_clusters.switch_context(self, context)

    def on_connected(self, message: Connected) -> None:
        app_clusters.connected(self, message)

    def use_backend(self, settings: Settings, backend: Backend) -> None:
        """Another cluster (:ctx): its settings, backend and audit identity; nothing of the old one's shown (its
        snapshot, poll error and idle figures unknown until read); every view redrawn, then a poll. Whoever
        calls closes the old backend when nothing else uses it (app_clusters.connected)."""
        self.settings, self.backend = settings, backend
        self.audit = AuditLog(self.audit.path, getattr(backend.writer, "identity", "unknown"), backend.context)
        self.snapshot, self.poll_error = None, None
        self.idle_watch.reset()
        self._show_snapshot()
        self.refresh_bindings()  # the footer dims what the new backend cannot do
        self.poll_now()

    def watch_fleet(self, contexts: tuple[str, ...], sessions: bool = False) -> None:
        """Start polling every cluster of the fleet, each on its own worker (the fleet view and the wallboard;
        sessions: the wallboard's, whose pages show each cluster's services with their live sessions)."""
        if self.fleet is not None:
            self.fleet.stop()
        self.fleet = FleetWatch(contexts, sessions)
        self.fleet.start(self)

    def open_fleet(self) -> None:
        app_clusters.open_fleet(self)

    def on_fleet_read(self, message: FleetRead) -> None:
        if self.fleet is not None:
            self.fleet.store(message)

    def on_idle_read(self, message: IdleRead) -> None:
        if self.idle_watch.store(message, self.backend):
            self._show_snapshot()

    def on_canary_progress(self, message: CanaryProgress) -> None:
        self.canary_revision += 1
        self.poll_now()  # a step moved the weights: show them

    # ----- command mode and the theme picker ----------------------------------------

    def action_command(self) -> None:
        from gputui.ui.screens.command import CommandScreen  # noqa: PLC0415 (screen: loaded when first shown)

        if not isinstance(self.screen, CommandScreen):
            self.push_screen(CommandScreen(self.command_choices), self.run_command)

    def command_choices(self) -> dict[str, list[str]]:
        from gputui.ui.keys.command_dispatch import command_choices  # noqa: PLC0415 (the command grammar loads with the first command)

        return command_choices(self)

    def run_command(self, command: Command | None) -> None:
        from gputui.ui.keys.command_dispatch import run_command  # noqa: PLC0415 (the command grammar loads with the first command)

        run_command(self, command)

    def show_namespace(self, namespace: str | None) -> None:
        """`:ns`: list one namespace's services (None: every namespace's)."""
        self.namespace_view = namespace
        self._show_snapshot()

    def front_dashboard(self) -> DashboardScreen | None:
        """The dashboard, brought to the top (the screens above it closed); None on the wallboard."""
        if self.settings.wallboard:
            return None
        while len(self.screen_stack) > 1 and not isinstance(self.screen, DashboardScreen):
            self.pop_screen()
        return self.screen if isinstance(self.screen, DashboardScreen) else None

    def open_node(self, name: str) -> None:
        """A node's detail, from any screen (screens open it through here: none imports another's). One detail
        screen is built and kept (installed), then aimed at each node opened: building and styling its widgets
        was most of the time an open took (benchmarks/keys.py). A second detail above the first gets its own."""
        from gputui.ui.screens.node_detail import NodeDetailScreen  # noqa: PLC0415 (screen: loaded when first shown)

        if not self.is_screen_installed(NODE_DETAIL):
            self.install_screen(NodeDetailScreen(name), NODE_DETAIL)
        kept = self.get_screen(NODE_DETAIL)
        assert isinstance(kept, NodeDetailScreen)
        if kept in self.screen_stack:
            self.push_screen(NodeDetailScreen(name))
            return
        kept.aim(name)
        self.push_screen(kept)

    def action_themes(self) -> None:
        from gputui.ui.screens.theme_picker import ThemePickerScreen  # noqa: PLC0415 (screen: loaded when first shown)

        if not isinstance(self.screen, ThemePickerScreen):
            names = sorted(self.available_themes, key=lambda n: (not n.startswith("gputui-"), n))  # ours first
            self.push_screen(ThemePickerScreen(names, self.theme))

    # ----- writes ---------------------------------------------------------------

    def run_write(self, title: str, action: Callable[[], str]) -> None:
        """Run a write off the UI thread; say how it went; refresh at once."""

        def job() -> None:
            try:
                self.post_message(WriteDone(title, action(), failed=False))
            except Exception as exc:  # noqa: BLE001 - said: ours by their message, anything else with its type (error_line)
                self.post_message(WriteDone(title, error_line(exc), failed=True))

        self.run_worker(job, thread=True, group="write", exit_on_error=False)

    def on_write_done(self, message: WriteDone) -> None:
        # Messages carry cluster text: never markup.
        self.notify(message.text, title=message.title, severity="error" if message.failed else "information",
                    markup=False)
        self.poll_now()
        # And once the watches have surely read the write's event (a busy cluster's may be batching): the row
        # shows the cordon now, not a refresh later.
        self.set_timer(WATCH_BATCH_S + 0.1, self.poll_now)

    def _handle_exception(self, error: Exception) -> None:
        if self.crash is None:
            self.crash = error
        super()._handle_exception(error)

    def _fatal_error(self) -> None:
        """A crash: Textual's own would print the traceback with every frame's locals (a token, a kubeconfig's
        contents) on the terminal. The app just ends; cli.common.crashed writes the traceback, without locals, to
        the crash file and says one line naming it."""
        self.bell()
        self._close_messages_no_wait()

    @property
    def last_drain(self) -> DrainRun | None:
        """The drain started last (the one `p` opens when it is the only one)."""
        return self.drains[-1] if self.drains else None

    @property
    def running_drains(self) -> list[DrainRun]:
        return [s for s in self.drains if not s.finished]

    async def action_quit(self) -> None:
        from gputui.ui.screens.quit_dialog import ask_quit  # noqa: PLC0415 (dialog: loaded when first shown)

        ask_quit(self)

    def action_help(self) -> None:
        from gputui.ui.screens.help import HelpScreen  # noqa: PLC0415 (screen: loaded when first shown)

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

"""The Textual application: wires settings, backend, theme and screens; runs the poll loop."""

from __future__ import annotations

import time
from typing import Callable

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.message import Message
from textual.timer import Timer
from textual.worker import get_current_worker

from gputui.backends.base import Backend, BackendError
from gputui.model import ClusterSnapshot
from gputui.ops.audit import AuditLog
from gputui.render import MONO, Palette
from gputui.settings import Settings
from gputui.ui.theming import load_themes, palette_defaults, palette_from


def one_line(exc: BaseException) -> str:
    """An error as the single line an operator reads (no traceback, no newlines)."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first if isinstance(exc, BackendError) else f"{type(exc).__name__}: {first}"


class SnapshotReady(Message):
    """A fresh snapshot (or why there is none). A newer one replaces a queued older one."""

    def __init__(self, snapshot: ClusterSnapshot | None, error: str | None) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotReady)


class GputuiApp(App[None]):
    CSS_PATH = "gputui.tcss"
    TITLE = "gputui"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help"),
    ]

    def __init__(
        self,
        settings: Settings,
        backend: Backend,
        *,
        clock: Callable[[], float] = time.time,
        audit: AuditLog | None = None,
        no_color: bool = False,
        notice: str | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.backend = backend
        self.clock = clock
        self.audit = audit or AuditLog(None, "unknown", backend.context)
        self.snapshot: ClusterSnapshot | None = None
        self.poll_error: str | None = None
        self.palette: Palette = MONO if no_color else Palette()
        self._no_color = no_color
        self._poll_timer: Timer | None = None
        self._notice = notice
        self.drain_session = None  # the maintenance batch running now, if any
        self.drain_poll_s = 1.0  # how often a running drain re-reads sessions
        self.polls = 0  # refreshes done (benchmarks count queries per refresh)

    @property
    def read_only(self) -> bool:
        return self.backend.writer is None

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return palette_defaults()

    def on_mount(self) -> None:
        themes, problems = load_themes()
        for theme in themes.values():
            self.register_theme(theme)
        if problems:
            self.notify("\n".join(map(str, problems)), title="Bad theme files", severity="warning")
        self.theme = self.settings.theme
        from gputui.ui.dashboard import DashboardScreen

        self.push_screen(DashboardScreen())
        if self._notice:
            self.notify(self._notice, title="Simulation", timeout=15)
        self.set_interval(1.0, self._tick_age)
        self.poll_now()

    def watch_theme(self, theme: str) -> None:
        if not self._no_color:
            self.palette = palette_from(self.get_css_variables())
        self._show_snapshot()

    # ----- the poll loop: one poll at a time, re-armed when it finishes ----------

    def poll_now(self) -> None:
        if self._poll_timer is not None:
            self._poll_timer.stop()
            self._poll_timer = None
        self._poll()

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def _poll(self) -> None:
        try:
            snapshot, error = self.backend.reader.snapshot(), None
        except Exception as exc:  # a dead backend must never take the UI down
            snapshot, error = None, one_line(exc)
        if not get_current_worker().is_cancelled:
            self.post_message(SnapshotReady(snapshot, error))

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        self.polls += 1
        if message.snapshot is not None:
            self.snapshot = message.snapshot
        self.poll_error = message.error
        self._show_snapshot()
        self._poll_timer = self.set_timer(self.settings.refresh, self._poll)

    def _show_snapshot(self) -> None:
        for screen in self.screen_stack:
            show = getattr(screen, "show_snapshot", None)
            if show is not None and screen.is_mounted:
                show()

    def _tick_age(self) -> None:
        # The age keeps counting while a poll hangs, so stale data is never shown as fresh.
        for header in self.query("HeaderBar"):
            header.refresh_text()

    # ----- writes ---------------------------------------------------------------

    def run_write(self, title: str, action: Callable[[], str]) -> None:
        """Run a write off the UI thread; say how it went; refresh at once."""

        def job() -> None:
            try:
                message, severity = action(), "information"
            except BackendError as exc:
                message, severity = one_line(exc), "error"
            except Exception as exc:
                message, severity = one_line(exc), "error"
            # Messages carry cluster text: never markup.
            self.call_from_thread(self.notify, message, title=title, severity=severity, markup=False)
            self.call_from_thread(self.poll_now)

        self.run_worker(job, thread=True, group="write", exit_on_error=False)

    async def action_quit(self) -> None:
        session = self.drain_session
        if session is None or session.finished:
            self.exit()
            return
        from gputui.ui.confirm import ConfirmScreen

        def answer(yes: bool | None) -> None:
            if yes:
                self.exit()

        self.push_screen(ConfirmScreen(
            "Quit while draining?",
            f"A drain of {', '.join(session.nodes)} is running. Quitting interrupts it; the nodes stay "
            "cordoned and the drain can be resumed with R from the next gputui.",
        ), answer)

    def action_help(self) -> None:
        from gputui.ui.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

"""`enter` on a service: the service in full (present.service_view), redrawn on each snapshot; its versions'
error ratio and p95 latency read from the engines' metrics in a worker every SIGNALS_EVERY_S, never on the UI
thread. `w` opens the shift dialog on it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static
from rich.text import Text

from gputui.backends.base import BackendError, error_line
from gputui.present.service_view import service_view
from gputui.signals import VersionSignals
from gputui.ui.base import ClusterScreen
from gputui.ui.footer import KeyFooter
from gputui.ui.header import HeaderBar
from gputui.ui.messages import SignalsRead

SIGNALS_EVERY_S = 15.0
SIGNALS_WINDOW_S = 300.0  # the canary's default rate window: the same figures it gates on


class ServiceScreen(ClusterScreen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
        Binding("w", "shift", "Weights", id="service-shift"),
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

    def show_snapshot(self) -> None:
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
        body.update(service_view(snapshot, service, self.signals, self.signals_error, app.audit.entries(),
                                 app.palette))
        now = app.clock()
        if self.read_at is None or now - self.read_at >= SIGNALS_EVERY_S:
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

    def action_shift(self) -> None:
        from gputui.ui.traffic_screen import TrafficShiftScreen

        if self.allowed("shift"):
            self.app.push_screen(TrafficShiftScreen(self.key))

"""What start-up shows until a cluster answers (ConnectingScreen), and the state of that connection which its
thread writes and the screen reads (Connecting). The connection itself is the app's (GputuiApp._connect_first):
it hands the backend and a first snapshot over by message (FirstRead)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from gputui.backends.base import ProgressReader, reading_line
from gputui.backends.factory import credential_plugins
from gputui.base.safe_text import visible

CONNECT_RETRY_S = 5.0  # after start-up's connection failed, before it tries again


@dataclass
class Connecting:
    """Start-up's connection while it runs (GputuiApp.connecting): written by its thread only, whole attributes
    at a time; the connecting screen reads them twice a second."""

    context: str
    started: float = field(default_factory=time.monotonic)
    error: str | None = None  # why the last try failed
    retry_at: float | None = None  # when the next try starts (time.monotonic)
    stop: threading.Event = field(default_factory=threading.Event)
    progress: ProgressReader | None = None  # the reader whose first lists are running, once the backend is built


class ConnectingScreen(Screen[None]):
    """What start-up shows until a cluster answers: where to, for how long, what it waits on (a credential
    plugin), the last failure and the next try. q and Ctrl-C quit at once: the connection runs on a thread
    nobody waits for."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+c", "app.quit", "Quit", show=False, priority=True)]
    DEFAULT_CSS = """
    ConnectingScreen { align: center middle; }
    ConnectingScreen > Static { width: auto; max-width: 90%; height: auto; padding: 1 2; border: round $primary; }
    """

    def __init__(self, state: Connecting) -> None:
        super().__init__()
        self.state = state

    def compose(self) -> ComposeResult:
        yield Static(self.text())

    def on_mount(self) -> None:
        self.set_interval(0.5, lambda: self.query_one(Static).update(self.text()))

    def text(self) -> Text:
        state, now = self.state, time.monotonic()
        text = Text(f"connecting to {visible(state.context, 120)}… {now - state.started:.0f}s", style="bold")
        for name, since in credential_plugins():
            settings = getattr(self.app, "settings", None)
            text.append(f"\nwaiting for the credential plugin {name}: {now - since:.0f}s"
                        + (f" of {settings.exec_timeout:g}s" if settings is not None else ""))
        if state.progress is not None and (line := reading_line(state.progress.progress())):
            text.append("\n" + line)
        if state.error:
            text.append("\nlast try: ")
            text.append(visible(state.error, 300), style="bold red")
        if state.retry_at is not None:
            text.append(f"\nnext try in {max(0.0, state.retry_at - now):.0f}s")
        text.append("\n\nq quits", style="dim")
        return text

"""The spine every gputui screen stands on: a typed app, and how its state reaches a screen.

The app owns the state (settings, backend, snapshot, palette, drain and canary runs) and announces its changes
through four revision counters: `data_revision` (a new snapshot, a poll error, the theme, the namespace view),
`clock_tick` (a second passed: ages move), `drain_revision` (the running drain moved) and `canary_revision` (a
guided canary moved). Every ClusterScreen, ClusterModal and ClusterWidget subscribes when it mounts, draws from
`self.app` (typed as GputuiApp), never from a copy, and repaints what it redraws: the counters repaint nothing
themselves. Its subscriptions end with it. (They are not "signals": in gputui those are a version's engine
signals, gputui.vocabulary.signals.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from textual import events, getters, on
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widget import Widget

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp

ResultT = TypeVar("ResultT")


class SnapshotView:
    """What a view does when the app's state moves; each does nothing unless the view overrides it."""

    def show_snapshot(self) -> None:
        """The snapshot (or the poll error, the theme, the namespace view) changed: draw it."""

    def refresh_age(self) -> None:
        """A second passed: redraw what shows the data's age or counts down (only while on top)."""

    def show_drain(self) -> None:
        """The running drain moved: redraw its progress."""

    def show_canary(self) -> None:
        """A guided canary logged a line or ended: redraw it."""


def subscribe(view: SnapshotView, node: DOMNode, only_on_top: Screen | None) -> None:
    """Make `view` follow the app's four revision counters. `only_on_top`: ages are redrawn only while that screen
    is the one shown (screens below it are redrawn when they come back)."""
    app = node.app

    def tick() -> None:
        if only_on_top is None or only_on_top.is_current:
            view.refresh_age()

    node.watch(app, "data_revision", view.show_snapshot, init=False)
    node.watch(app, "clock_tick", tick, init=False)
    node.watch(app, "drain_revision", view.show_drain, init=False)
    node.watch(app, "canary_revision", view.show_canary, init=False)


class ClusterScreen(SnapshotView, Screen[ResultT]):
    """A full screen of gputui."""

    if TYPE_CHECKING:
        app = getters.app(GputuiApp)

    def allowed(self, operation: str) -> bool:
        """Whether the backend may do `operation` (Backend.why_not); if not, the operator is told why: a key
        never just does nothing."""
        why = self.app.backend.why_not(operation)
        if why:
            self.app.notify(why, severity="warning")
        return why is None

    @on(events.Mount)  # runs besides a subclass's on_mount (Textual dispatches handlers per class)
    def _subscribe(self) -> None:
        subscribe(self, self, self)


class ClusterModal(SnapshotView, ModalScreen[ResultT]):
    """A dialog of gputui (plan, shift, confirm, pickers)."""

    if TYPE_CHECKING:
        app = getters.app(GputuiApp)

    @on(events.Mount)
    def _subscribe(self) -> None:
        subscribe(self, self, self)


class ClusterWidget(SnapshotView, Widget):
    """A widget of gputui that reads the app's state (header, tables)."""

    if TYPE_CHECKING:
        app = getters.app(GputuiApp)

    @on(events.Mount)
    def _subscribe(self) -> None:
        subscribe(self, self, None)

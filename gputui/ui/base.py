"""The spine every gputui screen stands on: a typed app, and the one way a new snapshot reaches a screen.

The app owns the state (settings, backend, snapshot, palette, drain session) and calls `show_snapshot()` on
every mounted screen of the stack when the snapshot changes, and `refresh_age()` on the top one every
second; a screen draws from `self.app`, typed as GputuiApp, never from state of its own copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from textual import getters
from textual.screen import ModalScreen, Screen
from textual.widget import Widget

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp

ResultT = TypeVar("ResultT")


class SnapshotView:
    """What the app calls on a screen; both do nothing unless the screen draws the snapshot or ages."""

    def show_snapshot(self) -> None:
        """The snapshot (or the poll error) changed: draw it."""

    def refresh_age(self) -> None:
        """A second passed: redraw what shows the data's age."""


class ClusterScreen(SnapshotView, Screen[ResultT]):
    """A full screen of gputui."""

    if TYPE_CHECKING:
        app = getters.app(GputuiApp)


class ClusterModal(SnapshotView, ModalScreen[ResultT]):
    """A dialog of gputui (plan, shift, confirm, pickers)."""

    if TYPE_CHECKING:
        app = getters.app(GputuiApp)


class ClusterWidget(Widget):
    """A widget of gputui that reads the app's state (header, tables)."""

    if TYPE_CHECKING:
        app = getters.app(GputuiApp)

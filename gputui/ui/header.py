"""The one-line summary at the top of every screen: where, how big, how busy, how fresh."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gputui.snapshot import stale
from gputui.present import cells
from gputui.ui.base import ClusterWidget
from gputui.figures import figures


def _sep(text: Text) -> None:
    text.append(" │ ", style="dim")


class HeaderBar(ClusterWidget, Static):
    DEFAULT_CSS = """
    HeaderBar { height: 1; background: $panel; color: $foreground; }
    """

    def on_mount(self) -> None:
        self.refresh_text()

    def show_snapshot(self) -> None:
        self.refresh_text()

    def on_resize(self) -> None:  # narrow and wide headers say different things
        self.refresh_text()

    def refresh_age(self) -> None:  # the age keeps counting while a poll hangs: stale data never looks fresh
        self.refresh_text()

    def refresh_text(self) -> None:
        # One line whatever it says (height: 1, the screen's width): no layout pass for the screen, which on
        # every tick of the age cost as much as the frame itself.
        self.update(self.summary(), layout=False)

    def summary(self) -> Text:
        app = self.app
        snap = app.snapshot
        palette = app.palette
        narrow = self.app.size.width < cells.NARROW  # the app knows its width before this widget is laid out
        text = Text("" if narrow else " gputui ", style="bold")
        context = snap.context if snap else app.backend.context
        text.append(Text(context, style="bold"))
        if app.backend.simulated:
            text.append(" SIM" if narrow else " SIMULATED", style=f"bold {palette.draining}")
        if app.backend.protected:  # read-only because the config protects this context
            text.append(" PROT" if narrow else " PROTECTED", style=f"bold {palette.cordoned}")
        elif app.read_only:
            text.append(" RO" if narrow else " READ-ONLY", style=f"bold {palette.cordoned}")
        if snap is None:
            _sep(text)
            if app.poll_error:
                text.append(app.poll_error, style=palette.alert)
            else:
                text.append("loading…", style="dim")
            return text
        _sep(text)
        now = app.clock()
        age = now - snap.taken_at
        is_stale = stale(age, app.settings.refresh)
        text.append(
            f"{'STALE ' if is_stale else ''}{cells.ago(age)}",
            style=f"bold reverse {palette.stale}" if is_stale else "dim",
        )
        _sep(text)
        text.append(f"{len(snap.nodes)} nodes")
        _sep(text)
        f = figures(snap, app.settings.temp_threshold)
        util, alerts, worst = f.mean_util, f.alerts, f.worst
        # Whole cards, MIG slices, shared replicas and DRA devices apart: a slice is not a GPU. Narrow: the cards,
        # and "+" when there is more (the node table and the wide header say what).
        text.append(f"GPUs {f.gpus.text(short=narrow)}")
        _sep(text)
        text.append("util ")
        text.append(cells.pct(util).strip(), style=palette.heat(util))
        _sep(text)
        text.append(
            f"{alerts} alert{'s' if alerts != 1 else ''}" + (f": {worst}" if worst else ""),
            style=f"bold {palette.alert}" if alerts else palette.ok,
        )
        for source in snap.sources:
            source_age = source.age(now)
            if source.error:
                _sep(text)
                text.append(f"{source.name} {source.error}", style=palette.alert)
            if source.stale(now, app.settings.refresh):
                _sep(text)
                text.append(f"{source.name} stale {cells.ago(source_age)}", style=f"bold {palette.stale}")
        if app.poll_error:
            _sep(text)
            text.append(app.poll_error, style=palette.alert)
        return text

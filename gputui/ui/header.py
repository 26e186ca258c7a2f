"""The one-line summary at the top of every screen: where, how big, how busy, how fresh."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gputui import render


def _sep(text: Text) -> None:
    text.append(" │ ", style="dim")


class HeaderBar(Static):
    DEFAULT_CSS = """
    HeaderBar { height: 1; background: $panel; color: $foreground; }
    """

    _counted: tuple[object, float, int] | None = None  # (snapshot, threshold, alerts); the object, not its id

    def on_mount(self) -> None:
        self.refresh_text()

    def _alert_count(self, snap, threshold: float) -> int:
        """Counted once per snapshot: the header redraws every second, and at 10,000 nodes
        walking every node's alerts each time costs more than the rest of the header."""
        if self._counted is None or self._counted[0] is not snap or self._counted[1] != threshold:
            self._counted = (snap, threshold, len(snap.alerts(threshold)))
        return self._counted[2]

    def refresh_text(self) -> None:
        self.update(self.summary())

    def summary(self) -> Text:
        app = self.app
        snap = app.snapshot
        palette = app.palette
        narrow = self.app.size.width < 100  # the app knows its width before this widget is laid out
        text = Text("" if narrow else " gputui ", style="bold")
        context = snap.context if snap else app.backend.context
        text.append(Text(context, style="bold"))
        if app.backend.simulated:
            text.append(" SIM" if narrow else " SIMULATED", style=f"bold {palette.draining}")
        if app.read_only:
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
        stale = age > 3 * app.settings.refresh
        text.append(
            f"{'STALE ' if stale else ''}{render.ago(age)}",
            style=f"bold reverse {palette.stale}" if stale else "dim",
        )
        _sep(text)
        text.append(f"{len(snap.nodes)} nodes")
        _sep(text)
        text.append(f"GPUs {snap.gpus_in_use}/{snap.gpus_total}")
        _sep(text)
        util = snap.mean_util
        text.append("util ")
        text.append(render.pct(util).strip(), style=palette.heat(util))
        alerts = self._alert_count(snap, app.settings.temp_threshold)
        _sep(text)
        text.append(
            f"{alerts} alert{'s' if alerts != 1 else ''}",
            style=f"bold {palette.alert}" if alerts else palette.ok,
        )
        for source in snap.sources:
            source_age = source.age(now)
            if source.error:
                _sep(text)
                text.append(f"{source.name} {source.error}", style=palette.alert)
            if source.stale(now, app.settings.refresh):
                _sep(text)
                text.append(f"{source.name} stale {render.ago(source_age)}", style=f"bold {palette.stale}")
        if app.poll_error:
            _sep(text)
            text.append(app.poll_error, style=palette.alert)
        return text

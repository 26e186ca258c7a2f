"""The one-line summary at the top of every screen: where, how big, how busy, how fresh."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gputui.backends.base import reading_line
from gputui.base.safe_text import visible
from gputui.policy.figures import figures
from gputui.policy.problems import FLAPPING, Problem, headline, summary
from gputui.present import cells
from gputui.snapshot import stale
from gputui.ui.base import ClusterWidget
from gputui.vocabulary.gpu_resources import GpuUse


def _sep(text: Text) -> None:
    text.append(" │ ", style="dim")


def gpu_figures(use: GpuUse) -> list[str]:
    """The GPU figure in every form, widest first: each scheme's `83/167+5/36MIG+6/16shared`; the cards with
    the other schemes named, `83/167 (+MIG, shared)`; the cards alone. Never a bare `+`."""
    full = f"GPUs {use.text()}"
    (_mark, used, offered), *others = use.shown()
    cards = f"GPUs {used}/{offered}"
    if not others:
        return [full, full, cards]
    named = f"{cards} (+{', '.join(mark for mark, _u, _o in others)})"
    return [full, named, cards]


def problem_forms(problems: list[Problem]) -> list[str]:
    """What needs attention in every form, longest first: `4 nodes need attention: 1 NotReady, 1 XID, 1 hot`;
    `4 nodes need attention`; `4 need attention`; `▲ 4`."""
    if not problems:
        return ["no node needs attention", "all nodes OK", "OK"]
    n = len(problems)
    flapping = sum(p.flapping for p in problems)
    flaps = f" ({flapping} {FLAPPING})" if flapping else ""
    return [summary(problems), headline(problems) + flaps, headline(problems), f"{n} need attention", f"▲ {n}"]


class HeaderBar(ClusterWidget, Static):
    DEFAULT_CSS = """
    HeaderBar { height: 1; background: $panel; color: $foreground; }
    """
    _forms: tuple[list[Problem], list[str]] | None = None  # the last problems' words: the age ticks every second

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
        elif app.read_only and app.cached_at is None:  # a cached view writes nothing until the live read: it says so
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
        if app.cached_at is not None:  # the last snapshot of an earlier run, until the live read replaces it
            text.append(f"CACHED, {cells.ago(now - app.cached_at)} old", style=f"bold reverse {palette.stale}")
            if app.connecting is not None and app.connecting.error:
                _sep(text)
                text.append(f"live read: {visible(app.connecting.error, 300)}", style=palette.alert)
            elif app.connecting is not None and app.connecting.progress is not None:
                _sep(text)
                text.append(reading_line(app.connecting.progress.progress()) or "reading", style="dim")
        elif app.partial:  # part of a large cluster's first read: its API source says how far it is
            text.append("PARTIAL", style=f"bold reverse {palette.stale}")
        else:
            text.append(
                f"{'STALE ' if is_stale else ''}{cells.ago(age)}",
                style=f"bold reverse {palette.stale}" if is_stale else "dim",
            )
        _sep(text)
        text.append(f"{len(snap.nodes)} nodes")
        _sep(text)
        f = figures(snap, app.settings.temp_threshold)
        problems = app.problems(snap)
        width = self.app.size.width  # the header spans the screen; its own size lags a resize
        # The problem words come before the GPU figure's detail: what needs attention is what must not be cut.
        # Whole cards, MIG slices, shared replicas and DRA devices apart (a slice is not a GPU); narrower, the
        # cards, with the other schemes named or, narrower still, left to the node table and :pools.
        gpu_forms = gpu_figures(f.gpus)
        if narrow:
            gpu_forms = gpu_forms[1:]
        head = len(text) + len("util ") + len(cells.pct(f.mean_util).strip()) + 3
        if self._forms is None or self._forms[0] is not problems:  # the same list while the snapshot is
            self._forms = (problems, problem_forms(problems))
        attention = self._forms[1]
        chosen = next(((g, a) for a in attention for g in gpu_forms if head + len(g) + 3 + len(a) <= width),
                      (gpu_forms[-1], attention[-1]))
        text.append(chosen[0])
        _sep(text)
        text.append("util ")
        text.append(cells.pct(f.mean_util).strip(), style=palette.heat(f.mean_util))
        _sep(text)
        text.append(chosen[1], style=f"bold {palette.alert}" if problems else palette.ok)
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

"""The app's poll loop: one snapshot read at a time off the UI thread, prepared there, handed to the views
(a mixin of GputuiApp: Textual finds on_snapshot_ready on the App class, so it lives on a class the app
inherits)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING

from textual import work
from textual.app import App
from textual.timer import Timer
from textual.worker import get_current_worker

from gputui.backends.base import Backend, ProgressReader, error_line
from gputui.backends.factory import PARTIAL_VIEW
from gputui.backends.gcpause import settle_after_snapshot
from gputui.backends.snapshot_cache import Keeper
from gputui.base.debug_log import log
from gputui.policy.figures import figures
from gputui.policy.node_pools import fleet_pools
from gputui.policy.upgrades import StateClock
from gputui.present.cells import Palette
from gputui.present.columns import node_order, row_context
from gputui.present.node_filter import haystack_columns
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from gputui.ui.messages import PartialRead, SnapshotReady
from gputui.ui.runs.idle_watch import IdleWatch
from gputui.ui.runs.problem_watch import ProblemWatch
from gputui.ui.screens.connecting import Connecting, ConnectingScreen
from gputui.ui.screens.node_order import NodeOrder, NodeView

PARTIAL_EVERY_S = 1.0  # how often start-up draws what a large cluster's first lists hold so far

if TYPE_CHECKING:
    _AppBase = App[None]  # mypy checks the mixin's calls against the app it is part of
else:
    _AppBase = object


def same_content(old: ClusterSnapshot | None, new: ClusterSnapshot | None) -> bool:
    """True when nothing a screen draws changed between two snapshots (the ages aside)."""
    if old is None or new is None:
        return old is new
    def source_errors(snap: ClusterSnapshot) -> list[tuple[str, str | None]]:
        return [(s.name, s.error) for s in snap.sources]  # fetch times move every poll; ages tick anyway

    return (old.nodes, old.pods, old.services, old.budgets, old.session_counts, source_errors(old)) == \
        (new.nodes, new.pods, new.services, new.budgets, new.session_counts, source_errors(new))


class PollMixin(_AppBase):
    """The poll loop of GputuiApp; the attributes below are set in GputuiApp.__init__ (the revisions are its vars)."""

    settings: Settings
    backend: Backend
    # Keeps the context's cache from the live snapshots (cli.tui sets it unless --no-cache), and why the cache
    # could not be read at start (one line, for diagnostics).
    keeper: Keeper | None = None
    cache_note: str = ""
    partial = False  # the snapshot shown is what a large cluster's first lists held so far (PartialRead)
    _poll_paused = False  # no poll is due: the screen on top needs none (resume_poll)
    cached_at: float | None
    clock: Callable[[], float]
    snapshot: ClusterSnapshot | None
    poll_error: str | None
    palette: Palette
    polls: int
    connecting: Connecting | None
    idle_watch: IdleWatch
    upgrade_clock: StateClock
    problem_watch: ProblemWatch
    data_revision: int
    clock_tick: int
    _poll_timer: Timer | None

    def poll_now(self) -> None:
        if self.connecting is not None:  # start-up's first read is on its way
            return
        if self._poll_timer is not None:
            self._poll_timer.stop()
            self._poll_timer = None
        self._start_poll()

    def _start_poll(self) -> None:
        top = self.screen_stack[-1] if self.screen_stack else None  # none while the app shuts down (a late timer)
        if top is None or getattr(top, "pauses_poll", False):
            # The fleet view is up: its own pollers read every cluster it lists, and nothing it shows comes from
            # this poll (at 20 clusters of 5,000 nodes, this poll's snapshot and its derived views were 14% of
            # the fleet's CPU). The screen calls resume_poll when it is left or covered.
            self._poll_paused = True
            return
        self._poll(self.dashboard_view())

    def resume_poll(self) -> None:
        """Poll now if the poll was paused for a screen that needs none (a refresh away otherwise)."""
        if self._poll_paused:
            self._poll_paused = False
            self.poll_now()

    def dashboard_view(self) -> NodeView | None:
        """The dashboard's view (its sort, its filter in use) as a value for a poll to prepare the snapshot by;
        None without a dashboard (the wallboard). Read on the UI thread, when the poll starts."""
        return next((s.view for s in self.screen_stack if isinstance(s, NodeOrder)), None)

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def _poll(self, view: NodeView | None) -> None:
        try:
            snapshot, error = self.backend.reader.snapshot(), None
        except Exception as exc:  # noqa: BLE001 - a dead backend must never take the UI down
            snapshot, error = None, error_line(exc)
        if snapshot is not None:
            self.prepare_snapshot(snapshot, view)
            started = time.monotonic()
            if settle_after_snapshot(started):
                log.debug("collector: everything collected and frozen out of its walks (%.0f ms)",
                          (time.monotonic() - started) * 1000)
        if not get_current_worker().is_cancelled:
            self.post_message(SnapshotReady(snapshot, error))

    def prepare_snapshot(self, snapshot: ClusterSnapshot, view: NodeView | None) -> None:
        """What every view derives from the whole fleet (figures, pools; the dashboard's rows in `view`'s sort),
        worked out in the poll thread and kept on the snapshot before the UI is handed it (SnapshotReady): at 65,000 nodes each walk over every node costs most of a second the UI thread
        would otherwise take between two keystrokes. Should it fail, the views ask again on the UI thread,
        where the failure is seen. Filling the snapshot's memo (ClusterSnapshot.derived) from this thread is
        safe: no screen shows the snapshot yet, and SnapshotReady is what hands it, memo and all, to the UI
        thread; a snapshot on screen has its memo written on the UI thread only (e.g. OrderWorkedOut)."""
        self._observe_upgrades(snapshot)
        with suppress(Exception):
            figures(snapshot, self.settings.temp_threshold)
            self.problem_watch.flaps(snapshot, self.settings.temp_threshold)
            fleet_pools(snapshot, self.idle_watch.idle, self.settings.pool_labels)
            if view is not None:  # the dashboard's rows, in the sort in force
                ctx = row_context(snapshot, self.palette, self.settings.temp_threshold, self.settings.pool_labels)
                node_order(ctx, view.sort_index, view.reverse)
                if view.filtering:  # what the next keystroke tests
                    haystack_columns(snapshot)

    def _observe_upgrades(self, snapshot: ClusterSnapshot) -> None:
        """The upgrade clock sees each snapshot once (StateClock swaps its table whole: readers never see
        half of it), from the poll thread or, for a snapshot that came another way, the UI thread."""
        def observe() -> bool:
            self.upgrade_clock.observe(snapshot, self.clock())
            return True

        snapshot.derived("upgrade-clock", observe)

    def follow_first_lists(self, backend: Backend) -> None:
        """Start-up built a backend whose first lists may take long (the live one): the connecting screen says
        how far they are, and what they hold so far is drawn every second, marked partial, until the whole
        first read replaces it. On its own thread: the connection's waits for the whole read."""
        state = self.connecting
        reader = backend.reader
        if state is None or not isinstance(reader, ProgressReader):
            return
        state.progress = reader

        def partials() -> None:
            while not state.stop.wait(PARTIAL_EVERY_S) and self.connecting is state and reader.progress():
                try:
                    snapshot = reader.partial_snapshot()
                except Exception as exc:  # noqa: BLE001 - a partial view is a courtesy: the whole read decides
                    log.debug("partial snapshot: %s", exc)
                    return
                if not self.post_message(PartialRead(snapshot)):
                    return

        threading.Thread(target=partials, name="gputui partial read", daemon=True).start()

    def on_partial_read(self, message: PartialRead) -> None:
        if self.connecting is None or self.cached_at is not None:
            return  # the whole read is in already; or the cached view stays until it is (it holds every node)
        self.snapshot, self.partial = message.snapshot, True
        self.backend = replace(self.backend, waiting=PARTIAL_VIEW)  # nothing planned from part of the cluster
        if isinstance(self.screen, ConnectingScreen):
            self.pop_screen()
            self.refresh_bindings()
        self._show_snapshot()

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        self.polls += 1
        old, new = self.snapshot, message.snapshot
        if new is not None:
            self.snapshot, self.partial = new, False
            if self.keeper is not None:
                self.keeper.offer(new)
            self._observe_upgrades(new)  # done already when the poll thread prepared it
            self.problem_watch.flaps(new, self.settings.temp_threshold)  # so too: once per snapshot
        changed = message.error != self.poll_error or not same_content(old, new) or self._flaps_moved(old, new)
        self.poll_error = message.error
        if changed:
            self._show_snapshot()
        else:  # a quiet cluster: only the ages move, so only the headers are redrawn
            self._tick_age()
        self._poll_timer = self.set_timer(self.settings.refresh, self._start_poll)

    def _flaps_moved(self, old: ClusterSnapshot | None, new: ClusterSnapshot | None) -> bool:
        """A flapping problem came, or one gone for a minute left the count, while no node moved."""
        if old is None or new is None:
            return False
        threshold = self.settings.temp_threshold
        return self.problem_watch.flaps(old, threshold) is not self.problem_watch.flaps(new, threshold)

    def problems(self, snapshot: ClusterSnapshot | None = None) -> list:
        """The nodes that need attention in the snapshot on screen (or `snapshot`), as every view counts them:
        gputui.policy.problems' Problem, worst first, flapping ones marked and kept for a minute."""
        snap = snapshot or self.snapshot
        return [] if snap is None else self.problem_watch.problems(snap, self.settings.temp_threshold)

    def _show_snapshot(self) -> None:
        self.data_revision += 1

    def _tick_age(self) -> None:
        # The age keeps counting while a poll hangs, so stale data is never shown as fresh.
        self.clock_tick += 1

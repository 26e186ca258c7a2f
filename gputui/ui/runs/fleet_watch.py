"""The fleet's clusters, each polled by its own thread at the refresh interval, so a slow or dead
cluster never stalls the others (or the screen): it just grows stale, and says why. Each is read-only
(no writer, no access review): the fleet view only looks; `enter` dives in through `:ctx`, with the
settings' own read-only and protections. Owned by the app; answers arrive as FleetRead messages.

Threads of their own, not Textual's thread workers: those share asyncio's default executor (min(32, cores + 4)
threads, 6 on a 2-core box), and a poller never ends, so a fleet of 20 read 6 clusters and starved everything
else that runs on a worker thread: the dashboard's refresh, a cordon, a drain (benchmarks/fleet.py found it)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from gputui.backends.base import error_line
from gputui.backends.factory import build_backend
from gputui.backends.gcpause import settle_after_snapshot
from gputui.policy.fleet import ClusterRow, cluster_row
from gputui.snapshot import ClusterSnapshot
from gputui.ui.messages import FleetRead

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp

RETRY_S = 10.0  # after a failed connection, before the next try


def next_pause(refresh: float, took: float) -> float:
    """The wait before a cluster's next read: a read starts every refresh, the time the last one took included
    (a row is then at most a refresh and a read old, where a pause of a whole refresh after each read left it
    two reads and a refresh old), but never less than half a refresh, so a slow cluster is not read back to back."""
    return max(refresh - took, refresh / 2)


class FleetWatch:
    def __init__(self, contexts: tuple[str, ...], sessions: bool = False) -> None:
        self.contexts = contexts
        self.sessions = sessions  # read each cluster's session series too (the wallboard's services page shows them)
        self.latest: dict[str, tuple[ClusterSnapshot | None, str]] = {c: (None, "") for c in contexts}
        self.revision = 0  # bumped by every read: views redraw the fleet only when it moved
        self._rows: dict[str, tuple[ClusterSnapshot | None, str, float, ClusterRow]] = {}
        self._made: dict[str, tuple[float, ClusterSnapshot, ClusterRow]] = {}  # each poller's last row
        self._stop = threading.Event()
        self._settle_lock = threading.Lock()
        self._settled_at = float("-inf")

    def start(self, app: GputuiApp) -> None:
        for context in self.contexts:
            threading.Thread(target=self._poll, args=(app, context), name=f"fleet {context}", daemon=True).start()

    def stop(self) -> None:
        """Every poller ends at its next pause (one stuck in a read ends when the read's timeout does)."""
        self._stop.set()

    def _poll(self, app: GputuiApp, context: str) -> None:
        settings = replace(app.settings, context=context, contexts=(), read_only=True)
        backend = None
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if backend is None:
                    backend = build_backend(settings, sessions=self.sessions)
                snapshot = backend.reader.snapshot()
                read: FleetRead = FleetRead(context, snapshot, "", self._row(context, snapshot, app))
                self._settle(app.settings.refresh)
                pause = next_pause(app.settings.refresh, time.monotonic() - started)
            except Exception as exc:  # noqa: BLE001 - one cluster's failure is its own row's, never the app's
                read = FleetRead(context, None, error_line(exc))
                pause = RETRY_S if backend is None else app.settings.refresh
            if self._stop.is_set():
                break  # a read that ended after the watch did: nobody shows it
            app.post_message(read)
            self._stop.wait(pause)
        if backend is not None:
            backend.close()

    def _row(self, context: str, snapshot: ClusterSnapshot, app: GputuiApp) -> tuple[float, ClusterRow] | None:
        """The cluster's row, worked out by its poller (not on the UI thread, which views draw on), from the last
        one when nothing it counts moved (policy.fleet.cluster_row). None if that fails: the view then asks
        on the UI thread, where a failure is seen."""
        threshold = app.settings.temp_threshold
        last = self._made.get(context)
        try:
            row = cluster_row(context, snapshot, "", threshold, last[1:] if last and last[0] == threshold else None)
        except Exception:  # noqa: BLE001 - asked again where it shows
            return None
        self._made[context] = (threshold, snapshot, row)  # each poller writes only its own context's key
        return threshold, row

    def _settle(self, every: float) -> None:
        """What the fleet's reads keep, frozen out of the cycle collector's walks (gcpause.settle_after_snapshot), at
        most once a refresh for the whole fleet. The app's poll does it for its own snapshot, but it waits while the
        fleet view is up: with nobody settling, the collector's full passes walked every cluster's records (20
        clusters of 5,000 nodes: 2.6 s of passes a minute, the longest 0.7 s, every thread stalled in each)."""
        now = time.monotonic()
        with self._settle_lock:
            if now - self._settled_at < every:
                return
            self._settled_at = now
        settle_after_snapshot(now)

    def store(self, message: FleetRead) -> None:
        """The app's handler of FleetRead: a failed read keeps the last snapshot (shown stale, with why). Views
        draw the fleet on the clock's tick (each second), not on every cluster's read: N clusters must not
        mean N redraws of whatever screen is up."""
        if message.context not in self.latest:
            return  # sent by a fleet this one replaced, before it stopped
        old, _ = self.latest[message.context]
        self.latest[message.context] = (message.snapshot or old, message.error)
        if message.snapshot is not None and message.row is not None:
            threshold, row = message.row
            self._rows[message.context] = (message.snapshot, message.error, threshold, row)
        self.revision += 1

    def rows(self, temp_threshold: float) -> list[ClusterRow]:
        """One row per cluster, worked out once per read (views ask every second: a cluster's alerts over
        thousands of nodes are not redone on the UI thread for a clock tick)."""
        out = []
        for c in self.contexts:
            snapshot, error = self.latest[c]
            cached = self._rows.get(c)
            if cached is None or cached[0] is not snapshot or cached[1] != error or cached[2] != temp_threshold:
                cached = (snapshot, error, temp_threshold, cluster_row(c, snapshot, error, temp_threshold))
                self._rows[c] = cached
            out.append(cached[3])
        return out

"""Allocated-but-idle GPUs for every view that shows them (the dashboard's pool strip, the wallboard, `:pools`):
one range query over the last hour (gputui.policy.node_pools.read_idle), in a worker, at most every IDLE_EVERY_S and only
while a view asks. Owned by the app, so views coming and going neither repeat the query nor lose its answer.
Unknown ("?", with why) until read, and whenever the metrics cannot tell."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.policy.node_pools import IDLE_BELOW_PCT, IDLE_WINDOW_S, IdleReading
from gputui.ui.messages import IdleRead

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp

IDLE_EVERY_S = 60.0


class IdleWatch:
    def __init__(self) -> None:
        self.idle: IdleReading | None = None  # None: unknown (why says why)
        self.why = ""
        self._asked_at: float | None = None
        self.pending = False  # a read is under way (tests wait on it for a settled frame)
        self.reset()

    def want(self, app: GputuiApp) -> None:
        """A view shows idle figures: read them if the last read is older than IDLE_EVERY_S. The answer
        bumps the app's data revision, so every view redraws with it."""
        now = app.clock()
        if self._asked_at is not None and now - self._asked_at < IDLE_EVERY_S:
            return
        self._asked_at, self.pending = now, True
        backend = app.backend

        def read() -> None:
            idle, why = backend.read_idle(IDLE_WINDOW_S, IDLE_BELOW_PCT)
            app.post_message(IdleRead(idle, why, backend))

        app.run_worker(read, thread=True, exclusive=True, group="idle", exit_on_error=False)

    def store(self, message: IdleRead, backend: object) -> bool:
        """The app's handler of IdleRead: keep the answer read from `backend` (the one in use); True when it
        changed, and every view is to be redrawn."""
        if message.asked is not backend:  # read from the cluster the operator has since left
            return False
        self.pending = False
        changed = (message.idle, message.why) != (self.idle, self.why)
        self.idle, self.why = message.idle, message.why
        return changed

    def reset(self) -> None:
        """Another cluster (:ctx): its idle figures are unknown until read."""
        self.idle, self.why, self._asked_at, self.pending = None, "not read yet", None, False

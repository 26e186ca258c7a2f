"""A drain as the TUI holds it: it outlives its screen. The batch runs in an app-level thread worker and keeps
its state in a DrainSession (the board's rows, each node's state, the log), so the operator can go back to
the dashboard and return with `p` while sessions run down."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputui.backends.base import ArrivalsReader, BackendError
from gputui.ops.drain.batch import run_batch
from gputui.ops.drain.events import DrainControl, DrainEvent
from gputui.ops.drain.events import EventKind as K
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.out_of_rotation import KEPT_RUNNING
from gputui.snapshot import ClusterSnapshot
from gputui.ui.messages import DrainProgress

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp


class _Interrupted(Exception):
    pass


@dataclass
class PodRow:
    """One pod as the board shows it."""

    node: str
    pod: str
    state: K | None = None  # the last thing that happened to it (None: nothing yet, pending)
    sessions: int | None = None
    message: str = ""
    deadline: float | None = None  # when the wait ends (epoch seconds)
    tries: int = 0  # PDB 429s so far
    last_try: float | None = None
    out_since: float | None = None  # taken out of rotation then (None: in rotation)
    rotation_note: str = ""  # why it is in rotation, when the drain keeps it there
    decay_from: tuple[float, int] | None = None  # its first count after it went out: the decay's start
    put_back: bool = False  # the operator put it back: the drain leaves it in rotation

    def empty_in(self, now: float, mean_s: float | None = None) -> float | None:
        """Seconds until it holds no session, from its own decay since it went out of rotation; without a
        decay yet, its engine's mean request time (what is in flight ends within about that). None: no
        estimate."""
        if self.out_since is None or self.sessions is None:
            return None
        if self.sessions == 0:
            return 0.0
        if self.decay_from is not None:
            t0, s0 = self.decay_from
            if s0 > self.sessions and now > t0:
                return self.sessions / ((s0 - self.sessions) / (now - t0))
        # n requests in flight, each ending in about `mean_s`: the last one ends after about mean x H(n).
        return mean_s * sum(1.0 / k for k in range(1, self.sessions + 1)) if mean_s is not None else None


@dataclass
class DrainSession:
    """Everything the progress board shows; written by the drain thread, read by the UI."""

    nodes: list[str]
    options: DrainOptions
    started: float
    controls: dict[str, DrainControl] = field(default_factory=dict)
    pods: dict[str, PodRow] = field(default_factory=dict)
    node_state: dict[str, K] = field(default_factory=dict)  # absent: queued
    log: list[str] = field(default_factory=list)
    finished: bool = False
    aborted: bool = False
    backend: object = None  # the backend the drain runs on (kept open by it across a context switch)
    mean_s: dict[str, float] = field(default_factory=dict)  # pod -> its engine's mean request time, when read
    lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, event: DrainEvent, now: float) -> None:
        with self.lock:
            if event.pod:
                row = self.pods.setdefault(event.pod, PodRow(event.node, event.pod))
                if event.kind is K.OUT_OF_ROTATION:
                    row.out_since, row.decay_from, row.rotation_note = now, None, ""
                elif event.kind is K.IN_ROTATION:
                    row.out_since, row.decay_from = None, None
                    row.rotation_note = event.message
                elif event.kind is K.INFO and event.message.startswith(KEPT_RUNNING):
                    row.rotation_note = event.message
                elif event.kind not in (K.SESSIONS_CUT, K.INFO):
                    row.state = event.kind
                if event.kind is K.WAITING:
                    row.sessions, row.deadline = event.sessions, event.deadline
                    if row.out_since is not None and row.decay_from is None and event.sessions is not None:
                        row.decay_from = (now, event.sessions)
                elif event.kind not in (K.OUT_OF_ROTATION, K.IN_ROTATION, K.INFO):
                    row.message = event.message
                if event.kind is K.BLOCKED:
                    row.tries, row.last_try = event.count, now
                    if event.count > 1:
                        return  # one line per blocked pod, with its count: not one log line per retry
            elif event.kind is not K.INFO:  # a word about a node (cordoned with its batch) is no state of it
                self.node_state[event.node] = event.kind
            if event.kind not in (K.WAITING, K.TICK):
                stamp = time.strftime("%H:%M:%S", time.localtime(now))
                self.log.append(f"{stamp} {event.node} {event.kind.value} {event.pod} {event.message}".rstrip())
                del self.log[:-200]


def mean_request_times(reader: object, snapshot: ClusterSnapshot | None, nodes: list[str]) -> dict[str, float]:
    """Each inference pod's mean request time on these nodes, from its engine's histogram (the board's time to
    empty before a pod's own decay shows); {} when the reader cannot say or the read fails."""
    if snapshot is None or not isinstance(reader, ArrivalsReader):
        return {}
    pods = [p for n in nodes for p in snapshot.pods_on(n) if p.service]
    try:
        read = reader.arrivals(pods) if pods else {}
    except BackendError:
        return {}
    return {k: a.mean_s for k, a in read.items() if a.mean_s is not None}


def start_drain(app: GputuiApp, nodes: list[str], options: DrainOptions | dict[str, DrainOptions],
                deadlines: dict[str, float] | None = None, take_over: bool = False) -> DrainSession:
    """Run the batch in an app-level thread; the session object carries its state. The drain keeps the
    backend it started on: a context switch meanwhile leaves it open until the drain ends."""
    shown = options if isinstance(options, DrainOptions) else next(iter(options.values()), DrainOptions())
    backend = app.backend
    session = DrainSession(nodes, shown, app.clock(), {n: DrainControl() for n in nodes}, backend=backend)
    app.drains.append(session)

    def work() -> None:
        from textual.worker import get_current_worker

        worker = get_current_worker()

        def nap(seconds: float) -> None:
            # Quitting gputui interrupts the drain: the node's annotations let it resume later.
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                if worker.is_cancelled:
                    raise _Interrupted
                time.sleep(min(0.1, max(0.0, end - time.monotonic())))

        session.mean_s = mean_request_times(backend.reader, app.snapshot, nodes)
        gen = run_batch(nodes, backend.reader, backend.writer, app.audit, options,
                        parallel=app.settings.drain_parallel, controls=session.controls,
                        deadlines=deadlines, clock=app.clock, sleep=nap, poll_s=app.drain_poll_s,
                        take_over=take_over)
        try:
            for event in gen:
                session.apply(event, app.clock())
                app.post_message(DrainProgress(finished=False))
        except _Interrupted:
            session.apply(DrainEvent(",".join(nodes), K.INFO, message="interrupted by quitting"), app.clock())
        except Exception as exc:  # shown, never a traceback
            session.apply(DrainEvent(",".join(nodes), K.FAILED, message=str(exc)), app.clock())
        finally:
            session.aborted = any(c.aborted for c in session.controls.values())
            session.finished = True
            # The app moved to another context meanwhile: closed when no other drain still runs on it.
            if backend is not app.backend and not any(s.backend is backend for s in app.running_drains
                                                          if s is not session):
                backend.close()
            if not worker.is_cancelled:
                app.post_message(DrainProgress(finished=True))

    app.run_worker(work, thread=True, group="drain", exit_on_error=False)
    return session

"""A drain as the TUI holds it: it outlives its screen. The batch runs in an app-level thread worker and keeps
its state in a DrainRun (the board's rows, each node's state, the log), so the operator can go back to
the dashboard and return with `p` while sessions run down."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.worker import get_current_worker

from gputui.backends.base import ArrivalsReader, BackendError
from gputui.ops.context import OpContext
from gputui.ops.drain.batch import run_batch
from gputui.ops.drain.events import DrainControl, DrainEvent
from gputui.ops.drain.events import EventKind as K
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.progress import DrainProgress, PodRow
from gputui.ops.drain.start import BatchStart
from gputui.ops.steps import run_steps
from gputui.snapshot import ClusterSnapshot
from gputui.ui.messages import DrainProgress as DrainProgressMessage

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp


class _Interrupted(Exception):
    pass


@dataclass
class DrainRun:
    """Everything the progress board shows; written by the drain thread, read by the UI."""

    nodes: list[str]
    options: DrainOptions
    started: float
    controls: dict[str, DrainControl] = field(default_factory=dict)
    progress: DrainProgress = field(default_factory=DrainProgress)  # ops' fold of the events: the board's rows
    log: list[str] = field(default_factory=list)
    finished: bool = False
    aborted: bool = False
    # How many times the batch has looked and gone to wait for its next look: the run is alive, and the
    # tests that move the demo's clock by hand step it one look at a time (never ahead of the drain).
    looks: int = 0
    backend: object = None  # the backend the drain runs on (kept open by it across a context switch)
    mean_s: dict[str, float] = field(default_factory=dict)  # pod -> its engine's mean request time, when read
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def pods(self) -> dict[str, PodRow]:
        return self.progress.pods

    @property
    def node_state(self) -> dict[str, K]:
        return self.progress.node_state

    def apply(self, event: DrainEvent, now: float) -> None:
        with self.lock:
            # The log has a line per news; a waiting pod's count is on its row, not in the log.
            if self.progress.apply(event, now) and event.kind is not K.WAITING:
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
                deadlines: dict[str, float] | None = None, take_over: bool = False) -> DrainRun:
    """Run the batch in an app-level thread; the run object carries its state. The drain keeps the
    backend it started on: a context switch meanwhile leaves it open until the drain ends."""
    shown = options if isinstance(options, DrainOptions) else next(iter(options.values()), DrainOptions())
    backend = app.backend
    run = DrainRun(nodes, shown, app.clock(), {n: DrainControl() for n in nodes}, backend=backend)
    app.drains.append(run)

    def work() -> None:
        worker = get_current_worker()

        def nap(seconds: float) -> None:
            # Quitting gputui interrupts the drain: the node's annotations let it resume later.
            run.looks += 1
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                if worker.is_cancelled:
                    raise _Interrupted
                time.sleep(min(0.1, max(0.0, end - time.monotonic())))

        run.mean_s = mean_request_times(backend.reader, app.snapshot, nodes)
        ctx = OpContext.of(backend, app.settings, app.audit).paced(app.drain_poll_s, app.clock, nap)

        def show(event: DrainEvent) -> None:
            run.apply(event, app.clock())
            app.post_message(DrainProgressMessage(finished=False))
        try:
            run_steps(run_batch(nodes, ctx, options, BatchStart(controls=run.controls, deadlines=deadlines or {},
                                                                  take_over=take_over)), show)
        except _Interrupted:
            run.apply(DrainEvent(",".join(nodes), K.INFO, message="interrupted by quitting"), app.clock())
        except Exception as exc:  # noqa: BLE001 - shown as the run's failure, never a traceback
            run.apply(DrainEvent(",".join(nodes), K.FAILED, message=str(exc)), app.clock())
        finally:
            run.aborted = any(c.aborted for c in run.controls.values())
            run.finished = True
            # The app moved to another context meanwhile: closed when no other drain still runs on it.
            if backend is not app.backend and not any(s.backend is backend for s in app.running_drains
                                                          if s is not run):
                backend.close()
            if not worker.is_cancelled:
                app.post_message(DrainProgressMessage(finished=True))

    app.run_worker(work, thread=True, group="drain", exit_on_error=False)
    return run

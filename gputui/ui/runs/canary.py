"""A guided canary as the TUI holds it: like a drain, it outlives the service screen that started it. It runs
in an app-level thread worker (ops.canary.run_canary) and keeps its log and outcome in a CanaryRun; the
operator's keys reach it through the run's CanaryControl, whose wait is the canary's sleep, so a
rollback asked for is sent at once, not at the next look at the gates."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.worker import get_current_worker

from gputui.backends.base import error_line
from gputui.ops.canary import CanaryControl, CanaryOptions, CanaryPlan, CanaryReport, Gates, run_canary
from gputui.ops.context import OpContext
from gputui.ops.steps import run_steps
from gputui.ops.traffic import fmt_pct
from gputui.ui.messages import CanaryProgress

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp

LOG_KEPT = 200


class _Interrupted(Exception):
    pass


@dataclass
class CanaryRun:
    """What the service screen shows of a canary; written by the canary's thread, read by the UI."""

    plan: CanaryPlan
    gates: Gates
    report: CanaryReport  # filled in by the canary as it goes: its step, then its outcome
    control: CanaryControl = field(default_factory=CanaryControl)
    log: list[str] = field(default_factory=list)
    _last: str = ""  # the last line as the canary said it, and how often in a row
    _repeats: int = 0
    finished: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, line: str, now: float) -> None:
        with self.lock:
            stamp = time.strftime('%H:%M:%S', time.localtime(now))
            if line == self._last and self.log:  # a step held with the same figures: one line, counted
                self._repeats += 1
                self.log[-1] = f"{stamp} {line} (×{self._repeats})"
                return
            self._last, self._repeats = line, 1
            self.log.append(f"{stamp} {line}")
            del self.log[:-LOG_KEPT]

    def state(self) -> str:
        """One line: where the canary is and what it is doing."""
        with self.lock:
            if self.report.outcome:
                return f"{self.report.outcome}: {self.report.reason}"
            if self.finished:
                return "ended"
            reached = self.report.reached
            where = "before its first step" if reached is None else f"at {fmt_pct(reached)}"
            if self.report.held and not self.control.paused:  # waiting on the operator, or on the cluster
                keys = "space tries again, " + ("f forces it, " if "takes it anyway" in self.report.held else "")
                return f"held {where}: {self.report.held}; {keys}x stops, b rolls back"
            return f"{'paused' if self.control.paused else 'running'} {where}"

    def lines(self, last: int) -> list[str]:
        with self.lock:
            return self.log[-last:]


def start_canary(app: GputuiApp, plan: CanaryPlan, gates: Gates, poll_s: float, force: bool = False) -> CanaryRun:
    """Run the canary on the backend it was planned on; the run is app.canaries[service key]. A step it cannot
    take, or gates it cannot read, hold it where it is (running, keys live) rather than end it: `force` takes each
    step past the capacity rule from the start."""
    backend = app.backend
    run = CanaryRun(plan, gates, CanaryReport(plan))
    app.canaries[plan.service.key] = run

    def work() -> None:
        worker = get_current_worker()

        def nap(seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                if worker.is_cancelled:  # quitting gputui: the canary stops where it is
                    raise _Interrupted
                if run.control.wait(min(0.2, max(0.0, end - time.monotonic()))):
                    return  # a key was pressed: the canary acts on it now

        ctx = OpContext.of(backend, app.settings, app.audit).paced(poll_s, app.clock, nap)
        steps = run_canary(plan, ctx, CanaryOptions(gates, force, wait_when_held=True), run.control,
                           run.report)

        def show(line: str) -> None:
            run.add(line, app.clock())
            app.post_message(CanaryProgress(plan.service.key))
        try:
            run_steps(steps, show)  # its outcome lands in run.report
        except _Interrupted:
            run.add("interrupted by quitting: traffic left as it is", app.clock())
        except Exception as exc:  # noqa: BLE001 - shown in the run's log, never a traceback
            run.add(f"failed: {error_line(exc)}", app.clock())
        finally:
            run.finished = True
            if not worker.is_cancelled:
                app.post_message(CanaryProgress(plan.service.key))

    app.run_worker(work, thread=True, group=f"canary-{plan.service.key}", exit_on_error=False)
    return run

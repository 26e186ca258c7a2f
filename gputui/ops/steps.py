"""Driving an operation that yields progress and returns its report (a drain, a batch, a drill, a canary): the one
home of StopIteration, so no front end, batch or test reaches into it. `run_steps` hands every line to a sink and
returns the report; `step` takes one line, for a driver that interleaves several operations (a drain batch)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Generic, TypeVar

Line = TypeVar("Line")
Report = TypeVar("Report")


@dataclass(frozen=True, slots=True)
class Ended(Generic[Report]):
    """The operation is over: what it returned."""

    report: Report


def step(steps: Generator[Line, None, Report]) -> Line | Ended[Report]:
    """The operation's next line, or Ended with its report."""
    try:
        return next(steps)
    except StopIteration as done:
        return Ended(done.value)


def run_steps(steps: Generator[Line, None, Report], each: Callable[[Line], None]) -> Report:
    """Hand every progress line to `each` (the front end's sink), then return the op's report."""
    while not isinstance(line := step(steps), Ended):
        each(line)
    return line.report

"""Running an op that yields progress lines and returns its report (drill, canary): one loop for every
front end and test, so none reaches into StopIteration itself."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TypeVar

Line = TypeVar("Line")
Report = TypeVar("Report")


def run_steps(steps: Generator[Line, None, Report], each: Callable[[Line], None]) -> Report:
    """Hand every progress line to `each`, then return the op's report."""
    while True:
        try:
            each(next(steps))
        except StopIteration as done:
            return done.value

"""A clock the tests move by hand, so the demo cluster is the same on every run."""

from __future__ import annotations

FIXED_START = 1_798_761_600.0  # 2027-01-01T00:00:00Z


class ManualClock:
    def __init__(self, start: float = FIXED_START) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

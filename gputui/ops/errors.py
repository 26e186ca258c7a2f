"""The errors every operation shares: one read-only refusal, worded as Backend.why_not words it, for cordon,
drain, drill, shift, canary and scale-down alike (a front end says it as one line; nothing was sent)."""

from __future__ import annotations

from gputui.backends.base import BackendError


class ReadOnlyError(BackendError):
    """An operation asked of a backend with no writer (the --read-only flag, a protected context)."""

    def __init__(self, operation: str) -> None:
        super().__init__(read_only_words(operation))
        self.operation = operation


def read_only_words(operation: str) -> str:
    """`read-only: drain is unavailable`: the words of every front end's refusal (Backend.why_not's too)."""
    return f"read-only: {operation} is unavailable"

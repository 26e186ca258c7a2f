"""Errors as the single line an operator reads: the one formatter every layer uses (no traceback, no
newlines, the transport's cause in plain words)."""

from __future__ import annotations

# What a failed connection says deep inside urllib3/requests, and the plain words for it.
TRANSPORT_MARKERS = ("Connection refused", "timed out", "Name or service not known", "certificate verify failed")


def first_line(text: str, limit: int = 160) -> str:
    """The first non-empty line of a text, cut to `limit` characters ("" for none)."""
    for line in str(text).strip().splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def transport_reason(exc: BaseException) -> str:
    """Why a request could not be made ("connection refused", "timed out", ...), else its first line."""
    text = str(getattr(exc, "reason", None) or exc)
    for marker in TRANSPORT_MARKERS:
        if marker in text:
            return marker.lower()
    return first_line(text) or type(exc).__name__


def one_line(exc: BaseException, *, known: tuple[type[BaseException], ...] = ()) -> str:
    """An error in one line: its message for the errors gputui words itself (`known`, and any with a
    message of its own); otherwise prefixed with its type, so an unexpected one still says what it was."""
    first = first_line(str(exc))
    if not first:
        return type(exc).__name__
    return first if isinstance(exc, known) else f"{type(exc).__name__}: {first}"

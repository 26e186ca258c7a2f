"""When a hold began and whether it looks stuck: the time helpers gputui.policy.disruptions and
gputui.policy.nvsentinel_holds share (each actor writes its times its own way; unknown is None, never 0). Pure."""

from __future__ import annotations

import calendar
import time

from gputui.vocabulary import disruptions as d


def seconds(text: str | None) -> float | None:
    """Unix seconds written as an integer; None when absent or not one (never 0: unknown is not the epoch)."""
    try:
        value = float(int(str(text).strip()))
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def utc(text: str | None, layout: str) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(str(text), layout)))
    except (TypeError, ValueError):
        return None


def stale(since: float | None, now: float, what: str) -> str:
    if since is None or now - since <= d.STUCK_AFTER_S:
        return ""
    return f"{what} for {(now - since) / 3600:.0f}h (over {d.STUCK_AFTER_S / 3600:.0f}h)"


def age(seconds: float) -> str:
    return f"{seconds / 86400:.0f}d" if seconds >= 2 * 86400 else f"{seconds / 3600:.0f}h" if seconds >= 3600 \
        else f"{max(1.0, seconds / 60):.0f}m"

"""Pausing CPython's cycle collector while large JSON answers are decoded and digested.

Decoding one Prometheus answer for 10,000 nodes, or a page of 500 pods,
allocates hundreds of thousands of dicts and lists. Allocations are what
trigger the collector, and each of its passes walks every long-lived
object, the whole fleet's records included: at 10,000 nodes those passes
cost more CPU than the decoding itself. JSON holds no reference cycles, so
the passes find nothing; reference counting still frees everything at once.
The collector runs again as usual as soon as the last pause ends.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # pauses open now, across threads
_resume = False  # whether the collector was on when the first pause began


@contextmanager
def gc_paused() -> Iterator[None]:
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()  # never turn on a collector someone else turned off
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                if _renewed_at is not None:
                    # Settled (the app's poll): what the pause decoded is frozen where it stands. Otherwise the
                    # next young collection walks it, and the freeze after the snapshot walks it again (a
                    # refresh's answers are hundreds of thousands of objects at 65,000 nodes, kept or freed by
                    # reference counting: JSON has no cycles). Whatever else is young goes with it, until the
                    # next renewal.
                    gc.freeze()
                gc.enable()


RENEW_S = 60.0  # how often the freeze is renewed by a full collection (settle(renew=True))
_renewed_at: float | None = None  # when settle_after_snapshot last renewed it; None: at its next call


def settle_after_snapshot(now: float | None = None) -> bool:
    """The app's poll, after each snapshot and what it derives: settle, renewing the freeze every RENEW_S (the
    first time at once). Whatever the fleet's size: a full pass over Textual's own objects alone (tens of
    thousands) took 30-90 ms, and it landed in whichever keypress allocated last (benchmarks/keys.py --raw).
    True when this call renewed."""
    global _renewed_at
    now = time.monotonic() if now is None else now
    with _lock:
        renew = _renewed_at is None or now - _renewed_at >= RENEW_S
        if renew:
            _renewed_at = now
    settle(renew)
    return renew


def settle(renew: bool) -> None:
    """Freeze what lives now out of the collector's walks.

    At 65,000 nodes the watch caches' records and a snapshot's nodes and pods are over a million tracked objects
    that the next refreshes replace a share of at most, and each full pass walked them all: a quarter of the
    steady CPU (issue 18). Frozen objects are still freed by reference counting when replaced; only garbage in a
    cycle stays. So the freeze after each snapshot follows a young collection (what died since the last one,
    Textual's cycles included, is collected first), and every RENEW_S (`renew`) everything is thawed, collected
    in full and frozen again: cyclic garbage among frozen objects lives at most that long. A reader that closes,
    and the app when it ends, thaw everything (unsettle)."""
    if renew:
        gc.unfreeze()
        gc.collect()
    else:
        gc.collect(1)
    gc.freeze()


def unsettle() -> None:
    """Back into the collector's walks: a closed reader's records may sit in cycles (threads, callbacks). The
    next settle_after_snapshot renews in full."""
    global _renewed_at
    with _lock:
        _renewed_at = None
    gc.unfreeze()

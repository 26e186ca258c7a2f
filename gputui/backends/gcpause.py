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
from contextlib import contextmanager
from typing import Iterator

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
                gc.enable()


def settle() -> None:
    """Once a large fleet's first snapshot is built: collect, then freeze what lives now (the watch caches'
    records above all) out of the collector's walks. At 65,000 nodes those records are over a million
    tracked objects that rarely change, and every full pass walked them all: 28% of the steady CPU (issue
    18). Frozen objects are still freed by reference counting when replaced; only one that is part of a
    cycle would stay, which is why a reader that closes undoes it (unsettle)."""
    gc.collect()
    gc.freeze()


def unsettle() -> None:
    """Back into the collector's walks: a closed reader's records may sit in cycles (threads, callbacks)."""
    gc.unfreeze()

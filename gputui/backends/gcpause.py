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


# At a large fleet's size, what survives a refresh is the snapshot itself (some 25 objects per node and pod):
# the collector's passes over the older generations walk it again and again and find nothing, for a snapshot
# holds no cycles (at 65,000 nodes a fifth of the CPU, 0.6 s per full pass). So each refresh's objects are
# moved out of its sight (gc.freeze) before it runs again. Reference counting still frees every frozen object
# that is dropped; only a reference cycle frozen alive and dropped later (a closed screen's widgets) would
# wait: every UNFREEZE_S everything is handed back and collected once (gc.unfreeze, gc.collect).
FREEZE_FROM = 10_000  # nodes and pods together
UNFREEZE_S = 600.0
_frozen_since: float | None = None


def settle(objects: int, now: float) -> None:
    """After a refresh built a snapshot of `objects` nodes and pods (`now`: a monotonic clock)."""
    global _frozen_since
    if objects < FREEZE_FROM:
        if _frozen_since is not None:  # the fleet shrank (another context): back to the usual collector
            gc.unfreeze()
            _frozen_since = None
        return
    if _frozen_since is not None and now - _frozen_since >= UNFREEZE_S:
        gc.unfreeze()
        gc.collect()  # the one full pass in UNFREEZE_S, where without the freeze there were several a minute
        _frozen_since = None
    if _frozen_since is None:
        _frozen_since = now
    gc.freeze()

"""Which GPU fault series a metrics store holds (`gputui check`'s metrics.fault_fields): one instant query
counting, per node, the series of each name the faults read (exporter_counters.SERIES). A name without a series is not
collected; a failed query leaves the whole answer unknown with its reason, never "all collected".

Read at most once a minute per store: the :check screen re-runs its checks at every refresh, and the query
touches one series per GPU and field of the fleet."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gputui.backends.base import BackendError
from gputui.backends.prom import PromSource
from gputui.vocabulary.exporter_counters import SERIES

# Per series name and node (either spelling of dcgm-exporter's host label: the other is empty).
QUERY = f'count by (__name__, Hostname, hostname) ({{__name__=~"{"|".join(SERIES)}"}})'
KEPT_S = 60.0

_lock = threading.Lock()
_kept: dict[int, tuple[PromSource, float, dict[str, int] | None, str]] = {}


def read_fault_fields(prom: PromSource, clock: Callable[[], float] = time.monotonic) -> tuple[dict[str, int] | None, str]:
    """(series name -> how many nodes serve it, "") or (None, why)."""
    now = clock()
    with _lock:
        kept = _kept.get(id(prom))
        if kept is not None and kept[0] is prom and now - kept[1] < KEPT_S:
            return kept[2], kept[3]
    found: dict[str, int] | None = None
    why = ""
    try:
        hosts: dict[str, set[str]] = {}
        for row in prom.query(QUERY):
            labels = row.get("metric") or {}
            if labels.get("__name__"):
                hosts.setdefault(str(labels["__name__"]), set()).add(str(labels.get("Hostname") or labels.get("hostname") or ""))
        found = {name: len(on) for name, on in hosts.items()}
    except BackendError as exc:
        why = str(exc)
    with _lock:
        _kept[id(prom)] = (prom, now, found, why)  # the source itself kept: its id is never reused meanwhile
    return found, why

"""What moved between two reads of the same things, so work kept from the last read redoes only that: the
join (backends/join_fleet), the fleet's sums (fleet_sums) and the node table's order (present/kept_order).

A watch cache hands its records over as a tuple in its dict's order: a record changed in place keeps its
position, a new one is appended, a deleted one shifts those after it. So the positions where two tuples
hold different objects, found in C (`moved`), are what moved; when deletions shifted the rest, records
are paired by key instead (`aligned`). Maps (session counts, allocations) are compared key by key
(`changed_keys`). Each answers None past a limit: beyond it, doing the whole work again costs about the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from operator import is_not
from typing import Any

# The incremental path runs while at most this share of the records moved (and at least MIN_MOVED may):
# beyond it, redoing everything costs about the same and is the simpler path.
MOVED_SHARE = 8
MIN_MOVED = 64
_MISSING = object()


def same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def moved(old: Sequence[Any], new: Sequence[Any], limit: int) -> list[int] | None:
    """Positions whose object is not the one `old` held there, with those past the shorter's end; None when
    more than `limit` moved."""
    common = min(len(old), len(new))
    tail = max(len(old), len(new)) - common
    if tail > limit:
        return None
    out = list(compress(range(common), map(is_not, old, new)))  # identity, position by position, in C
    if len(out) + tail > limit:
        return None
    out.extend(range(common, common + tail))
    return out


def aligned(old: Sequence[Any], new: Sequence[Any], key: Callable[[Any], Any], limit: int,
            ) -> tuple[list[tuple[int | None, int]], list[int]] | None:
    """What moved from `old` to `new` when records may also have been deleted (each deletion shifts the
    records after it one place, so `moved` would see them all move): (old position or None, new position)
    of each record replaced or appended, and the old positions deleted. The records neither replaced nor
    deleted are the very objects, in the same order. None when more than `limit` moved."""
    positions = moved(old, new, limit)
    if positions is not None:  # no shift, or one near the end: position by position is as good
        return ([(i if i < len(old) else None, i) for i in positions if i < len(new)],
                [i for i in positions if i >= len(new)])
    if len(old) == len(new) and (not new or key(old[-1]) == key(new[-1])):
        # As many records as before and the same last one: most likely nothing shifted and too much simply
        # moved in place (a metrics read rebuilds every node). Pairing by key would only confirm that, in
        # Python, up to the limit; None sends the caller to its whole pass, which is right in any case.
        return None
    changed: list[tuple[int | None, int]] = []
    deleted: list[int] = []
    i, n_old = 0, len(old)
    for j, record in enumerate(new):  # in Python, but only when a cheaper look found too much moved
        if i < n_old and old[i] is record:
            i += 1
            continue
        k = key(record)
        while i < n_old and key(old[i]) != k:  # gone: a survivor or a replacement keeps its key and its order
            deleted.append(i)
            i += 1
        changed.append((i if i < n_old else None, j))  # replaced in place, or appended after every survivor
        i += 1
        if len(changed) + len(deleted) > limit:
            return None
    deleted.extend(range(i, n_old))
    return (changed, deleted) if len(changed) + len(deleted) <= limit else None


def changed_keys(old: Mapping[Any, Any], new: Mapping[Any, Any], limit: int) -> list[Any] | None:
    """Keys whose value differs between the maps, or that only one holds; None when more than `limit`."""
    if old is new:
        return []
    get = old.get
    out = [k for k, v in new.items() if get(k, _MISSING) != v]
    if len(out) > limit:
        return None
    added = sum(1 for k in out if k not in old)
    if len(old) + added != len(new):  # some keys went away
        out.extend(old.keys() - new.keys())
    return out if len(out) <= limit else None


def limit_for(n: int) -> int:
    return max(MIN_MOVED, n // MOVED_SHARE)

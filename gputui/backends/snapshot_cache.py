"""The last snapshot gputui saw of a context, kept on disk so that the next start draws something true at once
(marked CACHED, with its age) while the live read of a large cluster runs.

One file per context under $XDG_CACHE_HOME/gputui/snapshots/, mode 0600, written whole or not at all, and
bounded in size. It keeps what the screens draw: the snapshot's records, less what only a write plans with
(the scheduling facts of the placement preview) — a cached view writes nothing. The snapshot holds no Secret,
no environment value and no token to begin with (the readers keep none); the test plants one in the cluster and
reads the file for it. A file that cannot be read (absent, too large, from another version, hand-edited, of the
wrong shape) is one line saying why, and the start goes on without it.

The codec is generic over the snapshot's frozen dataclasses and their type hints, so a field added to a record
is kept without a change here; a file written before that field existed reads with its default.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import threading
import time
import types
import typing
from collections.abc import Mapping
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any

from gputui.base import paths
from gputui.base.debug_log import log
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_metrics import Figures

FORMAT = 1  # bumped when a record changes shape in a way a default cannot cover
MAX_BYTES = 64 * 1024 * 1024  # a cache larger than this is not written (and not read): say so, draw the live read
EVERY_S = 60.0  # at most one write a minute: at 65,000 nodes a write costs seconds of a background thread
DROPPED = frozenset({"scheduling", "indexes", "nodes_derived"})  # only a write's plan reads them (placement), or
# what is built again anyway (the pod indexes, what was worked out from the nodes)


class CacheError(Exception):
    """The cache cannot be used: the message is the one line diagnostics shows."""


def cache_dir() -> Path:
    return paths.cache_dir() / "snapshots"


def cache_path(context: str) -> Path:
    """One file per context; the name is readable where it can be and unique by its hash (contexts may hold
    slashes, colons, ARNs)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", context)[:60]
    return cache_dir() / f"{readable}-{hashlib.sha256(context.encode()).hexdigest()[:12]}.json"


# ----- encode -------------------------------------------------------------------------------------------

def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            if not f.init or f.name in DROPPED:
                continue
            v = getattr(value, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue  # most fields hold their default: a 65,000-node file is a third of the size without
            if f.default_factory is not dataclasses.MISSING and v == f.default_factory():
                continue
            out[f.name] = _encode(v)
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: _encode(v) for k, v in value.items()}
        return [[_encode(k), _encode(v)] for k, v in value.items()]  # tuple keys: the session counts
    if isinstance(value, (tuple, list, frozenset, set)):
        return [_encode(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; an unknown figure is None in every record anyway
    return value


def encode(snapshot: ClusterSnapshot) -> bytes:
    body = {"format": FORMAT, "saved_at": time.time(), "snapshot": _encode(snapshot)}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def save(snapshot: ClusterSnapshot, path: Path | None = None) -> Path:
    """Write the snapshot's cache, atomically and readable by its owner only. Raises CacheError (too large, or
    the directory cannot be written)."""
    path = path or cache_path(snapshot.context)
    data = encode(snapshot)
    if len(data) > MAX_BYTES:
        raise CacheError(f"not cached: the snapshot is {len(data) / 2**20:.0f} MiB, over the {MAX_BYTES // 2**20} MiB bound")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        raise CacheError(f"not cached: {path.parent}: {exc.strerror or exc}") from None
    return path


# ----- decode -------------------------------------------------------------------------------------------

@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _bad(what: str) -> CacheError:
    return CacheError(f"the cache does not hold a snapshot of this version ({what})")


def _decode(value: Any, hint: Any) -> Any:  # one branch per kind of type the records use
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _decode(value, inner)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, dict):
            raise _bad(f"{hint.__name__} is not an object")
        hints = _hints(hint)
        known = {f.name for f in dataclasses.fields(hint) if f.init and f.name not in DROPPED}
        if not set(value) <= known:
            raise _bad(f"{hint.__name__} has unknown fields {sorted(set(value) - known)[:3]}")
        try:
            return hint(**{k: _decode(v, hints[k]) for k, v in value.items()})
        except TypeError as exc:  # a required field missing
            raise _bad(f"{hint.__name__}: {exc}") from None
    if hint is Figures:
        return Figures(_decode(value, Mapping[str, float]))
    if isinstance(hint, type) and issubclass(hint, Enum):
        try:
            return hint(value)
        except ValueError:
            raise _bad(f"{value!r} is no {hint.__name__}") from None
    if origin is tuple:
        if not isinstance(value, list):
            raise _bad("a list expected")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(v, args[0]) for v in value)
        if len(value) != len(args):
            raise _bad("a pair of the wrong length")
        return tuple(_decode(v, a) for v, a in zip(value, args, strict=True))
    if origin is frozenset:
        if not isinstance(value, list):
            raise _bad("a list expected")
        return frozenset(_decode(v, args[0]) for v in value)
    if origin in (Mapping, dict):
        key, item = args
        if key is str:
            if not isinstance(value, dict):
                raise _bad("an object expected")
            return {str(k): _decode(v, item) for k, v in value.items()}
        if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
            raise _bad("a list of pairs expected")
        return {_decode(k, key): _decode(v, item) for k, v in value}
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _bad(f"{value!r} is not a number")
        return float(value)
    if hint in (int, str, bool):
        if type(value) is not hint:
            raise _bad(f"{value!r} is not a {hint.__name__}")
        return value
    raise _bad(f"no reading for {hint!r}")


def load(path: Path) -> tuple[ClusterSnapshot, float]:
    """The cached snapshot and when it was saved (epoch seconds). Raises CacheError with the reason."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise CacheError("no cached snapshot of this context yet") from None
    except OSError as exc:
        raise CacheError(f"cache {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise CacheError(f"cache {path}: over the {MAX_BYTES // 2**20} MiB bound: not read")
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise CacheError(f"cache {path}: not JSON: not read") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise _bad(f"format {body.get('format') if isinstance(body, dict) else '?'}, not {FORMAT}")
    saved_at = body.get("saved_at")
    if isinstance(saved_at, bool) or not isinstance(saved_at, (int, float)) or not math.isfinite(saved_at):
        raise _bad("no time it was saved")
    try:
        snapshot = _decode(body.get("snapshot"), ClusterSnapshot)
    except RecursionError:
        raise _bad("nested too deep") from None
    return snapshot, float(saved_at)


class Keeper:
    """Keeps a context's cache current from the live snapshots the app is handed: at most one write every
    EVERY_S, on a thread of its own (never the UI's, never the poll's), one at a time. `note` is the last
    failure, one line, for diagnostics."""

    def __init__(self, every_s: float = EVERY_S, clock: typing.Callable[[], float] = time.monotonic,
                 path_of: typing.Callable[[str], Path] = cache_path) -> None:
        self.every_s, self.clock, self.path_of = every_s, clock, path_of
        self.note = ""
        self.saved = 0
        self._last: float | None = None
        self._busy = threading.Lock()

    def offer(self, snapshot: ClusterSnapshot) -> threading.Thread | None:
        """Save the snapshot if a write is due and none runs; returns the writing thread (tests join it)."""
        now = self.clock()
        if snapshot.simulated or (self._last is not None and now - self._last < self.every_s):
            return None
        if not self._busy.acquire(blocking=False):
            return None
        self._last = now
        thread = threading.Thread(target=self._save, args=(snapshot,), name="gputui cache", daemon=True)
        thread.start()
        return thread

    def _save(self, snapshot: ClusterSnapshot) -> None:
        try:
            save(snapshot, self.path_of(snapshot.context))
            self.note, self.saved = "", self.saved + 1
        except CacheError as exc:
            self.note = str(exc)
            log.debug("snapshot cache: %s", exc)
        finally:
            self._busy.release()

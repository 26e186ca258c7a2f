"""Reading the audit log: from its end, bounded, and never trusting a line.

The log is input like any other: another program, another user's gputui or a truncated write may have
put anything in it. Reading never raises. A line is used only when it is a JSON object of the shape gputui
writes (strings where strings belong, `params` an object, a shift's weights integers), at most MAX_LINE
bytes, nested at most MAX_DEPTH deep, with finite numbers only and integers of at most 64 bits; anything
else is skipped and counted. The file is read backwards in blocks until enough entries are found or
`max_bytes` were read: never whole (a 200 MB log costs what its last few hundred kB cost).

An intent and its result (one `id`) are one entry: the result line, which repeats what the intent said. An
intent whose result is not in the log (a write under way, or a gputui that died during it) is shown as
`pending`. Lines written before intents existed (no `phase`) are whole entries.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from gputui.base.paths import shown

MAX_LINE = 64 * 1024  # longer lines are skipped unread: gputui's own are a few hundred bytes
MAX_DEPTH = 32  # a shift's patch is about 8 deep inside its entry
MAX_INT = 2**63  # Kubernetes' integers are int64; a larger one is no weight or count of ours
BLOCK = 64 * 1024
PENDING = "pending (no result recorded)"
PHASES = ("intent", "result", "event")
_STRING_FIELDS = ("time", "identity", "context", "result", "id", "phase")
_SURROGATE = re.compile("[\ud800-\udfff]")  # "\\ud800" in JSON: a str no terminal or encoder takes


@dataclass
class Tail:
    """The last entries of the log, oldest first, and what reading them cost."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0  # lines looked at that could not be used
    bytes_read: int = 0
    complete: bool = True  # False: stopped at max_bytes before the file's start
    error: str = ""  # the file could not be read at all (then entries is empty)


class _Unusable(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _Unusable(f"{name} is no JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999
        raise _Unusable("not a finite number")
    return value


def _check(value: Any) -> None:
    """Depth, number and string rules over a decoded value, without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _Unusable("nested too deep")
        if isinstance(item, dict):
            for k, v in item.items():
                if _SURROGATE.search(k):
                    raise _Unusable("lone surrogate")
                stack.append((v, depth + 1))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            if _SURROGATE.search(item):
                raise _Unusable("lone surrogate")
        elif isinstance(item, int) and not isinstance(item, bool) and not -MAX_INT <= item < MAX_INT:
            raise _Unusable("integer out of range")


def _weights(value: Any) -> bool:
    """A shift's `from`/`to`: version name -> a non-negative integer weight, or null (unknown)."""
    return isinstance(value, dict) and all(
        w is None or (isinstance(w, int) and not isinstance(w, bool) and w >= 0) for w in value.values())


def usable(obj: Any) -> dict[str, Any] | None:
    """The entry when `obj` has the shape gputui writes; else None."""
    if not isinstance(obj, dict):
        return None
    if not isinstance(obj.get("action"), str) or not obj["action"] or not isinstance(obj.get("target"), str):
        return None
    if any(k in obj and not isinstance(obj[k], str) for k in _STRING_FIELDS):
        return None
    phase = obj.get("phase")
    if phase is not None and (phase not in PHASES or (phase != "event" and not obj.get("id"))):
        return None
    if phase in ("result", "event") and "result" not in obj:
        return None
    params = obj.get("params", {})
    if not isinstance(params, dict):
        return None
    action = obj["action"]
    if action == "shift" or action.startswith("rollout-"):
        if any(k in params and not _weights(params[k]) for k in ("from", "to")):
            return None
        if "service" in params and not isinstance(params["service"], str):
            return None
    return obj


def parse_line(raw: bytes) -> dict[str, Any] | None:
    """One line as an entry, or None when it cannot be used. Never raises."""
    if len(raw) > MAX_LINE:
        return None
    try:
        text = raw.decode("utf-8")
        obj = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
        _check(obj)
    except (ValueError, RecursionError, MemoryError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return usable(obj)


def _open(path: Path) -> BinaryIO:
    """The log opened for reading: never through a symlink, never blocking on a FIFO (the tests wrap it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    return os.fdopen(fd, "rb", buffering=0)


def read_error(path: Path, exc: OSError) -> str:
    if os.path.islink(path):
        return f"the audit log {shown(path)} is a symbolic link: not read"
    return f"cannot read the audit log {shown(path)}: {exc.strerror or exc}"


def read_tail(path: Path, limit: int, max_bytes: int,
              until: Callable[[dict[str, Any]], bool] | None = None) -> Tail:
    """The last `limit` entries (an intent and its result one entry), reading at most about `max_bytes`
    from the end; `until`: stop at the newest entry it accepts (`shift --undo` looks for one). A missing
    file is an empty log. Never raises."""
    tail = Tail()
    try:
        f = _open(path)
    except FileNotFoundError:
        return tail
    except OSError as exc:
        tail.error = read_error(path, exc)
        return tail
    newest: list[dict[str, Any]] = []  # newest first
    results: set[str] = set()  # ids whose result was seen (their intent is the same entry)

    def take(raw: bytes) -> bool:
        """Use one complete line; True when enough entries were found."""
        if not raw.strip():
            return False
        entry = parse_line(raw)
        if entry is None:
            tail.skipped += 1
            return False
        phase, ident = entry.get("phase"), entry.get("id", "")
        if phase == "result":
            results.add(ident)
        elif phase == "intent":
            if ident in results:
                return False
            entry = {**entry, "result": PENDING}
        newest.append(entry)
        return len(newest) >= limit or (until is not None and until(entry))

    try:
        with f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                tail.error = f"the audit log {shown(path)} is not a regular file: not read"
                return tail
            pos = info.st_size
            carry = b""  # the newest bytes not yet used: the end of a line whose start is further back
            dropping = False  # inside a line already known to be too long: skip back to its start
            enough = False
            while pos > 0 and not enough:
                if tail.bytes_read >= max_bytes:
                    tail.complete = False
                    break
                size = min(BLOCK, pos)
                pos -= size
                f.seek(pos)
                block = f.read(size) or b""
                tail.bytes_read += len(block)
                if dropping:
                    cut = block.rfind(b"\n")
                    if cut < 0:
                        continue
                    tail.skipped += 1
                    dropping, carry, block = False, b"", block[:cut]
                parts = (block + carry).split(b"\n")
                carry = parts[0]
                for raw in reversed(parts[1:]):
                    if take(raw):
                        enough = True
                        break
                if not enough and len(carry) > MAX_LINE:
                    dropping, carry = True, b""
            if pos == 0 and not enough:  # the file's first line: complete too
                if dropping:
                    tail.skipped += 1
                else:
                    take(carry)
    except OSError as exc:
        tail.error = read_error(path, exc)
    newest.reverse()
    tail.entries = newest
    return tail

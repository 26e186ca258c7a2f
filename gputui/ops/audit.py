"""Every write, appended to a JSONL log: its intent before it is sent, its result after.

`with audit.writing(action, target, params) as entry:` writes the intent and fsyncs it, runs the block (the
cluster write), then writes the result, linked to the intent by one `id`: `ok` (or what the block set on
`entry.result`), `refused: …` (the apiserver or another gputui said no: a conflict, a held lease) or
`error: …`. When the intent cannot be written, AuditError (a BackendError: every front end words it as one
line) is raised before the block runs: nothing is sent to the cluster. A result that cannot be written
after the write is not raised (the write happened; saying it failed would be the lie): its intent stays in
the log as `pending`, and `unrecorded` keeps the reason for the audit screen.

The file is opened with O_NOFOLLOW (a symlink is refused, its target never touched), must be a regular
file owned by this user, and is created 0600. Missing directories are created 0700; gputui's own state
directory is tightened to 0700 (it holds only gputui's files); a directory the operator chose for
`audit_log` is left as it is (a team's shared log directory may be meant to be group-readable).

Events that are not writes (a canary's start and end, a drain pausing, a pod held) are one line each.
Reading is in gputui.ops.audit_read: from the end, bounded, skipping what it cannot use.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.backends.base import BackendError, ConflictError, error_line
from gputui.base.debug_log import log
from gputui.base.paths import shown, state_dir
from gputui.ops.audit_read import MAX_LINE, Tail, read_tail

_LOCK = threading.Lock()
READ_BYTES = 4 * 1024 * 1024  # the screens read at most this much of the log's end per look
UNRECORDED_KEPT = 20


class AuditError(BackendError):
    """The audit log cannot be written: the write it was to record is refused and nothing is sent."""


def default_audit_path() -> Path:
    return state_dir() / "audit.jsonl"


def audit_path(configured: str | None, simulated: bool) -> Path:
    """Where writes are logged: the configured file or the default; the demo cluster's simulated writes
    go to a file of their own beside it, so they never mix with a real cluster's record."""
    path = Path(configured) if configured else default_audit_path()
    return path.with_name(f"{path.stem}-demo{path.suffix}") if simulated else path


def audit_for(configured: str | None, backend: Any) -> AuditLog:
    """The one way every front end (TUI, drain, shift) builds its audit log for a backend."""
    identity = getattr(backend.writer, "identity", "unknown")
    return AuditLog(audit_path(configured, backend.simulated), identity, backend.context)


@dataclass(slots=True)
class Intent:
    """A write announced in the log; its result is written once (`AuditLog.result`)."""

    id: str
    action: str
    target: str
    params: dict[str, Any]
    result: str = "ok"  # what the result says when the block of `writing` returns (the block may change it)
    extra: dict[str, Any] = field(default_factory=dict)  # what the write learnt, added to the result's params
    closed: bool = False


def outcome(exc: BaseException, refused: tuple[type[BaseException], ...] = ()) -> str:
    """A failed write's result: `refused: …` when the cluster or another gputui said no, else `error: …`."""
    if isinstance(exc, (ConflictError, *refused)) or getattr(exc, "status", None) == 409:
        return f"refused: {error_line(exc)}"
    if isinstance(exc, Exception):
        return f"error: {error_line(exc)}"
    return f"interrupted ({type(exc).__name__}): the write may or may not have happened"


def _plain(value: Any) -> Any:
    """`value` as JSON without NaN or infinity (the reader skips lines holding them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class AuditLog:
    def __init__(self, path: Path | None, identity: str, context: str) -> None:
        self.path = path
        self.identity = identity
        self.context = context
        self.unrecorded: list[str] = []  # results and events that could not be written, newest last
        self._read: tuple[tuple[int, int, int, int, int], Tail] | None = None  # the tail as last read

    # -- writing ---------------------------------------------------------------------------------------

    def intent(self, action: str, target: str, params: Mapping[str, Any] | None = None) -> Intent:
        """Announce a write; AuditError (nothing may be sent) when the log cannot take it."""
        entry = Intent(uuid.uuid4().hex[:16], action, target, dict(params or {}))
        self._append(self._line("intent", entry, None))
        return entry

    def result(self, intent: Intent, result: str, extra: Mapping[str, Any] | None = None) -> None:
        """How the announced write went. Once per intent (a second call writes nothing); never raises."""
        if intent.closed:
            return
        intent.closed = True
        params = {**intent.params, **intent.extra, **(extra or {})}
        self._try(self._line("result", Intent(intent.id, intent.action, intent.target, params), result))

    @contextmanager
    def writing(self, action: str, target: str, params: Mapping[str, Any] | None = None, *,
                refused: tuple[type[BaseException], ...] = ()) -> Iterator[Intent]:
        """Intent, the block (the write), result: the one way a write is audited. `refused`: the exceptions
        that mean the write was refused rather than failed (a conflict always is)."""
        entry = self.intent(action, target, params)
        try:
            yield entry
        except BaseException as exc:
            self.result(entry, outcome(exc, refused))
            raise
        self.result(entry, entry.result)

    def record(self, action: str, target: str, result: str, params: Mapping[str, Any] | None = None, *,
               required: bool = False) -> None:
        """An event that is no write (a canary started, a drain paused). `required`: AuditError when it
        cannot be written (said before any write, so that the writes it announces are refused too);
        otherwise it is kept in `unrecorded`."""
        line = self._line("event", Intent("", action, target, dict(params or {})), result)  # no id: no write
        if required:
            self._append(line)
        else:
            self._try(line)

    def _line(self, phase: str, what: Intent, result: str | None) -> bytes:
        """One JSON line: the write `what` announces (an event's has no id) and its result, when it has one."""
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "phase": phase,
            "action": what.action,
            "target": what.target,
            "identity": self.identity,
            "context": self.context,
            "params": _plain(what.params),
        }
        if what.id:
            entry["id"] = what.id
        if result is not None:
            entry["result"] = result
        line = json.dumps(entry, sort_keys=True, ensure_ascii=False, default=str)
        if len(line.encode()) >= MAX_LINE:  # the reader skips such a line: keep what fits, say what was cut
            entry["params"] = {k: v for k, v in entry["params"].items() if len(json.dumps(v, default=str)) < 512}
            entry["params"]["cut"] = f"parameters over {MAX_LINE // 1024} kB left out"
            line = json.dumps(entry, sort_keys=True, ensure_ascii=False, default=str)
        return (line + "\n").encode()

    def _try(self, line: bytes) -> None:
        try:
            self._append(line)
        except AuditError as exc:
            self.unrecorded = [*self.unrecorded, str(exc)][-UNRECORDED_KEPT:]
            log.warning("audit: %s", exc)

    def _append(self, line: bytes) -> None:
        """One line, one write() with O_APPEND (lines of two gputuis never interleave), fsynced."""
        path = self.path
        if path is None:
            return
        with _LOCK:
            try:
                self._make_dir(path.parent)
                fd = self._open(path)
                try:
                    size = os.fstat(fd).st_size
                    if size and os.pread(fd, 1, size - 1) != b"\n":
                        line = b"\n" + line  # a line cut short (a full disk) must not swallow this one
                    if os.write(fd, line) != len(line):
                        raise OSError(errno.ENOSPC, "short write (disk full?)")
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except AuditError:
                raise
            except OSError as exc:
                raise AuditError(f"cannot write the audit log {shown(path)}: {exc.strerror or exc}: "
                                 "the write is refused, nothing was sent") from None

    def _make_dir(self, directory: Path) -> None:
        """Missing directories made 0700; gputui's own state directory tightened to 0700."""
        missing: list[Path] = []
        d = directory
        while not os.path.lexists(d) and d != d.parent:
            missing.append(d)
            d = d.parent
        for d in reversed(missing):
            with suppress(FileExistsError):
                os.mkdir(d, 0o700)
        if directory == state_dir():
            info = os.stat(directory)
            if info.st_uid == os.geteuid() and info.st_mode & 0o077:
                os.chmod(directory, 0o700)

    def _open(self, path: Path) -> int:
        flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        created = False
        try:
            try:
                fd = os.open(path, flags)
            except FileNotFoundError:
                try:
                    fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
                    created = True
                except FileExistsError:  # made meanwhile by another gputui (or a symlink put there)
                    fd = os.open(path, flags)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
                raise AuditError(f"the audit log {shown(path)} is a symbolic link: refused (it must be a regular "
                                 "file); the write is refused, nothing was sent") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise AuditError(f"the audit log {shown(path)} is not a regular file: the write is refused, "
                                 "nothing was sent")
            if info.st_uid != os.geteuid():
                raise AuditError(f"the audit log {shown(path)} belongs to uid {info.st_uid}, not to you: the write "
                                 "is refused, nothing was sent")
            if info.st_mode & 0o077:
                os.fchmod(fd, 0o600)
            if created:  # the new name itself made durable
                dfd = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- reading ---------------------------------------------------------------------------------------

    def tail(self, limit: int = 200, max_bytes: int = READ_BYTES) -> Tail:
        """The last `limit` entries (an intent and its result are one), read from the end, at most about
        `max_bytes`. Screens ask on every refresh: the file is read again only when it changed (its inode,
        size or mtime), so a quiet refresh costs one stat. Never raises."""
        if self.path is None:
            return Tail()
        try:
            info = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return Tail()
        key = (info.st_ino, info.st_size, info.st_mtime_ns, limit, max_bytes)
        if self._read is not None and self._read[0] == key:
            return self._read[1]
        read = read_tail(self.path, limit, max_bytes)
        self._read = (key, read)
        return read

    def find_last(self, wanted: Callable[[dict[str, Any]], bool], limit: int, max_bytes: int) -> Tail:
        """Read back from the end until the newest entry `wanted` accepts (then the last of `entries`), at
        most `limit` entries and about `max_bytes`. Never raises."""
        if self.path is None:
            return Tail()
        return read_tail(self.path, limit, max_bytes, until=wanted)

    def entries(self, limit: int = 200) -> list[dict[str, Any]]:
        """The last `limit` entries, oldest first."""
        return list(self.tail(limit).entries)

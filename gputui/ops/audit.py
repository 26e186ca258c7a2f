"""Every write, appended to a JSONL log before and after it happens."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from gputui.paths import state_dir

_LOCK = threading.Lock()


def default_audit_path() -> Path:
    return state_dir() / "audit.jsonl"


def audit_path(configured: str | None, simulated: bool) -> Path:
    """Where writes are logged: the configured file or the default; the demo cluster's simulated writes
    go to a file of their own beside it, so they never mix with a real cluster's record."""
    path = Path(configured) if configured else default_audit_path()
    return path.with_name(f"{path.stem}-demo{path.suffix}") if simulated else path


def audit_for(configured: str | None, backend: Any) -> "AuditLog":
    """The one way every front end (TUI, drain, shift) builds its audit log for a backend."""
    identity = getattr(backend.writer, "identity", "unknown")
    return AuditLog(audit_path(configured, backend.simulated), identity, backend.context)


class AuditLog:
    def __init__(self, path: Path | None, identity: str, context: str) -> None:
        self.path = path
        self.identity = identity
        self.context = context
        self._read: tuple[tuple[int, int, int], list[dict[str, Any]]] | None = None  # entries() as last read

    def record(
        self, action: str, target: str, result: str, params: Mapping[str, Any] | None = None
    ) -> None:
        if self.path is None:
            return
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "action": action,
            "target": target,
            "identity": self.identity,
            "context": self.context,
            "params": dict(params or {}),
            "result": result,
        }
        line = json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n"
        with _LOCK:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # One write() per line with O_APPEND: lines from two gputuis never interleave.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)

    def entries(self, limit: int = 200) -> list[dict[str, Any]]:
        """The last `limit` entries. Screens ask on every refresh: the file is read again only when it changed
        (its size or mtime), so a quiet refresh costs one stat."""
        if self.path is None:
            return []
        try:
            stat = self.path.stat()
        except OSError:
            return []
        key = (stat.st_size, stat.st_mtime_ns, limit)
        if self._read is not None and self._read[0] == key:
            return list(self._read[1])
        out = []
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines()[-limit:]:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        self._read = (key, out)
        return list(out)

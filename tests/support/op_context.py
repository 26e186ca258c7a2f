"""An operation context for the writes that read nothing (a shift applies a plan already made): its writer and
audit log as the test gives them, and a reader that fails the test if the operation reads the cluster."""

from __future__ import annotations

from typing import Any

from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext


class UnreadReader:
    """A reader the operation must not use: every read fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the operation read the cluster ({name}) where it was to write a plan made before")


def write_context(writer: Any, audit: AuditLog) -> OpContext:
    return OpContext(UnreadReader(), writer, audit)  # type: ignore[arg-type]

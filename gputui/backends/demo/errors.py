"""What the demo's API emulation answers when a request is wrong, with the apiserver's status."""

from __future__ import annotations

from gputui.backends.base import WriteError


class DemoApiError(WriteError):
    """What the apiserver would answer, with its HTTP status (as kube_errors.ApiError has)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status

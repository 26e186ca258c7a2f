"""What the apiserver's answers mean as errors: no answer at all (Unreachable), or a status that is not 2xx
(ApiError, its message one line, 401 and 403 said as such)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gputui.backends.base import BackendError
from gputui.backends.gcpause import gc_paused


class Unreachable(BackendError):
    """No answer from the apiserver at all (refused, timed out, no route, TLS failed): never a refusal."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"cannot reach {host}: {reason}")
        self.host = host
        self.reason = reason

class ApiError(BackendError):
    def __init__(self, status: int, message: str, body: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = dict(body or {})

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", ""))

    @property
    def causes(self) -> list[dict[str, Any]]:
        return list((self.body.get("details") or {}).get("causes") or [])

def decode_answer(status: int, data: bytes, host: str) -> dict[str, Any]:
    """An answer's JSON body when its status is 2xx; otherwise the ApiError it means."""
    try:
        with gc_paused():  # a list page is hundreds of objects (see gcpause)
            body = json.loads(data) if data else {}
    except ValueError:
        body = {}
    if 200 <= status < 300:
        return body
    message = body.get("message") if isinstance(body, dict) else None
    if status == 401:
        raise ApiError(status, f"{host} rejected the credentials (401 Unauthorized)", body)
    if status == 403:
        raise ApiError(status, f"forbidden: {message or 'not allowed'}", body)
    raise ApiError(status, f"{status}: {message or 'request failed'}", body if isinstance(body, dict) else {})

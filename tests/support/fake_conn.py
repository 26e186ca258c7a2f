"""A connection that records each request the live writer sends and answers from a script: the fast tests of
gputui/backends/kube_writer.py (what is sent, and what each apiserver answer means)."""

from __future__ import annotations

from typing import Any

from gputui.backends.kube_errors import ApiError
from gputui.backends.kube_writer import KubeWriter


class Conn:
    """Records each request; answers from a script (a dict, or an exception to raise)."""

    user = "kubeconfig-user"
    host = "https://api:6443"

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.sent: list[dict[str, Any]] = []

    def request(self, method: str, path: str, query=None, body=None, content_type: str = "application/json",
                timeout: float = 30.0) -> dict:
        self.sent.append({"method": method, "path": path, "query": query, "body": body,
                          "content_type": content_type, "timeout": timeout})
        answer = self.answers.pop(0) if self.answers else {}
        if isinstance(answer, BaseException):
            raise answer
        return answer


def api_error(status: int, message: str = "", reason: str = "", causes: list | None = None,
              body_message: str | None = None) -> ApiError:
    body: dict[str, Any] = {"reason": reason} if reason else {}
    if body_message is not None:
        body["message"] = body_message
    if causes is not None:
        body["details"] = {"causes": causes}
    return ApiError(status, message or f"status {status}", body)


def writer(*answers: Any) -> tuple[KubeWriter, Conn]:
    conn = Conn(*answers)
    return KubeWriter(conn, "ops@example"), conn  # type: ignore[arg-type]

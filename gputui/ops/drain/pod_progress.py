"""One pod's part in a drain: its state, its progress, and the two pod writes whose answers the run reads
(the forced delete answered as an eviction would be; an eviction's audit result, closed once)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gputui.backends.base import BackendError, ConflictError, EvictionOutcome, Writer
from gputui.ops.audit import AuditLog, Intent
from gputui.ops.drain.plan import Step


class PodState(str, Enum):
    PENDING = "pending"
    WAITING = "waiting"
    BLOCKED = "blocked"
    TERMINATING = "terminating"
    GONE = "gone"
    HELD = "held"  # left in place (unknown sessions at the deadline)
    REPLACED = "replaced"  # gone before its eviction: another pod stands under its name (not evicted)
    FAILED = "failed"


@dataclass
class PodProgress:
    key: str
    uid: str
    step: Step
    gpus: int
    deadline: float
    state: PodState = PodState.PENDING
    sessions: int | None = None
    message: str = ""
    next_try: float = 0.0
    tries: int = 0  # 429s so far
    # The eviction under way in the audit log: one intent covers the tries while a PDB says 429 (its 5 s
    # retries are one entry), its result says how they ended.
    intent: Intent | None = None
    left_to: str = ""  # what holds its eviction (another responder, or EvictionRequests unknown): said once each

    @property
    def finished(self) -> bool:
        return self.state in (PodState.GONE, PodState.FAILED, PodState.HELD, PodState.REPLACED)


def delete_as_eviction(writer: Writer, namespace: str, name: str, grace: int | None, uid: str) -> tuple[EvictionOutcome, str]:
    """A forced delete, answered as an eviction would be: a refusal (403: the identity may not delete pods;
    422, 409) fails this pod and the drain goes on; expired credentials or an apiserver in trouble (401, 5xx,
    no status: unreachable) raise, so the drain pauses and tries again, as for an eviction."""
    try:
        writer.delete_pod(namespace, name, grace, uid=uid)
    except ConflictError as exc:  # 409 on the UID precondition: another pod stands under the name, untouched
        return EvictionOutcome.REPLACED, str(exc)
    except BackendError as exc:
        status = getattr(exc, "status", None)
        if not isinstance(status, int) or status == 401 or status >= 500:
            raise
        return EvictionOutcome.FAILED, f"delete refused ({status}): {exc}"
    return EvictionOutcome.EVICTED, "deleted (eviction disabled by force)"


def close_intent(prog: PodProgress, audit: AuditLog, result: str, extra: dict | None = None) -> None:
    """The result of the pod's eviction under way, if any: how it ended (a PDB's last refusal said with it)."""
    if prog.intent is None:
        return
    if result.startswith("not evicted") and prog.state is PodState.BLOCKED:
        result = f"refused: {prog.message}; {result}"
    elif result == "error":
        result = f"error: {(extra or {}).get('reason', '')}"
    audit.result(prog.intent, result, {"tries": prog.tries, **(extra or {})})
    prog.intent = None

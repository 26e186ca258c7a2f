"""A drain run's small rules, fast: a forced delete answered as an eviction would be (a refusal fails the pod and
the drain goes on; expired credentials, a server in trouble or no answer pause the drain), the audit result of
an eviction under way (a PDB's last refusal said with it, an error with its reason, once), and which pod states
end a pod's part in the drain. The mutants named in each docstring are one-line bugs of gputui/ops/drain/run.py
these tests kill."""

from __future__ import annotations

import pytest

from gputui.backends.base import BackendError, ConflictError, EvictionOutcome
from gputui.ops.audit import AuditLog
from gputui.ops.drain.plan import Step
from gputui.ops.drain.pod_progress import PodProgress, PodState
from gputui.ops.drain.pod_progress import close_intent as _close
from gputui.ops.drain.pod_progress import delete_as_eviction as _delete
from tests.support.audit_lines import written


class StatusError(BackendError):
    def __init__(self, status: int | str | None) -> None:
        super().__init__(f"answered {status}")
        self.status = status


class Deleter:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.fail = fail
        self.calls: list[tuple] = []

    def delete_pod(self, namespace: str, name: str, grace: int | None, uid: str | None = None) -> None:
        self.calls.append((namespace, name, grace, uid))
        if self.fail is not None:
            raise self.fail


def test_a_forced_delete_names_the_pod_its_grace_and_its_uid():
    """Kills: the grace or the UID precondition dropped or swapped (a delete of a pod replaced under its name,
    or with a grace the operator did not choose), the outcome or its words changed."""
    writer = Deleter()
    assert _delete(writer, "ns", "p", 7, "uid-1") == (EvictionOutcome.EVICTED, "deleted (eviction disabled by force)")
    assert writer.calls == [("ns", "p", 7, "uid-1")]
    _delete(writer, "ns", "p", None, "uid-1")
    assert writer.calls[-1] == ("ns", "p", None, "uid-1")


def test_a_delete_on_a_replaced_uid_is_a_replacement_not_a_failure():
    """Kills: the `except ConflictError` branch's outcome changed (REPLACED) or its reason dropped."""
    assert _delete(Deleter(ConflictError("uid mismatch")), "ns", "p", None, "u") == (EvictionOutcome.REPLACED,
                                                                                     "uid mismatch")


@pytest.mark.parametrize("status", [403, 404, 409, 422, 499])
def test_a_refused_delete_fails_the_pod_and_the_drain_goes_on(status):
    """Kills: `status == 401` → `!= 401`, `status >= 500` → `> 500`/`< 500`, `not isinstance(status, int)` →
    `isinstance`, the failure's words or status dropped."""
    outcome, reason = _delete(Deleter(StatusError(status)), "ns", "p", None, "u")
    assert (outcome, reason) == (EvictionOutcome.FAILED, f"delete refused ({status}): answered {status}")


@pytest.mark.parametrize("status", [401, 500, 503, None, "500"])
def test_a_delete_the_server_could_not_answer_pauses_the_drain(status):
    """401 (expired credentials), 5xx, no status (unreachable): raised, so the drain pauses and tries again;
    never a failed pod. Kills: `status == 401` → `== 402`, `>= 500` → `> 500` (500 a refusal), the raise
    dropped."""
    with pytest.raises(BackendError):
        _delete(Deleter(StatusError(status)), "ns", "p", None, "u")


def test_a_delete_failing_without_a_status_pauses_too():
    with pytest.raises(BackendError):
        _delete(Deleter(BackendError("connection refused")), "ns", "p", None, "u")


def progress(state: PodState = PodState.PENDING, message: str = "", tries: int = 0) -> PodProgress:
    return PodProgress("ns/p", "uid-1", Step.EVICT, 1, 100.0, state=state, message=message, tries=tries)


@pytest.mark.parametrize("state, finished", [
    (PodState.PENDING, False), (PodState.WAITING, False), (PodState.BLOCKED, False), (PodState.TERMINATING, False),
    (PodState.GONE, True), (PodState.FAILED, True), (PodState.HELD, True), (PodState.REPLACED, True)])
def test_which_states_end_a_pods_part_in_the_drain(state, finished):
    """A terminating pod is not finished (only the API says gone). Kills each state added to or dropped from
    `finished`."""
    assert progress(state).finished is finished


def _results(log) -> list[tuple[str, str, dict]]:
    return [(e["action"], e["result"], e["params"]) for e in written(log)]


def test_a_pods_eviction_result_is_written_once_with_its_tries(tmp_path):
    """Kills: `if prog.intent is None: return` → `is not None`, `prog.intent = None` dropped (a second
    result), the tries or the extra params dropped."""
    log = tmp_path / "a.jsonl"
    audit = AuditLog(log, "t", "demo")
    prog = progress(tries=2)
    _close(prog, audit, "not evicted: nothing")  # nothing under way: nothing written
    assert written(log) == []
    prog.intent = audit.intent("evict", "pod/ns/p", {"node": "n1"})
    _close(prog, audit, "evicted", {"reason": "ok"})
    assert prog.intent is None
    _close(prog, audit, "evicted")
    assert _results(log) == [("evict", "evicted", {"node": "n1", "tries": 2, "reason": "ok"})]


def test_a_blocked_pod_left_says_its_budgets_last_refusal(tmp_path):
    """Kills: `result.startswith("not evicted") and state is BLOCKED` → `or` / `is not`, the words."""
    log = tmp_path / "a.jsonl"
    audit = AuditLog(log, "t", "demo")
    blocked = progress(PodState.BLOCKED, "Cannot evict pod: PDB llama allows 0")
    blocked.intent = audit.intent("evict", "pod/ns/p")
    _close(blocked, audit, "not evicted: the drain was aborted")
    waiting = progress(PodState.WAITING, "10 live sessions")
    waiting.intent = audit.intent("evict", "pod/ns/p")
    _close(waiting, audit, "not evicted: the drain was aborted")
    evicted = progress(PodState.BLOCKED, "earlier refusal")
    evicted.intent = audit.intent("evict", "pod/ns/p")
    _close(evicted, audit, "evicted")
    assert [r for _, r, _ in _results(log)] == [
        "refused: Cannot evict pod: PDB llama allows 0; not evicted: the drain was aborted",
        "not evicted: the drain was aborted",
        "evicted"]


def test_an_errored_eviction_says_its_reason(tmp_path):
    """Kills: `result == "error"` → `!=`, the reason's key or default changed."""
    log = tmp_path / "a.jsonl"
    audit = AuditLog(log, "t", "demo")
    prog = progress()
    prog.intent = audit.intent("evict", "pod/ns/p")
    _close(prog, audit, "error", {"reason": "500 internal"})
    other = progress()
    other.intent = audit.intent("evict", "pod/ns/p")
    _close(other, audit, "error")
    assert [r for _, r, _ in _results(log)] == ["error: 500 internal", "error: "]

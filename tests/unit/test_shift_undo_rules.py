"""Undo of a shift, fast: which audit entry it goes back to, what it says when there is none (and why), and the
plan it makes: the weights before that shift, a note naming it, a blocker when the route moved since."""

from __future__ import annotations

import json

import pytest

from gputui.backends.base import error_line
from gputui.backends.demo import demo_backend
from gputui.base.paths import shown
from gputui.ops import audit as audit_mod
from gputui.ops.audit import AuditLog
from gputui.ops.traffic import undo
from gputui.ops.traffic.undo import last_shift, plan_undo
from gputui.ops.traffic.vocabulary import ShiftError
from tests.demo_clock import ManualClock

LLAMA = "llm/llama-3-70b-instruct"  # the demo's: v1 90, v2 10


def shift(audit: AuditLog, service: str, before: dict, after: dict, fail: bool = False) -> None:
    try:
        with audit.writing("shift", f"httproute/{service}", {"service": service, "from": before, "to": after}):
            if fail:
                raise audit_mod.BackendError("422: refused")
    except audit_mod.BackendError:
        pass


def test_the_last_shift_that_went_through_of_that_service(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl", "alice", "prod")
    shift(log, LLAMA, {"v1": 100, "v2": 0}, {"v1": 90, "v2": 10})
    shift(log, LLAMA, {"v1": 90, "v2": 10}, {"v1": 50, "v2": 50}, fail=True)
    shift(log, "llm/other", {"a": 1}, {"a": 2})
    log.record("canary-start", f"service/{LLAMA}", "ok", {"service": LLAMA})
    entry = last_shift(log, LLAMA)
    assert entry["params"]["to"] == {"v1": 90, "v2": 10} and entry["result"] == "ok"


def test_no_shift_to_undo_names_the_log(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl", "alice", "prod")
    shift(log, "llm/other", {"a": 1}, {"a": 2})
    with pytest.raises(ShiftError) as err:
        last_shift(log, LLAMA)
    assert str(err.value) == f"no shift of {LLAMA} to undo: looked in {shown(tmp_path / 'a.jsonl')}"
    with pytest.raises(ShiftError, match=f"^no shift of {LLAMA} to undo: looked in the audit log$"):
        last_shift(AuditLog(None, "alice", "prod"), LLAMA)


def test_unreadable_lines_skipped_are_counted(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text("not json\n{\n")
    with pytest.raises(ShiftError, match=r"to undo; 2 unreadable lines skipped: looked in "):
        last_shift(AuditLog(path, "alice", "prod"), LLAMA)


def test_a_long_log_path_never_cuts_what_was_found_from_the_one_line(tmp_path):
    """The CLI shows an error cut to one line of 160 characters (error_line). Before, the path came first and the
    count of unreadable lines last: under a deep directory (pytest-xdist's, or a home's state dir) it was cut off."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    (deep / "audit.jsonl").write_text("not json\n{\n")
    with pytest.raises(ShiftError) as err:
        last_shift(AuditLog(deep / "audit.jsonl", "alice", "prod"), LLAMA)
    assert error_line(err.value).startswith(f"no shift of {LLAMA} to undo; 2 unreadable lines skipped: looked in ")


def test_a_log_read_only_in_part_says_so(tmp_path, monkeypatch):
    log = AuditLog(tmp_path / "a.jsonl", "alice", "prod")
    for i in range(5):
        shift(log, "llm/other", {"a": i}, {"a": i + 1})
    monkeypatch.setattr(undo, "AUDIT_LINES_READ", 3)
    with pytest.raises(ShiftError, match=f"^no shift of {LLAMA} to undo: looked in .* \\(its last entries read\\)$"):
        last_shift(log, LLAMA)


def test_a_log_that_cannot_be_read_leaves_nothing_to_undo(tmp_path):
    (tmp_path / "a.jsonl").mkdir()
    with pytest.raises(ShiftError, match=r"^nothing to undo: "):
        last_shift(AuditLog(tmp_path / "a.jsonl", "alice", "prod"), LLAMA)


def test_undo_plans_the_weights_before_and_names_the_shift(tmp_path):
    backend = demo_backend(clock=ManualClock())
    log = AuditLog(tmp_path / "a.jsonl", "alice\x1b[31m", "demo")
    shift(log, LLAMA, {"v1": 75, "v2": 25}, {"v1": 90, "v2": 10})
    plan = plan_undo(backend.reader.snapshot(), LLAMA, log)
    assert {v.name: v.target_pct for v in plan.versions} == pytest.approx({"v1": 75.0, "v2": 25.0})
    when = json.loads((tmp_path / "a.jsonl").read_text().splitlines()[-1])["time"]
    # The log is outside input: its identity reaches the screen as text, its control characters made visible.
    assert plan.notes[-1] == f"undoes the shift of {when} by alice␛[31m: back to v1 75%, v2 25%"
    assert not any("moved since that shift" in b for b in plan.blockers)


def test_undo_when_the_route_moved_since_is_blocked_saying_so(tmp_path):
    backend = demo_backend(clock=ManualClock())
    log = AuditLog(tmp_path / "a.jsonl", "alice", "demo")
    shift(log, LLAMA, {"v1": 75, "v2": 25}, {"v1": 95, "v2": 5})  # the route holds 90/10 now
    plan = plan_undo(backend.reader.snapshot(), LLAMA, log)
    assert plan.blockers[-1] == (f"httproute/{LLAMA} moved since that shift (now v1 90%, v2 10%): undoing it would "
                                 "also revert that change")


def test_undo_when_the_versions_changed_has_nothing_to_go_back_to(tmp_path):
    backend = demo_backend(clock=ManualClock())
    log = AuditLog(tmp_path / "a.jsonl", "alice", "demo")
    shift(log, LLAMA, {"v0": 50, "v1": 50}, {"v0": 0, "v1": 100})
    with pytest.raises(ShiftError) as err:
        plan_undo(backend.reader.snapshot(), LLAMA, log)
    assert str(err.value).startswith(f"{LLAMA}'s versions changed since the shift of ")
    assert str(err.value).endswith("(v0, v1 then, v1, v2 now): nothing to undo to")


def test_of_two_shifts_that_went_through_the_newest_is_undone(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl", "alice", "prod")
    shift(log, LLAMA, {"v1": 100, "v2": 0}, {"v1": 90, "v2": 10})
    shift(log, LLAMA, {"v1": 90, "v2": 10}, {"v1": 80, "v2": 20})
    assert last_shift(log, LLAMA)["params"]["from"] == {"v1": 90, "v2": 10}


def hostile_entry(path, time: str, identity: str, before: dict, after: dict) -> None:
    """A log line as another tool (or a hand) may have left it: fields far longer than any gputui writes."""
    path.write_text(json.dumps({"phase": "event", "action": "shift", "result": "ok", "target": f"httproute/{LLAMA}",
                                "time": time, "identity": identity,
                                "params": {"service": LLAMA, "from": before, "to": after}}) + "\n")


def test_what_the_log_says_is_cut_to_a_line_in_the_undo_note(tmp_path):
    backend = demo_backend(clock=ManualClock())
    hostile_entry(tmp_path / "a.jsonl", "T" * 50, "I" * 230, {"v1": 75, "v2": 25}, {"v1": 90, "v2": 10})
    plan = plan_undo(backend.reader.snapshot(), LLAMA, AuditLog(tmp_path / "a.jsonl", "t", "demo"))
    assert plan.notes[-1] == (f"undoes the shift of {'T' * 40}…(+10 chars) by {'I' * 200}…(+30 chars): "
                              "back to v1 75%, v2 25%")


def test_versions_that_changed_are_named_as_the_log_has_them_cut_to_a_line(tmp_path):
    backend = demo_backend(clock=ManualClock())
    before = {f"{'x' * 120}-{i}": 50 for i in range(2)}
    hostile_entry(tmp_path / "a.jsonl", "2026-01-02T03:04:05Z" + "Z" * 30, "alice", before, {})
    with pytest.raises(ShiftError) as err:
        plan_undo(backend.reader.snapshot(), LLAMA, AuditLog(tmp_path / "a.jsonl", "t", "demo"))
    names = ", ".join(sorted(before))
    assert str(err.value) == (f"{LLAMA}'s versions changed since the shift of 2026-01-02T03:04:05Z{'Z' * 20}…(+10 "
                              f"chars) ({names[:200]}…(+{len(names) - 200} chars) then, v1, v2 now): nothing to undo to")


def test_undo_plans_on_the_route_and_api_versions_it_is_given(tmp_path):
    backend = demo_backend(clock=ManualClock())
    log = AuditLog(tmp_path / "a.jsonl", "alice", "demo")
    shift(log, LLAMA, {"v1": 75, "v2": 25}, {"v1": 90, "v2": 10})
    route = backend.writer.get_object("gateway.networking.k8s.io", "v1", "httproutes", "llm", "llama-3-70b-instruct")
    plan = plan_undo(backend.reader.snapshot(), LLAMA, log, route=route,
                     api_versions={"HTTPRoute": "v1beta1"})
    assert plan.route_read and plan.patch is not None  # the exact patch, built on the route as read
    assert plan.api_version == "v1beta1"
    assert plan_undo(backend.reader.snapshot(), LLAMA, log).patch is None  # no route: planned on the snapshot

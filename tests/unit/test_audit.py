"""The audit log: an intent written and fsynced before every write, its result after; a log that cannot be
written refuses the write before anything is sent; no symlink is followed; the file 0600 in a 0700
directory; and reading the log (the `L` screen, `shift --undo`) takes any bytes, from the end, bounded."""

from __future__ import annotations

import argparse
import json
import os
import stat
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.backends.base import Backend, BackendError, ConflictError
from gputui.backends.demo import DemoCluster, demo_backend
from gputui.cli import shift as headless_shift
from gputui.cli.arguments import add_shift_parser
from gputui.ops import audit_read
from gputui.ops.audit import AuditError, AuditLog
from gputui.ops.canary import CanaryOptions, Gates, plan_canary, run_canary
from gputui.ops.context import OpContext
from gputui.ops.cordon import plan_cordon, run_cordon
from gputui.ops.drain import lease
from gputui.ops.drain.events import DrainControl, EventKind
from gputui.ops.drain.plan import DrainOptions, plan_drain
from gputui.ops.drain.run import run_drain
from gputui.ops.drill import plan_drill, run_drill
from gputui.ops.scale_down import plan_scale_down, run_scale_down
from gputui.ops.steps import Ended, run_steps, step
from gputui.ops.traffic import apply_shift, plan_shift
from gputui.ops.traffic.undo import last_shift
from gputui.ops.traffic.vocabulary import ShiftError
from gputui.settings import Settings
from tests.demo_clock import ManualClock
from tests.support.audit_lines import raw_lines, written

LLAMA = "llm/llama-3-70b-instruct"
WRITES = {"set_unschedulable", "annotate_node", "evict_pod", "delete_pod", "patch_object"}


class Recording:
    """A writer that notes every call (writes and the lease's read) before passing it on."""

    def __init__(self, inner, on_write=None) -> None:
        self._inner = inner
        self.calls: list[str] = []
        self._on_write = on_write

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr) or name not in WRITES | {"node_annotations"}:
            return attr

        def call(*args, **kw):
            self.calls.append(name)
            if self._on_write is not None and name in WRITES:
                self._on_write(name)
            return attr(*args, **kw)

        return call

    @property
    def writes(self) -> list[str]:
        return [c for c in self.calls if c in WRITES]


def demo(clock=None) -> DemoCluster:
    return DemoCluster(seed=7, clock=clock or ManualClock())


def a_node(cluster) -> str:
    snap = cluster.snapshot()
    return next(n.name for n in snap.nodes if n.ready and not n.unschedulable and snap.pods_on(n.name))


def unwritable(tmp_path, name: str = "audit.jsonl") -> AuditLog:
    (tmp_path / name).mkdir()  # a directory where the file should be: unwritable even for root
    return AuditLog(tmp_path / name, "tester", "demo")


# -- intent before the write; refused when the log cannot take it ------------------------------------------


def test_an_unwritable_audit_log_refuses_every_write_before_anything_is_sent(tmp_path):
    clock = ManualClock()
    cluster = demo(clock)
    writer = Recording(cluster)
    audit = unwritable(tmp_path)
    node = a_node(cluster)
    snap = cluster.snapshot()
    refusals = []

    def refused(call):
        with pytest.raises(AuditError) as err:
            call()
        refusals.append(str(err.value))

    refused(lambda: run_cordon(plan_cordon(snap, node), OpContext(cluster, writer, audit)))
    shift = plan_shift(snap, LLAMA, {"v2": 20}, route=cluster.get_object(
        "gateway.networking.k8s.io", "v1", "httproutes", "llm", "llama-3-70b-instruct"))
    refused(lambda: apply_shift(shift, OpContext(cluster, writer, audit), force=True))
    scale = plan_scale_down(snap, LLAMA, "v1", 6)
    refused(lambda: run_scale_down(scale, OpContext(cluster, writer, audit), force=True, confirm_sessions=scale.cut))
    drill = plan_drill(snap, next(p.node for p in snap.pods if p.service == "mistral-7b" and p.ready))
    refused(lambda: run_steps(run_drill(drill, OpContext(cluster, writer, audit, clock=clock, sleep=clock.advance)),
                              lambda _: None))
    canary = plan_canary(snap, LLAMA, "v2", (11.0,))
    refused(lambda: run_steps(run_canary(canary,
                                         OpContext(cluster, writer, audit, clock=clock, sleep=clock.advance,
                                                   poll_s=5.0, signals=cluster),
                                         CanaryOptions(Gates())),
                              lambda _: None))
    assert writer.calls == []  # not one request: not even the lease's read
    for line in refusals:
        assert "\n" not in line and line.startswith("cannot write the audit log ")
        assert "the write is refused, nothing was sent" in line
    assert not cluster.snapshot().node(node).unschedulable


def test_a_drain_whose_log_cannot_be_written_does_not_start(tmp_path):
    clock = ManualClock()
    cluster = demo(clock)
    writer = Recording(cluster)
    node = a_node(cluster)
    gen = run_drain(plan_drain(cluster.snapshot(), node),
                    OpContext(cluster, writer, unwritable(tmp_path), clock=clock, sleep=clock.advance))
    events = list(gen)
    assert [e.kind for e in events] == [EventKind.FAILED] and "cannot write the audit log" in events[0].message
    assert writer.calls == [] and lease.LEASE not in cluster.snapshot().node(node).annotations


def test_a_full_disk_refuses_the_write_and_the_cli_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    backend = demo_backend(clock=ManualClock())
    writer = Recording(backend.writer)
    recorded = Backend(backend.reader, writer, "demo", True)
    args = ["shift", LLAMA, "--to", "v2=5"]
    real_write = os.write

    def full(fd, data):
        if b'"phase"' in data:
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    code = headless_shift.run(Settings(demo=True, audit_log=str(tmp_path / "audit.jsonl")), _parse(args),
                              lambda s: recorded)
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("gputui: error: cannot write the audit log ") and "No space left on device" in err
    assert writer.writes == []
    assert {v.name: v.weight for v in backend.reader.snapshot().service(LLAMA).versions} == {"v1": 90, "v2": 10}


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_shift_parser(parser.add_subparsers(dest="command"), lambda p: None)
    return parser.parse_args(argv)


def test_the_intent_is_on_disk_before_the_write_and_its_result_follows_it(tmp_path, monkeypatch):
    cluster = demo()
    path = tmp_path / "audit.jsonl"
    path.touch(0o600)  # made already: the one fsync is the line's (a new file's directory is fsynced too)
    order: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (order.append("fsync"), real_fsync(fd))[1])

    def at_write(name):
        lines = raw_lines(path)
        order.append(f"{name} after {lines[-1]['phase']}")

    writer = Recording(cluster, at_write)
    node = a_node(cluster)
    audit = AuditLog(path, "tester", "demo")
    assert run_cordon(plan_cordon(cluster.snapshot(), node), OpContext(cluster, writer,
                                                                       audit)) == f"node/{node} cordoned"
    assert order[:2] == ["fsync", "set_unschedulable after intent"]
    intent, result = raw_lines(path)
    assert (intent["phase"], result["phase"]) == ("intent", "result") and intent["id"] == result["id"]
    assert "result" not in intent and result["result"] == "ok"
    assert (intent["action"], intent["target"]) == (result["action"], result["target"]) == ("cordon", f"node/{node}")
    assert [e["result"] for e in audit.entries()] == ["ok"]  # one entry per write on the screen


def test_failed_and_refused_writes_are_recorded_once_each(tmp_path):
    audit = AuditLog(tmp_path / "audit.jsonl", "tester", "demo")
    for exc, word in ((BackendError("apiserver said 500"), "error: apiserver said 500"),
                      (ConflictError("changed since read"), "refused: changed since read"),
                      (ValueError("a bug"), "error: ValueError: a bug")):
        with pytest.raises(type(exc)), audit.writing("cordon", "node/a"):
            raise exc
        assert written(tmp_path / "audit.jsonl")[-1]["result"] == word
    entry = audit.intent("evict", "pod/x/y")
    audit.result(entry, "evicted")
    audit.result(entry, "evicted")  # a second result for one intent writes nothing
    assert len(raw_lines(tmp_path / "audit.jsonl")) == 8
    assert [e["result"] for e in audit.entries()][-1] == "evicted"


def test_a_drain_refused_at_its_lease_is_recorded(tmp_path):
    clock = ManualClock()
    cluster = demo(clock)
    node = a_node(cluster)
    cluster.annotate_node(node, {lease.LEASE: json.dumps({"who": "alice", "host": "another-host", "pid": 4242,
                                                          "token": "her-token", "renewed": clock()})})
    writer = Recording(cluster)
    path = tmp_path / "audit.jsonl"
    events = list(run_drain(plan_drain(cluster.snapshot(), node),
                            OpContext(cluster, writer, AuditLog(path, "bob", "demo"), clock=clock,
                                      sleep=clock.advance)))
    assert [e.kind for e in events] == [EventKind.FAILED] and "being drained by alice" in events[0].message
    assert writer.writes == [] and not cluster.snapshot().node(node).unschedulable
    (entry,) = written(path)
    assert entry["action"] == "lease" and entry["target"] == f"node/{node}"
    assert entry["result"].startswith(f"refused: node {node} is being drained by alice")


def test_every_drain_write_has_its_intent_and_a_pdb_retry_is_not_a_new_entry(tmp_path):
    clock = ManualClock()
    cluster = demo(clock)
    snap = cluster.snapshot()
    # Several llama pods on one node, a PDB of maxUnavailable 1: the second eviction is refused (429) a while.
    node = next(n.name for n in snap.nodes if sum(p.service == "llama-3-70b-instruct" for p in snap.pods_on(n.name)) >= 2)
    path = tmp_path / "audit.jsonl"
    # No rotation (selectors unread): every pod quiet at once, the evictions race for the PDB.
    gen = run_drain(plan_drain(replace(snap, selectors=None), node, DrainOptions(session_threshold=10**6)),
                    OpContext(cluster, cluster, AuditLog(path, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0))
    blocked = 0
    for _ in range(5000):
        event = step(gen)
        if isinstance(event, Ended):
            break
        blocked += event.kind is EventKind.BLOCKED
    assert blocked
    entries = written(path)  # asserts each result follows its own intent, once
    actions = [e["action"] for e in entries]
    assert actions[:4] == ["lease", "cordon", "annotate", "annotate"] and actions[-1] == "lease-release"
    evictions = [e for e in entries if e["action"] == "evict"]
    assert evictions and len({e["target"] for e in evictions}) == len(evictions)  # one entry per pod
    assert all(e["result"] in ("evicted", "gone") for e in evictions)
    assert max(e["params"]["tries"] for e in evictions) > 1  # the 429s before it are in its one entry


@pytest.mark.parametrize("how", ["aborted", "interrupted"])
def test_a_drain_that_ends_while_a_pdb_refuses_an_eviction_closes_its_intent(tmp_path, how):
    clock = ManualClock()
    cluster = demo(clock)
    snap = cluster.snapshot()
    node = next(n.name for n in snap.nodes if sum(p.service == "llama-3-70b-instruct" for p in snap.pods_on(n.name)) >= 2)
    path = tmp_path / "audit.jsonl"
    control = DrainControl()
    # No rotation (selectors unread): every pod quiet at once, the evictions race for the PDB.
    gen = run_drain(plan_drain(replace(snap, selectors=None), node, DrainOptions(session_threshold=10**6)),
                    OpContext(cluster, cluster, AuditLog(path, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0),
                    control)
    for event in gen:
        if event.kind is EventKind.BLOCKED:
            if how == "interrupted":  # quitting the TUI closes the drain's generator
                gen.close()
                break
            control.abort()
    entries = written(path)
    refused = [e for e in entries if e["action"] == "evict" and e["result"].startswith("refused: ")]
    assert len(refused) == 1 and "llama-3-70b-instruct-pdb" in refused[0]["result"]
    assert refused[0]["result"].endswith(f"not evicted: the drain was {how}")
    if how == "aborted":
        assert [e["action"] for e in entries][-2:] == ["annotate", "lease-release"]
    assert not [e for e in AuditLog(path, "t", "demo").entries() if e["result"] == audit_read.PENDING]


# -- the file itself -----------------------------------------------------------------------------------


def test_a_symlinked_audit_log_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "audit.jsonl"
    link.symlink_to(victim)
    cluster = demo()
    writer = Recording(cluster)
    node = a_node(cluster)
    with pytest.raises(AuditError) as err:
        run_cordon(plan_cordon(cluster.snapshot(), node), OpContext(cluster, writer, AuditLog(link, "t", "demo")))
    assert str(err.value).startswith(f"the audit log {link} is a symbolic link: refused")
    assert "\n" not in str(err.value)
    assert victim.read_text() == "precious\n" and writer.calls == []
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "not-there")
    with pytest.raises(AuditError, match="symbolic link"):
        AuditLog(dangling, "t", "demo").intent("cordon", "node/a")
    assert not (tmp_path / "not-there").exists()
    read = AuditLog(link, "t", "demo").tail()
    assert read.entries == [] and "symbolic link" in read.error


def test_a_new_log_is_0600_in_directories_made_0700(tmp_path):
    path = tmp_path / "made" / "by" / "gputui" / "audit.jsonl"
    AuditLog(path, "t", "demo").record("canary-start", "service/x", "ok")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for d in (path.parent, path.parent.parent, path.parent.parent.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_gputuis_own_state_directory_is_tightened_a_chosen_one_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    own = tmp_path / "state" / "gputui"
    own.mkdir(parents=True, mode=0o755)
    os.chmod(own, 0o755)
    AuditLog(own / "audit.jsonl", "t", "demo").record("x", "y", "ok")
    assert stat.S_IMODE(own.stat().st_mode) == 0o700
    shared = tmp_path / "team-logs"
    shared.mkdir()
    os.chmod(shared, 0o755)
    loose = shared / "audit.jsonl"
    loose.write_text("")
    os.chmod(loose, 0o644)
    AuditLog(loose, "t", "demo").record("x", "y", "ok")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755  # the operator's directory, as they made it
    assert stat.S_IMODE(loose.stat().st_mode) == 0o600  # the log itself is ours: never readable by others


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "audit.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(AuditError, match="not a regular file"):
        AuditLog(fifo, "t", "demo").intent("cordon", "node/a")
    assert "not a regular file" in AuditLog(fifo, "t", "demo").tail().error


def test_a_line_cut_short_does_not_swallow_the_next(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b'{"action": "cordon", "target": "node/a", "result": "ok"}\n{"action": "unco')
    audit = AuditLog(path, "t", "demo")
    audit.record("canary-start", "service/x", "ok")
    read = audit.tail()
    assert [e["action"] for e in read.entries] == ["cordon", "canary-start"] and read.skipped == 1


# -- reading: any bytes, from the end, bounded ---------------------------------------------------------

GOOD = {"time": "2027-01-01T00:00:00Z", "action": "shift", "target": "httproute/llm/llama-3-70b-instruct",
        "identity": "me", "context": "demo", "result": "ok",
        "params": {"service": LLAMA, "from": {"v1": 90, "v2": 10}, "to": {"v1": 80, "v2": 20}}}
HOSTILE = [
    b"42", b"null", b"[]", b'"text"', b"true",
    b'{"params": 3}', b'{"action": "shift", "target": "t", "result": "ok", "params": 3}',
    b'{"action": "shift", "target": "t", "result": "ok", "params": {"service": "llm/llama-3-70b-instruct", "from": "x"}}',
    b'{"action": "shift", "target": "t", "result": "ok", "params": {"service": "llm/llama-3-70b-instruct", "from": {"v1": "x"}}}',
    b'{"action": "shift", "target": "t", "result": "ok", "params": {"service": "llm/llama-3-70b-instruct", "from": {"v1": 1e999}}}',
    b'{"action": "shift", "target": "t", "result": "ok", "params": {"service": 7}}',
    b'{"action": 7, "target": "t", "result": "ok"}', b'{"action": "cordon", "target": ["t"], "result": "ok"}',
    b'{"action": "cordon", "target": "t", "result": "ok", "time": 5}',
    b'{"action": "cordon", "target": "t", "result": "ok", "params": {"x": NaN}}',
    b'{"action": "cordon", "target": "t", "result": "ok", "params": {"x": Infinity}}',
    b"1e999", b"-1e999",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a": ' * 40 + b"1" + b"}" * 40,
    b'{"action": "cordon", "target": "t", "result": "ok", "params": {"n": ' + b"9" * 5000 + b"}}",
    b'{"action": "cordon", "target": "t", "result": "ok", "params": {"n": 99999999999999999999999}}',
    b'{"action": "cordon", "target": "\\ud800", "result": "ok"}',
    b'{"action": "cordon", "target": "t", "result": "ok", "pad": "' + b"x" * (10 * 1024 * 1024) + b'"}',
    b'{"action": "cordon", "target": "\xff\xfe", "result": "ok"}',
    b"\xff\xfe\x00{",
    b'{"phase": "result", "action": "cordon", "target": "t", "result": "ok"}',  # a result with no id
    b'{"phase": "bogus", "action": "cordon", "target": "t", "result": "ok", "id": "1"}',
]


@pytest.mark.parametrize("line", HOSTILE, ids=lambda b: repr(b[:40]))
def test_a_hostile_line_is_skipped_and_counted_never_raised(tmp_path, line):
    path = tmp_path / "audit.jsonl"
    good = json.dumps(GOOD).encode()
    path.write_bytes(good + b"\n" + line + b"\n" + good + b"\n")
    read = AuditLog(path, "t", "demo").tail(max_bytes=32 * 1024 * 1024)
    assert read.error == "" and read.skipped == 1
    assert read.entries == [GOOD, GOOD]


async def test_the_audit_screen_shows_what_it_can_and_says_how_many_lines_it_skipped(tmp_path, monkeypatch):
    from gputui.ui.screens.audit import AuditScreen
    from gputui.ui.widgets.item_list import ItemList
    from tests.ui.pilot import loaded, wait_for

    path = tmp_path / "audit.jsonl"
    hostile = {**GOOD, "identity": "\x1b]0;pwned\x07eve", "target": "[/bold]\x1b[2J"}
    lines = [line for line in HOSTILE if len(line) < 1024 * 1024]  # the 10 MB one: the next test
    path.write_bytes(b"\n".join(lines) + b"\n" + json.dumps(hostile).encode() + b"\n")
    app = tui(tmp_path, monkeypatch, AuditLog(path, "t", "demo"))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("L")
        await wait_for(pilot, lambda: isinstance(app.screen, AuditScreen))
        title = str(app.screen.query_one("#audit-title").render())
        assert "1 entries" in title and f"{len(lines)} unreadable lines skipped" in title
        items = app.screen.query_one(ItemList)
        await wait_for(pilot, lambda: items.selected is not None)
        import io

        from rich.console import Console

        console = Console(width=120, file=io.StringIO(), record=True)
        console.print(items.items[0].content)
        shown = console.export_text()
        assert "\x1b" not in shown and "\x07" not in shown and "[/bold]" in shown and "␛" in shown


def test_shift_undo_goes_past_hostile_lines_to_the_real_entry(tmp_path, capsys):
    backend = demo_backend(clock=ManualClock())
    settings_ = Settings(demo=True, audit_log=str(tmp_path / "audit.jsonl"))
    path = tmp_path / "audit-demo.jsonl"  # the demo's writes beside the configured file
    path.write_bytes(b"\n".join(HOSTILE[:12]) + b"\n")
    assert headless_shift.run(settings_, _parse(["shift", LLAMA, "--to", "v2=5"]), lambda s: backend) == 0
    with path.open("ab") as f:  # newer than the shift: read first from the end
        f.write(b"\n".join(HOSTILE) + b"\n")
    assert headless_shift.run(settings_, _parse(["shift", LLAMA, "--undo"]), lambda s: backend) == 0, \
        capsys.readouterr().err
    assert {v.name: v.weight for v in backend.reader.snapshot().service(LLAMA).versions} == {"v1": 90, "v2": 10}


def test_undo_with_only_hostile_lines_says_nothing_to_undo_in_one_line(tmp_path, capsys):
    backend = demo_backend(clock=ManualClock())
    path = tmp_path / "audit-demo.jsonl"
    path.write_bytes(b"\n".join(HOSTILE) + b"\n")
    code = headless_shift.run(Settings(demo=True, audit_log=str(tmp_path / "audit.jsonl")),
                              _parse(["shift", LLAMA, "--undo"]), lambda s: backend)
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and f"no shift of {LLAMA}" in err and "unreadable lines skipped" in err


class Counting:
    """The log's file object, counting the bytes read through it."""

    total = 0

    def __init__(self, inner) -> None:
        self._inner = inner

    def read(self, n=-1):
        data = self._inner.read(n)
        Counting.total += len(data)
        return data

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._inner.close()


@pytest.fixture
def counted(monkeypatch):
    real = audit_read._open
    Counting.total = 0
    monkeypatch.setattr(audit_read, "_open", lambda path: Counting(real(path)))
    return Counting


def test_a_50_mb_log_is_read_from_its_end_only(tmp_path, counted):
    path = tmp_path / "audit.jsonl"
    old = json.dumps({**GOOD, "params": {**GOOD["params"], "service": "llm/other"}}).encode() + b"\n"
    with path.open("wb") as f:
        f.write(old * (50 * 1024 * 1024 // len(old)))
        f.write(json.dumps(GOOD).encode() + b"\n")
    size = path.stat().st_size
    assert size > 50 * 1024 * 1024
    audit = AuditLog(path, "t", "demo")
    assert len(audit.entries()) == 200  # the `L` screen
    assert 0 < counted.total <= 256 * 1024
    counted.total = 0
    assert last_shift(AuditLog(path, "t", "demo"), LLAMA)["params"]["service"] == LLAMA  # `shift --undo`
    assert counted.total <= 256 * 1024
    counted.total = 0
    with pytest.raises(ShiftError, match="no shift of llm/absent"):
        last_shift(AuditLog(path, "t", "demo"), "llm/absent")  # looked for, not found: still bounded
    assert counted.total <= 17 * 1024 * 1024 < size


def test_a_10_mb_line_at_the_end_is_skipped_without_being_held(tmp_path, counted):
    path = tmp_path / "audit.jsonl"
    with path.open("wb") as f:
        f.write(json.dumps(GOOD).encode() + b"\n")
        f.write(b"x" * (10 * 1024 * 1024) + b"\n")
    read = audit_read.read_tail(path, 200, 32 * 1024 * 1024)
    assert read.entries == [GOOD] and read.skipped == 1
    short = audit_read.read_tail(path, 200, 1024 * 1024)  # the bound holds even inside one line
    assert short.entries == [] and not short.complete and short.bytes_read <= 1024 * 1024 + audit_read.BLOCK


LINES = st.lists(st.one_of(
    st.binary(max_size=64),
    st.sampled_from(HOSTILE[:20]),
    st.just(json.dumps(GOOD).encode()),
    st.builds(lambda i, r: json.dumps({"phase": "intent", "id": str(i), "action": "cordon", "target": "t"}).encode()
              + (b"\n" + json.dumps({"phase": "result", "id": str(i), "action": "cordon", "target": "t",
                                     "result": "ok"}).encode() if r else b""),
              st.integers(0, 5), st.booleans()),
), max_size=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=4096))
def test_any_bytes_never_raise(tmp_path, data):
    path = tmp_path / "any.jsonl"
    path.write_bytes(data)
    read = AuditLog(path, "t", "demo").tail()
    assert read.error == "" and isinstance(read.skipped, int)
    for entry in read.entries:
        json.dumps(entry)  # what the screens do with it
        str(entry.get("result", "")).encode("utf-8")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(LINES, st.integers(1, 97))
def test_reading_backwards_in_any_block_size_reads_what_a_forward_read_would(tmp_path, lines, block):
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\n".join(lines))
    whole = audit_read.read_tail(path, 10**6, 10**9)
    assert whole.complete and whole.bytes_read == path.stat().st_size
    forward = []
    for raw in path.read_bytes().split(b"\n"):
        if raw.strip():
            entry = audit_read.parse_line(raw)
            if entry is not None:
                forward.append(entry)
    # An intent whose result comes later is that result's entry; one with none is shown pending.
    expected = []
    for i, e in enumerate(forward):
        if e.get("phase") == "intent":
            if any(later.get("phase") == "result" and later["id"] == e["id"] for later in forward[i + 1:]):
                continue
            e = {**e, "result": audit_read.PENDING}
        expected.append(e)
    assert whole.entries == expected
    saved = audit_read.BLOCK
    audit_read.BLOCK = block
    try:
        assert audit_read.read_tail(path, 10**6, 10**9).entries == expected
        assert audit_read.read_tail(path, 3, 10**9).entries == expected[-3:]
    finally:
        audit_read.BLOCK = saved


def tui(tmp_path, monkeypatch, audit: AuditLog):
    from gputui.ui.app import GputuiApp

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    clock = ManualClock()
    return GputuiApp(Settings(demo=True, seed=7), demo_backend(seed=7, clock=clock), clock=clock, audit=audit)


async def test_the_tui_refuses_a_cordon_it_cannot_log_with_a_notification(tmp_path, monkeypatch):
    from tests.ui.pilot import loaded, rows, wait_for

    app = tui(tmp_path, monkeypatch, unwritable(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        target = next(n for n in rows(app) if app.snapshot.node(n).state.value == "Ready")
        app.screen.nodes_table.move_to(target)
        await pilot.press("c", "y", "enter")  # reason "y"
        await wait_for(pilot, lambda: any("cannot write the audit log" in str(n.message) for n in app._notifications))
        assert not app.snapshot.node(target).unschedulable

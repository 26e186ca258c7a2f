"""The drain lease's rules, fast: one owner per node, taken and renewed only on the node as it was read.

The writer here keeps a node's annotations and resourceVersion the way the apiserver does for a merge patch
with a resourceVersion precondition (409 when the node moved on; None deletes a key). The real apiserver's
answer is proven in tests/integration; these pin what lease.py decides from it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import asdict

import pytest

from gputui.backends.base import BackendError, ConflictError
from gputui.ops.drain import lease
from gputui.ops.drain.lease import (
    CAS_TRIES,
    LEASE,
    LEASE_S,
    Holder,
    LeaseHeld,
    acquire,
    foreign_holders,
    holder_of,
    release,
    renew,
)
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import Node

HOST = socket.gethostname()


class NodeStore:
    """One node's annotations and resourceVersion, patched as the apiserver patches them."""

    def __init__(self, annotations: dict[str, str] | None = None) -> None:
        self.annotations: dict[str, str] = dict(annotations or {})
        self.version = 1
        self.reads = 0
        self.writes: list[tuple[dict[str, str | None], str | None]] = []
        self.moves_before_write = 0  # a kubelet heartbeat lands between this many reads and their writes

    def node_annotations(self, node: str) -> tuple[dict[str, str], str]:
        self.reads += 1
        return dict(self.annotations), str(self.version)

    def annotate_node(self, node: str, values: dict[str, str | None], resource_version: str | None = None) -> None:
        self.writes.append((dict(values), resource_version))
        if self.moves_before_write > 0:
            self.moves_before_write -= 1
            self.version += 1  # the heartbeat
        if resource_version is not None and resource_version != str(self.version):
            raise ConflictError(f"node {node} changed since it was read")
        for k, v in values.items():
            if v is None:
                self.annotations.pop(k, None)
            else:
                self.annotations[k] = v
        self.version += 1


def lease_text(who: str = "alice", host: str = "elsewhere", pid: int = 4242, token: str = "t-alice",
               renewed: float = 1000.0) -> str:
    return json.dumps({"who": who, "host": host, "pid": pid, "token": token, "renewed": renewed})


def me(token: str = "t-me") -> Holder:
    return Holder("me@example", HOST, os.getpid() + 1_000_000, token)


def gone_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# -- holder_of: reading what is on the node -------------------------------------------------------------------

def test_a_node_without_a_lease_has_no_holder():
    assert holder_of({}) is None
    assert holder_of({LEASE: ""}) is None


def test_a_lease_is_read_field_by_field():
    assert holder_of({LEASE: lease_text(renewed=12.5)}) == Holder("alice", "elsewhere", 4242, "t-alice", 12.5)


@pytest.mark.parametrize("raw", ["{not json", json.dumps({"who": "a"}), json.dumps([1, 2]),
                                 lease_text().replace("4242", '"four"'), "null"])
def test_an_unreadable_lease_is_held_by_someone_unknown_who_stopped_renewing_long_ago(raw):
    """Fail closed: an unreadable lease is never "free"; it is a holder whose lease expired at epoch 0."""
    holder = holder_of({LEASE: raw})
    assert holder == Holder("unknown (unreadable lease)", "?", 0, "?", 0.0)


@pytest.mark.parametrize("renewed", ["NaN", "Infinity", "-Infinity", '"nan"', '"inf"'])
def test_a_lease_renewed_at_no_time_a_clock_reaches_is_unreadable(renewed):
    """A lease renewed at NaN never expired (every comparison with NaN is false) and could not be taken even with
    --take-over; one renewed at +inf was held for ever (lease.py before this test)."""
    raw = lease_text().replace("1000.0", renewed)
    assert holder_of({LEASE: raw}) == Holder("unknown (unreadable lease)", "?", 0, "?", 0.0)
    store = NodeStore({LEASE: raw})
    acquire(store, "n1", me(), take_over=True, clock=lambda: 5000.0)
    assert holder_of(store.annotations).token == "t-me"


def test_an_unreadable_lease_is_taken_only_by_an_explicit_take_over():
    store = NodeStore({LEASE: "{garbage"})
    with pytest.raises(LeaseHeld, match="stopped renewing"):
        acquire(store, "n1", me(), clock=lambda: 5000.0)
    assert store.writes == []
    acquire(store, "n1", me(), take_over=True, clock=lambda: 5000.0)
    assert json.loads(store.annotations[LEASE])["token"] == "t-me"


# -- Holder ---------------------------------------------------------------------------------------------------

def test_me_is_this_process_on_this_host_with_a_fresh_token_each_time():
    a, b = Holder.me("ops@example"), Holder.me("ops@example")
    assert (a.who, a.host, a.pid, a.renewed) == ("ops@example", HOST, os.getpid(), 0.0)
    assert len(a.token) == 12 and int(a.token, 16) >= 0
    assert a.token != b.token


def test_describe_names_the_holder_and_how_long_ago_it_renewed():
    holder = Holder("alice", "h1", 77, "t", renewed=100.0)
    assert holder.describe(142.4) == "alice (host h1, pid 77), renewed 42s ago"


def test_describe_never_says_a_negative_age():
    """A holder whose clock runs ahead of ours renewed "0s ago", not "-5s ago" (kills max(0.0, …) dropped)."""
    assert Holder("a", "h", 1, "t", renewed=105.0).describe(100.0).endswith("renewed 0s ago")


def test_a_holder_on_another_host_is_never_dead_here_even_with_a_pid_that_is_gone_here():
    assert not Holder("a", HOST + "-other", gone_pid(), "t").dead_here()
    assert not Holder("a", HOST + "-other", os.getpid(), "t").dead_here()


def test_a_holder_here_whose_process_ended_is_dead():
    assert Holder("a", HOST, gone_pid(), "t").dead_here()


def test_a_holder_that_is_this_very_process_is_dead_here():
    """One process runs one batch at a time: a lease naming this pid is an earlier, dropped run of ours."""
    assert Holder("a", HOST, os.getpid(), "t").dead_here()


def test_a_holder_here_whose_process_runs_is_alive():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not Holder("a", HOST, child.pid, "t").dead_here()
    finally:
        child.kill()
        child.wait()


def test_a_holder_whose_process_we_may_not_signal_is_alive(monkeypatch):
    """EPERM from kill(pid, 0): the process exists (another user's); never read as dead."""
    def denied(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(lease.os, "kill", denied)
    assert not Holder("a", HOST, os.getpid() + 1_000_000, "t").dead_here()


# -- acquire --------------------------------------------------------------------------------------------------

def test_a_free_node_is_taken_with_the_node_as_read():
    store = NodeStore()
    mine = acquire(store, "n1", me(), clock=lambda: 2000.0)
    assert mine == Holder("me@example", HOST, me().pid, "t-me", 2000.0)
    (values, version), = store.writes
    assert version == "1"  # the resourceVersion read: a precondition, never an unconditional write
    assert json.loads(values[LEASE]) == {"who": "me@example", "host": HOST, "pid": me().pid, "token": "t-me",
                                         "renewed": 2000.0}
    assert values[LEASE] == json.dumps(json.loads(values[LEASE]), sort_keys=True)


def test_a_node_that_moved_between_read_and_write_is_read_again():
    """The precondition: without resourceVersion the first write would land on a node that moved on."""
    store = NodeStore()
    store.moves_before_write = 2
    acquire(store, "n1", me(), clock=lambda: 2000.0)
    assert store.reads == 3
    assert [v for _, v in store.writes] == ["1", "2", "3"]  # each write on the version just read
    assert json.loads(store.annotations[LEASE])["token"] == "t-me"


def test_a_second_gputui_that_read_the_free_node_too_loses_the_race():
    """Both read the node free; alice writes first, so our write (on the node as we read it) is refused, we read
    again and find her holding it. Without the precondition ours would overwrite hers: two owners."""
    store = NodeStore()
    write = store.annotate_node

    def alice_first(node, values, resource_version=None):
        if LEASE not in store.annotations:
            write(node, {LEASE: lease_text(renewed=2000.0)}, resource_version=str(store.version))
        write(node, values, resource_version=resource_version)

    store.annotate_node = alice_first  # type: ignore[method-assign]
    with pytest.raises(LeaseHeld, match="being drained by alice"):
        acquire(store, "n1", me(), clock=lambda: 2000.0)
    assert holder_of(store.annotations).token == "t-alice"


def test_a_node_that_never_stops_moving_gives_up_after_the_tries_with_a_reason():
    store = NodeStore()
    store.moves_before_write = 10_000
    with pytest.raises(BackendError, match=f"node n1: could not update its drain lease: it kept changing \\({CAS_TRIES} tries\\)"):
        acquire(store, "n1", me(), clock=lambda: 2000.0)
    assert store.reads == CAS_TRIES and len(store.writes) == CAS_TRIES
    assert LEASE not in store.annotations


def test_a_live_holder_keeps_its_node_and_is_named():
    store = NodeStore({LEASE: lease_text(renewed=1000.0)})
    with pytest.raises(LeaseHeld) as err:
        acquire(store, "n1", me(), take_over=True, clock=lambda: 1030.0)
    assert str(err.value) == "node n1 is being drained by alice (host elsewhere, pid 4242), renewed 30s ago"
    assert store.writes == []


def test_a_holder_silent_for_exactly_the_lease_period_has_not_expired():
    """Expiry is strictly more than LEASE_S of silence (kills `>` made `>=`)."""
    store = NodeStore({LEASE: lease_text(renewed=1000.0)})
    with pytest.raises(LeaseHeld, match="is being drained by"):
        acquire(store, "n1", me(), clock=lambda: 1000.0 + LEASE_S)


def test_an_expired_lease_is_refused_without_take_over_and_says_how_to_take_it():
    store = NodeStore({LEASE: lease_text(renewed=1000.0)})
    with pytest.raises(LeaseHeld) as err:
        acquire(store, "n1", me(), clock=lambda: 1000.0 + LEASE_S + 1)
    assert str(err.value) == ("node n1: a drain by alice (host elsewhere, pid 4242), renewed 61s ago stopped renewing "
                              "its lease; take it over explicitly (--take-over, or R and confirm)")
    assert store.writes == []


def test_an_expired_lease_is_taken_with_take_over():
    store = NodeStore({LEASE: lease_text(renewed=1000.0)})
    mine = acquire(store, "n1", me(), take_over=True, clock=lambda: 1000.0 + LEASE_S + 1)
    assert holder_of(store.annotations) == mine
    assert mine.renewed == 1000.0 + LEASE_S + 1


def test_a_live_lease_of_a_dead_process_on_this_host_is_taken_without_asking():
    """A gputui killed here and resumed by its operator: its own lease must not lock it out."""
    store = NodeStore({LEASE: lease_text(host=HOST, pid=gone_pid(), renewed=1000.0)})
    acquire(store, "n1", me(), clock=lambda: 1010.0)
    assert holder_of(store.annotations).token == "t-me"


def test_an_expired_lease_of_a_dead_process_on_this_host_is_taken_without_take_over():
    store = NodeStore({LEASE: lease_text(host=HOST, pid=gone_pid(), renewed=1000.0)})
    acquire(store, "n1", me(), clock=lambda: 1000.0 + 10 * LEASE_S)
    assert holder_of(store.annotations).token == "t-me"


def test_our_own_token_is_renewed_however_old():
    store = NodeStore({LEASE: lease_text(token="t-me", renewed=1.0)})
    acquire(store, "n1", me(), clock=lambda: 5000.0)
    assert holder_of(store.annotations).renewed == 5000.0


# -- renew and release ----------------------------------------------------------------------------------------

def test_renew_moves_the_renewal_time_of_our_lease():
    store = NodeStore()
    mine = acquire(store, "n1", me(), clock=lambda: 1000.0)
    again = renew(store, "n1", mine, clock=lambda: 1015.0)
    assert again.renewed == 1015.0 and holder_of(store.annotations) == again


def test_renew_that_finds_the_lease_taken_over_stops_with_the_new_holder_named():
    store = NodeStore()
    mine = acquire(store, "n1", me(), clock=lambda: 1000.0)
    store.annotations[LEASE] = lease_text(renewed=1070.0)  # alice took it over after ours expired
    with pytest.raises(LeaseHeld, match="node n1 is being drained by alice"):
        renew(store, "n1", mine, clock=lambda: 1075.0)
    assert holder_of(store.annotations).token == "t-alice"


def test_renew_never_takes_over_an_expired_foreign_lease():
    """renew is acquire without take-over (kills take_over=True)."""
    store = NodeStore({LEASE: lease_text(renewed=0.0)})
    with pytest.raises(LeaseHeld, match="stopped renewing"):
        renew(store, "n1", me(), clock=lambda: 10 * LEASE_S)
    assert store.writes == []


def test_release_removes_our_lease_conditionally():
    store = NodeStore({"other": "kept"})
    mine = acquire(store, "n1", me(), clock=lambda: 1000.0)
    assert release(store, "n1", mine) is True
    assert store.annotations == {"other": "kept"}
    assert store.writes[-1] == ({LEASE: None}, "2")


def test_release_leaves_someone_elses_lease_and_writes_nothing():
    store = NodeStore({LEASE: lease_text()})
    assert release(store, "n1", me()) is False
    assert store.writes == [] and holder_of(store.annotations).token == "t-alice"


def test_release_of_a_node_without_a_lease_writes_nothing():
    store = NodeStore()
    assert release(store, "n1", me()) is False
    assert store.writes == []


# -- foreign_holders: what the plan warns about -----------------------------------------------------------------

def _snapshot(*nodes: Node) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=0.0, context="test", nodes=nodes)


def _node(name: str, annotations: dict[str, str]) -> Node:
    return Node(name=name, ready=True, unschedulable=False, gpu_product="H100", gpu_capacity=8, gpu_allocatable=8,
                annotations=annotations)


def test_foreign_holders_names_each_node_held_by_a_live_gputui_elsewhere():
    snap = _snapshot(_node("a", {LEASE: lease_text(renewed=100.0)}), _node("b", {}),
                     _node("c", {LEASE: lease_text(host=HOST, pid=gone_pid())}))
    assert foreign_holders(snap, ["a", "b", "c", "missing"], now=160.0) == [
        "a: alice (host elsewhere, pid 4242), renewed 60s ago"]


def test_the_liveness_probe_sends_no_signal(monkeypatch):
    """kill(pid, 0) only asks whether the process exists; any other signal would hang up or stop the other
    operator's gputui (kills the probe's signal changed)."""
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(lease.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    assert not Holder("a", HOST, 4_000_000, "t").dead_here()
    assert sent == [(4_000_000, 0)]


def test_a_renew_that_finds_its_lease_gone_stops_and_writes_nothing():
    """Taken over, then dropped by the new holder (the node given back): never taken again by a renew."""
    store = NodeStore()
    mine = acquire(store, "n1", me(), clock=lambda: 1000.0)
    del store.annotations[LEASE]
    writes = len(store.writes)
    with pytest.raises(LeaseHeld) as err:
        renew(store, "n1", mine, clock=lambda: 1015.0)
    assert str(err.value) == "node n1: this drain's lease is gone (dropped by whoever took it over): stopped"
    assert len(store.writes) == writes and LEASE not in store.annotations


def test_a_renew_that_finds_a_new_holder_silent_exactly_the_lease_period_says_it_is_being_drained():
    store = NodeStore()
    mine = acquire(store, "n1", me(), clock=lambda: 1000.0)
    store.annotations[LEASE] = lease_text(renewed=1010.0)
    with pytest.raises(LeaseHeld, match=r"^node n1 is being drained by alice"):
        renew(store, "n1", mine, clock=lambda: 1010.0 + LEASE_S)


def test_a_renewal_is_written_as_sorted_json():
    store = NodeStore()
    mine = acquire(store, "n1", me(), clock=lambda: 1000.0)
    renew(store, "n1", mine, clock=lambda: 1015.0)
    value = store.writes[-1][0][LEASE]
    assert value == json.dumps(json.loads(value), sort_keys=True) and json.loads(value)["renewed"] == 1015.0


def test_draining_names_the_nodes_a_live_drain_holds():
    """What a plan counts as moving first (plan_batch's `draining`): a lease renewed within LEASE_S by a holder
    not known dead, or one that cannot be read (it may be); an expired or dead one, or none, is no drain running."""
    now = 10_000.0

    def node(name: str, holder: Holder | None = None, raw: str | None = None) -> Node:
        value = raw if raw is not None else json.dumps(asdict(holder)) if holder is not None else None
        return Node(name, True, True, "H100", 8, 8, annotations={LEASE: value} if value is not None else {})

    elsewhere = HOST + "-other"
    snap = ClusterSnapshot(now, "t", nodes=(
        node("live", Holder("a", elsewhere, 1, "t", now - LEASE_S)),
        node("expired", Holder("a", elsewhere, 1, "t", now - LEASE_S - 1)),
        node("dead", Holder("a", HOST, gone_pid(), "t", now)),
        node("ours", Holder("a", HOST, os.getpid(), "t", now)),  # another drain of this process
        node("unreadable", raw="{not json"),
        node("free")))
    assert lease.draining(snap, now) == ["live", "ours", "unreadable"]  # unknown is counted, never "no drain"

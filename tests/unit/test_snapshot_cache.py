"""The context's last snapshot on disk (gputui.backends.snapshot_cache): what it keeps, what it refuses."""

from __future__ import annotations

import dataclasses
import json
import stat

import pytest

from gputui.backends import snapshot_cache as sc
from gputui.backends.demo import DemoCluster
from gputui.snapshot import ClusterSnapshot


def _live(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """The demo's snapshot as a live cluster's would be (the cache keeps no simulation)."""
    return dataclasses.replace(snapshot, simulated=False, context="prod-eu")


def _without_placement(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    return dataclasses.replace(
        snapshot, nodes=tuple(dataclasses.replace(n, scheduling=None) for n in snapshot.nodes),
        pods=tuple(dataclasses.replace(p, scheduling=None) for p in snapshot.pods))


@pytest.fixture
def snap() -> ClusterSnapshot:
    return _live(DemoCluster(seed=7, clock=lambda: 1_800_000_000.0).snapshot())


def test_a_saved_snapshot_reads_back_as_every_screen_draws_it(tmp_path, snap):
    path = sc.save(snap, tmp_path / "c.json")
    back, saved_at = sc.load(path)
    assert saved_at > 0
    expected = _without_placement(snap)
    for f in dataclasses.fields(ClusterSnapshot):
        if f.init and f.name not in sc.DROPPED:
            assert getattr(back, f.name) == getattr(expected, f.name), f.name
    assert back.nodes and back.pods and back.services and back.session_counts  # the demo has them all
    assert all(p.scheduling is None for p in back.pods)  # the placement preview's facts: not kept


def test_the_file_is_its_owners_only_and_written_whole(tmp_path, snap):
    path = sc.save(snap, tmp_path / "dir" / "c.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["c.json"]  # no temporary file left beside it


def test_a_snapshot_over_the_bound_is_not_written(tmp_path, snap, monkeypatch):
    monkeypatch.setattr(sc, "MAX_BYTES", 1000)
    with pytest.raises(sc.CacheError, match="over the"):
        sc.save(snap, tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()


def test_each_context_has_its_own_file_whatever_its_name(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    a = sc.cache_path("arn:aws:eks:eu-west-1:123:cluster/prod")
    b = sc.cache_path("arn:aws:eks:eu-west-1:123:cluster_prod")
    assert a != b and a.parent == b.parent == tmp_path / "gputui" / "snapshots"
    assert "/" not in a.name and a.name.startswith("arn_aws_eks")


@pytest.mark.parametrize("content, fragment", [
    (b"{not json", "not JSON"),
    (b"[]", "format"),
    (json.dumps({"format": 999, "saved_at": 1, "snapshot": {}}).encode(), "format 999"),
    (json.dumps({"format": sc.FORMAT, "saved_at": "x", "snapshot": {}}).encode(), "saved"),
    (json.dumps({"format": sc.FORMAT, "saved_at": 1, "snapshot": {"taken_at": 1, "context": "c",
                                                                   "nodes": "x"}}).encode(), "list expected"),
    (json.dumps({"format": sc.FORMAT, "saved_at": 1, "snapshot": {"taken_at": 1, "context": "c",
                                                                   "token": "x"}}).encode(), "unknown fields"),
    (json.dumps({"format": sc.FORMAT, "saved_at": 1, "snapshot": {"taken_at": 1}}).encode(), "context"),
    (json.dumps({"format": sc.FORMAT, "saved_at": 1, "snapshot": {"taken_at": True, "context": "c"}}).encode(),
     "not a number"),
    (b"[" * 100000, "not JSON"),
    (b"\xff\xfe", "not JSON"),
])
def test_a_cache_it_cannot_read_is_one_line_not_a_crash(tmp_path, content, fragment):
    path = tmp_path / "c.json"
    path.write_bytes(content)
    with pytest.raises(sc.CacheError, match=fragment) as err:
        sc.load(path)
    assert "\n" not in str(err.value)


def test_no_cache_yet_says_so(tmp_path):
    with pytest.raises(sc.CacheError, match="no cached snapshot"):
        sc.load(tmp_path / "absent.json")


def test_the_keeper_writes_at_most_once_a_minute_and_never_a_simulation(tmp_path, snap):
    now = [0.0]
    keeper = sc.Keeper(every_s=60, clock=lambda: now[0], path_of=lambda ctx: tmp_path / f"{ctx}.json")
    assert keeper.offer(dataclasses.replace(snap, simulated=True)) is None
    thread = keeper.offer(snap)
    assert thread is not None
    thread.join(10)
    assert keeper.saved == 1 and (tmp_path / "prod-eu.json").exists() and keeper.note == ""
    now[0] = 59.0
    assert keeper.offer(snap) is None  # not yet due
    now[0] = 61.0
    thread = keeper.offer(snap)
    assert thread is not None
    thread.join(10)
    assert keeper.saved == 2


def test_a_keeper_that_cannot_write_says_why_once(tmp_path, snap):
    blocker = tmp_path / "file"
    blocker.write_text("")
    keeper = sc.Keeper(path_of=lambda ctx: blocker / "sub" / "c.json")  # a directory under a file
    thread = keeper.offer(snap)
    assert thread is not None
    thread.join(10)
    assert keeper.saved == 0 and keeper.note.startswith("not cached:")

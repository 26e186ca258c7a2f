"""The arithmetic and words of a node's fault counts against its pool (gputui.policy.fault_peers): the median of an
odd and an even pool, the node itself left out of the median and the next worst, unknown never 0."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.backends.base import BackendError
from gputui.backends.prom_fault_window import parse, window_query
from gputui.policy.fault_peers import FAMILIES, FaultWindow, compare, lines, median, window_words

XID = "DCGM_FI_DEV_XID_ERRORS"
ALL = frozenset(FAMILIES)
DAY = 86400.0


def window(counts: dict[str, dict[str, int]], collected: dict[str, frozenset[str]] | None = None) -> FaultWindow:
    return FaultWindow(DAY, counts, collected if collected is not None else {n: ALL for n in counts})


def kind(peers, name):
    return next(p for p in peers if p.kind == name)


def test_median_of_odd_and_even_counts():
    assert median([5, 1, 3]) == 3
    assert median([4, 1, 3, 0]) == 2  # (1 + 3) / 2
    assert median([0, 1]) == 0.5
    assert median([]) is None


def test_the_node_itself_is_left_out_of_the_median_and_the_next_worst():
    counts = {"a": {"XID 45": 37}, "b": {"XID 45": 2}, "c": {}, "d": {}}
    peers = compare(window(counts), "", dict.fromkeys(counts, "p"))
    a = kind(peers["a"], "XID 45")
    assert (a.count, a.pool_median, a.pool_next_worst, a.peers) == (37, 0, 2, 3)
    assert a.words() == "XID 45 ×37 in 24 h; pool median 0, next worst 2"
    b = kind(peers["b"], "XID 45")  # the worst other node of b is a, and a's 37 is not its own
    assert (b.count, b.pool_median, b.pool_next_worst) == (2, 0, 37)
    # c's others are a 37, b 2, d 0: the median is b's 2 (c's own 0 not among them).
    assert kind(peers["c"], "XID 45").pool_median == 2
    assert kind(peers["a"], "XID").count == 37  # every code together


def test_an_even_pool_of_others_takes_the_mean_of_the_middle_two():
    counts = {"x": {"XID 13": 9}, "a": {"XID 13": 1}, "b": {"XID 13": 4}, "c": {"XID 13": 2}, "d": {}}
    peers = compare(window(counts), "", dict.fromkeys(counts, "p"))
    assert kind(peers["x"], "XID 13").pool_median == 1.5  # others 0, 1, 2, 4
    assert kind(peers["x"], "XID 13").words() == "XID 13 ×9 in 24 h; pool median 1.5, next worst 4"


def test_pools_are_compared_apart():
    counts = {"a1": {"XID 79": 3}, "a2": {}, "b1": {"XID 79": 50}, "b2": {}}
    peers = compare(window(counts), "", {"a1": "a", "a2": "a", "b1": "b", "b2": "b"})
    assert kind(peers["a1"], "XID 79").pool_next_worst == 0  # b1's 50 is in another pool


def test_a_family_without_series_is_not_collected_never_zero_and_left_out_of_the_peers():
    counts = {"a": {"XID 45": 5}, "b": {}, "c": {}}
    collected = {"a": ALL, "b": ALL, "c": ALL - {XID}}
    peers = compare(window(counts, collected), "", dict.fromkeys(counts, "p"))
    c = kind(peers["c"], "XID 45")
    assert c.count is None and c.why.startswith("not collected") and c.to_dict()["unknown"] == c.why
    a = kind(peers["a"], "XID 45")
    assert (a.pool_median, a.pool_next_worst, a.peers_unknown) == (0, 0, 1)
    assert a.words().endswith("(1 of 2 other nodes unknown)")
    assert kind(peers["b"], "XID").count == 0  # collected, no change: 0
    # A node the read does not name at all has nothing collected.
    alone = compare(window({}, {}), "", {"n": "p"})
    assert all(p.count is None for p in alone["n"])


def test_every_other_node_unknown_gives_no_median_and_no_next_worst():
    counts = {"a": {"XID 45": 5}, "b": {}}
    peers = compare(window(counts, {"a": ALL, "b": frozenset()}), "", dict.fromkeys(counts, "p"))
    a = kind(peers["a"], "XID 45")
    assert (a.pool_median, a.pool_next_worst) == (None, None)
    assert "every other node's count unknown" in a.words()


def test_a_failed_read_is_unknown_for_every_kind_with_its_reason():
    peers = compare(None, "connection refused", {"a": "p", "b": "p"}, 6 * 3600)
    assert all(p.count is None and p.why == "connection refused" and p.pool_median is None
               and p.pool_next_worst is None and p.window_s == 6 * 3600 for ps in peers.values() for p in ps)
    assert lines(peers["a"]) == ["fault counts over 6 h unknown: connection refused"]
    assert peers["a"][0].to_dict()["count"] is None


def test_lines_show_what_stands_out_and_the_gaps():
    counts = {"a": {"XID 45": 3, "XID 79": 1}, "b": {"XID 45": 1}, "c": {}}
    collected = {n: ALL - {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} for n in counts}
    peers = compare(window(counts, collected), "", dict.fromkeys(counts, "p"))
    shown = lines(peers["a"])
    assert shown[:2] == ["XID 45 ×3 in 24 h; pool median 0.5, next worst 1", "XID 79 ×1 in 24 h; pool median 0, next worst 0"]
    assert not any(s.startswith("XID ×") for s in shown)  # the codes' lines say more than the total
    assert shown[-1] == "not collected over 24 h: uncorrectable ECC errors (no series for the node)"
    quiet = compare(window({"a": {}, "b": {}}), "", {"a": "p", "b": "p"})
    assert lines(quiet["a"]) == ["no fault counted in 24 h on this node or the other nodes of pool p"]


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([f"n{i}" for i in range(12)]),
                       st.tuples(st.sampled_from("ab"), st.none() | st.integers(0, 4)), min_size=1))
def test_each_nodes_median_and_next_worst_are_those_of_the_others_in_its_pool(nodes):
    """compare() reads each node's others from one sorted list per kind (a pool of 100,000 nodes is compared in a
    second); against the plain reading: the other nodes' known counts, their median and their largest."""
    counts = {n: {"XID 79": c} for n, (_pool, c) in nodes.items() if c}
    collected = {n: (ALL if c is not None else frozenset()) for n, (_pool, c) in nodes.items()}
    pools = {n: pool for n, (pool, _c) in nodes.items()}
    peers = compare(window(counts, collected), "", pools)
    for n, (pool, c) in nodes.items():
        others = [c2 for m, (p2, c2) in nodes.items() if m != n and p2 == pool and c2 is not None]
        got = kind(peers[n], "XID")
        assert (got.count, got.pool_median, got.pool_next_worst, got.peers, got.peers_unknown) == (
            c, median(others), max(others, default=None), sum(1 for p2, _ in nodes.values() if p2 == pool) - 1,
            sum(1 for m, (p2, c2) in nodes.items() if m != n and p2 == pool and c2 is None))
        assert compare(window(counts, collected), "", pools, only=n) == {n: peers[n]}  # one node: the same


def test_window_words():
    assert [window_words(s) for s in (DAY, 6 * 3600, 5400, 45)] == ["24 h", "6 h", "90 min", "45 s"]


def test_the_query_is_one_and_its_answer_is_counted_per_code_and_rise():
    promql = window_query(DAY, ["Hostname", "hostname"])
    assert "[86400s:60s]" in promql and promql.count("[86400s]") == len(FAMILIES)  # one pass over each family
    assert 'DCGM_FI_DEV_XID_ERRORS{err_code!="0"}' in promql  # only the GPUs holding a code are read per step
    answer = [
        {"metric": {"Hostname": "n1", "code": "45", "fault": XID, "peers": "event"}, "value": [1, "2"]},
        {"metric": {"Hostname": "n1", "code": "79", "fault": XID, "peers": "event"}, "value": [1, "1"]},
        {"metric": {"hostname": "n2", "fault": "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "peers": "event"},
         "value": [1, "5"]},
        {"metric": {"Hostname": "n2", "fault": "DCGM_FI_DEV_ROW_REMAP_FAILURE", "peers": "event"}, "value": [1, "NaN"]},
        {"metric": {"Hostname": "n1", "fault": XID, "peers": "present"}, "value": [1, "8"]},
        {"metric": {"Hostname": "", "code": "13", "fault": XID, "peers": "event"}, "value": [1, "1"]},
        {"metric": {"Hostname": "n3", "fault": XID, "peers": "event"}, "value": [1, "1"]},  # no code: left out
    ]
    read = parse(answer, DAY, ["Hostname", "hostname"])
    assert read.counts == {"n1": {"XID 45": 2, "XID 79": 1}, "n2": {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 5}}
    # A counter's answer says it is collected (a NaN one does not: unknown, never 0); an XID's presence has its
    # own series.
    assert read.collected == {"n1": frozenset({XID}), "n2": frozenset({"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"})}


def test_the_evidence_bundle_carries_the_counts_and_says_when_unknown():
    from gputui.backends.demo import demo_backend
    from gputui.ops import evidence, evidence_write

    backend = demo_backend(clock=lambda: 1_800_000_000.0)
    ev = evidence.gather(backend, "gpu-h100-07")
    # gpu-h100-07's XID 79 against its pool, where gpu-h100-05 took one too (the demo's fault stories)
    assert "XID 79 ×1 in 24 h; pool median 0, next worst 1" in ev.peers
    summary = evidence_write.summary(ev)
    assert "## GPU fault counts over 24 h against the other nodes of its pool\n\n- " in summary
    assert "\n- XID 79 ×1 in 24 h; pool median 0, next worst 1\n" in summary

    def down(window_s):
        raise BackendError("prometheus: connection refused")

    backend.reader.fault_window = down
    ev = evidence.gather(backend, "gpu-h100-07")
    assert ev.peers_unknown == "prometheus: connection refused" and not ev.peers
    assert "- unknown: the counts could not be read (prometheus: connection refused)" in evidence_write.summary(ev)


def test_nodes_json_on_the_demo_lists_fault_peers_consistent_with_its_faults(tmp_path):
    import json

    from tests.support.gputui_cli import run

    out = run("nodes", "--demo", "-o", "json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    nodes = {n["name"]: n for n in json.loads(out.stdout)}
    for record in nodes.values():  # a GPU showing an XID is counted once for its code, and nothing else is
        xids = [f["code"] for g in record["gpus"] for f in g["faults"] if f.get("code")]
        counts = {k["kind"]: k["count"] for k in record["fault_peers"]}
        assert counts["XID"] == len(xids)
        assert all(counts[f"XID {x}"] == xids.count(x) for x in xids)
    seven = {k["kind"]: k for k in nodes["gpu-h100-07"]["fault_peers"]}
    assert (seven["XID 79"]["count"], seven["XID 79"]["window"], seven["XID 79"]["pool_median"]) == (1, "24 h", 0)
    assert seven["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"]["count"] is None  # the demo exports no such counter


def test_the_window_flag_reaches_the_json(tmp_path, monkeypatch, capsys):
    import json

    from gputui.cli.main import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main(["nodes", "--demo", "-o", "json", "--window", "6h"]) == 0  # the whole command line, flag to JSON
    record = next(n for n in json.loads(capsys.readouterr().out) if n["name"] == "gpu-h100-07")
    assert {k["window"] for k in record["fault_peers"]} == {"6 h"}

"""A node's GPU fault counts over a window against its pool's (issue 37 item 2), read from Debian's Prometheus
holding 8 hours of series shaped as dcgm-exporter writes them (gpu, UUID, pci_bus_id, device, modelName,
Hostname, the driver label; the XID's value the last code, its err_code/err_msg labels changing with it). The
counts of the one query are checked against a hand count of the planted history, for the last 24 h and the
last 6 h (an XID before the window not counted); a node without the XID series is not collected, never 0; a
family no node exports is not collected; with Prometheus stopped every count is unknown with the reason."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from gputui.backends.base import BackendError
from gputui.backends.prom import PromConfig, PromSource
from gputui.backends.prom_fault_window import read
from gputui.policy.fault_peers import compare, lines
from tests.support.exporters import DcgmExporter
from tests.support.gputui_cli import run
from tests.support.prom import DCGM_JOB, PrometheusServer, Series, dcgm_scrape_config

HOUR = 3600.0
STEP = 30
XID_MSG = {0: "No Error", 13: "Graphics Engine Exception", 45: "Preemptive Cleanup", 79: "GPU has fallen off the bus"}
POOLS = {"pa-1": "a", "pa-2": "a", "pa-3": "a", "pa-4": "a", "pb-1": "b"}

# (node, gpu) -> [(hours before the end, value from then on)], starting at 0 eight hours ago.
XID_PLAN = {
    ("pa-1", 0): [(7.0, 45), (6.5, 0), (5.0, 45), (4.5, 0), (3.0, 45)],  # 3 in 24 h; 2 in 6 h (the first before)
    ("pa-1", 1): [(2.0, 79)],
    ("pa-2", 0): [(4.0, 45), (1.0, 13)],  # a change from one code to another is a new XID
    ("pa-2", 1): [], ("pa-3", 0): [], ("pa-3", 1): [], ("pb-1", 0): [], ("pb-1", 1): [],
}  # pa-4 exports no XID series at all
REMAP_PLAN = {
    ("pa-1", 0): (0, [(3.0, 2), (1.0, 5)]),  # rises 2 then 3: 5
    ("pa-3", 1): (4, [(2.0, 0), (1.0, 1)]),  # 4 since before (not counted), a reset to 0, then 1: 1
}
FAILURE_PLAN = {("pa-1", 0): [(1.0, 1)]}


def _values(start: float, end: float, first: float, plan: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, value = [], first
    changes = sorted(plan, key=lambda c: -c[0])
    for t in range(int(start), int(end), STEP):
        while changes and t >= end - changes[0][0] * HOUR:
            value = changes.pop(0)[1]
        out.append((float(t), float(value)))
    return out


def history(dcgm: DcgmExporter, end: float) -> list[Series]:
    start = end - 8 * HOUR
    out: list[Series] = []
    for node, gpu in dcgm.gpus():
        base = {**dcgm.labels(node, gpu), "job": DCGM_JOB, "instance": dcgm.address}
        if (node, gpu) in XID_PLAN:  # one series per err_code, as the exporter writes them: it ends when the code does
            samples = _values(start, end, 0, XID_PLAN[(node, gpu)])
            for code in sorted({v for _, v in samples}):
                labels = {**base, "err_code": str(int(code)), "err_msg": XID_MSG[int(code)]}
                out.append(Series("DCGM_FI_DEV_XID_ERRORS", labels, [(t, v) for t, v in samples if v == code]))
        first, plan = REMAP_PLAN.get((node, gpu), (0, []))
        out.append(Series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", base, _values(start, end, first, plan)))
        out.append(Series("DCGM_FI_DEV_ROW_REMAP_FAILURE", base, _values(start, end, 0, FAILURE_PLAN.get((node, gpu), []))))
    return out


@pytest.fixture(scope="module")
def store() -> Iterator[PrometheusServer]:
    # The exporter's label shapes for the history; scraped live for its utilisation alone (Prometheus wants a
    # target up), so the planted history is all there is of the fault families.
    dcgm = DcgmExporter(fields=("util",))
    for node in POOLS:
        dcgm.add_node(node, gpus=2)
    prom = PrometheusServer([dcgm_scrape_config(dcgm)])
    try:
        prom.backfill(history(dcgm, time.time() - 60))
        prom.start(ready="last_over_time(DCGM_FI_DEV_XID_ERRORS[1h])")
        yield prom
    finally:
        prom.close()
        dcgm.close()


def by_kind(peers):
    return {p.kind: p for p in peers}


def test_counts_over_24h_match_the_hand_count_against_the_pool(store):
    prom = PromSource(PromConfig(store.url, timeout=20))
    try:
        window = read(prom, 24 * HOUR)
        assert prom.queries == 1  # one query for the whole fleet
    finally:
        prom.close()
    assert window.counts["pa-1"] == {"XID 45": 3, "XID 79": 1, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 5,
                                     "DCGM_FI_DEV_ROW_REMAP_FAILURE": 1}
    assert window.counts["pa-2"] == {"XID 45": 1, "XID 13": 1}
    assert window.counts["pa-3"] == {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 1}
    assert "pa-4" not in window.counts and "pb-1" not in window.counts
    assert "DCGM_FI_DEV_XID_ERRORS" not in window.collected["pa-4"]
    assert "DCGM_FI_DEV_XID_ERRORS" in window.collected["pa-3"]

    peers = compare(window, "", POOLS)
    a1 = by_kind(peers["pa-1"])
    # Others of pool a for XID 45: pa-2 1, pa-3 0, pa-4 not collected (left out, and said).
    assert (a1["XID 45"].count, a1["XID 45"].pool_median, a1["XID 45"].pool_next_worst) == (3, 0.5, 1)
    assert a1["XID 45"].words() == "XID 45 ×3 in 24 h; pool median 0.5, next worst 1 (1 of 3 other nodes unknown)"
    assert (a1["XID"].count, a1["XID"].pool_next_worst) == (4, 2)
    assert a1["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"].words() == \
        "rows remapped (uncorrectable) ×5 in 24 h; pool median 0, next worst 1"
    a4 = by_kind(peers["pa-4"])
    assert a4["XID 45"].count is None and a4["XID 45"].why.startswith("not collected")
    assert a4["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"].count == 0  # the series is there and never rose
    assert by_kind(peers["pa-3"])["XID"].count == 0
    # No node exports uncorrectable ECC: not collected everywhere, never 0.
    assert all(by_kind(ps)["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"].count is None for ps in peers.values())
    assert by_kind(peers["pb-1"])["XID"].words() == "XID ×0 in 24 h; no other node in pool b"
    assert "XID 45 ×3 in 24 h; pool median 0.5, next worst 1 (1 of 3 other nodes unknown)" in lines(peers["pa-1"])


def test_a_shorter_window_leaves_out_what_came_before_it(store):
    prom = PromSource(PromConfig(store.url, timeout=20))
    try:
        window = read(prom, 6 * HOUR)
    finally:
        prom.close()
    assert window.counts["pa-1"]["XID 45"] == 2
    assert by_kind(compare(window, "", POOLS)["pa-1"])["XID 45"].words().startswith("XID 45 ×2 in 6 h;")


def test_prometheus_down_makes_every_count_unknown(store):
    prom = PromSource(PromConfig(store.url, timeout=5))
    store.stop()
    try:
        with pytest.raises(BackendError) as err:
            read(prom, 24 * HOUR)
    finally:
        prom.close()
        store.start(ready="last_over_time(DCGM_FI_DEV_XID_ERRORS[1h])")
    peers = compare(None, str(err.value), POOLS, 24 * HOUR)
    assert all(p.count is None and p.pool_median is None and p.why == str(err.value)
               for ps in peers.values() for p in ps)
    assert lines(peers["pa-1"]) == [f"fault counts over 24 h unknown: {err.value}"]


def test_nodes_json_lists_each_nodes_counts_against_its_pool(cluster, fake_kubelet, store, tmp_path):
    """`gputui nodes -o json` on the real control plane, the counts read from the planted Prometheus: per node
    `fault_peers`, one entry per kind, unknown with why where the node exports no such series."""
    for node, pool in POOLS.items():
        fake_kubelet.add_node(node, gpus=2, labels={"gpu.pool": f"peers-{pool}"})
    try:
        out = run("nodes", "-o", "json", "--kubeconfig", str(cluster.admin_kubeconfig), "--prometheus", store.url,
                  home=tmp_path)
        assert out.returncode == 0, out.stderr
        nodes = {n["name"]: n for n in json.loads(out.stdout)}
        a1 = {k["kind"]: k for k in nodes["pa-1"]["fault_peers"]}
        assert {k: a1["XID 45"][k] for k in ("count", "window", "pool", "pool_median", "pool_next_worst",
                                             "pool_others", "pool_others_unknown")} == \
            {"count": 3, "window": "24 h", "pool": "peers-a", "pool_median": 0.5, "pool_next_worst": 1,
             "pool_others": 3, "pool_others_unknown": 1}
        assert a1["DCGM_FI_DEV_ROW_REMAP_FAILURE"]["count"] == 1
        a4 = {k["kind"]: k for k in nodes["pa-4"]["fault_peers"]}
        assert a4["XID"]["count"] is None and a4["XID"]["unknown"].startswith("not collected")
        assert a4["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"]["count"] == 0
        assert {k["kind"]: k["count"] for k in nodes["pb-1"]["fault_peers"]}["XID"] == 0
    finally:
        for node in POOLS:
            fake_kubelet.remove_node(node)

"""Every figure of the table of GPU metrics (gputui.vocabulary.gpu_metrics), read from a real Prometheus scraping the fake
dcgm-exporter, reaches a GPU's record and `nodes -o json` by its name; NaN, a series gone and a field the exporter
does not serve are unknown, never 0. Driven by the table: a new row is checked here without a word of its own,
once the fake exporter serves its field."""

from __future__ import annotations

import math

import pytest

from gputui.backends import kube_objects as ko
from gputui.backends.join_fleet import gpus_of
from gputui.backends.prom import PromConfig, PromSource
from gputui.vocabulary.gpu_metrics import METRICS, json_figures, value_of
from tests.support.exporters import DCGM_FIELDS
from tests.support.kube_json import node_json
from tests.support.procs import wait_until

HOST = "gm-table-node"  # the exporter's own node for this module (no Kubernetes node needed for a per-GPU read)
SERVED = {metric for metric, _help, _type in DCGM_FIELDS.values()}
DERIVED = {"mem_total_mib"}  # used + free: checked on its own
# The rows whose value is the one field the fake serves under their DCGM name (utilisation too: no MIG here).
PLAIN = [m for m in METRICS if m.dcgm in SERVED and m.name not in DERIVED]


@pytest.fixture
def exporter(dcgm_exporter):
    dcgm_exporter.add_node(HOST, gpus=3, fb_total_mib=81559)
    try:
        yield dcgm_exporter
    finally:
        dcgm_exporter.remove_node(HOST)


def _gpus(url: str, host_label: str):
    src = PromSource(PromConfig(url, timeout=10))
    read = src.fetch({HOST}, per_gpu=True, host=HOST, host_label=host_label).gpus
    node = ko.node_record({**node_json(HOST), "metadata": {"name": HOST, "labels": {}}})  # no card-size label
    return {g.index: g for g in gpus_of(node, [s for s in read.values() if s.host == HOST])}


def _value(gpus, index: int, name: str) -> float | None:
    gpu = gpus.get(index)
    return None if gpu is None else value_of(gpu, name)


def test_every_row_of_the_table_reaches_the_gpu_record_and_json(prometheus, exporter):
    assert PLAIN, "the fake exporter serves none of the table's fields"
    want = {m.name: 3.0 + 7 * k for k, m in enumerate(PLAIN)}  # a distinct whole value each (a bitmask too)
    exporter.set(HOST, 0, **{m.dcgm: want[m.name] for m in PLAIN}, DCGM_FI_DEV_FB_FREE=3000.0)
    exporter.set(HOST, 1, **{m.dcgm: math.nan for m in PLAIN})  # the exporter says NaN
    exporter.set(HOST, 2, **{m.dcgm: None for m in PLAIN})  # a build that serves none of them

    def seen():
        gpus = _gpus(prometheus.url, exporter.host_label)
        return gpus if all(_value(gpus, 0, m.name) == want[m.name] for m in PLAIN) else None

    gpus = wait_until(seen, 30, what="every figure of the table read for GPU 0")
    figures = json_figures(gpus[0])
    assert {name: figures[name] for name in want} == want
    # used + free, without a card-size label
    assert figures["mem_total_mib"] == exporter.get(HOST, 0, "fb_used") + 3000.0
    for index in (1, 2):  # NaN and not served alike: unknown, never 0 (a GPU nothing is known of has no record)
        assert all(_value(gpus, index, m.name) is None for m in METRICS), (index, gpus.get(index))


def test_a_series_that_goes_away_is_unknown_at_the_next_read(prometheus, exporter):
    """Prometheus marks a series gone from a scrape stale: gputui then reads nothing, not the last value."""
    metric = PLAIN[-1]  # the table's last plain row: the newest
    exporter.set(HOST, 0, **{metric.dcgm: 5.0})
    wait_until(lambda: _value(_gpus(prometheus.url, exporter.host_label), 0, metric.name) == 5.0, 30,
               what=f"{metric.name} read")
    exporter.set(HOST, 0, **{metric.dcgm: None})
    wait_until(lambda: _value(_gpus(prometheus.url, exporter.host_label), 0, metric.name) is None
               and _value(_gpus(prometheus.url, exporter.host_label), 0, "temp_c") is not None, 30,
               what=f"{metric.name} unknown once its series is gone (the GPU's other series still read)")

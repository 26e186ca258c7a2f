"""The table of GPU metrics (gputui.vocabulary.gpu_metrics): one name per figure in every record, the formatters, the
aggregations, and every row read by the Prometheus reader and the join without a word of its own there."""

from __future__ import annotations

import dataclasses
import math

import pytest

from gputui.backends import kube_objects as ko
from gputui.backends.join_fleet import GpuSample, gpus_of
from gputui.backends.prom import PromConfig, PromSource
from gputui.backends.recording_rules import rule_names, rules_yaml
from gputui.vocabulary.gauges import Gauges, gauges
from gputui.vocabulary.gpu_metrics import (
    BY_NAME,
    METRICS,
    NO_VALUES,
    TYPED,
    Figures,
    aggregate,
    extra_of,
    fmt_celsius,
    fmt_gib,
    fmt_pct,
    fmt_watts,
    json_figures,
    throttle_words,
    value_of,
)
from gputui.vocabulary.model import Gpu, GpuSummary, Node
from tests.support.kube_json import node_json

UNKNOWN_MARKS = {"–", "  –"}


def test_one_name_per_figure_in_every_record():
    """The typed figures are the records' attributes by the same names, in the same order (the Prometheus reader
    builds a GpuSummary by position); the others are no attribute of any (they live in `extra`)."""
    assert len(BY_NAME) == len(METRICS)
    for record, first in ((Gpu, 2), (GpuSummary, 1), (Gauges, 0)):
        names = [f.name for f in dataclasses.fields(record)]  # type: ignore[arg-type]
        assert tuple(names[first:first + len(TYPED)]) == TYPED, record
        assert "extra" in names and not {m.name for m in METRICS if not m.typed} & set(names)


@pytest.mark.parametrize("metric", METRICS, ids=lambda m: m.name)
def test_every_formatter_says_unknown_for_none_nan_and_inf_never_zero(metric):
    for value in (None, math.nan, math.inf):
        assert metric.fmt(value) in UNKNOWN_MARKS
    assert metric.fmt(0.0) not in UNKNOWN_MARKS


def test_the_typed_figures_formatters():
    assert (fmt_pct(7.4), fmt_pct(100.0)) == ("  7%", "100%")
    assert (fmt_gib(512.0), fmt_gib(81559.0)) == ("0.5", "80")
    assert (fmt_celsius(61.4), fmt_celsius(-3.0)) == ("61°C", "-3°C")
    assert (fmt_watts(412.4), fmt_watts(2400.0), fmt_watts(12_345.0)) == ("412W", "2.4kW", "12kW")


def test_aggregations_are_over_known_values_only():
    assert aggregate("avg", [50.0, None, 100.0, math.nan]) == 75.0
    assert aggregate("sum", [1.0, None, 2.0]) == 3.0 and aggregate("max", [40.0, 85.0, None]) == 85.0
    assert aggregate("sum", [None, math.nan]) is None  # nothing known: unknown, not 0
    assert aggregate("", [1.0, 2.0]) is None  # a figure that does not aggregate (a bitmask)


def test_every_recorded_figure_has_its_rule():
    names = rule_names("Hostname")
    text = rules_yaml("Hostname")
    for m in METRICS:
        if m.recorded:
            assert names[m.name] == f"Hostname:{m.recorded}" and f"record: {names[m.name]}" in text


def _answer(metric_value: dict[str, float]):
    """A fake query(): each row's per-GPU query answered for GPU 0 of n1 with its row's value (a row is told by
    its DCGM field; the total memory's query names the used memory's field too)."""
    def query(promql: str) -> list[dict]:
        rows = [m for m in METRICS if m.dcgm in promql and m.name in metric_value]
        rows = [m for m in rows if len(rows) == 1 or m.name != "mem_used_mib"]
        if not rows:
            return []
        value = metric_value[rows[0].name]
        return [{"metric": {"Hostname": "n1", "gpu": "0", "UUID": "GPU-0"}, "value": [0, str(value)]}]
    return query


def _source(answers: dict[str, float]) -> PromSource:
    src = PromSource(PromConfig("http://127.0.0.1:9", host_label="Hostname"))
    src.query = _answer(answers)  # type: ignore[method-assign]
    src.query_counts = lambda promql: {}  # type: ignore[method-assign]  # no sessions here
    return src


def test_every_row_is_read_per_gpu_and_joined_by_its_name():
    queried: list[str] = []
    src = _source({})
    src.query = lambda promql: queried.append(promql) or []  # type: ignore[method-assign]
    src.fetch({"n1"}, per_gpu=True, host="n1")
    for m in METRICS:  # one query per row, each for the one host
        assert sum(1 for q in queried if m.dcgm in q and 'Hostname="n1"' in q) >= 1, m.name

    want = {m.name: 10.0 + 7 * i for i, m in enumerate(METRICS)}
    sample = _source(want).fetch({"n1"}, per_gpu=True, host="n1").gpus[("n1", 0)]
    assert sample.uuid == "GPU-0" and dict(sample.values) == want
    node = ko.node_record({**node_json("n1"), "metadata": {"name": "n1", "labels": {}}})
    gpu = gpus_of(node, [sample])[0]
    assert {m.name: value_of(gpu, m.name) for m in METRICS} == want
    assert json_figures(gpu) == want


def test_nan_and_missing_series_stay_unknown_through_the_join():
    """Fail closed: a NaN answer and no answer are both unknown (None, null in JSON), never 0."""
    sample = _source({"temp_c": math.nan, "util_pct": 50.0}).fetch({"n1"}, per_gpu=True, host="n1").gpus[("n1", 0)]
    assert dict(sample.values) == {"util_pct": 50.0}
    node = ko.node_record({**node_json("n1"), "metadata": {"name": "n1", "labels": {}}})
    gpu = gpus_of(node, [sample])[0]
    figures = json_figures(gpu)
    assert figures.pop("util_pct") == 50.0 and set(figures.values()) == {None}


def test_a_nodes_gauges_aggregate_each_figure_as_its_row_says():
    gpus = tuple(Gpu(i, f"u{i}", util_pct=u, temp_c=t, power_w=p, extra=extra_of(x))
                 for i, (u, t, p, x) in enumerate(((40.0, 60.0, 300.0, {m.name: 1.0 for m in METRICS}),
                                                   (80.0, None, 200.0, {}))))
    node = Node("n1", True, False, "H100", 2, 2, gpus=gpus)
    g = gauges(node, None)
    assert (g.util_pct, g.temp_c, g.power_w) == (60.0, 60.0, 500.0)
    for m in METRICS:
        if not m.typed:
            assert value_of(g, m.name) == (None if not m.node else 1.0)  # GPU 1 knows none: GPU 0's alone
    assert gauges(Node("n2", True, False, "H100", 1, 1, gpus=(Gpu(0, "u"),)), None).extra is NO_VALUES


def test_figures_are_immutable_hashable_and_compare_by_value():
    a, b = Figures({"x": 1.0}), Figures({"x": 1.0})
    assert a == b and hash(a) == hash(b) and a != Figures({"x": 2.0})
    assert hash(Gpu(0, "u", extra=a)) == hash(Gpu(0, "u", extra=b))
    assert GpuSample("n", 0, values=a) == GpuSample("n", 0, values=b)
    with pytest.raises(TypeError):
        a["x"] = 2.0  # type: ignore[index]


def test_memory_temperature_is_in_degrees_and_a_node_shows_its_hottest():
    m = BY_NAME["mem_temp_c"]
    assert m.dcgm == "DCGM_FI_DEV_MEMORY_TEMP" and (m.node, m.fleet) == ("max", "max")
    assert (m.fmt(87.6), m.fmt(104.0)) == ("88°C", "104°C") and len(m.fmt(104.0)) <= m.width


def test_pcie_replays_are_a_count_that_fits_its_column():
    m = BY_NAME["pcie_replays"]
    assert m.dcgm == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER" and m.node == "sum"
    cases = {0.0: "0", 42.0: "42", 9_994.0: "9994", 9_995.0: "10k", 123_456.0: "123k", 999_499.0: "999k",
             999_500.0: "1.0M", 2_500_000.0: "2.5M", 12_345_678.0: "12M"}
    assert {v: m.fmt(v) for v in cases} == cases and all(len(t) <= m.width for t in cases.values())


def test_throttle_reasons_decode_nvmls_bits_and_say_the_trouble_first():
    m = BY_NAME["throttle_reasons"]
    assert m.node == "" and m.fleet == ""  # a bitmask: per GPU only, never summed into a node's figure
    assert m.fmt(0.0) == "none" and m.fmt(0x1) == "idle" and m.fmt(0x1 | 0x10) == "idle,sync-boost"
    assert m.fmt(0x1 | 0x4 | 0x40) == "sw-power,hw-thermal"  # the benign reason left out beside trouble
    assert m.fmt(0x8) == "hw-slow" and m.fmt(0x80) == "hw-power-brake"
    assert m.fmt(0x1000) == "0x1000" and m.fmt(0x1 | 0x1000) == "0x1000"  # a bit NVML does not name yet
    for nonsense in (-1.0, 2.5):
        assert m.fmt(nonsense) == "–"  # not a mask: unknown
    assert throttle_words(0x20 | 0x40) == ["sw-thermal", "hw-thermal"] and throttle_words(None) is None


def test_throttle_reasons_are_read_under_either_of_their_names():
    """DCGM 3.3 renamed the field; a cluster serves one or the other: the reader asks for both."""
    m = BY_NAME["throttle_reasons"]
    assert m.series("gpu", "") == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS or DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
    old_build = _source({})

    def query(promql: str) -> list[dict]:
        if "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in promql:
            return [{"metric": {"Hostname": "n1", "gpu": "0"}, "value": [0, str(0x40)]}]
        return []

    old_build.query = query  # type: ignore[method-assign]
    sample = old_build.fetch({"n1"}, per_gpu=True, host="n1").gpus[("n1", 0)]
    assert dict(sample.values) == {"throttle_reasons": 0x40}

"""A GPU's faults read from Debian's Prometheus scraping series shaped as dcgm-exporter writes them (issue 37
item 1): the XID, the clock event reasons, the row-remap fields of the exporter's default counters, and the
fields a cluster adds to its counters CSV (ECC, the pending row remap, NVLink errors), served here by a second
target with the same labels. A field no target serves is "not collected" for that GPU, never healthy."""

from __future__ import annotations

import pytest

from gputui.backends import kube_objects as ko
from gputui.backends.join_fleet import gpus_of
from gputui.backends.prom import PromConfig, PromSource
from gputui.vocabulary.gpu_faults import NOT_COLLECTED, faults_of
from tests.support.exporters import Family, MetricsHTTPServer, render_text
from tests.support.kube_json import node_json
from tests.support.procs import wait_until
from tests.support.prom import PrometheusServer, dcgm_scrape_config

HOST = "gf-faults-node"
# Counters dcgm-exporter's etc/default-counters.csv leaves commented out, or does not list: a cluster adds them.
ADDED = {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "Total number of double-bit volatile ECC errors."),
         "DCGM_FI_DEV_ROW_REMAP_PENDING": ("gauge", "Whether remapping of rows is pending"),
         "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("counter", "Total number of NVLink recovery errors.")}


@pytest.fixture
def served(dcgm_exporter):
    """The session's fake dcgm-exporter with this module's node, and a second exporter serving ADDED for GPU 0
    alone, both scraped by a Prometheus of this test's own."""
    dcgm_exporter.add_node(HOST, gpus=2)
    values = {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 2.0, "DCGM_FI_DEV_ROW_REMAP_PENDING": 1.0,
              "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 0.0}

    def render(path: str) -> str | None:
        labels = {k: v for k, v in dcgm_exporter.labels(HOST, 0).items()}
        return render_text([Family(name, help_, kind, [(labels, values[name])])
                            for name, (kind, help_) in ADDED.items()]) if path == "/metrics" else None

    extra = MetricsHTTPServer(render)
    prom = PrometheusServer([dcgm_scrape_config(dcgm_exporter),
                             {"job_name": "dcgm-added", "honor_labels": True, "metrics_path": "/metrics",
                              "static_configs": [{"targets": [extra.address]}]}])
    try:
        prom.start(ready="DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
        yield dcgm_exporter, prom
    finally:
        prom.close()
        extra.close()
        dcgm_exporter.remove_node(HOST)


def _gpus(url: str, host_label: str):
    read = PromSource(PromConfig(url, timeout=10)).fetch({HOST}, per_gpu=True, host=HOST, host_label=host_label).gpus
    node = ko.node_record({**node_json(HOST), "metadata": {"name": HOST, "labels": {}}})
    return {g.index: g for g in gpus_of(node, [s for s in read.values() if s.host == HOST])}


def test_a_gpus_faults_from_real_series_and_the_fields_not_collected(served):
    exporter, prom = served
    exporter.set(HOST, 0, xid=79, row_remap_failure=1, uncorrectable_remapped_rows=3, pcie_replay=12,
                 clocks_event_reasons=0x48)  # hardware slowdown and hardware thermal slowdown

    def read():
        gpus = _gpus(prom.url, exporter.host_label)
        return gpus if 0 in gpus and gpus[0].xid == 79 and "DCGM_FI_DEV_ROW_REMAP_PENDING" in gpus[0].extra else None

    gpus = wait_until(read, 30, what="GPU 0's XID and the added fields read")
    faults = faults_of(gpus[0])
    by_field = {(f.code or f.field): f for f in faults}
    assert by_field[79].category == "hardware" and "fallen off the bus" in by_field[79].words
    assert by_field["DCGM_FI_DEV_ROW_REMAP_FAILURE"].category == "hardware"
    assert by_field["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"].words.startswith("2 double-bit")
    assert by_field["DCGM_FI_DEV_ROW_REMAP_PENDING"].category == "reset-gpu"
    assert by_field["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"].value == 3
    assert by_field["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"].value == 12
    assert [f.short for f in faults if f.field == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"] == \
        ["hardware slowdown: check cooling and power", "hardware thermal slowdown: check cooling"]
    assert "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL" not in by_field  # served, 0: nothing to say
    left_out = by_field[NOT_COLLECTED].words  # the fields neither target serves
    assert "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL" in left_out and "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL" in left_out
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" not in left_out and "DCGM_FI_DEV_ROW_REMAP_FAILURE" not in left_out
    assert faults[0].category == "hardware" and faults[-1].category == NOT_COLLECTED

    # GPU 1: the default counters all 0, the added ones not served for it: not collected, never healthy
    other = faults_of(gpus[1])
    assert [f.category for f in other] == [NOT_COLLECTED]
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in other[0].words and "DCGM_FI_DEV_ROW_REMAP_PENDING" in other[0].words
    assert "DCGM_FI_DEV_ROW_REMAP_FAILURE" not in other[0].words

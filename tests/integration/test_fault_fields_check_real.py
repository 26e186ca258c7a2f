"""`gputui check`'s metrics.fault_fields against Debian's Prometheus (issue 37 item 1): a dcgm-exporter serving
only its default counters' fault fields (the XID, PCIe replays, three row-remap fields) on two nodes leaves ten
fields the faults read uncollected: the check names each, with the counters CSV line to add, and passes nothing.
A second target then serves the ECC DBE counter and the clock throttle reasons (by their old name) for one node:
those two are named as served on 1 of 2 nodes.
Prometheus down: unknown, never a pass. The series are read through the CLI's own path (checks.context_for's
fill from the live reader's Prometheus)."""

from __future__ import annotations

import pytest

from gputui.backends import prom_fault_fields
from gputui.backends.prom import PromConfig, PromSource
from gputui.backends.prom_review import read_facts
from gputui.checks.context import CheckContext
from gputui.checks.metrics import fault_fields
from gputui.checks.result import Status
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary.exporter_counters import NEEDED, csv_line
from tests.support.exporters import DcgmExporter, Family, MetricsHTTPServer, render_text
from tests.support.procs import wait_until
from tests.support.prom import PrometheusServer, dcgm_scrape_config

HOST, OTHER = "ff-node", "ff-node-2"
# What dcgm-exporter's etc/default-counters.csv exports, by this harness's field keys: no ECC, no NVLink errors,
# no pending row remap, no clock event reasons.
DEFAULT_CSV = ("util", "fb_used", "fb_free", "temp", "power", "xid", "pcie_replay", "uncorrectable_remapped_rows",
               "correctable_remapped_rows", "row_remap_failure")
ADDED = {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "Total number of double-bit volatile ECC errors."),
         "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("gauge", "Current clock throttle reasons (bitmask).")}


@pytest.fixture
def store():
    exporter = DcgmExporter(fields=DEFAULT_CSV)
    exporter.add_node(HOST, gpus=2)
    exporter.add_node(OTHER, gpus=1)
    serving = {"added": False}

    def render(path: str) -> str | None:
        if path != "/metrics":
            return None
        families = [Family(name, help_, kind, [(exporter.labels(HOST, gpu), 0.0) for gpu in (0, 1)])
                    for name, (kind, help_) in ADDED.items()] if serving["added"] else []
        return render_text(families)

    extra = MetricsHTTPServer(render)
    prom = PrometheusServer([dcgm_scrape_config(exporter),
                             {"job_name": "dcgm-added", "honor_labels": True, "metrics_path": "/metrics",
                              "static_configs": [{"targets": [extra.address]}]}])
    try:
        prom.start(ready="DCGM_FI_DEV_XID_ERRORS")
        yield prom, serving
    finally:
        prom.close()
        extra.close()
        exporter.close()


def _check(url: str):
    prom_fault_fields._kept.clear()  # each look a fresh read (the CLI reads once a run)
    facts = read_facts(PromSource(PromConfig(url, timeout=10)), 3600.0)  # the live reader's check facts
    snap = ClusterSnapshot(0.0, "test", sources=(SourceStatus("API", 0.0), SourceStatus("metrics", 0.0)))
    return fault_fields(CheckContext(snap, facts=facts)), facts


def test_the_fields_the_exporters_configuration_leaves_out_are_named_with_their_csv_lines(store):
    prom, serving = store
    result, facts = _check(prom.url)
    assert facts.fault_fields is not None and facts.fault_fields["DCGM_FI_DEV_XID_ERRORS"] == 2  # by node
    served = {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
              "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE"}
    missing = [f for f in NEEDED if f not in served]
    assert result.status is Status.WARN and list(result.objects) == missing and len(missing) == 10
    for field in missing:
        assert field in result.summary and csv_line(field) in result.fix.split("\n")

    # One node's exporter is given ECC DBE and the throttle reasons (by their pre-3.3 name), the other's not.
    serving["added"] = True
    added = ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")

    def scraped():
        found, _ = _check(prom.url)
        return found if "on some nodes only" in found.summary else None

    result = wait_until(scraped, 30, what="the added counters scraped")
    assert list(result.objects) == [*(f for f in missing if f not in added), *sorted(added, key=NEEDED.index)]
    assert result.summary.endswith("2 fields on some nodes only: DCGM_FI_DEV_CLOCKS_EVENT_REASONS (on 1 of 2 "
                                   "nodes), DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (on 1 of 2 nodes)"), result.summary


def test_a_store_that_does_not_answer_is_unknown_never_a_pass(store):
    prom, _ = store
    url = prom.url
    prom.close()
    result, facts = _check(url)
    assert facts.fault_fields is None and facts.fault_fields_error
    assert result.status is Status.UNKNOWN and result.summary.startswith("cannot tell")

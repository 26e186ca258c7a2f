"""`gputui check`'s metrics.fault_fields (issue 37 item 1): every GPU fault field the metrics store holds no series
of is named, not collected, with the counters CSV line to add; unread is unknown, never a pass."""

from dataclasses import replace

from gputui.backends.demo import demo_backend
from gputui.backends.prom_review import read_facts
from gputui.checks.context import CheckContext
from gputui.checks.metrics import fault_fields
from gputui.checks.output import as_text
from gputui.checks.result import Status
from gputui.vocabulary.check_facts import UNREAD, CheckFacts
from gputui.vocabulary.exporter_counters import CSV, NEEDED, csv_line
from gputui.vocabulary.gpu_metrics import FAULT_FIELDS
from tests.demo_clock import ManualClock

# dcgm-exporter's default counters CSV: the XID, PCIe replays and three row-remap fields.
DEFAULT = {"DCGM_FI_DEV_XID_ERRORS": 8, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 8,
           "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 8, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 8,
           "DCGM_FI_DEV_ROW_REMAP_FAILURE": 8}


def _run(facts: CheckFacts):
    snap = demo_backend(clock=ManualClock()).reader.snapshot()
    return fault_fields(CheckContext(snap, facts=facts))


def test_every_field_the_faults_read_has_its_csv_line():
    assert set(NEEDED) == set(CSV) and set(FAULT_FIELDS) <= set(NEEDED)
    assert csv_line("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL") == \
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors."


def test_the_default_counters_leave_ten_fields_uncollected_each_named_with_its_line():
    result = _run(replace(UNREAD, fault_fields=DEFAULT, fault_fields_error=""))
    assert result.status is Status.WARN
    missing = [f for f in NEEDED if f not in DEFAULT]
    assert len(missing) == 10 and list(result.objects) == missing
    for field in missing:
        assert field in result.summary and csv_line(field) in result.fix.split("\n")
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in missing and "DCGM_FI_DEV_ROW_REMAP_PENDING" in missing


def test_a_field_served_by_its_old_name_is_collected_and_a_zero_count_is_not():
    everything = dict.fromkeys(NEEDED, 4) | {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0,
                                               "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 4,
                                               "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": 0}
    result = _run(replace(UNREAD, fault_fields=everything, fault_fields_error=""))
    assert result.status is Status.WARN and result.objects == ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",)
    assert result.summary.startswith("1 field not collected")
    everything["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"] = 4
    assert _run(replace(UNREAD, fault_fields=everything, fault_fields_error="")).status is Status.PASS


def test_unread_is_unknown_never_a_pass():
    assert _run(UNREAD).status is Status.UNKNOWN
    failed = _run(CheckFacts(fault_fields_error="Prometheus at http://x: timed out"))
    assert failed.status is Status.UNKNOWN and "timed out" in failed.summary
    # a reader with no store: its facts say why instead of leaving it blank
    facts = read_facts(None, 3600.0)
    assert facts.fault_fields is None and "--prometheus" in facts.fault_fields_error


def test_a_field_some_nodes_serve_is_named_with_how_many():
    counts = dict.fromkeys(NEEDED, 26) | {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 1, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 2}
    result = _run(replace(UNREAD, fault_fields=counts, fault_fields_error=""))
    assert result.status is Status.WARN and result.objects == ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS",)
    assert result.summary == "1 field on some nodes only: DCGM_FI_DEV_CLOCKS_EVENT_REASONS (on 3 of 26 nodes)"
    assert csv_line("DCGM_FI_DEV_CLOCKS_EVENT_REASONS") in result.fix.split("\n")


def test_the_demo_exporter_leaves_ecc_nvlink_and_pcie_out_and_the_text_lists_the_lines_to_add():
    backend = demo_backend(clock=ManualClock())
    facts = backend.reader.check_facts(600)
    result = _run(facts)
    assert result.status is Status.WARN
    assert result.objects[-1] == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"  # the thermal node's alone
    assert "(on 1 of 26 nodes)" in result.summary  # the NotReady node serves nothing
    assert set(result.objects[:-1]) == {f for f in FAULT_FIELDS if "_ECC_" in f or "_NVLINK_" in f} | \
        {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER"}
    text = as_text([result], "demo", True)
    lines = text.splitlines()
    fix = next(i for i, line in enumerate(lines) if line.strip().startswith("fix: add to dcgm-exporter"))
    # each line to add on its own line, indented under the fix
    more = lines[fix + 1:fix + 1 + len(result.objects)]
    assert [line.strip() for line in more] == [csv_line(f) for f in result.objects]
    assert all(line.startswith(" " * (lines[fix].index("fix:") + 5)) for line in more)

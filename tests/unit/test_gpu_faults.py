"""GPU faults in words (issue 37 item 1): NVIDIA's XID catalog as packaged data, gputui's verdict on who acts,
the clock event reasons bitmask decoded, and the DCGM fields that predict a failure; unknown and not collected
are never healthy."""

import tomllib
from pathlib import Path

import pytest

from gputui.vocabulary.gpu_faults import (
    CATEGORIES,
    FIELD_FAULTS,
    NOT_COLLECTED,
    PCIE_REPLAY_FIELD,
    THROTTLE_FAULTS,
    THROTTLE_FIELD,
    VERDICT,
    catalog,
    explain_field,
    explain_xid,
    faults_of,
    gpu_faults,
    node_worst,
    throttle_faults,
)
from gputui.vocabulary.gpu_metrics import FAULT_FIELDS, THROTTLE_REASONS, Figures
from gputui.vocabulary.model import Gpu

ROOT = Path(__file__).resolve().parents[2]


def test_the_catalog_names_its_source_and_version_and_ships_in_the_wheel():
    text = (ROOT / "gputui" / "vocabulary" / "xid_catalog.tsv").read_text()
    assert "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html" in text
    assert catalog().version == "R575 (CUDA 12.9)"
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "*.tsv" in data["gputui.vocabulary"]


def test_every_code_of_the_catalog_has_words_an_action_and_a_verdict():
    cat = catalog()
    assert sorted(cat.xids) == list(range(1, 173))  # NVIDIA's table: 1 to 172, none skipped
    for code, entry in cat.xids.items():
        fault = explain_xid(code)
        assert fault.code == code and entry.mnemonic in fault.words
        assert fault.action.startswith(VERDICT[entry.category]), code
        assert entry.category in CATEGORIES and entry.category != NOT_COLLECTED
        # NVIDIA's resolution bucket in words, whenever the catalog gives one
        if entry.immediate:
            assert entry.immediate in cat.buckets and f"({entry.immediate})" in fault.action, code
        assert len(f"GPU 7: {fault.short}") <= 80, code  # an alert line fits 80 columns


@pytest.mark.parametrize(("code", "category"), [
    (13, "application"), (31, "application"), (43, "application"), (45, "application"),
    (48, "hardware"), (64, "hardware"), (74, "hardware"), (79, "hardware"),
    # NVIDIA's catalog: 94 restart the application and reset the GPU when convenient; 95 reset the GPU.
    (94, "reset-gpu"), (95, "reset-gpu"),
    (119, "driver"), (120, "driver"), (63, "informational"), (92, "informational"),
])
def test_the_verdict_on_who_acts(code, category):
    assert explain_xid(code).category == category


def test_the_issues_examples_in_words():
    f79 = explain_xid(79)
    assert "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" in f79.words and "fallen off the bus" in f79.words
    assert "reboot the node (RESTART_BM)" in f79.action and "RMA" in f79.action
    assert f79.short == "XID 79 (fallen off the bus: reboot the node)"
    f13 = explain_xid(13)
    assert "tell the model's owner" in f13.action and "do not drain" in f13.action
    assert "RESTART_APP" in f13.action


def test_a_code_not_in_the_catalog_is_unknown_never_healthy():
    fault = explain_xid(999)
    assert fault.category == "unknown"
    assert fault.words == "unknown XID 999: not in NVIDIA's catalog (codes 1-172, newest driver cited R575 (CUDA 12.9))"
    assert "dmesg" in fault.action
    # an unused (older GPU's) code is named, but still unknown
    assert explain_xid(5).category == "unknown" and "unused on Ampere" in explain_xid(5).words


def test_the_throttle_bitmask_decoded():
    assert throttle_faults(0) == []  # clocks not held back
    one = throttle_faults(0x40)
    assert [f.category for f in one] == ["hardware"] and "too hot" in one[0].words
    several = throttle_faults(0x1 | 0x4 | 0x80)  # idle, power cap, power brake: in bit order
    assert [f.short for f in several] == ["idle", "power capped", "power brake: check the power supply"]
    assert "power supply" in several[2].words
    odd = throttle_faults(0x40 | 0x1000)  # a bit DCGM does not name is unknown, not dropped
    assert [f.category for f in odd] == ["hardware", "unknown"] and "0x1000" in odd[1].words
    assert throttle_faults(None)[0].category == NOT_COLLECTED
    assert throttle_faults(2.5)[0].category == "unknown"
    assert set(THROTTLE_FAULTS) == {bit for bit, _ in THROTTLE_REASONS}  # every bit DCGM names, in words


def test_fields_above_zero_in_words_zero_says_nothing_missing_is_not_collected():
    assert set(FIELD_FAULTS) == {*FAULT_FIELDS, PCIE_REPLAY_FIELD}
    assert explain_field("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0) is None
    failed = explain_field("DCGM_FI_DEV_ROW_REMAP_FAILURE", 1)
    assert failed is not None and failed.category == "hardware" and "RMA" in failed.action
    pending = explain_field("DCGM_FI_DEV_ROW_REMAP_PENDING", 1)
    assert pending is not None and pending.category == "reset-gpu" and "next GPU reset" in pending.words
    dbe = explain_field("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 3)
    assert dbe is not None and dbe.words.startswith("3 double-bit") and dbe.category == "hardware"
    missing = explain_field("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", None)
    assert missing is not None and missing.category == NOT_COLLECTED
    assert missing.words == "not collected: DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"


def test_a_gpus_faults_worst_first_and_what_it_does_not_report_named():
    reported = {"DCGM_FI_DEV_ROW_REMAP_FAILURE": 1.0, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 4.0,
                "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0.0, PCIE_REPLAY_FIELD: 0.0}
    faults = gpu_faults(13, 0x20, reported)
    assert [f.category for f in faults] == ["hardware", "application", "informational", "informational",
                                            NOT_COLLECTED]
    assert faults[0].field == "DCGM_FI_DEV_ROW_REMAP_FAILURE"
    left_out = faults[-1].words
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in left_out and "DCGM_FI_DEV_ROW_REMAP_PENDING" in left_out
    assert "DCGM_FI_DEV_ROW_REMAP_FAILURE" not in left_out and THROTTLE_FIELD not in left_out
    # a GPU that reports nothing at all is not healthy either
    assert [f.category for f in gpu_faults(0, None, {})] == [NOT_COLLECTED]


def test_a_gpu_records_faults_and_the_nodes_worst():
    every = {f: 0.0 for f in FAULT_FIELDS}
    clean = Gpu(0, "GPU-a", extra=Figures({**every, "throttle_reasons": 0.0, "pcie_replays": 0.0}))
    assert faults_of(clean) == []  # everything collected and nothing wrong: the only empty list
    hot = Gpu(1, "GPU-b", extra=Figures({**every, "throttle_reasons": 0x40, "pcie_replays": 7.0}))
    assert [f.short for f in faults_of(hot)] == ["hardware thermal slowdown: check cooling", "pcie_replay_counter ×7"]
    lost = Gpu(2, "GPU-c", xid=79)
    assert node_worst([clean, hot, lost]) == (2, explain_xid(79))
    assert node_worst([clean]) is None
    assert node_worst([Gpu(3, "GPU-d")]) is None  # nothing collected: named per GPU, no alert of its own

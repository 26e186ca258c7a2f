"""The dcgm-exporter counters the GPU faults read (gpu_faults: the XID, the clock event reasons, the PCIe replay
counter and gpu_metrics.FAULT_FIELDS), each with the line its counters CSV needs to export it, as dcgm-exporter's
etc/default-counters.csv writes it (`DCGM field, Prometheus type, help`). Its default CSV exports the XID, the
PCIe replays and three row-remap fields; it leaves the ECC and NVLink error counters commented out and does not
list ROW_REMAP_PENDING or the clock event reasons: a cluster adds them. `gputui check` names the ones a metrics
store holds no series of (metrics.fault_fields): not collected, never healthy.

Vocabulary level: pure data.
"""

from __future__ import annotations

from collections.abc import Mapping

from gputui.vocabulary.gpu_faults import PCIE_REPLAY_FIELD, THROTTLE_FIELD, XID_FIELD
from gputui.vocabulary.gpu_metrics import FAULT_FIELDS

# Another spelling of a field, as older builds serve it: either one collects it.
OLD_NAMES = {THROTTLE_FIELD: "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"}  # before DCGM 3.3 (the same bits)

# field -> (Prometheus type, help): the help texts are dcgm-exporter's own (default-counters.csv; the pending
# row remap's and the clock event reasons' from its other counters files).
CSV: dict[str, tuple[str, str]] = {
    XID_FIELD: ("gauge", "Value of the last XID error encountered."),
    THROTTLE_FIELD: ("gauge", "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)."),
    PCIE_REPLAY_FIELD: ("counter", "Total number of PCIe retries."),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("counter", "Total number of single-bit volatile ECC errors."),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "Total number of double-bit volatile ECC errors."),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": ("counter", "Total number of single-bit persistent ECC errors."),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("counter", "Total number of double-bit persistent ECC errors."),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ("gauge", "Whether remapping of rows is pending."),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gauge", "Whether remapping of rows has failed"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("counter", "Number of remapped rows for uncorrectable errors"),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("counter", "Number of remapped rows for correctable errors"),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("counter", "Total number of NVLink flow-control CRC errors."),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("counter", "Total number of NVLink data CRC errors."),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("counter", "Total number of NVLink retries."),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("counter", "Total number of NVLink recovery errors."),
}
# Every field a GPU's faults read, in the order gpu_faults lists them.
NEEDED: tuple[str, ...] = (XID_FIELD, THROTTLE_FIELD, *FAULT_FIELDS, PCIE_REPLAY_FIELD)
# Every series name that collects one of them (a field's old spelling included): what a store is asked for.
SERIES: tuple[str, ...] = (*NEEDED, *OLD_NAMES.values())


def csv_line(field: str) -> str:
    """`DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.`"""
    kind, help_ = CSV[field]
    return f"{field}, {kind}, {help_}"


def series_of(field: str, counts: Mapping[str, int]) -> int:
    """How many nodes' series collect `field` (by either spelling) in a store's `counts` (series name -> nodes):
    a node serving both spellings counts twice, a harmless overcount (no build serves both)."""
    return counts.get(field, 0) + counts.get(OLD_NAMES.get(field, ""), 0)


def not_collected(counts: Mapping[str, int]) -> list[str]:
    """The NEEDED fields no series collects, in NEEDED's order."""
    return [f for f in NEEDED if series_of(f, counts) <= 0]


def partly_collected(counts: Mapping[str, int]) -> list[tuple[str, int, int]]:
    """(field, its nodes, all nodes) for the fields collected on fewer nodes than serve an XID (every exporter
    serves it; without any, the most any field has): an exporter whose configuration differs between nodes. Per
    node, not per GPU: a GPU fallen off the bus serves its XID alone, and is no configuration's doing."""
    nodes = series_of(XID_FIELD, counts) or max((series_of(f, counts) for f in NEEDED), default=0)
    return [(f, n, nodes) for f in NEEDED if 0 < (n := series_of(f, counts)) < nodes]

"""The GPU metrics gputui reads, one row per figure: where it comes from (the DCGM field, the recorded rule), its
one name in every layer, its unit, how a node's GPUs and the fleet's nodes aggregate it, how it is written, and
where it shows. The Prometheus reader, the recording rules, the join, the records (model.Gpu, GpuSummary), the
gauges, the node table, the node detail, `gputui nodes -o json` and the demo all read this table: a new figure
is a new row.

`name` is the figure's one name: the attribute of model.Gpu, model.GpuSummary and gauges.Gauges for the five
figures policy reads by name (`typed`), the key of their `extra` map for the others, the key of a per-GPU
sample's values, the node table's column key and the JSON key. A value nobody reported (no series, NaN, Inf,
or gone stale in Prometheus) is None: unknown, never 0.

Vocabulary level: no I/O, no Rich, no import of backends, ui or present.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from math import isfinite
from types import MappingProxyType
from typing import Any, Literal

Aggregation = Literal["avg", "sum", "max", ""]  # "": the figure does not aggregate (a bitmask, per GPU only)


class Figures(Mapping[str, float]):
    """Known figures by name, immutable and hashable (the records holding it are frozen dataclasses, compared and
    hashed whole)."""

    __slots__ = ("_items", "_values")

    def __init__(self, values: Mapping[str, float] | None = None) -> None:
        self._values = dict(values or {})
        self._items = tuple(sorted(self._values.items()))

    def __getitem__(self, key: str) -> float:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        return self._values == (other._values if isinstance(other, Figures) else other)

    def __repr__(self) -> str:
        return f"Figures({self._values!r})"


NO_VALUES = Figures()  # the records' `extra` when nothing beyond the typed figures is known


def known(value: float | None) -> float | None:
    """A value as a number, None when it is missing, NaN or infinite (unknown is never drawn as 0)."""
    return value if value is not None and isfinite(value) else None


# --- formatters (each as short as a table cell; "–" for unknown) ---------------------------------------------

def fmt_pct(value: float | None) -> str:
    value = known(value)
    return "  –" if value is None else f"{value:3.0f}%"


def fmt_gib(mib: float | None) -> str:
    mib = known(mib)
    if mib is None:
        return "–"
    g = mib / 1024
    return f"{g:.0f}" if g >= 10 else f"{g:.1f}"


def fmt_celsius(c: float | None) -> str:
    c = known(c)
    return "–" if c is None else f"{c:.0f}°C"


def fmt_watts(w: float | None) -> str:
    w = known(w)
    if w is None:
        return "–"
    if w >= 9950:  # five cells at most: "12kW", not "12.3kW"
        return f"{w / 1000:.0f}kW"
    return f"{w / 1000:.1f}kW" if w >= 1000 else f"{w:.0f}W"


def fmt_count(n: float | None) -> str:
    n = known(n)
    if n is None:
        return "–"
    if n >= 999_500:
        return f"{n / 1e6:.0f}M" if n >= 9.95e6 else f"{n / 1e6:.1f}M"
    if n >= 9_995:
        return f"{n / 1e3:.0f}k"
    return f"{n:.0f}"


# NVML's clocks event (formerly throttle) reasons, the bits of DCGM_FI_DEV_CLOCKS_EVENT_REASONS /
# DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (nvmlClocksEventReason*), in bit order, with a short word each.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "idle"),  # GpuIdle: nothing to run, clocks down on purpose
    (0x2, "app-clocks"),  # ApplicationsClocksSetting: clocks held by the application clock setting
    (0x4, "sw-power"),  # SwPowerCap: the software power limit
    (0x8, "hw-slow"),  # HwSlowdown: hardware slowdown (thermal or power brake), a sign of trouble
    (0x10, "sync-boost"),  # SyncBoost: held to the slowest GPU of a sync-boost group
    (0x20, "sw-thermal"),  # SwThermalSlowdown: the driver cools the GPU or its memory
    (0x40, "hw-thermal"),  # HwThermalSlowdown: the hardware cools it: too hot
    (0x80, "hw-power-brake"),  # HwPowerBrakeSlowdown: the power supply's brake signal
    (0x100, "display-clocks"),  # DisplayClockSetting
)
THROTTLE_BENIGN = 0x1 | 0x2 | 0x10 | 0x100  # reasons that say nothing is wrong


def throttle_words(mask: float | None) -> list[str] | None:
    """The reasons a bitmask holds, in bit order (bits NVML does not name as `0x…`); None when unknown."""
    mask = known(mask)
    if mask is None or mask < 0 or not float(mask).is_integer():
        return None
    bits = int(mask)
    words = [word for bit, word in THROTTLE_REASONS if bits & bit]
    rest = bits & ~sum(bit for bit, _ in THROTTLE_REASONS)
    return words + ([f"{rest:#x}"] if rest else [])


def fmt_throttle(mask: float | None) -> str:
    """`–` unknown, `none` for a clean mask, else its reasons: those that say something is wrong alone when there
    are any (`hw-thermal`), else the benign ones (`idle`)."""
    words = throttle_words(mask)
    if words is None:
        return "–"
    bits = int(mask or 0)
    trouble = [w for bit, w in THROTTLE_REASONS if bits & bit & ~THROTTLE_BENIGN] + [w for w in words if w[:2] == "0x"]
    return ",".join(trouble or words) or "none"


# The DCGM fields that predict a failure, read per GPU for its faults (gpu_faults) rather than shown as figures:
# one query for them all in a node's read (fault_series), kept in a GPU's `extra` under these names. Spelled as
# dcgm-exporter's etc/default-counters.csv spells them; of these its default configuration exports the three
# row-remap ones, the others only when a cluster uncomments them (ECC, NVLink errors) or adds them
# (ROW_REMAP_PENDING, DCGM field 396 of dcgm_fields.h). A field not exported is "not collected", never healthy.
FAULT_FIELDS: tuple[str, ...] = (
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)


def fault_series(by_gpu: str, matchers: str = "") -> str:
    """Every FAULT_FIELDS series, one value per GPU and field (the field's name kept in __name__)."""
    names = "|".join(FAULT_FIELDS)
    return f'max by (__name__, {by_gpu}) ({{__name__=~"{names}"{"," + matchers if matchers else ""}}})'


# --- the table -----------------------------------------------------------------------------------------------

def _series(dcgm: str) -> Callable[[str, str], str]:
    return lambda on, matchers: f"{dcgm}{{{matchers}}}" if matchers else dcgm


def util_series(on: str, matchers: str = "") -> str:
    """Per-GPU utilisation series, MIG or not: a GPU's own gauge, unless it has MIG instances (then theirs).
    A MIG instance's series carry GPU_I_ID (and GPU_I_PROFILE); DCGM_FI_DEV_GPU_UTIL is not supported on MIG, so
    a MIG GPU's utilisation is its instances' graphics-engine activity (0..1, as a percentage). `on`: the labels
    naming one GPU; `matchers`: label matchers both sides share (one host's, for a node's detail)."""
    mig = f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{matchers + "," if matchers else ""}GPU_I_ID!=""}}'
    return f"(DCGM_FI_DEV_GPU_UTIL{{{matchers}}} unless on ({on}) {mig}) or (100 * {mig})"


def _either(*names: str) -> Callable[[str, str], str]:
    """The first of several spellings of one field a build serves (a renamed DCGM field)."""
    return lambda on, matchers: " or ".join(_series(n)(on, matchers) for n in names)


@dataclass(frozen=True, slots=True)
class GpuMetric:
    name: str  # the one name in every layer (see the module's doc)
    dcgm: str  # the DCGM field (the first spelling when a build may serve another: see `series`)
    unit: str
    node: Aggregation  # a node's GPUs -> the node's figure (PromQL's and Python's alike)
    fleet: Aggregation  # the fleet's nodes -> the fleet's figure
    fmt: Callable[[float | None], str]
    label: str  # column header, in the node table and the node detail
    width: int
    # Per-GPU series (on: labels naming a GPU; matchers: shared label matchers) -> PromQL; every query of the
    # figure, raw or recorded, starts from it.
    series: Callable[[str, str], str]
    typed: bool = False  # an attribute of the records (policy reads it by name), else a key of their `extra`
    # How one GPU's several series make its value: "avg" for utilisation (a MIG GPU is its instances' mean), else
    # the highest (two copies of a series count once).
    per_gpu: Aggregation = "max"
    # The recorded rule's metric part, `level:<rule>:<node>` (recording_rules); "": no rule, the raw series are
    # read. Only what the fleet view reads every refresh is worth a rule (a column's figures; the total memory
    # for alerting), not what a node's detail reads of one node.
    rule: str = ""
    column: bool = False  # a column of the dashboard's node table (read every fleet refresh)
    detail: bool = True  # a column of the node detail's GPU table (shown when any GPU of the node reports it)
    # The demo's value for a GPU from its utilisation (0..100) and index; None: the demo does not simulate it.
    demo: Callable[[float, int], float] | None = None

    @property
    def recorded(self) -> str:
        """The metric part of the recorded series' name, with its aggregation: `DCGM_FI_DEV_GPU_TEMP:max`."""
        return f"{self.rule}:{self.node}" if self.rule and self.node else ""


METRICS: tuple[GpuMetric, ...] = (
    GpuMetric("util_pct", "DCGM_FI_DEV_GPU_UTIL", "%", "avg", "avg", fmt_pct, "Util", 14, util_series,
              typed=True, per_gpu="avg", rule="gputui_gpu_util", column=True),
    GpuMetric("mem_used_mib", "DCGM_FI_DEV_FB_USED", "MiB", "sum", "sum", fmt_gib, "Memory", 18,
              _series("DCGM_FI_DEV_FB_USED"), typed=True, rule="DCGM_FI_DEV_FB_USED", column=True),
    # Not exported: used + free (the driver's reserve aside). A node label, when there is one, says it better
    # (gauges.mem_total, join_fleet.gpus_of); the fleet read leaves it to the label (no column of its own).
    GpuMetric("mem_total_mib", "DCGM_FI_DEV_FB_FREE", "MiB", "sum", "sum", fmt_gib, "Total", 6,
              lambda on, m: f"({_series('DCGM_FI_DEV_FB_USED')(on, m)} + {_series('DCGM_FI_DEV_FB_FREE')(on, m)})", typed=True,
              rule="gputui_gpu_fb_total", detail=False),
    GpuMetric("temp_c", "DCGM_FI_DEV_GPU_TEMP", "°C", "max", "max", fmt_celsius, "Temp", 5,
              _series("DCGM_FI_DEV_GPU_TEMP"), typed=True, rule="DCGM_FI_DEV_GPU_TEMP", column=True),
    GpuMetric("power_w", "DCGM_FI_DEV_POWER_USAGE", "W", "sum", "sum", fmt_watts, "Power", 6,
              _series("DCGM_FI_DEV_POWER_USAGE"), typed=True, rule="DCGM_FI_DEV_POWER_USAGE", column=True),
    # HBM runs hotter than the die and throttles on its own limit: the XID and fault work reads it.
    GpuMetric("mem_temp_c", "DCGM_FI_DEV_MEMORY_TEMP", "°C", "max", "max", fmt_celsius, "MemT", 5,
              _series("DCGM_FI_DEV_MEMORY_TEMP")),
    # A counter since boot: a rising count is a link going bad (a riser, a slot).
    GpuMetric("pcie_replays", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "count", "sum", "sum", fmt_count, "PCIe↻", 6,
              _series("DCGM_FI_DEV_PCIE_REPLAY_COUNTER")),
    # A bitmask (THROTTLE_REASONS): no sum or max of two masks means anything, so it stays per GPU. Newer builds
    # serve it as CLOCKS_EVENT_REASONS, older ones as CLOCK_THROTTLE_REASONS.
    GpuMetric("throttle_reasons", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "bitmask", "", "", fmt_throttle,
              "Throttle", 14, _either("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")),
)
BY_NAME: Mapping[str, GpuMetric] = MappingProxyType({m.name: m for m in METRICS})
TYPED: tuple[str, ...] = tuple(m.name for m in METRICS if m.typed)
COLUMNS: tuple[GpuMetric, ...] = tuple(m for m in METRICS if m.column)
NODE_FIGURES: tuple[GpuMetric, ...] = tuple(m for m in METRICS if m.node)  # what a node's GPUs aggregate to


def aggregate(how: Aggregation, values: Iterable[float | None]) -> float | None:
    """Python's side of a node's or a fleet's figure, as PromQL's `how by (...)` gives it: over the known values
    only; None when none is known (an unknown GPU is left out of a sum, never counted as 0)."""
    found = [v for v in values if v is not None and isfinite(v)]
    if not found or not how:
        return None
    if how == "avg":
        return sum(found) / len(found)
    return sum(found) if how == "sum" else max(found)


def value_of(record: Any, name: str) -> float | None:
    """A figure of a record (model.Gpu, model.GpuSummary, gauges.Gauges): its attribute if typed, else its
    `extra`'s entry."""
    if name in TYPED:
        return getattr(record, name)
    return record.extra.get(name)


def extra_of(values: Mapping[str, float | None]) -> Figures:
    """The figures of `values` that are not typed and are known, as a record's `extra`."""
    found = {k: v for k, v in values.items() if k not in TYPED and v is not None and isfinite(v)}
    return Figures(found) if found else NO_VALUES


def figures_of(values: Mapping[str, float | None]) -> Figures:
    """Every known figure of `values` (a per-GPU sample's)."""
    found = {k: v for k, v in values.items() if v is not None and isfinite(v)}
    return Figures(found) if found else NO_VALUES


def json_figures(record: Any) -> dict[str, float | None]:
    """Every figure of a record by its name, null when unknown (`gputui nodes -o json`)."""
    return {m.name: value_of(record, m.name) for m in METRICS}

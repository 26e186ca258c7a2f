"""Every GPU fault in words, with the action and who acts: an XID from NVIDIA's catalog (xid_catalog.tsv, data
transcribed from NVIDIA's "Analyzing Xid Errors with the Xid Catalog", its source and version in its header),
the clock event (throttle) reasons bitmask decoded, and the DCGM fields that predict a failure: ECC errors, row
remapping, PCIe replays and NVLink errors.

The verdict (`category`) says who acts, worst first: hardware (cordon, drain, RMA if it recurs), reset-gpu,
driver, unknown, application (tell the model's owner, do not drain), informational, not-collected. A code the
catalog does not hold is `unknown`, and a field dcgm-exporter does not export is `not collected`: neither is
ever healthy.

Vocabulary level: pure, no I/O but reading the packaged catalog once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from math import isfinite
from typing import Any

from gputui.vocabulary.gpu_metrics import FAULT_FIELDS, THROTTLE_REASONS
from gputui.vocabulary.model import Gpu

XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"
THROTTLE_FIELD = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"  # older builds: DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (same bits)
PCIE_REPLAY_FIELD = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
NOT_COLLECTED = "not-collected"

# Worst first: the order of a GPU's faults and of the worst fault a node's alert names.
CATEGORIES = ("hardware", "reset-gpu", "driver", "unknown", "application", "informational", NOT_COLLECTED)
RANK = {c: i for i, c in enumerate(CATEGORIES)}

# gputui's verdict for an XID, in one line on who acts; NVIDIA's own resolution follows it in Fault.action.
VERDICT = {
    "hardware": "hardware: cordon the node, drain the GPU's pods, then NVIDIA's action; open an RMA if it recurs",
    "reset-gpu": "reset the GPU: drain its pods first (no reboot); if it recurs, run DCGM diagnostics",
    "driver": "driver or firmware: reset the GPU or reload the driver; if it recurs, update the driver",
    "application": "application fault: tell the model's owner; do not drain, the GPU is sound",
    "informational": "no action of its own; watch for repeats",
    "unknown": "unknown: read the node's kernel log (dmesg) for the XID; treat the GPU as suspect",
}


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault of one GPU: what it is in words, what to do, and who acts (its category)."""

    field: str  # the DCGM field it was read from (DCGM_FI_DEV_XID_ERRORS for an XID)
    words: str
    action: str
    category: str
    code: int | None = None  # the XID
    value: float | None = None  # the field's value (a count, a flag, a bitmask)
    short: str = ""  # a few words for an alert line: `XID 79 (fallen off the bus: reboot the node)`
    fields: tuple[str, ...] = ()  # not collected: the fields the exporter does not export for this GPU

    @property
    def rank(self) -> int:
        return RANK.get(self.category, RANK["unknown"])

    def to_dict(self) -> dict[str, Any]:
        """As `gputui nodes -o json` lists it."""
        out: dict[str, Any] = {"code": self.code} if self.code is not None else {"field": self.field}
        if self.code is None and self.value is not None:
            out["value"] = self.value
        if self.fields:
            out["fields"] = list(self.fields)
        return {**out, "words": self.words, "action": self.action, "category": self.category}


@dataclass(frozen=True, slots=True)
class XidEntry:
    code: int
    mnemonic: str
    description: str
    immediate: str  # NVIDIA's resolution bucket, immediate action
    investigatory: str  # NVIDIA's resolution bucket, investigatory action
    applies: str  # Y/N for A100, H100, B100, GB200
    category: str
    short: str
    note: str


@dataclass(frozen=True, slots=True)
class Catalog:
    xids: Mapping[int, XidEntry]
    buckets: Mapping[str, str]
    version: str  # the newest driver the catalog cites (its header's Catalog-version), for an unknown code's words


@cache
def catalog() -> Catalog:
    """The packaged catalog, read once."""
    return parse_catalog(files("gputui.vocabulary").joinpath("xid_catalog.tsv").read_text(encoding="utf-8"))


def parse_catalog(text: str) -> Catalog:
    xids: dict[int, XidEntry] = {}
    buckets: dict[str, str] = {}
    version = ""
    for line in text.splitlines():
        if line.startswith("# Catalog-version:"):  # the newest driver the catalog cites: it carries no date
            version = line.removeprefix("# Catalog-version:").strip()
        if not line.strip() or line.startswith("#"):
            continue
        kind, *rest = line.split("\t")
        if kind == "xid":
            code, mnemonic, description, immediate, investigatory, applies, category, short, note = rest
            xids[int(code)] = XidEntry(int(code), mnemonic, description, immediate, investigatory, applies, category,
                                       short, note)
        elif kind == "bucket":
            buckets[rest[0]] = rest[1]
    return Catalog(xids, buckets, version)


def catalog_version() -> str:
    """`codes 1-172, newest driver cited R575 (CUDA 12.9)`: which catalog gputui holds."""
    cat = catalog()
    return f"codes {min(cat.xids)}-{max(cat.xids)}, newest driver cited {cat.version or 'unknown'}"


def _nvidia_action(entry: XidEntry, buckets: Mapping[str, str]) -> str:
    now = buckets.get(entry.immediate, entry.immediate)
    then = buckets.get(entry.investigatory, entry.investigatory)
    parts = [f"NVIDIA: {now} ({entry.immediate})"] if entry.immediate else []
    if entry.investigatory and entry.investigatory != entry.immediate and not entry.investigatory.startswith("N/A"):
        parts.append(f"if it recurs: {then} ({entry.investigatory})")
    return "; ".join(parts)


@cache  # a few codes, asked for every GPU that carries one at every read
def explain_xid(code: int) -> Fault:
    """An XID in words, with gputui's verdict and NVIDIA's resolution; a code NVIDIA's catalog does not hold is
    unknown, never healthy."""
    cat = catalog()
    entry = cat.xids.get(code)
    if entry is None:
        return Fault(XID_FIELD, f"unknown XID {code}: not in NVIDIA's catalog ({catalog_version()})",
                     VERDICT["unknown"], "unknown", code, short=f"XID {code} (unknown: not in NVIDIA's catalog)")
    unused = entry.description == "Unused" and entry.applies == "NNNN"
    what = "unused on Ampere and newer GPUs (an older GPU's code)" if unused else entry.description
    words = f"XID {code} {entry.mnemonic}: {what}" + (f". {entry.note}" if entry.note else "")
    nvidia = _nvidia_action(entry, cat.buckets)
    short = entry.short or ("unused code" if unused else entry.description)
    return Fault(XID_FIELD, words, f"{VERDICT[entry.category]}. {nvidia}" if nvidia else VERDICT[entry.category],
                 entry.category, code, short=f"XID {code} ({short})")


# --- clock event (throttle) reasons ---------------------------------------------------------------------------

# Per bit of the mask (gpu_metrics.THROTTLE_REASONS: DCGM's DCGM_CLOCKS_EVENT_REASON_*, NVML's
# nvmlClocksEventReason*, the same bits): the reason in words, the action, the category, an alert line's words.
THROTTLE_FAULTS: Mapping[int, tuple[str, str, str, str]] = {
    0x1: ("GPU idle: clocks lowered because nothing runs", "nothing to do", "informational", "idle"),
    0x2: ("clocks held by the applications clock setting", "check the application clocks (nvidia-smi -q -d CLOCK)",
          "informational", "clocks held by the applications clock setting"),
    0x4: ("software power cap: clocks lowered to stay within the power limit",
          "expected under heavy load; if constant, check the power limit (nvidia-smi -q -d POWER)", "informational",
          "power capped"),
    0x8: ("hardware slowdown: clocks cut by half or more (too hot, or the power brake)",
          "check cooling and the power supply; run DCGM diagnostics if it persists", "hardware",
          "hardware slowdown: check cooling and power"),
    0x10: ("sync boost: held to the slowest GPU of its sync-boost group", "nothing to do", "informational",
           "sync boost"),
    0x20: ("software thermal slowdown: the GPU or its memory is at its maximum operating temperature",
           "check airflow and inlet temperature if it persists", "informational", "thermal slowdown (software)"),
    0x40: ("hardware thermal slowdown: too hot, clocks cut by half or more",
           "check fans, airflow and inlet temperature; drain the node if it persists", "hardware",
           "hardware thermal slowdown: check cooling"),
    0x80: ("hardware power brake: the power supply asked the GPU to slow down",
           "check the node's power supply and power delivery", "hardware", "power brake: check the power supply"),
    0x100: ("clocks limited by the display clock setting", "nothing to do", "informational", "display clocks"),
}


def throttle_faults(mask: float | None) -> list[Fault]:
    """The clock event reasons a bitmask holds, in bit order; [] for 0 (clocks not held back); not collected when
    there is no value."""
    if mask is None or not isfinite(mask):
        return [not_collected((THROTTLE_FIELD,))]
    if mask < 0 or not float(mask).is_integer():
        return [Fault(THROTTLE_FIELD, f"clock event reasons: {mask} is not a bitmask", VERDICT["unknown"], "unknown",
                      value=mask, short="throttle ?")]
    bits = int(mask)
    out = []
    for bit, word in THROTTLE_REASONS:
        if bits & bit:
            words, action, category, alert = THROTTLE_FAULTS[bit]
            out.append(Fault(THROTTLE_FIELD, f"clock event {word} ({bit:#x}): {words}", action, category,
                             value=mask, short=alert))
    rest = bits & ~sum(bit for bit, _ in THROTTLE_REASONS)
    if rest:
        out.append(Fault(THROTTLE_FIELD, f"clock event bits {rest:#x} that DCGM does not name",
                         "read the reasons with nvidia-smi -q -d PERFORMANCE", "unknown", value=mask,
                         short=f"clock event bits {rest:#x}"))
    return out


# --- the DCGM fields that predict a failure ------------------------------------------------------------------

# DCGM field -> (what a value above 0 means, with {n}; the action; the category). Names as dcgm-exporter's
# etc/default-counters.csv (and DCGM's dcgm_fields.h) spell them.
FIELD_FAULTS: Mapping[str, tuple[str, str, str]] = {
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("{n} single-bit ECC errors since the driver loaded (corrected)",
                                      "nothing now; a fast rise predicts uncorrectable errors", "informational"),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("{n} double-bit (uncorrectable) ECC errors since the driver loaded",
                                      "drain the GPU's pods and reset it; an RMA if they come back", "hardware"),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": ("{n} single-bit ECC errors over the GPU's life (corrected)",
                                      "nothing now; compare with the pool", "informational"),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("{n} double-bit ECC errors over the GPU's life",
                                      "watch the volatile count: new ones after a reset mean an RMA", "informational"),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ("a memory row remap is pending: it takes effect at the next GPU reset",
                                      "drain the GPU's pods and reset it", "reset-gpu"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("memory row remapping failed: no spare row left for a bad one",
                                      "cordon the node, drain the GPU's pods, open an RMA", "hardware"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("{n} memory rows remapped after uncorrectable errors",
                                                "nothing now: the GPU repaired itself; a rising count predicts a "
                                                "remap failure", "informational"),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("{n} memory rows remapped after correctable errors",
                                              "nothing now; compare with the pool", "informational"),
    PCIE_REPLAY_FIELD: ("{n} PCIe replays (link retries) since boot",
                        "a rising count is a failing link: reseat the card or riser, check the slot", "informational"),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("{n} NVLink flow-control CRC errors",
                                                      "a rising count is a bad link: nvidia-smi nvlink -e",
                                                      "informational"),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("{n} NVLink data CRC errors",
                                                      "a rising count is a bad link: nvidia-smi nvlink -e",
                                                      "informational"),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("{n} NVLink replays (retries)",
                                                    "a rising count is a bad link: nvidia-smi nvlink -e",
                                                    "informational"),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("{n} NVLink recoveries (the link went down and retrained)",
                                                      "drain the GPU's pods and reset it; if it recurs, check the "
                                                      "link and its peer, then an RMA", "reset-gpu"),
}
# An alert line's words for the fields whose fault asks for an action ({n}: the value); the others as counts.
ALERT_WORDS = {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "{n} uncorrectable ECC errors: drain, reset the GPU",
               "DCGM_FI_DEV_ROW_REMAP_PENDING": "row remap pending: drain, reset the GPU",
               "DCGM_FI_DEV_ROW_REMAP_FAILURE": "row remap failed: cordon, drain, RMA",
               "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "{n} NVLink recoveries: drain, reset the GPU"}


def explain_field(field: str, value: float | None) -> Fault | None:
    """A counter or flag in words when it says something (above 0); None when it is 0; not collected when there
    is no value."""
    if value is None or not isfinite(value):
        return not_collected((field,))
    if value <= 0:
        return None
    words, action, category = FIELD_FAULTS[field]
    n = f"{value:.0f}"
    alert = ALERT_WORDS.get(field, f"{field.removeprefix('DCGM_FI_DEV_').lower()} ×{{n}}")
    return Fault(field, words.format(n=n), action, category, value=value, short=alert.format(n=n))


def not_collected(fields: Iterable[str]) -> Fault:
    """Fields the exporter does not export for this GPU, in one entry: not collected, never healthy."""
    return _not_collected(tuple(fields))


@cache  # every GPU of a fleet usually lacks the same fields: one entry for them all (`nodes -o json` at scale)
def _not_collected(names: tuple[str, ...]) -> Fault:
    return Fault(names[0] if len(names) == 1 else NOT_COLLECTED, f"not collected: {', '.join(names)}",
                 "add to dcgm-exporter's counters CSV (etc/default-counters.csv) to watch "
                 + ("it" if len(names) == 1 else "them"), NOT_COLLECTED, short="not collected", fields=tuple(names))


def gpu_faults(xid: int, throttle: float | None, fields: Mapping[str, float]) -> list[Fault]:
    """A GPU's faults, worst first: its XID (0: none), its clock event reasons, every field of FAULT_FIELDS and
    the PCIe replay counter (`fields`: by DCGM field name, known values only); the fields it does not report in
    one not-collected entry."""
    out = [explain_xid(xid)] if xid else []
    missing: list[str] = []
    for fault in throttle_faults(throttle):
        if fault.category == NOT_COLLECTED:
            missing.append(THROTTLE_FIELD)
        else:
            out.append(fault)
    for field in (*FAULT_FIELDS, PCIE_REPLAY_FIELD):
        value = fields.get(field)
        if value is None:
            missing.append(field)
            continue
        found = explain_field(field, value)
        if found is not None:
            out.append(found)
    if missing:
        out.append(not_collected(missing))
    return sorted(out, key=lambda f: f.rank)


def worst(faults: Iterable[Fault]) -> Fault | None:
    """The fault that decides what to do first (the first of the worst category)."""
    return min(faults, key=lambda f: f.rank, default=None)


def faults_of(gpu: Gpu) -> list[Fault]:
    """A GPU's faults, worst first, from what its record carries: the XID, the table's throttle_reasons and
    pcie_replays figures, and the FAULT_FIELDS its `extra` holds by DCGM name."""
    if not gpu.extra:  # most GPUs of a fleet read carry nothing more: no walk over the fields
        return gpu_faults(gpu.xid, None, {})
    fields = {_AS_FIELD.get(k, k): v for k, v in gpu.extra.items() if k in _WANTED}
    return gpu_faults(gpu.xid, gpu.extra.get("throttle_reasons"), fields)


_AS_FIELD = {"pcie_replays": PCIE_REPLAY_FIELD}  # the table's figure -> its DCGM field
_WANTED = frozenset((*FAULT_FIELDS, *_AS_FIELD))


def node_worst(gpus: Iterable[Gpu]) -> tuple[int, Fault] | None:
    """(GPU index, fault) of the node's worst fault that asks for an action (not informational, not a field left
    uncollected); within a category an XID first (the driver's own verdict names the cause); None when there is
    none."""
    found = [(f.rank, f.code is None, g.index, f) for g in gpus for f in faults_of(g)
             if f.category not in ("informational", NOT_COLLECTED)]
    if not found:
        return None
    *_, index, fault = min(found, key=lambda t: t[:3])
    return index, fault

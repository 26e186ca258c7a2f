"""Every node's GPU fault counts over a window, in ONE instant query for the whole fleet (issue 37 item 2): what
gputui.policy.fault_peers compares with each node's pool.

dcgm-exporter's DCGM_FI_DEV_XID_ERRORS is a gauge holding the *last* XID of a GPU (with `err_code`/`err_msg`
labels that change with it), so an XID is counted when a GPU's value becomes a non-zero code it did not hold a
step before: from 0, from another code, or on first sight (a GPU whose series appears with a code). A repeat of
the same code with nothing between is one: the exporter cannot tell them apart. `count_values` turns the code
into a label, so the answer is counted per code by Prometheus. Only series with a non-zero code are read at each
step (`err_code!="0"`, then `> 0`): a healthy fleet costs next to nothing, and an exporter without `err_code`
still gives the right counts (its every series read).

The counters (uncorrectable ECC, rows remapped, PCIe replays, NVLink recoveries) and the row-remap-failure flag
are counted by their rise over the window, increase() rounded: it counts across a reset (a driver reload), and
extrapolates to the window's edges by at most half a scrape interval at each end (for a few errors a day, the
rounded figure is the count; a count in the thousands may be off by a fraction of a percent). Per GPU first (max
by GPU: two scrapes of one GPU count once), then per node. Each family's presence per node (any series in the
window: a counter's answer, 0 included, says so) comes in the same answer: a family a node has no series of is
"not collected", never 0. The cost is one pass over each family's samples in the window, plus a per-step pass
over the GPUs that held a non-zero XID.
"""

from __future__ import annotations

import math
import time
from typing import Any

from gputui.backends.base import BackendError
from gputui.backends.prom import PromSource
from gputui.policy.fault_peers import FAMILIES, FaultWindow
from gputui.vocabulary.gpu_faults import XID_FIELD

MIN_STEP_S = 30  # dcgm-exporter's usual collection interval: a finer step reads the same samples again
MAX_STEPS = 1440  # a longer window takes a coarser step (XIDs are sticky: a code held less than a step is rare)
EVENT, PRESENT = "event", "present"  # the `peers` label of an answer's series
LABEL_FAULT, LABEL_WHAT, LABEL_CODE = "fault", "peers", "code"


def step_for(window_s: float) -> int:
    return max(MIN_STEP_S, math.ceil(window_s / MAX_STEPS))


def _tag(expr: str, family: str, what: str) -> str:
    return (f'label_replace(label_replace({expr}, "{LABEL_FAULT}", "{family}", "", ""), '
            f'"{LABEL_WHAT}", "{what}", "", "")')


def window_query(window_s: float, host_labels: list[str]) -> str:
    """The one query: per node and XID code, the GPUs' changes to that code over the window; per node and counter,
    its GPUs' rise; per node, the families it has a series of."""
    step = step_for(window_s)
    by_gpu = ", ".join([*host_labels, "gpu"])
    by_host = ", ".join(host_labels)
    w = f"{round(window_s)}s"

    def codes(offset: str) -> str:  # at one step: each GPU holding a non-zero XID, its code as a label
        return (f'count_values by ({by_gpu}) ("{LABEL_CODE}", max by ({by_gpu}) '
                f'(DCGM_FI_DEV_XID_ERRORS{{err_code!="0"}}{offset} > 0))')

    changed = f"({codes('')} unless on({by_gpu}, {LABEL_CODE}) {codes(f' offset {step}s')})"
    parts = [_tag(f"sum by ({by_host}, {LABEL_CODE}) (count_over_time({changed}[{w}:{step}s]))", XID_FIELD, EVENT),
             _tag(f"count by ({by_host}) (last_over_time({XID_FIELD}[{w}]))", XID_FIELD, PRESENT)]
    # A counter's answer, 0 included, is also its presence: one pass over its samples, not two.
    parts += [_tag(f"sum by ({by_host}) (max by ({by_gpu}) (round(increase({family}[{w}]))))", family, EVENT)
              for family in FAMILIES if family != XID_FIELD]
    return " or ".join(parts)


def read(prom: PromSource, window_s: float, end: float | None = None) -> FaultWindow:
    """Every node's counts over the window ending now (or `end`); BackendError when the store cannot answer."""
    end = time.time() if end is None else end
    promql = window_query(window_s, prom.host_labels)
    prom.queries += 1
    try:  # the client gpu_history and prom_range use: an instant query at `end`
        result = prom._prom.custom_query(promql, params={"time": f"{end:.3f}",
                                                         "timeout": f"{max(1, round(prom.cfg.timeout))}s"})
    except Exception as exc:  # noqa: BLE001 - requests errors and PrometheusApiClientException alike
        raise BackendError(prom._why(exc)) from None
    return parse(result if isinstance(result, list) else [], window_s, prom.host_labels)


def parse(series: list[Any], window_s: float, host_labels: list[str]) -> FaultWindow:
    counts: dict[str, dict[str, int]] = {}
    collected: dict[str, set[str]] = {}
    for s in series:
        if not isinstance(s, dict):
            continue
        labels = s.get("metric") or {}
        host = next((labels[h] for h in host_labels if labels.get(h)), "")
        family, what = labels.get(LABEL_FAULT, ""), labels.get(LABEL_WHAT, "")
        if not host or family not in FAMILIES:
            continue
        if what == PRESENT:
            collected.setdefault(host, set()).add(family)
            continue
        try:
            value = float((s.get("value") or [None, ""])[1])
            kind = f"XID {int(float(labels[LABEL_CODE]))}" if family == XID_FIELD else family
        except (TypeError, ValueError, KeyError, IndexError, OverflowError):
            continue
        if not math.isfinite(value):
            continue  # NaN says nothing: the family stays unknown for the node, never 0
        if family != XID_FIELD:  # a counter's rise, 0 included, says it is collected
            collected.setdefault(host, set()).add(family)
        if value <= 0:
            continue
        node = counts.setdefault(host, {})
        node[kind] = node.get(kind, 0) + round(value)
    return FaultWindow(window_s, {h: c for h, c in counts.items() if c},
                       {h: frozenset(f) for h, f in collected.items()})

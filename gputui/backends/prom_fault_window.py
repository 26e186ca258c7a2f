"""Every node's GPU fault counts over a window, in ONE instant query for the whole fleet (issue 37 item 2): what
gputui.policy.fault_peers compares with each node's pool.

dcgm-exporter's DCGM_FI_DEV_XID_ERRORS is a gauge holding the *last* XID of a GPU (with `err_code`/`err_msg`
labels that change with it), so an XID is counted when a GPU's value changes to a non-zero code: a repeat of the
same code with nothing between is one, as the exporter cannot tell them apart. The counters (uncorrectable ECC,
rows remapped, PCIe replays, NVLink recoveries) and the row-remap-failure flag are counted by their rises,
summed step by step (a fall is a reset, a driver reload: the new value is the rise), so the figure is exact,
never increase()'s extrapolation.

The query is a subquery evaluated once: `(events or presence)[window:step]`. Its answer is sparse: a sample only
at a step where a GPU's XID changed or a counter rose, plus, at the last step alone, one sample per node and
family that has a series anywhere in the window (`@` the end: evaluated once, not per step). A family a node has
no series of is "not collected", never 0.
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
MAX_STEPS = 1440  # a longer window takes a coarser step: the cost is steps × GPUs. XIDs are sticky; counter
# rises telescope, so a coarser step loses none of them
EVENT, PRESENT = "event", "present"  # the `peers` label of an answer's series
LABEL_FAULT, LABEL_WHAT = "fault", "peers"


def step_for(window_s: float) -> int:
    return max(MIN_STEP_S, math.ceil(window_s / MAX_STEPS))


def _tag(expr: str, family: str, what: str) -> str:
    return (f'label_replace(label_replace({expr}, "{LABEL_FAULT}", "{family}", "", ""), '
            f'"{LABEL_WHAT}", "{what}", "", "")')


def window_query(window_s: float, end: float, host_labels: list[str]) -> str:
    """The one query: per GPU, each XID change and counter rise over the window; per node, the families it has a
    series of (at the last step only)."""
    step = step_for(window_s)
    by_gpu = ", ".join([*host_labels, "gpu"])
    by_host = ", ".join(host_labels)
    w = round(window_s)
    parts = []
    for family in FAMILIES:
        now = f"max by ({by_gpu}) ({family})"
        before = f"max by ({by_gpu}) ({family} offset {step}s)"
        if family == XID_FIELD:  # the new code, when the last XID changed to a non-zero one
            event = f"(({now} != {before}) > 0)"
        else:  # the rise; after a fall (a reset), the new value
            event = f"((({now} - {before}) > 0) or (({now} < {before}) > 0))"
        parts.append(_tag(event, family, EVENT))
        present = (f"(count by ({by_host}) (last_over_time({family}[{w}s] @ {end:.3f})) "
                   f"and on() (vector(time()) > {end - step:.3f}))")
        parts.append(_tag(present, family, PRESENT))
    return f"({' or '.join(parts)})[{w}s:{step}s]"


def read(prom: PromSource, window_s: float, end: float | None = None) -> FaultWindow:
    """Every node's counts over the window ending now (or `end`); BackendError when the store cannot answer."""
    end = time.time() if end is None else end
    promql = window_query(window_s, end, prom.host_labels)
    prom.queries += 1
    try:  # the client gpu_history and prom_range use; an instant query at `end`, its answer a matrix
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
        node = counts.setdefault(host, {})
        for _t, text in s.get("values") or []:
            try:
                value = float(text)
            except (TypeError, ValueError):
                continue
            if not math.isfinite(value) or value <= 0:
                continue
            kind = f"XID {int(value)}" if family == XID_FIELD else family
            node[kind] = node.get(kind, 0) + (1 if family == XID_FIELD else round(value))
    return FaultWindow(window_s, {h: c for h, c in counts.items() if c},
                       {h: frozenset(f) for h, f in collected.items()})

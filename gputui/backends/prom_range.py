"""One node's DCGM series over a window, as Prometheus holds them (range queries): what an evidence bundle keeps
for an RMA or incident ticket. One query per metric family for the node (every GPU of it in the answer), never
one per GPU; each family answers or fails on its own, so a store that lacks one still gives the others."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from gputui.backends.prom import PromSource, _dt
from gputui.backends.recording_rules import PROBLEMS
from gputui.vocabulary.gpu_metrics import FAULT_FIELDS, METRICS

# Every DCGM field gputui reads for a GPU: the table's figures (both spellings of the throttle reasons), the
# MIG instances' engine activity, the XID and health, and the fields that predict a failure.
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys((
    *(m.dcgm for m in METRICS), "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    *PROBLEMS.values(), *FAULT_FIELDS,
)))
STEP_S = 30  # dcgm-exporter's usual collection interval: a finer step repeats samples


def family_query(family: str, node: str, host_labels: Iterable[str]) -> str:
    """The family's series of one node, by whichever host label the exporter writes."""
    escaped = node.replace("\\", "\\\\").replace('"', '\\"')
    return " or ".join(f'{family}{{{label}="{escaped}"}}' for label in host_labels)


def node_series(prom: PromSource, node: str, minutes: int = 60, families: Iterable[str] = FAMILIES,
                progress: Callable[[str], None] | None = None) -> dict[str, list[dict[str, Any]] | str]:
    """family -> its series ({"metric": labels, "values": [[epoch, "value"], ...]}), or the one-line reason it
    could not be read (an empty list: the store holds no such series for the node)."""
    end = time.time()
    out: dict[str, list[dict[str, Any]] | str] = {}
    for family in families:
        if progress is not None:
            progress(family)
        prom.queries += 1
        try:
            result = prom._prom.custom_query_range(  # the client gpu_history uses
                family_query(family, node, prom.host_labels), start_time=_dt(end - minutes * 60), end_time=_dt(end),
                step=f"{STEP_S}s", params={"timeout": f"{max(1, round(prom.cfg.timeout))}s"},
            )
        except Exception as exc:  # noqa: BLE001 - requests errors and PrometheusApiClientException alike
            out[family] = prom._why(exc)
            continue
        out[family] = [s for s in result if isinstance(s, dict)] if isinstance(result, list) else []
    return out


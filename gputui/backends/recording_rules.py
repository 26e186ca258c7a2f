"""The PromQL of gputui's GPU figures, built from their table (gputui.vocabulary.gpu_metrics): each figure per GPU (the
node detail, `gputui nodes`), per node (the fleet view), and the recording rules for a large fleet (issue 18):
the per-node aggregates the fleet view reads every refresh, evaluated once by Prometheus (or Thanos, Mimir,
VictoriaMetrics' vmalert) instead of at every query over every GPU's raw series. Named as the Prometheus
convention asks, `level:metric:operations`, the level being the host label they are aggregated by.
`gputui rules` prints them; PromSource reads them when they exist (`rule_names`) and falls back to the raw
series when they do not, saying which (`MODE_*`)."""

from __future__ import annotations

import yaml

from gputui.vocabulary.gpu_metrics import BY_NAME, METRICS, GpuMetric, util_series

MODE_RECORDED = "recorded series (gputui rules)"
MODE_RAW = "raw DCGM series"
GROUP = "gputui.policy.fleet"
PROBE = "gpu_count"  # the rule whose series says the rules are loaded and evaluated
UTIL_MAX = "util_max"  # the busiest GPU of a node (recorded for alerting; the fleet view reads the mean)
RULED = tuple(m for m in METRICS if m.recorded)  # the figures with a recorded series, in table order
PROBLEMS = {  # per GPU, only the ones with a problem: the recorded set is the few bad cards, not every card
    "xid": "DCGM_FI_DEV_XID_ERRORS",
    "health": "DCGM_EXP_GPU_HEALTH_STATUS",
}


def util_expr(on: str, matchers: str = "") -> str:
    """Per-GPU utilisation series, MIG or not (gpu_metrics.util_series)."""
    return util_series(on, matchers)


def gpu_expr(m: GpuMetric, by_gpu: str, matchers: str = "") -> str:
    """One value per GPU (`by_gpu`: the labels naming a GPU), as its row says a GPU's series combine."""
    return f"{m.per_gpu or 'max'} by ({by_gpu}) ({m.series(by_gpu, matchers)})"


def node_expr(m: GpuMetric, host: str, by_gpu: str) -> str:
    """One value per node from the raw series, aggregated as the row says (a mean is over cards, not series)."""
    inner = gpu_expr(m, by_gpu) if m.per_gpu == "avg" else m.series(by_gpu, "")
    return f"{m.node} by ({host}) ({inner})"


def count_expr(host: str, by_gpu: str) -> str:
    """How many GPUs a node reports (each card once, MIG or not)."""
    return f"count by ({host}) (group by ({by_gpu}) ({util_series(by_gpu)}))"


def problem_expr(field: str, by_gpu: str, matchers: str = "") -> str:
    """The GPUs whose XID or health says something: filtering before aggregating spares Prometheus a group per
    GPU of the fleet."""
    selector = f"{PROBLEMS[field]}{{{matchers}}}" if matchers else PROBLEMS[field]
    return f"max by ({by_gpu}) ({selector} {'!= 0' if field == 'xid' else '> 0'})"


def rule_names(host: str) -> dict[str, str]:
    """figure (gpu_metrics' name, PROBE, UTIL_MAX, xid, health) -> recorded series name, for one host label."""
    util = BY_NAME["util_pct"]
    return {
        util.name: f"{host}:{util.recorded}",  # each card once: a MIG card is its instances' mean
        UTIL_MAX: f"{host}:{util.rule}:max",
        PROBE: f"{host}:gputui_gpu:count",
        **{m.name: f"{host}:{m.recorded}" for m in RULED if m is not util},
        **{field: f"{host}_gpu:{metric}:max_nonzero" for field, metric in PROBLEMS.items()},
    }


def rule_exprs(host: str) -> dict[str, str]:
    """figure -> the expression each rule records (the raw queries PromSource runs without them)."""
    by_gpu = f"{host}, gpu"
    util = BY_NAME["util_pct"]
    return {
        util.name: node_expr(util, host, by_gpu),
        UTIL_MAX: f"max by ({host}) ({gpu_expr(util, by_gpu)})",
        PROBE: count_expr(host, by_gpu),
        **{m.name: node_expr(m, host, by_gpu) for m in RULED if m is not util},
        **{field: problem_expr(field, by_gpu) for field in PROBLEMS},
    }


def rules_yaml(host: str = "Hostname", interval: str = "30s") -> str:
    """A Prometheus rules file (also vmalert's format): one group, evaluated at the DCGM scrape cadence."""
    names, exprs = rule_names(host), rule_exprs(host)
    doc = {"groups": [{"name": GROUP, "interval": interval,
                       "rules": [{"record": names[f], "expr": exprs[f]} for f in names]}]}
    header = (f"# gputui's recording rules: per-node GPU aggregates by {host}, named level:metric:operations.\n"
              "# Load into Prometheus (rule_files:) or vmalert; gputui reads them when their series exist.\n")
    return header + yaml.safe_dump(doc, sort_keys=False, width=200)

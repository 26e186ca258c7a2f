"""Recording rules for a large fleet (issue 18): the per-node aggregates the fleet view reads every refresh,
evaluated once by Prometheus (or Thanos, Mimir, VictoriaMetrics' vmalert) instead of at every query over
every GPU's raw series. Named as the Prometheus convention asks, `level:metric:operations`, the level being
the host label they are aggregated by. `gputui rules` prints them; PromSource reads them when they exist
(`rule_names`) and falls back to the raw series when they do not, saying which (`MODE_*`)."""

from __future__ import annotations

import yaml

MODE_RECORDED = "recorded series (gputui rules)"
MODE_RAW = "raw DCGM series"
GROUP = "gputui.fleet"
PROBE = "gpu_count"  # the rule whose series says the rules are loaded and evaluated


# A MIG instance's series carry GPU_I_ID (and GPU_I_PROFILE); DCGM_FI_DEV_GPU_UTIL is not supported on MIG, so
# a MIG GPU's utilisation is its instances' graphics-engine activity (0..1, as a percentage).
def util_expr(on: str, matchers: str = "") -> str:
    """Per-GPU utilisation series, MIG or not: a GPU's own gauge, unless it has MIG instances (then theirs).
    `matchers`: label matchers both sides share (one host's, for a node's detail)."""
    mig = f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{matchers + "," if matchers else ""}GPU_I_ID!=""}}'
    return f"(DCGM_FI_DEV_GPU_UTIL{{{matchers}}} unless on ({on}) {mig}) or (100 * {mig})"


def rule_names(host: str) -> dict[str, str]:
    """field -> recorded series name, for one host label."""
    return {
        "util": f"{host}:gputui_gpu_util:avg",  # each card once: a MIG card is its instances' mean
        "util_max": f"{host}:gputui_gpu_util:max",
        PROBE: f"{host}:gputui_gpu:count",
        "fb_used": f"{host}:DCGM_FI_DEV_FB_USED:sum",
        "fb_total": f"{host}:gputui_gpu_fb_total:sum",
        "temp": f"{host}:DCGM_FI_DEV_GPU_TEMP:max",
        "power": f"{host}:DCGM_FI_DEV_POWER_USAGE:sum",
        # Per GPU, only the ones with a problem: the recorded set is the few bad cards, not every card.
        "xid": f"{host}_gpu:DCGM_FI_DEV_XID_ERRORS:max_nonzero",
        "health": f"{host}_gpu:DCGM_EXP_GPU_HEALTH_STATUS:max_nonzero",
    }


def rule_exprs(host: str) -> dict[str, str]:
    """field -> the expression each rule records (the raw queries PromSource runs without them)."""
    by_gpu = f"{host}, gpu"
    per_card = f"avg by ({by_gpu}) ({util_expr(by_gpu)})"
    return {
        "util": f"avg by ({host}) ({per_card})",
        "util_max": f"max by ({host}) ({per_card})",
        PROBE: f"count by ({host}) (group by ({by_gpu}) ({util_expr(by_gpu)}))",
        "fb_used": f"sum by ({host}) (DCGM_FI_DEV_FB_USED)",
        "fb_total": f"sum by ({host}) (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)",
        "temp": f"max by ({host}) (DCGM_FI_DEV_GPU_TEMP)",
        "power": f"sum by ({host}) (DCGM_FI_DEV_POWER_USAGE)",
        "xid": f"max by ({by_gpu}) (DCGM_FI_DEV_XID_ERRORS != 0)",
        "health": f"max by ({by_gpu}) (DCGM_EXP_GPU_HEALTH_STATUS > 0)",
    }


def rules_yaml(host: str = "Hostname", interval: str = "30s") -> str:
    """A Prometheus rules file (also vmalert's format): one group, evaluated at the DCGM scrape cadence."""
    names, exprs = rule_names(host), rule_exprs(host)
    doc = {"groups": [{"name": GROUP, "interval": interval,
                       "rules": [{"record": names[f], "expr": exprs[f]} for f in names]}]}
    header = (f"# gputui's recording rules: per-node GPU aggregates by {host}, named level:metric:operations.\n"
              "# Load into Prometheus (rule_files:) or vmalert; gputui reads them when their series exist.\n")
    return header + yaml.safe_dump(doc, sort_keys=False, width=200)


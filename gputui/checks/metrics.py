"""Checks on what the metrics store holds: DCGM and session series now (from the snapshot), GPU memory
growth over a window and the alert rules loaded (from CheckFacts). Anything the store cannot answer is
unknown, with the reason: a missing rules API or an exporter without pod labels is never a pass."""

from __future__ import annotations

from gputui.checks.context import CheckContext, unknown, verdict
from gputui.checks.result import CheckResult, Status
from gputui.vocabulary.check_facts import AlertRule
from gputui.vocabulary.exporter_counters import NEEDED, csv_line, not_collected, partly_collected
from gputui.vocabulary.gpu_metrics import BY_NAME
from gputui.vocabulary.sessions import SessionState

GROWTH_WARN_MIB = 1024.0  # a loaded engine preallocates its KV cache: a GiB more over the window is not noise
# The GPU signals an alert must watch (001 §3.5, §8): what the rule's query names, in words.
COVERED = (("XID errors", "DCGM_FI_DEV_XID_ERRORS"), ("temperature", BY_NAME["temp_c"].dcgm),
           ("GPU memory", "DCGM_FI_DEV_FB_"))
ASK_PROMETHEUS = "give --prometheus and check it answers"


def dcgm_series(ctx: CheckContext) -> CheckResult:
    id, seed, title = "metrics.dcgm", "001 §8, §9", "DCGM series for every GPU node"
    down = ctx.metrics_down()
    if down:
        return unknown(id, seed, title, down, ASK_PROMETHEUS)
    snap = ctx.snapshot
    bad = [n.name for n in snap.nodes if n.ready and n.gpu_capacity and not snap.gauges(n).reporting]
    return verdict(id, seed, title, bad, Status.FAIL, "Ready GPU nodes without DCGM series",
                   "check the dcgm-exporter pod on these nodes and its scrape", "every Ready GPU node reports")


def session_series(ctx: CheckContext) -> CheckResult:
    id, seed, title = "metrics.sessions", "001 §8", "session series for every inference pod"
    down = ctx.metrics_down()
    if down:
        return unknown(id, seed, title, down, ASK_PROMETHEUS)
    snap = ctx.snapshot
    bad = [p.key for p in snap.pods
           if p.phase == "Running" and not p.terminated and snap.sessions(p).state is SessionState.UNKNOWN]
    return verdict(id, seed, title, bad, Status.WARN, "inference pods whose sessions cannot be read",
                   "expose the engine's /metrics and scrape it (a drain waits on them blind)",
                   "every inference pod's sessions are read")


def fault_fields(ctx: CheckContext) -> CheckResult:
    """The GPU fault fields (exporter_counters.NEEDED) the metrics store holds no series of: not collected, so a
    GPU's faults cannot say them (never "healthy"); and those only some nodes' exporters serve. Named each, with the counters
    CSV line that exports it."""
    id, seed, title = "metrics.fault_fields", "000 §4, §6; 001 §8", "every GPU fault field collected"
    found = ctx.facts.fault_fields
    if found is None:
        return unknown(id, seed, title, ctx.facts.fault_fields_error or "not read", ASK_PROMETHEUS)
    missing = not_collected(found)
    partly = partly_collected(found)
    if not missing and not partly:
        return CheckResult(id, seed, title, Status.PASS, f"all {len(NEEDED)} fault fields have series")
    said = []
    if missing:
        said.append(f"{len(missing)} field{'s' * (len(missing) != 1)} not collected: {', '.join(missing)}")
    if partly:
        said.append(f"{len(partly)} field{'s' * (len(partly) != 1)} on some nodes only: "
                    + ", ".join(f"{f} (on {n} of {nodes} nodes)" for f, n, nodes in partly))
    fields = [*missing, *(f for f, _n, _nodes in partly)]
    return CheckResult(
        id, seed, title, Status.WARN, "; ".join(said), tuple(fields),
        "add to dcgm-exporter's counters CSV (its -f file; under the GPU Operator, the dcgmExporter.config "
        "ConfigMap) on every node and restart it:\n" + "\n".join(csv_line(f) for f in fields))


def _window(seconds: float) -> str:
    return f"{seconds / 3600:g}h" if seconds >= 3600 and seconds % 3600 == 0 else f"{seconds / 60:g}m"


def memory_growth(ctx: CheckContext) -> CheckResult:
    facts = ctx.facts
    window = _window(facts.window_s)
    id, seed, title = "gpu.memory", "001 §8", f"GPU memory stable over {window} (no pod gaining {GROWTH_WARN_MIB:g} MiB)"
    growth = facts.memory_growth_mib
    if growth is None:
        return unknown(id, seed, title, facts.memory_error, ASK_PROMETHEUS)
    bad = [f"{pod} (+{mib / 1024:.1f} GiB)" for pod, mib in sorted(growth.items(), key=lambda kv: -kv[1])
           if mib >= GROWTH_WARN_MIB]
    fine = (f"{len(growth)} pods' GPU memory flat over {window}" if growth
            else f"no pod's GPU series spans the last {window} yet")
    return verdict(id, seed, title, bad, Status.WARN, f"pods whose GPU memory grew over {window}",
                   "compare with the engine's KV-cache settings; a leak ends in CUDA OOM: plan a restart", fine)


def _gpu_rules(ctx: CheckContext, id: str, seed: str, title: str) -> list[AlertRule] | CheckResult:
    """The alerting rules on a DCGM signal, or the result to give when there are none to judge."""
    rules = ctx.facts.alert_rules
    if rules is None:
        return unknown(id, seed, title, ctx.facts.rules_error, "point --prometheus at the store that evaluates rules")
    gpu = [r for r in rules if "DCGM_" in r.query]
    if gpu:
        return gpu
    if id == "alerts.firing":  # none loaded is not "none firing"
        return unknown(id, seed, title, "no GPU alert rule loaded, so none could fire", "load GPU alert rules")
    return CheckResult(id, seed, title, Status.FAIL, f"no alerting rule on a DCGM signal ({len(rules)} alerting "
                       "rules loaded)", (), "load GPU alert rules (XID errors, temperature, memory) into Prometheus")


def alert_rules(ctx: CheckContext) -> CheckResult:
    id, seed, title = "alerts.rules", "001 §3.5, §8; 000 §6", "alert rules on GPU signals loaded and evaluating"
    gpu = _gpu_rules(ctx, id, seed, title)
    if isinstance(gpu, CheckResult):
        return gpu
    bad = [f"{r.name} (cannot evaluate: {r.error or r.health})" for r in gpu if r.health == "err"]
    bad += [f"nothing alerts on {words}" for words, metric in COVERED if not any(metric in r.query for r in gpu)]
    return verdict(id, seed, title, bad, Status.WARN, "gaps in GPU alerting",
                   "add or fix rules for these (a rule in error never fires)",
                   f"{len(gpu)} GPU alert rules evaluating; XID errors, temperature and memory covered")


def alerts_firing(ctx: CheckContext) -> CheckResult:
    id, seed, title = "alerts.firing", "001 §8", "no GPU alert firing"
    gpu = _gpu_rules(ctx, id, seed, title)
    if isinstance(gpu, CheckResult):
        return gpu
    bad = [f"{r.name} ({r.firing or 'some'} firing)" for r in gpu if r.state == "firing"]
    return verdict(id, seed, title, bad, Status.WARN, "GPU alerts firing",
                   "read them in Alertmanager; gputui's ! jumps to the next problem node",
                   f"none of {len(gpu)} GPU alert rules firing")

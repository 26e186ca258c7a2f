import subprocess
import sys
from contextlib import suppress

import yaml

from gputui.backends.recording_rules import PROBE, rule_exprs, rule_names, rules_yaml


def test_every_rule_is_named_level_metric_operations_by_its_host_label():
    for host in ("Hostname", "hostname"):
        doc = yaml.safe_load(rules_yaml(host))
        rules = doc["groups"][0]["rules"]
        assert [r["record"] for r in rules] == list(rule_names(host).values())
        assert [r["expr"] for r in rules] == list(rule_exprs(host).values())
        for r in rules:
            level, _metric, _ops = r["record"].split(":")
            assert level in (host, f"{host}_gpu") and f"by ({host}" in r["expr"]
    assert PROBE in rule_names("Hostname")


def test_bad_rules_flags_are_one_line():
    for args, says in ((["--host-label", "host name"], "not a Prometheus label name"),
                       (["--interval", "soon"], "not a Prometheus duration")):
        done = subprocess.run([sys.executable, "-m", "gputui", "rules", *args], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr


def test_rules_that_stop_being_evaluated_fall_back_to_the_raw_series_in_the_same_refresh():
    from gputui.backends.prom import PromConfig, PromSource
    from gputui.backends.prom_answers import series_by_label
    from gputui.backends.recording_rules import MODE_RAW, MODE_RECORDED

    src = PromSource(PromConfig("http://127.0.0.1:9", host_label="Hostname"))
    sent: list[str] = []
    evaluated = {"on": True}

    def query(promql: str) -> list[dict]:
        sent.append(promql)
        if "Hostname:gputui_gpu:count" in promql:  # the probe, and the count read with the figures
            return [{"metric": {"Hostname": "n1"}, "value": [0, "8"]}] if evaluated["on"] else []
        if "Hostname:gputui_gpu_util:avg" in promql:
            return [{"metric": {"Hostname": "n1"}, "value": [0, "40"]}] if evaluated["on"] else []
        if promql.startswith("avg by (Hostname)"):  # the raw aggregate
            return [{"metric": {"Hostname": "n1"}, "value": [0, "41"]}]
        return []

    src.query = query  # type: ignore[method-assign]
    src.query_by_host = lambda promql: series_by_label(query(promql), ["Hostname"])  # type: ignore[method-assign]
    src.query_counts = lambda promql: {}  # type: ignore[method-assign]  # no sessions here
    assert src.fetch({"n1"}, per_gpu=False).nodes["n1"].util_pct == 40.0 and src.mode == MODE_RECORDED
    evaluated["on"] = False  # the rule group was removed: its series are gone
    assert src.fetch({"n1"}, per_gpu=False).nodes["n1"].util_pct == 41.0 and src.mode == MODE_RAW


def test_a_probe_that_fails_is_asked_again_at_the_next_refresh_not_five_minutes_later():
    """The store did not answer when gputui first looked for its recorded series (a timeout, say): that says
    nothing about the rules, so the next refresh looks again, instead of reading raw series over every GPU for
    RULES_RECHECK_S (the cost the rules exist to spare at 65,000 nodes)."""
    from gputui.backends.base import BackendError
    from gputui.backends.prom import PromConfig, PromSource
    from gputui.backends.prom_answers import series_by_label
    from gputui.backends.recording_rules import MODE_RECORDED

    src = PromSource(PromConfig("http://127.0.0.1:9", host_label="Hostname"))
    answering = {"on": False}

    def query(promql: str) -> list[dict]:
        if not answering["on"]:
            raise BackendError("Prometheus at http://127.0.0.1:9: no answer within 3s")
        if "Hostname:gputui_gpu:count" in promql:
            return [{"metric": {"Hostname": "n1"}, "value": [0, "8"]}]
        if "Hostname:gputui_gpu_util:avg" in promql:
            return [{"metric": {"Hostname": "n1"}, "value": [0, "40"]}]
        return []

    src.query = query  # type: ignore[method-assign]
    src.query_by_host = lambda promql: series_by_label(query(promql), ["Hostname"])  # type: ignore[method-assign]
    src.query_counts = lambda promql: {}  # type: ignore[method-assign]  # no sessions here
    with suppress(BackendError):  # this refresh's metrics are unknown, as any failed read
        src.fetch({"n1"}, per_gpu=False)
    answering["on"] = True
    assert src.fetch({"n1"}, per_gpu=False).nodes["n1"].util_pct == 40.0 and src.mode == MODE_RECORDED

"""`gputui rules` loaded into a real Prometheus, and evaluated by vmalert into a real VictoriaMetrics: gputui
finds the recorded series and reads them, with the same per-node figures the same store's raw series give; the
session's Prometheus, which has no rules, is read raw."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import yaml

from gputui.backends.prom import PromConfig, PromSource
from gputui.backends.recording_rules import MODE_RAW, MODE_RECORDED
from tests.support.gputui_cli import run
from tests.support.procs import HarnessError, wait_until
from tests.support.prom import PrometheusServer, dcgm_scrape_config
from tests.support.victoria import VictoriaServer, Vmalert


@contextmanager
def store_with_rules(kind: str, rules: dict, dcgm_exporter) -> Iterator[str]:
    """A store scraping the session's exporter with the rules evaluated, as each is run: Prometheus loads them
    itself (promtool checks the file); VictoriaMetrics has vmalert evaluate them and write the results back."""
    ready = "Hostname:gputui_gpu:count"
    if kind == "prometheus":
        prom = PrometheusServer([dcgm_scrape_config(dcgm_exporter)], rules=rules)
        try:
            prom.start(ready=ready)
            assert [g["name"] for g in prom.rules_loaded()] == ["gputui.policy.fleet"]
            yield prom.url
        finally:
            prom.close()
        return
    vm = VictoriaServer([dcgm_scrape_config(dcgm_exporter)])
    alert = Vmalert(vm, rules)
    try:
        vm.start(ready="DCGM_FI_DEV_GPU_TEMP")
        alert.start()
        assert alert.groups() == ["gputui.policy.fleet"]
        wait_until(lambda: vm.query(ready), 30, what="vmalert's recorded series in VictoriaMetrics")
        yield vm.url
    finally:
        alert.close()
        vm.close()


@pytest.mark.parametrize("kind", ["prometheus", "victoria-metrics+vmalert"])
def test_recorded_series_are_read_when_the_rules_are_loaded_and_agree_with_the_raw_ones(dcgm_exporter, prometheus,
                                                                                         cluster, tmp_path, kind):
    """On a store that evaluates `gputui rules`, the recorded series give the figures its raw series give."""
    out = run("rules", home=tmp_path)
    assert out.returncode == 0, out.stderr
    rules = yaml.safe_load(out.stdout)
    names = [r["record"] for r in rules["groups"][0]["rules"]]
    assert all(name.count(":") == 2 for name in names)  # level:metric:operations
    rules["groups"][0]["interval"] = "1s"  # the test's scrape cadence
    with store_with_rules(kind, rules, dcgm_exporter) as url:
        hosts = {host for host, _ in dcgm_exporter.gpus()}
        with_rules = PromSource(PromConfig(url, timeout=10))
        # The raw series of the same store, as a store without the rules is read: one store, the same samples
        # (the session's Prometheus also holds other tests' history and lookback, so it is only asked its mode).
        raw = PromSource(PromConfig(url, timeout=10))
        raw._rules_checked_at, raw._recorded = float("inf"), None  # never looks for the rules
        without = PromSource(PromConfig(prometheus.url, timeout=10))
        without.fetch(hosts, per_gpu=False)
        assert without.mode == MODE_RAW  # no rules there: the raw series

        last: list[str] = []

        def agree():
            """Both reads alike. The recorded series trail the raw ones by up to an evaluation (other tests
            change the shared exporter's values, an XID for one), so agreement is waited for, not assumed."""
            a, b = with_rules.fetch(hosts, per_gpu=False), raw.fetch(hosts, per_gpu=False)
            # The session's Prometheus still answers for nodes other tests removed (its 5-minute lookback); the
            # new one never saw them: compare the exporter's nodes of now.
            last[:] = [f"recorded {a.nodes}", f"raw {b.nodes}", f"bad cards {set(a.gpus)} vs {set(b.gpus)}"]
            if not hosts <= set(a.nodes) or not hosts <= set(b.nodes):
                return None
            if {k for k in a.gpus if k[0] in hosts} != {k for k in b.gpus if k[0] in hosts}:
                return None
            for host in hosts:
                x, y = a.nodes[host], b.nodes[host]
                if (x.count, x.temp_c, x.mem_used_mib, x.power_w) != (y.count, y.temp_c, y.mem_used_mib, y.power_w):
                    return None
                if x.util_pct is None or abs(x.util_pct - (y.util_pct or 0)) >= 0.5:
                    return None
            return a

        try:
            wait_until(agree, 20, what="the recorded series to agree with the raw ones")
        except HarnessError:  # wait_until's timeout
            raise AssertionError("they never agreed; last reads:\n" + "\n".join(last)) from None
        assert with_rules.mode == MODE_RECORDED
        sent = with_rules.queries
        with_rules.fetch(hosts, per_gpu=False)
        assert with_rules.queries - sent <= 10  # one refresh, rules found: the recorded series and sessions

        # --debug says which mode is in force, on the real cluster: the recorded series here, raw without the rules.
        for store, said in ((url, "gputui's recorded series found (node label Hostname): reading them"),
                            (prometheus.url, "no recorded series of `gputui rules`: reading the raw DCGM series")):
            out = run("services", "--kubeconfig", str(cluster.admin_kubeconfig), "--prometheus", store, "--debug",
                      home=tmp_path)
            assert out.returncode == 0, out.stderr
            assert f"gputui debug: metrics: {said}" in out.stderr, out.stderr
            mode = MODE_RECORDED if store == url else MODE_RAW
            assert f"gputui debug: metrics: fleet read from the {mode}: " in out.stderr, out.stderr
            assert store not in out.stderr  # no address (one may carry credentials)

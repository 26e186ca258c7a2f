"""Debian's VictoriaMetrics (single node) on 127.0.0.1, scraping like the test Prometheus: the store built for
large series counts that gputui's queries must work against as well (issue 18). Same interface as
PrometheusServer for what the metrics tests use (url, start, stop, close, query, wait_until, backfill), and
vmalert evaluating rules for it: recording rules written back, alerting rules served through VictoriaMetrics'
own /api/v1/rules (its vmalert proxy), as a cluster that runs them wires it."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.support.exporters import format_labels, format_value
from tests.support.procs import LOOPBACK, HarnessError, ManagedProcess, free_port, http, port_is_free, wait_for
from tests.support.prom import Series
from tests.support.promql import PromQLQueries

BINARY = "victoria-metrics"


def find_victoria() -> str:
    path = shutil.which(BINARY)
    if path is None:
        raise HarnessError("victoria-metrics is not installed (scripts/test.sh installs Debian's package)")
    return path


class VictoriaServer(PromQLQueries):
    tag = "vm"

    def __init__(self, scrape_configs: list[dict[str, Any]], *, scrape_interval: str = "1s",
                 vmalert_proxy: str | None = None) -> None:
        self.binary = find_victoria()
        self.vmalert_proxy = vmalert_proxy  # a vmalert's URL: /api/v1/rules and /api/v1/alerts go there
        self.workdir = Path(tempfile.mkdtemp(prefix="gputui-vm-"))
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.config_file = self.workdir / "scrape.yml"
        self.config_file.write_text(yaml.safe_dump(
            {"global": {"scrape_interval": scrape_interval}, "scrape_configs": scrape_configs}, sort_keys=False))
        self.log_path = self.workdir / "victoria-metrics.log"
        self.proc: ManagedProcess | None = None
        self._http = http()

    def running(self) -> bool:
        return self.proc is not None and self.proc.running()

    def start(self, *, timeout: float = 30, ready: str | Callable[[VictoriaServer], Any] | None = None
              ) -> VictoriaServer:
        """Start, then wait for /health and for `ready` (a query that must return a series)."""
        wait_for(lambda: port_is_free(self.port), timeout=15, what=f"port {self.port} free for VictoriaMetrics")
        self.proc = ManagedProcess(BINARY, [
            self.binary, f"-httpListenAddr={LOOPBACK}:{self.port}", f"-storageDataPath={self.workdir / 'data'}",
            f"-promscrape.config={self.config_file}", "-retentionPeriod=1d",
            "-promscrape.config.strictParse=false",  # Prometheus-only fields (file_sd refresh_interval)
            "-promscrape.fileSDCheckInterval=1s",  # pods come and go in the file during a test
            # Answer with what was scraped a moment ago (the default hides the last 30 s).
            "-search.latencyOffset=0s",
            *([f"-vmalert.proxyURL={self.vmalert_proxy}"] if self.vmalert_proxy else []),
        ], self.log_path, cwd=self.workdir).start()
        self.proc.wait_ready(lambda: self._http.get(f"{self.url}/health", timeout=2).text.strip() == "OK",
                             timeout=timeout, what="GET /health == OK")
        if ready is not None:
            check = (lambda: self.query(ready)) if isinstance(ready, str) else (lambda: ready(self))
            self.proc.wait_ready(check, timeout=timeout, what=f"{ready!r} answered")
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=15)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def backfill(self, series: Iterable[Series]) -> None:
        """History written through the import API (Prometheus' text format with a time per sample), running:
        VictoriaMetrics takes samples of the past as they come."""
        lines = [f"{s.name}{format_labels(s.labels)} {format_value(v)} {int(t * 1000)}" for s in series for t, v in s.samples]
        r = self._http.post(f"{self.url}/api/v1/import/prometheus", data="\n".join(lines) + "\n", timeout=60)
        if r.status_code != 204:
            raise HarnessError(f"VictoriaMetrics import: {r.status_code} {r.text[:200]}")
        self._http.get(f"{self.url}/internal/force_flush", timeout=30)  # searchable now, not in a second or two

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr} if at is None else {"query": expr, "time": at}
        r = self._http.get(f"{self.url}/api/v1/query", params=params, timeout=10)
        body = r.json()
        if r.status_code != 200 or body.get("status") != "success":
            raise HarnessError(f"VictoriaMetrics query {expr!r}: {r.status_code} {body}")
        return body["data"]["result"]


class Vmalert:
    """Debian's vmalert evaluating a rules file against a VictoriaMetrics and writing the recorded series back
    into it (remote write): how VictoriaMetrics runs recording rules."""

    def __init__(self, store: VictoriaServer, rules: dict[str, Any]) -> None:
        """`store` need not run yet: this vmalert's url is known at once (for the store's vmalert proxy)."""
        path = shutil.which("vmalert")
        if path is None:
            raise HarnessError("vmalert is not installed (Debian's victoria-metrics package ships it)")
        self.binary = path
        self.store = store
        self.workdir = Path(tempfile.mkdtemp(prefix="gputui-vmalert-"))
        self.rules_file = self.workdir / "rules.yml"
        self.rules_file.write_text(yaml.safe_dump(rules, sort_keys=False))
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.proc: ManagedProcess | None = None
        self._http = http()
        self._sink: AlertSink | None = None

    def start(self, *, timeout: float = 30) -> Vmalert:
        # Alerting rules need somewhere to send alerts: a sink that takes them (no Alertmanager here).
        alerting = any("alert" in r for g in yaml.safe_load(self.rules_file.read_text())["groups"] for r in g["rules"])
        if alerting:
            self._sink = AlertSink()
        self.proc = ManagedProcess("vmalert", [
            self.binary, f"-rule={self.rules_file}", f"-datasource.url={self.store.url}",
            f"-remoteWrite.url={self.store.url}", f"-httpListenAddr={LOOPBACK}:{self.port}",
            "-evaluationInterval=1s", *([f"-notifier.url={self._sink.url}"] if self._sink else []),
        ], self.workdir / "vmalert.log", cwd=self.workdir).start()
        self.proc.wait_ready(lambda: self._http.get(f"{self.url}/health", timeout=2).text.strip() == "OK",
                             timeout=timeout, what="vmalert GET /health == OK")
        return self

    def groups(self) -> list[str]:
        body = self._http.get(f"{self.url}/api/v1/rules", timeout=5).json()
        return [g["name"] for g in body["data"]["groups"]]

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=15)
        if self._sink is not None:
            self._sink.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class AlertSink:
    """Takes what vmalert sends an Alertmanager (POST /api/v2/alerts) and drops it."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name (ruff knows it: no N802)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://{LOOPBACK}:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

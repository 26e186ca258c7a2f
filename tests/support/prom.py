"""A real Prometheus (Debian's /usr/bin/prometheus) for the integration tests.

Started on a free loopback port with a temporary config and data dir,
scraping the exporters of :mod:`tests.support.exporters` every second.
History can be backfilled before start with ``promtool tsdb
create-blocks-from openmetrics``. :meth:`PrometheusServer.stop` and
:meth:`PrometheusServer.start` keep the port and the data, so tests can take
Prometheus away and bring it back.
"""

from __future__ import annotations

import calendar
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.exporters import DcgmExporter, format_labels, format_value
from tests.support.procs import (
    LOOPBACK,
    HarnessError,
    ManagedProcess,
    free_port,
    http,
    port_is_free,
    run,
    wait_for,
)
from tests.support.promql import PromQLQueries

PROMETHEUS_BIN = os.environ.get("GPUTUI_PROMETHEUS_BIN", "/usr/bin/prometheus")
PROMTOOL_BIN = os.environ.get("GPUTUI_PROMTOOL_BIN", "/usr/bin/promtool")
DCGM_JOB = "dcgm-exporter"
INFERENCE_JOB = "inference"


def find_prometheus() -> tuple[str, str]:
    missing = [b for b in (PROMETHEUS_BIN, PROMTOOL_BIN) if not os.access(b, os.X_OK)]
    if missing:
        raise HarnessError(f"Prometheus binaries missing: {', '.join(missing)}. "
                           "Install them first: bash scripts/install-prometheus.sh")
    return PROMETHEUS_BIN, PROMTOOL_BIN


# --- scrape configs -------------------------------------------------------------

def dcgm_scrape_config(exporter: DcgmExporter, *, job: str = DCGM_JOB, honor_labels: bool = True,
                       target_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Scrape ``exporter`` (static target). ``target_labels`` e.g. the exporter
    pod's ``namespace``/``pod``: with ``honor_labels=False`` the GPU's own pod
    labels then arrive as ``exported_pod``/``exported_namespace``."""
    group: dict[str, Any] = {"targets": [exporter.address]}
    if target_labels:
        group["labels"] = dict(target_labels)
    return {"job_name": job, "honor_labels": honor_labels, "metrics_path": exporter.metrics_path,
            "static_configs": [group]}


def inference_scrape_config(sd_file: Path | str, *, job: str = INFERENCE_JOB) -> dict[str, Any]:
    """Scrape the per-pod targets listed in the file_sd JSON ``sd_file``."""
    return {"job_name": job, "file_sd_configs": [{"files": [str(sd_file)], "refresh_interval": "1s"}]}


# --- OpenMetrics for backfilling -----------------------------------------------------

@dataclass
class Series:
    """One series of history: ``samples`` are (unix seconds, value)."""

    name: str
    labels: dict[str, str]
    samples: Sequence[tuple[float, float]]
    type: str = "gauge"
    help: str = ""


def openmetrics_text(series: Iterable[Series]) -> str:
    """OpenMetrics text for promtool: families contiguous, samples in time
    order, timestamps in seconds, ending with ``# EOF``."""
    by_family: dict[str, list[Series]] = {}
    for s in series:
        by_family.setdefault(s.name, []).append(s)
    out: list[str] = []
    for name, group in by_family.items():
        typ = group[0].type
        if typ == "counter":
            raise ValueError("backfill counters as gauges (OpenMetrics counters need a _total suffix)")
        out.append(f"# HELP {name} {group[0].help or name}")
        out.append(f"# TYPE {name} {typ}")
        for s in group:
            labels = format_labels(s.labels)
            for ts, value in sorted(s.samples):
                out.append(f"{name}{labels} {format_value(value)} {ts:.3f}")
    out.append("# EOF")
    return "\n".join(out) + "\n"


class PrometheusServer(PromQLQueries):
    """Debian's Prometheus on 127.0.0.1:<free port> with its own config and data dir."""

    tag = "prom"

    def __init__(self, scrape_configs: list[dict[str, Any]], *, workdir: Path | None = None, port: int | None = None,
                 scrape_interval: str = "1s", keep_workdir: bool = False, rules: dict[str, Any] | None = None):
        self.prometheus_bin, self.promtool_bin = find_prometheus()
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="gputui-prom-"))
        self.keep_workdir = keep_workdir or os.environ.get("GPUTUI_KEEP_TEST_DIRS") == "1"
        self.port = port or free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.config_file = self.workdir / "prometheus.yml"
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "prometheus.log"
        self.scrape_interval = scrape_interval
        self.scrape_configs = scrape_configs
        #: a Prometheus rules document ({"groups": [...]}), evaluated every scrape interval
        self.rules = rules
        self.rules_file = self.workdir / "rules.yml"
        self.proc: ManagedProcess | None = None
        self._http = http()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.last_start_seconds: float | None = None
        #: (first, last) sample time of everything backfilled so far
        self.history_window: tuple[float, float] | None = None
        self.write_config()

    # --- config / data -------------------------------------------------------------
    def write_config(self) -> None:
        cfg = {
            "global": {"scrape_interval": self.scrape_interval, "scrape_timeout": self.scrape_interval,
                       "evaluation_interval": self.scrape_interval},
            "scrape_configs": self.scrape_configs,
        }
        if self.rules is not None:
            self.rules_file.write_text(yaml.safe_dump(self.rules, sort_keys=False))
            cfg["rule_files"] = [str(self.rules_file)]
        self.config_file.write_text(yaml.safe_dump(cfg, sort_keys=False))
        run([self.promtool_bin, "check", "config", self.config_file], timeout=30)

    def backfill(self, series: Iterable[Series] | str) -> None:
        """Write history into the data dir with promtool (Prometheus must be stopped).

        ``series`` are :class:`Series` or ready OpenMetrics text.
        """
        if self.running():
            raise HarnessError("backfill needs Prometheus stopped (call stop() first)")
        if isinstance(series, str):
            text = series
        else:
            series = list(series)
            times = [t for s in series for t, _ in s.samples]
            if times:
                lo, hi = min(times), max(times)
                if self.history_window:
                    lo, hi = min(lo, self.history_window[0]), max(hi, self.history_window[1])
                self.history_window = (lo, hi)
            text = openmetrics_text(series)
        src = self.workdir / f"backfill-{time.time_ns()}.om"
        src.write_text(text)
        run([self.promtool_bin, "tsdb", "create-blocks-from", "openmetrics", src, self.data_dir], timeout=120)
        src.unlink()

    # --- lifecycle ------------------------------------------------------------------
    def running(self) -> bool:
        return self.proc is not None and self.proc.running()

    def start(self, *, timeout: float = 20, ready: Callable[[PrometheusServer], Any] | str | None = None
              ) -> PrometheusServer:
        """Start and wait until queries return data.

        ``ready``: a PromQL expression that must return at least one series,
        or a callable taking this server; default: every active target is up.
        """
        if self.running():
            raise HarnessError("Prometheus is already running")
        t0 = time.monotonic()
        wait_for(lambda: port_is_free(self.port), timeout=15, what=f"port {self.port} to be free for Prometheus")
        self.proc = ManagedProcess("prometheus", [
            self.prometheus_bin,
            f"--config.file={self.config_file}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            "--storage.tsdb.retention.time=1d",
            "--web.enable-lifecycle",
            "--log.level=info",
        ], self.log_path, cwd=self.workdir).start()
        self.proc.wait_ready(lambda: self._http.get(f"{self.url}/-/ready", timeout=2).status_code == 200,
                             timeout=timeout, what="GET /-/ready == 200")
        started_at = time.time()
        extra: Callable[[], Any] | None = None
        if isinstance(ready, str):
            extra = lambda: self.query(ready)  # noqa: E731
        elif ready is not None:
            extra = lambda: ready(self)  # noqa: E731

        def check() -> Any:
            # Live data only: backfilled or pre-restart samples are still
            # inside the 5-minute lookback, so "the series exists" is not enough.
            if not self._all_targets_scraped_since(started_at):
                return False
            return extra() if extra else True

        remaining = max(1.0, timeout - (time.monotonic() - t0))
        self.proc.wait_ready(check, timeout=remaining,
                             what=f"every target scraped and up{f', then {ready!r}' if ready else ''}")
        self.last_start_seconds = time.monotonic() - t0
        return self

    def targets(self) -> list[dict[str, Any]]:
        r = self._http.get(f"{self.url}/api/v1/targets", params={"state": "active"}, timeout=3)
        return r.json()["data"]["activeTargets"]

    def _all_targets_scraped_since(self, since: float) -> bool:
        targets = self.targets()
        for t in targets:
            if t["health"] != "up":
                return False
            last = t.get("lastScrape", "")
            if not last or last.startswith("0001-"):
                return False
            # e.g. 2026-11-30T12:40:01.123456789Z
            secs = calendar.timegm(time.strptime(last[:19], "%Y-%m-%dT%H:%M:%S"))
            if secs + 1 < since:
                return False
        return bool(targets)

    def stop(self) -> None:
        """Stop (SIGTERM, wait, SIGKILL) and wait for the process to exit; data is kept."""
        if self.proc is not None:
            self.proc.stop(timeout=15)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def restart(self, **kw: Any) -> None:
        self.stop()
        self.start(**kw)

    def reload(self) -> None:
        """Re-read the config (after changing ``scrape_configs`` and :meth:`write_config`)."""
        r = self._http.post(f"{self.url}/-/reload", timeout=10)
        if r.status_code != 200:
            raise HarnessError(f"Prometheus reload failed: {r.status_code} {r.text}")

    def close(self) -> None:
        """Stop and remove the temporary directory."""
        self.stop()
        if self._own_workdir and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def tail(self, lines: int = 40) -> str:
        return self.proc.describe_failure(lines) if self.proc else "(never started)"

    # --- queries --------------------------------------------------------------------
    def _api(self, path: str, params: dict[str, Any]) -> Any:
        r = self._http.get(f"{self.url}{path}", params=params, timeout=10)
        body = r.json()
        if r.status_code != 200 or body.get("status") != "success":
            raise HarnessError(f"Prometheus {path} {params}: {r.status_code} {body}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query; returns the API's ``result`` list."""
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = at
        return self._api("/api/v1/query", params)["result"]

    def rules_loaded(self) -> list[dict[str, Any]]:
        """Every rule group Prometheus evaluates (its rules API)."""
        return self._api("/api/v1/rules", {})["groups"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        return self._api("/api/v1/query_range", {"query": expr, "start": start, "end": end, "step": step})["result"]


def dcgm_history(exporter: DcgmExporter, prom_labels: dict[str, str], *, field: str, start: float, end: float,
                 step: float, value: Callable[[str, int, float], float]) -> list[Series]:
    """History series for one DCGM field of every GPU of ``exporter``.

    Labels are exactly what the live scrape produces (exporter labels plus
    ``prom_labels``, i.e. ``job`` and ``instance``), so backfilled history and
    live samples form one series. ``value(node, gpu, t)`` gives the sample.
    """
    from tests.support.exporters import DCGM_FIELDS

    metric, help_, _ = DCGM_FIELDS[field]
    out = []
    n = int((end - start) // step)
    times = [start + i * step for i in range(n + 1)]
    for node, gpu in exporter.gpus():
        labels = {**exporter.labels(node, gpu, field), **prom_labels}
        out.append(Series(metric, labels, [(t, value(node, gpu, t)) for t in times], help=help_))
    return out

"""DCGM and inference-session metrics from Prometheus (prometheus-api-client).

A read costs a fixed number of queries whatever the cluster's size: one per
DCGM field for the whole fleet (labels trimmed with `max by`, so 10,000 nodes
stay a few MB), one for every pod's live sessions (running and queued), and
kube_pod_info only when the exporter's host label holds pod names. The reader
decides how often the DCGM part is due (`sessions()` alone in between). Every
call has a timeout and no retry: a dead Prometheus must never stall the screen.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from math import isfinite
from typing import Any

import requests
from urllib3.util import Retry

from gputui.backends.base import BackendError
from gputui.backends.gcpause import gc_paused
from gputui.backends.join import Metrics
from gputui.backends.join_fleet import GpuSample
from gputui.backends.prom_answers import LastAnswers, series_by_label, values_by_label
from gputui.backends.recording_rules import (
    MODE_RAW,
    MODE_RECORDED,
    PROBE,
    PROBLEMS,
    count_expr,
    gpu_expr,
    node_expr,
    problem_expr,
    rule_names,
    util_expr,
)
from gputui.backends.session_metrics import BUILTIN_ENGINES, Engine, counts_by_pod, counts_from_body
from gputui.backends.session_metrics import query as session_query
from gputui.base.debug_log import log
from gputui.base.errors import TRANSPORT_MARKERS, first_line, one_line, transport_reason
from gputui.vocabulary.gpu_metrics import (
    BY_NAME,
    COLUMNS,
    FAULT_FIELDS,
    METRICS,
    NO_VALUES,
    TYPED,
    extra_of,
    fault_series,
    figures_of,
)
from gputui.vocabulary.model import GpuSummary
from gputui.vocabulary.sessions import SessionCounts

HOST_LABELS = ("Hostname", "hostname")
SESSIONS = "sessions"  # the name of a refresh's session query
FAULTS = "faults"  # a per-GPU read's query of the fields that predict a failure (gpu_metrics.FAULT_FIELDS)
COUNT = "count"  # a fleet read's GPUs per node
BY_HOST = (*(m.name for m in COLUMNS), COUNT)  # a fleet read's per-node answers: the table's columns and the count
DEFAULT_TIMEOUT_S = 3.0
RULES_RECHECK_S = 300.0  # recording rules loaded or dropped are noticed within this


@dataclass(frozen=True, slots=True)
class PromConfig:
    url: str
    timeout: float = DEFAULT_TIMEOUT_S
    bearer_token: str | None = None
    basic_auth: tuple[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # e.g. X-Scope-OrgID
    verify_tls: bool = True
    ca_file: str | None = None
    host_label: str | None = None  # None: accept both spellings
    engines: tuple[Engine, ...] = BUILTIN_ENGINES  # which series carry each engine's live requests
    # False: no session series are read (every count stays unknown). The fleet view's readers: a cluster's row
    # shows no sessions, and every pod's series each refresh was most of what a reader cost (benchmarks/fleet.py).
    sessions: bool = True


def _one_line(exc: Exception) -> str:
    if isinstance(exc, requests.HTTPError) or "HTTP Status Code" in str(exc):
        return first_line(str(exc), 120)
    reason = transport_reason(exc)
    return reason if reason in (m.lower() for m in TRANSPORT_MARKERS) else one_line(exc)


class PromSource:
    def __init__(self, cfg: PromConfig) -> None:
        from prometheus_api_client import PrometheusConnect  # noqa: PLC0415 (prometheus_api_client: only when a metrics store is given)

        self.cfg = cfg
        session = requests.Session()
        session.verify = cfg.ca_file or cfg.verify_tls
        headers = dict(cfg.headers)
        if cfg.bearer_token:
            headers["Authorization"] = f"Bearer {cfg.bearer_token}"
        self._prom = PrometheusConnect(
            url=cfg.url, headers=headers or None, retry=Retry(total=0), session=session,
            auth=cfg.basic_auth, timeout=cfg.timeout, method="POST",
        )
        self.queries = 0  # for the benchmark: queries sent so far
        self._last = LastAnswers()
        self.session_query = session_query(cfg.engines)
        # Whether gputui's recording rules are loaded (recording_rules): the host label their series carry, or None
        # (raw series); looked for at the first fleet read and every RULES_RECHECK_S after.
        self._recorded: str | None = None
        self._rules_checked_at: float | None = None
        self.mode = MODE_RAW
        self._mode_said: str | None = None  # the mode --debug last reported

    def _why(self, exc: Exception) -> str:
        """One line for a failed request; a timeout says how long it waited and which setting lengthens it (at
        tens of thousands of nodes the default is too short for a busy store, and every count goes unknown)."""
        why = _one_line(exc)
        return f"{why} after {self.cfg.timeout:g}s (prometheus_timeout)" if why == "timed out" else why

    def query(self, promql: str) -> list[dict[str, Any]]:
        self.queries += 1
        try:
            return self._prom.custom_query(promql, timeout=self.cfg.timeout)
        except Exception as exc:  # noqa: BLE001 - requests errors and PrometheusApiClientException alike
            raise BackendError(self._why(exc)) from None

    def _answer(self, promql: str) -> bytes:
        """A query's answer, undecoded: sent as custom_query sends a query, with the same errors."""
        self.queries += 1
        prom = self._prom
        try:
            response = prom._session.request("POST", f"{prom.url}/api/v1/query", params={"query": promql},
                                             headers=prom.headers, auth=self.cfg.basic_auth, timeout=self.cfg.timeout)
            body = response.content
        except Exception as exc:  # noqa: BLE001 - requests errors, as query() reports them
            raise BackendError(self._why(exc)) from None
        if response.status_code != 200:
            raise BackendError(first_line(f"HTTP Status Code {response.status_code} ({body!r})", 120))
        return body

    @staticmethod
    def _series(body: bytes) -> list[dict[str, Any]]:
        try:
            series = json.loads(body)["data"]["result"]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: nesting past Python's limit
            raise BackendError(f"not a query answer: {one_line(exc)}") from None
        return series if isinstance(series, list) else []

    def query_counts(self, promql: str) -> dict[tuple[str, str], int]:
        """A per-pod query's answer as counts per (namespace, pod): read straight from the body when every
        series has the plain shape (session_metrics.counts_from_body), else through the JSON decoder. The
        last answer's object when this one says the same (prom_answers.LastAnswers)."""
        def parse(body: bytes) -> dict[tuple[str, str], int]:
            found = counts_from_body(body)
            return found if found is not None else counts_by_pod(self._series(body))

        return self._last.read(promql, self._answer(promql), parse)

    def query_by_host(self, promql: str) -> dict[str, float]:
        """A per-node query's answer as host -> value: straight from the body when every series has the plain
        shape (prom_answers), else through the JSON decoder; either way NaN and Inf are left out. The last
        answer's object when this one says the same (prom_answers.LastAnswers)."""
        def parse(body: bytes) -> dict[str, float]:
            found = values_by_label(body, self.host_labels)
            return found if found is not None else series_by_label(self._series(body), self.host_labels)

        return self._last.read(promql, self._answer(promql), parse)

    def api_get(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        """Another endpoint of the same API (e.g. /api/v1/rules), with the same auth, headers and timeout."""
        self.queries += 1
        try:
            response = self._prom._session.get(self.cfg.url.rstrip("/") + path, params=dict(params),
                                               headers=self._prom.headers, auth=self.cfg.basic_auth,
                                               timeout=self.cfg.timeout)
            response.raise_for_status()
            body = response.json()
        except Exception as exc:  # noqa: BLE001 - transport, HTTP status and a body that is not JSON alike
            raise BackendError(self._why(exc)) from None
        if not isinstance(body, dict) or body.get("status") != "success":
            raise BackendError(f"{path}: {first_line(str(body.get('error') if isinstance(body, dict) else body), 120)}")
        data = body.get("data")
        return data if isinstance(data, dict) else {}

    def _run(self, queries: Mapping[str, str], by_host: Collection[str] = ()) -> dict[str, Any]:
        """All queries of a refresh in parallel; the first error is raised. The session query's answer
        comes as counts per pod (query_counts), those named in `by_host` as host -> value (query_by_host),
        the others as the API's series."""
        def reader(name: str) -> Callable[[str], Any]:
            return self.query_counts if name == SESSIONS else self.query_by_host if name in by_host else self.query

        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = {name: pool.submit(reader(name), q) for name, q in queries.items()
                       if name != SESSIONS or self.cfg.sessions}
            return {SESSIONS: {}, **{name: f.result() for name, f in futures.items()}}

    def _host(self, labels: Mapping[str, str]) -> str:
        if self.cfg.host_label:
            return labels.get(self.cfg.host_label, "")
        return labels.get(HOST_LABELS[0]) or labels.get(HOST_LABELS[1]) or ""

    @property
    def host_labels(self) -> list[str]:
        """The labels that may name a series' node: the configured one, else dcgm-exporter's two spellings."""
        return [self.cfg.host_label] if self.cfg.host_label else list(HOST_LABELS)

    def _by(self) -> str:
        return ", ".join([*self.host_labels, "gpu"])

    def fetch(self, node_names: set[str], per_gpu: bool = True, host: str | None = None,
              host_label: str | None = None) -> Metrics:
        """One query per field for the whole fleet, in parallel, labels trimmed to what the join needs.

        per_gpu=False (the dashboard of a large fleet): Prometheus aggregates per node, so a
        refresh moves one series per node and field, not one per GPU; GPUs with an XID or
        failed health still come one by one. host limits every query to one node.
        """
        started, sent = time.monotonic(), self.queries
        with gc_paused():  # tens of thousands of series decoded per refresh (see gcpause)
            read = self._fetch_fleet(node_names) if not per_gpu else self._fetch_gpus(node_names, host, host_label)
        if not per_gpu and self.mode != self._mode_said:  # (a per-GPU read always reads the raw series)
            self._mode_said = self.mode
            log.debug("metrics: %s", f"gputui's recorded series found (node label {self._recorded}): reading them"
                      if self.mode == MODE_RECORDED else "no recorded series of `gputui rules`: reading the raw DCGM series")
        log.debug("metrics: %s read from the %s: %d queries, %.0f ms, %d nodes, %d GPUs, %d pods' sessions",
                  "per-GPU" if per_gpu else "fleet", self.mode if not per_gpu else MODE_RAW, self.queries - sent,
                  (time.monotonic() - started) * 1000, len(read.nodes or {}), len(read.gpus), len(read.sessions))
        return read

    def _fetch_gpus(self, node_names: set[str], host: str | None, host_label: str | None) -> Metrics:
        by = self._by()
        matchers = self._host_selector(host, host_label)[1:-1]
        # Every figure of the table, one value per GPU (a MIG GPU: the mean of its instances' series, which carry
        # the parent's UUID); only the GPUs with an XID or failed health (problem_expr).
        queries = {m.name: gpu_expr(m, f"{by}, UUID", matchers) for m in METRICS}
        queries.update({f: problem_expr(f, by, matchers) for f in PROBLEMS})
        queries[FAULTS] = fault_series(f"{by}, UUID", matchers)  # one query for every fault field
        queries[SESSIONS] = self.session_query
        results = self._run(queries)

        values: dict[tuple[str, int], dict[str, Any]] = {}
        for name in (*BY_NAME, *PROBLEMS, FAULTS):
            for series in results[name]:
                labels = series.get("metric", {})
                field = labels.get("__name__", "") if name == FAULTS else name  # a fault field by its DCGM name
                if field not in FAULT_FIELDS and name == FAULTS:
                    continue
                try:
                    index = int(labels.get("gpu", ""))
                    value = float(series["value"][1])
                except (KeyError, ValueError, TypeError, IndexError):
                    continue
                if not isfinite(value):
                    continue  # NaN or Inf says nothing: the field stays unknown
                host = self._host(labels)
                if not host:
                    continue
                slot = values.setdefault((host, index), {})
                if labels.get("UUID"):
                    slot.setdefault("uuid", labels["UUID"])
                slot[field] = value
        unknown = {host for host, _ in values if host not in node_names}
        if unknown:
            rename = self._hosts_via_pod_info(unknown)
            values = {(rename.get(h, h), i): v for (h, i), v in values.items()}
        gpus = {key: _sample(key, slot) for key, slot in values.items()}
        return Metrics(gpus=gpus, sessions=results[SESSIONS])

    def _host_selector(self, host: str | None, host_label: str | None = None) -> str:
        if host is None:
            return ""
        escaped = host.replace("\\", "\\\\").replace('"', '\\"')
        label = host_label or self.cfg.host_label or "Hostname"
        return f'{{{label}="{escaped}"}}'

    def _rules_host(self) -> str | None:
        """The host label of gputui's recorded series when they exist (one query per host label)."""
        for host in self.host_labels:
            if self.query(f"count({rule_names(host)[PROBE]})"):
                return host
        return None

    def _fetch_fleet(self, node_names: set[str]) -> Metrics:
        now = time.monotonic()
        if self._rules_checked_at is None or now - self._rules_checked_at >= RULES_RECHECK_S:
            self._recorded = self._rules_host()  # a probe that fails raises: looked for again next refresh
            self._rules_checked_at = now
        if self._recorded is not None:
            names, host = rule_names(self._recorded), self._recorded
            # Aggregated by the host label alone: the answer then has the plain shape (no __name__, no label a
            # store adds, such as a replica's), and two replicas' copies of a series count once. A column without
            # a rule of its own is read from the raw series.
            queries = {m.name: f"max by ({host}) ({names[m.name]})" if m.recorded else node_expr(m, host, f"{host}, gpu")
                       for m in COLUMNS}
            results = self._run({**queries, COUNT: f"max by ({host}) ({names[PROBE]})",
                                 **{f: names[f] for f in PROBLEMS}, SESSIONS: self.session_query}, BY_HOST)
            if results[COUNT]:
                self.mode = MODE_RECORDED
                return self._fleet_metrics(node_names, results)
            self._recorded = None  # the rules stopped being evaluated: the raw series, at once
        self.mode = MODE_RAW
        by_host = ", ".join(self.host_labels)
        by_gpu = self._by()
        # A MIG GPU is the mean of its instances, then counts once, like any card, in its node's mean.
        queries = {m.name: node_expr(m, by_host, by_gpu) for m in COLUMNS}
        queries.update({COUNT: count_expr(by_host, by_gpu), **{f: problem_expr(f, by_gpu) for f in PROBLEMS},
                        SESSIONS: self.session_query})
        return self._fleet_metrics(node_names, self._run(queries, BY_HOST))

    def _fleet_metrics(self, node_names: set[str], results: Mapping[str, Any]) -> Metrics:
        answers = tuple(results[f] for f in BY_HOST)  # host -> value, each
        problems: dict[tuple[str, int], dict[str, Any]] = {}
        for fieldname in PROBLEMS:
            for series in results[fieldname]:
                labels = series.get("metric", {})
                try:
                    index, value = int(labels.get("gpu", "")), int(float(series["value"][1]))
                except (KeyError, ValueError, TypeError, IndexError, OverflowError):
                    continue
                host = self._host(labels)
                if host:
                    problems.setdefault((host, index), {})[fieldname] = value
        def summaries() -> tuple[dict[str, GpuSummary], dict[str, str]]:
            count = results[COUNT]
            hosts = set(count).union(*(results[m.name] for m in COLUMNS))
            unknown = hosts - node_names
            rename = self._hosts_via_pod_info(unknown) if unknown else {}
            # The typed figures in the record's order (a column or not: None when the fleet view does not read
            # it), the others in its `extra`.
            util, used, total, temp, power = (results[name].get if name in results else _none for name in TYPED)
            others = [m.name for m in COLUMNS if m.name not in TYPED]
            return {rename.get(h, h): GpuSummary(int(count.get(h, 0)), util(h), used(h), total(h), temp(h), power(h),
                                                 extra_of({n: results[n].get(h) for n in others})
                                                 if others else NO_VALUES)
                    for h in hosts}, rename

        # The same answers (nothing new in the store) and nodes: the same summaries, not 65,000 built again.
        nodes, rename = self._last.made("summaries", answers, summaries, node_names)
        gpus = {
            (rename.get(h, h), i): GpuSample(host=rename.get(h, h), index=i, xid=p.get("xid", 0), health=p.get("health"))
            for (h, i), p in problems.items()
        }
        return Metrics(gpus=gpus, nodes=nodes, sessions=results[SESSIONS])

    def sessions(self) -> SessionCounts:
        """Live requests of every inference pod: the part of a refresh that cannot wait for the next
        DCGM read (one query over a few series per pod)."""
        if not self.cfg.sessions:
            return {}
        started = time.monotonic()
        with gc_paused():
            read = self.query_counts(self.session_query)
        log.debug("metrics: sessions read: 1 query, %.0f ms, %d pods", (time.monotonic() - started) * 1000, len(read))
        return read

    def sessions_for(self, pods: Iterable[tuple[str, str]]) -> SessionCounts:
        """Live requests of a few pods (namespace, name): what a running drain polls, one small query
        instead of a whole refresh. Pods without a session series are absent."""
        wanted = set(pods)
        if not wanted:
            return {}
        with gc_paused():
            found = self.query_counts(session_query(self.cfg.engines, (name for _ns, name in wanted)))
        return {key: count for key, count in found.items() if key in wanted}  # same name, other namespace

    def _hosts_via_pod_info(self, hosts: set[str]) -> dict[str, str]:
        """When the host label holds the exporter pod's name, kube_pod_info knows its node."""
        pods = "|".join(sorted(h.replace(".", "\\\\.") for h in hosts)[:500])
        out = {}
        for s in self.query('kube_pod_info{pod=~"%s"}' % pods):
            labels = s.get("metric", {})
            if labels.get("pod") and labels.get("node"):
                out[labels["pod"]] = labels["node"]
        return out

    def gpu_history(self, node: str, minutes: int) -> dict[int, list[float | None]]:
        end = time.time()
        escaped = node.replace("\\", "\\\\").replace('"', '\\"')
        by = self._by()
        matchers = [f'{label}="{escaped}"' for label in self.host_labels]
        promql = " or ".join(f"avg by (gpu) ({util_expr(by, m)})" for m in matchers)
        self.queries += 1
        try:
            result = self._prom.custom_query_range(
                promql, start_time=_dt(end - minutes * 60), end_time=_dt(end), step="10s",
                params={"timeout": f"{max(1, round(self.cfg.timeout))}s"},  # Prometheus takes no decimals
            )
        except Exception as exc:  # noqa: BLE001 - requests errors and PrometheusApiClientException alike
            raise BackendError(self._why(exc)) from None
        out: dict[int, list[float | None]] = {}
        for s in result:
            try:
                index = int(s["metric"].get("gpu", ""))
            except ValueError:
                continue
            out[index] = [finite(v) for _, v in s.get("values", [])]
        return out

    def close(self) -> None:
        self._prom._session.close()


def _none(host: str) -> None:
    return None


def _sample(key: tuple[str, int], slot: Mapping[str, Any]) -> GpuSample:
    """A GPU's sample from its answers by name: the table's figures (known ones only), its XID and health (a GPU
    reporting utilisation and no failed health passes; one reporting nothing is unknown)."""
    figures = figures_of({name: slot[name] for name in (*BY_NAME, *FAULT_FIELDS) if name in slot})
    health = slot.get("health")
    return GpuSample(host=key[0], index=key[1], uuid=slot.get("uuid", ""), values=figures,
                     xid=int(slot.get("xid", 0)),
                     health=int(health) if health is not None else 0 if "util_pct" in slot else None)


def finite(text: Any) -> float | None:
    """A sample as a number, None when it is NaN, +-Inf or not a number (drawn as unknown, not as 0)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if isfinite(value) else None


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)

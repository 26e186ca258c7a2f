"""Metric exporters the integration tests serve for a real Prometheus to scrape.

* :class:`DcgmExporter`: NVIDIA dcgm-exporter's metric and label names, one
  series per GPU per node, values settable by the test.
* :class:`InferenceExporter`: per-pod inference-server metrics (vLLM names by
  default). As in a real cluster the server does not label its series with
  the pod: ``pod`` and ``namespace`` come from the scrape target. Each pod is
  a target (its own path on one HTTP server) listed in a file_sd JSON file
  that the exporter rewrites when pods come and go.

Both are stdlib ``http.server`` servers on 127.0.0.1, in daemon threads.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.procs import LOOPBACK

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_label_value(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape_label_value(str(v))}"' for k, v in labels.items()) + "}"


def format_value(v: float) -> str:
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+Inf" if v > 0 else "-Inf"
        if v.is_integer():
            return str(int(v))
        return repr(v)
    return str(v)


@dataclass
class Family:
    name: str
    help: str
    type: str = "gauge"
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)


def render_text(families: Iterable[Family]) -> str:
    """Prometheus text exposition format 0.0.4."""
    out: list[str] = []
    for fam in families:
        if not fam.samples:
            continue
        out.append(f"# HELP {fam.name} {fam.help}")
        out.append(f"# TYPE {fam.name} {fam.type}")
        for labels, value in fam.samples:
            out.append(f"{fam.name}{format_labels(labels)} {format_value(value)}")
    return "\n".join(out) + "\n"


class _ScrapedServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A scraper that gave up (its timeout, a test's client closed) is no error of the exporter's: socketserver
        printed each such BrokenPipe as a traceback in the middle of pytest's output."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class MetricsHTTPServer:
    """A tiny HTTP server: ``handler(path) -> text or None (404)``."""

    def __init__(self, handler: Callable[[str], str | None], port: int = 0):
        outer = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's name (ruff knows it: no N802)
                outer.requests += 1
                body = handler(self.path.split("?", 1)[0])
                if body is None:
                    self.send_error(404)
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = _ScrapedServer((LOOPBACK, port), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.address = f"{LOOPBACK}:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"metrics-http-{self.port}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


# --- DCGM exporter -------------------------------------------------------------

#: field name -> (metric name, help, type)
DCGM_FIELDS: dict[str, tuple[str, str, str]] = {
    "util": ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge"),
    "mem_copy_util": ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "gauge"),
    "fb_used": ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge"),
    "fb_free": ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "gauge"),
    "fb_reserved": ("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", "gauge"),
    "temp": ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge"),
    "memory_temp": ("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", "gauge"),
    "power": ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge"),
    "energy": ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
               "Total energy consumption since boot (in mJ).", "counter"),
    "sm_clock": ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge"),
    "mem_clock": ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "gauge"),
    "xid": ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "gauge"),
    "pcie_replay": ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", "counter"),
    "clocks_event_reasons": ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Current clock event reasons (bitmask).", "gauge"),
    # The same field as builds before DCGM 3.3 name it: served only when a test sets it (see DCGM_DEFAULTS).
    "clock_throttle_reasons": ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons (bitmask).",
                               "gauge"),
    "uncorrectable_remapped_rows": ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                                    "Number of remapped rows for uncorrectable errors", "counter"),
    "correctable_remapped_rows": ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                                  "Number of remapped rows for correctable errors", "counter"),
    "row_remap_failure": ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed", "gauge"),
    "gr_engine_active": ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", "gauge"),
    "tensor_active": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.",
                      "gauge"),
    "dram_active": ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active.",
                    "gauge"),
}
_DCGM_BY_METRIC = {m: f for f, (m, _, _) in DCGM_FIELDS.items()}

# A field whose value is None is not served for that GPU (a build without it, or a series gone).
DCGM_DEFAULTS: dict[str, float | None] = {
    "util": 0, "mem_copy_util": 0, "fb_used": 0, "fb_reserved": 512, "temp": 34, "memory_temp": 40,
    "power": 72.5, "energy": 0, "sm_clock": 1980, "mem_clock": 2619, "xid": 0, "pcie_replay": 0,
    "clocks_event_reasons": 0, "clock_throttle_reasons": None,
    "uncorrectable_remapped_rows": 0, "correctable_remapped_rows": 0, "row_remap_failure": 0,
    "gr_engine_active": 0, "tensor_active": 0, "dram_active": 0,
}


@dataclass
class DcgmGpu:
    node: str
    index: int
    model: str
    driver: str
    fb_total_mib: int
    uuid: str
    pci_bus_id: str
    host_value: str
    values: dict[str, float | None] = field(default_factory=dict)
    pod: dict[str, str] | None = None  # namespace/pod/container labels when a pod holds the GPU
    # MIG instances (GPU_I_PROFILE, GPU_I_ID, graphics-engine activity 0..1): as dcgm-exporter serves a MIG
    # GPU, its utilisation gauge is then absent and each instance has its own profiling series.
    mig: list[tuple[str, int, float]] = field(default_factory=list)

    def value(self, fld: str) -> float | None:
        if fld in self.values:
            return self.values[fld]
        if fld == "fb_free":
            return max(0, self.fb_total_mib - (self.value("fb_used") or 0) - (self.value("fb_reserved") or 0))
        return DCGM_DEFAULTS.get(fld, 0)


class DcgmExporter:
    """dcgm-exporter for any number of nodes, all served from one endpoint.

    ``host_label`` is ``"Hostname"`` (released dcgm-exporter) or
    ``"hostname"`` (newer builds). ``pod_labels`` picks the pod-mapping label
    names: ``("namespace", "pod", "container")`` or the older
    ``("pod_namespace", "pod_name", "container_name")``. ``fields`` limits
    the families served (default: all of :data:`DCGM_FIELDS`): the scale
    benchmark serves only what gputui queries, so Prometheus' ingest on the
    same two cores does not crowd out what is measured.
    """

    def __init__(self, *, host_label: str = "Hostname",
                 pod_labels: tuple[str, str, str] = ("namespace", "pod", "container"), port: int = 0,
                 fields: Iterable[str] | None = None):
        self.host_label = host_label
        self.pod_labels = pod_labels
        self.fields = tuple(DCGM_FIELDS) if fields is None else tuple(fields)
        unknown = [f for f in self.fields if f not in DCGM_FIELDS]
        if unknown:
            raise KeyError(f"unknown DCGM fields {unknown}")
        self._gpus: dict[tuple[str, int], DcgmGpu] = {}
        self._lock = threading.Lock()
        # Rendering 80,000 GPUs takes seconds: keep the text until something changes.
        self._rendered: str | None = None
        self._server = MetricsHTTPServer(self._handle, port)
        self.port = self._server.port
        self.address = self._server.address
        self.metrics_path = "/metrics"

    @property
    def scrapes(self) -> int:
        return self._server.requests

    def close(self) -> None:
        self._server.close()

    # --- state ----------------------------------------------------------------
    def add_node(self, node: str, gpus: int = 8, model: str = "NVIDIA H100 80GB HBM3",
                 driver: str = "550.54.15", fb_total_mib: int = 81559, *, hostname: str | None = None,
                 **values: float) -> None:
        """Expose ``gpus`` GPUs for ``node`` (``hostname`` overrides the host label value)."""
        with self._lock:
            self._rendered = None
            for i in range(gpus):
                self._gpus[(node, i)] = DcgmGpu(
                    node=node, index=i, model=model.replace("-", " "), driver=driver, fb_total_mib=fb_total_mib,
                    uuid=f"GPU-{uuid.uuid5(uuid.NAMESPACE_OID, f'{node}/{i}')}",
                    pci_bus_id=f"00000000:{0x18 + i * 0x10 & 0xFF:02X}:00.0",
                    host_value=hostname or node, values=dict(values),
                )

    def remove_node(self, node: str) -> None:
        with self._lock:
            self._rendered = None
            for key in [k for k in self._gpus if k[0] == node]:
                del self._gpus[key]

    def set(self, node: str, gpu: int | None = None, **values: float | None) -> None:
        """Set values on one GPU (or every GPU of ``node`` when ``gpu`` is None).

        Keys are field names (``util``, ``fb_used``, ``fb_free``,
        ``fb_reserved``, ``temp``, ``power``, ``xid``, ... see
        :data:`DCGM_FIELDS`) or metric names (``DCGM_FI_DEV_GPU_UTIL``).
        ``fb_free`` defaults to total - used - reserved unless set. None: the series is no longer served.
        """
        fields = {}
        for k, v in values.items():
            fld = _DCGM_BY_METRIC.get(k, k)
            if fld not in DCGM_FIELDS:
                raise KeyError(f"unknown DCGM field {k!r}")
            fields[fld] = v
        with self._lock:
            targets = [g for (n, i), g in self._gpus.items() if n == node and (gpu is None or i == gpu)]
            if not targets:
                raise KeyError(f"no GPU {gpu} on node {node!r} in the exporter")
            for g in targets:
                g.values.update(fields)
            self._rendered = None

    def assign(self, node: str, gpu: int, namespace: str | None, pod: str | None = None,
               container: str = "main") -> None:
        """Label a GPU with the pod holding it (dcgm-exporter's pod mapping); ``None`` clears it."""
        with self._lock:
            self._rendered = None
            g = self._gpus[(node, gpu)]
            g.pod = None if namespace is None else {self.pod_labels[0]: namespace, self.pod_labels[1]: pod or "",
                                                     self.pod_labels[2]: container}

    def set_mig(self, node: str, gpu: int, instances: list[tuple[str, int, float]]) -> None:
        """Make the GPU a MIG GPU with these instances (profile, GPU_I_ID, engine activity 0..1)."""
        with self._lock:
            self._gpus[(node, gpu)].mig = list(instances)
            self._rendered = None

    def get(self, node: str, gpu: int, fld: str) -> float | None:
        with self._lock:
            return self._gpus[(node, gpu)].value(_DCGM_BY_METRIC.get(fld, fld))

    def gpus(self, node: str | None = None) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(k for k in self._gpus if node is None or k[0] == node)

    def labels(self, node: str, gpu: int, fld: str = "util") -> dict[str, str]:
        """The labels a series carries, as served (no job/instance)."""
        with self._lock:
            return self._labels(self._gpus[(node, gpu)], _DCGM_BY_METRIC.get(fld, fld))

    def _labels(self, g: DcgmGpu, fld: str) -> dict[str, str]:
        labels = {
            "gpu": str(g.index),
            "UUID": g.uuid,
            "pci_bus_id": g.pci_bus_id,
            "device": f"nvidia{g.index}",
            "modelName": g.model,
            self.host_label: g.host_value,
            "DCGM_FI_DRIVER_VERSION": g.driver,
        }
        if fld == "xid":
            code = int(g.value("xid") or 0)
            labels["err_code"] = str(code)
            labels["err_msg"] = "No Error" if code == 0 else XID_MESSAGES.get(code, "Unknown Error")
        if g.pod:
            labels.update(g.pod)
        return labels

    # --- exposition -------------------------------------------------------------
    def render(self) -> str:
        with self._lock:
            if self._rendered is None:
                gpus = sorted(self._gpus.values(), key=lambda g: (g.node, g.index))
                fams = []
                for fld in self.fields:
                    metric, help_, typ = DCGM_FIELDS[fld]
                    samples = [(self._labels(g, fld), value) for g in gpus
                               if not (g.mig and fld in ("util", "gr_engine_active")) and (value := g.value(fld)) is not None]
                    if fld == "gr_engine_active":
                        samples += [({**self._labels(g, fld), "GPU_I_PROFILE": profile, "GPU_I_ID": str(gi)}, active)
                                    for g in gpus for profile, gi, active in g.mig]
                    fams.append(Family(metric, help_, typ, samples))
                self._rendered = render_text(fams)
            return self._rendered

    def _handle(self, path: str) -> str | None:
        return self.render() if path == self.metrics_path else None


XID_MESSAGES = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
}


# --- inference exporter -----------------------------------------------------------

#: server kind -> (running, waiting, kv cache) metric names
INFERENCE_METRICS: dict[str, tuple[str | None, str, str | None]] = {
    "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"),
    "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage"),
    "trtllm": ("trtllm_num_requests_running", "trtllm_num_requests_waiting", "trtllm_kv_cache_utilization"),
    "tgi": ("tgi_batch_current_size", "tgi_queue_size", None),
    # Triton with the TensorRT-LLM backend: rendered by render_pod from request_type labels (below).
    "triton": ("nv_trt_llm_request_metrics", "nv_inference_pending_request_count", None),
    # An engine gputui has no names for: its pods must show as unknown, never as idle.
    "unlisted": ("myengine_inflight_requests", "myengine_queued_requests", None),
}


@dataclass
class InferencePod:
    namespace: str
    pod: str
    model: str
    server: str
    running: float = 0
    waiting: float = 0
    kv_cache: float = 0.0
    target_labels: dict[str, str] = field(default_factory=dict)
    broken: bool = False  # its endpoint answers 404: the scrape fails, Prometheus marks its series stale
    traffic: Traffic | None = None  # finished requests and their latency (vLLM's counters), when served

    @property
    def path(self) -> str:
        return f"/pods/{self.namespace}/{self.pod}/metrics"


LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, float("inf"))


@dataclass
class Traffic:
    """Requests a pod finishes: per second, the share that ends aborted (vLLM's finished_reason="abort"),
    and their end-to-end latency. The counters advance with the clock at every scrape, as a live engine's."""

    per_s: float
    error_ratio: float = 0.0
    latency_s: float = 1.0
    finished: dict[str, float] = field(default_factory=lambda: {"stop": 0.0, "abort": 0.0})
    buckets: dict[float, float] = field(default_factory=lambda: dict.fromkeys(LATENCY_BUCKETS, 0.0))
    latency_sum: float = 0.0
    since: float = field(default_factory=time.monotonic)

    def advance(self) -> None:
        now = time.monotonic()
        n, self.since = self.per_s * (now - self.since), now
        self.finished["abort"] += n * self.error_ratio
        self.finished["stop"] += n * (1 - self.error_ratio)
        for le in self.buckets:
            if self.latency_s <= le:
                self.buckets[le] += n
        self.latency_sum += n * self.latency_s

    def record(self, duration_s: float, reason: str = "stop") -> None:
        """One request finished now, after duration_s (a session of the traffic generator)."""
        self.advance()
        self.finished[reason] = self.finished.get(reason, 0.0) + 1
        for le in self.buckets:
            if duration_s <= le:
                self.buckets[le] += 1
        self.latency_sum += duration_s

    def render(self, labels: dict[str, str]) -> str:
        self.advance()
        name = "vllm:e2e_request_latency_seconds"
        out = ["# HELP vllm:request_success_total Count of successfully processed requests.",
               "# TYPE vllm:request_success_total counter"]
        out += [f"vllm:request_success_total{format_labels({**labels, 'finished_reason': r})} {format_value(v)}"
                for r, v in self.finished.items()]
        out += [f"# HELP {name} Histogram of end to end request latency in seconds.", f"# TYPE {name} histogram"]
        out += [f"{name}_bucket{format_labels({**labels, 'le': '+Inf' if le == float('inf') else repr(le)})} "
                f"{format_value(v)}" for le, v in self.buckets.items()]
        out += [f"{name}_sum{format_labels(labels)} {format_value(self.latency_sum)}",
                f"{name}_count{format_labels(labels)} {format_value(self.buckets[float('inf')])}"]
        return "\n".join(out) + "\n"


class InferenceExporter:
    """Per-pod inference metrics; ``pod``/``namespace`` come from the scrape target.

    ``sd_file`` is the file_sd JSON Prometheus reads (see
    :func:`tests.support.prom.inference_scrape_config`); it is rewritten
    atomically on every :meth:`add_pod`/:meth:`remove_pod`. Prometheus picks
    up new targets within ~5 s (its scrape manager applies target changes at
    most every 5 s), then scrapes them at the job's interval.
    """

    def __init__(self, sd_file: Path | str, *, port: int = 0):
        self.sd_file = Path(sd_file)
        self._pods: dict[tuple[str, str], InferencePod] = {}
        self._pickers: dict[tuple[str, str], dict[str, tuple[float, float, int]]] = {}
        self._lock = threading.Lock()
        self._server = MetricsHTTPServer(self._handle, port)
        self.port = self._server.port
        self.address = self._server.address
        self._write_sd()

    def close(self) -> None:
        self._server.close()

    def add_pod(self, namespace: str, pod: str, *, model: str = "meta-llama/Llama-3.1-8B-Instruct",
                server: str = "vllm", running: float = 0, waiting: float = 0, kv_cache: float = 0.0,
                target_labels: dict[str, str] | None = None) -> None:
        """Serve metrics for a pod; ``target_labels`` adds more target labels (e.g. ``container``)."""
        if server not in INFERENCE_METRICS:
            raise KeyError(f"unknown inference server {server!r}; known: {sorted(INFERENCE_METRICS)}")
        with self._lock:
            self._pods[(namespace, pod)] = InferencePod(namespace, pod, model, server, running, waiting, kv_cache,
                                                        dict(target_labels or {}))
            self._write_sd_locked()

    def remove_pod(self, namespace: str, pod: str) -> None:
        with self._lock:
            self._pods.pop((namespace, pod), None)
            self._write_sd_locked()

    def set(self, namespace: str, pod: str, *, running: float | None = None, waiting: float | None = None,
            kv_cache: float | None = None) -> None:
        with self._lock:
            p = self._pods[(namespace, pod)]
            if running is not None:
                p.running = running
            if waiting is not None:
                p.waiting = waiting
            if kv_cache is not None:
                p.kv_cache = kv_cache

    def serve(self, namespace: str, pod: str, per_s: float, *, error_ratio: float = 0.0, latency_s: float = 1.0) -> None:
        """The pod finishes per_s requests a second, error_ratio of them aborted, each taking latency_s: its
        vLLM counters and latency histogram advance from now (a change keeps the totals so far)."""
        with self._lock:
            p = self._pods[(namespace, pod)]
            if p.traffic is None:
                p.traffic = Traffic(per_s, error_ratio, latency_s)
            else:
                p.traffic.advance()
                p.traffic.per_s, p.traffic.error_ratio, p.traffic.latency_s = per_s, error_ratio, latency_s

    def record_request(self, namespace: str, pod: str, duration_s: float, *, reason: str = "stop") -> None:
        """A request the pod finished, one at a time (tests.support.traffic): its vLLM request counter and
        latency histogram advance by it. A pod no longer served is ignored (its session ended as it went)."""
        with self._lock:
            p = self._pods.get((namespace, pod))
            if p is None:
                return
            if p.traffic is None:
                p.traffic = Traffic(0.0)
            p.traffic.record(duration_s, reason)

    def add_picker(self, namespace: str, pod: str, pools: dict[str, tuple[float, float, int]]) -> None:
        """Serve an endpoint picker's (EPP) pool gauges as the Gateway API Inference Extension's EPP exports
        them (pool name -> KV cache utilisation, average queue, ready pods). The EPP binary itself is not
        built here (its module is not served by this machine's proxy): its documented series are."""
        with self._lock:
            self._pickers[(namespace, pod)] = dict(pools)
            self._write_sd_locked()

    def break_scrape(self, namespace: str, pod: str, broken: bool = True) -> None:
        """Make the pod's scrape fail (or work again): its target goes down, its series go stale."""
        with self._lock:
            self._pods[(namespace, pod)].broken = broken

    def pods(self) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(self._pods)

    def _write_sd(self) -> None:
        with self._lock:
            self._write_sd_locked()

    def _write_sd_locked(self) -> None:
        groups = []
        for p in sorted(self._pods.values(), key=lambda p: (p.namespace, p.pod)):
            labels = {"__metrics_path__": p.path, "namespace": p.namespace, "pod": p.pod}
            labels.update(p.target_labels)
            groups.append({"targets": [self.address], "labels": labels})
        for namespace, pod in sorted(self._pickers):
            groups.append({"targets": [self.address], "labels": {
                "__metrics_path__": f"/pickers/{namespace}/{pod}/metrics", "namespace": namespace, "pod": pod}})
        self.sd_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.sd_file.with_name(f".{self.sd_file.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(groups, indent=1))
        os.replace(tmp, self.sd_file)

    def render_pod(self, p: InferencePod) -> str:
        if p.server == "triton":  # the batch manager's gauges by request_type, and Triton's own queue
            model = {"model": "tensorrt_llm", "version": "1"}
            per_type = {"active": p.running, "scheduled": p.running, "context": 0, "waiting": p.waiting, "max": 256}
            return render_text([
                Family("nv_trt_llm_request_metrics", "TRT LLM request metrics", "gauge",
                       [({**model, "request_type": t}, v) for t, v in per_type.items()]),
                Family("nv_inference_pending_request_count", "Instantaneous number of pending requests.", "gauge",
                       [({"model": "ensemble", "version": "1"}, 0)]),
            ])
        running_m, waiting_m, kv_m = INFERENCE_METRICS[p.server]
        labels = {"model_name": p.model, "engine": "0"} if p.server == "vllm" else {"model_name": p.model}
        fams = []
        if running_m:
            fams.append(Family(running_m, "Number of requests in model execution batches.", "gauge",
                               [(labels, p.running)]))
        fams.append(Family(waiting_m, "Number of requests waiting to be processed.", "gauge", [(labels, p.waiting)]))
        if kv_m:
            fams.append(Family(kv_m, "KV-cache usage. 1 means 100 percent usage.", "gauge", [(labels, p.kv_cache)]))
        text = render_text(fams)
        return text + p.traffic.render(labels) if p.traffic is not None and p.server == "vllm" else text

    def _handle(self, path: str) -> str | None:
        with self._lock:
            for p in self._pods.values():
                if p.path == path:
                    return None if p.broken else self.render_pod(p)
            for (namespace, pod), pools in self._pickers.items():
                if path == f"/pickers/{namespace}/{pod}/metrics":
                    return render_text([
                        Family("inference_pool_average_kv_cache_utilization",
                               "The average kv cache utilization for an inference server pool.", "gauge",
                               [({"name": n}, kv) for n, (kv, _q, _r) in pools.items()]),
                        Family("inference_pool_average_queue_size",
                               "The average number of requests pending in the model server queue.", "gauge",
                               [({"name": n}, q) for n, (_kv, q, _r) in pools.items()]),
                        Family("inference_pool_ready_pods", "The number of ready pods in the inference server pool.",
                               "gauge", [({"name": n}, r) for n, (_kv, _q, r) in pools.items()]),
                    ])
        return None

"""Session fixtures: a real control plane, fake GPU nodes, real Prometheus.

Fixtures (all session scope; they fail loudly, never skip):

``cluster``          :class:`tests.support.control_plane.ControlPlane`, started
                     (etcd, kube-apiserver, kube-controller-manager, kube-scheduler).
``fake_kubelet``     :class:`tests.support.fake_kubelet.FakeKubelet` serving
                     :data:`DEFAULT_GPU_NODES` + :data:`DEFAULT_CPU_NODES`.
``dcgm_exporter``    :class:`tests.support.exporters.DcgmExporter` with the same nodes.
``inference_exporter`` :class:`tests.support.exporters.InferenceExporter` (no pods yet).
``prometheus``       :class:`tests.support.prom.PrometheusServer` scraping both every
                     1 s, with :func:`history_util` backfilled for the DCGM GPUs.
``victoria``         :class:`tests.support.victoria.VictoriaServer` (Debian's VictoriaMetrics)
                     scraping the same two exporters every 1 s; no history. Started
                     by the first test that asks for it.
``metrics_store``    (function scope) each of the two in turn: a test that takes it
                     runs once against Prometheus and once against VictoriaMetrics.

Session fixtures are shared by every test: a test that changes shared state
(node conditions, exporter values, a stopped server) should put it back, or
use names of its own (a namespace per test, extra nodes).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.support.control_plane import ControlPlane, find_binaries
from tests.support.exporters import DcgmExporter, InferenceExporter
from tests.support.fake_kubelet import FakeKubelet
from tests.support.procs import HarnessError
from tests.support.prom import (
    DCGM_JOB,
    PrometheusServer,
    dcgm_history,
    dcgm_scrape_config,
    find_prometheus,
    inference_scrape_config,
)
from tests.support.topology import (
    DEFAULT_CPU_NODES,
    DEFAULT_GPU_NODES,
    HISTORY_END_OFFSET,
    HISTORY_SECONDS,
    HISTORY_STEP,
    history_util,
)
from tests.support.victoria import VictoriaServer


@pytest.fixture(scope="session")
def k8s_bin_dir():
    return find_binaries()


@pytest.fixture(scope="session")
def cluster(k8s_bin_dir) -> Iterator[ControlPlane]:
    cp = ControlPlane(k8s_bin_dir)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


# Kubernetes 1.37's alpha node-lifecycle features (docs/disruption-actors.md §5, §6): off on the shared control plane,
# as on every cluster by default; on here. One plane for both, started only by the tests that need it.
ALPHA_APISERVER = ["--feature-gates=NodeLifecycleConditions=true,EvictionRequestAPI=true",
                   "--runtime-config=lifecycle.k8s.io/v1alpha1=true"]


@pytest.fixture(scope="session")
def alpha_cluster(k8s_bin_dir) -> Iterator[ControlPlane]:
    cp = ControlPlane(k8s_bin_dir, extra_args={"kube-apiserver": ALPHA_APISERVER})
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def alpha_kubelet(alpha_cluster: ControlPlane) -> Iterator[FakeKubelet]:
    kubelet = FakeKubelet(alpha_cluster.kubeconfigs["kubelet"], heartbeat_interval=2)
    kubelet.start()
    try:
        yield kubelet
    finally:
        kubelet.stop()


@pytest.fixture(scope="session")
def fake_kubelet(cluster: ControlPlane) -> Iterator[FakeKubelet]:
    kubelet = FakeKubelet(cluster.kubeconfigs["kubelet"], heartbeat_interval=10)
    kubelet.start()
    try:
        for spec in DEFAULT_GPU_NODES:
            kubelet.add_node(spec.name, gpus=spec.gpus, product=spec.product, driver=spec.driver,
                             memory_mib=spec.memory_mib)
        for name in DEFAULT_CPU_NODES:
            kubelet.add_node(name, gpus=0, cpu="32", memory="128Gi")
        if not kubelet.synced.wait(30):
            raise HarnessError(f"fake kubelet never listed pods; errors: {kubelet.errors}\n{cluster.describe()}")
        yield kubelet
    finally:
        kubelet.stop()


@pytest.fixture(scope="session")
def dcgm_exporter() -> Iterator[DcgmExporter]:
    exporter = DcgmExporter(host_label=os.environ.get("GPUTUI_TEST_DCGM_HOST_LABEL", "Hostname"))
    for spec in DEFAULT_GPU_NODES:
        exporter.add_node(spec.name, gpus=spec.gpus, model=spec.model_name, driver=spec.driver,
                          fb_total_mib=spec.memory_mib)
    try:
        yield exporter
    finally:
        exporter.close()


@pytest.fixture(scope="session")
def inference_exporter(tmp_path_factory) -> Iterator[InferenceExporter]:
    exporter = InferenceExporter(tmp_path_factory.mktemp("inference-sd") / "targets.json")
    try:
        yield exporter
    finally:
        exporter.close()


@pytest.fixture(scope="session")
def prometheus(dcgm_exporter: DcgmExporter, inference_exporter: InferenceExporter) -> Iterator[PrometheusServer]:
    find_prometheus()
    prom = PrometheusServer([dcgm_scrape_config(dcgm_exporter), inference_scrape_config(inference_exporter.sd_file)])
    try:
        now = time.time()
        end = (now - HISTORY_END_OFFSET) // HISTORY_STEP * HISTORY_STEP
        start = end - HISTORY_SECONDS
        prom.backfill(dcgm_history(dcgm_exporter, {"job": DCGM_JOB, "instance": dcgm_exporter.address},
                                   field="util", start=start, end=end, step=HISTORY_STEP, value=history_util))
        prom.start(ready="DCGM_FI_DEV_GPU_UTIL")
        yield prom
    finally:
        prom.close()


@pytest.fixture(scope="session")
def victoria(dcgm_exporter: DcgmExporter, inference_exporter: InferenceExporter) -> Iterator[VictoriaServer]:
    vm = VictoriaServer([dcgm_scrape_config(dcgm_exporter), inference_scrape_config(inference_exporter.sd_file)])
    try:
        vm.start(ready="DCGM_FI_DEV_GPU_UTIL")
        yield vm
    finally:
        vm.close()


@pytest.fixture(params=["prometheus", "victoria-metrics"])
def metrics_store(request) -> PrometheusServer | VictoriaServer:
    """The tests that concern metrics run against both stores gputui must work with (issue 18): the same
    exporters, the same queries, the same expectations."""
    return request.getfixturevalue("prometheus" if request.param == "prometheus" else "victoria")

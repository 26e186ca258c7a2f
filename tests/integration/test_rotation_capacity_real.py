"""Capacity stays in rotation, and comes out of it as soon as it can, under live traffic on the real control
plane (issue 33, item 2). Both pods of a service sit on the node drained: the first goes out of rotation, the
second stays in so the Service keeps a pod serving. Once the first one's replacement, placed by the real
scheduler on the other node, is Ready, the second goes out too, and the drain ends when its sessions have:
not at its deadline, with everything it held cut. Sessions come from tests.support.traffic, routed by the
real EndpointSlices; counts are read by the real Prometheus."""

from __future__ import annotations

import subprocess
import sys
import time

from kubernetes import client

from tests.support.gputui_cli import environment
from tests.support.procs import wait_until
from tests.support.traffic import Durations, TrafficGenerator
from tests.support.workloads import ready_pods, served_deployment, service_for

NS = "t-rotation-capacity"
MAX_SESSION_S = 10.0
DEADLINE_S = 100


def test_the_pod_kept_in_for_capacity_goes_out_once_its_sibling_s_replacement_serves(
        cluster, fake_kubelet, prometheus, inference_exporter, tmp_path):
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": NS}})
    drained, spare = "rc-a", "rc-b"
    fake_kubelet.add_node(drained, gpus=4, labels={"gputui.test/pool": "rc"})
    try:
        apps.create_namespaced_deployment(NS, served_deployment("dyn", NS, "rc", 2, grace_s=3, annotations={
            "gputui.test/start-delay-seconds": "6"}))  # a replacement serves only some time after it is placed
        core.create_namespaced_service(NS, service_for("dyn", NS, {"app": "dyn"}))
        first = {f"{NS}/{p.metadata.name}" for p in ready_pods(core, NS, 2)}
        fake_kubelet.add_node(spare, gpus=4, labels={"gputui.test/pool": "rc"})  # only now: both pods on rc-a
        gen = TrafficGenerator(cluster.kubeconfigs["harness"], inference_exporter, seed=35,
                               durations=Durations(mean_s=3, max_s=MAX_SESSION_S))
        gen.add_route("Service", NS, "dyn", rate_per_s=8.0)  # busy: a pod left in never empties
        with gen.start(run_for_s=DEADLINE_S + 60):
            wait_until(lambda: all(gen.live(p) >= 1 for p in first), 30, what="sessions on both pods")
            prometheus.wait_until('vllm:num_requests_running{namespace="%s"}' % NS,
                                  lambda v: len([n for n, x in v.items() if x > 0]) == 2, by="pod", timeout=20)
            started = time.monotonic()
            out = subprocess.run(
                [sys.executable, "-m", "gputui", "drain", "--kubeconfig", str(cluster.admin_kubeconfig),
                 "--prometheus", prometheus.url, drained, "--session-deadline", f"{DEADLINE_S}s",
                 "--rotation-settle", "3s"],  # the test Prometheus scrapes every second
                capture_output=True, text=True, env=environment(tmp_path), timeout=DEADLINE_S + 50)
            took = time.monotonic() - started
            report = gen.stop()
        text = out.stdout + out.stderr
        print(f"drain took {took:.1f}s; {report.started} sessions started, {report.cut} cut\n{text}")
        assert out.returncode == 0, text
        kept = [line for line in text.splitlines() if "kept in rotation until another pod serves" in line]
        assert kept and all("Service t-rotation-capacity/dyn would have no pod serving" in k for k in kept), text
        # Both went out (the one kept in too, before its eviction), and nothing was cut: the old run left the
        # kept pod in rotation, so its sessions kept coming until the deadline cut them.
        assert sum(1 for line in text.splitlines() if "out of rotation (label serving removed" in line) == 2, text
        assert "deadline expired" not in text and report.cut == 0, (report.cut_by_pod, text)
        assert all(report.pods[p].started > 0 for p in first) and report.rejected == 0, report
        lines = text.splitlines()
        evicted_first = next(i for i, line in enumerate(lines) if " evicted " in line)
        second_out = [i for i, line in enumerate(lines) if "out of rotation (label serving removed" in line][1]
        assert evicted_first < second_out, text  # after its sibling left and the replacement served
        replacement = [k for k in report.pods if k not in first]
        assert replacement and report.pods[replacement[0]].started > 0, report.pods
    finally:
        apps.delete_collection_namespaced_deployment(NS)
        core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
        core.delete_namespace(NS)
        for node in (drained, spare):
            fake_kubelet.remove_node(node)

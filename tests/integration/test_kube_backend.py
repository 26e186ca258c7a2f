"""gputui's Kubernetes + Prometheus backends against the real apiserver, controllers and Prometheus."""

from __future__ import annotations

import json
import threading
import time

import pytest
import yaml
from kubernetes import client

from gputui.backends.kube_backend import live_backend
from gputui.ops.drain.plan import Step, plan_drain
from gputui.policy.health import fleet_alerts
from gputui.settings import Settings
from gputui.vocabulary.sessions import SessionState
from tests.support.crds import create_custom, install_crd
from tests.support.gputui_cli import run
from tests.support.procs import wait_for, wait_until
from tests.support.topology import DEFAULT_GPU_NODES
from tests.support.workloads import deployment

NS = "t-backend"
REFRESH = 2.0


def service(name: str, service_name: str, version: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"app.kubernetes.io/name": service_name, "app.kubernetes.io/version": version},
                     "ports": [{"port": 8000}]}}


@pytest.fixture(scope="module")
def workload(cluster, fake_kubelet, prometheus, dcgm_exporter, inference_exporter):
    """A routed service (HTTPRoute 90/10 over v1/v2) with GPU pods running and session metrics."""
    api = cluster.admin_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    install_crd(api, "httproutes")
    core.create_namespace({"metadata": {"name": NS}})
    apps.create_namespaced_deployment(NS, deployment("llama-v1", "llama", "v1", 2, 2))
    apps.create_namespaced_deployment(NS, deployment("llama-v2", "llama", "v2", 1, 1))
    core.create_namespaced_service(NS, service("llama-v1", "llama", "v1"))
    core.create_namespaced_service(NS, service("llama-v2", "llama", "v2"))
    create_custom(api, "httproutes", NS, {"metadata": {"name": "llama"}, "spec": {"rules": [{"backendRefs": [
        {"name": "llama-v1", "port": 8000, "weight": 90}, {"name": "llama-v2", "port": 8000, "weight": 10}]}]}})

    def running_pods():
        pods = core.list_namespaced_pod(NS).items
        ok = [p for p in pods if p.status.phase == "Running" and p.spec.node_name]
        return pods if len(ok) == 3 and len(pods) == 3 else None

    pods = wait_until(running_pods, 60, what="3 llama pods running")
    sessions = {}
    for i, p in enumerate(sorted(pods, key=lambda p: p.metadata.name)):
        sessions[p.metadata.name] = (3 + i, i)
        inference_exporter.add_pod(NS, p.metadata.name, running=3 + i, waiting=i)
    prometheus.wait_until('vllm:num_requests_running{namespace="%s"}' % NS,
                          lambda v: len(v) == 3, timeout=30)
    yield {"pods": pods, "sessions": sessions, "api": api}
    for name in sessions:
        inference_exporter.remove_pod(NS, name)
    core.delete_namespace(NS)


def make_backend(cluster, prometheus, user: str = "admin", read_only: bool = False, **kw):
    settings = Settings(kubeconfig=str(cluster.kubeconfigs[user]), prometheus=prometheus.url,
                        refresh=REFRESH, read_only=read_only, **kw)
    return live_backend(settings)


def sessions_seen(store, workload) -> None:
    """The store has the workload's session counts as set (the module's set-up waits on Prometheus only, and
    a test on the other store may have changed and put back a count the store has not scraped again yet)."""
    want = {name: float(running) for name, (running, _waiting) in workload["sessions"].items()}
    store.wait_until('vllm:num_requests_running{namespace="%s"}' % NS, lambda v: v == want, by="pod", timeout=30)


def test_snapshot_matches_what_the_cluster_holds(cluster, metrics_store, dcgm_exporter, workload):
    dcgm_exporter.set("gpu-node-1", 0, util=73, temp=61, power=412, fb_used=20000)
    metrics_store.wait_until('DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-node-1",gpu="0"}', lambda v: 73.0 in v.values(),
                             timeout=15)
    sessions_seen(metrics_store, workload)
    backend = make_backend(cluster, metrics_store)
    try:
        snap = backend.reader.snapshot()
        expected = {s.name: s for s in DEFAULT_GPU_NODES}
        assert {n.name for n in snap.nodes} == set(expected)  # the CPU node is not a GPU node
        for node in snap.nodes:
            spec = expected[node.name]
            assert node.driver_version == spec.driver
            assert node.gpu_capacity == spec.gpus and node.gpu_product == spec.product
            # The fleet view carries per-node aggregates computed by Prometheus.
            summary = snap.summary(node)
            assert summary is not None and summary.count == spec.gpus
            utils = [dcgm_exporter.get(node.name, g, "util") for g in range(spec.gpus)]
            assert snap.gauges(node).util_pct == pytest.approx(sum(utils) / len(utils))
            assert snap.gauges(node).temp_c == max(dcgm_exporter.get(node.name, g, "temp") for g in range(spec.gpus))
        gpus = backend.reader.node_gpus("gpu-node-1")  # the detail screen's per-GPU rows
        assert [g.index for g in gpus] == list(range(8))
        g0 = gpus[0]
        assert (g0.util_pct, g0.temp_c, g0.power_w, g0.mem_used_mib) == (73.0, 61.0, 412.0, 20000.0)
        # GPUs allocated per node, exactly what the live pods bound there ask for, counted from the API (other
        # modules' pods may still be on the session's nodes, so the count is read, and read again until the
        # reader's watches and the API agree: a wrong count never does).
        def allocated_in_api() -> dict[str, int]:
            asked = {name: 0 for name in expected}
            for p in client.CoreV1Api(workload["api"]).list_pod_for_all_namespaces().items:
                if p.spec.node_name in asked and p.status.phase not in ("Succeeded", "Failed"):
                    asked[p.spec.node_name] += sum(int(((c.resources and c.resources.limits) or {}).get(
                        "nvidia.com/gpu", "0")) for c in p.spec.containers)
            return asked

        def allocated_agree() -> dict[str, int] | None:
            seen = backend.reader.snapshot()
            want = allocated_in_api()
            return want if {name: seen.gpus_allocated(name) for name in want} == want else None

        agreed = wait_until(allocated_agree, 30, what="gputui's GPUs allocated per node equal to the API's")
        assert sum(agreed.values()) > 0  # the module's own pods hold GPUs: not a vacuous agreement on zeros
        svc = snap.service(f"{NS}/llama")
        assert svc is not None and svc.router_kind == "HTTPRoute"
        assert [(v.name, v.weight) for v in svc.versions] == [("v1", 90), ("v2", 10)]
        assert svc.versions[0].rollout.status == "rolled out"
        for name, (running, waiting) in workload["sessions"].items():
            pod = next(p for p in snap.pods if p.name == name)
            assert (pod.service, snap.session_counts[(pod.namespace, name)]) == ("llama", running + waiting)
        assert snap.sessions_of(svc) == sum(r + w for r, w in workload["sessions"].values())
        if getattr(metrics_store, "history_window", None):  # Prometheus: five minutes backfilled
            history = backend.reader.gpu_history("gpu-node-1", 5)
            assert len(history) == 8 and all(len(v) >= 10 for v in history.values())
        else:  # VictoriaMetrics: only what it scraped since it started, maybe seconds ago (no 10 s step yet)
            def history_read():
                got = backend.reader.gpu_history("gpu-node-1", 5)
                return got if len(got) == 8 and all(got.values()) else None

            wait_until(history_read, 30, what="a point of history for each of the node's 8 GPUs")
    finally:
        backend.close()


def test_changes_by_another_client_show_in_the_snapshots_that_follow(cluster, fake_kubelet, prometheus, workload):
    """A node added, cordoned and removed by another client reaches the reader's snapshots through its watches,
    without a new reader. How soon is a figure, not an assertion: benchmarks/reaction_times.py --only watch."""
    backend = make_backend(cluster, prometheus)
    core = client.CoreV1Api(workload["api"])
    try:
        before = backend.reader.snapshot()
        assert before.node("gpu-node-late") is None and not before.node("gpu-node-2").unschedulable
        fake_kubelet.add_node("gpu-node-late", gpus=4)
        core.patch_node("gpu-node-2", {"spec": {"unschedulable": True}})
        wait_until(lambda: (s := backend.reader.snapshot()).node("gpu-node-late") is not None
                   and s.node("gpu-node-2").unschedulable, 30, 0.1, "new node and cordon visible")
        fake_kubelet.remove_node("gpu-node-late")
        wait_until(lambda: backend.reader.snapshot().node("gpu-node-late") is None, 30, 0.1, "node gone")
    finally:
        core.patch_node("gpu-node-2", {"spec": {"unschedulable": None}})
        backend.close()


def test_a_status_report_that_moves_nothing_a_record_keeps_leaves_the_reader_its_tuple_and_a_label_does_not(
        cluster, fake_kubelet, prometheus, workload):
    """A kubelet reports its node's status every 5 minutes when nothing changed (17 updates a second at 5,000
    nodes, each to every watcher). The watch keeps the record it had when the new one is equal, so readers see
    the same tuple and nothing built on it is redone (benchmarks/fleet.py); a change a record keeps still shows."""
    backend = make_backend(cluster, prometheus)
    core = client.CoreV1Api(workload["api"])
    cache = backend.reader.caches["nodes"]
    node = "gpu-node-2"

    def seen(rv: str) -> bool:
        return cache._rv is not None and int(cache._rv) >= int(rv)  # etcd's revisions: this harness's own

    try:
        backend.reader.snapshot()  # synced
        before = cache.items()
        ready = next(c for c in core.read_node_status(node).status.conditions if c.type == "Ready")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))  # later than any report yet
        # As the node's kubelet would, under the harness's identity: gputui's admin never writes a node's status
        # (test_harness.py's audit test holds it to that).
        kubelet = client.CoreV1Api(cluster.harness_client())
        reported = kubelet.patch_node_status(node, {"status": {"conditions": [
            {"type": "Ready", "status": ready.status, "reason": ready.reason, "message": ready.message,
             "lastHeartbeatTime": stamp}]}})
        wait_until(lambda: seen(reported.metadata.resource_version), 30, 0.05, "the watch to pass the report")
        assert cache.items() is before
        labelled = core.patch_node(node, {"metadata": {"labels": {"gputui.test/moved": "yes"}}})
        wait_until(lambda: seen(labelled.metadata.resource_version), 30, 0.05, "the watch to pass the label")
        after = cache.items()
        assert after is not before
        assert next(r for r in after if r.name == node).labels.get("gputui.test/moved") == "yes"
    finally:
        core.patch_node(node, {"metadata": {"labels": {"gputui.test/moved": None}}})
        backend.close()


def test_what_the_apps_poll_froze_out_of_the_collector_still_refreshes_and_a_closed_reader_thaws_it(
        cluster, prometheus, workload):
    """The app's poll freezes what lives after each snapshot out of the cycle collector's walks (gcpause; at
    65,000 nodes its full passes over the watch caches' records were a quarter of the steady CPU). Refreshes
    still see changes (frozen objects are freed when replaced), and closing the reader thaws everything, so a
    closed reader's records cannot stay frozen in a cycle."""
    import gc

    from gputui.backends.gcpause import settle_after_snapshot

    backend = make_backend(cluster, prometheus)
    core = client.CoreV1Api(workload["api"])

    def polled():  # as the app's poll does: a snapshot, then settle
        snap = backend.reader.snapshot()
        settle_after_snapshot()
        return snap

    try:
        assert gc.get_freeze_count() == 0
        polled()
        assert gc.get_freeze_count() > 1000  # the records, the caches, the first snapshot
        core.patch_node("gpu-node-2", {"spec": {"unschedulable": True}})
        wait_until(lambda: polled().node("gpu-node-2").unschedulable, REFRESH, 0.1, "cordon seen")
    finally:
        core.patch_node("gpu-node-2", {"spec": {"unschedulable": None}})
        backend.close()
        frozen = gc.get_freeze_count()
        gc.unfreeze()  # whatever happened, the rest of the session runs unfrozen
    assert frozen == 0


def test_prometheus_down_marks_metrics_and_kubernetes_keeps_updating(cluster, prometheus, workload):
    backend = make_backend(cluster, prometheus)
    core = client.CoreV1Api(workload["api"])
    try:
        assert backend.reader.snapshot().source("metrics").error is None
        prometheus.stop()
        snap = backend.reader.snapshot()
        metrics = snap.source("metrics")
        assert metrics.error and "connection refused" in metrics.error
        core.patch_node("gpu-node-3", {"metadata": {"labels": {"gputui.test/marker": "while-prom-down"}}})
        wait_until(lambda: backend.reader.snapshot().node("gpu-node-3").labels.get("gputui.test/marker") == "while-prom-down",
                   REFRESH, 0.1, "Kubernetes change while Prometheus is down")
        assert backend.reader.snapshot().source("API").error is None
        # A gputui started while Prometheus is down knows no session counts: a drain must not
        # take that for "no sessions" and evict the inference pods.
        fresh = make_backend(cluster, prometheus)
        try:
            snap = fresh.reader.snapshot()
            llama = next(p for p in snap.pods if p.namespace == NS and p.service == "llama")
            read = snap.sessions(llama)
            assert read.live is None and read.state is SessionState.UNKNOWN
            plan = plan_drain(snap, llama.node)
            mine = next(p for p in plan.pods if p.pod.key == llama.key)
            assert mine.step is Step.WAIT_SESSIONS  # waits for a count; never evicted as idle
            assert "sessions unknown (metrics unavailable: connection refused)" in mine.note
        finally:
            fresh.close()
        prometheus.start(ready="DCGM_FI_DEV_GPU_UTIL")
        wait_until(lambda: backend.reader.snapshot().source("metrics").error is None, 10, 0.5, "metrics back")
    finally:
        if not prometheus.running():
            prometheus.start(ready="DCGM_FI_DEV_GPU_UTIL")
        backend.close()


def test_unprivileged_identity_sees_actions_unavailable_and_read_only_sends_no_write(cluster, prometheus, workload):
    rbac_limited = make_backend(cluster, prometheus, user="readonly")
    try:
        assert rbac_limited.writer is not None
        assert rbac_limited.may("cordon") is False and rbac_limited.may("evict") is False
    finally:
        rbac_limited.close()
    mark = cluster.audit_mark()
    backend = make_backend(cluster, prometheus, user="readonly", read_only=True)
    try:
        assert backend.writer is None and not backend.may("cordon")
        for _ in range(3):
            assert backend.reader.snapshot().nodes
        cluster.wait_for_audit("readonly", since=mark, verb="list", resource="nodes")
        # A fence: the apiserver logs each request as it completes, so once this read of the same identity is in
        # the log, every request the backend completed before it is there too (no fixed pause to wait for them).
        client.CoreV1Api(cluster.readonly_client()).read_namespace(NS)
        cluster.wait_for_audit("readonly", since=mark, verb="get", resource="namespaces", name=NS)
        assert cluster.write_requests("readonly", since=mark) == []
    finally:
        backend.close()


def test_headless_nodes_against_the_cluster_and_a_rejected_token(cluster, prometheus, workload, tmp_path):
    out = run("nodes", "-o", "json", "--kubeconfig", str(cluster.admin_kubeconfig), "--prometheus", prometheus.url, home=tmp_path)
    assert out.returncode == 0, out.stderr
    names = {n["name"] for n in json.loads(out.stdout)}
    assert {s.name for s in DEFAULT_GPU_NODES} <= names
    config = yaml.safe_load(cluster.admin_kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": "not-a-valid-token"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    out = run("nodes", "--kubeconfig", str(bad), home=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "rejected the credentials" in out.stderr
    assert "not-a-valid-token" not in out.stderr


def test_apiserver_killed_then_back_recovers_to_exactly_the_api_nodes(cluster, fake_kubelet, prometheus, workload):
    backend = make_backend(cluster, prometheus)
    try:
        assert backend.reader.snapshot().source("API").error is None
        cluster.kill_apiserver()
        snap = backend.reader.snapshot()
        assert snap.source("API").error  # the probe fails at once: stale is shown
        assert snap.nodes  # the last known nodes stay on screen
        cluster.start_apiserver()
        wait_until(lambda: backend.reader.snapshot().source("API").error is None, 40, 0.5, "API back")
        core = client.CoreV1Api(cluster.admin_client())
        api_nodes = {n.metadata.name for n in core.list_node().items
                     if int((n.status.capacity or {}).get("nvidia.com/gpu", 0)) > 0 or
                     (n.metadata.labels or {}).get("nvidia.com/gpu.present") == "true"}
        wait_until(lambda: {n.name for n in backend.reader.snapshot().nodes} == api_nodes, 20, 0.5, "same node set")
    finally:
        backend.close()


def test_fleet_view_still_names_the_gpu_with_an_xid(cluster, metrics_store, dcgm_exporter, workload):
    """A fleet read aggregates per node, yet a GPU with an XID still comes one by one and is named."""
    # The other store's run of this test set the same XID a moment ago and cleared it on its way out: a store may
    # still answer that old 79 while the 0 it scraped since is not searchable yet. The store is first seen to
    # hold 0, so that the 79 waited for next is this test's.
    series = 'DCGM_FI_DEV_XID_ERRORS{Hostname="gpu-node-2",gpu="3"}'
    dcgm_exporter.set("gpu-node-2", 3, xid=0)
    metrics_store.wait_until(f"{series} == 0", timeout=15)
    dcgm_exporter.set("gpu-node-2", 3, xid=79)
    try:
        metrics_store.wait_until(f"{series} == 79", timeout=15)
        backend = make_backend(cluster, metrics_store)
        seen: list[object] = []
        want = ("XID", "GPU 3: XID 79 (fallen off the bus: reboot the node)")
        try:
            # Waited for, as a user's screen would show it: a read that failed (a store answering slower than its
            # timeout under the whole suite's load) shows no XID, rightly (unknown), and a store's answer may lag
            # its own series by a scrape; the fleet's DCGM gauges are read again every dcgm_interval (15 s), so
            # 40 s is two reads and more. A fleet view that never names the GPU fails, with what it read.
            def named():
                snap = backend.reader.snapshot()
                alerts = [(a.kind, a.message) for a in fleet_alerts(snap) if a.node == "gpu-node-2"]
                seen[:] = [snap.source("metrics"), snap.summary(snap.node("gpu-node-2")), alerts]
                return want in alerts and snap.source("metrics").error is None

            wait_for(named, timeout=40, interval=0.5, what="the fleet view naming GPU 3's XID",
                     on_timeout=lambda: f"last read (metrics source, gpu-node-2's summary, its alerts): {seen}")
        finally:
            backend.close()
    finally:
        dcgm_exporter.set("gpu-node-2", 3, xid=0)


def test_pods_snapshot_reads_only_the_pods_asked_for_and_keeps_counts_through_an_outage(
        cluster, metrics_store, inference_exporter, workload):
    names = sorted(workload["sessions"])[:2]
    sessions_seen(metrics_store, workload)
    backend = make_backend(cluster, metrics_store)
    reader = backend.reader
    try:
        full = reader.snapshot()
        keys = [f"{NS}/{n}" for n in names] + [f"{NS}/no-such-pod"]
        before = reader.prom.queries
        view = reader.pods_snapshot(keys)
        assert reader.prom.queries - before == 1  # these pods' sessions, not a whole refresh
        assert sorted(p.name for p in view.pods) == names and view.nodes == ()
        for pod in view.pods:
            assert view.session_counts[(pod.namespace, pod.name)] == sum(workload["sessions"][pod.name])
            same = next(p for p in full.pods if p.key == pod.key)
            assert (pod.uid, pod.node, pod.service, pod.version) == (same.uid, same.node, same.service, same.version)
        assert view.budgets == full.budgets and view.source("metrics").error is None
        # New counts show on the next read.
        inference_exporter.set(NS, names[0], running=9, waiting=0)
        metrics_store.wait_until('vllm:num_requests_running{namespace="%s",pod="%s"}' % (NS, names[0]),
                                 lambda v: 9.0 in v.values(), timeout=15)
        again = reader.pods_snapshot(keys)
        assert next(again.sessions(p).live for p in again.pods if p.name == names[0]) == 9
        # The store gone: every count is unknown. Not the last one seen (it may have grown since), and not
        # zero (a drain would evict the pod): the drain waits.
        metrics_store.stop()
        down = reader.pods_snapshot(keys)
        assert "connection refused" in down.source("metrics").error
        busy = next(down.sessions(p) for p in down.pods if p.name == names[0])
        assert busy.live is None and busy.state is SessionState.UNKNOWN
    finally:
        if not metrics_store.running():
            metrics_store.start(ready="DCGM_FI_DEV_GPU_UTIL")
        running, waiting = workload["sessions"][names[0]]
        inference_exporter.set(NS, names[0], running=running, waiting=waiting)
        backend.close()


def test_close_ends_the_watches_and_frees_the_records(cluster, prometheus, workload):
    import threading

    backend = make_backend(cluster, prometheus)
    backend.reader.snapshot()
    caches = list(backend.reader.caches.values())
    assert caches[0].items()  # the nodes
    backend.close()
    # The watch threads end now, not at the server's watch timeout (minutes), and drop what they held.
    wait_until(lambda: not any(t.name.startswith("watch ") and t.is_alive() and any(t is c._thread for c in caches)
                               for t in threading.enumerate()), 10, 0.1, "watch threads ended")
    assert all(c.items() == () for c in caches)


def test_version_labels_from_settings_name_the_versions(cluster, prometheus, workload):
    backend = make_backend(cluster, prometheus, version_labels=("gputui.test/no-such-label",))
    try:
        svc = backend.reader.snapshot().service(f"{NS}/llama")
        # No version label on the workloads: each version is named after the route's backend Service.
        assert [v.name for v in svc.versions] == ["llama-v1", "llama-v2"]
    finally:
        backend.close()


def test_sessions_every_refresh_and_fleet_dcgm_at_its_interval(
        cluster, prometheus, dcgm_exporter, inference_exporter, workload):
    """Sessions are what a drain and an operator watch: read on every refresh. The fleet's DCGM gauges
    change once per scrape at most: read every dcgm_interval, which spares Prometheus a scan of every
    GPU series per refresh."""
    now = [1_000_000.0]
    settings = Settings(kubeconfig=str(cluster.kubeconfigs["admin"]), prometheus=prometheus.url,
                        refresh=REFRESH, dcgm_interval=15.0)
    backend = live_backend(settings, clock=lambda: now[0])
    reader = backend.reader
    pod = sorted(workload["sessions"])[0]
    node = next(p.spec.node_name for p in workload["pods"] if p.metadata.name == pod)

    def read():
        before = reader.prom.queries
        snap = reader.snapshot()
        return snap, reader.prom.queries - before

    utils = {gpu: dcgm_exporter.get(n, gpu, "util") for n, gpu in dcgm_exporter.gpus(node)}
    try:
        first, queries = read()
        assert queries >= 7 and first.source("metrics").fetched_at == now[0]
        old_util = first.gauges(first.node(node)).util_pct
        dcgm_exporter.set(node, util=old_util + 11 if old_util < 50 else old_util - 11)
        inference_exporter.set(NS, pod, running=17, waiting=0)
        prometheus.wait_until('vllm:num_requests_running{namespace="%s",pod="%s"}' % (NS, pod),
                              lambda v: 17.0 in v.values(), timeout=15)
        prometheus.wait_until('avg(DCGM_FI_DEV_GPU_UTIL{Hostname="%s"})' % node,
                              lambda v: any(abs(x - old_util) > 10 for x in v.values()), timeout=15)
        now[0] += REFRESH
        second, queries = read()
        assert queries == 1  # the sessions only (running and queued, summed by the store)
        assert next(second.sessions(p).live for p in second.pods if p.name == pod) == 17
        assert second.gauges(second.node(node)).util_pct == old_util  # the gauges wait for their interval
        metrics = second.source("metrics")
        assert metrics.error is None and metrics.fetched_at == now[0] - REFRESH  # their age is honest
        assert not metrics.stale(now[0], REFRESH)  # and not stale: they are read every 15 s on purpose
        now[0] += 14.0
        third, queries = read()
        assert queries >= 7 and third.gauges(third.node(node)).util_pct != old_util
        assert third.source("metrics").fetched_at == now[0]
    finally:
        for gpu, util in utils.items():
            dcgm_exporter.set(node, gpu, util=util)
        running, waiting = workload["sessions"][pod]
        inference_exporter.set(NS, pod, running=running, waiting=waiting)
        backend.close()


def test_a_fleet_reader_sends_no_session_query_and_every_count_it_has_stays_unknown(
        cluster, prometheus, dcgm_exporter, inference_exporter, workload):
    """The fleet view's readers (sessions=False): a cluster's row shows no sessions, so none are read, neither
    with the DCGM gauges nor between them. The pods' counts are then unknown, never 0 (fail closed), and
    the gauges are read as before."""
    now = [1_000_000.0]
    settings = Settings(kubeconfig=str(cluster.kubeconfigs["admin"]), prometheus=prometheus.url,
                        refresh=REFRESH, dcgm_interval=15.0)
    backend = live_backend(settings, clock=lambda: now[0], sessions=False)
    reader = backend.reader
    pod, (running, waiting) = sorted(workload["sessions"].items())[0]
    assert running + waiting > 0  # a count a reader with sessions would show
    try:
        before = reader.prom.queries
        first = reader.snapshot()
        gauges_queries = reader.prom.queries - before
        now[0] += REFRESH
        before = reader.prom.queries
        second = reader.snapshot()
        assert reader.prom.queries == before  # between gauge reads: nothing (a reader with sessions sends one)
        for snap in (first, second):
            assert snap.session_counts == {}
            states = {p.name: snap.sessions(p) for p in snap.pods if p.namespace == NS}
            assert states[pod].live is None and states[pod].state == "unknown"
            assert snap.source("metrics").error is None
        node = next(p.spec.node_name for p in workload["pods"] if p.metadata.name == pod)
        assert first.gauges(first.node(node)).util_pct is not None
        # One fewer query per gauge read than the reader with sessions sends (its read is asserted above: >= 7).
        with_sessions = live_backend(settings, clock=lambda: now[0])
        try:
            before = with_sessions.reader.prom.queries
            with_sessions.reader.snapshot()
            assert gauges_queries == with_sessions.reader.prom.queries - before - 1
        finally:
            with_sessions.close()
    finally:
        backend.close()


def test_describe_reads_taints_heartbeat_and_the_events_of_the_node_and_its_pods(cluster, prometheus, workload):
    """What `i` shows, read from the real apiserver: the scheduler's own events for the pods, an event a GPU
    health agent would post for the node, the node's taints as the API holds them."""
    core = client.CoreV1Api(workload["api"])
    pod = workload["pods"][0]
    node = pod.spec.node_name
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    core.create_namespaced_event("default", {
        "metadata": {"name": f"{node}.xid-test"}, "type": "Warning", "reason": "SysLogsXIDError",
        "message": "XID 79 on GPU 3", "count": 2, "firstTimestamp": stamp, "lastTimestamp": stamp,
        "involvedObject": {"kind": "Node", "name": node, "apiVersion": "v1"}, "source": {"component": "gpu-health"}})
    backend = make_backend(cluster, prometheus)

    def beat() -> float | None:
        ready = next(c for c in core.read_node(node).status.conditions if c.type == "Ready")
        return ready.last_heartbeat_time.timestamp() if ready.last_heartbeat_time else None
    try:
        before = beat()  # the fake kubelet beats every 10 s: one may land between the describe and a read after it
        described = backend.reader.describe(node, [(NS, pod.metadata.name)])
        after = beat()
        reasons = {(e.object, e.reason) for e in described.events}
        assert (f"Node/{node}", "SysLogsXIDError") in reasons
        assert (f"Pod/{pod.metadata.name}", "Scheduled") in reasons  # kube-scheduler's own event
        xid = next(e for e in described.events if e.reason == "SysLogsXIDError")
        assert xid.type == "Warning" and xid.count == 2 and xid.last_seen is not None
        api_taints = core.read_node(node).spec.taints or []
        assert described.taints == tuple(f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in api_taints)
        assert described.heartbeat in (before, after) and described.heartbeat is not None
    finally:
        backend.close()
        core.delete_namespaced_event(f"{node}.xid-test", "default")


def test_check_reports_the_violations_planted_on_the_cluster_and_clears_when_fixed(cluster, prometheus, workload):
    """The llama service runs without a PDB and with a 1 s grace period (deployment()): both are reported,
    by the objects the cluster holds; a PDB created through the API clears the first."""
    from gputui.checks.result import Status
    from gputui.checks.rules import CheckContext, run_checks

    policy = client.PolicyV1Api(workload["api"])
    backend = make_backend(cluster, prometheus)
    try:
        def checked() -> dict:
            snap = backend.reader.snapshot()
            return {r.id: r for r in run_checks(CheckContext(snap, read_only=False,
                                                             permissions=backend.permissions))}

        found = checked()
        assert found["services.pdb"].status is Status.FAIL
        assert f"{NS}/llama (no PodDisruptionBudget)" in found["services.pdb"].objects
        assert found["services.grace"].status is Status.FAIL
        mine = [o for o in found["services.grace"].objects if o.startswith(f"{NS}/llama-")]
        assert len(mine) == 3 and all("(1s < 30s)" in o for o in mine)
        assert found["identity.permissions"].status is Status.PASS  # probed by access reviews
        # deployment() sets no probe and no memory limit: both read from the pod specs the apiserver holds.
        assert found["services.probes"].status is Status.FAIL
        assert sum(o.startswith(f"{NS}/llama-") and "(no readiness probe)" in o
                   for o in found["services.probes"].objects) == 3
        assert found["services.memory"].status is Status.WARN
        assert sum(o.startswith(f"{NS}/llama-") for o in found["services.memory"].objects) == 3
        policy.create_namespaced_pod_disruption_budget(NS, {
            "metadata": {"name": "llama-pdb"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "llama"}}}})

        def pdb_counted():
            result = checked()["services.pdb"]
            return result if f"{NS}/llama (no PodDisruptionBudget)" not in result.objects else None

        result = wait_until(pdb_counted, 30, what="the new PDB seen by the check")
        assert not any(o.startswith(f"{NS}/llama") for o in result.objects)
    finally:
        backend.close()
        policy.delete_namespaced_pod_disruption_budget("llama-pdb", NS)


def test_budgets_select_the_pods_the_disruption_controller_and_the_eviction_api_select(cluster, prometheus, workload):
    """A PDB's selector as policy/v1 has it: `{}` selects every pod of the namespace and matchExpressions are
    evaluated. gputui read `{}` as selecting nothing and left matchExpressions out, so a drain's plan named no
    budget where the apiserver would refuse the eviction. The oracle is the real disruption controller: with an
    integer minAvailable its status.expectedPods counts the pods the selector selects."""
    policy = client.PolicyV1Api(workload["api"])
    core = client.CoreV1Api(workload["api"])
    name_label, version_label = "app.kubernetes.io/name", "app.kubernetes.io/version"
    selectors = {
        "sel-everything": {},
        "sel-v2": {"matchExpressions": [{"key": version_label, "operator": "In", "values": ["v2"]}]},
        "sel-not-v2": {"matchLabels": {name_label: "llama"},
                       "matchExpressions": [{"key": version_label, "operator": "NotIn", "values": ["v2"]}]},
        "sel-unversioned": {"matchExpressions": [{"key": version_label, "operator": "DoesNotExist"}]},
    }
    backend = make_backend(cluster, prometheus)
    try:
        for name, selector in selectors.items():
            policy.create_namespaced_pod_disruption_budget(NS, {
                "metadata": {"name": name}, "spec": {"minAvailable": 0, "selector": selector}})

        def observed() -> dict[str, int] | None:
            found = {}
            for pdb in policy.list_namespaced_pod_disruption_budget(NS).items:
                st = pdb.status
                if pdb.metadata.name in selectors:
                    if st is None or st.observed_generation != pdb.metadata.generation:
                        return None
                    found[pdb.metadata.name] = st.expected_pods
            return found if len(found) == len(selectors) else None

        expected = wait_until(observed, 30, what="the disruption controller's status of every budget")
        assert expected["sel-everything"] >= 3 and expected["sel-v2"] == 1 and expected["sel-not-v2"] == 2
        api_pods = {p.metadata.name for p in core.list_namespaced_pod(NS).items}

        def gputui_counts() -> dict[str, int] | None:
            snap = backend.reader.snapshot()
            budgets = {b.name: b for b in snap.budgets if b.namespace == NS and b.name in selectors}
            mine = [p for p in snap.pods if p.namespace == NS]
            if len(budgets) < len(selectors) or {p.name for p in mine} != api_pods:
                return None
            return {name: sum(b.matches(p) for p in mine) for name, b in budgets.items()}

        assert wait_until(gputui_counts, 30, what="gputui's budgets") == expected

        # The Eviction API (dry runs: nothing is evicted) agrees: a pod two budgets select cannot be evicted at
        # all, which gputui's plan says (drain.plan) only if it sees both.
        v2 = next(p.metadata.name for p in core.list_namespaced_pod(NS).items
                  if (p.metadata.labels or {}).get(version_label) == "v2")

        def evict(pod: str) -> tuple[int, str]:
            body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": NS}}
            try:
                core.create_namespaced_pod_eviction(pod, NS, body, dry_run="All")
            except client.ApiException as exc:
                return exc.status, str(exc.body)
            return 201, ""

        status, why = evict(v2)
        assert status == 500 and "more than one" in why
        snap = backend.reader.snapshot()
        pod = next(p for p in snap.pods if p.namespace == NS and p.name == v2)
        assert {b.name for b in snap.budget_for(pod)} == {"sel-everything", "sel-v2"}

        # One `{}` budget of maxUnavailable 0 left: the eviction is refused for the budget, and gputui names why.
        for name in ("sel-v2", "sel-not-v2", "sel-unversioned"):
            policy.delete_namespaced_pod_disruption_budget(name, NS)
        policy.patch_namespaced_pod_disruption_budget("sel-everything", NS, {
            "spec": {"minAvailable": None, "maxUnavailable": 0}})
        victim = v2
        wait_until(lambda: evict(victim)[0] == 429, 30, what="the dry-run eviction refused by the budget")

        def named() -> list[str] | None:
            snap = backend.reader.snapshot()
            pod = next(p for p in snap.pods if p.namespace == NS and p.name == victim)
            found = [b.deadlock() for b in snap.budget_for(pod) if b.name == "sel-everything"]
            return found if found and found[0] else None

        assert "maxUnavailable 0 never allows an eviction" in wait_until(named, 30, what="the budget in gputui")[0]
    finally:
        backend.close()
        for pdb in policy.list_namespaced_pod_disruption_budget(NS).items:
            if pdb.metadata.name in selectors:
                policy.delete_namespaced_pod_disruption_budget(pdb.metadata.name, NS)


@pytest.mark.parametrize("page_s, starts", [(0.3, True), (1.5, False)])
def test_a_first_list_that_keeps_answering_page_by_page_is_waited_for_and_silence_is_not(
        cluster, prometheus, workload, monkeypatch, page_s, starts):
    """A 65,000-node cluster's first list takes over a minute, page by page (benchmarks/scale.py found gputui
    giving up after 10 s). Scaled down on the real apiserver: pages of 1 object, each answered after
    `page_s`, against a 0.5 s first-sync limit. Pages that keep coming are waited for however long the whole
    list takes; a page that does not come within the limit is still one clear error."""
    from gputui.backends import kube_backend, kube_cache
    from gputui.backends.base import BackendError
    from gputui.backends.kube_http import Connection

    monkeypatch.setattr(kube_cache, "PAGE_SIZE", 1)
    monkeypatch.setattr(kube_backend, "FIRST_SYNC_TIMEOUT_S", 0.5)
    inner = Connection.request
    node_pages: list[str] = []

    def slow_pages(self, method, path, query=None, *args, **kw):
        if method == "GET" and query and "limit" in query:
            if path.endswith("/nodes"):
                node_pages.append(path)
            time.sleep(page_s)  # the injected fault: a slow page, not a wait
        return inner(self, method, path, query, *args, **kw)

    monkeypatch.setattr(Connection, "request", slow_pages)
    backend = make_backend(cluster, prometheus)
    seen: list[tuple] = []  # what start-up's screen would show, read as it does (another thread, any moment)
    done = threading.Event()

    partials: list = []  # what start-up draws meanwhile: the nodes read so far, marked partial

    def watch_progress():
        while not done.wait(0.05):
            seen.append(tuple((p.resource, p.read, p.total) for p in backend.reader.progress()))
            if seen[-1]:
                partials.append(backend.reader.partial_snapshot())

    watcher = threading.Thread(target=watch_progress, daemon=True)
    watcher.start()
    try:
        if starts:
            snap = backend.reader.snapshot()
            done.set()
            watcher.join()
            # While the nodes came in page by page, how many were read and the apiserver's estimate of them
            # all (its remainingItemCount): every node, counted by the API, not by gputui's hand.
            all_nodes = len(client.CoreV1Api(workload["api"]).list_node().items)
            nodes_seen = [n for sample in seen for n in sample if n[0] == "nodes"]
            part_way = [n for n in nodes_seen if 0 < n[1] < all_nodes]  # before its first and after its last page
            assert part_way and {total for _, _, total in part_way} == {all_nodes}, nodes_seen
            reads = [read for _, read, _ in nodes_seen]
            assert reads == sorted(reads), reads  # it grew, page by page
            assert backend.reader.progress() == ()  # done: nothing left to show
            # The nodes' list alone took more pages than fit in the limit (each page waits page_s before it is
            # sent): the whole list ran past the limit, where the old wait gave up. Counted, not timed.
            assert len(node_pages) * page_s > kube_backend.FIRST_SYNC_TIMEOUT_S, node_pages
            gpu_nodes = {n.metadata.name for n in client.CoreV1Api(workload["api"]).list_node().items
                         if (n.metadata.labels or {}).get("nvidia.com/gpu.present") == "true"}
            assert len(gpu_nodes) > 2 and {n.name for n in snap.nodes} == gpu_nodes  # every page, nothing else
            # The partial views grew with the pages, each a part of the real nodes, none passing for whole.
            sizes = [len(p.nodes) for p in partials]
            assert any(0 < n < len(gpu_nodes) for n in sizes), sizes
            assert all({n.name for n in p.nodes} <= gpu_nodes for p in partials)
            assert all(p.source("API").error.startswith("partial: reading") and not p.session_counts
                       for p in partials)
        else:
            with pytest.raises(BackendError, match="no answer"):
                backend.reader.snapshot()
    finally:
        done.set()
        backend.close()

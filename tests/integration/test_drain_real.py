"""Session-aware drains on the real apiserver: real evictions, real PDBs, real UIDs; session counts read from the
real Prometheus, and again from VictoriaMetrics (the tests that read them run against each store)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

from kubernetes import client

from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.plan import DrainOptions, Step, plan_drain
from gputui.ops.drain.run import run_drain
from gputui.ops.steps import run_steps
from gputui.vocabulary.model import DRAIN_PHASE_ANNOTATION
from tests.support.gputui_cli import read_until, start_drain
from tests.support.procs import wait_until
from tests.support.workloads import backend_for, pool, running, workload


def test_sessions_gate_eviction_and_a_real_pdb_blocks_until_headroom(cluster, fake_kubelet, metrics_store,
                                                                    inference_exporter, tmp_path):
    ns, pool_name = f"t-drain-pdb-{metrics_store.tag}", f"dpdb-{metrics_store.tag}"  # once per store
    api = cluster.harness_client()
    core, apps, policy = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    a, b = pool(fake_kubelet, core, pool_name)
    apps.create_namespaced_deployment(ns, workload("Deployment", "chat", ns, pool_name, 2))
    policy.create_namespaced_pod_disruption_budget(ns, {"metadata": {"name": "chat-pdb"},
                                                        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "chat"}}}})
    pods = running(core, ns, 2, a)
    names = sorted(p.metadata.name for p in pods)
    for name in names:
        inference_exporter.add_pod(ns, name, running=3)
    metrics_store.wait_until('vllm:num_requests_running{namespace="%s"}' % ns, lambda v: len(v) == 2, timeout=30)
    core.patch_node(b, {"spec": {"unschedulable": None}})
    backend = backend_for(cluster, metrics_store)
    events, result = [], {}
    try:
        def sessions_visible():
            s = backend.reader.snapshot()
            mine = [p for p in s.pods_on(a) if p.namespace == ns]
            return s if len(mine) == 2 and all(s.sessions(p).live == 3 for p in mine) else None

        snap = wait_until(sessions_visible, 20, what="sessions visible")
        plan = plan_drain(snap, a, DrainOptions(session_deadline_s=600))
        assert [p.step for p in plan.pods if p.pod.namespace == ns] == [Step.WAIT_SESSIONS, Step.WAIT_SESSIONS]
        mark = cluster.audit_mark()
        audit = AuditLog(tmp_path / "audit.jsonl", backend.writer.identity, backend.context)
        full_refreshes = []  # the drain must re-read only its pods, never repeat the UI's whole poll
        whole = backend.reader.snapshot
        backend.reader.snapshot = lambda: full_refreshes.append(1) or whole()

        def drive():
            gen = run_drain(plan, OpContext(backend.reader, backend.writer, audit, poll_s=0.3))
            result["report"] = run_steps(gen, events.append)

        thread = threading.Thread(target=drive, daemon=True)
        thread.start()
        wait_until(lambda: any(e.kind == "waiting" and e.sessions == 3 for e in events), 15, what="waiting on sessions")
        polls = sum(e.kind == "tick" for e in events)  # five more polls of live sessions, none evicting
        wait_until(lambda: sum(e.kind == "tick" for e in events) >= polls + 5, 15, what="five more polls")
        assert not cluster.audit_events("admin", since=mark, resource="pods", verbs={"create"}), "evicted while sessions were live"
        for name in names:
            inference_exporter.set(ns, name, running=0)
        blocked = wait_until(lambda: [e for e in events if e.kind == "blocked"], 30, what="a PDB 429")
        assert "chat-pdb" in blocked[0].message
        cluster.wait_for_audit("admin", since=mark, verb="create", resource="pods", code=429)
        policy.patch_namespaced_pod_disruption_budget("chat-pdb", ns, {"spec": {"minAvailable": 1}})
        thread.join(120)
        assert not thread.is_alive(), [e for e in events if e.kind != "waiting"][-5:]
        report = result["report"]
        assert report.evicted == 2 and not report.failed and report.cut_sessions == 0
        assert full_refreshes == []
        evictions = cluster.audit_events("admin", since=mark, resource="pods", verbs={"create"})
        assert {e["objectRef"]["subresource"] for e in evictions} == {"eviction"}
        assert not cluster.audit_events("admin", since=mark, resource="pods", verbs={"delete"})  # never a delete
        node = core.read_node(a)
        assert node.spec.unschedulable and node.metadata.annotations[DRAIN_PHASE_ANNOTATION] == "done"
        assert not [p for p in core.list_namespaced_pod(ns).items if p.spec.node_name == a and not p.metadata.deletion_timestamp]
    finally:
        backend.close()
        for name in names:
            inference_exporter.remove_pod(ns, name)
        core.delete_namespace(ns)
        for node in (a, b):  # session fixtures are shared: leave the fleet as it was
            fake_kubelet.remove_node(node)


def test_kill_9_mid_drain_then_resume_waits_for_the_recreated_pods_uid(cluster, fake_kubelet, metrics_store,
                                                                      inference_exporter, tmp_path):
    ns, pool_name = f"t-drain-resume-{metrics_store.tag}", f"dres-{metrics_store.tag}"  # once per store
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    a, b = pool(fake_kubelet, core, pool_name)
    apps.create_namespaced_stateful_set(ns, workload("StatefulSet", "kv", ns, pool_name, 1))
    old = running(core, ns, 1, a)[0]
    assert old.metadata.name == "kv-0"
    inference_exporter.add_pod(ns, "kv-0", running=2)
    metrics_store.wait_until('vllm:num_requests_running{namespace="%s"}' % ns, timeout=30)
    core.patch_node(b, {"spec": {"unschedulable": None}})
    try:
        proc = start_drain(cluster, metrics_store, a, "--session-deadline", "10m", home=tmp_path)
        read_until(proc, lambda line: " waiting " in line and "kv-0" in line)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        node = core.read_node(a)
        assert node.spec.unschedulable and node.metadata.annotations[DRAIN_PHASE_ANNOTATION] == "waiting"
        assert core.read_namespaced_pod("kv-0", ns).metadata.uid == old.metadata.uid  # nothing evicted yet
        inference_exporter.set(ns, "kv-0", running=0)
        metrics_store.wait_until('vllm:num_requests_running{namespace="%s"} == 0' % ns, timeout=30)
        proc = start_drain(cluster, metrics_store, "--resume", home=tmp_path)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
        assert "drained, 1 pod evicted" in out
        def recreated_on_b():
            pod = core.read_namespaced_pod("kv-0", ns)
            return pod if pod.spec.node_name == b else None

        new = wait_until(recreated_on_b, 60, what="kv-0 recreated on the other node")
        assert new.metadata.uid != old.metadata.uid
        assert core.read_node(a).metadata.annotations[DRAIN_PHASE_ANNOTATION] == "done"
    finally:
        inference_exporter.remove_pod(ns, "kv-0")
        core.delete_namespace(ns)
        for node in (a, b):
            fake_kubelet.remove_node(node)


def test_read_only_drain_refuses_and_writes_nothing(cluster, prometheus, tmp_path):
    mark = cluster.audit_mark()
    env = dict(os.environ, HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "gputui", "drain", "gpu-node-1", "--read-only",
                          "--kubeconfig", str(cluster.readonly_kubeconfig)], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and "read-only" in out.stderr
    assert cluster.write_requests("readonly", since=mark) == []

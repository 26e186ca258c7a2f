"""A drain under real faults, on the real apiserver and Prometheus: each test failed on the code before
the drain learnt to fail closed (unknown read as zero, a closed reader read as "every pod gone", an
apiserver blip ending the drain, two gputuis draining one node, a resume that forgot its selector)."""

from __future__ import annotations

import math
import os
import signal
import sys
import threading

from kubernetes import client

from gputui.backends.prom import PromConfig, PromSource
from gputui.backends.session_metrics import engines
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain import lease
from gputui.ops.drain.events import DrainControl, EventKind
from gputui.ops.drain.plan import DrainOptions, Step, plan_drain
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.run import run_drain
from gputui.ops.drain.start import DrainStart
from gputui.ops.steps import run_steps
from gputui.vocabulary.model import DRAIN_PHASE_ANNOTATION
from gputui.vocabulary.sessions import UNREADABLE, SessionState
from tests.support.audit_lines import written
from tests.support.gputui_cli import read_until, start_drain
from tests.support.procs import wait_until
from tests.support.workloads import backend_for, pool, running, workload


class Driver:
    """Runs a drain in a thread and keeps its events."""

    def __init__(self, gen) -> None:
        self.events: list = []
        self.report = None
        self._gen = gen
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.report = run_steps(self._gen, self.events.append)

    def kinds(self, kind: EventKind) -> list:
        return [e for e in self.events if e.kind is kind]

    def wait(self, predicate, timeout: float, what: str):
        return wait_until(lambda: predicate(self), timeout, what=what)

    def join(self, timeout: float = 120):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), [e for e in self.events if e.kind is not EventKind.WAITING][-8:]
        return self.report


def setup(cluster, fake_kubelet, prometheus, inference_exporter, ns: str, pool_name: str, replicas: int = 1,
          running_sessions: float = 5):
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    a, b = pool(fake_kubelet, core, pool_name)
    apps.create_namespaced_deployment(ns, workload("Deployment", "chat", ns, pool_name, replicas))
    pods = running(core, ns, replicas, a)
    names = sorted(p.metadata.name for p in pods)
    for name in names:
        inference_exporter.add_pod(ns, name, running=running_sessions)
    prometheus.wait_until('vllm:num_requests_running{namespace="%s"}' % ns, lambda v: len(v) == replicas, timeout=30)
    core.patch_node(b, {"spec": {"unschedulable": None}})
    return core, a, b, names


def sessions_visible(backend, ns: str, node: str, count: int = 5):
    """The first full snapshot in which the namespace's pod on the node shows `count` live sessions."""
    return wait_until(lambda: (s := backend.reader.snapshot()) and any(
        p.namespace == ns and s.sessions(p).live == count for p in s.pods_on(node)) and s, 20, what="sessions visible")


def teardown(core, fake_kubelet, inference_exporter, ns: str, nodes, names) -> None:
    for name in names:
        inference_exporter.remove_pod(ns, name)
    core.delete_namespace(ns)
    for node in nodes:
        fake_kubelet.remove_node(node)


def evictions(cluster, mark) -> list:
    return [e for e in cluster.audit_events("admin", since=mark, resource="pods", verbs={"create"})
            if e["objectRef"].get("subresource") == "eviction"]


def test_every_engines_session_series_read_from_prometheus_and_a_misnamed_one_is_unknown(prometheus, inference_exporter):
    ns = "t-engines"
    counts = {"vllm": (3, 1), "sglang": (2, 2), "tgi": (4, 0), "trtllm": (1, 5), "triton": (6, 2), "unlisted": (9, 9)}
    for server, (run, wait) in counts.items():
        inference_exporter.add_pod(ns, f"{server}-0", server=server, running=run, waiting=wait)
    inference_exporter.add_pod(ns, "nan-0", running=math.nan, waiting=1)
    try:
        prometheus.wait_until('up{namespace="%s"}' % ns, lambda v: len(v) == len(counts) + 1 and all(x == 1 for x in v.values()),
                              timeout=30)
        prometheus.wait_until('myengine_inflight_requests{namespace="%s"}' % ns, timeout=15)
        source = PromSource(PromConfig(prometheus.url))
        found = source.sessions()
        for server, (run, wait) in counts.items():
            if server == "unlisted":
                assert (ns, "unlisted-0") not in found  # names gputui does not know: no series, so unknown
            else:
                assert found[(ns, f"{server}-0")] == run + wait, server
        assert found[(ns, "nan-0")] == UNREADABLE  # NaN is never read as 0
        assert source.sessions_for([(ns, "triton-0"), (ns, "sglang-0")]) == {(ns, "triton-0"): 8, (ns, "sglang-0"): 4}
        # The config's mapping makes the unlisted engine readable.
        configured = PromSource(PromConfig(prometheus.url, engines=engines(
            {"myengine": {"running": ["myengine_inflight_requests"], "waiting": ["myengine_queued_requests"]}})))
        assert configured.sessions()[(ns, "unlisted-0")] == 18
    finally:
        for server in counts:
            inference_exporter.remove_pod(ns, f"{server}-0")
        inference_exporter.remove_pod(ns, "nan-0")


def test_a_vanished_session_series_is_waited_on_never_evicted_as_idle(cluster, fake_kubelet, prometheus, inference_exporter, tmp_path):
    """The pod's scrape fails mid-drain while Prometheus is up: its count is unknown, so the drain waits
    (the old code read it as 0 sessions and evicted at once); once a count of 0 is read, it evicts."""
    ns = "t-drain-vanish"
    core, a, b, names = setup(cluster, fake_kubelet, prometheus, inference_exporter, ns, "dvan")
    backend = backend_for(cluster, prometheus)
    try:
        snap = sessions_visible(backend, ns, a)
        plan = plan_drain(snap, a, DrainOptions(session_deadline_s=600))
        assert [p.step for p in plan.pods if p.pod.namespace == ns] == [Step.WAIT_SESSIONS]
        mark = cluster.audit_mark()
        run = Driver(run_drain(plan,
                               OpContext(backend.reader, backend.writer, AuditLog(tmp_path / "a.jsonl", "t", "x"),
                                         poll_s=0.3)))
        run.wait(lambda r: any(e.sessions == 5 for e in r.kinds(EventKind.WAITING)), 15, "waiting on 5 sessions")
        inference_exporter.break_scrape(ns, names[0])
        prometheus.wait_until('absent(vllm:num_requests_running{namespace="%s"})' % ns, timeout=20)
        run.wait(lambda r: any("unknown" in e.message for e in r.kinds(EventKind.WAITING)), 15, "waiting, unknown")
        polls = len(run.kinds(EventKind.TICK))  # five more polls with the count unknown, none evicting
        run.wait(lambda r: len(r.kinds(EventKind.TICK)) >= polls + 5, 15, "five more polls")
        assert not evictions(cluster, mark), "evicted a pod whose sessions could not be read"
        # The full snapshot agrees: unknown, not idle, not "no signal".
        snap = backend.reader.snapshot()
        read = next(snap.sessions(p) for p in snap.pods_on(a) if p.namespace == ns)
        assert read.state is SessionState.UNKNOWN and read.live is None
        inference_exporter.set(ns, names[0], running=0)
        inference_exporter.break_scrape(ns, names[0], broken=False)
        report = run.join()
        assert report.outcome is Outcome.DRAINED and report.evicted == 1 and report.cut_sessions == 0
        assert len(evictions(cluster, mark)) == 1
    finally:
        backend.close()
        teardown(core, fake_kubelet, inference_exporter, ns, (a, b), names)


def test_unknown_at_the_deadline_is_left_in_place_unless_chosen(cluster, fake_kubelet, prometheus, inference_exporter, tmp_path):
    ns = "t-drain-held"
    core, a, b, names = setup(cluster, fake_kubelet, prometheus, inference_exporter, ns, "dheld")
    backend = backend_for(cluster, prometheus)
    try:
        inference_exporter.break_scrape(ns, names[0])
        prometheus.wait_until('absent(vllm:num_requests_running{namespace="%s"})' % ns, timeout=20)
        snap = wait_until(lambda: (s := backend.reader.snapshot()) and any(
            p.namespace == ns and s.sessions(p).state is SessionState.UNKNOWN for p in s.pods_on(a)) and s, 20,
            what="the pod's sessions unknown in the snapshot")
        plan = plan_drain(snap, a, DrainOptions(session_deadline_s=4))
        mine = [p for p in plan.pods if p.pod.namespace == ns]
        assert [p.step for p in mine] == [Step.WAIT_SESSIONS] and "sessions unknown" in mine[0].note
        mark = cluster.audit_mark()
        report = Driver(run_drain(plan,
                                  OpContext(backend.reader, backend.writer, AuditLog(tmp_path / "a.jsonl", "t", "x"),
                                            poll_s=0.3))).join(60)
        assert report.outcome is Outcome.UNFINISHED and report.evicted == 0 and len(report.held) == 1
        assert not evictions(cluster, mark)
        node = core.read_node(a)
        assert node.metadata.annotations[DRAIN_PHASE_ANNOTATION] == "stopped"
        assert lease.LEASE not in node.metadata.annotations  # released however it ended
        # Chosen before the start: evicted at the deadline, and the report says "possibly cut", never "0 cut".
        snap = backend.reader.snapshot()
        plan = plan_drain(snap, a, DrainOptions(session_deadline_s=3, evict_unknown_at_deadline=True))
        report = Driver(run_drain(plan,
                                  OpContext(backend.reader, backend.writer, AuditLog(tmp_path / "a.jsonl", "t", "x"),
                                            poll_s=0.3))).join(60)
        assert report.outcome is Outcome.DRAINED and report.unknown_cut_pods == 1 and report.cut_sessions == 0
        assert "possibly cut" in report.describe()
    finally:
        backend.close()
        teardown(core, fake_kubelet, inference_exporter, ns, (a, b), names)


def test_a_closed_reader_pauses_the_drain_and_marks_nothing_done(cluster, fake_kubelet, prometheus, inference_exporter, tmp_path):
    """A context switch closes the reader the drain uses: the old code then saw no pods, called them gone
    and annotated the node done."""
    ns = "t-drain-closed"
    core, a, b, names = setup(cluster, fake_kubelet, prometheus, inference_exporter, ns, "dclo")
    backend = backend_for(cluster, prometheus)
    other = backend_for(cluster, prometheus)
    try:
        snap = sessions_visible(backend, ns, a)
        control = DrainControl()
        run = Driver(run_drain(plan_drain(snap, a, DrainOptions(session_deadline_s=600)),
                               OpContext(backend.reader, backend.writer, AuditLog(tmp_path / "a.jsonl", "t", "x"),
                                         poll_s=0.3),
                               control))
        run.wait(lambda r: r.kinds(EventKind.WAITING), 15, "waiting")
        backend.reader.close()
        run.wait(lambda r: len(r.kinds(EventKind.PAUSED)) >= 2, 15, "paused, and still paused on the retry")
        assert "closed" in run.kinds(EventKind.PAUSED)[0].message
        assert not run.kinds(EventKind.GONE) and not run.kinds(EventKind.DONE)
        assert core.read_node(a).metadata.annotations[DRAIN_PHASE_ANNOTATION] == "waiting"
        assert core.read_namespaced_pod(names[0], ns).metadata.deletion_timestamp is None
        control.abort()
        assert run.join(60).outcome is Outcome.ABORTED
    finally:
        other.close()
        teardown(core, fake_kubelet, inference_exporter, ns, (a, b), names)


def test_an_apiserver_restart_pauses_the_drain_which_then_finishes(cluster, fake_kubelet, prometheus, inference_exporter, tmp_path):
    """The old code ended the drain with an exception (exit 2) at the first refused connection."""
    ns = "t-drain-blip"
    core, a, b, names = setup(cluster, fake_kubelet, prometheus, inference_exporter, ns, "dblip")
    backend = backend_for(cluster, prometheus)
    try:
        snap = sessions_visible(backend, ns, a)
        run = Driver(run_drain(plan_drain(snap, a, DrainOptions(session_deadline_s=600)),
                               OpContext(backend.reader, backend.writer, AuditLog(tmp_path / "a.jsonl", "t", "x"),
                                         poll_s=0.3)))
        run.wait(lambda r: r.kinds(EventKind.WAITING), 15, "waiting")
        cluster.stop_apiserver()
        inference_exporter.set(ns, names[0], running=0)  # sessions end while the API is away
        run.wait(lambda r: r.kinds(EventKind.PAUSED), 30, "paused while the apiserver is down")
        assert not run.kinds(EventKind.EVICTED) and not run.kinds(EventKind.DONE)
        cluster.start_apiserver()
        report = run.join(120)
        assert run.kinds(EventKind.RESUMED)
        assert report.outcome is Outcome.DRAINED and report.evicted == 1 and report.pauses >= 1
        assert core.read_node(a).metadata.annotations[DRAIN_PHASE_ANNOTATION] == "done"
    finally:
        if not cluster.apiserver_running():
            cluster.start_apiserver()
        backend.close()
        teardown(core, fake_kubelet, inference_exporter, ns, (a, b), names)


def test_a_second_drainer_sees_the_holder_and_cannot_start(cluster, fake_kubelet, prometheus, inference_exporter, tmp_path):
    ns = "t-drain-lease"
    core, a, b, names = setup(cluster, fake_kubelet, prometheus, inference_exporter, ns, "dlease")
    backend = backend_for(cluster, prometheus)
    try:
        snap = sessions_visible(backend, ns, a)
        # The first drainer: another live process on this host (our parent stands in for it).
        first = lease.Holder("alice", lease.socket.gethostname(), os.getppid(), "first-token")
        control = DrainControl()
        run = Driver(run_drain(plan_drain(snap, a, DrainOptions(session_deadline_s=600)),
                               OpContext(backend.reader, backend.writer, AuditLog(tmp_path / "a.jsonl", "t", "x"),
                                         poll_s=0.3),
                               control, DrainStart(holder=first)))
        run.wait(lambda r: r.kinds(EventKind.WAITING), 15, "first drain waiting")
        mark = cluster.audit_mark()
        # A second gputui (headless, a real process) is refused, naming the holder; it writes nothing.
        proc = start_drain(cluster, prometheus, a, "--session-deadline", "10m", home=tmp_path)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 1, out
        assert f"node {a} is being drained by alice" in out
        assert not [e for e in cluster.write_requests("admin", since=mark) if e["objectRef"].get("name") in (a, *names)
                    and e.get("verb") != "patch"]
        # Its refused lease patch is in its own audit log: the intent, then the refusal naming the holder.
        (refusal,) = written(tmp_path / ".state" / "gputui" / "audit.jsonl")
        assert (refusal["action"], refusal["target"]) == ("lease", f"node/{a}")
        assert refusal["result"].startswith(f"refused: node {a} is being drained by alice")
        control.abort()
        assert run.join(60).outcome is Outcome.ABORTED
        assert lease.LEASE not in core.read_node(a).metadata.annotations
    finally:
        backend.close()
        teardown(core, fake_kubelet, inference_exporter, ns, (a, b), names)


def test_kill_9_then_resume_keeps_the_selector(cluster, fake_kubelet, prometheus, inference_exporter, tmp_path):
    """The old resume dropped the node's pod selector and evicted every pod on it."""
    ns = "t-drain-sel"
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    a, b = pool(fake_kubelet, core, "dsel")
    for name in ("chat", "embed"):
        apps.create_namespaced_deployment(ns, workload("Deployment", name, ns, "dsel", 1))
    pods = running(core, ns, 2, a)
    names = sorted(p.metadata.name for p in pods)
    chat = next(n for n in names if n.startswith("chat"))
    embed = next(n for n in names if n.startswith("embed"))
    for name in names:
        inference_exporter.add_pod(ns, name, running=2)
    prometheus.wait_until('vllm:num_requests_running{namespace="%s"}' % ns, lambda v: len(v) == 2, timeout=30)
    core.patch_node(b, {"spec": {"unschedulable": None}})
    try:
        proc = start_drain(cluster, prometheus, a, "-l", "app=chat", "--session-deadline", "10m", home=tmp_path)
        read_until(proc, lambda line: " waiting " in line and chat in line)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        for name in names:
            inference_exporter.set(ns, name, running=0)
        prometheus.wait_until('max(vllm:num_requests_running{namespace="%s"}) == 0' % ns, timeout=30)
        proc = start_drain(cluster, prometheus, "--resume", home=tmp_path)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
        assert "drained, 1 pod evicted" in out
        assert core.read_namespaced_pod(embed, ns).spec.node_name == a  # the selector held on resume
        assert core.read_namespaced_pod(embed, ns).metadata.deletion_timestamp is None
    finally:
        for name in names:
            inference_exporter.remove_pod(ns, name)
        core.delete_namespace(ns)
        for node in (a, b):
            fake_kubelet.remove_node(node)


EXEC_PLUGIN = """import datetime, json, sys
token = open(sys.argv[1]).read().strip()
expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
"""


def test_expired_credentials_pause_the_drain_until_the_plugin_hands_out_a_good_token(
        cluster, fake_kubelet, prometheus, inference_exporter, tmp_path):
    """An exec credential plugin (as cloud kubeconfigs use) whose token stops working mid-drain: the
    eviction answers 401, the drain pauses saying so, and goes on once the plugin's token works again."""
    import yaml

    from gputui.backends.kube_backend import live_backend
    from gputui.settings import Settings

    ns = "t-drain-token"
    core, a, b, names = setup(cluster, fake_kubelet, prometheus, inference_exporter, ns, "dtok")
    token_file, plugin = tmp_path / "token", tmp_path / "plugin.py"
    token_file.write_text(cluster.token("admin"))
    plugin.write_text(EXEC_PLUGIN)
    config = yaml.safe_load(cluster.admin_kubeconfig.read_text())
    config["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
                                           "args": [str(plugin), str(token_file)], "interactiveMode": "Never"}}
    kubeconfig = tmp_path / "exec.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    backend = live_backend(Settings(kubeconfig=str(kubeconfig), prometheus=prometheus.url))
    try:
        snap = sessions_visible(backend, ns, a)
        run = Driver(run_drain(plan_drain(snap, a, DrainOptions(session_deadline_s=600)),
                               OpContext(backend.reader, backend.writer, AuditLog(tmp_path / "a.jsonl", "t", "x"),
                                         poll_s=0.3)))
        run.wait(lambda r: r.kinds(EventKind.WAITING), 15, "waiting")
        token_file.write_text("revoked-token")
        inference_exporter.set(ns, names[0], running=0)
        run.wait(lambda r: r.kinds(EventKind.PAUSED), 30, "paused on 401")
        assert "401" in run.kinds(EventKind.PAUSED)[0].message
        assert not run.kinds(EventKind.EVICTED) and not run.kinds(EventKind.FAILED)
        token_file.write_text(cluster.token("admin"))
        report = run.join(90)
        assert report.outcome is Outcome.DRAINED and report.evicted == 1 and report.pauses >= 1
    finally:
        backend.close()
        teardown(core, fake_kubelet, inference_exporter, ns, (a, b), names)

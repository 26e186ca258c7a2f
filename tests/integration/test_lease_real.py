"""One owner per drain (gputui/ops/drain/lease.py), on the real apiserver: two gputuis racing for one node's lease,
a lease whose holder stopped renewing, and a running drain whose lease was taken over (issue 34).

Each gputui that must be told apart in the apiserver's audit log reaches it through its own pass-through proxy
(tests/support/api_faults.py) naming it in the User-Agent: both act as the same identity, as two operators
sharing an admin kubeconfig would.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

from gputui.backends.kube_backend import live_backend
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.events import DrainControl, EventKind
from gputui.ops.drain.lease import LEASE, Holder
from gputui.ops.drain.plan import DrainOptions, Step, plan_drain
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.run import run_drain
from gputui.ops.drain.start import DrainStart
from gputui.ops.steps import Ended, step
from gputui.settings import Settings
from tests.support.api_faults import FaultProxy, kubeconfig
from tests.support.audit_lines import raw_lines, written
from tests.support.drain_safety import (
    POOL_LABEL,
    Driver,
    app_writes,
    batch_pods,
    brief,
    budget,
    node_annotations,
    place,
    scene,
)
from tests.support.gputui_cli import environment, read_until, run
from tests.support.procs import wait_until

HOST = socket.gethostname()
IDENTITY = "gputui-admin"  # the apiserver's name for the admin token (tests/support/control_plane.py)


def drain_process(kubeconfig_path: Path | str, home: Path, *args: str) -> subprocess.Popen:
    """`gputui drain ARGS…` as an operator starts it, its output read as it comes."""
    return subprocess.Popen([sys.executable, "-u", "-m", "gputui", "drain", "--kubeconfig", str(kubeconfig_path), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment(home))


def own_log(home: Path) -> Path:
    return home / ".state" / "gputui" / "audit.jsonl"


class LeaseRace:
    """The rule of each racer's proxy. Its first PATCH of the node (a drain's first write: the lease) waits for
    the other racer's, so both gputuis have read the node before either writes: the race at its tightest, every
    run, rather than when two process start-ups happen to line up. Every request after that PATCH waits for the
    test's go, so the node can be read between the lease and whatever the racer does next."""

    def __init__(self, node: str) -> None:
        self.path = f"/api/v1/nodes/{node}"
        self.barrier = threading.Barrier(2)
        self.go = (threading.Event(), threading.Event())
        self.patched = [False, False]

    def rule(self, racer: int):
        def answer(method: str, path: str) -> None:
            if self.patched[racer]:
                self.go[racer].wait(120)
            elif method == "PATCH" and path == self.path:
                self.patched[racer] = True
                with suppress(threading.BrokenBarrierError):  # the other never came: the test says so from what each one did
                    self.barrier.wait(60)
            return None  # always passed on to the apiserver: the proxy only sets the pace
        return answer

    def release(self) -> None:
        self.barrier.abort()
        for go in self.go:
            go.set()


def lease_patch_status(proxy: FaultProxy, path: str) -> int | None:
    """The apiserver's answer to the racer's first PATCH of the node, once it came."""
    return next((status for method, p, status in list(proxy.passed) if method == "PATCH" and p == path), None)


def test_two_gputuis_racing_for_one_nodes_lease_one_wins_and_the_loser_writes_nothing(cluster, fake_kubelet,
                                                                                      tmp_path):
    """Both read the node, then both send their lease at once: the apiserver takes one and answers the other 409
    (the resourceVersion precondition); the loser reads again, sees the winner, and stops without another write.

    Fails on this one-line mutation of gputui/ops/drain/lease.py's _cas: `writer.annotate_node(node, values,
    resource_version=version)` → `writer.annotate_node(node, values)` (both lease patches are then taken, and
    both gputuis drain the node)."""
    node = "lease-race"
    race = LeaseRace(node)
    agents = ("gputui racer-0", "gputui racer-1")
    procs: list[subprocess.Popen] = []
    with scene(cluster, fake_kubelet, "t-lease-race", {node: {"gpus": 4}}) as (core, _apps, _policy):
        # Nothing else moves the node's resourceVersion while they race (the kubelet's status heartbeats would).
        fake_kubelet.pause_heartbeats(node)
        proxies = [FaultProxy(cluster.api_url, cluster.ca_file, race.rule(i), user_agent=agents[i]) for i in (0, 1)]
        try:
            for proxy in proxies:
                proxy.__enter__()
            configs = [kubeconfig(tmp_path / f"racer-{i}.yaml", p.url, cluster.token("admin")) for i, p in enumerate(proxies)]
            homes = [tmp_path / f"home-{i}" for i in (0, 1)]
            before = json.loads(node_annotations(core, node))
            mark = cluster.audit_mark()
            procs = [drain_process(configs[i], homes[i], node) for i in (0, 1)]  # at once
            statuses = wait_until(lambda: (s := [lease_patch_status(p, race.path) for p in proxies]) and None not in s
                                  and s, 90, what="both lease patches answered by the apiserver")
            assert sorted(statuses) == [200, 409], f"exactly one lease patch may be taken, got {statuses}"
            winner, loser = (0, 1) if statuses[0] == 200 else (1, 0)
            held = node_annotations(core, node)  # the winner's lease, and nothing else new
            lease = json.loads(json.loads(held)[LEASE])
            assert (lease["who"], lease["host"], lease["pid"]) == (IDENTITY, HOST, procs[winner].pid), lease
            assert {k: v for k, v in json.loads(held).items() if k != LEASE} == before

            race.go[loser].set()  # the loser reads again after its 409
            out, _ = procs[loser].communicate(timeout=90)
            assert procs[loser].returncode == 1, out
            assert f"node {node} is being drained by {IDENTITY} (host {HOST}, pid {procs[winner].pid})" in out, out
            assert node_annotations(core, node) == held  # byte for byte: not one option or lease annotation of its own
            # Its one write request is the lease patch the precondition refused: nothing of it was written.
            assert [brief(e) for e in app_writes(cluster, mark, user_agent=agents[loser])] == [
                ("patch", "nodes", "", node, 409)]
            (refusal,) = written(own_log(homes[loser]))
            assert (refusal["action"], refusal["target"]) == ("lease", f"node/{node}")
            assert refusal["result"].startswith(f"refused: node {node} is being drained by {IDENTITY}")

            race.go[winner].set()
            out, _ = procs[winner].communicate(timeout=90)
            assert procs[winner].returncode == 0, out
            assert f"{node}: drained" in out, out
            # The log tells the two apart: the winner's writes are there under its own name (lease, cordon, ...).
            won = [brief(e) for e in app_writes(cluster, mark, user_agent=agents[winner])]
            assert won[0] == ("patch", "nodes", "", node, 200) and len(won) > 2, won
            assert LEASE not in json.loads(node_annotations(core, node))  # released at the end
        finally:
            race.release()
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
            for proxy in proxies:
                proxy.close()
            fake_kubelet.pause_heartbeats(node, False)


def test_an_expired_lease_is_refused_without_take_over_and_taken_with_it(cluster, fake_kubelet, tmp_path):
    """A gputui on another host stopped renewing five minutes ago. Without --take-over: refused by name, the node
    untouched (annotations byte for byte, no write in the apiserver's audit log). With it: taken, and drained.

    Fails on this one-line mutation of gputui/ops/drain/lease.py's acquire: `if expired and not take_over and not
    current.dead_here():` → `if False:` (an expired lease taken without being asked)."""
    node = "lease-expired"
    with scene(cluster, fake_kubelet, "t-lease-expired", {node: {"gpus": 4}}) as (core, _apps, _policy):
        stale = {"who": "bob", "host": "bastion-2", "pid": 4242, "token": "bobs-token", "renewed": time.time() - 300}
        core.patch_node(node, {"metadata": {"annotations": {LEASE: json.dumps(stale)}}})
        before = node_annotations(core, node)
        on_node = lambda e: (e.get("objectRef") or {}).get("name") == node  # noqa: E731
        mark = cluster.audit_mark()
        out = run("drain", node, "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path)
        said = out.stdout + out.stderr
        assert out.returncode == 1, said
        assert re.search(rf"node {node}: a drain by bob \(host bastion-2, pid 4242\), renewed 3\d\ds ago stopped "
                         r"renewing its lease; take it over explicitly \(--take-over", said), said
        assert node_annotations(core, node) == before
        assert app_writes(cluster, mark, keep=on_node) == []
        assert not core.read_node(node).spec.unschedulable

        mark = cluster.audit_mark()
        out = run("drain", node, "--take-over", "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path)
        said = out.stdout + out.stderr
        assert out.returncode == 0, said
        assert f"{node}: drained" in said, said
        writes = [brief(e) for e in app_writes(cluster, mark, keep=on_node)]
        assert writes[0] == ("patch", "nodes", "", node, 200), writes  # the lease, first, taken
        leases = [e for e in written(own_log(tmp_path)) if e["action"] == "lease"]
        assert [e["params"]["take_over"] for e in leases] == [False, True]
        assert leases[0]["result"].startswith(f"refused: node {node}: a drain by bob") and leases[1]["result"] == "ok"
        assert LEASE not in json.loads(node_annotations(core, node))  # released when the drain ended


def test_a_drain_whose_lease_was_taken_over_stops_at_its_renewal_saying_by_whom(cluster, fake_kubelet, tmp_path):
    """A drain held by a PodDisruptionBudget renews its lease every 15 s. Its clock runs two minutes behind, so
    to another gputui its lease always looks expired: standing in for a holder that stalled past 60 s (a laptop
    asleep). A second gputui takes the node over with --take-over; at its next renewal the first drain stops,
    naming the new holder, and writes nothing more: the lease stays the second's, the pod stays.

    Fails on this one-line mutation of gputui/ops/drain/lease.py's acquire: `if not expired and not
    current.dead_here():` → `if False:` (the renewal takes the lease back and the drain goes on); and on this one
    of gputui/ops/drain/run.py: `if clock() - renewed >= lease.RENEW_S:` → `if False:` (never renewed, never
    noticed)."""
    ns, node = "t-lease-renew", "lease-renew"
    taker: subprocess.Popen | None = None
    with scene(cluster, fake_kubelet, ns, {n: {"gpus": 4, "labels": {POOL_LABEL: node}} for n in (node, f"{node}-spare")}) as (core, apps, policy):
        (pod,) = place(core, apps, ns, batch_pods("job", ns, node, 1), node, 1, spare=f"{node}-spare")
        policy.create_namespaced_pod_disruption_budget(ns, budget("job-pdb", "job", 1))  # every eviction: 429
        backend = live_backend(Settings(kubeconfig=str(cluster.admin_kubeconfig)))
        try:
            snap = wait_until(lambda: (s := backend.reader.snapshot()) and any(
                p.name == pod.metadata.name for p in s.pods_on(node)) and s.budgets and s, 30, what="pod and PDB read")
            plan = plan_drain(snap, node, DrainOptions())
            assert [(p.pod.name, p.step) for p in plan.to_evict] == [(pod.metadata.name, Step.EVICT)]
            first_log = tmp_path / "first.jsonl"
            first = Driver(run_drain(plan,
                                     OpContext(backend.reader, backend.writer, AuditLog(first_log, IDENTITY, "test"),
                                               clock=lambda: time.time() - 120, poll_s=0.5)))
            first.wait(lambda d: d.kinds(EventKind.BLOCKED), 30, "the PDB's first 429")

            taker = drain_process(cluster.admin_kubeconfig, tmp_path / "taker", node, "--take-over")
            read_until(taker, lambda line: " blocked " in line, timeout=60)  # it holds the lease now
            assert json.loads(core.read_node(node).metadata.annotations[LEASE])["pid"] == taker.pid
            stopped = first.wait(lambda d: [e for e in d.kinds(EventKind.FAILED) if "is being drained by" in e.message],
                                 45, "the first drain to stop at its renewal")
            report = first.join(30)
            expected = f"node {node} is being drained by {IDENTITY} (host {HOST}, pid {taker.pid})"
            assert stopped[0].message.startswith(expected), stopped[0].message
            assert report.outcome is Outcome.FAILED and report.reason == stopped[0].message
            # It wrote nothing more: the lease stays the taker's (not released, not taken back), the pod stays.
            assert json.loads(core.read_node(node).metadata.annotations[LEASE])["pid"] == taker.pid
            live = core.read_namespaced_pod(pod.metadata.name, ns)
            assert live.metadata.uid == pod.metadata.uid and live.metadata.deletion_timestamp is None
            lines = raw_lines(first_log)
            assert "lease-release" not in [e["action"] for e in lines]
            (result,) = [e for e in lines if e["action"] == "evict" and e["phase"] == "result"]
            assert f"not evicted: the drain stopped: {expected}" in result["result"], result
        finally:
            backend.close()
            if taker is not None:
                taker.send_signal(signal.SIGINT)
                try:
                    taker.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    taker.kill()
                    taker.wait(10)


def pull(gen, until, seconds: float, events: list) -> object:
    """Drive a drain's generator from this thread (it is stalled whenever this is not called) until `until(event)`
    or the drain returns (its report), for at most `seconds`; its polls paced at 0.3 s. None: neither came."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        event = step(gen)
        if isinstance(event, Ended):
            return event.report
        events.append(event)
        if until(event):
            return event
        if event.kind is EventKind.TICK:
            time.sleep(0.3)
    return None


def test_a_drain_whose_lease_was_taken_over_and_dropped_stops_at_its_renewal(cluster, fake_kubelet, tmp_path):
    """The first drain stalls (its generator is not driven: a laptop asleep), its clock two minutes behind so its
    lease looks expired. Another operator (carol, on another host) takes the node over, aborts and uncordons it:
    her lease is dropped, the node given back. When the first drain wakes and renews, it must stop: its lease
    was taken over. It must not take the node again, nor evict its pod (the budget now allows it)."""
    ns, node = "t-lease-dropped", "lease-dropped"
    with scene(cluster, fake_kubelet, ns, {n: {"gpus": 4, "labels": {POOL_LABEL: node}} for n in (node, f"{node}-spare")}) as (core, apps, policy):
        (pod,) = place(core, apps, ns, batch_pods("job", ns, node, 1), node, 1, spare=f"{node}-spare")
        policy.create_namespaced_pod_disruption_budget(ns, budget("job-pdb", "job", 1))  # every eviction: 429
        backend = live_backend(Settings(kubeconfig=str(cluster.admin_kubeconfig)))
        try:
            snap = wait_until(lambda: (s := backend.reader.snapshot()) and any(
                p.name == pod.metadata.name for p in s.pods_on(node)) and s.budgets and s, 30, what="pod and PDB read")
            started = time.monotonic()
            first, seen = run_drain(plan_drain(snap, node, DrainOptions()),
                                    OpContext(backend.reader, backend.writer,
                                              AuditLog(tmp_path / "first.jsonl", IDENTITY, "test"),
                                              clock=lambda: time.time() - 120, sleep=lambda _s: None, poll_s=0.3)), []
            assert pull(first, lambda e: e.kind is EventKind.BLOCKED, 30, seen), seen  # then it stalls

            carol, control = Holder("carol", "bastion-3", 4343, "carols-token"), DrainControl()
            second = Driver(run_drain(plan_drain(backend.reader.snapshot(), node, DrainOptions()),
                                      OpContext(backend.reader, backend.writer,
                                                AuditLog(tmp_path / "carol.jsonl", "carol", "test"), poll_s=0.3),
                                      control, DrainStart(take_over=True, holder=carol)))
            second.wait(lambda d: d.kinds(EventKind.BLOCKED), 30, "carol's drain refused by the PDB too")
            control.abort(uncordon=True)
            assert second.join(30).outcome is Outcome.ABORTED
            given_back = core.read_node(node)
            assert not given_back.spec.unschedulable and LEASE not in given_back.metadata.annotations
            policy.patch_namespaced_pod_disruption_budget("job-pdb", ns, {"spec": {"minAvailable": 0}})

            wait_until(lambda: time.monotonic() - started > 16, 30, interval=1, what="the first drain's renewal due")
            mark = cluster.audit_mark()
            ended = pull(first, lambda e: e.kind in (EventKind.FAILED, EventKind.EVICTED), 20, seen)
            said = [f"{e.kind.value} {e.message}" for e in seen if e.kind is not EventKind.TICK][-5:]
            assert getattr(ended, "kind", None) is EventKind.FAILED, said
            assert "lease" in ended.message or "being drained" in ended.message, said
            after = core.read_node(node)
            assert LEASE not in after.metadata.annotations and not after.spec.unschedulable
            assert not [e for e in app_writes(cluster, mark) if e["objectRef"].get("name") in (node, pod.metadata.name)]
            assert core.read_namespaced_pod(pod.metadata.name, ns).metadata.deletion_timestamp is None
        finally:
            backend.close()
